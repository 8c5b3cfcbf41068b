"""Backends that produce traces: the CuPy recorder (real GPU) and the simulator."""

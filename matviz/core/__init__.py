"""Trace model, kernel catalog, access models and metrics. Imports no Qt and no CuPy."""

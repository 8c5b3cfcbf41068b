"""Side effects live here: running nvcc and reading the SASS it builds."""

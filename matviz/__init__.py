"""matviz: watch a tiled matrix multiplication run on a real GPU."""

__version__ = "0.1.0"

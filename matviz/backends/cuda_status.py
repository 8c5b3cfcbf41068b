"""Is a CUDA GPU usable through CuPy here, and if not, why not (one line for the user)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def cuda_status() -> tuple[bool, str]:
    """(available, reason or device name)."""
    try:
        import cupy
    except ImportError:
        return False, "CuPy is not installed (pip install 'matviz[cuda12]' or 'matviz[cuda13]')"
    except Exception as exc:  # a broken CuPy install raises all sorts of things
        return False, f"CuPy failed to import: {_one_line(exc)}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"no usable CUDA driver or device: {_one_line(exc)}"
    if count < 1:
        return False, "no CUDA device found"
    try:
        props = cupy.cuda.runtime.getDeviceProperties(0)
    except Exception as exc:
        return False, f"cannot query CUDA device 0: {_one_line(exc)}"
    return True, props["name"].decode()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

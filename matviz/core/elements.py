"""The element types A and B may have in memory (a description's ``inputs``), for any array
module (numpy or CuPy): rounding float32 values to them and reading them back exactly.

bfloat16 is held as its uint16 bit pattern: neither numpy nor CuPy 14 has the type, and the
kernels only need the bits.
"""

from __future__ import annotations

from typing import Any


def rounded(xp: Any, x: Any, dtype: str) -> Any:
    """float32 ``x`` as the kernel reads it: float32, float16, or bfloat16 bits (round to
    nearest, ties to even, as cuda_bf16.h's __float2bfloat16_rn)."""
    if dtype == "float32":
        return x
    if dtype == "float16":
        return x.astype(xp.float16)
    if dtype == "bfloat16":
        bits = xp.ascontiguousarray(x, dtype=xp.float32).view(xp.uint32)
        bias = ((bits >> 16) & 1) + 0x7FFF
        return ((bits + bias) >> 16).astype(xp.uint16)
    raise ValueError(f"unknown element type {dtype}")


def as_float64(xp: Any, stored: Any, dtype: str) -> Any:
    """The exact values of ``stored`` (an array of ``dtype`` as :func:`rounded` makes it)."""
    if dtype == "bfloat16":
        return (stored.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
    return stored.astype(xp.float64)

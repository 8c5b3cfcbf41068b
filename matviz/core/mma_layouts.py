"""Where the PTX ISA's warp-wide matrix instructions put their operands (lesson 8 §20-23).

These are facts of the instructions, not of a kernel, so every Tensor Core kernel's
description reads them from here. The level-3 fragment probe measures them on the GPU.
"""

from __future__ import annotations

from typing import Any


def ldmatrix_x4_row(lane: Any) -> tuple[Any, Any]:
    """The row of a 16x16 tile each lane addresses in ``ldmatrix .x4`` and its first column:
    lanes 8i..8i+7 give the 8 rows of 8x8 matrix i, matrices in the fragment's register order
    (rows 0-7, rows 8-15) x (columns 0-7, 8-15)."""
    return (lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8


# m16n8k16 ("Matrix Fragments for mma.m16n8k16"): lane = 4 * group + thread, two consecutive
# elements a register. A 16x16 operand of two n8 fragments side by side numbers the second
# one's slots after the first's.
def m16n8k16_a(lane: Any, slot: Any) -> tuple[Any, Any]:
    """A (16 x 16, 8 slots) and the fp32 accumulator (16 x 8, 4 slots; 16 x 16, 8 slots)."""
    g, t, s = lane >> 2, lane & 3, slot % 8
    return g + 8 * ((s >> 1) & 1), 2 * t + (s & 1) + 8 * (s >> 2)


def m16n8k16_b(lane: Any, slot: Any) -> tuple[Any, Any]:
    """B (16 x 8, k x n, 4 slots; two side by side, 16 x 16, 8 slots)."""
    g, t, s = lane >> 2, lane & 3, slot % 8
    return 2 * t + (s & 1) + 8 * ((s >> 1) & 1), g + 8 * (s >> 2)


def wgmma_accumulator(lane: Any, slot: Any) -> tuple[Any, Any]:
    """wgmma's fp32 accumulator (m64nNk16, "Register Fragments" of wgmma), per warp: warp w of
    the warpgroup holds rows 16w .. 16w + 15, and within them each n8 column group j holds
    m16n8k16's accumulator layout in slots 4j .. 4j + 3 (16 x N, N / 2 slots)."""
    g, t = lane >> 2, lane & 3
    return g + 8 * ((slot >> 1) & 1), 8 * (slot >> 2) + 2 * t + (slot & 1)

"""Who computes what in a block's tile of C: each thread's micro-tile and each warp's share.

Read from the description's stores of C (its global accesses to C), so every kernel gets the
same picture: one element per thread for the tiled kernels, a TM-long column (kernel 04) or a
TM x TN micro-tile (05, 06) per thread, and the warp tiles they add up to.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from matviz.core.access import evaluate
from matviz.core.config import KernelConfig
from matviz.core.kernel import WARP

ELEMENT_BYTES = 4


def owners(config: KernelConfig) -> np.ndarray:
    """(rows, cols) of the block's C tile: the thread of the block that stores each element
    (-1: none does), from block (0, 0) of an M, N at least one tile large."""
    return _owners(config.kernel, tuple(config.params.items())).copy()


@lru_cache(maxsize=16)
def _owners(kernel, params: tuple) -> np.ndarray:
    # a problem of exactly one tile: every store of block (0, 0) lies inside C
    rows, cols = kernel.configure(dict(params), 1, 1, 1, check=False).launch.c_tile
    config = kernel.configure(dict(params), rows, cols, 1, check=False)
    out = np.full((rows, cols), -1, np.int32)
    for access, repeat in config.global_accesses:
        if access.matrix != "C" or access.kind != "store":
            continue
        for warp in range(config.warps):
            tid = warp * WARP + np.arange(WARP)
            for k in range(repeat):
                row, col, mask = evaluate(config, access.at, warp, (0, 0), 0, k)
                for j in range(access.width // ELEMENT_BYTES):
                    inside = mask & (row < rows) & (col + j < cols)
                    out[row[inside], col[inside] + j] = tid[inside]
    return out


def pieces(owner: np.ndarray, tid: int) -> list[tuple[int, int, int, int]]:
    """Thread ``tid``'s elements as boxes (row, col, rows, cols), one per connected piece: one
    micro-tile, or one per sub-tile a warp walks (warp tiling), in row-major order."""
    mine = owner == tid
    seen = np.zeros_like(mine)
    out = []
    for r0, c0 in zip(*np.nonzero(mine), strict=True):
        if seen[r0, c0]:
            continue
        stack, cells = [(r0, c0)], []
        seen[r0, c0] = True
        while stack:
            r, c = stack.pop()
            cells.append((r, c))
            for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                inside = 0 <= nr < mine.shape[0] and 0 <= nc < mine.shape[1]
                if inside and mine[nr, nc] and not seen[nr, nc]:
                    seen[nr, nc] = True
                    stack.append((nr, nc))
        rows, cols = zip(*cells, strict=True)
        out.append((min(rows), min(cols), max(rows) - min(rows) + 1, max(cols) - min(cols) + 1))
    return sorted((int(a), int(b), int(h), int(w)) for a, b, h, w in out)


def warp_tiles(owner: np.ndarray) -> dict[int, tuple[int, int, int, int]]:
    """Per warp, the box around its threads' elements (the warp tile)."""
    out = {}
    warps = np.where(owner >= 0, owner // WARP, -1)
    for w in np.unique(warps[warps >= 0]):
        r, c = np.nonzero(warps == w)
        out[int(w)] = (int(r.min()), int(c.min()), int(np.ptp(r) + 1), int(np.ptp(c) + 1))
    return out

"""Which global element every cell of a kernel's shared arrays holds, from its store sites.

A store site of the description says, per lane, which shared cell it writes (``Site.at``) and
which element of A or B it copies (``Site.source``); running every store over every warp of the
block and inverting lane -> cell gives the content of each array at one k-step. Nothing here
knows a kernel: a transposed store, a float4 store or a third array come out of the description.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matviz.core import access
from matviz.core.config import KernelConfig
from matviz.core.kernel import SharedArray

K_AXIS = {"A": 1, "B": 0}  # k runs along A's columns and B's rows


@dataclass(frozen=True)
class HeldCells:
    """The cells of one shared array at one k-step of one block."""

    array: SharedArray
    row: np.ndarray  # (rows, stride) global row of the element held; -1: no store writes it
    col: np.ndarray
    inside: np.ndarray  # False where the store writes 0 (the element lies outside the matrix)

    @property
    def written(self) -> np.ndarray:
        return self.row >= 0

    def text(self, r: int, c: int) -> str:
        """'A[3,17]', '0' (outside the matrix) or '' (padding, never written)."""
        if not self.written[r, c]:
            return ""
        if not self.inside[r, c]:
            return "0"
        return f"{self.array.source}[{self.row[r, c]},{self.col[r, c]}]"


def _matrix_shape(config: KernelConfig, matrix: str) -> tuple[int, int]:
    return {"A": (config.M, config.K), "B": (config.K, config.N)}[matrix]


def held_cells(config: KernelConfig, block: tuple[int, int], t: int) -> dict[str, HeldCells]:
    """Every shared array's cells after the stores of k-step ``t`` in ``block`` (bx, by)."""
    grids = {
        arr.name: [np.full((arr.rows, arr.stride), -1, np.int64) for _ in range(2)]
        + [np.zeros((arr.rows, arr.stride), bool)]
        for arr in config.shared
    }
    for rs in config.sites:
        site = rs.site
        if site.kind != "store" or site.source is None:
            continue
        arr = config.array(site.array)
        row_of, col_of, inside_of = grids[arr.name]
        n_rows, n_cols = _matrix_shape(config, arr.source)
        base = config.array_bases[arr.name]
        per_lane = max(site.width // arr.elem_bytes, 1)  # a vector store fills adjacent cells
        for warp in range(config.warps):
            for k in range(rs.repeat):
                offsets = access.lane_offsets(config, rs.name, warp, k, block, t)
                grow, gcol, _ = access.global_elements(config, rs.name, warp, block, t, k)
                live = offsets >= 0
                local = (offsets[live].astype(np.int64) - base) // arr.elem_bytes
                for j in range(per_lane):
                    r, c = np.divmod(local + j, arr.stride)
                    row_of[r, c] = grow[live]
                    col_of[r, c] = gcol[live] + j
                    inside_of[r, c] = (grow[live] < n_rows) & (gcol[live] + j < n_cols)
    return {
        name: HeldCells(config.array(name), row, col, inside)
        for name, (row, col, inside) in grids.items()
    }


def axis_map(cells: HeldCells, axis: int) -> tuple[int, int] | None:
    """How the global index follows the shared ``axis`` (0: rows, 1: columns): (g, base) when
    global coordinate g (0: row, 1: column) is base + the shared index and the other one stays
    put; None when the mapping is not that simple (or nothing is written)."""
    written = cells.written
    if not written.any():
        return None
    step = np.zeros(2, int)
    step[axis] = 1
    coords = (cells.row, cells.col)
    r, c = np.nonzero(written)
    nr, nc = r + step[0], c + step[1]
    keep = (nr < written.shape[0]) & (nc < written.shape[1])
    r, c, nr, nc = r[keep], c[keep], nr[keep], nc[keep]
    keep = written[nr, nc]
    r, c, nr, nc = r[keep], c[keep], nr[keep], nc[keep]
    if not len(r):
        return None
    deltas = [np.unique(g[nr, nc] - g[r, c]) for g in coords]
    for g in (0, 1):
        if deltas[g].tolist() == [1] and deltas[1 - g].tolist() == [0]:
            first = np.argwhere(written)[0]
            return g, int(coords[g][tuple(first)] - first[axis])
    return None

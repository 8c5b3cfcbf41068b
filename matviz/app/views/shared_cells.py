"""Which global element every cell of a kernel's shared arrays holds, from its store sites and
its TMA copies.

A store site of the description says, per lane, which shared cell it writes (``Site.at``) and
which element of A or B it copies (``Site.source``); running every store over every warp of the
block and inverting lane -> cell gives the content of each array at one k-step; a copy's box
says the same of every cell it writes (``BulkCopy.at``), through the array's swizzle. Nothing here
knows a kernel: a transposed store, a float4 store or a third array come out of the description.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from matviz.core import access
from matviz.core.config import KernelConfig
from matviz.core.kernel import WARP, SharedArray

K_AXIS = {"A": 1, "B": 0}  # k runs along A's columns and B's rows
_TENS = 10 ** np.arange(1, 19, dtype=np.int64)  # a number has 1 + (how many of these <= it) digits


@dataclass(frozen=True)
class HeldCells:
    """The cells of one shared array at one k-step of one block."""

    array: SharedArray
    row: np.ndarray  # (rows, stride) global row of the element held; -1: no store writes it
    col: np.ndarray
    inside: np.ndarray  # False where the store writes 0 (the element lies outside the matrix)
    warp: np.ndarray  # the warp whose store writes each cell; -1: none

    @property
    def written(self) -> np.ndarray:
        return self.row >= 0

    @cached_property
    def axis_maps(self) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """:func:`axis_map` of the rows and of the columns, worked out once (the tiles view
        asks at each k-step for its axis labels and its formula)."""
        return axis_map(self, 0), axis_map(self, 1)

    def text(self, r: int, c: int) -> str:
        """'A[3,17]', '0' (outside the matrix) or '' (padding, never written)."""
        return _label(self.array.source, self.row[r, c], self.col[r, c], self.inside[r, c])

    def over(self, other: HeldCells) -> HeldCells:
        """These cells where they are written, ``other``'s elsewhere (the same array)."""
        mine = self.written
        parts = (self.row, self.col, self.inside, self.warp)
        theirs = (other.row, other.col, other.inside, other.warp)
        return HeldCells(
            self.array, *(np.where(mine, a, b) for a, b in zip(parts, theirs, strict=True))
        )

    def longest_text(self) -> int:
        """The length of the longest of :meth:`texts`, without making them."""
        digits = [1 + np.searchsorted(_TENS, v, side="right") for v in (self.row, self.col)]
        inside = np.where(self.inside, len(self.array.source) + 3 + digits[0] + digits[1], 1)
        return int(np.where(self.written, inside, 0).max(initial=0))

    def texts(self) -> list[list[str]]:
        """Every cell's text, row by row (one pass over the arrays)."""
        row, col = self.row.tolist(), self.col.tolist()
        inside, name = self.inside.tolist(), self.array.source
        return [
            [_label(name, g, h, ok) for g, h, ok in zip(gr, hr, ir, strict=True)]
            for gr, hr, ir in zip(row, col, inside, strict=True)
        ]


def _label(source: str, row: int, col: int, inside: bool) -> str:
    """A cell's text: the element it holds, '0' outside the matrix, '' never written."""
    if row < 0:
        return ""
    return f"{source}[{row},{col}]" if inside else "0"


def held_cells(config: KernelConfig, block: tuple[int, int], t: int) -> dict[str, HeldCells]:
    """Every shared array's cells after the stores of k-step ``t`` in ``block`` (bx, by)."""
    grids = {
        arr.name: [np.full((arr.rows, arr.stride), -1, np.int64) for _ in range(2)]
        + [np.zeros((arr.rows, arr.stride), bool), np.full((arr.rows, arr.stride), -1, np.int64)]
        for arr in config.shared
    }
    for rs in config.sites:
        site = rs.site
        if site.kind != "store" or site.source is None:
            continue
        arr = config.array(site.array)
        row_of, col_of, inside_of, warp_of = grids[arr.name]
        n_rows, n_cols = config.matrix_shape(arr.source)
        base = config.array_bases[arr.name]
        per_lane = max(site.width // arr.elem_bytes, 1)  # a vector store fills adjacent cells
        # every warp's instances at once, in program order (warp, k, lane): a later store to
        # a cell wins, as the loop over warps had it
        offsets = access.block_site_offsets(config, rs.name, block, t)
        elements = access.block_site_elements(config, rs.name, block, t)
        warps = np.broadcast_to(np.arange(config.warps)[:, None, None], offsets.shape).ravel()
        offsets = offsets.ravel()
        live = offsets >= 0
        grow, gcol = (a.ravel()[live] for a in elements[:2])
        local = (offsets[live].astype(np.int64) - base) // arr.elem_bytes
        for j in range(per_lane):
            r, c = np.divmod(local + j, arr.stride)
            row_of[r, c] = grow
            col_of[r, c] = gcol + j
            inside_of[r, c] = (grow < n_rows) & (gcol + j < n_cols)
            warp_of[r, c] = warps[live]
    for rc in config.copies:  # boxes the copy engine writes, asked for by warp 0's thread 0
        arr = config.array(rc.copy.array)
        row_of, col_of, inside_of, warp_of = grids[arr.name]
        n_rows, n_cols = config.matrix_shape(arr.source)
        r, c = np.meshgrid(np.arange(rc.rows), np.arange(rc.cols), indexing="ij")
        grow, gcol = rc.copy.at(block[0], block[1], t, r, c, config.p)
        row = rc.copy.first_row(t, config.p) + r
        col = arr.stored_col(row, c)
        row_of[row, col] = grow
        col_of[row, col] = gcol
        inside_of[row, col] = (grow < n_rows) & (gcol < n_cols)
        warp_of[row, col] = 0
    return {
        name: HeldCells(config.array(name), row, col, inside, warp)
        for name, (row, col, inside, warp) in grids.items()
    }


def in_flight_cells(
    config: KernelConfig, block: tuple[int, int], t: int, held=held_cells
) -> dict[str, HeldCells]:
    """What the k-steps in flight beside ``t`` (t + 1 .. t + in_flight - 1: copies issued ahead
    into the other slots of a ring) hold in their slots; empty for one k-step at a time.
    ``held(config, block, u)``: :func:`held_cells`, or a cache of it."""
    ahead = range(t + 1, min(t + config.layout.in_flight, config.n_steps))
    if not ahead:
        return {}
    out: dict[str, HeldCells] = {}
    for u in ahead:
        for name, cells in held(config, block, u).items():
            out[name] = out[name].over(cells) if name in out else cells
    return out


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


def store_phases(config: KernelConfig) -> set[str]:
    """Names of the k-step phases in which some site stores to shared memory."""
    return {rs.site.phase for rs in config.sites if rs.site.kind == "store"}


def load_phases(config: KernelConfig) -> set[str]:
    """Names of the k-step phases in which some site loads from shared memory."""
    return {rs.site.phase for rs in config.sites if rs.site.kind == "load"}


@dataclass(frozen=True)
class ThreadReads:
    """The shared cells one thread loads in one k-step, in program order.

    ``order[name]`` (rows, stride): the position, among the thread's loads of the step, of the
    first load that reads the cell (-1: never read); ``steps``: one entry per load of the
    program, (array, row, col) or None where the lane does not access.
    """

    order: dict[str, np.ndarray]
    steps: tuple[tuple[str, str, int, int] | None, ...]  # (site, array, row, col)

    def read_cells(self, array: str) -> np.ndarray:
        return self.order[array] >= 0

    def now(self, fraction: float) -> dict[str, set[tuple[int, int]]]:
        """The cells the thread reads at ``fraction`` of its compute phase: for each load site,
        its latest instance at that point of the program."""
        out: dict[str, set[tuple[int, int]]] = {name: set() for name in self.order}
        if not self.steps:
            return out
        position = min(int(fraction * len(self.steps)), len(self.steps) - 1)
        latest: dict[str, tuple[str, int, int]] = {}
        for step in self.steps:  # every site lights up from the start: its first instance
            if step is not None and step[0] not in latest:
                latest[step[0]] = step[1:]
        for step in self.steps[: position + 1]:
            if step is not None:
                latest[step[0]] = step[1:]
        for array, r, c in latest.values():
            out[array].add((r, c))
        return out


def thread_reads(
    config: KernelConfig, tid: int, block: tuple[int, int], t: int, phase: str | None = None
) -> ThreadReads:
    """Which shared cells thread ``tid`` of ``block`` loads in k-step ``t`` (the load sites of
    ``config.program``, optionally only those of ``phase``), from :func:`access.lane_offsets`."""
    warp, lane = divmod(int(tid), WARP)
    order = {arr.name: np.full((arr.rows, arr.stride), -1, np.int64) for arr in config.shared}
    steps: list[tuple[str, str, int, int] | None] = []
    offsets = {  # every instance of each load site at once
        rs.name: access.site_offsets(config, rs.name, warp, block, t)[:, lane]
        for rs in config.sites
        if rs.site.kind == "load" and (phase is None or rs.site.phase == phase)
    }
    for site, k in config.program:
        if site not in offsets:
            continue
        rs = config.site(site)
        arr = config.array(rs.site.array)
        offset = int(offsets[site][k])
        if offset < 0:
            steps.append(None)
            continue
        local = (offset - config.array_bases[arr.name]) // arr.elem_bytes
        for j in range(max(rs.site.width // arr.elem_bytes, 1)):
            r, c = divmod(local + j, arr.stride)
            if order[arr.name][r, c] < 0:
                order[arr.name][r, c] = len(steps)
        steps.append((site, arr.name, *divmod(local, arr.stride)))
    return ThreadReads(order, tuple(steps))


def thread_of_element(
    config: KernelConfig,
    cells: dict[str, HeldCells],
    block: tuple[int, int],
    t: int,
    row: int,
    col: int,
) -> int | None:
    """The thread of ``block`` that computes C[row, col]: the one whose loads in k-step ``t``
    read A's row ``row`` and B's column ``col`` (through the cells the stores filled)."""
    loads = [rs for rs in config.sites if rs.site.kind == "load"]
    for warp in range(config.warps):
        reads_a = np.zeros(WARP, bool)
        reads_b = np.zeros(WARP, bool)
        for rs in loads:
            held = cells[rs.site.array]
            arr = held.array
            offsets = access.site_offsets(config, rs.name, warp, block, t).astype(np.int64)
            live = offsets >= 0
            local = np.where(live, offsets - config.array_bases[arr.name], 0) // arr.elem_bytes
            r, c = np.divmod(local, arr.stride)
            live &= held.written[r, c]
            if arr.source == "A":  # (instances, lanes): any instance of the site
                reads_a |= (live & (held.row[r, c] == row)).any(axis=0)
            elif arr.source == "B":
                reads_b |= (live & (held.col[r, c] == col)).any(axis=0)
        lanes = np.flatnonzero(reads_a & reads_b)
        if len(lanes):
            return warp * WARP + int(lanes[0])
    return None

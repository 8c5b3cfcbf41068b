"""Is C right, and where not: wrong elements per cell of C, and what the probed warp read.

Both backends describe a run's correctness the same way:

* ``c_wrong``: a map over C, each cell counting the elements that differ from float64 by more
  than :func:`tolerance` (at most ``MAP_EDGE`` cells a side, so one cell is one element up to
  1024 x 1024);
* ``stale``: for the probed warp, in each of its first k-steps, what every lane's shared load
  read, against what the kernel's own stores put in that cell (:data:`READS`);
* a manifest section, :class:`matviz.core.manifest.Correctness`, with the counts.

A kernel with a deliberately broken parameter (a missing barrier) is expected to be wrong; any
other wrong element means the recording is not saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from matviz.core import access
from matviz.core.config import KernelConfig
from matviz.core.kernel import Lanes, cdiv

MAP_EDGE = 1024
# What a lane's shared load read (values of the ``stale`` array)
UNCHECKED, CURRENT, BEFORE_WRITTEN, OVERWRITTEN, OTHER = range(5)
READS = {
    UNCHECKED: "not checked",
    CURRENT: "this k-step's value",
    BEFORE_WRITTEN: "read before it was written (the previous value)",
    OVERWRITTEN: "read after it was overwritten (the next k-step's value)",
    OTHER: "another value",
}
READ_KEYS = {CURRENT: "current", BEFORE_WRITTEN: "before_written", OVERWRITTEN: "overwritten",
             OTHER: "other"}  # fmt: skip


def tolerance(K: int) -> float:
    """Absolute error above which an element of C counts as wrong.

    Inputs are uniform in [-1, 1], so an element sums K products of spread 1/3 each: it is
    about sqrt(K)/3 in size, and float32 accumulation errs by about 1e-7 of that per step.
    1e-4 x sqrt(K) is a hundred times above the worst rounding seen and a hundred times below
    one wrong product (~0.3).
    """
    return 1e-4 * max(1.0, float(np.sqrt(K)))


def cell_shape(M: int, N: int) -> tuple[int, int]:
    """Rows x columns of C in one cell of the map."""
    return cdiv(M, MAP_EDGE), cdiv(N, MAP_EDGE)


def wrong_map(xp: Any, C: Any, ref: Any, K: int) -> tuple[np.ndarray, int, float]:
    """(wrong elements per cell as uint32, wrong in all, largest absolute error), with ``xp``
    numpy or cupy (the arrays stay on their device until the map is made)."""
    M, N = C.shape
    cy, cx = cell_shape(M, N)
    err = xp.abs(C.astype(xp.float64) - ref)
    err = xp.where(xp.isnan(err), xp.inf, err)  # an unwritten element is wrong too
    wrong = (err > tolerance(K)).astype(xp.uint32)
    padded = xp.zeros((cdiv(M, cy) * cy, cdiv(N, cx) * cx), xp.uint32)
    padded[:M, :N] = wrong
    cells = padded.reshape(cdiv(M, cy), cy, cdiv(N, cx), cx).sum(axis=(1, 3), dtype=xp.uint32)
    host = cells.get() if hasattr(cells, "get") else np.asarray(cells)
    return host.astype(np.uint32), int(host.sum()), float(err.max()) if err.size else 0.0


def read_counts(stale: np.ndarray) -> dict[str, int]:
    """How many of the probed warp's checked reads fell in each outcome."""
    return {key: int(np.count_nonzero(stale == code)) for code, key in READ_KEYS.items()}


# -- what the kernel's stores put in shared memory -----------------------------------------------
Fetch = Callable[[str, np.ndarray, np.ndarray], np.ndarray]  # (matrix, rows, cols) -> float32


def _block_threads(config: KernelConfig, block: tuple[int, int], t: int, k: int) -> Lanes:
    tid = np.arange(config.threads)
    return Lanes(warp=0, tid=tid, tx=tid % config.block[0], ty=tid // config.block[0],
                 active=np.ones(config.threads, bool), bx=int(block[0]), by=int(block[1]),
                 t=int(t), k=int(k))  # fmt: skip


def staged(
    config: KernelConfig, block: tuple[int, int], t: int, fetch: Fetch
) -> dict[str, np.ndarray]:
    """Each shared array as block ``block``'s stores of k-step ``t`` fill it (NaN: no store);
    an element outside A or B is stored as 0, as the kernels do (§26)."""
    out = {arr.name: np.full((arr.rows, arr.stride), np.nan, np.float32) for arr in config.shared}
    for rs in config.sites:
        if rs.site.kind != "store" or rs.site.source is None:
            continue
        arr = config.array(rs.site.array)
        rows_m, cols_m = config.matrix_shape(arr.source)
        for k in range(rs.repeat):
            th = _block_threads(config, block, t, k)
            at, src = rs.site.at(th, config.p), rs.site.source(th, config.p)
            row, col = (np.broadcast_to(np.asarray(v, np.int64), th.tid.shape) for v in at[:2])
            srow, scol = (np.broadcast_to(np.asarray(v, np.int64), th.tid.shape) for v in src[:2])
            for j in range(max(rs.site.width // arr.elem_bytes, 1)):  # a float4 fills four
                inside = (srow < rows_m) & (scol + j < cols_m) & (srow >= 0) & (scol >= 0)
                values = np.zeros(len(row), np.float32)
                if inside.any():
                    values[inside] = fetch(arr.source, srow[inside], scol[inside] + j)
                out[arr.name][row, col + j] = values
    return out


def classify_reads(
    config: KernelConfig, block: tuple[int, int], warp: int, values: np.ndarray, fetch: Fetch
) -> np.ndarray:
    """int8 [k-steps, program rows, 32]: what each lane of ``warp`` read at each shared load of
    each k-step, from ``values`` (uint32 [k-steps, probe slots, 32], float bits;
    0xFFFFFFFF where nothing was recorded)."""
    steps = values.shape[0]
    program = config.program
    out = np.zeros((steps, len(program), 32), np.int8)
    if not steps:
        return out
    filled = [staged(config, block, t, fetch) for t in range(min(steps + 1, config.n_steps))]
    read = values.view(np.float32)
    for row, (site, k) in enumerate(program):
        rs = config.site(site)
        # an ldmatrix lane receives fragment elements, not the row it addresses: unchecked
        if rs.site.kind != "load" or rs.site.matrix_load:
            out[:, row] = UNCHECKED
            continue
        fixed = access.step_free(config, rs.site.at, warp, block, k)
        for t in range(steps):
            r, c, mask = fixed or access.evaluate(config, rs.site.at, warp, block, t, k)
            mask = mask & (values[t, rs.slot + k] != 0xFFFFFFFF)
            got = read[t, rs.slot + k]
            now = filled[t][rs.site.array][r, c]
            nxt = filled[t + 1][rs.site.array][r, c] if t + 1 < len(filled) else np.nan
            prev = filled[t - 1][rs.site.array][r, c] if t else np.nan
            code = np.full(32, OTHER, np.int8)
            code[(got == prev) | (t == 0)] = BEFORE_WRITTEN
            code[got == nxt] = OVERWRITTEN
            code[got == now] = CURRENT
            out[t, row] = np.where(mask, code, UNCHECKED)
    return out

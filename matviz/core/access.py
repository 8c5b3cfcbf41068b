"""Shared-memory access models, evaluated from a kernel's description.

Each site of a description says which (row, col) of which shared array every lane touches; the
arrays lie one after another in the kernel's shared struct (``KernelConfig.array_bases``), so
a lane's byte offset is the array's base + (row x stride + col) x element size, with col
swizzled where the array is (``SharedArray.stored_col``). A GPU test
(``tests/gpu``) proves these offsets equal to the addresses the level-3 probe records on
hardware, for every registered kernel.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from matviz.core.config import KernelConfig
from matviz.core.kernel import WARP, Lanes, Where
from matviz.core.trace import PROBE_DTYPE


def evaluate(
    config: KernelConfig, fn: Where, warp: int, block: tuple[int, int], t: int, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, col, mask) of a description's per-lane ``fn`` for the 32 lanes of ``warp``;
    mask: the lane exists in the block and ``fn`` did not mask it."""
    return evaluate_lanes(config.lanes(warp, block, t, k), fn, config)


class _StepRead(Exception):
    """A description's function used the k-step."""


class _NoStep:
    """Stands for the k-step in a probe evaluation: any use of it raises _StepRead."""

    def _refuse(self, *args: object) -> None:
        raise _StepRead

    __index__ = __int__ = __float__ = __bool__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = __mod__ = __rmod__ = _refuse
    __divmod__ = __rdivmod__ = __pow__ = __neg__ = __and__ = __rand__ = __or__ = _refuse
    __xor__ = __rxor__ = __lshift__ = __rshift__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __eq__ = __ne__ = __array__ = _refuse  # type: ignore[assignment]


def step_free(
    config: KernelConfig, fn: Where, warp: int, block: tuple[int, int], k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``evaluate`` for every k-step at once where ``fn`` does not read the k-step (most
    shared loads and stores address the same cells every step); None where it does."""
    lanes = config.lanes(warp, block, 0, k)
    try:
        return evaluate_lanes(dataclasses.replace(lanes, t=_NoStep()), fn, config)  # type: ignore[arg-type]
    except _StepRead:
        return None


def evaluate_lanes(
    lanes: Lanes, fn: Where, config: KernelConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    out = fn(lanes, config.p)
    row, col = (np.broadcast_to(np.asarray(v, np.int64), (WARP,)) for v in out[:2])
    mask = lanes.active.copy()
    if len(out) > 2:
        mask &= np.broadcast_to(np.asarray(out[2], bool), (WARP,))
    return row, col, mask


def lane_offsets(
    config: KernelConfig,
    site: str,
    warp: int,
    k: int = 0,
    block: tuple[int, int] = (0, 0),
    t: int = 0,
) -> np.ndarray:
    """Byte offsets of the 32 lanes of ``warp`` at ``site`` (instance ``k``); -1: no access."""
    rs = config.site(site)
    arr = config.array(rs.site.array)
    row, col, mask = evaluate(config, rs.site.at, warp, block, t, k)
    col = arr.stored_col(row, col)
    offset = config.array_bases[arr.name] + (row * arr.stride + col) * arr.elem_bytes
    return np.where(mask, offset, -1).astype(np.int32)


def global_elements(
    config: KernelConfig,
    site: str,
    warp: int,
    block: tuple[int, int] = (0, 0),
    t: int = 0,
    k: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, col, inside) of the global element each lane of a store site copies; ``inside``
    is False where it lies outside the matrix (the kernel stores 0 there)."""
    rs = config.site(site)
    if rs.site.source is None:
        raise ValueError(f"site {site} copies nothing from global memory")
    row, col, mask = evaluate(config, rs.site.source, warp, block, t, k)
    rows, cols = config.matrix_shape(config.array(rs.site.array).source)
    return row, col, mask & (row < rows) & (col < cols)


def access_records(
    config: KernelConfig, warp: int, block: tuple[int, int] = (0, 0), t: int = 0
) -> np.ndarray:
    """Every shared access of ``warp`` in k-step ``t``, in program order, as probe records."""
    program = config.program
    records = np.zeros(len(program), PROBE_DTYPE)
    for row, (site, k) in enumerate(program):
        rs = config.site(site)
        records[row] = (
            site,
            k,
            rs.site.kind,
            rs.site.width,
            lane_offsets(config, site, warp, k, block, t),
        )
    return records

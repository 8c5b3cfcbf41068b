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
from matviz.core.recent import Recent
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
    return _byte_offsets(config, rs.site.array, *evaluate(config, rs.site.at, warp, block, t, k))


def _byte_offsets(
    config: KernelConfig, array: str, row: np.ndarray, col: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    """Where elements (row, col) of ``array`` lie in the shared struct, in bytes; -1 off mask."""
    arr = config.array(array)
    offset = config.array_bases[arr.name] + (row * arr.stride + arr.stored_col(row, col)) * (
        arr.elem_bytes
    )
    return np.where(mask, offset, -1).astype(np.int32)


def _inside(
    config: KernelConfig, array: str, row: np.ndarray, col: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, col, inside): elements of the matrix ``array`` copies, inside it where masked."""
    rows, cols = config.matrix_shape(config.array(array).source)
    return row, col, mask & (row < rows) & (col < cols)


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
    return _inside(config, rs.site.array, *evaluate(config, rs.site.source, warp, block, t, k))


_RECORDS: Recent[np.ndarray] = Recent(16)


def access_records(
    config: KernelConfig, warp: int, block: tuple[int, int] = (0, 0), t: int = 0
) -> np.ndarray:
    """Every shared access of ``warp`` in k-step ``t``, in program order, as probe records (a
    copy: the views of one frame ask for the same warp and k-step two or three times)."""
    kept = _RECORDS.get((config.key, warp, tuple(block), t),
                        lambda: _evaluate_records(config, warp, block, t))  # fmt: skip
    return np.array(kept, copy=True)


def _evaluate_records(
    config: KernelConfig, warp: int, block: tuple[int, int], t: int
) -> np.ndarray:
    program = config.program
    row_of = {item: row for row, item in enumerate(program)}
    records = np.zeros(len(program), PROBE_DTYPE)
    for rs in config.sites:
        offsets = site_offsets(config, rs.name, warp, block, t)
        for k in range(rs.repeat):
            records[row_of[(rs.name, k)]] = (rs.name, k, rs.site.kind, rs.site.width, offsets[k])
    return records


_NEEDS_NUMBERS = (TypeError, ValueError, IndexError, FloatingPointError)


def _at_once(
    config: KernelConfig, fn: Where, lanes: Lanes, repeat: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, col, mask) of ``lanes`` for instances k = 0 .. repeat - 1, as (repeat, lanes)
    arrays, from one call of ``fn`` with k a column; raises one of _NEEDS_NUMBERS where ``fn``
    needs k as a number (a Python condition on it, an int() of it)."""
    shape = (repeat, lanes.tid.size)
    with np.errstate(all="raise"):
        out = fn(dataclasses.replace(lanes, k=np.arange(repeat)[:, None]), config.p)  # type: ignore[arg-type]
        row, col = (np.broadcast_to(np.asarray(v, np.int64), shape) for v in out[:2])
        mask = np.broadcast_to(lanes.active, shape)
        if len(out) > 2:
            mask = mask & np.broadcast_to(np.asarray(out[2], bool), shape)
    return row, col, mask


def evaluate_instances(
    config: KernelConfig, fn: Where, warp: int, block: tuple[int, int], t: int, repeat: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``evaluate`` for instances k = 0 .. repeat - 1 at once, as (repeat, 32) arrays: one call
    of ``fn`` with k a column where it takes arrays (numpy broadcasting; a hundred calls a k-step
    had cost playback 17 ms a frame), else one call per instance."""
    try:
        return _at_once(config, fn, config.lanes(warp, block, t, 0), repeat)
    except _NEEDS_NUMBERS:
        each = [evaluate(config, fn, warp, block, t, k) for k in range(repeat)]
        shape = (repeat, WARP)
        row, col, mask = (np.stack(parts).reshape(shape) for parts in zip(*each, strict=True))
        return row, col, mask


def block_instances(
    config: KernelConfig, fn: Where, block: tuple[int, int], t: int, repeat: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`evaluate_instances` of every warp of the block, as (warps, repeat, 32) arrays: one
    call of ``fn`` for the block where it takes arrays (the tiles view asked warp by warp, 3.4
    ms of each new k-tile of kernel 07's playback), else warp by warp."""
    try:
        found = _at_once(config, fn, config.block_lanes(block, t), repeat)
    except _NEEDS_NUMBERS:
        each = [evaluate_instances(config, fn, w, block, t, repeat) for w in range(config.warps)]
        row, col, mask = (np.stack(parts) for parts in zip(*each, strict=True))
        return row, col, mask
    by_warp = (repeat, config.warps, WARP)
    row, col, mask = (a.reshape(by_warp).transpose(1, 0, 2) for a in found)
    return row, col, mask


def block_site_offsets(
    config: KernelConfig, site: str, block: tuple[int, int] = (0, 0), t: int = 0
) -> np.ndarray:
    """(warps, repeat, 32): :func:`site_offsets` of every warp of the block."""
    rs = config.site(site)
    where = block_instances(config, rs.site.at, block, t, rs.repeat)
    return _byte_offsets(config, rs.site.array, *where)


def block_site_elements(
    config: KernelConfig, site: str, block: tuple[int, int] = (0, 0), t: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(warps, repeat, 32) each: :func:`site_elements` of every warp of the block."""
    rs = config.site(site)
    if rs.site.source is None:
        raise ValueError(f"site {site} copies nothing from global memory")
    where = block_instances(config, rs.site.source, block, t, rs.repeat)
    return _inside(config, rs.site.array, *where)


def site_offsets(
    config: KernelConfig, site: str, warp: int, block: tuple[int, int] = (0, 0), t: int = 0
) -> np.ndarray:
    """(repeat, 32): :func:`lane_offsets` of every instance of ``site``."""
    rs = config.site(site)
    where = evaluate_instances(config, rs.site.at, warp, block, t, rs.repeat)
    return _byte_offsets(config, rs.site.array, *where)


def site_elements(
    config: KernelConfig, site: str, warp: int, block: tuple[int, int] = (0, 0), t: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(repeat, 32) each: :func:`global_elements` of every instance of store ``site``."""
    rs = config.site(site)
    if rs.site.source is None:
        raise ValueError(f"site {site} copies nothing from global memory")
    where = evaluate_instances(config, rs.site.source, warp, block, t, rs.repeat)
    return _inside(config, rs.site.array, *where)

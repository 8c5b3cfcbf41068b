"""Shared-memory access models: which byte each lane of a warp touches, per access site.

Each tiled kernel keeps its tiles in one shared struct ``{ float As[T][T+P]; float Bs[T][T+P]; }``,
so offsets are relative to the start of that struct. The models are pure numpy and mirror the
index expressions in ``kernels/*.cu`` one for one; a GPU test proves them equal to the
addresses the level-3 probe records on hardware.

Sites, in program order for one k-tile:
``st_As``, ``st_Bs`` (the cooperative tile load), then for k = 0..T-1 ``ld_As``, ``ld_Bs``
(the inner product loop).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from matviz.core.trace import PROBE_DTYPE

FLOAT_BYTES = 4
WARP = 32


def warp_lanes(tile: int, warp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tx, ty, active) for the 32 lanes of ``warp`` in a tile x tile thread block."""
    tid = warp * WARP + np.arange(WARP)
    active = tid < tile * tile
    return tid % tile, tid // tile, active


def _as_offsets(elements: np.ndarray, active: np.ndarray, base: int) -> np.ndarray:
    return np.where(active, base + elements * FLOAT_BYTES, -1).astype(np.int32)


def _tiled_sites(transposed_a: bool) -> dict[str, Callable]:
    """Element index (within its array) each lane touches, for the seed's tiled kernels."""

    def st_as(tx, ty, k, stride):
        return tx * stride + ty if transposed_a else ty * stride + tx

    def ld_as(tx, ty, k, stride):
        return k * stride + ty if transposed_a else ty * stride + k

    return {
        "st_As": ("store", "A", st_as),
        "st_Bs": ("store", "B", lambda tx, ty, k, stride: ty * stride + tx),
        "ld_As": ("load", "A", ld_as),
        "ld_Bs": ("load", "B", lambda tx, ty, k, stride: k * stride + tx),
    }


_SITES = {
    "tiled": _tiled_sites(transposed_a=False),
    "tiled_transposed": _tiled_sites(transposed_a=True),
}


def model_kernels() -> tuple[str, ...]:
    """Kernels that have a shared-memory model (the naive kernel uses no shared memory)."""
    return tuple(_SITES)


def site_order(tile: int) -> list[tuple[str, int]]:
    """(site, k) pairs in the order one k-tile executes them."""
    order = [("st_As", 0), ("st_Bs", 0)]
    for k in range(tile):
        order += [("ld_As", k), ("ld_Bs", k)]
    return order


def lane_offsets(kernel: str, tile: int, pad: int, warp: int, site: str, k: int = 0) -> np.ndarray:
    """Byte offsets of the 32 lanes of ``warp`` at access ``site`` (inner index ``k``).

    Offsets are from the start of the kernel's shared tiles; -1 marks an inactive lane.
    """
    if kernel not in _SITES:
        return np.full(WARP, -1, np.int32)
    kind, array, fn = _SITES[kernel][site]
    stride = tile + pad
    tx, ty, active = warp_lanes(tile, warp)
    base = 0 if array == "A" else tile * stride * FLOAT_BYTES
    return _as_offsets(fn(tx, ty, k, stride), active, base)


def access_records(
    kernel: str,
    tile: int,
    pad: int,
    warp: int,
    block: tuple[int, int] = (0, 0),
    ktile: int = 0,
) -> np.ndarray:
    """Every shared access of ``warp`` in one k-tile, as probe records (PROBE_DTYPE).

    ``block`` and ``ktile`` are accepted because a model may depend on them; the seed's kernels
    use the same shared addresses in every block and every k-tile.
    """
    del block, ktile
    if kernel not in _SITES:
        return np.zeros(0, PROBE_DTYPE)
    order = site_order(tile)
    records = np.zeros(len(order), PROBE_DTYPE)
    for row, (site, k) in enumerate(order):
        records[row] = (
            site,
            k,
            _SITES[kernel][site][0],
            FLOAT_BYTES,
            lane_offsets(kernel, tile, pad, warp, site, k),
        )
    return records

"""Coalescing (lesson 8 §15, §28): which 32-byte sectors and 128-byte lines one warp's global
load or store touches, from the kernel's description.

A warp's request for 32 four-byte elements is served in 32-byte sectors: 4 sectors when the
lanes read 128 consecutive, aligned bytes (coalesced), 1 when they all read one element (a
broadcast), up to 32 when each lane's element lies in its own sector (a column of a row-major
matrix: lanes stride by the row length). Matrices start 256-byte aligned (cudaMalloc).
``ncu`` counts the same thing as ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum`` over
``l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum``.

A 16-byte cp.async (LDGSTS.128) also writes shared memory itself, 8 lanes (128 bytes) at a
time, and ncu counts the 32-byte shared sectors each 8 lanes write where they are more than the
global ones: kernel 09's copies into rows padded by 16 bytes start every other row in the middle
of a sector (ncu: 21 and 19 sectors per request at BK 16 and 32, where the global side is 16).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matviz.core.access import evaluate, lane_offsets
from matviz.core.config import KernelConfig
from matviz.core.kernel import GlobalAccess

SECTOR_BYTES = 32
LINE_BYTES = 128
ELEMENT_BYTES = 4
SHARED_PHASE_LANES = 8  # lanes whose 16-byte copies land in shared memory together


@dataclass(frozen=True)
class Request:
    """One warp-wide global access: every lane's byte address (-1: the lane does not access)."""

    name: str
    kind: str
    matrix: str
    k: int
    addresses: np.ndarray
    width: int = ELEMENT_BYTES  # bytes per lane
    element: int = ELEMENT_BYTES  # bytes per element of the matrix (2 for fp16 inputs)
    landing: np.ndarray | None = None  # a cp.async's shared byte offset per lane (-1: none)

    @property
    def active(self) -> np.ndarray:
        return self.addresses >= 0

    @property
    def sectors(self) -> np.ndarray:
        """The distinct 32-byte sectors, as sector numbers from the matrix's start."""
        return np.unique(self._bytes() // SECTOR_BYTES)

    @property
    def counted_sectors(self) -> int:
        """The sectors ncu counts for the request: its global sectors or, for a 16-byte
        cp.async, the 32-byte shared sectors each 8 lanes write, if those are more."""
        counted = self.sectors.size
        if self.landing is None or self.width != 16:
            return counted
        shared = 0
        for phase in self.landing.reshape(-1, SHARED_PHASE_LANES):
            first = phase[phase >= 0]
            touched = (first[:, None] + np.arange(self.width)).ravel() // SECTOR_BYTES
            shared += np.unique(touched).size
        return max(counted, shared)

    @property
    def lines(self) -> np.ndarray:
        return np.unique(self._bytes() // LINE_BYTES)

    def _bytes(self) -> np.ndarray:
        """Every element the active lanes touch (a vector access touches width / element)."""
        first = self.addresses[self.active]
        return (first[:, None] + np.arange(0, self.width, self.element)).ravel()

    @property
    def ideal_sectors(self) -> int:
        """Sectors the distinct bytes would need if they lay side by side and aligned."""
        distinct = np.unique(self._bytes()).size * self.element
        return -(-distinct // SECTOR_BYTES)

    @property
    def broadcast(self) -> bool:
        return bool(self.active.any()) and np.unique(self.addresses[self.active]).size == 1


def addresses(
    config: KernelConfig,
    access: GlobalAccess,
    warp: int,
    block: tuple[int, int] = (0, 0),
    t: int = 0,
    k: int = 0,
) -> np.ndarray:
    """Byte offset from the matrix's start of each lane's element; -1 where a lane does not
    access (outside the block, masked, or outside the matrix: the kernels guard those)."""
    row, col, mask = evaluate(config, access.at, warp, block, t, k)
    rows, cols = config.matrix_shape(access.matrix)
    mask &= (row >= 0) & (row < rows) & (col >= 0) & (col < cols)
    if config.matrix_layout(access.matrix) == "col":
        element = col * rows + row
    else:
        element = row * cols + col
    return np.where(mask, element * config.element_bytes(access.matrix), -1)


def warp_requests(
    config: KernelConfig, warp: int, block: tuple[int, int] = (0, 0), t: int = 0
) -> list[Request]:
    """Every global request of ``warp`` in k-step ``t`` (for a kernel without k-steps: one
    iteration of its loop, then its stores). An access no lane of the warp makes (every lane
    masked off, e.g. a producer warp that stores no C) issues no request."""
    out = []
    for access, repeat in config.global_accesses:
        for k in range(repeat):
            where = addresses(config, access, warp, block, t, k)
            if not (where >= 0).any():
                continue
            out.append(
                Request(
                    access.name,
                    access.kind,
                    access.matrix,
                    k,
                    where,
                    access.width,
                    config.element_bytes(access.matrix),
                    lane_offsets(config, access.lands_in, warp, k, block, t)
                    if access.lands_in
                    else None,
                )
            )
    return out


def sectors_per_request(config: KernelConfig, kind: str = "load") -> float:
    """Mean sectors per request of ``kind`` over the warps of block (0, 0) in its first k-step,
    weighted as the kernel issues them: what ncu's sectors / requests gives for a grid of
    full blocks."""
    requests = [
        r
        for w in range(config.warps)
        for r in warp_requests(config, w)
        if r.kind == kind and r.active.any()
    ]
    return float(np.mean([r.counted_sectors for r in requests])) if requests else float("nan")

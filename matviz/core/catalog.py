"""The kernel catalog: one entry per ``kernels/NN_name.cu`` file.

An entry knows its source file, the parameters it accepts, how to check a configuration, the
launch geometry, the work it does, the global traffic the lesson's formulas predict, and which
shared-memory access model (``matviz.core.access``) describes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from matviz.core import access
from matviz.errors import MatvizError

KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels"
MAX_THREADS_PER_BLOCK = 1024
STATIC_SMEM_LIMIT = 48 * 1024  # static __shared__ arrays may not exceed 48 KiB per block
MAX_GRID_Y = 65535
MAX_INDEX = 2**31 - 1  # the kernels index with 32-bit ints
FLOAT_BYTES = 4
LEVELS = (0, 1, 2, 3)
LEVEL_NAMES = {0: "timing", 1: "blocks", 2: "phases", 3: "diagnostics"}


@dataclass(frozen=True)
class Geometry:
    grid: tuple[int, int]
    block: tuple[int, int]
    smem_bytes: int
    n_tiles: int  # k-tiles each block walks through (0: no tiling)

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def n_blocks(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def warps_per_block(self) -> int:
        return math.ceil(self.threads / 32)


@dataclass(frozen=True)
class KernelSpec:
    name: str
    number: int
    title: str
    concept: str
    seed_sections: str
    params: dict[str, tuple[int, ...]]
    uses_shared: bool
    register_estimate: int  # used by the simulator where nvcc is missing

    @property
    def source(self) -> Path:
        return KERNEL_DIR / f"{self.number:02d}_{self.name}.cu"

    @property
    def entry_point(self) -> str:
        return f"mv_{self.name}"

    # -- configuration ---------------------------------------------------------------------
    def default_params(self) -> dict[str, int]:
        return {name: (16 if 16 in values else values[0]) for name, values in self.params.items()}

    def resolve_params(self, **given: int | None) -> dict[str, int]:
        """Fill defaults and check every value is allowed; MatvizError names the bad one."""
        params = self.default_params()
        for name, value in given.items():
            if value is None:
                continue
            if name not in self.params:
                raise MatvizError(f"kernel {self.name} has no parameter '{name}'")
            if isinstance(value, bool) or value not in self.params[name] or int(value) != value:
                allowed = ", ".join(map(str, self.params[name]))
                raise MatvizError(
                    f"{name}={value} is not allowed for kernel {self.name} (allowed: {allowed})"
                )
            params[name] = int(value)
        return params

    def validate(
        self, params: dict[str, int], M: int, N: int, K: int, smem_limit: int = STATIC_SMEM_LIMIT
    ) -> Geometry:
        """Check a full configuration and return its launch geometry."""
        for label, value in (("M", M), ("N", N), ("K", K)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise MatvizError(f"{label} must be a whole number >= 1 (got {value})")
        M, N, K = int(M), int(N), int(K)  # numpy int32 products would wrap
        for label, size in (("M*K", M * K), ("K*N", K * N), ("M*N", M * N)):
            if size > MAX_INDEX:
                raise MatvizError(
                    f"{label} = {size} elements is more than the kernels' 32-bit indexing allows"
                )
        geometry = self.geometry(params, M, N, K)
        if geometry.grid[1] > MAX_GRID_Y:
            raise MatvizError(
                f"M={M} needs {geometry.grid[1]} block rows; CUDA allows {MAX_GRID_Y} "
                f"(use a larger tile or a smaller M)"
            )
        if geometry.threads > MAX_THREADS_PER_BLOCK:
            raise MatvizError(
                f"{geometry.threads} threads per block is more than the limit of "
                f"{MAX_THREADS_PER_BLOCK}"
            )
        if geometry.smem_bytes > smem_limit:
            raise MatvizError(
                f"{geometry.smem_bytes} bytes of shared memory per block is more than the "
                f"limit of {smem_limit}"
            )
        return geometry

    # -- derived quantities ------------------------------------------------------------------
    def geometry(self, params: dict[str, int], M: int, N: int, K: int) -> Geometry:
        tile = params["tile"]
        grid = (math.ceil(N / tile), math.ceil(M / tile))
        smem = 2 * tile * (tile + params.get("pad", 0)) * FLOAT_BYTES if self.uses_shared else 0
        n_tiles = math.ceil(K / tile) if self.uses_shared else 0
        return Geometry(grid=grid, block=(tile, tile), smem_bytes=smem, n_tiles=n_tiles)

    @staticmethod
    def flops(M: int, N: int, K: int) -> int:
        return 2 * M * N * K

    def predicted_global_bytes(self, params: dict[str, int], M: int, N: int, K: int) -> float:
        """Global loads by the lesson's formula: 2mnk for naive, 2mnk/b when tiled (bytes)."""
        divisor = params["tile"] if self.uses_shared else 1
        return 2 * M * N * K / divisor * FLOAT_BYTES

    def issued_global_bytes(self, params: dict[str, int], M: int, N: int, K: int) -> int:
        """Global loads the kernel actually issues, boundary guards included (bytes)."""
        if not self.uses_shared:
            return 2 * M * N * K * FLOAT_BYTES
        gx, gy = self.geometry(params, M, N, K).grid
        # each block column re-reads all of A, each block row all of B
        return (gx * M * K + gy * K * N) * FLOAT_BYTES

    def access_records(
        self, params: dict[str, int], warp: int, block=(0, 0), ktile: int = 0
    ) -> np.ndarray:
        """The shared-memory access model of this kernel (see matviz.core.access)."""
        return access.access_records(
            self.name, params["tile"], params.get("pad", 0), warp, block, ktile
        )


_TILES = (8, 16, 32)
_PADS = (0, 1, 2, 4)

CATALOG: dict[str, KernelSpec] = {
    spec.name: spec
    for spec in (
        KernelSpec(
            name="naive",
            number=1,
            title="Naive: one thread per C element",
            concept="2-D grid, each thread walks a row of A and a column of B in global memory",
            seed_sections="lesson 8 §2-5; article §2",
            params={"tile": _TILES},
            uses_shared=False,
            register_estimate=32,
        ),
        KernelSpec(
            name="tiled",
            number=2,
            title="Tiled: A and B tiles in shared memory",
            concept="tiles staged in shared memory between two __syncthreads, sum in a register",
            seed_sections="lesson 8 §6-17, §26-27; article §3-4",
            params={"tile": _TILES, "pad": _PADS},
            uses_shared=True,
            register_estimate=32,
        ),
        KernelSpec(
            name="tiled_transposed",
            number=3,
            title="Tiled, A stored transposed: bank conflicts and padding",
            concept="a transposed shared store hits one bank 32 times; [T][T+1] padding fixes it",
            seed_sections="lesson 8 §27-28; article §6.2",
            params={"tile": _TILES, "pad": _PADS},
            uses_shared=True,
            register_estimate=32,
        ),
    )
}


def get_kernel(name: str) -> KernelSpec:
    """Look a kernel up by name ('tiled') or file stem ('02_tiled')."""
    key = name.strip()
    for spec in CATALOG.values():
        if key in (spec.name, f"{spec.number:02d}_{spec.name}", str(spec.number)):
            return spec
    known = ", ".join(CATALOG)
    raise MatvizError(f"unknown kernel '{name}' (known: {known})")

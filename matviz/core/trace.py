"""The trace schema shared by every backend (CuPy recorder and simulator).

A trace is a JSON-able manifest plus numpy arrays. All times are integer nanoseconds from the
start of the kernel (the earliest block start), so real and simulated traces read the same.

Arrays
------
blocks   one row per thread block, in linear launch order (``by * grid_x + bx``):
         ``bx, by, smid, start, end``. Every block is always present.
marks    per-k-step marks for the blocks in ``phase_blocks`` (all of them when the trace budget
         allows, else a deterministic sample): ``marks[i, t, m]`` is when block row ``i``
         passed mark ``m`` of k-step ``t``. The marks and the phases between them are named by
         the kernel's description (``description.kstep``: channels of marks, phases from one
         mark to another); for the seed kernels they are ``issue`` (the tile's global loads
         go out), ``loaded`` (barrier 1 passed: the shared tiles are complete) and ``computed``
         (barrier 2 passed: every warp is done with them).
warps    optional (level 3): ``barrier_wait[i, t, w, b]``, how long (ns) warp ``w`` of block
         ``warp_blocks[i]`` waited at barrier ``b`` of k-step ``t`` (the barriers that end the
         description's phases, in phase order) before it released. The warp that arrives last
         waits least. Each warp times its own wait on its own clock.
probe    optional (level 3): one row per shared-memory access instruction that the probed warp
         executed in the probed k-tile, in program order: ``site`` label, inner index ``k``,
         ``kind`` (``store``/``load``), ``width`` in bytes and ``offsets`` (32 lane byte offsets
         from the start of the kernel's shared memory; -1 for an inactive lane).
c_wrong  wrong elements of C per cell (``manifest["correctness"]["cell"]`` elements a side),
         against float64 (:mod:`matviz.core.correctness`); empty in traces made before it.
stale    optional (level 3): ``stale[t, row, lane]``, what each lane of the probed warp read at
         probe row ``row`` in k-step ``t``: the codes of ``correctness.READS`` (a missing
         barrier shows as reads before the tile was written or after it was overwritten).
fragments optional (level 3, Tensor Core kernels): ``fragments[o, lane, slot]``, the element
         (row * cols + col) of MMA operand ``o`` (the description's ``mma.fragments`` order)
         that ``slot`` of ``lane`` held when the GPU loaded tiles numbering their own elements;
         -1 past a fragment's last slot (32 slots per lane, up to 128 for a wide
         accumulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from matviz.core.config import StepLayout
from matviz.core.kernel import MAX_FRAGMENT_SLOTS, MIN_FRAGMENT_SLOTS
from matviz.core.manifest import SCHEMA_VERSION

if TYPE_CHECKING:
    from matviz.core.config import KernelConfig

__all__ = ["SCHEMA_VERSION", "Trace", "BLOCK_DTYPE", "PROBE_DTYPE", "make_blocks"]

BLOCK_DTYPE = np.dtype(
    [("bx", "<u4"), ("by", "<u4"), ("smid", "<u2"), ("start", "<i8"), ("end", "<i8")]
)
PROBE_DTYPE = np.dtype(
    [
        ("site", "<U12"),
        ("k", "<i4"),
        ("kind", "<U5"),
        ("width", "u1"),
        ("offsets", "<i4", (32,)),
    ]
)

BACKENDS = ("cuda", "sim")

# Manifest keys every trace must carry; trace_io checks them when it reads a file.
REQUIRED_MANIFEST_KEYS = (
    "schema_version",
    "kernel",
    "params",
    "M",
    "N",
    "K",
    "dtype",
    "backend",
    "device",
    "timer",
    "level",
    "description",
    "geometry",
    "sampling",
    "software",
    "stats",
)


@dataclass
class Trace:
    """One recorded (or simulated) kernel run."""

    manifest: dict[str, Any]
    blocks: np.ndarray
    phase_blocks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    marks: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), np.int64))
    warp_blocks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    barrier_wait: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0, 2), np.int64))
    probe: np.ndarray = field(default_factory=lambda: np.zeros(0, PROBE_DTYPE))
    c_wrong: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.uint32))
    stale: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 32), np.int8))
    fragments: np.ndarray = field(default_factory=lambda: np.zeros((0, 32, 32), np.int16))

    def __post_init__(self) -> None:
        self.validate()

    # -- convenient views of the manifest -------------------------------------------------
    @property
    def kernel(self) -> str:
        return self.manifest["kernel"]

    @property
    def params(self) -> dict[str, int]:
        return self.manifest["params"]

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.manifest["M"], self.manifest["N"], self.manifest["K"]

    @property
    def dtype(self) -> str:
        """The element type of A and B ("float32", "float16", ...); C is float32."""
        return str(self.manifest["dtype"])

    @cached_property
    def config(self) -> KernelConfig:
        """The kernel's description at this trace's parameters and shape (from the registry)."""
        from matviz.core.registry import get_kernel

        return get_kernel(self.kernel).configure(self.params, *self.shape, check=False)

    @property
    def backend(self) -> str:
        return self.manifest["backend"]

    @property
    def is_simulated(self) -> bool:
        return self.backend == "sim"

    @property
    def grid(self) -> tuple[int, int]:
        gx, gy = self.manifest["geometry"]["grid"]
        return int(gx), int(gy)

    @property
    def n_tiles(self) -> int:
        return int(self.marks.shape[1])

    @cached_property
    def layout(self) -> StepLayout:
        """Marks, channels and phases of a k-step, from the manifest's description."""
        description = self.manifest["description"]
        if not isinstance(description, dict):
            raise ValueError("the manifest's description is not an object")
        try:
            return StepLayout.of(description.get("kstep"))
        except (TypeError, KeyError, ValueError, AttributeError, StopIteration) as exc:
            reason = f"no {exc}" if isinstance(exc, KeyError) else str(exc) or "unreadable"
            raise ValueError(f"the description's k-step is malformed ({reason})") from None

    def mark(self, name: str) -> np.ndarray:
        """Times of one named mark: (phase rows, k-steps), a view into ``marks``."""
        return self.marks[:, :, self.layout.marks.index(name)]

    @property
    def correctness(self) -> dict[str, Any] | None:
        """The manifest's correctness section (None in traces made before it)."""
        return self.manifest.get("correctness")

    @property
    def deliberately_broken(self) -> bool:
        return bool((self.correctness or {}).get("broken"))

    @property
    def duration_ns(self) -> int:
        return int(self.blocks["end"].max()) if len(self.blocks) else 0

    @property
    def provenance(self) -> str:
        """What a user must be told about where the data came from."""
        device = self.manifest["device"].get("name", "unknown GPU")
        if self.is_simulated:
            return f"simulated ({device} model)"
        return f"recorded on {device}"

    # -- invariants ------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise ValueError when arrays disagree with each other or with the manifest."""
        missing = [k for k in REQUIRED_MANIFEST_KEYS if k not in self.manifest]
        if missing:
            raise ValueError(f"manifest lacks {', '.join(missing)}")
        if self.manifest["backend"] not in BACKENDS:
            raise ValueError(f"unknown backend {self.manifest['backend']!r}")
        if self.blocks.dtype != BLOCK_DTYPE:
            raise ValueError("blocks array has the wrong dtype")
        gx, gy = self.grid
        if len(self.blocks) != gx * gy:
            raise ValueError(f"{len(self.blocks)} block rows for a {gx}x{gy} grid")
        if np.any(self.blocks["end"] < self.blocks["start"]):
            raise ValueError("a block ends before it starts")
        shape = self.marks.shape
        if self.marks.ndim != 3:
            raise ValueError("marks must be (phase rows, k-steps, marks)")
        if shape[0] != len(self.phase_blocks):
            raise ValueError("phase rows do not match phase_blocks")
        if len(self.phase_blocks) and (
            self.phase_blocks.min() < 0 or self.phase_blocks.max() >= len(self.blocks)
        ):
            raise ValueError("phase_blocks names a block outside the grid")
        if self.barrier_wait.shape[0] != len(self.warp_blocks):
            raise ValueError("warp rows do not match warp_blocks")
        if len(self.warp_blocks) and (
            self.barrier_wait.shape[1] != shape[1]
            or not np.isin(self.warp_blocks, self.phase_blocks).all()
        ):
            raise ValueError("warp arrivals must cover the k-tiles of blocks that have phases")
        n_marks, n_barriers = len(self.layout.marks), self.layout.n_barriers
        if len(self.phase_blocks) and shape[2] != n_marks:
            raise ValueError(f"marks hold {shape[2]} marks per k-step; the kernel stamps {n_marks}")
        if len(self.warp_blocks) and self.barrier_wait.shape[3] != n_barriers:
            have = self.barrier_wait.shape[3]
            raise ValueError(f"barrier waits for {have} barriers; the kernel has {n_barriers}")
        for name in ("phase_blocks", "marks", "warp_blocks", "barrier_wait"):
            if getattr(self, name).dtype != np.int64:
                raise ValueError(f"{name} must be int64")
        if self.probe.dtype != PROBE_DTYPE:
            raise ValueError("probe array has the wrong dtype")
        if self.c_wrong.dtype != np.uint32 or self.c_wrong.ndim != 2:
            raise ValueError("c_wrong must be a 2-D uint32 map")
        slots = self.fragments.shape[2] if self.fragments.ndim == 3 else 0
        if (
            self.fragments.dtype != np.int16
            or self.fragments.shape[1:2] != (32,)
            or not MIN_FRAGMENT_SLOTS <= slots <= MAX_FRAGMENT_SLOTS
        ):
            raise ValueError("fragments must be int16 (operands, 32 lanes, 32 to 128 slots)")
        if self.fragments.size and (self.fragments.min() < -1 or self.fragments.max() >= 1 << 12):
            raise ValueError("fragments holds an element number outside a 64x64 tile")
        if self.stale.dtype != np.int8 or self.stale.ndim != 3 or self.stale.shape[2] != 32:
            raise ValueError("stale must be int8 (k-steps, probe rows, 32 lanes)")
        if self.stale.shape[0] and self.stale.shape[1] != len(self.probe):
            raise ValueError("stale has a row per probe row")
        if self.stale.shape[0] > max(self.n_tiles, self.manifest["geometry"].get("n_tiles", 0)):
            raise ValueError("stale has more k-steps than the kernel walks")

    @property
    def probe_location(self) -> tuple[int, int, int] | None:
        """(block index, warp, k-tile) the level-3 probe recorded; None without a probe."""
        probe = self.manifest.get("sampling", {}).get("probe")
        if not probe:
            return None
        bx, by = probe.get("block", (0, 0))
        return (
            self.block_index(int(bx), int(by)),
            int(probe.get("warp", 0)),
            int(probe.get("ktile", 0)),
        )

    def block_index(self, bx: int, by: int) -> int:
        """Linear launch index of block (bx, by)."""
        gx, gy = self.grid
        if not (0 <= bx < gx and 0 <= by < gy):
            raise IndexError(f"block ({bx}, {by}) is outside the {gx}x{gy} grid")
        return by * gx + bx

    def phase_row(self, block: int) -> int | None:
        """Row of ``block`` in the phase arrays, or None when it was not sampled."""
        hit = np.flatnonzero(self.phase_blocks == block)
        return int(hit[0]) if len(hit) else None


ARRAY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Trace) if f.name != "manifest")


def make_blocks(grid_x: int, grid_y: int) -> np.ndarray:
    """An all-blocks array in launch order with bx/by filled and times zeroed."""
    blocks = np.zeros(grid_x * grid_y, BLOCK_DTYPE)
    linear = np.arange(grid_x * grid_y)
    blocks["bx"] = linear % grid_x
    blocks["by"] = linear // grid_x
    return blocks

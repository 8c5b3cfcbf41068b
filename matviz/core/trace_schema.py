"""The declared schema of a trace manifest, and the checks of a trace's arrays against it.

The manifest is validated with pydantic models of the sections matviz reads; a section may carry
more keys than these (a newer recorder, a device file's model), which are kept as they are. The
bounds come from the hardware, so a hostile file cannot make matviz allocate or draw absurd
amounts: 1024 threads per block, 32 lanes per warp, at most a few thousand SMs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from matviz.core.config import VALUE_TILES, KernelConfig, StepLayout
from matviz.core.correctness import MAP_EDGE, READ_KEYS, READS
from matviz.core.kernel import MAX_FRAGMENT_SLOTS
from matviz.core.manifest import SCHEMA_VERSION
from matviz.core.registry import get_kernel
from matviz.core.trace import BLOCK_DTYPE, PROBE_DTYPE
from matviz.errors import MatvizError

MAX_DIM = 1 << 20  # M, N, K; the kernels' 32-bit indexing bounds the products further
MAX_SMS = 4096  # smid is stored as uint16; the largest GPUs have a few hundred SMs
MAX_THREADS = 1024  # per block, CUDA's limit
MAX_WARPS = MAX_THREADS // 32
MAX_SMEM = 1 << 20  # bytes of shared memory per SM or block; sm_90 has 228 KiB
MAX_PROBE_ROWS = 1 << 16  # shared accesses of one warp in one k-tile
PROBE_WIDTHS = (1, 2, 4, 8, 16)  # bytes per lane of a shared load or store
MAX_ARRAY_BYTES = 4 << 30  # whatever the manifest says, no array is read beyond this

Count = Annotated[int, Field(strict=True, ge=0)]
Positive = Annotated[int, Field(strict=True, ge=1)]
InputType = Literal["float32", "float16", "bfloat16"]  # core.kernel.INPUT_BYTES's keys
StampForm = Literal["lanes", "store", "held"]  # config.STAMP_FORMS (a test holds them equal)
# strict: no bools, no numeric strings; finite: json reads NaN and Infinity, which the views
# printed ("+nan% against level 0"). NonNegative's ge=0 refuses NaN and keeps infinity: a broken
# kernel's relative error is inf.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(strict=True, ge=0)]
Level = Annotated[int, Field(strict=True, ge=0, le=3)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class Device(_Section):
    name: str = "unknown GPU"
    sm_count: Annotated[int, Field(strict=True, ge=1, le=MAX_SMS)] | None = None
    clock_mhz: Annotated[float, Field(strict=True, gt=0, le=10_000)] | None = None
    compute_capability: str | None = None
    warp_size: Literal[32] | None = None
    max_threads_per_sm: Annotated[int, Field(strict=True, ge=1, le=4 * MAX_THREADS)] | None = None
    max_warps_per_sm: Annotated[int, Field(strict=True, ge=1, le=4 * MAX_WARPS)] | None = None
    max_blocks_per_sm: Annotated[int, Field(strict=True, ge=1, le=64)] | None = None
    smem_per_sm: Annotated[int, Field(strict=True, ge=0, le=MAX_SMEM)] | None = None
    smem_per_block: Annotated[int, Field(strict=True, ge=0, le=MAX_SMEM)] | None = None
    smem_reserved_per_block: Annotated[int, Field(strict=True, ge=0, le=MAX_SMEM)] | None = None
    smem_alloc_unit: Annotated[int, Field(strict=True, ge=1, le=MAX_SMEM)] | None = None
    regs_per_sm: Annotated[int, Field(strict=True, ge=1, le=1 << 20)] | None = None
    reg_alloc_unit_per_warp: Annotated[int, Field(strict=True, ge=1, le=1 << 16)] | None = None
    max_regs_per_thread: Annotated[int, Field(strict=True, ge=1, le=255)] | None = None
    cublas_fp32_gflops: NonNegative | None = None

    @field_validator("sm_count", mode="before")
    @classmethod
    def _count_or_absent(cls, value: Any) -> Any:
        # The views size the SM lanes by it, or by the smids where it is left out; a null
        # stood for neither.
        if value is None:
            raise ValueError("must be a whole number (leave it out where unknown)")
        return value


class Timer(_Section):
    name: str
    resolution_ns: Annotated[int, Field(strict=True, ge=0, le=10**9)]
    ns_per_cycle: Annotated[float, Field(strict=True, gt=0, le=10**6)] | None = None


class Geometry(_Section):
    grid: Annotated[list[Positive], Field(min_length=2, max_length=2)]
    block: Annotated[list[Annotated[int, Field(strict=True, ge=1, le=MAX_THREADS)]],
                     Field(min_length=1, max_length=3)]  # fmt: skip
    threads: Annotated[int, Field(strict=True, ge=1, le=MAX_THREADS)]
    warps: Annotated[int, Field(strict=True, ge=1, le=MAX_WARPS)]
    smem_bytes: Annotated[int, Field(strict=True, ge=0, le=MAX_SMEM)]
    n_tiles: Annotated[int, Field(strict=True, ge=0, le=MAX_DIM)]
    registers: dict[str, Annotated[int, Field(strict=True, ge=0, le=255)]] = {}


class Probe(_Section):
    block: Annotated[list[Count], Field(min_length=2, max_length=2)]
    warp: Annotated[int, Field(strict=True, ge=0, lt=MAX_WARPS)]
    ktile: Count


class Sampling(_Section):
    budget_bytes: Count
    timeline_level: Level
    phase_every: Positive = 1
    phase_blocks: Count = 0
    warp_every: Positive | None = None
    warp_blocks: Count = 0
    probe: Probe | None = None
    diagnostics: str | None = None


class StrideOverhead(BaseModel):
    """[stride, overhead %]: a JSON pair, so a list, whose first item is a whole stride."""

    model_config = ConfigDict(extra="forbid")
    pair: Annotated[list[Number], Field(min_length=2, max_length=2)]

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, value: Any) -> Any:
        return {"pair": value}

    @model_validator(mode="after")
    def _whole_stride(self) -> StrideOverhead:
        stride = self.pair[0]
        if not (float(stride).is_integer() and stride >= 1):
            raise ValueError("the stride must be a whole number >= 1")
        return self


class Stats(_Section):
    gflops: NonNegative
    time_ms_median: NonNegative | None = None
    time_ms_min: NonNegative | None = None
    time_ms_max: NonNegative | None = None
    repeats: Positive | None = None
    cublas_gflops: NonNegative | None = None
    pct_cublas: NonNegative | None = None
    rel_error: NonNegative | None = None
    overhead_pct: Number | None = None
    diagnostics_overhead_pct: Number | None = None
    span_ns: Count | None = None
    event_ms: NonNegative | None = None
    span_vs_event: NonNegative | None = None
    instrumented_min_blocks: Positive | None = None  # the register bound the views state
    stamp_form: StampForm | None = None
    stamp_form_overheads_pct: dict[StampForm, Number] | None = None
    # each stamping stride the recorder timed beside level 0 (stride, overhead %), in order
    phase_every_overheads_pct: (
        Annotated[list[StrideOverhead], Field(min_length=1, max_length=64)] | None
    ) = None

    @model_validator(mode="after")
    def _span_has_its_parts(self) -> Stats:
        # The summary prints the ratio with both of its terms.
        if self.span_vs_event is not None and (self.span_ns is None or self.event_ms is None):
            raise ValueError("span_vs_event needs span_ns and event_ms")
        return self


class Occupancy(_Section):
    blocks_per_sm: Count | None = None
    limiter: str | None = None

    @model_validator(mode="after")
    def _shown_together(self) -> Occupancy:
        # The summary prints both as soon as the section is not empty.
        if (self.model_extra or self.blocks_per_sm is not None) and (
            self.blocks_per_sm is None or self.limiter is None
        ):
            raise ValueError("needs blocks_per_sm and limiter")
        return self


class Launch(_Section):
    grid: Annotated[list[Positive], Field(min_length=2, max_length=2)]


class StepPhase(_Section):
    name: str
    begin: str
    end: str
    state: str
    barrier: str | None = None
    barrier_left_out: bool = False


class KStep(_Section):
    channels: Annotated[list[Annotated[list[str], Field(min_length=1)]], Field(min_length=1)]
    phases: list[StepPhase]
    chained: bool = True
    in_flight: Positive = 1


class DescribedParam(_Section):
    name: str
    layout: Literal["", "pad", "swizzle"] = ""  # filled in on load for older files


class DescribedArray(_Section):
    name: str
    swizzle: str = ""  # filled in on load for older files


class DescribedFragment(_Section):
    operand: Literal["A", "B", "C"]
    rows: Annotated[int, Field(strict=True, ge=1, le=64)]
    cols: Annotated[int, Field(strict=True, ge=1, le=256)]
    dtype: str
    elements: Annotated[
        list[
            Annotated[
                list[Annotated[int, Field(ge=0, lt=4096)]], Field(max_length=MAX_FRAGMENT_SLOTS)
            ]
        ],
        Field(min_length=32, max_length=32),
    ]

    @model_validator(mode="after")
    def _inside_the_tile(self) -> DescribedFragment:
        if any(e >= self.rows * self.cols for lane in self.elements for e in lane):
            raise ValueError("a fragment element lies outside its rows x cols tile")
        return self


class DescribedMma(_Section):
    instruction: str
    sass: str
    shape: Annotated[list[Positive], Field(min_length=3, max_length=3)]
    warps: Annotated[list[Positive], Field(min_length=2, max_length=2)]
    warp_tile: Annotated[list[Positive], Field(min_length=2, max_length=2)]
    fragments: Annotated[list[DescribedFragment], Field(min_length=1, max_length=4)]
    from_shared: list[Literal["A", "B"]] = []  # older files: every operand from registers
    group_threads: Annotated[int, Field(strict=True, ge=32, le=1024)] = 32
    first_warp: Annotated[int, Field(strict=True, ge=0, lt=32)] = 0


class DescribedCopy(_Section):
    name: str
    array: str
    rows: Positive
    cols: Positive
    swizzle_bytes: Literal[0, 32, 64, 128] = 0


class Description(_Section):
    name: str
    launch: Launch
    params: list[DescribedParam] = []
    shared: list[DescribedArray] = []
    kstep: KStep | None = None
    inputs: InputType = "float32"  # older files: fp32
    mma: DescribedMma | None = None
    copies: list[DescribedCopy] = []  # older files: no TMA copies
    mbarriers: Annotated[int, Field(strict=True, ge=0, le=64)] = 0
    arch: str = "sm_90"


class Correctness(_Section):
    broken: list[str]
    wrong: Count
    total: Count
    tolerance: NonNegative
    max_abs_error: Annotated[float, Field(ge=0)]  # inf where an element stayed NaN
    cell: Annotated[list[Positive], Field(min_length=2, max_length=2)]
    checked: str
    stale_reads: dict[str, Count] | None = None

    @model_validator(mode="after")
    def _wrong_of_total(self) -> Correctness:
        if self.wrong > self.total:
            raise ValueError("more wrong elements than C has")
        # the summary prints every outcome's count
        missing = [k for k in READ_KEYS.values() if self.stale_reads and k not in self.stale_reads]
        if missing:
            raise ValueError(f"stale_reads lacks {missing[0]}")
        return self


class Manifest(_Section):
    schema_version: Literal[2]  # schema 1 is migrated before this check
    kernel: str
    params: dict[str, int | str]
    M: Annotated[int, Field(strict=True, ge=1, le=MAX_DIM)]
    N: Annotated[int, Field(strict=True, ge=1, le=MAX_DIM)]
    K: Annotated[int, Field(strict=True, ge=1, le=MAX_DIM)]
    dtype: InputType
    backend: Literal["cuda", "sim"]
    level: Level
    description: Description
    device: Device
    timer: Timer
    geometry: Geometry
    sampling: Sampling
    software: dict[str, Any]
    stats: Stats
    occupancy: Occupancy | None = None
    correctness: Correctness | None = None  # absent in traces made before it
    details: dict[str, Any] | None = None


def _one_line(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in err["loc"])
    if err["type"] == "missing":
        return f"manifest lacks {where}"
    got = repr(err.get("input"))
    got = got if len(got) <= 40 else got[:37] + "..."
    msg = err["msg"][:1].lower() + err["msg"][1:]
    return f"manifest field '{where}': {msg}, got {got}"


def validate_manifest(manifest: dict[str, Any]) -> tuple[Manifest, KernelConfig]:
    """The typed manifest and its kernel configuration; MatvizError says what is wrong."""
    if not isinstance(manifest, dict):
        raise MatvizError("the manifest is not a JSON object")
    try:
        typed = Manifest.model_validate(manifest)
    except ValidationError as exc:
        raise MatvizError(_one_line(exc)) from None
    if typed.schema_version != SCHEMA_VERSION:  # the Literal pins it; this keeps them in step
        raise MatvizError(f"unknown schema_version {typed.schema_version}")
    config = get_kernel(typed.kernel).configure(typed.params, typed.M, typed.N, typed.K)
    geometry = typed.geometry
    if typed.description.name != config.kernel.name:
        raise MatvizError(f"the description is of kernel {typed.description.name!r}, "
                          f"not {typed.kernel!r}")  # fmt: skip
    if tuple(geometry.grid) != tuple(config.grid):
        raise MatvizError(f"manifest grid {geometry.grid} is not the kernel's {list(config.grid)}")
    if geometry.n_tiles != config.n_steps:
        raise MatvizError(
            f"manifest n_tiles {geometry.n_tiles} is not the kernel's {config.n_steps}"
        )
    if typed.correctness is not None:
        unknown = [n for n in typed.correctness.broken if n not in config.kernel.param_names]
        if unknown:
            raise MatvizError(f"correctness names {unknown[0]!r}, not a parameter of the kernel")
    return typed, config


def step_layout(description: Description) -> StepLayout:
    """The k-step layout the description declares (as Trace.layout reads it)."""
    try:
        kstep = description.kstep
        return StepLayout.of(kstep.model_dump() if kstep is not None else None)
    except (TypeError, KeyError, ValueError, AttributeError, StopIteration) as exc:
        reason = f"no {exc}" if isinstance(exc, KeyError) else str(exc) or "unreadable"
        raise MatvizError(f"the description's k-step is malformed ({reason})") from None


def array_caps(typed: Manifest, layout: StepLayout) -> dict[str, int]:
    """The most bytes each array can hold for this manifest, before anything is read."""
    gx, gy = typed.geometry.grid
    blocks = gx * gy
    steps = typed.geometry.n_tiles
    warps = typed.geometry.warps
    caps = {
        "blocks": blocks * BLOCK_DTYPE.itemsize,
        "phase_blocks": blocks * 8,
        "warp_blocks": blocks * 8,
        "marks": blocks * steps * len(layout.marks) * 8,
        # format 1 kept issue, loaded and computed apart
        "issue": blocks * steps * 8,
        "loaded": blocks * steps * 8,
        "computed": blocks * steps * 8,
        "barrier_wait": blocks * steps * warps * max(layout.n_barriers, 2) * 8,
        "probe": MAX_PROBE_ROWS * PROBE_DTYPE.itemsize,
        "c_wrong": MAP_EDGE * MAP_EDGE * 4,
        "stale": min(steps, VALUE_TILES) * MAX_PROBE_ROWS * 32,
        "delta_encoded": 64,
        "fragments": 4 * 32 * MAX_FRAGMENT_SLOTS * 2,
    }
    return {name: min(cap, MAX_ARRAY_BYTES) for name, cap in caps.items()}


def _nonnegative(name: str, arr: np.ndarray) -> None:
    if arr.size and arr.min() < 0:
        raise MatvizError(f"array {name} holds a negative time")


def check_arrays(typed: Manifest, arrays: dict[str, np.ndarray]) -> None:
    """Ranges the arrays must keep for the views to draw them: MatvizError when they do not."""
    gx, gy = typed.geometry.grid
    blocks = arrays["blocks"]
    if len(blocks) and (blocks["bx"].max() >= gx or blocks["by"].max() >= gy):
        raise MatvizError(f"array blocks names a block outside the {gx}x{gy} grid")
    sms = typed.device.sm_count or MAX_SMS
    if len(blocks) and blocks["smid"].max() >= sms:
        raise MatvizError(f"array blocks names SM {blocks['smid'].max()} of {sms}")
    _nonnegative("blocks", blocks["start"])
    for name in ("marks", "barrier_wait"):
        _nonnegative(name, arrays[name])
    marks, waits = arrays["marks"], arrays["barrier_wait"]
    if len(marks) and marks.shape[1] != typed.geometry.n_tiles:
        raise MatvizError(f"array marks has {marks.shape[1]} k-steps, the manifest says "
                          f"{typed.geometry.n_tiles}")  # fmt: skip
    if len(waits) and waits.shape[2] != typed.geometry.warps:
        raise MatvizError(f"array barrier_wait has {waits.shape[2]} warps, the manifest says "
                          f"{typed.geometry.warps}")  # fmt: skip
    probe = arrays["probe"]
    if len(probe):
        if not np.isin(probe["width"], PROBE_WIDTHS).all():
            raise MatvizError("array probe holds an access width that is not 1, 2, 4, 8 or 16")
        if not np.isin(probe["kind"], ("load", "store")).all():
            raise MatvizError("array probe holds an access that is neither load nor store")
        offsets = probe["offsets"]
        if offsets.min() < -1 or offsets.max() >= MAX_SMEM or probe["k"].min() < 0:
            raise MatvizError("array probe holds an offset outside shared memory")
    _check_correctness(typed, arrays)


def _check_correctness(typed: Manifest, arrays: dict[str, np.ndarray]) -> None:
    c_wrong, stale = arrays.get("c_wrong"), arrays.get("stale")
    if c_wrong is not None and c_wrong.size:
        cell = typed.correctness.cell if typed.correctness else None
        if cell is None:
            raise MatvizError("array c_wrong comes without a correctness section")
        expected = (-(-typed.M // cell[0]), -(-typed.N // cell[1]))
        if c_wrong.shape != expected:
            raise MatvizError(f"array c_wrong has shape {c_wrong.shape}, the manifest's cells "
                              f"make {expected}")  # fmt: skip
        if int(c_wrong.max()) > cell[0] * cell[1]:
            raise MatvizError("array c_wrong counts more wrong elements than a cell holds")
    if stale is not None and stale.size:
        if stale.min() < 0 or stale.max() >= len(READS):
            raise MatvizError("array stale holds an unknown read outcome")
        if stale.shape[1] != len(arrays["probe"]):
            raise MatvizError("array stale has not one row per probe row")

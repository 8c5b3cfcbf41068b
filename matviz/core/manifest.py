"""The one manifest builder: every backend describes its run through these typed sections.

A manifest is JSON: the run (kernel, parameters, shape, level, backend), the kernel's
description at those parameters, the device, the timer, the launch geometry, how blocks were
sampled, the software, the run's statistics, occupancy and global traffic, and a ``details``
section of what only one backend knows (the simulator's model; the recorder's command line).
Every section has the same keys whichever backend wrote it (a test checks this); a value a
backend cannot know is None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from matviz.core.config import KernelConfig

SCHEMA_VERSION = 2


@dataclass(frozen=True)
class Timer:
    name: str  # "globaltimer+clock64" or "simulated"
    resolution_ns: int
    block_times: str | None = None
    step_marks: str | None = None
    ns_per_cycle: float | None = None


@dataclass(frozen=True)
class Sampling:
    budget_bytes: int
    timeline_level: int  # the level of the run the blocks and marks come from
    phase_every: int = 1
    phase_blocks: int = 0
    warp_every: int | None = None
    warp_blocks: int = 0
    probe: dict[str, Any] | None = None  # block, warp, ktile (+ smem_base on hardware)
    diagnostics: str | None = None  # how the level-3 data was obtained


@dataclass(frozen=True)
class Stats:
    time_ms_median: float
    time_ms_min: float
    time_ms_max: float
    repeats: int
    gflops: float
    cublas_gflops: float | None
    pct_cublas: float | None
    rel_error: float | None = None
    rel_error_instrumented: float | None = None
    overhead_pct: float | None = None
    instrumented_ms_median: float | None = None
    cublas_ms_median: float | None = None
    span_ns: int | None = None
    event_ms: float | None = None
    span_vs_event: float | None = None
    diagnostics_ms: float | None = None
    diagnostics_overhead_pct: float | None = None
    last_arrival_wait_ns_max: int | None = None
    saturated_phase_spans: int | None = None
    # blocks per SM the instrumented build's registers were bounded to (level 0's), if they were
    instrumented_min_blocks: int | None = None
    # how the level-2 build kept its marks (config.STAMP_FORMS) and, where the recorder timed
    # several beside level 0 to choose, each one's overhead at the stride it kept
    stamp_form: str | None = None
    stamp_form_overheads_pct: dict[str, float] | None = None
    # each stride of stamping blocks the recorder timed beside level 0 to keep within its
    # overhead target (RunRequest.overhead_target_pct), in the order tried: [[every, %], ...]
    phase_every_overheads_pct: list[list[float]] | None = None


@dataclass(frozen=True)
class Correctness:
    """C against float64 (``matviz.core.correctness``): counts behind the ``c_wrong`` map."""

    broken: list[str]  # parameters set to a deliberately broken value: wrong results expected
    wrong: int  # elements of C off by more than ``tolerance``
    total: int
    tolerance: float
    max_abs_error: float
    cell: list[int]  # rows x columns of C per cell of the c_wrong map
    checked: str  # which run C comes from
    stale_reads: dict[str, int] | None = None  # the probed warp's shared loads, by outcome


@dataclass(frozen=True)
class Geometry:
    grid: list[int]
    block: list[int]
    threads: int
    warps: int
    smem_bytes: int
    n_tiles: int  # k-steps each block walks through
    registers: dict[str, int] = field(default_factory=dict)  # per build: level_0, level_2, ...

    @classmethod
    def of(cls, config: KernelConfig, registers: dict[str, int]) -> Geometry:
        return cls(
            grid=list(config.grid),
            block=list(config.block),
            threads=config.threads,
            warps=config.warps,
            smem_bytes=config.smem_bytes,
            n_tiles=config.n_steps,
            registers=dict(registers),
        )


def build_manifest(
    config: KernelConfig,
    *,
    backend: str,
    level: int,
    device: dict[str, Any],
    timer: Timer,
    geometry: Geometry,
    sampling: Sampling,
    software: dict[str, Any],
    stats: Stats,
    occupancy: dict[str, Any],
    correctness: Correctness,
    details: dict[str, Any],
) -> dict[str, Any]:
    """The manifest of one run, its keys in one fixed order for every backend."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kernel": config.kernel.name,
        "params": dict(config.params),
        "M": config.M,
        "N": config.N,
        "K": config.K,
        "dtype": config.input_dtype,
        "backend": backend,
        "level": level,
        "description": config.describe(),
        "device": dict(device),
        "timer": asdict(timer),
        "geometry": asdict(geometry),
        "sampling": asdict(sampling),
        "software": dict(software),
        "stats": asdict(stats),
        "occupancy": dict(occupancy),
        "flops": config.flops,
        "global_bytes": {"formula": config.formula_bytes, "issued": config.issued_bytes},
        "correctness": asdict(correctness),
        "details": dict(details),
    }

"""Guided lessons: steps that each open a recording (or a simulation), a block, a moment, a view
and an access, with a short explanation in English and 简体中文.

The steps are data (``resources/lessons/*.json``), validated here with pydantic; the app's
Lessons panel applies them and a test opens every one. A step's text may quote the trace's own
numbers through ``{placeholders}`` (:func:`facts`), so what it says is what the trace proves.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from matviz.core import metrics
from matviz.core.ceilings import issue_ceiling, shared_ceiling
from matviz.core.explain import dram_floor_bytes, inputs_bytes, measured_bytes, shared_reuse
from matviz.core.json_input import read_json_file
from matviz.core.trace import Trace
from matviz.errors import MatvizError
from matviz.paths import RESOURCE_DIR, TRACE_DIR

LESSON_DIR = RESOURCE_DIR / "lessons"
LANGUAGES = ("en", "zh_CN")
# the views a step can bring to the front (MainWindow.bring_to_front's names)
ViewName = Literal[
    "grid", "sm_lanes", "tiles", "banks", "coalescing", "fragments", "source", "errors",
    "throughput",
]  # fmt: skip


class Texts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    en: str = Field(min_length=1)
    zh_CN: str = Field(min_length=1)

    def get(self, language: str) -> str:
        return self.zh_CN if language.startswith("zh") else self.en


class Simulation(BaseModel):
    """A run the simulator makes when no recording shows the point (labelled simulated);
    its fields are a RunRequest's (``RunRequest(**simulation.model_dump())``)."""

    model_config = ConfigDict(extra="forbid")
    kernel: str
    M: int = Field(ge=1, le=8192)
    N: int = Field(ge=1, le=8192)
    K: int = Field(ge=1, le=8192)
    params: dict[str, int | str] = {}
    level: int = Field(default=3, ge=0, le=3)


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    section: str  # the lesson's section, e.g. "§7-9"
    title: Texts
    text: Texts
    trace: str | None = None  # a bundled recording's file name
    simulate: Simulation | None = None
    block: tuple[int, int] | Literal["middle"] = "middle"
    at: float = Field(default=0.3, ge=0.0, le=1.0)  # where the playhead goes, in the run
    view: ViewName
    access: str | None = None  # the banks instruction or coalescing request to show

    @model_validator(mode="after")
    def _one_source(self) -> Step:
        if (self.trace is None) == (self.simulate is None):
            raise ValueError("a step names either a bundled trace or a simulation")
        return self

    def trace_path(self) -> Path | None:
        return TRACE_DIR / self.trace if self.trace else None


class Lesson(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: Texts
    steps: list[Step] = Field(min_length=1)


def lesson_files() -> list[Path]:
    return sorted(LESSON_DIR.glob("*.json"))


MAX_LESSON_BYTES = 4 << 20  # lesson 8 is 41 KB


@lru_cache(maxsize=8)
def load_lesson(path: Path) -> Lesson:
    """The lesson in ``path``; a malformed file is one MatvizError line."""
    data = read_json_file(path, MAX_LESSON_BYTES, f"lesson {path}")
    try:
        return Lesson.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MatvizError(f"lesson {path}: {where}: {first['msg']}") from None


def facts(trace: Trace) -> dict[str, Any]:
    """The numbers a step's text may quote, from the trace itself."""
    stats = trace.manifest.get("stats", {})
    gflops = float(stats.get("gflops", 0.0) or 0.0)
    cublas = float(stats.get("cublas_gflops", 0.0) or 0.0)
    occupancy = trace.manifest.get("occupancy", {})
    return {
        "blocks": len(trace.blocks),
        "waves": metrics.waves(trace),
        "resident": metrics.max_resident(trace),
        "blocks_per_sm": occupancy.get("blocks_per_sm", "?"),
        "time_us": trace.duration_ns / 1e3,
        "gflops": gflops,
        "pct_cublas": 100.0 * gflops / cublas if cublas else 0.0,
        "requested_mb": float(trace.manifest.get("global_bytes", {}).get("issued", 0.0)) / 1e6,
        **_work_facts(trace),
        **_hierarchy_facts(trace),
        **_correctness_facts(trace),
    }


def _work_facts(trace: Trace) -> dict[str, Any]:
    """The GEMM's shape as a GPU sees it (§30): independent outputs, the threads that compute
    them, and the floating-point operations per byte of A, B and C that must move at least
    once."""
    config = trace.config
    threads = config.threads * config.n_blocks
    floor = dram_floor_bytes(config)
    return {
        "outputs": config.M * config.N,
        "threads": threads,
        "outputs_per_thread": config.M * config.N / threads,
        "gflop": config.flops / 1e9,
        "ab_mb": inputs_bytes(config) / 1e6,
        "floor_mb": floor / 1e6,  # and C written once
        "flop_per_byte": config.flops / floor,
    }


def _hierarchy_facts(trace: Trace) -> dict[str, Any]:
    """Each level of the data path (§31) where the trace knows it: what ncu measured at DRAM,
    L2 and the load instructions, the multiply-adds each value read from shared memory feeds,
    and what shared memory alone and issuing the k loop allow (:mod:`matviz.core.ceilings`). A
    fact the trace lacks is left out, so a step quoting it fails its test."""
    out: dict[str, Any] = {}
    measured = measured_bytes(trace.manifest)
    if measured is not None:
        out["dram_mb"] = measured["dram_read_bytes"] / 1e6
        out["l2_mb"] = measured["l2_bytes"] / 1e6
        out["l1_mb"] = measured["l1_global_load_bytes"] / 1e6
    reuse = shared_reuse(trace.config)
    if reuse is not None:
        out["fmas_per_shared_read"] = float(reuse["ratio"])
    ceiling = shared_ceiling(trace.config, trace.manifest.get("device"))
    if ceiling is not None:
        gflops = float(trace.manifest.get("stats", {}).get("gflops", 0.0) or 0.0)
        out["smem_ceiling_gflops"] = ceiling.gflops
        out["smem_ceiling_pct_peak"] = ceiling.pct_of_peak
        out["pct_of_smem_ceiling"] = 100.0 * gflops / ceiling.gflops
    issue = issue_ceiling(trace.config, trace.manifest.get("device"))
    if issue is not None:  # what issuing ptxas's k loop allows an FP32 kernel
        out["issue_instructions"] = issue.loop.instructions
        out["issue_share"] = issue.loop.math_share
        out["issue_ceiling_gflops"] = issue.gflops
    return out


def _correctness_facts(trace: Trace) -> dict[str, Any]:
    """Wrong elements of C and the probed warp's stale reads (none in an old trace)."""
    checked = trace.correctness or {}
    total = int(checked.get("total") or trace.shape[0] * trace.shape[1])
    wrong = int(checked.get("wrong") or 0)
    reads = checked.get("stale_reads") or {}
    return {
        "wrong": wrong,
        "total": total,
        "wrong_pct": 100.0 * wrong / total if total else 0.0,
        "reads_before": int(reads.get("before_written", 0)),
        "reads_overwritten": int(reads.get("overwritten", 0)),
    }


def render(text: str, trace: Trace) -> str:
    """``text`` with the trace's facts filled in ({waves}, {gflops:,.0f} ...)."""
    try:
        return text.format(**facts(trace))
    except (KeyError, ValueError, IndexError) as exc:
        raise MatvizError(f"a lesson text names a fact the trace lacks: {exc}") from None

"""Numbers the lessons quote, computed from a Trace.

Times are integer nanoseconds from kernel start, so FLOP per ns reads directly as GFLOP/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from matviz.core.trace import Trace
from matviz.errors import MatvizError

DEFAULT_BINS = 200
# Where a device record lacks a figure, the H200's (132 SMs, 1980 MHz boost, 128 FP32 FMA/clk/SM)
H200_PEAK_FIGURES: dict[str, Any] = {"name": "NVIDIA H200", "sm_count": 132, "clock_mhz": 1980,
                     "fp32_fma_per_clk_per_sm": 128}  # fmt: skip
# FP32 FMA units per SM by compute capability major (CUDA programming guide, arithmetic throughput)
FP32_FMA_PER_CLK = {7: 64, 8: 128, 9: 128, 10: 128, 12: 128}


# Dense fp16/bf16 Tensor Core multiply-adds per SM and clock by compute capability major, from
# NVIDIA's datasheets: A100 312 TFLOP/s (108 SMs, 1410 MHz), H100 SXM 989 (132 SMs, 1830 MHz)
TENSOR_FMA_PER_CLK = {8: 1024, 9: 2048}


def peak_gflops(device: dict | None, dtype: str = "float32") -> tuple[float, dict]:
    """The peak for inputs of ``dtype``: SMs x FMA/clk x 2 FLOP x clock, FP32 FMAs for float32,
    dense Tensor Core FMAs for float16 and bfloat16; and the figures it used (the H200's where
    the device lacks one)."""
    dev = dict(H200_PEAK_FIGURES)
    given = dict(device or {})
    major = str(given.get("compute_capability", "")).split(".")[0]
    if major.isdigit() and "fp32_fma_per_clk_per_sm" not in given:
        given["fp32_fma_per_clk_per_sm"] = FP32_FMA_PER_CLK.get(int(major), 128)
    dev.update({k: v for k, v in given.items() if k in H200_PEAK_FIGURES and v})
    fma = dev["fp32_fma_per_clk_per_sm"]
    if dtype != "float32":
        fma = dev["tensor_fma_per_clk_per_sm"] = tensor_fma_per_clk(device)
    gflops = dev["sm_count"] * fma * 2 * dev["clock_mhz"] / 1000.0
    return gflops, dev


def tensor_fma_per_clk(device: dict | None) -> int:
    """Dense fp16/bf16 Tensor Core multiply-adds per SM and clock for the device's compute
    capability (Hopper's where it is not in the table)."""
    major = str((device or {}).get("compute_capability", "")).split(".")[0]
    return TENSOR_FMA_PER_CLK.get(int(major) if major.isdigit() else 9, TENSOR_FMA_PER_CLK[9])


def total_flops(trace: Trace) -> float:
    """Useful FLOP of the whole GEMM: one multiply and one add per (m, n, k)."""
    m, n, k = trace.shape
    return 2.0 * m * n * k


# -- FLOP rate over time --------------------------------------------------------------------
# computing phases one curve spreads at most (a 4096^3 T16 trace has 8 million: 1.8 s)
MAX_PHASE_INTERVALS = 1 << 20


def _flop_intervals(
    trace: Trace,
    flops_per_block_tile: float | ArrayLike | None,
    max_intervals: int = MAX_PHASE_INTERVALS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start_ns, end_ns, flop) intervals whose flop sum to the GEMM's 2MNK.

    Beyond ``max_intervals`` computing phases, every n-th sampled row stands for the rows
    around it (their FLOP with it): the curve keeps its shape and its integral."""
    blocks = trace.blocks
    per_block = total_flops(trace) / len(blocks)
    sampled = np.unique(trace.phase_blocks) if trace.n_tiles else np.zeros(0, np.int64)

    # Blocks without phase marks spread their share evenly over their lifetime.
    plain = np.ones(len(blocks), bool)
    plain[sampled] = False
    starts = [blocks["start"][plain]]
    ends = [blocks["end"][plain]]
    flops = [np.full(int(plain.sum()), per_block)]

    computing = [ph for ph in trace.layout.phases if ph.phase.state == "computing"]
    if len(sampled) and computing:
        if flops_per_block_tile is None:
            flops_per_block_tile = 1.0  # every k-step does the same work: only ratios matter
        weight = np.broadcast_to(np.asarray(flops_per_block_tile, float), trace.marks.shape[:2])
        if np.any(weight < 0) or weight.sum() <= 0:
            raise ValueError("flops_per_block_tile must be non-negative and not all zero")
        rows, steps = trace.marks.shape[:2]
        stride = max(1, -(-rows * steps * len(computing) // max_intervals))
        marks, weight = trace.marks[::stride], weight[::stride]
        # Edge blocks do fewer useful FLOP than full tiles; rescale so the sampled blocks
        # together carry exactly their share of 2MNK. Only relative weights matter. A k-step
        # with several computing phases splits its FLOP equally between them.
        scale = per_block * len(sampled) / weight.sum() / len(computing)
        share = (weight * scale).ravel()
        for ph in computing:
            starts.append(marks[:, :, ph.begin].ravel())
            ends.append(marks[:, :, ph.end].ravel())
            flops.append(share)
    elif len(sampled):  # no phase computes: the sampled blocks spread theirs like the others
        starts.append(blocks["start"][sampled])
        ends.append(blocks["end"][sampled])
        flops.append(np.full(len(sampled), per_block))

    start = np.concatenate(starts).astype(np.float64)
    end = np.concatenate(ends).astype(np.float64)
    return start, end, np.concatenate(flops)


def _flop_per_bin(
    edges: np.ndarray, start: np.ndarray, end: np.ndarray, flop: np.ndarray
) -> np.ndarray:
    """FLOP each equal-width bin receives when every interval spreads its FLOP evenly.

    O(n) with bincount, no sort: an interval inside one bin adds all of its FLOP there; a longer
    one adds its partial first and last bins directly and its full middle bins through a
    difference array. Zero-length intervals land whole in their bin.
    """
    n = len(edges) - 1
    width = edges[1] - edges[0]
    a = (start - edges[0]) / width  # positions in bin units
    b = (end - edges[0]) / width
    first = np.clip(np.floor(a).astype(np.int64), 0, n - 1)
    last = np.clip(np.floor(b).astype(np.int64), 0, n - 1)
    # an instant on an edge belongs to the bin that ends there (the first edge: the first bin)
    instant = b == a
    first[instant] = last[instant] = np.clip(np.ceil(a[instant]).astype(np.int64) - 1, 0, n - 1)
    one = first == last
    out = np.bincount(first[one], weights=flop[one], minlength=n).astype(np.float64)
    many = ~one
    first, last, a, b = first[many], last[many], a[many], b[many]
    rate = flop[many] / (b - a)  # FLOP per bin width
    out += np.bincount(first, weights=(first + 1 - a) * rate, minlength=n)
    out += np.bincount(last, weights=(b - last) * rate, minlength=n)
    middle = np.bincount(first + 1, weights=rate, minlength=n + 1)
    middle -= np.bincount(last, weights=rate, minlength=n + 1)
    return out + np.cumsum(middle)[:n]


def flop_rate(
    trace: Trace,
    bins: int | None = None,
    flops_per_block_tile: float | ArrayLike | None = None,
    max_intervals: int = MAX_PHASE_INTERVALS,
) -> tuple[np.ndarray, np.ndarray]:
    """In-kernel FLOP rate over time: (bin centres in ns, GFLOP/s per bin).

    Sampled blocks' FLOP happen in the description's computing phases (from each phase's begin
    mark to its end mark, every k-step; several computing phases of a step share its FLOP
    equally), weighted per k-step by ``flops_per_block_tile`` (default: all equal; a scalar or
    an array shaped (phase rows, k-steps)); other blocks spread theirs over [start, end]. The
    equal-width bins span [0, duration] (wider only if a phase lies outside) and integrate to
    exactly 2MNK.
    """
    bins = DEFAULT_BINS if bins is None else int(bins)
    if bins < 1:
        raise ValueError(f"bins must be at least 1, not {bins}")
    if len(trace.blocks) == 0:
        edges = np.linspace(0.0, 1.0, bins + 1)
        return (edges[:-1] + edges[1:]) / 2, np.zeros(bins)

    start, end, flop = _flop_intervals(trace, flops_per_block_tile, max_intervals)
    lo = min(start.min(), 0.0)
    hi = max(end.max(), float(trace.duration_ns), lo + 1.0)
    edges = np.linspace(lo, hi, bins + 1)
    gflops = _flop_per_bin(edges, start, end, flop) / (edges[1] - edges[0])
    return (edges[:-1] + edges[1:]) / 2, gflops


# -- scheduling ---------------------------------------------------------------------------


def max_resident(trace: Trace, chunk: int = 1 << 20) -> int:
    """Most blocks alive at one instant, from the blocks' [start, end) intervals.

    The count peaks at a start: k starts at or before it minus the ends at or before it (an end
    at the same instant frees its slot first). Two sorted copies and chunked searches keep the
    memory at 16 bytes a block."""
    blocks = trace.blocks
    if len(blocks) == 0:
        return 0
    start = np.sort(blocks["start"])
    end = np.sort(np.maximum(blocks["end"], blocks["start"] + 1))  # zero-length: one slot
    best = 0
    for first in range(0, len(start), chunk):
        starts = start[first : first + chunk]
        alive = np.arange(first + 1, first + len(starts) + 1) - np.searchsorted(
            end, starts, side="right"
        )
        best = max(best, int(alive.max()))
    return best


def waves(trace: Trace) -> int:
    """How many rounds of resident blocks the grid needed: ceil(blocks / max resident)."""
    resident = max_resident(trace)
    return -(-len(trace.blocks) // resident) if resident else 0


def blocks_per_sm_histogram(trace: Trace, n_sms: int | None = None) -> np.ndarray:
    """Blocks each SM ran over the kernel, indexed by smid.

    The length is ``n_sms``, else ``manifest['device']['sm_count']`` when present, so idle SMs
    show as zeros; it grows if a smid lies beyond that.
    """
    if n_sms is None:
        n_sms = int(trace.manifest["device"].get("sm_count", 0))
    return np.bincount(trace.blocks["smid"].astype(np.int64), minlength=n_sms)


def _number(value: object) -> bool:
    """A JSON number: an int or a float, not a bool."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def achieved_gflops(trace: Trace) -> float:
    """2MNK over the median kernel time recorded in the manifest's stats, in GFLOP/s."""
    ms = trace.manifest["stats"].get("time_ms_median")
    if not _number(ms) or not ms > 0:
        raise MatvizError("the trace has no kernel timing (stats.time_ms_median): record it again")
    return total_flops(trace) / (ms * 1e6)


@dataclass(frozen=True)
class TimelineCost:
    """What instrumenting cost the run the timeline comes from: its build's level and how much
    slower (%) it ran than the plain kernel (level 0) in the same process; ``min_blocks``: the
    registers were bounded to keep level 0's blocks per SM; ``every``: 1 block in ``every``
    stamped its k-steps; ``denser``: (stride, overhead %) of the densest stamping timed, where
    the recorder stamped fewer blocks than that to keep within its target."""

    level: int
    overhead_pct: float
    min_blocks: int | None
    every: int = 1
    denser: tuple[int, float] | None = None


def whole_count(value: object) -> int | None:
    """``value`` where it is a whole number >= 1 (not a bool), else None: not said."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def timeline_cost(trace: Trace) -> TimelineCost | None:
    """The timeline's instrumentation cost, or None where the trace does not say (simulated)."""
    stats, m = trace.manifest["stats"], trace.manifest
    pct = stats.get("overhead_pct")
    if not _number(pct):
        return None
    sampling = m.get("sampling", {})
    level = int(sampling.get("timeline_level", m["level"]))
    every = whole_count(sampling.get("phase_every")) or 1
    tried = stats.get("phase_every_overheads_pct")
    denser = None  # the first stride timed, where the recorder went on to a sparser one
    if isinstance(tried, list) and tried and isinstance(tried[0], (list, tuple)):
        first = tried[0]
        stride = whole_count(first[0]) if len(first) == 2 else None
        if stride is not None and stride < every and _number(first[1]):
            denser = (stride, float(first[1]))
    bound = whole_count(stats.get("instrumented_min_blocks"))
    return TimelineCost(level, float(pct), bound, every, denser)


@dataclass(frozen=True)
class StampingSlowdown:
    """How much longer the blocks that stamped their k-steps ran than the blocks that did not,
    in the one launch the timeline comes from: the median of each group's start-to-end times.
    The k-step strips show stamping blocks, so their phases read that much long."""

    stamped: int
    others: int
    stamped_ns: float
    others_ns: float
    most_on_one_sm: int  # the most stamping blocks any one SM ran
    launch_ns: int  # the trace's duration, from kernel start

    @property
    def pct(self) -> float:
        return 100.0 * (self.stamped_ns / self.others_ns - 1.0)

    @property
    def extra_ns(self) -> float:
        return self.stamped_ns - self.others_ns

    @property
    def slowest_sm_pct(self) -> float:
        """What the stamping adds to the launch if it ends with the SM that ran the most
        stamping blocks, each that much longer: a launch ends with its slowest SM, so one
        stamping block an SM costs its extra time however few blocks stamp (H100, 4096³:
        kernel 10 BM256 13.9 µs of 320, 4.3%, where 4.6-5.6% was measured with 8-32 blocks
        stamping)."""
        return 100.0 * self.most_on_one_sm * max(self.extra_ns, 0.0) / self.launch_ns


def stamping_slowdown(trace: Trace) -> StampingSlowdown | None:
    """The slowdown of the stamping blocks, or None where the timeline was not measured
    (simulated) or where every block or none stamped (nothing to compare with)."""
    if timeline_cost(trace) is None:
        return None
    n = len(trace.blocks)
    stamped = np.zeros(n, bool)
    stamped[trace.phase_blocks] = True  # Trace keeps them inside the grid
    if stamped.all() or not stamped.any():
        return None
    life = (trace.blocks["end"] - trace.blocks["start"]).astype(np.float64)
    others = float(np.median(life[~stamped]))
    if not others > 0:
        return None
    count = int(stamped.sum())
    most = int(np.bincount(trace.blocks["smid"][stamped]).max())
    return StampingSlowdown(
        count, n - count, float(np.median(life[stamped])), others, most, trace.duration_ns
    )

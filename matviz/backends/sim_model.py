"""The simulator's per-block timing model: what one block of a configuration costs, and its jitter.

Two numbers per block drive the schedule (``matviz.backends.sim_schedule``), both from the
device file's ``model`` constants:

Everything a configuration contributes comes from its kernel description
(:class:`matviz.core.kernel.KernelConfig`); no kernel is named here.

* ``alone_ns`` (D): how long the block takes when it has the SM's pipes to itself, the latency
  path: ``block_prologue_ns`` + per k-step [``load_latency_ns`` + G + S + the k loop + 2
  barriers + the barrier skews] + ``block_epilogue_ns`` + the C tile's bytes at
  ``c_store_bytes_per_ns``, where
  G = the A and B bytes the block stages per k-step (``staged_per_step``) at the SM's share of
  the copy bandwidth x ``bandwidth_scale`` (they mostly hit L2; TMA copies x
  ``copy_engine_bandwidth_scale``, after ``copy_engine_latency_ns``), S = its shared stores: bank
  wavefronts (``banks.wavefronts`` over every warp's ``access_records``) x
  ``store_cycles_per_wavefront``, and the k loop = max(W, depth x (``k_step_latency_cycles`` +
  the multiply-adds one thread does per k x ``thread_fma_issue_cycles``)): a block of few warps
  cannot hide the latency of its dependent shared-load -> FMA chain, and a warp issues its
  micro-tile's multiply-adds one after another (kernel 08: 128 a thread per k).
* ``throughput_ns`` (X): SM time the block uses up when the SM is saturated: per k-step the
  smooth maximum (``overlap_sharpness``) of the shared-memory/FMA pipes, W + S, and the memory
  pipe, G. W is the larger of the step's FMAs (``fmas_per_step``) at the SM's FP32 rate and its
  shared-load wavefronts at 2 x (FMA rate / 32) x ``inner_loop_efficiency`` a clock (1/8 from
  first principles: every FFMA of the seed kernels needs two LDS wavefronts and the SM serves
  one a clock), over the share of the SM's ``sm_subpartitions`` its warps sit on (a 2-warp
  block: half). Wavefronts are counted from the access model over every warp, bank conflicts
  included, each load site the compiler can vectorise (:func:`vector_width`) at
  ``lds128_site_cost`` per 16-byte load (sqrt of it per 8-byte one); + ``tile_overhead_cycles``
  per warp. Register tiling (kernel 04) reuses a loaded value for several FMAs, so it needs
  fewer wavefronts per FMA and the same formula gives it a shorter k loop.

Barriers wait for the slowest warp: per-warp skews are exponential (``load_skew_ns``,
``compute_skew_frac`` x the k loop) and a barrier passes at their maximum + ``barrier_ns``.
A kernel without k-steps (one long loop per thread, e.g. 01_naive): K FMAs and 2K loads per
thread; the loads share the copy bandwidth x ``naive_reuse`` over the resident blocks, times
the sectors they need over those of row-major matrices (B column-major: 2.4-6.6x),
+ ``naive_latency_ns``. Alone on an SM a block runs ``naive_alone_speedup`` times faster than
beside b - 1 others (its loads meet no queue), so the SM's age priority lets older blocks finish
first: the H200 recording's block durations spread from 54 to 150 us around a median of 94 and
every SM runs 30-33 blocks.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache
from typing import Any

import numpy as np

from matviz.backends.devices import MODEL_DEFAULTS
from matviz.core import access, banks, coalescing
from matviz.core.config import KernelConfig
from matviz.core.instructions import vector_width
from matviz.core.metrics import tensor_fma_per_clk
from matviz.core.occupancy import Occupancy
from matviz.core.trace import PROBE_DTYPE

FLOAT_BYTES = 4


def site_costs(config: KernelConfig, lds128_cost: float) -> dict[str, Any]:
    """Bank wavefronts of one block's shared stores and loads in one k-step, from the sites.

    Every warp's accesses (``access.access_records``) are counted; a load site the compiler
    can vectorise (:func:`vector_width`) costs ``lds128_cost`` per 16-byte load, its square
    root per 8-byte one, relative to scalar loads. Cached: sims of one configuration at other
    sizes or seeds reuse it.
    """
    costs = _site_costs(_Sites(config), float(lds128_cost))
    return {**costs, "load_widths": dict(costs["load_widths"])}  # the cache's stays unshared


def clear_site_costs() -> None:
    _site_costs.cache_clear()


class _Sites:
    """A configuration keyed by what its access records depend on: the description, the
    parameters and the thread block (the sites see lanes and parameters, not M, N, K)."""

    __slots__ = ("config", "key")

    def __init__(self, config: KernelConfig):
        self.config = config
        self.key = (config.kernel, tuple(config.params.items()), config.block)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Sites) and self.key == other.key


@lru_cache(maxsize=256)
def _site_costs(sites: _Sites, lds128_cost: float) -> dict[str, Any]:
    config = sites.config
    loads = [rs for rs in config.sites if rs.site.kind == "load"]
    records = [access.access_records(config, w) for w in range(config.warps)]
    rec = np.concatenate(records) if records else np.zeros(0, PROBE_DTYPE)
    widths = {rs.name: vector_width(config, rs.name, records) for rs in loads}
    if len(rec) == 0:
        return {
            "load_wavefronts": 0.0,
            "store_wavefronts": 0,
            "store_factor": 1.0,
            "load_factor": 1.0,
            "bank_load_factor": 1.0,
            "load_widths": widths,
        }
    store, load = rec["kind"] == "store", rec["kind"] == "load"
    # rows follow config.program in every warp (the records' site field may be truncated)
    names = np.tile(np.array([name for name, _ in config.program], dtype=object), len(records))
    # A load counts as the 4-byte loads it stands for (a float4 site as the four scalar loads
    # ptxas would merge), each at its instruction's cost; a store at its own width's wavefronts.
    waves = banks.wavefronts(rec["offsets"], FLOAT_BYTES).astype(float)
    for width in np.unique(rec["width"][store]):
        rows = store & (rec["width"] == width)
        waves[rows] = banks.wavefronts(rec["offsets"][rows], int(width))
    ideal = (rec["offsets"] >= 0).any(axis=1).astype(float)  # one wavefront per 4-byte access
    cost = np.ones(len(rec))
    for name, width in widths.items():
        site = config.site(name).site
        rows = names == name
        if site.matrix_load:  # an ldmatrix: its own 16-byte rows' wavefronts, one instruction
            waves[rows] = banks.wavefronts(rec["offsets"][rows], site.width)
            continue
        scalars = site.width // FLOAT_BYTES
        cost[rows] = scalars * lds128_cost ** (math.log2(width / FLOAT_BYTES) / 2)
    return {
        "load_wavefronts": float((waves * cost)[load].sum()),
        "store_wavefronts": int(waves[store].sum()),
        "store_factor": _ratio(waves[store].sum(), ideal[store].sum()),
        "load_factor": _ratio((waves * cost)[load].sum(), ideal[load].sum()),
        "bank_load_factor": _ratio(waves[load].sum(), ideal[load].sum()),
        "load_widths": widths,
    }


def _ratio(a: float, b: float) -> float:
    return float(a / b) if b else 1.0


def max_exp_moments(scale: float, n: int) -> tuple[float, float]:
    """Mean and variance of the maximum of n independent exponentials of ``scale``."""
    i = np.arange(1, max(n, 1) + 1)
    return scale * float(np.sum(1.0 / i)), scale**2 * float(np.sum(1.0 / i**2))


def sector_ratio(config: KernelConfig) -> float:
    """Sectors per global load of this configuration over those of the same kernel with every
    matrix row-major: how much more memory traffic its layouts cost (1 when they are the
    default), from the coalescing model."""
    if not config.kernel.layouts(config.p):
        return 1.0
    row_major = dataclasses.replace(config.kernel, layouts=lambda p: {})
    plain = row_major.configure(config.params, config.M, config.N, config.K, check=False)
    return coalescing.sectors_per_request(config) / coalescing.sectors_per_request(plain)


def warp_math_per_k(config: KernelConfig) -> float:
    """Multiply-add instructions one warp issues per k of a step: a lane's FFMAs, or its share
    of the block's SASS MMA instructions."""
    lane_fmas = config.fmas_per_step / (config.step_depth * config.threads)
    if config.mma is None:
        return lane_fmas  # one FFMA per multiply-add
    m, n, k = config.mma.sass_shape
    return lane_fmas * 32 / (m * n * k)


def constant(device: dict, name: str) -> float:
    return float(device["model"].get(name, MODEL_DEFAULTS.get(name, 0.0)))


def block_model(config: KernelConfig, occ: Occupancy, device: dict) -> dict[str, Any]:
    """Nominal durations (ns) and skew scales of one block of this configuration."""
    m = device["model"]
    clk = device["clock_mhz"] / 1000.0  # cycles per ns
    n_blocks, sms = config.n_blocks, device["sm_count"]
    b = min(occ.blocks_per_sm, math.ceil(n_blocks / sms))
    resident = min(n_blocks, occ.resident_blocks)
    warps, threads = config.warps, config.threads
    bandwidth = device["copy_bandwidth_gbs"]  # GB/s = bytes/ns
    # the block's C tile leaves at the SM's store rate after its last k-step (kernel 11's 128 KB
    # tile took 2.5 us of its 13 at 1024^3 on the H200)
    rows, cols = config.launch.c_tile
    store_rate = constant(device, "c_store_bytes_per_ns")
    c_store = rows * cols * FLOAT_BYTES / store_rate if store_rate else 0.0
    epilogue = m["block_epilogue_ns"] + c_store
    ends = m["block_prologue_ns"] + epilogue
    out: dict[str, Any] = {
        "blocks_per_sm_used": b,
        "resident_blocks": resident,
        "warps": warps,
        "n_tiles": config.n_steps,
        "prologue_ns": m["block_prologue_ns"],
        "epilogue_ns": epilogue,
        "barrier_ns": m["barrier_ns"],
    }
    if not config.n_steps:  # no k-steps: one long loop per thread, no barriers
        K = config.K
        loads = 2 * K * FLOAT_BYTES * threads * resident / (bandwidth * m["naive_reuse"])
        loads *= sector_ratio(config)  # a layout the lanes read across costs more sectors
        fmas = K * threads * b / (device["fp32_fma_per_clk_per_sm"] * clk)
        body = m["naive_latency_ns"] + max(loads, fmas)
        skew = m["naive_skew_frac"] * body
        shared = ends + body + max_exp_moments(skew, warps)[0]  # with b - 1 others on the SM
        # alone, a block's loads meet no queue: it runs s times faster, so the SM's age
        # priority lets older blocks finish first, as the recording shows
        speedup = min(max(constant(device, "naive_alone_speedup"), 1.0), float(b))
        return out | {
            "body_ns": body,
            "skew_scale_ns": (skew, 0.0),
            "alone_ns": shared / speedup,
            "throughput_ns": shared / b,
            "cap": speedup / b,
        }
    costs = site_costs(config, m["lds128_site_cost"])
    step_bytes = sum(config.staged_per_step.values()) * config.element_bytes("A")
    # the copy engine (TMA) moves a kernel's tiles without the load-store unit: its own share
    # of the copy bandwidth, fitted to kernel 11
    scale = m["bandwidth_scale"]
    if config.copies:
        scale = constant(device, "copy_engine_bandwidth_scale") or scale
    memory = step_bytes * min(sms, n_blocks) / (bandwidth * scale)
    store = costs["store_wavefronts"] * m["store_cycles_per_wavefront"] / clk
    # The k loop is bound by the shared-memory pipe or by the FMA pipe. The SM serves
    # fma_per_clk / 32 warp-FFMAs a clock; at inner_loop_efficiency = 1/8 it serves
    # 2 x that x 1/8 = 1 shared wavefront a clock (the seed kernels need 2 per FFMA).
    fma_per_clk = device["fp32_fma_per_clk_per_sm"]
    wavefronts_per_clk = 2 * fma_per_clk / 32 * m["inner_loop_efficiency"]
    lds = costs["load_wavefronts"] / wavefronts_per_clk
    # a Tensor Core kernel's multiply-adds run at the SM's dense MMA rate instead
    math_per_clk = tensor_fma_per_clk(device) if config.mma else fma_per_clk
    work = max(lds, config.fmas_per_step / math_per_clk) / clk
    # A warp issues on one sub-partition of the SM (its scheduler, FMA lanes, Tensor Core) for
    # its whole life. The model takes a block's warps to sit on sub-partitions 0, 1, ... as
    # every block of the launch does, so a block of fewer warps than sub-partitions has only
    # that share of the pipes, however many such blocks the SM holds. Not measured directly:
    # 06 and 07 with 2-warp blocks (BM64 BN64 TM8 TN8) ran at 36-54% of the FP32 peak on the
    # H200 at 4096^3, and without this term were simulated 1.2-2.1x too fast.
    subs = int(constant(device, "sm_subpartitions"))  # load_device checked it: 1 or more
    work /= min(warps, subs) / subs
    work += warps * m["tile_overhead_cycles"] / clk  # address math, LDG/STS, loop, per warp
    # alone, a warp issues its own multiply-adds one after another: a thread's micro-tile of
    # TM x TN sums costs TM x TN issue slots per k however idle the SM's other pipes are; a
    # Tensor Core warp issues one MMA instruction for m x n x k of them
    per_k = constant(device, "k_step_latency_cycles")
    per_k += warp_math_per_k(config) * constant(device, "thread_fma_issue_cycles")
    k_loop = max(work, config.step_depth * per_k / clk)
    latency = m["load_latency_ns"]
    if config.copies:  # the copy engine's own latency, fitted to kernel 11 (0: the loads')
        latency = constant(device, "copy_engine_latency_ns") or latency
    load = latency + memory + store
    q = m["overlap_sharpness"]
    pipes = ((work + store) ** q + memory**q) ** (1 / q)
    skews = (m["load_skew_ns"], m["compute_skew_frac"] * k_loop)
    mean_skew = sum(max_exp_moments(s, warps)[0] for s in skews)
    # A pipeline of S stages issues a step's copy S - 1 steps ahead, so in the steady state
    # S - 1 steps (each its compute, its barrier and its own wait) cover a copy's latency: a
    # step waits for what its compute leaves of 1 / (S - 1) of it, and the warps still issue
    # the copies' instructions in every step. Only the first copy is waited for whole. One
    # step at a time, the whole load comes before each compute. (Covering it with S - 1
    # computes alone, as if those steps had waited for nothing, ran kernel 10 BM256 S3 37%
    # slower than the H200.)
    ahead = config.layout.in_flight - 1
    barriers = (m["barrier_ns"], m["barrier_ns"] if not ahead else 0.0)
    if not config.n_barriers:  # a warp-specialised ring: its warps wait on mbarriers only
        barriers = (0.0, 0.0)
    steady = (load - store) / ahead if ahead else 0.0
    exposed = store + max(steady - k_loop - sum(barriers), 0.0) if ahead else load
    # However deep the pipeline, a step's tiles must arrive: with every SM copying, no step is
    # shorter than the memory term, and what its compute does not cover it waits. The H200 ran
    # kernel 10 BM256 S3 and S4 in the same 641 ns a step (without this the model ran S4 18%
    # fast). The copy engine's term is fitted as a latency, not a rate (kernel 11 BN128 S4
    # took 447 ns steps against its 578 ns): no floor there.
    if not config.copies:
        exposed = max(exposed, memory - k_loop - sum(barriers))
    first_extra = load - exposed
    period = exposed + k_loop + sum(barriers) + mean_skew  # one k-step, alone
    alone = ends + first_extra + config.n_steps * period
    cap = min(pipes / period, 1.0)  # the SM share a block running alone uses
    return (
        out
        | costs
        | {
            "step_bytes": step_bytes,
            "memory_ns": memory,
            "store_ns": store,
            "copy_ns": load,
            "load_ns": exposed,  # the part of a step's load its block waits for
            "first_load_extra_ns": first_extra,
            "segment_barrier_ns": list(barriers),
            "work_ns": work,
            "compute_ns": k_loop,
            "pipe_ns": pipes,
            "skew_scale_ns": skews,
            "alone_ns": alone,
            "throughput_ns": alone * cap,
            "cap": cap,
        }
    )


# -- random skews --------------------------------------------------------------------------------
def _max_exp(rng: np.random.Generator, scale: np.ndarray, n: int, shape: tuple) -> np.ndarray:
    """Samples of the maximum of n exponentials (inverse CDF: one uniform per sample)."""
    u = rng.random(shape, dtype=np.float32)  # float32: half the time, ample precision
    with np.errstate(divide="ignore"):
        np.log(u, out=u)
        u /= n
        np.expm1(u, out=u)
        np.negative(u, out=u)
        np.log(u, out=u)
    return -np.asarray(scale, np.float32) * u


def skew_moments(model: dict) -> tuple[float, float]:
    """Mean and variance of a block's summed barrier skews."""
    n = max(model["n_tiles"], 1)
    mean = var = 0.0
    for scale in model["skew_scale_ns"]:
        mu, v = max_exp_moments(scale, model["warps"])
        mean, var = mean + n * mu, var + n * v
    return mean, var


def total_skews(rng, model: dict, shape) -> np.ndarray:
    """Blocks' summed barrier skews: a gamma matched to the sum of per-tile maxima."""
    mean, var = skew_moments(model)
    if mean <= 0:
        return np.zeros(shape)
    return rng.gamma(mean * mean / var, var / mean, shape)


def tile_skews(rng, model: dict, totals: np.ndarray) -> np.ndarray:
    """Per-tile (load, compute) barrier skews of some blocks, rescaled to their totals."""
    scale = np.asarray(model["skew_scale_ns"])
    skews = _max_exp(rng, scale, model["warps"], (len(totals), model["n_tiles"], 2))
    sums = skews.sum(axis=(1, 2))
    factor = np.divide(totals, sums, out=np.zeros_like(totals), where=sums > 0)
    return skews * factor[:, None, None]


def tile_offsets(model: dict, skews: np.ndarray) -> np.ndarray:
    """Times from block start of every tile's (loaded, computed), alone, interleaved: (rows, 2T)."""
    seg = np.empty(skews.shape)
    barriers = model.get("segment_barrier_ns", [model["barrier_ns"]] * 2)
    seg[..., 0] = model.get("load_ns", 0.0) + barriers[0] + skews[..., 0]
    seg[..., 1] = model.get("compute_ns", 0.0) + barriers[1] + skews[..., 1]
    rows, tiles = skews.shape[0], skews.shape[1]
    if tiles:
        seg[:, 0, 0] += model.get("first_load_extra_ns", 0.0)  # a pipeline's first copy
    return model["prologue_ns"] + np.cumsum(seg.reshape(rows, 2 * tiles), axis=1)


def shared_jitter(rng, marks, begin, finish, offsets, sigma: float) -> np.ndarray:
    """Marks (rows, 2T) with phases jittered in proportion to how much they were slowed.

    A block below its alone speed lives on the SM's leftover capacity, which fluctuates with
    what the older blocks are doing: each phase's length gets a relative normal jitter of
    ``sigma`` x (1 - alone / actual length), and the phases are rescaled to keep ``begin`` and
    ``finish``: the block's schedule does not change, its tiles drift out of step.
    """
    if sigma <= 0 or marks.size == 0:
        return marks
    actual = np.empty_like(marks)
    actual[:, 0] = marks[:, 0] - begin
    np.subtract(marks[:, 1:], marks[:, :-1], out=actual[:, 1:])
    np.maximum(actual, 1e-9, out=actual)
    nominal = np.empty_like(offsets)
    nominal[:, 0] = offsets[:, 0]
    np.subtract(offsets[:, 1:], offsets[:, :-1], out=nominal[:, 1:])
    nominal *= ((finish - begin) / np.maximum(offsets[:, -1], 1e-9))[:, None]
    slowed = np.clip(1.0 - nominal / actual, 0.0, 1.0)  # 0 at alone speed
    slowed *= rng.standard_normal(actual.shape, dtype=np.float32)
    slowed *= sigma
    slowed += 1.0
    actual *= np.maximum(slowed, 0.25)
    np.cumsum(actual, axis=1, out=actual)
    actual *= ((finish - begin) / np.maximum(actual[:, -1], 1e-9))[:, None]
    return actual + begin[:, None]


def warp_arrivals(rng, model: dict, skews, marks, begins) -> np.ndarray:
    """When each warp reached each barrier: (rows, tiles, warps, 2).

    ``marks`` (rows, tiles, 2) are the barriers' release times (loaded, computed) and ``begins``
    the phases' starts (issue, loaded). Each warp's nominal skew is exponential truncated to the
    block's (the slowest warp's) and scaled like its phase was stretched, so the slowest warp
    arrives ``barrier_ns`` before the release.
    """
    warps, barrier = model["warps"], model["barrier_ns"]
    scale = np.maximum(np.asarray(model["skew_scale_ns"]), 1e-9)[None, None, None, :]
    top = skews[:, :, None, :]
    u = rng.random(skews.shape[:2] + (warps, 2))
    each = -scale * np.log1p(-u * -np.expm1(-top / scale))  # exponential truncated to [0, top]
    slowest = rng.integers(0, warps, skews.shape[:2] + (1, 2))
    np.put_along_axis(each, slowest, top, axis=2)
    each = np.minimum(each, top)
    base = np.array([model.get("load_ns", 0.0), model.get("compute_ns", 0.0)])
    nominal = base + skews  # phase length up to the slowest arrival
    stretch = np.divide(
        np.maximum(marks - begins - barrier, 0.0),
        nominal,
        out=np.ones_like(nominal),
        where=nominal > 0,
    )
    late = (top - each) * stretch[:, :, None, :]
    return np.rint(marks[:, :, None, :] - barrier - late).astype(np.int64)

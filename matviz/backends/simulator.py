"""Simulated traces for machines without a GPU: same schema as a recording, backend ``"sim"``.

The model, per configuration (constants from the device file's ``model`` section):

* Occupancy (``matviz.core.occupancy``) gives b resident blocks per SM and R = b x SMs on the chip.
* Load phase of a k-tile (issue -> barrier 1): ``load_latency_ns`` + the A and B tile bytes over
  this block's share (1/R) of the copy bandwidth x ``bandwidth_scale`` (tiles mostly hit L2) +
  the tile's shared stores: their bank wavefronts (``banks.wavefronts`` over every warp's
  ``access_records``) x b blocks sharing the SM's one wavefront/clk x
  ``store_cycles_per_wavefront``.
* Compute phase (barrier 1 -> barrier 2): W = T^3 FMAs over the SM's FP32 rate x
  ``inner_loop_efficiency`` (1/8 from first principles: every FFMA of a warp needs two LDS
  wavefronts and the SM serves one a clock), x the load sites' cost factor: bank wavefronts over
  the ideal count, with the ``ld_As`` site at ``lds128_site_cost`` per 16-byte vector load (sqrt
  of it per 8-byte one) where the access model shows the compiler can vectorise it (PAD 0 or
  4: LDS.128), + ``tile_overhead_cycles`` per warp (address math, LDG/STS, loop). The b blocks
  of an SM overlap: one loads while another computes, so a block's tile period L + C is a
  smooth maximum of its own latency path L + W and the SM's throughput bound bW:
  ((L + W)^q + (bW)^q - W^q)^(1/q), q = ``overlap_sharpness`` (exactly L + W when b = 1).
* Barriers wait for the slowest warp: per-warp skews are exponential (``load_skew_ns``,
  ``compute_skew_frac`` x C) and a barrier passes at their maximum + ``barrier_ns``.
* Naive kernel (no tiles): K FMAs and 2K loads per thread; the loads share the copy bandwidth x
  ``naive_reuse`` (L1/L2 reuse) over the R resident blocks, + ``naive_latency_ns``.
* Scheduling (discrete events): blocks leave in linear blockIdx order (x fastest). The first wave
  fills the SMs round robin, block i on SM i % SMs ("the SM with the most free slots, lowest
  smid on ties"; real hardware interleaves GPCs, so its smids differ); after that each block
  takes the slot that frees first (ties: lowest fill round, then lowest smid), starting
  ``block_launch_ns`` later. Start times therefore rise with the block index.

Randomness is a numpy Generator seeded with ``seed`` (stored as ``sim_seed``): each block's total
skew comes from one stream, so block times do not depend on the level or the trace budget.
"""

from __future__ import annotations

import heapq
import math
import platform
from functools import lru_cache
from typing import Any

import numpy as np

import matviz
from matviz.backends.devices import DEFAULT_DEVICE, hardware, load_device
from matviz.core import access, banks, catalog, sampling
from matviz.core.occupancy import Occupancy, occupancy
from matviz.core.trace import SCHEMA_VERSION, Trace, make_blocks
from matviz.errors import MatvizError

FLOAT_BYTES = 4


# -- the analytic block model --------------------------------------------------------------------
@lru_cache(maxsize=256)
def site_costs(kernel: str, tile: int, pad: int, warps: int, lds128_cost: float) -> dict:
    """Bank wavefronts of one block-tile's shared stores and loads, from the access model."""
    records = [access.access_records(kernel, tile, pad, w) for w in range(warps)]
    rec = np.concatenate(records)
    if len(rec) == 0:
        return {
            "store_wavefronts": 0,
            "store_factor": 1.0,
            "load_factor": 1.0,
            "bank_load_factor": 1.0,
            "ld_As_width": 4,
        }
    waves = banks.wavefronts(rec["offsets"], FLOAT_BYTES).astype(float)
    ideal = (rec["offsets"] >= 0).any(axis=1).astype(float)  # one wavefront per 4-byte access
    store, load = rec["kind"] == "store", rec["kind"] == "load"
    width = _vector_width(kernel, tile, pad)
    cost = np.where(rec["site"] == "ld_As", lds128_cost ** (math.log2(width / 4) / 2), 1.0)
    return {
        "store_wavefronts": int(waves[store].sum()),
        "store_factor": float(waves[store].sum() / ideal[store].sum()),
        "load_factor": float((waves * cost)[load].sum() / ideal[load].sum()),
        "bank_load_factor": float(waves[load].sum() / ideal[load].sum()),
        "ld_As_width": width,
    }


def _vector_width(kernel: str, tile: int, pad: int) -> int:
    """Widest load (16, 8 or 4 bytes) the compiler can use at ld_As: consecutive k, aligned.

    nvcc's PTX agrees: ld.shared.v4 at PAD 0 and 4, v2 at PAD 2, scalar at PAD 1 and for the
    transposed kernel (whose ld_As walks a column).
    """
    k0 = access.lane_offsets(kernel, tile, pad, 0, "ld_As", 0)
    k1 = access.lane_offsets(kernel, tile, pad, 0, "ld_As", 1)
    on = k0 >= 0
    if not on.any() or np.any(k1[on] - k0[on] != FLOAT_BYTES):
        return 4
    for width in (16, 8):
        rows_aligned = (tile + pad) * FLOAT_BYTES % width == 0 and np.all(k0[on] % width == 0)
        if rows_aligned and tile % (width // FLOAT_BYTES) == 0:
            return width
    return 4


def _max_exp_moments(scale: float, n: int) -> tuple[float, float]:
    """Mean and variance of the maximum of n independent exponentials of ``scale``."""
    i = np.arange(1, max(n, 1) + 1)
    return scale * float(np.sum(1.0 / i)), scale**2 * float(np.sum(1.0 / i**2))


def block_model(spec, params, geometry, occ: Occupancy, device: dict, K: int) -> dict[str, Any]:
    """Nominal phase durations (ns) and skew scales of one block of this configuration."""
    m = device["model"]
    clk = device["clock_mhz"] / 1000.0  # cycles per ns
    n_blocks = geometry.n_blocks
    b = min(occ.blocks_per_sm, math.ceil(n_blocks / device["sm_count"]))
    resident = min(n_blocks, occ.resident_blocks)
    warps, tile = geometry.warps_per_block, params["tile"]
    bandwidth = device["copy_bandwidth_gbs"]  # GB/s = bytes/ns
    out: dict[str, Any] = {
        "blocks_per_sm_used": b,
        "resident_blocks": resident,
        "warps": warps,
        "n_tiles": geometry.n_tiles,
        "prologue_ns": m["block_prologue_ns"],
        "epilogue_ns": m["block_epilogue_ns"],
        "barrier_ns": m["barrier_ns"],
    }
    if not geometry.n_tiles:  # naive: one long loop per thread, no barriers
        loads = 2 * K * FLOAT_BYTES * geometry.threads * resident / (bandwidth * m["naive_reuse"])
        fmas = K * geometry.threads * b / (device["fp32_fma_per_clk_per_sm"] * clk)
        body = m["naive_latency_ns"] + max(loads, fmas)
        return out | {"body_ns": body, "skew_scale_ns": (m["naive_skew_frac"] * body, 0.0)}
    costs = site_costs(spec.name, tile, params.get("pad", 0), warps, m["lds128_site_cost"])
    tile_bytes = 2 * tile * tile * FLOAT_BYTES
    store_ns = costs["store_wavefronts"] * b * m["store_cycles_per_wavefront"] / clk
    load = m["load_latency_ns"] + tile_bytes * resident / (bandwidth * m["bandwidth_scale"])
    load += store_ns
    fma_rate = device["fp32_fma_per_clk_per_sm"] * clk * m["inner_loop_efficiency"]
    work = tile**3 * costs["load_factor"] / fma_rate
    work += warps * m["tile_overhead_cycles"] / clk  # address math, LDG/STS, loop, per warp
    mean_load = load + _max_exp_moments(m["load_skew_ns"], warps)[0] + m["barrier_ns"]
    q = m["overlap_sharpness"]  # smooth max of the latency path and the SM's throughput bound
    period = ((mean_load + work) ** q + (b * work) ** q - work**q) ** (1 / q)
    compute = period - mean_load
    return (
        out
        | costs
        | {
            "tile_bytes": tile_bytes,
            "store_ns": store_ns,
            "load_ns": load,
            "work_ns": work,
            "compute_ns": compute,
            "compute_sharing": compute / work,
            "skew_scale_ns": (m["load_skew_ns"], m["compute_skew_frac"] * compute),
        }
    )


# -- scheduling --------------------------------------------------------------------------------
def schedule(
    durations: np.ndarray,
    n_sms: int,
    blocks_per_sm: int,
    *,
    launch_ns: float = 0.0,
    dispatch_ns: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Start times (float ns) and SM ids of blocks in linear launch order (module docstring)."""
    n = len(durations)
    first = min(n, n_sms * blocks_per_sm)
    idx = np.arange(first)
    start = np.empty(n)
    smid = np.empty(n, np.int64)
    start[:first] = idx * dispatch_ns
    smid[:first] = idx % n_sms
    ends = start[:first] + durations[:first]
    heap = list(zip(ends.tolist(), (idx // n_sms).tolist(), smid[:first].tolist(), strict=True))
    heapq.heapify(heap)
    rest_start, rest_sm = [], []
    for d in durations[first:].tolist():  # O(blocks log slots): one heap step per block
        t, rnd, sm = heap[0]
        t += launch_ns
        heapq.heapreplace(heap, (t + d, rnd, sm))
        rest_start.append(t)
        rest_sm.append(sm)
    start[first:] = rest_start
    smid[first:] = rest_sm
    return start, smid


# -- random skews --------------------------------------------------------------------------------
def _max_exp(rng: np.random.Generator, scale: np.ndarray, n: int, shape: tuple) -> np.ndarray:
    """Samples of the maximum of n exponentials (inverse CDF: one uniform per sample)."""
    u = rng.random(shape)
    with np.errstate(divide="ignore"):
        return -scale * np.log(-np.expm1(np.log(u) / n))


def _total_skews(rng, model: dict, n_blocks: int) -> np.ndarray:
    """Each block's summed barrier skews: a gamma matched to the sum of per-tile maxima."""
    n = max(model["n_tiles"], 1)
    mean = var = 0.0
    for scale in model["skew_scale_ns"]:
        mu, v = _max_exp_moments(scale, model["warps"])
        mean, var = mean + n * mu, var + n * v
    if mean <= 0:
        return np.zeros(n_blocks)
    return rng.gamma(mean * mean / var, var / mean, n_blocks)


def _tile_skews(rng, model: dict, totals: np.ndarray) -> np.ndarray:
    """Per-tile (load, compute) barrier skews of some blocks, rescaled to their totals."""
    scale = np.asarray(model["skew_scale_ns"])
    skews = _max_exp(rng, scale, model["warps"], (len(totals), model["n_tiles"], 2))
    sums = skews.sum(axis=(1, 2))
    factor = np.divide(totals, sums, out=np.zeros_like(totals), where=sums > 0)
    return skews * factor[:, None, None]


def _warp_arrivals(rng, model: dict, skews, start, offsets) -> np.ndarray:
    """When each warp reached each barrier: its own skew, the slowest one's = the block's."""
    warps = model["warps"]
    scale = np.maximum(np.asarray(model["skew_scale_ns"]), 1e-9)[None, None, None, :]
    top = skews[:, :, None, :]
    u = rng.random(skews.shape[:2] + (warps, 2))
    each = -scale * np.log1p(-u * -np.expm1(-top / scale))  # exponential truncated to [0, top]
    slowest = rng.integers(0, warps, skews.shape[:2] + (1, 2))
    np.put_along_axis(each, slowest, top, axis=2)
    each = np.minimum(each, top)
    loaded = start[:, None] + offsets[:, 0::2]
    issue = np.concatenate(
        [start[:, None] + model["prologue_ns"], start[:, None] + offsets[:, 1:-1:2]], axis=1
    )
    each[..., 0] += (issue + model["load_ns"])[:, :, None]
    each[..., 1] += (loaded + model["compute_ns"])[:, :, None]
    return np.rint(each).astype(np.int64)


# -- the public entry point -----------------------------------------------------------------------
def simulate(
    kernel: str,
    M: int,
    N: int,
    K: int,
    *,
    tile: int | None = None,
    pad: int | None = None,
    level: int = 2,
    device=None,
    seed: int = 0,
    budget_bytes: int = sampling.DEFAULT_BUDGET_BYTES,
    phase_every: int = 1,
    probe_block: tuple[int, int] = (0, 0),
    probe_warp: int = 0,
    probe_ktile: int = 0,
    registers: int | None = None,
) -> Trace:
    """A simulated trace of ``kernel`` on ``device`` (a bundled name, a JSON path or a dict).

    ``registers`` overrides the per-thread register count occupancy uses (default: nvcc at this
    level, else the catalog's estimate).
    """
    spec = catalog.get_kernel(kernel)
    params = spec.resolve_params(tile=tile, pad=pad)
    for label, value, low in (
        ("seed", seed, 0),
        ("budget_bytes", budget_bytes, 1),
        ("registers", 1 if registers is None else registers, 1),
    ):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise MatvizError(f"{label} must be a whole number >= {low} (got {value!r})")
    if level not in catalog.LEVELS:
        raise MatvizError(f"level must be one of {catalog.LEVELS} (got {level})")
    dev = load_device(DEFAULT_DEVICE if device is None else device)
    limit = min(catalog.STATIC_SMEM_LIMIT, dev["smem_per_block"])
    geom = spec.validate(params, M, N, K, smem_limit=limit)
    _check_probe(geom, probe_block, probe_warp, probe_ktile)
    occ = occupancy(spec, params, M, N, K, dev, level=level, registers=registers)
    if occ.blocks_per_sm < 1:
        raise MatvizError(
            f"a block of {spec.name} {params} cannot run on {dev['name']}: "
            f"its {occ.limiter} exceed what one SM has"
        )
    model = block_model(spec, params, geom, occ, dev, K)
    n_blocks, n_tiles = geom.n_blocks, geom.n_tiles
    rng_total, rng_tile, rng_extra, rng_warp = (
        np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(4)
    )

    # Every block's duration; blocks with per-tile detail get theirs from their own tiles.
    totals = _total_skews(rng_total, model, n_blocks)
    body = (
        model["body_ns"]
        if not n_tiles
        else n_tiles * (model["load_ns"] + model["compute_ns"] + 2 * model["barrier_ns"])
    )
    durations = model["prologue_ns"] + body + totals + model["epilogue_ns"]
    every = sampling.phase_every(n_blocks, n_tiles, budget_bytes, phase_every) if level >= 2 else 1
    warp_every = sampling.warp_every(n_blocks, every) if level >= 3 else 1
    phase_rows = np.arange(0, n_blocks, every) if level >= 2 and n_tiles else np.zeros(0, int)
    warp_rows = np.arange(0, n_blocks, warp_every) if level >= 3 and n_tiles else np.zeros(0, int)
    extra = np.setdiff1d(warp_rows, phase_rows)  # warp-sampled blocks outside the phase sample
    detail = np.concatenate([phase_rows, extra])
    skews = np.concatenate(
        [
            _tile_skews(rng_tile, model, totals[phase_rows]),
            _tile_skews(rng_extra, model, totals[extra]),
        ]
    )
    offsets = _tile_offsets(model, skews)
    if len(detail):
        durations[detail] = offsets[:, -1] + model["epilogue_ns"]

    start, smid = schedule(
        durations,
        dev["sm_count"],
        occ.blocks_per_sm,
        launch_ns=dev["model"]["block_launch_ns"],
        dispatch_ns=dev["model"]["dispatch_interval_ns"],
    )
    blocks = make_blocks(*geom.grid)
    blocks["smid"] = smid
    blocks["start"] = np.rint(start)
    blocks["end"] = np.rint(start + durations)

    arrays: dict[str, np.ndarray] = {}
    if len(phase_rows):
        marks = np.rint(start[phase_rows, None] + offsets[: len(phase_rows)]).astype(np.int64)
        issue = np.empty_like(marks[:, 0::2])
        issue[:, 0] = np.rint(start[phase_rows] + model["prologue_ns"])
        issue[:, 1:] = marks[:, 1:-1:2]  # a tile's loads go out when the last one is computed
        arrays.update(
            phase_blocks=phase_rows.astype(np.int64),
            issue=issue,
            loaded=np.ascontiguousarray(marks[:, 0::2]),
            computed=np.ascontiguousarray(marks[:, 1::2]),
        )
    if len(warp_rows):
        where = _positions(detail, warp_rows)
        arrive = _warp_arrivals(rng_warp, model, skews[where], start[warp_rows], offsets[where])
        rows = _positions(phase_rows, warp_rows)
        released = np.stack([arrays["loaded"][rows], arrays["computed"][rows]], axis=-1)
        arrays.update(
            warp_blocks=warp_rows.astype(np.int64),
            barrier_wait=np.maximum(released[:, :, None, :] - arrive, 0),
        )
    if level >= 3 and spec.uses_shared:
        arrays["probe"] = spec.access_records(params, probe_warp, probe_block, probe_ktile)
    sampling_info = {
        "phase_every": every,
        "phase_blocks": len(phase_rows),
        "budget_bytes": int(budget_bytes),
        "warp_every": warp_every if level >= 3 else None,
        "warp_blocks": len(warp_rows),
        "probe": {"block": list(probe_block), "warp": probe_warp, "ktile": probe_ktile}
        if level >= 3
        else None,
    }
    manifest = _manifest(spec, params, (M, N, K), level, dev, geom, occ, model, blocks, seed)
    manifest["sampling"] = sampling_info
    return Trace(manifest=manifest, blocks=blocks, **arrays)


def _tile_offsets(model: dict, skews: np.ndarray) -> np.ndarray:
    """Times from block start of (loaded, computed) for every tile, interleaved: (rows, 2T)."""
    seg = np.empty(skews.shape)
    seg[..., 0] = model.get("load_ns", 0.0) + model["barrier_ns"] + skews[..., 0]
    seg[..., 1] = model.get("compute_ns", 0.0) + model["barrier_ns"] + skews[..., 1]
    return model["prologue_ns"] + np.cumsum(seg.reshape(len(seg), 2 * seg.shape[1]), axis=1)


def _positions(detail: np.ndarray, rows: np.ndarray) -> np.ndarray:
    order = np.argsort(detail, kind="stable")
    return order[np.searchsorted(detail[order], rows)]


def _check_probe(geom, block, warp, ktile) -> None:
    gx, gy = geom.grid
    bx, by = block
    if not (0 <= bx < gx and 0 <= by < gy):
        raise MatvizError(f"probe block ({bx}, {by}) is outside the {gx}x{gy} grid")
    if not 0 <= warp < geom.warps_per_block:
        raise MatvizError(f"probe warp {warp} is outside 0..{geom.warps_per_block - 1}")
    if geom.n_tiles and not 0 <= ktile < geom.n_tiles:
        raise MatvizError(f"probe k-tile {ktile} is outside 0..{geom.n_tiles - 1}")


def _manifest(spec, params, shape, level, dev, geom, occ, model, blocks, seed) -> dict:
    M, N, K = shape
    span = int(blocks["end"].max() - blocks["start"].min())
    ms = span / 1e6
    flops = spec.flops(M, N, K)
    gflops = flops / span if span else 0.0
    cublas = float(dev["cublas_fp32_gflops"])
    derived = {k: v for k, v in model.items() if k != "skew_scale_ns"}
    derived["skew_scale_ns"] = list(model["skew_scale_ns"])
    return {
        "schema_version": SCHEMA_VERSION,
        "kernel": spec.name,
        "params": dict(params),
        "M": M,
        "N": N,
        "K": K,
        "dtype": "float32",
        "backend": "sim",
        "device": hardware(dev),
        "timer": {"name": "simulated", "resolution_ns": 1},
        "level": level,
        "geometry": {
            "grid": list(geom.grid),
            "block": list(geom.block),
            "threads": geom.threads,
            "warps": geom.warps_per_block,
            "smem_bytes": geom.smem_bytes,
            "n_tiles": geom.n_tiles,
        },
        "sampling": {},
        "software": {
            "matviz": matviz.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "stats": {
            "time_ms_median": ms,
            "time_ms_min": ms,
            "time_ms_max": ms,
            "repeats": 1,
            "gflops": gflops,
            "cublas_gflops": cublas,
            "pct_cublas": 100.0 * gflops / cublas,
            "rel_error": None,
            "overhead_pct": None,
            "span_ns": span,
            "event_ms": None,
            "span_vs_event": None,
        },
        "occupancy": occ.to_dict(),
        "sim_seed": int(seed),
        "model": {"constants": dict(dev["model"]), "derived": derived},
        "flops": flops,
        "global_bytes": {
            "formula": spec.predicted_global_bytes(params, M, N, K),
            "issued": spec.issued_global_bytes(params, M, N, K),
        },
    }


__all__ = ["simulate", "schedule", "block_model", "site_costs", "load_device"]

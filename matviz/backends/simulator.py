"""Simulated traces for machines without a GPU: same schema as a recording, backend ``"sim"``.

Per configuration (constants from the device file's ``model`` section):

* Occupancy (``matviz.core.occupancy``) gives b resident blocks per SM.
* ``matviz.backends.sim_model`` gives a block's alone duration D (its latency path) and the SM
  time X it uses up when the SM is saturated, plus the barrier skews.
* ``matviz.backends.sim_schedule`` runs the SMs: resident blocks share an SM by age (the oldest
  at nearly its alone speed), so the first wave's blocks end one after another and each SM then
  retires a block every X ns; blocks go to the slot that frees first. This reproduces the
  recordings' blocks-per-SM split (floor or ceil of blocks / SMs) and their first-wave staircase.
* Jitter is small, as on the hardware: each block's summed barrier skews (a gamma matched to the
  per-tile maxima) and a per-SM speed factor (normal, ``sm_speed_spread``) common to its slots.
* Phase marks: a block's k-tiles in its alone proportions (issue -> loaded -> computed, with
  ``block_prologue_ns`` before the first and ``block_epilogue_ns`` after the last), placed on
  its real progress: slow while younger blocks' shares are small, fast once it is the oldest.

Randomness is a numpy Generator seeded with ``seed`` (stored as ``sim_seed``): the work of the
j-th block of each SM and the SM speeds come from their own streams, so block times do not
depend on the level or the trace budget.
"""

from __future__ import annotations

import platform

import numpy as np

import matviz
from matviz.backends.devices import DEFAULT_DEVICE, hardware, load_device
from matviz.backends.sim_model import (
    block_model,
    constant,
    shared_jitter,
    site_costs,
    skew_moments,
    tile_offsets,
    tile_skews,
    total_skews,
    warp_arrivals,
)
from matviz.backends.sim_schedule import (
    WorkRows,
    fluid_schedule,
    progress_times,
    schedule,
    share_table,
)
from matviz.core import catalog, sampling
from matviz.core.occupancy import occupancy
from matviz.core.trace import SCHEMA_VERSION, Trace, make_blocks
from matviz.errors import MatvizError


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
    n_blocks, n_tiles, sms = geom.n_blocks, geom.n_tiles, dev["sm_count"]
    per_sm = model["blocks_per_sm_used"]
    rng_total, rng_tile, rng_extra, rng_warp, rng_sm = (
        np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(5)
    )

    # The SMs' schedule: each block's work is its alone duration x cap, scaled by its SM's speed.
    speed = np.clip(1.0 + constant(dev, "sm_speed_spread") * rng_sm.standard_normal(sms), 0.5, 2)
    base = model["alone_ns"] - skew_moments(model)[0]
    rows = WorkRows(lambda n: total_skews(rng_total, model, (n, sms)))
    work = WorkRows(lambda n: [model["cap"] * speed * (base + r) for r in rows.more(n)])
    shares = share_table(
        per_sm, model["cap"], geom.warps_per_block, constant(dev, "priority_halving_warps")
    )
    first = min(n_blocks, sms * per_sm)
    stagger = min(dev["model"]["dispatch_interval_ns"], 0.25 * base * speed.min() / first)
    fl = fluid_schedule(n_blocks, sms, per_sm, shares, work, stagger)
    refill = fl.local >= per_sm
    start = fl.join + refill * dev["model"]["block_launch_ns"]
    end = np.maximum(fl.events[fl.local, fl.smid], start + 1.0)
    blocks = make_blocks(*geom.grid)
    blocks["smid"] = fl.smid
    blocks["start"] = np.rint(start)
    blocks["end"] = np.rint(end)

    every = sampling.phase_every(n_blocks, n_tiles, budget_bytes, phase_every) if level >= 2 else 1
    warp_every = sampling.warp_every(n_blocks, every) if level >= 3 else 1
    phase_rows = np.arange(0, n_blocks, every) if level >= 2 and n_tiles else np.zeros(0, int)
    warp_rows = np.arange(0, n_blocks, warp_every) if level >= 3 and n_tiles else np.zeros(0, int)
    extra = np.setdiff1d(warp_rows, phase_rows)  # warp-sampled blocks outside the phase sample
    detail = np.concatenate([phase_rows, extra])
    arrays: dict[str, np.ndarray] = {}
    if len(detail):
        totals = np.array(rows.rows[: fl.local.max() + 1])[fl.local[detail], fl.smid[detail]]
        skews = np.concatenate(
            [
                tile_skews(rng_tile, model, totals[: len(phase_rows)]),
                tile_skews(rng_extra, model, totals[len(phase_rows) :]),
            ]
        )
        offsets = tile_offsets(model, skews) - model["prologue_ns"]
        begin = start[detail] + model["prologue_ns"]
        finish = np.maximum(end[detail] - model["epilogue_ns"], begin)
        frac = offsets / np.maximum(offsets[:, -1:], 1e-9)
        marks = progress_times(fl, detail, begin, finish, frac)
        sigma, n_phase = constant(dev, "shared_tile_jitter"), len(phase_rows)
        for rng, part in ((rng_tile, slice(0, n_phase)), (rng_extra, slice(n_phase, None))):
            marks[part] = shared_jitter(
                rng, marks[part], begin[part], finish[part], offsets[part], sigma
            )
        marks = np.rint(marks).astype(np.int64)
        issue = np.empty_like(marks[:, 0::2])
        issue[:, 0] = np.rint(begin)
        issue[:, 1:] = marks[:, 1:-1:2]  # a tile's loads go out when the last one is computed
        loaded, computed = marks[:, 0::2], marks[:, 1::2]
        arrays.update(
            phase_blocks=phase_rows.astype(np.int64),
            issue=np.ascontiguousarray(issue[:n_phase]),
            loaded=np.ascontiguousarray(loaded[:n_phase]),
            computed=np.ascontiguousarray(computed[:n_phase]),
        )
    if len(warp_rows):
        where = _positions(detail, warp_rows)
        released = np.stack([loaded[where], computed[where]], axis=-1)
        begins = np.stack([issue[where], loaded[where]], axis=-1)
        arrive = warp_arrivals(rng_warp, model, skews[where], released, begins)
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
    model["shares"] = shares[per_sm].tolist()
    model["stagger_ns"] = stagger
    manifest = _manifest(spec, params, (M, N, K), level, dev, geom, occ, model, blocks, seed)
    manifest["sampling"] = sampling_info
    return Trace(manifest=manifest, blocks=blocks, **arrays)


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
    constants = {k: v for k, v in dev["model"].items() if k != "fit"}
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
        "model": {"constants": constants, "derived": derived, "fit": dev["model"].get("fit")},
        "flops": flops,
        "global_bytes": {
            "formula": spec.predicted_global_bytes(params, M, N, K),
            "issued": spec.issued_global_bytes(params, M, N, K),
        },
    }


__all__ = ["simulate", "schedule", "block_model", "site_costs", "load_device"]

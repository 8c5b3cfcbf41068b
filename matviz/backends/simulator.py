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
* Phase marks: a block's k-tiles in its alone proportions (load phase, then compute phase, with
  ``block_prologue_ns`` before the first and ``block_epilogue_ns`` after the last), placed on
  its real progress: slow while younger blocks' shares are small, fast once it is the oldest.

Randomness is a numpy Generator seeded with the request's ``seed`` (stored as the
manifest's ``details.sim_seed``): the work of the
j-th block of each SM and the SM speeds come from their own streams, so block times do not
depend on the level or the trace budget.
"""

from __future__ import annotations

import platform

import numpy as np

import matviz
from matviz.backends.contract import RunRequest
from matviz.backends.devices import DEFAULT_DEVICE, cublas_gflops, hardware, load_device
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
from matviz.core import access, sampling
from matviz.core.config import KernelConfig
from matviz.core.kernel import STATIC_SMEM_LIMIT
from matviz.core.manifest import Geometry, Sampling, Stats, Timer, build_manifest
from matviz.core.occupancy import occupancy
from matviz.core.trace import Trace, make_blocks
from matviz.errors import MatvizError
from matviz.toolchain.nvcc import registers_for


def simulate(request: RunRequest, *, device=None, registers: int | None = None) -> Trace:
    """A simulated trace of ``request`` on ``device`` (a bundled name, a JSON path or a dict).

    ``registers`` overrides the per-thread register count occupancy uses (default: nvcc's count
    for the build the timeline stands for, level 1 or 2, else the description's estimate).
    """
    if registers is not None and (
        isinstance(registers, bool) or not isinstance(registers, (int, np.integer)) or registers < 1
    ):
        raise MatvizError(f"registers must be a whole number >= 1 (got {registers!r})")
    level, seed = request.level, request.seed
    dev = load_device(DEFAULT_DEVICE if device is None else device)
    config = request.config().check(min(STATIC_SMEM_LIMIT, dev["smem_per_block"]))
    request.check_probe(config)
    _check_kstep(config)
    # Like a recording, the timeline stands for a level <= 2 build: level 3's probes add
    # registers that the timed kernel does not have (issue 10).
    timeline_level = min(level, 2) or 1
    if registers is None:
        registers, source = registers_for(config, timeline_level)
    else:
        source = "given"
    occ = occupancy(config, dev, int(registers), register_source=source)
    if occ.blocks_per_sm < 1:
        raise MatvizError(
            f"a block of {config.kernel.name} {config.kernel.labels(config.params)} cannot run "
            f"on {dev['name']}: its {occ.limiter} exceed what one SM has"
        )
    model = block_model(config, occ, dev)
    n_blocks, n_tiles, sms = config.n_blocks, config.n_steps, dev["sm_count"]
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
        per_sm, model["cap"], config.warps, constant(dev, "priority_halving_warps")
    )
    first = min(n_blocks, sms * per_sm)
    stagger = min(dev["model"]["dispatch_interval_ns"], 0.25 * base * speed.min() / first)
    fl = fluid_schedule(n_blocks, sms, per_sm, shares, work, stagger)
    refill = fl.local >= per_sm
    start = fl.join + refill * dev["model"]["block_launch_ns"]
    end = np.maximum(fl.events[fl.local, fl.smid], start + 1.0)
    blocks = make_blocks(*config.grid)
    blocks["smid"] = fl.smid
    blocks["start"] = np.rint(start)
    blocks["end"] = np.rint(end)

    budget = request.budget_bytes
    every = (
        sampling.phase_every(n_blocks, n_tiles, budget, request.phase_every, len(config.marks))
        if level >= 2
        else 1
    )
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
        # The model's k-step (see _check_kstep): a loading phase ending at barrier 0, then a
        # computing phase ending at barrier 1, chained: the marks are issue, loaded, computed.
        load, compute = config.phases
        stamped = np.empty(issue.shape + (len(config.marks),), np.int64)
        stamped[:, :, load.begin] = issue
        stamped[:, :, load.end] = marks[:, 0::2]
        stamped[:, :, compute.end] = marks[:, 1::2]
        arrays.update(
            phase_blocks=phase_rows.astype(np.int64),
            marks=np.ascontiguousarray(stamped[:n_phase]),
        )
    if len(warp_rows):
        where = _positions(detail, warp_rows)
        released = np.stack([stamped[where, :, ph.end] for ph in (load, compute)], axis=-1)
        begins = np.stack([stamped[where, :, ph.begin] for ph in (load, compute)], axis=-1)
        arrive = warp_arrivals(rng_warp, model, skews[where], released, begins)
        waits = np.maximum(released[:, :, None, :] - arrive, 0)
        order = np.argsort([load.barrier, compute.barrier])  # barrier_wait's last axis
        arrays.update(
            warp_blocks=warp_rows.astype(np.int64),
            barrier_wait=np.ascontiguousarray(waits[..., order]),
        )
    probe = None
    if level >= 3:
        if config.sites:
            arrays["probe"] = access.access_records(
                config, request.probe_warp, request.probe_block, request.probe_ktile
            )
        probe = {
            "block": list(request.probe_block),
            "warp": request.probe_warp,
            "ktile": request.probe_ktile,
        }
    sampled = Sampling(
        budget_bytes=int(budget),
        timeline_level=timeline_level,
        phase_every=every,
        phase_blocks=len(phase_rows),
        warp_every=warp_every if level >= 3 else None,
        warp_blocks=len(warp_rows),
        probe=probe,
        diagnostics="simulated: the probe is the access model, the barrier waits the skew model"
        if probe and n_tiles
        else None,
    )
    model["shares"] = shares[per_sm].tolist()
    model["stagger_ns"] = stagger
    manifest = build_manifest(
        config,
        backend="sim",
        level=level,
        device=hardware(dev),
        timer=Timer(name="simulated", resolution_ns=1),
        geometry=Geometry.of(config, {f"level_{timeline_level}": int(registers)}),
        sampling=sampled,
        software={
            "matviz": matviz.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        stats=_stats(config, blocks, dev),
        occupancy=occ.to_dict(),
        details={"sim_seed": int(seed), "model": _model_details(model, dev)},
    )
    return Trace(manifest=manifest, blocks=blocks, **arrays)


def _positions(detail: np.ndarray, rows: np.ndarray) -> np.ndarray:
    order = np.argsort(detail, kind="stable")
    return order[np.searchsorted(detail[order], rows)]


def _check_kstep(config: KernelConfig) -> None:
    """The model's k-step: one chained channel of three marks, a loading phase from the first
    to the second, then a computing phase from the second to the third, each closed by a
    barrier; the trace's ``marks`` hold them in the description's order."""
    ks = config.kstep
    if ks is None:
        return
    marks = ks.channels[0]
    fits = (
        len(ks.channels) == 1
        and ks.chained
        and len(marks) == 3
        and [(ph.begin, ph.end, ph.state) for ph in ks.phases]
        == [(marks[0], marks[1], "loading"), (marks[1], marks[2], "computing")]
        and all(ph.barrier for ph in ks.phases)
    )
    if not fits:
        raise MatvizError(
            f"the simulator models k-steps of one load and one compute phase, each ending at a "
            f"barrier; kernel {config.kernel.name} has another k-step"
        )


def _stats(config: KernelConfig, blocks: np.ndarray, dev: dict) -> Stats:
    span = int(blocks["end"].max() - blocks["start"].min())
    ms = span / 1e6
    gflops = config.flops / span if span else 0.0
    # cuBLAS at this trace's own shape (the device file's table, interpolated in log 2MNK).
    cublas = cublas_gflops(dev, config.M, config.N, config.K)
    return Stats(
        time_ms_median=ms,
        time_ms_min=ms,
        time_ms_max=ms,
        repeats=1,
        gflops=gflops,
        cublas_gflops=cublas,
        pct_cublas=100.0 * gflops / cublas,
        span_ns=span,
    )


def _model_details(model: dict, dev: dict) -> dict:
    derived = {k: v for k, v in model.items() if k != "skew_scale_ns"}
    derived["skew_scale_ns"] = list(model["skew_scale_ns"])
    constants = {k: v for k, v in dev["model"].items() if k != "fit"}
    return {"constants": constants, "derived": derived, "fit": dev["model"].get("fit")}


__all__ = ["simulate", "schedule", "block_model", "site_costs", "load_device"]

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

Memory: the trace budget covers every block's record and the scheduler's event time
(``BLOCK_BYTES`` a block; a launch whose records alone exceed it is refused before anything is
allocated), then the sampled rows' marks. Everything else is computed in chunks of fixed size
(blocks from ``Fluid.placements``, phase rows in ``DETAIL_CHUNK``s), with the same bits as one
pass: the chunks draw from the random streams in the same order.
"""

from __future__ import annotations

import copy
import platform
from dataclasses import dataclass

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
from matviz.backends.sim_race import simulate_correctness
from matviz.backends.sim_schedule import (
    WorkRows,
    fluid_schedule,
    progress_times,
    schedule,
    share_table,
)
from matviz.core import access, sampling
from matviz.core.config import KernelConfig, PhaseMarks
from matviz.core.manifest import Geometry, Sampling, Stats, Timer, build_manifest
from matviz.core.occupancy import occupancy
from matviz.core.trace import BLOCK_DTYPE, Trace
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
    config = request.config().check(dev["smem_per_block"])
    request.check_probe(config)
    _model_phases(config)
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
    left = sampling.after_block_records(n_blocks, BLOCK_BYTES, request.budget_bytes)
    per_sm = model["blocks_per_sm_used"]
    seeds = np.random.SeedSequence(int(seed)).spawn(5)
    total_seed = seeds[0]
    rng_tile, rng_extra, rng_warp, rng_sm = (np.random.default_rng(s) for s in seeds[1:])

    # The SMs' schedule: each block's work is its alone duration x cap, scaled by its SM's speed.
    speed = np.clip(1.0 + constant(dev, "sm_speed_spread") * rng_sm.standard_normal(sms), 0.5, 2)
    base = model["alone_ns"] - skew_moments(model)[0]

    def new_work() -> WorkRows:  # a fresh stream each call: the scheduler may replay it
        rng = np.random.default_rng(total_seed)
        return WorkRows(
            lambda n: [model["cap"] * speed * (base + r) for r in total_skews(rng, model, (n, sms))]
        )

    shares = share_table(
        per_sm, model["cap"], config.warps, constant(dev, "priority_halving_warps")
    )
    first = min(n_blocks, sms * per_sm)
    stagger = min(dev["model"]["dispatch_interval_ns"], 0.25 * base * speed.min() / first)
    fl = fluid_schedule(n_blocks, sms, per_sm, shares, new_work, stagger)

    every = (
        sampling.phase_every(
            n_blocks,
            n_tiles,
            left,
            request.phase_every,
            len(config.marks),
            extra=DETAIL_ROW_BYTES,
        )
        if level >= 2
        else 1
    )
    warp_every = sampling.warp_every(n_blocks, every) if level >= 3 else 1
    phase_rows = np.arange(0, n_blocks, every) if level >= 2 and n_tiles else np.zeros(0, int)
    warp_rows = np.arange(0, n_blocks, warp_every) if level >= 3 and n_tiles else np.zeros(0, int)
    extra = np.setdiff1d(warp_rows, phase_rows)  # warp-sampled blocks outside the phase sample
    detail = np.concatenate([phase_rows, extra])
    blocks, place = _block_records(config, fl, dev["model"]["block_launch_ns"], detail)
    arrays: dict[str, np.ndarray] = {}
    if len(detail):
        totals = _replay_totals(total_seed, model, sms, place)
        n_phase = len(phase_rows)
        where = _positions(detail, warp_rows)
        marks, kept = _detail_marks(
            fl, model, config, dev, place, totals, n_phase, where, (rng_tile, rng_extra)
        )
        arrays.update(phase_blocks=phase_rows.astype(np.int64), marks=marks)
    if len(warp_rows):
        w_times, w_skews, w_begin = kept
        # the (loaded, computed) segments: each begins where the one before ended
        released = w_times.reshape(len(warp_rows), n_tiles, 2)
        begins = np.empty_like(released)
        begins[:, :, 1] = released[:, :, 0]
        begins[:, 0, 0] = w_begin
        begins[:, 1:, 0] = released[:, :-1, 1]
        arrive = warp_arrivals(rng_warp, model, w_skews, released, begins)
        waits = np.maximum(released[:, :, None, :] - arrive, 0)
        # barrier_wait's last axis: the barriers in the description's order
        segment = {"loading": 0, "computing": 1}
        ends = sorted(
            (ph.barrier, segment[ph.phase.state]) for ph in config.phases if ph.barrier >= 0
        )
        arrays.update(
            warp_blocks=warp_rows.astype(np.int64),
            barrier_wait=np.ascontiguousarray(waits[..., [s for _, s in ends]]),
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
    checked, arrays["c_wrong"], stale = simulate_correctness(config, request, dev)
    if stale.size:
        arrays["stale"] = stale
    sampled = Sampling(
        budget_bytes=int(request.budget_bytes),
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
        correctness=checked,
        details={"sim_seed": int(seed), "model": _model_details(model, dev)},
    )
    return Trace(manifest=manifest, blocks=blocks, **arrays)


# Bytes each block holds however large the launch: its record and the scheduler's event time.
BLOCK_BYTES = BLOCK_DTYPE.itemsize + 8
# Bytes each phase (or warp) row holds besides its marks: its placement and summed skew.
DETAIL_ROW_BYTES = 32
DETAIL_CHUNK = 1 << 18  # marks (rows x 2 k-steps) per chunk: ~30 MB of float temporaries


def _block_records(config: KernelConfig, fl, launch_ns: float, detail: np.ndarray):
    """Every block's record, filled chunk by chunk from the placements, and the placements
    (smid, local, join) of the ``detail`` blocks."""
    n, gx, b = fl.n_blocks, config.grid[0], fl.per_sm
    blocks = np.zeros(n, BLOCK_DTYPE)
    order = np.argsort(detail, kind="stable")
    sorted_ids = detail[order]
    place = (
        np.empty(len(detail), np.int64),
        np.empty(len(detail), np.int64),
        np.empty(len(detail)),
    )
    for lo, smid, local, join in fl.placements():
        hi = lo + len(smid)
        ids = np.arange(lo, hi)
        part = blocks[lo:hi]
        part["bx"] = ids % gx
        part["by"] = ids // gx
        start = join + (local >= b) * launch_ns  # a refill starts block_launch_ns later
        part["smid"] = smid
        part["start"] = np.rint(start)
        part["end"] = np.rint(np.maximum(fl.events[local, smid], start + 1.0))
        a, z = np.searchsorted(sorted_ids, [lo, hi])
        pick, at = order[a:z], sorted_ids[a:z] - lo
        for out, values in zip(place, (smid, local, join), strict=True):
            out[pick] = values[at]
    return blocks, place


def _replay_totals(seed, model: dict, sms: int, place) -> np.ndarray:
    """The summed skews the schedule drew for the placed blocks (row local, column smid),
    drawn again from the same stream instead of keeping every row (8 bytes a block)."""
    smid, local, _ = place
    rng = np.random.default_rng(seed)
    out = np.empty(len(local))
    order = np.argsort(local, kind="stable")
    sorted_local = local[order]
    rows = max(1, DETAIL_CHUNK // sms)
    for r0 in range(0, int(local.max()) + 1, rows):
        drawn = total_skews(rng, model, (rows, sms))  # the draws run on: same values
        a, z = np.searchsorted(sorted_local, [r0, r0 + rows])
        pick = order[a:z]
        out[pick] = drawn[local[pick] - r0, smid[pick]]
    return out


def _detail_marks(fl, model, config, dev, place, totals, n_phase, where, rngs):
    """Marks of the phase rows (the first ``n_phase`` placed blocks) and, for the rows at
    ``where``, their marks and skews (the warp sample), in chunks of rows.

    The phase rows draw their skews from ``rng_tile``, then their jitter from it in the same
    order, and the rest (warp rows outside the phase sample) from ``rng_extra``: as one pass
    over all rows did. The jitter draws of a chunk come from a second generator advanced
    past every phase row's skew draws.
    """
    rng_tile, rng_extra = rngs
    n_tiles, n_marks = config.n_steps, len(config.marks)
    sigma = constant(dev, "shared_tile_jitter")
    launch = dev["model"]["block_launch_ns"]
    marks = np.empty((n_phase, n_tiles, n_marks), np.int64)
    w_times = np.empty((len(where), 2 * n_tiles), np.int64)
    w_skews = np.empty((len(where), n_tiles, 2))
    w_begin = np.empty(len(where), np.int64)
    rows = max(1, DETAIL_CHUNK // (2 * n_tiles))
    rng_jitter = rng_tile
    if sigma > 0 and n_phase:
        rng_jitter = copy.deepcopy(rng_tile)
        for r0 in range(0, n_phase, rows):  # the skew draws of every chunk
            rng_jitter.random((min(rows, n_phase - r0), n_tiles, 2), dtype=np.float32)
    spans = [(r0, min(r0 + rows, n_phase), rng_tile, rng_jitter) for r0 in range(0, n_phase, rows)]
    if len(totals) > n_phase:
        spans.append((n_phase, len(totals), rng_extra, rng_extra))
    for r0, r1, rng_skew, rng_jit in spans:
        smid, local, join = (p[r0:r1] for p in place)
        start = join + (local >= fl.per_sm) * launch
        end = np.maximum(fl.events[local, smid], start + 1.0)
        skews = tile_skews(rng_skew, model, totals[r0:r1])
        offsets = tile_offsets(model, skews) - model["prologue_ns"]
        begin = start + model["prologue_ns"]
        finish = np.maximum(end - model["epilogue_ns"], begin)
        frac = offsets / np.maximum(offsets[:, -1:], 1e-9)
        times = progress_times(fl, smid, local, join, begin, finish, frac, r0)
        times = shared_jitter(rng_jit, times, begin, finish, offsets, sigma)
        rounded = np.rint(times).astype(np.int64)
        if r0 < n_phase:
            marks[r0:r1] = _stamp(config, rounded, begin)
        inside = (where >= r0) & (where < r1)
        w_times[inside] = rounded[where[inside] - r0]
        w_skews[inside] = skews[where[inside] - r0]
        w_begin[inside] = np.rint(begin[where[inside] - r0])
    return marks, (w_times, w_skews, w_begin)


def _stamp(config: KernelConfig, marks: np.ndarray, begin: np.ndarray) -> np.ndarray:
    """The trace's marks (rows, k-steps, marks) from the interleaved (loaded, computed) ones.

    A step's loads go out when the previous step is computed or, in a pipeline of S stages,
    when step t - S + 1 has landed (the first S - 1 at the block's begin); in a warp-specialised
    ring when the consumers freed the slot, i.e. step t - S was computed (the first S at the
    block's begin). See _model_phases.
    """
    steps = _model_phases(config)
    assert steps is not None  # marks exist only for kernels with k-steps
    load, compute = steps.load, steps.compute
    loaded, computed = marks[:, 0::2], marks[:, 1::2]
    ahead = config.layout.in_flight - 1
    stamped = np.empty(loaded.shape + (len(config.marks),), np.int64)
    stamped[:, :, load.end] = loaded
    stamped[:, :, compute.end] = computed
    start = np.rint(begin)[:, None]
    if steps.issue is not None:
        ring = config.layout.in_flight
        issued = _shifted(computed, ring, start)
        stamped[:, :, steps.issue.end] = issued
        stamped[:, :, steps.issue.begin] = _shifted(issued, 1, start)
        stamped[:, :, load.begin] = _shifted(computed, 1, start)  # the consumer starts waiting
        return stamped
    trigger, lag = (loaded, ahead) if ahead else (computed, 1)
    stamped[:, :, load.begin] = _shifted(trigger, lag, start)
    stamped[:, :, compute.begin] = loaded  # the same mark where one step runs at a time
    return stamped


def _shifted(times: np.ndarray, lag: int, first: np.ndarray) -> np.ndarray:
    """times[:, t - lag], and ``first`` for the first ``lag`` steps."""
    out = np.empty_like(times)
    out[:, :lag] = first
    out[:, lag:] = times[:, : max(times.shape[1] - lag, 0)]
    return out


def _positions(detail: np.ndarray, rows: np.ndarray) -> np.ndarray:
    order = np.argsort(detail, kind="stable")
    return order[np.searchsorted(detail[order], rows)]


@dataclass(frozen=True)
class ModelSteps:
    """The k-step phases the model times: the wait for a step's tiles (``load``, ending when
    they landed) and its ``compute``; ``issue``: a producer's own phase, where one exists."""

    load: PhaseMarks
    compute: PhaseMarks
    issue: PhaseMarks | None = None


def _model_phases(config: KernelConfig) -> ModelSteps | None:
    """The k-step's phases in one of the three forms the model knows, or None for a kernel
    without k-steps.

    * one k-step at a time: one chained channel of three marks, a loading phase from the
      first to the second, a computing phase from the second to the third, each closed by a
      barrier;
    * a pipeline of ``in_flight`` stages: two unchained channels of two marks, the loading
      phase (the copy, closed by the k-step's one barrier) in one and the computing phase in
      the other. Step t computes right after its copy landed, and the copy of step
      t + in_flight - 1 goes out then too;
    * a warp-specialised ring of ``in_flight`` slots: a producer channel of one loading phase
      (asking for a slot's tiles) and a consumer channel of three marks (waiting for them,
      then computing), no block-wide barrier. The producer refills a slot once the step before
      in it was computed.
    """
    layout = config.layout
    if not layout.phases:
        return None
    phases = layout.phases
    loading = [ph for ph in phases if ph.phase.state == "loading"]
    computing = [ph for ph in phases if ph.phase.state == "computing"]
    if len(computing) == 1 and len(loading) == 2 and len(layout.channels) == 2:
        compute = computing[0]
        waits = [ph for ph in loading if ph.channel == compute.channel]
        issues = [ph for ph in loading if ph.channel != compute.channel]
        channel = layout.channels[compute.channel]
        if (
            len(waits) == 1
            and len(issues) == 1
            and not layout.chained
            and layout.in_flight >= 2
            and len(channel) == 3
            and (waits[0].begin, waits[0].end, compute.end) == channel
            and compute.begin == waits[0].end
            and not any(ph.barrier >= 0 for ph in phases)
        ):
            return ModelSteps(waits[0], compute, issues[0])
    fits = False
    load = loading[0] if len(loading) == 1 else None
    single = computing[0] if len(computing) == 1 else None
    if load is None or single is None or len(phases) != 2:
        fits = False
    elif layout.in_flight == 1:
        channel = layout.channels[0] if len(layout.channels) == 1 else ()
        fits = (
            layout.chained
            and len(channel) == 3
            and (load.begin, load.end, single.begin, single.end) == channel[:2] + channel[1:]
            and load.barrier >= 0
            and single.barrier >= 0
        )
    else:
        fits = (
            not layout.chained
            and len(layout.channels) == 2
            and all(len(ch) == 2 for ch in layout.channels)
            and load.channel != single.channel
            and load.barrier >= 0
            and single.barrier < 0
        )
    if not fits or load is None or single is None:
        raise MatvizError(
            f"the simulator models k-steps of a load and a compute phase, one step at a time "
            f"with a barrier after each, pipelined with one barrier per step, or a producer "
            f"filling a ring of slots for consumers; kernel {config.kernel.name} has another "
            f"k-step"
        )
    return ModelSteps(load, single)


def _stats(config: KernelConfig, blocks: np.ndarray, dev: dict) -> Stats:
    span = int(blocks["end"].max() - blocks["start"].min())
    ms = span / 1e6
    gflops = config.flops / span if span else 0.0
    # cuBLAS at this trace's own shape (the device file's table, interpolated in log 2MNK).
    cublas = cublas_gflops(dev, config.M, config.N, config.K, config.input_dtype)
    return Stats(
        time_ms_median=ms,
        time_ms_min=ms,
        time_ms_max=ms,
        repeats=1,
        gflops=gflops,
        cublas_gflops=cublas,
        pct_cublas=100.0 * gflops / cublas if cublas else None,
        span_ns=span,
    )


def _model_details(model: dict, dev: dict) -> dict:
    derived = {k: v for k, v in model.items() if k != "skew_scale_ns"}
    derived["skew_scale_ns"] = list(model["skew_scale_ns"])
    notes = ("fit", "validation")  # what the constants were fitted to and checked against
    constants = {k: v for k, v in dev["model"].items() if k not in notes}
    return {"constants": constants, "derived": derived, **{k: dev["model"].get(k) for k in notes}}


__all__ = ["simulate", "schedule", "block_model", "site_costs", "load_device"]

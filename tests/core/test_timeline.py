from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matviz.backends.contract import RunRequest
from matviz.backends.simulator import simulate
from matviz.core.metrics import max_resident
from matviz.core.timeline import BlockState, Timeline, _fifo_slots
from matviz.core.trace import BLOCK_DTYPE, Trace

S = BlockState


def reference(trace, block: int, t: int) -> tuple[int, int]:
    """Literal, slow model of the module docstring: (state, ktile) of one block, from this
    run's marks only."""
    b = trace.blocks[block]
    if t < b["start"]:
        return S.WAITING, -1
    if t >= b["end"]:
        return S.DONE, -1
    hit = np.flatnonzero(trace.phase_blocks == block)
    if trace.n_tiles == 0 or not len(hit):
        return S.RUNNING, -1
    r = int(hit[0])
    issue, loaded, computed = (trace.mark(m)[r] for m in ("issue", "loaded", "computed"))
    n = trace.n_tiles
    if t < issue[0] or t >= computed[-1]:
        return S.RUNNING, -1
    for k in range(n):
        for b_, lo, hi in ((0, issue[k], loaded[k]), (1, loaded[k], computed[k])):
            if lo <= t < hi:  # barrier waits (another run) never change the state
                return (S.LOADING if b_ == 0 else S.COMPUTING), k
        if k + 1 < n and computed[k] <= t < issue[k + 1]:
            return S.LOADING, k + 1
    raise AssertionError("unreachable")


def check_against_reference(trace, times) -> None:
    tl = Timeline(trace)
    for t in times:
        states, ktiles = tl.states(t), tl.ktiles(t)
        ref = [reference(trace, b, int(t)) for b in range(len(trace.blocks))]
        assert states.tolist() == [int(s) for s, _ in ref], f"t={t}"
        assert ktiles.tolist() == [k for _, k in ref], f"t={t}"


def probe_times(trace) -> np.ndarray:
    bounds = Timeline(trace).boundaries()
    return np.unique(np.concatenate([bounds - 1, bounds, bounds + 1]))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"sample": 3},
        {"warps": True},
        {"phases": False},
        {"n_tiles": 1, "grid": (2, 2)},
        {"time_scale": 2**33, "grid": (2, 2), "warps": True},
        {"seed": 7, "n_sms": 3, "warps": True},
    ],
)
def test_states_match_reference_at_every_boundary(make_trace, kwargs):
    trace = make_trace(**kwargs)
    check_against_reference(trace, probe_times(trace))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    gx=st.integers(1, 4),
    gy=st.integers(1, 3),
    n_tiles=st.integers(1, 4),
    n_sms=st.integers(1, 3),
    warps=st.booleans(),
)
def test_states_match_reference_on_random_traces(make_trace, seed, gx, gy, n_tiles, n_sms, warps):
    trace = make_trace(grid=(gx, gy), n_tiles=n_tiles, n_sms=n_sms, warps=warps, seed=seed)
    check_against_reference(trace, probe_times(trace))


@pytest.mark.parametrize("kernel", ["tiled", "naive", "tiled_transposed"])
def test_states_match_reference_on_simulated_traces(kernel):
    # a small budget: some blocks are sampled out
    trace = simulate(RunRequest(kernel, 64, 48, 80, {"tile": 16}, level=3, budget_bytes=2000))
    times = probe_times(trace)
    check_against_reference(trace, times[:: max(1, len(times) // 300)])


def hand_trace(make_trace, warps: bool = False):
    """One block on one SM: start 0, tiles (issue, loaded, computed) (10, 20, 30), (33, 40, 50),
    end 60. With warps: at tile 0, barrier 1 the slowest warp left the other waiting 4 ns."""
    trace = make_trace(grid=(1, 1), n_tiles=2, n_sms=1, warps=warps)
    trace.blocks["start"], trace.blocks["end"] = 0, 60
    trace.marks[0, :, 0] = [10, 33]  # issue
    trace.marks[0, :, 1] = [20, 40]  # loaded
    trace.marks[0, :, 2] = [30, 50]  # computed
    if warps:
        trace.barrier_wait[:] = 0
        trace.barrier_wait[0, 0, 3, 0] = 4  # arrival at barrier 1 of tile 0: 16
        trace.barrier_wait[0, 1, 1, 1] = 2  # arrival at barrier 2 of tile 1: 48
    return trace


@pytest.mark.parametrize(
    ("t", "state", "ktile"),
    [
        (-5, S.WAITING, -1),
        (0, S.RUNNING, -1),  # prologue
        (9, S.RUNNING, -1),
        (10, S.LOADING, 0),
        (19, S.LOADING, 0),
        (20, S.COMPUTING, 0),
        (29, S.COMPUTING, 0),
        (30, S.LOADING, 1),  # the loop step between barrier 2 and the next issue
        (33, S.LOADING, 1),
        (40, S.COMPUTING, 1),
        (49, S.COMPUTING, 1),
        (50, S.RUNNING, -1),  # epilogue: the store to C
        (59, S.RUNNING, -1),
        (60, S.DONE, -1),
        (1000, S.DONE, -1),
    ],
)
def test_hand_built_block(make_trace, t, state, ktile):
    tl = Timeline(hand_trace(make_trace))
    assert tl.states(t).tolist() == [state]
    assert tl.ktiles(t).tolist() == [ktile]
    assert tl.block_phase(0, t) == (state, ktile)
    assert isinstance(tl.block_phase(0, t)[0], BlockState)


def long_waits(trace):
    """``trace`` with barrier waits far longer than its phases, as a level-3 run that is 70-160%
    slower records them: every sampled warp but one waits 10x the longest phase."""
    marks = trace.marks
    longest = int(np.diff(marks.reshape(len(marks), -1), axis=1).max()) + 1
    trace.barrier_wait[:] = 10 * longest
    trace.barrier_wait[:, :, 0, :] = 0  # warp 0 arrives last
    return trace


@pytest.mark.parametrize(
    ("t", "state", "ktile"),
    [
        (15, S.LOADING, 0),
        (16, S.LOADING, 0),  # a warp of the level-3 run waited 4 ns here: not this run's time
        (19, S.LOADING, 0),
        (20, S.COMPUTING, 0),
        (47, S.COMPUTING, 1),
        (48, S.COMPUTING, 1),
        (49, S.COMPUTING, 1),
        (50, S.RUNNING, -1),
    ],
)
def test_barrier_waits_never_change_the_state(make_trace, t, state, ktile):
    tl = Timeline(hand_trace(make_trace, warps=True))
    assert tl.block_phase(0, t) == (state, ktile)
    assert tl.states(t)[0] == state


@pytest.mark.parametrize("source", ["conftest", "simulated"])
def test_long_waits_leave_every_phase_as_marked(make_trace, source):
    """Issue 10: waits from the separate level-3 run made "loading" vanish where they were
    longer than the load phase. The timeline's states come from this run's marks alone."""
    if source == "conftest":
        trace = long_waits(make_trace(warps=True, seed=2))
    else:
        trace = long_waits(simulate(RunRequest("tiled", 64, 64, 96, {"tile": 16}, level=3)))
    assert len(trace.warp_blocks)
    tl = Timeline(trace)
    times = probe_times(trace)
    for t in times:
        assert not (tl.states(t) == S.AT_BARRIER).any(), t
    issue, loaded, computed = (trace.mark(m) for m in ("issue", "loaded", "computed"))
    for block in trace.warp_blocks:
        row = tl.phase_row(int(block))
        for k in range(trace.n_tiles):
            lo, hi = int(issue[row, k]), int(loaded[row, k])
            if hi > lo:  # the loading state lasts exactly issue -> loaded (or longer, at k > 0,
                # where the loop step after the previous barrier already belongs to it)
                assert tl.block_phase(int(block), lo) == (S.LOADING, k)
                assert tl.block_phase(int(block), hi - 1) == (S.LOADING, k)
                assert tl.block_phase(int(block), hi)[0] == S.COMPUTING
                begin, end = tl.phase_span(int(block), lo)
                assert end == hi
                assert begin == (lo if k == 0 else int(computed[row, k - 1]))
    check_against_reference(trace, times[:: max(1, len(times) // 200)])
    assert np.array_equal(tl.boundaries(), Timeline(_without_waits(trace)).boundaries())


def _without_waits(trace):
    import dataclasses

    return dataclasses.replace(
        trace, warp_blocks=trace.warp_blocks[:0], barrier_wait=trace.barrier_wait[:0]
    )


def test_fractional_playhead_floors(make_trace):
    tl = Timeline(hand_trace(make_trace))
    assert tl.block_phase(0, 19.99) == (S.LOADING, 0)
    assert tl.block_phase(0, 20.0) == (S.COMPUTING, 0)
    assert tl.states(19.5)[0] == S.LOADING


def test_states_are_read_only_and_cached(make_trace):
    tl = Timeline(make_trace())
    a = tl.states(40)
    assert a.dtype == np.uint8 and a.shape == (12,)
    assert tl.ktiles(40).dtype == np.int32
    with pytest.raises(ValueError):
        a[0] = 1
    assert tl.states(40) is a


def test_boundaries_of_one_block(make_trace):
    tl = Timeline(hand_trace(make_trace, warps=True))
    assert tl.boundaries(0).tolist() == [0, 10, 20, 30, 33, 40, 50, 60]  # no warp arrivals
    assert tl.boundaries().tolist() == [0, 10, 20, 30, 33, 40, 50, 60]


def test_boundaries_cover_every_mark(make_trace):
    trace = make_trace(warps=True)
    tl = Timeline(trace)
    bounds = tl.boundaries()
    assert bounds.dtype == np.int64 and np.all(np.diff(bounds) > 0)
    assert np.isin(trace.marks, bounds).all()
    assert np.isin(trace.blocks["start"], bounds).all()
    assert np.isin(trace.blocks["end"], bounds).all()
    assert tl.boundaries() is bounds  # cached
    for block in range(len(trace.blocks)):
        assert np.isin(tl.boundaries(block), bounds).all()


@pytest.mark.parametrize("kwargs", [{}, {"warps": True, "sample": 4}, {"phases": False}])
def test_step_moves_exactly_to_the_next_mark(make_trace, kwargs):
    trace = make_trace(**kwargs)
    bounds = Timeline(trace).boundaries()
    duration = trace.duration_ns
    times = np.concatenate([probe_times(trace), [-3, 0, duration, duration + 5]])
    for cached in (False, True):
        tl = Timeline(trace)
        if cached:
            tl.boundaries()
        for t in times:
            later, earlier = bounds[bounds > t], bounds[bounds < t]
            expect_next = int(later[0]) if len(later) else duration
            expect_prev = int(earlier[-1]) if len(earlier) else 0
            assert tl.step(t, +1) == min(max(expect_next, 0), duration), (t, cached)
            assert tl.step(t, -1) == min(max(expect_prev, 0), duration), (t, cached)
    tl = Timeline(trace)
    assert tl.step(duration, +1) == duration
    assert tl.step(0, -1) == 0
    assert tl.step(10.5, +1) == tl.step(10, +1)
    assert tl.step(10.5, -1) == tl.step(11, -1)
    with pytest.raises(ValueError):
        tl.step(0, 0)


def test_step_within_one_block(make_trace):
    tl = Timeline(hand_trace(make_trace, warps=True))
    t, seen = 0, [0]
    while t < 60:
        t = tl.step(t, +1, block=0)
        seen.append(t)
    assert seen == [0, 10, 20, 30, 33, 40, 50, 60]
    assert tl.step(60, -1, block=0) == 50
    assert tl.step(20, -1, block=0) == 10


def test_step_visits_every_state_change(make_trace):
    trace = make_trace(warps=True, seed=3)
    tl = Timeline(trace)
    t = 0
    previous = tl.states(0).copy()
    while t < trace.duration_ns:
        nxt = tl.step(t, +1)
        assert nxt > t
        assert np.array_equal(tl.states(nxt - 1), previous)  # nothing changes in between
        previous = tl.states(nxt).copy()
        t = nxt


def test_phase_span(make_trace):
    trace = make_trace(warps=True, seed=5)
    tl = Timeline(trace)
    rng = np.random.default_rng(0)
    for block in range(len(trace.blocks)):
        for t in rng.integers(0, trace.duration_ns + 1, 20):
            begin, end = tl.phase_span(block, t)
            here = tl.block_phase(block, t)
            assert begin <= t <= end
            assert tl.block_phase(block, begin) == here
            assert tl.block_phase(block, max(end - 1, begin)) == here
            if begin > 0:
                assert tl.block_phase(block, begin - 1) != here
            if end < trace.duration_ns:
                assert tl.block_phase(block, end) != here
    hand = Timeline(hand_trace(make_trace))
    assert hand.phase_span(0, 31) == (30, 40)  # loading tile 1 includes the loop step
    assert hand.phase_span(0, 5) == (0, 10)


def test_waits_at(make_trace):
    trace = make_trace(warps=True)
    tl = Timeline(trace)
    block = int(trace.warp_blocks[1])
    waits = tl.waits_at(block, 2)
    assert waits.shape == (8, 2)
    assert np.array_equal(waits, trace.barrier_wait[1, 2])
    unsampled = next(b for b in range(len(trace.blocks)) if b not in trace.warp_blocks)
    assert tl.waits_at(unsampled, 0) is None
    assert tl.waits_at(block, -1) is None
    assert tl.waits_at(block, trace.n_tiles) is None


def test_nearest_warp_block(make_trace):
    trace = make_trace(warps=True)  # grid 4 x 3, warps sampled for blocks 0 and 1
    tl = Timeline(trace)
    assert trace.warp_blocks.tolist() == [0, 1]
    assert tl.nearest_warp_block(1) == 1
    assert tl.nearest_warp_block(4) == 0  # (0, 1): one below block 0
    assert tl.nearest_warp_block(3) == 1  # (3, 0): nearer to (1, 0)
    assert tl.nearest_warp_block(5) == 1  # (1, 1)
    assert Timeline(make_trace()).nearest_warp_block(3) is None


# -- SM lanes ---------------------------------------------------------------------------------
def sweep_overlap(start: np.ndarray, end: np.ndarray) -> int:
    """Peak number of [start, max(end, start+1)) intervals alive at once; ends free first."""
    end = np.maximum(end, start + 1)
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(len(start)), -np.ones(len(end))])
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max()) if len(times) else 0


def check_slots(blocks: np.ndarray, slots: np.ndarray, used: int) -> None:
    assert slots.shape == (len(blocks),)
    assert slots.min() >= 0 and slots.max() == used - 1
    peak = 0
    for sm in np.unique(blocks["smid"]):
        mine = blocks["smid"] == sm
        start, end = blocks["start"][mine], blocks["end"][mine]
        peak = max(peak, sweep_overlap(start, end))
        for slot in np.unique(slots[mine]):
            lane = slots[mine] == slot
            assert sweep_overlap(start[lane], end[lane]) == 1, (sm, slot)
    assert used == peak


def random_blocks(n: int, n_sms: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    blocks = np.zeros(n, BLOCK_DTYPE)
    blocks["smid"] = rng.integers(0, n_sms, n)
    blocks["start"] = rng.integers(0, 50, n)
    blocks["end"] = blocks["start"] + rng.integers(0, 20, n)  # zero-length ones included
    return blocks


@pytest.mark.parametrize("kwargs", [{}, {"n_sms": 1}, {"n_sms": 5, "grid": (7, 3)}])
def test_sm_slots_never_overlap(make_trace, kwargs):
    trace = make_trace(**kwargs)
    slots, used = Timeline(trace).sm_slots()
    check_slots(trace.blocks, slots, used)
    assert used == 1  # the fixture runs one block at a time per SM


@pytest.mark.parametrize("seed", range(6))
def test_sm_slots_on_random_overlapping_blocks(make_trace, seed):
    trace = make_trace(grid=(20, 10), phases=False)
    fresh = random_blocks(200, 3, seed)
    for name in ("smid", "start", "end"):
        trace.blocks[name] = fresh[name]
    slots, used = Timeline(trace).sm_slots()
    check_slots(trace.blocks, slots, used)


def test_sm_slots_on_a_simulated_schedule():
    trace = simulate(RunRequest("tiled", 1024, 1024, 256, {"tile": 16}, level=1))
    slots, used = Timeline(trace).sm_slots()
    check_slots(trace.blocks, slots, used)
    assert used <= trace.manifest["occupancy"]["blocks_per_sm"]
    assert used * trace.manifest["device"]["sm_count"] >= max_resident(trace)


# -- speed --------------------------------------------------------------------------------------
def _timed(fn, repeat: int = 20) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "tile", "budget"), [((4096, 4096, 4096), 32, None), ((4096, 4096, 4096), 16, 2**30)]
)
def test_states_speed(shape, tile, budget):
    kwargs = {"budget_bytes": budget} if budget else {}
    trace = simulate(RunRequest("tiled", *shape, {"tile": tile}, level=3, **kwargs))
    tl = Timeline(trace)
    times = np.linspace(0, trace.duration_ns, 41)

    def fresh(t: float) -> None:
        tl._frame = None  # time the work, not the one-frame cache
        tl.states(t)

    worst = max(_timed(lambda t=t: fresh(t), 3) for t in times)
    step = _timed(lambda: tl.step(trace.duration_ns / 3, +1), 5)
    print(f"\nstates {trace.marks.shape}: worst {worst * 1e3:.2f} ms; step {step * 1e3:.2f} ms")
    assert worst < 0.05


@pytest.mark.slow
def test_sm_slots_speed():
    blocks = random_blocks(262_144, 132, 1)
    blocks["start"] = np.sort(np.random.default_rng(2).integers(0, 10**7, len(blocks)))
    blocks["end"] = blocks["start"] + 3000
    t0 = time.perf_counter()
    slots, used = _fifo_slots(blocks)
    elapsed = time.perf_counter() - t0
    print(f"\nsm_slots of {len(blocks)} blocks: {elapsed * 1e3:.0f} ms, {used} slots")
    assert elapsed < 1.0
    sm = blocks["smid"]
    assert used == max(
        sweep_overlap(blocks["start"][sm == s], blocks["end"][sm == s]) for s in range(132)
    )


# -- several k-steps in flight --------------------------------------------------------------------


def in_flight_trace(make_trace):
    """One block, 3 k-steps of a double-buffered kernel: a copy channel (the next step's tiles
    go from global to shared memory) beside a compute channel. Copy of step t + 1 runs while
    step t computes:

        copy     [10, 20) [25, 35) [40, 50)
        compute           [20, 38) [38, 52) [52, 60)      block [0, 70)
    """
    trace = make_trace(grid=(1, 1), n_tiles=3, n_sms=1)
    kstep = trace.manifest["description"]["kstep"]
    kstep["channels"] = [["copy_issue", "copy_done"], ["compute_begin", "compute_end"]]
    kstep["phases"] = [
        {"name": "copy", "begin": "copy_issue", "end": "copy_done", "state": "loading",
         "barrier": ""},
        {"name": "compute", "begin": "compute_begin", "end": "compute_end",
         "state": "computing", "barrier": "__syncthreads"},
    ]  # fmt: skip
    kstep["chained"], kstep["in_flight"] = False, 2
    marks = np.array([[[10, 20, 20, 38], [25, 35, 38, 52], [40, 50, 52, 60]]], np.int64)
    trace.blocks["start"], trace.blocks["end"] = 0, 70
    return Trace(manifest=trace.manifest, blocks=trace.blocks,
                 phase_blocks=np.array([0]), marks=marks)  # fmt: skip


@pytest.mark.parametrize(
    ("t", "state", "ktile", "phase"),
    [
        (5, S.RUNNING, -1, None),  # prologue
        (10, S.LOADING, 0, "copy"),  # the first tiles: nothing to compute on yet
        (19, S.LOADING, 0, "copy"),
        (20, S.COMPUTING, 0, "compute"),
        (22, S.COMPUTING, 0, "compute"),  # the copy channel is idle: no false "loading"
        (30, S.COMPUTING, 0, "compute"),  # step 1's copy is in flight under step 0's compute
        (38, S.COMPUTING, 1, "compute"),
        (45, S.COMPUTING, 1, "compute"),
        (55, S.COMPUTING, 2, "compute"),
        (60, S.RUNNING, -1, None),  # epilogue
        (70, S.DONE, -1, None),
    ],
)
def test_two_channels_in_flight(make_trace, t, state, ktile, phase):
    trace = in_flight_trace(make_trace)
    tl = Timeline(trace)
    assert tl.block_phase(0, t) == (state, ktile)
    assert (tl.states(t)[0], tl.ktiles(t)[0]) == (state, ktile)
    found = tl.phase_at(0, t)
    assert (found.name if found else None) == phase


def test_two_channels_step_through_every_mark(make_trace):
    trace = in_flight_trace(make_trace)
    tl = Timeline(trace)
    marks = sorted(set(trace.marks.ravel().tolist()) | {0, 70})
    forward, t = [], 0
    while t < 70:
        t = tl.step(t, +1)
        forward.append(t)
    assert forward == marks[1:]
    assert tl.step(45, -1) == 40 and tl.step(45, +1) == 50
    assert np.array_equal(tl.boundaries(0), marks)
    assert tl.phase_span(0, 30) == (20, 38)  # one (state, k-step) stretch across the copy

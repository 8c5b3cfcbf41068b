from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from matviz.core.metrics import (
    achieved_gflops,
    blocks_per_sm_histogram,
    flop_rate,
    max_resident,
    stamping_slowdown,
    timeline_cost,
    total_flops,
    waves,
)
from matviz.core.trace import Trace
from matviz.errors import MatvizError


def integral(centres: np.ndarray, gflops: np.ndarray, trace) -> float:
    # Bins are equal-width and span [0, duration]; GFLOP/s * ns = FLOP.
    width = trace.duration_ns / len(centres)
    return float(np.sum(gflops) * width)


def schedule(trace, smid, start, end):
    trace.blocks["smid"] = smid
    trace.blocks["start"] = start
    trace.blocks["end"] = end
    return trace


def test_achieved_gflops(make_trace):
    trace = make_trace()  # 48 x 64 x 80, median 0.25 ms
    assert achieved_gflops(trace) == pytest.approx(2 * 48 * 64 * 80 / 0.25e6)
    del trace.manifest["stats"]["time_ms_median"]
    with pytest.raises(MatvizError, match="time_ms_median"):
        achieved_gflops(trace)


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        ({"overhead_pct": 4.4, "instrumented_min_blocks": 4}, (2, 4.4, 4)),
        ({"overhead_pct": -3}, (2, -3.0, None)),
        ({"overhead_pct": 1.0, "instrumented_min_blocks": "4"}, (2, 1.0, None)),
        ({"overhead_pct": 1.0, "instrumented_min_blocks": True}, (2, 1.0, None)),
        ({"overhead_pct": 1.0, "instrumented_min_blocks": 0}, (2, 1.0, None)),
        ({"overhead_pct": None}, None),  # simulated: nothing measured
        ({"overhead_pct": True}, None),
        ({"overhead_pct": "fast"}, None),
        ({}, None),
    ],
)
def test_timeline_cost_is_what_the_stats_say_or_nothing(make_trace, stats, expected):
    trace = make_trace()
    trace.manifest["level"] = 3
    trace.manifest["sampling"] = {"timeline_level": 2}
    trace.manifest["stats"] = {"gflops": 1.0, **stats}
    cost = timeline_cost(trace)
    got = None if cost is None else (cost.level, cost.overhead_pct, cost.min_blocks)
    assert got == expected


@pytest.mark.parametrize(
    ("every", "tried", "expected"),
    [
        (4, [[1, 5.5], [2, 3.4], [4, 2.1]], (4, (1, 5.5))),
        (6, [[3, 4.0], [6, 1.0]], (6, (3, 4.0))),  # the budget's stride was 3
        (1, [[1, 2.0]], (1, None)),  # within at once: nothing thinned
        (4, None, (4, None)),  # the user's or the budget's stride, nothing timed
        (4, [], (4, None)),
        (4, "fast", (4, None)),
        (4, [[True, 5.5]], (4, None)),
        (4, [[1, "5%"]], (4, None)),
        (4, [[1]], (4, None)),
        ("4", [[1, 5.5]], (1, None)),  # not a count: 1 in 1, and nothing denser than that
        (0, [[1, 5.5]], (1, None)),
    ],
)
def test_timeline_cost_says_how_many_blocks_stamped_and_what_more_had_cost(
    make_trace, every, tried, expected
):
    """1 block in ``every`` stamped its k-steps; where the recorder thinned them to keep its
    target, the densest stamping it timed and that one's overhead. Hostile values say less."""
    trace = make_trace()
    trace.manifest["sampling"] = {"timeline_level": 2, "phase_every": every}
    trace.manifest["stats"] = {"gflops": 1.0, "overhead_pct": 2.1}
    trace.manifest["stats"]["phase_every_overheads_pct"] = tried
    cost = timeline_cost(trace)
    assert (cost.every, cost.denser) == expected


def measured_with_stamping(make_trace, **kw):
    """A recorded-looking trace (its build timed beside level 0) in which every block ran 100
    ns but blocks 0, 2 and 4, the ones that stamped their k-steps, ran 120 ns."""
    trace = make_trace(grid=(4, 3), **kw)
    trace.manifest["stats"]["overhead_pct"] = 5.0
    life = np.full(12, 100)
    life[[0, 2, 4]] = 120
    trace.blocks["start"] = np.arange(12) * 1000
    trace.blocks["end"] = trace.blocks["start"] + life
    return trace


def test_stamping_blocks_are_compared_with_the_others_of_their_launch(make_trace):
    slow = stamping_slowdown(measured_with_stamping(make_trace, sample=3))
    assert (slow.stamped, slow.others, slow.stamped_ns, slow.others_ns) == (3, 9, 120, 100)
    assert slow.pct == pytest.approx(20.0)


def test_the_stamping_cost_is_the_slowest_sms_extra_time_over_the_launch(make_trace):
    """A launch ends with its slowest SM: the SM that ran the most stamping blocks ends their
    extra time later, however few blocks stamp (kernel 10 BM256 on an H100: 13.9 µs of a
    320 µs launch, where 8 to 32 stamping blocks all cost 4.6-5.6%)."""
    trace = measured_with_stamping(make_trace, sample=3)  # blocks 0, 2 and 4 stamp
    trace.blocks["smid"] = [0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3]  # 0 and 2 on SM 0
    slow = stamping_slowdown(trace)
    launch = 11 * 1000 + 100  # the last block's end less the first's start
    assert (slow.most_on_one_sm, slow.extra_ns, slow.launch_ns) == (2, 20, launch)
    assert slow.slowest_sm_pct == pytest.approx(100 * 2 * 20 / launch)
    trace.blocks["smid"] = [0, 1, 2, 3, 1, 2, 3, 0, 1, 2, 3, 0]  # one stamping block an SM
    assert stamping_slowdown(trace).slowest_sm_pct == pytest.approx(100 * 20 / launch)


def test_no_stamping_slowdown_without_two_groups_or_a_measured_timeline(make_trace):
    assert stamping_slowdown(measured_with_stamping(make_trace)) is None  # every block stamped
    assert stamping_slowdown(measured_with_stamping(make_trace, phases=False)) is None  # none
    simulated = measured_with_stamping(make_trace, sample=3)
    simulated.manifest["stats"]["overhead_pct"] = None
    assert stamping_slowdown(simulated) is None
    frozen = measured_with_stamping(make_trace, sample=3)
    frozen.blocks["end"] = frozen.blocks["start"]  # the others took no time: no ratio
    assert stamping_slowdown(frozen) is None


# -- scheduling ----------------------------------------------------------------------------


def test_waves_on_a_two_sm_schedule(make_trace):
    # Six blocks on two SMs, back to back: an end and a start at the same instant do not
    # overlap, so at most two are resident and the grid runs in three waves.
    trace = schedule(
        make_trace(grid=(3, 2), phases=False),
        smid=[0, 1, 0, 1, 0, 1],
        start=[0, 0, 10, 10, 20, 25],
        end=[10, 10, 20, 25, 30, 30],
    )
    assert max_resident(trace) == 2
    assert waves(trace) == 3
    assert blocks_per_sm_histogram(trace).tolist() == [3, 3]


def test_overlap_raises_residency(make_trace):
    trace = schedule(
        make_trace(grid=(3, 2), phases=False),
        smid=[0, 1, 0, 1, 0, 1],
        start=[0, 0, 5, 10, 20, 25],
        end=[10, 10, 20, 25, 30, 30],
    )
    assert max_resident(trace) == 3
    assert waves(trace) == 2


def test_all_at_once_is_one_wave(make_trace):
    trace = schedule(make_trace(grid=(2, 2), phases=False), [0, 1, 2, 3], [0] * 4, [7] * 4)
    assert (max_resident(trace), waves(trace)) == (4, 1)


def test_zero_length_blocks_still_count(make_trace):
    trace = schedule(make_trace(grid=(2, 1), phases=False), [0, 0], [0, 0], [0, 0])
    assert (max_resident(trace), waves(trace)) == (2, 1)


@settings(max_examples=60, deadline=None)
@given(
    starts=hnp.arrays(np.int64, st.integers(1, 40), elements=st.integers(0, 30)),
    lengths=st.lists(st.integers(0, 12), min_size=40, max_size=40),
    chunk=st.integers(1, 8),
)
def test_max_resident_counts_every_instant(starts, lengths, chunk):
    """Against a count at every instant; chunks of any size give the same answer."""
    from types import SimpleNamespace

    from matviz.core.trace import BLOCK_DTYPE

    blocks = np.zeros(len(starts), BLOCK_DTYPE)
    blocks["start"] = starts
    blocks["end"] = starts + np.array(lengths[: len(starts)])
    occupied_end = np.maximum(blocks["end"], blocks["start"] + 1)  # zero-length: one instant
    alive = [int(np.sum((blocks["start"] <= t) & (t < occupied_end))) for t in range(0, 45)]
    trace = SimpleNamespace(blocks=blocks)
    assert max_resident(trace, chunk=chunk) == max(alive)


def test_histogram_length(make_trace):
    trace = make_trace(grid=(3, 2), phases=False, n_sms=2)
    trace.manifest["device"]["sm_count"] = 4
    assert blocks_per_sm_histogram(trace).tolist() == [3, 3, 0, 0]
    assert blocks_per_sm_histogram(trace, n_sms=3).tolist() == [3, 3, 0]
    del trace.manifest["device"]["sm_count"]
    assert blocks_per_sm_histogram(trace).tolist() == [3, 3]


def test_conftest_trace_waves(make_trace):
    trace = make_trace(grid=(4, 3), n_sms=2)  # one block at a time per SM
    assert max_resident(trace) == 2
    assert waves(trace) == 6


# -- FLOP rate -----------------------------------------------------------------------------


def one_block(make_trace):
    # M = N = 16, K = 32: 16384 FLOP in two k-tiles computed over [10, 20) and [30, 40).
    trace = make_trace(grid=(1, 1), n_tiles=2)
    trace.blocks["start"], trace.blocks["end"] = 0, 50
    trace.mark("issue")[:] = [[5, 25]]
    trace.mark("loaded")[:] = [[10, 30]]
    trace.mark("computed")[:] = [[20, 40]]
    return trace


def redescribed(make_trace, channels, phases, marks):
    """One 16 x 16 x 32 block (two k-tiles, 16384 FLOP) on [0, 50] whose description's k-step
    has the given channels and phases (name, begin, end, state); ``marks`` (k-tiles, marks)."""
    trace = make_trace(grid=(1, 1), n_tiles=2)
    manifest = copy.deepcopy(trace.manifest)
    kstep = manifest["description"]["kstep"]
    kstep["channels"] = [list(c) for c in channels]
    kstep["phases"] = [
        {"name": n, "begin": b, "end": e, "state": s, "barrier": ""} for n, b, e, s in phases
    ]
    blocks = trace.blocks.copy()
    blocks["start"], blocks["end"] = 0, 50
    marks = np.array([marks], np.int64)
    return Trace(manifest, blocks, phase_blocks=np.zeros(1, np.int64), marks=marks)


@pytest.mark.parametrize(
    ("store", "expected"),
    [("loading", [0, 819.2, 0, 819.2, 0]), ("computing", [0, 409.6, 409.6, 409.6, 409.6])],
)
def test_only_computing_phases_carry_flops(make_trace, store, expected):
    # load, compute, store: a loading store phase ([20, 25) and [40, 50)) carries no FLOP; a
    # computing one takes half of its step's
    trace = redescribed(
        make_trace,
        [("issue", "loaded", "computed", "stored")],
        [("load", "issue", "loaded", "loading"), ("compute", "loaded", "computed", "computing"),
         ("store", "computed", "stored", store)],
        [[0, 10, 20, 25], [25, 30, 40, 50]],
    )  # fmt: skip
    centres, gflops = flop_rate(trace, bins=5)
    assert centres.tolist() == [5, 15, 25, 35, 45]
    assert gflops == pytest.approx(expected)


def test_computing_phases_of_two_channels_share_a_step(make_trace):
    # a copy channel beside two computing phases; each computes half of its step's FLOP
    trace = redescribed(
        make_trace,
        [("copy", "landed"), ("ready", "half", "done")],
        [("copy", "copy", "landed", "loading"), ("mma_a", "ready", "half", "computing"),
         ("mma_b", "half", "done", "computing")],
        [[0, 10, 10, 20, 30], [10, 30, 30, 40, 50]],
    )  # fmt: skip
    _, gflops = flop_rate(trace, bins=5, flops_per_block_tile=[[1, 3]])
    assert gflops == pytest.approx([0, 204.8, 204.8, 614.4, 614.4])
    assert integral(*flop_rate(trace, bins=7), trace) == pytest.approx(total_flops(trace))


def test_without_a_computing_phase_sampled_blocks_spread_their_flops(make_trace):
    trace = redescribed(
        make_trace,
        [("issue", "loaded")],
        [("load", "issue", "loaded", "loading")],
        [[0, 10], [25, 30]],
    )
    _, gflops = flop_rate(trace, bins=5)
    assert gflops == pytest.approx([327.68] * 5)  # 16384 FLOP over [0, 50]


def test_flop_rate_by_hand(make_trace):
    centres, gflops = flop_rate(one_block(make_trace), bins=5)
    assert centres.tolist() == [5, 15, 25, 35, 45]
    assert gflops == pytest.approx([0, 819.2, 0, 819.2, 0])


def test_flop_rate_weights(make_trace):
    _, gflops = flop_rate(one_block(make_trace), bins=5, flops_per_block_tile=[[1, 3]])
    assert gflops == pytest.approx([0, 409.6, 0, 1228.8, 0])
    _, same = flop_rate(one_block(make_trace), bins=5, flops_per_block_tile=7.0)
    assert same == pytest.approx([0, 819.2, 0, 819.2, 0])  # a scalar weight normalises away
    with pytest.raises(ValueError):
        flop_rate(one_block(make_trace), flops_per_block_tile=0)


def test_zero_length_phase_is_an_instant(make_trace):
    trace = one_block(make_trace)
    trace.mark("loaded")[:] = [[10, 30]]
    trace.mark("computed")[:] = [[20, 30]]  # tile 1 computed in no time: a step at t = 30
    _, gflops = flop_rate(trace, bins=5)
    assert gflops == pytest.approx([0, 819.2, 819.2, 0, 0])


def test_instant_kernel(make_trace):
    trace = schedule(make_trace(grid=(1, 1), phases=False, n_tiles=2), [0], [0], [0])
    centres, gflops = flop_rate(trace, bins=2)
    assert centres.tolist() == [0.25, 0.75]
    assert gflops.sum() * 0.5 == pytest.approx(total_flops(trace))


def test_flop_rate_without_phases_is_uniform(make_trace):
    trace = make_trace(grid=(1, 1), phases=False, n_tiles=2)
    trace.blocks["start"], trace.blocks["end"] = 0, 100
    _, gflops = flop_rate(trace, bins=4)
    assert gflops == pytest.approx([163.84] * 4)


def test_flop_rate_mixes_sampled_and_plain_blocks(make_trace):
    trace = make_trace(grid=(2, 1), n_tiles=2, sample=1)  # block 0 sampled, block 1 not
    trace.blocks["start"] = [0, 0]
    trace.blocks["end"] = [50, 100]
    trace.mark("loaded")[:] = [[10, 30]]
    trace.mark("computed")[:] = [[20, 40]]
    _, gflops = flop_rate(trace, bins=10)
    total = total_flops(trace)  # 2 * 16 * 32 * 32
    plain = total / 2 / 100
    tile = total / 4 / 10
    expected = [plain + tile * (i in (1, 3)) for i in range(10)]
    assert gflops == pytest.approx(expected)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"phases": False}, {"sample": 3}, {"warps": True}, {"grid": (7, 5), "n_tiles": 9}],
)
@pytest.mark.parametrize("bins", [None, 1, 7, 1000])
def test_flop_rate_integrates_to_2mnk(make_trace, kwargs, bins):
    trace = make_trace(**kwargs)
    centres, gflops = flop_rate(trace, bins=bins)
    assert len(centres) == len(gflops) == (bins or 200)
    assert np.all(gflops >= -1e-9)
    assert integral(centres, gflops, trace) == pytest.approx(total_flops(trace), rel=1e-9)


@settings(max_examples=50, deadline=None)
@given(
    lengths=hnp.arrays(np.int64, (4, 3), elements=st.integers(0, 10**6)),
    gaps=hnp.arrays(np.int64, (4, 3), elements=st.integers(0, 10**6)),
    bins=st.integers(1, 300),
)
def test_flop_rate_integral_random_phases(make_trace, lengths, gaps, bins):
    trace = make_trace(grid=(2, 2), n_tiles=3)
    # Zero-length compute phases included: they must not produce infinities.
    loaded = trace.blocks["start"][:, None] + np.cumsum(gaps + lengths, axis=1) - lengths
    trace.mark("issue")[:] = trace.blocks["start"][:, None]
    trace.mark("loaded")[:] = loaded
    trace.mark("computed")[:] = loaded + lengths
    trace.blocks["end"] = np.maximum(trace.blocks["end"], loaded[:, -1] + lengths[:, -1])
    centres, gflops = flop_rate(trace, bins=bins)
    assert np.all(np.isfinite(gflops))
    assert integral(centres, gflops, trace) == pytest.approx(total_flops(trace), rel=1e-9)


def test_flop_rate_of_a_large_trace_thins_its_phase_rows():
    """Beyond max_intervals, every n-th sampled row stands for its neighbours: the same
    integral, nearly the same curve."""
    from matviz.backends.contract import RunRequest, run

    trace = run(RunRequest("tiled", 1024, 1024, 1024, {"tile": 16}, level=2))
    full_x, full = flop_rate(trace, bins=200)
    thin_x, thin = flop_rate(trace, bins=200, max_intervals=20_000)
    width = full_x[1] - full_x[0]
    assert np.array_equal(full_x, thin_x)
    assert full.sum() * width == pytest.approx(thin.sum() * width, rel=1e-9)
    assert np.abs(full - thin).sum() < 0.1 * full.sum()
    assert not np.array_equal(full, thin)  # it did thin

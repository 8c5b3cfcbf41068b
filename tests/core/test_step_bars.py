"""One block's k-steps as bars, a row per channel: a pipeline's copy beside its compute."""

from functools import cache

import numpy as np

from matviz.backends.contract import RunRequest, run
from matviz.core.step_bars import SUB_ROWS, StepBars, raster, step_bars


@cache
def trace(kernel: str, level: int = 2, phase_every: int = 1, **params):
    return run(RunRequest(kernel, 520, 384, 1000, params=params, level=level,
                          phase_every=phase_every))  # fmt: skip


def test_a_pipeline_has_a_copy_row_beside_a_compute_row():
    tr = trace("async_pipeline", BM=64, BN=64, BK=16, STAGES=3)
    bars = step_bars(tr, 0)
    assert bars.rows == (("copy",), ("compute",))
    n = tr.n_tiles
    copies, computes = bars.row == 0, bars.row == 1
    assert copies.sum() == computes.sum() == n
    # each bar is its step's phase, from the trace's own marks
    row = tr.phase_row(0)
    for phase, (begin, end) in enumerate([("issue", "landed"), ("begin", "computed")]):
        mine = bars.phase == phase
        order = np.argsort(bars.step[mine])
        np.testing.assert_array_equal(bars.begin[mine][order], tr.mark(begin)[row])
        np.testing.assert_array_equal(bars.end[mine][order], tr.mark(end)[row])
    assert bars.state == ("loading", "computing")
    assert np.all(np.diff(bars.begin) >= 0)  # in time order
    # the copy of step t + 2 is in flight while step t computes
    copy_end = dict(zip(bars.step[copies], bars.end[copies], strict=True))
    copy_begin = dict(zip(bars.step[copies], bars.begin[copies], strict=True))
    for t, (b, e) in zip(bars.step[computes], zip(bars.begin[computes], bars.end[computes],
                                                  strict=True), strict=True):  # fmt: skip
        if t + 2 < n:
            assert copy_begin[t + 2] <= b and copy_end[t + 2] >= e
    life = int(tr.blocks["end"][0] - tr.blocks["start"][0])
    assert 0.5 * life < bars.overlap_ns() < life


def test_one_step_at_a_time_is_one_row_that_never_overlaps():
    tr = trace("tiled", tile=16)
    bars = step_bars(tr, 0)
    assert bars.rows == (("load", "compute"),)
    assert len(bars.begin) == 2 * tr.n_tiles
    assert bars.overlap_ns() == 0
    assert np.all(bars.begin[1:] >= bars.end[:-1])  # load, compute, load, ... in turn


def test_no_bars_without_marks():
    sampled = trace("async_pipeline", phase_every=3)
    assert step_bars(sampled, 3) is not None and step_bars(sampled, 4) is None
    assert step_bars(trace("async_pipeline", level=1), 0) is None
    assert step_bars(trace("naive", level=2), 0) is None


def _overlap_by_brute_force(bars) -> int:
    edges = np.unique(np.concatenate([bars.begin, bars.end]))
    mid = (edges[:-1] + edges[1:]) / 2
    running = [
        ((mid[:, None] >= bars.begin[bars.row == r]) & (mid[:, None] < bars.end[bars.row == r]))
        .any(axis=1)
        for r in range(len(bars.rows))
    ]
    return int(np.sum(np.diff(edges)[np.sum(running, axis=0) >= 2]))


def test_overlap_is_the_time_two_rows_run_at_once():
    # a sweep over merged intervals (a block of 16k k-steps took a 1e9-cell matrix before)
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        rows = int(rng.integers(1, 4))
        row = rng.integers(0, rows, n)
        begin = rng.integers(0, 200, n)
        end = begin + rng.integers(1, 40, n)
        zeros = np.zeros(n, np.int64)
        bars = StepBars(0, (("x",),) * rows, row, np.arange(n), zeros, zeros, (1,) * rows,
                        ("loading",), begin, end)  # fmt: skip
        assert bars.overlap_ns() == _overlap_by_brute_force(bars)


def test_raster_draws_every_bar_in_its_row_and_lane():
    tr = trace("async_pipeline", BM=64, BN=64, BK=16, STAGES=3)
    bars = step_bars(tr, 0)
    start, end = int(tr.blocks["start"][0]), int(tr.blocks["end"][0])
    image = raster(bars, start, end, 4000)
    assert image.shape == (2 * SUB_ROWS, 4000)
    for i in range(len(bars.begin)):
        column = int(((bars.begin[i] + bars.end[i]) / 2 - start) * 4000 / (end - start))
        rows = image[bars.row[i] * SUB_ROWS : (bars.row[i] + 1) * SUB_ROWS, column]
        assert bars.phase[i] + 1 in rows, i
    assert set(np.unique(image)) == {0, 1, 2}  # gaps, copies, computes

"""One block's k-steps as bars, a row per channel: a pipeline's copy beside its compute."""

from functools import cache

import numpy as np

from matviz.backends.contract import RunRequest, run
from matviz.core.step_bars import step_bars


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

"""Barrier waits for the diagnostics panel: from the level-3 run, apart from the timeline."""

from __future__ import annotations

import copy

import numpy as np

from matviz.core.explain import barrier_waits, diagnostics_slowdown_pct
from matviz.core.timeline import Timeline


def test_barrier_waits_of_a_sampled_block(make_trace):
    trace = make_trace(warps=True, seed=4)
    tl = Timeline(trace)
    block = int(trace.warp_blocks[1])
    w = barrier_waits(tl, block, 2)
    assert w is not None and w.block == block and not w.substituted and w.ktile == 2
    assert [ph.name for ph in w.barriers] == ["load", "compute"]
    assert np.array_equal(w.waits, trace.barrier_wait[1, 2])
    for i in range(2):
        assert w.last[i] == int(np.argmin(w.waits[:, i]))
        assert w.max_ns[i] == int(w.waits[:, i].max())
        assert w.mean_ns[i] == float(w.waits[:, i].mean())
    assert barrier_waits(tl, block, 99).ktile == trace.n_tiles - 1  # clipped


def test_barrier_waits_of_an_unsampled_block_come_from_the_nearest(make_trace):
    trace = make_trace(warps=True)
    tl = Timeline(trace)
    w = barrier_waits(tl, 5, 0)  # (1, 1): nearest sampled is block 1 at (1, 0)
    assert w.substituted and w.requested == 5 and w.block == 1
    assert barrier_waits(Timeline(make_trace()), 5, 0) is None  # no warps sampled


def test_slowdown_of_the_level_3_run(make_trace):
    trace = make_trace(warps=True)
    assert diagnostics_slowdown_pct(trace) is None
    manifest = copy.deepcopy(trace.manifest)
    manifest["stats"] |= {"diagnostics_ms": 0.5, "instrumented_ms_median": 0.25}
    trace.manifest = manifest
    assert diagnostics_slowdown_pct(trace) == 100.0

"""Huge shapes: the trace budget bounds the simulator's memory, and chunking changes no bit."""

import json
import subprocess
import sys

import numpy as np
import pytest

from matviz.backends import sim_schedule, simulator
from matviz.backends.contract import MAX_BUDGET_MIB, RunRequest
from matviz.backends.simulator import BLOCK_BYTES, simulate
from matviz.core import sampling
from matviz.errors import MatvizError

MIB = 2**20


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_the_budget_has_a_maximum_refused_in_one_line():
    assert MAX_BUDGET_MIB * MIB == sampling.MAX_BUDGET_BYTES == 4096 * MIB
    RunRequest("tiled", 64, 64, 64, budget_bytes=sampling.MAX_BUDGET_BYTES)  # the maximum is fine
    with pytest.raises(MatvizError) as exc:
        RunRequest("tiled", 64, 64, 64, budget_bytes=100_000 * MIB)
    assert "at most 4096 MiB (got 100000 MiB)" in _one_line(exc)


@pytest.mark.parametrize(
    ("kernel", "shape", "params", "budget_mib", "needle"),
    [
        # 134M blocks: more than even the largest budget holds
        ("naive", (1, 2**31 - 1, 1), {}, 256, "even the largest budget (4096 MiB)"),
        ("tiled", (46340, 46340, 46340), {"tile": 8}, 256, "raise the budget (--budget-mib"),
    ],
)
def test_block_records_over_the_budget_are_refused_in_one_line(
    kernel, shape, params, budget_mib, needle
):
    request = RunRequest(kernel, *shape, params=params, budget_bytes=budget_mib * MIB)
    with pytest.raises(MatvizError) as exc:
        simulate(request, registers=32)
    text = _one_line(exc)
    assert needle in text and "MiB of block records" in text
    held = request.config().n_blocks * BLOCK_BYTES
    assert f"need {-(-held // MIB)} MiB" in text


_MEASURE = """
import json, resource, sys
from matviz.backends.contract import RunRequest
from matviz.backends.simulator import simulate
M, N, K, tile, budget, level = map(int, sys.argv[1:])
request = RunRequest("tiled", M, N, K, params={"tile": tile}, level=level, budget_bytes=budget)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
simulate(RunRequest("tiled", 64, 64, 64, params={"tile": tile}), registers=32)  # warm imports
warm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
trace = simulate(request, registers=32)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"warm_kib": warm, "peak_kib": peak, "blocks": len(trace.blocks),
                  "marks": trace.marks.nbytes, "every": trace.manifest["sampling"]["phase_every"]}))
"""


@pytest.mark.parametrize(("shape", "level"), [((8192, 8192, 64), 2), ((4096, 4096, 4096), 3)])
def test_a_huge_launch_stays_within_its_budget(shape, level):
    # 1M blocks of 8 k-steps, or 262k blocks of 512 (each a few seconds): the process's peak
    # over its warm state stays within the budget plus the fixed chunk temporaries. Before the
    # chunking these grew by ~900 MB and ~400 MB.
    budget = 64 * MIB
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *map(str, shape), "8", str(budget), str(level)],
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout)
    grown = (got["peak_kib"] - got["warm_kib"]) * 1024
    assert got["every"] > 1 and got["marks"] <= budget
    assert grown < budget + 160 * MIB, got


def _placements(fl, chunk):
    parts = list(fl.placements(chunk))
    starts = [p[0] for p in parts]
    assert starts == sorted(starts) and starts[0] == 0
    return [np.concatenate([p[i] for p in parts]) for i in (1, 2, 3)]


@pytest.mark.parametrize("n_blocks", [100, 132 * 4, 132 * 4 + 1, 20_000])
def test_placements_are_the_merged_retirements(n_blocks):
    # The chunked k-way merge against one global sort of every handing-out retirement.
    rng = np.random.default_rng(n_blocks)
    sms, b = 132, 4
    speed = 1 + 0.01 * rng.standard_normal(sms)

    def new_work():
        draw = np.random.default_rng(7)
        return sim_schedule.WorkRows(lambda n: list(speed * (100 + draw.gamma(4.0, 2.0, (n, sms)))))

    shares = sim_schedule.share_table(b, 0.4, 4, 12.0)
    fl = sim_schedule.fluid_schedule(n_blocks, sms, b, shares, new_work, 1.0)
    assert fl.counts.sum() == n_blocks
    smid, local, join = _placements(fl, 1000)
    assert len(smid) == n_blocks
    first = min(n_blocks, sms * b)
    np.testing.assert_array_equal(smid[:first], np.arange(first) % sms)
    steps, sm = np.nonzero(np.arange(len(fl.events))[:, None] < fl.quota[None, :])
    order = np.lexsort((sm, steps, fl.events[steps, sm]))
    np.testing.assert_array_equal(smid[first:], sm[order])
    np.testing.assert_array_equal(local[first:], b + steps[order])
    np.testing.assert_array_equal(join[first:], fl.events[steps, sm][order])
    # every block retires at its local index on its SM, after it joined
    assert np.all(fl.events[local, smid] >= join)
    for got, want in zip(_placements(fl, 7), (smid, local, join), strict=True):
        np.testing.assert_array_equal(got, want)


def test_chunk_sizes_change_no_bit(monkeypatch):
    request = RunRequest(
        "tiled", 1000, 700, 480, params={"tile": 16}, level=3, budget_bytes=300_000, seed=5
    )
    whole = simulate(request, registers=32)
    assert whole.manifest["sampling"]["phase_every"] > 1 and len(whole.warp_blocks)
    monkeypatch.setattr(simulator, "DETAIL_CHUNK", 2 * 30 * 3)  # three rows a chunk
    monkeypatch.setattr(sim_schedule, "PLACEMENT_CHUNK", 500)
    chunked = simulate(request, registers=32)
    for name in ("blocks", "phase_blocks", "marks", "warp_blocks", "barrier_wait"):
        np.testing.assert_array_equal(getattr(chunked, name), getattr(whole, name), name)
    assert chunked.manifest == whole.manifest


def test_the_budget_covers_block_records_and_marks():
    budget = 400_000
    request = RunRequest("tiled", 512, 512, 512, params={"tile": 8}, budget_bytes=budget)
    trace = simulate(request, registers=32)
    held = len(trace.blocks) * BLOCK_BYTES
    rows = len(trace.phase_blocks)
    assert held + trace.marks.nbytes + rows * simulator.DETAIL_ROW_BYTES <= budget
    # one more sampled block would not have fitted
    every = trace.manifest["sampling"]["phase_every"]
    more = sampling.sampled_blocks(len(trace.blocks), every - 1)
    assert held + more * (trace.marks[0].nbytes + simulator.DETAIL_ROW_BYTES) > budget


@pytest.mark.parametrize("form", ["registers", "", None, 1])
def test_an_unknown_form_of_the_marks_is_refused_in_one_line(form) -> None:
    for ok in ("auto", "lanes", "store"):
        assert RunRequest("tiled", 64, 64, 64, stamp_form=ok).stamp_form == ok
    with pytest.raises(MatvizError, match="stamp form must be one of auto, lanes, store"):
        RunRequest("tiled", 64, 64, 64, stamp_form=form)


@pytest.mark.parametrize("target", [0, -1, 100.5, float("nan"), float("inf"), True, "3", [3]])
def test_an_overhead_target_outside_0_to_100_is_refused_in_one_line(target) -> None:
    with pytest.raises(MatvizError, match="overhead target must be a percentage") as err:
        RunRequest("tiled", 64, 64, 64, overhead_target_pct=target)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("target", [None, 0.5, 3, 100])
def test_an_overhead_target_travels_to_the_worker(target) -> None:
    request = RunRequest("tiled", 64, 64, 64, overhead_target_pct=target)
    assert RunRequest.from_json(request.to_json()) == request
    assert RunRequest("tiled", 64, 64, 64).overhead_target_pct == 3.0  # issue 9's level-2 target

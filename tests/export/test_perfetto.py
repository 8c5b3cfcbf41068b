"""Perfetto / Chrome trace JSON: one event per block and per recorded phase, properly nested."""

import copy
import gzip
import json
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from matviz.core.config import StepLayout
from matviz.core.timeline import Timeline
from matviz.core.trace import Trace
from matviz.errors import MatvizError
from matviz.export import perfetto
from matviz.paths import TRACE_DIR

REQUIRED = ("ph", "ts", "dur", "pid", "tid", "name")
BUNDLED = TRACE_DIR / "tiled_t32_p0_1024.mvz"


def export(trace, path):
    stats = perfetto.write_perfetto(trace, path)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return stats, json.load(fh)


def complete(doc, cat=None):
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and (cat is None or e["cat"] == cat)]


def test_document_shape_and_metadata(tmp_path, trace):
    _, doc = export(trace, tmp_path / "t.json")
    assert doc["displayTimeUnit"] == "ns"
    meta = doc["metadata"]
    assert meta["kernel"] == "tiled" and meta["backend"] == "sim"
    assert meta["shape"] == {"M": 64, "N": 96, "K": 80} and meta["params"] == trace.params
    assert meta["device"]["name"] and "simulated" in meta["source"]
    for event in complete(doc):
        assert all(key in event for key in REQUIRED), event
        assert isinstance(event["args"], dict) and event["dur"] >= 0
    named = {(e["pid"], e.get("tid"), e["name"]): e["args"] for e in doc["traceEvents"]}
    smids = np.unique(trace.blocks["smid"])
    for sm in smids.tolist():  # pid = SM + 1: Perfetto treats pid 0 as the idle task
        assert named[(sm + 1, None, "process_name")]["name"] == f"SM {sm}"
    matviz = named[(perfetto.MATVIZ_PID, None, "process_name")]
    assert matviz["name"].startswith("matviz: tiled T16 P0 64x96x80, simulated")
    assert matviz["backend"] == "sim"
    assert meta["description"] == trace.manifest["description"]  # the kernel as described
    kernel = [e for e in complete(doc, "kernel")]
    assert len(kernel) == 1 and kernel[0]["args"]["kernel"] == "tiled"


def test_one_event_per_block_and_per_phase_mark_pair(tmp_path, trace):
    stats, doc = export(trace, tmp_path / "t.json")
    n_phase = len(trace.phase_blocks) * trace.n_tiles
    blocks, loads = complete(doc, "block"), complete(doc, "load")
    computes = complete(doc, "compute")
    assert len(blocks) == len(trace.blocks) == stats.blocks
    assert len(loads) == len(computes) == n_phase and stats.phases == 2 * n_phase
    first = next(e for e in loads if e["args"]["ktile"] == 3)
    assert first["name"] == "load k=3" and first["args"]["phase"] == "load"
    b = first["args"]["block"]
    assert first["args"]["bx"] == int(trace.blocks["bx"][b])
    assert first["args"]["by"] == int(trace.blocks["by"][b])
    row = trace.phase_row(b)
    issue, loaded = trace.mark("issue")[row, 3], trace.mark("loaded")[row, 3]
    assert first["ts"] == pytest.approx(issue / 1000, abs=1e-9)
    assert first["dur"] == pytest.approx((loaded - issue) / 1000)
    compute = next(e for e in computes if e["args"]["block"] == b and e["args"]["ktile"] == 3)
    assert compute["name"] == "compute k=3" and compute["tid"] == first["tid"]
    assert compute["ts"] == pytest.approx(loaded / 1000, abs=1e-9)
    assert compute["dur"] == pytest.approx((trace.mark("computed")[row, 3] - loaded) / 1000)
    names = {e["name"] for e in blocks}
    gx, gy = trace.grid
    assert names == {f"block ({x},{y})" for x in range(gx) for y in range(gy)}


def test_tracks_are_monotone_blocks_never_overlap_phases_nest(tmp_path, trace):
    _, doc = export(trace, tmp_path / "t.json")
    slots, _ = Timeline(trace).sm_slots()
    tracks = defaultdict(list)
    for e in complete(doc):
        if e["cat"] != "kernel":
            tracks[(e["pid"], e["tid"])].append(e)
    for (pid, tid), events in tracks.items():
        ts = [e["ts"] for e in events]
        assert ts == sorted(ts), (pid, tid)
        block_events = [e for e in events if e["cat"] == "block"]
        for prev, nxt in zip(block_events, block_events[1:], strict=False):
            assert prev["ts"] + prev["dur"] <= nxt["ts"] + 1e-9
        for e in block_events:  # the track is the block's SM and slot
            b = e["args"]["block"]
            assert pid - 1 == trace.blocks["smid"][b] and tid - 1 == slots[b]
        spans = {e["args"]["block"]: (e["ts"], e["ts"] + e["dur"]) for e in block_events}
        for e in events:
            if e["cat"] in ("load", "compute"):
                lo, hi = spans[e["args"]["block"]]
                assert lo - 1e-9 <= e["ts"] and e["ts"] + e["dur"] <= hi + 1e-9
        assert_nested(events)


def assert_nested(events):
    """Events of one track are disjoint or nested, never partly overlapping (Perfetto would
    draw them wrongly); equal starts nest when the longer one comes first in the file."""
    stack: list[float] = []  # ends of the open enclosing events
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        while stack and stack[-1] <= e["ts"] + 1e-9:
            stack.pop()
        end = e["ts"] + e["dur"]
        assert not stack or end <= stack[-1] + 1e-9, ("partial overlap", e)
        stack.append(end)


def kstep_section(channels, phases, chained=True):
    """A description's kstep section as a manifest stores it; phases are (name, begin, end,
    state, barrier)."""
    return {
        "depth": 16, "count": 5, "channels": [list(c) for c in channels], "chained": chained,
        "in_flight": len(channels),
        "phases": [dict(zip(("name", "begin", "end", "state", "barrier"), ph, strict=True))
                   for ph in phases],
    }  # fmt: skip


DOUBLE_BUFFERED = kstep_section(
    [("copy", "landed"), ("ready", "done")],
    [("copy", "copy", "landed", "loading", ""), ("mma", "ready", "done", "computing", "bar")],
)


def double_buffered(trace):
    """``trace`` re-described with two channels in flight: the copy of k-step t + 1 runs
    beside the multiply-adds of step t. Every block of length D splits into n + 2 parts of
    L = D / (n + 2): copy t on [t L, (t + 1) L), mma t half a part later, on
    [(t + 1.5) L, (t + 2.5) L): each mma partly overlaps two copies."""
    manifest = copy.deepcopy(trace.manifest)
    manifest["description"]["kstep"] = DOUBLE_BUFFERED
    rows, n = trace.phase_blocks, trace.n_tiles
    start = trace.blocks["start"][rows].astype(np.int64)[:, None]
    part = (trace.blocks["end"][rows].astype(np.int64)[:, None] - start) // (n + 2)
    t = np.arange(n)[None, :]
    copy_at, mma_at = start + t * part, start + (t + 1) * part + part // 2
    marks = np.stack([copy_at, copy_at + part, mma_at, mma_at + part], axis=2)
    return Trace(manifest, trace.blocks.copy(), phase_blocks=rows.copy(), marks=marks)


def test_two_channels_in_flight_get_their_own_tracks(tmp_path, trace):
    both = double_buffered(trace)
    stats, doc = export(both, tmp_path / "t.json")
    copies, mmas = complete(doc, "copy"), complete(doc, "mma")
    n_phase = len(both.phase_blocks) * both.n_tiles
    assert len(copies) == len(mmas) == n_phase and stats.phases == 2 * n_phase
    slots, _ = Timeline(both).sm_slots()
    tracks = defaultdict(list)
    for e in complete(doc):
        if e["cat"] != "kernel":
            tracks[(e["pid"], e["tid"])].append(e)
    for events in tracks.values():
        assert_nested(events)
    blocks = {e["args"]["block"]: e for e in complete(doc, "block")}
    for e in copies + mmas:  # copies nest in the block's track, mmas run on the next one
        block = blocks[e["args"]["block"]]
        assert e["pid"] == block["pid"]
        assert e["tid"] == block["tid"] + (e["cat"] == "mma")
        assert block["args"]["slot"] == slots[e["args"]["block"]]
    assert {e["tid"] for e in complete(doc, "block")} == {2 * s + 1 for s in slots.tolist()}
    # on one track they would partly overlap: the copy of step 1 runs into the mma of step 0
    b = int(both.phase_blocks[0])
    copy1 = next(e for e in copies if e["args"]["block"] == b and e["args"]["ktile"] == 1)
    mma0 = next(e for e in mmas if e["args"]["block"] == b and e["args"]["ktile"] == 0)
    assert copy1["name"] == "copy k=1" and mma0["name"] == "mma k=0"
    assert copy1["ts"] < mma0["ts"] < copy1["ts"] + copy1["dur"] < mma0["ts"] + mma0["dur"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}  # fmt: skip
    assert names[(mma0["pid"], mma0["tid"])] == f"slot {slots[b]}: mma"
    assert names[(copy1["pid"], copy1["tid"])] == f"slot {slots[b]}"


def test_phases_that_partly_overlap_in_one_channel_are_split():
    layout = StepLayout.of(
        kstep_section(
            [("a", "b", "c", "d"), ("e", "f")],
            [("ac", "a", "c", "loading", ""), ("bd", "b", "d", "computing", ""),
             ("ab", "a", "b", "loading", ""), ("cd", "c", "d", "computing", ""),
             ("ef", "e", "f", "computing", "")],
        )
    )  # fmt: skip
    track, per_slot = perfetto._tracks(layout)
    # ac holds ab and touches cd; bd overlaps ac partly: a second track; ef: its own channel
    assert dict(zip([ph.name for ph in layout.phases], track, strict=True)) == {
        "ac": 0, "bd": 1, "ab": 0, "cd": 0, "ef": 2
    }  # fmt: skip
    assert per_slot == 3


def test_sampled_blocks_only_get_phases(tmp_path, make_sim):
    trace = make_sim(m=128, n=128, k=64, level=2, phase_every=3)
    assert 0 < len(trace.phase_blocks) < len(trace.blocks)
    _, doc = export(trace, tmp_path / "t.json")
    with_phases = {e["args"]["block"] for e in complete(doc, "compute")}
    assert with_phases == set(trace.phase_blocks.tolist())
    assert len(complete(doc, "block")) == len(trace.blocks)


def test_level_1_has_blocks_only_and_gzip_works(tmp_path, make_sim):
    trace = make_sim(level=1)
    stats, doc = export(trace, tmp_path / "t.json.gz")
    assert stats.phases == 0 and len(complete(doc, "block")) == len(trace.blocks)
    assert not complete(doc, "load")


def test_bundled_h200_recording(tmp_path):
    from matviz.core.trace_io import load_trace

    trace = load_trace(BUNDLED)
    stats, doc = export(trace, tmp_path / "h200.json")
    assert stats.phases == 2 * trace.mark("issue").size
    assert "recorded on NVIDIA H200" in doc["metadata"]["source"]


def test_a_missing_folder_is_one_error_and_leaves_nothing(tmp_path, trace):
    with pytest.raises(MatvizError, match="does not exist"):
        perfetto.write_perfetto(trace, tmp_path / "nope" / "t.json")
    assert list(tmp_path.iterdir()) == []


@given(st.lists(st.integers(0, 2**62), min_size=1, max_size=50))
def test_digits_match_python(values):
    text = perfetto._int_text(np.array(values, np.int64))
    rows = [bytes(r[r != 0]).decode() for r in text]
    assert rows == [str(v) for v in values]
    parts = perfetto._us_text(np.array(values, np.int64))
    joined = perfetto._records(len(values), parts)
    assert [bytes(r[r != 0]).decode() for r in joined] == [
        f"{v // 1000}.{v % 1000:03d}" for v in values
    ]


def test_the_stepwise_job_of_the_gui_writes_the_same_document(tmp_path, trace):
    from matviz.app.export_job import ExportJob
    from matviz.export.options import ExportOptions

    job = ExportJob(trace, ExportOptions(format="perfetto"), tmp_path / "steps.json.gz")
    job.start()
    while job.step(0.0):
        assert 0 < job.done < job.total
    path = job.finish()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        stepped = json.load(fh)
    _, whole = export(trace, tmp_path / "whole.json")
    assert stepped == whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["steps.json.gz", "whole.json"]


# -- a cap on the events: blocks sampled evenly, every SM's counter in full ----------------------
def resident_at(trace, sm, t_ns):
    b = trace.blocks
    start, end = b["start"].astype(np.int64), b["end"].astype(np.int64)
    return int(((b["smid"] == sm) & (start <= t_ns) & (t_ns < end)).sum())


def test_a_cap_keeps_blocks_evenly_and_whole_phases(tmp_path, make_sim):
    trace = make_sim(m=128, n=128, k=64, level=2)  # 64 blocks x 4 k-tiles x 2 phases
    per = 2 * trace.n_tiles
    assert len(trace.blocks) * (1 + per) > 100
    stats, doc = export_capped(trace, tmp_path / "t.json", 100)
    blocks = complete(doc, "block")
    phases = complete(doc, "load") + complete(doc, "compute")
    assert len(blocks) + len(phases) <= 100
    assert (len(blocks), len(phases)) == (stats.blocks, stats.phases)
    assert stats.sampled and stats.total_blocks == 64 and stats.total_phases == 64 * per
    kept = sorted(e["args"]["block"] for e in blocks)
    assert len(set(kept)) == len(kept) >= 40  # blocks get half the cap or more
    assert max(np.diff([-1, *kept, 64])) <= 2  # evenly: never two blocks left out in a row
    with_phases = {e["args"]["block"] for e in phases}
    assert with_phases <= set(kept)
    for b in with_phases:  # a block's phases are all there, or none
        assert sum(e["args"]["block"] == b for e in phases) == per
    info = doc["metadata"]["export"]
    assert info["sampled"] and info["max_events"] == 100
    assert (info["block_events"], info["blocks"]) == (len(blocks), 64)
    assert (info["phase_events"], info["phase_events_recorded"]) == (len(phases), 64 * per)


def export_capped(trace, path, cap):
    stats = perfetto.write_perfetto(trace, path, max_events=cap)
    with open(path, encoding="utf-8") as fh:
        return stats, json.load(fh)


@pytest.mark.parametrize("cap", [1, 7, 10_000])
def test_every_sm_counter_counts_every_block(tmp_path, make_sim, cap):
    trace = make_sim(m=128, n=128, k=64, level=2)
    stats, doc = export_capped(trace, tmp_path / "t.json", cap)
    assert stats.blocks + stats.phases <= cap
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert len(counters) == stats.counters > 0
    assert {e["pid"] - 1 for e in counters} == set(np.unique(trace.blocks["smid"]).tolist())
    for e in counters:
        assert e["name"] == perfetto.COUNTER_NAME
        t_ns = round(e["ts"] * 1000)
        assert e["args"]["blocks"] == resident_at(trace, e["pid"] - 1, t_ns), e
    assert "exact" in doc["metadata"]["export"]["counters"]


def test_binned_counters_keep_each_sms_busy_time(make_sim):
    trace = make_sim(m=512, n=512, k=64, level=1)  # 1024 blocks: ~8 after another per SM
    pid, ts, hundredths, binned = perfetto.resident_counters(trace, points=5)
    assert binned
    b = trace.blocks
    width = max(trace.duration_ns, int(b["end"].max())) / 5
    for sm in np.unique(b["smid"]).tolist():
        mine = pid == sm + 1
        assert mine.sum() == 6 and hundredths[mine][-1] == 0  # 5 bins, then 0 at the end
        busy = (b["end"][b["smid"] == sm] - b["start"][b["smid"] == sm]).sum()
        rounding = 5 * width / 200  # each bin's mean is rounded to 0.01
        assert hundredths[mine][:-1].sum() / 100 * width == pytest.approx(busy, abs=rounding)
        assert (np.diff(ts[mine]) > 0).all()


def test_the_cli_says_what_it_sampled_and_takes_another_cap(tmp_path, mvz, capsys):
    from matviz import cli

    out = tmp_path / "t.json"
    assert cli.main(["export", str(mvz), "-o", str(out), "--max-events", "30"]) == 0
    stdout = capsys.readouterr().out
    assert "blocks sampled evenly to --max-events 30" in stdout and "of 24 and 240" in stdout
    with open(out, encoding="utf-8") as fh:
        doc = json.load(fh)
    assert doc["metadata"]["export"]["max_events"] == 30
    assert len(complete(doc, "block")) + len(complete(doc, "load")) * 2 <= 30
    assert cli.main(["export", str(mvz), "-o", str(out)]) == 0  # under the cap: no sampling
    assert "sampled" not in capsys.readouterr().out
    assert cli.main(["export", "--help"]) == 0
    assert f"(default {perfetto.MAX_EVENTS})" in " ".join(capsys.readouterr().out.split())


def test_the_default_cap_keeps_a_big_trace_small_and_quick(tmp_path, make_sim):
    import time

    trace = make_sim(m=12000, n=12000, k=32, level=1)  # 562,500 blocks, 132 SMs
    assert len(trace.blocks) > perfetto.MAX_EVENTS
    started = time.perf_counter()
    stats = perfetto.write_perfetto(trace, tmp_path / "big.json.gz")
    seconds = time.perf_counter() - started
    assert stats.blocks == perfetto.MAX_EVENTS and stats.sampled
    assert stats.bytes < 100e6 and (tmp_path / "big.json.gz").stat().st_size < 20e6
    assert seconds < 60

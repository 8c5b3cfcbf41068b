from __future__ import annotations

import copy
import dataclasses
import json
import re
import string

import numpy as np
import pytest

from matviz.backends.contract import RunRequest, run
from matviz.core import banks, coalescing, registry
from matviz.core.explain import (
    TEMPLATES,
    Explanation,
    dram_floor_bytes,
    explain,
    fmt_ns,
    measured_bytes,
    trace_facts,
    written_elements,
)
from matviz.core.explain_texts import LIMITERS
from matviz.core.summary import summary_lines
from matviz.core.timeline import BlockState, Timeline
from matviz.core.trace import Trace
from matviz.core.trace_io import load_trace
from matviz.paths import I18N_DIR, TRACE_DIR

ZH_PATH = I18N_DIR / "zh_CN_explain.json"


def simulate(kernel: str, M: int, N: int, K: int, level: int = 2, budget_bytes=None, **params):
    extra = {} if budget_bytes is None else {"budget_bytes": budget_bytes}
    return run(RunRequest(kernel, M, N, K, params=params, level=level, **extra))


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@pytest.fixture(scope="module")
def sim():
    trace = simulate("tiled", 256, 256, 256, tile=16, pad=0, level=3)
    return trace, Timeline(trace)


def time_in_state(timeline: Timeline, block: int, state: BlockState) -> int:
    """A time at which ``block`` is in ``state`` (the middle of its first such stretch)."""
    bounds = np.concatenate([timeline.boundaries(block), [timeline.duration]])
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        t = int((lo + hi) // 2)
        if timeline.block_phase(block, t)[0] == state:
            return t
    raise AssertionError(f"block {block} is never {state.name}")


# -- translations ---------------------------------------------------------------------------
def test_templates_are_unique_strings():
    assert len(TEMPLATES) == len(set(TEMPLATES)) > 40
    assert all(isinstance(t, str) and t for t in TEMPLATES)


def test_every_template_has_a_chinese_translation_with_the_same_placeholders():
    table = json.loads(ZH_PATH.read_text(encoding="utf-8"))
    assert set(table) == set(TEMPLATES)
    for source in TEMPLATES:
        target = table[source]
        assert fields(target) == fields(source), source
        if fields(source) or len(source) > 3:
            assert re.search(r"[\u4e00-\u9fff]", target), source


def test_every_string_goes_through_tr(sim):
    trace, tl = sim
    seen: list[str] = []

    def tr(text: str) -> str:
        seen.append(text)
        return text

    block = int(trace.warp_blocks[3])
    for state in (BlockState.LOADING, BlockState.COMPUTING):
        explain(trace, tl, block, time_in_state(tl, block, state), tr=tr)
    explain(trace, tl, block, trace.duration_ns, tr=tr)
    trace_facts(trace, tr=tr)
    assert seen and set(seen) <= set(TEMPLATES)


def test_chinese_explanation_keeps_the_numbers(sim):
    trace, tl = sim
    table = json.loads(ZH_PATH.read_text(encoding="utf-8"))
    block = int(trace.warp_blocks[2])
    t = time_in_state(tl, block, BlockState.LOADING)
    zh = explain(trace, tl, block, t, tr=lambda s: table.get(s, s))
    en = explain(trace, tl, block, t)
    sm = int(trace.blocks["smid"][block])
    assert "线程块" in zh.title and "共享内存" in zh.body and "第八课" in zh.concept
    assert f"SM {sm}" in zh.body and "512" in zh.body and "4096" in zh.body
    assert zh.numbers == en.numbers
    assert "。 " not in zh.body  # Chinese sentences join without a space
    facts = trace_facts(trace, tr=lambda s: table.get(s, s))
    assert any("模拟" in f for f in facts)


# -- explanations ------------------------------------------------------------------------------
def test_explanation_is_frozen(sim):
    trace, tl = sim
    e = explain(trace, tl, 0, 100)
    assert isinstance(e, Explanation)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.title = "x"  # type: ignore[misc]


def test_loading_names_sm_ktile_and_reuse_numbers(sim):
    trace, tl = sim
    block = 37
    t = time_in_state(tl, block, BlockState.LOADING)
    e = explain(trace, tl, block, t)
    state, k = tl.block_phase(block, t)
    sm = int(trace.blocks["smid"][block])
    bx, by = int(trace.blocks["bx"][block]), int(trace.blocks["by"][block])
    assert f"({bx}, {by})" in e.title and f"t = {k}" in e.title
    assert f"SM {sm}" in e.body and f"t = {k} of {trace.n_tiles}" in e.body
    assert "256 threads" in e.body and "wait at the first __syncthreads" in e.body
    assert "(its load phase)" in e.body and e.numbers["phase"] == "load"
    assert "copy 256 elements of A and 256 of B into shared memory (As, Bs)" in e.body
    assert "512 elements" in e.body and "4096 FMAs" in e.body  # lesson §13 at T = 16
    assert "used 16 times" in e.body and "2mnk/T × 4 B" in e.body  # the description's formula
    assert "§11" in e.concept
    assert e.numbers["sm"] == sm and e.numbers["ktile"] == k and e.numbers["state"] == "loading"
    assert e.numbers["loads_per_step"] == 512 and e.numbers["fmas_per_step"] == 4096
    begin, end = tl.phase_span(block, t)
    assert e.numbers["phase_ns"] == end - begin > 0
    assert fmt_ns(end - begin) in e.body
    gb = trace.manifest["global_bytes"]
    assert e.numbers["global_bytes"] == gb["issued"] and e.numbers["formula_bytes"] == gb["formula"]
    assert "8.39 MB" in e.body  # 2mnk/16 x 4 B for 256^3
    assert "edge" not in e.body  # 256 is a multiple of 16


def test_computing_mentions_register_and_second_barrier(sim):
    trace, tl = sim
    block = 5
    t = time_in_state(tl, block, BlockState.COMPUTING)
    e = explain(trace, tl, block, t)
    assert "16 products" in e.body and "from As, Bs" in e.body and "register" in e.body
    assert "(its compute phase)" in e.body and "The second __syncthreads at its end" in e.body
    assert e.title.endswith(f"compute of k-tile t = {e.numbers['ktile']}")
    assert e.numbers["phase"] == "compute"
    assert "§12" in e.concept


@pytest.mark.parametrize("barrier", [1, 2])
def test_barrier_waits_are_not_mixed_into_the_phase(sim, barrier):
    """Issue 10: the waits come from the separate, slower level-3 run. Just before a barrier
    releases the block is still in its phase, and the text gives this run's phase times only;
    it points to the diagnostics panel for the waits instead of quoting them."""
    trace, tl = sim
    block = int(trace.warp_blocks[5])
    row = tl.phase_row(block)
    k = 3
    release = trace.mark("loaded" if barrier == 1 else "computed")[row, k]
    waits = tl.waits_at(block, k)[:, barrier - 1]
    assert waits.max() > 0
    t = int(release) - 1
    state = BlockState.LOADING if barrier == 1 else BlockState.COMPUTING
    assert tl.block_phase(block, t) == (state, k)
    e = explain(trace, tl, block, t)
    assert e.numbers["state"] == state.name.lower()
    assert e.title.endswith(f"{e.numbers['phase']} of k-tile t = {k}")
    assert "waits at" not in e.body and "waited up to" not in e.body
    assert fmt_ns(waits.max()) + " for it" not in e.body
    assert ("first" if barrier == 1 else "second") + " __syncthreads" in e.body
    assert "separate, slower level-3 run" in e.body and "Barrier waits panel" in e.body
    assert "max_wait_ns" not in e.numbers and "slowest_warp" not in e.numbers
    begin, end = tl.phase_span(block, t)
    assert e.numbers["phase_end_ns"] == end == int(release)
    assert f"lasts {fmt_ns(end - begin)}" in e.body


def test_a_level_2_trace_does_not_mention_the_waits():
    trace = simulate("tiled", 64, 64, 64, tile=16, level=2)
    tl = Timeline(trace)
    e = explain(trace, tl, 0, time_in_state(tl, 0, BlockState.LOADING))
    assert "level-3" not in e.body


def test_waiting_gives_wave_and_occupancy():
    trace = simulate("tiled", 2048, 2048, 64, tile=32, level=1)  # several waves
    tl = Timeline(trace)
    block = len(trace.blocks) - 1
    e = explain(trace, tl, block, 0)
    occ = trace.manifest["occupancy"]
    resident = tl.max_resident
    wave, waves = block // resident + 1, -(-len(trace.blocks) // resident)
    assert wave > 1
    assert f"wave {wave} of {waves}" in e.body
    assert f"at most {occ['blocks_per_sm']} blocks" in e.body
    assert e.numbers["wave"] == wave and e.numbers["blocks_per_sm"] == occ["blocks_per_sm"]
    assert e.numbers["state"] == "waiting" and "§17" in e.concept


def test_done_and_epilogue_and_prologue(sim):
    trace, tl = sim
    e = explain(trace, tl, 3, trace.duration_ns)
    assert e.numbers["state"] == "done" and "once" in e.body
    row = tl.phase_row(3)
    start = int(trace.blocks["start"][3])
    first = int(trace.mark("issue")[row, 0])
    pro = explain(trace, tl, 3, (start + first) // 2)
    assert "row and column" in pro.body and "§3" in pro.concept
    assert f"first k-tile begins at {fmt_ns(first)}" in pro.body
    epi = explain(trace, tl, 3, int(trace.mark("computed")[row, -1]))
    assert "writes its sum" in epi.body and epi.title.endswith("writing C")


def test_sampled_out_block_says_so():
    trace = simulate("tiled", 256, 256, 256, tile=16, level=2, budget_bytes=50_000)
    tl = Timeline(trace)
    block = next(b for b in range(len(trace.blocks)) if tl.phase_row(b) is None)
    t = int(trace.blocks["start"][block] + trace.blocks["end"][block]) // 2
    e = explain(trace, tl, block, t)
    every = trace.manifest["sampling"]["phase_every"]
    assert e.numbers["state"] == "running" and f"one block in {every}" in e.body


def test_block_of_a_trace_without_phases():
    trace = simulate("tiled", 256, 256, 256, tile=16, level=1)
    tl = Timeline(trace)
    t = int(trace.blocks["start"][9] + trace.blocks["end"][9]) // 2
    e = explain(trace, tl, 9, t)
    assert e.numbers["state"] == "running" and "level 2" in e.body and "one block in" not in e.body


def test_naive_kernel_reads_global_memory():
    trace = simulate("naive", 100, 64, 48, tile=16, level=1)
    tl = Timeline(trace)
    block = len(trace.blocks) - 1  # by = 6 holds rows 96..111: only 4 inside M = 100
    t = int(trace.blocks["start"][block] + trace.blocks["end"][block]) // 2
    e = explain(trace, tl, block, t)
    assert "naive kernel" in e.body and "96 loads for 48 multiply-adds" in e.body  # 2K for K
    assert "global memory" in e.body and "2mnk × 4 B" in e.body and "k-tile of" not in e.body
    assert "only 4 of its 16 rows" in e.body and "(row < M && col < N)" in e.body
    assert "values of K" not in e.body  # no k-steps: no partial last k-tile either
    assert "§4-5" in e.concept and "loads_per_step" not in e.numbers


def test_edge_block_sentence():
    trace = simulate("tiled", 250, 300, 260, tile=16, level=2)
    tl = Timeline(trace)
    gx, gy = trace.grid
    corner = trace.block_index(gx - 1, gy - 1)
    e = explain(trace, tl, corner, 0)
    assert "only 10 of its 16 rows" in e.body and "only 12 of its 16 columns" in e.body
    assert "only 4 of 16 values of K = 260" in e.body and "as 0" in e.body and "§26" in e.body
    inner = explain(trace, tl, 0, 0)
    assert "rows lie inside" not in inner.body and "values of K = 260" in inner.body


def test_conftest_traces_without_optional_manifest_keys(make_trace):
    trace = make_trace(warps=True, probe=True)
    tl = Timeline(trace)
    for block in range(len(trace.blocks)):
        for t in tl.boundaries(block):
            e = explain(trace, tl, block, int(t))
            assert e.title and e.body and e.concept
    assert not any(
        explain(trace, tl, block, int(t)).numbers["state"] == "at_barrier"
        for block in trace.warp_blocks
        for t in tl.boundaries(int(block))
    )
    with pytest.raises(IndexError):
        explain(trace, tl, len(trace.blocks), 0)


# -- facts -----------------------------------------------------------------------------------
def test_facts_of_a_simulated_trace(sim):
    trace, _ = sim
    facts = trace_facts(trace)
    text = " ".join(facts)
    stats = trace.manifest["stats"]
    assert "simulated" in text.lower()
    assert (
        f"{stats['gflops']:.1f} GFLOP/s" in text and f"{stats['pct_cublas']:.1f}% of cuBLAS" in text
    )
    occ = trace.manifest["occupancy"]
    assert f"{occ['blocks_per_sm']} blocks fit on one SM" in text
    assert f"limited by {LIMITERS[occ['limiter']]}" in text
    assert "in 2048 B of shared memory" in text  # 2 x 16 x 16 x 4 B, in the lesson's unit
    assert "KB" not in text.split("shared memory")[0].rsplit(".", 1)[-1]
    assert "free of bank conflicts" in text  # tiled, PAD 0: the probe's loads broadcast
    assert "build, which writes the record" not in text  # nothing measured, nothing said


def test_facts_say_what_the_record_cost_the_timeline():
    """The rate is the plain kernel's; the timeline's times come from the instrumented build,
    whose cost against level 0 (measured beside it) and register bound the facts give."""
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    trace = load_trace(TRACE_DIR / "register_tiling_2d_bm64_bn64_bk16_tm8_tn4_1024.mvz")
    stats = trace.manifest["stats"]
    text = " ".join(trace_facts(trace))
    assert "That rate is the plain kernel's (level 0)." in text
    assert (
        f"level-2 build, which writes the record: timed beside it, it ran "
        f"{stats['overhead_pct']:+.1f}% against level 0." in text
    )
    bound = stats["instrumented_min_blocks"]
    kept = "one block per SM" if bound == 1 else f"{bound} blocks per SM"
    assert f"bounded to keep {kept}" in text


def test_facts_show_padding_and_the_worst_conflict():
    trace = simulate("tiled_transposed", 128, 128, 128, tile=32, pad=0, level=3)
    worst = int(banks.conflict_degree(trace.probe["offsets"], 4).max())
    text = " ".join(trace_facts(trace))
    assert worst > 1 and f"{worst}-way" in text
    padded = " ".join(trace_facts(simulate("tiled", 128, 128, 128, tile=32, pad=1, level=3)))
    assert "As[32][32 + 1], Bs[32][32 + 1]" in padded and "256 B is padding" in padded
    assert "As[32][32], Bs[32][32]" in text and "padding" not in text


def test_facts_of_a_recorded_trace(make_trace):
    trace = make_trace(probe=True)
    trace.manifest["backend"] = "cuda"
    text = " ".join(trace_facts(trace))
    assert "simulated" not in text.lower() and "Recorded on Test GPU" in text
    assert "6 waves" in text  # 12 blocks, 2 at a time
    naive = simulate("naive", 64, 64, 64, tile=16, level=1)
    naive_facts = " ".join(trace_facts(naive))
    assert "naive kernel uses no shared memory" in naive_facts
    assert "lesson's formula 2mnk × 4 B gives 2.10 MB" in naive_facts  # 2 x 64^3 x 4 B
    assert fmt_ns(512) == "512 ns" and fmt_ns(12_345) == "12.35 µs"


def test_texts_follow_the_description_not_the_name(make_trace, monkeypatch):
    """A description changed in its module changes the explanations; no name decides them."""
    import dataclasses

    tiled = registry.get_kernel("tiled")
    work = dataclasses.replace(tiled.work, formula="FORMULA-X")
    changed = dataclasses.replace(tiled, work=work, shared=lambda p: (), sites=())
    monkeypatch.setattr(registry, "kernels", lambda: {"tiled": changed})
    trace = make_trace()
    assert not trace.config.uses_shared
    facts = " ".join(trace_facts(trace))
    assert "FORMULA-X" in facts and "tiled kernel uses no shared memory" in facts
    tl = Timeline(trace)
    body = explain(trace, tl, 0, int(trace.mark("loaded")[0, 0]) - 1).body
    assert "No data reuse through shared memory" in body and "FORMULA-X" in body
    assert "is in the load phase of k-tile t = 0" in body  # nothing to copy into shared memory


# -- any k-step: phases, barriers and marks come from the description -------------------------
def three_phases(make_trace):
    """One block on [0, 330] of a k-step load -> compute -> store, not chained: step t stamps
    issue, loaded, computed, stored at 10, 40, 70, 90 (+ 100 t); the store phase ends at a
    third barrier, __syncwarp. Warp 3 arrives last at every barrier; the others wait up to 7."""
    trace = make_trace(grid=(1, 1), n_tiles=3, warps=True)
    manifest = copy.deepcopy(trace.manifest)
    kstep = manifest["description"]["kstep"]
    kstep["channels"] = [["issue", "loaded", "computed", "stored"]]
    kstep["phases"].append(
        {"name": "store", "begin": "computed", "end": "stored", "state": "loading",
         "barrier": "__syncwarp"}
    )  # fmt: skip
    kstep["chained"] = False
    blocks = trace.blocks.copy()
    blocks["start"], blocks["end"] = 0, 330
    marks = np.array([10, 40, 70, 90]) + 100 * np.arange(3)[:, None]
    waits = np.broadcast_to(np.array([3, 4, 5, 0, 6, 7, 2, 1])[:, None], (1, 3, 8, 3))
    return Trace(
        manifest, blocks, phase_blocks=np.zeros(1, np.int64), marks=marks[None].astype(np.int64),
        warp_blocks=np.zeros(1, np.int64), barrier_wait=np.ascontiguousarray(waits, np.int64),
    )  # fmt: skip


def test_a_third_phase_and_its_barrier(make_trace):
    trace = three_phases(make_trace)
    tl = Timeline(trace)
    store = explain(trace, tl, 0, 175)  # k-tile 1, between computed (170) and stored (190)
    assert store.numbers["state"] == "loading" and store.numbers["phase"] == "store"
    assert "is in the store phase of k-tile t = 1 of 3" in store.body
    assert "The phase ends at the third __syncwarp." in store.body
    assert store.title == "Block (0, 0): store of k-tile t = 1"
    load = explain(trace, tl, 0, 115)
    assert load.numbers["phase"] == "load" and "copy 256 elements of A" in load.body
    late = explain(trace, tl, 0, 189)  # 1 ns before the store barrier releases: still store
    assert late.numbers["state"] == "loading" and late.numbers["phase"] == "store"
    assert late.title == "Block (0, 0): store of k-tile t = 1"
    assert "waited at the third __syncwarp was measured in a separate" in late.body
    compute = explain(trace, tl, 0, 69)  # k-tile 0, just before the second barrier
    assert compute.numbers["state"] == "computing" and "second __syncthreads" in compute.body


def test_prologue_between_steps_and_epilogue_from_the_marks(make_trace):
    trace = three_phases(make_trace)
    tl = Timeline(trace)
    pro = explain(trace, tl, 0, 5)
    assert pro.title.endswith("starting") and "first k-tile begins at 10 ns" in pro.body
    between = explain(trace, tl, 0, 95)  # stored 90, next issue 110: the loop's own work
    assert between.numbers["state"] == "running"
    assert "between k-tiles: 1 of 3 are finished" in between.body
    epi = explain(trace, tl, 0, 300)  # after the last mark (290)
    assert epi.title.endswith("writing C") and "finished all 3 k-tiles" in epi.body


def test_phase_names_come_from_the_description(monkeypatch):
    """02_tiled with its phases renamed (and its sites moved with them): the texts follow."""
    tiled = registry.get_kernel("tiled")
    names = {"load": "fetch", "compute": "fma"}
    kstep = dataclasses.replace(
        tiled.kstep,
        phases=tuple(dataclasses.replace(ph, name=names[ph.name]) for ph in tiled.kstep.phases),
    )
    sites = tuple(dataclasses.replace(s, phase=names[s.phase]) for s in tiled.sites)
    renamed = dataclasses.replace(tiled, kstep=kstep, sites=sites)  # same .cu, same name
    known = {**registry.kernels(), "tiled": renamed}
    monkeypatch.setattr(registry, "kernels", lambda: known)
    trace = simulate("tiled", 128, 128, 128, tile=16, pad=0, level=2)
    tl = Timeline(trace)
    block = 5
    fetch = explain(trace, tl, block, time_in_state(tl, block, BlockState.LOADING))
    assert "(its fetch phase)" in fetch.body and "copy 256 elements of A" in fetch.body
    assert "fetch of k-tile" in fetch.title and fetch.numbers["phase"] == "fetch"
    fma = explain(trace, tl, block, time_in_state(tl, block, BlockState.COMPUTING))
    assert "(its fma phase)" in fma.body and "16 products" in fma.body


# -- issue 10: numbers that mislead ----------------------------------------------------------
def test_global_bytes_are_requests_and_the_dram_floor_is_shown():
    """Item 4: the 8.59 GB of the naive kernel are what load instructions request; DRAM moves
    far less, at least A, B and C once."""
    naive = simulate("naive", 1024, 1024, 1024, tile=16, level=1)
    tl = Timeline(naive)
    e = explain(naive, tl, 5, int(naive.blocks["start"][5] + naive.blocks["end"][5]) // 2)
    assert "load instructions request 8.59 GB" in e.body and "caches absorb" not in e.body
    assert "(MK + KN + MN) × 4 B = 12.58 MB" in e.body
    assert e.numbers["dram_floor_bytes"] == dram_floor_bytes(naive.config) == 3 * 1024**2 * 4
    facts = " ".join(trace_facts(naive))
    assert "the load instructions request 8.59 GB" in facts and "DRAM floor" in facts
    assert "12.58 MB" in facts and "Measured with ncu" not in facts  # simulated: no ncu numbers
    lines = "\n".join(summary_lines(naive))
    assert "requested by load instructions" in lines and "DRAM floor" in lines
    assert "loaded by the kernel" not in lines and "measured" not in lines
    shared = explain(*(lambda t: (t, Timeline(t)))(simulate("tiled", 64, 64, 64, tile=16)), 0, 0)
    assert "the load instructions request" in shared.body and "DRAM itself" in shared.body


def test_the_dram_floor_is_written_in_the_kernels_element_sizes():
    """fp16 inputs: A and B cost 2 bytes an element, C 4, in every text that states the floor
    (the facts line had kept fp32's (MK + KN + MN) × 4 B beside fp16's number)."""
    half = simulate("mma_pipeline", 256, 256, 256, level=1)
    formula = "(MK + KN) × 2 B + MN × 4 B = 524.29 KB"
    assert dram_floor_bytes(half.config) == (2 * 256 * 256) * 2 + 256 * 256 * 4
    assert formula in " ".join(trace_facts(half))
    assert formula in explain(half, Timeline(half), 0, 0).body
    assert "(MK + KN + MN)" not in " ".join(trace_facts(half) + summary_lines(half))


@pytest.mark.parametrize("path", sorted(TRACE_DIR.glob("*.mvz")), ids=lambda p: p.name)
def test_bundled_recordings_carry_ncu_measurements(path):
    """Item 4: DRAM and L2 bytes measured with ncu on the H200 are stored and shown."""
    trace = load_trace(path)
    measured = measured_bytes(trace.manifest)
    assert measured is not None
    assert measured["tool"].startswith("ncu --clock-control none")
    M, N, K = trace.shape
    ab = (M * K + K * N) * trace.config.element_bytes("A")  # 8.39 MB in fp32, 4.19 in fp16
    assert 0.95 * ab < measured["dram_read_bytes"] < 1.02 * ab  # about A + B
    assert measured["dram_write_bytes"] < 4096  # C (4 MB) stays in L2 at 1024^3, 1.5 kB at most
    # L1 counts the distinct 32-byte sectors of each warp's request: the tiled kernels' lanes
    # copy distinct elements (all requested bytes), the naive kernel's lanes share A's element
    # and, across the warp's two rows, B's sectors (fewer bytes than requested)
    requested = trace.manifest["global_bytes"]["issued"]
    if trace.config.sites:  # every sector of every load request, by the coalescing model
        config = trace.config
        sectors = sum(
            r.sectors.size
            for w in range(config.warps)
            for r in coalescing.warp_requests(config, w)
            if r.kind == "load" and r.active.any()
        )
        assert measured["l1_global_load_bytes"] == 32 * sectors * config.n_steps * config.n_blocks
        assert measured["l1_global_load_bytes"] >= requested  # = where lanes use whole sectors
    else:
        assert measured["l1_global_load_bytes"] < requested
    # L2 sees the loads L1 missed and every store of C (4 MB at 1024^3)
    c_bytes = trace.shape[0] * trace.shape[1] * 4
    assert measured["dram_read_bytes"] < measured["l2_bytes"]
    # what the SM brings in: global load instructions, and the copy engine's boxes (TMA)
    copies = measured.get("copy_engine_load_bytes", 0)
    if trace.config.copies:
        assert copies == requested  # the boxes' bytes, exactly the issued bytes
    assert measured["l2_bytes"] <= measured["l1_global_load_bytes"] + copies + c_bytes
    bench = (TRACE_DIR.parent / "bench" / "h200_ncu_1024.txt").read_text()
    assert f"{measured['l2_bytes']:,}" in bench and f"{measured['dram_read_bytes']:,}" in bench
    facts = trace_facts(trace)
    line = next(f for f in facts if f.startswith("Measured with ncu"))
    mb = f"{measured['dram_read_bytes'] / 1e6:.2f} MB read from DRAM"
    assert mb in line and f"{measured['l2_bytes'] / 1e6:.2f} MB through L2" in line
    assert f"A and B once: {ab / 1e6:.2f} MB" in line
    assert any(s.startswith("measured   ncu") for s in summary_lines(trace))
    zh = json.loads(ZH_PATH.read_text(encoding="utf-8"))
    zh_line = trace_facts(trace, tr=lambda s: zh.get(s, s))
    assert any("ncu" in f and "DRAM" in f and "实测" in f for f in zh_line)


def test_done_text_counts_what_an_edge_block_really_wrote():
    """Item 6: an edge block's threads do not each write an element."""
    trace = simulate("tiled", 250, 300, 64, tile=16, level=2)
    tl = Timeline(trace)
    gx, gy = trace.grid
    corner = trace.block_index(gx - 1, gy - 1)
    e = explain(trace, tl, corner, trace.duration_ns)
    assert e.numbers["state"] == "done"
    assert written_elements(trace.config, gx - 1, gy - 1) == 10 * 12 == e.numbers["c_written"]
    assert "only 120 of its 256 elements of C lie inside the 250×300 matrix" in e.body
    assert "other 136 were skipped" in e.body and "256 elements of C once each" not in e.body
    inner = explain(trace, tl, 0, trace.duration_ns)
    assert "wrote the block's 256 elements of C once each" in inner.body
    assert inner.numbers["c_written"] == 256
    side = explain(trace, tl, trace.block_index(gx - 1, 0), trace.duration_ns)
    assert "only 192 of its 256" in side.body  # 16 rows x 12 columns
    zh = json.loads(ZH_PATH.read_text(encoding="utf-8"))
    zh_e = explain(trace, tl, corner, trace.duration_ns, tr=lambda s: zh.get(s, s))
    assert "边界线程块" in zh_e.body and "120" in zh_e.body and "136" in zh_e.body


def test_register_tiling_edge_block_counts_its_c_tile():
    trace = simulate("register_tiling_1d", 100, 100, 32, BM=64, BN=64, BK=8, TM=8, level=1)
    tl = Timeline(trace)
    last = len(trace.blocks) - 1
    e = explain(trace, tl, last, trace.duration_ns)
    assert "only 1296 of its 4096 elements" in e.body  # (100 - 64)^2 of a 64 x 64 tile


def test_shared_memory_sizes_are_in_bytes():
    """Item 8: 2048 B / 8192 B as the lesson writes them, not 2.05 KB / 8.19 KB."""
    t16 = " ".join(trace_facts(simulate("tiled", 64, 64, 64, tile=16, pad=0, level=1)))
    t32 = " ".join(trace_facts(simulate("tiled", 64, 64, 64, tile=32, pad=0, level=1)))
    assert "in 2048 B of shared memory" in t16 and "in 8192 B of shared memory" in t32
    assert "KB of shared memory" not in t16 + t32
    padded = " ".join(trace_facts(simulate("tiled", 64, 64, 64, tile=32, pad=1, level=1)))
    assert "in 8448 B of shared memory, of which 256 B is padding" in padded


def test_measured_bytes_are_read_from_details_or_the_top_level():
    numbers = {"dram_read_bytes": 1, "l2_bytes": 2, "l1_global_load_bytes": 3}
    assert measured_bytes({"details": {"measured": numbers}}) == numbers  # schema 2
    assert measured_bytes({"details": {}, "measured": numbers}) == numbers  # schema 1, migrated
    assert measured_bytes({"details": {"command": "x"}}) is None
    assert measured_bytes({"measured": {"dram_read_bytes": 1}}) is None  # incomplete: not shown


@pytest.mark.parametrize(("drop", "state", "says"), [
    (1, BlockState.LOADING, "warps start reading the tiles while other warps may still be"),
    (2, BlockState.COMPUTING, "loads the next k-tile over the tiles while slower warps"),
])  # fmt: skip
def test_a_barrier_left_out_on_purpose_is_explained_as_missing(drop, state, says):
    params = {"tile": 16, "drop_sync": drop}
    trace = run(RunRequest("tiled", 128, 128, 128, params, backend="sim", level=3))
    tl = Timeline(trace)
    phases = {ph.phase.state: ph for ph in trace.layout.phases}
    assert [ph.left_out for ph in trace.layout.phases] == [drop == 1, drop == 2]
    block = int(trace.warp_blocks[0])
    text = explain(trace, tl, block, time_in_state(tl, block, state)).body
    assert says in text and "left out on purpose" in text
    assert "Barrier waits panel" not in text  # no wait to show at a barrier that is not there
    other = next(s for s in phases if s != state.name.lower())
    fine = explain(trace, tl, block, time_in_state(tl, block, BlockState[other.upper()])).body
    assert "left out" not in fine  # the barrier that is there stays explained as before
    assert "Barrier waits panel" in fine


@pytest.mark.parametrize(("kernel", "params", "fmas", "reads", "ratio"), [
    ("tiled", {"tile": 16}, 16, 32, "0.50"),  # §13: two values per multiply-add
    ("register_tiling_1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 8}, 64, 72, "0.89"),  # 1 + TM
    ("register_tiling_2d", {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 4}, 512, 192, "2.67"),
])  # fmt: skip
def test_the_facts_say_how_many_multiply_adds_each_shared_value_feeds(
    kernel, params, fmas, reads, ratio
):
    trace = run(RunRequest(kernel, 256, 256, 256, params, backend="sim", level=1))
    text = " ".join(trace_facts(trace))
    assert f"each thread does {fmas} multiply-adds and reads {reads} values" in text
    assert f"{ratio} multiply-adds per value read" in text
    naive = " ".join(trace_facts(run(RunRequest("naive", 64, 64, 64, {}, backend="sim"))))
    assert "per value read" not in naive  # no shared memory: nothing to count


def test_a_pipeline_step_names_the_copies_in_flight_beside_it():
    trace = load_trace(TRACE_DIR / "async_pipeline_bm128_bn128_bk16_tm8_tn8_s3_p0_x1_1024.mvz")
    timeline = Timeline(trace)
    row = trace.phase_row(36)
    t = int(trace.mark("begin")[row, 10]) + 1
    body = explain(trace, timeline, 36, t).body
    assert "computing k-tile t = 10 of 64" in body
    # from the block's own marks: the copies of steps 11 and 12 were issued and not yet landed
    issue, landed = trace.mark("issue")[row], trace.mark("landed")[row]
    running = [s for s in range(trace.n_tiles) if issue[s] <= t < landed[s]]
    assert running == [11, 12]
    assert "Meanwhile its copy phase runs for k-tile t = 11, 12: 3 k-steps are in flight" in body
    # one channel at a time: no such sentence
    tiled = load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz")
    row = tiled.phase_row(0)
    mid = int(tiled.mark("loaded")[row, 3]) + 1
    assert "Meanwhile" not in explain(tiled, Timeline(tiled), 0, mid).body


def test_a_pipeline_copy_is_issued_and_left_not_waited_for():
    """A copy phase whose stores are cp.async (the description's async_copy sites) says the
    threads issued the copies and compute earlier k-tiles while they travel, then wait for
    their own copies and meet at the k-step's one barrier; the lesson is double buffering
    (§24-25), not the first __syncthreads of §11."""
    trace = load_trace(TRACE_DIR / "async_pipeline_bm128_bn128_bk16_tm8_tn8_s3_p0_x1_1024.mvz")
    row = trace.phase_row(36)
    t = int(trace.mark("issue")[row, 10]) + 1
    e = explain(trace, Timeline(trace), 36, t)
    assert (
        "have issued asynchronous copies (cp.async) of 2048 elements of A and 2048 of B" in e.body
    )
    assert "3 k-steps are in flight" in e.body and "cp.async.wait_group" in e.body
    assert "meets at the k-step's __syncthreads" in e.body and "first" not in e.body
    assert "§24-25" in e.concept and "§11" not in e.concept
    # a synchronous copy keeps its words: the tiled kernel's threads copy, then wait
    tiled = load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz")
    row = tiled.phase_row(0)
    body = explain(tiled, Timeline(tiled), 0, int(tiled.mark("issue")[row, 3]) + 1).body
    assert "cp.async" not in body and "wait at the first __syncthreads" in body


def test_a_k_step_with_one_barrier_names_it_without_an_ordinal():
    from matviz.core.explain import barrier_ordinal

    assert barrier_ordinal(0, 1) == "k-step's"
    assert [barrier_ordinal(i, 2) for i in range(2)] == ["first", "second"]
    assert barrier_ordinal(6, 7) == "7th"
    zh = json.loads(ZH_PATH.read_text(encoding="utf-8"))
    assert barrier_ordinal(0, 1, zh.get) == "本 k-step 的"


def test_the_summary_says_which_form_of_the_marks_the_recorder_kept():
    """A level-2 recording says how it kept its marks and, where the recorder timed both
    forms beside level 0, each one's overhead; a recording from before the forms says nothing."""
    trace = load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz")
    assert not any(line.startswith("marks") for line in summary_lines(trace))
    manifest = copy.deepcopy(trace.manifest)
    manifest["stats"].update(
        stamp_form="store", stamp_form_overheads_pct={"lanes": 5.32, "store": -0.41}
    )
    lines = summary_lines(dataclasses.replace(trace, manifest=manifest))
    marks = next(line for line in lines if line.startswith("marks"))
    assert marks == (
        "marks      stored as taken (closer to level 0 of kept in the stamping warp's lanes "
        "+5.32%, stored as taken -0.41%)"
    )


def thinned(trace, every: int, tried: list, pct: float):
    """``trace`` as if the recorder had stamped 1 block in ``every`` after timing ``tried``."""
    manifest = copy.deepcopy(trace.manifest)
    manifest["sampling"]["phase_every"] = every
    manifest["stats"].update(overhead_pct=pct, phase_every_overheads_pct=tried)
    return dataclasses.replace(trace, manifest=manifest)


def test_the_summary_says_how_many_blocks_stamped_and_each_stride_timed():
    trace = load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz")
    assert not any(line.startswith("stamping") for line in summary_lines(trace))
    lines = summary_lines(thinned(trace, 4, [[1, 5.53], [2, 3.4], [4, 2.1]], 2.05))
    assert "overhead   level-2 build +2.05% against level 0" in lines
    assert "stamping   1 block in 4 (timed beside level 0: 1 in 1 +5.53%, 1 in 2 +3.40%, " \
        "1 in 4 +2.10%)" in lines


def test_the_summary_says_how_much_longer_the_stamping_blocks_ran(make_trace):
    """The k-step strips show stamping blocks, so `show` says how much longer they ran than
    the others of the launch; where every block stamped there is nothing to compare with."""
    trace = make_trace(grid=(4, 3), sample=3)  # blocks 0, 2 and 4 stamp
    trace.manifest["stats"]["overhead_pct"] = 5.0
    trace.blocks["start"] = np.arange(12) * 10_000
    trace.blocks["end"] = trace.blocks["start"] + 1_000
    trace.blocks["end"][[0, 2, 4]] += 250
    assert (
        "stamped    the 3 blocks that stamped their k-steps ran +25.0% against the 9 others "
        "(median 1.2 against 1.0 µs)"
    ) in summary_lines(trace)
    every = make_trace(grid=(4, 3))
    every.manifest["stats"]["overhead_pct"] = 5.0
    assert not any(line.startswith("stamped") for line in summary_lines(every))


def test_the_stamping_cost_is_said_as_the_slowest_sms_extra_time(make_trace):
    """Thinning the stamping blocks stops helping once no SM runs two: a launch ends with its
    slowest SM, which ends a stamping block's extra time later. `show` and About this run say
    what that is of the launch, in both languages."""
    trace = make_trace(grid=(4, 3), sample=3)  # blocks 0, 2 and 4 stamp
    trace.manifest["stats"]["overhead_pct"] = 5.0
    trace.blocks["start"] = np.arange(12) * 10_000
    trace.blocks["end"] = trace.blocks["start"] + 1_000
    trace.blocks["end"][[0, 2, 4]] += 250
    trace.blocks["smid"] = np.arange(12) % 4  # blocks 0 and 4 on SM 0
    share = 100 * 2 * 250 / (11 * 10_000 + 1_000)
    assert (
        "           a launch ends with its slowest SM: 2 of them on one SM x 0.2 µs = "
        f"{share:.1f}% of the 111.0 µs launch"
    ) in summary_lines(trace)
    facts = " ".join(trace_facts(trace))
    assert "A block that stamps ran 250 ns longer" in facts
    assert f"one SM ran 2 stamping blocks: 2 × 250 ns is {share:.1f}% of the launch" in facts
    zh = json.loads(ZH_PATH.read_text(encoding="utf-8"))
    chinese = " ".join(trace_facts(trace, lambda s: zh.get(s, s)))
    assert f"有一个 SM 运行了 2 个打标记的线程块：2 × 250 ns 占启动时间的 {share:.1f}%" in chinese
    trace.blocks["smid"] = [0, 1, 1, 2, 3, 2, 3, 0, 1, 2, 3, 0]  # one stamping block an SM
    facts = " ".join(trace_facts(trace))
    assert f"ends that much later: {100 * 250 / 111_000:.1f}% of the launch" in facts


@pytest.mark.parametrize(
    ("tried", "said"),
    [([[1, 5.53], [2, 3.4], [4, 2.1]], "With every block stamping its k-steps it ran +5.5%"),
     ([[3, 4.0], [6, 1.0]], "With 1 block in 3 stamping its k-steps it ran +4.0%")],
)  # fmt: skip
def test_facts_say_why_fewer_blocks_stamped(tried, said):
    """Where the recorder thinned the stamping blocks, About this run says what stamping more
    had cost and how many stamped, in both languages."""
    trace = thinned(load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz"), tried[-1][0], tried, 1.0)
    text = " ".join(trace_facts(trace))
    assert said in text
    assert f"So only 1 block in {tried[-1][0]} stamped them" in text
    zh = json.loads(ZH_PATH.read_text(encoding="utf-8"))
    chinese = " ".join(trace_facts(trace, lambda s: zh.get(s, s)))
    assert f"只让每 {tried[-1][0]} 个线程块中的 1 个打标记" in chinese
    assert "stamping" not in chinese
    # one stamping every block from the start says nothing of it
    assert "stamping its k-steps" not in " ".join(trace_facts(thinned(trace, 1, [[1, 2.0]], 2.0)))


def test_the_forms_of_the_marks_are_written_once():
    """The schema's and the summary's forms of the marks are the manifest's."""
    import typing

    from matviz.backends.contract import STAMP_FORM_CHOICES
    from matviz.core import summary, trace_schema
    from matviz.core.config import STAMP_FORMS

    assert typing.get_args(trace_schema.StampForm) == STAMP_FORMS
    assert tuple(summary.FORM_NAMES) == STAMP_FORMS
    assert STAMP_FORM_CHOICES == ("auto", *STAMP_FORMS)


def test_one_block_an_sm_is_said_in_the_singular():
    """The app read "One SM holds at most 1 blocks of this kernel" for kernel 09 BM128 W32."""
    trace = simulate("wmma", 512, 512, 256, BM=128, BN=128, BK=32, WT=32, PAD=8, STAGES=1,
                     level=1)  # fmt: skip
    assert trace.manifest["occupancy"]["blocks_per_sm"] == 1
    tl = Timeline(trace)
    waiting = explain(trace, tl, len(trace.blocks) - 1, 0).body
    facts = " ".join(trace_facts(trace))
    assert "One SM holds one block of this kernel at a time" in waiting
    assert "One block at a time fits on an SM" in facts
    assert "one wave): one block per SM, on" in facts  # 16 blocks, one an SM: not '1-1 blocks'
    assert not re.search(r"\b1 blocks\b|\b1-1\b", waiting + facts)


@pytest.mark.parametrize(("lo", "hi", "text"), [
    (1, 1, "one block per SM"), (2, 2, "2 blocks per SM"), (1, 2, "1-2 blocks per SM"),
])  # fmt: skip
def test_blocks_per_sm_in_words(lo, hi, text):
    from matviz.core.explain import blocks_per_sm

    assert blocks_per_sm(lo, hi) == text


def test_sentences_take_a_space_after_an_english_stop_and_none_after_a_chinese_one():
    from matviz.core.explain import join_sentences

    assert join_sentences("One.", "", "Two.") == "One. Two."
    assert join_sentences("一。", "二。", "Three.") == "一。二。Three."

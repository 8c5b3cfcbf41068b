"""The lesson's steps are data: every one names a trace that exists (or a simulation), a view,
and texts in both languages whose {facts} the trace can fill."""

from __future__ import annotations

import json

import pytest

from matviz.core import lessons
from matviz.core.ceilings import shared_ceiling
from matviz.core.registry import get_kernel
from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError

LESSON = lessons.load_lesson(lessons.lesson_files()[0])


def test_the_lesson_covers_its_sections_in_order():
    sections = [step.section for step in LESSON.steps]
    for needed in (
        "§2-5",
        "§7-9",
        "§11",
        "§12-14",
        "§13",
        "§15",
        "§17",
        "§18",
        "§26",
        "§27",
        "§28",
        "§29",
        "§30",
        "§31",
    ):
        assert needed in sections, needed
    assert {step.view for step in LESSON.steps} >= {"grid", "tiles", "banks", "coalescing",
                                                    "source", "sm_lanes", "throughput"}  # fmt: skip


@pytest.mark.parametrize("index", range(len(LESSON.steps)))
def test_every_step_opens_and_its_texts_render(index):
    step = LESSON.steps[index]
    if step.trace:
        trace = load_trace(step.trace_path())
        for language in lessons.LANGUAGES:
            text = lessons.render(step.text.get(language), trace)
            assert "{" not in text and text.strip()
    else:
        sim = step.simulate
        get_kernel(sim.kernel).configure(sim.params, sim.M, sim.N, sim.K)  # a legal run
    assert step.title.en and step.title.zh_CN and step.title.en != step.title.zh_CN


def test_a_broken_lesson_file_is_one_line(tmp_path):
    path = tmp_path / "bad.json"
    good = json.loads(lessons.lesson_files()[0].read_text(encoding="utf-8"))
    good["steps"][0]["view"] = "nowhere"
    path.write_text(json.dumps(good), encoding="utf-8")
    with pytest.raises(MatvizError, match=r"steps\.0\.view") as info:
        lessons.load_lesson(path)
    assert "\n" not in str(info.value)
    both = dict(good["steps"][1], simulate={"kernel": "naive", "M": 8, "N": 8, "K": 8})
    path.write_text(json.dumps({**good, "steps": [both]}), encoding="utf-8")
    with pytest.raises(MatvizError, match="either a bundled trace or a simulation"):
        lessons.load_lesson(path)


def test_a_text_naming_an_unknown_fact_is_one_line():
    trace = load_trace(LESSON.steps[0].trace_path())
    with pytest.raises(MatvizError, match="fact"):
        lessons.render("{no_such_fact}", trace)


def test_the_data_path_facts_are_the_traces_own_numbers():
    """§30-31 quote the GEMM's work and each level of the memory hierarchy: ncu's bytes at
    DRAM, L2 and the load instructions, shared memory's reuse and the sums per thread."""
    step = next(step for step in LESSON.steps if step.section == "§31")
    trace = load_trace(step.trace_path())
    facts = lessons.facts(trace)
    config = trace.config
    M, N, K = trace.shape
    measured = trace.manifest["details"]["measured"]
    assert facts["dram_mb"] == measured["dram_read_bytes"] / 1e6
    assert facts["l2_mb"] == measured["l2_bytes"] / 1e6
    assert facts["l1_mb"] == measured["l1_global_load_bytes"] / 1e6
    assert facts["threads"] == config.threads * len(trace.blocks)
    assert facts["outputs_per_thread"] * facts["threads"] == M * N
    floor = (M * K + K * N) * 4 + M * N * 4  # fp32: A and B read once, C written once
    assert facts["floor_mb"] == floor / 1e6
    assert facts["flop_per_byte"] == 2 * M * N * K / floor
    # kernel 08: per k a lane reads TM values of As once and TN of Bs in each of its WNITER
    # sub-tiles, and does TM x TN multiply-adds in each
    p = config.p
    fmas, reads = p.TM * p.TN * p.WNITER, p.TM + p.TN * p.WNITER
    assert facts["fmas_per_shared_read"] == round(fmas / reads, 2)
    ceiling = shared_ceiling(config, trace.manifest["device"])
    assert facts["smem_ceiling_gflops"] == ceiling.gflops
    assert facts["pct_of_smem_ceiling"] == pytest.approx(
        100 * trace.manifest["stats"]["gflops"] / ceiling.gflops
    )


def test_a_trace_without_measured_bytes_has_no_data_path_facts():
    trace = load_trace(LESSON.steps[0].trace_path())
    del trace.manifest["details"]["measured"]
    facts = lessons.facts(trace)
    assert not {"dram_mb", "l2_mb", "l1_mb"} & facts.keys()
    with pytest.raises(MatvizError, match="dram_mb"):
        lessons.render("{dram_mb:.1f} MB", trace)

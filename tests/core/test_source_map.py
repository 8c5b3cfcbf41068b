"""The lines of a kernel's source each phase covers, at a configuration."""

from __future__ import annotations

import os

from matviz.core import source_map
from matviz.core.registry import get_kernel
from matviz.paths import TRACE_HEADER


def test_a_pipelined_configuration_lights_its_own_loop_only():
    kernel = get_kernel("wmma")
    text = kernel.source.read_text()
    lines = text.splitlines()

    def lit(stages: int, phase: str) -> str:
        config = kernel.configure({"STAGES": stages}, 1000, 777, 336)
        spans = next(p.spans for p in source_map.phase_lines(config, text) if p.phase == phase)
        return "\n".join(lines[n - 1] for first, last in spans for n in range(first, last + 1))

    synchronous, pipelined = lit(1, "compute"), lit(3, "compute")
    for code in (synchronous, pipelined):
        assert "wmma::mma_sync" in code and "#if" not in code and "#else" not in code
    assert "barrier 2" in synchronous and "cp_async_wait" not in synchronous
    assert "barrier 2" not in pipelined and "MV_STEP_MARK(1, t, 1)" in pipelined
    assert "barrier 1" in lit(1, "load") and "load_chunk(A" in lit(1, "load")


def test_a_line_calling_a_header_macro_stamps_what_its_expansion_stamps():
    channels = (("issued", "landed"),)
    source = "MV_STEP_OPEN(0, t);\ncopy(t);\nMV_LAND(t + 1, n);  // wait, barrier, close\n"
    body = " wait(); if ((step) < (n_steps)) { MV_STEP_CLOSE(0, step, 1); }"
    land = {"MV_LAND": [(["step", "n_steps"], body)]}
    assert source_map.mark_lines(source, channels, None, land) == {"issued": [1], "landed": [3]}
    assert source_map.mark_lines(source, channels) == {"issued": [1]}  # not followed: unknown


def test_the_seed_shorthands_mark_what_trace_cuh_defines_them_to():
    macros = source_map.header_macros(get_kernel("tiled").source.parent)
    seed = (("issued", "loaded", "computed"),)
    text = "MV_MARK_ISSUED(t);\nload();\nMV_MARK_LOADED(t);\nfma();\nMV_MARK_LAST_COMPUTED();\n"
    marks = source_map.mark_lines(text, seed, None, macros)
    assert marks == {"issued": [1], "computed": [1, 5], "loaded": [3]}


def test_an_unreadable_header_is_skipped_and_the_others_are_followed(tmp_path):
    land = "#define MV_LAND(s) \\\n    wait(); MV_STEP_CLOSE(0, s, 1);\n"
    (tmp_path / "good.cuh").write_text(land)
    (tmp_path / "binary.cuh").write_bytes(b"\xff\xfe#define MV_X(s) MV_STEP_OPEN(0, s)\n")
    (tmp_path / "folder.cuh").mkdir()
    os.mkfifo(tmp_path / "pipe.cuh")  # reading it would block: skipped unread
    macros = source_map.header_macros(tmp_path)
    assert list(macros) == ["MV_LAND"]
    marks = source_map.mark_lines("MV_LAND(t);\n", (("issued", "landed"),), None, macros)
    assert marks == {"landed": [1]}


def test_a_line_is_instrumentation_only_where_trace_macros_are_all_its_code():
    names = frozenset({"MV_PROBE", "MV_CHANNEL", "MV_TRACE_FORWARD", "MV_LAUNCH_BOUNDS"})
    lines = [
        "    MV_PROBE(MV_SITE_ld_As + k * TM + r, &sm.As[thread_row + r][k]);",  # 1
        "    MV_CHANNEL(0, 0);  // copy",  # 2
        "    copy_step<ALIGNED, FULL>(A, B, M, N, K, sm, s, s MV_TRACE_FORWARD);",  # 3
        'extern "C" __global__ void MV_LAUNCH_BOUNDS(THREADS) mv_tiled(const float *A,',  # 4
        "    MV_BY_SHAPE(body, 4, A, B, C, M, N, K, sm)",  # 5: not a trace.cuh macro
        "    MV_PROBE(MV_SITE_st_As + i,",  # 6: its arguments go on below
        "             &sm.As[r][c]);",  # 7
        "    // MV_PROBE(0, p); in a comment",  # 8
        "    }",  # 9
    ]
    assert source_map.instrumentation_lines("\n".join(lines), names) == [1, 2, 6]


def test_the_kernels_own_calls_that_pass_the_trace_on_are_not_instrumentation():
    names = source_map.defined_names(TRACE_HEADER)
    assert {"MV_STEP_OPEN", "MV_TRACE_FORWARD", "MV_PROBE", "MV_LAUNCH_BOUNDS"} <= names
    for kernel in ("async_pipeline", "mma_pipeline", "wmma"):
        lines = get_kernel(kernel).source.read_text().splitlines()
        grey = {lines[n - 1] for n in source_map.instrumentation_lines("\n".join(lines), names)}
        assert any("MV_STEP_OPEN(0," in line for line in grey), kernel
        assert not [line for line in grey if "copy_step" in line or "__global__" in line], kernel
        assert all("MV_" in line for line in grey), kernel


def test_defined_names_of_a_missing_or_unreadable_header_are_none(tmp_path):
    (tmp_path / "bad.cuh").write_bytes(b"\xff#define MV_X 1\n")
    assert source_map.defined_names(tmp_path / "absent.cuh") == frozenset()
    assert source_map.defined_names(tmp_path / "bad.cuh") == frozenset()
    assert source_map.defined_names(tmp_path) == frozenset()  # a directory

"""Kernel 11's mechanisms in the core: TMA copies, the wgmma accumulator, warp specialisation,
a problem-shape rule and the sm_90a target (pure numpy; the GPU tests measure the same)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from matviz.app.views.shared_cells import held_cells
from matviz.backends.contract import RunRequest, run
from matviz.core import coalescing
from matviz.core.explain import explain, trace_facts
from matviz.core.mma_layouts import m16n8k16_a, wgmma_accumulator
from matviz.core.registry import get_kernel
from matviz.core.timeline import Timeline
from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError
from matviz.paths import TRACE_DIR
from matviz.toolchain.nvcc import cubin_command, nvcc_path
from matviz.toolchain.sass import cuobjdump_path, sass

RECORDING = TRACE_DIR / "wgmma_tma_bm128_bn256_bk64_s4_bf1_1024.mvz"


@pytest.fixture(params=get_kernel("wgmma_tma").configurations(), ids=str)
def config(request):
    return get_kernel("wgmma_tma").configure(request.param, 1000, 777, 336)


def test_a_copys_box_lands_in_its_slot_through_tmas_128_byte_swizzle(config):
    p = config.p
    block, t = (2, 3), 4  # an edge block: N = 777 ends inside column block 2 (BN 256)
    cells = held_cells(config, block, t)
    for rc in config.copies:
        arr = config.array(rc.copy.array)
        held = cells[arr.name]
        first = t % p.STAGES * rc.rows
        # TMA's 128-byte swizzle of 2-byte elements: chunk c of row r goes to chunk c ^ r % 8
        r, c = np.meshgrid(np.arange(rc.rows), np.arange(rc.cols), indexing="ij")
        stored = ((c // 8) ^ ((first + r) % 8)) * 8 + c % 8
        np.testing.assert_array_equal(arr.stored_col(first + r, c), stored)
        rows, cols = held.row[first + r, stored], held.col[first + r, stored]
        if arr.source == "A":  # As[s][m][k] = A[by*BM + m][t*BK + k]
            np.testing.assert_array_equal(rows, block[1] * p.BM + r)
            np.testing.assert_array_equal(cols, t * p.BK + c)
        else:  # Bs[s][n][k] = B[t*BK + k][bx*BN + n]: B is stored column-major
            np.testing.assert_array_equal(rows, t * p.BK + c)
            np.testing.assert_array_equal(cols, block[0] * p.BN + r)
        n_rows, n_cols = config.matrix_shape(arr.source)
        np.testing.assert_array_equal(
            held.inside[first + r, stored], (rows < n_rows) & (cols < n_cols)
        )
        # only the k-step's slot holds this step's tiles
        assert held.written.sum() == rc.rows * rc.cols
    assert config.staged_per_step == {"A": p.BM * p.BK, "B": p.BN * p.BK}


def test_the_wgmma_accumulator_holds_each_element_of_a_warps_rows_once(config):
    fragment = config.mma.fragment("C")
    elements = fragment.elements()
    assert elements.shape == (32, config.p.BN // 2)
    assert sorted(elements.ravel()) == list(range(16 * config.p.BN))
    # each n8 column group is m16n8k16's accumulator layout (the PTX ISA's wgmma D fragment)
    lane, slot = np.meshgrid(np.arange(32), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(
        np.array(wgmma_accumulator(lane, slot)), np.array(m16n8k16_a(lane, slot))
    )
    row, col = wgmma_accumulator(np.arange(32), np.full(32, 4 * 9 + 3))  # group 9, slot 3
    np.testing.assert_array_equal(row, np.arange(32) // 4 + 8)
    np.testing.assert_array_equal(col, 72 + np.arange(32) % 4 * 2 + 1)
    assert config.mma.from_shared == ("A", "B") and config.mma.probe_slots == config.p.BN // 2


def test_the_producer_warps_store_no_c_and_issue_no_request(config):
    producers = range(config.mma.first_warp)
    assert all(coalescing.warp_requests(config, w, (0, 0)) == [] for w in producers)
    stores = coalescing.warp_requests(config, config.mma.first_warp, (0, 0))
    assert {r.name for r in stores} == {"st_C"} and len(stores) == config.p.BN // 4


def test_k_that_tma_cannot_read_is_one_line_and_odd_m_and_n_are_fine():
    kernel = get_kernel("wgmma_tma")
    for K in (1, 17, 333, 1004):
        with pytest.raises(MatvizError, match=rf"^kernel wgmma_tma: K={K} is not a multiple of 8"):
            kernel.configure({}, 64, 64, K)
    kernel.configure({}, 1, 1, 8)
    kernel.configure({}, 1001, 999, 4104)


def test_the_cli_refuses_such_a_k_in_one_line(tmp_path, capsys):
    from matviz.cli import main

    out = tmp_path / "t.mvz"
    code = main(["record", "wgmma_tma", "-M", "64", "-N", "64", "-K", "333", "--backend", "sim",
                 "-o", str(out)])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "K=333 is not a multiple of 8" in err[0]
    assert not out.exists()


def test_sm_90a_builds_through_gencode_and_others_through_arch():
    assert get_kernel("wgmma_tma").arch == "sm_90a" and get_kernel("mma_pipeline").arch == "sm_90"
    cmd = cubin_command("nvcc", "k.cu", ["-DX=1"], "sm_90a", "k.cubin")
    assert "-gencode=arch=compute_90a,code=sm_90a" in cmd and "-arch=sm_90a" not in cmd
    assert "-arch=sm_90" in cubin_command("nvcc", "k.cu", [], "sm_90", "k.cubin")


def test_the_shared_struct_is_the_slots_then_the_mbarriers(config):
    p = config.p
    tiles = p.STAGES * (p.BM + p.BN) * p.BK * 2
    assert config.array_bases == {"As": 0, "Bs": p.STAGES * p.BM * p.BK * 2}
    assert config.smem_bytes == tiles + 2 * p.STAGES * 8
    assert f"-DMV_SMEM_BYTES={config.smem_bytes}" in config.defines(0)
    assert config.array_bases["Bs"] % 1024 == 0  # the swizzle's 8-row period starts on 1 KiB


# -- warp specialisation in the simulator ---------------------------------------------------------
def test_the_simulated_producer_refills_a_slot_once_its_step_was_computed():
    trace = run(RunRequest("wgmma_tma", 520, 384, 1600, params={"STAGES": 3}, level=2))
    c = trace.config
    m = {name: trace.marks[:, :, c.mark_index(name)].astype(np.int64) for name in c.marks}
    S = c.layout.in_flight
    assert S == 3 and m["wait"].shape[1] == 25
    assert np.all(m["request"] <= m["issued"]) and np.all(
        m["issued"][:, :-1] <= m["request"][:, 1:]
    )
    assert np.all(m["wait"] <= m["landed"]) and np.all(m["landed"] <= m["computed"])
    np.testing.assert_array_equal(m["wait"][:, 1:], m["computed"][:, :-1])
    np.testing.assert_array_equal(m["issued"][:, S:], m["computed"][:, :-S])  # the empty mbarrier
    assert np.all(m["landed"] >= m["issued"])


def test_a_kernel_of_another_k_step_is_still_refused(monkeypatch):
    import dataclasses

    from matviz.core import registry
    from matviz.core.kernel import KStep, Phase

    kernel = get_kernel("wgmma_tma")
    odd = dataclasses.replace(
        kernel,
        kstep=KStep(
            depth=lambda p: p.BK,
            channels=(("a", "b"), ("c", "d", "e")),
            phases=(
                Phase("x", "a", "b", "computing"),
                Phase("y", "c", "d", "loading"),
                Phase("z", "d", "e", "computing"),
            ),  # fmt: skip
            chained=False,
            in_flight=2,
        ),
    )
    found = {**registry.kernels(), kernel.name: odd}
    monkeypatch.setattr(registry, "kernels", lambda: found)
    with pytest.raises(MatvizError, match="has another k-step"):
        run(RunRequest("wgmma_tma", 256, 256, 256, level=2))


# -- the bundled H200 recording, as the views and texts read it ------------------------------------
@pytest.fixture(scope="module")
def recording():
    return load_trace(RECORDING)


def test_the_recording_measured_the_accumulator_layout_the_description_gives(recording):
    described = np.asarray(recording.manifest["description"]["mma"]["fragments"][0]["elements"])
    assert recording.fragments.shape == (1, 32, 128)
    np.testing.assert_array_equal(recording.fragments[0], described)
    assert recording.manifest["description"]["copies"][1]["swizzle_bytes"] == 128


def test_the_explanation_says_who_copies_and_who_multiplies(recording):
    timeline = Timeline(recording)
    row = recording.phase_blocks[0]
    marks = recording.marks[0, 5]
    c = recording.config
    compute = explain(recording, timeline, int(row), int(marks[c.mark_index("computed")]) - 5)
    assert "2 consumer warpgroups (128 threads)" in compute.body
    assert "4 × wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in compute.body
    assert (
        "through matrix descriptors" in compute.body
        and "Warps 0-3 multiply nothing" in compute.body
    )
    assert "the copy engine brings 24576 elements" in compute.body
    assert "the TMA copies request 25.17 MB of A and B" in compute.body
    facts = " ".join(trace_facts(recording))
    assert "Global memory: the TMA copies request 25.17 MB" in facts
    assert "25.17 MB brought in by the copy engine (TMA)" in facts


@pytest.mark.skipif(
    nvcc_path() is None or cuobjdump_path() is None, reason="needs nvcc and cuobjdump"
)
@pytest.mark.parametrize(("BN", "BF16"), [(256, 1), (128, 0)])
def test_the_build_runs_hoppers_own_instructions(BN, BF16):
    """sm_90a SASS: the copy engine (UTMALDG), the warpgroup MMA (HGMMA) and the register
    hand-over (USETMAXREG), which ptxas drops without warning where it cannot honour it."""
    config = get_kernel("wgmma_tma").configure({"BN": BN, "BF16": BF16}, 1024, 1024, 1024)
    text = " ".join(op for _, op in sass(config, 0))
    kind = ".BF16" if BF16 else ""
    assert re.search(rf"\bHGMMA\.64x{BN}x16\.F32{re.escape(kind)}\b", text)
    assert "HMMA" not in text and "FFMA" not in text.replace("HGMMA", "")
    assert "UTMALDG.2D" in text and "SYNCS.PHASECHK" in text  # mbarrier waits
    assert "USETMAXREG.DEALLOC" in text and "USETMAXREG.TRY_ALLOC" in text


@pytest.mark.parametrize(
    ("kernel", "shape"), [("wgmma_tma", (200, 300, 336)), ("tiled", (40, 50, 60))]
)
def test_every_cells_text_comes_out_of_one_pass(kernel, shape):
    """The tiles view labels every cell at once (98,304 of them for kernel 11's slots: a
    per-cell call rebuilt the whole written mask and took 2.3 s a frame)."""
    config = get_kernel(kernel).configure({}, *shape)
    for held in held_cells(config, (config.grid[0] - 1, config.grid[1] - 1), 1).values():
        rows, cols = held.row.shape
        texts = held.texts()
        assert texts == [[held.text(r, c) for c in range(cols)] for r in range(rows)]
        assert {"", "0"} & {t for line in texts for t in line}  # an edge block: padding or 0s


def test_a_gpu_that_cannot_run_the_target_is_one_line():
    from matviz.backends.cupy_recorder import _check_arch

    h200 = {"name": "NVIDIA H200", "compute_capability": "9.0"}
    _check_arch("sm_90a", h200)
    _check_arch("sm_90", h200)
    _check_arch("sm_90", {**h200, "compute_capability": "12.0"})  # later GPUs run plain sm_90
    for cc in ("8.0", "10.0", "12.0"):  # wgmma and setmaxnreg exist on 9.0 alone
        with pytest.raises(MatvizError, match=rf"exactly 9.0 \(this NVIDIA H200 is {cc}\)"):
            _check_arch("sm_90a", {**h200, "compute_capability": cc})
    with pytest.raises(MatvizError, match="at least 9.0"):
        _check_arch("sm_90", {**h200, "compute_capability": "8.9"})

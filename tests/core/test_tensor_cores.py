"""Tensor Core kernels in the core: element types, MMA fragments, ldmatrix sites (pure numpy)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from matviz.core import access, coalescing, elements, instructions
from matviz.core.kernel import Site
from matviz.core.registry import get_kernel
from matviz.paths import RESOURCE_DIR


# -- element types -------------------------------------------------------------------------------
def test_bfloat16_rounds_to_nearest_even_and_reads_back_exactly():
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38, 1e-40], np.float32)
    bits = elements.rounded(np, x, "bfloat16")
    assert bits.dtype == np.uint16
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one (1.0)
    back = elements.as_float64(np, bits, "bfloat16")
    assert back[0] == 1.0 and back[1] == 1.0 and back[2] == 1.015625
    assert back[3] == -2.5
    assert np.isfinite(back[4]) and back[5] >= 0


def test_float16_and_float32_read_back_as_the_kernel_reads_them():
    x = np.array([0.1, -0.7, 2049.0], np.float32)
    half = elements.rounded(np, x, "float16")
    np.testing.assert_array_equal(elements.as_float64(np, half, "float16"), half.astype(float))
    assert elements.as_float64(np, half, "float16")[2] == 2048.0  # 11 significant bits
    assert elements.rounded(np, x, "float32") is x
    with pytest.raises(ValueError):
        elements.rounded(np, x, "int8")


# -- the WMMA kernel's description ---------------------------------------------------------------
@pytest.fixture
def wmma():
    return get_kernel("wmma").configure(None, 1024, 1024, 1024)


def test_fragments_cover_each_operand_and_fp16_slots_repeat(wmma):
    mma = wmma.mma
    assert mma.shape == (16, 16, 16) and mma.sass_shape == (16, 8, 16)
    for fragment in mma.fragments:
        elements_ = fragment.elements()
        assert elements_.shape == (32, fragment.slots)
        assert set(elements_.ravel()) == set(range(fragment.rows * fragment.cols))
    a = mma.fragment("A").elements()
    np.testing.assert_array_equal(a[:, 8:], a[:, :8])  # fp16 WMMA: slots 8-15 repeat 0-7
    # lane 4g + t holds rows g, g + 8 and columns 2t, 2t + 1 (+ 8) of A (m16n8k16, PTX ISA)
    assert [divmod(int(e), 16) for e in a[5, :8]] == [
        (1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)
    ]  # fmt: skip


def test_inputs_are_fp16_and_the_manifest_says_so(wmma):
    assert wmma.input_dtype == "float16" and wmma.element_bytes("A") == 2
    assert wmma.element_bytes("C") == 4
    described = wmma.describe()
    assert described["inputs"] == "float16"
    assert described["mma"]["warps"] == [4, 4] and described["mma"]["warp_tile"] == [32, 32]
    assert len(described["mma"]["fragments"]) == 3


def test_global_requests_count_2_byte_elements(wmma):
    # a warp copies 32 x 16 bytes = 512 contiguous bytes of A: 16 sectors, none wasted
    requests = [r for r in coalescing.warp_requests(wmma, 0) if r.matrix == "A"]
    assert requests and all(r.element == 2 for r in requests)
    assert {r.sectors.size for r in requests} == {16}
    assert {r.ideal_sectors for r in requests} == {16}


def test_ldmatrix_rows_without_padding_conflict_as_ncu_measured():
    """The model's LDSM wavefronts are resources/bench/h200_ncu_banks_1024.md's ncu rows."""
    table = (RESOURCE_DIR / "bench" / "h200_ncu_banks_1024.md").read_text()
    rows = re.findall(
        r"^\| 09_wmma_(\S+) \| ([\d.]+) \| ([\d.]+) \|.*\| (\d+)/(\d+) \| \d+/\d+ \|",
        table,
        re.MULTILINE,
    )
    assert len(rows) == 22
    kernel = get_kernel("wmma")
    for tag, model_text, ncu_text, model_inst, ncu_inst in rows:
        found = re.fullmatch(r"BM(\d+)_BN(\d+)_BK(\d+)_W(\d+)_P(\d+)(?:_S(\d))?", tag)
        assert found, tag
        p = dict(zip(("BM", "BN", "BK", "WT", "PAD"), map(int, found.groups()[:5]), strict=True))
        p["STAGES"] = int(found[6] or 1)
        config = kernel.configure(p, 1024, 1024, 1024)
        costs = instructions.block_costs(config)
        per_ldsm = costs["ld_wavefronts"] / costs["ld_inst"]
        assert per_ldsm == pytest.approx(float(model_text), abs=1e-3), tag
        assert per_ldsm == (4.0 if p["PAD"] else 20.0 if p["BK"] == 16 else 24.0)
        # ncu's wavefronts in all (per instruction times its instruction count, which with a
        # pipeline holds more instructions than the model's) over the model's LDSM: within a
        # tenth of a wavefront, where a conflict adds whole ones. BM 256 reads 0.05-0.09 high,
        # padded or not (the table says so); BM 64 and 128 at most 0.05.
        measured = float(ncu_text) * int(ncu_inst) / int(model_inst)
        assert measured == pytest.approx(per_ldsm, abs=0.1), tag


def test_swizzled_ldmatrix_is_conflict_free_as_ncu_measured():
    """Kernel 10's rows of resources/bench/h200_ncu_banks_1024.md: the swizzle takes an LDSM
    from 24 wavefronts to 4, and ncu's shared-load wavefronts in all (its per-instruction figure
    times its instruction count, which holds ptxas's never-executed LDS) are the model's."""
    table = (RESOURCE_DIR / "bench" / "h200_ncu_banks_1024.md").read_text()
    rows = re.findall(
        r"^\| 10_mma_pipeline_(\S+) \| ([\d.]+) \| ([\d.]+) \|.*\| (\d+)/(\d+) \| \d+/\d+ \|",
        table,
        re.MULTILINE,
    )
    kernel = get_kernel("mma_pipeline")
    assert len(rows) == len(kernel.configurations())
    for tag, model_text, ncu_text, model_inst, ncu_inst in rows:
        found = re.fullmatch(r"BM(\d+)_BN(\d+)_BK32_WM64_WN64_S(\d)_X(\d)(_BF1)?", tag)
        assert found, tag
        bm, bn, stages, swizzle = map(int, found.groups()[:4])
        p = {"BM": bm, "BN": bn, "STAGES": stages, "SWIZZLE": swizzle, "BF16": int(bool(found[5]))}
        costs = instructions.block_costs(kernel.configure(p, 1024, 1024, 1024))
        per_ldsm = costs["ld_wavefronts"] / costs["ld_inst"]
        assert per_ldsm == pytest.approx(float(model_text), abs=1e-3), tag
        assert per_ldsm == (4.0 if swizzle else 24.0), tag
        # ncu's wavefronts, to its 3 decimals: BM 128 equal to the model's, BM 256 up to 235
        # (0.045%) more, beyond what the rounding explains (the table says so)
        measured = float(ncu_text) * int(ncu_inst)
        assert measured == pytest.approx(per_ldsm * int(model_inst), rel=5e-4), tag


def test_ldmatrix_sites_are_named_by_their_sass(wmma):
    ops = {
        ins.opcode
        for ins in instructions.instructions(wmma, access.access_records(wmma, 0))
        if ins.kind == "load"
    }
    assert ops == {"LDSM.16.M88.4", "LDSM.16.MT88.4"}


def test_a_matrix_load_reads_16_byte_rows():
    with pytest.raises(ValueError, match="16-byte rows"):
        Site("ld", "load", "As", "compute", at=lambda th, p: (0, 0), matrix_load="LDSM.16.M88.4")
    with pytest.raises(ValueError, match="16-byte rows"):
        Site("st", "store", "As", "load", width=16, at=lambda th, p: (0, 0), matrix_load="LDSM")


def test_the_trace_schema_knows_exactly_the_input_types_the_descriptions_may_use():
    from typing import get_args

    from matviz.core.kernel import INPUT_BYTES
    from matviz.core.trace_schema import InputType

    assert set(get_args(InputType)) == set(INPUT_BYTES) == set(elements_types())


def elements_types() -> list[str]:
    """The types matviz.core.elements rounds to (each one it accepts)."""
    x = np.zeros(2, np.float32)
    known = []
    for dtype in ("float32", "float16", "bfloat16", "int8", "float64"):
        try:
            elements.rounded(np, x, dtype)
        except ValueError:
            continue
        known.append(dtype)
    return known

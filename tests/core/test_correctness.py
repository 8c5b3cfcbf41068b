"""C against float64 and what the probed warp read: the model both backends share."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from matviz.backends.contract import RunRequest
from matviz.backends.simulator import simulate
from matviz.core import access, correctness
from matviz.core.registry import get_kernel
from matviz.core.summary import summary_lines
from matviz.core.trace_io import load_trace, save_trace
from matviz.errors import MatvizError
from matviz.paths import TRACE_DIR


def _product(rng, M, N, K):
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    return (A @ B).astype(np.float32), ref


def test_float32_rounding_is_within_tolerance_and_one_wrong_product_is_not():
    rng = np.random.default_rng(7)
    for K in (1, 17, 1024, 4096):
        C, ref = _product(rng, 40, 30, K)
        cells, wrong, worst = correctness.wrong_map(np, C, ref, K)
        assert wrong == 0 and worst < correctness.tolerance(K) / 10
        C[3, 4] += 0.05  # smaller than a typical wrong product (~0.3)
        cells, wrong, _ = correctness.wrong_map(np, C, ref, K)
        assert wrong == 1 and cells[3, 4] == 1


def test_the_map_sums_cells_and_counts_unwritten_elements():
    rng = np.random.default_rng(1)
    M, N = 2050, 1030  # cells of 3 x 2 elements, ragged at the edges
    C, ref = _product(rng, M, N, 8)
    C[0, 0] = np.nan
    C[2049, 1029] += 1.0
    C[1, 1] += 1.0
    cells, wrong, worst = correctness.wrong_map(np, C, ref, 8)
    assert correctness.cell_shape(M, N) == (3, 2)
    assert cells.shape == (684, 515) and cells.dtype == np.uint32
    assert wrong == 3 == cells.sum()
    assert cells[0, 0] == 2 and cells[683, 514] == 1
    assert worst == np.inf


def _fetch_from(A, B):
    return lambda matrix, rows, cols: (A if matrix == "A" else B)[rows, cols]


CASES = [("tiled", {"tile": 16}), ("tiled_transposed", {"tile": 8, "pad": 1}),
         ("register_tiling_1d", {})]  # fmt: skip


@pytest.mark.parametrize("kernel,params", CASES)
def test_staged_tiles_hold_what_the_stores_copy(kernel, params):
    config = get_kernel(kernel).configure(params, 100, 90, 70)
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (100, 70)).astype(np.float32)
    B = rng.uniform(-1, 1, (70, 90)).astype(np.float32)
    block, t = (1, 0), config.n_steps - 1  # the last k-step: partly outside K
    filled = correctness.staged(config, block, t, _fetch_from(A, B))
    for rs in config.sites:
        if rs.site.kind != "store":
            continue
        for warp in range(config.warps):
            for k in range(rs.repeat):
                r, c, mask = access.evaluate(config, rs.site.at, warp, block, t, k)
                sr, sc, inside = access.global_elements(config, rs.name, warp, block, t, k)
                src = A if config.array(rs.site.array).source == "A" else B
                want = np.where(inside, src[np.where(inside, sr, 0), np.where(inside, sc, 0)], 0)
                np.testing.assert_array_equal(filled[rs.site.array][r[mask], c[mask]], want[mask])


def test_reads_are_classified_against_the_previous_current_and_next_k_step():
    config = get_kernel("tiled").configure({"tile": 8}, 64, 64, 64)
    rng = np.random.default_rng(5)
    A = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
    B = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
    fetch = _fetch_from(A, B)
    block, warp = (0, 0), 1
    steps = [correctness.staged(config, block, t, fetch) for t in range(config.n_steps)]
    values = np.full((config.n_steps, config.probe_slots, 32), 0xFFFFFFFF, np.uint32)
    ld = config.site("ld_Bs")
    for t in range(config.n_steps):
        for k in range(ld.repeat):
            r, c, _ = access.evaluate(config, ld.site.at, warp, block, t, k)
            values[t, ld.slot + k] = steps[t]["Bs"][r, c].view(np.uint32)
    r, c, _ = access.evaluate(config, ld.site.at, warp, block, 3, 2)
    values[3, ld.slot + 2, 0] = steps[2]["Bs"][r[0], c[0]].view(np.uint32)  # too early
    values[3, ld.slot + 2, 1] = steps[4]["Bs"][r[1], c[1]].view(np.uint32)  # too late
    values[3, ld.slot + 2, 2] = np.float32(9.0).view(np.uint32)  # neither
    stale = correctness.classify_reads(config, block, warp, values, fetch)
    row = config.program.index(("ld_Bs", 2))
    assert list(stale[3, row, :4]) == [correctness.BEFORE_WRITTEN, correctness.OVERWRITTEN,
                                       correctness.OTHER, correctness.CURRENT]  # fmt: skip
    as_rows = [i for i, (site, _) in enumerate(config.program) if site == "ld_As"]
    assert (stale[:, as_rows] == correctness.UNCHECKED).all()  # nothing recorded there
    counts = correctness.read_counts(stale)
    assert counts == {"current": config.n_steps * 8 * 32 - 3, "before_written": 1,
                      "overwritten": 1, "other": 1}  # fmt: skip


def test_a_simulated_correct_kernel_reads_only_its_own_k_steps_values(tmp_path):
    trace = simulate(RunRequest("tiled", 200, 150, 100, {"tile": 16}, backend="sim", level=3))
    loads = trace.probe["kind"] == "load"
    assert (trace.stale[:, loads] == correctness.CURRENT).all()
    assert trace.manifest["correctness"]["wrong"] == 0 and not trace.c_wrong.any()
    save_trace(trace, tmp_path / "t.mvz")
    back = load_trace(tmp_path / "t.mvz")
    np.testing.assert_array_equal(back.stale, trace.stale)
    np.testing.assert_array_equal(back.c_wrong, trace.c_wrong)


def test_broken_values_are_left_out_of_benches_but_compile_checked():
    tiled = get_kernel("tiled")
    assert all(p["drop_sync"] == 0 for p in tiled.configurations())
    assert {p["drop_sync"] for p in tiled.configurations(broken=True)} == {0, 1, 2}
    assert tiled.configure({"drop_sync": 2}, 64, 64, 64).broken == ["drop_sync"]
    assert "drop_sync" not in get_kernel("tiled_transposed").param_names  # its .cu keeps both


def test_the_summary_says_what_is_wrong_and_why():
    broken = load_trace(TRACE_DIR / "tiled_t16_nosync1_1024.mvz")
    text = "\n".join(summary_lines(broken))
    wrong = broken.manifest["correctness"]["wrong"]
    assert f"{wrong:,} of 1,048,576 elements WRONG" in text
    assert "drop_sync=1: deliberately broken" in text
    assert "before written" in text
    fine = "\n".join(summary_lines(load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz")))
    assert "all 1,048,576 elements within" in fine and "WRONG" not in fine


def _rewrite(path, out, **arrays):
    """Copy a format-3 trace with some members replaced (raw .npy bytes, zstd-compressed)."""
    import zstandard

    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            name = info.filename.removesuffix(".npy.zst")
            if name in arrays:
                if arrays[name] is None:
                    continue
                buf = io.BytesIO()
                np.lib.format.write_array(buf, arrays[name])
                zout.writestr(info.filename, zstandard.ZstdCompressor().compress(buf.getvalue()))
            else:
                zout.writestr(info, zin.read(info))


def test_a_format_3_file_from_before_the_map_still_opens(tmp_path):
    src = TRACE_DIR / "tiled_t32_p0_1024.mvz"
    _rewrite(src, tmp_path / "old.mvz", c_wrong=None, stale=None)
    old = load_trace(tmp_path / "old.mvz")
    assert old.c_wrong.size == 0 and old.stale.shape == (0, 0, 32)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"c_wrong": np.zeros((3, 3), np.uint32)}, "c_wrong has shape"),
        ({"c_wrong": np.full((1024, 1024), 2, np.uint32)}, "more wrong elements than a cell"),
        ({"c_wrong": np.zeros((1024, 1024), np.float32)}, "dtype"),
        ({"stale": np.full((32, 66, 32), 9, np.int8)}, "unknown read outcome"),
        ({"stale": np.zeros((32, 5, 32), np.int8)}, "one row per probe row"),
    ],
)
def test_hostile_correctness_arrays_are_one_line(tmp_path, change, message):
    _rewrite(TRACE_DIR / "tiled_t32_p0_1024.mvz", tmp_path / "bad.mvz", **change)
    with pytest.raises(MatvizError, match=message) as info:
        load_trace(tmp_path / "bad.mvz")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: m["correctness"].__setitem__("wrong", m["correctness"]["total"] + 1),
     "more wrong elements than C has"),
    (lambda m: m["correctness"].__setitem__("broken", ["tile_size"]),
     "'tile_size', not a parameter"),
    (lambda m: m["description"]["kstep"]["phases"][0].__setitem__("barrier_left_out", [1]),
     "barrier_left_out"),
])  # fmt: skip
def test_a_correctness_section_that_claims_too_much_is_refused(tmp_path, change, message):
    src = TRACE_DIR / "tiled_t32_p0_1024.mvz"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(tmp_path / "bad.mvz", "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "manifest.json":
                manifest = json.loads(data)
                change(manifest)
                data = json.dumps(manifest).encode()
            zout.writestr(info, data)
    with pytest.raises(MatvizError, match=message) as info:
        load_trace(tmp_path / "bad.mvz")
    assert "\n" not in str(info.value)


def test_a_vector_store_stages_all_its_elements():
    """Kernel 06 stores B's tile as float4s: every element of Bs is staged, not one in four."""
    config = get_kernel("vectorized").configure({}, 256, 256, 64)
    b = np.arange(64 * 256, dtype=np.float32).reshape(64, 256) + 1

    def fetch(matrix, rows, cols):
        return b[rows, cols] if matrix == "B" else np.ones(len(rows), np.float32)

    bs = correctness.staged(config, (1, 0), 2, fetch)["Bs"]
    depth, cols = config.step_depth, config.launch.c_tile[1]
    assert not np.isnan(bs).any()
    assert (bs == b[2 * depth:3 * depth, cols:2 * cols]).all()  # Bs[k][c] = B[t*BK + k][bx*BN + c]

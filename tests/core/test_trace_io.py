"""Saving and loading traces: exact round trips, the format-3 layout, older formats."""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from matviz.core import trace_io
from matviz.core.trace import ARRAY_FIELDS, BLOCK_DTYPE, PROBE_DTYPE, Trace
from matviz.core.trace_io import FORMAT_VERSION, decode_times, encode_times, load_trace, save_trace
from matviz.errors import MatvizError
from matviz.paths import TRACE_DIR


def assert_same(a: Trace, b: Trace) -> None:
    assert a.manifest == b.manifest
    for name in ARRAY_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y), name


def stored(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a format-3 file as stored (time arrays as byte planes)."""
    out = {}
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.endswith(".npy.zst"):
                raw = zstandard.ZstdDecompressor().stream_reader(zf.read(name)).read()
                out[name.removesuffix(".npy.zst")] = np.load(io.BytesIO(raw))
    return out


def write_format_2(trace: Trace, path: Path, *, format_version: int = 2) -> Path:
    """A file as matviz wrote it before format 3: savez of uint32 deltas from block start."""
    arrays = {
        "blocks": trace.blocks,
        "phase_blocks": trace.phase_blocks,
        "warp_blocks": trace.warp_blocks,
        "probe": trace.probe,
        "marks": (trace.marks - trace.blocks["start"][trace.phase_blocks][:, None, None]).astype(
            np.uint32
        ),
        "barrier_wait": trace.barrier_wait.astype(np.uint32),
        "delta_encoded": np.array([True, True]),
    }
    npz = io.BytesIO()
    np.savez_compressed(npz, **arrays)
    with zipfile.ZipFile(path, "w") as zf:
        manifest = {**trace.manifest, "format_version": format_version}
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("arrays.npz", npz.getvalue())
    return path


@pytest.fixture
def saved(tmp_path, make_trace) -> Path:
    path = tmp_path / "run.mvz"
    save_trace(make_trace(warps=True, probe=True), path)
    return path


# -- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"warps": True, "probe": True},
        {"phases": False},
        {"n_tiles": 0},
        {"sample": 3, "warps": True},
        {"grid": (1, 1), "n_tiles": 1},
        {"warps": True, "time_scale": 10**8},  # deltas past 32 bits
    ],
)
def test_round_trip(tmp_path, make_trace, kwargs):
    original = make_trace(**kwargs)
    path = tmp_path / "t.mvz"
    save_trace(original, path)
    assert_same(original, load_trace(path))


def test_saved_file_mode_follows_umask(tmp_path, make_trace):
    umask = os.umask(0o022)
    try:
        save_trace(make_trace(), tmp_path / "t.mvz")
    finally:
        os.umask(umask)
    assert (tmp_path / "t.mvz").stat().st_mode & 0o777 == 0o644


def test_numpy_values_in_manifest_are_saved_as_json(tmp_path, make_trace):
    original = make_trace()
    original.manifest["stats"].update(time_ms_median=np.float32(0.5), times=np.arange(3))
    save_trace(original, tmp_path / "t.mvz")
    stats = load_trace(tmp_path / "t.mvz").manifest["stats"]
    assert stats["time_ms_median"] == 0.5
    assert stats["times"] == [0, 1, 2]


def test_round_trip_accepts_str_path(tmp_path, make_trace):
    original = make_trace()
    save_trace(original, str(tmp_path / "t.mvz"))
    assert_same(original, load_trace(str(tmp_path / "t.mvz")))


def test_file_layout(saved):
    with zipfile.ZipFile(saved) as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
        infos = {i.filename: i for i in zf.infolist()}
    assert names == {"manifest.json"} | {
        f"{n}.npy.zst"
        for n in ("blocks", "phase_blocks", "warp_blocks", "probe", "marks", "barrier_wait",
                  "c_wrong", "stale", "fragments")
    }
    assert manifest["format_version"] == FORMAT_VERSION == 3
    assert infos["marks.npy.zst"].compress_type == zipfile.ZIP_STORED  # zstd inside already
    arrays = stored(saved)
    assert arrays["blocks"].dtype == BLOCK_DTYPE and arrays["probe"].dtype == PROBE_DTYPE
    trace = load_trace(saved)
    # phase lengths under 128 ns fit one byte: one plane, k-steps x marks x rows
    assert arrays["marks"].dtype == np.uint8
    assert arrays["marks"].shape == (1, trace.n_tiles, 3, len(trace.phase_blocks))
    assert "format_version" not in trace.manifest


def test_long_phases_widen_the_planes(tmp_path, make_trace):
    original = make_trace(time_scale=10**8)
    save_trace(original, tmp_path / "long.mvz")
    assert stored(tmp_path / "long.mvz")["marks"].shape[0] == 8
    assert_same(original, load_trace(tmp_path / "long.mvz"))


def test_late_kernel_keeps_narrow_planes(tmp_path, make_trace):
    original = make_trace()
    for arr in (original.marks, original.blocks["start"], original.blocks["end"]):
        arr += 10**12
    save_trace(original, tmp_path / "late.mvz")
    assert stored(tmp_path / "late.mvz")["marks"].shape[0] == 1
    assert_same(original, load_trace(tmp_path / "late.mvz"))


int64s = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=80, deadline=None)
@given(
    times=hnp.arrays(
        np.int64,
        hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=5),
        elements=st.one_of(st.integers(-300, 300), int64s),
    ),  # fmt: skip
    data=st.data(),
)
def test_time_codec_is_exact_for_any_int64(times, data):
    base = data.draw(hnp.arrays(np.int64, times.shape[0], elements=int64s))
    planes = encode_times(times, base)
    assert planes.dtype == np.uint8 and planes.shape[1:] == (*times.shape[1:], times.shape[0])
    back = decode_times(planes, base)
    assert back.dtype == np.int64 and back.shape == times.shape
    assert np.array_equal(back, times)


deltas = hnp.arrays(np.int64, (4, 3), elements=st.integers(0, 2**40))


@settings(max_examples=40, deadline=None)
@given(issue=deltas, loaded=deltas, computed=deltas, start=st.integers(0, 2**50))
def test_round_trip_random_phase_times(make_trace, issue, loaded, computed, start):
    original = make_trace(grid=(2, 2), n_tiles=3)
    original.blocks["start"] += start
    original.blocks["end"] += start + 2**41
    starts = original.blocks["start"][original.phase_blocks][:, None]
    original.marks = np.stack([starts + issue, starts + loaded, starts + computed], axis=-1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.mvz"
        save_trace(original, path)
        assert_same(original, load_trace(path))


# -- older formats -------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{}, {"warps": True, "probe": True}, {"phases": False}])
def test_format_2_files_still_load(tmp_path, make_trace, kwargs):
    original = make_trace(**kwargs)
    assert_same(original, load_trace(write_format_2(original, tmp_path / "f2.mvz")))


def test_format_1_arrays_are_read_as_marks(tmp_path, make_trace):
    # matviz before kernel descriptions stored issue, loaded and computed as three arrays
    original = make_trace(warps=True, probe=True)
    path = write_format_2(original, tmp_path / "f1.mvz", format_version=1)
    with zipfile.ZipFile(path) as zf:
        manifest = zf.read("manifest.json")
        with np.load(io.BytesIO(zf.read("arrays.npz"))) as npz:
            arrays = {k: npz[k] for k in npz.files}
    marks = arrays.pop("marks")
    for i, name in enumerate(("issue", "loaded", "computed")):
        arrays[name] = np.ascontiguousarray(marks[:, :, i])
    arrays["delta_encoded"] = np.array([True] * 4)
    npz_bytes = io.BytesIO()
    np.savez(npz_bytes, **arrays)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", manifest)
        zf.writestr("arrays.npz", npz_bytes.getvalue())
    assert_same(original, load_trace(path))


# H200 recordings as earlier matviz wrote them (formats 1 and 2, schemas 1 and 2): they must
# keep opening. The bundled ones (resources/traces) are re-recorded as the format moves on.
OLD = sorted((Path(__file__).parent / "old_traces").glob("*.mvz"))
BUNDLED = sorted(TRACE_DIR.glob("*.mvz"))


@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_bundled_recordings_are_current_and_round_trip(path, tmp_path):
    trace = load_trace(path)
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("manifest.json"))["format_version"] == FORMAT_VERSION
    assert trace.correctness is not None and trace.c_wrong.size  # C was checked and mapped
    save_trace(trace, tmp_path / "again.mvz")
    assert_same(trace, load_trace(tmp_path / "again.mvz"))


@pytest.mark.parametrize("path", OLD, ids=[p.name for p in OLD])
def test_old_recordings_load_and_survive_a_round_trip(path, tmp_path):
    with zipfile.ZipFile(path) as zf:
        stored_manifest = json.loads(zf.read("manifest.json"))
    assert stored_manifest["format_version"] < FORMAT_VERSION  # written in an older format
    trace = load_trace(path)
    assert trace.manifest["schema_version"] == 2
    described = trace.manifest["description"]
    if stored_manifest["schema_version"] == 1:  # written before kernel descriptions: migrated
        assert "description" not in stored_manifest
        assert described == trace.config.describe()
    else:  # the description as recorded, whatever the registry says today, with the layout
        # keys of later descriptions added (a parameter's layout role, an array's swizzle)
        stored = stored_manifest["description"]
        added = {"params": "layout", "shared": "swizzle"}
        # before Tensor Core kernels: fp32, no MMA; before kernel 11: no TMA copies, sm_90
        later = {"inputs": "float32", "mma": None, "copies": [], "mbarriers": 0, "arch": "sm_90"}
        assert {k: v for k, v in described.items() if k not in added | later} == {
            k: v for k, v in stored.items() if k not in added | later
        }
        for key, default in later.items():
            assert described[key] == stored.get(key, default)
        for section, key in added.items():
            for now, then in zip(described[section], stored[section], strict=True):
                assert {k: v for k, v in now.items() if k != key or key in then} == then
                assert key in now
    assert described["launch"]["grid"] == list(trace.grid)
    save_trace(trace, tmp_path / "again.mvz")
    again = load_trace(tmp_path / "again.mvz")
    assert_same(trace, again)
    assert (tmp_path / "again.mvz").stat().st_size <= path.stat().st_size


# -- saving failures -----------------------------------------------------------------------


def test_save_under_a_regular_file(tmp_path, make_trace):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(MatvizError, match="cannot write trace to .*t.mvz: ") as info:
        save_trace(make_trace(), blocker / "t.mvz")
    assert "\n" not in str(info.value)


def test_save_into_missing_directory(tmp_path, make_trace):
    with pytest.raises(MatvizError, match="cannot write trace to"):
        save_trace(make_trace(), tmp_path / "nope" / "t.mvz")


def test_failed_save_keeps_existing_file(tmp_path, make_trace, monkeypatch):
    path = tmp_path / "t.mvz"
    save_trace(make_trace(), path)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(trace_io.os, "replace", broken_replace)
    with pytest.raises(MatvizError, match="No space left on device"):
        save_trace(make_trace(warps=True, seed=5), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.mvz"]  # no temp file left


def test_unserialisable_manifest_keeps_existing_file(tmp_path, make_trace):
    path = tmp_path / "t.mvz"
    save_trace(make_trace(), path)
    before = path.read_bytes()
    bad = make_trace()
    bad.manifest["stats"]["raw"] = {1, 2}
    with pytest.raises(MatvizError, match="cannot write trace to"):
        save_trace(bad, path)
    assert path.read_bytes() == before


def test_an_old_description_gets_each_parameters_layout_role():
    trace = load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz")
    roles = {p["name"]: p["layout"] for p in trace.manifest["description"]["params"]}
    assert roles == {"tile": "", "pad": "pad", "drop_sync": ""}
    assert all(a["swizzle"] == "" for a in trace.manifest["description"]["shared"])

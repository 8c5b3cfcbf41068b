from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from matviz.core import trace_io
from matviz.core.trace import ARRAY_FIELDS, Trace
from matviz.core.trace_io import FORMAT_VERSION, load_trace, save_trace
from matviz.errors import MatvizError

ARRAYS = ARRAY_FIELDS


def assert_same(a: Trace, b: Trace) -> None:
    assert a.manifest == b.manifest
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        assert np.array_equal(x, y), name
        if name not in ("blocks", "probe"):
            assert y.dtype == np.int64, name


def stored_arrays(path: Path) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(path) as zf:
        with np.load(io.BytesIO(zf.read("arrays.npz"))) as npz:
            return {k: npz[k] for k in npz.files}


def rewrite(src: Path, dst: Path, *, manifest=None, arrays=None, drop=()) -> Path:
    """Copy a saved trace, editing the manifest dict / arrays dict / dropping members."""
    with zipfile.ZipFile(src) as zf:
        man = json.loads(zf.read("manifest.json"))
    arrs = stored_arrays(src)
    if manifest is not None:
        manifest(man)
    if arrays is not None:
        arrays(arrs)
    npz = io.BytesIO()
    np.savez(npz, **arrs)
    with zipfile.ZipFile(dst, "w") as zf:
        if "manifest.json" not in drop:
            zf.writestr("manifest.json", json.dumps(man))
        if "arrays.npz" not in drop:
            zf.writestr("arrays.npz", npz.getvalue())
    return dst


def load_error(path: Path) -> str:
    with pytest.raises(MatvizError) as info:
        load_trace(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert str(path) in msg
    return msg


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
        assert set(zf.namelist()) == {"manifest.json", "arrays.npz"}
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["format_version"] == FORMAT_VERSION
    arrays = stored_arrays(saved)
    for name in ("marks", "barrier_wait"):
        assert arrays[name].dtype == np.uint32, name
    assert arrays["delta_encoded"].all()
    assert arrays["marks"].shape[2] == 3  # issue, loaded, computed of the tiled description
    assert "format_version" not in load_trace(saved).manifest


def test_large_times_fall_back_to_int64(tmp_path, make_trace):
    # Gaps of up to 49 * 1e8 ns push some deltas from block start past uint32.
    original = make_trace(warps=True, time_scale=10**8)
    path = tmp_path / "long.mvz"
    save_trace(original, path)
    arrays = stored_arrays(path)
    assert arrays["marks"].dtype == np.int64
    assert not arrays["delta_encoded"][0]
    assert_same(original, load_trace(path))


def test_late_kernel_with_short_phases_still_uses_uint32(tmp_path, make_trace):
    original = make_trace()
    original.marks[...] += 10**12
    original.blocks["start"] += 10**12
    original.blocks["end"] += 10**12
    path = tmp_path / "late.mvz"
    save_trace(original, path)
    assert stored_arrays(path)["marks"].dtype == np.uint32
    assert_same(original, load_trace(path))


deltas = hnp.arrays(
    np.int64,
    (4, 3),
    elements=st.one_of(st.integers(0, 2**32 - 1), st.integers(-(2**40), 2**40)),
)


@settings(max_examples=60, deadline=None)
@given(issue=deltas, loaded=deltas, computed=deltas, start=st.integers(0, 2**50))
def test_round_trip_random_phase_times(make_trace, issue, loaded, computed, start):
    original = make_trace(grid=(2, 2), n_tiles=3)
    original.blocks["start"] += start
    original.blocks["end"] += start
    starts = original.blocks["start"][original.phase_blocks][:, None]
    original.marks = np.stack([starts + issue, starts + loaded, starts + computed], axis=-1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.mvz"
        save_trace(original, path)
        assert_same(original, load_trace(path))


# -- saving failures -----------------------------------------------------------------------


def test_save_under_a_regular_file(tmp_path, make_trace):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    target = blocker / "t.mvz"
    with pytest.raises(MatvizError, match="cannot write trace to .*t.mvz: ") as info:
        save_trace(make_trace(), target)
    assert "\n" not in str(info.value)


def test_save_into_missing_directory(tmp_path, make_trace):
    with pytest.raises(MatvizError, match="cannot write trace to"):
        save_trace(make_trace(), tmp_path / "nope" / "t.mvz")


def test_failed_save_keeps_existing_file(tmp_path, make_trace, monkeypatch):
    path = tmp_path / "t.mvz"
    original = make_trace()
    save_trace(original, path)
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


# -- loading failures ----------------------------------------------------------------------


def test_missing_file(tmp_path):
    assert "no such file" in load_error(tmp_path / "absent.mvz")


def test_directory(tmp_path):
    load_error(tmp_path)


def test_random_bytes(tmp_path):
    path = tmp_path / "noise.mvz"
    path.write_bytes(np.random.default_rng(1).bytes(5000))
    load_error(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.mvz"
    path.write_bytes(b"")
    load_error(path)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.99, -1])
def test_truncated_file(saved, keep):
    data = saved.read_bytes()
    cut = len(data) + keep if keep < 0 else int(len(data) * keep)
    saved.write_bytes(data[:cut])
    load_error(saved)


def test_corrupted_member(saved):
    # Flip bytes inside arrays.npz but keep the zip directory: the CRC check must catch it.
    data = bytearray(saved.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(16)
    saved.write_bytes(bytes(data))
    load_error(saved)


@pytest.mark.parametrize("member", ["manifest.json", "arrays.npz"])
def test_zip_missing_member(saved, tmp_path, member):
    path = rewrite(saved, tmp_path / "bad.mvz", drop=(member,))
    assert member in load_error(path)


def test_foreign_zip(tmp_path):
    path = tmp_path / "other.mvz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("hello.txt", "hi")
    assert "not a matviz trace" in load_error(path)


def test_bad_json(saved, tmp_path):
    path = tmp_path / "bad.mvz"
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(path, "w") as dst:
        dst.writestr("manifest.json", b"{not json")
        dst.writestr("arrays.npz", src.read("arrays.npz"))
    assert "not valid JSON" in load_error(path)


def test_manifest_not_an_object(saved, tmp_path):
    path = tmp_path / "bad.mvz"
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(path, "w") as dst:
        dst.writestr("manifest.json", "[1, 2]")
        dst.writestr("arrays.npz", src.read("arrays.npz"))
    load_error(path)


def test_newer_format(saved, tmp_path):
    def bump(m):
        m["format_version"] = FORMAT_VERSION + 1

    msg = load_error(rewrite(saved, tmp_path / "new.mvz", manifest=bump))
    assert f"written by a newer matviz (format {FORMAT_VERSION + 1})" in msg
    assert f"reads up to {FORMAT_VERSION}: upgrade matviz" in msg


def test_missing_format_version(saved, tmp_path):
    msg = load_error(rewrite(saved, tmp_path / "b.mvz", manifest=lambda m: m.pop("format_version")))
    assert "format_version" in msg


@pytest.mark.parametrize("key", ["kernel", "stats", "geometry"])
def test_missing_manifest_key(saved, tmp_path, key):
    msg = load_error(rewrite(saved, tmp_path / "b.mvz", manifest=lambda m: m.pop(key)))
    assert f"manifest lacks {key}" in msg


def test_manifest_disagrees_with_arrays(saved, tmp_path):
    def shrink(m):
        m["geometry"]["grid"] = [2, 2]

    assert "block rows" in load_error(rewrite(saved, tmp_path / "b.mvz", manifest=shrink))


def test_manifest_nested_entry_missing(saved, tmp_path):
    def drop_grid(m):
        del m["geometry"]["grid"]

    assert "manifest lacks grid" in load_error(
        rewrite(saved, tmp_path / "b.mvz", manifest=drop_grid)
    )


def test_manifest_entry_of_wrong_type(saved, tmp_path):
    def break_geometry(m):
        m["geometry"] = "4x3"

    load_error(rewrite(saved, tmp_path / "b.mvz", manifest=break_geometry))


def _set(name, value):
    def edit(arrays):
        arrays[name] = value(arrays[name]) if callable(value) else value

    return edit


@pytest.mark.parametrize(
    "edit, needle",
    [
        (_set("blocks", lambda a: a["start"].astype(np.float64)), "blocks"),
        (_set("probe", lambda a: a["offsets"]), "probe"),
        (_set("marks", lambda a: a.astype(np.float32)), "marks"),
        (_set("marks", lambda a: a[0]), "marks"),
        (_set("marks", lambda a: a[:-1]), "marks"),
        (_set("marks", lambda a: a[:, :, :-1]), "marks hold 2 marks per k-step"),
        (_set("barrier_wait", lambda a: a[..., :1]), "barrier waits for 1 barriers"),
        (_set("phase_blocks", lambda a: a.astype(np.float64)), "phase_blocks"),
        (_set("phase_blocks", lambda a: a + 100), "outside the grid"),
        (_set("warp_blocks", lambda a: a - 100), "outside the grid"),
        (_set("delta_encoded", np.array([1, 1])), "delta_encoded"),
        (_set("delta_encoded", np.array([True, True, True])), "delta_encoded"),
        (_set("delta_encoded", np.array([False, True])), "marks"),
        (lambda arrays: arrays.pop("probe"), "lacks probe"),
    ],
)
def test_bad_arrays(saved, tmp_path, edit, needle):
    assert needle in load_error(rewrite(saved, tmp_path / "b.mvz", arrays=edit))


def test_pickled_array_is_refused(saved, tmp_path):
    edit = _set("probe", np.array([{"evil": 1}], dtype=object))
    load_error(rewrite(saved, tmp_path / "b.mvz", arrays=edit))


def test_unreadable_file_is_not_a_crash(saved):
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    saved.chmod(0)
    load_error(saved)


# -- schema versions ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3, 999, "x", None, True, 1.5])
def test_unknown_schema_version_is_refused(saved, tmp_path, version):
    def set_version(m):
        m["schema_version"] = version

    msg = load_error(rewrite(saved, tmp_path / "v.mvz", manifest=set_version))
    assert "schema_version" in msg


def test_bundled_schema_1_recordings_are_migrated_on_load():
    from matviz.paths import TRACE_DIR

    paths = sorted(TRACE_DIR.glob("*.mvz"))
    assert paths, TRACE_DIR
    for path in paths:
        with zipfile.ZipFile(path) as zf:
            stored = json.loads(zf.read("manifest.json"))
        trace = load_trace(path)
        assert trace.manifest["schema_version"] == 2
        if stored["schema_version"] == 1:  # written before kernel descriptions
            assert "description" not in stored
        described = trace.manifest["description"]
        assert described == trace.config.describe()
        assert described["name"] == stored["kernel"]
        assert described["launch"]["grid"] == list(trace.grid)


def test_schema_1_manifest_of_an_unknown_kernel_is_one_clear_error(saved, tmp_path):
    def old_unknown(m):
        m["schema_version"] = 1
        m.pop("description", None)
        m["kernel"] = "from_the_future"

    msg = load_error(rewrite(saved, tmp_path / "v.mvz", manifest=old_unknown))
    assert "cannot upgrade a schema-1 manifest" in msg and "from_the_future" in msg


def test_format_1_arrays_are_read_as_marks(saved, tmp_path):
    # matviz before kernel descriptions stored issue, loaded and computed as three arrays
    def to_format_1(arrays):
        marks = arrays.pop("marks")
        for i, name in enumerate(("issue", "loaded", "computed")):
            arrays[name] = np.ascontiguousarray(marks[:, :, i])
        flags = arrays["delta_encoded"]
        arrays["delta_encoded"] = np.array([flags[0]] * 3 + [flags[1]])

    def older(m):
        m["format_version"] = 1

    path = rewrite(saved, tmp_path / "f1.mvz", manifest=older, arrays=to_format_1)
    assert_same(load_trace(saved), load_trace(path))
    assert "differ in shape" in load_error(
        rewrite(path, tmp_path / "f1b.mvz", manifest=older,
                arrays=_set("computed", lambda a: a[:, :-1]))
    )  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda m: m.update(description="nope"), "description is not an object"),
        (lambda m: m["description"].update(kstep={"channels": 5}), "k-step is malformed"),
        (lambda m: m["description"]["kstep"]["phases"][0].pop("begin"), "k-step is malformed"),
        (lambda m: m["description"]["kstep"].update(channels=[["a", "b"]]), "k-step is malformed"),
        (lambda m: m["description"]["kstep"]["phases"][0].update(state="x"), "k-step is malformed"),
    ],
)
def test_a_malformed_description_is_one_clear_error(saved, tmp_path, edit, needle):
    msg = load_error(rewrite(saved, tmp_path / "d.mvz", manifest=edit))
    assert needle in msg and "\n" not in msg

"""A bad or hostile trace file is one MatvizError line naming the file, never a crash."""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zstandard

from matviz.core.trace_io import FORMAT_VERSION, load_trace, save_trace
from matviz.errors import MatvizError


def load_error(path: Path) -> str:
    with pytest.raises(MatvizError) as info:
        load_trace(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, MatvizError)
    return msg


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def write_members(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def with_manifest(src: Path, dst: Path, edit) -> Path:
    files = members(src)
    manifest = json.loads(files["manifest.json"])
    edit(manifest)
    files["manifest.json"] = json.dumps(manifest).encode()
    return write_members(dst, files)


def npy_zst(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return zstandard.ZstdCompressor().compress(buf.getvalue())


def npy_header_only(shape: tuple[int, ...], descr: str = "<i8") -> bytes:
    """A .npy header that claims ``shape`` with (almost) no data behind it."""
    buf = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + bytes(64)


@pytest.fixture
def saved(tmp_path, make_trace) -> Path:
    path = tmp_path / "run.mvz"
    save_trace(make_trace(warps=True, probe=True), path)
    return path


# -- not a trace at all ----------------------------------------------------------------------


def test_missing_file(tmp_path):
    assert "no such file" in load_error(tmp_path / "absent.mvz")


def test_directory(tmp_path):
    assert "directory" in load_error(tmp_path)


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "x.mvz"
    os.mkfifo(fifo)  # nobody writes: opening it for reading would block forever
    assert "not a regular file" in load_error(fifo)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_device_files_are_refused(tmp_path, device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    link = tmp_path / "dev.mvz"
    link.symlink_to(device)
    assert "not a regular file" in load_error(link)
    with pytest.raises(MatvizError, match="not a regular file"):
        load_trace(device)


def test_random_bytes(tmp_path):
    path = tmp_path / "noise.mvz"
    path.write_bytes(np.random.default_rng(1).bytes(5000))
    load_error(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.mvz"
    path.write_bytes(b"")
    load_error(path)


@pytest.mark.parametrize("keep", [0.0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, -22, -1])
def test_truncated_file(saved, keep):
    data = saved.read_bytes()
    cut = len(data) + keep if keep < 0 else int(len(data) * keep)
    saved.write_bytes(data[: int(cut)])
    load_error(saved)


def test_corrupted_member(saved):
    data = bytearray(saved.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(16)
    saved.write_bytes(bytes(data))
    load_error(saved)


@pytest.mark.parametrize("member", ["manifest.json", "marks.npy.zst", "blocks.npy.zst"])
def test_zip_missing_member(saved, tmp_path, member):
    files = members(saved)
    del files[member]
    assert member in load_error(write_members(tmp_path / "bad.mvz", files))


def test_foreign_zip(tmp_path):
    path = write_members(tmp_path / "other.mvz", {"hello.txt": b"hi"})
    assert "not a matviz trace" in load_error(path)


def test_unreadable_file(saved):
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    saved.chmod(0)
    load_error(saved)


# -- hostile zips ------------------------------------------------------------------------------


def test_zip_bomb_manifest_is_refused_by_its_declared_size(tmp_path):
    path = tmp_path / "bomb.mvz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", b" " * (64 << 20))  # 64 MiB of JSON whitespace, ~64 KiB
    assert path.stat().st_size < 1 << 20
    assert "manifest.json claims" in load_error(path)


def test_zip_bomb_array_is_refused_by_its_declared_size(saved, tmp_path):
    files = members(saved)
    files["marks.npy.zst"] = bytes(256 << 20)  # 256 MiB of zeros deflate to ~256 KiB
    path = tmp_path / "bomb.mvz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    assert path.stat().st_size < 2 << 20
    assert "marks.npy.zst claims" in load_error(path)


def test_zip_bomb_of_the_old_format_is_refused(saved, tmp_path):
    manifest = json.loads(members(saved)["manifest.json"])
    manifest["format_version"] = 2
    path = tmp_path / "bomb.mvz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("arrays.npz", bytes(256 << 20))
    assert "arrays.npz claims" in load_error(path)


def test_a_lying_size_header_cannot_make_a_member_larger(saved, tmp_path):
    # The declared size says 100 bytes; the deflated data holds 8 MiB. Reading stops at 100.
    manifest = members(saved)["manifest.json"]
    big = manifest[:-1] + b" " * (8 << 20) + b"}"
    path = tmp_path / "liar.mvz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", big)
    data = bytearray(path.read_bytes())
    size = len(big).to_bytes(4, "little")
    assert data.count(size) == 2  # the local header and the central directory
    data[:] = data.replace(size, (100).to_bytes(4, "little"))
    path.write_bytes(bytes(data))
    load_error(path)


def test_a_member_that_is_not_npy_is_refused(saved, tmp_path):
    files = members(saved)
    files["blocks.npy.zst"] = zstandard.ZstdCompressor().compress(b"PK\x03\x04 not an array")
    load_error(write_members(tmp_path / "b.mvz", files))


def test_a_member_that_is_not_zstd_is_refused(saved, tmp_path):
    files = members(saved)
    files["probe.npy.zst"] = b"\x93NUMPY plain"
    load_error(write_members(tmp_path / "b.mvz", files))


@pytest.mark.parametrize(
    ("member", "shape", "descr"),
    [
        ("phase_blocks", (3 * 10**9,), "<i8"),  # 24 GB
        ("blocks", (10**9,), "<u4"),
        ("marks", (8, 5, 3, 10**9), "|u1"),
        ("probe", (10**8,), "<i4"),
    ],
)
def test_huge_declared_shapes_are_refused_before_allocation(saved, tmp_path, member, shape, descr):
    files = members(saved)
    files[f"{member}.npy.zst"] = zstandard.ZstdCompressor().compress(npy_header_only(shape, descr))
    msg = load_error(write_members(tmp_path / "huge.mvz", files))
    assert f"array {member} declares shape" in msg


def test_huge_shape_in_old_format_is_refused(saved, tmp_path, make_trace):
    manifest = json.loads(members(saved)["manifest.json"])
    manifest["format_version"] = 2
    npz = io.BytesIO()
    with zipfile.ZipFile(npz, "w") as inner:
        inner.writestr("blocks.npy", npy_header_only((3 * 10**9,), "<u4"))
    path = write_members(
        tmp_path / "huge.mvz",
        {"manifest.json": json.dumps(manifest).encode(), "arrays.npz": npz.getvalue()},
    )
    load_error(path)


def test_pickled_array_is_refused(saved, tmp_path):
    files = members(saved)
    files["probe.npy.zst"] = npy_zst(np.array([{"evil": 1}], dtype=object))
    assert "Python objects" in load_error(write_members(tmp_path / "b.mvz", files))


def test_npy_with_data_after_its_end_is_refused(saved, tmp_path):
    files = members(saved)
    raw = zstandard.ZstdDecompressor().stream_reader(files["phase_blocks.npy.zst"]).read()
    files["phase_blocks.npy.zst"] = zstandard.ZstdCompressor().compress(raw + b"extra")
    assert "after its end" in load_error(write_members(tmp_path / "b.mvz", files))


# -- the manifest schema -----------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3, 999, "x", None, True, 1.5, [2]])
def test_unknown_schema_version_is_refused(saved, tmp_path, version):
    msg = load_error(
        with_manifest(saved, tmp_path / "v.mvz", lambda m: m.update(schema_version=version))
    )
    assert "schema_version" in msg


def test_newer_format(saved, tmp_path):
    bump = lambda m: m.update(format_version=FORMAT_VERSION + 1)  # noqa: E731
    msg = load_error(with_manifest(saved, tmp_path / "new.mvz", bump))
    assert f"written by a newer matviz (format {FORMAT_VERSION + 1})" in msg


@pytest.mark.parametrize("value", [None, "3", 0, -1, True])
def test_bad_format_version(saved, tmp_path, value):
    edit = lambda m: m.update(format_version=value)  # noqa: E731
    assert "format_version" in load_error(with_manifest(saved, tmp_path / "f.mvz", edit))


def test_bad_json(saved, tmp_path):
    files = members(saved)
    files["manifest.json"] = b"{not json"
    assert "not valid JSON" in load_error(write_members(tmp_path / "b.mvz", files))


def test_deeply_nested_json(saved, tmp_path):
    files = members(saved)
    files["manifest.json"] = b"[" * 100_000 + b"]" * 100_000
    load_error(write_members(tmp_path / "b.mvz", files))


def test_manifest_not_an_object(saved, tmp_path):
    files = members(saved)
    files["manifest.json"] = b"[1, 2]"
    assert "not a JSON object" in load_error(write_members(tmp_path / "b.mvz", files))


WRONG_VALUES = [None, "x", -1, 1.5, [1], {"a": 1}, True]
FIELDS = ["kernel", "params", "M", "N", "K", "dtype", "backend", "level", "description",
          "device", "timer", "geometry", "sampling", "software", "stats"]  # fmt: skip


@pytest.mark.parametrize("key", FIELDS)
def test_missing_manifest_field(saved, tmp_path, key):
    msg = load_error(with_manifest(saved, tmp_path / "m.mvz", lambda m: m.pop(key)))
    assert key in msg


@pytest.mark.parametrize("key", FIELDS)
def test_wrong_types_in_every_manifest_field(saved, tmp_path, key):
    original = json.loads(members(saved)["manifest.json"])
    free_form = key in ("device", "software")  # any object will do; their keys are checked
    wrong = [v for v in WRONG_VALUES if v != original[key] and not (free_form and v == {"a": 1})]
    for i, value in enumerate(wrong):
        path = with_manifest(saved, tmp_path / f"w{i}.mvz", lambda m, v=value: m.update({key: v}))
        msg = load_error(path)
        assert key in msg or "kernel" in msg or "k-step" in msg, (value, msg)


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (("M",), -1, "manifest field 'M'"),
        (("M",), 0, "manifest field 'M'"),
        (("K",), 10**12, "manifest field 'K'"),
        (("M",), 1e3, "manifest field 'M'"),
        (("M",), "1024", "manifest field 'M'"),
        (("level",), 99, "manifest field 'level'"),
        (("kernel",), 5, "manifest field 'kernel'"),
        (("kernel",), "from_the_future", "unknown kernel"),
        (("kernel",), "two\nlines", "unknown kernel 'two\\nlines'"),
        (("backend",), "opencl", "manifest field 'backend'"),
        (("dtype",), "float64", "manifest field 'dtype'"),
        (("params", "tile"), 10**6, "tile=1000000 is not allowed"),
        (("params", "tile"), "16", "is not allowed"),
        (("params", "warp"), 2, "no parameter 'warp'"),
        (("stats",), [1, 2], "manifest field 'stats'"),
        (("stats", "gflops"), "fast", "manifest field 'stats.gflops'"),
        (("stats", "gflops"), -5.0, "manifest field 'stats.gflops'"),
        (("stats", "time_ms_median"), [0.1], "stats.time_ms_median"),
        (("stats", "repeats"), 0, "stats.repeats"),
        (("stats", "instrumented_min_blocks"), "4", "stats.instrumented_min_blocks"),
        (("stats", "instrumented_min_blocks"), 0, "stats.instrumented_min_blocks"),
        (("stats", "instrumented_min_blocks"), True, "stats.instrumented_min_blocks"),
        (("stats", "stamp_form"), "registers", "stats.stamp_form"),
        (("stats", "stamp_form"), 1, "stats.stamp_form"),
        (("stats", "stamp_form_overheads_pct"), {"lanes": "3%"}, "stats.stamp_form_overheads_pct"),
        (("stats", "stamp_form_overheads_pct"), {"smem": 3.0}, "stats.stamp_form_overheads_pct"),
        (("stats", "stamp_form_overheads_pct"), [3.0, 4.0], "stats.stamp_form_overheads_pct"),
        (("stats", "overhead_pct"), float("nan"), "stats.overhead_pct"),
        (("stats", "gflops"), float("nan"), "stats.gflops"),
        (("stats", "phase_every_overheads_pct"), [[1, float("nan")]], "phase_every_overheads"),
        (("stats", "phase_every_overheads_pct"), "3%", "stats.phase_every_overheads_pct"),
        (("stats", "phase_every_overheads_pct"), [], "stats.phase_every_overheads_pct"),
        (("stats", "phase_every_overheads_pct"), [[0, 1.0]], "stats.phase_every_overheads_pct"),
        (("stats", "phase_every_overheads_pct"), [[1, "x"]], "stats.phase_every_overheads_pct"),
        (("stats", "phase_every_overheads_pct"), [[1.5, 2.0]], "stats.phase_every_overheads_pct"),
        (("stats", "phase_every_overheads_pct"), [[1, 2.0, 3]], "stats.phase_every_overheads_pct"),
        (("stats", "phase_every_overheads_pct"), [[1, 2.0]] * 65, "phase_every_overheads"),
        (("device", "sm_count"), 10**8, "manifest field 'device.sm_count'"),
        (("device", "sm_count"), 0, "device.sm_count"),
        (("device", "name"), 7, "device.name"),
        (("device", "warp_size"), 64, "device.warp_size"),
        (("device", "smem_per_sm"), 10**12, "device.smem_per_sm"),
        (("timer", "resolution_ns"), -3, "timer.resolution_ns"),
        (("geometry", "grid"), [4], "geometry.grid"),
        (("geometry", "grid"), [2, 2], "grid [2, 2] is not the kernel's"),
        (("geometry", "grid"), "4x3", "geometry.grid"),
        (("geometry", "threads"), 4096, "geometry.threads"),
        (("geometry", "block"), [2048, 1], "geometry.block"),
        (("geometry", "n_tiles"), 6, "n_tiles 6 is not the kernel's"),
        (("geometry", "registers"), {"level_2": 10**6}, "geometry.registers"),
        (("sampling", "phase_every"), 0, "sampling.phase_every"),
        (("sampling", "probe"), {"block": [0], "warp": 0, "ktile": 0}, "sampling.probe.block"),
        (("sampling", "probe"), {"block": [0, 0], "warp": 99, "ktile": 0}, "sampling.probe"),
        (("sampling", "timeline_level"), 7, "sampling.timeline_level"),
        (("occupancy",), {"blocks_per_sm": 2}, "occupancy"),
        (("occupancy",), "full", "occupancy"),
        (("description",), "nope", "manifest field 'description'"),
        (("description", "kstep"), {"channels": 5}, "description.kstep.channels"),
        (("description", "kstep", "phases", 0, "begin"), "nowhere", "k-step is malformed"),
        (("description", "kstep", "in_flight"), 0, "description.kstep.in_flight"),
        (("description", "kstep", "in_flight"), "2", "description.kstep.in_flight"),
        (("description", "kstep", "in_flight"), 2.5, "description.kstep.in_flight"),
        (("description", "name"), "naive", "the description is of kernel 'naive'"),
        (("description", "params"), [1, "x"], "description.params.0"),
        (("description", "params", 0, "layout"), 5, "description.params.0.layout"),
        (("description", "shared"), "bad", "description.shared"),
        (("description", "shared", 0, "swizzle"), [1], "description.shared.0.swizzle"),
        (("description", "inputs"), "float64", "description.inputs"),
        (("description", "mma"), "wmma", "description.mma"),
        (("description", "mma"), {"instruction": "x"}, "description.mma"),
        (("description", "copies"), "tma", "description.copies"),
        (("description", "copies"), [{"name": "x", "array": "As", "rows": "many", "cols": 64}],
         "description.copies.0.rows"),
        (("description", "copies"), [{"name": "x", "array": "As", "rows": 8, "cols": 64,
                                      "swizzle_bytes": 100}], "description.copies.0.swizzle_bytes"),
        (("description", "arch"), 90, "description.arch"),
        (("description", "mbarriers"), -1, "description.mbarriers"),
        (("description", "mbarriers"), "8", "description.mbarriers"),
        (("dtype",), "int8", "manifest field 'dtype'"),
    ],
)
def test_field_values_out_of_bounds(saved, tmp_path, path, value, needle):
    def edit(m):
        target = m
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    msg = load_error(with_manifest(saved, tmp_path / "b.mvz", edit))
    assert needle in msg, msg


def test_message_names_the_file_and_the_field(saved, tmp_path):
    msg = load_error(with_manifest(saved, tmp_path / "bad.mvz", lambda m: m.update(M=-1)))
    assert msg.startswith(f"cannot read trace {tmp_path / 'bad.mvz'}: manifest field 'M'")
    assert msg.endswith("got -1")


def test_schema_1_manifest_of_an_unknown_kernel_is_one_clear_error(saved, tmp_path):
    def old_unknown(m):
        m["schema_version"] = 1
        m.pop("description", None)
        m["kernel"] = "from_the_future"

    msg = load_error(with_manifest(saved, tmp_path / "v.mvz", old_unknown))
    assert "cannot upgrade a schema-1 manifest" in msg and "from_the_future" in msg


@pytest.mark.parametrize("params", [[16], "tile", None, {"tile": 10**6}])
def test_schema_1_manifest_with_bad_params(saved, tmp_path, params):
    def old(m):
        m.update(schema_version=1, params=params)
        m.pop("description", None)

    assert "schema-1" in load_error(with_manifest(saved, tmp_path / "v.mvz", old))


def test_extra_keys_are_kept(saved, tmp_path):
    def extra(m):
        m["device"]["model"] = {"anything": [1, 2]}
        m["future_section"] = {"x": 1}

    trace = load_trace(with_manifest(saved, tmp_path / "e.mvz", extra))
    assert trace.manifest["device"]["model"] == {"anything": [1, 2]}
    assert trace.manifest["future_section"] == {"x": 1}


# -- arrays against the manifest ---------------------------------------------------------------


def with_array(src: Path, dst: Path, name: str, edit) -> Path:
    """Rewrite a stored array of a format-3 file (time arrays are stored as byte planes)."""
    files = members(src)
    raw = zstandard.ZstdDecompressor().stream_reader(files[f"{name}.npy.zst"]).read()
    arr = np.load(io.BytesIO(raw)).copy()
    files[f"{name}.npy.zst"] = npy_zst(edit(arr))
    return write_members(dst, files)


def _blocks(field, value):
    def edit(a):
        a[field][-1] = value
        return a

    return edit


@pytest.mark.parametrize(
    ("name", "edit", "needle"),
    [
        ("blocks", lambda a: a["start"].astype(np.float64), "blocks"),
        ("blocks", lambda a: a[:-1], "outside the grid"),
        ("blocks", _blocks("smid", 2), "names SM 2 of 2"),
        ("blocks", _blocks("bx", 40), "outside the 4x3 grid"),
        ("blocks", _blocks("start", -5), "negative"),
        ("blocks", _blocks("end", 0), "ends before it starts"),
        ("probe", lambda a: a["offsets"], "probe"),
        ("probe", lambda a: np.concatenate([a] * 20000)[:70000], "probe declares shape"),
        ("phase_blocks", lambda a: a.astype(np.float64), "phase_blocks"),
        ("phase_blocks", lambda a: a + 100, "outside the grid"),
        ("warp_blocks", lambda a: a - 100, "outside the grid"),
        ("marks", lambda a: a.astype(np.int16), "marks"),
        ("marks", lambda a: np.concatenate([a, a, a]), "width 3"),
        ("marks", lambda a: a[..., :-1], "rows for"),
        ("marks", lambda a: a[:, :, :-1], "marks hold 2 marks per k-step"),
        ("marks", lambda a: a[:, :-1], "k-steps"),
        ("marks", lambda a: a[0], "dimensions"),
        ("barrier_wait", lambda a: a[:, :, :, :1], "barrier"),
        ("barrier_wait", lambda a: a[:, :, :3], "warps"),
    ],
)
def test_bad_arrays(saved, tmp_path, name, edit, needle):
    assert needle in load_error(with_array(saved, tmp_path / "b.mvz", name, edit))


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("width", 3, "access width"),
        ("kind", "jump", "neither load nor store"),
        ("offsets", -7, "offset outside shared memory"),
        ("offsets", 1 << 30, "offset outside shared memory"),
        ("k", -1, "offset outside shared memory"),
    ],
)
def test_bad_probe_values(saved, tmp_path, field, value, needle):
    def edit(a):
        a[field][0] = value
        return a

    assert needle in load_error(with_array(saved, tmp_path / "p.mvz", "probe", edit))


def test_negative_marks_are_refused(saved, tmp_path):
    trace = load_trace(saved)
    broken = copy.copy(trace)
    broken.marks = trace.marks.copy()
    broken.marks[0, 0, 0] = -1
    save_trace(broken, tmp_path / "n.mvz")  # saving does not judge; loading does
    assert "negative time" in load_error(tmp_path / "n.mvz")


# -- the command line ------------------------------------------------------------------------


def _bad_files(saved: Path, tmp_path: Path) -> list[Path]:
    truncated = tmp_path / "truncated.mvz"
    truncated.write_bytes(saved.read_bytes()[:300])
    negative = with_manifest(saved, tmp_path / "negative.mvz", lambda m: m.update(M=-1))
    huge = tmp_path / "huge.mvz"
    files = members(saved)
    files["phase_blocks.npy.zst"] = zstandard.ZstdCompressor().compress(
        npy_header_only((3 * 10**9,))
    )
    write_members(huge, files)
    fifo = tmp_path / "fifo.mvz"
    os.mkfifo(fifo)
    return [truncated, negative, huge, fifo, tmp_path, Path("/dev/zero")]


def test_cli_show_prints_one_line_and_exits_2(saved, tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    for path in _bad_files(saved, tmp_path):
        result = subprocess.run(
            [sys.executable, "-m", "matviz.cli", "show", str(path)],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        lines = result.stderr.splitlines()
        assert result.returncode == 2, (path, result.stderr)
        assert len(lines) == 1 and lines[0].startswith("matviz: error: cannot read trace"), lines
        assert "Traceback" not in result.stderr and result.stdout == ""


# -- the Tensor Core fragment map (trace.fragments) ----------------------------------------------
MMA = {
    "instruction": "wmma::mma_sync m16n16k16", "sass": "2 × HMMA.16816.F32", "shape": [16, 16, 16],
    "warps": [1, 1], "warp_tile": [16, 16],
    "fragments": [{"operand": "A", "rows": 16, "cols": 16, "dtype": "float16",
                   "elements": [[lane] * 8 for lane in range(32)]}],
}  # fmt: skip


@pytest.mark.parametrize(
    ("mma", "needle"),
    [
        ({**MMA, "fragments": [{**MMA["fragments"][0], "elements": [[0]] * 31}]}, "elements"),
        ({**MMA, "fragments": [{**MMA["fragments"][0], "elements": [[4096]] * 32}]}, "elements"),
        ({**MMA, "fragments": [{**MMA["fragments"][0], "operand": "D"}]}, "operand"),
        ({**MMA, "shape": [16, 16]}, "shape"),
        ({**MMA, "fragments": []}, "fragments"),
        # an element inside 64 x 64 but outside the fragment's own 4 x 4 tile
        ({**MMA, "fragments": [{**MMA["fragments"][0], "rows": 4, "cols": 4}]}, "outside"),
        ({**MMA, "fragments": [{**MMA["fragments"][0], "cols": 512}]}, "cols"),
        ({**MMA, "from_shared": ["C"]}, "from_shared"),
        ({**MMA, "from_shared": "AB"}, "from_shared"),
        ({**MMA, "group_threads": 0}, "group_threads"),
        ({**MMA, "first_warp": -1}, "first_warp"),
        ({**MMA, "first_warp": "4"}, "first_warp"),
    ],
)
def test_a_malformed_mma_section_is_one_line(saved, tmp_path, mma, needle):
    msg = load_error(
        with_manifest(saved, tmp_path / "b.mvz", lambda m: m["description"].update(mma=mma))
    )
    assert "description.mma" in msg and needle in msg, msg


@pytest.mark.parametrize(
    "array",
    [
        np.zeros((3, 32, 32), np.int32),  # wrong type
        np.zeros((3, 31, 32), np.int16),  # not 32 lanes
        np.full((3, 32, 32), 5000, np.int16),  # an element past a 64 x 64 tile
        np.full((3, 32, 32), -7, np.int16),
        np.zeros((2, 32), np.int16),
        np.zeros((1, 32, 129), np.int16),  # more slots than a wgmma n256 accumulator
        np.zeros((1, 32, 16), np.int16),  # fewer than the format's 32
    ],
    ids=["int32", "31 lanes", "past the tile", "negative", "2-d", "129 slots", "16 slots"],
)
def test_a_malformed_fragment_map_is_one_line(saved, tmp_path, array):
    files = members(saved)
    files["fragments.npy.zst"] = npy_zst(array)
    msg = load_error(write_members(tmp_path / "b.mvz", files))
    assert "fragments" in msg, msg


def test_a_huge_fragment_map_is_refused_before_allocation(saved, tmp_path):
    files = members(saved)
    files["fragments.npy.zst"] = zstandard.ZstdCompressor().compress(
        npy_header_only((4096, 32, 32), "<i2")
    )
    msg = load_error(write_members(tmp_path / "b.mvz", files))
    assert "fragments" in msg, msg

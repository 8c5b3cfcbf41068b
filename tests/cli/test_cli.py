"""The command line as a user meets it: one line and exit code 2 for every mistake."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from matviz import cli
from matviz.backends.contract import MAX_BUDGET_MIB
from matviz.backends.cuda_status import cuda_status
from matviz.core import registry
from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError

NO_CUDA = not cuda_status()[0]


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, fragment):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("matviz: error: ") and fragment in lines[0], err


def test_kernels_lists_every_description_and_its_parameters(capsys):
    code, out, _ = run(capsys, "kernels")
    assert code == 0
    for stem in ("01_naive", "02_tiled", "03_tiled_transposed"):
        assert stem in out
    assert "--pad 0|1|2|4 (default 0)  extra shared-memory columns per tile row" in out
    for kernel in registry.kernels().values():
        assert kernel.stem in out and kernel.sections in out and kernel.source.name in out
        for p in kernel.params:
            assert f"{p.option} {'|'.join(map(str, p.values))} (default {p.default})" in out


def test_info_names_the_backends(capsys):
    code, out, _ = run(capsys, "info")
    assert code == 0
    assert out.startswith("cuda ")
    assert "sim        available" in out


def test_record_sim_then_show(tmp_path, capsys):
    path = tmp_path / "t.mvz"
    code, out, _ = run(
        capsys,
        "record",
        "tiled_transposed",
        "-M",
        "96",
        "-N",
        "64",
        "-K",
        "80",
        "--tile",
        "32",
        "--pad",
        "0",
        "--level",
        "3",
        "--backend",
        "sim",
        "-o",
        str(path),
    )
    assert code == 0
    assert "simulated" in out and "worst conflict 32-way" in out
    trace = load_trace(path)
    assert trace.backend == "sim" and trace.shape == (96, 64, 80)
    code, shown, _ = run(capsys, "show", str(path))
    assert code == 0 and "simulated" in shown and "waves" in shown
    code, as_json, _ = run(capsys, "show", str(path), "--json")
    assert json.loads(as_json)["backend"] == "sim"


def test_record_defaults_to_level_3_like_the_app(tmp_path, capsys):
    args = cli.build_parser().parse_args(["record", "tiled", "-o", "t.mvz"])
    assert args.level == 3  # the app's Level control starts at 3 too (matviz.app.controls)
    path = tmp_path / "t.mvz"
    argv = ["record", "tiled", "-M", "64", "-N", "64", "-K", "64", "--backend", "sim"]
    code, _, _ = run(capsys, *argv, "-o", str(path))
    assert code == 0
    trace = load_trace(path)
    assert trace.manifest["level"] == 3 and len(trace.probe) > 0  # exports get the banks view
    assert trace.manifest["sampling"]["timeline_level"] == 2  # the timeline stays level 2


@pytest.mark.skipif(not NO_CUDA, reason="needs a machine without CUDA")
def test_auto_falls_back_to_the_simulator_and_says_so(tmp_path, capsys):
    code, out, err = run(
        capsys, "record", "tiled", "-M", "64", "-N", "64", "-K", "64", "-o", str(tmp_path / "a.mvz")
    )
    assert code == 0
    assert "CUDA unavailable" in err and "using the simulator" in err
    assert load_trace(tmp_path / "a.mvz").is_simulated


@pytest.mark.skipif(not NO_CUDA, reason="needs a machine without CUDA")
def test_cuda_backend_without_cuda_is_one_line(tmp_path, capsys):
    code, _, err = run(
        capsys, "record", "tiled", "--backend", "cuda", "-o", str(tmp_path / "x.mvz")
    )
    assert_one_line_error(code, err, "CUDA backend unavailable")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["record", "tiled", "--tile", "7"], "tile=7 is not allowed"),
        (["record", "tiled", "--pad", "3"], "pad=3 is not allowed"),
        (["record", "naive", "--pad", "1"], "has no parameter 'pad'"),
        (["record", "tiled", "-M", "0"], "0 must be >= 1"),
        (["record", "tiled", "-K", "x"], "'x' is not a whole number"),
        (["record", "tiled", "-M", "70000", "-K", "70000"], "32-bit indexing"),
        (["record", "nope"], "unknown kernel 'nope'"),
        (["record", "tiled", "--level", "5"], "invalid choice"),
        (["record", "tiled", "--tile", "x"], "'x' is not a whole number"),
        (["record", "tiled", "--budget-mib", str(MAX_BUDGET_MIB + 1)], f"and {MAX_BUDGET_MIB}"),
        (["record", "tiled", "--budget-mib", "0"], "must be between 1"),
        (["record", "tiled", "--probe-block", "99,0"], "probe block (99, 0) is outside"),
        (["record", "tiled", "--probe-warp", "64"], "probe warp 64 is outside"),
        (["record", "tiled", "--max-overhead", "0"], "must be a finite number > 0"),
        (["record", "tiled", "--max-overhead", "-3"], "must be a finite number > 0"),
        (["record", "tiled", "--max-overhead", "nan"], "must be a finite number > 0"),
        (["record", "tiled", "--max-overhead", "1e400"], "must be a finite number > 0"),
        (["record", "tiled", "--max-overhead", "101"], "101 must be at most 100"),
        (["record", "tiled", "--max-overhead", "3%"], "'3%' is not a number"),
        (["record", "tiled", "--phase-every", str(2**31)], "phase_every must be at most"),
        (["record", "tiled", "--seed", str(2**63)], "seed must be at most"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_record_arguments(tmp_path, capsys, argv, fragment):
    code, _, err = (
        run(capsys, *argv, "-o", str(tmp_path / "x.mvz"))
        if argv[0] == "record"
        else (run(capsys, *argv))
    )
    assert_one_line_error(code, err, fragment)
    assert not (tmp_path / "x.mvz").exists()


@pytest.mark.parametrize(("given", "target"), [([], 3.0), (["--max-overhead", "1.5"], 1.5),
                                               (["--max-overhead", "OFF"], None)])  # fmt: skip
def test_the_overhead_target_reaches_the_request(capsys, monkeypatch, tmp_path, given, target):
    from matviz.backends import contract
    from matviz.errors import MatvizError

    ran = []

    def stop(request):
        ran.append(request)
        raise MatvizError("stopped here")

    monkeypatch.setattr(contract, "run", stop)
    run(capsys, "record", "tiled", "--backend", "sim", *given, "-o", str(tmp_path / "t.mvz"))
    assert [r.overhead_target_pct for r in ran] == [target]


def test_unwritable_output_fails_before_running(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, _, err = run(capsys, "record", "tiled", "--backend", "sim", "-o", str(blocker / "t.mvz"))
    assert_one_line_error(code, err, "does not exist")
    code, _, err = run(capsys, "record", "tiled", "--backend", "sim", "-o", str(tmp_path / "t.txt"))
    assert_one_line_error(code, err, "must end in .mvz")


def test_output_names_are_checked_before_running(tmp_path, capsys, monkeypatch):
    from matviz.backends import contract

    ran = []
    monkeypatch.setattr(contract, "run", lambda request: ran.append(request))
    newline = tmp_path / "two\nlines.mvz"
    code, _, err = run(capsys, "record", "tiled", "--backend", "sim", "-o", str(newline))
    assert_one_line_error(code, err, "line break")
    assert "two\\nlines.mvz" in err  # shown escaped, not split
    missing = tmp_path / "no\nsuch" / "t.mvz"
    code, _, err = run(capsys, "record", "tiled", "--backend", "sim", "-o", str(missing))
    assert_one_line_error(code, err, "line break")
    long = tmp_path / ("x" * 252 + ".mvz")
    code, _, err = run(capsys, "record", "tiled", "--backend", "sim", "-o", str(long))
    assert_one_line_error(code, err, "too long (256 bytes")
    (tmp_path / "dir.mvz").mkdir()
    code, _, err = run(
        capsys, "record", "tiled", "--backend", "sim", "-o", str(tmp_path / "dir.mvz")
    )
    assert_one_line_error(code, err, "is a folder")
    assert not ran and sorted(p.name for p in tmp_path.iterdir()) == ["dir.mvz"]


def test_every_error_message_is_one_line_whatever_it_holds(capsys, monkeypatch):
    from matviz.cli import show

    def fails(_args):
        raise MatvizError("first\nsecond")

    monkeypatch.setattr(show, "run", fails)
    code, _, err = run(capsys, "show", "x.mvz")
    assert_one_line_error(code, err, "first\\nsecond")


def test_help_exits_cleanly(capsys):
    code, out, _ = run(capsys, "record", "--help")
    assert code == 0 and "--tile T" in out and "--budget-mib" in out


def test_existing_trace_survives_a_failed_record(tmp_path, capsys):
    path = tmp_path / "keep.mvz"
    assert (
        run(
            capsys,
            "record",
            "tiled",
            "-M",
            "32",
            "-N",
            "32",
            "-K",
            "32",
            "--backend",
            "sim",
            "-o",
            str(path),
        )[0]
        == 0
    )
    before = path.read_bytes()
    code, _, err = run(capsys, "record", "tiled", "--tile", "7", "-o", str(path))
    assert code == 2 and path.read_bytes() == before


def test_show_corrupt_and_missing_files(tmp_path, capsys):
    bad = tmp_path / "bad.mvz"
    bad.write_bytes(b"\x00" * 100)
    code, _, err = run(capsys, "show", str(bad))
    assert_one_line_error(code, err, "bad.mvz")
    code, _, err = run(capsys, "show", str(tmp_path / "missing.mvz"))
    assert_one_line_error(code, err, "missing.mvz")


def _record_then_edit_manifest(capsys, path, edit):
    """A small simulated trace at ``path`` whose manifest ``edit`` then changes in place."""
    argv = ["record", "tiled", "-M", "32", "-N", "32", "-K", "32", "--backend", "sim"]
    assert run(capsys, *argv, "-o", str(path))[0] == 0
    with zipfile.ZipFile(path) as zf:
        files = {name: zf.read(name) for name in zf.namelist()}
    manifest = json.loads(files["manifest.json"])
    edit(manifest)
    files["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)


def _set_model(manifest, value):
    manifest["details"]["model"] = value


def _set_validation_size(manifest, value):
    manifest["details"]["model"]["validation"]["size"] = value


def _drop_stale_read(manifest, key):
    del manifest["correctness"]["stale_reads"][key]


@pytest.mark.parametrize(
    "edit",
    [
        *(lambda m, v=value: _set_model(m, v) for value in (1.5, "text", [1, 2], None)),
        lambda m: _set_validation_size(m, float("inf")),  # json writes and reads Infinity
    ],
    ids=["model-number", "model-text", "model-list", "model-null", "validation-size-inf"],
)
def test_show_takes_any_json_in_the_free_form_details(edit, tmp_path, capsys):
    # details is free-form: a model check it cannot read is no check, not a crash
    path = tmp_path / "odd_details.mvz"
    _record_then_edit_manifest(capsys, path, edit)
    code, out, err = run(capsys, "show", str(path))
    assert code == 0 and "simulated" in out and not err, err


def test_show_refuses_a_null_sm_count(tmp_path, capsys):
    path = tmp_path / "null_sms.mvz"
    _record_then_edit_manifest(capsys, path, lambda m: m["device"].update(sm_count=None))
    code, _, err = run(capsys, "show", str(path))
    assert_one_line_error(code, err, "device.sm_count")
    assert "null_sms.mvz" in err


@pytest.mark.parametrize("key", ["current", "before_written", "overwritten", "other"])
def test_show_refuses_stale_reads_that_lack_an_outcome(key, tmp_path, capsys):
    path = tmp_path / "stale.mvz"
    _record_then_edit_manifest(capsys, path, lambda m: _drop_stale_read(m, key))
    code, _, err = run(capsys, "show", str(path))
    assert_one_line_error(code, err, f"stale_reads lacks {key}")
    assert "stale.mvz" in err


def test_console_script_prints_no_traceback(tmp_path):
    bad = tmp_path / "truncated.mvz"
    bad.write_bytes(b"PK\x03\x04" + b"\x01" * 50)
    proc = subprocess.run(
        [sys.executable, "-m", "matviz.cli", "show", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [["show", "TRACE"], ["kernels"], ["export", "--help"]])
def test_an_output_that_cannot_encode_the_text_gets_escapes(argv, tmp_path, capsys):
    # µ, ³ and § on a stdout of another encoding (PYTHONIOENCODING=ascii, a Latin-1 locale)
    trace = tmp_path / "ascii.mvz"
    record = ["record", "tiled", "-M", "32", "-N", "32", "-K", "32", "--backend", "sim"]
    assert run(capsys, *record, "-o", str(trace))[0] == 0
    argv = [str(trace) if a == "TRACE" else a for a in argv]
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run(
        [sys.executable, "-m", "matviz.cli", *argv], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert "\\x" in proc.stdout


def test_bundled_recordings_show_without_a_gpu(capsys):
    from pathlib import Path

    traces = sorted((Path(__file__).resolve().parents[2] / "resources" / "traces").glob("*.mvz"))
    assert len(traces) >= 4
    for path in traces:
        assert path.stat().st_size <= 3 * 2**20
        code, out, _ = run(capsys, "show", str(path))
        assert code == 0 and "recorded on NVIDIA H200" in out and "rel.error" in out


def test_record_checks_every_output_problem_before_simulating(
    tmp_path, capsys, monkeypatch, unsearchable
):
    from matviz.backends import contract

    ran = []
    monkeypatch.setattr(contract, "run", lambda request: ran.append(request))
    bad = {
        unsearchable / "t.mvz": "Permission denied",
        tmp_path / ".mvz": "is only a suffix",
        tmp_path / "gone" / "t.mvz": "does not exist",
        tmp_path / "tab\there.mvz": "line break or other control character",
        tmp_path / os.fsdecode(b"\xff.mvz"): "is not UTF-8 text",  # bytes of a Latin-1 name
    }
    for path, fragment in bad.items():
        code, _, err = run(capsys, "record", "tiled", "--backend", "sim", "-o", str(path))
        assert_one_line_error(code, err, fragment)
    assert not ran and sorted(p.name for p in tmp_path.iterdir()) == ["locked"]


def test_record_takes_the_longest_name_the_folder_takes(tmp_path, capsys):
    import os

    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    path = tmp_path / ("x" * (limit - 4) + ".mvz")
    argv = ["record", "tiled", "-M", "32", "-N", "32", "-K", "32", "--backend", "sim"]
    code, out, err = run(capsys, *argv, "-o", str(path))
    assert code == 0, err
    assert load_trace(path).shape == (32, 32, 32) and f"saved      {path}" in out
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


def test_record_keeps_the_old_trace_when_saving_fails(tmp_path, capsys, monkeypatch):
    from matviz.core import trace_io

    path = tmp_path / "keep.mvz"
    path.write_bytes(b"the user's old trace")

    def disk_full(trace, target):
        with open(target, "wb") as fh:
            fh.write(b"half a tr")
        raise MatvizError(f"cannot write trace to {target}: No space left on device")

    monkeypatch.setattr(trace_io, "save_trace", disk_full)
    argv = ["record", "tiled", "-M", "32", "-N", "32", "-K", "32", "--backend", "sim"]
    code, _, err = run(capsys, *argv, "-o", str(path))
    assert_one_line_error(code, err, f"cannot write trace to {path}: No space left on device")
    assert path.read_bytes() == b"the user's old trace"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.mvz"]


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["--bogus"], "see 'matviz --help'"),
        (["record", "tiled", "-o", "x.mvz", "--bogus"], "see 'matviz record --help'"),
        (["sweep", "tiled", "--tune", "--bogus", "1"], "see 'matviz sweep --help'"),
    ],
)
def test_a_wrong_option_points_to_the_help_of_the_command_it_was_given_to(capsys, argv, hint):
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, hint)
    assert "matviz matviz" not in err

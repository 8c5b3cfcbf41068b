"""``python -m matviz.bench.kernels --from F [--stale]``: time again the configurations an
earlier benchmark holds, or only those whose rows timed an earlier version of the code."""

from __future__ import annotations

import json
import os

import pytest

from matviz.bench import kernels as bench
from matviz.core.registry import configure
from matviz.errors import MatvizError
from matviz.toolchain.code_digest import level0_digest
from matviz.toolchain.nvcc import nvcc_path

needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc tells which code a row timed")


def _row(kernel: str, params: dict, code: str | None) -> dict:
    row = {"kernel": kernel, "label": "x", "params": params, "size": 256, "ms": 1.5}
    return row if code is None else row | {"code": code}


def _exit_code() -> int:
    """What the script exits with: main()'s code, or argparse's on a usage error."""
    try:
        return bench.main()
    except SystemExit as stop:
        return int(stop.code or 0)


def _today(kernel: str, params: dict) -> str:
    return level0_digest(configure(kernel, params, 256, 256, 256))


@needs_nvcc
def test_stale_keeps_only_rows_of_earlier_code_in_the_files_order(tmp_path):
    t16, t32 = {"tile": 16, "pad": 0}, {"tile": 32, "pad": 0}
    naive = {"tile": 16, "b_col_major": 0}
    rows = [
        _row("tiled", t32, "0123456789abcdef"),  # an earlier version
        _row("tiled", t16, _today("tiled", t16)),  # today's code
        _row("naive", naive, None),  # no digest: taken as earlier
        _row("tiled", t32, "0123456789abcdef"),  # the same configuration again
    ]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    assert bench.configurations_from(str(path), stale=True) == [("tiled", t32), ("naive", naive)]
    assert bench.configurations_from(str(path)) == [("tiled", t32), ("tiled", t16),
                                                    ("naive", naive)]  # fmt: skip
    # a kernel named by number or stem, as --kernels allows
    assert bench.configurations_from(str(path), ["01_naive"], stale=True) == [("naive", naive)]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--stale"], "--stale needs --from"),
        (["--size", "0"], "--size 0 must be >= 1"),
        (["--repeats", "-3"], "--repeats -3 must be >= 1"),
        (["--over-target"], "--over-target needs --update"),
        (["--from", "{missing}"], "no such file"),
        (["--from", "{garbage}"], "is not JSON"),
        (["--from", "{deep}"], "nested too deeply"),
        (["--from", "{bad_row}"], "malformed row"),
        (["--from", "{unknown}"], "unknown kernel"),
    ],
)
def test_a_bad_earlier_file_is_one_line_and_times_nothing(tmp_path, capsys, monkeypatch,
                                                          argv, fragment):  # fmt: skip
    files = {"missing": tmp_path / "none.json", "garbage": tmp_path / "g.json",
             "bad_row": tmp_path / "b.json", "unknown": tmp_path / "u.json",
             "deep": tmp_path / "d.json"}  # fmt: skip
    files["deep"].write_text("[" * 100_000 + "]" * 100_000)
    files["garbage"].write_bytes(b"\x00\xff{")
    files["bad_row"].write_text(json.dumps([{"kernel": "tiled", "params": 3}]))
    files["unknown"].write_text(json.dumps([_row("no_such_kernel", {}, None)]))
    timed = []
    monkeypatch.setattr(bench, "measure", lambda *a, **k: timed.append(a))
    out = tmp_path / "out.json"
    monkeypatch.setattr("sys.argv", ["kernels", "--json", str(out),
                                     *[a.format(**files) for a in argv]])  # fmt: skip
    code = _exit_code()
    err = capsys.readouterr().err.strip()
    assert code == 2 and fragment in err and "Traceback" not in err
    assert len(err.splitlines()) == 1 or err.startswith("usage:")
    assert not timed and not out.exists()


def test_a_fifo_is_refused_unread(tmp_path):
    fifo = tmp_path / "rows.json"
    os.mkfifo(fifo)
    with pytest.raises(MatvizError, match="not a regular file"):
        bench.configurations_from(str(fifo))


def test_a_failed_measurement_is_one_line_and_keeps_the_rows_before(tmp_path, capsys,
                                                                    monkeypatch):  # fmt: skip
    path = tmp_path / "rows.json"
    t16, t32 = {"tile": 16, "pad": 0}, {"tile": 32, "pad": 0}
    path.write_text(json.dumps([_row("tiled", t16, None), _row("tiled", t32, None)]))

    def measure(kernel, params, *rest):
        if params["tile"] == 32:
            raise MatvizError("CUDA backend needs CuPy")
        return {"kernel": kernel, "params": params}

    monkeypatch.setattr(bench, "measure", measure)
    out = tmp_path / "out.json"
    monkeypatch.setattr("sys.argv", ["kernels", "--from", str(path), "--json", str(out)])
    code = _exit_code()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "needs CuPy" in err[0] and "tile': 32" in err[0]
    assert json.loads(out.read_text()) == [{"kernel": "tiled", "params": t16}]


@pytest.mark.parametrize("stop", [MatvizError("the GPU went away"), KeyboardInterrupt()])
def test_a_run_cut_short_keeps_a_json_file_that_was_there(tmp_path, capsys, monkeypatch, stop):
    """Each row went into --json as it was timed: over an earlier run's file, a run stopped at
    its second row replaced that file's rows with one."""
    path = tmp_path / "rows.json"
    t16, t32 = {"tile": 16, "pad": 0}, {"tile": 32, "pad": 0}
    path.write_text(json.dumps([_row("tiled", t16, None), _row("tiled", t32, None)]))
    out = tmp_path / "out.json"
    out.write_text('[{"an earlier run": 1}]')
    before = out.read_bytes()

    def measure(kernel, params, *rest):
        if params["tile"] == 32:
            raise stop
        return {"kernel": kernel, "params": params}

    monkeypatch.setattr(bench, "measure", measure)
    monkeypatch.setattr("sys.argv", ["kernels", "--from", str(path), "--json", str(out)])
    code = _exit_code()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and out.read_bytes() == before
    if isinstance(stop, MatvizError):
        assert code == 2 and err[0].endswith(f"the GPU went away; {out} is as it was")
    else:
        assert code == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "rows.json"]
    whole = dict.fromkeys(("ms", "gflops", "cublas_gflops", "pct_cublas", "overhead_l1_pct",
                           "overhead_l2_pct", "overhead_l2kept_pct", "span_vs_event_l1",
                           "rel_error"), 1.0) | {"kernel": "tiled", "label": "x"}  # fmt: skip
    monkeypatch.setattr(bench, "measure", lambda kernel, params, *rest: whole | {"params": params})
    assert _exit_code() == 0  # a whole run replaces it
    assert [r["params"] for r in json.loads(out.read_text())] == [t16, t32]


@pytest.mark.parametrize("target", ["same", "no_folder", "folder", "control"])
def test_an_output_it_cannot_or_must_not_write_is_refused_before_any_timing(
    tmp_path, capsys, monkeypatch, target
):
    earlier = tmp_path / "rows.json"
    earlier.write_text(json.dumps([_row("tiled", {"tile": 16, "pad": 0}, None)]))
    before = earlier.read_bytes()
    out = {"same": tmp_path / "." / "rows.json", "no_folder": tmp_path / "none" / "out.json",
           "folder": tmp_path, "control": tmp_path / "a\nb.json"}[target]  # fmt: skip
    timed = []
    monkeypatch.setattr(bench, "measure", lambda *a, **k: timed.append(a))
    monkeypatch.setattr("sys.argv", ["kernels", "--from", str(earlier), "--json", str(out)])
    code = _exit_code()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and not timed
    assert earlier.read_bytes() == before  # the file it reads is never replaced


# -- --update F: the refresh in the file itself -------------------------------------------------

H200 = "NVIDIA H200"


def _timed(kernel: str, params: dict, size: int, *rest) -> dict:
    """What measure() gives: a whole row of today's code on the H200."""
    return {"kernel": kernel, "params": params, "label": "new", "size": size, "ms": 0.5,
            "code": _today(kernel, params), "device": H200, "gflops": 1.0,
            "overhead_l1_pct": 0.1, "overhead_l2kept_pct": 0.2}  # fmt: skip


def _update(monkeypatch, path, *extra, gpu=(True, H200)) -> int:
    monkeypatch.setattr("matviz.backends.cuda_status.cuda_status", lambda: gpu)
    monkeypatch.setattr("sys.argv", ["kernels", "--update", str(path), "--size", "256", *extra])
    return _exit_code()


@needs_nvcc
def test_update_puts_each_stale_row_of_this_gpu_back_in_its_place(tmp_path, capsys, monkeypatch):
    t8, t16, t32 = ({"tile": t, "pad": 0} for t in (8, 16, 32))
    naive = {"tile": 16, "b_col_major": 0}
    rows = [
        _row("tiled", t32, "0123456789abcdef") | {"device": H200},  # stale: timed again
        _row("tiled", t16, _today("tiled", t16)) | {"device": H200},  # today's code: kept
        _row("naive", naive, None) | {"device": "NVIDIA H100 80GB HBM3"},  # another GPU: kept
        _row("tiled", t8, None) | {"device": H200, "size": 512},  # another size: kept
        _row("tiled", t8, None) | {"device": H200},  # no digest: timed again
    ]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows, indent=1) + "\n")
    timed = []

    def measure(kernel, params, size, *rest):
        timed.append((kernel, params))
        if len(timed) == 2:
            raise MatvizError("the GPU went away")
        return _timed(kernel, params, size)

    monkeypatch.setattr(bench, "measure", measure)
    code = _update(monkeypatch, path)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["matviz bench: error: the GPU went away"]
    assert timed == [("tiled", t32), ("tiled", t8)]
    kept = json.loads(path.read_text())  # the row timed before the failure is in its place
    assert kept == [_timed("tiled", t32, 256), *rows[1:]]
    assert path.read_text() == json.dumps(kept, indent=1) + "\n"

    timed.clear()  # the next run goes on from where this one stopped
    assert _update(monkeypatch, path) == 0
    assert timed == [("tiled", t8)]
    assert json.loads(path.read_text()) == [_timed("tiled", t32, 256), *rows[1:4],
                                            _timed("tiled", t8, 256)]  # fmt: skip
    assert not [p for p in tmp_path.iterdir() if p.name != "rows.json"]  # no temporary left
    code = _update(monkeypatch, path)  # nothing stale any more
    assert code == 2 and "that timed earlier code" in capsys.readouterr().err


@pytest.mark.parametrize(
    "case, fragment",
    [
        ("no_gpu", "--update times on a GPU (CuPy is not installed)"),
        ("other_gpu", "has no row of NVIDIA H100 PCIe at 256³"),
        ("with_json", "not with --from or --json"),
        ("fifo", "not a regular file"),
        ("deep", "nested too deeply"),
    ],
)
def test_update_refuses_in_one_line_and_leaves_the_file_as_it_was(tmp_path, capsys, monkeypatch,
                                                                  case, fragment):  # fmt: skip
    path = tmp_path / "rows.json"
    if case == "fifo":
        os.mkfifo(path)
    elif case == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        path.write_text(json.dumps([_row("tiled", {"tile": 32, "pad": 0}, None)
                                    | {"device": H200}]))  # fmt: skip
    before = None if case == "fifo" else path.read_bytes()
    timed = []
    monkeypatch.setattr(bench, "measure", lambda *a, **k: timed.append(a))
    gpu = {"no_gpu": (False, "CuPy is not installed"),
           "other_gpu": (True, "NVIDIA H100 PCIe")}.get(case, (True, H200))  # fmt: skip
    extra = ["--json", str(tmp_path / "out.json")] if case == "with_json" else []
    code = _update(monkeypatch, path, *extra, gpu=gpu)
    err = capsys.readouterr().err.strip()
    assert code == 2 and fragment in err and "Traceback" not in err
    assert len(err.splitlines()) == 1 or err.startswith("usage:")
    assert not timed and sorted(p.name for p in tmp_path.iterdir()) == ["rows.json"]
    if before is not None:
        assert path.read_bytes() == before


@needs_nvcc
def test_update_takes_a_row_naming_no_gpu_as_of_the_one_gpu_the_file_names(tmp_path):
    t16, t32 = {"tile": 16, "pad": 0}, {"tile": 32, "pad": 0}
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([_row("tiled", t16, None) | {"device": H200},
                                _row("tiled", t32, None)]))  # fmt: skip
    _, plan = bench.update_plan(str(path), H200, 256)
    assert plan == [(0, "tiled", t16), (1, "tiled", t32)]
    with pytest.raises(MatvizError, match="no row of NVIDIA H100"):  # nor of another GPU's
        bench.update_plan(str(path), "NVIDIA H100", 256)
    path.write_text(json.dumps([_row("tiled", t32, None)]))  # no GPU named anywhere: none
    with pytest.raises(MatvizError, match="no row of NVIDIA H200"):
        bench.update_plan(str(path), H200, 256)


@needs_nvcc
def test_update_over_target_also_takes_rows_of_todays_code_that_miss_an_overhead_target(tmp_path):
    t8, t16, t32 = ({"tile": t, "pad": 0} for t in (8, 16, 32))
    t8p1, t16p1 = {"tile": 8, "pad": 1}, {"tile": 16, "pad": 1}

    def today(params, **overheads):
        return _row("tiled", params, _today("tiled", params)) | {"device": H200} | overheads

    rows = [
        today(t8, overhead_l1_pct=1.4, overhead_l2_pct=0.2),  # level 1 above 1%
        today(t16, overhead_l1_pct=0.2, overhead_l2_pct=6.0, overhead_l2kept_pct=2.5),  # kept
        today(t32, overhead_l1_pct=0.2, overhead_l2_pct=3.5),  # no kept figure: every block
        today(t8p1, overhead_l1_pct=-0.3, overhead_l2_pct=0.4, overhead_l2kept_pct=0.4),
        _row("tiled", t16p1, None) | {"device": H200},  # earlier code
    ]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    assert bench.update_plan(str(path), H200, 256)[1] == [(4, "tiled", t16p1)]
    _, plan = bench.update_plan(str(path), H200, 256, over_target=True)
    assert plan == [(0, "tiled", t8), (2, "tiled", t32), (4, "tiled", t16p1)]


@needs_nvcc
@pytest.mark.parametrize("mode", ["update", "json"])
def test_ctrl_c_is_one_line_and_130_and_keeps_the_rows_timed(tmp_path, capsys, monkeypatch, mode):
    t16, t32 = {"tile": 16, "pad": 0}, {"tile": 32, "pad": 0}
    rows = [_row("tiled", t, None) | {"device": H200} for t in (t16, t32)]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows, indent=1) + "\n")
    out = tmp_path / "out.json"

    def measure(kernel, params, size, *rest):
        if params == t32:
            raise KeyboardInterrupt
        return _timed(kernel, params, size)

    monkeypatch.setattr(bench, "measure", measure)
    if mode == "update":
        code = _update(monkeypatch, path)
        kept = path
    else:
        argv = ["kernels", "--from", str(path), "--json", str(out), "--size", "256"]
        monkeypatch.setattr("sys.argv", argv)
        code = _exit_code()
        kept = out
    assert code == 130 and capsys.readouterr().err == "matviz bench: interrupted\n"
    assert json.loads(kept.read_text())[0] == _timed("tiled", t16, 256)  # whole, first row in
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"rows.json", kept.name})


@needs_nvcc
def test_a_real_sigint_mid_run_is_one_line_and_130_and_the_file_stays_json(tmp_path):
    """The signal itself, in a separate process, as Ctrl-C in a terminal sends it: the second
    configuration sleeps where the GPU would be timing."""
    import signal
    import subprocess
    import sys
    import time

    t16, t32 = {"tile": 16, "pad": 0}, {"tile": 32, "pad": 0}
    path = tmp_path / "rows.json"
    rows = [_row("tiled", t, None) | {"device": H200} for t in (t16, t32)]
    path.write_text(json.dumps(rows, indent=1) + "\n")
    script = f"""
import json, sys, time
from matviz.bench import kernels as bench
def measure(kernel, params, size, *rest):
    if params["tile"] == 32:
        print("timing", flush=True)
        time.sleep(60)
    return {{"kernel": kernel, "params": params, "label": "new", "size": size, "ms": 0.5,
             "device": "{H200}", "gflops": 1.0, "overhead_l1_pct": 0.1,
             "overhead_l2kept_pct": 0.2}}
bench.measure = measure
import matviz.backends.cuda_status as status
status.cuda_status = lambda: (True, "{H200}")
sys.argv = ["kernels", "--update", {str(path)!r}, "--size", "256"]
raise SystemExit(bench.main())
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while "timing" not in proc.stdout.readline():  # the first row is in the file by now
        assert time.monotonic() < deadline and proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == "matviz bench: interrupted\n"
    kept = json.loads(path.read_text())
    assert kept[0]["label"] == "new" and kept[1] == rows[1]  # the first re-timed, the second kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.json"]

"""``matviz sweep``: one row per combination; what cannot run is reported, never fatal."""

import csv
import sys

import imageio.v3 as iio
import pytest

from matviz import cli, sweep
from matviz.backends import contract
from matviz.backends.cuda_status import cuda_status
from matviz.core import registry

SMALL = ["-M", "64", "-N", "64", "-K", "64"]


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def sim_sweep(tmp_path, capsys, kernel, tiles, pads):
    """Run ``matviz sweep`` on the simulator at 64^3; its CSV rows, stdout and stderr."""
    out = tmp_path / f"{kernel}.csv"
    argv = ["sweep", kernel, "--tile", tiles, *(["--pad", pads] if pads else []), *SMALL]
    argv += ["--backend", "sim"]
    code, stdout, stderr = run(capsys, *argv, "-o", out)
    assert code == 0
    return read_csv(out), stdout, stderr


def test_every_combination_is_a_row_and_bad_ones_are_reported(tmp_path, capsys):
    rows, stdout, stderr = sim_sweep(tmp_path, capsys, "tiled", "8,16,64", "0,1")
    assert len(rows) == 6 and list(rows[0]) == list(sweep.csv_columns(registry.get_kernel("tiled")))
    assert [(r["tile"], r["pad"]) for r in rows] == [
        ("8", "0"), ("8", "1"), ("16", "0"), ("16", "1"), ("64", "0"), ("64", "1"),
    ]  # fmt: skip
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 4 and all(float(r["gflops"]) > 0 and r["limiter"] for r in ok)
    bad = [r for r in rows if r["tile"] == "64"]
    assert all(r["status"] == "invalid" and "tile=64" in r["reason"] for r in bad)
    assert "[1/6] tiled T8 P0 ..." in stderr and "[6/6] tiled T64 P1 ... invalid" in stderr
    header = stdout.splitlines()[0]
    for column in ("GFLOP/s", "% cuBLAS", "rel.error", "overhead", "blocks/SM", "limiter"):
        assert column in header
    assert "ran        4 of 6 configurations (sim)" in stdout


def test_the_naive_kernel_has_no_pad(tmp_path, capsys):
    rows, stdout, stderr = sim_sweep(tmp_path, capsys, "naive", "16", "0,1,2")
    assert [r["status"] for r in rows] == ["unsupported"] * 3
    assert all("kernel naive has no parameter 'pad'" in r["reason"] for r in rows)
    assert [r["config"] for r in rows] == ["naive T16 P0", "naive T16 P1", "naive T16 P2"]
    assert "unsupported" in stdout and "[3/3] naive T16 P2 ... unsupported" in stderr
    rows, _, _ = sim_sweep(tmp_path, capsys, "naive", "8,16", "")
    assert [(r["tile"], r["status"]) for r in rows] == [("8", "ok"), ("16", "ok")]
    assert "pad" not in rows[0]


def test_missing_axes_use_the_kernels_default(tmp_path, capsys):
    out = tmp_path / "d.csv"
    code, stdout, _ = run(
        capsys, "sweep", "tiled", "--pad", "1,2", *SMALL, "--backend", "sim", "-o", out
    )
    assert code == 0
    rows = read_csv(out)
    tile = registry.get_kernel("tiled").param("tile").default
    assert [(r["tile"], r["pad"], r["config"]) for r in rows] == [
        (str(tile), "1", "tiled P1"), (str(tile), "2", "tiled P2"),
    ]  # fmt: skip
    assert all(r["status"] == "ok" for r in rows)
    rows = sweep.plan("tiled", {}, 64, 64, 64, "sim", 1)
    assert len(rows) == 1 and rows[0].params == registry.get_kernel("tiled").default_params()


def test_plot_is_a_png(tmp_path, capsys, qapp):
    out, plot = tmp_path / "s.csv", tmp_path / "s.png"
    argv = ["sweep", "tiled_transposed", "--tile", "16,32", "--pad", "0,1", *SMALL]
    code, _, _ = run(capsys, *argv, "--backend", "sim", "-o", out, "--plot", plot)
    assert code == 0
    image = iio.imread(plot)
    assert image.shape[:2] == (620, 1200)


def test_worker_runs_and_a_crashing_worker_costs_one_row(tmp_path):
    rows = sweep.plan("tiled", {"tile": [16], "pad": [0, 1]}, 64, 64, 64, "sim", 1)
    sweep.run_row(rows[0], isolate=True)  # the real worker process
    assert rows[0].status == "ok" and rows[0].gflops > 0
    crash = [sys.executable, "-c", "import os; os.abort()"]
    sweep.run_row(rows[1], isolate=True, command=crash)
    assert rows[1].status == "failed" and "crashed" in rows[1].reason
    broken = sweep.plan("tiled", {"tile": [16], "pad": [2]}, 64, 64, 64, "sim", 1)
    silent = [sys.executable, "-c", "import sys; print('not json'); sys.exit(3)"]
    sweep.run_sweep(broken, isolate=True, command=silent)
    assert broken[0].status == "failed" and "exit code 3" in broken[0].reason
    refused = [sys.executable, "-c", 'print(\'{"ok": false, "error": "no GPU here"}\')']
    (row,) = sweep.plan("tiled", {"pad": [4]}, 64, 64, 64, "sim", 1)
    sweep.run_row(row, isolate=True, command=refused)
    assert row.status == "failed" and row.reason == "no GPU here"


def test_an_error_inside_one_configuration_does_not_end_the_sweep(monkeypatch):
    rows = sweep.plan("tiled", {"tile": [8, 16], "pad": [0]}, 64, 64, 64, "sim", 1)
    real = contract.run

    def flaky(request):
        if request.params["tile"] == 8:
            raise RuntimeError("model blew up\nsecond line")
        return real(request)

    monkeypatch.setattr(contract, "run", flaky)
    sweep.run_sweep(rows)
    assert rows[0].status == "failed" and rows[0].reason == "RuntimeError: model blew up"
    assert rows[1].status == "ok"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["sweep", "nosuch", "-o", "{tmp}/a.csv"], "unknown kernel"),
        (["sweep", "tiled", "--tile", "8,x", "-o", "{tmp}/a.csv"], "comma list"),
        (["sweep", "tiled", "-o", "{tmp}/a.txt"], "must end in .csv"),
        (["sweep", "tiled", "-o", "{tmp}/no/a.csv"], "does not exist"),
        (["sweep", "tiled", "-o", "{tmp}/a.csv", "--plot", "{tmp}/a.gif"], "must end in .png"),
        (["sweep", "tiled", "-o", "{tmp}/a\nb.csv"], "line break"),
        (["sweep", "tiled", "--pad", ",", "-o", "{tmp}/a.csv"], "the list is empty"),
    ],
)
def test_user_errors_are_one_line(argv, fragment, tmp_path, capsys):
    code, _, err = run(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("matviz: error: ") and fragment in lines[0]
    assert not (tmp_path / "a.csv").exists()


@pytest.mark.skipif(cuda_status()[0], reason="needs a machine without CUDA")
def test_cuda_backend_without_a_gpu_is_one_line(tmp_path, capsys):
    code, _, err = run(capsys, "sweep", "tiled", "--backend", "cuda", "-o", tmp_path / "a.csv")
    assert code == 2 and "CUDA backend unavailable" in err and len(err.strip().splitlines()) == 1

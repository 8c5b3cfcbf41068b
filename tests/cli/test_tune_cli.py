"""``matviz sweep --tune``: a pruned search whose best configuration ``matviz record`` starts
from on the same GPU and size (issue 13, item 4)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from matviz import cli
from matviz.core import tuned
from matviz.core.registry import get_kernel
from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError

SIZE = ("-M", "128", "-N", "128", "-K", "128")


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_tuning_keeps_the_fastest_configuration_it_ran(tmp_path, capsys):
    csv = tmp_path / "tune.csv"
    code, out, err = run(capsys, "sweep", "tiled", *SIZE, "--backend", "sim", "--tune", "-o", csv)
    assert code == 0, err
    lines = csv.read_text().splitlines()
    rows = [dict(zip(lines[0].split(","), line.split(","), strict=True)) for line in lines[1:]]
    ok = [r for r in rows if r["status"] == "ok"]
    space = len(get_kernel("tiled").configurations())
    assert 1 < len(ok) < space  # pruned: not every combination
    assert f"ran        {len(ok)} of the {space} configurations (sim" in out
    saved = tuned.load()
    entry = saved.devices["NVIDIA H200 (simulated)"]["128x128x128"]["tiled"]
    assert entry.gflops == pytest.approx(max(float(r["gflops"]) for r in ok), rel=1e-5)
    assert entry.evaluated == len(ok) and entry.space == space and entry.backend == "sim"
    assert all(r["drop_sync"] == "0" for r in rows)  # never a deliberately broken value


def test_record_starts_from_the_tuned_configuration_under_the_users_options(tmp_path, capsys):
    key = tuned.device_key("NVIDIA H200", "sim")
    entry = tuned.Tuned(params={"tile": 8, "pad": 2, "drop_sync": 0}, gflops=1.0, backend="sim",
                        evaluated=3, space=12)  # fmt: skip
    tuned.save("tiled", 128, 128, 128, key, entry)
    out = tmp_path / "a.mvz"
    code, _, err = run(capsys, "record", "tiled", *SIZE, "--backend", "sim", "--level", 1,
                       "-o", out)  # fmt: skip
    assert code == 0 and "tuned for NVIDIA H200 (simulated)" in err
    assert load_trace(out).params == {"tile": 8, "pad": 2, "drop_sync": 0}
    code, _, _ = run(capsys, "record", "tiled", *SIZE, "--backend", "sim", "--level", 1,
                     "--pad", 0, "-o", out)  # fmt: skip
    assert code == 0 and load_trace(out).params == {"tile": 8, "pad": 0, "drop_sync": 0}
    code, _, err = run(capsys, "record", "tiled", "-M", 256, "-N", 128, "-K", 128, "--backend",
                       "sim", "--level", 1, "-o", out)  # fmt: skip
    assert code == 0 and "tuned" not in err  # another size: the description's default
    assert load_trace(out).params["tile"] == get_kernel("tiled").param("tile").default


def test_a_simulated_tuning_never_stands_in_for_a_gpu():
    entry = tuned.Tuned(params={"tile": 8}, gflops=1.0, backend="sim", evaluated=1, space=12)
    tuned.save("tiled", 64, 64, 64, tuned.device_key("NVIDIA H200", "sim"), entry)
    assert tuned.best("tiled", 64, 64, 64, "NVIDIA H200") is None
    assert tuned.best("tiled", 64, 64, 64, "NVIDIA H200 (simulated)")["tile"] == 8


def test_a_broken_or_no_longer_allowed_entry_is_not_used():
    key = "NVIDIA H200 (simulated)"
    for params in ({"tile": 16, "drop_sync": 1}, {"tile": 7}):
        entry = tuned.Tuned(params=params, gflops=1.0, backend="sim", evaluated=1, space=12)
        tuned.save("tiled", 64, 64, 64, key, entry)
        assert tuned.best("tiled", 64, 64, 64, key) is None


@pytest.mark.parametrize("content", ["{", '{"version": 2}', '{"devices": {"x": 5}}'])
def test_a_corrupt_tuned_file_is_named_and_kept(tmp_path, capsys, content):
    path = tuned.tuned_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    out = tmp_path / "a.mvz"
    code, _, err = run(capsys, "record", "tiled", *SIZE, "--backend", "sim", "--level", 1,
                       "-o", out)  # fmt: skip
    assert code == 0 and "unreadable" in err and str(path) in err  # a note; the run goes on
    code, _, err = run(capsys, "sweep", "tiled", *SIZE, "--backend", "sim", "--tune")
    # one line, before the search runs (no progress lines: nothing was measured in vain)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "unreadable" in err
    assert path.read_text() == content  # not overwritten


def test_a_fifo_as_tuned_file_is_not_read(tmp_path, capsys, monkeypatch):
    fifo = tmp_path / "tuned.fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("MATVIZ_TUNED", str(fifo))
    code, _, err = run(capsys, "record", "tiled", *SIZE, "--backend", "sim", "--level", 1,
                       "-o", tmp_path / "a.mvz")  # fmt: skip
    assert code == 0 and "not a regular file" in err


@pytest.mark.parametrize("where", ["fifo", "unwritable folder"])
def test_a_tuned_file_that_cannot_be_kept_stops_the_search_before_it_runs(
    tmp_path, capsys, monkeypatch, where
):
    if where == "fifo":
        path = tmp_path / "tuned.fifo"
        os.mkfifo(path)
        reason = "not a regular file"
    else:
        path = Path("/proc/matviz-tuned.json")  # no file may be made there, not even by root
        if not path.parent.is_dir():
            pytest.skip("needs /proc")
        reason = "cannot write"
    monkeypatch.setenv("MATVIZ_TUNED", str(path))
    code, _, err = run(capsys, "sweep", "tiled", *SIZE, "--backend", "sim", "--tune")
    assert code == 2 and len(err.strip().splitlines()) == 1 and reason in err, err


def test_tune_takes_no_parameter_values(capsys):
    code, _, err = run(capsys, "sweep", "tiled", *SIZE, "--backend", "sim", "--tune",
                       "--tile", "8,16")  # fmt: skip
    assert code == 2 and "give no parameter values" in err and len(err.strip().splitlines()) == 1


def test_a_sweep_without_output_or_tune_is_one_line(capsys):
    code, _, err = run(capsys, "sweep", "tiled", *SIZE, "--backend", "sim", "--tile", "8")
    assert code == 2 and "-o FILE.csv" in err and len(err.strip().splitlines()) == 1


def test_the_saved_file_is_plain_json_an_editor_can_read():
    entry = tuned.Tuned(params={"tile": 32}, gflops=2.0, backend="cuda", evaluated=4, space=12)
    path = tuned.save("tiled", 64, 64, 64, "NVIDIA H200", entry)
    data = json.loads(path.read_text())
    assert data["devices"]["NVIDIA H200"]["64x64x64"]["tiled"]["params"] == {"tile": 32}


def test_a_value_the_others_forbid_is_tried_with_the_change_that_allows_it(monkeypatch):
    """Kernel 07's pad 4 needs swizzle 0: from its default (pad 0, swizzle 1) the search tries
    pad 4 with swizzle 0, and keeps it where that is fastest."""
    from matviz import sweep

    def fake_run(row, **_):
        p = row.params
        row.status = sweep.OK
        row.gflops = 100.0 + 50.0 * (p["pad"] == 4 and p["swizzle"] == 0) + p["split"]

    monkeypatch.setattr(sweep, "run_row", fake_run)
    top, rows = sweep.tune("async_pipeline", 128, 128, 128, "sim", 0)
    assert top.params["pad"] == 4 and top.params["swizzle"] == 0 and top.params["split"] == 1
    assert all(r.status == sweep.OK for r in rows)  # only allowed configurations ran
    assert len(rows) < len(get_kernel("async_pipeline").configurations())


def test_a_configuration_shared_memory_caps_below_the_best_is_not_run(monkeypatch):
    """Kernel 10 without the swizzle: its ldmatrix phases meet in the same banks, and shared
    memory alone caps it below what the swizzled default ran at, so the search skips it."""
    from matviz import sweep
    from matviz.core.ceilings import shared_ceiling
    from matviz.core.metrics import H200_PEAK_FIGURES

    device = dict(H200_PEAK_FIGURES, compute_capability="9.0")
    spec = get_kernel("mma_pipeline")
    ran = []

    def fake_run(row, **_):
        ran.append(dict(row.params))
        row.status, row.device = sweep.OK, device
        ceiling = shared_ceiling(spec.configure(row.params, *SHAPE), device).gflops
        row.gflops = 0.5 * ceiling + row.params["STAGES"]  # every run below its ceiling

    SHAPE = (4096, 4096, 4096)
    monkeypatch.setattr(sweep, "run_row", fake_run)
    top, rows = sweep.tune("mma_pipeline", *SHAPE, "cuda", 0)
    pruned = [r for r in rows if r.status == sweep.PRUNED]
    assert pruned and all(r.params["SWIZZLE"] == 0 for r in pruned)
    assert all(p["SWIZZLE"] == 1 for p in ran)  # none of them ran
    for r in pruned:  # it could not have won: its ceiling is below the best
        assert shared_ceiling(spec.configure(r.params, *SHAPE), device).gflops < top.gflops
        assert "shared memory alone allows" in r.reason
    assert top.params["SWIZZLE"] == 1


def test_no_pruning_without_the_gpu_the_best_ran_on(monkeypatch):
    from matviz import sweep

    def fake_run(row, **_):  # a run that did not say which GPU it ran on
        row.status, row.gflops = sweep.OK, 1e9 + row.params["STAGES"]

    monkeypatch.setattr(sweep, "run_row", fake_run)
    _, rows = sweep.tune("mma_pipeline", 4096, 4096, 4096, "cuda", 0)
    assert all(r.status == sweep.OK for r in rows)


@pytest.mark.parametrize("tune", [False, True])
@pytest.mark.parametrize(
    ("raised", "message", "code"),
    [
        (KeyboardInterrupt(), "matviz: interrupted", 130),
        (MatvizError("the worker died"), "matviz: error: the worker died", 2),
    ],  # fmt: skip
)
def test_a_stop_while_a_row_runs_is_its_own_line(
    tmp_path, capsys, monkeypatch, tune, raised, message, code
):
    """Ctrl-C or an error while a row runs: the row's progress line ends, and the message has a
    line of its own (it used to trail the row's "..." on the same line)."""
    from matviz import sweep

    def stop(row, **_kw):
        raise raised

    monkeypatch.setattr(sweep, "run_row", stop)
    out = ("--tune",) if tune else ("-o", tmp_path / "s.csv")
    code_got, _, err = run(capsys, "sweep", "tiled", *SIZE, "--backend", "sim", *out)
    assert code_got == code
    lines = err.splitlines()
    assert lines[-1] == message
    assert lines[-2].rstrip().endswith("...")

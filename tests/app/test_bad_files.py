"""Bad trace files never break the window: one dialog with one line, the trace it had stays."""

from __future__ import annotations

import copy
import dataclasses
import json
import zipfile

import pytest
from PySide6.QtCore import QSettings

from matviz.app.main_window import MainWindow
from matviz.app.runner import Runner
from matviz.backends.contract import RunRequest, run
from matviz.core.trace_io import save_trace


def simulate(size: int = 64, tile: int = 16):
    return run(RunRequest("tiled", size, size, size, params={"tile": tile, "pad": 0}, level=3))


def rewrite_manifest(good, bad, manifest: str) -> None:
    """A valid zip holding ``good``'s members, with ``manifest`` as its manifest.json."""
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for info in src.infolist():
            data = manifest.encode() if info.filename == "manifest.json" else src.read(info)
            dst.writestr(info, data)


@pytest.fixture
def bad_files(tmp_path):
    good = tmp_path / "good.mvz"
    save_trace(simulate(), good)
    raw = good.read_bytes()
    manifest = json.loads(zipfile.ZipFile(good).read("manifest.json"))
    files = {
        "truncated.mvz": raw[: len(raw) // 2],
        "garbage.mvz": bytes(range(256)) * 40,
        "empty.mvz": b"",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    rewrite_manifest(good, tmp_path / "not_json.mvz", '{"kernel": "tiled", ')
    rewrite_manifest(good, tmp_path / "no_stats.mvz", json.dumps({**manifest, "stats": None}))
    no_kernel = {**manifest, "kernel": "gone\nsecond line"}
    rewrite_manifest(good, tmp_path / "no_kernel.mvz", json.dumps(no_kernel))
    names = [*files, "not_json.mvz", "no_stats.mvz", "no_kernel.mvz"]
    return [tmp_path / name for name in names]


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    window = MainWindow(simulate(), settings=settings, runner=Runner(prewarm=False))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_each_bad_file_shows_one_dialog_and_keeps_the_trace(window, bad_files, dialogs):
    before, runs = window.session.trace, list(window.session.runs)
    for path in bad_files:
        shown = len(dialogs)
        assert window.open_file(path) is False  # nothing escapes
        assert len(dialogs) == shown + 1, path.name
        title, text = dialogs[-1]
        assert title and text and "\n" not in text and path.name in text, text
        assert "Traceback" not in text
        assert window.error == text  # the status line says the same, once
        assert window.session.trace is before and window.session.runs == runs
        assert window.trace_path is None and str(path) not in window.recent_files()
    assert window.open_file(bad_files[0].with_name("good.mvz"))  # a good file still opens
    assert window.session.trace is not before and not window.error


def test_an_unreadable_trace_given_to_the_window_falls_back_to_the_default(
    qtbot, tmp_path, dialogs
):
    trace = simulate()
    broken = dataclasses.replace(trace, manifest=copy.deepcopy(trace.manifest))
    broken.manifest["kernel"] = "gone"  # a description this checkout does not have
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    window = MainWindow(broken, settings=settings, runner=Runner(prewarm=False))
    qtbot.addWidget(window)
    assert window.session.trace is not None and window.session.trace is not broken
    assert len(dialogs) == 1 and "gone" in dialogs[0][1] and "\n" not in dialogs[0][1]
    window.close()


def test_an_unreadable_run_result_shows_one_dialog(window, dialogs):
    before = window.session.trace
    window.runner.unreadable.emit("cannot read trace /tmp/x.mvz: manifest.json is not JSON")
    assert len(dialogs) == 1 and "x.mvz" in dialogs[0][1]
    assert window.session.trace is before


def test_the_command_line_shows_one_dialog_and_one_error_line(capsys, tmp_path, dialogs):
    from matviz import cli

    bad = tmp_path / "bad.mvz"
    bad.write_bytes(b"PK\x03\x04 not a zip")
    assert cli.main([str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.mvz" in err[0]
    assert len(dialogs) == 1 and "bad.mvz" in dialogs[0][1] and "\n" not in dialogs[0][1]


def test_damaged_bundled_recordings_cost_their_point_and_one_dialog(
    qtbot, tmp_path, monkeypatch, dialogs
):
    import matviz.app.main_window as main_window

    folder = tmp_path / "traces"
    folder.mkdir()
    bundled = folder / "main.mvz"
    save_trace(simulate(), bundled)
    save_trace(simulate(64, 32), folder / "extra.mvz")
    (folder / "broken_a.mvz").write_bytes(b"garbage")
    (folder / "broken_b.mvz").write_bytes(bundled.read_bytes()[:100])
    monkeypatch.setattr(main_window, "BUNDLED_TRACE", bundled)
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    window = MainWindow(settings=settings, runner=Runner(prewarm=False))
    qtbot.addWidget(window)
    assert window.trace_path == bundled and len(window.session.runs) == 2  # extra + main
    assert len(dialogs) == 1
    text = dialogs[0][1]
    assert "broken_a.mvz" in text and "(+1 more)" in text and "\n" not in text
    window.close()


def test_a_run_result_that_cannot_be_read_is_unreadable_not_a_crash(qtbot, tmp_path):
    runner = Runner(prewarm=False)
    bad = tmp_path / "result.mvz"
    bad.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: no manifest
    got = []
    runner.finished.connect(got.append)
    with qtbot.waitSignal(runner.unreadable, timeout=5_000) as blocker:
        runner._load(str(bad))  # what a finished worker's output goes through
    assert "result.mvz" in blocker.args[0] and "\n" not in blocker.args[0]
    assert not got and not runner.busy
    runner.shutdown()

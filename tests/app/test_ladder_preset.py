"""The throughput plot's ladder preset (issue 13): the bundled H200 rungs as steps."""

from __future__ import annotations

from statistics import median

import pytest


def test_the_ladder_preset_shows_the_measured_rungs_as_steps(qtbot, tmp_path):
    """Issue 13: the throughput plot's preset, each kernel at its best configuration."""
    import json

    from PySide6.QtCore import QSettings

    from matviz.app.main_window import MainWindow
    from matviz.app.runner import Runner
    from matviz.bench.ladder import LADDER_H200

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat)
    window = MainWindow(None, settings=settings, runner=Runner())
    qtbot.addWidget(window)
    view = window.throughput_view
    runs = list(window.session.runs)
    window.ladder_action.setChecked(True)
    rows = json.loads(LADDER_H200.read_text())
    plotted = window.session.plotted_runs
    assert [r.gflops for r in plotted] == [row["gflops"] for row in rows]
    x, y = view.steps.getData()
    assert list(y) == [row["gflops"] for row in rows] and len(x) == len(rows) + 1
    assert "ladder" in view.runs_plot.titleLabel.text
    assert view.cublas_line.value() == pytest.approx(median(r["cublas_gflops"] for r in rows))
    window.ladder_action.setChecked(False)
    assert window.session.plotted_runs == runs
    steps_x = view.steps.getData()[0]
    assert steps_x is None or len(steps_x) == 0
    assert "Throughput of every run" in view.runs_plot.titleLabel.text

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
    every = json.loads(LADDER_H200.read_text())
    # the fp32 rungs (the window opens on an fp32 recording, or on none)
    rows = [row for row in every if row.get("dtype", "float32") == "float32"]
    assert 0 < len(rows) < len(every)
    plotted = window.session.plotted_runs
    assert [r.gflops for r in plotted] == [row["gflops"] for row in rows]
    x, y = view.steps.getData()
    assert list(y) == [row["gflops"] for row in rows] and len(x) == len(rows) + 1
    assert "ladder" in view.runs_plot.titleLabel.text
    assert view.cublas_line.value() == pytest.approx(median(r["cublas_gflops"] for r in rows))
    # a rung's hover gives what shared memory alone allows it (none for the naive kernel)
    from matviz.bench.ladder import shared_ceiling_pct

    for i, row in enumerate(rows):
        said = "shared memory alone allows" in view.describe_run(i)
        assert said == (shared_ceiling_pct(row) is not None), row["kernel"]
    window.ladder_action.setChecked(False)
    assert window.session.plotted_runs == runs
    steps_x = view.steps.getData()[0]
    assert steps_x is None or len(steps_x) == 0
    assert "Throughput of every run" in view.runs_plot.titleLabel.text


def test_a_tensor_core_trace_gets_the_rungs_of_its_input_type(qtbot, tmp_path):
    import json

    from PySide6.QtCore import QSettings

    from matviz.app.main_window import MainWindow
    from matviz.app.runner import Runner
    from matviz.bench.ladder import LADDER_H200
    from matviz.paths import TRACE_DIR

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat)
    window = MainWindow(None, settings=settings, runner=Runner())
    qtbot.addWidget(window)
    assert window.open_file(TRACE_DIR / "wmma_bm128_bn128_bk32_w32_p8_1024.mvz", remember=False)
    window.ladder_action.setChecked(True)
    fp16 = [r for r in json.loads(LADDER_H200.read_text()) if r.get("dtype") == "float16"]
    assert fp16 and [r.gflops for r in window.session.plotted_runs] == [r["gflops"] for r in fp16]
    # against cuBLAS on the same fp16 inputs, not SGEMM
    view = window.throughput_view
    assert view.cublas_line.value() == pytest.approx(median(r["cublas_gflops"] for r in fp16))
    assert "float16" in view.cublas_line.label.format

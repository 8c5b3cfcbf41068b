"""File → Compare with…: the current trace and a file side by side (issue 12, item 2)."""

from __future__ import annotations

from matviz.paths import TRACE_DIR

NAIVE, TILED = TRACE_DIR / "naive_t16_1024.mvz", TRACE_DIR / "tiled_t32_p0_1024.mvz"


def test_the_window_compares_the_current_trace_with_a_file(qtbot, tmp_path, dialogs):
    from PySide6.QtCore import QSettings

    from matviz.app.main_window import MainWindow
    from matviz.core.trace_io import load_trace

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat)
    window = MainWindow(load_trace(TILED), settings=settings)
    qtbot.addWidget(window)
    window.runner.shutdown()
    assert window.compare_with(NAIVE)
    view = window.compare_window
    assert view.isVisible() and [f.label for f in view.figures] == ["tiled T32 P0", "naive T16"]
    assert "caches served the re-reads" in view.title.text()
    bad = tmp_path / "bad.mvz"
    bad.write_bytes(b"not a zip")
    assert not window.compare_with(bad) and view is window.compare_window
    assert len(dialogs) == 1 and "bad.mvz" in dialogs[0][1]
    window.close()

"""``matviz`` with no arguments (or a ``.mvz`` file): the desktop app."""

from __future__ import annotations

import sys
from pathlib import Path

from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError


def run_gui(argv: list[str] | None = None) -> int:
    """Open the main window on ``argv[0]`` (a .mvz) or the default trace; returns the exit code.

    A file that cannot be read raises MatvizError before any window opens.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    trace = load_trace(argv[0]) if argv else None  # fail before Qt starts

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from matviz.app.i18n import cjk_font_notice, initial_language, set_language
    from matviz.app.main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0], *argv[1:]])
    app.setOrganizationName("matviz")
    app.setApplicationName("matviz")
    settings = QSettings("matviz", "matviz")
    set_language(initial_language(settings.value("language")))  # a zh locale starts in Chinese
    window = MainWindow(trace, replay=True, settings=settings)
    if notice := cjk_font_notice():  # Chinese chosen, but no font can draw it: say so
        window.statusBar().showMessage(notice)
    if argv:
        window.trace_path = Path(argv[0])
        window._remember(Path(argv[0]))
    window.show()
    return app.exec()


if __name__ == "__main__":
    try:
        sys.exit(run_gui())
    except MatvizError as exc:
        print(f"matviz: error: {exc}", file=sys.stderr)
        sys.exit(2)

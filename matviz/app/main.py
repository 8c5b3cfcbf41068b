"""``matviz`` with no arguments (or a ``.mvz`` file): the desktop app."""

from __future__ import annotations

import sys
from pathlib import Path

from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError


def run_gui(argv: list[str] | None = None) -> int:
    """Open the main window on ``argv[0]`` (a .mvz) or the default trace; returns the exit code.

    A file that cannot be read shows one dialog, then raises MatvizError (the command line
    prints it and exits with code 2) before the main window is built.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        trace = load_trace(argv[0]) if argv else None
    except MatvizError as exc:
        error = exc
    else:
        error = None

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from matviz.app.i18n import cjk_font_notice, initial_language, set_language
    from matviz.app.main_window import MainWindow, show_file_error

    app = QApplication.instance() or QApplication([sys.argv[0], *argv[1:]])
    app.setOrganizationName("matviz")
    app.setApplicationName("matviz")
    settings = QSettings("matviz", "matviz")
    set_language(initial_language(settings.value("language")))  # a zh locale starts in Chinese
    if error is not None:  # started from a file manager there is no terminal to read
        show_file_error(None, str(error))
        raise error
    window = MainWindow(trace, replay=True, settings=settings)
    if notice := cjk_font_notice():  # Chinese chosen, but no font can draw it: say so
        window.statusBar().showMessage(notice)
    if argv and window.session.trace is trace:  # refused traces leave the default in place
        window.trace_path = Path(argv[0])
        window._remember(Path(argv[0]))
    screen = app.primaryScreen()
    if screen is not None:  # a 1280x720 projector: the window fits the screen, not 1600x1000
        room = screen.availableGeometry()
        width, height = window.width(), window.height()
        window.resize(min(width, room.width()), min(height, room.height()))
    window.show()
    return app.exec()


if __name__ == "__main__":
    try:
        sys.exit(run_gui())
    except MatvizError as exc:
        print(f"matviz: error: {exc}", file=sys.stderr)
        sys.exit(2)

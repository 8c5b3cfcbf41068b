"""Render the main window to a PNG (the README screenshot), offscreen.

``python -m matviz.app.screenshot resources/screenshots/main_window.png [--trace F.mvz]
[--lang zh_CN]`` opens the window at 1600x1000 on the bundled recording (or a simulated run),
puts the playhead mid-kernel, selects a block in the middle of the grid and saves the picture.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from matviz.paths import RESOURCE_DIR

WIDTH, HEIGHT = 1600, 1000
DEFAULT_OUT = RESOURCE_DIR / "screenshots" / "main_window.png"


def render(out: Path, trace_path: Path | None = None, language: str = "en") -> Path:
    """Save a picture of the main window to ``out``; returns the path."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from matviz.app.i18n import set_language
    from matviz.app.main_window import MainWindow
    from matviz.core.trace_io import load_trace

    app = QApplication.instance() or QApplication([sys.argv[0]])
    set_language(language)
    trace = load_trace(trace_path) if trace_path else None
    with tempfile.TemporaryDirectory() as tmp:  # keep the user's recent files untouched
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.IniFormat)
        window = MainWindow(trace, settings=settings)
        window.runner.shutdown()  # no spare worker needed for a picture
        window.resize(WIDTH, HEIGHT)
        window.show()
        session = window.session
        trace = session.trace
        gx, gy = trace.grid
        session.select_block(trace.block_index(gx // 2, gy // 2))
        session.set_playhead(trace.duration_ns // 2)
        for _ in range(5):  # let layouts settle and every view paint
            app.processEvents()
        out.parent.mkdir(parents=True, exist_ok=True)
        if not window.grab().save(str(out)):
            raise OSError(f"could not write {out}")
        window.close()
        window.deleteLater()
        app.processEvents()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.app.screenshot", description=__doc__)
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--trace", type=Path, help="a .mvz to show (default: the bundled one)")
    parser.add_argument("--lang", default="en", choices=("en", "zh_CN"))
    args = parser.parse_args(argv)
    print(render(args.out, args.trace, args.lang))
    return 0


if __name__ == "__main__":
    sys.exit(main())

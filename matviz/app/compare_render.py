"""``matviz compare``: the compare view offscreen, as a still or an animation whose playhead
moves along both kernels at once (written atomically: a failure keeps the old file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QCoreApplication, Qt

from matviz.app.export_render import ensure_app, key_colours, to_rgb
from matviz.app.views.compare_view import TRACE_COLORS, CompareView
from matviz.core.trace import Trace
from matviz.export.atomic import AtomicOutput
from matviz.export.writers import FixedPalette, open_writer


def render_compare(
    traces: tuple[Trace, Trace],
    dram_gbs: float,
    out: Path,
    fmt: str,
    size: tuple[int, int],
    fps: int,
    duration_s: float,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write the comparison to ``out``; returns the frames written."""
    ensure_app()
    view = CompareView(traces, dram_gbs)
    view.setAttribute(Qt.WA_DontShowOnScreen, True)
    view.setFixedSize(*size)
    view.show()
    try:
        span_us = max(f.duration_us for f in view.figures)
        n = 1 if fmt == "png" else max(1, round(fps * duration_s))
        times = [span_us / 2] if fmt == "png" else list(np.linspace(0, span_us, n))

        def frame(t_us: float) -> np.ndarray:
            view.set_time(float(t_us))
            QCoreApplication.processEvents()
            return to_rgb(view.grab().toImage())

        with AtomicOutput(out) as tmp:
            palette = None
            if fmt == "gif":
                samples = [frame(t) for t in times[:: max(1, n // 8)]]
                palette = FixedPalette.from_frames(samples, [*key_colours(), *TRACE_COLORS])
            writer = open_writer(fmt, tmp, fps, n, palette)
            try:
                for i, t in enumerate(times):
                    writer.write(frame(t))
                    if progress:
                        progress(i + 1, n)
                writer.close()
            except BaseException:
                writer.abort()
                raise
        return n
    finally:
        view.close()
        view.deleteLater()

"""Frames of two traces compared (:class:`matviz.app.views.compare_view.CompareView`) for
:class:`matviz.app.export_job.ExportJob`: the playhead moves along both kernels at once, and
the job writes, guards and stops the export as for the app's views."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QCoreApplication, Qt

from matviz.app.export_render import ensure_app, key_colours, to_rgb
from matviz.app.views.compare_view import TRACE_COLORS, CompareView
from matviz.core.trace import Trace


class CompareRenderer:
    def __init__(self, traces: tuple[Trace, Trace], dram_gbs: float, size: tuple[int, int]):
        ensure_app()
        self.view = CompareView(traces, dram_gbs)
        self.view.setAttribute(Qt.WA_DontShowOnScreen, True)
        self.view.setFixedSize(*size)
        self.view.show()

    def key_colours(self) -> list[tuple[int, int, int]]:
        return [*key_colours(), *TRACE_COLORS]

    def render(self, t_ns: int) -> np.ndarray:
        self.view.set_time(t_ns / 1e3)
        QCoreApplication.processEvents()
        return to_rgb(self.view.grab().toImage())

    def close(self) -> None:
        self.view.close()
        self.view.deleteLater()

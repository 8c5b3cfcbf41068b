"""The sweep's bar chart (``matviz sweep --plot F.png``), drawn with pyqtgraph offscreen.

One bar per configuration (GFLOP/s, value on top); a configuration that did not run has no bar
but its status under the axis; cuBLAS and the FP32 peak are dashed lines. Simulated sweeps say
so in the title, in the colour the app uses for simulated data.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from matviz.app.export_render import ensure_app, to_rgb
from matviz.app.views import palette
from matviz.app.views.throughput_view import CUBLAS_COLOR, PEAK_COLOR
from matviz.core.metrics import peak_gflops
from matviz.errors import MatvizError
from matviz.export.atomic import AtomicOutput
from matviz.export.writers import PngWriter
from matviz.sweep import OK, SweepRow

SIZE = (1200, 620)
BAR = (31, 119, 180)


def _title(rows: list[SweepRow]) -> str:
    first = rows[0]
    sim = first.backend == "sim"
    source = (
        f"<b style='color:{palette.hexcolor(palette.SIMULATED)}'>&#9888; simulated (H200 model)</b>"
        if sim
        else "<b>recorded on the GPU</b>"
    )
    ran = sum(r.status == OK for r in rows)
    return (
        f"<b>{first.kernel}</b> · M×N×K = {first.M}×{first.N}×{first.K} · level {first.level} · "
        f"{source} · {ran} of {len(rows)} configurations ran"
    )


def hline(plot: pg.PlotItem, value: float, colour, text: str, left: bool = False) -> None:
    """A dashed line across the plot, its label over it at the right end (or the left)."""
    end = 0 if left else 1
    line = pg.InfiniteLine(
        pos=value,
        angle=0,
        pen=pg.mkPen(colour, width=1.5, style=Qt.DashLine),
        label=text,
        labelOpts={"position": 0.01 if left else 0.99, "color": colour,
                   "anchors": [(end, 1), (end, 1)]},
    )  # fmt: skip
    plot.addItem(line, ignoreBounds=True)


def chart(title_html: str) -> tuple[QWidget, pg.PlotItem]:
    """A white chart widget (not shown) with its title over one plot."""
    widget = QWidget()
    widget.setAttribute(Qt.WA_DontShowOnScreen, True)
    widget.setStyleSheet("background: white")
    box = QVBoxLayout(widget)
    title = QLabel(title_html, textFormat=Qt.RichText, wordWrap=True)
    title.setStyleSheet("font-size: 15px; color: #1e1e1e")
    box.addWidget(title)
    view = palette.make_plot()
    box.addWidget(view, 1)
    plot = view.getPlotItem()
    plot.getViewBox().setMouseEnabled(False, False)
    return widget, plot


def build_widget(rows: list[SweepRow]) -> QWidget:
    """The chart as a widget (not shown)."""
    widget, plot = chart(_title(rows))
    x = np.arange(len(rows))
    gflops = np.array([r.gflops if r.status == OK and r.gflops else 0.0 for r in rows])
    plot.addItem(pg.BarGraphItem(x=x, height=gflops, width=0.6, brush=BAR, pen=palette.FOREGROUND))
    top = max(float(gflops.max()) if len(gflops) else 0.0, 1.0)
    cublas = next((r.cublas_gflops for r in rows if r.cublas_gflops), None)
    if cublas:
        hline(plot, cublas, CUBLAS_COLOR, f"cuBLAS SGEMM: {cublas:,.0f} GFLOP/s")
        top = max(top, cublas)
    for i, row in enumerate(rows):
        text = f"{row.gflops:,.0f}" if row.status == OK and row.gflops else row.status
        colour = palette.FOREGROUND if row.status == OK else (192, 57, 43)
        item = pg.TextItem(text, color=colour, anchor=(0.5, 1.1))
        item.setPos(i, gflops[i])
        plot.addItem(item)
    plot.getAxis("bottom").setTicks([[(i, r.label.split(" ", 1)[-1]) for i, r in enumerate(rows)]])
    plot.setLabel("left", "GFLOP/s")
    plot.setLabel("bottom", "configuration (T = tile edge, P = padding words per row)")
    plot.setXRange(-0.6, len(rows) - 0.4, padding=0)
    plot.setYRange(0, 1.15 * top, padding=0)
    if not cublas:  # a sweep with no cuBLAS figure still gets a scale to compare against
        peak = peak_gflops(None)[0]
        hline(plot, peak, PEAK_COLOR, f"H200 FP32 peak: {peak:,.0f} GFLOP/s")
        plot.setYRange(0, 1.1 * max(top, peak), padding=0)
    return widget


def render_plot(rows: list[SweepRow], path: str | os.PathLike[str], size=SIZE) -> Path:
    """Save the chart as a PNG, atomically; MatvizError when it cannot be written."""
    if not rows:
        raise MatvizError("nothing to plot: the sweep has no configurations")
    ensure_app()
    return save_widget(build_widget(rows), path, size)


def save_widget(widget: QWidget, path: str | os.PathLike[str], size=SIZE) -> Path:
    """A chart widget (not shown) saved as a PNG, atomically."""
    try:
        widget.resize(*size)
        widget.show()
        for _ in range(3):  # layouts settle in a few rounds
            QCoreApplication.processEvents()
        frame = to_rgb(widget.grab().toImage())
    finally:
        widget.close()
        widget.deleteLater()
    with AtomicOutput(path) as tmp:
        writer = PngWriter(tmp)
        writer.write(frame)
        writer.close()
    return Path(path)

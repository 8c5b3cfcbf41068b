"""The sweep's bar chart (``matviz sweep --plot F.png``), drawn with pyqtgraph offscreen.

One bar per configuration (GFLOP/s, value on top); a configuration that did not run has no bar
but its status under the axis; cuBLAS and the peak for the kernel's inputs are dashed lines, a
dash over each bar marks what shared memory alone allows it, and a dotted one what issuing its
k loop allows an FP32 configuration (:mod:`matviz.core.ceilings`).
Simulated sweeps say so in the title, in the colour the app uses for simulated data.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from matviz.app.export_render import ensure_app, to_rgb
from matviz.app.views import palette
from matviz.app.views.throughput_view import CUBLAS_COLOR, PEAK_COLOR
from matviz.core.ceilings import configuration_ceiling, configuration_issue_ceiling
from matviz.core.metrics import peak_gflops
from matviz.core.registry import get_kernel
from matviz.errors import MatvizError
from matviz.export import stop_signals
from matviz.export.atomic import AtomicOutput
from matviz.export.writers import PngWriter
from matviz.sweep import OK, SweepRow

SIZE = (1200, 620)
BAR = (31, 119, 180)
BAR_WIDTH = 0.6
CEILING_LEGEND = (
    f" · <span style='color:{palette.hexcolor(palette.SHARED_CEILING)}'>▬ what shared memory "
    "alone allows (model)</span>"
)
ISSUE_LEGEND = (
    f" · <span style='color:{palette.hexcolor(palette.ISSUE_CEILING)}'>┅ what issuing ptxas's k "
    "loop allows</span>"
)


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


def ceiling_marks(
    plot: pg.PlotItem, ceilings: list[float | None], heights: np.ndarray, peak: float, top: float
) -> np.ndarray:
    """A dash the bar's width at each bar's shared-memory ceiling (GFLOP/s; None: none); one
    above ``top`` (the chart's range) or the peak (the multiply-adds bind first) is a tag
    "↑ N" at the top of its bar. Returns where each bar's value label goes: over its bar and
    its dash."""
    below: list[float | None] = []
    for i, value in enumerate(ceilings):
        shown = value is not None and value <= min(peak, top)
        below.append(value if shown else None)
        if value is not None and not shown:
            tag = pg.TextItem(
                f"↑ {value:,.0f}", color="w", fill=palette.SHARED_CEILING, anchor=(0.5, -0.1)
            )
            tag.setPos(i, heights[i])
            plot.addItem(tag)
    return _dashes(plot, below, heights, pg.mkPen(palette.SHARED_CEILING, width=4))


def issue_marks(plot: pg.PlotItem, values: list[float | None], tops: np.ndarray) -> np.ndarray:
    """A dotted dash the bar's width at what issuing each FP32 bar's k loop allows (GFLOP/s;
    None: none, a Tensor Core loop or no loop known); returns where each bar's value label
    goes, over its dash too."""
    return _dashes(plot, values, tops, pg.mkPen(palette.ISSUE_CEILING, width=3, style=Qt.DotLine))


def _dashes(plot: pg.PlotItem, values: list[float | None], tops: np.ndarray, pen) -> np.ndarray:
    """A dash the bar's width at each value (None: none), drawn with ``pen``; ``tops`` raised
    to the dashes."""
    tops = np.array(tops, dtype=float)
    xs, ys = [], []
    for i, value in enumerate(values):
        if value is not None:
            xs += [i - BAR_WIDTH / 2, i + BAR_WIDTH / 2]
            ys += [value, value]
            tops[i] = max(tops[i], value)
    if xs:
        plot.addItem(pg.PlotDataItem(np.array(xs), np.array(ys), pen=pen, connect="pairs"))
    return tops


def _row_issue(row: SweepRow, device: dict | None) -> float | None:
    issue = configuration_issue_ceiling(row.kernel, row.params, row.M, row.N, row.K, device)
    return None if issue is None else issue.gflops


def _row_ceiling(row: SweepRow, device: dict | None) -> float | None:
    ceiling = configuration_ceiling(row.kernel, row.params, row.M, row.N, row.K, device)
    return None if ceiling is None else ceiling.gflops


def _input_dtype(rows: list[SweepRow]) -> str:
    for row in rows:
        try:
            return get_kernel(row.kernel).configure(row.params, 1, 1, 1, check=False).input_dtype
        except MatvizError:
            continue
    return "float32"


def build_widget(rows: list[SweepRow]) -> QWidget:
    """The chart as a widget (not shown)."""
    device = next((r.device for r in rows if r.device), None)  # the GPU (or model) that ran
    ceilings = [_row_ceiling(r, device) for r in rows]
    issues = [_row_issue(r, device) for r in rows]
    legend = CEILING_LEGEND if any(c is not None for c in ceilings) else ""
    legend += ISSUE_LEGEND if any(c is not None for c in issues) else ""
    widget, plot = chart(_title(rows) + legend)
    x = np.arange(len(rows))
    gflops = np.array([r.gflops if r.status == OK and r.gflops else 0.0 for r in rows])
    bars = pg.BarGraphItem(x=x, height=gflops, width=BAR_WIDTH, brush=BAR, pen=palette.FOREGROUND)
    plot.addItem(bars)
    dtype = _input_dtype(rows)
    peak = peak_gflops(device, dtype)[0]
    top = max(float(gflops.max()) if len(gflops) else 0.0, 1.0)
    cublas = next((r.cublas_gflops for r in rows if r.cublas_gflops), None)
    if cublas:
        blas = "cuBLAS SGEMM" if dtype == "float32" else f"cuBLAS on {dtype}"
        hline(plot, cublas, CUBLAS_COLOR, f"{blas}: {cublas:,.0f} GFLOP/s")
        top = max(top, cublas)
    else:  # a sweep with no cuBLAS figure still gets a scale to compare against
        name = (device or {}).get("name", "H200")
        what = "FP32" if dtype == "float32" else "Tensor Core"
        hline(plot, peak, PEAK_COLOR, f"{name} {what} peak: {peak:,.0f} GFLOP/s")
        top = max(top, peak)
    top = max([top] + [v for v in issues if v is not None])
    tops = issue_marks(plot, issues, ceiling_marks(plot, ceilings, gflops, peak, 1.1 * top))
    for i, row in enumerate(rows):
        text = f"{row.gflops:,.0f}" if row.status == OK and row.gflops else row.status
        colour = palette.FOREGROUND if row.status == OK else (192, 57, 43)
        item = pg.TextItem(text, color=colour, anchor=(0.5, 1.15))
        item.setPos(i, tops[i])
        plot.addItem(item)
    plot.getAxis("bottom").setTicks([[(i, r.label.split(" ", 1)[-1]) for i, r in enumerate(rows)]])
    palette.count_axis(plot)  # before its label: the axis is a new one
    plot.setLabel("left", "GFLOP/s")
    plot.setLabel("bottom", "configuration")
    plot.setXRange(-0.6, len(rows) - 0.4, padding=0)
    plot.setYRange(0, 1.15 * max(top, float(tops.max()) if len(tops) else 0.0), padding=0)
    return widget


def render_plot(rows: list[SweepRow], path: str | os.PathLike[str], size=SIZE) -> Path:
    """Save the chart as a PNG, atomically; MatvizError when it cannot be written."""
    if not rows:
        raise MatvizError("nothing to plot: the sweep has no configurations")
    ensure_app()
    return save_widget(lambda: build_widget(rows), path, size)


def save_widget(build: Callable[[], QWidget], path: str | os.PathLike[str], size=SIZE) -> Path:
    """The chart ``build`` makes (not shown) saved as a PNG, atomically. Ctrl-C (or SIGTERM,
    SIGHUP) while it is built, rendered or written ends it before the file is moved into place:
    raised inside Qt's calls it was swallowed (the chart replaced the user's file) or turned
    into another error."""
    with stop_signals.held() as caught:
        widget = build()
        try:
            widget.resize(*size)
            widget.show()
            for _ in range(3):  # layouts settle in a few rounds
                QCoreApplication.processEvents()
            frame = to_rgb(widget.grab().toImage())
        finally:
            widget.close()
            widget.deleteLater()
        stop_signals.raise_if(caught)
        with AtomicOutput(path) as tmp:
            writer = PngWriter(tmp)
            writer.write(frame)
            writer.close()
            stop_signals.raise_if(caught)  # inside: the half-written file is discarded
    return Path(path)

"""Compare two traces (lesson 8 §2-9, §29): their SM lanes stacked on one time axis, and per
trace the bytes requested, the loads per block and per element of C, the arithmetic intensity,
and the measured GFLOP/s beside the ceiling DRAM bandwidth alone would allow
(:mod:`matviz.core.compare`). Used by File → Compare… and ``matviz compare``.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.views import palette
from matviz.app.views.sm_lanes import lay_out
from matviz.core import compare
from matviz.core.timeline import Timeline
from matviz.core.trace import Trace

TRACE_COLORS = ((31, 119, 180), (214, 39, 40))  # first and second trace in the bar charts
CEILING_ALPHA = 90
BAR_STEP = 0.26  # three rate bars a trace: measured, DRAM's ceiling, shared memory's


class CompareView(Retranslating, QWidget):
    def __init__(self, traces: tuple[Trace, Trace], dram_gbs: float, parent=None) -> None:
        super().__init__(parent)
        self.traces = traces
        self.dram_gbs = dram_gbs
        self.figures = [compare.figures(t, compare.dram_bandwidth_gbs(t, dram_gbs)) for t in traces]
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.canvas, 1)
        self.lanes: list[pg.PlotItem] = []
        self.playheads: list[pg.InfiniteLine] = []
        span_us = max(f.duration_us for f in self.figures)
        for row, trace in enumerate(traces):
            plot = self.canvas.addPlot(row=row, col=0, colspan=4)
            palette.style_plot(plot)
            plot.getViewBox().setMouseEnabled(False, False)
            self._draw_lanes(plot, trace)
            plot.setXRange(0, span_us, padding=0.01)
            if self.lanes:
                plot.setXLink(self.lanes[0])
            line = pg.InfiniteLine(angle=90, pen=pg.mkPen(palette.PLAYHEAD, width=2))
            plot.addItem(line, ignoreBounds=True)
            self.lanes.append(plot)
            self.playheads.append(line)
        self.bars = [self.canvas.addPlot(row=2, col=c) for c in range(4)]
        for plot in self.bars:
            palette.style_plot(plot)
            plot.getViewBox().setMouseEnabled(False, False)
            plot.hideAxis("bottom")
        self._draw_bars()
        self.retranslate()
        self.set_time(0.0)

    def _draw_lanes(self, plot: pg.PlotItem, trace: Trace) -> None:
        layout = lay_out(trace, Timeline(trace))
        cells = layout.cells
        codes = np.zeros(cells.shape, np.uint8)
        busy = cells > 0
        codes[busy] = layout.wave[cells[busy] - 1] % len(palette.WAVE_COLORS) + 1
        image = pg.ImageItem(axisOrder="row-major")
        image.setImage(codes, lut=palette.wave_lut(), levels=(0, 255), autoLevels=False)
        image.setRect(QRectF(0, 0, layout.span / 1e3, cells.shape[0]))
        plot.addItem(image)
        plot.invertY(True)
        plot.setYRange(0, cells.shape[0], padding=0)

    def _draw_bars(self) -> None:
        values = [
            [f.requested_bytes / 1e6 for f in self.figures],
            [f.loads_per_element for f in self.figures],
            [f.intensity for f in self.figures],
        ]
        for plot, row in zip(self.bars[:3], values, strict=False):
            for i, value in enumerate(row):
                plot.addItem(pg.BarGraphItem(x=[i], height=[value], width=0.7,
                                             brush=pg.mkBrush(TRACE_COLORS[i])))  # fmt: skip
                shown = f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
                text = pg.TextItem(shown, color=palette.FOREGROUND, anchor=(0.5, 1.1))
                text.setPos(i, value)
                plot.addItem(text)
            plot.setXRange(-0.6, len(row) - 0.4, padding=0)
            plot.setYRange(0, 1.25 * max(max(row), 1e-9), padding=0)
        rates = self.bars[3]
        top = 1.0
        for i, f in enumerate(self.figures):
            # measured, then the DRAM ceiling (the trace's colour, faint), then shared memory's
            shared = pg.mkBrush(*palette.SHARED_CEILING, 160)
            bars = [(f.gflops, pg.mkBrush(TRACE_COLORS[i])),
                    (f.dram_ceiling_gflops, pg.mkBrush(*TRACE_COLORS[i], CEILING_ALPHA)),
                    (f.shared_ceiling_gflops, shared)]  # fmt: skip
            for j, (value, brush) in enumerate(bars):
                if value is None:
                    continue
                x = i + (j - 1) * BAR_STEP
                rates.addItem(pg.BarGraphItem(x=[x], height=[value], width=0.9 * BAR_STEP,
                                              brush=brush))  # fmt: skip
                text = pg.TextItem(f"{value:,.0f}", color=palette.FOREGROUND, anchor=(0.5, 1.1))
                text.setPos(x, value)
                rates.addItem(text)
                top = max(top, value)
        rates.setXRange(-0.6, len(self.figures) - 0.4, padding=0)
        rates.setYRange(0, 1.25 * top, padding=0)

    def set_time(self, t_us: float) -> None:
        """The playhead on both lanes, in µs from each kernel's start."""
        for line in self.playheads:
            line.setValue(t_us)

    def summary(self) -> str:
        """One line per trace: where the measured rate stands against the DRAM ceiling and
        the shared-memory ceiling."""
        lines = []
        for f in self.figures:
            if f.gflops > f.dram_ceiling_gflops:
                verdict = tr("{x:.1f}× what DRAM alone could feed: caches served the re-reads")
            else:
                verdict = tr("below what DRAM alone could feed ({x:.1f}×): not memory-bound")
            x = f.gflops / f.dram_ceiling_gflops if f.dram_ceiling_gflops else 0.0
            line = f"<b>{f.label}</b>: " + verdict.format(x=x)
            if f.shared_ceiling_gflops:
                shared = tr(
                    "; shared memory alone allows {c:,.0f} GFLOP/s, {pct:.0f}% of it reached"
                )
                pct = 100 * f.gflops / f.shared_ceiling_gflops
                line += shared.format(c=f.shared_ceiling_gflops, pct=pct)
            lines.append(line)
        return "<br>".join(lines)

    def retranslate(self) -> None:
        a, b = self.figures
        self.title.setText(
            "<b>"
            + tr("{a} against {b}: one time axis (µs from each kernel's start)").format(
                a=a.label, b=b.label
            )
            + "</b><br>"
            + tr("Floats loaded per block: {a:,.0f} and {b:,.0f} (2bk for a b × b tile).").format(
                a=a.loads_per_block, b=b.loads_per_block
            )
            + "<br>"
            + self.summary()
        )
        rows = zip(self.lanes, self.traces, self.figures, strict=True)
        for i, (plot, trace, f) in enumerate(rows):
            plot.setTitle(
                palette.swatch(TRACE_COLORS[i], f"<b>{f.label}</b>")
                + f" · {trace.shape[0]}×{trace.shape[1]}×{trace.shape[2]} · "
                + palette.source_html(trace, trace.provenance)
                + " · "
                + tr("{t:,.1f} µs").format(t=f.duration_us)
            )
            plot.setLabel("left", tr("SM lanes"))
        titles = (
            tr("MB requested by load instructions"),
            tr("floats loaded per element of C"),
            tr("FLOP per requested byte"),
            tr("GFLOP/s: measured | DRAM ceiling ({bw:,.0f} GB/s) | shared-memory ceiling").format(
                bw=self.dram_gbs
            ),
        )
        for plot, title in zip(self.bars, titles, strict=False):
            plot.setTitle(title, size="9pt")

"""Throughput: GFLOP/s of every run against cuBLAS and the FP32 peak, and the in-kernel FLOP
rate over time of the current trace with the playhead."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core import metrics

H200 = {"name": "NVIDIA H200", "sm_count": 132, "clock_mhz": 1980, "fp32_fma_per_clk_per_sm": 128}
CUBLAS_COLOR = (120, 60, 160)
PEAK_COLOR = (90, 90, 90)


def peak_gflops(device: dict | None) -> tuple[float, dict]:
    """FP32 peak = SMs x FMA/clk x 2 FLOP x clock; H200 figures where the device lacks them."""
    dev = dict(H200)
    dev.update({k: v for k, v in (device or {}).items() if k in H200 and v})
    gflops = dev["sm_count"] * dev["fp32_fma_per_clk_per_sm"] * 2 * dev["clock_mhz"] / 1000.0
    return gflops, dev


class ThroughputView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.rate_t_us = np.zeros(0)
        self.rate_gflops = np.zeros(0)
        self.peak = peak_gflops(None)[0]
        self._value_texts: list[pg.TextItem] = []

        self.placeholder = QLabel(alignment=Qt.AlignCenter)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground(palette.BACKGROUND)
        self.runs_plot = self.canvas.addPlot(row=0, col=0)
        self.rate_plot = self.canvas.addPlot(row=1, col=0)
        for plot in (self.runs_plot, self.rate_plot):
            palette.style_plot(plot)
            plot.hideButtons()
            plot.setMenuEnabled(False)
            for axis in ("left", "bottom"):
                plot.getAxis(axis).enableAutoSIPrefix(False)
        self.runs_plot.getViewBox().setMouseEnabled(False, False)
        self.legend = self.runs_plot.addLegend(labelTextColor=palette.FOREGROUND)
        # top left, above the points: the peak and cuBLAS lines carry their labels on the right
        self.legend.anchor(itemPos=(0, 0), parentPos=(0, 0), offset=(10, 2))
        self.runs_plot.getAxis("bottom").setHeight(62)  # two-line configuration labels
        self.scatter: dict[str, pg.ScatterPlotItem] = {}
        for backend, style in palette.BACKEND_STYLE.items():
            item = pg.ScatterPlotItem(
                size=13,
                symbol=style["symbol"],
                brush=pg.mkBrush(style["brush"]),
                pen=pg.mkPen(style["pen"], width=2),
            )
            self.runs_plot.addItem(item)
            self.scatter[backend] = item
        self.cublas_line = self._hline(self.runs_plot, CUBLAS_COLOR)
        # the peak is the top of the plot: its label goes below the line to stay in view
        self.peak_line = self._hline(self.runs_plot, PEAK_COLOR, below=True)
        self.rate_peak_line = self._hline(self.rate_plot, PEAK_COLOR, below=True)
        self.rate_curve = self.rate_plot.plot(
            pen=pg.mkPen((31, 119, 180), width=2), fillLevel=0, brush=(31, 119, 180, 60)
        )
        self.playhead = palette.playhead_line(label=None)
        self.rate_plot.addItem(self.playhead, ignoreBounds=True)
        self._syncing = False
        self.playhead.sigPositionChanged.connect(self._on_drag)

        self.stack = palette.stacked(self, self.placeholder, self.title, (self.canvas, 1))
        session.traceChanged.connect(self.refresh)
        session.runsChanged.connect(self._draw_runs)
        session.playheadChanged.connect(self._on_playhead)
        self.refresh()

    @staticmethod
    def _hline(plot: pg.PlotItem, color, below: bool = False) -> pg.InfiniteLine:
        """A dashed reference line with its label right-aligned above (or below) it."""
        anchor = (1, 0) if below else (1, 1)
        line = pg.InfiniteLine(
            angle=0,
            movable=False,
            pen=pg.mkPen(color, width=1.5, style=Qt.DashLine),
            label="",
            labelOpts={"position": 0.99, "color": color, "anchors": [anchor, anchor]},
        )
        plot.addItem(line, ignoreBounds=True)
        return line

    # -- session -> view ---------------------------------------------------------------------
    def refresh(self) -> None:
        trace = self.session.trace
        if trace is not None:
            self.peak = peak_gflops(trace.manifest.get("device"))[0]
            centres, gflops = metrics.flop_rate(trace)
            self.rate_t_us, self.rate_gflops = centres / 1000.0, gflops
            self.rate_curve.setData(self.rate_t_us, self.rate_gflops)
            span = max(trace.duration_ns, 1) / 1000.0
            self.rate_plot.setXRange(0, span, padding=0.01)
            self.rate_plot.setYRange(0, 1.12 * max(self.peak, float(gflops.max())), padding=0)
            self._on_playhead(self.session.playhead_ns)
        else:
            self.rate_curve.setData([], [])
        self.playhead.setVisible(trace is not None)
        self._draw_runs()
        self.retranslate()

    def _draw_runs(self) -> None:
        runs = self.session.runs
        for text in self._value_texts:
            self.runs_plot.removeItem(text)
        self._value_texts.clear()
        for backend, item in self.scatter.items():
            idx = [i for i, r in enumerate(runs) if r.backend == backend]
            item.setData(idx, [runs[i].gflops for i in idx])
        for i, run in enumerate(runs):
            text = pg.TextItem(f"{run.gflops:,.0f}", color=palette.FOREGROUND, anchor=(0.5, 1.3))
            text.setPos(i, run.gflops)
            self.runs_plot.addItem(text)
            self._value_texts.append(text)
        step = max(1, -(-len(runs) // 8))  # at most ~8 tick labels
        # one word per line: 'tiled_transposed' side by side would overrun its neighbours
        ticks = [
            (i, run.label.replace("_", "_\n", 1).replace(" ", "\n", 1))
            for i, run in enumerate(runs)
        ]
        ticks = ticks[::step]
        self.runs_plot.getAxis("bottom").setTicks([ticks])
        self.runs_plot.setXRange(-0.6, max(len(runs), 1) - 0.4, padding=0)
        self.runs_plot.setYRange(0, 1.15 * self.peak, padding=0)
        self._update_lines()
        self.stack.setCurrentIndex(1 if runs or self.session.trace is not None else 0)

    def _update_lines(self) -> None:
        cublas = next(
            (r.cublas_gflops for r in reversed(self.session.runs) if r.cublas_gflops), None
        )
        trace = self.session.trace
        if cublas is None and trace is not None:
            cublas = trace.manifest["stats"].get("cublas_gflops")
        self.cublas_line.setVisible(bool(cublas))
        if cublas:
            self.cublas_line.setValue(cublas)
            self.cublas_line.label.setFormat(tr("cuBLAS SGEMM: {v:,.0f} GFLOP/s").format(v=cublas))
        peak, dev = peak_gflops(trace.manifest.get("device") if trace is not None else None)
        text = tr("FP32 peak: {v:,.0f} GFLOP/s = {sms} SMs × {fma} FMA/clk × 2 × {ghz:.2f} GHz")
        label = text.format(
            v=peak,
            sms=dev["sm_count"],
            fma=dev["fp32_fma_per_clk_per_sm"],
            ghz=dev["clock_mhz"] / 1000,
        )
        short = tr("FP32 peak: {v:,.0f} GFLOP/s").format(v=peak)  # the formula would not fit
        for line in (self.peak_line, self.rate_peak_line):
            line.setValue(peak)
            line.label.setFormat(short)
        self.setToolTip(label)

    def _on_playhead(self, ns: int) -> None:
        self._syncing = True
        self.playhead.setValue(ns / 1000.0)
        self._syncing = False

    def _on_drag(self) -> None:
        if not self._syncing:
            self.session.set_playhead(int(round(self.playhead.value() * 1000.0)))

    # -- texts -------------------------------------------------------------------------------
    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        self.runs_plot.setTitle(
            tr("Throughput of every run (GFLOP/s)"), color=palette.hexcolor(palette.FOREGROUND)
        )
        self.runs_plot.setLabel("left", tr("GFLOP/s"))
        self.runs_plot.setLabel("bottom", tr("run (configuration)"))
        self.rate_plot.setTitle(
            tr("FLOP rate inside the kernel over time (current trace)"),
            color=palette.hexcolor(palette.FOREGROUND),
        )
        self.rate_plot.setLabel("left", tr("GFLOP/s"))
        self.rate_plot.setLabel("bottom", tr("time since kernel start (µs)"))
        self.legend.clear()
        self.legend.addItem(self.scatter["cuda"], tr("recorded on a GPU"))
        self.legend.addItem(self.scatter["sim"], tr("simulated"))
        trace = self.session.trace
        self.title.setText(
            f"{palette.config_text(trace)} · "
            f"{palette.source_html(trace, self.session.source_label)}"
            if trace is not None
            else tr("No trace loaded")
        )
        self._update_lines()


"""Throughput: GFLOP/s of every run against cuBLAS and the FP32 peak, and the in-kernel FLOP
rate over time of the current trace with the playhead.

Each run's tick label carries its number, kernel, parameters and size (M×N×K, or n³); labels are
wrapped into short lines and thinned to what the plot's width holds (the newest run always
keeps its label), and hovering a point shows all of a run's details. A plot too short for such
labels shows the number and size only. The dashed cuBLAS line is
the current trace's own baseline (its manifest's ``cublas_gflops``); the cuBLAS label sits at the
left end of its line, under it, and the FP32-peak label above its own line, so they cannot collide.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QLabel, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core import metrics
from matviz.core.ceilings import (
    IssueCeiling,
    SharedCeiling,
    configuration_ceiling,
    issue_ceiling,
    shared_ceiling,
)
from matviz.core.metrics import peak_gflops
from matviz.core.runs import RunPoint

CUBLAS_COLOR = (120, 60, 160)
PEAK_COLOR = (90, 90, 90)
LINE_CHARS = 12  # a tick label's lines are wrapped at about this many characters
LABEL_GAP_PX = 10  # at least this much space between two tick labels
# a run's value label: above its point, else right, left or below it
VALUE_ANCHORS = ((0.5, 1.3), (-0.15, 0.5), (1.15, 0.5), (0.5, -0.3))
HEADROOM = 1.15  # the runs plot's top, in FP32 peaks, at least
RATE_HEADROOM = 1.2  # the rate plot's top, in peaks: its label fits over its line at 1280x720
LEFT_END, RIGHT_END = 0.01, 0.99  # where along a reference line its label sits
SYMBOL_MARGIN_PX = (-7, -7, 7, 7)  # a run's symbol (13 px) around its point
MAX_STACK_SHARE = 0.7  # stacked reference labels may take at most this much of the rate plot


def size_text(shape: tuple[int, int, int]) -> str:
    """'1024³' for a cube, '4096×1024×512' otherwise."""
    m, n, k = shape
    return f"{m}³" if m == n == k else f"{m}×{n}×{k}"


def _wrap(words: list[str], width: int = LINE_CHARS) -> list[str]:
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def tick_label(index: int, run: RunPoint) -> str:
    """Short lines: '#3 tiled', 'T32 P0 (sim)', '1024³'; a long kernel name breaks at '_'."""
    name = run.kernel
    head = [f"#{index + 1} {name}"]
    if len(head[0]) > LINE_CHARS + 2 and "_" in name:
        cut = name.rfind("_", 0, LINE_CHARS)
        cut = cut if cut > 0 else name.find("_")
        head = [f"#{index + 1} {name[: cut + 1]}", name[cut + 1 :]]
    words = run.labels.split() + ([tr("(sim)")] if run.backend == "sim" else [])
    words += [tr("(C wrong)")] if run.wrong else []  # never read as a correct kernel's speed
    return "\n".join(head + _wrap(words) + [size_text(run.shape)])


class ThroughputView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.rate_t_us = np.zeros(0)
        self.rate_gflops = np.zeros(0)
        self.peak = peak_gflops(None)[0]
        self._rate_top = RATE_HEADROOM * self.peak  # the FLOP-rate plot's top, before labels
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
            palette.count_axis(plot)  # GFLOP/s up to a million: 1M, not 1e+06
        self.runs_plot.getViewBox().setMouseEnabled(False, False)
        self.tick_font = QFont()
        self.runs_plot.getAxis("bottom").setStyle(tickFont=self.tick_font)
        self.ticks: list[tuple[float, str]] = []  # the tick labels drawn (thinned)
        self.shown_runs: list[int] = []  # runs whose label and value are drawn
        self.runs_plot.getViewBox().sigResized.connect(self._layout_runs)
        self.rate_plot.getViewBox().sigResized.connect(self._place_rate_labels)
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
        # the peak's label sits above its line (the plot keeps room for it) and the cuBLAS
        # label below its own, which is lower, or above it with room to the peak's line
        # the ladder preset joins its rungs as steps, kernel by kernel
        self.steps = pg.PlotDataItem(stepMode="center", pen=pg.mkPen((31, 119, 180), width=2))
        self.runs_plot.addItem(self.steps)
        self.cublas_line = self._hline(self.runs_plot, CUBLAS_COLOR, below=True, left=True)
        self.peak_line = self._hline(self.runs_plot, PEAK_COLOR)
        self.rate_peak_line = self._hline(self.rate_plot, PEAK_COLOR, below=True)
        # what shared memory alone allows the current trace's configuration (its label at the
        # left, clear of the peak's at the right)
        self.rate_ceiling_line = self._hline(self.rate_plot, palette.SHARED_CEILING, left=True)
        self.ceiling: SharedCeiling | None = None
        # what issuing its k loop allows an SIMT configuration (its label at the right, above
        # the line: below it, it met the shared-memory label in a narrow plot)
        self.rate_issue_line = self._hline(self.rate_plot, palette.ISSUE_CEILING)
        self.issue: IssueCeiling | None = None
        # the rate plot's reference lines, each with whether its label sits at the left
        self.rate_lines = [(self.rate_peak_line, False), (self.rate_issue_line, False),
                           (self.rate_ceiling_line, True)]  # fmt: skip
        self.rate_curve = self.rate_plot.plot(
            pen=pg.mkPen((31, 119, 180), width=2), fillLevel=0, brush=(31, 119, 180, 60)
        )
        self.playhead = palette.playhead_line(label=None)
        self.rate_plot.addItem(self.playhead, ignoreBounds=True)
        self._syncing = False
        self.playhead.sigPositionChanged.connect(self._on_drag)

        self.canvas.scene().sigMouseMoved.connect(self._on_move)
        self.stack = palette.stacked(self, self.placeholder, self.title, (self.canvas, 1))
        session.traceChanged.connect(self.refresh)
        session.runsChanged.connect(self._draw_runs)
        session.playheadChanged.connect(self._on_playhead)
        self.refresh()

    @staticmethod
    def _hline(
        plot: pg.PlotItem, color, below: bool = False, left: bool = False
    ) -> pg.InfiniteLine:
        """A dashed reference line with its label right-aligned (or left-aligned) above (or
        below) it."""
        line = pg.InfiniteLine(
            angle=0,
            movable=False,
            pen=pg.mkPen(color, width=1.5, style=Qt.DashLine),
            label="",
            labelOpts={
                "position": LEFT_END if left else RIGHT_END,
                "color": color,
                "fill": (255, 255, 255, 235),  # readable over points and value labels
            },
        )
        ThroughputView._place_label(line, below, left)
        line.setZValue(30)  # its label stays readable over points and value labels
        plot.addItem(line, ignoreBounds=True)
        return line

    def _place_cublas_label(self) -> None:
        """The cuBLAS label below its line; above it where the line is too low for a label
        below (cuBLAS fp16 against the Tensor Core peak: 11%), which would fall under the axis,
        unless it would meet the peak's label there (a plot a few lines high). The label is
        drawn over the points, so it moves to the line's other end, or its other side where
        that has room, rather than hide a run (a Tensor Core run just under cuBLAS did)."""
        box = self.runs_plot.getViewBox()
        bottom, top = box.viewRange()[1]
        px = max(box.height(), 1.0) / max(top - bottom, 1e-9)
        label_px = _reference_label_px()
        below_px = (self.cublas_line.value() - bottom) * px
        above_px = (self.peak_line.value() - self.cublas_line.value()) * px
        below = below_px >= label_px or above_px < label_px
        sides = [below] + [not below] * (min(below_px, above_px) >= label_px)
        places = [(side, left) for side in sides for left in (True, False)]
        runs = self.session.plotted_runs
        points = [box.mapViewToScene(QPointF(i, r.gflops)) for i, r in enumerate(runs)]
        for side, left in places:
            self._place_label(self.cublas_line, below=side, left=left)
            covers = self.cublas_line.label.sceneBoundingRect().adjusted(*SYMBOL_MARGIN_PX)
            if not any(covers.contains(point) for point in points):
                return
        self._place_label(self.cublas_line, below=below, left=True)

    def _place_rate_labels(self) -> None:
        """The FLOP-rate plot's reference lines from the top down (the peak, then the
        ceilings): each label above its line where it fits under the line or label over it,
        else below. In a plot a few lines high (1280x720) a ceiling near the peak hid the
        peak's label, or ran its line through it. Where a label would still meet a line or
        another label (lines closer together than a label is high: kernel 07's issue bound
        under the peak in a 110-px plot), the labels are stacked over the top line instead,
        in the lines' order, and the plot is raised to hold them."""
        height = max(self.rate_plot.getViewBox().height(), 1.0)
        shown = sorted((ln for ln in self.rate_lines if ln[0].isVisible()),
                       key=lambda ln: -ln[0].value())  # fmt: skip
        label_px = _reference_label_px()
        top = self._rate_top
        placed, clear = _beside_lines([ln.value() for ln, _ in shown], label_px * top / height, top)
        row_px = label_px + 1  # a stacked label's row: 1 px apart, and clear of the plot's top
        stack_share = (len(shown) * row_px + 1) / height  # of the plot
        if not clear and stack_share < MAX_STACK_SHARE:
            top = max(top, shown[0][0].value() / (1.0 - stack_share))
            self._stack_labels([ln for ln, _ in shown], height / top, row_px)
        else:
            for (line, left), below in zip(shown, placed, strict=True):
                self._place_label(line, below=below, left=left)
        self.rate_plot.setYRange(0, top, padding=0)

    @staticmethod
    def _place_label(line: pg.InfiniteLine, below: bool, left: bool) -> None:
        anchor = (0 if left else 1, 0 if below else 1)
        line.label.anchors = [anchor, anchor]
        line.label.setPosition(LEFT_END if left else RIGHT_END)  # updates it

    @staticmethod
    def _stack_labels(lines: list[pg.InfiniteLine], px_per_unit: float, row_px: float) -> None:
        """Labels right-aligned over the top line, a row each, the top line's highest."""
        top = lines[0].value()
        for row, line in enumerate(reversed(lines)):
            up_px = (top - line.value()) * px_per_unit + row * row_px  # from its own line
            text_px = max(line.label.boundingRect().height(), 1.0)
            line.label.anchors = [(1, 1 + up_px / text_px)] * 2
            line.label.setPosition(RIGHT_END)

    # -- session -> view ---------------------------------------------------------------------
    def refresh(self) -> None:
        trace = self.session.trace
        self.ceiling = self.issue = None
        if trace is not None:
            self.peak = peak_gflops(trace.manifest.get("device"), trace.dtype)[0]
            self.ceiling = shared_ceiling(trace.config, trace.manifest.get("device"))
            self.issue = issue_ceiling(trace.config, trace.manifest.get("device"))
            centres, gflops = metrics.flop_rate(trace)
            self.rate_t_us, self.rate_gflops = centres / 1000.0, gflops
            self.rate_curve.setData(self.rate_t_us, self.rate_gflops)
            span = max(trace.duration_ns, 1) / 1000.0
            self.rate_plot.setXRange(0, span, padding=0.01)
            self._rate_top = RATE_HEADROOM * max(self.peak, float(gflops.max()))
            self.rate_plot.setYRange(0, self._rate_top, padding=0)
            self._on_playhead(self.session.playhead_ns)
        else:
            self.rate_curve.setData([], [])
        self.playhead.setVisible(trace is not None)
        self._draw_runs()
        self.retranslate()

    def _draw_runs(self) -> None:
        runs = self.session.plotted_runs
        for backend, item in self.scatter.items():
            idx = [i for i, r in enumerate(runs) if r.backend == backend]
            item.setData(idx, [runs[i].gflops for i in idx])
        if self.session.ladder is not None and runs:
            edges = np.arange(len(runs) + 1) - 0.5
            self.steps.setData(edges, [r.gflops for r in runs])
        else:
            self.steps.setData([], [])
        self._runs_title()
        self._layout_runs()
        self._update_lines()
        self._clear_reference_labels()
        self.stack.setCurrentIndex(1 if runs or self.session.trace is not None else 0)

    def _label_px(self, text: str) -> tuple[float, float]:
        """Width and height in pixels of a multi-line tick label in the axis font."""
        metrics_ = QFontMetrics(self.tick_font)
        lines = text.split("\n")
        return max(metrics_.horizontalAdvance(line) for line in lines), len(
            lines
        ) * metrics_.lineSpacing()

    def _layout_runs(self, *_args) -> None:
        """Thin the tick labels to what the plot's width holds, and widen the x range so the
        outermost labels stay inside the axis (pyqtgraph drops a label that sticks out)."""
        runs = self.session.plotted_runs
        for text in self._value_texts:
            self.runs_plot.removeItem(text)
        self._value_texts.clear()
        labels = [tick_label(i, run) for i, run in enumerate(runs)]
        sizes = [self._label_px(text) for text in labels]
        if max((h for _, h in sizes), default=0.0) > 0.5 * self.runs_plot.height():
            # a short plot: number and size only, the rest is in the hover
            labels = [f"#{i + 1}\n{size_text(run.shape)}" for i, run in enumerate(runs)]
            sizes = [self._label_px(text) for text in labels]
        label_w = max((w for w, _ in sizes), default=0.0) + LABEL_GAP_PX
        label_h = max((h for _, h in sizes), default=0.0)
        axis = self.runs_plot.getAxis("bottom")
        axis.setHeight(int(label_h + 14))
        width = max(self.runs_plot.getViewBox().width(), 1.0)
        n = max(len(runs), 1)
        margin = 0.6
        if width > label_w:  # half a label beyond the first and last run
            margin = max(margin, label_w * (n - 1) / (2 * (width - label_w)) + 0.05)
        span = n - 1 + 2 * margin
        step = max(1, int(np.ceil(label_w / (width / span)))) if runs else 1
        self.shown_runs = sorted(range(len(runs) - 1, -1, -step))  # the newest keeps its label
        self.ticks = [(float(i), labels[i]) for i in self.shown_runs]
        axis.setTicks([self.ticks])
        self.runs_plot.setXRange(-margin, n - 1 + margin, padding=0)
        # room above the peak line for its label, however short the plot
        height = max(self.runs_plot.getViewBox().height(), 1.0)
        label_px = _reference_label_px()
        top = self.peak / max(1.0 - label_px / height, 0.25)
        self.runs_plot.setYRange(0, max(HEADROOM * self.peak, top), padding=0)
        self._place_cublas_label()
        for i in self.shown_runs:
            text = pg.TextItem(
                f"{runs[i].gflops:,.0f}", color=palette.FOREGROUND, anchor=(0.5, 1.3)
            )
            text.setPos(i, runs[i].gflops)
            self.runs_plot.addItem(text)
            self._value_texts.append(text)
        self._clear_reference_labels()

    def _clear_reference_labels(self) -> None:
        """Move a value label that would hide under the cuBLAS or peak label (both drawn on top)
        beside its point, else below it, inside the plot."""
        labels = [line.label for line in (self.cublas_line, self.peak_line) if line.isVisible()]
        inside = self.runs_plot.getViewBox().sceneBoundingRect()  # clear of the axes' labels
        for text in self._value_texts:
            text.setVisible(True)
            for anchor in VALUE_ANCHORS:
                text.setAnchor(anchor)
                text.updateTransform(force=True)
                box = text.sceneBoundingRect()
                clear = not any(box.intersects(label.sceneBoundingRect()) for label in labels)
                if clear and inside.contains(box):
                    break
            else:  # no room in a short plot: the hover still gives the number
                text.setVisible(False)

    def describe_run(self, index: int) -> str:
        """The hover text of one run: everything its short label leaves out."""
        run = self.session.plotted_runs[index]
        m, n, k = run.shape
        text = tr("run #{i}: {kernel} {labels}, M×N×K = {m}×{n}×{k}, {source}").format(
            i=index + 1,
            kernel=run.kernel,
            labels=run.labels,
            m=m,
            n=n,
            k=k,
            source=tr("simulated") if run.backend == "sim" else tr("recorded on a GPU"),
        )
        text += "\n" + tr("{v:,.0f} GFLOP/s").format(v=run.gflops)
        if run.cublas_gflops:
            text += " · " + tr("{pct:.1f}% of cuBLAS at this size ({v:,.0f} GFLOP/s)").format(
                pct=100 * run.gflops / run.cublas_gflops, v=run.cublas_gflops
            )
        trace = self.session.trace
        device = trace.manifest.get("device") if trace else None
        ceiling = configuration_ceiling(run.kernel, dict(run.params), *run.shape, device)
        if ceiling is not None:
            text += "\n" + tr("shared memory alone allows {v:,.0f} GFLOP/s (model)").format(
                v=ceiling.gflops
            )
        return text

    def _on_move(self, scene_pos) -> None:
        vb = self.runs_plot.getViewBox()
        runs = self.session.plotted_runs
        if not runs or not vb.sceneBoundingRect().contains(scene_pos):
            self.canvas.setToolTip("")
            return
        x = vb.mapSceneToView(QPointF(scene_pos)).x()
        i = int(round(x))
        self.canvas.setToolTip(
            self.describe_run(i) if 0 <= i < len(runs) and abs(x - i) < 0.45 else ""
        )

    def _update_lines(self) -> None:
        trace = self.session.trace
        cublas = None  # the current trace's own baseline, not the last run's
        if self.session.ladder:  # the ladder's own, measured beside its rungs
            cublas = float(np.median([r.cublas_gflops for r in self.session.ladder]))
        elif trace is not None:
            cublas = trace.manifest["stats"].get("cublas_gflops")
        self.cublas_line.setVisible(bool(cublas))
        dtype = trace.dtype if trace is not None else "float32"
        if cublas:
            self.cublas_line.setValue(cublas)
            what = tr("cuBLAS SGEMM at this size: {v:,.0f} GFLOP/s")
            if dtype != "float32":
                what = tr("cuBLAS {dtype} GEMM, this size: {v:,.0f} GFLOP/s")
            self.cublas_line.label.setFormat(what.format(v=cublas, dtype=dtype))
        peak, dev = peak_gflops(trace.manifest.get("device") if trace is not None else None, dtype)
        if dtype == "float32":
            text = tr("FP32 peak: {v:,.0f} GFLOP/s = {sms} SMs × {fma} FMA/clk × 2 × {ghz:.2f} GHz")
            short = tr("FP32 peak: {v:,.0f} GFLOP/s").format(v=peak)  # the formula would not fit
            fma = dev["fp32_fma_per_clk_per_sm"]
        else:
            text = tr(
                "Tensor Core peak ({dtype}, dense): {v:,.0f} GFLOP/s = {sms} SMs × {fma} FMA/clk "
                "× 2 × {ghz:.2f} GHz"
            )
            short = tr("Tensor Core peak: {v:,.0f} GFLOP/s").format(v=peak)
            fma = dev["tensor_fma_per_clk_per_sm"]
        label = text.format(
            v=peak, dtype=dtype, sms=dev["sm_count"], fma=fma, ghz=dev["clock_mhz"] / 1000
        )
        if trace is not None:
            self.cublas_line.setToolTip(
                tr("cuBLAS at the current trace's size ({size})").format(
                    size=size_text(trace.shape)
                )
            )
        for line in (self.peak_line, self.rate_peak_line):
            line.setValue(peak)
            line.label.setFormat(short)
        # above the peak it is off the plot: the multiply-adds bind first
        ceiling = self.ceiling  # None without a trace
        self.rate_ceiling_line.setVisible(ceiling is not None and ceiling.gflops <= peak)
        if ceiling is not None:
            self.rate_ceiling_line.setValue(ceiling.gflops)
            self.rate_ceiling_line.label.setFormat(
                tr("shared memory alone: {v:,.0f} GFLOP/s (model)").format(v=ceiling.gflops)
            )
        issue = self.issue
        self.rate_issue_line.setVisible(issue is not None)
        if issue is not None:
            self.rate_issue_line.setValue(issue.gflops)
            self.rate_issue_line.label.setFormat(
                tr("issue alone: {v:,.0f} GFLOP/s (ptxas's k loop)").format(v=issue.gflops)
            )
        self._place_cublas_label()
        self._place_rate_labels()
        self.setToolTip(label)

    def _on_playhead(self, ns: int) -> None:
        self._syncing = True
        self.playhead.setValue(ns / 1000.0)
        self._syncing = False

    def _on_drag(self) -> None:
        if not self._syncing:
            self.session.set_playhead(int(round(self.playhead.value() * 1000.0)))

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._wrap_titles(event.size().width())  # the canvas spans the view's width

    def _wrap_titles(self, width: int | None = None) -> None:
        for plot in (self.runs_plot, self.rate_plot):
            palette.wrap_title(plot, self.width() if width is None else width)

    # -- texts -------------------------------------------------------------------------------
    def _runs_title(self) -> None:
        title = (
            tr("The ladder to cuBLAS, one run (GFLOP/s)")
            if self.session.ladder is not None
            else tr("Throughput of every run (GFLOP/s)")
        )
        self.runs_plot.setTitle(title, color=palette.hexcolor(palette.FOREGROUND))
        self._wrap_titles()

    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        self._runs_title()
        self.runs_plot.setLabel("left", tr("GFLOP/s"))
        self.runs_plot.setLabel("bottom", tr("run (configuration)"))
        self.rate_plot.setTitle(
            tr("FLOP rate inside the kernel over time (current trace)"),
            color=palette.hexcolor(palette.FOREGROUND),
        )
        self._wrap_titles()
        self.rate_plot.setLabel("left", tr("GFLOP/s"))
        self.rate_plot.setLabel("bottom", tr("time since kernel start (µs)"))
        cuda, simulated = palette.BACKEND_STYLE["cuda"], palette.BACKEND_STYLE["sim"]
        legend = (
            f'<span style="color:{palette.hexcolor(cuda["brush"])}">&#9679;</span> '
            + tr("recorded on a GPU")
            + f' &nbsp; <span style="color:{palette.hexcolor(simulated["pen"])}">&#9671;</span> '
            + tr("simulated")
            + palette.mouse_hint(self.session, "&nbsp; " + tr("(hover a point for its details)"))
        )
        trace = self.session.trace
        self.title.setText(
            f"{palette.config_text(trace)} · "
            f"{palette.source_html(trace, self.session.source_label)}<br>{legend}"
            if trace is not None
            else legend
        )
        self._update_lines()


def _beside_lines(values: list[float], label: float, top: float) -> tuple[list[bool], bool]:
    """Each label next to its own line (lines from the top down): above where it fits under
    ``top`` and the line or label over it, else below (True). Also whether every label is
    clear: inside the plot and meeting no other line or label (``label``: its height)."""
    placed: list[bool] = []
    bound, clear = top, True  # labels and lines placed so far lie above bound
    for i, value in enumerate(values):
        below = value + label > bound
        low, high = (value - label, value) if below else (value, value + label)
        clear &= low >= 0.0 and not any(low < other < high for other in values[i + 1 :])
        placed.append(below)
        bound = low
    return placed, clear


def _reference_label_px() -> int:
    """The height of a reference line's label: one line of text and its frame."""
    return QFontMetrics(QFont()).height() + 8

"""Fragments (lesson 8 §20-23): which lane of a warp holds which element of an MMA operand.

Three grids, A (m × k), B (k × n) and C (m × n) of one Tensor Core instruction, each cell
coloured by the lane that holds it: hue by the lane's group (lane // 4), shade by its thread in
the group (lane % 4). A lane picked in the spin box or by a click lights up in all three.

Everything comes from the trace: the description's ``mma`` section (the instruction, its SASS,
the warp layout and each operand's lane -> element map) and, where a level-3 recording measured
them, ``trace.fragments`` (the same map read back on the GPU by the fragment probe). A measured
entry that differs from the description is outlined in red. A kernel without ``mma`` multiplies
on the CUDA cores and gets a placeholder.
"""

from __future__ import annotations

import colorsys
from functools import cache

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QPainterPath, QPen
from PySide6.QtWidgets import (
    QGraphicsPathItem,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSpinBox,
    QWidget,
)

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core.fragments import Operand, mma_of, operands_of
from matviz.core.kernel import WARP

GROUP = 4  # lanes per group: lane = 4 x group + thread (the PTX fragment tables' groupID)
# eight hues for the eight groups, spread so that neighbouring groups differ clearly
GROUP_HUES = (0.0, 0.08, 0.15, 0.30, 0.48, 0.58, 0.72, 0.86)
THREAD_LIGHTNESS = (0.56, 0.67, 0.77, 0.86)  # thread 0 darkest: lane numbers stay readable
WASH = 0.6  # other lanes, while one is selected: this far towards white
NONE_CODE = 2 * WARP  # an element no lane holds; + WARP washes any code out (select)
NONE_COLOR = (235, 235, 235)
SELECTED_COLOR = (20, 20, 20)
WRONG_COLOR = (214, 39, 40)  # a measured entry that differs from the description
WRONG_SHOWN = 6  # differences listed by name; the rest are counted
UNBOUNDED = 16_777_215.0  # a graphics item's default maximum size (QWIDGETSIZE_MAX)
TICK_POINTS = 7.5  # small axis numbers: the cells, not the axes, need the room


def lane_color(lane: int) -> tuple[int, int, int]:
    group, thread = divmod(int(lane), GROUP)
    hue = GROUP_HUES[group % len(GROUP_HUES)]
    r, g, b = colorsys.hls_to_rgb(hue, THREAD_LIGHTNESS[thread % GROUP], 0.72)
    return round(r * 255), round(g * 255), round(b * 255)


def _washed(rgb: np.ndarray) -> np.ndarray:
    return np.round(rgb + (255 - rgb) * WASH)


@cache
def fragment_lut() -> np.ndarray:
    """Code lane (0-31): the lane's colour; NONE_CODE: no lane holds it; code + 32: the same,
    washed out."""
    lut = np.empty((256, 4), np.uint8)
    lut[:, :3], lut[:, 3] = NONE_COLOR, 255
    colours = [(lane, lane_color(lane)) for lane in range(WARP)] + [(NONE_CODE, NONE_COLOR)]
    for code, colour in colours:
        rgb = np.array(colour, float)
        lut[code, :3] = rgb
        lut[code + WARP, :3] = _washed(rgb)
    return lut


def _cosmetic_pen(color: tuple[int, int, int], width: float) -> QPen:
    pen = QPen(QColor(*color))
    pen.setWidthF(width)
    pen.setCosmetic(True)  # the same width at any zoom
    pen.setJoinStyle(Qt.MiterJoin)
    return pen


def _cells_path(cells) -> QPainterPath:
    path = QPainterPath()
    for r, c in cells:
        path.addRect(QRectF(c, r, 1, 1))
    return path


class Panel:
    """One operand's grid: the lane colours, lane numbers, the selected lane's outlines and the
    red outlines of measured entries that differ from the description."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.plot = plot
        palette.style_plot(plot)
        plot.hideButtons()
        plot.setMenuEnabled(False)
        plot.getViewBox().setAspectLocked(True)
        plot.getViewBox().setMouseEnabled(False, False)
        plot.getViewBox().setDefaultPadding(0.02)
        plot.setContentsMargins(0, 0, 0, 0)
        plot.layout.setSpacing(0)
        font = QFont()
        font.setPointSizeF(TICK_POINTS)
        for name in ("left", "bottom"):
            plot.getAxis(name).setStyle(tickFont=font, tickTextOffset=2, tickLength=-4)
        plot.getAxis("left").setWidth(20)
        self.image = palette.matrix_image(plot)
        self.lines = palette.cell_lines(plot)
        self.labels = palette.CellLabels()
        plot.addItem(self.labels)
        self.selected = QGraphicsPathItem()
        self.selected.setPen(_cosmetic_pen(SELECTED_COLOR, 2.5))
        self.selected.setZValue(10)
        plot.addItem(self.selected)
        self.wrong = QGraphicsPathItem()
        self.wrong.setPen(_cosmetic_pen(WRONG_COLOR, 3.0))
        self.wrong.setZValue(11)
        plot.addItem(self.wrong)
        self.operand: Operand | None = None

    def show(self, operand: Operand) -> None:
        self.operand = operand
        rows, cols = operand.rows, operand.cols
        row_axis, col_axis = operand.axes
        self.plot.setTitle(
            f"<b>{operand.name}</b> ({row_axis} × {col_axis})", color=palette.FOREGROUND, size="9pt"
        )
        for name, n in (("left", rows), ("bottom", cols)):
            self.plot.getAxis(name).setTicks([palette.index_ticks(n, 4)])
        self.lines.setPath(palette.cell_borders(cols, rows))
        texts = [[""] * cols for _ in range(rows)]
        for r, c in zip(*np.nonzero(operand.owner >= 0), strict=True):
            many = operand.holders[r, c] > 1
            texts[r][c] = f"{operand.owner[r, c]}{'+' if many else ''}"
        self.labels.set_texts(texts)
        wrong: set[tuple[int, int]] = set()
        for _, _, measured, described in operand.mismatches():
            wrong.update(x for x in (operand.cell(measured), operand.cell(described)) if x)
        self.wrong.setPath(_cells_path(sorted(wrong)))
        self.plot.setRange(xRange=(0, cols), yRange=(0, rows), padding=0.02)
        self.select(-1)

    def select(self, lane: int) -> None:
        operand = self.operand
        if operand is None:
            return
        codes = np.where(operand.owner >= 0, operand.owner, NONE_CODE).astype(np.uint8)
        cells: list[tuple[int, int]] = []
        if lane >= 0:
            cells = [(r, c) for r, c, _ in operand.held_by(lane)]
            mine = np.zeros(codes.shape, bool)
            for r, c in cells:
                mine[r, c] = True
            codes = np.where(mine, codes, codes + WARP)  # the others wash out
            codes[mine] = lane
        self.image.setImage(codes, lut=fragment_lut(), levels=(0, 255), autoLevels=False)
        self.selected.setPath(_cells_path(cells))

    def hide(self) -> None:
        self.operand = None
        self.plot.setVisible(False)

    def cell_at(self, scene_pos) -> tuple[Operand, int, int] | None:
        """(operand, row, col) of the cell under a scene position, or None."""
        vb, operand = self.plot.getViewBox(), self.operand
        if operand is None or not vb.sceneBoundingRect().contains(scene_pos):
            return None
        pos = vb.mapSceneToView(QPointF(scene_pos))
        r, c = int(np.floor(pos.y())), int(np.floor(pos.x()))
        if 0 <= r < operand.rows and 0 <= c < operand.cols:
            return operand, r, c
        return None


class FragmentsView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.mma: dict | None = None
        self.operands: list[Operand] = []

        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.warp_label = QLabel()
        self.warp_box = QSpinBox()
        self.warp_box.valueChanged.connect(self._update_summary)
        self.lane_label = QLabel()
        self.lane_box = QSpinBox()
        self.lane_box.setRange(-1, WARP - 1)
        self.lane_box.setValue(-1)
        self.lane_box.valueChanged.connect(self.set_lane)
        self.source = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.legend = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground(palette.BACKGROUND)
        self.canvas.setMinimumHeight(150)
        self.canvas.ci.setContentsMargins(0, 0, 0, 0)
        self.canvas.ci.layout.setHorizontalSpacing(4)
        self.panels = [Panel(self.canvas.addPlot(row=0, col=i)) for i in range(3)]
        for i in range(3):
            self.canvas.ci.layout.setColumnStretchFactor(i, 1)
        self.canvas.scene().sigMouseClicked.connect(self._on_click)
        self.canvas.scene().sigMouseMoved.connect(self._on_move)
        self.lane_text = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.summary = QLabel(textFormat=Qt.RichText, wordWrap=True)
        row = QHBoxLayout()
        row.addWidget(self.title, 1)
        for widget in (self.warp_label, self.warp_box, self.lane_label, self.lane_box):
            row.addWidget(widget)
        # the canvas grows only as tall as its square cells need; the rest stays below the texts
        self._fit_timer = QTimer(self, singleShot=True, interval=0)
        self._fit_timer.timeout.connect(self._fit_canvas)
        below = QWidget()
        below.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Expanding)
        for label in (self.source, self.legend, self.lane_text, self.summary):
            label.setAlignment(Qt.AlignLeft | Qt.AlignTop)
            label.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Maximum)
        self.stack = palette.stacked(
            self, self.placeholder, row, self.source, self.legend, (self.canvas, 100),
            self.lane_text, self.summary, (below, 1),
        )  # fmt: skip
        session.traceChanged.connect(self.refresh)
        session.selectionChanged.connect(self._update_summary)
        self.refresh()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit_timer.start()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        self._fit_timer.start()

    def _fit_canvas(self) -> None:
        """Cap the canvas at the height its grids need at its width (no empty band above and
        below aspect-locked grids)."""
        need = 0.0
        for panel in self.panels:
            if panel.operand is None or not panel.plot.isVisible():
                continue
            vb = panel.plot.getViewBox()
            frame = self.canvas.height() - vb.height()  # title, axis, margins
            ratio = panel.operand.rows / panel.operand.cols
            need = max(need, frame + vb.width() * ratio * 1.05 + 2)
        if need:
            self.canvas.setMaximumHeight(max(int(need), self.canvas.minimumHeight()))

    # -- session -> view ---------------------------------------------------------------------
    @property
    def lane(self) -> int:
        return int(self.lane_box.value())

    @property
    def measured(self) -> bool:
        return any(op.measured is not None for op in self.operands)

    def refresh(self) -> None:
        trace = self.session.trace
        self.mma = mma_of(trace)
        self.operands = operands_of(trace)
        self.stack.setCurrentIndex(1 if self.operands else 0)
        if trace is not None and self.operands:
            self.warp_box.blockSignals(True)
            self.warp_box.setRange(0, max(trace.config.warps - 1, 0))
            self.warp_box.blockSignals(False)
            first = int(self.mma.get("first_warp", 0)) if self.mma else 0
            if self.warp_box.value() < first:  # show a warp that holds accumulators
                self.warp_box.setValue(first)
            for i, panel in enumerate(self.panels):
                shown = i < len(self.operands)
                # hidden panels give their room to the others (wgmma: C alone, 16 x N)
                self.canvas.ci.layout.setColumnStretchFactor(i, 1 if shown else 0)
                panel.plot.setMaximumWidth(UNBOUNDED if shown else 0)
                if shown:
                    panel.plot.setVisible(True)
                    panel.show(self.operands[i])
                else:
                    panel.hide()
            self.set_lane(self.lane)
            self._fit_timer.start()
        self.retranslate()

    def set_lane(self, lane: int) -> None:
        """Light up ``lane``'s elements in every grid (-1: none)."""
        lane = int(lane)
        if lane != self.lane:
            self.lane_box.setValue(lane)  # comes back here through valueChanged
            return
        for panel in self.panels:
            panel.select(lane)
        self._update_lane_text()

    def _on_click(self, event) -> None:
        if not self.operands or event.button() != Qt.LeftButton:
            return
        for panel in self.panels:
            hit = panel.cell_at(event.scenePos())
            if hit is not None:
                operand, r, c = hit
                lane = int(operand.owner[r, c])
                self.set_lane(-1 if lane == self.lane else lane)  # a second click: none
                return

    def _on_move(self, scene_pos) -> None:
        for panel in self.panels:
            hit = panel.cell_at(scene_pos)
            if hit is not None:
                self.canvas.setToolTip(self.describe(*hit))
                return
        self.canvas.setToolTip("")

    def describe(self, operand: Operand, r: int, c: int) -> str:
        """Tooltip of one cell: its coordinates and each lane (and slots) holding it."""
        row_axis, col_axis = operand.axes
        element = r * operand.cols + c
        holders = [
            tr("lane {lane}, slots {slots}").format(
                lane=lane, slots=", ".join(str(s) for s in np.flatnonzero(slots == element))
            )
            for lane, slots in enumerate(operand.shown)
            if (slots == element).any()
        ]
        where = f"{operand.name} ({row_axis} = {r}, {col_axis} = {c})"
        return where + ": " + ("; ".join(holders) or tr("no lane holds it"))

    # -- texts -------------------------------------------------------------------------------
    def retranslate(self) -> None:
        self.placeholder.setText(
            tr("No trace loaded")
            if self.session.trace is None
            else tr(
                "This kernel multiplies on the CUDA cores (FFMA): it has no Tensor Core fragments."
            )
        )
        self.title.setText(
            "<b>" + tr("Fragments: which lane holds which element (lesson 8 §20-23)") + "</b>"
        )
        self.warp_label.setText(tr("warp"))
        self.lane_label.setText(tr("lane"))
        self.lane_box.setSpecialValueText(tr("none"))
        swatches = " ".join(
            f'<span style="color:{palette.hexcolor(lane_color(GROUP * g))}">&#9632;</span>{g}'
            for g in range(WARP // GROUP)
        )
        legend = tr("lane = 4 × group + thread · colour by group {swatches}, lighter for "
                    "threads 1, 2, 3").format(swatches=swatches)  # fmt: skip
        if any((op.holders > 1).any() for op in self.operands):
            legend += " · " + tr("“+”: more lanes hold it (hover a cell for all of them)")
        self.legend.setText(legend)
        self._update_source()
        self._update_lane_text()
        self._update_summary()

    def _update_source(self) -> None:
        trace = self.session.trace
        if trace is None or not self.operands:
            self.source.setText("")
            return
        if self.measured:
            wrong = sum(len(op.mismatches()) for op in self.operands)
            text = "<b>" + tr("Lanes measured on the GPU (fragment probe)") + "</b> · "
            text += (
                f'<b style="color:{palette.hexcolor(WRONG_COLOR)}">'
                + tr("lane/slot entries that differ from the description: {n} (red)").format(
                    n=wrong
                )
                + "</b>"
                if wrong
                else tr("exactly as the description says")
            )
        else:
            text = "<b>" + tr("Lanes from the kernel's description") + "</b> · "
            text += (
                tr("not measured: a simulated trace")
                if trace.is_simulated
                else tr("not measured: record at level 3 to measure them")
            )
        self.source.setText(text)

    @staticmethod
    def held_html(operand: Operand, lane: int) -> str:
        """'A (m, k): (1,2)₀,₈ (1,3)₁,₉ …': the elements ``lane`` holds, its slots below."""
        row_axis, col_axis = operand.axes
        wrong = {slot for w_lane, slot, _, _ in operand.mismatches() if w_lane == lane}
        items = []
        for r, c, slots in operand.held_by(lane):
            sub = ",".join(str(s) for s in slots)
            item = f"({r},{c})<sub>{sub}</sub>"
            if wrong & set(slots):
                item = f'<span style="color:{palette.hexcolor(WRONG_COLOR)}">{item}</span>'
            items.append(item)
        return f"<b>{operand.name}</b> ({row_axis},{col_axis}) " + (" ".join(items) or "–")

    def _update_lane_text(self) -> None:
        if not self.operands:
            self.lane_text.setText("")
            return
        lane = self.lane
        if lane < 0:
            self.lane_text.setText(
                tr("Pick a lane to list the elements it holds and the slots (fragment.x[i]) "
                   "that hold them.")
                + palette.mouse_hint(self.session, tr("Or click a cell."))
            )  # fmt: skip
            return
        head = tr("<b>lane {lane}</b> (group {group}, thread {thread}) holds, with its slots:")
        parts = "; ".join(self.held_html(op, lane) for op in self.operands)
        self.lane_text.setText(
            head.format(lane=lane, group=lane // GROUP, thread=lane % GROUP) + " " + parts
        )

    def _update_summary(self, *_args) -> None:
        mma = self.mma
        if mma is None or not self.operands:
            self.summary.setText("")
            return
        # the trace schema guarantees these fields (DescribedMma)
        m, n, k = (int(x) for x in mma["shape"])
        lines = [
            tr("Each <b>{instruction}</b> is <b>{sass}</b> on the Tensor Cores: "
               "{m} × {n} × {k} = {macs} multiply-adds; {types}.").format(
                instruction=mma["instruction"], sass=mma["sass"],
                m=m, n=n, k=k, macs=m * n * k,
                types=", ".join(f"{op.name} {op.dtype}" for op in self.operands),
            ),
        ]  # fmt: skip
        shared = [str(op) for op in mma.get("from_shared", [])]
        if shared:
            lines.append(
                tr("{operands}: the Tensor Cores read them straight from shared memory through "
                   "matrix descriptors, so no lane holds them; only C's accumulators are in "
                   "registers.").format(operands=", ".join(shared))
            )  # fmt: skip
        warps_m, warps_n = (int(x) for x in mma["warps"])
        wt_m, wt_n = (int(x) for x in mma["warp_tile"])
        warp = int(self.warp_box.value())
        first = int(mma.get("first_warp", 0))
        if warp < first:
            lines.append(
                tr("Warp {warp} issues no MMA: warps 0–{last} copy the tiles (the producer) and "
                   "hold no accumulators.").format(warp=warp, last=first - 1)
            )
            self.summary.setText("<br>".join(lines))
            return
        r0, c0 = ((warp - first) // warps_n) * wt_m, ((warp - first) % warps_n) * wt_n
        group = int(mma.get("group_threads", 32)) // 32  # warps that issue one MMA together
        if group > 1:
            lines.append(
                tr("In block {block}, warp {warp} (warp {index} of its warpgroup of {group}) "
                   "owns C rows {r0}–{r1}, columns {c0}–{c1} of the block's {rows} × {cols} "
                   "tile: its {wm}-row share of the warpgroup's {m} × {n} accumulator, laid out "
                   "as drawn.").format(
                    block=self.session.selected_block, warp=warp, index=(warp - first) % group,
                    group=group, r0=r0, r1=r0 + wt_m - 1, c0=c0, c1=c0 + wt_n - 1,
                    rows=warps_m * wt_m, cols=warps_n * wt_n, wm=wt_m, m=m, n=n,
                )
            )  # fmt: skip
            self.summary.setText("<br>".join(lines))
            return
        lines.append(
            tr("In block {block}, warp {warp} owns C rows {r0}–{r1}, columns {c0}–{c1} of the "
               "block's {rows} × {cols} tile: {fm} × {fn} fragments of {m} × {n}, each laid out "
               "as drawn.").format(
                block=self.session.selected_block, warp=warp, r0=r0, r1=r0 + wt_m - 1,
                c0=c0, c1=c0 + wt_n - 1, rows=warps_m * wt_m, cols=warps_n * wt_n,
                fm=max(wt_m // m, 1), fn=max(wt_n // n, 1), m=m, n=n,
            )
        )  # fmt: skip
        repeats = [op for op in self.operands if op.repeat_half()]
        if repeats:
            half = repeats[0].repeat_half()
            lines.append(
                tr("{operands}: slots {half}–{last} repeat slots 0–{prev}, so each lane holds "
                   "each of its elements twice (a WMMA register layout kept from Volta).").format(
                    operands=", ".join(op.name for op in repeats),
                    half=half, last=2 * half - 1, prev=half - 1,
                )
            )  # fmt: skip
        if self.measured and any(op.mismatches() for op in self.operands):
            lines.append(self._wrong_text())
        self.summary.setText("<br>".join(lines))

    def _wrong_text(self) -> str:
        wrong = [(op, *w) for op in self.operands for w in op.mismatches()]
        items = []
        for op, lane, slot, measured, described in wrong[:WRONG_SHOWN]:
            got, want = op.cell(measured), op.cell(described)
            items.append(
                tr("{operand} lane {lane} slot {slot} holds {got}, described {want}").format(
                    operand=op.name, lane=lane, slot=slot,
                    got=f"({got[0]},{got[1]})" if got else "–",
                    want=f"({want[0]},{want[1]})" if want else "–",
                )
            )  # fmt: skip
        if len(wrong) > WRONG_SHOWN:
            items.append(tr("{n} more").format(n=len(wrong) - WRONG_SHOWN))
        return (
            f'<span style="color:{palette.hexcolor(WRONG_COLOR)}">'
            + tr("Measured ≠ described:")
            + " "
            + "; ".join(items)
            + "</span>"
        )

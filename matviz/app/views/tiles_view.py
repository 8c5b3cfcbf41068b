"""Which tiles of A, B and C the selected block works on, and its shared-memory arrays.

Left: the textbook layout (B above C, A left of C) cut into the block's C tile and k-steps; the
block's row of A and column of B are tinted, k-steps it already used darker, the k-step at the
playhead strongest. Right: the kernel's shared arrays (from its description) as they lie in
shared memory, rows of cols + pad words, each cell labelled with the global element it holds
(from the description's store sites; painted when a cell is big enough, hover always works).

The shared arrays move with the playhead: during a phase with store sites the cells fill warp by
warp (the fraction of the phase elapsed gives how many warps, in warp order, have stored, from
the store sites per warp); during a phase with load sites the cells the selected thread reads in
this k-step are tinted and the ones it reads at this point of the phase are strong (from the
load sites of the program for that thread's warp and lane). Padding cells stay grey. The thread
is picked with the spin box or by clicking an element of C.

Top left, the block's own tile of C, element by element (from the description's stores of C,
:mod:`matviz.core.c_tile`): tinted by warp, each thread's elements outlined (its micro-tile), the
selected thread's filled; a click there picks the thread that computes the element.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QPainterPath, QPen, QTransform
from PySide6.QtWidgets import (
    QGraphicsPathItem,
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QWidget,
)

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.live_label import live
from matviz.app.views.shared_cells import (
    K_AXIS,
    HeldCells,
    ThreadReads,
    held_cells,
    in_flight_cells,
    load_phases,
    store_phases,
    thread_of_element,
    thread_reads,
)
from matviz.core import banks, c_tile
from matviz.core.kernel import WARP
from matviz.core.recent import Recent
from matviz.core.timeline import BlockState, Timeline

A_TINTS = ((236, 238, 242), (200, 220, 245), (120, 165, 225), (25, 95, 200))
B_TINTS = ((236, 238, 242), (205, 238, 210), (125, 200, 140), (20, 140, 60))
SMEM = {"A": (214, 230, 250), "B": (214, 242, 220)}
ZERO, PAD_GREY = (255, 248, 215), (190, 190, 190)
NOT_YET = (252, 252, 252)  # a cell no warp has stored yet in this load phase
LATEST = {"A": (120, 165, 225), "B": (125, 200, 140)}  # cells the last warp shown just stored
READ, READ_NOW = (255, 205, 130), (230, 90, 0)  # the selected thread's reads: this step, now
RING = {"A": (236, 242, 250), "B": (236, 248, 238)}  # slots of the other k-steps in flight
# image codes of a shared array's cells
FILLED, ZERO_CODE, PAD_CODE, EMPTY_CODE, LATEST_CODE, READ_CODE, NOW_CODE, RING_CODE = range(8)
MATRICES = {"B": (0, 1), "A": (1, 0), "C": (1, 1)}  # grid positions; shared arrays in column 2
TILE = "tile"  # the block's C tile, element by element, at (0, 0)
HELD_CACHE = 8  # k-steps whose shared cells the view keeps (a ring of up to 5 slots and more)
COLUMN_STRETCH = (2, 2, 4)  # the canvas's columns: C tile and A; B and C; the shared arrays
TILE_MARGIN = 16  # px of a column beside its plot's title
WARP_TINTS = ((225, 232, 244), (244, 232, 214))  # alternate warps of the C tile
THREAD_LINE, WARP_LINE = (150, 150, 150), (60, 60, 60)


class TilesView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.timeline: Timeline | None = None
        self.ktile = -1  # k-step drawn (at the playhead), -1 = none
        self._drawn: tuple[int, int] | None = None
        self.state = BlockState.WAITING
        self.cells: dict[str, HeldCells] = {}  # the shared arrays' content at this k-step
        # a ring of slots (in_flight > 1): what the other k-steps in flight put in theirs
        self.ring: dict[str, HeldCells] = {}
        self._held_cache: Recent[dict[str, HeldCells]] = Recent(HELD_CACHE)
        self._rects: dict[str, QRectF] = {}  # A, B, C in element units
        self.thread = 0  # the selected thread of the block (its reads light up)
        self.mode = "full"  # "load": cells fill by warp; "compute": the thread's reads; "full"
        self.fraction = 0.0  # of the phase at the playhead elapsed
        self.warps_shown = 0  # in a load phase: warps whose stores are drawn
        self.now_cells: dict[str, set[tuple[int, int]]] = {}  # the thread's reads now
        self.reads: ThreadReads | None = None
        self._step_key: tuple | None = None
        self._drawn_smem: dict[str, tuple] = {}  # array -> step key of the codes it shows
        self._reads_key: tuple | None = None

        self.placeholder = QLabel(alignment=Qt.AlignCenter)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.caption = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.no_smem = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.thread_label = QLabel()
        self.thread_box = QSpinBox()
        self.thread_box.valueChanged.connect(self.set_thread)
        self.activity = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground(palette.BACKGROUND)
        self.panels: dict[str, pg.PlotItem] = {}
        self.panel_cols: dict[str, int] = {}  # the canvas column of each panel
        self.images: dict[str, pg.ImageItem] = {}
        self.labels: dict[str, palette.CellLabels] = {}
        self.borders: dict[str, QGraphicsPathItem] = {}
        self.hatch: dict[str, QGraphicsRectItem] = {}
        self.now_box: dict[str, QGraphicsRectItem] = {}  # outlines the cells read now
        # beside the canvas, not in it: a tall legend in the canvas's grid made its row tall
        # and squeezed the shared array below
        self.legend = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.legend.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        self.legend.setFixedWidth(190)
        for name, (r, c) in MATRICES.items():
            plot = self._add_panel(name, r, c)
            plot.hideAxis("left")
            plot.hideAxis("bottom")
            plot.getViewBox().setAspectLocked(True)
            plot.getViewBox().setMouseEnabled(False, False)
        tile = self._add_panel(TILE, 0, 0)
        tile.hideAxis("left")
        tile.hideAxis("bottom")
        tile.getViewBox().setAspectLocked(True)
        tile.getViewBox().setMouseEnabled(False, False)
        self.warp_lines = palette.cell_lines(tile, WARP_LINE)
        self.warp_lines.setPen(_cosmetic_pen(WARP_LINE, 2.0))
        self.borders[TILE].setPen(_cosmetic_pen(THREAD_LINE))
        self.owner = np.zeros((1, 1), np.int32)  # the block's C tile: the thread of each element
        for col, stretch in enumerate(COLUMN_STRETCH):
            self.canvas.ci.layout.setColumnStretchFactor(col, stretch)
        # titles wrap to their column once the canvas has its width (after the layout ran)
        self._wrap_timer = QTimer(self, singleShot=True, interval=0)
        self._wrap_timer.timeout.connect(self._wrap_titles)
        self.canvas.scene().sigMouseMoved.connect(self._on_move)
        self.canvas.scene().sigMouseClicked.connect(self._on_click)

        body = QHBoxLayout()
        body.addWidget(live(self.legend))
        body.addWidget(self.canvas, 1)
        row = QHBoxLayout()
        row.addWidget(self.thread_label)
        row.addWidget(self.thread_box)
        row.addWidget(live(self.activity), 1)
        self.stack = palette.stacked(
            self, self.placeholder, live(self.title), row, body, self.no_smem, live(self.caption)
        )
        session.traceChanged.connect(self.refresh)
        session.playheadChanged.connect(self._update)
        session.selectionChanged.connect(self._update)
        self.refresh()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._wrap_timer.start()

    def _wrap_titles(self) -> None:
        share = self.canvas.width() / sum(COLUMN_STRETCH)
        for name, plot in self.panels.items():
            palette.wrap_title(plot, share * COLUMN_STRETCH[self.panel_cols[name]], TILE_MARGIN)
            plot.layout.activate()  # its title row takes the wrapped height now, not later

    def _add_panel(self, name: str, row: int, col: int) -> pg.PlotItem:
        self.panel_cols[name] = col
        plot = self.canvas.addPlot(row=row, col=col)
        palette.style_plot(plot)
        plot.hideButtons()
        plot.setMenuEnabled(False)
        self.images[name] = palette.matrix_image(plot)
        self.borders[name] = palette.cell_lines(plot)
        self.panels[name] = plot
        return plot

    # -- geometry of the selected block ------------------------------------------------------
    @property
    def config(self):
        return self.session.trace.config

    def _n_k(self) -> int:
        """k-steps drawn along A and B (a kernel without k-steps reads K as one piece)."""
        return max(self.config.n_steps, 1)

    def _block(self) -> tuple[int, int]:
        b = self.session.trace.blocks[self.session.selected_block]
        return int(b["bx"]), int(b["by"])

    def _held(self, config, block: tuple[int, int], t: int) -> dict[str, HeldCells]:
        """held_cells, kept for the last few k-steps: a ring's slots reappear as the playhead
        walks on (step t + 1's slots are step t's ring)."""
        return self._held_cache.get((block, t), lambda: held_cells(config, block, t))

    def element(self, array: str, r: int, c: int) -> str:
        """Global element held by shared cell ``array[r][c]`` in the drawn k-step (or, in a
        ring of slots, by the k-step in flight in that cell's slot)."""
        text = self.cells[array].text(r, c)
        ring = self.ring.get(array)
        return text or (ring.text(r, c) if ring is not None else "")

    def _shared_panels(self) -> None:
        """One panel per shared array of the kernel, in column 2 (rebuilt when they change)."""
        names = [arr.name for arr in self.config.shared]
        if names == list(self.labels):
            return
        for name in list(self.labels):
            self.canvas.removeItem(self.panels.pop(name))
            for table in (self.images, self.borders, self.labels, self.hatch, self.now_box):
                table.pop(name)
        for row, name in enumerate(names):
            plot = self._add_panel(name, row, 2)
            self.labels[name], self.hatch[name] = palette.CellLabels(), QGraphicsRectItem()
            self.hatch[name].setBrush(QBrush(QColor(90, 90, 90), Qt.BDiagPattern))
            self.hatch[name].setPen(QPen(Qt.NoPen))
            plot.addItem(self.labels[name])
            plot.addItem(self.hatch[name])
            box = self.now_box[name] = QGraphicsRectItem()
            pen = QPen(QColor(*READ_NOW))
            pen.setWidthF(2.5)
            pen.setCosmetic(True)  # visible however small the cells are drawn
            box.setPen(pen)
            box.setZValue(10)
            plot.addItem(box)

    # -- session -> view ---------------------------------------------------------------------
    def refresh(self) -> None:
        trace = self.session.trace
        self.timeline = self.session.timeline
        self._drawn = None  # force a redraw
        self._held_cache = Recent(HELD_CACHE)  # another trace: other cells
        self._step_key = self._reads_key = None
        self._drawn_smem = {}
        if trace is not None:
            self._shared_panels()
            self.thread_box.blockSignals(True)
            self.thread_box.setRange(0, self.config.threads - 1)
            # start on a thread that computes C (not a producer warp's)
            first = 32 * self.config.mma.first_warp if self.config.mma else 0
            self.thread = min(max(self.thread, first), self.config.threads - 1)
            self.thread_box.setValue(self.thread)
            self.thread_box.blockSignals(False)
            for widget in (self.thread_label, self.thread_box):
                widget.setVisible(self.config.uses_shared)
            gx, gy = trace.grid
            n_k = self._n_k()
            rows, cols = self.config.launch.c_tile
            depth = self.config.step_depth or trace.shape[2]  # no k-steps: K in one piece
            # cells in elements, so every matrix keeps its shape whatever the cells' shapes
            cells = {"A": (n_k, gy, depth, rows), "B": (gx, n_k, cols, depth)}
            cells["C"] = (gx, gy, cols, rows)
            for name, (w, h, sx, sy) in cells.items():
                self._rects[name] = QRectF(0, 0, w * sx, h * sy)
                self.borders[name].setPath(palette.cell_borders(w, h, 24))
                self.borders[name].setTransform(QTransform.fromScale(sx, sy))
                self.panels[name].getViewBox().setRange(
                    xRange=(0, w * sx), yRange=(0, h * sy), padding=0.04
                )
            self.owner = c_tile.owners(self.config)
            self.borders[TILE].setPath(_edges(self.owner))
            self.warp_lines.setPath(_edges(np.where(self.owner >= 0, self.owner // WARP, -1)))
            self._rects[TILE] = QRectF(0, 0, self.owner.shape[1], self.owner.shape[0])
            self.panels[TILE].getViewBox().setRange(
                xRange=(0, self.owner.shape[1]), yRange=(0, self.owner.shape[0]), padding=0.04
            )
            for arr in self.config.shared:
                plot = self.panels[arr.name]
                self.borders[arr.name].setPath(palette.cell_borders(arr.stride, arr.rows, 40))
                plot.getViewBox().setRange(
                    xRange=(0, arr.stride), yRange=(0, arr.rows), padding=0.02
                )
                self.hatch[arr.name].setRect(arr.cols, 0, arr.pad, arr.rows)
                palette.set_ticks(plot.getAxis("bottom"), [self._word_ticks(arr.cols, arr.pad)])
                palette.fitted_row_ticks(plot.getAxis("left"), arr.rows, 8)
            self._update()
        self.stack.setCurrentIndex(0 if trace is None else 1)
        self.retranslate()

    @staticmethod
    def _word_ticks(cols: int, pad: int) -> list[tuple[float, str]]:
        # one label over the padding columns: one per column overlapped beside a wide array
        padding = [(cols + pad / 2, tr("pad"))] if pad else []
        return palette.index_ticks(cols, 8) + padding

    def _update(self, *_args) -> None:
        """Cheap per frame: one block_phase call; images change only when the k-step does."""
        trace = self.session.trace
        if trace is None:
            return
        state, ktile = self.timeline.block_phase(
            self.session.selected_block, self.session.playhead_ns
        )
        ktile = -1 if ktile is None else int(ktile)
        self.state = BlockState(int(state))
        if self.state == BlockState.DONE and self.config.n_steps:
            ktile = self.config.n_steps - 1  # the last k-step is still in shared memory
        self._phase_progress(ktile)
        key = (self.session.selected_block, ktile)
        if key != self._drawn:
            self._drawn = key
            self.ktile = ktile
            self._draw_matrices()
            self._draw_smem()
            self._update_texts()
        else:
            self._draw_smem()  # cheap unless the warps shown or the thread's reads changed
        self._update_title()

    def _phase_progress(self, ktile: int) -> None:
        """Mode and fraction of the phase elapsed at the playhead, from the block's marks."""
        self.mode, self.fraction = "full", 0.0
        config, block = self.config, self.session.selected_block
        if not config.uses_shared or ktile < 0 or self.state == BlockState.DONE:
            return
        t = self.session.playhead_ns
        phase, row = self.timeline.phase_at(block, t), self.timeline.phase_row(block)
        if phase is None or row is None:
            return
        marks = self.session.trace.marks[row, ktile]
        begin, end = int(marks[phase.begin]), int(marks[phase.end])
        self.fraction = float(np.clip((t - begin) / max(end - begin, 1), 0.0, 1.0))
        if phase.name in store_phases(config):
            self.mode = "load"
        elif phase.name in load_phases(config):
            self.mode = "compute"

    def set_thread(self, tid: int) -> None:
        """Select thread ``tid`` of the block: its reads light up during compute."""
        if self.session.trace is None:
            return
        tid = int(min(max(tid, 0), self.config.threads - 1))
        self.thread = tid
        if self.thread_box.value() != tid:
            self.thread_box.setValue(tid)  # comes back here once, with nothing left to do
            return
        self._draw_tile()
        self._update()
        self._update_activity()

    def _draw_matrices(self) -> None:
        gx, gy = self.session.trace.grid
        n_k = self._n_k()
        bx, by = self._block()
        kt = np.arange(n_k)
        along = np.where(kt < self.ktile, 2, 1).astype(np.uint8)
        if 0 <= self.ktile < n_k:
            along[self.ktile] = 3
        a = np.zeros((gy, n_k), np.uint8)
        a[by] = along
        bm = np.zeros((n_k, gx), np.uint8)
        bm[:, bx] = along
        c = np.zeros((gy, gx), np.uint8)
        c[by, bx] = 3
        c_tints = (A_TINTS[0], A_TINTS[0], A_TINTS[0], palette.HIGHLIGHT)
        for name, codes, tints in (("A", a, A_TINTS), ("B", bm, B_TINTS), ("C", c, c_tints)):
            lut = np.array([(*t, 255) for t in tints], np.uint8)
            self.images[name].setImage(codes, lut=lut, levels=(0, 3), autoLevels=False)
            self.images[name].setRect(self._rects[name])  # scales the image it has now
        self._draw_tile()

    def _draw_tile(self) -> None:
        """The block's C tile: warps tinted in turn, the selected thread's elements strong."""
        codes = np.where(self.owner >= 0, (self.owner // WARP) % 2, 2).astype(np.uint8)
        codes[self.owner == self.thread] = 3
        lut = np.array([(*t, 255) for t in (*WARP_TINTS, palette.EMPTY, READ_NOW)], np.uint8)
        self.images[TILE].setImage(codes, lut=lut, levels=(0, 3), autoLevels=False)
        self.images[TILE].setRect(self._rects[TILE])

    def _draw_smem(self) -> None:
        config, block = self.config, self._block()
        t = max(self.ktile, 0)
        step_key = (block, t)
        if step_key != self._step_key:
            self._step_key = step_key
            self.cells = self._held(config, block, t)
            self.ring = in_flight_cells(config, block, t, self._held)
            for name, cells in self.cells.items():
                ring = self.ring.get(name)  # the other slots' cells where this step writes none
                shown = cells if ring is None else cells.over(ring)
                rows, cols = shown.row.shape
                self.labels[name].set_lazy(rows, cols, shown.longest_text(), shown.texts)
        reads_key = (block, t, self.thread)
        if reads_key != self._reads_key and config.uses_shared:
            self._reads_key = reads_key
            self.reads = thread_reads(config, self.thread, block, t)
        self.warps_shown = config.warps
        if self.mode == "load":
            self.warps_shown = int(np.ceil(self.fraction * config.warps))
        self.now_cells = {}
        if self.mode == "compute" and self.reads is not None:
            self.now_cells = self.reads.now(self.fraction)
        for name, cells in self.cells.items():
            codes = self.cell_codes(name)
            image = self.images[name]
            # unchanged codes: no re-render, no repaint of the cells and their labels
            if step_key != self._drawn_smem.get(name) or not np.array_equal(codes, image.image):
                self._drawn_smem[name] = step_key
                image.setImage(codes, lut=self._lut(cells), levels=(0, 7), autoLevels=False)
            now = sorted(self.now_cells.get(name, ()))
            box = self.now_box[name]
            box.setVisible(bool(now))
            if now:
                rows, cols = [r for r, _ in now], [c for _, c in now]
                box.setRect(
                    min(cols), min(rows), max(cols) - min(cols) + 1, max(rows) - min(rows) + 1
                )
        self._update_activity()

    @staticmethod
    def _lut(cells: HeldCells) -> np.ndarray:
        source = cells.array.source
        # an array staging neither input holds nothing a k-step wrote: blank, not padding grey
        unwritten = PAD_GREY if source else palette.EMPTY
        colours = (
            SMEM.get(source, SMEM["A"]), ZERO, unwritten, NOT_YET,
            LATEST.get(source, LATEST["A"]), READ, READ_NOW, RING.get(source, RING["A"]),
        )  # fmt: skip
        return np.array([(*c, 255) for c in colours], np.uint8)

    def cell_codes(self, name: str) -> np.ndarray:
        """The image codes of one shared array at the playhead (FILLED ... NOW_CODE)."""
        cells = self.cells[name]
        codes = np.where(cells.written, np.where(cells.inside, FILLED, ZERO_CODE), PAD_CODE)
        codes = codes.astype(np.uint8)
        ring = self.ring.get(name)
        if ring is not None:
            codes[ring.written & ~cells.written] = RING_CODE
        if self.mode == "load":
            warp = self.cells[name].warp
            stored = warp >= 0
            codes[stored & (warp >= self.warps_shown)] = EMPTY_CODE
            codes[stored & (warp == self.warps_shown - 1)] = LATEST_CODE
        elif self.mode == "compute" and self.reads is not None:
            codes[self.reads.read_cells(name)] = READ_CODE
            for r, c in self.now_cells.get(name, ()):
                codes[r, c] = NOW_CODE
        return codes

    def _update_activity(self) -> None:
        """One line on what the shared arrays show at the playhead."""
        if self.session.trace is None or not self.config.uses_shared:
            self.activity.setText("")
            return
        warp, lane = divmod(self.thread, WARP)
        self.thread_box.setToolTip(
            tr("thread {tid} of the block = warp {warp}, lane {lane}; click an element of C "
               "to pick the thread that computes it").format(tid=self.thread, warp=warp,
                                                             lane=lane)
        )  # fmt: skip
        if self.mode == "load":
            n = self.config.warps
            key = " ".join((
                '<span style="color:#999; font-size:14pt">&#9633;</span>&nbsp;'
                + tr("not stored yet (warps store in order)"),
                palette.swatch(LATEST["A"], tr("stored by the last warp")),
            ))  # fmt: skip
            text = tr("storing the k-tile: warps 0–{last} of {n} have stored ({pct:.0f}% of "
                      "the phase)").format(last=max(self.warps_shown - 1, 0), n=n,
                                           pct=100 * self.fraction)  # fmt: skip
            if self.warps_shown == 0:
                text = tr("storing the k-tile: no warp has stored yet")
            text = f"<b>{text}</b><br>{key}"
        elif self.mode == "compute":
            now = ", ".join(
                f"{name}[{r}][{c}]" for name, cells in self.now_cells.items()
                for r, c in sorted(cells)
            )  # fmt: skip
            text = tr(
                "thread {tid} (warp {warp}, lane {lane}) reads {cells} now "
                "({pct:.0f}% of the phase)"
            ).format(tid=self.thread, warp=warp, lane=lane, cells=now, pct=100 * self.fraction)
            text = "<b>{}</b><br>{} {}".format(
                text,
                palette.swatch(READ, tr("read by the selected thread in this k-tile")),
                palette.swatch(READ_NOW, tr("read by it now")),
            )
        else:
            text = tr("thread {tid} (warp {warp}, lane {lane})").format(
                tid=self.thread, warp=warp, lane=lane
            )
        self.activity.setText(text)

    # -- hover -------------------------------------------------------------------------------
    def describe_tile(self, r: int, c: int) -> str:
        """'C[r0 + r][c0 + c] · thread 5 (warp 0, lane 5)' for an element of the block's tile."""
        bx, by = self._block()
        rows, cols = self.config.launch.c_tile
        tid = int(self.owner[r, c])
        where = f"C[{by * rows + r}][{bx * cols + c}]"
        if tid < 0:
            return where
        warp, lane = divmod(tid, WARP)
        return where + " · " + tr("thread {tid} (warp {warp}, lane {lane})").format(
            tid=tid, warp=warp, lane=lane
        )

    def describe(self, array: str, r: int, c: int) -> str:
        arr = self.config.array(array)
        byte = self.config.array_bases[array] + (r * arr.stride + c) * arr.elem_bytes
        word = byte // banks.BANK_BYTES
        where = tr("{array}[{r}][{c}] · word {word} · bank {bank}").format(
            array=array, r=r, c=c, word=word, bank=word % banks.N_BANKS
        )
        if c >= arr.cols:
            return where + "\n" + tr("padding: never read or written")
        ring = self.ring.get(array)
        if not self.cells[array].written[r, c] and ring is not None and ring.written[r, c]:
            return where + "\n" + tr("holds {element}: a slot of another k-tile in flight").format(
                element=ring.text(r, c)
            )
        if not self.cells[array].written[r, c]:
            return where + "\n" + tr("no store of this k-tile writes it")
        return where + "\n" + tr("holds {element}").format(element=self.element(array, r, c))

    def _on_move(self, scene_pos) -> None:
        if self.session.trace is None:
            return
        vb = self.panels[TILE].getViewBox()
        if vb.sceneBoundingRect().contains(scene_pos):
            pos = vb.mapSceneToView(QPointF(scene_pos))
            r, c = int(np.floor(pos.y())), int(np.floor(pos.x()))
            inside = 0 <= r < self.owner.shape[0] and 0 <= c < self.owner.shape[1]
            self.canvas.setToolTip(self.describe_tile(r, c) if inside else "")
            return
        for arr in self.config.shared:
            vb = self.panels[arr.name].getViewBox()
            if vb.sceneBoundingRect().contains(scene_pos):
                pos = vb.mapSceneToView(QPointF(scene_pos))
                r, c = int(np.floor(pos.y())), int(np.floor(pos.x()))
                inside = 0 <= r < arr.rows and 0 <= c < arr.stride
                self.canvas.setToolTip(self.describe(arr.name, r, c) if inside else "")
                return
        self.canvas.setToolTip("")

    def _on_click(self, event) -> None:
        if self.session.trace is None:
            return
        vb = self.panels["C"].getViewBox()
        if vb.sceneBoundingRect().contains(event.scenePos()):
            pos = vb.mapSceneToView(event.scenePos())
            self.select_element(int(np.floor(pos.y())), int(np.floor(pos.x())))
            return
        vb = self.panels[TILE].getViewBox()
        if vb.sceneBoundingRect().contains(event.scenePos()):
            pos = vb.mapSceneToView(event.scenePos())
            r, c = int(np.floor(pos.y())), int(np.floor(pos.x()))
            if 0 <= r < self.owner.shape[0] and 0 <= c < self.owner.shape[1]:
                if self.owner[r, c] >= 0:
                    self.set_thread(int(self.owner[r, c]))

    def select_element(self, row: int, col: int) -> None:
        """Select the block that computes C[row, col] and, in it, the thread that does."""
        trace, config = self.session.trace, self.config
        m, n, _ = trace.shape
        if not (0 <= row < m and 0 <= col < n):
            return
        rows, cols = config.launch.c_tile
        self.session.select_block(trace.block_index(col // cols, row // rows))
        if not config.uses_shared:
            return
        block, t = self._block(), max(self.ktile, 0)
        cells = self._held(config, block, t)
        tid = thread_of_element(config, cells, block, t, row, col)
        if tid is not None:
            self.set_thread(tid)

    # -- texts -------------------------------------------------------------------------------
    def _update_title(self) -> None:
        """Per frame: the block's state and k-step at the playhead."""
        trace = self.session.trace
        bx, by = self._block()
        block, t = self.session.selected_block, self.session.playhead_ns
        state = palette.state_text(self.timeline, block, t, self.state)
        kt = palette.ktile_text(self.ktile, self._n_k())
        self.title.setText(
            tr("Block ({bx}, {by}) at the playhead: {state} · {kt}").format(
                bx=bx, by=by, state=state, kt=kt
            )
            + f"<br>{palette.config_text(trace)} · "
            + palette.source_html(trace, self.session.source_label)
        )

    def _legend(self) -> list[str]:
        config = self.config
        if config.kstep is None:
            return [
                palette.swatch(A_TINTS[1], tr("the rows of A this block reads")),
                palette.swatch(B_TINTS[1], tr("the columns of B it reads")),
                palette.swatch(palette.HIGHLIGHT, tr("the part of C it computes")),
            ]
        now = tr("k-tile it works on now")
        if config.uses_shared:
            now = tr("k-tile in shared memory now")
        legend = [
            palette.swatch(A_TINTS[1], tr("this block's row of A tiles")),
            palette.swatch(B_TINTS[1], tr("its column of B tiles")),
            palette.swatch(A_TINTS[2], tr("k-tiles already used")),
            palette.swatch(A_TINTS[3], now),
            palette.swatch(palette.HIGHLIGHT, tr("the C tile it computes")),
        ]
        legend += [
            palette.swatch(WARP_TINTS[1], tr("its C tile by warp")),
            palette.swatch(READ_NOW, tr("the selected thread's part")),
        ]
        if config.uses_shared:
            legend += [
                "",
                palette.swatch(
                    PAD_GREY,
                    tr("padding, or a slot no k-step in flight holds")
                    if config.layout.in_flight > 1
                    else tr("padding word (never read)"),
                ),
                palette.swatch(ZERO, tr("'0': outside the matrix")),
                "",
            ]
            if config.layout.in_flight > 1:  # a ring of slots, one k-step in flight in each
                ring = palette.swatch(RING["A"], tr("a slot of another k-step in flight"))
                legend.insert(-3, ring)
            # the first staging array's corners, the others' first cell; an array that stages
            # neither input (kernel 09's C staging tile) holds no element to name
            staging = [arr for arr in config.shared if arr.source]
            cells = [(arr.name, 0, 0) for arr in staging]
            if staging:
                first = staging[0]
                cells.insert(1, (first.name, first.rows - 1, first.cols - 1))
            legend += [f"{a}[{r}][{c}] = {self.element(a, r, c)}" for a, r, c in cells]
            legend += [palette.swatch(palette.EMPTY, tr("{name}: holds no element of A or B")
                                      .format(name=arr.name))
                       for arr in config.shared if not arr.source]  # fmt: skip
        return legend

    def _axis_text(self, cells: HeldCells, axis: int) -> str:
        """'k = 64 + row', 'A row = 96 + column': the global index along a shared axis."""
        which = tr("row") if axis == 0 else tr("column")
        found = cells.axis_maps[axis]
        if found is None:
            return which
        g, base = found
        source = cells.array.source
        if K_AXIS.get(source) == g:
            coord = "k"
        else:
            coord = (tr("{matrix} row") if g == 0 else tr("{matrix} column")).format(matrix=source)
        return f"{coord} = {_offset(base, which)}"

    def _formula(self, cells: HeldCells) -> str:
        """'As[r][c] = A[96 + r, 64 + c]' when each axis maps simply, else ''."""
        maps = cells.axis_maps
        if None in maps or {g for g, _ in maps} != {0, 1}:
            return ""
        index = {g: _offset(base, "rc"[axis]) for axis, (g, base) in enumerate(maps)}
        return f"{cells.array.name}[r][c] = {cells.array.source}[{index[0]}, {index[1]}]"

    def _update_texts(self) -> None:
        """When the block, k-step or language changes: titles, axes, legend, caption."""
        trace, config = self.session.trace, self.config
        m, n, k = trace.shape
        titles = {"A": f"A ({m}×{k})", "B": f"B ({k}×{n})", "C": f"C ({m}×{n})"}
        rows, cols = config.launch.c_tile
        parts = c_tile.pieces(self.owner, self.thread)
        shape = f"{parts[0][2]}×{parts[0][3]}" if parts else "-"
        if not parts:  # a producer thread: it copies, it computes none of C
            title = tr("its C tile ({rows}×{cols}): thread {tid} computes none of it")
        elif len(parts) > 1:
            title = tr("its C tile ({rows}×{cols}): {n} × {per} per thread")
        else:
            title = tr("its C tile ({rows}×{cols}): {per} per thread")
        titles[TILE] = title.format(rows=rows, cols=cols, per=shape, n=len(parts), tid=self.thread)
        for arr in config.shared:
            titles[arr.name] = tr("shared {array}[{rows}][{w}]").format(
                array=arr.name, rows=arr.rows, w=arr.stride
            )
        retitled = [palette.set_title(self.panels[name], text) for name, text in titles.items()]
        if any(retitled):
            self._wrap_timer.start()  # setTitle sized each title to one line again
        self.legend.setText("<br>".join(self._legend()))
        self.no_smem.setVisible(not config.uses_shared)
        self.no_smem.setText(
            tr(
                "The {kernel} kernel uses no shared memory: its threads read A and B straight "
                "from global memory."
            ).format(kernel=trace.kernel)
        )
        rows, cols = config.launch.c_tile
        if not config.uses_shared:
            if config.kstep is None:
                text = tr(
                    "One cell of C is the {rows}×{cols} part one block computes; the block "
                    "reads the matching rows of A and columns of B whole, K = {K} deep."
                )
            else:
                text = tr(
                    "One cell of C is the {rows}×{cols} tile one block computes; A and B are "
                    "cut into k-tiles of depth {depth}."
                )
            self.caption.setText(text.format(rows=rows, cols=cols, K=k, depth=config.step_depth))
            return
        for arr in config.shared:
            cells, plot = self.cells[arr.name], self.panels[arr.name]
            palette.set_label(plot, "left", self._axis_text(cells, 0))
            palette.set_label(plot, "bottom", self._axis_text(cells, 1))
            palette.set_ticks(plot.getAxis("bottom"), [self._word_ticks(arr.cols, arr.pad)])
        padded = any(arr.pad for arr in config.shared)
        formulas = [f for f in (self._formula(self.cells[a.name]) for a in config.shared) if f]
        self.caption.setText(
            tr("One cell = one {size}-byte word; {pad}.").format(
                size=config.shared[0].elem_bytes,
                pad=tr("the padding columns are never read") if padded else tr("no padding"),
            )
            + (" " + ", ".join(formulas) + "." if formulas else "")
            + " "
            + tr("'0': outside the matrix (edge block).")
            + palette.mouse_hint(
                self.session,
                tr("Hover a cell for its bank; zoom in (mouse wheel) to read every cell."),
            )
        )

    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        self.thread_label.setText(tr("Selected thread:"))
        if self.session.trace is not None:
            self._update_texts()
            self._update_title()


def _cosmetic_pen(color: tuple[int, ...], width: float = 1.0) -> QPen:
    pen = QPen(QColor(*color))
    pen.setWidthF(width)
    pen.setCosmetic(True)
    return pen


def _edges(labels: np.ndarray) -> QPainterPath:
    """Lines between neighbouring cells of ``labels`` whose labels differ: the outlines of
    each thread's (or warp's) part of the tile, merged into runs along each grid line."""
    path = QPainterPath()
    rows, cols = labels.shape
    for y in range(1, rows):  # horizontal lines
        _runs(path, labels[y - 1] != labels[y], lambda a, b, y=y: ((a, y), (b, y)))
    for x in range(1, cols):  # vertical lines
        _runs(path, labels[:, x - 1] != labels[:, x], lambda a, b, x=x: ((x, a), (x, b)))
    return path


def _runs(path: QPainterPath, differ: np.ndarray, ends) -> None:
    edges = np.flatnonzero(np.diff(np.concatenate(([0], differ.astype(np.int8), [0]))))
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        (x0, y0), (x1, y1) = ends(int(a), int(b))
        path.moveTo(x0, y0)
        path.lineTo(x1, y1)


def _offset(base: int, var: str) -> str:
    """'96 + row', or 'row − 128' where the array's row lies before the matrix's (a slot of a
    ring above the first)."""
    return f"{var} − {-base}" if base < 0 else f"{base} + {var}"

"""Which tiles of A, B and C the selected block works on, and its shared-memory arrays.

Left: the textbook layout (B above C, A left of C) cut into the block's C tile and k-steps; the
block's row of A and column of B are tinted, k-steps it already used darker, the k-step at the
playhead strongest. Right: the kernel's shared arrays (from its description) as they lie in
shared memory, rows of cols + pad words, each cell labelled with the global element it holds
(from the description's store sites; painted when a cell is big enough, hover always works).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPen, QTransform
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsRectItem, QLabel, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.shared_cells import K_AXIS, HeldCells, axis_map, held_cells
from matviz.core import banks
from matviz.core.timeline import BlockState, Timeline

A_TINTS = ((236, 238, 242), (200, 220, 245), (120, 165, 225), (25, 95, 200))
B_TINTS = ((236, 238, 242), (205, 238, 210), (125, 200, 140), (20, 140, 60))
SMEM = {"A": (214, 230, 250), "B": (214, 242, 220)}
ZERO, PAD_GREY = (255, 248, 215), (190, 190, 190)
MATRICES = {"B": (0, 1), "A": (1, 0), "C": (1, 1)}  # grid positions; shared arrays in column 2


class TilesView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.timeline: Timeline | None = None
        self.ktile = -1  # k-step drawn (at the playhead), -1 = none
        self._drawn: tuple[int, int] | None = None
        self.state = BlockState.WAITING
        self.cells: dict[str, HeldCells] = {}  # the shared arrays' content as drawn
        self.smem_texts: dict[str, list[list[str]]] = {}
        self._rects: dict[str, QRectF] = {}  # A, B, C in element units

        self.placeholder = QLabel(alignment=Qt.AlignCenter)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.caption = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.no_smem = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground(palette.BACKGROUND)
        self.panels: dict[str, pg.PlotItem] = {}
        self.images: dict[str, pg.ImageItem] = {}
        self.labels: dict[str, palette.CellLabels] = {}
        self.borders: dict[str, QGraphicsPathItem] = {}
        self.hatch: dict[str, QGraphicsRectItem] = {}
        self.legend = self.canvas.addLabel(row=0, col=0, justify="left")
        for name, (r, c) in MATRICES.items():
            plot = self._add_panel(name, r, c)
            plot.hideAxis("left")
            plot.hideAxis("bottom")
            plot.getViewBox().setAspectLocked(True)
            plot.getViewBox().setMouseEnabled(False, False)
        for col, stretch in enumerate((2, 2, 4)):
            self.canvas.ci.layout.setColumnStretchFactor(col, stretch)
        self.canvas.scene().sigMouseMoved.connect(self._on_move)

        self.stack = palette.stacked(
            self, self.placeholder, self.title, (self.canvas, 1), self.no_smem, self.caption
        )
        session.traceChanged.connect(self.refresh)
        session.playheadChanged.connect(self._update)
        session.selectionChanged.connect(self._update)
        self.refresh()

    def _add_panel(self, name: str, row: int, col: int) -> pg.PlotItem:
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

    def element(self, array: str, r: int, c: int) -> str:
        """Global element held by shared cell ``array[r][c]`` in the drawn k-step."""
        return self.cells[array].text(r, c)

    def _shared_panels(self) -> None:
        """One panel per shared array of the kernel, in column 2 (rebuilt when they change)."""
        names = [arr.name for arr in self.config.shared]
        if names == list(self.labels):
            return
        for name in list(self.labels):
            self.canvas.removeItem(self.panels.pop(name))
            for table in (self.images, self.borders, self.labels, self.hatch):
                table.pop(name)
        for row, name in enumerate(names):
            plot = self._add_panel(name, row, 2)
            self.labels[name], self.hatch[name] = palette.CellLabels(), QGraphicsRectItem()
            self.hatch[name].setBrush(QBrush(QColor(90, 90, 90), Qt.BDiagPattern))
            self.hatch[name].setPen(QPen(Qt.NoPen))
            plot.addItem(self.labels[name])
            plot.addItem(self.hatch[name])

    # -- session -> view ---------------------------------------------------------------------
    def refresh(self) -> None:
        trace = self.session.trace
        self.timeline = self.session.timeline
        self._drawn = None  # force a redraw
        if trace is not None:
            self._shared_panels()
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
            for arr in self.config.shared:
                plot = self.panels[arr.name]
                self.borders[arr.name].setPath(palette.cell_borders(arr.stride, arr.rows, 40))
                plot.getViewBox().setRange(
                    xRange=(0, arr.stride), yRange=(0, arr.rows), padding=0.02
                )
                self.hatch[arr.name].setRect(arr.cols, 0, arr.pad, arr.rows)
                plot.getAxis("bottom").setTicks([self._word_ticks(arr.cols, arr.pad)])
                plot.getAxis("left").setTicks([palette.index_ticks(arr.rows, 8)])
            self._update()
        self.stack.setCurrentIndex(0 if trace is None else 1)
        self.retranslate()

    @staticmethod
    def _word_ticks(cols: int, pad: int) -> list[tuple[float, str]]:
        return palette.index_ticks(cols, 8) + [(cols + i + 0.5, "pad") for i in range(pad)]

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
        key = (self.session.selected_block, ktile)
        if key != self._drawn:
            self._drawn = key
            self.ktile = ktile
            self._draw_matrices()
            self._draw_smem()
            self._update_texts()
        self._update_title()

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

    def _draw_smem(self) -> None:
        self.cells = held_cells(self.config, self._block(), max(self.ktile, 0))
        self.smem_texts = {}
        for name, cells in self.cells.items():
            rows, stride = cells.row.shape
            texts = [[cells.text(r, c) for c in range(stride)] for r in range(rows)]
            codes = np.where(cells.written, np.where(cells.inside, 0, 1), 2).astype(np.uint8)
            fill = SMEM.get(cells.array.source, SMEM["A"])
            lut = np.array([(*fill, 255), (*ZERO, 255), (*PAD_GREY, 255)], np.uint8)
            self.images[name].setImage(codes, lut=lut, levels=(0, 2), autoLevels=False)
            self.smem_texts[name] = texts
            self.labels[name].set_texts(texts)

    # -- hover -------------------------------------------------------------------------------
    def describe(self, array: str, r: int, c: int) -> str:
        arr = self.config.array(array)
        byte = self.config.array_bases[array] + (r * arr.stride + c) * arr.elem_bytes
        word = byte // banks.BANK_BYTES
        where = tr("{array}[{r}][{c}] · word {word} · bank {bank}").format(
            array=array, r=r, c=c, word=word, bank=word % banks.N_BANKS
        )
        if c >= arr.cols:
            return where + "\n" + tr("padding: never read or written")
        if not self.cells[array].written[r, c]:
            return where + "\n" + tr("no store of this k-tile writes it")
        return where + "\n" + tr("holds {element}").format(element=self.element(array, r, c))

    def _on_move(self, scene_pos) -> None:
        if self.session.trace is None:
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
        if config.uses_shared:
            legend += [
                "",
                palette.swatch(PAD_GREY, tr("padding word (never read)")),
                palette.swatch(ZERO, tr("'0': outside the matrix")),
                "",
            ]
            first = config.shared[0]  # the first array's corners, the others' first cell
            cells = [(first.name, 0, 0), (first.name, first.rows - 1, first.cols - 1)]
            cells += [(arr.name, 0, 0) for arr in config.shared[1:]]
            legend += [f"{a}[{r}][{c}] = {self.element(a, r, c)}" for a, r, c in cells]
        return legend

    def _axis_text(self, cells: HeldCells, axis: int) -> str:
        """'k = 64 + row', 'A row = 96 + column': the global index along a shared axis."""
        which = tr("row") if axis == 0 else tr("column")
        found = axis_map(cells, axis)
        if found is None:
            return which
        g, base = found
        source = cells.array.source
        if K_AXIS.get(source) == g:
            coord = "k"
        else:
            coord = (tr("{matrix} row") if g == 0 else tr("{matrix} column")).format(matrix=source)
        return f"{coord} = {base} + {which}"

    def _formula(self, cells: HeldCells) -> str:
        """'As[r][c] = A[96 + r, 64 + c]' when each axis maps simply, else ''."""
        maps = [axis_map(cells, axis) for axis in (0, 1)]
        if None in maps or {g for g, _ in maps} != {0, 1}:
            return ""
        index = {g: f"{base} + {'rc'[axis]}" for axis, (g, base) in enumerate(maps)}
        return f"{cells.array.name}[r][c] = {cells.array.source}[{index[0]}, {index[1]}]"

    def _update_texts(self) -> None:
        """When the block, k-step or language changes: titles, axes, legend, caption."""
        trace, config = self.session.trace, self.config
        m, n, k = trace.shape
        for name, text in (("A", f"A ({m}×{k})"), ("B", f"B ({k}×{n})"), ("C", f"C ({m}×{n})")):
            self.panels[name].setTitle(text, color=palette.hexcolor(palette.FOREGROUND))
        self.legend.setText("<br>".join(self._legend()), color=palette.hexcolor(palette.FOREGROUND))
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
            plot.setTitle(
                tr("shared {array}[{rows}][{w}]").format(
                    array=arr.name, rows=arr.rows, w=arr.stride
                ),
                color=palette.hexcolor(palette.FOREGROUND),
            )
            plot.setLabel("left", self._axis_text(cells, 0))
            plot.setLabel("bottom", self._axis_text(cells, 1))
        padded = any(arr.pad for arr in config.shared)
        formulas = [f for f in (self._formula(self.cells[a.name]) for a in config.shared) if f]
        self.caption.setText(
            tr("One cell = one {size}-byte word; {pad}.").format(
                size=config.shared[0].elem_bytes,
                pad=tr("the padding columns are never read") if padded else tr("no padding"),
            )
            + (" " + ", ".join(formulas) + "." if formulas else "")
            + " "
            + tr(
                "'0': outside the matrix (edge block). Hover a cell for its bank; zoom in "
                "(mouse wheel) to read every cell."
            )
        )

    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        if self.session.trace is not None:
            self._update_texts()
            self._update_title()

"""Which tiles of A, B and C the selected block works on, and its shared-memory arrays As, Bs.

Left: the textbook layout (B above C, A left of C) in tiles; the block's row of A and column
of B are tinted, k-tiles it already used darker, the k-tile at the playhead strongest. Right:
As and Bs as they lie in shared memory, T rows of T+PAD 4-byte words, each cell labelled with
the global element it holds (labels are painted when a cell is big enough; hover always works).
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsRectItem, QLabel, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core import access, banks
from matviz.core.timeline import BlockState, Timeline

A_TINTS = ((236, 238, 242), (200, 220, 245), (120, 165, 225), (25, 95, 200))
B_TINTS = ((236, 238, 242), (205, 238, 210), (125, 200, 140), (20, 140, 60))
SMEM = {"A": (214, 230, 250), "B": (214, 242, 220)}
ZERO, PAD_GREY = (255, 248, 215), (190, 190, 190)


class TilesView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.timeline: Timeline | None = None
        self.ktile = -1  # k-tile drawn (at the playhead), -1 = none
        self._drawn: tuple[int, int] | None = None
        self.state = BlockState.WAITING
        self.smem_texts: dict[str, list[list[str]]] = {"As": [], "Bs": []}

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
        layout = {"B": (0, 1), "A": (1, 0), "C": (1, 1), "As": (0, 2), "Bs": (1, 2)}
        for name, (r, c) in layout.items():
            plot = self.canvas.addPlot(row=r, col=c)
            palette.style_plot(plot)
            plot.hideButtons()
            plot.setMenuEnabled(False)
            self.images[name] = palette.matrix_image(plot)
            self.borders[name] = palette.cell_lines(plot)
            self.panels[name] = plot
            if name in ("A", "B", "C"):
                plot.hideAxis("left")
                plot.hideAxis("bottom")
                plot.getViewBox().setAspectLocked(True)
                plot.getViewBox().setMouseEnabled(False, False)
            else:  # shared memory: cell texts and a hatched rect over the padding columns
                self.labels[name], self.hatch[name] = palette.CellLabels(), QGraphicsRectItem()
                self.hatch[name].setBrush(QBrush(QColor(90, 90, 90), Qt.BDiagPattern))
                self.hatch[name].setPen(QPen(Qt.NoPen))
                plot.addItem(self.labels[name])
                plot.addItem(self.hatch[name])
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

    # -- geometry of the selected block ------------------------------------------------------
    def _tile(self) -> int:
        return int(self.session.trace.params.get("tile", 1))

    def _pad(self) -> int:
        return int(self.session.trace.params.get("pad", 0))

    def _uses_smem(self) -> bool:
        return self.session.trace.kernel in access.model_kernels()

    def _n_k(self) -> int:
        return math.ceil(self.session.trace.shape[2] / self._tile())

    def element(self, array: str, r: int, c: int) -> str:
        """Global element held by shared word ``array[r][c]`` (c < T) in the drawn k-tile."""
        trace, t_size = self.session.trace, self._tile()
        m, n, k = trace.shape
        b = trace.blocks[self.session.selected_block]
        k0 = max(self.ktile, 0) * t_size
        if array == "Bs":
            row, col, rows, cols, name = k0 + r, int(b["bx"]) * t_size + c, k, n, "B"
        elif trace.kernel == "tiled_transposed":  # As[tx][ty] = A[by*T+ty, t*T+tx]
            row, col, rows, cols, name = int(b["by"]) * t_size + c, k0 + r, m, k, "A"
        else:  # As[ty][tx] = A[by*T+ty, t*T+tx]
            row, col, rows, cols, name = int(b["by"]) * t_size + r, k0 + c, m, k, "A"
        return f"{name}[{row},{col}]" if row < rows and col < cols else "0"

    # -- session -> view ---------------------------------------------------------------------
    def refresh(self) -> None:
        trace = self.session.trace
        self.timeline = self.session.timeline
        self._drawn = None  # force a redraw
        if trace is not None:
            gx, gy = trace.grid
            n_k = self._n_k()
            t, pad = self._tile(), self._pad()
            sizes = {"A": (n_k, gy), "B": (gx, n_k), "C": (gx, gy), "As": (t + pad, t)}
            sizes["Bs"] = sizes["As"]
            for name, (w, h) in sizes.items():
                self.borders[name].setPath(
                    palette.cell_borders(w, h, 40 if name in self.labels else 24)
                )
                if name in ("A", "B", "C"):
                    self.panels[name].getViewBox().setRange(
                        xRange=(0, w), yRange=(0, h), padding=0.04
                    )
            for name in ("As", "Bs"):
                plot = self.panels[name]
                plot.getViewBox().setRange(xRange=(0, t + pad), yRange=(0, t), padding=0.02)
                self.hatch[name].setRect(t, 0, pad, t)
                plot.getAxis("bottom").setTicks([self._word_ticks(t, pad)])
                plot.getAxis("left").setTicks([palette.index_ticks(t, 8)])
            self._update()
        self.stack.setCurrentIndex(0 if trace is None else 1)
        self.retranslate()

    @staticmethod
    def _word_ticks(t: int, pad: int) -> list[tuple[float, str]]:
        return palette.index_ticks(t, 8) + [(t + i + 0.5, "pad") for i in range(pad)]

    def _update(self, *_args) -> None:
        """Cheap per frame: one block_phase call; images change only when the k-tile does."""
        trace = self.session.trace
        if trace is None:
            return
        state, ktile = self.timeline.block_phase(
            self.session.selected_block, self.session.playhead_ns
        )
        ktile = -1 if ktile is None else int(ktile)
        self.state = BlockState(int(state))
        if self.state == BlockState.DONE and trace.n_tiles:
            ktile = trace.n_tiles - 1  # the last tile is still in shared memory
        key = (self.session.selected_block, ktile)
        if key != self._drawn:
            self._drawn = key
            self.ktile = ktile
            self._draw_matrices()
            if self._uses_smem():
                self._draw_smem()
            self._update_texts()
        self._update_title()

    def _draw_matrices(self) -> None:
        trace = self.session.trace
        gx, gy = trace.grid
        n_k = self._n_k()
        b = trace.blocks[self.session.selected_block]
        bx, by = int(b["bx"]), int(b["by"])
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

    def _draw_smem(self) -> None:
        t, pad = self._tile(), self._pad()
        for name in ("As", "Bs"):
            texts = [[self.element(name, r, c) for c in range(t)] + [""] * pad for r in range(t)]
            codes = np.zeros((t, t + pad), np.uint8)
            codes[:, t:] = 2
            codes[:, :t][np.array([row[:t] for row in texts]) == "0"] = 1
            lut = np.array([(*SMEM[name[0]], 255), (*ZERO, 255), (*PAD_GREY, 255)], np.uint8)
            self.images[name].setImage(codes, lut=lut, levels=(0, 2), autoLevels=False)
            self.smem_texts[name] = texts
            self.labels[name].set_texts(texts)

    # -- hover -------------------------------------------------------------------------------
    def describe(self, array: str, r: int, c: int) -> str:
        t, pad = self._tile(), self._pad()
        word = r * (t + pad) + c + (t * (t + pad) if array == "Bs" else 0)
        where = tr("{array}[{r}][{c}] · word {word} · bank {bank}").format(
            array=array, r=r, c=c, word=word, bank=word % banks.N_BANKS
        )
        if c >= t:
            return where + "\n" + tr("padding: never read or written")
        return where + "\n" + tr("holds {element}").format(element=self.element(array, r, c))

    def _on_move(self, scene_pos) -> None:
        if self.session.trace is None or not self._uses_smem():
            return
        for name in ("As", "Bs"):
            vb = self.panels[name].getViewBox()
            if vb.sceneBoundingRect().contains(scene_pos):
                pos = vb.mapSceneToView(QPointF(scene_pos))
                r, c = int(np.floor(pos.y())), int(np.floor(pos.x()))
                t = self._tile()
                inside = 0 <= r < t and 0 <= c < t + self._pad()
                self.canvas.setToolTip(self.describe(name, r, c) if inside else "")
                return
        self.canvas.setToolTip("")

    # -- texts -------------------------------------------------------------------------------
    def _update_title(self) -> None:
        """Per frame: the block's state and k-tile at the playhead."""
        trace = self.session.trace
        b = trace.blocks[self.session.selected_block]
        state = tr(palette.STATE_NAMES.get(self.state, "running"))
        kt = f"{self.ktile + 1} / {self._n_k()}" if self.ktile >= 0 else "–"
        self.title.setText(
            tr("Block ({bx}, {by}) at the playhead: {state} · k-tile {kt}").format(
                bx=int(b["bx"]), by=int(b["by"]), state=state, kt=kt
            )
            + f"<br>{palette.config_text(trace)} · "
            + palette.source_html(trace, self.session.source_label)
        )

    def _update_texts(self) -> None:
        """When the block, k-tile or language changes: titles, axes, legend, caption."""
        trace = self.session.trace
        b = trace.blocks[self.session.selected_block]
        m, n, k = trace.shape
        t_size = self._tile()
        for name, text in (("A", f"A ({m}×{k})"), ("B", f"B ({k}×{n})"), ("C", f"C ({m}×{n})")):
            self.panels[name].setTitle(text, color=palette.hexcolor(palette.FOREGROUND))
        has_smem = self._uses_smem()
        legend = [
            palette.swatch(A_TINTS[1], tr("this block's row of A tiles")),
            palette.swatch(B_TINTS[1], tr("its column of B tiles")),
            palette.swatch(A_TINTS[2], tr("k-tiles already used")),
            palette.swatch(A_TINTS[3], tr("k-tile in shared memory now")),
            palette.swatch(palette.HIGHLIGHT, tr("the C tile it computes")),
        ]
        if has_smem:
            t_last = t_size - 1
            legend += [
                "",
                palette.swatch(PAD_GREY, tr("padding word (never read)")),
                palette.swatch(ZERO, tr("'0': outside the matrix")),
                "",
                f"As[0][0] = {self.element('As', 0, 0)}",
                f"As[{t_last}][{t_last}] = {self.element('As', t_last, t_last)}",
                f"Bs[0][0] = {self.element('Bs', 0, 0)}",
            ]
        self.legend.setText("<br>".join(legend), color=palette.hexcolor(palette.FOREGROUND))
        for name in ("As", "Bs"):
            self.panels[name].setVisible(has_smem)
        self.no_smem.setVisible(not has_smem)
        self.no_smem.setText(
            tr(
                "The {kernel} kernel uses no shared memory: every thread reads its row of A "
                "and column of B straight from global memory."
            ).format(kernel=trace.kernel)
        )
        if not has_smem:
            self.caption.setText(tr("Tiles of {t}×{t} elements.").format(t=t_size))
            return
        pad, k0 = self._pad(), max(self.ktile, 0) * t_size
        r0, c0 = int(b["by"]) * t_size, int(b["bx"]) * t_size
        transposed = trace.kernel == "tiled_transposed"
        a_rows = tr("k = {k0} + row") if transposed else tr("A row = {r0} + row")
        a_cols = tr("A row = {r0} + column") if transposed else tr("k = {k0} + column")
        axes = {
            "As": (a_rows, a_cols),
            "Bs": (tr("k = {k0} + row"), tr("B column = {c0} + column")),
        }
        for name, (left, bottom) in axes.items():
            plot = self.panels[name]
            plot.setTitle(
                tr("shared {array}[{t}][{w}]").format(array=name, t=t_size, w=t_size + pad),
                color=palette.hexcolor(palette.FOREGROUND),
            )
            plot.setLabel("left", left.format(k0=k0, r0=r0, c0=c0))
            plot.setLabel("bottom", bottom.format(k0=k0, r0=r0, c0=c0))
        formula = (
            "As[tx][ty] = A[by·T+ty, t·T+tx]" if transposed else "As[ty][tx] = A[by·T+ty, t·T+tx]"
        )
        pad_text = tr("the PAD column(s) are never read") if pad else tr("no padding (PAD = 0)")
        self.caption.setText(
            tr("1 row = T+PAD = {w} words of 4 bytes; {pad}.").format(w=t_size + pad, pad=pad_text)
            + f" {formula}, Bs[ty][tx] = B[t·T+ty, bx·T+tx]. "
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


"""The output matrix C as a grid of thread blocks, coloured by state at the playhead or by SM."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QWidget,
)

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core.timeline import Timeline

# Above this many blocks a side the grid draws every n-th block (no screen shows more pixels
# across a view): the image, its re-colouring and its painting stay the size of a screen.
MAX_SIDE = 1024


class GridView(Retranslating, QWidget):
    """One ImageItem cell per block: x = blockIdx.x (N direction), y = blockIdx.y (M, down)."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.timeline: Timeline | None = None
        self._sm_codes: np.ndarray | None = None  # (gy, gx) uint8, fixed per trace
        self.sample_step = 1  # the image shows every n-th block in x and in y
        self._extent = (0, 0)  # the image's size in blocks
        self._state_lut = palette.state_lut()
        self._n_sms = palette.H200_SMS
        self._sm_lut = palette.sm_lut()

        self.placeholder = QLabel(alignment=Qt.AlignCenter)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        # The time changes every frame: in a label of its own, sized once per trace, so the
        # word-wrapped title never re-wraps and re-lays out the view while playing.
        self.time_label = QLabel(alignment=Qt.AlignRight | Qt.AlignBottom)
        self.legend = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.plot = palette.make_plot()
        item = self.plot.getPlotItem()
        self.viewbox = item.getViewBox()
        self.viewbox.setAspectLocked(True)
        self.image = palette.matrix_image(item)
        self.outline = palette.outline_item(3.0)
        item.addItem(self.outline)
        self.gridlines = palette.cell_lines(item, (255, 255, 255, 150))  # between blocks
        self.gridlines.setZValue(5)

        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.time_label, 0, Qt.AlignBottom)
        self.stack = palette.stacked(self, self.placeholder, top, (self.plot, 1), self.legend)

        self.plot.scene().sigMouseClicked.connect(self._on_click)
        self.plot.scene().sigMouseMoved.connect(self._on_move)
        session.traceChanged.connect(self.refresh)
        session.playheadChanged.connect(self._on_playhead)
        session.selectionChanged.connect(self._on_selection)
        session.colorModeChanged.connect(self._on_color_mode)
        self.refresh()

    # -- session -> view ---------------------------------------------------------------------
    def refresh(self) -> None:
        """Rebuild everything for the session's current trace (precomputes per-trace data)."""
        trace = self.session.trace
        self.timeline = self.session.timeline
        if trace is None:
            self._sm_codes = None
            self._extent = (0, 0)
            self.image.clear()
        else:
            gx, gy = trace.grid
            self._n_sms = max(int(trace.manifest["device"].get("sm_count", palette.H200_SMS)), 1)
            self._sm_lut = palette.sm_lut(self._n_sms)
            self.sample_step = -(-max(gx, gy) // MAX_SIDE)
            self._sm_codes = self._sampled(trace.blocks["smid"] % 256, gx, gy)
            item = self.plot.getPlotItem()
            # the square grid is narrow: two-digit labels 2 apart ran into each other at 32
            item.getAxis("bottom").setTicks([palette.index_ticks(gx, 8)])
            palette.fitted_row_ticks(item.getAxis("left"), gy)
            self.gridlines.setPath(palette.cell_borders(gx, gy))
            self.viewbox.enableAutoRange()
            self._recolor()
            self._on_selection(self.session.selected_block)
        self.stack.setCurrentIndex(0 if trace is None else 1)
        self.retranslate()

    def _recolor(self) -> None:
        """Colour codes at the playhead (cheap: one Timeline.states call)."""
        trace = self.session.trace
        if trace is None or self.timeline is None:
            return
        if self.session.color_mode == "sm":
            codes, lut = self._sm_codes, self._sm_lut
        else:
            states = self.timeline.states(self.session.playhead_ns)
            codes, lut = self._sampled(states, *trace.grid), self._state_lut
        self.image.setImage(codes, lut=lut, levels=(0, 255), autoLevels=False)
        step = self.sample_step
        ny, nx = codes.shape
        if (nx * step, ny * step) != self._extent:  # block coordinates, sampled or not
            self._extent = (nx * step, ny * step)
            self.image.setRect(0, 0, *self._extent)

    def _sampled(self, per_block: np.ndarray, gx: int, gy: int) -> np.ndarray:
        """(gy, gx) uint8 codes of every ``sample_step``-th block in x and y."""
        step = self.sample_step
        return np.ascontiguousarray(
            np.asarray(per_block).astype(np.uint8, copy=False).reshape(gy, gx)[::step, ::step]
        )

    def _on_playhead(self, _ns: int) -> None:
        if self.session.color_mode != "sm":
            self._recolor()
        self._update_time()

    def _on_selection(self, block: int) -> None:
        trace = self.session.trace
        if trace is None:
            return
        bx, by = int(trace.blocks["bx"][block]), int(trace.blocks["by"][block])
        self.outline.setRect(bx, by, 1, 1)

    def _on_color_mode(self, _mode: str) -> None:
        self._recolor()
        self._update_legend()

    # -- user -> session ---------------------------------------------------------------------
    def block_at(self, x: float, y: float) -> int | None:
        """Linear index of the block under view coordinates (x, y), or None."""
        trace = self.session.trace
        if trace is None:
            return None
        gx, gy = trace.grid
        bx, by = int(np.floor(x)), int(np.floor(y))
        if 0 <= bx < gx and 0 <= by < gy:
            return by * gx + bx
        return None

    def select_at(self, x: float, y: float) -> None:
        block = self.block_at(x, y)
        if block is not None:
            self.session.select_block(block)

    def _on_click(self, event) -> None:
        if event.button() != Qt.LeftButton:
            return
        pos = self.viewbox.mapSceneToView(QPointF(event.scenePos()))
        self.select_at(pos.x(), pos.y())

    def _on_move(self, scene_pos) -> None:
        if self.session.trace is None:
            return
        pos = self.viewbox.mapSceneToView(QPointF(scene_pos))
        block = self.block_at(pos.x(), pos.y())
        self.plot.setToolTip("" if block is None else self.describe(block))

    def describe(self, block: int) -> str:
        """Hover text: block coordinates, SM, state and k-tile at the playhead."""
        trace = self.session.trace
        row = trace.blocks[block]
        t = self.session.playhead_ns
        state, ktile = self.timeline.block_phase(block, t)
        name = palette.state_text(self.timeline, block, t, state)
        n_steps = trace.config.n_steps
        kt = palette.ktile_text(ktile, n_steps)
        return tr("block ({bx}, {by}) · SM {sm}\nstate: {state} · {kt}").format(
            bx=int(row["bx"]), by=int(row["by"]), sm=int(row["smid"]), state=name, kt=kt
        )

    # -- texts -------------------------------------------------------------------------------
    def _update_title(self) -> None:
        trace = self.session.trace
        if trace is None:
            return
        gx, gy = trace.grid
        self.title.setText(
            f"{tr('Output matrix C: one cell per thread block')} ({gx}×{gy})<br>"
            f"{palette.config_text(trace)} · "
            f"{palette.source_html(trace, self.session.source_label)}"
        )
        widest = self._time_text(self.session.duration_ns)  # the most digits this trace has
        metrics = self.time_label.fontMetrics()
        self.time_label.setFixedSize(metrics.horizontalAdvance(widest + "  "), metrics.height())
        self._update_time()

    @staticmethod
    def _time_text(ns: int) -> str:
        return f"t = {ns / 1000.0:,.1f} µs"

    def _update_time(self) -> None:
        if self.session.trace is not None:
            self.time_label.setText(self._time_text(self.session.playhead_ns))

    def _update_legend(self) -> None:
        if self.session.color_mode == "sm":
            n = self._n_sms
            colors = palette.sm_colors(n)
            samples = [palette.swatch(tuple(colors[i % n]), f"SM {i}") for i in (0, 1, 2, 3)]
            samples.append("…")
            samples += [palette.swatch(tuple(colors[i % n]), f"SM {i}") for i in (n // 2, n - 1)]
            self.legend.setText(
                f"{tr('Colour = streaming multiprocessor (SM) that ran the block')}: "
                + " ".join(samples)
                + f" ({tr('{n} colours, cyclic').format(n=n)})"
            )
            return
        entries = [
            palette.swatch(palette.STATE_COLORS[s], tr(name))
            for s, name in palette.STATE_NAMES.items()  # never "at barrier": see palette
        ]
        self.legend.setText(f"{tr('Block state at the playhead')}: " + " &nbsp; ".join(entries))

    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        item = self.plot.getPlotItem()
        item.setLabel("bottom", tr("blockIdx.x → (N direction: columns of C)"))
        item.setLabel("left", tr("blockIdx.y ↓ (M direction: rows of C)"))
        if self.session.trace is not None:
            self._update_title()
            self._update_legend()

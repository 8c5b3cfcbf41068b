"""The selected block's k-steps over time: one row per channel of marks.

Under the SM lanes: where the lanes show every block as one bar, this strip opens the selected
block up into its phases as it stamped them. A pipelined kernel shows two rows, the copy of
step t + S - 1 running beside the compute of step t.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core import metrics
from matviz.core.step_bars import StepBars, raster, step_bars
from matviz.core.timeline import BlockState

STATE_OF = {"loading": BlockState.LOADING, "computing": BlockState.COMPUTING}
PLOT_HEIGHT = 96
BINS = 2000  # columns of the strip's image: one image however many k-steps there are


class BlockStepsView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.bars: StepBars | None = None
        self.caption = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.plot = palette.make_plot()
        self.plot.setFixedHeight(PLOT_HEIGHT)
        item = self.plot.getPlotItem()
        self.viewbox = item.getViewBox()
        self.viewbox.setMouseEnabled(x=True, y=False)
        self.image = palette.matrix_image(item)  # channel 0 on top
        self.playhead = palette.playhead_line(None)
        self.playhead.setMovable(False)
        item.addItem(self.playhead, ignoreBounds=True)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(self.caption)
        box.addWidget(self.plot)
        self.plot.scene().sigMouseMoved.connect(self._on_move)
        session.traceChanged.connect(self.refresh)
        session.selectionChanged.connect(self._on_selection)
        session.playheadChanged.connect(self._on_playhead)
        self.refresh()

    def refresh(self) -> None:
        trace = self.session.trace
        self.bars = None
        if trace is not None and trace.n_tiles:
            self.bars = step_bars(trace, self.session.selected_block)
        self.plot.setVisible(self.bars is not None)
        self.setVisible(trace is not None and trace.n_tiles > 0)
        if self.bars is not None:
            self._draw(self.bars)
        self._on_playhead(self.session.playhead_ns)
        self.retranslate()

    def _draw(self, bars: StepBars) -> None:
        b = self.session.trace.blocks[bars.block]
        start, end = int(b["start"]), int(b["end"])
        lut = np.zeros((len(bars.state) + 1, 4), np.uint8)  # code 0: no bar, transparent
        for i, state in enumerate(bars.state):
            lut[i + 1] = (*palette.STATE_COLORS[STATE_OF[state]], 255)
        self.image.setImage(raster(bars, start, end, BINS), lut=lut, levels=(0, len(lut) - 1),
                            autoLevels=False)  # fmt: skip
        n_rows = len(bars.rows)
        lo, hi = start / 1000.0, end / 1000.0
        self.image.setRect(QRectF(lo, 0, hi - lo, n_rows))  # retranslate() names the rows
        self.viewbox.setLimits(xMin=lo - 0.05 * (hi - lo), xMax=hi + 0.05 * (hi - lo))
        self.viewbox.setRange(xRange=(lo, hi), yRange=(0, n_rows), padding=0.01)

    def _on_selection(self, _block: int) -> None:
        self.refresh()

    def _on_playhead(self, ns: int) -> None:
        self.playhead.setValue(ns / 1000.0)

    def bar_at(self, x_us: float, y: float) -> int | None:
        """Index of the bar under (``x_us``, ``y``) (y: 0 at the top channel), or None."""
        bars = self.bars
        if bars is None:
            return None
        row = int(np.floor(y))
        if not 0 <= row < len(bars.rows):
            return None
        depth = bars.depth[row]
        lane = min(int(np.floor((y - row) * depth)), depth - 1)
        t = x_us * 1000.0
        on = (bars.row == row) & (bars.lane == lane)
        hit = np.flatnonzero(on & (bars.begin <= t) & (t < bars.end))
        return int(hit[0]) if len(hit) else None

    def describe(self, i: int) -> str:
        bars = self.bars
        layout = self.session.trace.layout
        begin, end = bars.begin[i] / 1000.0, bars.end[i] / 1000.0
        return tr("{phase} of k-step {step}: {begin:.2f} – {end:.2f} µs ({dur:.2f} µs)").format(
            phase=tr(layout.phases[int(bars.phase[i])].phase.name),
            step=int(bars.step[i]),
            begin=begin,
            end=end,
            dur=end - begin,
        )

    def _on_move(self, scene_pos) -> None:
        pos = self.viewbox.mapSceneToView(QPointF(scene_pos))
        i = self.bar_at(pos.x(), pos.y())
        self.plot.setToolTip("" if i is None else self.describe(i))

    def caption_text(self) -> str:
        trace, block = self.session.trace, self.session.selected_block
        if trace is None or not trace.n_tiles:
            return ""
        if self.bars is None:
            every = trace.manifest["sampling"].get("phase_every") or 1
            if not len(trace.phase_blocks):
                return tr(
                    "Block {block}'s k-steps: this trace has no phase marks (record at level 2 "
                    "or higher)."
                ).format(block=block)
            return tr(
                "Block {block}'s k-steps were not stamped: one block in {every} was sampled; "
                "pick block {sampled}."
            ).format(block=block, every=every, sampled=int(trace.phase_blocks[0]))
        bars = self.bars
        b = trace.blocks[block]
        life = max(int(b["end"] - b["start"]), 1)
        text = tr("Block {block}'s {n} k-steps, as it stamped them").format(
            block=block, n=trace.n_tiles
        )
        slow = metrics.stamping_slowdown(trace)
        if slow is not None:  # the bars are a stamping block's, and stamping slows a block
            text += " · " + tr("a block that stamps ran {pct:+.0f}% against the others").format(
                pct=slow.pct
            )
        if len(bars.rows) > 1:
            in_flight = trace.layout.in_flight
            text += " · " + tr(
                "{stages} k-steps in flight: {rows} overlap {share:.0%} of the block's time"
            ).format(
                stages=in_flight,
                rows=tr(" and ").join(self.row_name(r) for r in bars.rows),
                share=bars.overlap_ns() / life,
            )
        return f"<b>{text}</b>"

    def retranslate(self) -> None:
        self.caption.setText(self.caption_text())
        item = self.plot.getPlotItem()
        item.setLabel("bottom", tr("time since kernel start (µs)"))
        if self.bars is not None:
            item.getAxis("left").setTicks([self._row_ticks(self.bars)])

    @staticmethod
    def row_name(phases: tuple[str, ...]) -> str:
        return " · ".join(tr(name) for name in phases)

    def _row_ticks(self, bars: StepBars) -> list[tuple[float, str]]:
        return [(r + 0.5, self.row_name(row)) for r, row in enumerate(bars.rows)]

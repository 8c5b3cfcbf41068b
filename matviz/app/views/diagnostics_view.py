"""Barrier waits of one block's warps at one k-tile: a diagnostics panel, apart from the timeline.

The waits come from a separate level-3 run, which is much slower than the run the timeline
shows (its slowdown is in the trace's stats), so they are never drawn on the timeline's time
axis: here each warp's wait at each barrier of the k-step is a bar, the warp that arrived last
(it waited least) is marked, and max/mean are given per barrier. The block is the selected one
when its warps were sampled, else the nearest sampled block, and the panel says so. The k-tile
follows the playhead (the selected block's current one) unless the user picks one.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSpinBox, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.views import palette
from matviz.app.views.live_label import live
from matviz.core.explain import (
    BarrierWaits,
    barrier_ordinal,
    barrier_waits,
    diagnostics_slowdown_pct,
    fmt_ns,
)
from matviz.core.timeline import BlockState

TITLE = "Barrier waits — from a separate level-3 run; not on this timeline's time axis"
TITLE_SLOWER = (
    "Barrier waits — from a separate level-3 run (+{pct}% slower than this one); not on this "
    "timeline's time axis"
)
MEANING = (
    "A warp waits at a barrier from its own arrival until the last warp of its block arrives "
    "(§11-12): the warp that arrived last waited least, and the longest wait shows how far the "
    "warps drifted apart. These times come from the slower level-3 run, not from this timeline."
)
NO_WAITS = (
    "This trace has no per-warp barrier waits: record at level 3 to measure them in a separate run."
)
NO_BARRIERS = (
    "This kernel's k-steps pass no block-wide barrier: its warps wait on mbarriers instead (the "
    "block's strip under the SM lanes shows how long its consumers waited for each k-step's "
    "tiles), so there are no barrier waits to show."
)


def barrier_colour(waits: BarrierWaits, i: int) -> tuple[int, int, int]:
    """The colour of the state of the phase that barrier ``i`` ends (loading or computing)."""
    state = waits.barriers[i].phase.state
    return palette.STATE_COLORS[BlockState.LOADING if state == "loading" else BlockState.COMPUTING]


class DiagnosticsView(Retranslating, QWidget):
    """Bars per warp of the barrier waits at one k-tile, labelled as coming from another run."""

    def __init__(self, session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.waits: BarrierWaits | None = None
        self._shown: tuple[int, int] | None = None  # (block, k-tile) drawn; playback skips redraws
        self._bars: list[pg.BarGraphItem] = []

        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.subtitle = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.follow = QCheckBox(checked=True)
        self.ktile_box = QSpinBox()
        self.ktile_label = QLabel()
        row = QHBoxLayout()
        row.addWidget(self.ktile_label)
        row.addWidget(self.ktile_box)
        row.addStretch(1)
        self.plot = palette.make_plot()
        self.plot.setMinimumHeight(140)
        self.plot.setMaximumHeight(240)  # its size hint (480) would push the texts out of view
        item = self.plot.getPlotItem()
        item.setMouseEnabled(x=False, y=False)
        self.last_marks = pg.ScatterPlotItem(
            symbol="t1", size=11, pen=pg.mkPen(palette.HIGHLIGHT), brush=palette.HIGHLIGHT
        )
        self.last_marks.setZValue(10)
        item.addItem(self.last_marks)
        self.stats = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.meaning = QLabel(wordWrap=True)
        self.stack = palette.stacked(
            self, self.placeholder, self.title, live(self.subtitle), row, self.follow,
            (self.plot, 1), live(self.stats), self.meaning,
        )  # fmt: skip

        self.ktile_box.valueChanged.connect(self._on_ktile_box)
        self.follow.toggled.connect(lambda _on: self.update_waits())
        session.traceChanged.connect(self.refresh)
        session.playheadChanged.connect(lambda _ns: self.update_waits(only_if_changed=True))
        session.selectionChanged.connect(lambda _b: self.update_waits())
        self.refresh()

    # -- session -> view ---------------------------------------------------------------------
    def has_waits(self) -> bool:
        trace = self.session.trace
        return (
            trace is not None
            and len(trace.warp_blocks) > 0
            and trace.n_tiles > 0
            and trace.layout.n_barriers > 0
        )

    def refresh(self) -> None:
        trace = self.session.trace
        if trace is not None:
            self.ktile_box.blockSignals(True)
            self.ktile_box.setRange(0, max(trace.n_tiles - 1, 0))
            self.ktile_box.blockSignals(False)
        self.stack.setCurrentIndex(1 if self.has_waits() else 0)
        self.update_waits()
        self.retranslate()

    def playhead_ktile(self) -> int:
        """The selected block's k-tile at the playhead (its last once done, 0 before it runs)."""
        trace, timeline = self.session.trace, self.session.timeline
        block, t = self.session.selected_block, self.session.playhead_ns
        _, ktile = timeline.block_phase(block, t)
        if ktile >= 0:
            return int(ktile)
        return max(trace.n_tiles - 1, 0) if t >= int(trace.blocks["end"][block]) else 0

    def _on_ktile_box(self, _value: int) -> None:
        self.follow.setChecked(False)  # a k-tile picked by hand stays until follow is ticked
        self.update_waits()

    def set_ktile(self, ktile: int) -> None:
        """Show ``ktile`` (stops following the playhead)."""
        self.ktile_box.setValue(int(ktile))
        self.follow.setChecked(False)
        self.update_waits()

    def update_waits(self, only_if_changed: bool = False) -> None:
        """Show the waits of the selected block at the k-tile chosen (or at the playhead's).

        ``only_if_changed``: skip the redraw when block and k-tile are those already drawn
        (the playhead moves every frame during playback).
        """
        if not self.has_waits():
            self.waits, self._shown = None, None
            return
        if self.follow.isChecked():
            self.ktile_box.blockSignals(True)
            self.ktile_box.setValue(self.playhead_ktile())
            self.ktile_box.blockSignals(False)
        shown = (self.session.selected_block, self.ktile_box.value())
        if only_if_changed and shown == self._shown:
            return
        self._shown = shown
        self.waits = barrier_waits(self.session.timeline, *shown)
        self._draw()
        self._update_texts()

    def _draw(self) -> None:
        item = self.plot.getPlotItem()
        for bar in self._bars:
            item.removeItem(bar)
        self._bars = []
        waits = self.waits
        if waits is None:
            self.last_marks.setData([], [])
            return
        n_warps, n_barriers = waits.waits.shape
        width = 0.8 / n_barriers
        warps = np.arange(n_warps)
        xs, ys = [], []
        for i in range(n_barriers):
            x = warps - 0.4 + width * (i + 0.5)
            colour = barrier_colour(waits, i)
            bar = pg.BarGraphItem(
                x=x, height=waits.waits[:, i], width=width * 0.9, brush=colour, pen=None
            )
            item.addItem(bar)
            self._bars.append(bar)
            xs.append(x[waits.last[i]])
            ys.append(0.0)
        self.last_marks.setData(xs, ys)
        top = max(float(waits.waits.max()), 1.0)
        item.setYRange(-0.06 * top, top * 1.05, padding=0)
        item.setXRange(-0.6, n_warps - 0.4, padding=0)
        palette.set_ticks(item.getAxis("bottom"), [palette.index_ticks(n_warps, 8, offset=0.0)])

    # -- texts -------------------------------------------------------------------------------
    def barrier_name(self, i: int) -> str:
        """'first __syncthreads (ends load)': the description's name and phase."""
        ph = self.waits.barriers[i]
        which = barrier_ordinal(ph.barrier, len(self.waits.barriers), tr)
        return tr("{which} {barrier} (ends {phase})").format(
            which=which, barrier=ph.phase.barrier, phase=ph.name
        )

    def title_text(self) -> str:
        trace = self.session.trace
        pct = diagnostics_slowdown_pct(trace) if trace is not None else None
        text = tr(TITLE) if pct is None else tr(TITLE_SLOWER).format(pct=f"{pct:.0f}")
        if trace is not None and trace.is_simulated:
            text += f" · {palette.source_html(trace, self.session.source_label)}"
        return f"<b>{text}</b>" if trace is None or not trace.is_simulated else text

    def _update_texts(self) -> None:
        trace, waits = self.session.trace, self.waits
        self.title.setText(self.title_text())
        if trace is None or waits is None:
            self.subtitle.setText("")
            self.stats.setText("")
            return
        row = trace.blocks[waits.block]
        where = tr("block ({bx}, {by}), {kt}, {warps} warps").format(
            bx=int(row["bx"]), by=int(row["by"]),
            kt=palette.ktile_text(waits.ktile, trace.n_tiles), warps=waits.waits.shape[0],
        )  # fmt: skip
        if waits.substituted:
            sel = trace.blocks[waits.requested]
            where += " · " + tr(
                "the warps of block ({bx}, {by}) were not sampled: this is the nearest sampled "
                "block"
            ).format(bx=int(sel["bx"]), by=int(sel["by"]))
        self.subtitle.setText(where)
        lines = []
        for i in range(len(waits.barriers)):
            swatch = palette.swatch(barrier_colour(waits, i), html.escape(self.barrier_name(i)))
            lines.append(
                swatch
                + ": "
                + tr("warp {last} arrived last (waited least); max {max}, mean {mean}").format(
                    last=waits.last[i], max=fmt_ns(waits.max_ns[i]), mean=fmt_ns(waits.mean_ns[i])
                )
            )
        marker = f'<span style="color:{palette.hexcolor(palette.HIGHLIGHT)}">&#9650;</span>'
        lines.append(f"{marker} {tr('the warp that arrived last')}")
        self.stats.setText("<br>".join(lines))

    def retranslate(self) -> None:
        trace = self.session.trace
        if trace is None:
            self.placeholder.setText(tr("No trace loaded"))
        elif trace.n_tiles and not trace.layout.n_barriers:
            self.placeholder.setText(tr(NO_BARRIERS))
        else:
            self.placeholder.setText(tr(NO_WAITS))
        self.ktile_label.setText(tr("k-tile t ="))
        self.follow.setText(tr("follow the playhead"))
        self.meaning.setText(tr(MEANING))
        item = self.plot.getPlotItem()
        palette.set_label(item, "bottom", "warp")  # plot labels stay English
        palette.set_label(item, "left", "wait (ns)")
        if trace is not None:
            self._update_texts()

"""SM lanes: one row per resident-block slot of each SM, every block a bar over time.

All bars are rasterised once per trace into one (rows x time-bins) uint8 image, so the view
stays responsive with 65,536 blocks; the playhead is a draggable line, nothing is redrawn.
With millions of blocks a cell samples the block running at its centre (the status line says
so), and the layout's sorts run off the GUI thread so the window opens at once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QWidget,
)

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.block_steps import BlockStepsView
from matviz.core.metrics import timeline_cost
from matviz.core.timeline import Timeline
from matviz.core.trace import Trace

BINS = 2000  # time bins of the raster
MODES = ("wave", "progress")
ASYNC_BLOCKS = 500_000  # above this many blocks the lanes are laid out off the GUI thread
ODD_SM_IDLE = 255  # code of an idle cell in an odd SM's rows (banded background)
# Added to a busy cell's code in an odd SM's rows, whose colour is then a shade darker: the
# lanes of neighbouring busy SMs (2 px each at 1280x720) would otherwise run together.
ODD_SM_SHADE = 128
ODD_SM_DARKER = 0.8
PROGRESS_LEVELS = 64


def time_axis_label(trace: Trace | None) -> str:
    """The time axis, and what recording cost its times: the instrumented build's time against
    the plain kernel's, measured in the same process (nothing where the trace does not say:
    simulated). On the axis, one line: a wrapped caption would grow the view."""
    label = tr("time since kernel start (µs)")
    cost = timeline_cost(trace) if trace is not None else None
    if cost is None:
        return label
    return label + " · " + tr("level-{level} build: {pct:+.1f}% against level 0").format(
        level=cost.level, pct=cost.overhead_pct
    )


def wave_legend(waves: int) -> list[str]:
    """One swatch per wave while the colours last; beyond that, what the colours cycle through.

    With more waves than colours each colour lists its waves ("1, 10, 19, …") after a
    "wave 1–63" heading, so the legend still covers every wave.
    """
    colors = palette.WAVE_COLORS
    if waves <= len(colors):
        return [palette.swatch(colors[w], tr("wave {w}").format(w=w + 1)) for w in range(waves)]
    out = [tr("wave {w}").format(w=f"1–{waves}") + ":"]
    for c, rgb in enumerate(colors):
        numbers = list(range(c + 1, waves + 1, len(colors)))
        shown = ", ".join(str(n) for n in numbers[:2]) + (", …" if len(numbers) > 2 else "")
        out.append(palette.swatch(rgb, shown))
    return out


@dataclass(frozen=True)
class LaneLayout:
    """Where every block of a trace goes in the lanes, and the raster of block ids."""

    row: np.ndarray  # lane row of each block
    wave: np.ndarray  # SM wave of each block (0-based)
    keys: np.ndarray  # row * (span + 1) + start, sorted, for hover look-ups
    order: np.ndarray  # block of each sorted key
    n_slots: int
    n_sms: int
    span: int  # ns
    cells: np.ndarray  # (rows, BINS): block id + 1 per raster cell, 0 = idle
    per_cell: float  # blocks one cell stands for on average


def lay_out(trace: Trace, timeline: Timeline) -> LaneLayout:
    """Lane rows ((smid, slot) never overlap in time), waves and the raster: numpy only, so it
    may run off the GUI thread."""
    blocks = trace.blocks
    slot, n_slots = timeline.sm_slots()
    smid = blocks["smid"].astype(np.int64)
    n_slots = max(int(n_slots), 1)
    n_sms = max(int(trace.manifest["device"].get("sm_count", 0)), int(smid.max()) + 1)
    row = smid * n_slots + np.asarray(slot, np.int64)
    span = max(int(blocks["end"].max()), 1)
    keys = row * (span + 1) + blocks["start"]
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    # The wave of a block = how many blocks ran in its lane before it.
    rows_sorted = row[order]
    first = np.searchsorted(rows_sorted, rows_sorted, side="left")
    wave = np.empty(len(blocks), np.int64)
    wave[order] = np.arange(len(blocks)) - first
    # Raster: per (row, time-bin) cell the block running at the bin's centre. One search per
    # cell, so the cost follows the raster, not the block count (no scatter of 2 marks per
    # block); where bars are shorter than a bin a cell shows one sample of the blocks it spans.
    n_rows = n_sms * n_slots
    centres = np.floor((np.arange(BINS) + 0.5) * (span / BINS)).astype(np.int64)
    rows = np.arange(n_rows, dtype=np.int64)[:, None]
    i = np.searchsorted(keys, rows * (span + 1) + centres, side="right") - 1
    block = order[np.maximum(i, 0)]
    hit = (i >= 0) & (row[block] == rows) & (centres < blocks["end"][block])
    cells = np.where(hit, block + 1, 0)
    per_cell = len(blocks) / (n_rows * BINS)
    return LaneLayout(row, wave, keys, order, n_slots, n_sms, span, cells, per_cell)


class SmLanesView(Retranslating, QWidget):
    """x = time (µs), y = (SM, slot) rows; bars coloured by SM wave or by k-tile progress."""

    laidOut = Signal()  # the lanes show the current trace (later than traceChanged when huge)
    _laidOut = Signal(object, object)  # (trace, LaneLayout) from the layout thread

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.timeline: Timeline | None = None
        self.mode = "wave"
        self.row: np.ndarray = np.zeros(0, np.int64)  # lane row of each block
        self.wave: np.ndarray = np.zeros(0, np.int64)  # SM wave of each block (0-based)
        self.n_rows = self.n_slots = self.n_sms = 0
        self._cells: np.ndarray | None = None  # block id + 1 per raster cell, 0 = idle
        self._keys = np.zeros(0)  # row * span + start, sorted, for hover look-ups
        self._order = np.zeros(0, np.int64)
        self._span = 1
        self.per_cell = 0.0

        self.placeholder = QLabel(alignment=Qt.AlignCenter)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.caption = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.mode_box = QComboBox()
        self.mode_box.addItems(["", ""])
        self.mode_box.currentIndexChanged.connect(self._on_mode)
        self.plot = palette.make_plot()
        item = self.plot.getPlotItem()
        self.viewbox = item.getViewBox()
        self.viewbox.setMouseEnabled(x=True, y=False)
        self.image = palette.matrix_image(item)
        self.marker = palette.outline_item(2.5)
        item.addItem(self.marker)
        self.playhead = palette.playhead_line()
        item.addItem(self.playhead, ignoreBounds=True)
        self._syncing = False
        self.playhead.sigPositionChanged.connect(self._on_drag)

        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.mode_box)
        self.steps = BlockStepsView(session)
        self.stack = palette.stacked(
            self, self.placeholder, top, (self.plot, 1), self.caption, self.steps
        )

        self.plot.scene().sigMouseMoved.connect(self._on_move)
        self.plot.scene().sigMouseClicked.connect(self._on_click)
        self._laidOut.connect(self._on_laid_out)
        session.traceChanged.connect(self.refresh)
        session.playheadChanged.connect(self._on_playhead)
        session.selectionChanged.connect(self._on_selection)
        self.refresh()

    # -- per-trace precomputation ------------------------------------------------------------
    def refresh(self) -> None:
        trace = self.session.trace
        self.timeline = self.session.timeline
        self._cells = None
        self._apply(None)
        if trace is None:
            self.image.clear()
        elif self.session.interactive and len(trace.blocks) > ASYNC_BLOCKS:
            # seconds of sorting for millions of blocks: off the GUI thread, so the window
            # opens and plays while the lanes fill in (video frames wait: not interactive)
            self.image.clear()
            work = (trace, self.timeline)
            threading.Thread(target=self._lay_out_async, args=work, daemon=True).start()
        else:
            self._show(lay_out(trace, self.timeline))
        self.stack.setCurrentIndex(0 if trace is None else 1)
        self.retranslate()

    def _lay_out_async(self, trace: Trace, timeline: Timeline) -> None:
        layout = lay_out(trace, timeline)
        try:
            self._laidOut.emit(trace, layout)  # queued to the GUI thread
        except RuntimeError:  # the view was deleted meanwhile
            pass

    def _on_laid_out(self, trace: Trace, layout: LaneLayout) -> None:
        if trace is self.session.trace and self._cells is None:  # not a stale trace's
            self._show(layout)
            self.retranslate()

    def _apply(self, layout: LaneLayout | None) -> None:
        if layout is None:  # no trace, or its layout still on the way: no bars, no hover
            empty = np.zeros(0, np.int64)
            self.row, self.wave, self._keys, self._order = empty, empty, empty, empty
            self.n_rows = self.n_slots = self.n_sms = 0
            self._span, self.per_cell = 1, 0.0
            return
        self.row, self.wave = layout.row, layout.wave
        self._keys, self._order = layout.keys, layout.order
        self.n_slots, self.n_sms = layout.n_slots, layout.n_sms
        self.n_rows, self._span = layout.n_sms * layout.n_slots, layout.span
        self.per_cell = layout.per_cell
        self._cells = layout.cells

    def _show(self, layout: LaneLayout) -> None:
        self._apply(layout)
        self._paint()
        span_us = self._span / 1000.0
        self.viewbox.setLimits(xMin=-0.05 * span_us, xMax=1.05 * span_us)
        self.viewbox.setRange(xRange=(0, span_us), yRange=(0, self.n_rows), padding=0.01)
        palette.fit_vertical_ticks(self.plot.getPlotItem().getAxis("left"), self._sm_ticks)
        self._on_playhead(self.session.playhead_ns)
        self._on_selection(self.session.selected_block)
        self.laidOut.emit()

    def _codes(self) -> np.ndarray:
        cells = self._cells
        busy = cells > 0
        rows, bins = np.nonzero(busy)  # the busy cells, in the order cells[busy] gives them
        block = cells[busy] - 1
        codes = np.zeros(cells.shape, np.uint8)
        odd_sm = (np.arange(self.n_rows) // self.n_slots) % 2 == 1
        codes[odd_sm] = ODD_SM_IDLE
        shade = np.where(odd_sm[rows], ODD_SM_SHADE, 0).astype(np.uint8)
        if self.mode == "wave":
            # the colours cycle: wave modulo their count (a clamp drew every wave past 253 alike)
            codes[busy] = self.wave[block] % len(palette.WAVE_COLORS) + 1 + shade
            return codes
        trace = self.session.trace
        t = (bins + 0.5) * (self._span / BINS)
        start, end = trace.blocks["start"][block], trace.blocks["end"][block]
        frac = (t - start) / np.maximum(end - start, 1)  # blocks without phases: linear
        if trace.n_tiles and len(trace.phase_blocks):
            phase_row = np.full(len(trace.blocks), -1, np.int64)
            phase_row[trace.phase_blocks] = np.arange(len(trace.phase_blocks))
            pr = phase_row[block]
            has = pr >= 0
            # A k-step is done when its last mark has passed (in any channel of marks).
            done_at = np.maximum.accumulate(trace.marks.max(axis=2), axis=1)
            big = float(max(int(done_at.max()), self._span) + 1)
            flat = (done_at + np.arange(len(done_at))[:, None] * big).ravel()
            done = np.searchsorted(flat, t[has] + pr[has] * big, side="right")
            frac[has] = (done - pr[has] * trace.n_tiles) / trace.n_tiles
        level = np.clip(frac * PROGRESS_LEVELS, 0, PROGRESS_LEVELS - 1).astype(np.uint8)
        codes[busy] = 1 + level + shade
        return codes

    def _paint(self) -> None:
        lut = palette.wave_lut() if self.mode == "wave" else palette.progress_lut(PROGRESS_LEVELS)
        colours = slice(1, ODD_SM_SHADE)
        shaded = slice(ODD_SM_SHADE + 1, 2 * ODD_SM_SHADE)
        lut[shaded, :3] = (lut[colours, :3] * ODD_SM_DARKER).astype(np.uint8)
        lut[ODD_SM_IDLE, :3] = (232, 232, 236)
        self.image.setImage(self._codes(), lut=lut, levels=(0, 255), autoLevels=False)
        self.image.setRect(QRectF(0, 0, self._span / 1000.0, self.n_rows))

    def _sm_ticks(self, room: int) -> list[list[tuple[float, str]]]:
        """'SM 0', 'SM 8', ...: every SM up to 16, else every 8th, fewer where the lanes hold
        fewer than ``room`` labels (every view exported at 1280x720: 132 SMs in 90 px)."""
        usual = self.n_sms if self.n_sms <= 16 else -(-self.n_sms // 8)
        shown = {int(s) for s, _ in palette.index_ticks(self.n_sms, min(usual, room), offset=0)}
        half = self.n_slots / 2
        major = [(s * self.n_slots + half, f"SM {s}") for s in sorted(shown)]
        minor = [(s * self.n_slots + half, "") for s in range(self.n_sms) if s not in shown]
        return [major, minor]

    # -- session -> view ---------------------------------------------------------------------
    def _on_playhead(self, ns: int) -> None:
        self._syncing = True
        self.playhead.setValue(ns / 1000.0)
        self._syncing = False

    def _on_selection(self, block: int) -> None:
        trace = self.session.trace
        if trace is None or not len(self.row):
            return
        b = trace.blocks[block]
        self.marker.setRect(
            b["start"] / 1000.0, float(self.row[block]), (b["end"] - b["start"]) / 1000.0, 1.0
        )

    def _on_mode(self, index: int) -> None:
        mode = MODES[max(index, 0)]
        if mode != self.mode:
            self.mode = mode
            if self._cells is not None:
                self._paint()
            self._update_caption()

    # -- user -> session ---------------------------------------------------------------------
    def _on_drag(self) -> None:
        if not self._syncing:
            self.session.set_playhead(int(round(self.playhead.value() * 1000.0)))

    def block_at(self, x_us: float, y: float) -> int | None:
        """The block whose bar covers time ``x_us`` in lane row ``y``, or None."""
        if self.session.trace is None or not len(self._keys):
            return None
        row, t = int(np.floor(y)), x_us * 1000.0
        if not 0 <= row < self.n_rows or not 0 <= t <= self._span:
            return None
        i = int(np.searchsorted(self._keys, row * (self._span + 1) + t, side="right")) - 1
        if i < 0:
            return None
        block = int(self._order[i])
        b = self.session.trace.blocks[block]
        return block if self.row[block] == row and b["start"] <= t < b["end"] else None

    def describe(self, block: int) -> str:
        """Hover text: which block, where and when it ran, and its phase at the playhead."""
        b = self.session.trace.blocks[block]
        t = self.session.playhead_ns
        state, ktile = self.timeline.block_phase(block, t)
        name = palette.state_text(self.timeline, block, t, state)
        if ktile is not None and ktile >= 0:
            name += " · " + palette.ktile_text(ktile, self.session.trace.n_tiles)
        return tr(
            "block {i} ({bx}, {by}) · SM {sm}, slot {slot} · wave {wave}\n"
            "start {start:.2f} µs · end {end:.2f} µs ({dur:.2f} µs)\nat the playhead: {phase}"
        ).format(
            i=block,
            bx=int(b["bx"]),
            by=int(b["by"]),
            sm=int(b["smid"]),
            slot=int(self.row[block] % self.n_slots),
            wave=int(self.wave[block]) + 1,
            start=b["start"] / 1000,
            end=b["end"] / 1000,
            dur=(b["end"] - b["start"]) / 1000,
            phase=name,
        )

    def _on_move(self, scene_pos) -> None:
        if self.session.trace is None:
            return
        pos = self.viewbox.mapSceneToView(QPointF(scene_pos))
        block = self.block_at(pos.x(), pos.y())
        self.plot.setToolTip("" if block is None else self.describe(block))

    def _on_click(self, event) -> None:
        if event.button() != Qt.LeftButton or self.session.trace is None:
            return
        pos = self.viewbox.mapSceneToView(QPointF(event.scenePos()))
        block = self.block_at(pos.x(), pos.y())
        if block is not None:
            self.session.select_block(block)

    # -- texts -------------------------------------------------------------------------------
    def _update_caption(self) -> None:
        trace = self.session.trace
        if trace is None or self._cells is None:
            self.caption.setText("")  # no layout yet: nothing true to say about waves
            return
        n = len(trace.blocks)
        waves = int(self.wave.max()) + 1 if len(self.wave) else 0
        if self.mode == "wave":
            swatches = wave_legend(waves)
        else:
            lut = palette.progress_lut(PROGRESS_LEVELS)
            swatches = [
                palette.swatch(tuple(lut[1]), tr("first k-tile")),
                palette.swatch(tuple(lut[PROGRESS_LEVELS // 2]), "…"),
                palette.swatch(tuple(lut[PROGRESS_LEVELS]), tr("last k-tile")),
            ]
        # the lanes drawn: as many per SM as ever ran on one at once (not what would fit)
        lanes = tr("{n} blocks on {res} lanes ({slots} per SM × {sms} SMs)")
        if n == 1:  # a launch of one block (a small matrix) read '1 blocks'
            lanes = tr("one block on {res} lanes ({slots} per SM × {sms} SMs)")
        if waves > 1:
            how = tr("{waves} waves; empty lanes at the end are the tail effect (the last wave "
                     "does not fill the GPU).")  # fmt: skip
        elif n < self.n_rows:
            how = tr("one wave: every block started at once, leaving {idle} of {res} lanes empty.")
        else:
            how = tr("one wave that fills every lane.")
        fill = dict(n=n, sms=self.n_sms, slots=self.n_slots, res=self.n_rows, waves=waves,
                    idle=self.n_rows - n)  # fmt: skip
        text = f"{lanes.format(**fill)} → {how.format(**fill)}"
        self.caption.setText(" ".join(swatches) + "<br>" + text)

    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        self.mode_box.setItemText(0, tr("colour: SM wave"))
        self.mode_box.setItemText(1, tr("colour: k-tile progress"))
        item = self.plot.getPlotItem()
        trace = self.session.trace
        item.setLabel("bottom", time_axis_label(trace))
        item.setLabel("left", tr("SM · slot"))
        if trace is not None:
            self.title.setText(
                f"{tr('Thread blocks on the SMs over time')}<br>{palette.config_text(trace)} · "
                f"{palette.source_html(trace, self.session.source_label)}"
            )
            self._update_caption()

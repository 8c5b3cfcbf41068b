"""SM lanes: one row per resident-block slot of each SM, every block a bar over time.

All bars are rasterised once per trace into one (rows x time-bins) uint8 image, so the view
stays responsive with 65,536 blocks; the playhead is a draggable line, nothing is redrawn.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QWidget,
)

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core.timeline import Timeline

BINS = 2000  # time bins of the raster
MODES = ("wave", "progress")
ODD_SM_IDLE = 255  # code of an idle cell in an odd SM's rows (banded background)
PROGRESS_LEVELS = 64


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


class SmLanesView(Retranslating, QWidget):
    """x = time (µs), y = (SM, slot) rows; bars coloured by SM wave or by k-tile progress."""

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
        self.stack = palette.stacked(self, self.placeholder, top, (self.plot, 1), self.caption)

        self.plot.scene().sigMouseMoved.connect(self._on_move)
        self.plot.scene().sigMouseClicked.connect(self._on_click)
        session.traceChanged.connect(self.refresh)
        session.playheadChanged.connect(self._on_playhead)
        session.selectionChanged.connect(self._on_selection)
        self.refresh()

    # -- per-trace precomputation ------------------------------------------------------------
    def refresh(self) -> None:
        trace = self.session.trace
        self.timeline = self.session.timeline
        self._cells = None
        if trace is None:
            self.image.clear()
        else:
            self._layout_rows()
            self._rasterise()
            self._paint()
            span_us = self._span / 1000.0
            self.viewbox.setLimits(xMin=-0.05 * span_us, xMax=1.05 * span_us)
            self.viewbox.setRange(xRange=(0, span_us), yRange=(0, self.n_rows), padding=0.01)
            self.plot.getPlotItem().getAxis("left").setTicks(self._sm_ticks())
            self._on_playhead(self.session.playhead_ns)
            self._on_selection(self.session.selected_block)
        self.stack.setCurrentIndex(0 if trace is None else 1)
        self.retranslate()

    def _layout_rows(self) -> None:
        """Lane row of every block ((smid, slot) never overlap in time) and its SM wave."""
        trace = self.session.trace
        blocks = trace.blocks
        slot, n_slots = self.timeline.sm_slots()
        smid = blocks["smid"].astype(np.int64)
        self.n_slots = max(int(n_slots), 1)
        self.n_sms = max(int(trace.manifest["device"].get("sm_count", 0)), int(smid.max()) + 1)
        self.n_rows = self.n_sms * self.n_slots
        self.row = smid * self.n_slots + np.asarray(slot, np.int64)
        self._span = max(trace.duration_ns, 1)
        keys = self.row * (self._span + 1) + blocks["start"]
        self._order = np.argsort(keys, kind="stable")
        self._keys = keys[self._order]
        # The wave of a block = how many blocks ran in its lane before it.
        rows_sorted = self.row[self._order]
        first = np.searchsorted(rows_sorted, rows_sorted, side="left")
        self.wave = np.empty(len(blocks), np.int64)
        self.wave[self._order] = np.arange(len(blocks)) - first

    def _rasterise(self) -> None:
        """Block id + 1 in every (row, time-bin) cell it covers: one cumulative sum."""
        blocks = self.session.trace.blocks
        dt = self._span / BINS
        sb = np.clip(np.rint(blocks["start"] / dt), 0, BINS).astype(np.int64)
        eb = np.clip(np.rint(blocks["end"] / dt), 0, BINS).astype(np.int64)
        ids = np.arange(1, len(blocks) + 1, dtype=np.int64)
        diff = np.zeros(self.n_rows * BINS + 1, np.int64)
        np.add.at(diff, self.row * BINS + sb, ids)  # lanes never overlap: marks never collide
        np.add.at(diff, self.row * BINS + eb, -ids)
        cells = np.cumsum(diff[:-1]).reshape(self.n_rows, BINS)
        cells[(cells < 0) | (cells > len(blocks))] = 0  # guard: overlapping bars would sum ids
        self._cells = cells

    def _codes(self) -> np.ndarray:
        cells = self._cells
        busy = cells > 0
        block = cells[busy] - 1
        codes = np.zeros(cells.shape, np.uint8)
        odd_sm = (np.arange(self.n_rows) // self.n_slots) % 2 == 1
        codes[odd_sm] = ODD_SM_IDLE
        if self.mode == "wave":
            codes[busy] = np.minimum(self.wave[block], 253) + 1
            return codes
        trace = self.session.trace
        t = (np.nonzero(busy)[1] + 0.5) * (self._span / BINS)
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
        codes[busy] = 1 + np.clip(frac * PROGRESS_LEVELS, 0, PROGRESS_LEVELS - 1).astype(np.uint8)
        return codes

    def _paint(self) -> None:
        lut = palette.wave_lut() if self.mode == "wave" else palette.progress_lut(PROGRESS_LEVELS)
        lut[ODD_SM_IDLE, :3] = (232, 232, 236)
        self.image.setImage(self._codes(), lut=lut, levels=(0, 255), autoLevels=False)
        self.image.setRect(QRectF(0, 0, self._span / 1000.0, self.n_rows))

    def _sm_ticks(self) -> list[list[tuple[float, str]]]:
        step = 1 if self.n_sms <= 16 else 8
        half = self.n_slots / 2
        major = [(s * self.n_slots + half, f"SM {s}") for s in range(0, self.n_sms, step)]
        minor = [(s * self.n_slots + half, "") for s in range(self.n_sms) if s % step]
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
        if trace is None:
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
        self.caption.setText(
            " ".join(swatches)
            + "<br>"
            + tr(
                "{n} blocks on {sms} SMs × {slots} slots = {res} at a time → {waves} waves; "
                "empty lanes at the end are the tail effect (the last wave does not fill the GPU)."
            ).format(n=n, sms=self.n_sms, slots=self.n_slots, res=self.n_rows, waves=waves)
        )

    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        self.mode_box.setItemText(0, tr("colour: SM wave"))
        self.mode_box.setItemText(1, tr("colour: k-tile progress"))
        item = self.plot.getPlotItem()
        item.setLabel("bottom", tr("time since kernel start (µs)"))
        item.setLabel("left", tr("SM (one row per resident block slot)"))
        trace = self.session.trace
        if trace is not None:
            self.title.setText(
                f"{tr('Thread blocks on the SMs over time')}<br>{palette.config_text(trace)} · "
                f"{palette.source_html(trace, self.session.source_label)}"
            )
            self._update_caption()


"""Coalescing (lesson 8 §15, §28): where one warp's global load or store lands in memory.

Top row: the warp's 32 lanes. Bottom row: the 32-byte sectors the request touches, in address
order, shaded by 128-byte line; a line joins each lane to its sector. The model
(:mod:`matviz.core.coalescing`) follows the selected block, the warp box and the k-tile at the
playhead, for any kernel: it reads the global accesses from the trace's description.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.on_screen import WhenOnScreen
from matviz.core import coalescing as co
from matviz.core.kernel import WARP

LANE_Y, SECTOR_Y = 1.0, 0.0
LINE_SHADES = ((222, 235, 247), (198, 219, 239))  # alternate 128-byte lines
LANE_COLOR = (31, 119, 180)
SECTOR_COLOR = (214, 39, 40)
COALESCED_SECTORS = WARP * co.ELEMENT_BYTES // co.SECTOR_BYTES  # a warp's 128 contiguous bytes


class CoalescingView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.requests: list[co.Request] = []
        self.key: tuple | None = None  # (block, warp, k-tile) the requests belong to

        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.request_box = QComboBox()
        self.request_box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.request_box.setMinimumContentsLength(16)
        self.request_box.currentIndexChanged.connect(self._draw)
        self.warp_label = QLabel()
        self.warp_box = QSpinBox()
        self.warp_box.valueChanged.connect(self.refresh_requests)
        self.summary = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.plot = palette.make_plot()
        item = self.plot.getPlotItem()
        item.getViewBox().setMouseEnabled(False, False)
        item.hideAxis("left")
        item.setRange(xRange=(-2.5, WARP + 1.5), yRange=(-0.7, 1.6), padding=0.0)
        item.getAxis("bottom").setTicks([palette.index_ticks(WARP, 16, offset=0.0)])
        self.links = pg.PlotDataItem(pen=pg.mkPen((90, 90, 90, 160), width=1), connect="pairs")
        self.lanes = pg.ScatterPlotItem(size=11, brush=pg.mkBrush(LANE_COLOR), pen=None)
        self.sectors = pg.BarGraphItem(x=[], height=0.5, width=0.9, y0=SECTOR_Y - 0.25)
        for child in (self.sectors, self.links, self.lanes):
            item.addItem(child)
        self.sector_texts: list[pg.TextItem] = []
        row = QHBoxLayout()
        row.addWidget(self.request_box, 1)
        row.addWidget(self.warp_label)
        row.addWidget(self.warp_box)
        self.stack = palette.stacked(
            self, self.placeholder, self.title, row, self.summary, (self.plot, 1)
        )
        session.traceChanged.connect(self.refresh)
        session.selectionChanged.connect(self.refresh_requests)
        session.playheadChanged.connect(WhenOnScreen(self, self._follow).request)
        self.refresh()

    # -- session -> view ---------------------------------------------------------------------
    def has_accesses(self) -> bool:
        trace = self.session.trace
        return trace is not None and bool(trace.config.global_accesses)

    def refresh(self) -> None:
        trace = self.session.trace
        self.stack.setCurrentIndex(1 if self.has_accesses() else 0)
        self.retranslate()
        if trace is None or not self.has_accesses():
            return
        self.warp_box.blockSignals(True)
        self.warp_box.setRange(0, max(trace.config.warps - 1, 0))
        self.warp_box.blockSignals(False)
        self.key = None
        self.refresh_requests()

    def _ktile(self) -> int:
        trace, timeline = self.session.trace, self.session.timeline
        if timeline is None or not trace.config.n_steps:
            return 0
        _, ktile = timeline.block_phase(self.session.selected_block, self.session.playhead_ns)
        return max(int(ktile), 0)

    def _follow(self, *_args) -> None:
        if self.has_accesses() and self.key is not None and self._ktile() != self.key[2]:
            self.refresh_requests()

    def refresh_requests(self, *_args) -> None:
        if not self.has_accesses():
            return
        trace = self.session.trace
        block = self.session.selected_block
        key = (block, int(self.warp_box.value()), self._ktile())
        if key == self.key:
            return
        self.key = key
        b = trace.blocks[block]
        where = (int(b["bx"]), int(b["by"]))
        self.requests = co.warp_requests(trace.config, key[1], where, key[2])
        current = self.request_box.currentIndex()
        self.request_box.blockSignals(True)
        self.request_box.clear()
        self.request_box.addItems([self.request_text(r) for r in self.requests])
        self.request_box.setCurrentIndex(min(max(current, 0), len(self.requests) - 1))
        self.request_box.blockSignals(False)
        self._draw()

    def request(self) -> co.Request | None:
        i = self.request_box.currentIndex()
        return self.requests[i] if 0 <= i < len(self.requests) else None

    @staticmethod
    def request_text(r: co.Request) -> str:
        return f"{r.name}" + (f" [{r.k}]" if r.k else "")

    # -- drawing -----------------------------------------------------------------------------
    def _draw(self, *_args) -> None:
        r = self.request()
        for text in self.sector_texts:
            self.plot.getPlotItem().removeItem(text)
        self.sector_texts.clear()
        if r is None:
            return
        lanes = np.flatnonzero(r.active)
        sectors = r.sectors
        # sectors spread evenly under the lanes, in address order
        inner = (1.5, WARP - 2.5)  # room for the outer sectors' boxes and byte labels
        xs = np.linspace(*inner, len(sectors)) if len(sectors) > 1 else np.array([15.5])
        slot = {int(s): float(x) for s, x in zip(sectors, xs, strict=True)}
        line_of = sectors * co.SECTOR_BYTES // co.LINE_BYTES
        brushes = [pg.mkBrush(LINE_SHADES[int(li) % 2]) for li in line_of]
        width = 0.9 * (xs[1] - xs[0]) if len(xs) > 1 else 3.0
        self.sectors.setOpts(
            x=xs, height=0.5, width=min(width, 3.0), y0=SECTOR_Y - 0.25, brushes=brushes,
            pen=pg.mkPen(SECTOR_COLOR, width=1),
        )  # fmt: skip
        ends = [slot[int(a // co.SECTOR_BYTES)] for a in r.addresses[lanes]]
        pairs = np.empty((2 * len(lanes), 2))
        pairs[0::2] = np.column_stack([lanes, np.full(len(lanes), LANE_Y)])
        pairs[1::2] = np.column_stack([ends, np.full(len(lanes), SECTOR_Y + 0.25)])
        self.links.setData(pairs[:, 0], pairs[:, 1])
        self.lanes.setData(lanes.astype(float), np.full(len(lanes), LANE_Y))
        if len(sectors) <= 8:  # room for each sector's byte range
            for s, x in zip(sectors, xs, strict=True):
                text = pg.TextItem(f"{int(s) * co.SECTOR_BYTES} B", anchor=(0.5, -0.6),
                                   color=palette.FOREGROUND)  # fmt: skip
                text.setPos(float(x), SECTOR_Y - 0.25)
                self.plot.getPlotItem().addItem(text)
                self.sector_texts.append(text)
        self._update_texts()

    def verdict(self, r: co.Request) -> str:
        text = self._global_verdict(r)
        if r.counted_sectors > r.sectors.size:  # a cp.async landing in rows that start mid-sector
            text += "<br>" + tr(
                "This cp.async writes shared memory itself, 8 lanes at a time, and the padded "
                "rows start mid-sector: it writes {counted} shared sectors, the count ncu gives."
            ).format(counted=r.counted_sectors)
        return text

    def _global_verdict(self, r: co.Request) -> str:
        n = r.sectors.size
        elements = np.unique(r.addresses[r.active])
        apart = int(np.median(np.diff(elements))) if len(elements) > 1 else 0
        if len(elements) == 1:
            return tr("every lane reads one element (a broadcast): one sector serves the warp")
        if n <= r.ideal_sectors:
            return tr("coalesced: the lanes' bytes lie side by side, no sector is wasted")
        shared = len(elements) < int(r.active.sum())
        if shared and n <= COALESCED_SECTORS:  # scattered, but no more sectors than 128 B need
            return tr(
                "the lanes read {k} elements, each shared by a group of lanes (a broadcast "
                "per group); they lie {apart} bytes apart, so each needs its own sector"
            ).format(k=len(elements), apart=apart)
        return tr(
            "uncoalesced: neighbouring elements are {apart} bytes apart, so the warp needs "
            "{n} sectors where {ideal} would hold its bytes"
        ).format(apart=apart, n=n, ideal=r.ideal_sectors)

    def _update_texts(self) -> None:
        r = self.request()
        if r is None or self.key is None:
            self.summary.setText("")
            return
        kind = tr("load") if r.kind == "load" else tr("store")
        self.summary.setText(
            "<b>"
            + tr("{name} ({kind} of {matrix}): {lanes} lanes → {sectors} sectors of 32 B in "
                 "{lines} lines of 128 B").format(
                name=r.name, kind=kind, matrix=r.matrix, lanes=int(r.active.sum()),
                sectors=r.sectors.size, lines=r.lines.size,
            )
            + "</b><br>"
            + self.verdict(r)
            + "<br>"
            + tr("Model (from the kernel description): block {block}, warp {warp}, {kt}.").format(
                block=self.key[0], warp=self.key[1],
                kt=palette.ktile_text(self.key[2], max(self.session.trace.n_tiles, 1)),
            )
        )  # fmt: skip

    # -- texts -------------------------------------------------------------------------------
    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        self.title.setText(
            "<b>" + tr("Coalescing: where one warp's global request lands (§15, §28)") + "</b>"
        )
        self.warp_label.setText(tr("warp"))
        self._update_texts()

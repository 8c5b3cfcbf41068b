"""Shared-memory banks hit by one warp access: 32 banks across, the words of a bank stacked.

Lanes reading one word share it (broadcast); every further distinct word in a bank is one
more pass, so an n-way conflict is a column n cells tall.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core import banks

MAX_STACK = 32  # a 4-byte access can stack at most 32 words in one bank


def lanes_text(lanes: list[int]) -> str:
    """'5', '0,8,16' or '0–31' (a run of consecutive lanes)."""
    if len(lanes) > 2 and lanes == list(range(lanes[0], lanes[-1] + 1)):
        return f"{lanes[0]}–{lanes[-1]}"
    return ",".join(map(str, lanes))


class BanksView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.conflict_degree = 0  # n of "n-way" for the shown access (0: none shown)
        self.wavefronts = 0
        self.ideal_wavefronts = 0
        self.cells: dict[tuple[int, int], tuple[int, list[int]]] = {}  # (bank, level) -> word

        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.site_label = QLabel()
        self.sites = QComboBox()
        self.sites.currentIndexChanged.connect(self._on_site)
        self.summary = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.plot = palette.make_plot()
        item = self.plot.getPlotItem()
        item.getViewBox().setMouseEnabled(False, False)
        item.setRange(xRange=(0, banks.N_BANKS), yRange=(0, MAX_STACK), padding=0.01)
        item.getAxis("bottom").setTicks([palette.index_ticks(banks.N_BANKS, 32)])
        item.getAxis("left").setTicks([[(y - 0.5, str(y)) for y in (1, 4, 8, 16, 24, 32)]])
        self.image = pg.ImageItem(axisOrder="row-major")
        item.addItem(self.image)
        self.borders = palette.cell_lines(item, path=palette.cell_borders(32, MAX_STACK))
        self.labels = palette.CellLabels()  # lane numbers, painted when the cells are big enough
        item.addItem(self.labels)

        row = QHBoxLayout()
        row.addWidget(self.site_label)
        row.addWidget(self.sites, 1)
        self.stack = palette.stacked(
            self, self.placeholder, self.title, row, self.summary, (self.plot, 1)
        )

        self.plot.scene().sigMouseMoved.connect(self._on_move)
        session.traceChanged.connect(self.refresh)
        session.probeRowChanged.connect(self._on_probe_row)
        self.refresh()

    # -- session -> view ---------------------------------------------------------------------
    def has_probe(self) -> bool:
        return self.session.trace is not None and len(self.session.trace.probe) > 0

    def refresh(self) -> None:
        self.sites.blockSignals(True)
        self.sites.clear()
        if self.has_probe():
            self.sites.addItems([""] * len(self.session.trace.probe))
            self.sites.setCurrentIndex(self.session.probe_row)
        self.sites.blockSignals(False)
        self._draw()
        self.stack.setCurrentIndex(1 if self.has_probe() else 0)
        self.retranslate()

    def _on_probe_row(self, row: int) -> None:
        self.sites.blockSignals(True)
        self.sites.setCurrentIndex(row)
        self.sites.blockSignals(False)
        self._draw()
        self._update_texts()

    def _on_site(self, index: int) -> None:
        if index >= 0:
            self.session.set_probe_row(index)

    def _draw(self) -> None:
        self.cells.clear()
        self.labels.set_texts([])
        self.conflict_degree = self.wavefronts = self.ideal_wavefronts = 0
        if not self.has_probe():
            self.image.clear()
            return
        rec = self.session.trace.probe[self.session.probe_row]
        offsets, width = np.asarray(rec["offsets"], np.int64), int(rec["width"])
        self.conflict_degree = int(banks.conflict_degree(offsets, width))
        self.wavefronts = int(banks.wavefronts(offsets, width))
        phases = (offsets >= 0).reshape(width // 4, -1).any(axis=1)
        self.ideal_wavefronts = int(phases.sum())
        lanes_of: dict[int, list[int]] = {}
        for lane in np.flatnonzero(offsets >= 0):
            for w in range(width // banks.BANK_BYTES):
                lanes_of.setdefault(int(offsets[lane]) // banks.BANK_BYTES + w, []).append(
                    int(lane)
                )
        codes = np.zeros((MAX_STACK, banks.N_BANKS), np.uint8)
        texts = [[""] * banks.N_BANKS for _ in range(MAX_STACK)]
        level = np.zeros(banks.N_BANKS, np.int64)
        for word in sorted(lanes_of):
            bank, lanes = word % banks.N_BANKS, lanes_of[word]
            if level[bank] >= MAX_STACK:
                continue
            y = int(level[bank])
            level[bank] += 1
            codes[y, bank] = lanes[0] + 1
            self.cells[(bank, y)] = (word, lanes)
            texts[y][bank] = lanes_text(lanes)
        self.labels.set_texts(texts)
        self.image.setImage(codes, lut=palette.lane_lut(), levels=(0, 255), autoLevels=False)

    # -- hover -------------------------------------------------------------------------------
    def word_name(self, word: int) -> str:
        """'As[1][3]': the cell of the kernel's shared arrays (its description's ``shared``, laid
        out at ``array_bases``) a 4-byte word starts; 'word 7' outside every array."""
        config = self.session.trace.config
        byte = word * banks.BANK_BYTES
        for arr in config.shared:
            local = byte - config.array_bases[arr.name]
            if 0 <= local < arr.nbytes:
                index = local // arr.elem_bytes
                return f"{arr.name}[{index // arr.stride}][{index % arr.stride}]"
        return f"word {word}"

    def describe(self, bank: int, level: int) -> str:
        word, lanes = self.cells[(bank, level)]
        return tr("bank {bank} · word {word} = {element} (byte {byte})\nlanes: {lanes}").format(
            bank=bank,
            word=word,
            element=self.word_name(word),
            byte=word * 4,
            lanes=lanes_text(lanes),
        )

    def _on_move(self, scene_pos) -> None:
        pos = self.plot.getPlotItem().getViewBox().mapSceneToView(QPointF(scene_pos))
        key = (int(np.floor(pos.x())), int(np.floor(pos.y())))
        self.plot.setToolTip(self.describe(*key) if key in self.cells else "")

    # -- texts -------------------------------------------------------------------------------
    def _repeats(self, site: str) -> bool:
        """Whether the description runs ``site`` more than once per k-step (then k names it)."""
        try:
            return self.session.trace.config.site(site).repeat > 1
        except KeyError:  # a site the description does not have: show k
            return True

    def site_text(self, row: int) -> str:
        rec = self.session.trace.probe[row]
        kind = tr("store") if rec["kind"] == "store" else tr("load")
        k = f" k={int(rec['k'])}" if self._repeats(str(rec["site"])) else ""
        n = int(banks.conflict_degree(rec["offsets"], int(rec["width"])))
        return f"{rec['site']}{k} ({kind}) — {tr('{n}-way').format(n=n)}"

    def _update_texts(self) -> None:
        if not self.has_probe():
            return
        trace = self.session.trace
        rec = trace.probe[self.session.probe_row]
        conflict = self.conflict_degree > 1
        colour = "#c0392b" if conflict else "#1e8449"
        kind = tr("store") if rec["kind"] == "store" else tr("load")
        self.summary.setText(
            f"<span style='font-size:13pt; color:{colour}'><b>"
            + tr("n-way conflict: {n}").format(n=self.conflict_degree)
            + " · "
            + tr("wavefronts: {w} (ideal {ideal})").format(
                w=self.wavefronts, ideal=self.ideal_wavefronts
            )
            + "</b></span><br>"
            + tr("{kind} of {width} bytes per lane.").format(kind=kind, width=int(rec["width"]))
            + " "
            + tr(
                "Lanes on the same word share it (broadcast); each further word in a bank "
                "costs one more pass."
            )
        )

    def retranslate(self) -> None:
        trace = self.session.trace
        if trace is None:
            self.placeholder.setText(tr("No trace loaded"))
        elif not self.has_probe():
            self.placeholder.setText(
                tr(
                    "The {kernel} kernel uses no shared memory, so there are no bank conflicts "
                    "to show."
                ).format(kernel=trace.kernel)
                if not trace.config.uses_shared
                else tr(
                    "This trace has no shared-memory probe: record or simulate it at "
                    "level 3 (diagnostics) to see which bank each lane hits."
                )
            )
            return
        else:
            probe = trace.manifest.get("sampling", {}).get("probe") or {}
            bx, by = probe.get("block", (0, 0))
            self.title.setText(
                tr(
                    "Shared-memory banks hit by one warp access: block ({bx}, {by}), warp {warp}, "
                    "{kt}"
                ).format(
                    bx=bx,
                    by=by,
                    warp=probe.get("warp", 0),
                    kt=palette.ktile_text(probe.get("ktile", 0), trace.n_tiles),
                )
                + f"<br>{palette.config_text(trace)} · "
                + palette.source_html(trace, self.session.source_label)
            )
            self.site_label.setText(tr("Access site:"))
            for row in range(self.sites.count()):
                self.sites.setItemText(row, self.site_text(row))
            item = self.plot.getPlotItem()
            item.setLabel("bottom", tr("shared-memory bank (4-byte words, word index mod 32)"))
            item.setLabel("left", tr("distinct words in the bank (passes)"))
            self._update_texts()


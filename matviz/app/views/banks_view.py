"""Shared-memory banks hit by one warp access: 32 banks across, the words of a bank stacked.

Lanes reading one word share it (broadcast); every further distinct word in a bank is one
more pass, so an n-way conflict is a column n cells tall.

The view follows the selected block, a warp picked here, and the k-tile of that block at the
playhead. Its accesses come from the level-3 probe when the probe recorded exactly that block,
warp and k-tile on a GPU, and from the access model (:func:`matviz.core.access.access_records`,
evaluated from the kernel's description) otherwise; the summary says which.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.core import access, banks
from matviz.core.trace import PROBE_DTYPE

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
        self.records = np.zeros(0, PROBE_DTYPE)  # the accesses shown, in program order
        self.source = ""  # "probe" (recorded on the GPU) or "model"
        self.key: tuple | None = None  # (block, warp, k-tile) shown
        self.row = 0  # the access shown (the session keeps it too where its probe has the row)

        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.site_label = QLabel()
        self.sites = QComboBox()
        self.sites.currentIndexChanged.connect(self._on_site)
        self.warp_label = QLabel()
        self.warp_box = QSpinBox()
        self.warp_box.valueChanged.connect(self._on_warp)
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
        row.addWidget(self.warp_label)
        row.addWidget(self.warp_box)
        self.stack = palette.stacked(
            self, self.placeholder, self.title, row, self.summary, (self.plot, 1)
        )

        self.plot.scene().sigMouseMoved.connect(self._on_move)
        session.traceChanged.connect(self.refresh)
        session.probeRowChanged.connect(self._on_probe_row)
        session.playheadChanged.connect(self._follow)
        session.selectionChanged.connect(self._follow)
        self.refresh()

    # -- session -> view ---------------------------------------------------------------------
    def has_probe(self) -> bool:
        """Whether there is anything to show: the kernel has shared-memory access sites."""
        return self.session.trace is not None and bool(self.session.trace.config.sites)

    def _probe_key(self) -> tuple | None:
        """(block index, warp, k-tile) the trace's probe recorded, None without a probe."""
        trace = self.session.trace
        if trace is None or not len(trace.probe):
            return None
        probe = trace.manifest.get("sampling", {}).get("probe") or {}
        bx, by = probe.get("block", (0, 0))
        return trace.block_index(int(bx), int(by)), int(probe.get("warp", 0)), int(
            probe.get("ktile", 0)
        )

    def _ktile(self) -> int:
        """The selected block's k-tile at the playhead (its last one once done, 0 before)."""
        trace, timeline = self.session.trace, self.session.timeline
        n = max(trace.config.n_steps, 1)
        state, ktile = timeline.block_phase(self.session.selected_block, self.session.playhead_ns)
        if ktile >= 0:
            return int(ktile)
        done = self.session.playhead_ns >= int(trace.blocks["end"][self.session.selected_block])
        return n - 1 if done else 0

    def _current_key(self) -> tuple[int, int, int]:
        return self.session.selected_block, int(self.warp_box.value()), self._ktile()

    def _load_records(self) -> None:
        """The accesses of the selected block, warp and k-tile: probe or model."""
        trace = self.session.trace
        self.key = self._current_key()
        block, warp, ktile = self.key
        if self.key == self._probe_key() and not trace.is_simulated:
            self.records, self.source = trace.probe, "probe"
            return
        b = trace.blocks[block]
        self.records = access.access_records(
            trace.config, warp, (int(b["bx"]), int(b["by"])), ktile
        )
        self.source = "model"

    def _fill_sites(self) -> None:
        self.sites.blockSignals(True)
        self.sites.clear()
        if len(self.records):
            self.sites.addItems([self.site_text(row) for row in range(len(self.records))])
            self.sites.setCurrentIndex(self._row())
        self.sites.blockSignals(False)

    def refresh(self) -> None:
        self.key = None
        self.row = self.session.probe_row
        self.records = np.zeros(0, PROBE_DTYPE)
        trace = self.session.trace
        if self.has_probe():
            self.warp_box.blockSignals(True)
            self.warp_box.setRange(0, trace.config.warps - 1)
            probe = self._probe_key()
            self.warp_box.setValue(probe[1] if probe else 0)
            self.warp_box.blockSignals(False)
            self._load_records()
        self._fill_sites()
        self._draw()
        self.stack.setCurrentIndex(1 if self.has_probe() else 0)
        self.retranslate()

    def _follow(self, *_args) -> None:
        """Playhead or selection moved: redraw only when the block, warp or k-tile changed."""
        if not self.has_probe() or self._current_key() == self.key:
            return
        self._load_records()
        self._fill_sites()
        self._draw()
        self.retranslate()

    def _on_warp(self, _warp: int) -> None:
        self._follow()

    def _on_probe_row(self, row: int) -> None:
        self.row = row
        self.sites.blockSignals(True)
        self.sites.setCurrentIndex(row)
        self.sites.blockSignals(False)
        self._draw()
        self._update_texts()

    def _row(self) -> int:
        return min(max(self.row, 0), max(len(self.records) - 1, 0))

    def _on_site(self, index: int) -> None:
        if index < 0:
            return
        self.row = index
        self.session.set_probe_row(index)  # refused where the trace's probe has fewer rows
        self._draw()
        self._update_texts()

    def _draw(self) -> None:
        self.cells.clear()
        self.labels.set_texts([])
        self.conflict_degree = self.wavefronts = self.ideal_wavefronts = 0
        if not self.has_probe() or not len(self.records):
            self.image.clear()
            return
        rec = self.records[self._row()]
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
        rec = self.records[row]
        kind = tr("store") if rec["kind"] == "store" else tr("load")
        k = f" k={int(rec['k'])}" if self._repeats(str(rec["site"])) else ""
        n = int(banks.conflict_degree(rec["offsets"], int(rec["width"])))
        return f"{rec['site']}{k} ({kind}) — {tr('{n}-way').format(n=n)}"

    def _update_texts(self) -> None:
        if not self.has_probe() or not len(self.records):
            return
        rec = self.records[self._row()]
        conflict = self.conflict_degree > 1
        colour = "#c0392b" if conflict else "#1e8449"
        kind = tr("store") if rec["kind"] == "store" else tr("load")
        degree = (
            tr("{n}-way bank conflict").format(n=self.conflict_degree)
            if conflict
            else tr("no bank conflict (1-way)")
        )
        source = (
            tr("recorded on the GPU (level-3 probe)")
            if self.source == "probe"
            else tr("model (from the kernel description)")
        )
        probe = self._probe_key()
        if self.source == "model" and probe is not None and not self.session.trace.is_simulated:
            b = self.session.trace.blocks[probe[0]]
            source += " " + tr(
                "(the GPU probe recorded block ({bx}, {by}), warp {warp}, {kt}: select them to "
                "see the measurement)"
            ).format(
                bx=int(b["bx"]),
                by=int(b["by"]),
                warp=probe[1],
                kt=palette.ktile_text(probe[2], self.session.trace.n_tiles),
            )
        self.summary.setText(
            f"<span style='font-size:13pt; color:{colour}'><b>"
            + degree
            + " · "
            + tr("wavefronts: {w} (ideal {ideal})").format(
                w=self.wavefronts, ideal=self.ideal_wavefronts
            )
            + "</b></span><br><b>"
            + tr("Source: {source}.").format(source=source)
            + "</b> "
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
            )
        else:
            block, warp, ktile = self.key or self._current_key()
            b = trace.blocks[block]
            self.title.setText(
                tr(
                    "Shared-memory banks hit by one warp access: block ({bx}, {by}), warp {warp}, "
                    "{kt}"
                ).format(
                    bx=int(b["bx"]),
                    by=int(b["by"]),
                    warp=warp,
                    kt=palette.ktile_text(ktile, trace.n_tiles),
                )
                + f"<br>{palette.config_text(trace)} · "
                + palette.source_html(trace, self.session.source_label)
            )
            self.site_label.setText(tr("Access site:"))
            self.warp_label.setText(tr("warp"))
            self.warp_box.setToolTip(tr("the warp of the selected block whose accesses are shown"))
            for row in range(self.sites.count()):
                self.sites.setItemText(row, self.site_text(row))
            item = self.plot.getPlotItem()
            item.setLabel("bottom", tr("shared-memory bank (4-byte words, word index mod 32)"))
            item.setLabel("left", tr("distinct words in the bank (passes)"))
            self._update_texts()

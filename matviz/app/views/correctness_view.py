"""Correctness (lesson 8 §11-12): which elements of C are wrong, and what the probed warp read.

Left: the trace's ``c_wrong`` map over C (each cell counts its elements that differ from float64
by more than the tolerance; :mod:`matviz.core.correctness`), the selected block's C tile
outlined. Right: the kernel's shared arrays, each cell coloured by what the probed warp read
there in one k-tile (``trace.stale``): this k-tile's value, the value before it was written,
the next k-tile's value after it was overwritten, or another. The k-tile is the probed block's
at the playhead, or the probed k-tile while the playhead is outside that block's k-tiles.

A parameter set to a deliberately broken value (``Param.broken``, e.g. a missing barrier) gets
a line built from its ``help``, so a new kernel with such a parameter needs no edit here.
"""

from __future__ import annotations

import re

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QResizeEvent
from PySide6.QtWidgets import QBoxLayout, QGraphicsRectItem, QLabel, QVBoxLayout, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.on_screen import WhenOnScreen
from matviz.core import access
from matviz.core import correctness as cr
from matviz.core.trace import Trace

# the C map: 0 wrong is calm, any wrong element at least the light end of a red ramp
CALM = (226, 240, 230)
RAMP = ((253, 204, 138), (239, 101, 72), (153, 0, 13))
# the shared arrays: image codes 1-4 are correctness.CURRENT..OTHER
UNREAD, PAD = 0, 5
READ_COLORS = {
    cr.CURRENT: (140, 200, 150),
    cr.BEFORE_WRITTEN: (245, 145, 30),
    cr.OVERWRITTEN: (125, 80, 200),
    cr.OTHER: (70, 70, 70),
}
UNREAD_COLOR, PAD_COLOR = (250, 250, 250), (205, 205, 205)
# a cell read several times in one k-tile shows its worst read
RANK = {cr.UNCHECKED: 0, cr.CURRENT: 1, cr.OTHER: 2, cr.OVERWRITTEN: 3, cr.BEFORE_WRITTEN: 4}
WIDE = 1.25  # width / height above which the map and the arrays sit side by side


def wrong_lut() -> np.ndarray:
    """Code 0: no wrong element; 1..255: ever more of the cell wrong."""
    lut = np.empty((256, 4), np.uint8)
    lut[:, 3] = 255
    lut[0, :3] = CALM
    x = np.linspace(0.0, 1.0, 255)
    stops = np.linspace(0.0, 1.0, len(RAMP))
    for ch in range(3):
        lut[1:, ch] = np.round(np.interp(x, stops, [c[ch] for c in RAMP]))
    return lut


def ramp_color(fraction: float) -> tuple[int, int, int]:
    """The map's colour for a cell with ``fraction`` (> 0) of its elements wrong."""
    r, g, b = wrong_lut()[1 + int(254 * min(max(fraction, 0.0), 1.0)), :3]
    return int(r), int(g), int(b)


def wrong_codes(counts: np.ndarray, per_cell: float) -> np.ndarray:
    """uint8 codes of a wrong-count map: 0 only where nothing is wrong."""
    fraction = np.clip(counts / max(per_cell, 1.0), 0.0, 1.0)
    codes = 1 + np.floor(254 * fraction)
    return np.where(counts > 0, codes, 0).astype(np.uint8)


def max_pool(codes: np.ndarray, f: int) -> np.ndarray:
    """``codes`` in blocks of f x f cells, each the largest of its block (zero-padded)."""
    if f <= 1:
        return codes
    rows, cols = codes.shape
    padded = np.zeros((-(-rows // f) * f, -(-cols // f) * f), codes.dtype)
    padded[:rows, :cols] = codes
    return padded.reshape(padded.shape[0] // f, f, padded.shape[1] // f, f).max(axis=(1, 3))


def read_lut() -> np.ndarray:
    lut = np.zeros((256, 4), np.uint8)
    lut[:, :3], lut[:, 3] = UNREAD_COLOR, 255
    for code, color in READ_COLORS.items():
        lut[code, :3] = color
    lut[PAD, :3] = PAD_COLOR
    return lut


def value_clause(text: str, value: object, values: tuple) -> str | None:
    """In a help text such as 'deliberately broken: 1 leaves out barrier 1 (...), 2 leaves out
    barrier 2 (...)', what it says about ``value`` ('leaves out barrier 1 (...)'); None when
    the text names no value that way (then the whole help is shown)."""
    alts = "|".join(re.escape(str(v)) for v in sorted(values, key=lambda v: -len(str(v))))
    if not alts:
        return None
    starts = list(re.finditer(rf"(?:^|[:：,，;；]\s*)({alts})\s+", text))
    for i, m in enumerate(starts):
        if m.group(1) == str(value):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
            return text[m.end() : end].strip(" .。") or None
    return None


def broken_lines(trace: Trace) -> list[str]:
    """One translated phrase per deliberately broken parameter, from the description."""
    out = []
    kernel = trace.config.kernel
    names = list((trace.correctness or {}).get("broken") or [])
    for name in names:
        value = trace.params.get(name)
        try:
            param = kernel.param(name)
        except (KeyError, ValueError):
            out.append(f"{name} = {value}")
            continue
        help_text = tr(param.help)
        clause = value_clause(help_text, value, param.broken or param.values)
        out.append(f"{name} = {value} " + (clause if clause else f"({help_text})"))
    return out


def read_names() -> dict[int, str]:
    return {
        cr.CURRENT: tr("this k-tile's value (right)"),
        cr.BEFORE_WRITTEN: tr("read before it was written (the previous value)"),
        cr.OVERWRITTEN: tr("read after it was overwritten (the next k-tile's value)"),
        cr.OTHER: tr("another value"),
    }


def read_cells(trace: Trace, stale_t: np.ndarray, records: np.ndarray) -> dict[str, np.ndarray]:
    """Each shared array's cells (rows, stride) as image codes: the worst read of the probed
    warp in one k-tile (``stale_t``: probe rows x 32 lanes), UNREAD, or PAD (padding)."""
    config = trace.config
    codes, ranks = {}, {}
    for arr in config.shared:
        codes[arr.name] = np.full((arr.rows, arr.stride), UNREAD, np.uint8)
        codes[arr.name][:, arr.cols :] = PAD
        ranks[arr.name] = np.zeros((arr.rows, arr.stride), np.int8)
    rank_of = np.zeros(max(RANK) + 1, np.int8)
    for code, rank in RANK.items():
        rank_of[code] = rank
    for row, rec in enumerate(records[: len(stale_t)]):
        if rec["kind"] != "load":
            continue
        lane_codes, offsets = stale_t[row].astype(np.int64), rec["offsets"].astype(np.int64)
        live = (lane_codes != cr.UNCHECKED) & (offsets >= 0)
        for arr in config.shared:
            base = config.array_bases[arr.name]
            mine = live & (offsets >= base) & (offsets < base + arr.nbytes)
            if not mine.any():
                continue
            local = (offsets[mine] - base) // arr.elem_bytes
            code = lane_codes[mine]
            for j in range(max(int(rec["width"]) // arr.elem_bytes, 1)):  # LDS.64/128
                r, c = np.divmod(local + j, arr.stride)
                keep = r < arr.rows
                r, c, k = r[keep], c[keep], code[keep]
                order = np.argsort(rank_of[k], kind="stable")  # the worst is written last
                r, c, k = r[order], c[order], k[order]
                worse = rank_of[k] > ranks[arr.name][r, c]
                ranks[arr.name][r[worse], c[worse]] = rank_of[k[worse]]
                codes[arr.name][r[worse], c[worse]] = k[worse]
    return codes


class CorrectnessView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.ktile = -1  # k-tile whose reads are drawn (-1: none)
        self.follows = False  # whether that k-tile is the probed block's at the playhead
        self.counts: dict[int, int] = {}  # lane reads of the drawn k-tile, by outcome
        self.cells: dict[str, np.ndarray] = {}  # image codes of each shared array, as drawn
        self._records: dict[int, np.ndarray] = {}  # k-tile -> the warp's accesses (model)

        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.summary = QLabel(textFormat=Qt.RichText, wordWrap=True)
        # the C map
        self.map_plot = palette.make_plot()
        item = self.map_plot.getPlotItem()
        item.getViewBox().setMouseEnabled(False, False)
        item.getViewBox().setAspectLocked(True)
        self.image = palette.matrix_image(item)
        self.image.setLookupTable(wrong_lut())
        self.outline = palette.outline_item(2.5)
        self.probed = palette.outline_item(1.5)  # the probed block: its warp's reads are shown
        pen = self.probed.pen()
        pen.setColor(QColor(*palette.FOREGROUND))
        pen.setStyle(Qt.DashLine)
        self.probed.setPen(pen)
        # a white halo under each outline: it must show on the dark red of a wrong tile too
        self.halos = {}
        for rect in (self.outline, self.probed):
            halo = palette.outline_item(rect.pen().widthF() + 3)
            halo_pen = halo.pen()
            halo_pen.setColor(QColor(255, 255, 255))
            halo.setPen(halo_pen)
            halo.setZValue(rect.zValue() - 1)
            item.addItem(halo)
            item.addItem(rect)
            self.halos[rect] = halo
        self.codes = np.zeros((0, 0), np.uint8)  # the map's codes, one per cell of c_wrong
        self.pool = 0  # cells per image pixel drawn (a wrong cell never falls between pixels)
        item.getViewBox().sigResized.connect(self._fit_map)
        self.map_legend = QLabel(textFormat=Qt.RichText, wordWrap=True)
        # the probed warp's reads
        self.reads_title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground(palette.BACKGROUND)
        self.panels: dict[str, pg.PlotItem] = {}
        self.images: dict[str, pg.ImageItem] = {}
        self.reads_note = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.reads_legend = QLabel(textFormat=Qt.RichText, wordWrap=True)

        left, right = QWidget(), QWidget()
        box = QVBoxLayout(left)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.map_plot, 1)
        box.addWidget(self.map_legend)
        box = QVBoxLayout(right)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.reads_title)
        box.addWidget(self.canvas, 1)
        box.addWidget(self.reads_note, 1)
        box.addWidget(self.reads_legend)
        self.body = QWidget()
        self.body_layout = QBoxLayout(QBoxLayout.LeftToRight, self.body)
        self.body_layout.setContentsMargins(0, 0, 0, 0)
        self.body_layout.addWidget(left, 1)
        self.body_layout.addWidget(right, 1)
        self.stack = palette.stacked(
            self, self.placeholder, self.title, self.summary, (self.body, 1)
        )
        session.traceChanged.connect(self.refresh)
        session.selectionChanged.connect(self._outline)
        session.playheadChanged.connect(WhenOnScreen(self, self._follow).request)
        self.refresh()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        # The wrapped summary would ask for one long line; a tab must not widen the window.
        return QSize(640, 480)

    # -- what the trace holds ----------------------------------------------------------------
    def has_data(self) -> bool:
        trace = self.session.trace
        return trace is not None and trace.correctness is not None and trace.c_wrong.size > 0

    def has_reads(self) -> bool:
        """Whether the trace kept the probed warp's reads (level 3, shared memory)."""
        trace = self.session.trace
        return (
            self.has_data()
            and trace.config.uses_shared
            and trace.stale.shape[0] > 0
            and trace.stale.shape[1] > 0
        )

    def probe_key(self) -> tuple[int, int, int]:
        """(block index, warp, k-tile) of the level-3 probe."""
        return self.session.trace.probe_location or (0, 0, 0)

    def _current(self) -> tuple[int, bool]:
        """(k-tile, follows the playhead): the probed block's k-tile at the playhead, else the
        probed k-tile."""
        block, _, ktile = self.probe_key()
        timeline = self.session.timeline
        if timeline is not None:
            _, now = timeline.block_phase(block, self.session.playhead_ns)
            if now >= 0:
                return int(now), True
        return ktile, False

    # -- session -> view ---------------------------------------------------------------------
    def refresh(self) -> None:
        self.ktile, self.follows, self.counts, self.cells = -1, False, {}, {}
        self._records, self.codes = {}, np.zeros((0, 0), np.uint8)
        self.stack.setCurrentIndex(1 if self.has_data() else 0)
        if self.has_data():
            self._draw_map()
            self._outline()
            self._build_panels()
            self._follow()
        self.retranslate()

    def _draw_map(self) -> None:
        trace = self.session.trace
        cy, cx = (int(v) for v in trace.correctness.get("cell", (1, 1)))
        rows, cols = trace.c_wrong.shape
        self.codes = wrong_codes(trace.c_wrong.astype(np.float64), cy * cx)
        self.pool = 0
        m, n, _ = trace.shape
        item = self.map_plot.getPlotItem()
        item.setRange(xRange=(0, n), yRange=(0, m), padding=0.04)  # room for the last tick
        for axis, size in (("bottom", n), ("left", m)):
            item.getAxis(axis).setTicks([self._ticks(size)])
        self._fit_map()
        block = self.probe_key()[0]
        self._place(self.probed, self._tile_rect(block), self.has_reads())

    def _fit_map(self, *_args) -> None:
        """Draw at most one map cell per screen pixel, each pixel the worst of its cells: a
        lone wrong cell of a 1024 x 1024 map must not vanish between the pixels."""
        if not self.codes.size:
            return
        trace = self.session.trace
        cy, cx = (int(v) for v in trace.correctness.get("cell", (1, 1)))
        px, py = self.map_plot.getPlotItem().getViewBox().viewPixelSize()
        per_pixel = max(px / cx, py / cy)
        pool = max(1, int(np.ceil(per_pixel))) if np.isfinite(per_pixel) else 1
        if pool == self.pool:
            return
        self.pool = pool
        image = max_pool(self.codes, pool)
        self.image.setImage(image, levels=(0, 255), autoLevels=False)
        rows, cols = image.shape
        self.image.setRect(QRectF(0, 0, cols * pool * cx, rows * pool * cy))

    @staticmethod
    def _ticks(size: int) -> list[tuple[float, str]]:
        """About five ticks at round element indices."""
        step = 1
        for step in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384):
            if size / step <= 5:
                break
        return [(float(i), str(i)) for i in range(0, size + 1, step)]

    def _outline(self, *_args) -> None:
        if not self.has_data():
            return
        self._place(self.outline, self._tile_rect(self.session.selected_block))

    def _place(self, rect: QGraphicsRectItem, where: QRectF, visible: bool = True) -> None:
        for part in (rect, self.halos[rect]):
            part.setRect(where)
            part.setVisible(visible)

    def _tile_rect(self, block: int) -> QRectF:
        """The part of C that ``block`` computes, in elements."""
        trace = self.session.trace
        b = trace.blocks[block]
        rows, cols = trace.config.launch.c_tile
        m, n, _ = trace.shape
        x, y = int(b["bx"]) * cols, int(b["by"]) * rows
        return QRectF(x, y, min(cols, n - x), min(rows, m - y))

    def _build_panels(self) -> None:
        """One small grid per shared array, side by side (rebuilt per trace)."""
        self.canvas.clear()
        self.panels.clear()
        self.images.clear()
        if not self.has_reads():
            return
        for i, arr in enumerate(self.session.trace.config.shared):
            plot = self.canvas.addPlot(row=0, col=i)
            palette.style_plot(plot)
            plot.hideButtons()
            plot.setMenuEnabled(False)
            plot.setTitle(arr.name, color=palette.hexcolor(palette.FOREGROUND))
            plot.hideAxis("left")
            plot.hideAxis("bottom")
            vb = plot.getViewBox()
            vb.setMouseEnabled(False, False)
            vb.setAspectLocked(True)
            image = palette.matrix_image(plot)
            image.setLookupTable(read_lut())
            palette.cell_lines(plot, (210, 210, 210), palette.cell_borders(arr.stride, arr.rows))
            plot.setRange(xRange=(0, arr.stride), yRange=(0, arr.rows), padding=0.03)
            self.panels[arr.name], self.images[arr.name] = plot, image

    def _follow(self, *_args) -> None:
        """Playhead moved: redraw the reads only when the k-tile changes."""
        if not self.has_reads():
            return
        ktile, follows = self._current()
        if (ktile, follows) == (self.ktile, self.follows):
            return
        self.ktile, self.follows = ktile, follows
        self._draw_reads()
        self._update_reads_texts()

    def _draw_reads(self) -> None:
        trace = self.session.trace
        recorded = self.ktile < trace.stale.shape[0]
        self.canvas.setVisible(recorded)
        self.reads_note.setVisible(not recorded)
        if not recorded:
            self.counts, self.cells = {}, {}
            return
        stale_t = trace.stale[self.ktile]
        self.counts = {code: int(np.count_nonzero(stale_t == code)) for code in READ_COLORS}
        self.cells = read_cells(trace, stale_t, self._records_of(self.ktile))
        for name, codes in self.cells.items():
            self.images[name].setImage(codes, levels=(0, 255), autoLevels=False)
            self.images[name].setRect(QRectF(0, 0, codes.shape[1], codes.shape[0]))

    def _records_of(self, ktile: int) -> np.ndarray:
        """The probed warp's shared accesses in ``ktile`` (the model the probe is checked
        against; the recorded offsets where they do not line up with ``stale``)."""
        if ktile not in self._records:
            trace = self.session.trace
            block, warp, _ = self.probe_key()
            b = trace.blocks[block]
            records = access.access_records(trace.config, warp, (int(b["bx"]), int(b["by"])), ktile)
            if len(records) != trace.stale.shape[1]:
                records = trace.probe
            self._records[ktile] = records
        return self._records[ktile]

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802
        # a tall, narrow place (a tab on a projector) puts the arrays under the map
        size = event.size()
        wide = size.width() >= WIDE * max(size.height() - 150, 1)
        direction = QBoxLayout.LeftToRight if wide else QBoxLayout.TopToBottom
        if self.body_layout.direction() != direction:
            self.body_layout.setDirection(direction)
        super().resizeEvent(event)

    # -- texts -------------------------------------------------------------------------------
    def summary_html(self) -> str:
        trace = self.session.trace
        c = trace.correctness
        tol, err = f"{float(c['tolerance']):.3g}", f"{float(c['max_abs_error']):.3g}"
        if not np.isfinite(float(c["max_abs_error"])):  # NaN counts as infinitely wrong
            err = tr("infinite (some elements are NaN or infinite)")
        wrong, total = int(c["wrong"]), int(c["total"])
        if wrong:
            verdict = tr(
                "{wrong} of {total} elements of C are wrong (more than {tol} from float64); "
                "largest error {err}."
            ).format(wrong=f"{wrong:,}", total=f"{total:,}", tol=tol, err=err)
            verdict = f"<b style='color:{palette.hexcolor(RAMP[2])}'>{verdict}</b>"
        else:
            verdict = "<b>" + tr(
                "Every element of C is within {tol} of float64 (largest error {err})."
            ).format(tol=tol, err=err) + "</b>"  # fmt: skip
        lines = [verdict]
        broken = broken_lines(trace)
        if broken:
            line = tr("Deliberately broken: {what}.").format(what="; ".join(broken))
            if not wrong:
                line += " " + tr("Wrong results were expected, but none showed in this run.")
            lines.append(f"<span style='color:{palette.hexcolor(RAMP[2])}'>&#9888; {line}</span>")
        source = palette.source_html(trace, self.session.source_label)
        checked = str(c.get("checked") or "")
        if checked and not trace.is_simulated:
            source += " · " + tr("C checked: {run}").format(run=tr(checked))
        lines.append(source)
        return "<br>".join(lines)

    def map_legend_html(self) -> str:
        trace = self.session.trace
        cy, cx = (int(v) for v in trace.correctness.get("cell", (1, 1)))
        per_cell = cy * cx
        if per_cell > 1:
            entries = [
                palette.swatch(CALM, tr("no wrong element")),
                palette.swatch(ramp_color(1 / per_cell), "1"),
                palette.swatch(ramp_color(0.5), f"{per_cell // 2:,}"),
                palette.swatch(ramp_color(1.0), tr("all {n} wrong").format(n=f"{per_cell:,}")),
            ]
            cell = tr("one cell = {rows}×{cols} elements of C").format(rows=cy, cols=cx)
        else:
            entries = [
                palette.swatch(CALM, tr("right element")),
                palette.swatch(ramp_color(1.0), tr("wrong element")),
            ]
            cell = tr("one cell = one element of C")
        notes = [
            cell,
            f"<span style='color:{palette.hexcolor(palette.HIGHLIGHT)}'>&#9633;</span>&nbsp;"
            + tr("the selected block's C tile"),
        ]
        if self.has_reads():
            notes.append("&#9482;&nbsp;" + tr("dashed: the probed block"))
        return "<br>".join([" &nbsp;".join(entries), *notes])  # Chinese wraps anywhere: a line each

    def _update_reads_texts(self) -> None:
        trace = self.session.trace
        if not self.has_data():
            return
        if not self.has_reads():
            self.reads_title.setText("")
            self.reads_legend.setText("")
            self.canvas.hide()
            self.reads_note.show()
            if not trace.config.uses_shared:
                self.reads_note.setText(tr("This kernel reads no shared memory: no read to check."))
            else:
                self.reads_note.setText(
                    tr("Record at level 3 to see what the warp read from shared memory.")
                )
            return
        block, warp, _ = self.probe_key()
        b = trace.blocks[block]
        kt = palette.ktile_text(self.ktile, max(trace.n_tiles, trace.config.n_steps, 1))
        title = "<b>" + tr(
            "What the probed warp read from shared memory: block ({bx}, {by}), warp {warp}, {kt}"
        ).format(bx=int(b["bx"]), by=int(b["by"]), warp=warp, kt=kt) + "</b>"  # fmt: skip
        if not self.follows:
            title += "<br>" + tr(
                "(the playhead is outside the probed block's k-tiles: the probed k-tile is shown)"
            )
        self.reads_title.setText(title)
        n = trace.stale.shape[0]
        self.reads_note.setText(
            tr("The probe kept the reads of the first {n} k-tiles only.").format(n=n)
        )
        names = read_names()
        totals = cr.read_counts(trace.stale)
        entries = [
            palette.swatch(color, f"{names[code]}: <b>{self.counts.get(code, 0):,}</b>")
            + f" ({totals[cr.READ_KEYS[code]]:,})"
            for code, color in READ_COLORS.items()
        ]
        hollow = f'<span style="color:{palette.hexcolor(PAD_COLOR)}; font-size:14pt">&#9633;</span>'
        entries.append(f"{hollow}&nbsp;" + tr("not read by this warp"))  # a white swatch: a frame
        if any(arr.pad for arr in trace.config.shared):
            entries.append(palette.swatch(PAD_COLOR, tr("padding: never read or written")))
        note = tr(
            "Lane reads in this k-tile (in brackets: in all {n} recorded k-tiles); a cell read "
            "several times shows its worst read."
        ).format(n=n)
        self.reads_legend.setText("<br>".join(entries) + "<br>" + note)

    def retranslate(self) -> None:
        trace = self.session.trace
        if trace is None:
            self.placeholder.setText(tr("No trace loaded"))
        else:
            self.placeholder.setText(
                tr(
                    "This recording has no correctness data: record it again to see which "
                    "elements of C are wrong."
                )
            )
        self.title.setText(
            "<b>" + tr("Correctness: elements of C against float64 (§11-12)") + "</b>"
        )
        if not self.has_data():
            return
        item = self.map_plot.getPlotItem()
        item.setLabel("left", tr("row of C"))
        item.setLabel("bottom", tr("column of C"))
        self.summary.setText(self.summary_html())
        self.map_legend.setText(self.map_legend_html())
        self._update_reads_texts()

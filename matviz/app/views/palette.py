"""Shared colours and plot styling, so every view (and the export) uses the same legend.

Colours are RGB(A) tuples; ``*_lut`` functions return 256-entry uint8 lookup tables for
pyqtgraph ImageItems that hold uint8 codes and are drawn with explicit levels (0, 255).
"""

from __future__ import annotations

import colorsys
import re
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
import shiboken6
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainterPath, QPen, QTextOption
from PySide6.QtWidgets import (
    QGraphicsPathItem,
    QGraphicsRectItem,
    QLayout,
    QStackedLayout,
    QVBoxLayout,
    QWidget,
)

from matviz.core.timeline import BlockState

RGB = tuple[int, int, int]

BACKGROUND = "w"
FOREGROUND = (30, 30, 30)
HIGHLIGHT = (214, 0, 110)  # selected block / item outline (magenta, stands out on all fills)
PLAYHEAD = (200, 30, 30)
SIMULATED = (200, 90, 0)  # text colour of the 'simulated' source label
SHARED_CEILING = (217, 115, 13)  # what shared memory alone allows (matviz.core.ceilings)
ISSUE_CEILING = (20, 125, 95)  # what issuing its k loop allows an SIMT kernel (same module)
EMPTY = (250, 250, 250)  # idle / unused cells

# Block states: waiting grey, loading blue, computing green, done dark, running teal. The
# timeline never puts a block "at a barrier" (the barrier waits come from a separate level-3
# run, shown in the diagnostics panel), so AT_BARRIER has no colour and no legend entry.
STATE_COLORS: dict[BlockState, RGB] = {
    BlockState.WAITING: (205, 205, 205),
    BlockState.LOADING: (52, 120, 219),
    BlockState.COMPUTING: (46, 170, 80),
    BlockState.DONE: (88, 96, 104),
    BlockState.RUNNING: (30, 170, 170),
}
# English source names (pass through tr() when shown).
STATE_NAMES: dict[BlockState, str] = {
    BlockState.WAITING: "waiting",
    BlockState.LOADING: "loading tiles",
    BlockState.COMPUTING: "computing",
    BlockState.DONE: "done",
    BlockState.RUNNING: "running",
}

# Qualitative colours for SM waves (tab10-like, without grey).
WAVE_COLORS: tuple[RGB, ...] = (
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (188, 189, 34),
    (23, 190, 207),
)

# Throughput plot: recorded vs simulated points.
BACKEND_STYLE: dict[str, dict] = {
    "cuda": {"symbol": "o", "brush": (31, 119, 180), "pen": (20, 60, 110)},
    "sim": {"symbol": "d", "brush": (255, 255, 255), "pen": SIMULATED},
}

H200_SMS = 132


def hexcolor(rgb: tuple[int, ...]) -> str:
    return QColor(*rgb[:3]).name()


def _lut(colors: list[tuple[int, ...]], fill: RGB = EMPTY) -> np.ndarray:
    """A 256 x 4 uint8 LUT whose first entries are ``colors``; the rest is ``fill``."""
    lut = np.empty((256, 4), np.uint8)
    lut[:, :3] = fill
    lut[:, 3] = 255
    for i, c in enumerate(colors[:256]):
        lut[i, : len(c)] = c
    return lut


def state_lut() -> np.ndarray:
    """Code = BlockState value."""
    colors = [STATE_COLORS.get(BlockState(i), EMPTY) for i in range(max(BlockState) + 1)]
    return _lut(colors)


def sm_colors(n: int = H200_SMS) -> np.ndarray:
    """n cyclic hues; odd SMs a little darker so neighbouring SMs stay distinguishable."""
    out = np.empty((n, 3), np.uint8)
    for i in range(n):
        value = 0.95 if i % 2 == 0 else 0.72
        r, g, b = colorsys.hsv_to_rgb(i / n, 0.62, value)
        out[i] = (round(r * 255), round(g * 255), round(b * 255))
    return out


def sm_lut(n: int = H200_SMS) -> np.ndarray:
    """Code = smid % 256; colours repeat every ``n`` SMs."""
    colors = sm_colors(n)
    return _lut([tuple(colors[i % n]) for i in range(256)])


def wave_lut() -> np.ndarray:
    """Code 0 = idle slot, code w + 1 = SM wave w (colours cycle)."""
    return _lut([EMPTY] + [WAVE_COLORS[i % len(WAVE_COLORS)] for i in range(255)])


def progress_lut(levels: int = 64) -> np.ndarray:
    """Code 0 = idle, 1..levels = k-tile progress from first (light) to last (dark)."""
    cmap = pg.colormap.get("viridis")
    ramp = cmap.getLookupTable(0.95, 0.05, levels, alpha=False)  # light -> dark
    return _lut([EMPTY] + [tuple(int(v) for v in c) for c in ramp])


def lane_colors() -> np.ndarray:
    """32 lane colours: hue by lane, alternating lightness."""
    out = np.empty((32, 3), np.uint8)
    for lane in range(32):
        value = 0.92 if lane % 2 == 0 else 0.75
        r, g, b = colorsys.hsv_to_rgb((lane * 0.61803) % 1.0, 0.5, value)
        out[lane] = (round(r * 255), round(g * 255), round(b * 255))
    return out


def lane_lut() -> np.ndarray:
    """Code 0 = empty, code lane + 1 = that lane's colour."""
    return _lut([EMPTY] + [tuple(c) for c in lane_colors()])


def swatch(rgb: tuple[int, ...], text: str) -> str:
    """Rich-text legend entry: a coloured square and its label. Qt breaks lines between any two
    Chinese characters and at spaces, and legends read "计" / "算中" and "loading" / "tiles": a
    short label is glued (U+2060 between characters, no-break spaces), so the legend breaks
    between its entries only."""
    if len(text) <= GLUED_CHARS:
        text = _BETWEEN_CJK.sub(WORD_JOINER, text)
        text = _SPACE_OUTSIDE_TAGS.sub("&nbsp;", text)
    return f'<span style="color:{hexcolor(rgb)}; font-size:14pt">&#9632;</span>&nbsp;{text}'


WORD_JOINER = "\u2060"
GLUED_CHARS = 16  # longer labels may still wrap inside, rather than push the panel wider
_CJK = "\u3000-\u9fff\uff00-\uffef"
_BETWEEN_CJK = re.compile(f"(?<=[{_CJK}])(?=[{_CJK}])")
_SPACE_OUTSIDE_TAGS = re.compile(r" (?![^<]*>)")


def style_plot(plot: pg.PlotItem) -> None:
    """Dark axes and text for the white background the views use (projector friendly)."""
    for name in ("left", "bottom", "top", "right"):
        axis = plot.getAxis(name)
        axis.setPen(pg.mkPen(FOREGROUND))
        axis.setTextPen(pg.mkPen(FOREGROUND))


class CountAxis(pg.AxisItem):
    """Ticks of a large count (GFLOP/s) in thousands and millions: 500k and 1M, where pyqtgraph
    writes 500000 and 1e+06 once SI prefixes are off; no wider than those, so that a narrow
    plot keeps its width."""

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        if spacing * scale < 1:  # fractions: pyqtgraph's own digits
            return super().tickStrings(values, scale, spacing)
        return [_count_text(v * scale) for v in values]


def _count_text(value: float) -> str:
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def count_axis(plot: pg.PlotItem, name: str = "left") -> None:
    """Give ``plot`` a CountAxis at ``name``, styled as the others."""
    plot.setAxisItems({name: CountAxis(name)})
    style_plot(plot)
    plot.getAxis(name).enableAutoSIPrefix(False)


def _unchanged(item: object, what: str, value: object) -> bool:
    """Whether ``item`` shows ``value`` as its ``what`` already (remembering it otherwise)."""
    shown = item.__dict__.setdefault("_matviz_shown", {})
    if shown.get(what) == value:
        return True
    shown[what] = value
    return False


# pyqtgraph lays a plot out again and redraws its axes on every setTitle, setLabel and
# setTicks, even of the text it shows: kernel 10's playback, whose k-tile changes almost every
# frame, spent a fifth of each frame re-setting the tiles view's unchanged titles and axes
# (26.5 frames/s drawn one by one, 34 without).
def set_title(plot: pg.PlotItem, text: str) -> bool:
    """Give ``plot`` the title ``text`` in the views' colour; False when it had it already."""
    if _unchanged(plot, "title", text):
        return False
    plot.setTitle(text, color=hexcolor(FOREGROUND))
    return True


def set_label(plot: pg.PlotItem, side: str, text: str) -> None:
    """Label ``plot``'s axis on ``side`` with ``text`` unless it is labelled so already. A
    vertical axis wraps its label to its height, made again whenever it is resized."""
    if _unchanged(plot, f"label {side}", text):
        return
    plot.setLabel(side, text)
    if side in ("left", "right"):
        axis = plot.getAxis(side)
        if not getattr(axis, "fits_label", False):
            axis.fits_label = True
            # wrapped lines centred along the axis
            axis.label.document().setDefaultTextOption(QTextOption(Qt.AlignmentFlag.AlignHCenter))
            axis.geometryChanged.connect(lambda: _fit_vertical_label(axis))
        _fit_vertical_label(axis)


LABEL_MARGIN = 8  # px of a vertical axis kept clear at each end of its label


def _fit_vertical_label(axis: pg.AxisItem) -> None:
    """Wrap a vertical axis's label to the axis's height: pyqtgraph draws it on one line
    centred on the axis, so a label longer than the plot is tall lost both its ends (the banks
    panel of a 1280x720 export read 'distinct words in the bank (pass')."""
    if not shiboken6.isValid(axis) or axis.label is None:
        return
    label = axis.label
    label.setTextWidth(-1)
    one_line = label.boundingRect().width()
    room = axis.geometry().height() - 2 * LABEL_MARGIN
    # not laid out yet (no height): one line, until the layout resizes the axis
    width = room if 0 < room < one_line else -1.0
    label.setTextWidth(width)
    if not _unchanged(axis, "label lines", label.boundingRect().height()):
        axis.showLabel(label.isVisible())  # pyqtgraph sizes the axis to its label's lines
    axis.resizeEvent()  # and centres it


def set_ticks(axis: pg.AxisItem, ticks: list) -> None:
    """Give ``axis`` the ticks ``ticks`` (pyqtgraph's list of levels) unless it has them."""
    if not _unchanged(axis, "ticks", ticks):
        axis.setTicks(ticks)


TITLE_MARGIN = 64  # px of a view beside its plots' titles: margins, with room to spare


def wrap_title(plot: pg.PlotItem, width: float, margin: float = TITLE_MARGIN) -> None:
    """Wrap ``plot``'s title to fit ``width`` pixels (the canvas, or the plot's column of it).
    pyqtgraph sizes a title to its one-line text, so a long title makes a narrow plot wider
    than its canvas, which then cuts off the plot's right side, labels and values included."""
    label = plot.titleLabel
    left = plot.getAxis("left")
    room = float(width) - (left.width() if left.isVisible() else 0.0) - margin
    label.item.setTextWidth(max(room, 40.0))
    label.updateMin()
    # setTitle fixes the title's row at 30 px: give it the wrapped lines' height
    height = max(30.0, label.itemRect().height())
    label.setMaximumHeight(height)
    plot.layout.setRowFixedHeight(0, height)


def index_ticks(n: int, max_labels: int = 16, offset: float = 0.5) -> list[tuple[float, str]]:
    """Ticks at cell centres (i + offset) for cells 0..n-1, thinned to about ``max_labels``,
    a power of two apart: tiles, warps and banks come in powers of two, so a tick falls on
    each slot of a ring (rows 0, 128, 256 of three 128-row slots) and each warp."""
    step = 1
    for step in (1 << e for e in range(31)):
        if n / step <= max_labels:
            break
    return [(i + offset, str(i)) for i in range(0, n, step)]


def fitted_row_ticks(axis: pg.AxisItem, n: int, max_labels: int = 16) -> None:
    """:func:`index_ticks` for rows 0..n-1 on a vertical ``axis``, no more labels than its
    height holds (a tile's 128 rows in an 80-px panel of an export at 1280x720 drew 8 labels
    on top of each other)."""
    fit_vertical_ticks(axis, lambda room: [index_ticks(n, min(max_labels, room))])


def fit_vertical_ticks(axis: pg.AxisItem, ticks_for: Callable[[int], list]) -> None:
    """Ticks on a vertical ``axis`` from ``ticks_for(room)``, room being how many labels its
    height holds, made again whenever the axis is resized."""
    axis.ticks_for = ticks_for
    if not getattr(axis, "fits_ticks", False):
        axis.fits_ticks = True
        axis.geometryChanged.connect(lambda: _fit_vertical_ticks(axis))
    _fit_vertical_ticks(axis)


def _fit_vertical_ticks(axis: pg.AxisItem) -> None:
    if not shiboken6.isValid(axis):  # a plot being deleted resizes its axes on the way out
        return
    height = axis.geometry().height()
    label_px = QFontMetrics(axis.style.get("tickFont") or QFont()).height()
    # one label where there is no room (a plot squeezed flat, or not laid out yet: the layout
    # resizes the axis, and the axis fits its labels again)
    room = int(height // label_px)
    set_ticks(axis, axis.ticks_for(max(room, 1)))


_IN_PHASE = (BlockState.LOADING, BlockState.COMPUTING)


def state_text(timeline, block: int, t_ns: float, state: BlockState) -> str:
    """The translated state name, with the description's phase that sets it ('computing
    (compute)'); several phases share a state."""
    from matviz.app.i18n import tr

    name = tr(STATE_NAMES.get(BlockState(int(state)), "running"))
    phase = timeline.phase_at(block, t_ns) if state in _IN_PHASE else None
    return f"{name} ({phase.name})" if phase is not None else name


def mouse_hint(session, text: str) -> str:
    """``text`` (a translated hint to hover, click or zoom) with a leading space, or "" where
    nobody can use a mouse (exported frames)."""
    return " " + text if session.interactive else ""


KTILE_TEXT = "k-tile t = {t} of {n}"  # the kernel's loop variable t, from 0, as the texts say


def ktile_text(ktile: int | None, n: int) -> str:
    """'k-tile t = 7 of 32': every view numbers k-tiles as the explanation and the .cu do."""
    from matviz.app.i18n import tr

    if ktile is None or ktile < 0:
        return "–"
    return tr(KTILE_TEXT).format(t=int(ktile), n=n)


def source_html(trace, label: str) -> str:
    """Where the data came from; simulated data is always marked, in colour and in words."""
    from matviz.app.i18n import tr

    device = trace.manifest["device"].get("name", "GPU")
    if trace.is_simulated:
        if not label or label == trace.provenance:
            label = tr("simulated ({device} model)").format(device=device)
        elif "simul" not in label.lower() and tr("simulated") not in label:
            label = f"{tr('simulated')}: {label}"
        return f'<b style="color:{hexcolor(SIMULATED)}">&#9888; {label}</b>'
    if not label or label == trace.provenance:
        label = tr("recorded on {device}").format(device=device)
    return f"<b>{label}</b>"


def config_text(trace) -> str:
    """'tiled · T32 P0 · M×N×K = 1024×1024×1024' for titles (labels from the description)."""
    config = trace.config
    m, n, k = trace.shape
    labels = config.kernel.labels(config.params)
    return f"<b>{trace.kernel}</b> · {labels} · M×N×K = {m}×{n}×{k}"


def cell_borders(nx: int, ny: int, max_cells: int = 64) -> QPainterPath:
    """Lines between the cells of an nx x ny grid (empty when cells would be too small)."""
    path = QPainterPath()
    if max(nx, ny) > max_cells:
        return path
    for x in range(1, nx):
        path.moveTo(x, 0)
        path.lineTo(x, ny)
    for y in range(1, ny):
        path.moveTo(0, y)
        path.lineTo(nx, y)
    return path


class CellLabels(pg.GraphicsObject):
    """One item painting a text per cell of a rows x cols grid, only where cells are big enough."""

    def __init__(self) -> None:
        super().__init__()
        self._texts: list[list[str]] = []
        self._make: Callable[[], list[list[str]]] | None = None
        self.font = QFont()
        # measured once per set_texts: Qt asks for the bounds and paints far more often, and a
        # shared array of kernel 11 has 98,304 cells
        self._rows = self._cols = 0
        self._longest = 1

    def set_texts(self, texts: list[list[str]]) -> None:
        longest = max((len(t) for row in texts for t in row), default=0)
        self.set_lazy(len(texts), max((len(r) for r in texts), default=0), longest, lambda: texts)

    def set_lazy(
        self, rows: int, cols: int, longest: int, make: Callable[[], list[list[str]]]
    ) -> None:
        """Texts that ``make()`` builds when a paint can show them or :attr:`texts` is read:
        at most sizes a shared array's cells are too small for text (kernel 07's two arrays
        have 12,288 cells, whose texts had cost playback 5 ms a k-step)."""
        self.prepareGeometryChange()
        self._texts, self._make = [], make
        self._rows, self._cols, self._longest = rows, cols, longest or 1
        self.update()

    @property
    def texts(self) -> list[list[str]]:
        if self._make is not None:
            self._texts, self._make = self._make(), None
        return self._texts

    def boundingRect(self) -> QRectF:  # noqa: N802
        return QRectF(0, 0, self._cols, self._rows)

    @pg.debug.warnOnException  # an exception here must fail an export, not kill PySide
    def paint(self, p, *args) -> None:
        if not self._rows:
            return
        cell = p.transform().mapRect(QRectF(0, 0, 1, 1))
        size = min(cell.height() * 0.72, cell.width() / (0.62 * self._longest))
        if size < 6.5:  # unreadable: leave it to the tooltip
            return
        self.font.setPixelSize(int(size))
        transform = p.transform()
        p.save()
        p.resetTransform()
        p.setFont(self.font)
        p.setPen(QColor(*FOREGROUND))
        for r, row in enumerate(self.texts):
            for c, text in enumerate(row):
                if text:
                    p.drawText(transform.mapRect(QRectF(c, r, 1, 1)), Qt.AlignCenter, text)
        p.restore()


# -- shared constructors, so every view looks and behaves alike --------------------------------
def make_plot() -> pg.PlotWidget:
    """A white plot with dark axes, no context menu or auto-range button, no SI prefixes."""
    plot = pg.PlotWidget(background=BACKGROUND)
    item = plot.getPlotItem()
    style_plot(item)
    item.hideButtons()
    item.setMenuEnabled(False)
    for name in ("left", "bottom"):
        item.getAxis(name).enableAutoSIPrefix(False)
    return plot


def matrix_image(item: pg.PlotItem) -> pg.ImageItem:
    """A row-major image on ``item`` with row 0 at the top, the way a matrix is drawn."""
    item.getViewBox().invertY(True)
    image = pg.ImageItem(axisOrder="row-major")
    item.addItem(image)
    return image


def cell_lines(
    item: pg.PlotItem, color: tuple[int, ...] = (255, 255, 255), path: QPainterPath | None = None
) -> QGraphicsPathItem:
    """Thin lines between cells on ``item``: one path item, one pixel wide at any zoom."""
    lines = QGraphicsPathItem() if path is None else QGraphicsPathItem(path)
    pen = QPen(QColor(*color))
    pen.setCosmetic(True)
    lines.setPen(pen)
    item.addItem(lines)
    return lines


def outline_item(width: float = 3.0) -> QGraphicsRectItem:
    """The selected-block outline: one rect item, drawn above everything."""
    rect = QGraphicsRectItem()
    pen = QPen(QColor(*HIGHLIGHT))
    pen.setWidthF(width)
    pen.setCosmetic(True)
    rect.setPen(pen)
    rect.setZValue(10)
    return rect


def playhead_line(label: str | None = "t = {value:.1f} µs") -> pg.InfiniteLine:
    """A draggable vertical playhead (x in µs)."""
    opts = {"position": 0.03, "color": PLAYHEAD, "fill": (255, 255, 255, 210)}
    line = pg.InfiniteLine(
        angle=90,
        movable=True,
        pen=pg.mkPen(PLAYHEAD, width=2),
        hoverPen=pg.mkPen(PLAYHEAD, width=4),
        label=label,
        labelOpts=opts if label else None,
    )
    line.setZValue(20)
    return line


def stacked(owner: QWidget, placeholder: QWidget, *rows) -> QStackedLayout:
    """Page 0: the placeholder; page 1: ``rows`` stacked vertically (a widget given as a
    (widget, stretch) tuple gets that stretch)."""
    content = QWidget()
    box = QVBoxLayout(content)
    box.setContentsMargins(6, 4, 6, 4)
    for row in rows:
        if isinstance(row, QLayout):
            box.addLayout(row)
        elif isinstance(row, tuple):
            box.addWidget(*row)
        else:
            box.addWidget(row)
    stack = QStackedLayout(owner)
    stack.addWidget(placeholder)
    stack.addWidget(content)
    return stack

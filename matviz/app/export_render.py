"""The app's views rendered offscreen into RGB frames: the Qt half of ``matviz export``.

The same view widgets as the main window read their own Session; they are laid out once, at a
logical size large enough for their texts and plots (1600x900 for all five), and only the
playhead (and the caption) changes per frame. Each frame is ``grab()`` of the container,
scaled to the requested size when the logical one is larger. The container is shown with
``WA_DontShowOnScreen``: laid out and painted like a visible window, but never on a screen, so
the GUI can export while the user keeps working.

A video cannot be clicked: every input widget in the views is hidden (a combo or spin box
leaves a plain label that shows its value), in every frame (a view may show them again when it
refreshes); the views' session is not interactive, so they write no hover or click hints.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO

import numpy as np
from pyqtgraph import debug as pg_debug
from PySide6.QtCore import (
    QCoreApplication,
    QEvent,
    QMessageLogContext,
    Qt,
    QtMsgType,
    qInstallMessageHandler,
)
from PySide6.QtGui import QImage
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QBoxLayout,
    QComboBox,
    QGraphicsItem,
    QLabel,
    QLayout,
    QLineEdit,
    QSizePolicy,
    QSlider,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from matviz.app.i18n import tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.banks_view import BanksView
from matviz.app.views.coalescing_view import CoalescingView
from matviz.app.views.correctness_view import CorrectnessView
from matviz.app.views.fragments_view import FragmentsView
from matviz.app.views.grid_view import GridView
from matviz.app.views.sm_lanes import SmLanesView
from matviz.app.views.source_view import SourceView
from matviz.app.views.throughput_view import ThroughputView
from matviz.app.views.tiles_view import A_TINTS, B_TINTS, TilesView
from matviz.core.runs import RunPoint
from matviz.core.timeline import BlockState, Timeline
from matviz.core.trace import Trace
from matviz.errors import MatvizError
from matviz.export.options import logical_size

VIEW_CLASSES = {
    "grid": GridView,
    "sm": SmLanesView,
    "tiles": TilesView,
    "banks": BanksView,
    "coalescing": CoalescingView,
    "fragments": FragmentsView,
    "source": SourceView,
    "errors": CorrectnessView,
    "throughput": ThroughputView,
}
CAPTION_BACKGROUND = "#f2f2f4"
# moments of the run (shares of its duration) whose captions set the caption's height
CAPTION_SAMPLES = (0.0, 0.25, 0.5, 0.75, 1.0)
CAPTION_MAX_LINES = 3
# Widgets a video cannot use: hidden in every frame (combo and spin boxes leave their value
# as a label).
INPUT_WIDGETS = (QComboBox, QAbstractSpinBox, QAbstractButton, QSlider, QLineEdit)


def _layout_holding(layout: QLayout | None, widget: QWidget) -> tuple[QLayout, int] | None:
    """The (nested) layout that holds ``widget`` and its index there."""
    if layout is None:
        return None
    for i in range(layout.count()):
        item = layout.itemAt(i)
        if item.widget() is widget:
            return layout, i
        found = _layout_holding(item.layout(), widget)
        if found is not None:
            return found
    return None


def ensure_app() -> QApplication:
    """The running QApplication, or a new offscreen one (an export never needs a screen)."""
    app = QApplication.instance()
    if app is None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QApplication([sys.argv[0] if sys.argv else "matviz"])
        _drop_offscreen_noise()
    return app


def _drop_offscreen_noise() -> None:
    """The offscreen platform warns 'does not support propagateSizeHints()' whenever a label's
    size changes: harmless, but it would bury the CLI's output. Other messages pass on."""
    previous = None

    def handler(mode: QtMsgType, context: QMessageLogContext, message: str) -> None:
        if "propagateSizeHints" in message:
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            print(message, file=sys.stderr)

    previous = qInstallMessageHandler(handler)


class _HeldStderr:
    """Output to stderr, Python's and the C library's (descriptor 2), kept back until
    :meth:`pass_on`; none of it when the caller drops it."""

    def __init__(self) -> None:
        self.text = io.StringIO()
        self.raw = b""
        self._saved: tuple[int, IO[bytes]] | None = None
        try:
            if sys.stderr is not None:
                sys.stderr.flush()
            spool = tempfile.TemporaryFile()
            saved = os.dup(2)
            os.dup2(spool.fileno(), 2)
            self._saved = saved, spool
        except (OSError, ValueError):  # no descriptor 2 (a windowed app): nothing to hold
            self._saved = None

    def stop(self) -> None:
        if self._saved is None:
            return
        saved, spool = self._saved
        self._saved = None
        os.dup2(saved, 2)
        os.close(saved)
        spool.seek(0)
        self.raw = spool.read()
        spool.close()

    def pass_on(self) -> None:
        if self.raw:
            os.write(2, self.raw)
        if self.text.getvalue() and sys.stderr is not None:
            sys.stderr.write(self.text.getvalue())


@contextlib.contextmanager
def _failing_views(what: str, views: dict[str, QWidget]) -> Iterator[None]:
    """Any exception inside the views fails the frame with one line. Qt hands those raised
    in slots to ``sys.excepthook`` (printed, then drawing goes on), and pyqtgraph's curve and
    scatter ``paint()`` print theirs as an "Ignored exception" warning: either way the frame
    would be wrong, and the export would write it to the file as if nothing happened. (Those
    must not be raised again inside paint(): an exception leaving a QGraphicsItem's paint
    crashes PySide.)"""
    caught: list[BaseException] = []
    previous_hook, previous_print = sys.excepthook, pg_debug.printExc
    sys.excepthook = lambda _type, value, _tb: caught.append(value)
    pg_debug.printExc = lambda *_args, **_kwargs: caught.append(sys.exc_info()[1])
    # PySide also writes "Error calling Python override of ..." straight to file descriptor 2:
    # stderr is kept back, and passed on only when the frame is fine (Qt's own messages).
    held = _HeldStderr()
    try:
        with contextlib.redirect_stderr(held.text):
            try:
                yield
            except (MatvizError, KeyboardInterrupt):
                raise
            except Exception as exc:  # raised through grab(): a paintEvent, a resize, a layout
                caught.append(exc)
    finally:
        sys.excepthook, pg_debug.printExc = previous_hook, previous_print
        held.stop()
    failures = [exc for exc in caught if exc is not None]
    for exc in failures:
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C inside a slot is still Ctrl-C
            raise exc
    if not failures:
        held.pass_on()
        return
    exc = failures[0]
    culprit = _view_of(exc, views)
    where = f"the {culprit} view" if culprit else "the views"
    detail = f"{type(exc).__name__}: {_last_line(str(exc))}"
    raise MatvizError(f"cannot draw {where} {what}: {detail}") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def _view_of(exc: BaseException, views: dict[str, QWidget]) -> str:
    """The name of the view whose widget or plot item raised ``exc`` (innermost), or ''."""
    found, tb = "", exc.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals
        args = local.get("args")  # pyqtgraph's warnOnException wrapper: (self, painter, ...)
        for owner in (local.get("self"), args[0] if isinstance(args, tuple) and args else None):
            widget = _widget_of(owner)
            for name, view in views.items():
                if widget is not None and (widget is view or view.isAncestorOf(widget)):
                    found = name
        tb = tb.tb_next
    return found


def _widget_of(obj: object) -> QWidget | None:
    """``obj`` if a widget; the view showing it if a plot item."""
    if isinstance(obj, QWidget):
        return obj
    if isinstance(obj, QGraphicsItem) and obj.scene() is not None and obj.scene().views():
        return obj.scene().views()[0]
    return None


def key_colours() -> list[tuple[int, int, int]]:
    """Colours that must survive GIF quantisation exactly: states, marks, tints, waves."""
    colours = [*palette.STATE_COLORS.values(), *palette.WAVE_COLORS]
    colours += [palette.HIGHLIGHT, palette.PLAYHEAD, palette.SIMULATED, palette.FOREGROUND]
    colours += [palette.EMPTY, (255, 255, 255), (0, 0, 0), *A_TINTS, *B_TINTS]
    return colours


def to_rgb(image: QImage) -> np.ndarray:
    """A QImage as an (H, W, 3) uint8 array (a copy: the image's memory goes away)."""
    image = image.convertToFormat(QImage.Format_RGB888)
    w, h = image.width(), image.height()
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(h, image.bytesPerLine())
    return rows[:, : 3 * w].reshape(h, w, 3).copy()


def choose_access(views: dict[str, QWidget], access: str) -> None:
    """Show the site ``access`` in the banks view (its first instruction) and the coalescing
    view (the request of that name), where they are part of the frame."""
    banks = views.get("banks")
    if isinstance(banks, BanksView):
        rows = [i for i, ins in enumerate(banks.instrs) if ins.site == access]
        if rows:
            banks.sites.setCurrentIndex(rows[0])
    coalescing = views.get("coalescing")
    if isinstance(coalescing, CoalescingView):
        index = coalescing.request_box.findText(access)
        if index >= 0:
            coalescing.request_box.setCurrentIndex(index)


class FrameRenderer:
    """Views of one trace in an offscreen container; :meth:`render` gives a frame at a time."""

    def __init__(
        self,
        trace: Trace,
        views: tuple[str, ...],
        size: tuple[int, int],
        block: int,
        caption: bool = True,
        runs: Sequence[RunPoint] | None = None,
        note: str = "",
        access: str = "",
    ) -> None:
        self.app = ensure_app()
        self.trace = trace
        self.size = size
        self.logical = logical_size(views, size)
        self.session = Session(interactive=False)  # the views leave out their mouse hints

        self.container = QWidget()
        self.container.setAttribute(Qt.WA_DontShowOnScreen, True)
        self.container.setAutoFillBackground(True)
        self.container.setStyleSheet("background: white")
        box = QVBoxLayout(self.container)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        self.views: dict[str, QWidget] = {}
        self._splits: list[tuple[QSplitter, list[int]]] = []
        box.addWidget(self._compose(views), 1)
        if note:  # a lesson step's explanation, over the caption, on every frame
            px = max(12, round(self.logical[1] / 48))
            self.note = QLabel(note, textFormat=Qt.RichText, wordWrap=True)
            self.note.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
            self.note.setStyleSheet(
                f"background: #fffbe6; color: #1e1e1e; font-size: {px}px;"
                f"padding: {px // 3}px {px // 2}px; border-top: 1px solid #c8c8cc"
            )
            self.note.setFixedHeight(self.note.heightForWidth(self.logical[0] - px) + 2 * px)
            box.addWidget(self.note)
        self.caption: QLabel | None = None
        if caption:
            px = max(12, round(self.logical[1] / 52))
            self.caption = QLabel(textFormat=Qt.RichText)
            # A longer caption must never widen the frame (the layout would shift): it wraps,
            # at a height fixed once the trace is known (_fit_caption).
            self.caption.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
            self.caption.setWordWrap(True)
            self.caption.setStyleSheet(
                f"background: {CAPTION_BACKGROUND}; color: #1e1e1e; font-size: {px}px;"
                f"padding: {px // 3}px {px // 2}px; border-top: 1px solid #c8c8cc"
            )
            box.addWidget(self.caption)
        self._mirrors = self._replace_inputs()
        self.container.setFixedSize(*self.logical)  # frames never change their layout size
        self.container.show()
        self._apply_shares()
        # As in the main window: views laid out first, then the trace arrives (pyqtgraph's
        # layouts keep odd row heights when they first meet their content before a resize).
        try:
            with _failing_views("for this trace", self.views):
                QCoreApplication.processEvents()
                self.session.set_trace(trace)
                for point in runs if runs else [RunPoint.from_trace(trace)]:  # throughput
                    self.session.add_run(point)
                self.session.select_block(block)
                if access:
                    choose_access(self.views, access)
                self.timeline: Timeline = self.session.timeline
                self._fit_caption()
                self._static_texts()
                for _ in range(5):  # nested layouts (widgets, then pyqtgraph's) settle
                    QCoreApplication.processEvents()
        except BaseException:
            self.close()  # no window is left behind when the views cannot show the trace
            raise

    def _compose(self, views: tuple[str, ...]) -> QWidget:
        """'all': the main window's arrangement; a list: the views side by side."""
        make = {name: lambda n=name: self._view(n) for name in VIEW_CLASSES}
        if views != ("all",):
            return self._split(Qt.Horizontal, [(make[v](), 1) for v in views])
        # The main window's arrangement, with more height for the tiles view: its legend needs
        # ~240 px, or the second row of its panels (A, C, Bs) collapses.
        top = self._split(Qt.Horizontal, [(make["grid"](), 45), (make["sm"](), 55)])
        left = self._split(Qt.Vertical, [(top, 40), (make["tiles"](), 60)])
        right = self._split(Qt.Vertical, [(make["banks"](), 45), (make["throughput"](), 55)])
        return self._split(Qt.Horizontal, [(left, 62), (right, 38)])

    def _split(self, orientation: Qt.Orientation, items: list[tuple[QWidget, int]]) -> QSplitter:
        """Splitters as in the main window: exact shares (box layouts ignore stretch factors
        once the views' size hints do not fit)."""
        split = QSplitter(orientation)
        split.setHandleWidth(4)
        split.setChildrenCollapsible(False)
        for widget, _ in items:
            split.addWidget(widget)
        self._splits.append((split, [weight for _, weight in items]))
        return split

    def _apply_shares(self) -> None:
        for split, weights in self._splits:
            total = split.width() if split.orientation() == Qt.Horizontal else split.height()
            split.setSizes([round(total * w / sum(weights)) for w in weights])

    def _view(self, name: str) -> QWidget:
        view = VIEW_CLASSES[name](self.session)
        self.views[name] = view
        return view

    def _replace_inputs(self) -> list[tuple[QWidget, QLabel, QLabel | None]]:
        """A label beside each combo box and spin box that shows its value once it is hidden:
        (the input, that label, the label before the input in its row, if any)."""
        mirrors = []
        for widget in self.container.findChildren(QWidget):
            if not isinstance(widget, (QComboBox, QAbstractSpinBox)):
                continue
            parent = widget.parentWidget()
            found = _layout_holding(parent.layout() if parent else None, widget)
            if found is None or not isinstance(found[0], QBoxLayout):
                continue
            layout, index = found
            before = layout.itemAt(index - 1).widget() if index > 0 else None
            mirror = QLabel()
            layout.insertWidget(index, mirror, layout.stretch(index))
            mirrors.append((widget, mirror, before if isinstance(before, QLabel) else None))
        return mirrors

    def _static_texts(self) -> None:
        """No interactive widget in a frame (views may show them again when they refresh)."""
        for widget in self.container.findChildren(QWidget):
            if isinstance(widget, INPUT_WIDGETS) and not widget.isHidden():
                widget.hide()
        for widget, mirror, before in self._mirrors:
            # A combo box's choice names itself ("colour: SM wave"); a spin box's number is
            # shown only after the label that names it ("warp" 3), else the text beside it says it.
            if isinstance(widget, QComboBox):
                text = widget.currentText()
            else:
                named = before is not None and not before.isHidden() and before.text().strip()
                text = widget.text() if named else ""
            if mirror.text() != text:
                mirror.setText(text)
            mirror.setVisible(bool(text))

    def _fit_caption(self) -> None:
        """Fix the caption's height to the lines its text takes at the frame's width, the
        most of those at a few moments of the run, so that no frame cuts it off (a 1280x720
        export of a simulated kernel 09 lost the end of its source, '⚠ simulated (NVIDIA H20')
        and none moves the views."""
        if self.caption is None:
            return
        width = self.logical[0]
        self.caption.setText("t")
        one_line = self.caption.heightForWidth(width)
        # a small frame keeps most of its height for the views: past that the end is cut
        most = one_line + (CAPTION_MAX_LINES - 1) * self.caption.fontMetrics().lineSpacing()
        heights = []
        for share in CAPTION_SAMPLES:
            self.caption.setText(self.caption_html(round(self.trace.duration_ns * share)))
            heights.append(self.caption.heightForWidth(width))
        self.caption.setFixedHeight(min(max(heights), most))

    # -- frames ----------------------------------------------------------------------------------
    def caption_html(self, t_ns: int) -> str:
        """Time, the selected block's phase, the configuration and where the data came from."""
        trace, block = self.trace, self.session.selected_block
        state, ktile = self.timeline.block_phase(block, t_ns)
        b = trace.blocks[block]
        colour = palette.hexcolor(palette.STATE_COLORS.get(state, palette.FOREGROUND))
        phase = f"<span style='color:{colour}'>&#9632;</span> <b>"
        phase += palette.state_text(self.timeline, block, t_ns, state) + "</b>"
        if ktile >= 0 and state != BlockState.DONE:
            phase += ", " + palette.ktile_text(ktile, trace.n_tiles)
        params = trace.config.kernel.labels(trace.config.params)
        m, n, k = trace.shape
        dot = " &nbsp;·&nbsp; "
        # the source right after the time: a simulated run says so first
        return (
            f"<b>t = {t_ns / 1000:,.1f}</b> / {trace.duration_ns / 1000:,.1f} µs{dot}"
            + palette.source_html(trace, trace.provenance)
            + dot
            + tr("block ({bx}, {by}) on SM {sm}").format(
                bx=int(b["bx"]), by=int(b["by"]), sm=int(b["smid"])
            )
            + f": {phase}{dot}<b>{trace.kernel}</b> {params}{dot}{m}×{n}×{k}"
        )

    def key_colours(self) -> list[tuple[int, int, int]]:
        return key_colours()

    def render(self, t_ns: int) -> np.ndarray:
        """The frame with the playhead at ``t_ns``: (H, W, 3) uint8 at the requested size.

        A view that fails while drawing it fails the frame (MatvizError)."""
        t_ns = int(t_ns)  # any size: the session keeps 64-bit nanoseconds
        with _failing_views(f"at t = {t_ns / 1000:,.1f} µs", self.views):
            self.session.set_playhead(t_ns)
            if self.caption is not None:
                self.caption.setText(self.caption_html(t_ns))
            self._static_texts()
            # Labels whose text changed ask for a new layout; do only that (no input events,
            # so the GUI cannot re-enter the export while a frame is drawn).
            QCoreApplication.sendPostedEvents(None, QEvent.LayoutRequest)
            image = self.container.grab().toImage()
        w, h = self.size
        if (image.width(), image.height()) != (w, h):
            image = image.scaled(w, h, Qt.IgnoreAspectRatio, Qt.SmoothTransformation)
        return to_rgb(image)

    def close(self) -> None:
        self.container.close()
        self.container.deleteLater()
        self.session.deleteLater()

"""The kernel's ``.cu`` source, with the lines of the selected block's current phase lit in the
phase's colour (lesson 8: the load, barrier 1, the k loop, barrier 2). It follows stepping.

Which lines belong to which phase comes from the stamp macros in the source
(:mod:`matviz.core.source_map`); instrumentation lines (``MV_...``) are drawn grey, so the
lesson's code stands out.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFontDatabase, QTextCursor, QTextFormat
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QTextEdit, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.on_screen import WhenOnScreen
from matviz.core import preprocessor, source_map
from matviz.core.timeline import BlockState
from matviz.paths import TRACE_HEADER

STATES = {"loading": BlockState.LOADING, "computing": BlockState.COMPUTING}
INSTRUMENTATION = QColor(150, 150, 150)
FILL_ALPHA = 70


class SourceView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.phases: list[source_map.PhaseLines] = []
        self.lit: tuple[int, ...] = ()  # 1-based lines lit now
        self.left_out: tuple[int, ...] = ()  # 1-based lines the preprocessor drops here
        self.shown: tuple[int, BlockState] | None = None  # (block, state) of the lit lines
        self.path = ""  # the .cu file's name
        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.caption = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.text = QPlainTextEdit(readOnly=True)
        self.text.setLineWrapMode(QPlainTextEdit.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
        self.stack = palette.stacked(
            self, self.placeholder, self.title, self.caption, (self.text, 1)
        )
        self._dim: list[QTextEdit.ExtraSelection] = []
        session.traceChanged.connect(self.refresh)
        session.playheadChanged.connect(WhenOnScreen(self, self._follow).request)
        session.selectionChanged.connect(self._follow)
        self.refresh()

    def refresh(self) -> None:
        from matviz.core.registry import get_kernel

        trace = self.session.trace
        self.stack.setCurrentIndex(1 if trace is not None else 0)
        if trace is None:
            self.retranslate()
            return
        kernel = get_kernel(trace.kernel)
        try:
            source = kernel.source.read_text(encoding="utf-8")
        except OSError as exc:
            source = tr("The source could not be read: {error}").format(error=exc)
        self.path = kernel.source.name
        self.retranslate()
        self.text.setPlainText(source)
        self.phases = source_map.phase_lines(trace.config, source)
        # code the preprocessor leaves out at this configuration (#if B_COL_MAJOR ... #else)
        self.left_out = preprocessor.left_out_lines(
            source, preprocessor.config_defines(trace.config)
        )
        trace_macros = source_map.defined_names(TRACE_HEADER)
        grey = set(self.left_out) | set(source_map.instrumentation_lines(source, trace_macros))
        self._dim = [self._selection(n, foreground=INSTRUMENTATION) for n in sorted(grey)]
        self.shown = None
        self._follow()

    def _selection(
        self, line: int, *, foreground: QColor | None = None, background: QColor | None = None
    ) -> QTextEdit.ExtraSelection:
        selection = QTextEdit.ExtraSelection()
        cursor = QTextCursor(self.text.document().findBlockByNumber(line - 1))
        cursor.movePosition(QTextCursor.EndOfBlock, QTextCursor.KeepAnchor)  # the whole line
        selection.cursor = cursor
        if foreground is not None:
            selection.format.setForeground(foreground)
        if background is not None:
            selection.format.setBackground(background)
            selection.format.setProperty(QTextFormat.FullWidthSelection, True)
        return selection

    def _follow(self, *_args) -> None:
        trace, timeline = self.session.trace, self.session.timeline
        if trace is None or timeline is None:
            return
        block = self.session.selected_block
        state, _ = timeline.block_phase(block, self.session.playhead_ns)
        if (block, state) == self.shown:
            return
        self.shown = (block, state)
        lines: list[int] = []
        for phase in self.phases:
            if STATES.get(phase.state) == state:
                for first, last in phase.spans:
                    lines += range(first, last + 1)
        self.lit = tuple(sorted(set(lines)))
        color = QColor(*palette.STATE_COLORS.get(state, palette.EMPTY), FILL_ALPHA)
        lit = [self._selection(n, background=color) for n in self.lit]
        self.text.setExtraSelections(lit + self._dim)
        if self.lit:
            block = self.text.document().findBlockByNumber(self.lit[0] - 1)
            self.text.setTextCursor(QTextCursor(block))
            self.text.centerCursor()
        self._update_caption()

    def _update_caption(self) -> None:
        trace = self.session.trace
        if trace is None or self.shown is None:
            self.caption.setText("")
            return
        block, state = self.shown
        name = tr(palette.STATE_NAMES.get(state, ""))
        if self.lit:
            text = tr("Block {block} is {state}: lines {first}–{last} are running.").format(
                block=block, state=name, first=self.lit[0],
                last=self.lit[-1],
            )  # fmt: skip
        elif not self.phases:
            text = tr("This kernel has no k-steps: every thread runs the whole loop.")
        else:
            text = tr("Block {block}: {state}.").format(block=block, state=name)
        text += " " + tr(
            "Grey lines are matviz's instrumentation: the macros that write the record."
        )
        if self.left_out:
            text += " " + tr("Grey too: the code this configuration does not compile (#if).")
        self.caption.setText(text)

    def retranslate(self) -> None:
        self.placeholder.setText(tr("No trace loaded"))
        self.title.setText("<b>" + tr("Kernel source: {file}").format(file=self.path) + "</b>")
        self._update_caption()

"""The Lessons panel: the lesson's concepts in order; choosing one asks the window to open its
recording, block, moment and view (``stepRequested``), and shows its explanation with the
trace's own numbers. The steps are data: ``resources/lessons/*.json`` (:mod:`matviz.core.lessons`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from matviz.app.i18n import Retranslating, current_language, tr
from matviz.app.session import Session
from matviz.core import lessons
from matviz.errors import MatvizError


class LessonsPanel(Retranslating, QWidget):
    stepRequested = Signal(int)  # the window applies the step, then calls show_step

    def __init__(self, session: Session, lesson: lessons.Lesson, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.lesson = lesson
        self.index = -1  # the step shown, -1 before the first
        self.heading = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.steps = QListWidget()
        self.steps.currentRowChanged.connect(self._on_row)
        self.text = QLabel(textFormat=Qt.RichText, wordWrap=True, alignment=Qt.AlignTop)
        self.text.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.previous_button = QPushButton(clicked=lambda: self.go(self.index - 1))
        self.next_button = QPushButton(clicked=lambda: self.go(self.index + 1))
        self.position = QLabel(alignment=Qt.AlignCenter)
        buttons = QHBoxLayout()
        buttons.addWidget(self.previous_button)
        buttons.addWidget(self.position, 1)
        buttons.addWidget(self.next_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.steps, 2)
        layout.addLayout(buttons)
        # a long step in a short dock (1280x720) scrolls rather than losing its last lines
        scroll = QScrollArea(widgetResizable=True, frameShape=QFrame.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        scroll.setWidget(self.text)
        self.text_scroll = scroll
        layout.addWidget(scroll, 3)
        self.retranslate()

    def go(self, index: int) -> None:
        """Ask for step ``index`` (clamped to the lesson)."""
        index = max(0, min(index, len(self.lesson.steps) - 1))
        self.steps.setCurrentRow(index)  # -> _on_row -> stepRequested

    def _on_row(self, row: int) -> None:
        if 0 <= row < len(self.lesson.steps):
            self.stepRequested.emit(row)

    def show_step(self, index: int) -> None:
        """The window has applied step ``index``: show its explanation."""
        self.index = index
        self.steps.blockSignals(True)
        self.steps.setCurrentRow(index)
        self.steps.blockSignals(False)
        self._update_text()

    def _update_text(self) -> None:
        n = len(self.lesson.steps)
        self.previous_button.setEnabled(self.index > 0)
        self.next_button.setEnabled(self.index < n - 1)
        self.position.setText(
            tr("step {i} of {n}").format(i=self.index + 1, n=n) if self.index >= 0 else ""
        )
        if self.index < 0 or self.session.trace is None:
            self.text.setText(tr("Choose a step: each opens its recording, block and view."))
            return
        step = self.lesson.steps[self.index]
        language = current_language()
        try:
            body = lessons.render(step.text.get(language), self.session.trace)
        except MatvizError as exc:
            body = str(exc)
        simulated = self.session.trace.is_simulated
        note = ("<br><i>" + tr("Simulated: no recording shows this.") + "</i>") if simulated else ""
        self.text.setText(f"<b>{step.section} · {step.title.get(language)}</b><br>{body}{note}")

    def retranslate(self) -> None:
        language = current_language()
        self.heading.setText("<b>" + self.lesson.title.get(language) + "</b>")
        self.steps.blockSignals(True)
        row = self.steps.currentRow()
        self.steps.clear()
        self.steps.addItems(
            [f"{step.section}  {step.title.get(language)}" for step in self.lesson.steps]
        )
        self.steps.setCurrentRow(row)
        self.steps.blockSignals(False)
        self.previous_button.setText(tr("← Previous"))
        self.next_button.setText(tr("Next →"))
        self._update_text()

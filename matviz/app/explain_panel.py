"""What is happening, in words: the selected block at the playhead, and facts about the run.

Shows ``matviz.core.explain.explain`` (title, body, concept; its ``numbers`` are for tests and
are already in the body's words) and ``trace_facts`` in a read-only text panel, with the
language selector that switches the whole window.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QTextBrowser, QVBoxLayout, QWidget

from matviz.app.i18n import LANGUAGES, Retranslating, current_language, set_language, tr
from matviz.app.session import Session
from matviz.core.explain import explain, trace_facts


class ExplainPanel(Retranslating, QWidget):
    languageChanged = Signal(str)

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._html = ""
        self._facts_html = ""  # facts depend on the trace and language only: cached
        self.language_label = QLabel()
        self.language = QComboBox()
        for code, name in LANGUAGES.items():
            self.language.addItem(name, code)
        self.language.setCurrentIndex(self.language.findData(current_language()))
        self.language.currentIndexChanged.connect(self._language_picked)
        self.text = QTextBrowser()
        self.text.setReadOnly(True)
        self.text.setOpenLinks(False)

        top = QHBoxLayout()
        top.addWidget(self.language_label)
        top.addWidget(self.language, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.text, 1)

        session.traceChanged.connect(self._trace_changed)
        session.playheadChanged.connect(self.refresh)
        session.selectionChanged.connect(self.refresh)
        self.retranslate()
        self._trace_changed()

    # -- content ---------------------------------------------------------------------------
    def plain_text(self) -> str:
        return self.text.toPlainText()

    def _trace_changed(self) -> None:
        self._facts_html = ""
        self.refresh()

    def refresh(self, *_: object) -> None:
        trace = self.session.trace
        if trace is None:
            self._set_html(f"<p>{html.escape(tr('Open a trace or start a run.'))}</p>")
            return
        block = self.session.selected_block
        ex = explain(trace, self.session.timeline, block, self.session.playhead_ns, tr=tr)
        parts = [f"<h3>{html.escape(ex.title)}</h3>"]
        parts += [f"<p>{html.escape(p)}</p>" for p in str(ex.body).split("\n\n") if p.strip()]
        if ex.concept:
            parts.append(
                f"<p style='color:#1a5fb4'><b>{html.escape(tr('Concept'))}:</b> "
                f"{html.escape(ex.concept)}</p>"
            )
        if not self._facts_html:
            facts = "".join(f"<li>{html.escape(f)}</li>" for f in trace_facts(trace, tr=tr))
            self._facts_html = f"<h4>{html.escape(tr('About this run'))}</h4><ul>{facts}</ul>"
        self._set_html("".join(parts) + "<hr>" + self._facts_html)

    def _set_html(self, text: str) -> None:
        if text != self._html:  # re-layout only when the words change, not every frame
            self._html = text
            bar = self.text.verticalScrollBar()
            keep = bar.value()
            self.text.setHtml(text)
            bar.setValue(keep)

    # -- language --------------------------------------------------------------------------
    def _language_picked(self) -> None:
        code = self.language.currentData()
        if code != current_language():
            set_language(code)
            self.languageChanged.emit(code)

    def retranslate(self) -> None:
        self.language_label.setText(tr("Language"))
        self.language.setToolTip(tr("Switch every text in the window"))
        self.language.blockSignals(True)
        self.language.setCurrentIndex(self.language.findData(current_language()))
        self.language.blockSignals(False)
        self._facts_html = ""
        self.refresh()


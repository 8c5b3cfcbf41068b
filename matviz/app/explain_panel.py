"""What is happening, in words: the selected block at the playhead, and facts about the run.

Shows ``matviz.core.explain.explain`` (title, body, concept; its ``numbers`` are for tests and
are already in the body's words) and ``trace_facts`` in a read-only text panel, with the
language selector that switches the whole window. The concept line ("Lesson 8 §12 …") is a
link: it asks for the Help window's map from lesson sections to views, at that section.

``LESSON_MAP`` and :class:`HelpDialog` (keyboard keys and that map) live here too.
"""

from __future__ import annotations

import html
import re

from PySide6.QtCore import QElapsedTimer, QUrl, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from matviz.app.i18n import LANGUAGES, Retranslating, current_language, set_language, tr
from matviz.app.session import Session
from matviz.core.explain import explain, trace_facts

# While playing, the words change every frame, faster than anyone reads them; laying out the
# rich text costs a few ms a frame, so the panel follows the playhead at this interval.
PLAYING_TEXT_MS = 100

# Lesson 8 (and the article) section by section: (first §, last §, topic, views that show it).
# A section maps to the narrowest row that holds it. Topics and view names are translated.
LESSON_MAP: tuple[tuple[int, int, str, tuple[str, ...]], ...] = (
    (2, 5, "Naive kernel: one thread per C element, a 2-D grid of blocks (article §2)",
     ("Block grid", "SM lanes", "Explanation")),
    (6, 17, "Tiling: A and B tiles in shared memory, the k-tile loop (article §3-4)",
     ("Tiles", "Block grid", "Explanation")),
    (11, 12, "The two __syncthreads: after the loads, after the multiply-adds",
     ("Block grid", "Tiles", "Explanation")),
    (13, 13, "Reuse: each loaded element feeds T multiply-adds",
     ("Tiles", "Explanation")),
    (17, 17, "Occupancy: blocks per SM, waves and the tail",
     ("SM lanes", "Explanation")),
    (18, 18, "Register tiling: TM results per thread (article §4.3)",
     ("Tiles", "Throughput")),
    (19, 19, "Micro-tiles and warp tiles; float4 loads, A transposed, padding or a swizzle",
     ("Tiles", "Banks", "Throughput")),
    (20, 23, "Tensor Cores: ldmatrix loads fragments, a warp's mma_sync multiplies them",
     ("Fragments", "Banks", "Throughput")),
    (24, 25, "Double buffering with cp.async: the next k-steps copied while one computes",
     ("SM lanes", "Block grid", "Throughput")),
    (26, 26, "Boundaries: edge blocks and the guarded write of C",
     ("Block grid", "Tiles", "Explanation")),
    (27, 28, "Bank conflicts and padding; A stored transposed",
     ("Banks", "Tiles")),
    (29, 29, "Performance against cuBLAS and the FP32 peak (article §8)",
     ("Throughput",)),
    (30, 30, "Why GEMM suits a GPU: independent outputs, regular multiply-adds, reuse",
     ("Block grid", "Explanation")),
    (31, 31, "The data path: DRAM, L2, shared memory, registers and the cores, measured",
     ("Explanation", "Tiles")),
)  # fmt: skip

# (keys, what they do), for the Help window
KEYS: tuple[tuple[str, str], ...] = (
    ("Space", "Play or pause"),
    ("← / →", "Previous / next phase boundary of the selected block"),
    ("Shift+← / Shift+→", "Previous / next phase boundary of any block"),
    ("Home / End", "Start / end of the kernel"),
    ("Click a block", "Select it (grid, SM lanes)"),
    ("Ctrl+O", "Open a trace"),
    ("Ctrl+Shift+S", "Save the trace"),
    ("Ctrl+E", "Export a picture, video or Perfetto trace"),
    ("F1", "This help"),
)


def lesson_row(section: int) -> int | None:
    """Index in ``LESSON_MAP`` of the narrowest row that holds ``section``."""
    rows = [(hi - lo, i) for i, (lo, hi, _, _) in enumerate(LESSON_MAP) if lo <= section <= hi]
    return min(rows)[1] if rows else None


def concept_section(concept: str) -> int | None:
    """The first lesson section a concept line names ("Lesson 8 §12-14: …" -> 12)."""
    match = re.search(r"§\s*(\d+)", concept)
    return int(match.group(1)) if match else None


class HelpDialog(Retranslating, QDialog):
    """Help: the keyboard keys and where each lesson section shows in the window."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.section: int | None = None
        self.text = QTextBrowser()
        self.text.setOpenLinks(False)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.resize(720, 560)
        self.retranslate()

    def show_section(self, section: int | None) -> None:
        """Highlight the row of the map that holds ``section`` and scroll to it."""
        self.section = section
        self.retranslate()
        row = self.highlighted_row
        self.show()
        self.raise_()
        self.text.scrollToAnchor(f"lesson-{row}" if row is not None else "keys")

    @property
    def highlighted_row(self) -> int | None:
        return lesson_row(self.section) if self.section is not None else None

    def retranslate(self) -> None:
        self.setWindowTitle(tr("matviz help"))
        esc = html.escape
        keys = "".join(
            f"<tr><td><b>{esc(tr(k))}</b></td><td>{esc(tr(what))}</td></tr>" for k, what in KEYS
        )
        row_hl = self.highlighted_row
        rows = []
        for i, (lo, hi, topic, views) in enumerate(LESSON_MAP):
            style = " style='background-color:#fff3a0'" if i == row_hl else ""
            where = ", ".join(tr(v) for v in views)
            sections = f"§{lo}" if lo == hi else f"§{lo}-{hi}"
            rows.append(
                f"<tr{style}><td><a name='lesson-{i}'></a><b>{sections}</b></td>"
                f"<td>{esc(tr(topic))}</td><td>{esc(where)}</td></tr>"
            )
        table = "<table cellpadding='4' cellspacing='0' border='1'>"
        self.text.setHtml(
            f"<a name='keys'></a><h3>{esc(tr('Keyboard'))}</h3>{table}{keys}</table>"
            f"<h3>{esc(tr('Lesson 8 in the window'))}</h3>"
            f"<p>{esc(tr('Where each section of lesson 8 (and of the article) shows.'))}</p>"
            f"{table}<tr><th>{esc(tr('Section'))}</th><th>{esc(tr('Topic'))}</th>"
            f"<th>{esc(tr('Views'))}</th></tr>{''.join(rows)}</table>"
        )


class ExplainPanel(Retranslating, QWidget):
    languageChanged = Signal(str)
    conceptRequested = Signal(int)  # a lesson section: show it in the Help window's map

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
        self.text.anchorClicked.connect(self._anchor_clicked)

        top = QHBoxLayout()
        top.addWidget(self.language_label)
        top.addWidget(self.language, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.text, 1)

        self._since = QElapsedTimer()  # since the last refresh
        session.traceChanged.connect(self._trace_changed)
        session.playheadChanged.connect(self._on_playhead)
        session.playingChanged.connect(self.refresh)  # a pause shows the exact frame
        session.selectionChanged.connect(self.refresh)
        self.retranslate()
        self._trace_changed()

    # -- content ---------------------------------------------------------------------------
    def plain_text(self) -> str:
        return self.text.toPlainText()

    def _trace_changed(self) -> None:
        self._facts_html = ""
        self.refresh()

    def _on_playhead(self, _ns: int) -> None:
        if self.session.playing and self._since.isValid():
            if self._since.elapsed() < PLAYING_TEXT_MS:
                return
        self.refresh()

    def refresh(self, *_: object) -> None:
        self._since.start()
        trace = self.session.trace
        if trace is None:
            self._set_html(f"<p>{html.escape(tr('Open a trace or start a run.'))}</p>")
            return
        block = self.session.selected_block
        ex = explain(trace, self.session.timeline, block, self.session.playhead_ns, tr=tr)
        parts = [f"<h3>{html.escape(ex.title)}</h3>"]
        parts += [f"<p>{html.escape(p)}</p>" for p in str(ex.body).split("\n\n") if p.strip()]
        if ex.concept:
            section = concept_section(ex.concept)
            concept = html.escape(ex.concept)
            if section is not None:  # opens the lesson map at that section
                concept = f"<a href='lesson:{section}' style='color:#1a5fb4'>{concept}</a>"
            parts.append(
                f"<p style='color:#1a5fb4'><b>{html.escape(tr('Concept'))}:</b> {concept}</p>"
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

    def concept_link(self) -> str | None:
        """The concept line's link target ("lesson:12"), if it has one."""
        match = re.search(r"href='(lesson:\d+)'", self._html)
        return match.group(1) if match else None

    def _anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == "lesson" and url.path().isdigit():
            self.conceptRequested.emit(int(url.path()))

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

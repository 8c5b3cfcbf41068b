"""The main window's status line (data source, error banner, run progress) and its labels.

Errors are a red, non-modal banner that stays until the next success; runs that take longer
than ``BUSY_DELAY_MS`` show a busy bar and a Cancel button.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QWidget,
)

from matviz.app.i18n import Retranslating, tr
from matviz.core.trace import Trace

BUSY_DELAY_MS = 500  # runs shorter than this show no progress bar
NOTE_MS = 4000
MAX_RECENT = 8


def source_label(trace: Trace, replay: bool) -> str:
    """Where the data came from, for the title and status bar."""
    device = trace.manifest["device"].get("name", "GPU")
    if trace.is_simulated:
        return tr("{device} model – simulated").format(device=device)
    if replay:
        return tr("recorded on {device} – replay").format(device=device)
    return tr("recorded on {device} – live run").format(device=device)


def config_label(trace: Trace) -> str:
    """'tiled T32 P0 1024×1024×1024' for the window title (labels from the description)."""
    config = trace.config
    m, n, k = trace.shape
    return f"{trace.kernel} {config.kernel.labels(config.params)} {m}×{n}×{k}"


class RecentFiles:
    """The last ``MAX_RECENT`` traces opened or saved, newest first, kept in QSettings."""

    KEY = "recent_files"

    def __init__(self, settings: QSettings) -> None:
        self.settings = settings

    def files(self) -> list[str]:
        """Remembered traces that still exist (missing ones are dropped for good)."""
        value = self.settings.value(self.KEY, [])
        files = [value] if isinstance(value, str) else list(value or [])
        kept = [f for f in files if Path(f).is_file()][:MAX_RECENT]
        if kept != files:
            self.settings.setValue(self.KEY, kept)
        return kept

    def add(self, path: str | Path) -> None:
        name = str(Path(path).resolve())
        files = [name] + [f for f in self.files() if f != name]
        self.settings.setValue(self.KEY, files[:MAX_RECENT])


class StatusLine(Retranslating, QWidget):
    cancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.error = ""
        self._detail: tuple[int, int, float] | None = None
        self.source = QLabel()
        self.error_label = QLabel()
        self.error_label.setStyleSheet(
            "QLabel { color: white; background: #c62828; padding: 1px 6px; border-radius: 3px; }"
        )
        self.error_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        # a long message is cut at the window edge, not widening it; the tooltip has it all
        self.error_label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.error_label.hide()
        self.detail = QLabel()  # how a very large trace is drawn (sampled views)
        self.note = QLabel()  # a passing remark ('Saved …') that clears itself
        self._note_timer = QTimer(self, singleShot=True, interval=NOTE_MS)
        self._note_timer.timeout.connect(self.note.clear)
        self.progress_label = QLabel()
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 0)  # busy mode: a run has no measurable progress
        self.progress_bar.setMaximumWidth(160)
        self.cancel_button = QPushButton()
        self.cancel_button.clicked.connect(self.cancelRequested)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addWidget(self.source)
        layout.addWidget(self.detail)
        layout.addWidget(self.error_label, 4)
        layout.addWidget(self.note, 1)
        for widget in self._progress_widgets:
            layout.addWidget(widget)
            widget.hide()
        self._busy_timer = QTimer(self, singleShot=True, interval=BUSY_DELAY_MS)
        self._busy_timer.timeout.connect(lambda: self._show_progress(True))
        self.retranslate()

    @property
    def _progress_widgets(self) -> tuple[QWidget, ...]:
        return (self.progress_label, self.progress_bar, self.cancel_button)

    def set_source(self, trace: Trace | None, text: str, tooltip: str = "") -> None:
        if trace is None:
            self.source.setText("")
            return
        color = "#c85a00" if trace.is_simulated else "#1b5e20"
        self.source.setText(f"<b style='color:{color}'>{text}</b>")
        self.source.setToolTip(tooltip)

    def set_detail(self, blocks: int, grid_step: int, per_cell: float) -> None:
        """Say when the views draw a sample of the blocks: every ``grid_step``-th block of the
        grid in x and y; ``per_cell`` blocks on average behind one SM-lane cell."""
        self._detail = (blocks, grid_step, per_cell)
        parts = []
        if grid_step > 1:
            parts.append(tr("block grid: 1 block of every {n}×{n}").format(n=grid_step))
        if per_cell > 1:
            parts.append(tr("SM lanes: 1 of ~{k:.0f} blocks per cell").format(k=per_cell))
        if not parts:
            self.detail.setText("")
            self.detail.setToolTip("")
            return
        head = tr("{n:,} blocks, shown sampled").format(n=blocks)
        self.detail.setText(f"<span style='color:#8a5a00'>{head}: {'; '.join(parts)}</span>")
        self.detail.setToolTip(
            tr("Too many blocks to draw one by one: each pixel of the block grid and each cell "
               "of the SM lanes shows one block standing for its neighbours.")
        )  # fmt: skip

    def show_error(self, message: str) -> None:
        self.error = message
        self.error_label.setText("⚠ " + message)
        self.error_label.setToolTip(message)
        self.error_label.show()

    def show_note(self, text: str) -> None:
        self.note.setText(text)
        self._note_timer.start()

    def clear_error(self) -> None:
        self.error = ""
        self.error_label.hide()

    def set_busy(self, busy: bool) -> None:
        """Show the busy bar once a run has taken ``BUSY_DELAY_MS``; hide it when it ends."""
        if busy:
            self.progress_label.setText(tr("Running…"))
            self._busy_timer.start()
        else:
            self._busy_timer.stop()
            self._show_progress(False)

    def set_progress(self, text: str) -> None:
        self.progress_label.setText(text)

    def _show_progress(self, show: bool) -> None:
        for widget in self._progress_widgets:
            widget.setVisible(show)

    def retranslate(self) -> None:
        if self._detail is not None:
            self.set_detail(*self._detail)
        self.cancel_button.setText(tr("Cancel"))
        self.cancel_button.setToolTip(tr("Stop the run; the current trace stays"))
        if self.progress_label.isHidden():
            self.progress_label.setText(tr("Running…"))

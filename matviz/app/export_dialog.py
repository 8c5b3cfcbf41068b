"""File -> Export…: the current trace as GIF, MP4, PNG or Perfetto JSON, without leaving the app.

The export renders its own copies of the views (the window's playhead and selection stay where
the user left them) and runs in small steps from a QTimer, so the window stays responsive and
Cancel in the progress dialog stops it at once, removing the partial file.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressDialog,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from matviz.app.export_job import ExportJob
from matviz.app.i18n import tr
from matviz.app.session import Session
from matviz.errors import MatvizError
from matviz.export import options as opt

VIEW_ITEMS = (
    ("all", "all five views"),
    ("grid", "grid of blocks"),
    ("sm", "SM lanes"),
    ("tiles", "tiles of the selected block"),
    ("banks", "shared-memory banks"),
    ("throughput", "throughput"),
)
FORMAT_ITEMS = (
    ("gif", "GIF animation"),
    ("mp4", "MP4 video (H.264)"),
    ("png", "PNG still"),
    ("perfetto", "Perfetto / Chrome trace (JSON)"),
)
SIZES = ("1280x720", "1920x1080", "1600x900", "960x540")
SUFFIX = {"gif": ".gif", "mp4": ".mp4", "png": ".png", "perfetto": ".json"}
STEP_S = 0.04  # work per timer tick: short enough for the window to stay smooth


class ExportDialog(QDialog):
    exported = Signal(str)  # path of a finished export

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.job: ExportJob | None = None
        self.progress: QProgressDialog | None = None
        self.timer = QTimer(self, interval=0)
        self.timer.timeout.connect(self._tick)
        self.setWindowTitle(tr("Export"))

        self.view = QComboBox()
        for key, text in VIEW_ITEMS:
            self.view.addItem(tr(text), key)
        self.format = QComboBox()
        for key, text in FORMAT_ITEMS:
            self.format.addItem(tr(text), key)
        self.fps = QSpinBox(minimum=1, maximum=opt.MAX_GIF_FPS, value=opt.DEFAULTS["fps"])
        self.duration = QDoubleSpinBox(
            minimum=0.1, maximum=600.0, value=opt.DEFAULTS["duration"], suffix=" s"
        )
        self.size = QComboBox(editable=True)
        self.size.addItems(SIZES)
        self.t0, self.t1, self.at = (QDoubleSpinBox(decimals=1, suffix=" µs") for _ in range(3))
        self.caption = QCheckBox(tr("caption: time, source, phase, configuration"), checked=True)
        self.block_label = QLabel()
        self.path = QLineEdit()
        browse = QPushButton(tr("Browse…"))
        browse.clicked.connect(self._browse)
        self.status = QLabel(wordWrap=True, textFormat=Qt.PlainText)
        self.buttons = QDialogButtonBox(QDialogButtonBox.Close)
        self.export_button = self.buttons.addButton(tr("Export"), QDialogButtonBox.AcceptRole)
        self.export_button.clicked.connect(self.start_export)
        self.buttons.rejected.connect(self.close)

        form = QFormLayout()
        form.addRow(tr("View"), self.view)
        form.addRow(tr("Format"), self.format)
        form.addRow(tr("Frames per second"), self.fps)
        form.addRow(tr("Duration"), self.duration)
        form.addRow(tr("Size (pixels)"), self.size)
        form.addRow(tr("From"), self.t0)
        form.addRow(tr("To"), self.t1)
        form.addRow(tr("Still at"), self.at)
        form.addRow(tr("Block"), self.block_label)
        form.addRow("", self.caption)
        row = QHBoxLayout()
        row.addWidget(self.path, 1)
        row.addWidget(browse)
        form.addRow(tr("File"), row)
        box = QVBoxLayout(self)
        box.addLayout(form)
        box.addWidget(self.status)
        box.addWidget(self.buttons)
        self.format.currentIndexChanged.connect(self._on_format)
        # Quitting mid-export (the window closed) still removes the partial file.
        QCoreApplication.instance().aboutToQuit.connect(self.cancel)
        self.sync_from_session()

    # -- state -----------------------------------------------------------------------------------
    def sync_from_session(self) -> None:
        """Time ranges, the still's time and the block from the window's trace and playhead."""
        trace = self.session.trace
        if trace is None:
            return
        end_us = trace.duration_ns / 1000
        for spin in (self.t0, self.t1, self.at):
            spin.setRange(0.0, end_us)
        self.t0.setValue(0.0)
        self.t1.setValue(end_us)
        self.at.setValue(self.session.playhead_ns / 1000)
        b = trace.blocks[self.session.selected_block]
        self.block_label.setText(f"({int(b['bx'])}, {int(b['by'])})")
        if not self.path.text():
            labels = trace.config.kernel.labels(trace.config.params)  # 'T32 P0'
            name = f"{trace.kernel}_{labels.replace(' ', '_').lower()}_{trace.shape[0]}"
            self.path.setText(str(Path.cwd() / name) + SUFFIX[self.current_format()])
        self._on_format()

    def current_format(self) -> str:
        return self.format.currentData()

    def _on_format(self, *_args) -> None:
        fmt = self.current_format()
        gz = self.path.text().strip().lower().endswith(".gz")
        video, picture = fmt in opt.VIDEO_FORMATS, fmt != "perfetto"
        for widget in (self.fps, self.duration, self.t0, self.t1):
            widget.setEnabled(video)
        for widget in (self.view, self.size, self.caption):
            widget.setEnabled(picture)
        self.at.setEnabled(fmt == "png")
        text = self.path.text().strip()
        for suffix in (".json.gz", *SUFFIX.values()):  # keep the name, change the suffix
            if text.lower().endswith(suffix):
                text = text[: -len(suffix)]
                break
        if text:
            self.path.setText(text + (".json.gz" if fmt == "perfetto" and gz else SUFFIX[fmt]))

    def options(self) -> opt.ExportOptions:
        """What the fields ask for (MatvizError for a bad size)."""
        trace = self.session.trace
        b = trace.blocks[self.session.selected_block]
        fmt = self.current_format()
        opts = opt.ExportOptions(
            format=fmt,
            views=(self.view.currentData(),),
            fps=self.fps.value(),
            duration_s=self.duration.value(),
            size=opt.parse_size(self.size.currentText()),
            block=(int(b["bx"]), int(b["by"])),
            t0_us=self.t0.value(),
            # The field shows 0.1 µs, so its end is the kernel's end rounded (240.4 for
            # 240,437 ns): at its maximum it means the end itself, and the last frame shows
            # every block done.
            t1_us=None if self.t1.value() >= self.t1.maximum() else self.t1.value(),
            at_us=self.at.value(),
            caption=self.caption.isChecked(),
        )
        opt.check(opts)
        return opts

    # -- running ---------------------------------------------------------------------------------
    def start_export(self) -> bool:
        """Check everything, then export in steps; False (and a red line) when it cannot."""
        if self.job is not None or self.session.trace is None:
            return False
        try:
            path = Path(self.path.text().strip())
            job = ExportJob(self.session.trace, self.options(), path, self.session.runs)
            job.start()
        except MatvizError as exc:
            self._show(str(exc), error=True)
            return False
        self.job = job
        self.progress = QProgressDialog(tr("Exporting…"), tr("Cancel"), 0, job.total, self)
        self.progress.setWindowModality(Qt.WindowModal)
        self.progress.setMinimumDuration(0)
        self.progress.setAutoClose(False)
        self.progress.canceled.connect(self.cancel)
        self.export_button.setEnabled(False)
        self._show(tr("Exporting…"))
        self.timer.start()
        return True

    def _tick(self) -> None:
        job = self.job
        if job is None:
            return
        if self.progress is not None and self.progress.wasCanceled():  # Esc, or cancel()
            self.cancel()
            return
        try:
            more = job.step(STEP_S)
            if self.progress is not None:
                self.progress.setValue(job.done)
            if more:
                return
            path = job.finish()
        except MatvizError as exc:
            self._end()
            self._show(str(exc), error=True)
            return
        self._end()
        self._show(tr("Wrote {path}").format(path=path))
        self.exported.emit(str(path))

    def cancel(self) -> None:
        """Stop the running export and remove its partial file."""
        if self.job is not None:
            self.job.abort()
            self._end()
            self._show(tr("Export cancelled; no file was written."))

    def _end(self) -> None:
        self.timer.stop()
        self.job = None
        if self.progress is not None:
            self.progress.canceled.disconnect(self.cancel)
            self.progress.close()
            self.progress.deleteLater()
            self.progress = None
        self.export_button.setEnabled(True)

    @property
    def running(self) -> bool:
        return self.job is not None

    def _show(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #c0392b" if error else "")
        self.status.setText(text)

    def _browse(self) -> None:
        fmt = self.current_format()
        pattern = {"perfetto": "*.json *.json.gz"}.get(fmt, f"*{SUFFIX[fmt]}")
        name, _ = QFileDialog.getSaveFileName(
            self, tr("Export to"), self.path.text(), f"{fmt} ({pattern})"
        )
        if name:
            self.path.setText(name)

    def closeEvent(self, event) -> None:  # noqa: N802
        self.cancel()  # closing the dialog never leaves a half-written file
        super().closeEvent(event)

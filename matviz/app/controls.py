"""The run controls: kernel, sizes, one choice per kernel parameter, level and backend.

The parameter rows come from the selected kernel's description (``Param.name``, ``values``,
``default``, ``label``, ``help``) and are rebuilt when the kernel changes, so a parameter added
to a description appears here with no other change. Any change re-validates at once (a rejected
configuration shows its reason in red and does not run) and, 400 ms after the last change, asks
for a run through ``runRequested(job)``; the job is a ``RunRequest``-shaped dict.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QLabel,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from matviz.app.i18n import Retranslating, tr
from matviz.backends.cuda_status import cuda_status
from matviz.backends.devices import tuned_key
from matviz.core import registry, tuned
from matviz.core.kernel import LEVEL_NAMES, LEVELS, Kernel, Param
from matviz.core.trace import Trace
from matviz.errors import MatvizError, RefusedConfiguration

DEBOUNCE_MS = 400
SIZE_MIN, SIZE_MAX = 1, 16384  # what the GUI offers; the spin boxes accept more to explain why
SPIN_ACCEPTS = 999_999
BACKENDS = (("cuda", "CUDA"), ("sim", "Simulator"))
DEFAULT_SIZE = 1024
FIXED_ROWS = ("Kernel", "M (rows of C)", "N (cols of C)", "K (inner)")  # then the parameters


def param_title(param: Param) -> str:
    """The row label of a parameter: 'Tile T', 'Pad P' (its name and its symbol), or just its
    name, 'Drop sync', where the short label is a word, not a symbol."""
    name = param.name.replace("_", " ")
    name = name[:1].upper() + name[1:]
    symbol = len(param.label) <= 3 and param.label.lower() != param.name.lower()
    return f"{name} {param.label}" if symbol else name


class FormScroll(QScrollArea):
    """Scrolls its form only where the dock is shorter than the form; asks for all of it."""

    def __init__(self, form: QWidget) -> None:
        super().__init__(widgetResizable=True, frameShape=QFrame.NoFrame)
        self.setWidget(form)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)

    def sizeHint(self) -> QSize:  # QScrollArea caps its hint at 24 lines; kernel 10 has 13 rows
        return self.widget().sizeHint()


class Controls(Retranslating, QWidget):
    runRequested = Signal(dict)
    validityChanged = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cuda_ok, self.cuda_reason = cuda_status()
        self._quiet = False  # set while showing a loaded trace's configuration
        self.error = ""
        self._timer = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._timer.timeout.connect(self.request_run)

        self.kernel = QComboBox()
        self.kernel.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.kernel.setMinimumContentsLength(9)  # the full title is in the tooltip
        for i, kernel in enumerate(registry.kernels().values()):
            self.kernel.addItem(f"{kernel.number:02d} {kernel.name}", kernel.name)
            self.kernel.setItemData(i, kernel.title, Qt.ToolTipRole)
        self.sizes = {}
        for name in "MNK":
            box = QSpinBox()
            box.setRange(0, SPIN_ACCEPTS)
            box.setValue(DEFAULT_SIZE)
            box.setAccelerated(True)
            box.setKeyboardTracking(False)  # typing 4096 is one change, not four
            self.sizes[name] = box
        self.params_boxes: dict[str, QComboBox] = {}  # one per parameter of the kernel shown
        self._param_labels: dict[str, QLabel] = {}
        self.level = QComboBox()
        for level in LEVELS:
            self.level.addItem("", level)
        self.level.setCurrentIndex(self.level.findData(3))
        self.backend = QComboBox()
        for key, _ in BACKENDS:
            self.backend.addItem("", key)
        self.run_button = QPushButton()
        self.run_button.clicked.connect(self.request_run)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #c62828;")
        self.message.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.tuned_note = QLabel()  # where the parameters came from matviz sweep --tune
        self.tuned_note.setWordWrap(True)
        self.tuned_note.setStyleSheet("color: #555;")
        self.tuned_note.hide()
        self._tuned_from = ""

        form_widget = QWidget()
        self.form = QFormLayout(form_widget)
        self.form.setContentsMargins(0, 0, 0, 0)
        self.form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self._labels = [QLabel() for _ in FIXED_ROWS]
        for label, field in zip(self._labels, [self.kernel, *self.sizes.values()], strict=True):
            label.setBuddy(field)
            self.form.addRow(label, field)
        self._level_label, self._backend_label = QLabel(), QLabel()
        for label, field in ((self._level_label, self.level), (self._backend_label, self.backend)):
            label.setBuddy(field)
            self.form.addRow(label, field)
        # a kernel with many parameters (kernel 10: eight) makes the form taller than a 720-px
        # window's dock: the form scrolls, while Run and the reason a configuration is refused
        # stay in sight below it
        self.form_scroll = FormScroll(form_widget)
        layout = QVBoxLayout(self)
        layout.addWidget(self.form_scroll)
        layout.addWidget(self.run_button)
        layout.addWidget(self.message)
        layout.addWidget(self.tuned_note)
        layout.addStretch(1)

        self._build_params()
        self._setup_backend()
        self.kernel.currentIndexChanged.connect(self._kernel_changed)
        for widget in (self.level, self.backend):
            widget.currentIndexChanged.connect(self._changed)
        for box in self.sizes.values():
            box.valueChanged.connect(self._changed)
        self.retranslate()
        self.validate()

    # -- configuration ---------------------------------------------------------------------
    @property
    def spec(self) -> Kernel:
        """The selected kernel's description."""
        return registry.get_kernel(self.kernel.currentData())

    def params(self) -> dict[str, int | str]:
        return {name: box.currentData() for name, box in self.params_boxes.items()}

    def job(self) -> dict:
        """The current configuration as a RunRequest-shaped dict (the runner adds ``out``)."""
        return {
            "backend": self.backend.currentData(),
            "kernel": self.spec.name,
            "M": self.sizes["M"].value(),
            "N": self.sizes["N"].value(),
            "K": self.sizes["K"].value(),
            "params": self.params(),
            "level": int(self.level.currentData()),
        }

    def validate(self) -> bool:
        """Check the configuration; show the reason in red when it is refused."""
        self.error = ""
        job = self.job()
        try:
            self.spec.configure(job["params"], job["M"], job["N"], job["K"])
        except RefusedConfiguration as exc:  # the kernel is named above: its rule alone
            self.error = tr(exc.template).format(**exc.values)
        except MatvizError as exc:
            self.error = str(exc)
        for name in "MNK" if not self.error else ():
            if not SIZE_MIN <= job[name] <= SIZE_MAX:  # the kernel allows it; the GUI does not
                self.error = tr("{name} = {value} is outside {low}..{high}").format(
                    name=name, value=job[name], low=SIZE_MIN, high=SIZE_MAX
                )
                break
        if not self.error and self.backend.currentData() == "cuda" and not self.cuda_ok:
            self.error = tr("CUDA is unavailable: {reason}").format(reason=self.cuda_reason)
        self.message.setText(self.error)
        self.message.setVisible(bool(self.error))
        self.run_button.setEnabled(not self.error)
        self.validityChanged.emit(not self.error)
        return not self.error

    def request_run(self) -> None:
        self._timer.stop()
        if self.validate():
            self.runRequested.emit(self.job())

    def cancel_pending(self) -> None:
        """Forget a change that has not yet turned into a run request."""
        self._timer.stop()

    def show_config(self, trace: Trace) -> None:
        """Show a loaded trace's configuration without asking for a run."""
        self._tuned_from = ""
        self._tuned_text()
        self._quiet = True
        try:
            self.kernel.setCurrentIndex(max(self.kernel.findData(trace.kernel), 0))
            self._build_params(trace.params)
            for name, value in zip("MNK", trace.shape, strict=True):
                self.sizes[name].setValue(int(value))
            self.level.setCurrentIndex(max(self.level.findData(trace.manifest["level"]), 0))
            backend = trace.backend if trace.backend == "sim" or self.cuda_ok else "sim"
            self.backend.setCurrentIndex(self.backend.findData(backend))
        finally:
            self._quiet = False
        self._timer.stop()
        self.validate()

    # -- internals -------------------------------------------------------------------------
    def _build_params(self, values: dict | None = None) -> None:
        """One combo per parameter of the selected kernel, after the sizes.

        A value comes from ``values``, else the same-named parameter shown before (when this
        kernel allows it), else the description's default.
        """
        old = self.params()
        for name in list(self.params_boxes):
            self.form.removeRow(self.params_boxes.pop(name))  # deletes the label as well
        self._param_labels.clear()
        row = len(FIXED_ROWS)
        for param in self.spec.params:
            box = QComboBox()
            for value in param.values:
                box.addItem(str(value), value)  # the text: _param_texts, in the language
            # a long item ("1 (deliberately broken)") must not widen the dock: the list does
            box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            box.setMinimumContentsLength(4)
            wanted = ((values or {}).get(param.name), old.get(param.name))
            value = next((v for v in wanted if v in param.values), param.default)
            box.setCurrentIndex(box.findData(value))
            box.currentIndexChanged.connect(self._changed)
            label = QLabel()
            label.setBuddy(box)
            self.form.insertRow(row, label, box)
            row += 1
            self.params_boxes[param.name] = box
            self._param_labels[param.name] = label
        self._param_texts()
        self.form_scroll.updateGeometry()  # its hint is the form's: another kernel, other rows

    def _param_texts(self) -> None:
        for param in self.spec.params:
            if param.name in self.params_boxes:
                self._param_labels[param.name].setText(tr(param_title(param)))
                box = self.params_boxes[param.name]
                box.setToolTip(tr(param.help))
                for i, value in enumerate(param.values):  # a teaching variant says so
                    text = f"{value} ({tr('deliberately broken')})"
                    box.setItemText(i, text if value in param.broken else str(value))
                box.view().setMinimumWidth(box.view().sizeHintForColumn(0) + 24)

    def _setup_backend(self) -> None:
        model = self.backend.model()
        cuda_row = self.backend.findData("cuda")
        if not self.cuda_ok and isinstance(model, QStandardItemModel):
            model.item(cuda_row).setEnabled(False)
        self.backend.setCurrentIndex(cuda_row if self.cuda_ok else self.backend.findData("sim"))

    def _kernel_changed(self) -> None:
        if not self._quiet:  # show_config builds the rows with the trace's values itself
            self._build_params(self._tuned())
        self._changed()

    def _tuned(self) -> dict | None:
        """The configuration `matviz sweep --tune` kept for this kernel, backend and size, if
        any (a kernel picked starts from it, as `matviz record` does)."""
        job = self.job()
        key = tuned_key(job["backend"])
        try:
            best = tuned.best(job["kernel"], job["M"], job["N"], job["K"], key)
        except MatvizError:  # a broken tuned file must not stop the app: the defaults then
            best = None
        self._tuned_from = key if best else ""
        self._tuned_text()
        return best

    def _tuned_text(self) -> None:
        self.tuned_note.setVisible(bool(self._tuned_from))
        self.tuned_note.setText(
            tr("Parameters: the configuration tuned for {device} at this size "
               "(matviz sweep --tune).").format(device=self._tuned_from)
        )  # fmt: skip

    def _changed(self) -> None:
        if self._quiet:
            return
        if self._tuned_from and self.sender() in self.params_boxes.values():
            self._tuned_from = ""  # the user has moved away from the tuned configuration
            self._tuned_text()
        if self.validate():
            self._timer.start()
        else:
            self._timer.stop()

    # -- language --------------------------------------------------------------------------
    def retranslate(self) -> None:
        self._tuned_text()
        for label, name in zip(self._labels, FIXED_ROWS, strict=True):
            label.setText(tr(name))
        self._level_label.setText(tr("Level"))
        self._backend_label.setText(tr("Backend"))
        self._param_texts()
        for i in range(self.kernel.count()):
            title = registry.get_kernel(self.kernel.itemData(i)).title
            self.kernel.setItemData(i, tr(title), Qt.ToolTipRole)
        for i in range(self.level.count()):
            level = self.level.itemData(i)
            self.level.setItemText(i, f"{level} {tr(LEVEL_NAMES[level])}")
        self.level.setToolTip(tr("How much the kernel records; 3 fills every view"))
        for i, (_, text) in enumerate(BACKENDS):
            self.backend.setItemText(i, tr(text))
        cuda_row = self.backend.findData("cuda")
        tip = tr("Record on this machine's GPU") if self.cuda_ok else self.cuda_reason
        self.backend.setItemData(cuda_row, tip, Qt.ToolTipRole)
        self.backend.setItemData(
            self.backend.findData("sim"),
            tr("A model of the H200: runs anywhere, labelled 'simulated'"),
            Qt.ToolTipRole,
        )
        self.backend.setToolTip("" if self.cuda_ok else tr("CUDA: ") + self.cuda_reason)
        self.run_button.setText(tr("Run"))
        self.run_button.setToolTip(tr("Runs start by themselves 0.4 s after a change"))
        if self.error:
            self.validate()

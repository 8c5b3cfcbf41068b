"""The main window: run controls (left), the five linked views (centre), explanations (right).

Every finished run becomes the session's trace and one more point of the throughput plot.
A run's errors show as a red line in the status bar; a trace that cannot be shown (a bad file,
an unreadable run result) also opens one dialog with the one-line message. Either way the
current trace and settings stay as they were.
"""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QFrame,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from matviz.app.controls import Controls
from matviz.app.explain_panel import ExplainPanel, HelpDialog
from matviz.app.export_render import choose_access
from matviz.app.i18n import Retranslating, tr
from matviz.app.lessons_panel import LessonsPanel
from matviz.app.playback import PlaybackBar
from matviz.app.runner import Runner
from matviz.app.session import Session
from matviz.app.status_line import RecentFiles, StatusLine, config_label, source_label
from matviz.app.views.banks_view import BanksView
from matviz.app.views.coalescing_view import CoalescingView
from matviz.app.views.correctness_view import CorrectnessView
from matviz.app.views.diagnostics_view import DiagnosticsView
from matviz.app.views.fragments_view import FragmentsView
from matviz.app.views.grid_view import GridView
from matviz.app.views.sm_lanes import SmLanesView
from matviz.app.views.source_view import SourceView
from matviz.app.views.throughput_view import ThroughputView
from matviz.app.views.tiles_view import TilesView
from matviz.backends.contract import RunRequest
from matviz.core import lessons
from matviz.core.runs import RunPoint
from matviz.core.trace import Trace
from matviz.core.trace_io import load_trace, save_trace
from matviz.errors import MatvizError
from matviz.paths import TRACE_DIR

# Below either size the views go on tabs (projectors: 1280x720, 1366x768, 1280x800).
COMPACT_WIDTH, COMPACT_HEIGHT = 1500, 880
GRID_MIN_PX = 240  # the block grid's plot, where the window is wide enough
# views that share one place as tabs
MEMORY_TABS = ("banks", "coalescing", "fragments", "source", "errors")
BUNDLED_TRACE = TRACE_DIR / "tiled_t32_p0_1024.mvz"
# What the start-up shows when the bundled recording is missing: the same setup, simulated.
DEFAULT_RUN = {
    "kernel": "tiled", "M": 1024, "N": 1024, "K": 1024, "params": {"tile": 32, "pad": 0},
    "backend": "sim", "level": 3,
}  # fmt: skip


def one_line(message: str) -> str:
    """A message on one line (a file's error may quote text with line breaks)."""
    return " ".join(str(message).split())


def show_file_error(parent: QWidget | None, message: str) -> None:
    """The one dialog for a trace that cannot be shown (tests replace QMessageBox.warning)."""
    QMessageBox.warning(parent, tr("Open trace"), one_line(message))


class MainWindow(Retranslating, QMainWindow):
    def __init__(
        self,
        trace: Trace | None = None,
        *,
        replay: bool = True,
        settings: QSettings | None = None,
        runner: Runner | None = None,
        load_default: bool = True,
    ) -> None:
        super().__init__()
        self.settings = settings or QSettings("matviz", "matviz")
        self.session = Session(self)
        self.runner = runner or Runner(self)
        self.runner.setParent(self)
        self.replay = True  # was the current trace loaded from a file
        self.trace_path: Path | None = None
        self.recent = RecentFiles(self.settings)

        self._build_views()
        self._build_docks()
        self._build_status_bar()
        self._build_menus()
        self.resize(1600, 1000)
        self.resizeDocks([self.controls_dock], [265], Qt.Horizontal)
        QTimer.singleShot(0, self, self._fit_docks)

        self.explain.conceptRequested.connect(self.show_help)
        self.controls.runRequested.connect(self.start_run)
        # another kernel has other parameter rows: the controls' dock follows their height
        self.controls.kernel.currentIndexChanged.connect(
            lambda: QTimer.singleShot(0, self, self._fit_docks)
        )
        self._pending_step: int | None = None  # a lesson step waiting for its simulation
        self.runner.finished.connect(self._run_finished)
        self.runner.failed.connect(lambda msg: self.show_error(tr("Run failed: ") + msg))
        self.runner.unreadable.connect(lambda msg: self.refuse(tr("Run failed: ") + msg))
        self.runner.progress.connect(self.status.set_progress)
        self.runner.busyChanged.connect(self.status.set_busy)
        self.session.traceChanged.connect(self._update_title)
        self.lanes_view.laidOut.connect(self._update_title)  # huge traces: lanes come later
        self.explain.languageChanged.connect(lambda code: self.settings.setValue("language", code))
        self.retranslate()

        if trace is not None and self.show_trace(trace, replay=replay):
            return
        if load_default:
            self.load_default()

    # -- layout ----------------------------------------------------------------------------
    def _build_views(self) -> None:
        s = self.session
        self.grid_view, self.lanes_view = GridView(s), SmLanesView(s)
        self.tiles_view, self.banks_view = TilesView(s), BanksView(s)
        self.coalescing_view, self.source_view = CoalescingView(s), SourceView(s)
        self.throughput_view, self.errors_view = ThroughputView(s), CorrectnessView(s)
        self.fragments_view = FragmentsView(s)
        self.views = {
            "grid": self.grid_view,
            "sm_lanes": self.lanes_view,
            "tiles": self.tiles_view,
            "banks": self.banks_view,
            "coalescing": self.coalescing_view,
            "fragments": self.fragments_view,
            "source": self.source_view,
            "errors": self.errors_view,
            "throughput": self.throughput_view,
        }
        # shared memory, global memory, the code and the correctness of C share one place, as tabs
        self.memory_tabs = QTabWidget(documentMode=True)
        for name in MEMORY_TABS:
            self.memory_tabs.addTab(self.views[name], "")
        placed = {name: view for name, view in self.views.items() if name not in MEMORY_TABS}
        self._placed: dict[str, QWidget] = {**placed, "memory": self.memory_tabs}
        # Wide windows show all five views at once. Minimum widths decide the split: the tiles
        # view needs ~560 px, the throughput plot ~500, the banks plot ~400, so banks and
        # throughput share a column on the right.
        top = QSplitter(Qt.Horizontal)
        left = QSplitter(Qt.Vertical)
        left.addWidget(top)
        right = QSplitter(Qt.Vertical)
        self.splitter = QSplitter(Qt.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        # Projector-sized windows (1280x720) cannot show five views legibly at once: there the
        # views go on three tabs, each at the full size of the centre.
        self.tabs = QTabWidget(documentMode=True)
        pages = [QSplitter(Qt.Horizontal) for _ in range(3)]
        for page in pages:
            self.tabs.addTab(page, "")
        self._places = {  # view -> (splitter, index) in the wide and in the compact layout
            "grid": ((top, 0), (pages[0], 0)),
            "sm_lanes": ((top, 1), (pages[0], 1)),
            "tiles": ((left, 1), (pages[1], 0)),
            "memory": ((right, 0), (pages[2], 0)),
            "throughput": ((right, 1), (pages[2], 1)),
        }
        self._wide_splitters = (top, left, right, self.splitter)  # innermost first
        self._pages = pages
        self._splitters = (*self._wide_splitters, *pages)
        for split in self._splitters:
            split.setChildrenCollapsible(False)
        self.central_stack = QStackedWidget()
        self.central_stack.addWidget(self.splitter)
        self.central_stack.addWidget(self.tabs)
        for tabs in (self.tabs, self.memory_tabs):  # a page shown: its canvases, see below
            tabs.currentChanged.connect(lambda _: QTimer.singleShot(0, self, self._fit_canvases))
        self.compact: bool | None = None
        self._set_compact(False)
        self.playback = PlaybackBar(s)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.central_stack, 1)
        layout.addWidget(self.playback)
        self.setCentralWidget(central)

    def _set_compact(self, compact: bool) -> None:
        """Move the views between the wide splitters and the compact tabs."""
        if compact == self.compact:
            return
        self.compact = compact
        which = 1 if compact else 0
        for name, places in self._places.items():
            split, index = places[which]
            split.insertWidget(index, self._placed[name])
        if compact:
            self._pages[0].setSizes([500, 500])
            self._pages[2].setSizes([580, 420])  # the banks axis needs 32 labels
        else:
            top, left, right, main = self._wide_splitters
            main.setSizes([860, 500])
            top.setSizes([400, 460])
            left.setSizes([420, 490])  # the grid a readable square, the tiles the rest
            right.setSizes([470, 440])
        self.central_stack.setCurrentIndex(which)
        self._sync_hidden()
        QTimer.singleShot(0, self, self._fit_canvases)

    def _fit_canvases(self) -> None:
        """Every plot canvas's scene to the canvas's size. A canvas resized while hidden (moved
        between the arrangements, or on a tab not in front) can miss the resize pyqtgraph lays
        its plots out on: the throughput view kept a 662-px scene in a 446-px canvas at
        1920x1080 (its FLOP-rate plot cut off below the first tick) and a 561-px-wide one in a
        410-px canvas on the compact tab at 1280x720 (both plots cut off at the right)."""
        for canvas in self.central_stack.findChildren(pg.GraphicsView):
            if canvas.isVisible() and canvas.autoPixelRange:
                # what GraphicsView.resizeEvent does (a PlotWidget's own setRange is its plot's)
                pg.GraphicsView.setRange(
                    canvas, QRectF(canvas.rect()), padding=0, disableAutoPixel=False
                )

    def resize(self, *size) -> None:  # type: ignore[override]
        """Qt holds a resize to the minimum of the arrangement the window has now (the wide one
        needs 710-741 px of height, by trace and language): take the arrangement the new size
        gets first, so a 1280x720 screen gets the compact one at its own size."""
        target = QSize(*size) if len(size) == 2 else QSize(size[0])
        self._set_compact(target.width() < COMPACT_WIDTH or target.height() < COMPACT_HEIGHT)
        super().resize(target)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802
        size = event.size()
        self._set_compact(size.width() < COMPACT_WIDTH or size.height() < COMPACT_HEIGHT)
        super().resizeEvent(event)
        QTimer.singleShot(0, self, self.fit_grid)
        QTimer.singleShot(0, self, self._fit_docks)

    def fit_grid(self, passes: int = 3) -> None:
        """Give the block grid the width that makes its plot square (the rest to the lanes)."""
        split = self._places["grid"][1 if self.compact else 0][0]
        box = self.grid_view.viewbox.sceneBoundingRect()
        if not self.grid_view.isVisible() or split.count() < 2 or box.width() < 1:
            return
        grid, lanes = split.sizes()[:2]
        spare = lanes - self.lanes_view.minimumSizeHint().width() - 200
        # square, and no smaller than GRID_MIN_PX where the lanes can spare the width: a
        # narrow column wraps the grid's title into many lines and leaves the plot tiny
        want = max(box.height(), GRID_MIN_PX) - box.width()
        delta = int(min(want, spare))
        if abs(delta) > 2:
            split.setSizes([grid + delta, lanes - delta, *split.sizes()[2:]])
            if passes > 1:  # the titles re-wrap at the new width: look again
                QTimer.singleShot(0, self, lambda: self.fit_grid(passes - 1))

    def _fit_docks(self) -> None:
        """The run controls as tall as they need; the explanation gets the rest."""
        docks = (self.controls_dock, self.explain_dock)
        if (
            any(d.isHidden() or d.isFloating() for d in docks)
            or len({self.dockWidgetArea(d) for d in docks}) > 1
        ):
            return  # the user arranged them: leave them be
        controls_h = self.controls.sizeHint().height() + 30
        room = self.controls_dock.height() + self.explain_dock.height()
        explain_h = max(room - controls_h, self.explain_dock.minimumSizeHint().height())
        self.resizeDocks(
            [self.controls_dock, self.explain_dock], [controls_h, explain_h], Qt.Vertical
        )

    def _build_docks(self) -> None:
        self.controls = Controls()
        self.explain = ExplainPanel(self.session)
        self.controls_dock = QDockWidget(self, objectName="controls")
        self.controls_dock.setWidget(self.controls)  # its form scrolls on a short screen
        self.explain_dock = QDockWidget(self, objectName="explain")
        self.explain_dock.setWidget(self.explain)
        # Barrier waits come from a separate level-3 run: a diagnostics panel of their own,
        # never part of the timeline's views.
        self.diagnostics = DiagnosticsView(self.session)
        self.diagnostics_dock = QDockWidget(self, objectName="diagnostics")
        scroll = QScrollArea(widgetResizable=True, frameShape=QFrame.NoFrame)
        scroll.setWidget(self.diagnostics)  # a short dock (1280x720) scrolls, never squeezes
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.diagnostics_dock.setWidget(scroll)
        # the guided tour: steps from resources/lessons, each opens its trace, block and view
        lesson = lessons.load_lesson(lessons.lesson_files()[0])
        self.lessons = LessonsPanel(self.session, lesson)
        self.lessons.stepRequested.connect(self.show_lesson_step)
        self.lessons_dock = QDockWidget(self, objectName="lessons")
        self.lessons_dock.setWidget(self.lessons)
        for dock in (
            self.controls_dock,
            self.explain_dock,
            self.diagnostics_dock,
            self.lessons_dock,
        ):
            # closable: without it Qt disables the dock's View-menu toggle (which reopens it)
            dock.setFeatures(
                QDockWidget.DockWidgetMovable
                | QDockWidget.DockWidgetFloatable
                | QDockWidget.DockWidgetClosable
            )
            # left, one above the other: the views need the width (right works as well)
            self.addDockWidget(Qt.LeftDockWidgetArea, dock)
        # a tab beside the explanation: it takes no room from the views, the text stays in front
        self.tabifyDockWidget(self.explain_dock, self.diagnostics_dock)
        self.tabifyDockWidget(self.explain_dock, self.lessons_dock)
        self.explain_dock.raise_()

    def _build_status_bar(self) -> None:
        self.status = StatusLine()
        self.status.cancelRequested.connect(self.runner.cancel)
        self.statusBar().addWidget(self.status, 1)
        # the parts tests and the screenshot look at
        self.source_status, self.error_label = self.status.source, self.status.error_label
        self.progress_bar, self.cancel_button = self.status.progress_bar, self.status.cancel_button

    def _build_menus(self) -> None:
        bar = self.menuBar()
        self.file_menu = bar.addMenu("")
        self.open_action = QAction(self, shortcut=QKeySequence.Open)
        self.open_action.triggered.connect(self._open_dialog)
        self.save_action = QAction(self, shortcut=QKeySequence.SaveAs)
        self.save_action.triggered.connect(self._save_dialog)
        self.export_action = QAction(self, shortcut=QKeySequence("Ctrl+E"))
        self.export_action.triggered.connect(self.open_export_dialog)
        self.export_dialog = None
        self.compare_action = QAction(self)
        self.compare_action.triggered.connect(self._compare_dialog)
        self.compare_window: QWidget | None = None
        self.recent_menu = self.file_menu.addMenu("")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        self.quit_action = QAction(self, shortcut=QKeySequence.Quit)
        self.quit_action.triggered.connect(self.close)
        self.file_menu.insertAction(self.recent_menu.menuAction(), self.open_action)
        self.file_menu.addAction(self.save_action)
        self.file_menu.addAction(self.export_action)
        self.file_menu.addAction(self.compare_action)
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.quit_action)

        self.view_menu = bar.addMenu("")
        group = QActionGroup(self)
        self.color_actions = {}
        for mode in ("state", "sm"):
            action = QAction(self, checkable=True)
            action.setChecked(mode == self.session.color_mode)
            action.triggered.connect(lambda _=False, m=mode: self.session.set_color_mode(m))
            group.addAction(action)
            self.view_menu.addAction(action)
            self.color_actions[mode] = action
        self.session.colorModeChanged.connect(lambda m: self.color_actions[m].setChecked(True))
        self.view_menu.addSeparator()
        self.panel_actions = {}  # every view can be hidden for more room
        for name, view in self.views.items():
            action = QAction(self, checkable=True, checked=True)
            action.toggled.connect(lambda on, v=view: self._show_view(v, on))
            self.view_menu.addAction(action)
            self.panel_actions[name] = action
        self._sync_hidden()
        self.view_menu.addSeparator()
        self.ladder_action = QAction(self, checkable=True)  # the throughput plot's preset
        self.ladder_action.toggled.connect(self.show_ladder)
        self.view_menu.addAction(self.ladder_action)
        self.view_menu.addSeparator()
        self.view_menu.addAction(self.controls_dock.toggleViewAction())
        self.view_menu.addAction(self.explain_dock.toggleViewAction())
        self.view_menu.addAction(self.diagnostics_dock.toggleViewAction())
        self.view_menu.addAction(self.lessons_dock.toggleViewAction())

        self.playback_menu = bar.addMenu("")
        self.playback_menu.addActions(self.playback.actions_for_menu())

        self.help_menu = bar.addMenu("")
        self.help_action = QAction(self, shortcut=QKeySequence.HelpContents)
        self.help_action.triggered.connect(lambda: self.show_help(None))
        self.help_menu.addAction(self.help_action)
        self.help_dialog: HelpDialog | None = None

    def _show_view(self, view: QWidget, visible: bool) -> None:
        """Hide or show one view; a splitter or tab whose views are all hidden hides as well."""
        if self.memory_tabs.indexOf(view) < 0:
            view.setVisible(visible)
        self._sync_hidden()

    def _sync_hidden(self) -> None:
        if not hasattr(self, "panel_actions"):
            return
        for name, action in self.panel_actions.items():
            if name in MEMORY_TABS:
                self.memory_tabs.setTabVisible(MEMORY_TABS.index(name), action.isChecked())
            else:
                self.views[name].setVisible(action.isChecked())
        tabs_shown = any(self.panel_actions[name].isChecked() for name in MEMORY_TABS)
        self.memory_tabs.setVisible(tabs_shown)
        for split in self._wide_splitters:  # innermost first
            shown = any(not split.widget(i).isHidden() for i in range(split.count()))
            split.setVisible(shown)
        for i, page in enumerate(self._pages):
            shown = any(not page.widget(j).isHidden() for j in range(page.count()))
            self.tabs.setTabVisible(i, shown)

    def show_help(self, section: int | None = None) -> HelpDialog:
        """Help: the keys and the lesson map, at ``section`` when one is given."""
        if self.help_dialog is None:
            self.help_dialog = HelpDialog(self)
        self.help_dialog.show_section(section)
        return self.help_dialog

    # -- traces ----------------------------------------------------------------------------
    def load_default(self) -> None:
        """The bundled H200 recording if present, else a simulated run of the same setup.

        The other bundled recordings become points of the throughput plot from the start, so
        the first thing on screen already compares tile sizes and padding measured on an H200.
        A damaged recording costs its plot point and one dialog for all of them.
        """
        damaged: list[str] = []
        for path in sorted(BUNDLED_TRACE.parent.glob("*.mvz")):
            if path != BUNDLED_TRACE:
                try:
                    point = RunPoint.from_trace(load_trace(path))
                except MatvizError as exc:
                    damaged.append(self._file_message(path, exc))
                    continue
                self.session.add_run(point)
        if BUNDLED_TRACE.is_file():
            read = self._read(BUNDLED_TRACE, damaged)
            if read is not None and self.show_trace(read[0], path=BUNDLED_TRACE, point=read[1]):
                self._report(damaged)
                return
        self._report(damaged)
        # In-process (fast, cannot crash); with the description's register estimate, so no
        # nvcc runs on the GUI thread.
        from matviz.backends.contract import RunRequest
        from matviz.backends.simulator import simulate

        request = RunRequest(**DEFAULT_RUN)
        registers = request.config().kernel.registers
        self.show_trace(simulate(request, registers=registers), replay=True)

    def _report(self, messages: list[str]) -> None:
        if messages:
            more = f" (+{len(messages) - 1} more)" if len(messages) > 1 else ""
            self.refuse(messages[0] + more)

    @staticmethod
    def _file_message(path: Path, exc: Exception) -> str:
        message = one_line(str(exc))
        return message if str(path) in message else f"cannot show {path}: {message}"

    def _read(self, path: Path, errors: list[str]) -> tuple[Trace, RunPoint] | None:
        """The trace in ``path`` and its throughput point, or None (its message appended)."""
        try:
            trace = load_trace(path)
            # every view and the throughput point read the kernel's description and stats
            return trace, RunPoint.from_trace(trace)
        except MatvizError as exc:
            errors.append(self._file_message(path, exc))
            return None

    def show_trace(
        self,
        trace: Trace,
        replay: bool = True,
        path: Path | None = None,
        *,
        point: RunPoint | None = None,
    ) -> bool:
        """Make ``trace`` current: views, title, one throughput point; for a trace that did not
        come from the controls (a file, the start-up trace) the controls show its settings.

        A trace whose description or stats cannot be read is refused (one dialog), False."""
        if point is None:
            try:
                point = RunPoint.from_trace(trace)
            except MatvizError as exc:
                self.refuse(f"cannot show {path or 'this trace'}: {one_line(str(exc))}")
                return False
        self.replay = replay
        self.trace_path = path
        fraction = self._playhead_fraction()
        self.session.set_trace(trace, source_label(trace, replay))
        if fraction:
            self.session.set_playhead(round(fraction * self.session.duration_ns))
        if point not in self.session.runs:
            self.session.add_run(point)
        if replay:  # a run's settings are already in the controls, or newer edits are
            self.controls.show_config(trace)
        self.clear_error()
        self._update_title()
        return True

    def show_lesson_step(self, index: int) -> bool:
        """Open step ``index`` of the lesson: its recording, block, moment, view and access,
        then its explanation. A step without a recording is simulated in the worker (the GUI
        thread never runs nvcc); the rest follows when that run finishes."""
        step = self.lessons.lesson.steps[index]
        self.runner.cancel()
        self._pending_step = None
        path = step.trace_path()
        if path is None:
            self._pending_step = index
            self.runner.start(RunRequest(**step.simulate.model_dump()))
            return True
        errors: list[str] = []
        read = self._read(path, errors)
        if read is None:
            self.refuse(errors[0])
            return False
        if not self.show_trace(read[0], replay=True, path=path, point=read[1]):
            return False
        self._finish_lesson_step(index)
        return True

    def _finish_lesson_step(self, index: int) -> None:
        step = self.lessons.lesson.steps[index]
        trace = self.session.trace
        gx, gy = trace.grid
        bx, by = (gx // 2, gy // 2) if step.block == "middle" else step.block
        self.session.select_block(trace.block_index(min(bx, gx - 1), min(by, gy - 1)))
        self.session.set_playhead(round(step.at * self.session.duration_ns))
        self.bring_to_front(step.view)
        if step.access:
            choose_access(self.views, step.access)
        self.lessons.show_step(index)

    def bring_to_front(self, name: str) -> None:
        """Show view ``name``: its panel on, its tab (and compact page) in front."""
        self.panel_actions[name].setChecked(True)
        view = self.views[name]
        if name in MEMORY_TABS:
            self.memory_tabs.setCurrentWidget(view)
        slot = "memory" if name in MEMORY_TABS else name
        page = self._places[slot][1][0]
        if self.compact:
            self.tabs.setCurrentIndex(self._pages.index(page))

    def open_file(self, path: str | Path, remember: bool = True) -> bool:
        """Load a .mvz; on failure show one dialog (and the error line), keep the current trace."""
        path = Path(path)
        errors: list[str] = []
        read = self._read(path, errors)
        if read is None:
            self.refuse(errors[0])
            return False
        self.runner.cancel()  # a run finishing later must not replace what was just opened
        self._pending_step = None
        if not self.show_trace(read[0], replay=True, path=path, point=read[1]):
            return False
        if remember:
            self._remember(path)
        return True

    def save_trace(self, path: str | Path) -> bool:
        trace = self.session.trace
        if trace is None:
            return False
        path = Path(path)
        if path.suffix != ".mvz":
            path = path.with_suffix(".mvz")
        try:
            save_trace(trace, path)
        except MatvizError as exc:
            self.show_error(str(exc))
            return False
        self._remember(path)
        self.trace_path = path
        self.status.show_note(tr("Saved {path}").format(path=path))
        return True

    # -- runs ------------------------------------------------------------------------------
    def show_ladder(self, on: bool) -> None:
        """The throughput plot shows the bundled H200 ladder (``matviz bench``) as steps, or
        this session's runs again: the rungs whose inputs have the current trace's type, against
        their cuBLAS (fp32 SGEMM, or cuBLAS on fp16 for the Tensor Core rungs)."""
        if not on:
            self.session.show_ladder(None)
            return
        from matviz.bench.ladder import LADDER_H200, load_rows, row_dtype

        trace = self.session.trace
        dtype = trace.dtype if trace is not None else "float32"
        try:
            rows = load_rows(LADDER_H200)
            same = [row for row in rows if row_dtype(row) == dtype] or rows
            rungs = [RunPoint.from_bench_row(row) for row in same]
        except (MatvizError, KeyError, TypeError, ValueError) as exc:
            reason = one_line(str(exc))
            self.show_error(tr("cannot show the ladder: {reason}").format(reason=reason))
            self.ladder_action.setChecked(False)
            return
        self.session.show_ladder(rungs)
        self.panel_actions["throughput"].setChecked(True)

    def start_run(self, job: dict) -> None:
        self.clear_error()
        self._pending_step = None  # the user's run replaces a lesson's
        self.runner.start(job)

    def _run_finished(self, trace: Trace) -> None:
        step, self._pending_step = self._pending_step, None
        # refused with a dialog when unreadable; a lesson's run shows its settings
        if self.show_trace(trace, replay=step is not None) and step is not None:
            self._finish_lesson_step(step)

    def _playhead_fraction(self) -> float:
        trace = self.session.trace
        if trace is None or not self.session.duration_ns:
            return 0.0
        return self.session.playhead_ns / self.session.duration_ns

    # -- errors ----------------------------------------------------------------------------
    @property
    def error(self) -> str:
        return self.status.error

    def show_error(self, message: str) -> None:
        """A non-modal red line in the status bar; nothing else changes."""
        self.status.show_error(message)

    def refuse(self, message: str) -> None:
        """A trace that cannot be shown: the red line and one dialog; nothing else changes."""
        message = one_line(message)
        self.show_error(message)
        show_file_error(self, message)

    def clear_error(self) -> None:
        self.status.clear_error()

    # -- files -----------------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        """Remembered traces that still exist (missing ones are dropped)."""
        return self.recent.files()

    def _remember(self, path: Path) -> None:
        self.recent.add(path)

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        files = self.recent_files()
        for name in files:
            action = self.recent_menu.addAction(Path(name).name)
            action.setToolTip(name)
            action.triggered.connect(lambda _=False, n=name: self.open_file(n))
        if not files:
            self.recent_menu.addAction(tr("(none)")).setEnabled(False)

    def _open_dialog(self) -> None:
        name, _ = QFileDialog.getOpenFileName(
            self, tr("Open trace"), str(self._dialog_dir()), tr("matviz traces (*.mvz)")
        )
        if name:
            self.open_file(name)

    def _compare_dialog(self) -> None:
        name, _ = QFileDialog.getOpenFileName(
            self, tr("Compare with"), str(self._dialog_dir()), tr("matviz traces (*.mvz)")
        )
        if name:
            self.compare_with(name)

    def compare_with(self, path: str | Path) -> bool:
        """The current trace and the one in ``path`` side by side, in a window of their own;
        a file that cannot be read is one dialog."""
        if self.session.trace is None:
            return False
        errors: list[str] = []
        read = self._read(Path(path), errors)
        if read is None:
            self.refuse(errors[0])
            return False
        from matviz.app.views.compare_view import CompareView
        from matviz.backends.devices import load_device

        if self.compare_window is not None:
            self.compare_window.close()
            self.compare_window.deleteLater()
        bandwidth = float(load_device()["copy_bandwidth_gbs"])
        self.compare_window = CompareView((self.session.trace, read[0]), bandwidth)
        self.compare_window.setWindowTitle(tr("Compare with"))
        self.compare_window.resize(1280, 720)
        self.compare_window.show()
        return True

    def _save_dialog(self) -> None:
        name, _ = QFileDialog.getSaveFileName(
            self, tr("Save trace as"), str(self._dialog_dir()), tr("matviz traces (*.mvz)")
        )
        if name:
            self.save_trace(name)

    def open_export_dialog(self) -> None:
        """File -> Export…: one dialog per window, refreshed from the trace each time."""
        if self.session.trace is None:
            return
        if self.export_dialog is None:
            from matviz.app.export_dialog import ExportDialog  # imageio loads only when asked

            self.export_dialog = ExportDialog(self.session, self)
            self.export_dialog.exported.connect(
                lambda path: self.status.show_note(tr("Exported {path}").format(path=path))
            )
        self.export_dialog.sync_from_session()
        self.export_dialog.show()
        self.export_dialog.raise_()

    def _dialog_dir(self) -> Path:
        recent = self.recent_files()
        return Path(recent[0]).parent if recent else BUNDLED_TRACE.parent

    # -- text ------------------------------------------------------------------------------
    def _update_title(self) -> None:
        trace = self.session.trace
        if trace is None:
            self.setWindowTitle("matviz")
            self.status.set_source(None, "")
            return
        source = source_label(trace, self.replay)
        self.session.source_label = source
        self.setWindowTitle(f"matviz – {config_label(trace)} – {source}")
        self.status.set_source(trace, source, str(self.trace_path or ""))
        self.status.set_detail(
            len(trace.blocks), self.grid_view.sample_step, self.lanes_view.per_cell
        )

    def retranslate(self) -> None:
        self.file_menu.setTitle(tr("&File"))
        self.open_action.setText(tr("&Open trace…"))
        self.save_action.setText(tr("&Save trace as…"))
        self.export_action.setText(tr("&Export…"))
        self.compare_action.setText(tr("&Compare with…"))
        self.recent_menu.setTitle(tr("&Recent files"))
        self.quit_action.setText(tr("&Quit"))
        self.view_menu.setTitle(tr("&View"))
        self.color_actions["state"].setText(tr("Colour blocks by &state"))
        self.color_actions["sm"].setText(tr("Colour blocks by S&M"))
        self.ladder_action.setText(tr("Throughput: the &ladder to cuBLAS (H200 recording)"))
        self.playback_menu.setTitle(tr("&Playback"))
        names = {
            "grid": tr("Block &grid"),
            "sm_lanes": tr("SM &lanes"),
            "tiles": tr("&Tiles"),
            "banks": tr("&Banks"),
            "coalescing": tr("&Coalescing"),
            "fragments": tr("&Fragments"),
            "source": tr("Kernel &source"),
            "errors": tr("&Errors"),
            "throughput": tr("T&hroughput"),
        }
        for name, action in self.panel_actions.items():
            action.setText(names[name])
        for i, name in enumerate(MEMORY_TABS):
            self.memory_tabs.setTabText(i, names[name].replace("&", ""))
        for i, text in enumerate(
            (tr("Block grid · SM lanes"), tr("Tiles"), tr("Banks · Throughput"))
        ):
            self.tabs.setTabText(i, text)
        self.help_menu.setTitle(tr("&Help"))
        self.help_action.setText(tr("&Keys and lesson map"))
        QTimer.singleShot(0, self, self.fit_grid)  # titles re-wrap in another language
        self.controls_dock.setWindowTitle(tr("Run"))
        # short: the three share one tab bar as wide as the column (1280x720: 270 px)
        self.explain_dock.setWindowTitle(tr("Explain"))
        self.diagnostics_dock.setWindowTitle(tr("Waits (level-3)"))
        self.lessons_dock.setWindowTitle(tr("Lessons"))
        self._update_title()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        if self.compare_window is not None:
            self.compare_window.close()
            self.compare_window.deleteLater()
            self.compare_window = None
        self.controls.cancel_pending()
        self.playback.pause()
        if self.help_dialog is not None:
            self.help_dialog.close()
        self.runner.shutdown()
        super().closeEvent(event)

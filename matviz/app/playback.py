"""The playback bar: play/pause, speed, a scrub slider, phase-boundary steps and the time.

At 1x the whole kernel plays in ``PLAY_SECONDS`` of wall time, whatever its length; the
animation is a 60 fps QTimer that advances the playhead by the wall time that really passed,
so a slow frame does not slow the kernel down. The bar's QActions (Space, arrows,
Shift+arrows) belong in the main window's menu so the shortcuts work window-wide.
"""

from __future__ import annotations

from PySide6.QtCore import QElapsedTimer, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSlider, QToolButton, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session

PLAY_SECONDS = 10.0  # 1x plays the whole kernel in this many seconds
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
FRAME_MS = 16  # ~60 fps
SLIDER_STEPS = 100_000


def format_time(ns: float, duration_ns: float) -> str:
    """``ns`` in the unit that suits the whole kernel: µs below 10 ms, else ms."""
    if duration_ns < 10_000_000:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns / 1e6:.3f} ms"


class PlaybackBar(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._t = 0.0  # playhead as a float, so slow speeds still advance
        self._clock = QElapsedTimer()
        self._timer = QTimer(self, interval=FRAME_MS)
        self._timer.setTimerType(Qt.PreciseTimer)
        self._timer.timeout.connect(self._tick)
        self.frames = 0  # animation ticks since the last play(); the benchmark reads it

        self.play_button = QToolButton()
        self.play_button.setMinimumWidth(64)
        self.play_button.clicked.connect(self.toggle_play)
        self.prev_global = QToolButton(text="|◀")
        self.prev_block = QToolButton(text="◀")
        self.next_block = QToolButton(text="▶")
        self.next_global = QToolButton(text="▶|")
        self.prev_global.clicked.connect(lambda: self.step(-1, whole_grid=True))
        self.prev_block.clicked.connect(lambda: self.step(-1))
        self.next_block.clicked.connect(lambda: self.step(1))
        self.next_global.clicked.connect(lambda: self.step(1, whole_grid=True))
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.valueChanged.connect(self._slider_moved)
        self.time_label = QLabel()
        self.time_label.setMinimumWidth(190)
        self.time_label.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        self.speed = QComboBox()
        for speed in SPEEDS:
            self.speed.addItem(f"{speed:g}x", speed)
        self.speed.setCurrentIndex(SPEEDS.index(1.0))

        self._buttons = (
            self.play_button,
            self.prev_global,
            self.prev_block,
            self.next_block,
            self.next_global,
        )
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        for widget in self._buttons:
            layout.addWidget(widget)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.time_label)
        layout.addWidget(self.speed)

        self.play_action = QAction(self, shortcut=QKeySequence(Qt.Key_Space))
        self.play_action.triggered.connect(self.toggle_play)
        self.step_actions = []
        for key, direction, whole in (
            (Qt.Key_Left, -1, False),
            (Qt.Key_Right, 1, False),
            (Qt.SHIFT | Qt.Key_Left, -1, True),
            (Qt.SHIFT | Qt.Key_Right, 1, True),
        ):
            action = QAction(self, shortcut=QKeySequence(key))
            action.triggered.connect(lambda _=False, d=direction, w=whole: self.step(d, w))
            self.step_actions.append(action)

        session.traceChanged.connect(self._trace_changed)
        session.playheadChanged.connect(self._show_playhead)
        self.retranslate()
        self._trace_changed()

    # -- public ----------------------------------------------------------------------------
    @property
    def playing(self) -> bool:
        return self._timer.isActive()

    @property
    def rate(self) -> float:
        """Kernel nanoseconds per wall-clock second at the chosen speed."""
        trace = self.session.trace
        duration = trace.duration_ns if trace is not None else 0
        return duration / PLAY_SECONDS * float(self.speed.currentData())

    def actions_for_menu(self) -> list[QAction]:
        return [self.play_action, *self.step_actions]

    def toggle_play(self) -> None:
        self.pause() if self.playing else self.play()

    def play(self) -> None:
        trace = self.session.trace
        if trace is None or trace.duration_ns == 0:
            return
        if self.session.playhead_ns >= trace.duration_ns:
            self.session.set_playhead(0)
        self._t = float(self.session.playhead_ns)
        self.frames = 0
        self._clock.start()
        self._timer.start()
        self.retranslate()

    def pause(self) -> None:
        self._timer.stop()
        self.retranslate()

    def step(self, direction: int, whole_grid: bool = False) -> None:
        """Jump to the previous/next phase boundary of the selected block (or of any block)."""
        trace = self.session.trace
        if trace is None:
            return
        self.pause()
        block = None if whole_grid else self.session.selected_block
        t = self.session.timeline.step(self.session.playhead_ns, direction, block=block)
        self.session.set_playhead(int(t))

    # -- internals -------------------------------------------------------------------------
    def _tick(self) -> None:
        trace = self.session.trace
        if trace is None:
            self.pause()
            return
        self._t += self._clock.restart() / 1000.0 * self.rate
        self.frames += 1
        if self._t >= trace.duration_ns:
            self._t = trace.duration_ns
            self.pause()
        self.session.set_playhead(int(self._t))

    def _trace_changed(self) -> None:
        trace = self.session.trace
        enabled = trace is not None and trace.duration_ns > 0
        for widget in (*self._buttons, self.slider, self.speed):
            widget.setEnabled(enabled)
        self._t = float(self.session.playhead_ns)
        self._show_playhead(self.session.playhead_ns)

    def _show_playhead(self, ns: int) -> None:
        trace = self.session.trace
        duration = trace.duration_ns if trace is not None else 0
        if int(self._t) != ns:  # moved from outside (slider, step, a click): play on from there
            self._t = float(ns)
        self.slider.blockSignals(True)
        self.slider.setValue(round(ns / duration * SLIDER_STEPS) if duration else 0)
        self.slider.blockSignals(False)
        self.time_label.setText(
            f"t = {format_time(ns, duration)} / {format_time(duration, duration)}"
        )

    def _slider_moved(self, value: int) -> None:
        trace = self.session.trace
        if trace is not None:
            self.session.set_playhead(round(value / SLIDER_STEPS * trace.duration_ns))

    # -- language --------------------------------------------------------------------------
    def retranslate(self) -> None:
        self.play_button.setText(tr("❚❚ Pause") if self.playing else tr("▶ Play"))
        self.play_button.setToolTip(tr("Play or pause the kernel (Space)"))
        self.prev_global.setToolTip(tr("Previous phase change of any block (Shift+Left)"))
        self.prev_block.setToolTip(tr("Previous phase change of the selected block (Left)"))
        self.next_block.setToolTip(tr("Next phase change of the selected block (Right)"))
        self.next_global.setToolTip(tr("Next phase change of any block (Shift+Right)"))
        self.slider.setToolTip(tr("Drag to move through the kernel's run time"))
        self.speed.setToolTip(
            tr("Playback speed: 1x plays the whole kernel in {s:g} s").format(s=PLAY_SECONDS)
        )
        self.play_action.setText(tr("Play / pause"))
        texts = (
            "Previous phase change (selected block)",
            "Next phase change (selected block)",
            "Previous phase change (any block)",
            "Next phase change (any block)",
        )
        for action, text in zip(self.step_actions, texts, strict=True):
            action.setText(tr(text))


"""The playback bar: play/pause, start/end, phase-boundary steps, speed, a scrub slider, time.

At 1x the whole kernel plays in ``PLAY_SECONDS`` of wall time, whatever its length; the
animation is a 60 fps QTimer that advances the playhead by the wall time that really passed,
so a slow frame does not slow the kernel down. The bar's QActions (Space, arrows,
Shift+arrows, Home, End) belong in the main window's menu so the shortcuts work window-wide.

While stepping from phase boundary to phase boundary the time reads in ns (phases last a few
hundred ns, which µs with one decimal would hide); playing or scrubbing goes back to µs/ms.
"""

from __future__ import annotations

from PySide6.QtCore import QElapsedTimer, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSlider, QToolButton, QWidget

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views.live_label import live

PLAY_SECONDS = 10.0  # 1x plays the whole kernel in this many seconds
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
FRAME_MS = 16  # ~60 fps
SLIDER_STEPS = 100_000


def format_time(ns: float, duration_ns: float) -> str:
    """``ns`` in the unit that suits the whole kernel: µs below 10 ms, else ms."""
    if duration_ns < 10_000_000:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns / 1e6:.3f} ms"


def format_ns(ns: int) -> str:
    """Whole nanoseconds with thin-space thousands groups: ``1 234 567 ns``."""
    return f"{int(ns):,} ns".replace(",", "\u2009")


# (attribute, text, direction, whole grid): the step buttons, left to right
STEP_BUTTONS = (
    ("prev_global", "◀◀", -1, True),
    ("prev_block", "◀", -1, False),
    ("next_block", "▶", 1, False),
    ("next_global", "▶▶", 1, True),
)


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
        # (from, to) of the last phase step while the playhead stays there: the time reads in ns
        self._step: tuple[int, int] | None = None
        self.start_button = QToolButton(text="|◀")
        self.start_button.clicked.connect(self.go_start)
        self.end_button = QToolButton(text="▶|")
        self.end_button.clicked.connect(self.go_end)
        for name, text, direction, whole in STEP_BUTTONS:
            button = QToolButton(text=text)
            button.clicked.connect(lambda _=False, d=direction, w=whole: self.step(d, w))
            setattr(self, name, button)
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.valueChanged.connect(self._slider_moved)
        self.time_label = QLabel()
        self.time_label.setMinimumWidth(
            self.time_label.fontMetrics().horizontalAdvance(
                "t = 1\u2009234\u2009567 ns (+12\u2009345 ns) / 1234.5 µs"
            )
        )
        self.time_label.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        self.speed = QComboBox()
        for speed in SPEEDS:
            self.speed.addItem(f"{speed:g}x", speed)
        self.speed.setCurrentIndex(SPEEDS.index(1.0))

        self._buttons = (
            self.play_button,
            self.start_button,
            self.prev_global,
            self.prev_block,
            self.next_block,
            self.next_global,
            self.end_button,
        )
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        for widget in self._buttons:
            layout.addWidget(widget)
        layout.addWidget(self.slider, 1)
        layout.addWidget(live(self.time_label))
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
        self.start_action = QAction(self, shortcut=QKeySequence(Qt.Key_Home))
        self.start_action.triggered.connect(self.go_start)
        self.end_action = QAction(self, shortcut=QKeySequence(Qt.Key_End))
        self.end_action.triggered.connect(self.go_end)

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
        duration = self.session.duration_ns if self.session.trace is not None else 0
        return duration / PLAY_SECONDS * float(self.speed.currentData())

    def actions_for_menu(self) -> list[QAction]:
        return [self.play_action, self.start_action, self.end_action, *self.step_actions]

    def toggle_play(self) -> None:
        self.pause() if self.playing else self.play()

    def play(self) -> None:
        trace = self.session.trace
        if trace is None or self.session.duration_ns == 0:
            return
        if self.session.playhead_ns >= self.session.duration_ns:
            self.session.set_playhead(0)
        self._t = float(self.session.playhead_ns)
        self.frames = 0
        self._step = None
        self._clock.start()
        self._timer.start()
        self.session.set_playing(True)
        self.retranslate()

    def pause(self) -> None:
        self._timer.stop()
        self.session.set_playing(False)
        self.retranslate()

    def step(self, direction: int, whole_grid: bool = False) -> None:
        """Jump to the previous/next phase boundary of the selected block (or of any block)."""
        trace = self.session.trace
        if trace is None:
            return
        self.pause()
        block = None if whole_grid else self.session.selected_block
        before = self.session.playhead_ns
        t = int(self.session.timeline.step(before, direction, block=block))
        self._step = (before, t)
        self.session.set_playhead(t)
        self._show_playhead(self.session.playhead_ns)  # ns even when the step did not move

    def go_start(self) -> None:
        """The playhead to the kernel's start (Home)."""
        self._jump(0)

    def go_end(self) -> None:
        """The playhead to the kernel's end, every block done (End)."""
        trace = self.session.trace
        if trace is not None:
            self._jump(self.session.duration_ns)

    @property
    def stepping(self) -> bool:
        """Whether the time reads in ns because the last move was a phase step."""
        return self._step is not None

    # -- internals -------------------------------------------------------------------------
    def _jump(self, ns: int) -> None:
        if self.session.trace is None:
            return
        self.pause()
        self._step = None
        self.session.set_playhead(int(ns))
        self._show_playhead(self.session.playhead_ns)

    def _tick(self) -> None:
        trace = self.session.trace
        if trace is None:
            self.pause()
            return
        self._t += self._clock.restart() / 1000.0 * self.rate
        self.frames += 1
        if self._t >= self.session.duration_ns:
            self._t = float(self.session.duration_ns)
            self.pause()
        self.session.set_playhead(int(self._t))

    def _trace_changed(self) -> None:
        trace = self.session.trace
        enabled = trace is not None and self.session.duration_ns > 0
        for widget in (*self._buttons, self.slider, self.speed):
            widget.setEnabled(enabled)
        self._t = float(self.session.playhead_ns)
        self._show_playhead(self.session.playhead_ns)

    def _show_playhead(self, ns: int) -> None:  # ns is 64-bit: the slider holds a fraction
        duration = self.session.duration_ns if self.session.trace is not None else 0
        if int(self._t) != ns:  # moved from outside (slider, step, a click): play on from there
            self._t = float(ns)
        self.slider.blockSignals(True)
        self.slider.setValue(round(ns / duration * SLIDER_STEPS) if duration else 0)
        self.slider.blockSignals(False)
        if self._step is not None and self._step[1] != ns:
            self._step = None  # moved by something else (a drag, a click, a new trace)
        if self._step is not None:
            now = format_ns(ns)
            delta = ns - self._step[0]
            if delta:
                now += f" ({'+' if delta > 0 else '−'}{format_ns(abs(delta))})"
        else:
            now = format_time(ns, duration)
        self.time_label.setText(f"t = {now} / {format_time(duration, duration)}")

    def _slider_moved(self, value: int) -> None:
        trace = self.session.trace
        if trace is not None:
            self._step = None
            self.session.set_playhead(round(value / SLIDER_STEPS * self.session.duration_ns))

    # -- language --------------------------------------------------------------------------
    def retranslate(self) -> None:
        self.play_button.setText(tr("❚❚ Pause") if self.playing else tr("▶ Play"))
        self.play_button.setToolTip(tr("Play or pause the kernel (Space)"))
        self.start_button.setToolTip(tr("Go to the start of the kernel (Home)"))
        self.end_button.setToolTip(tr("Go to the end of the kernel, every block done (End)"))
        self.prev_global.setToolTip(
            tr("Step back to the previous phase boundary of any block (Shift+←); time in ns")
        )
        self.prev_block.setToolTip(
            tr("Step back to the selected block's previous phase boundary (←); time in ns")
        )
        self.next_block.setToolTip(
            tr("Step to the selected block's next phase boundary (→); time in ns")
        )
        self.next_global.setToolTip(
            tr("Step to the next phase boundary of any block (Shift+→); time in ns")
        )
        self.slider.setToolTip(tr("Drag to move through the kernel's run time"))
        self.speed.setToolTip(
            tr("Playback speed: 1x plays the whole kernel in {s:g} s").format(s=PLAY_SECONDS)
        )
        self.play_action.setText(tr("Play / pause"))
        self.start_action.setText(tr("Go to start"))
        self.end_action.setText(tr("Go to end"))
        texts = (
            tr("Previous phase boundary (selected block)"),
            tr("Next phase boundary (selected block)"),
            tr("Previous phase boundary (any block)"),
            tr("Next phase boundary (any block)"),
        )
        for action, text in zip(self.step_actions, texts, strict=True):
            action.setText(text)

"""The one model every view reads: the trace, the playhead, the selection, the run history.

Views connect to these signals and never talk to each other; user intent comes back through
the setters.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from matviz.core.runs import RunPoint
from matviz.core.timeline import Timeline
from matviz.core.trace import Trace

COLOR_MODES = ("state", "sm")


class Session(QObject):
    traceChanged = Signal()  # a new trace (and source label) is in place
    # ns from kernel start: a Python int, since Qt's int is 32-bit and traces pass 2**31 ns
    playheadChanged = Signal(object)
    selectionChanged = Signal(int)  # linear block index
    runsChanged = Signal()  # the run history (throughput points) changed
    colorModeChanged = Signal(str)
    probeRowChanged = Signal(int)  # which probe record the banks view shows
    playingChanged = Signal(bool)  # the playback animation started or stopped

    def __init__(self, parent: QObject | None = None, *, interactive: bool = True) -> None:
        super().__init__(parent)
        self.interactive = interactive  # False for video frames: no "hover" or "click" hints
        self.trace: Trace | None = None
        self.timeline: Timeline | None = None  # derived once per trace, shared by every view
        self.source_label = ""
        self.duration_ns = 0  # the trace's, cached: Trace.duration_ns scans every block
        self.playhead_ns = 0
        self.playing = False  # texts may update less often than every animation frame
        self.selected_block = 0
        self.color_mode = "state"
        self.probe_row = 0
        self.runs: list[RunPoint] = []
        # a preset the throughput plot shows instead of the runs: the ladder to cuBLAS
        self.ladder: list[RunPoint] | None = None

    def set_trace(self, trace: Trace, source_label: str = "") -> None:
        self.trace = trace
        self.timeline = Timeline(trace)
        self.duration_ns = int(trace.duration_ns)
        self.source_label = source_label or trace.provenance
        self.playhead_ns = 0
        self.selected_block = min(self.selected_block, len(trace.blocks) - 1)
        self.probe_row = 0
        self.traceChanged.emit()

    def set_playhead(self, ns: int) -> None:
        if self.trace is None:
            return
        ns = int(min(max(int(ns), 0), self.duration_ns))
        if ns != self.playhead_ns:
            self.playhead_ns = ns
            self.playheadChanged.emit(ns)

    def set_playing(self, playing: bool) -> None:
        if playing != self.playing:
            self.playing = bool(playing)
            self.playingChanged.emit(self.playing)

    def select_block(self, index: int) -> None:
        if self.trace is None or not 0 <= index < len(self.trace.blocks):
            return
        if index != self.selected_block:
            self.selected_block = int(index)
            self.selectionChanged.emit(self.selected_block)

    def set_color_mode(self, mode: str) -> None:
        if mode not in COLOR_MODES:
            raise ValueError(f"unknown colour mode {mode!r}")
        if mode != self.color_mode:
            self.color_mode = mode
            self.colorModeChanged.emit(mode)

    def set_probe_row(self, row: int) -> None:
        if self.trace is None or not 0 <= row < max(len(self.trace.probe), 1):
            return
        if row != self.probe_row:
            self.probe_row = int(row)
            self.probeRowChanged.emit(self.probe_row)

    def add_run(self, point: RunPoint) -> None:
        self.runs.append(point)
        self.runsChanged.emit()

    def show_ladder(self, rungs: list[RunPoint] | None) -> None:
        """The throughput plot shows ``rungs`` (a measured ladder), or this session's runs."""
        self.ladder = list(rungs) if rungs is not None else None
        self.runsChanged.emit()

    @property
    def plotted_runs(self) -> list[RunPoint]:
        """What the throughput plot shows: the ladder preset, or the runs of this session."""
        return self.ladder if self.ladder is not None else self.runs

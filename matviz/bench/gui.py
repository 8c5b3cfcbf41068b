"""GUI benchmark (not a test): playback frame rate with every view visible, and run latency.

``python -m matviz.bench.gui [--quick]`` prints

* for simulated 4096^3 traces, T=32 (16,384 blocks) and T=16 (65,536 blocks), level 3, in the
  1600x1000 main window (offscreen): the cost of one playback frame (move the playhead, let
  every view update and paint) as frames per second, and the frame rate the 60 fps animation
  timer really reaches while playing;
* the latency from a pad change in the controls to the new point in the throughput plot, at
  1024^3 with the simulator backend (it includes the controls' 400 ms debounce; the number
  without it is printed too).

``python -m matviz.bench.gui --trace F.mvz ... [--speed 4]`` measures the playback of those
traces instead (at 4x a k-tile of most bundled recordings passes every frame).

``python -m matviz.bench.gui --open FILE.mvz`` prints instead the seconds from starting
``matviz FILE.mvz`` (a new process) to its window shown, and to its SM lanes filled in (huge
traces lay them out off the GUI thread), e.g. for a 46340^3 T=32 trace (2.1 million blocks).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NoReturn

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QElapsedTimer, QEventLoop, QSettings, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from matviz.app.controls import DEBOUNCE_MS  # noqa: E402
from matviz.app.main_window import MainWindow  # noqa: E402
from matviz.app.playback import PLAY_SECONDS, SPEEDS  # noqa: E402
from matviz.backends.contract import RunRequest  # noqa: E402
from matviz.backends.simulator import simulate  # noqa: E402
from matviz.core.trace_io import load_trace  # noqa: E402
from matviz.errors import MatvizError  # noqa: E402


def _run_loop(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def _wait_until(app: QApplication, done, timeout_s: float = 120.0) -> bool:
    end = time.perf_counter() + timeout_s
    while not done():
        if time.perf_counter() > end:
            return False
        app.processEvents(QEventLoop.AllEvents | QEventLoop.WaitForMoreEvents, 20)
    return True


def _window(trace, settings: QSettings) -> MainWindow:
    window = MainWindow(trace, settings=settings)
    window.resize(1600, 1000)
    window.show()
    QApplication.processEvents()
    return window


def playback_fps(
    app: QApplication, trace, settings: QSettings, frames: int, play_s: float, speed: float = 1.0
):
    """(frames/s when every frame is drawn, frames/s the animation timer reached at ``speed``;
    it plays for ``play_s`` seconds, or until the playhead reaches the end)."""
    window = _window(trace, settings)
    session = window.session
    gx, gy = trace.grid
    session.select_block(trace.block_index(gx // 2, gy // 2))
    duration = trace.duration_ns
    for i in range(5):  # warm caches
        session.set_playhead(duration * i // 10)
        app.processEvents()
    t0 = time.perf_counter()
    for i in range(frames):
        session.set_playhead(duration * (i + 1) // (frames + 1))
        app.processEvents()  # every view updates and paints
    drawn = frames / (time.perf_counter() - t0)

    session.set_playhead(0)
    window.playback.speed.setCurrentIndex(window.playback.speed.findData(speed))
    clock = QElapsedTimer()
    clock.start()
    window.playback.play()
    _run_loop(int(min(play_s, 0.9 * PLAY_SECONDS / speed) * 1000))
    ticks = window.playback.frames
    window.playback.pause()
    reached = ticks / (clock.elapsed() / 1000)
    window.close()
    window.deleteLater()
    app.processEvents()
    return drawn, reached


def _tiled(size: int, tile: int) -> RunRequest:
    """The seed's tiled kernel at ``size``^3, PAD 0, level 3 (what the GUI benchmarks show)."""
    params = {"tile": tile, "pad": 0}
    return RunRequest("tiled", size, size, size, params=params, level=3)


def pad_latency(app: QApplication, settings: QSettings, repeats: int) -> list[float]:
    """Seconds from a pad change to the new throughput point, 1024^3, simulator backend."""
    window = _window(simulate(_tiled(1024, 32)), settings)
    pad = window.controls.params_boxes["pad"]
    _run_loop(1500)  # let the spare worker start, as it would have in a session
    times = []
    for i in range(repeats):
        value = (1, 2, 4, 0)[i % 4]
        runs = len(window.session.runs)
        t0 = time.perf_counter()
        pad.setCurrentIndex(pad.findData(value))
        ok = _wait_until(
            app,
            lambda n=runs, v=value: (
                window.session.trace.params.get("pad") == v and not window.runner.busy
            ),
        )
        if not ok:
            raise RuntimeError(f"run did not finish: {window.error}")
        app.processEvents()  # the plot repaints
        times.append(time.perf_counter() - t0)
        _run_loop(300)
    window.close()
    window.deleteLater()
    app.processEvents()
    return times


# Run in the child: the real start-up (matviz.app.main.run_gui), timed from the outside.
_OPEN_CHILD = """
import sys, time
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from matviz.app.main_window import MainWindow
app = QApplication([sys.argv[0]])
def shown():
    window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))
    window.repaint()
    print("shown", time.time(), time.process_time(), flush=True)
    def filled():
        window.repaint()
        print("lanes", time.time(), window.status.detail.text(), flush=True)
        app.quit()
    if window.lanes_view._cells is None:
        window.lanes_view.laidOut.connect(filled)
    else:
        filled()
QTimer.singleShot(0, shown)  # runs once the event loop starts: the window is up
from matviz.app.main import run_gui
run_gui(sys.argv[1:])
"""


def time_to_window(path: str) -> str:
    """A new process opens ``path``: seconds to its window shown and to its lanes filled."""
    with tempfile.TemporaryDirectory() as home:  # no recent-files list of the user's touched
        env = dict(os.environ, XDG_CONFIG_HOME=home, HOME=home)
        t0 = time.time()
        out = subprocess.run(
            [sys.executable, "-c", _OPEN_CHILD, path], capture_output=True, text=True, env=env
        )
    lines = {line.split()[0]: line.split(maxsplit=2)[1:] for line in out.stdout.splitlines()}
    if "shown" not in lines:
        raise RuntimeError(f"no window: {out.stderr.strip().splitlines()[-1:]}")
    shown, cpu = float(lines["shown"][0]), float(lines["shown"][1])
    text = f"window shown {shown - t0:.2f} s after the process started ({cpu:.2f} s of CPU)"
    if "lanes" in lines:
        text += f", SM lanes filled at {float(lines['lanes'][0]) - t0:.2f} s"
        if len(lines["lanes"]) > 1:
            text += "; status line: " + re.sub(r"<[^>]+>", "", lines["lanes"][1])
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, as every matviz command
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m matviz.bench.gui", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer frames and repeats")
    parser.add_argument("--open", metavar="MVZ", help="time start-up on this trace instead")
    parser.add_argument("--trace", metavar="MVZ", nargs="+", help="play these traces instead")
    parser.add_argument("--speed", type=float, default=1.0, choices=SPEEDS,
                        help="the playback speed of --trace (default 1)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.open:
        print(f"open {args.open}: {time_to_window(args.open)}")
        return 0
    frames, play_s, repeats = (30, 2.0, 3) if args.quick else (120, 5.0, 6)

    app = QApplication.instance() or QApplication([sys.argv[0]])
    settings = QSettings(os.devnull, QSettings.IniFormat)
    print(f"matviz GUI benchmark ({os.environ['QT_QPA_PLATFORM']}, 1600x1000, every view shown)")
    if args.trace:
        try:
            traces = [load_trace(path) for path in args.trace]
        except MatvizError as exc:
            print(f"{parser.prog}: error: {exc}", file=sys.stderr)
            return 2
        for path, trace in zip(args.trace, traces, strict=True):
            drawn, reached = playback_fps(app, trace, settings, frames, play_s, args.speed)
            print(f"playback  {path} ({len(trace.blocks)} blocks): {drawn:6.1f} frames/s drawn "
                  f"one by one, {reached:5.1f} fps reached by the 60 fps timer at "
                  f"{args.speed:g}x")  # fmt: skip
        return 0
    for tile in (32, 16):
        t0 = time.perf_counter()
        trace = simulate(_tiled(4096, tile))
        sim_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        drawn, reached = playback_fps(app, trace, settings, frames, play_s)
        print(
            f"playback  4096^3 T={tile:<2} {len(trace.blocks):>6} blocks: "
            f"{drawn:6.1f} frames/s drawn one by one, {reached:5.1f} fps reached by the "
            f"60 fps timer (simulate {sim_s:.2f} s, window + measure "
            f"{time.perf_counter() - t0:.1f} s)"
        )
        del trace
    times = pad_latency(app, settings, repeats)
    med = statistics.median(times)
    print(
        f"pad change -> new plot point, 1024^3 sim: median {med * 1000:.0f} ms "
        f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}; {DEBOUNCE_MS} ms of it is "
        f"the debounce, so {max(med * 1000 - DEBOUNCE_MS, 0):.0f} ms worker + load + redraw)"
    )
    return 0


if __name__ == "__main__":
    # Ctrl-C ends it at once (exit 130): it writes nothing, and Python would hold the
    # KeyboardInterrupt until Qt's event loop had played to the end
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main())

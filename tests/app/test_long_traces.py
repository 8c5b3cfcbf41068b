"""Traces longer than 2**31 ns (2.1 s): the playhead is 64-bit from the session to every view."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from PySide6.QtCore import QSettings

from matviz.app.main_window import MainWindow
from matviz.app.playback import SLIDER_STEPS
from matviz.app.runner import Runner
from matviz.backends.contract import RunRequest, run
from matviz.core.timeline import BlockState, Timeline
from matviz.core.trace import Trace

INT32_MAX = 2**31 - 1


def stretched(trace: Trace, factor: int) -> Trace:
    """The same run with every time multiplied by ``factor`` (a kernel ``factor`` x slower)."""
    blocks = trace.blocks.copy()
    blocks["start"] *= factor
    blocks["end"] *= factor
    return dataclasses.replace(
        trace,
        manifest=copy.deepcopy(trace.manifest),
        blocks=blocks,
        marks=trace.marks * factor,
        barrier_wait=trace.barrier_wait * factor,
    )


@pytest.fixture(scope="module")
def long_trace() -> Trace:
    trace = run(RunRequest("tiled", 256, 256, 256, params={"tile": 16, "pad": 0}, level=2))
    factor = -(-4 * 2**31 // trace.duration_ns)  # about 8.6 s of kernel time
    out = stretched(trace, factor)
    assert out.duration_ns > 4 * INT32_MAX
    return out


@pytest.fixture
def window(qtbot, tmp_path, long_trace):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    window = MainWindow(long_trace, settings=settings, runner=Runner())
    qtbot.addWidget(window)
    window.resize(1600, 1000)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_the_playhead_passes_2_31_ns_and_every_view_follows(window, long_trace):
    session = window.session
    timeline = Timeline(long_trace)
    seen = []
    session.playheadChanged.connect(seen.append)
    late = (long_trace.duration_ns * 3) // 4  # well past 2**31 ns
    assert late > INT32_MAX
    session.set_playhead(late)
    assert seen == [late] and session.playhead_ns == late
    states = timeline.states(late)
    assert (states != BlockState.WAITING).any()  # not every block "waiting" as at t = 0
    assert np.array_equal(window.grid_view.image.image.ravel(), states)
    assert window.lanes_view.playhead.value() == pytest.approx(late / 1000)
    slider = window.playback.slider
    assert slider.value() == round(late / long_trace.duration_ns * SLIDER_STEPS)
    assert f"{late / 1e6:.3f} ms" in window.playback.time_label.text()


def test_the_slider_and_end_key_reach_past_2_31_ns(window, long_trace):
    session, bar = window.session, window.playback
    bar.slider.setValue(bar.slider.maximum() * 9 // 10)
    expected = round(0.9 * long_trace.duration_ns)
    assert abs(session.playhead_ns - expected) <= long_trace.duration_ns / SLIDER_STEPS
    bar.go_end()
    assert session.playhead_ns == long_trace.duration_ns > INT32_MAX
    done = window.grid_view.image.image.ravel()
    assert (done == BlockState.DONE).all()


def test_playback_advances_past_2_31_ns(qtbot, window, long_trace):
    session, bar = window.session, window.playback
    start = INT32_MAX - 1000
    session.set_playhead(start)
    bar.play()
    qtbot.waitUntil(lambda: session.playhead_ns > start + bar.rate * 0.05, timeout=5_000)
    bar.pause()
    assert INT32_MAX < session.playhead_ns < long_trace.duration_ns
    assert (
        window.grid_view.image.image.ravel().tolist()
        == Timeline(long_trace).states(session.playhead_ns).tolist()
    )


def test_video_frames_render_past_2_31_ns(long_trace, closes_its_windows):
    from matviz.app.export_render import FrameRenderer

    late = long_trace.duration_ns * 3 // 4
    renderer = FrameRenderer(long_trace, ("grid", "sm"), (480, 270), block=0)
    try:
        frame = renderer.render(late)
        assert renderer.session.playhead_ns == late
        shown = renderer.views["grid"].image.image.ravel()
        assert np.array_equal(shown, Timeline(long_trace).states(late))
    finally:
        renderer.close()
    assert frame.shape == (270, 480, 3)

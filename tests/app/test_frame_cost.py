"""What a playback frame may skip: texts nobody can read at 60 fps, images that did not change,
labels whose re-wrapping would re-lay out the window."""

from __future__ import annotations

from functools import cache

import pytest
from PySide6.QtCore import QSettings

from matviz.app import explain_panel
from matviz.app.main_window import MainWindow
from matviz.app.runner import Runner
from matviz.backends.contract import RunRequest, run
from matviz.core.timeline import BlockState, Timeline


@cache
def sim():
    return run(RunRequest("tiled", 512, 512, 512, params={"tile": 32, "pad": 0}, level=3))


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    window = MainWindow(sim(), settings=settings, runner=Runner(prewarm=False))
    qtbot.addWidget(window)
    window.resize(1600, 1000)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_the_explanation_follows_playback_at_a_readable_rate(window, monkeypatch):
    session, panel = window.session, window.explain
    calls = []
    real = panel.refresh
    monkeypatch.setattr(panel, "refresh", lambda *a: (calls.append(1), real())[1])
    session.playheadChanged.disconnect(panel._on_playhead)  # reconnect to see the patched one
    session.playheadChanged.connect(panel._on_playhead)
    block = session.selected_block
    start = int(sim().blocks["start"][block])
    end = int(sim().blocks["end"][block])
    monkeypatch.setattr(explain_panel, "PLAYING_TEXT_MS", 60_000)  # a minute between texts
    session.set_playing(True)
    calls.clear()  # starting to play shows the words once
    for i in range(30):
        session.set_playhead(start + (end - start) * i // 30)
    assert calls == []  # the words wait; the views moved 30 times
    monkeypatch.setattr(explain_panel, "PLAYING_TEXT_MS", 0)
    session.set_playhead(start + 1)
    assert len(calls) == 1
    session.set_playing(False)  # paused: the words are those of the exact playhead
    text = panel.plain_text()
    panel._html = ""
    real()
    assert panel.plain_text() == text
    calls.clear()
    for i in range(5):  # not playing: every move updates the words
        session.set_playhead(start + i)
    assert len(calls) == 5


def test_unchanged_shared_memory_is_not_redrawn(window):
    session, tiles = window.session, window.tiles_view
    trace = sim()
    block = session.selected_block
    first = int(trace.blocks["start"][block])
    session.set_playhead(max(first - 1, 0) if first else int(trace.blocks["end"][block]) + 1)
    images = {name: tiles.images[name].image for name in tiles.cells}
    state = Timeline(trace).block_phase(block, session.playhead_ns)[0]
    assert state in (BlockState.WAITING, BlockState.DONE)
    session.set_playhead(session.playhead_ns + 1)  # the block's state and k-tile stay
    for name, image in images.items():
        assert tiles.images[name].image is image  # no new image, no repaint of its labels
    session.set_playhead(int(trace.blocks["start"][block] + trace.blocks["end"][block]) // 2)
    assert any(tiles.images[name].image is not images[name] for name in images)


def test_the_grid_title_stays_while_the_time_moves(window):
    session, grid = window.session, window.grid_view
    title = grid.title.text()
    size = grid.time_label.size()
    session.set_playhead(session.duration_ns // 3)
    assert grid.title.text() == title and "t = " not in title
    assert grid.time_label.text() == f"t = {session.playhead_ns / 1000:,.1f} µs"
    session.set_playhead(session.duration_ns)
    assert grid.time_label.size() == size  # fixed: sized once for the longest time
    assert grid.time_label.fontMetrics().horizontalAdvance(grid.time_label.text()) <= size.width()

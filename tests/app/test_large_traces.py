"""Traces with millions of blocks: sampled grid, sampled lanes laid out off the GUI thread,
and the window saying so."""

from __future__ import annotations

import copy
import dataclasses
from functools import cache

import numpy as np
import pytest
from PySide6.QtCore import QSettings

from matviz.app.main_window import MainWindow
from matviz.app.runner import Runner
from matviz.app.session import Session
from matviz.app.views import grid_view, sm_lanes
from matviz.app.views.grid_view import GridView
from matviz.app.views.sm_lanes import BINS, SmLanesView, lay_out
from matviz.backends.contract import RunRequest, run
from matviz.core.timeline import Timeline


@cache
def sim(size: int = 512, tile: int = 32):
    return run(RunRequest("tiled", size, size, size, params={"tile": tile, "pad": 0}, level=2))


def with_short_bars(trace, spread: int = 20_000):
    """Starts spread ``spread`` x apart, lengths kept: bars far shorter than one time bin, as
    with millions of blocks."""
    blocks = trace.blocks.copy()
    length = blocks["end"] - blocks["start"]
    blocks["start"] *= spread
    blocks["end"] = blocks["start"] + length
    return dataclasses.replace(
        trace,
        manifest=copy.deepcopy(trace.manifest),
        blocks=blocks,
        phase_blocks=np.zeros(0, np.int64),
        marks=np.zeros((0,) + trace.marks.shape[1:], np.int64),
    )


@pytest.fixture
def session() -> Session:
    return Session()


def test_the_grid_samples_blocks_beyond_max_side(qtbot, session, monkeypatch):
    monkeypatch.setattr(grid_view, "MAX_SIDE", 6)
    trace = sim()  # 16 x 16 blocks
    view = GridView(session)
    qtbot.addWidget(view)
    session.set_trace(trace)
    gx, gy = trace.grid
    step = -(-gx // 6)
    assert view.sample_step == step == 3
    t = trace.duration_ns // 3
    session.set_playhead(t)
    states = Timeline(trace).states(t).reshape(gy, gx)
    np.testing.assert_array_equal(view.image.image, states[::step, ::step])
    rect = view.image.mapRectToParent(view.image.boundingRect())
    assert (rect.width(), rect.height()) == (6 * step, 6 * step)  # still in block units
    assert view.block_at(gx - 0.5, gy - 0.5) == gx * gy - 1  # clicks name real blocks
    session.set_color_mode("sm")
    sm = (trace.blocks["smid"] % 256).astype(np.uint8).reshape(gy, gx)
    np.testing.assert_array_equal(view.image.image, sm[::step, ::step])


def test_small_grids_are_drawn_block_by_block(qtbot, session):
    view = GridView(session)
    qtbot.addWidget(view)
    session.set_trace(sim())
    assert view.sample_step == 1 and view.image.image.shape == sim().grid[::-1]


def test_lanes_show_the_block_at_each_cell_centre_even_when_bars_are_tiny():
    trace = with_short_bars(sim(1024, 16))
    layout = lay_out(trace, Timeline(trace))
    blocks = trace.blocks
    dt = layout.span / BINS
    assert np.median(blocks["end"] - blocks["start"]) < dt / 10  # bars far under a bin
    rows, bins = np.nonzero(layout.cells)
    shown = layout.cells[rows, bins] - 1
    centre = np.floor((bins + 0.5) * dt)
    assert len(np.unique(shown)) == len(shown) > 50  # a sample of many different blocks
    assert (layout.row[shown] == rows).all()  # each cell names a block of its own lane
    assert ((blocks["start"][shown] <= centre) & (centre < blocks["end"][shown])).all()
    idle_rows, idle_bins = np.nonzero(layout.cells == 0)
    centre = np.floor((idle_bins + 0.5) * dt)
    running = (blocks["start"][None, :64] <= centre[:, None]) & (
        centre[:, None] < blocks["end"][None, :64]
    )
    assert not (running & (layout.row[None, :64] == idle_rows[:, None])).any()
    assert layout.per_cell == len(blocks) / (layout.n_sms * layout.n_slots * BINS)


def test_huge_traces_are_laid_out_off_the_gui_thread(qtbot, session, monkeypatch):
    monkeypatch.setattr(sm_lanes, "ASYNC_BLOCKS", 100)
    trace = sim()
    view = SmLanesView(session)
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.laidOut, timeout=30_000):
        session.set_trace(trace)
        assert view._cells is None and view.block_at(1.0, 0.5) is None  # not yet: no hover
        assert view.caption.text() == ""
    expected = lay_out(trace, Timeline(trace))
    np.testing.assert_array_equal(view._cells, expected.cells)
    np.testing.assert_array_equal(view.row, expected.row)
    assert view.image.image.shape == (view.n_rows, BINS) and " lanes (" in view.caption.text()
    # a trace replaced before its layout arrives never shows
    other = sim(256, 16)
    with qtbot.waitSignal(view.laidOut, timeout=30_000):
        session.set_trace(trace)
        session.set_trace(other)
    qtbot.wait(200)
    np.testing.assert_array_equal(view._cells, lay_out(other, Timeline(other)).cells)


def test_video_frames_lay_out_the_lanes_at_once(qtbot, monkeypatch):
    monkeypatch.setattr(sm_lanes, "ASYNC_BLOCKS", 100)
    session = Session(interactive=False)
    view = SmLanesView(session)
    qtbot.addWidget(view)
    session.set_trace(sim())
    assert view._cells is not None  # a frame is grabbed right after: no waiting


def test_the_status_line_says_when_blocks_are_sampled(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(grid_view, "MAX_SIDE", 6)
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    window = MainWindow(sim(), settings=settings, runner=Runner(prewarm=False))
    qtbot.addWidget(window)
    text = window.status.detail.text()
    assert "256 blocks, shown sampled" in text and "1 block of every 3×3" in text
    assert "SM lanes" not in text  # the lanes still show every block
    window.status.set_detail(2_099_601, 2, 4.0)
    text = window.status.detail.text()
    assert "2,099,601 blocks" in text and "2×2" in text and "1 of ~4 blocks per cell" in text
    monkeypatch.setattr(grid_view, "MAX_SIDE", 1024)
    window.show_trace(sim(256, 16))
    assert window.status.detail.text() == ""  # a small trace: nothing sampled
    window.close()

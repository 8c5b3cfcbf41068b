"""What a playback frame may skip: texts nobody can read at 60 fps, images that did not change,
labels whose re-wrapping would re-lay out the window, titles and axes set to what they show."""

from __future__ import annotations

from functools import cache

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QEvent, QObject, QRectF, QSettings
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from matviz.app import explain_panel
from matviz.app.main_window import MainWindow
from matviz.app.runner import Runner
from matviz.app.views import palette
from matviz.app.views.live_label import live
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


class _LayoutRequests(QObject):
    """Counts the layout requests ``widget`` receives."""

    def __init__(self, widget) -> None:
        super().__init__()
        self.count = 0
        widget.installEventFilter(self)

    def eventFilter(self, _obj, event) -> bool:  # noqa: N802 (Qt's name)
        self.count += event.type() == QEvent.Type.LayoutRequest
        return False


def test_a_live_label_repaints_in_place_and_grows_when_it_must(qtbot):
    """A new text that fits the label's box asks nothing of the layout; one that needs more
    lines makes the box grow to them; hiding the label hides its box."""
    outer = QWidget()
    qtbot.addWidget(outer)
    label = QLabel("t = 0.0 µs, phase: compute of k-tile 0", wordWrap=True)
    layout = QVBoxLayout(outer)
    layout.addWidget(live(label))
    layout.addWidget(QLabel("below"))
    layout.addStretch(1)  # the box gets the height its text needs, no more
    outer.resize(300, 200)
    outer.show()
    qtbot.waitExposed(outer)
    box = label.parentWidget()
    qtbot.wait(20)  # the first layout settles
    requests = _LayoutRequests(outer)
    for i in range(10):
        label.setText(f"t = {i}.5 µs, phase: {('load', 'compute')[i % 2]} of k-tile {i}")
        qtbot.wait(1)
    assert requests.count == 0
    one_line = box.height()
    label.setText(" ".join(["a much longer text that needs several lines"] * 4))
    qtbot.waitUntil(lambda: box.height() > one_line)
    assert requests.count > 0
    assert box.height() >= label.heightForWidth(box.width())
    assert label.geometry() == box.rect()  # the label fills its box
    label.hide()
    qtbot.waitUntil(lambda: not box.isVisible())


def test_a_live_label_keeps_its_fixed_width(qtbot):
    outer = QWidget()
    qtbot.addWidget(outer)
    label = QLabel("legend", wordWrap=True)
    label.setFixedWidth(190)
    layout = QHBoxLayout(outer)
    layout.addWidget(live(label))
    layout.addWidget(QLabel("beside"), 1)
    outer.resize(800, 100)
    outer.show()
    qtbot.waitExposed(outer)
    assert label.parentWidget().width() == 190 == label.width()


def test_a_new_k_tile_sets_no_title_again(window, monkeypatch):
    """pyqtgraph lays a plot out again on every setTitle, even of its own title: the titles of
    the tiles view stay the same from k-tile to k-tile, and its axes say the new k."""
    session, tiles = window.session, window.tiles_view
    trace = sim()
    block = session.selected_block
    start, end = (int(trace.blocks[f][block]) for f in ("start", "end"))
    session.set_playhead(start + (end - start) // 8)
    titles = []
    monkeypatch.setattr(pg.PlotItem, "setTitle", lambda self, *a, **k: titles.append(a))
    labels = {}
    for i in range(2, 8):
        session.set_playhead(start + (end - start) * i // 8)
        labels[tiles.ktile] = tiles.panels["As"].getAxis("bottom").labelText
    assert titles == []
    assert len(labels) > 2 and len(set(labels.values())) == len(labels)  # k = 32t + column


def test_a_new_k_tile_keeps_the_banks_instruction_list(window, monkeypatch):
    """The banks view follows the playhead to each k-tile; the same warp's instructions stay
    in the list (refilling it laid the view out again), and the title names the k-tile."""
    session, banks = window.session, window.banks_view
    window.memory_tabs.setCurrentWidget(banks)
    trace = sim()
    block = session.selected_block
    start, end = (int(trace.blocks[f][block]) for f in ("start", "end"))
    session.set_playhead(start + (end - start) // 8)
    items = [banks.sites.itemText(i) for i in range(banks.sites.count())]
    cleared = []
    monkeypatch.setattr(banks.sites, "clear", lambda: cleared.append(1))
    titles = set()
    for i in range(2, 8):
        session.set_playhead(start + (end - start) * i // 8)
        titles.add(banks.title.text().split("<br>")[0])
    assert items and cleared == []
    assert [banks.sites.itemText(i) for i in range(banks.sites.count())] == items
    assert len(titles) > 2  # k-tile t = 2, 3, ... of 16


def test_an_axis_with_no_room_draws_one_row_label(qtbot):
    """A plot squeezed flat labels one row, not every row at one spot (it drew 8 there)."""
    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    axis = plot.getPlotItem().getAxis("left")
    plot.resize(300, 400)
    plot.show()
    qtbot.waitExposed(plot)
    palette.fitted_row_ticks(axis, 128, 8)
    assert 1 < len(axis._tickLevels[0]) <= 8
    box = axis.geometry()
    axis.setGeometry(QRectF(box.x(), box.y(), box.width(), 0))  # as a layout squeezes it
    assert len(axis._tickLevels[0]) == 1

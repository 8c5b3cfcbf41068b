"""Issue 10, item 2: barrier waits come from a separate, slower level-3 run. They are shown in a
panel of their own, labelled so, for the selected block (or the nearest sampled one) and the
k-tile at the playhead, never on the timeline."""

from __future__ import annotations

import json
import re
import string
from functools import cache

import numpy as np
import pytest
from PySide6.QtCore import QSettings

from matviz.app import i18n
from matviz.app.session import Session
from matviz.app.views import diagnostics_view as dv
from matviz.app.views import palette
from matviz.app.views.diagnostics_view import DiagnosticsView
from matviz.backends.contract import RunRequest, run
from matviz.core.timeline import BlockState
from matviz.core.trace_io import load_trace
from matviz.paths import I18N_DIR, TRACE_DIR

BUNDLED = TRACE_DIR / "tiled_t32_p0_1024.mvz"


@cache
def sim(level: int = 3):
    return run(RunRequest("tiled", 256, 256, 256, params={"tile": 16}, level=level))


@pytest.fixture(autouse=True)
def english():
    yield
    i18n.set_language("en")


@pytest.fixture
def panel(qtbot):
    session = Session()
    view = DiagnosticsView(session)
    qtbot.addWidget(view)
    view.resize(320, 700)
    return session, view


def _bar_heights(view) -> np.ndarray:
    return np.column_stack([bar.opts["height"] for bar in view._bars])


def test_the_selected_block_and_the_ktile_at_the_playhead(panel):
    session, view = panel
    trace = sim()
    session.set_trace(trace)
    block = int(trace.warp_blocks[3])
    session.select_block(block)
    row = session.timeline.phase_row(block)
    k = 4
    t = int(trace.mark("loaded")[row, k]) - 1  # just before barrier 1 of k-tile 4 releases
    session.set_playhead(t)
    assert session.timeline.block_phase(block, t) == (BlockState.LOADING, k)
    waits = view.waits
    assert waits is not None and waits.block == block and not waits.substituted
    assert waits.ktile == k and view.ktile_box.value() == k
    expected = session.timeline.waits_at(block, k)
    assert np.array_equal(_bar_heights(view), expected)  # one bar per warp and barrier
    assert len(view._bars) == 2 and len(view._bars[0].opts["x"]) == trace.config.warps
    for i in range(2):
        assert waits.last[i] == int(np.argmin(expected[:, i]))  # arrived last: waited least
        assert waits.max_ns[i] == int(expected[:, i].max())
    title = view.title.text()
    assert "separate level-3 run" in title and "not on this timeline's time axis" in title
    stats = view.stats.text()
    assert "first __syncthreads (ends load)" in stats and "second __syncthreads" in stats
    assert f"warp {waits.last[0]} arrived last" in stats and "max " in stats and "mean " in stats
    assert "§11-12" in view.meaning.text()
    bx, by = int(trace.blocks["bx"][block]), int(trace.blocks["by"][block])
    assert view.subtitle.text().startswith(f"block ({bx}, {by}), k-tile t = {k} of ")


def test_a_picked_ktile_stays_until_follow_is_ticked(panel):
    session, view = panel
    trace = sim()
    session.set_trace(trace)
    session.select_block(int(trace.warp_blocks[0]))
    view.set_ktile(7)
    assert view.waits.ktile == 7 and not view.follow.isChecked()
    session.set_playhead(0)
    assert view.waits.ktile == 7
    view.follow.setChecked(True)
    assert view.waits.ktile == 0  # before the block runs: its first k-tile


def test_an_unsampled_block_shows_the_nearest_sampled_one_and_says_so(panel):
    session, view = panel
    trace = sim()
    session.set_trace(trace)
    block = next(b for b in range(len(trace.blocks)) if b not in trace.warp_blocks)
    session.select_block(block)
    waits = view.waits
    assert waits.substituted and waits.requested == block
    assert waits.block == session.timeline.nearest_warp_block(block) in trace.warp_blocks
    assert "were not sampled: this is the nearest sampled block" in view.subtitle.text()


def test_the_label_gives_the_level_3_run_slowdown(qtbot, panel):
    session, view = panel
    trace = load_trace(BUNDLED)
    session.set_trace(trace)
    stats = trace.manifest["stats"]
    pct = 100 * (stats["diagnostics_ms"] / stats["instrumented_ms_median"] - 1)
    assert 70 < pct < 165
    assert f"(+{pct:.0f}% slower than this one)" in view.title.text()
    i18n.set_language("zh_CN")
    qtbot.waitUntil(lambda: "同步等待" in view.title.text())
    assert f"另一次单独的 level 3 运行（比本次运行慢 {pct:.0f}%）" in view.title.text()
    assert "不在本时间线的时间轴上" in view.title.text()


def test_a_trace_without_waits_says_how_to_get_them(panel):
    session, view = panel
    session.set_trace(sim(level=2))
    assert view.stack.currentIndex() == 0 and view.waits is None
    assert "record at level 3" in view.placeholder.text()


def test_a_kernel_that_waits_on_mbarriers_says_it_has_no_barrier_waits(panel):
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    session, view = panel
    session.set_trace(load_trace(TRACE_DIR / "wgmma_tma_bm128_bn256_bk64_s4_bf1_1024.mvz"))
    assert view.stack.currentIndex() == 0 and view.waits is None  # level 3, but no barrier
    assert "pass no block-wide barrier" in view.placeholder.text()
    assert "record at level 3" not in view.placeholder.text()


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def test_every_diagnostics_string_has_a_chinese_translation():
    table = json.loads((I18N_DIR / "zh_CN_diagnostics.json").read_text(encoding="utf-8"))
    texts = [dv.TITLE, dv.TITLE_SLOWER, dv.MEANING, dv.NO_WAITS, dv.NO_BARRIERS,
             "Waits (level-3)"]  # fmt: skip
    source = open(dv.__file__, encoding="utf-8").read()
    texts += re.findall(r'tr\(\s*"([^"]+)"\s*\)', source)
    texts.remove("No trace loaded")  # every view's placeholder, in zh_CN_views.json
    for text in texts:
        assert text in table, text
        assert fields(table[text]) == fields(text), text
        assert re.search(r"[\u4e00-\u9fff]", table[text]) or text == "k-tile t =", text


def test_no_view_claims_a_block_is_at_a_barrier():
    assert BlockState.AT_BARRIER not in palette.STATE_NAMES
    assert BlockState.AT_BARRIER not in palette.STATE_COLORS
    assert "barrier" not in " ".join(palette.STATE_NAMES.values())


def test_the_main_window_has_the_panel_as_a_dock(qtbot, tmp_path):
    from matviz.app.main_window import MainWindow
    from matviz.app.runner import Runner

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat)
    window = MainWindow(load_default=False, settings=settings, runner=Runner())
    qtbot.addWidget(window)
    window.show_trace(load_trace(BUNDLED))
    window.show()
    dock = window.diagnostics_dock
    assert dock.widget().widget() is window.diagnostics
    assert "level-3" in dock.windowTitle()
    toggle = dock.toggleViewAction()
    assert toggle in window.view_menu.actions()
    toggle.trigger()
    assert dock.isHidden()
    toggle.trigger()
    assert not dock.isHidden()
    legend = window.grid_view.legend.text()
    assert "barrier" not in legend and "loading&nbsp;tiles" in legend  # glued: never wrapped

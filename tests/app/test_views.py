"""The five views: non-empty, linked through the Session, translatable, fast enough."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import re
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from matviz.app import i18n
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.banks_view import BanksView
from matviz.app.views.grid_view import GridView
from matviz.app.views.sm_lanes import BINS, ODD_SM_DARKER, ODD_SM_SHADE, SmLanesView
from matviz.app.views.throughput_view import ThroughputView, peak_gflops
from matviz.app.views.tiles_view import PAD_CODE, PAD_GREY, TilesView
from matviz.backends.contract import RunRequest, run
from matviz.core import c_tile, registry
from matviz.core.kernel import SharedArray
from matviz.core.runs import RunPoint
from matviz.core.timeline import BlockState
from matviz.core.trace import Trace

VIEW_CLASSES = (GridView, SmLanesView, TilesView, BanksView, ThroughputView)
VIEWS_DIR = Path(palette.__file__).parent


def simulate(kernel: str, M: int, N: int, K: int, level: int = 3, **params):
    return run(RunRequest(kernel, M, N, K, params=params, level=level))


@cache
def sim(kernel: str = "tiled", size: int = 512, tile: int = 32, pad: int | None = 0, level=3):
    """Simulated traces are deterministic: share them between tests (views never mutate)."""
    params = {"tile": tile} if pad is None or kernel == "naive" else {"tile": tile, "pad": pad}
    return simulate(kernel, size, size, size, level=level, **params)


@pytest.fixture
def session() -> Session:
    return Session()


@pytest.fixture
def views(qtbot, session) -> dict[type, object]:
    out = {}
    for cls in VIEW_CLASSES:
        view = cls(session)
        qtbot.addWidget(view)
        view.resize(900, 600)
        out[cls] = view
    return out


@pytest.fixture(autouse=True)
def english():
    yield
    i18n.set_language("en")


def uniform(image: np.ndarray) -> bool:
    return bool(np.all(image == image.reshape(-1, *image.shape[2:])[0]))


def mid(trace) -> int:
    return trace.duration_ns // 3


# -- empty, loaded, non-empty ------------------------------------------------------------------
def test_placeholder_without_trace(views):
    for view in views.values():
        assert view.stack.currentIndex() == 0
        assert view.placeholder.text() == "No trace loaded"


def test_every_view_draws_a_trace(views, session):
    trace = sim()
    session.set_trace(trace)
    session.set_playhead(mid(trace))
    gx, gy = trace.grid
    for view in views.values():
        assert view.stack.currentIndex() == 1
    grid = views[GridView].image.image
    assert grid.shape == (gy, gx) and not uniform(grid)
    lanes = views[SmLanesView]
    assert lanes.image.image.shape == (lanes.n_rows, BINS) and not uniform(lanes.image.image)
    assert lanes.n_rows == 132 * lanes.n_slots
    tiles = views[TilesView]
    assert tiles.images["As"].image.shape == (32, 32)
    assert not uniform(tiles.images["A"].image) and not uniform(tiles.images["C"].image)
    banks = views[BanksView]
    assert banks.image.image is not None and not uniform(banks.image.image)
    assert banks.sites.count() == 2 + 8 + 32  # two STS, 8 LDS.128 of As, 32 LDS of Bs
    rate = views[ThroughputView].rate_curve.getData()[1]
    assert len(rate) > 10 and rate.max() > 0


def test_simulated_source_is_labelled(views, session):
    session.set_trace(sim())
    for cls in (GridView, SmLanesView, TilesView, BanksView, ThroughputView):
        text = views[cls].title.text()
        assert "simulated" in text
        assert "T32 P0" in text and "{" not in text  # the description's labels, no raw dict


# -- grid ------------------------------------------------------------------------------------
def test_grid_colours_follow_the_playhead(views, session):
    trace = sim()
    session.set_trace(trace)
    grid = views[GridView]
    at_start = grid.image.image.copy()
    assert (at_start != BlockState.DONE).all()
    session.set_playhead(mid(trace))
    assert not np.array_equal(at_start, grid.image.image)
    assert (grid.image.image == BlockState.COMPUTING).any()
    session.set_playhead(trace.duration_ns)
    assert (grid.image.image == BlockState.DONE).all()
    session.set_color_mode("sm")
    gx, gy = trace.grid
    assert np.array_equal(grid.image.image, trace.blocks["smid"].reshape(gy, gx) % 256)


def test_grid_click_selects_a_block(qtbot, views, session):
    trace = sim()
    session.set_trace(trace)
    grid = views[GridView]
    gx, _ = trace.grid
    grid.select_at(3.5, 2.5)  # the handler, in view coordinates
    assert session.selected_block == 2 * gx + 3
    assert grid.outline.rect().topLeft() == QPointF(3, 2)

    grid.show()  # a real click through the scene
    qtbot.waitExposed(grid)
    qtbot.waitUntil(lambda: grid.viewbox.width() > 100)
    scene_pos = grid.viewbox.mapViewToScene(QPointF(5.5, 7.5))
    widget_pos = grid.plot.mapFromScene(scene_pos)
    qtbot.mouseClick(grid.plot.viewport(), Qt.LeftButton, pos=widget_pos)
    qtbot.waitUntil(lambda: session.selected_block == 7 * gx + 5)
    assert "(5, 7)" in grid.describe(session.selected_block)


# -- SM lanes --------------------------------------------------------------------------------
def test_the_lanes_time_axis_says_what_recording_cost_the_timeline(qtbot, views, session):
    """A recorded timeline comes from an instrumented build: its cost against level 0 (measured
    beside it) is on the lanes' time axis, in both languages; a simulation has none to say."""
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    lanes = views[SmLanesView]
    axis = lanes.plot.getPlotItem().getAxis("bottom")
    trace = load_trace(TRACE_DIR / "register_tiling_2d_bm64_bn64_bk16_tm8_tn4_1024.mvz")
    pct = f"{trace.manifest['stats']['overhead_pct']:+.1f}%"
    session.set_trace(trace)
    assert axis.labelText == f"time since kernel start (µs) · level-2 build: {pct} against level 0"
    i18n.set_language("zh_CN")
    qtbot.waitUntil(lambda: "level 2 构建" in axis.labelText)
    assert pct in axis.labelText
    i18n.set_language("en")
    session.set_trace(sim())
    assert axis.labelText == "time since kernel start (µs)"


def test_the_k_step_strip_says_how_much_longer_a_stamping_block_ran(qtbot, views, session):
    """The strip shows a stamping block's own times. Where only some blocks of a recorded
    launch stamped, its caption says how much longer they ran than the others, in both
    languages; where every block stamped (the bundled recordings) it has nothing to compare."""
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    steps = views[SmLanesView].steps
    full = load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz")
    session.set_trace(full)
    session.select_block(0)
    assert "stamps ran" not in steps.caption.text()
    even = full.phase_blocks % 2 == 0  # as if the recorder had stamped 1 block in 2
    blocks = full.blocks.copy()
    blocks["end"] = blocks["start"] + 1_000
    blocks["end"][::2] += 300
    half = dataclasses.replace(
        full, manifest=copy.deepcopy(full.manifest), blocks=blocks,
        phase_blocks=full.phase_blocks[even], marks=full.marks[even],
    )  # fmt: skip
    half.manifest["sampling"]["phase_every"] = 2
    session.set_trace(half)
    session.select_block(0)
    assert " · a block that stamps ran +30% against the others" in steps.caption.text()
    i18n.set_language("zh_CN")
    qtbot.waitUntil(lambda: "打标记的线程块的运行时间相对其余线程块 +30%" in steps.caption.text())
    i18n.set_language("en")


def _drawn_labels(axis) -> list:
    """(scene rectangle, text) of every tick label ``axis`` draws."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(10, 10, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(axis.mapRectToScene(rect), text) for rect, _, text in texts]


def _row_labels(axis) -> list[tuple[float, float, str]]:
    """(top, bottom, text) in scene pixels of the labels a vertical axis draws, top to bottom;
    asserts that none overlaps the next."""
    boxes = sorted((r.top(), r.bottom(), t) for r, t in _drawn_labels(axis))
    for (_, bottom, _), (top, _, _) in zip(boxes, boxes[1:], strict=False):
        assert bottom <= top + 0.5, boxes
    return boxes


def _shown(qtbot, view, size: tuple[int, int], session, trace) -> None:
    """``view`` on screen at ``size`` with ``trace``, laid out."""
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    session.set_trace(trace)
    qtbot.wait(50)


@pytest.mark.parametrize("height", [260, 420, 900])
def test_the_sm_labels_never_overlap(qtbot, views, session, height):
    """132 SMs' labels: every 8th where the lanes have room, fewer in a short view (an export
    of every view at 1280x720 drew 17 labels in 90 px, one black smear)."""
    lanes = views[SmLanesView]
    _shown(qtbot, lanes, (600, height), session, sim("tiled", 2048, 32, 0, level=1))
    assert lanes.n_sms == 132
    boxes = _row_labels(lanes.plot.getPlotItem().getAxis("left"))
    assert len(boxes) >= 2 and boxes[0][2] == "SM 0"
    if height >= 900:
        assert [t for *_, t in boxes][:2] == ["SM 0", "SM 8"]  # the usual every 8th


@pytest.mark.parametrize("size, tile, expect", [
    (2048, 32, "lanes (2 per SM × 132 SMs) → {waves} waves; empty lanes at the end are the tail"),
    (512, 16, "lanes (8 per SM × 132 SMs) → one wave: every block started at once, leaving "
              "{idle} of {res} lanes empty."),
])  # fmt: skip
def test_the_wave_caption_counts_waves_in_words_that_fit(qtbot, views, session, size, tile,
                                                          expect):  # fmt: skip
    """'→ 1 waves; … the last wave does not fill the GPU' read wrong for a launch of one wave."""
    trace = sim("tiled", size, tile, 0, level=1)
    session.set_trace(trace)
    lanes = views[SmLanesView]
    waves = -(-len(trace.blocks) // lanes.n_rows)
    assert (waves > 1) == (size == 2048)
    text = lanes.caption.text()
    idle = lanes.n_rows - len(trace.blocks)
    assert expect.format(waves=waves, idle=idle, res=lanes.n_rows) in text
    assert "1 waves" not in text and "1 lanes" not in text
    i18n.set_language("zh_CN")
    qtbot.waitUntil(lambda: "波次" in lanes.caption.text())
    assert "lanes" not in lanes.caption.text() and "wave" not in lanes.caption.text()


def test_a_launch_of_one_block_is_said_in_the_singular(views, session):
    session.set_trace(sim("tiled", 16, 16, 0, level=1))  # 16x16x16 at T16: one block
    text = views[SmLanesView].caption.text()
    assert "one block on " in text and "1 blocks" not in text


def test_lanes_look_up_blocks_and_move_the_playhead(views, session):
    trace = sim()
    session.set_trace(trace)
    lanes = views[SmLanesView]
    b = trace.blocks
    for block in (0, 17, len(b) - 1):
        x_us = (b["start"][block] + b["end"][block]) / 2000.0
        assert lanes.block_at(x_us, lanes.row[block] + 0.5) == block
    assert lanes.wave.max() + 1 == -(-len(b) // lanes.n_rows)  # waves = ceil(blocks / slots)
    lanes.playhead.setValue(20.0)  # a drag, in µs
    assert session.playhead_ns == 20_000
    session.set_playhead(10_000)
    assert lanes.playhead.value() == pytest.approx(10.0)
    text = lanes.describe(17)
    assert f"SM {b['smid'][17]}" in text and "wave 1" in text
    lanes.mode_box.setCurrentIndex(1)
    assert lanes.mode == "progress" and not uniform(lanes.image.image)


def test_lanes_of_neighbouring_busy_sms_differ_in_shade(views, session):
    """Blocks of one wave on SMs 2s and 2s + 1 keep their wave's hue, the odd SM's a shade
    darker, so two busy lanes side by side do not read as one thick bar."""
    trace = sim()
    session.set_trace(trace)
    lanes = views[SmLanesView]
    for mode in (0, 1):
        lanes.mode_box.setCurrentIndex(mode)
        rgb = lanes.image.lut[lanes.image.image][..., :3].astype(int)
        smid = trace.blocks["smid"]
        first = lanes.wave == 0
        even = np.flatnonzero(first & (smid % 2 == 0))[0]
        odd = np.flatnonzero(first & (smid == smid[even] + 1))[0]
        at = [lanes._cells[lanes.row[b]] == b + 1 for b in (even, odd)]
        a = rgb[lanes.row[even]][at[0]][0]
        b = rgb[lanes.row[odd]][at[1]][0]
        if mode == 0:  # one wave, one hue: the odd SM's is the even one's, darker
            np.testing.assert_allclose(b, a * ODD_SM_DARKER, atol=1)
        assert not np.array_equal(a, b)


def two_channels(trace):
    """``trace`` re-described with the compute channel first and the copy channel second
    (marks ready, computed, issue, loaded): a k-step is done at its latest mark, ``computed``,
    which is neither the last mark nor in the last channel."""
    manifest = copy.deepcopy(trace.manifest)
    manifest["description"]["kstep"] |= {
        "channels": [["ready", "computed"], ["issue", "loaded"]],
        "phases": [
            {"name": "load", "begin": "issue", "end": "loaded", "state": "loading", "barrier": ""},
            {"name": "mma", "begin": "ready", "end": "computed", "state": "computing",
             "barrier": ""},
        ],
    }  # fmt: skip
    marks = trace.marks[:, :, [1, 2, 0, 1]]  # issue, loaded, computed -> ready, computed, ...
    return Trace(manifest, trace.blocks, phase_blocks=trace.phase_blocks, marks=marks.copy())


def test_lanes_progress_counts_finished_ksteps(views, session):
    trace = two_channels(sim(level=2))
    session.set_trace(trace)
    lanes = views[SmLanesView]
    lanes.mode_box.setCurrentIndex(1)
    codes = lanes.image.image
    done_at = trace.mark("computed")
    n = trace.n_tiles
    for block in (0, 17, len(trace.blocks) - 1):
        row = trace.phase_row(block)
        bins = np.flatnonzero(lanes._cells[lanes.row[block]] == block + 1)
        t = (bins + 0.5) * (lanes._span / BINS)
        done = np.searchsorted(done_at[row], t, side="right")
        expected = 1 + np.clip(done * 64 // n, 0, 63)
        shade = ODD_SM_SHADE * (trace.blocks["smid"][block] % 2)
        np.testing.assert_array_equal(codes[lanes.row[block], bins], expected + shade)
        assert expected[0] == 1 and expected[-1] > 1  # from no k-step done to most of them
    # the hover names the description's phase at the playhead
    session.set_playhead(int(trace.mark("ready")[trace.phase_row(17), 2]) + 1)
    assert "at the playhead: computing (mma) · k-tile t = 2 of 16" in lanes.describe(17)


def test_lanes_open_the_selected_block_into_its_channels(views, session):
    lanes = views[SmLanesView]
    pipeline = simulate("async_pipeline", 520, 384, 1000, level=2, BM=64, BN=64, STAGES=3)
    session.set_trace(pipeline)
    session.select_block(0)
    steps = lanes.steps
    assert not steps.isHidden() and steps.bars is not None
    ticks = [label for _, label in steps.plot.getPlotItem().getAxis("left")._tickLevels[0]]
    assert ticks == ["copy", "compute"]
    assert "3 k-steps in flight: copy and compute overlap" in steps.caption.text()
    # one bar per phase and step, on its row at its times, in its state's colour
    assert len(steps.bars.begin) == 2 * pipeline.n_tiles
    i = int(np.flatnonzero(steps.bars.row == 1)[5])  # the compute row, sixth bar
    mid_us = (steps.bars.begin[i] + steps.bars.end[i]) / 2000.0
    assert steps.bar_at(mid_us, 1.5) == i  # the compute row is the lower one
    assert steps.bar_at(mid_us, 0.5) is None or steps.bars.row[steps.bar_at(mid_us, 0.5)] == 0
    image = steps.image.image
    block = pipeline.blocks[0]
    x0, width = block["start"] / 1000.0, (block["end"] - block["start"]) / 1000.0
    assert steps.image.mapRectToParent(steps.image.boundingRect()).left() == pytest.approx(x0)
    column = int((mid_us - x0) / width * image.shape[1])
    codes = set(image[:, column].tolist())
    assert steps.bars.phase[i] + 1 in codes  # the compute bar is drawn at its time
    assert steps.describe(i).startswith(f"compute of k-step {steps.bars.step[i]}: ")
    # the tiled kernel: one row of load and compute in turn
    session.set_trace(sim(level=2))
    session.select_block(0)
    assert [label for _, label in steps.plot.getPlotItem().getAxis("left")._tickLevels[0]] == [
        "load · compute"
    ]
    assert "in flight" not in steps.caption.text()
    # no marks for this block, or none at all: one line says why, no plot
    session.set_trace(
        run(RunRequest("async_pipeline", 520, 384, 1000, params={}, level=2, phase_every=4))
    )
    session.select_block(1)
    assert steps.bars is None and steps.plot.isHidden()
    assert "pick block 0" in steps.caption.text()
    session.set_trace(sim("naive", level=2, pad=None))
    assert steps.isHidden()


# -- tiles -----------------------------------------------------------------------------------
def test_tiles_label_shared_memory(views, session):
    trace = sim("tiled", 512, 32, 1)
    session.set_trace(trace)
    tiles = views[TilesView]
    gx = trace.grid[0]
    block = 3 * gx + 5  # bx 5, by 3
    session.select_block(block)
    t = int(trace.blocks["start"][block] + trace.blocks["end"][block]) // 2
    session.set_playhead(t)
    _, ktile = tiles.timeline.block_phase(block, t)
    assert ktile >= 0 and tiles.ktile == ktile
    assert tiles.images["As"].image.shape == (32, 33)
    assert (tiles.images["As"].image[:, 32] == 2).all()  # the pad column
    assert tiles.element("As", 1, 2) == f"A[{3 * 32 + 1},{ktile * 32 + 2}]"
    assert tiles.element("Bs", 1, 2) == f"B[{ktile * 32 + 1},{5 * 32 + 2}]"
    assert tiles.element("As", 1, 32) == ""  # the padding column holds nothing
    assert tiles.images["A"].image[3, ktile] == 3 and tiles.images["B"].image[ktile, 5] == 3
    caption = tiles.caption.text()
    assert "never read" in caption
    k0 = ktile * 32
    assert f"As[r][c] = A[96 + r, {k0} + c]" in caption  # derived from the store sites
    assert f"Bs[r][c] = B[{k0} + r, 160 + c]" in caption
    assert tiles.panels["As"].getAxis("left").labelText == "A row = 96 + row"
    assert tiles.panels["As"].getAxis("bottom").labelText == f"k = {k0} + column"
    assert "As[1][2] · word 35 · bank 3" in tiles.describe("As", 1, 2)  # 1 x 33 + 2
    assert "word 1058" in tiles.describe("Bs", 0, 2)  # Bs starts after 32 x 33 words of As
    assert "padding" in tiles.describe("As", 0, 32) and "holds" in tiles.describe("As", 0, 31)


@pytest.mark.parametrize("height", [300, 900])
def test_the_row_labels_of_a_tile_never_overlap(qtbot, views, session, height):
    """A 128-row tile in a short panel (every view exported at 1280x720: 80 px) labels fewer
    rows; with room it keeps about 8, the first at 0."""
    tiles = views[TilesView]
    _shown(qtbot, tiles, (700, height), session, simulate("wmma", 256, 256, 64, level=1))
    for name in ("As", "Bs"):
        rows = tiles.config.array(name).rows
        boxes = _row_labels(tiles.panels[name].getAxis("left"))
        assert boxes and boxes[0][2] == "0", name
        assert len(boxes) <= 8 and (height < 900 or len(boxes) >= min(rows, 4)), name
    grid = views[GridView]
    grid.resize(300, height // 2)
    grid.show()
    qtbot.wait(50)
    assert _row_labels(grid.plot.getPlotItem().getAxis("left"))


def test_the_legend_names_the_element_of_each_array_that_holds_one(views, session):
    """Kernel 09's C staging tile Cs holds no element of A or B in a k-step: the legend read
    'Cs[0][0] =' and nothing after it."""
    tiles = views[TilesView]
    session.set_trace(simulate("wmma", 256, 256, 64, level=1))
    session.set_playhead(session.trace.duration_ns // 2)
    assert [a.name for a in tiles.config.shared] == ["As", "Bs", "Cs"]
    lines = tiles.legend.text().split("<br>")
    assert any(line.startswith("As[0][0] = A[") for line in lines)
    assert any(line.startswith("Bs[0][0] = B[") for line in lines)
    assert not [line for line in lines if line.rstrip().endswith("=")]
    assert lines[-1].endswith("Cs: holds no element of A or B")
    lut = tiles._lut(tiles.cells["Cs"])
    assert tuple(lut[PAD_CODE][:3]) == palette.EMPTY  # blank, not the padding's grey
    assert tuple(tiles._lut(tiles.cells["As"])[PAD_CODE][:3]) == PAD_GREY


def test_a_ring_of_slots_has_a_row_label_at_each_slot(qtbot, views, session):
    """Three 128-row slots of As (kernel 10, STAGES 3): labels a power of two apart, so rows
    128 and 256, where slots 1 and 2 begin, are labelled (they read 0, 50, 100, ... before)."""
    tiles = views[TilesView]
    trace = simulate("mma_pipeline", 256, 256, 256, STAGES=3, level=1)
    _shown(qtbot, tiles, (900, 1000), session, trace)
    assert tiles.config.array("As").rows == 384
    texts = [t for *_, t in _row_labels(tiles.panels["As"].getAxis("left"))]
    assert {"0", "128", "256"} <= set(texts), texts


def test_tiles_transposed_and_edge_blocks(views, session):
    trace = simulate("tiled_transposed", 100, 100, 100, tile=32, pad=0)
    session.set_trace(trace)
    tiles = views[TilesView]
    gx, gy = trace.grid
    session.select_block(gx * gy - 1)  # bottom-right edge block: rows 96..127
    tiles._update()
    kt = max(tiles.ktile, 0)
    assert tiles.element("As", 2, 1) == f"A[97,{kt * 32 + 2}]"  # As[k][m] = A[row0 + m, k0 + k]
    assert tiles.element("As", 0, 5) == "0"  # A row 101 does not exist
    assert tiles.labels["Bs"].texts[0][10] == "0"  # B column 106 does not exist
    assert (tiles.images["As"].image == 1).any()
    assert tiles.panels["As"].getAxis("left").labelText == f"k = {kt * 32} + row"
    assert tiles.panels["As"].getAxis("bottom").labelText == "A row = 96 + column"
    assert f"As[r][c] = A[96 + c, {kt * 32} + r]" in tiles.caption.text()


def test_a_ring_slot_above_the_first_maps_back_to_the_matrix_by_subtraction(views, session):
    """Kernel 10 keeps STAGES slots of As stacked in one array: in slot 1, As row r holds A row
    r - BM of block row 0, written as a subtraction, not as '-128 + row'."""
    trace = simulate("mma_pipeline", 256, 256, 256, STAGES=3, SWIZZLE=0)
    session.set_trace(trace)
    tiles = views[TilesView]
    block = trace.block_index(1, 0)
    session.select_block(block)
    row = trace.phase_row(block)
    t = int(trace.mark("begin")[row, 1]) + 1  # computing k-step 1, in slot 1
    session.set_playhead(t)
    tiles._update()
    assert tiles.ktile == 1
    assert tiles.panels["As"].getAxis("left").labelText == "A row = row − 128"
    assert "As[r][c] = A[r − 128, 32 + c]" in tiles.caption.text()


def test_tiles_of_a_kernel_with_rectangular_arrays(views, session):
    trace = simulate("register_tiling_1d", 128, 128, 64, BM=64, BN=64, BK=8, TM=8)
    session.set_trace(trace)
    tiles = views[TilesView]
    session.select_block(trace.block_index(1, 1))
    tiles._update()
    k0 = max(tiles.ktile, 0) * 8
    assert tiles.images["As"].image.shape == (64, 8) and tiles.images["Bs"].image.shape == (8, 64)
    assert tiles.element("As", 5, 3) == f"A[{64 + 5},{k0 + 3}]"  # As[e / BK][e % BK]
    assert tiles.element("Bs", 2, 7) == f"B[{k0 + 2},{64 + 7}]"
    assert tiles.images["A"].image.shape == (2, 8)  # 2 block rows x 64 / 8 k-steps
    assert f"As[r][c] = A[64 + r, {k0} + c]" in tiles.caption.text()
    assert "no padding" in tiles.caption.text()


def test_tiles_and_banks_take_any_number_of_shared_arrays(views, session, monkeypatch):
    """A third array in the description gets its own panel and its own word names."""
    tiled = registry.get_kernel("tiled")
    extra = SharedArray("Cs", 4, 8, pad=1)  # staged by no store: every cell stays empty

    def shared(p):
        return (*tiled.shared(p), extra)

    monkeypatch.setattr(registry, "kernels", lambda: {"tiled": dataclasses.replace(
        tiled, shared=shared)})  # fmt: skip
    trace = dataclasses.replace(sim("tiled", 256, 16, 1))  # a fresh copy: its own config
    session.set_trace(trace)
    tiles, banks = views[TilesView], views[BanksView]
    assert list(tiles.labels) == ["As", "Bs", "Cs"]
    assert tiles.images["Cs"].image.shape == (4, 9) and (tiles.images["Cs"].image == 2).all()
    assert "no store of this k-tile writes it" in tiles.describe("Cs", 1, 2)
    base = trace.config.array_bases["Cs"] // 4
    assert base == 2 * 16 * 17
    assert banks.word_name(base + 9 + 2) == "Cs[1][2]"
    assert banks.word_name(17 + 3) == "As[1][3]" and banks.word_name(16 * 17) == "Bs[0][0]"
    assert banks.word_name(base + 4 * 9) == f"word {base + 36}"  # past the last array
    monkeypatch.undo()
    session.set_trace(dataclasses.replace(trace))  # back to two arrays: the third panel goes
    assert list(tiles.labels) == ["As", "Bs"] and "Cs" not in tiles.panels


# -- banks -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("pad", "degree"), [(0, 32), (1, 1)])
def test_banks_transposed_store_conflict(views, session, pad, degree):
    session.set_trace(sim("tiled_transposed", 256, 32, pad))
    banks = views[BanksView]
    assert session.trace.probe[session.probe_row]["site"] == "st_As"
    assert banks.conflict_degree == degree
    assert banks.wavefronts == degree and banks.ideal_wavefronts == 1
    assert int((banks.image.image > 0).sum(axis=0).max()) == degree  # column height


def test_banks_site_selector_drives_the_session(views, session):
    session.set_trace(sim("tiled_transposed", 256, 32, 0))
    banks = views[BanksView]
    assert "st_As" in banks.sites.itemText(0) and "32-way" in banks.sites.itemText(0)
    banks.sites.setCurrentIndex(2)  # ld_As k=0: all lanes of warp 0 read different words
    assert session.probe_row == 2
    assert "ld_As k=0" in banks.sites.itemText(2)
    session.set_probe_row(1)  # st_Bs: conflict-free
    assert banks.sites.currentIndex() == 1 and banks.conflict_degree == 1


def test_banks_lists_the_instructions_ptxas_emits(views, session):
    """Issue 10, item 5: kernel 02 at PAD 0 reads As with 8 LDS.128 per k-tile, not 32 LDS."""
    session.set_trace(sim("tiled", 256, 32, 0))
    banks = views[BanksView]
    assert banks.sites.count() == 2 + 8 + 32
    assert "ld_As k=0–3 · LDS.128 (1 of 8 per k-tile)" in banks.sites.itemText(2)
    banks.sites.setCurrentIndex(2)
    ld = banks.instruction()
    assert (ld.site, ld.opcode, ld.ks) == ("ld_As", "LDS.128", (0, 1, 2, 3))
    assert session.probe_row == ld.rows[0]  # the session keeps the first access's row
    assert banks.wavefronts == 2 and banks.conflict_degree == 1  # a broadcast, as ncu measured
    text = banks.summary.text()
    sentence = "ptxas reads As with 8 LDS.128 per k-tile (the source's 32 accesses), 2 wavefronts"
    assert sentence + " each" in text
    assert "warp-wide broadcast" in text
    drawn = banks.image.image > 0
    assert drawn.sum() == 4 and drawn[0, :4].all()  # one 16-byte vector: 4 words, 4 banks
    session.set_probe_row(ld.rows[2])  # an access inside the vector selects its instruction
    assert banks.sites.currentIndex() == 2
    note = banks.note.text()
    assert "What PAD 1 changes against PAD 0" in note and "ld_As: 8 LDS.128 → 32 LDS" in note
    assert "In all: 42 → 66 shared-memory instructions" in note
    assert "ptxas (sm_90) emits" not in note  # the list above is what ptxas emitted
    assert "L1 fills" not in note  # the store note belongs to stores
    banks.sites.setCurrentIndex(0)  # st_As
    note = banks.note.text()
    assert "L1 fills" in note and "__ldcg" in note
    # one wavefront is singular (the screen read '1 wavefronts each')
    assert "with 1 STS per k-tile, 1 wavefront each." in banks.summary.text()
    assert banks.sites.itemText(0).endswith("— 1-way, 1 wavefront")


def test_banks_name_cp_async_stores_and_what_ncu_counts_for_them(views, session):
    session.set_trace(simulate("async_pipeline", 256, 256, 256, BK=16, swizzle=0, pad=0))
    banks = views[BanksView]
    banks.sites.setCurrentIndex(0)  # st_As: A's elements, one cp.async each
    instr = banks.instruction()
    assert (instr.site, instr.opcode) == ("st_As", "LDGSTS")
    assert banks.conflict_degree == 4  # BK=16 transposed without a swizzle
    assert "ptxas writes As with 8 LDGSTS per k-tile" in banks.summary.text()
    note = banks.note.text()
    # ncu measured this configuration (the bundled table's row: model 2.4, ncu 10.1)
    assert "for this configuration: a cp.async store (LDGSTS) counts 10.1 bank conflicts" in note
    assert "where this model counts 2.4" in note
    assert "L1 fills" not in note  # that note is about STS fed by loads through registers
    items = [banks.sites.itemText(i) for i in range(banks.sites.count())]
    banks.sites.setCurrentIndex(next(i for i, text in enumerate(items) if "st_Bs" in text))
    assert banks.instruction().opcode == "LDGSTS.128"  # B: 16 bytes a lane


def test_a_configuration_ncu_has_not_measured_gets_the_kernels_cp_async_range(views, session):
    session.set_trace(simulate("async_pipeline", 256, 256, 256, BM=64, BN=64, BK=8, split=1))
    banks = views[BanksView]
    banks.sites.setCurrentIndex(0)
    assert banks.instruction().opcode.startswith("LDGSTS")
    note = banks.note.text()
    assert "cp.async store (LDGSTS) counts 5.5–10.1 bank conflicts" in note
    assert "even where this model finds none" in note and "for this configuration" not in note


def test_copies_the_model_finds_in_conflict_and_ncu_does_not_are_said(views, session):
    """Kernel 09's padded tiles: the model counts 2.7 conflicts per cp.async store, ncu none."""
    session.set_trace(simulate("wmma", 256, 256, 256, BM=256, BN=128, BK=32, WT=64, PAD=8,
                               STAGES=3))  # fmt: skip
    banks = views[BanksView]
    banks.sites.setCurrentIndex(0)
    assert banks.instruction().opcode.startswith("LDGSTS")
    note = banks.note.text()
    assert "counts 0.0 bank conflicts per instruction, where this model counts 2.7" in note


def test_a_kernel_whose_copies_ncu_found_conflict_free_gets_no_cp_async_note(views, session):
    session.set_trace(simulate("mma_pipeline", 256, 256, 256))
    banks = views[BanksView]
    banks.sites.setCurrentIndex(0)
    instr = banks.instruction()
    assert (instr.site, instr.opcode) == ("st_As", "LDGSTS.128")
    assert "LDGSTS" not in banks.note.text()  # kernel 10's rows: 0 in ncu, 0 in the model


@pytest.mark.parametrize(("kernel", "tile", "pad", "expected"), [
    ("tiled", 32, 1, ["ld_As: 8 LDS.128 → 32 LDS", "132 bytes", "(-21%)"]),
    ("tiled_transposed", 32, 1, ["st_As: 32-way → 1-way, 32 → 1 wavefronts", "(+36%)"]),
    ("tiled", 16, 1, ["st_As: 1-way → 2-way", "Padding itself causes this conflict",
                      "lanes 0 and 31 access As[0][0] and As[1][15]"]),
    ("tiled_transposed", 32, 2, ["st_As: 32-way → 2-way", "Padding leaves a conflict"]),
    ("tiled_transposed", 32, 4, ["st_As: 32-way → 4-way", "Padding leaves a conflict"]),
])  # fmt: skip
def test_banks_explains_what_padding_changes(views, session, kernel, tile, pad, expected):
    session.set_trace(sim(kernel, 256, tile, pad))
    note = views[BanksView].note.text()
    assert f"What PAD {pad} changes against PAD 0" in note
    for part in expected:
        assert part in note, (part, note)


def test_banks_explains_nothing_about_padding_without_a_pad_parameter(views, session):
    session.set_trace(simulate("register_tiling_1d", 256, 256, 256, level=2))
    banks = views[BanksView]
    banks.sites.setCurrentIndex(0)  # a store: its note says what ncu counts beyond the banks
    note = banks.note.text()
    assert "PAD" not in note and "L1 fills" in note
    # kernel 04's rows-first loop: ptxas emits exactly the model's instructions
    assert "ptxas (sm_90) emits" not in note


def test_banks_quotes_what_ptxas_emits_where_it_is_not_the_models(views, session):
    """Kernel 05 at BM64 BN64 BK16 TM4 TN8: ptxas adds scalar LDS the model's merging does not
    predict (resources/bench/sass_sm90_shared_ops.json), and ncu counts ptxas's instructions."""
    session.set_trace(simulate("register_tiling_2d", 256, 256, 256, level=2,
                               BM=64, BN=64, BK=16, TM=4, TN=8))  # fmt: skip
    note = views[BanksView].note.text()
    assert "emits per warp and k-tile: 48 LDS.128 + 4 LDS + 16 STS." in note
    assert "merges the description's accesses into 48 LDS.128 + 16 STS" in note
    assert "ptxas issues 4 more" in note


# -- throughput ------------------------------------------------------------------------------
def test_throughput_gains_a_point_per_run(views, session):
    view = views[ThroughputView]
    trace = sim()
    session.set_trace(trace)
    assert len(view.scatter["sim"].data) == 0
    session.add_run(RunPoint.from_trace(trace))
    assert len(view.scatter["sim"].data) == 1
    session.add_run(RunPoint.from_trace(sim("naive", 512, 32)))
    assert len(view.scatter["sim"].data) == 2
    ticks = view.runs_plot.getAxis("bottom")._tickLevels[0]
    assert len(ticks) == 2 and "(sim)" in ticks[1][1] and "512³" in ticks[1][1]
    assert [run.label for run in session.runs] == ["tiled T32 P0 (sim)", "naive T32 (sim)"]
    assert view.cublas_line.value() == pytest.approx(trace.manifest["stats"]["cublas_gflops"])
    assert peak_gflops(trace.manifest["device"])[0] == pytest.approx(66908.16)
    assert view.peak_line.value() == pytest.approx(66908.16)
    session.set_playhead(mid(trace))
    assert view.playhead.value() == pytest.approx(mid(trace) / 1000)


def test_views_show_a_kernel_whose_shared_memory_no_lane_touches(views, session):
    """Kernel 11: TMA writes the tiles, wgmma reads them; the views say so and fill the tiles
    from the copies, on the bundled H200 recording."""
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    trace = load_trace(TRACE_DIR / "wgmma_tma_bm128_bn256_bk64_s4_bf1_1024.mvz")
    session.set_trace(trace)
    session.select_block(trace.block_index(1, 2))
    session.set_playhead(mid(trace))
    banks = views[BanksView].placeholder.text()
    assert views[BanksView].stack.currentIndex() == 0
    assert "No lane of the wgmma_tma kernel reads or writes shared memory" in banks
    assert "uses no shared memory" not in banks
    tiles = views[TilesView]
    assert tiles.no_smem.isHidden() and set(tiles.cells) == {"As", "Bs"}
    assert tiles.thread == 128  # a consumer's first thread: warp 4
    k = tiles.ktile
    slot = k % trace.config.p.STAGES
    held = tiles.cells["As"]
    assert held.text(slot * 128, 0) == f"A[256,{64 * k}]"  # block row 2, this k-step's slot
    assert held.written.sum() == 128 * 64


# -- robustness, language --------------------------------------------------------------------
def test_views_survive_a_naive_trace(views, session):
    session.set_trace(sim())
    session.select_block(5)
    naive = sim("naive", 512, 32, level=3)
    assert len(naive.phase_blocks) == 0 and len(naive.probe) == 0
    session.set_trace(naive)
    session.set_playhead(mid(naive))
    assert views[BanksView].stack.currentIndex() == 0
    assert "no shared memory" in views[BanksView].placeholder.text()
    tiles = views[TilesView]
    assert not tiles.no_smem.isHidden() and not tiles.labels  # no shared panels at all
    for text in (tiles.caption.text(), tiles.legend.text()):
        assert "tile" not in text.replace("k-tile", "").lower()  # naive has no T x T tiles
    assert "K = 512" in tiles.caption.text()
    grid = views[GridView].image.image
    assert (grid == BlockState.RUNNING).any()
    session.set_trace(sim("tiled", 512, 32, 0, level=1))  # phases but no probe: the model
    banks = views[BanksView]
    assert banks.stack.currentIndex() == 1 and banks.source == "model"
    assert "model" in banks.summary.text() and banks.sites.count() == 8 + 32 + 2  # LDS.128


def visible_text(view) -> str:
    if view.stack.currentIndex() == 0:
        return view.placeholder.text()
    if isinstance(view, (SmLanesView,)):
        return view.mode_box.itemText(0) + view.caption.text()
    if isinstance(view, ThroughputView):
        return view.runs_plot.titleLabel.text
    return view.title.text()


@pytest.mark.parametrize("loaded", [False, True])
def test_language_switch_changes_labels(qtbot, views, session, loaded):
    if loaded:
        session.set_trace(sim())
    before = {cls: visible_text(v) for cls, v in views.items()}
    i18n.set_language("zh_CN")
    for cls, view in views.items():
        qtbot.waitUntil(lambda v=view, c=cls: visible_text(v) != before[c])
    i18n.set_language("en")
    for cls, view in views.items():
        qtbot.waitUntil(lambda v=view, c=cls: visible_text(v) == before[c])


def test_every_view_string_is_translated():
    table = json.loads((i18n.I18N_DIR / "zh_CN_views.json").read_text(encoding="utf-8"))
    table |= json.loads((i18n.I18N_DIR / "zh_CN_banks.json").read_text(encoding="utf-8"))
    table |= json.loads((i18n.I18N_DIR / "zh_CN_diagnostics.json").read_text(encoding="utf-8"))
    table |= json.loads((i18n.I18N_DIR / "zh_CN_fragments.json").read_text(encoding="utf-8"))
    used = set(palette.STATE_NAMES.values())
    for path in VIEWS_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr":
                arg = node.args[0]
                if isinstance(arg, ast.Constant):
                    used.add(arg.value)
    missing = sorted(used - set(table))
    assert not missing, (
        "add to zh_CN_views.json (banks view: zh_CN_banks.json, barrier waits: "
        f"zh_CN_diagnostics.json, fragments: zh_CN_fragments.json): {missing}"
    )
    fields = re.compile(r"\{[^}]*\}")
    for source in used:
        assert sorted(fields.findall(source)) == sorted(fields.findall(table[source])), source


# -- speed -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_playback_speed_4096(qtbot, views, session):
    trace = simulate("tiled", 4096, 4096, 4096, tile=32, pad=0)
    t0 = time.perf_counter()
    session.set_trace(trace)
    load_s = time.perf_counter() - t0
    for view in views.values():
        view.show()
        qtbot.waitExposed(view)
    times = np.linspace(0, trace.duration_ns, 61).astype(np.int64)[1:]

    t0 = time.perf_counter()
    for t in times:  # the views' own work per frame
        session.set_playhead(int(t))
    update_fps = len(times) / (time.perf_counter() - t0)

    t0 = time.perf_counter()
    for t in times[::-1]:  # and with every view rendered each frame
        session.set_playhead(int(t))
        for view in views.values():
            view.grab()
    render_fps = len(times) / (time.perf_counter() - t0)
    print(
        f"\n4096^3 T=32 ({len(trace.blocks)} blocks, 5 views at 900x600): set_trace {load_s:.2f} s,"
        f" updates {update_fps:.0f} fps, updates + rendering {render_fps:.1f} fps"
    )
    assert render_fps > 10


@pytest.mark.slow
def test_lanes_with_65536_blocks(qtbot, session):
    trace = simulate("tiled", 4096, 4096, 4096, tile=16, pad=0, level=1)
    assert len(trace.blocks) == 65536
    lanes = SmLanesView(session)
    qtbot.addWidget(lanes)
    t0 = time.perf_counter()
    session.set_trace(trace)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for block in range(0, 65536, 655):
        x_us = (trace.blocks["start"][block] + trace.blocks["end"][block]) / 2000.0
        assert lanes.block_at(x_us, lanes.row[block] + 0.5) == block
    look_ms = (time.perf_counter() - t0) * 1000 / 101
    print(f"\nlanes, 65536 blocks: set_trace {load_s:.2f} s, hover look-up {look_ms:.2f} ms")
    assert load_s < 10 and look_ms < 20


def test_every_view_numbers_the_k_tile_as_the_explanation_does(views, session):
    # One numbering everywhere: the loop variable t of the .cu, from 0, as the texts say.
    from matviz.core.explain import explain

    session.set_trace(sim("tiled", 256, tile=16, pad=0))
    trace = session.trace
    block = len(trace.blocks) // 2
    session.select_block(block)
    tl = session.timeline
    row = tl.phase_row(block)
    loaded = trace.mark("loaded")[row]
    session.set_playhead(int(loaded[5]) + 1)  # computing k-tile t = 5
    state, k = tl.block_phase(block, session.playhead_ns)
    assert (state, k) == (BlockState.COMPUTING, 5)
    label = f"k-tile t = 5 of {trace.n_tiles}"
    said = explain(trace, tl, block, session.playhead_ns)
    assert "t = 5" in said.title and "t = 6" not in said.body
    assert label in views[TilesView].title.text()
    assert label in views[GridView].describe(block)
    assert label in views[SmLanesView].describe(block)


# -- issue 10: shared tiles that move, banks that follow, a readable throughput plot -----------
def _phase_time(trace, session, block, ktile, phase_name, fraction):
    config = trace.config
    phase = next(ph for ph in config.phases if ph.name == phase_name)
    row = session.timeline.phase_row(block)
    begin = int(trace.marks[row, ktile, phase.begin])
    end = int(trace.marks[row, ktile, phase.end])
    return begin + int(fraction * (end - begin))


def _cells_of(config, site, tid, block, t):
    """The (row, col) thread ``tid`` touches at every instance of ``site``, via lane_offsets."""
    from matviz.core import access

    rs = config.site(site)
    arr = config.array(rs.site.array)
    warp, lane = divmod(tid, 32)
    out = []
    for k in range(rs.repeat):
        off = int(access.lane_offsets(config, site, warp, k, block, t)[lane])
        out.append(divmod((off - config.array_bases[arr.name]) // arr.elem_bytes, arr.stride))
    return out


@pytest.mark.parametrize(
    ("kernel", "params"),
    [("tiled", {"tile": 32, "pad": 1}), ("register_tiling_1d", {})],
)
def test_tiles_fill_by_warp_during_the_load(views, session, kernel, params):
    from matviz.app.views import tiles_view as tv

    trace = simulate(kernel, 256, 256, 256, level=2, **params)
    session.set_trace(trace)
    tiles = views[TilesView]
    block = trace.block_index(1, 1)
    session.select_block(block)
    filled = []
    for fraction in (0.05, 0.3, 0.6, 0.95):
        session.set_playhead(_phase_time(trace, session, block, 2, "load", fraction))
        assert tiles.mode == "load" and tiles.ktile == 2
        codes = {name: tiles.images[name].image for name in tiles.cells}
        shown = sum(int(np.isin(c, (tv.FILLED, tv.ZERO_CODE, tv.LATEST_CODE)).sum())
                    for c in codes.values())  # fmt: skip
        filled.append(shown)
        for name, c in codes.items():
            arr = trace.config.array(name)
            assert (c[:, arr.cols :] == tv.PAD_CODE).all()  # padding stays unused
        assert tiles.warps_shown == int(np.ceil(fraction * trace.config.warps))
    assert filled == sorted(filled) and filled[0] < filled[-1]
    assert 0 < filled[0]


@pytest.mark.parametrize(
    ("kernel", "params", "tid"),
    [("tiled", {"tile": 32, "pad": 1}, 37), ("register_tiling_1d", {}, 70)],
)
def test_tiles_light_up_what_the_selected_thread_reads(views, session, kernel, params, tid):
    from matviz.app.views import tiles_view as tv

    trace = simulate(kernel, 256, 256, 256, level=2, **params)
    config = trace.config
    session.set_trace(trace)
    tiles = views[TilesView]
    block = trace.block_index(1, 0)
    session.select_block(block)
    tiles.thread_box.setValue(tid)
    assert tiles.thread == tid
    session.set_playhead(_phase_time(trace, session, block, 3, "compute", 0.5))
    assert tiles.mode == "compute" and tiles.ktile == 3
    bx_by = (1, 0)
    for name, site in (("As", "ld_As"), ("Bs", "ld_Bs")):
        expected = set(_cells_of(config, site, tid, bx_by, 3))
        codes = tiles.images[name].image
        lit = {
            tuple(map(int, rc)) for rc in np.argwhere(np.isin(codes, (tv.READ_CODE, tv.NOW_CODE)))
        }
        assert lit == expected
        now = {tuple(map(int, rc)) for rc in np.argwhere(codes == tv.NOW_CODE)}
        assert len(now) == 1 and now <= expected
    # the k the strong cell shows moves with the phase
    first = tiles.images["Bs"].image.copy()
    session.set_playhead(_phase_time(trace, session, block, 3, "compute", 0.95))
    assert not np.array_equal(first, tiles.images["Bs"].image)
    assert f"thread {tid}" in tiles.activity.text()


def test_tiles_click_on_c_picks_the_thread(views, session):
    trace = simulate("register_tiling_1d", 256, 256, 256, level=2)
    session.set_trace(trace)
    tiles = views[TilesView]
    tiles.select_element(64 + 17, 128 + 9)  # block (2, 1); rows (tid / 64) * 8 ..., col tid % 64
    assert session.selected_block == trace.block_index(2, 1)
    assert tiles.thread == 2 * 64 + 9 and tiles.thread_box.value() == 2 * 64 + 9
    trace = sim("tiled", 256, 16, 0)
    session.set_trace(trace)
    tiles.select_element(16 + 3, 5)  # block (0, 1), ty 3, tx 5
    assert session.selected_block == trace.block_index(0, 1) and tiles.thread == 3 * 16 + 5


def _as_recorded(trace):
    """``trace`` as if recorded on a GPU (its probe then counts as measured)."""
    manifest = copy.deepcopy(trace.manifest)
    manifest["backend"] = "cuda"
    return dataclasses.replace(trace, manifest=manifest)


def test_banks_follow_block_warp_and_ktile(views, session):
    from matviz.core import access

    trace = _as_recorded(sim("tiled_transposed", 256, 32, 0))
    assert not trace.is_simulated
    session.set_trace(trace)
    banks = views[BanksView]
    assert banks.key == (0, 0, 0) and banks.source == "probe"
    assert "recorded on the GPU" in banks.summary.text()
    assert "32-way bank conflict" in banks.summary.text()  # st_As, transposed, pad 0
    # another block, another warp, a later k-tile: the model, and it says so
    block = trace.block_index(3, 5)
    session.select_block(block)
    row = session.timeline.phase_row(block)
    session.set_playhead(int(trace.mark("loaded")[row, 4]) + 1)  # computing k-tile 4
    banks.warp_box.setValue(3)
    assert banks.key == (block, 3, 4) and banks.source == "model"
    assert "model" in banks.summary.text() and "block (3, 5), warp 3" in banks.title.text()
    assert "the GPU probe recorded block (0, 0), warp 0, k-tile t = 0" in banks.summary.text()
    expected = access.access_records(trace.config, 3, (3, 5), 4)
    np.testing.assert_array_equal(banks.records["offsets"], expected["offsets"])
    assert not np.array_equal(banks.records["offsets"], trace.probe["offsets"])  # warp 3 != 0
    session.set_probe_row(1)  # st_Bs: conflict-free, said as such
    assert banks.conflict_degree == 1
    assert "no bank conflict (1-way)" in banks.summary.text()


def test_banks_for_a_kernel_with_a_large_block(qtbot, views, session):
    trace = simulate("register_tiling_1d", 256, 256, 256, level=2)  # no probe: the model
    session.set_trace(trace)
    banks = views[BanksView]
    assert banks.warp_box.maximum() == 15 and banks.source == "model"
    # ld_As (As[row + r][k], r < TM) merges along k into LDS.128: BK * TM / 4 of them
    config = trace.config
    ld_as = config.site("ld_As").repeat // 4
    assert banks.sites.count() == len(config.program) - config.site("ld_As").repeat + ld_as
    i18n.set_language("zh_CN")
    banks.sites.setCurrentIndex(1)  # the trace has no probe: the view keeps the row itself
    assert banks.instruction().site == "st_Bs" and "st_Bs" in banks.sites.itemText(1)
    ld = next(i for i, ins in enumerate(banks.instrs) if ins.site == "ld_Bs")
    banks.sites.setCurrentIndex(ld)
    assert banks.instruction().site == "ld_Bs"
    banks.sites.setCurrentIndex(1)
    qtbot.waitUntil(lambda: "无 bank 冲突（1 路）" in banks.summary.text())
    assert banks.conflict_degree == 1
    assert "Bank 冲突：1 路" not in banks.summary.text()


@pytest.mark.parametrize("size", [(900, 600), (560, 420), (420, 300)])
def test_throughput_stays_readable_after_20_runs(qtbot, views, session, size):
    view = views[ThroughputView]
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    long = simulate("register_tiling_1d", 256, 256, 256, level=1)
    traces = [long, sim("tiled", 512, 32, 0), sim("naive", 512, 32),
              simulate("tiled_transposed", 256, 512, 128, level=1, tile=16, pad=1)]  # fmt: skip
    session.set_trace(traces[1])
    for i in range(19):
        session.add_run(RunPoint.from_trace(traces[(i * 7) % 4]))
    session.add_run(RunPoint.from_trace(long))
    qtbot.waitUntil(lambda: view.runs_plot.getViewBox().width() > 100)
    qtbot.wait(50)  # the axis takes its new height
    drawn = _drawn_labels(view.runs_plot.getAxis("bottom"))
    assert [text for _, text in drawn] == [text for _, text in view.ticks]  # none dropped
    assert len(drawn) >= 2 and view.shown_runs[-1] == 19  # the newest run is labelled
    for (a, _), (b, _) in zip(drawn, drawn[1:], strict=False):
        assert not a.intersects(b)
    for _, text in drawn:
        assert re.search(r"\d+³|\d+×\d+×\d+", text)  # the size is in the label
    newest = view.ticks[-1][1]  # run 20: the long label that used to disappear
    assert newest.startswith("#20") and "256³" in newest
    if size[1] >= 420:
        assert newest.startswith("#20 register_") and "TM8" in newest
    assert "run #1: register_tiling_1d BM64 BN64 BK8 TM8, M×N×K = 256×256×256" in (
        view.describe_run(0)
    )
    # the reference lines' labels do not collide
    peak = view.peak_line.label.sceneBoundingRect()
    cublas = view.cublas_line.label.sceneBoundingRect()
    assert view.cublas_line.isVisible() and not peak.intersects(cublas)
    assert peak.bottom() <= cublas.top() + 0.5  # one above its line, the other below its own
    view_rect = view.runs_plot.getViewBox().sceneBoundingRect()
    assert view_rect.top() - 0.5 <= peak.top()  # the peak's label is inside the plot


def test_throughput_cublas_line_belongs_to_the_current_trace(views, session):
    view = views[ThroughputView]
    first = sim("tiled", 512, 32, 0)
    other = dataclasses.replace(first, manifest=copy.deepcopy(first.manifest))
    other.manifest["stats"]["cublas_gflops"] = 12345.0
    session.set_trace(first)
    session.add_run(RunPoint.from_trace(first))
    session.add_run(RunPoint.from_trace(other))  # the last run has another baseline
    assert view.cublas_line.value() == pytest.approx(first.manifest["stats"]["cublas_gflops"])
    session.set_trace(other)
    assert view.cublas_line.value() == pytest.approx(12345.0)


def test_throughput_value_labels_clear_the_reference_labels(qtbot, views, session):
    """A run whose value sits just over the cuBLAS line at the left keeps its number visible:
    the label moves off the cuBLAS label, which is drawn on top."""
    view = views[ThroughputView]
    view.resize(900, 700)
    view.show()
    qtbot.waitExposed(view)
    trace = sim("tiled", 1024, 32, 0, level=1)  # cuBLAS at 36 TFLOP/s: mid-plot
    cublas = trace.manifest["stats"]["cublas_gflops"]
    session.set_trace(trace)
    session.add_run(RunPoint.from_trace(trace))
    qtbot.waitUntil(lambda: view.runs_plot.getViewBox().width() > 100)
    qtbot.wait(50)
    # a value whose label, drawn above its point, would reach into the cuBLAS label below
    # the line (the y range follows the FP32 peak, not the runs)
    gflops_per_px = view.runs_plot.getViewBox().viewPixelSize()[1]
    text_px = view._value_texts[0].boundingRect().height()
    session.runs.clear()
    for drop_px in (0.8 * text_px, 0.3 * text_px):
        run = RunPoint.from_trace(trace)
        session.add_run(dataclasses.replace(run, gflops=cublas - drop_px * gflops_per_px))
    qtbot.wait(50)
    view._draw_runs()
    label = view.cublas_line.label.sceneBoundingRect()
    assert view._value_texts and view.cublas_line.isVisible()
    inside = view.runs_plot.getViewBox().sceneBoundingRect()
    assert all(text.isVisible() for text in view._value_texts)  # this plot has room for all
    for text in view._value_texts:
        box = text.sceneBoundingRect()
        assert not box.intersects(label) and inside.contains(box), text.toPlainText()


def test_a_low_cublas_line_keeps_its_label_inside_the_plot(qtbot, views, session):
    """Against the Tensor Core peak, cuBLAS fp16 at an odd size sits low in the plot; its label
    goes above the line there, where it was drawn below it, under the axis."""
    view = views[ThroughputView]
    view.resize(420, 620)
    view.show()
    qtbot.waitExposed(view)
    trace = simulate("wmma", 1000, 777, 336, level=1)
    peak, _ = peak_gflops(trace.manifest["device"], trace.dtype)
    assert trace.manifest["stats"]["cublas_gflops"] < 0.2 * peak
    session.set_trace(trace)
    session.add_run(RunPoint.from_trace(trace))
    qtbot.waitUntil(lambda: view.runs_plot.getViewBox().height() > 100)
    qtbot.wait(50)
    label = view.cublas_line.label.sceneBoundingRect()
    inside = view.runs_plot.getViewBox().sceneBoundingRect()
    assert view.cublas_line.isVisible() and inside.contains(label)
    line_y = view.runs_plot.getViewBox().mapViewToScene(QPointF(0, view.cublas_line.value())).y()
    assert label.bottom() <= line_y + 0.5  # above its line


@pytest.mark.parametrize(
    "name",
    [
        "register_tiling_2d_bm64_bn64_bk16_tm8_tn4_1024.mvz",  # shared memory near the peak
        "warp_tiling_bm128_bn128_bk16_wm64_wn64_wni4_p4_1024.mvz",  # issue near the peak
        "register_tiling_1d_bm64_bn64_bk8_tm8_1024.mvz",  # all three apart
        "async_pipeline_bm128_bn128_bk16_tm8_tn8_s3_p0_x1_1024.mvz",  # three within 16,000
    ],
)
@pytest.mark.parametrize(
    ("view_height", "plot_px"),
    [(640, 175), (470, 110)],  # the rate plot as in the 1280x720 (182 px), 1920x1080 (118) window
    ids=["1280x720", "1920x1080"],
)
def test_the_rate_plots_reference_labels_stay_apart_in_a_short_plot(
    qtbot, views, session, name, view_height, plot_px
):
    """The FLOP-rate plot as high as at 1280x720 or in the 1920x1080 window's corner: the
    peak's, the issue and the shared-memory labels meet no other label and no other line,
    inside the plot."""
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    view = views[ThroughputView]
    view.resize(420, view_height)
    view.show()
    qtbot.waitExposed(view)
    session.set_trace(load_trace(TRACE_DIR / name))
    box = view.rate_plot.getViewBox()
    qtbot.waitUntil(lambda: box.height() > plot_px)
    qtbot.wait(50)
    lines = [ln for ln in (view.rate_peak_line, view.rate_issue_line, view.rate_ceiling_line)
             if ln.isVisible()]  # fmt: skip
    assert len(lines) >= 2
    inside = box.sceneBoundingRect()
    for line in lines:
        label = line.label.sceneBoundingRect()  # inside the plot, top to bottom
        assert inside.top() <= label.top() and label.bottom() <= inside.bottom(), line.label.format
        for other in lines:
            if other is line:
                continue
            assert not label.intersects(other.label.sceneBoundingRect())
            y = box.mapViewToScene(QPointF(0, other.value())).y()
            assert not label.top() < y < label.bottom(), (line.label.format, other.label.format)


def _plot_texts(view) -> list[str]:
    """Axis labels, titles and tick labels of every plot of ``view`` (pyqtgraph items)."""
    import pyqtgraph as pg

    texts = []
    for item in view.findChildren(pg.GraphicsView):
        for obj in item.scene().items():
            if isinstance(obj, pg.PlotItem):
                if obj.titleLabel.text:
                    texts.append(obj.titleLabel.text)
                for name in ("left", "bottom"):
                    axis = obj.getAxis(name)
                    if axis.isVisible() and axis.labelText:
                        texts.append(axis.labelText)
                    for level in axis._tickLevels or ():
                        texts += [str(t) for _, t in level]
    return texts


def test_plot_labels_are_translated(qtbot, views, session):
    session.set_trace(sim("tiled", 256, 16, 1))
    session.add_run(RunPoint.from_trace(session.trace))
    mine = (GridView, TilesView, BanksView, ThroughputView)
    english = {cls: _plot_texts(views[cls]) for cls in mine}
    i18n.set_language("zh_CN")
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for cls in mine:
        qtbot.waitUntil(lambda c=cls: _plot_texts(views[c]) != english[c])
        for before, after in zip(english[cls], _plot_texts(views[cls]), strict=False):
            words = set(re.findall(r"[A-Za-z]{3,}", before.replace("(sim)", "")))
            words -= {"GFLOP", "FLOP", "blockIdx", "cuBLAS", "SGEMM", "tiled"}
            if words:  # English words: the Chinese label says them in Chinese
                assert cjk.search(after), (cls.__name__, before, after)


def test_banks_explains_what_the_swizzle_changes(views, session):
    """Kernel 06's transposed stores: the swizzle spreads a 2-way conflict over 32 banks, and
    the view names an element by its own column and the column it is stored at."""
    session.set_trace(simulate("vectorized", 256, 256, 256, BM=64, BN=64, BK=8, TN=4,
                               pad=0, swizzle=1))  # fmt: skip
    banks = views[BanksView]
    note = banks.note.text()
    assert "What the swizzle (P0 X1) changes against P0 X0" in note
    assert "As[k][m] → As[k][m ^ ((k/4) mod 2)·16]" in note
    assert "st_As: 2-way → 1-way, 8 → 4 wavefronts" in note
    config = session.trace.config
    row4 = config.array_bases["As"] + 4 * config.array("As").stride * 4  # As[4][0]'s row start
    assert banks.word_name(row4 // 4) == "As[4][16] at column 0"  # row 4: columns ^ 16
    assert banks.word_name(row4 // 4 + 16) == "As[4][0] at column 16"
    assert banks.word_name(config.array_bases["As"] // 4 + 3) == "As[0][3]"  # row 0: unmoved


def test_banks_plain_layout_is_compared_with_the_first_other_one(views, session):
    session.set_trace(simulate("vectorized", 256, 256, 256, BM=64, BN=64, BK=16, TN=4,
                               pad=0, swizzle=0))  # fmt: skip
    note = views[BanksView].note.text()
    assert "What PAD 4 changes against PAD 0" in note and "st_As: 4-way → 2-way" in note


@pytest.mark.parametrize(("kernel", "params", "per_thread", "warp_tile"), [
    ("tiled", {"tile": 16}, (1, 1), (2, 16)),
    ("register_tiling_1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 8}, (8, 1), (8, 32)),
    ("register_tiling_2d", {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 4}, (8, 4), (16, 64)),
    ("vectorized", {}, (8, 8), (16, 128)),
    ("warp_tiling", {"WNITER": 1}, (8, 4), (64, 64)),
])  # fmt: skip
def test_tiles_show_each_threads_micro_tile_and_each_warps_tile(
    views, session, kernel, params, per_thread, warp_tile
):
    trace = simulate(kernel, 256, 256, 64, **params)
    session.set_trace(trace)
    tiles = views[TilesView]
    rows, cols = trace.config.launch.c_tile
    image = tiles.images["tile"].image
    assert image.shape == (rows, cols)
    pieces = len(c_tile.pieces(tiles.owner, 0))
    assert (image == 3).sum() == pieces * per_thread[0] * per_thread[1]  # thread 0's elements
    assert f"{per_thread[0]}×{per_thread[1]} per thread" in tiles.panels["tile"].titleLabel.text
    assert (pieces > 1) == (f"{pieces} × " in tiles.panels["tile"].titleLabel.text)
    # a click on an element of the tile selects the thread that computes it
    r, c = rows - 1, cols - 1
    vb = tiles.panels["tile"].getViewBox()
    scene = vb.mapViewToScene(QPointF(c + 0.5, r + 0.5))

    class Click:
        def scenePos(self):
            return scene

    tiles._on_click(Click())
    assert tiles.thread == trace.config.threads - 1  # the last thread computes the last element
    assert (tiles.images["tile"].image == 3)[r, c]
    assert "warp" in tiles.describe_tile(r, c) and f"lane {(trace.config.threads - 1) % 32}" in (
        tiles.describe_tile(r, c)
    )
    assert {box[2:] for box in c_tile.warp_tiles(tiles.owner).values()} == {warp_tile}


@pytest.mark.parametrize("width", [320, 420, 600])
@pytest.mark.parametrize("language", ["en", "zh_CN"])
@pytest.mark.parametrize("kernel", ["tiled", "wmma"])
def test_a_narrow_throughput_view_keeps_its_plots_inside(qtbot, session, language, kernel, width):
    """At 1280 x 720 the throughput view is about 420 px wide: its plots' titles wrap rather
    than push the plots past the canvas's right edge, where the peak's value was cut off."""
    i18n.set_language(language)
    params = {"tile": 32, "pad": 0} if kernel == "tiled" else {}
    session.set_trace(simulate(kernel, 256, 256, 256, level=1, **params))
    view = ThroughputView(session)
    qtbot.addWidget(view)
    view.resize(width, 600)
    view.show()
    qtbot.waitExposed(view)
    needed = view.canvas.ci.effectiveSizeHint(Qt.MinimumSize).width()
    assert needed <= view.canvas.width(), (needed, view.canvas.width())


@pytest.mark.parametrize("width", [700, 900])
@pytest.mark.parametrize("kernel", ["tiled", "wmma"])
def test_the_tiles_view_keeps_its_panels_inside(qtbot, session, kernel, width):
    """Its C-tile title ('its C tile (32×32): 1×1 per thread') wraps to its column instead of
    pushing the shared arrays' panels past the canvas's right edge (the README screenshot)."""
    params = {"tile": 32, "pad": 0} if kernel == "tiled" else {}
    session.set_trace(simulate(kernel, 256, 256, 256, level=3, **params))
    view = TilesView(session)
    qtbot.addWidget(view)
    view.resize(width, 600)
    view.show()
    qtbot.waitExposed(view)
    qtbot.waitUntil(lambda: not view._wrap_timer.isActive())
    needed = view.canvas.ci.effectiveSizeHint(Qt.MinimumSize).width()
    assert needed <= view.canvas.width(), (needed, view.canvas.width())


def test_a_ring_of_slots_shows_every_k_step_in_flight(views, session):
    """Kernel 11 at k-step t: its slot holds step t, the other three slots t + 1 .. t + 3, the
    copies issued ahead (a pale tint); one k-step at a time (tiled) has no ring."""
    from matviz.app.views import tiles_view as tv
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    trace = load_trace(TRACE_DIR / "wgmma_tma_bm128_bn256_bk64_s4_bf1_1024.mvz")
    session.set_trace(trace)
    session.select_block(trace.block_index(1, 2))
    session.set_playhead(mid(trace))
    tiles = views[TilesView]
    t, stages = tiles.ktile, trace.config.p.STAGES
    assert 0 < t < trace.n_tiles - stages
    codes = tiles.cell_codes("As")
    for u in range(t, t + stages):
        first = u % stages * 128
        want = f"A[256,{64 * u}]"
        assert tiles.labels["As"].texts[first][0] == want == tiles.element("As", first, 0)
        assert (codes[first] == tv.RING_CODE).all() == (u != t)
    assert "a slot of another k-tile in flight" in tiles.describe("As", (t + 1) % stages * 128, 0)
    session.set_trace(sim())
    assert views[TilesView].ring == {}


@pytest.mark.parametrize("kernel", ["tiled", "register_tiling_1d", "async_pipeline", "wgmma_tma"])
def test_cell_labels_size_their_font_without_making_the_texts(kernel):
    """The tiles view hands its labels the longest text up front and the texts only when a
    paint can show them: the length must be that of the texts it stands for (edge blocks hold
    '0' cells, a ring of slots the k-steps in flight)."""
    from matviz.app.views.shared_cells import held_cells, in_flight_cells
    from matviz.core.registry import get_kernel

    k = get_kernel(kernel)
    config = k.configure(k.default_params(), 1000, 777, 336, check=False)
    for block in ((0, 0), (config.grid[0] - 1, config.grid[1] - 1)):
        for t in (0, config.n_steps - 1):
            ring = in_flight_cells(config, block, t)
            for name, cells in held_cells(config, block, t).items():
                shown = cells.over(ring[name]) if name in ring else cells
                longest = max((len(x) for row in shown.texts() for x in row), default=0)
                assert shown.longest_text() == longest, (block, t, name)


@pytest.mark.parametrize(
    "name, shown",
    [
        ("tiled_t32_p0_1024.mvz", True),
        ("tiled_transposed_t32_p0_1024.mvz", True),
        ("naive_t16_1024.mvz", False),  # no shared memory
        ("warp_tiling_bm128_bn128_bk16_wm64_wn64_wni4_p4_1024.mvz", False),  # above the peak
    ],
)
def test_the_rate_plot_marks_what_shared_memory_alone_allows(views, session, name, shown):
    from matviz.core.ceilings import shared_ceiling
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    view = views[ThroughputView]
    session.set_trace(load_trace(TRACE_DIR / "register_tiling_2d_bm64_bn64_bk16_tm8_tn4_1024.mvz"))
    assert view.rate_ceiling_line.isVisible()  # 89% of the peak
    trace = load_trace(TRACE_DIR / name)
    session.set_trace(trace)  # the line follows the current trace
    line = view.rate_ceiling_line
    assert line.isVisible() == shown
    if shown:
        ceiling = shared_ceiling(trace.config, trace.manifest["device"]).gflops
        assert line.value() == pytest.approx(ceiling)
        assert f"{ceiling:,.0f} GFLOP/s" in line.label.format
        # the run's rate stays under it (the curve may cross it for a moment: it counts a
        # step's FLOP while the step computes, and the ceiling its stores too)
        assert trace.manifest["stats"]["gflops"] < ceiling


@pytest.mark.parametrize(
    "name, shown",
    [
        ("naive_t16_1024.mvz", True),  # no shared memory, but a k loop of FFMA
        ("warp_tiling_bm128_bn128_bk16_wm64_wn64_wni4_p4_1024.mvz", True),
        ("wmma_bm128_bn128_bk32_w32_p8_1024.mvz", False),  # Tensor Cores: issue does not bind
    ],
)
def test_the_rate_plot_marks_what_issuing_the_k_loop_allows(views, session, name, shown):
    from matviz.core.ceilings import issue_ceiling
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    view = views[ThroughputView]
    trace = load_trace(TRACE_DIR / name)
    session.set_trace(trace)
    line = view.rate_issue_line
    assert line.isVisible() == shown
    if shown:
        issue = issue_ceiling(trace.config, trace.manifest["device"])
        assert line.value() == pytest.approx(issue.gflops) and issue.gflops < view.peak
        assert f"{issue.gflops:,.0f} GFLOP/s" in line.label.format
        assert trace.manifest["stats"]["gflops"] < issue.gflops


def test_gflops_axes_write_thousands_not_exponents(views):
    """A Tensor Core trace's GFLOP/s reach a million: the axes read 500k and 1M, not
    pyqtgraph's 500000 and 1e+06 (which it writes once SI prefixes are off)."""
    view = views[ThroughputView]
    for plot in (view.runs_plot, view.rate_plot):
        axis = plot.getAxis("left")
        assert axis.tickStrings([0.0, 500_000.0, 1_000_000.0], 1.0, 500_000.0) == [
            "0", "500k", "1M"]  # fmt: skip
        assert axis.tickStrings([0.0, 12_500.0, 67_500.0], 1.0, 12_500.0) == [
            "0", "12.5k", "67.5k"]  # fmt: skip


@pytest.mark.parametrize("size", [(420, 620), (420, 470), (600, 700)])
def test_the_cublas_label_hides_no_run(qtbot, views, session, size):
    """Each bundled 1024³ recording as the only run: its point is not under the cuBLAS label,
    which is drawn on top of the points (kernel 10's sat under it, at the plot's left)."""
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    view = views[ThroughputView]
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    for path in sorted(TRACE_DIR.glob("*.mvz")):
        trace = load_trace(path)
        session.runs.clear()
        session.set_trace(trace)
        session.add_run(RunPoint.from_trace(trace))
        qtbot.waitUntil(lambda: view.runs_plot.getViewBox().height() > 60)
        qtbot.wait(20)
        box = view.runs_plot.getViewBox()
        point = box.mapViewToScene(QPointF(0, session.plotted_runs[0].gflops))
        label = view.cublas_line.label.sceneBoundingRect().adjusted(-6, -6, 6, 6)  # the symbol
        assert view.cublas_line.isVisible(), path.name
        assert not label.contains(point), path.name
        assert box.sceneBoundingRect().contains(view.cublas_line.label.sceneBoundingRect())


@pytest.mark.parametrize("cls", VIEW_CLASSES)
def test_a_deleted_view_leaves_no_error(qtbot, session, cls):
    """A view deleted after a language switch resizes its plots' axes on the way out; an axis
    that fits its tick labels to its height must not reach its deleted self then (a
    RuntimeError from a slot fails the test: the grid's and the lanes' did)."""
    import shiboken6
    from PySide6.QtCore import QCoreApplication, QEvent

    view = cls(session)
    view.resize(900, 600)
    session.set_trace(sim())
    i18n.set_language("zh_CN")
    qtbot.wait(10)
    i18n.set_language("en")
    QCoreApplication.processEvents()
    view.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    assert not shiboken6.isValid(view)
    qtbot.wait(10)

"""The errors view: where C is wrong, why (a deliberately broken parameter, from the kernel's
description) and what the probed warp read from shared memory, k-tile by k-tile.

Traces are simulated and their correctness data replaced, so the tests do not depend on the
simulator's race model.
"""

from __future__ import annotations

import copy
import dataclasses
from functools import cache

import imageio.v3 as iio
import numpy as np
import pytest
from PySide6.QtCore import QPointF, QRectF, QSettings

from matviz import cli
from matviz.app import i18n
from matviz.app.main_window import MEMORY_TABS, MainWindow
from matviz.app.runner import Runner
from matviz.app.session import Session
from matviz.app.views import correctness_view as cv
from matviz.app.views.correctness_view import CorrectnessView
from matviz.backends.contract import RunRequest, run
from matviz.core import correctness as cr
from matviz.core.config import KernelConfig
from matviz.core.trace import Trace
from matviz.core.trace_io import save_trace

WRONG_TILE = (2, 1)  # block (bx, by) whose whole C tile is wrong


@cache
def simulated(kernel: str = "tiled", level: int = 3, **params) -> Trace:
    params = params or {"tile": 16, "drop_sync": 1}
    return run(RunRequest(kernel, 256, 256, 256, params=params, level=level))


def load_rows(trace: Trace, array: str) -> list[int]:
    probe = trace.probe
    return [i for i, r in enumerate(probe) if r["kind"] == "load" and r["site"] == f"ld_{array}"]


def with_errors(trace: Trace | None = None, *, wrong: bool = True) -> Trace:
    """``trace`` (default: tiled T16, drop_sync=1) with one wrong C tile and known reads:
    k-tile 0: lanes 0-15 of the first 3 loads of As read before it was written;
    k-tile 1: lanes 8-19 of the first 2 loads of Bs read after it was overwritten."""
    trace = trace or simulated()
    c_wrong = np.zeros_like(trace.c_wrong)
    if wrong:
        bx, by = WRONG_TILE
        c_wrong[by * 16 : (by + 1) * 16, bx * 16 : (bx + 1) * 16] = 1
    stale = np.where(trace.stale != cr.UNCHECKED, cr.CURRENT, cr.UNCHECKED).astype(np.int8)
    stale[0, load_rows(trace, "As")[:3], :16] = cr.BEFORE_WRITTEN
    stale[1, load_rows(trace, "Bs")[:2], 8:20] = cr.OVERWRITTEN
    manifest = copy.deepcopy(trace.manifest)
    manifest["correctness"].update(
        wrong=int(c_wrong.sum()), max_abs_error=0.83 if wrong else 3e-5,
        stale_reads=cr.read_counts(stale),
    )  # fmt: skip
    return dataclasses.replace(trace, manifest=manifest, c_wrong=c_wrong, stale=stale)


@pytest.fixture
def view(qtbot):
    session = Session()
    widget = CorrectnessView(session)
    qtbot.addWidget(widget)
    widget.resize(1000, 700)
    widget.show()
    qtbot.waitExposed(widget)
    yield widget
    i18n.set_language("en")


def show(qtbot, view, trace: Trace) -> None:
    view.session.set_trace(trace)
    qtbot.wait(10)  # layouts settle: the map fits its pixels


def time_in_ktile(trace: Trace, block: int, ktile: int) -> int:
    """A playhead at which ``block`` works on ``ktile``."""
    from matviz.core.timeline import Timeline

    timeline = Timeline(trace)
    b = trace.blocks[block]
    for t in np.linspace(int(b["start"]), int(b["end"]), 400).astype(np.int64):
        if timeline.block_phase(block, int(t))[1] == ktile:
            return int(t)
    raise AssertionError(f"block {block} never on k-tile {ktile}")


def read_cell(trace: Trace, row: int, lane: int) -> tuple[str, int, int]:
    """(array, row, col) that ``lane`` read at probe row ``row``, from the recorded offsets."""
    offset = int(trace.probe[row]["offsets"][lane])
    for arr in trace.config.shared:
        base = trace.config.array_bases[arr.name]
        if base <= offset < base + arr.nbytes:
            return (arr.name, *divmod((offset - base) // arr.elem_bytes, arr.stride))
    raise AssertionError(offset)


def pixel(view, array: str, r: int, c: int) -> tuple[int, int, int]:
    """The colour the user sees at the centre of cell [r][c] of a shared array's grid."""
    vb = view.panels[array].getViewBox()
    scene = vb.mapViewToScene(QPointF(c + 0.5, r + 0.5))
    at = view.canvas.mapFromScene(scene)
    image = view.canvas.grab().toImage()
    colour = image.pixelColor(at.x(), at.y())
    return colour.red(), colour.green(), colour.blue()


# -- the map of C ------------------------------------------------------------------------------
def test_the_map_shows_the_wrong_cells_where_they_are_in_c(qtbot, view):
    trace = with_errors()
    show(qtbot, view, trace)
    assert view.stack.currentIndex() == 1 and view.pool == 1
    drawn = view.image.image
    assert drawn.shape == (256, 256)
    rows, cols = np.nonzero(drawn)
    bx, by = WRONG_TILE
    assert set(rows) == set(range(by * 16, by * 16 + 16))
    assert set(cols) == set(range(bx * 16, bx * 16 + 16))
    # the image lies over C in element units: row 0 at the top, one cell one element
    rect = view.image.mapRectToParent(view.image.boundingRect())
    assert rect == QRectF(0, 0, 256, 256) and view.image.getViewBox().yInverted()
    lut = view.image.lut
    assert tuple(lut[0][:3]) == cv.CALM  # nothing wrong: the calm colour
    assert tuple(lut[int(drawn[by * 16, bx * 16])][:3]) != cv.CALM


def test_a_lone_wrong_cell_survives_a_small_map(qtbot, view):
    trace = with_errors(wrong=False)
    trace.c_wrong[201, 77] = 1  # one element of 65536
    view.resize(420, 420)  # the map gets fewer pixels than C has columns
    show(qtbot, view, trace)
    qtbot.waitUntil(lambda: view.pool > 1)
    drawn = view.image.image
    assert drawn.shape[0] < 256 and np.count_nonzero(drawn) == 1
    r, c = np.argwhere(drawn)[0]
    assert (r, c) == (201 // view.pool, 77 // view.pool)


def test_the_selected_block_tile_is_outlined(qtbot, view):
    trace = with_errors()
    show(qtbot, view, trace)
    view.session.select_block(trace.block_index(*WRONG_TILE))
    assert view.outline.rect() == QRectF(32, 16, 16, 16)
    view.session.select_block(trace.block_index(15, 15))
    assert view.outline.rect() == QRectF(240, 240, 16, 16)


def test_larger_cells_count_elements_per_cell(qtbot, view):
    trace = with_errors(wrong=False)
    c_wrong = np.zeros((64, 64), np.uint32)
    c_wrong[10, 20] = 16  # the whole 4x4 cell
    c_wrong[11, 20] = 1
    manifest = copy.deepcopy(trace.manifest)
    manifest["correctness"].update(cell=[4, 4], wrong=17, max_abs_error=0.5)
    show(qtbot, view, dataclasses.replace(trace, manifest=manifest, c_wrong=c_wrong))
    rect = view.image.mapRectToParent(view.image.boundingRect())
    assert rect == QRectF(0, 0, 256, 256)
    drawn = view.image.image
    assert drawn[10, 20] == 255 and 0 < drawn[11, 20] < 40  # all wrong: darkest; one: light
    assert "one cell = 4×4 elements of C" in view.map_legend.text()


# -- the summary -------------------------------------------------------------------------------
def test_the_summary_counts_the_wrong_elements(qtbot, view):
    show(qtbot, view, with_errors())
    text = view.summary.text()
    assert "256 of 65,536 elements of C are wrong (more than 0.0016 from float64)" in text
    assert "largest error 0.83" in text
    assert "simulated" in text  # where the data came from
    show(qtbot, view, with_errors(wrong=False))
    text = view.summary.text()
    assert "Every element of C is within 0.0016 of float64 (largest error 3e-05)" in text
    assert "are wrong" not in text
    assert "none showed in this run" in text  # broken, yet right this time


def test_a_recorded_trace_says_where_c_was_checked(qtbot, view):
    trace = with_errors()
    manifest = copy.deepcopy(trace.manifest)
    manifest["backend"] = "cuda"
    manifest["correctness"]["checked"] = "the level-0 kernel (uninstrumented)"
    show(qtbot, view, dataclasses.replace(trace, manifest=manifest))
    text = view.summary.text()
    assert "simulated" not in text and "recorded on" in text
    assert "C checked: the level-0 kernel (uninstrumented)" in text


def test_the_broken_line_comes_from_the_description(qtbot, view):
    show(qtbot, view, with_errors())
    text = view.summary.text()
    assert "Deliberately broken: drop_sync = 1 leaves out barrier 1" in text
    assert "barrier 2" not in text  # only what value 1 does
    two = with_errors(simulated(tile=16, drop_sync=2))
    show(qtbot, view, two)
    assert "drop_sync = 2 leaves out barrier 2" in view.summary.text()
    show(qtbot, view, with_errors(simulated(tile=16, pad=0)))  # a correct kernel
    assert "Deliberately broken" not in view.summary.text()


def _with_help(trace: Trace, help_text: str) -> Trace:
    """``trace`` whose kernel describes drop_sync with ``help_text`` (a kernel the view has
    never seen: its texts must come from the description)."""
    kernel = trace.config.kernel
    params = tuple(
        dataclasses.replace(p, help=help_text) if p.name == "drop_sync" else p
        for p in kernel.params
    )
    other = dataclasses.replace(kernel, params=params)
    trace = dataclasses.replace(trace, manifest=copy.deepcopy(trace.manifest))
    trace.__dict__["config"] = KernelConfig(other, trace.params, *trace.shape)
    return trace


def test_a_new_description_needs_no_view_edit(qtbot, view):
    trace = _with_help(with_errors(), "broken on purpose: 1 skips the first wait, 2 the second")
    show(qtbot, view, trace)
    text = view.summary.text()
    assert "Deliberately broken: drop_sync = 1 skips the first wait." in text
    assert "second" not in text
    show(qtbot, view, _with_help(with_errors(), "no barrier after the loads"))
    assert "drop_sync = 1 (no barrier after the loads)" in view.summary.text()


def test_value_clause_reads_english_and_chinese_punctuation():
    help_en = "deliberately broken: 1 leaves out barrier 1 (a, b), 2 leaves out barrier 2 (c)"
    assert cv.value_clause(help_en, 1, (1, 2)) == "leaves out barrier 1 (a, b)"
    assert cv.value_clause(help_en, 2, (1, 2)) == "leaves out barrier 2 (c)"
    help_zh = "故意破坏：1 去掉第 1 个同步（甲），2 去掉第 2 个同步"
    assert cv.value_clause(help_zh, 2, (1, 2)) == "去掉第 2 个同步"
    assert cv.value_clause("skip the barrier", 1, (1,)) is None


# -- the probed warp's reads -------------------------------------------------------------------
def _check_cells(view, trace: Trace, ktile: int) -> None:
    """Every read of ``stale[ktile]`` is drawn in its cell, in the worst outcome of that cell;
    every coloured cell was read."""
    expected: dict[tuple[str, int, int], int] = {}
    for row in range(len(trace.probe)):
        if trace.probe[row]["kind"] != "load":
            continue
        for lane in range(32):
            code = int(trace.stale[ktile, row, lane])
            if code == cr.UNCHECKED:
                continue
            cell = read_cell(trace, row, lane)
            if cv.RANK[code] > cv.RANK[expected.get(cell, cr.UNCHECKED)]:
                expected[cell] = code
    drawn = {
        (name, int(r), int(c)): int(codes[r, c])
        for name, codes in view.cells.items()
        for r, c in zip(*np.nonzero((codes != cv.UNREAD) & (codes != cv.PAD)), strict=True)
    }
    assert drawn == expected
    for name, codes in view.cells.items():
        assert np.array_equal(view.images[name].image, codes)


def test_the_reads_follow_the_probed_block_k_tile(qtbot, view):
    trace = with_errors()
    show(qtbot, view, trace)
    block = view.probe_key()[0]
    view.session.set_playhead(time_in_ktile(trace, block, 0))
    assert (view.ktile, view.follows) == (0, True)
    _check_cells(view, trace, 0)
    assert view.counts[cr.BEFORE_WRITTEN] == 3 * 16 and view.counts[cr.OVERWRITTEN] == 0
    r, c = read_cell(trace, load_rows(trace, "As")[0], 0)[1:]
    assert view.cells["As"][r, c] == cr.BEFORE_WRITTEN
    assert pixel(view, "As", r, c) == cv.READ_COLORS[cr.BEFORE_WRITTEN]
    legend = view.reads_legend.text()
    assert "read before it was written (the previous value): <b>48</b>" in legend
    assert "k-tile t = 0 of 16" in view.reads_title.text()

    view.session.set_playhead(time_in_ktile(trace, block, 1))  # the next k-tile
    assert (view.ktile, view.follows) == (1, True)
    _check_cells(view, trace, 1)
    assert view.counts[cr.BEFORE_WRITTEN] == 0 and view.counts[cr.OVERWRITTEN] == 2 * 12
    assert view.cells["As"][r, c] == cr.CURRENT
    assert pixel(view, "As", r, c) == cv.READ_COLORS[cr.CURRENT]
    rb, cb = read_cell(trace, load_rows(trace, "Bs")[0], 8)[1:]
    assert pixel(view, "Bs", rb, cb) == cv.READ_COLORS[cr.OVERWRITTEN]
    assert "k-tile t = 1 of 16" in view.reads_title.text()
    assert "(24)" in view.reads_legend.text()  # in all recorded k-tiles


def test_outside_the_probed_block_the_probed_k_tile_is_shown(qtbot, view):
    trace = with_errors()
    show(qtbot, view, trace)
    view.session.set_playhead(time_in_ktile(trace, view.probe_key()[0], 1))
    view.session.set_playhead(view.session.duration_ns)  # the probed block is done
    assert view.ktile == view.probe_key()[2] and not view.follows
    assert "outside the probed block" in view.reads_title.text()
    _check_cells(view, trace, view.ktile)


def test_k_tiles_the_probe_did_not_keep(qtbot, view):
    trace = with_errors()
    kept = dataclasses.replace(trace, stale=trace.stale[:1].copy())
    show(qtbot, view, kept)
    view.session.set_playhead(time_in_ktile(kept, view.probe_key()[0], 3))
    assert view.ktile == 3 and view.canvas.isHidden() and not view.reads_note.isHidden()
    assert "first 1 k-tiles" in view.reads_note.text()


# -- empty states ------------------------------------------------------------------------------
def test_empty_states(qtbot, view):
    assert view.stack.currentIndex() == 0 and view.placeholder.text() == "No trace loaded"
    old = with_errors()
    manifest = copy.deepcopy(old.manifest)
    del manifest["correctness"]
    old = dataclasses.replace(
        old, manifest=manifest, c_wrong=np.zeros((0, 0), np.uint32),
        stale=np.zeros((0, 0, 32), np.int8),
    )  # fmt: skip
    show(qtbot, view, old)  # made before correctness data existed
    assert view.stack.currentIndex() == 0 and "record it again" in view.placeholder.text()

    show(qtbot, view, simulated(level=1, tile=16, pad=0))  # no probe
    assert view.stack.currentIndex() == 1 and view.canvas.isHidden()
    assert "Record at level 3 to see what the warp read" in view.reads_note.text()
    assert not view.reads_note.isHidden() and "Every element of C" in view.summary.text()

    show(qtbot, view, simulated("naive", tile=16))  # no shared memory
    assert view.canvas.isHidden() and "reads no shared memory" in view.reads_note.text()


# -- language ----------------------------------------------------------------------------------
def test_chinese(qtbot, view):
    show(qtbot, view, with_errors())
    view.session.set_playhead(time_in_ktile(view.session.trace, view.probe_key()[0], 0))
    english = view.summary.text()
    i18n.set_language("zh_CN")
    qtbot.waitUntil(lambda: view.summary.text() != english)
    text = view.summary.text()
    assert "C 的 65,536 个元素中有 256 个错误元素" in text and "容差 0.0016" in text
    assert "故意破坏：drop_sync = 1 去掉第 1 个同步" in text and "屏障" not in text
    legend = view.reads_legend.text()
    assert "写入前读取" in legend and "覆盖后读取" in legend
    assert "正确性" in view.title.text() and "被探测的 warp" in view.reads_title.text()
    show(qtbot, view, simulated(level=1, tile=16, pad=0))
    assert "level 3" in view.reads_note.text() and "记录" in view.reads_note.text()
    i18n.set_language("en")
    qtbot.waitUntil(lambda: "Correctness" in view.title.text())


def test_the_main_window_has_an_errors_tab(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat)
    window = MainWindow(with_errors(), settings=settings, runner=Runner(), load_default=False)
    qtbot.addWidget(window)
    try:
        assert "errors" in MEMORY_TABS
        index = window.memory_tabs.indexOf(window.views["errors"])
        assert index >= 0 and window.memory_tabs.tabText(index) == "Errors"
        window.show()
        window.bring_to_front("errors")
        assert window.memory_tabs.currentWidget() is window.errors_view
        assert window.errors_view.isVisible() and window.errors_view.stack.currentIndex() == 1
        i18n.set_language("zh_CN")
        qtbot.waitUntil(lambda: window.memory_tabs.tabText(index).startswith("错误元素"))
    finally:
        i18n.set_language("en")
        window.close()


# -- export ------------------------------------------------------------------------------------
def test_export_a_png_of_the_errors_view(tmp_path, capsys, closes_its_windows):
    path = tmp_path / "broken.mvz"
    save_trace(with_errors(), path)
    out = tmp_path / "errors.png"
    code = cli.main(
        ["export", str(path), "--view", "errors", "--at", "0.01", "--size", "640x360",
         "-o", str(out)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    image = iio.imread(out)[..., :3].astype(int)
    assert image.shape == (360, 640, 3)
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    assert np.count_nonzero((r > 120) & (g < 60) & (b < 60)) > 20  # the wrong tile, dark red
    orange = cv.READ_COLORS[cr.BEFORE_WRITTEN]
    near = np.abs(image - np.array(orange)).sum(axis=2) < 40
    assert np.count_nonzero(near) > 20  # reads before the tile was written


def test_a_run_with_wrong_elements_says_so_on_the_throughput_axis():
    from matviz.app.views.throughput_view import tick_label
    from matviz.core.runs import RunPoint
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    broken = RunPoint.from_trace(load_trace(TRACE_DIR / "tiled_t16_nosync1_1024.mvz"))
    fine = RunPoint.from_trace(load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz"))
    assert broken.wrong > 0 and "(C wrong)" in broken.label
    assert "(C wrong)" in tick_label(0, broken)
    assert fine.wrong == 0 and "(C wrong)" not in tick_label(0, fine) + fine.label


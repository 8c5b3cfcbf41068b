"""The fragment view (lesson 8 §20-23): which lane of a warp holds which element of the MMA
operands, read from the description or as measured on the GPU."""

from __future__ import annotations

import ast
import json
import re

import numpy as np
import pytest
from PySide6.QtCore import QPointF, QSettings, Qt
from PySide6.QtGui import QTextDocument

from matviz.app import i18n, main_window
from matviz.app.runner import Runner
from matviz.app.session import Session
from matviz.app.views import fragments_view as fv
from matviz.app.views.fragments_view import FragmentsView
from matviz.backends.contract import RunRequest, run

MEASURED = "Lanes measured on the GPU"
DESCRIBED = "Lanes from the kernel's description"


def simulate(kernel: str = "wmma", **params):
    return run(RunRequest(kernel, 256, 256, 256, params=params, level=3))


def described(trace) -> list[dict]:
    return trace.manifest["description"]["mma"]["fragments"]


def measure(trace, wrong: tuple[int, int, int, int] | None = None):
    """Fill ``trace.fragments`` as the fragment probe would: the described map, -1 past the
    last slot; ``wrong`` = (operand, lane, slot, element) puts one wrong entry in."""
    frags = described(trace)
    out = np.full((len(frags), 32, 32), -1, np.int16)
    for i, f in enumerate(frags):
        elements = np.asarray(f["elements"])
        out[i, :, : elements.shape[1]] = elements
    if wrong is not None:
        o, lane, slot, element = wrong
        out[o, lane, slot] = element
    trace.fragments = out
    trace.validate()
    return trace


def plain_text(html: str) -> str:
    """Rich text as a reader sees it: 'lane 5 … A (m,k) (1,2)0,8 (1,3)1,9 …'."""
    doc = QTextDocument()
    doc.setHtml(html)
    return doc.toPlainText()


def expected_owner(fragment: dict) -> np.ndarray:
    """(rows, cols): the lane the description gives each element; fails if two lanes share one."""
    owner = np.full((fragment["rows"], fragment["cols"]), -1)
    for lane, elements in enumerate(fragment["elements"]):
        for e in set(elements):
            r, c = divmod(e, fragment["cols"])
            assert owner[r, c] in (-1, lane), f"{fragment['operand']} ({r},{c}) held twice"
            owner[r, c] = lane
    return owner


@pytest.fixture
def view(qtbot):
    widget = FragmentsView(Session())
    qtbot.addWidget(widget)
    widget.resize(640, 420)
    yield widget
    i18n.set_language("en")


def show(qtbot, view: FragmentsView, trace) -> None:
    view.session.set_trace(trace)
    view.show()
    qtbot.waitExposed(view)


def click_cell(qtbot, view: FragmentsView, panel: int, r: int, c: int) -> None:
    vb = view.panels[panel].plot.getViewBox()
    at = view.canvas.mapFromScene(vb.mapViewToScene(QPointF(c + 0.5, r + 0.5)))
    qtbot.mouseClick(view.canvas.viewport(), Qt.LeftButton, pos=at)


# -- placeholders --------------------------------------------------------------------------------
def test_placeholder_without_trace_and_for_a_cuda_core_kernel(qtbot, view):
    assert view.stack.currentIndex() == 0 and view.placeholder.text() == "No trace loaded"
    show(qtbot, view, simulate("tiled", tile=16, pad=0))
    assert view.stack.currentIndex() == 0
    assert "CUDA cores (FFMA)" in view.placeholder.text()
    assert "no Tensor Core fragments" in view.placeholder.text()
    show(qtbot, view, simulate())  # and back to a Tensor Core kernel
    assert view.stack.currentIndex() == 1


# -- wgmma: C alone, the warpgroup's rows, the producer warps -----------------------------------
def test_a_wgmma_recording_shows_its_measured_accumulators_and_who_holds_none(qtbot, view):
    from matviz.core.trace_io import load_trace
    from matviz.paths import TRACE_DIR

    trace = load_trace(TRACE_DIR / "wgmma_tma_bm128_bn256_bk64_s4_bf1_1024.mvz")
    show(qtbot, view, trace)
    assert [op.name for op in view.operands] == ["C"] and view.measured
    c = view.operands[0]
    assert (c.rows, c.cols) == (16, 256) and (c.holders == 1).all()
    assert view.panels[0].plot.isVisible() and not view.panels[1].plot.isVisible()
    assert view.canvas.ci.layout.columnStretchFactor(1) == 0  # C takes the whole width
    assert view.warp_box.value() == 4  # the first warp that holds accumulators
    text = plain_text(view.summary.text())
    assert "A, B: the Tensor Cores read them straight from shared memory" in text
    assert "warp 4 (warp 0 of its warpgroup of 4) owns C rows 0–15, columns 0–255" in text
    view.warp_box.setValue(7)
    assert "warp 7 (warp 3 of its warpgroup of 4) owns C rows 48–63" in plain_text(
        view.summary.text()
    )
    view.warp_box.setValue(1)
    assert "Warp 1 issues no MMA: warps 0–3 copy the tiles" in plain_text(view.summary.text())


# -- the three grids -----------------------------------------------------------------------------
def test_each_element_is_owned_by_the_lane_the_description_names(qtbot, view):
    trace = simulate()
    ab_slots = 16
    show(qtbot, view, trace)
    assert view.stack.currentIndex() == 1
    frags = described(trace)
    assert [op.name for op in view.operands] == ["A", "B", "C"]
    assert [op.slots for op in view.operands] == [ab_slots, ab_slots, 8]
    for panel, fragment in zip(view.panels, frags, strict=True):
        owner = expected_owner(fragment)
        assert (owner >= 0).all()  # every element of a 16 x 16 operand has a lane
        np.testing.assert_array_equal(panel.operand.owner, owner)
        assert (panel.operand.holders == 1).all()
        np.testing.assert_array_equal(panel.image.image, owner)  # what is drawn, no lane picked
        assert panel.labels.texts[3][5] == str(owner[3, 5])  # the lane written in each cell
    # the axes of D = A B + C
    assert [panel.operand.axes for panel in view.panels] == [("m", "k"), ("k", "n"), ("m", "n")]
    assert "k × n" in view.panels[1].plot.titleLabel.text
    # fp16 WMMA keeps Volta's 16 slots for A and B, slots 8-15 repeating 0-7: one sentence
    assert "slots 8–15 repeat slots 0–7" in view.summary.text()
    assert "A float16" in view.summary.text() and "C float32" in view.summary.text()


def test_the_summary_reads_the_description(qtbot, view):
    trace = simulate()
    show(qtbot, view, trace)
    mma = trace.manifest["description"]["mma"]
    text = view.summary.text()
    assert f"<b>{mma['instruction']}</b> is <b>{mma['sass']}</b> on the Tensor Cores" in text
    assert "16 × 16 × 16 = 4096 multiply-adds" in text
    warps_m, warps_n = mma["warps"]
    assert view.warp_box.maximum() == trace.config.warps - 1 == warps_m * warps_n - 1
    view.warp_box.setValue(6)  # WARPS_N = 4, WT = 32: row 1, column 2 of the warp tiles
    assert "warp 6 owns C rows 32–63, columns 64–95 of the block's 128 × 128 tile" in (
        view.summary.text()
    )
    assert "2 × 2 fragments of 16 × 16" in view.summary.text()
    view.session.select_block(3)
    assert "In block 3, warp 6" in view.summary.text()


# -- one lane -------------------------------------------------------------------------------------
def test_a_lane_lights_up_exactly_its_elements_and_the_text_lists_them(qtbot, view):
    trace = simulate()
    show(qtbot, view, trace)
    assert view.lane == -1 and "Pick a lane" in view.lane_text.text()
    view.lane_box.setValue(5)
    html = view.lane_text.text()
    assert "<b>lane 5</b> (group 1, thread 1)" in html
    for panel, fragment in zip(view.panels, described(trace), strict=True):
        mine = np.zeros((16, 16), bool)
        for e in fragment["elements"][5]:
            mine[divmod(e, 16)] = True
        codes = panel.image.image
        np.testing.assert_array_equal(codes == 5, mine)  # lane 5 in its own colour
        assert (codes[~mine] >= 32).all()  # every other cell washed out
        box = panel.selected.path().boundingRect()
        rows, cols = np.nonzero(mine)
        assert (box.top(), box.left()) == (rows.min(), cols.min())
        assert (box.bottom(), box.right()) == (rows.max() + 1, cols.max() + 1)
        # each element, with the slots that hold it
        for e in dict.fromkeys(fragment["elements"][5]):
            slots = ",".join(str(s) for s, x in enumerate(fragment["elements"][5]) if x == e)
            r, c = divmod(e, 16)
            assert f"({r},{c})<sub>{slots}</sub>" in html
    # the lane's A elements (m16n8k16: rows g, g + 8; columns 2t, 2t + 1, + 8), slots 0,8 ...
    plain = plain_text(view.lane_text.text())
    assert "A (m,k) (1,2)0,8 (1,3)1,9 (9,2)2,10 (9,3)3,11 (1,10)4,12" in plain
    assert "B (k,n) (2,1)0,8 (3,1)1,9" in plain and "C (m,n) (1,2)0 (1,3)1" in plain
    view.set_lane(-1)
    assert all((panel.image.image < 32).all() for panel in view.panels)
    assert all(panel.selected.path().isEmpty() for panel in view.panels)


def test_clicking_a_cell_selects_the_lane_that_holds_it(qtbot, view):
    trace = simulate()
    show(qtbot, view, trace)
    owner = expected_owner(described(trace)[2])
    click_cell(qtbot, view, 2, 9, 4)  # C (9, 4): group 1, columns 4-5 -> thread 2
    assert view.lane == owner[9, 4] == 6
    assert "<b>lane 6</b>" in view.lane_text.text()
    assert view.describe(view.operands[2], 9, 4) == "C (m = 9, n = 4): lane 6, slots 2"
    assert view.describe(view.operands[0], 9, 2) == "A (m = 9, k = 2): lane 5, slots 2, 10"
    click_cell(qtbot, view, 1, 0, 3)  # B (0, 3): another lane
    assert view.lane == expected_owner(described(trace)[1])[0, 3] == 12
    click_cell(qtbot, view, 1, 0, 3)  # the same lane again: none
    assert view.lane == -1


# -- measured or described -------------------------------------------------------------------------
def test_the_source_line_says_measured_or_described(qtbot, view):
    trace = simulate()
    show(qtbot, view, trace)
    assert DESCRIBED in view.source.text() and "simulated" in view.source.text()
    assert MEASURED not in view.source.text()
    measure(trace)
    show(qtbot, view, trace)
    assert MEASURED in view.source.text() and DESCRIBED not in view.source.text()
    assert "exactly as the description says" in view.source.text()
    assert all(not op.mismatches() for op in view.operands)
    assert all(panel.wrong.path().isEmpty() for panel in view.panels)
    assert "“+”" not in view.legend.text()  # every element has one lane
    assert "#d62728" not in view.source.text() + view.summary.text()  # nothing in red


def test_a_wrong_measured_entry_is_flagged_in_red(qtbot, view):
    trace = simulate()
    described_e = described(trace)[2]["elements"][5][1]  # C, lane 5, slot 1: (1, 3)
    assert divmod(described_e, 16) == (1, 3)
    measure(trace, wrong=(2, 5, 1, 4 * 16 + 13))  # the GPU put (4, 13) there
    show(qtbot, view, trace)
    red = fv.palette.hexcolor(fv.WRONG_COLOR)
    assert MEASURED in view.source.text() and red in view.source.text()
    assert "lane/slot entries that differ from the description: 1 (red)" in view.source.text()
    assert view.operands[2].mismatches() == [(5, 1, 77, 19)]
    assert "C lane 5 slot 1 holds (4,13), described (1,3)" in view.summary.text()
    assert red in view.summary.text()
    # both cells outlined in red in C, nothing in A and B
    box = view.panels[2].wrong.path().boundingRect()
    assert (box.left(), box.top(), box.right(), box.bottom()) == (3, 1, 14, 5)
    assert view.panels[0].wrong.path().isEmpty() and view.panels[1].wrong.path().isEmpty()
    # the measured map is the one drawn: (4, 13) now has two lanes, (1, 3) none
    c = view.operands[2]
    assert c.owner[1, 3] == -1 and c.holders[4, 13] == 2
    assert view.panels[2].labels.texts[4][13].endswith("+") and "“+”" in view.legend.text()
    view.set_lane(5)
    assert f'<span style="color:{red}">(4,13)<sub>1</sub></span>' in view.lane_text.text()


def test_a_trace_without_a_measurement_from_the_gpu(qtbot, view):
    trace = simulate()
    trace.manifest["backend"] = "cuda"  # a recording below level 3: no fragment probe
    show(qtbot, view, trace)
    assert DESCRIBED in view.source.text() and "record at level 3" in view.source.text()


# -- language, registration -----------------------------------------------------------------------
def test_chinese(qtbot, view):
    show(qtbot, view, simulate())
    view.set_lane(5)
    english = (view.title.text(), view.source.text(), view.summary.text(), view.lane_text.text())
    i18n.set_language("zh_CN")
    qtbot.waitUntil(lambda: "片段" in view.title.text())
    assert "通道" in view.lane_label.text() and "<b>通道 5</b>" in view.lane_text.text()
    assert "kernel 的描述" in view.source.text() and "在线程块 0 中" in view.summary.text()
    now = (view.title.text(), view.source.text(), view.summary.text(), view.lane_text.text())
    assert all(a != b for a, b in zip(english, now, strict=True))
    i18n.set_language("en")
    qtbot.waitUntil(lambda: view.title.text() == english[0])
    assert view.summary.text() == english[2]


def test_every_string_has_its_translation_in_zh_cn_fragments():
    table = json.loads((i18n.I18N_DIR / "zh_CN_fragments.json").read_text(encoding="utf-8"))
    used = {"&Fragments"}  # the main window's menu and tab name
    for node in ast.walk(ast.parse(open(fv.__file__, encoding="utf-8").read())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr":
            assert isinstance(node.args[0], ast.Constant), "tr() of a computed string"
            used.add(node.args[0].value)
    assert sorted(used - set(table)) == []
    assert sorted(set(table) - used) == []  # nothing stale
    fields = re.compile(r"\{[^}]*\}")
    for source in used:
        assert sorted(fields.findall(source)) == sorted(fields.findall(table[source])), source


def test_the_main_window_shows_it_on_a_tab(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    window = main_window.MainWindow(simulate(), settings=settings, runner=Runner())
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    view = window.views["fragments"]
    assert isinstance(view, FragmentsView) and "fragments" in main_window.MEMORY_TABS
    assert window.panel_actions["fragments"].text() == "&Fragments"
    window.bring_to_front("fragments")
    tabs = window.memory_tabs
    assert tabs.currentWidget() is view and tabs.tabText(tabs.currentIndex()) == "Fragments"
    assert view.isVisible() and view.stack.currentIndex() == 1  # the window's trace: wmma


def test_a_selected_lane_washes_out_every_other_cell_even_those_no_lane_holds():
    """select() adds WARP to every code it washes out, lanes and the no-lane code alike: each
    washed code shows its own colour washed towards white (an element no lane held kept its
    unwashed grey before)."""
    lut = fv.fragment_lut()
    for code in [*range(32), fv.NONE_CODE]:
        plain, washed = lut[code, :3].astype(int), lut[code + 32, :3].astype(int)
        assert (washed >= plain).all() and (washed > plain).any(), code

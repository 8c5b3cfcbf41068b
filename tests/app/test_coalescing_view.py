"""The coalescing view (lesson 8 §15, §28) follows block, warp and k-tile, for any kernel."""

from __future__ import annotations

import numpy as np
import pytest

from matviz.app import i18n
from matviz.app.session import Session
from matviz.app.views.coalescing_view import CoalescingView
from matviz.backends.contract import RunRequest, run


def simulate(kernel: str, size: int = 256, **params):
    return run(RunRequest(kernel, size, size, size, params=params, level=3))


@pytest.fixture
def view(qtbot):
    session = Session()
    widget = CoalescingView(session)
    qtbot.addWidget(widget)
    widget.resize(700, 480)
    yield widget
    i18n.set_language("en")


def choose(view: CoalescingView, name: str) -> None:
    view.request_box.setCurrentIndex(view.request_box.findText(name))


def test_naive_row_major_and_column_major_b(view):
    view.session.set_trace(simulate("naive", tile=16))
    assert view.stack.currentIndex() == 1
    assert [view.request_box.itemText(i) for i in range(view.request_box.count())] == [
        "ld_A", "ld_B", "st_C",
    ]  # fmt: skip
    choose(view, "ld_A")
    text = view.summary.text()  # two rows of 16 threads: one element of A each
    assert "2 sectors of 32 B" in text and "read 2 elements, each shared by a group" in text
    assert "1024 bytes apart" in text  # one row of A (K = 256 floats) apart
    choose(view, "ld_B")
    assert "coalesced" in view.summary.text()
    assert len(view.sectors.opts["x"]) == 2  # the two sectors drawn
    view.session.set_trace(simulate("naive", tile=16, b_col_major=1))
    choose(view, "ld_B")
    text = view.summary.text()
    assert "16 sectors of 32 B in 16 lines" in text and "uncoalesced" in text
    assert "1024 bytes apart" in text  # K = 256 floats between neighbouring columns
    x, y = view.links.getData()
    assert len(x) == 2 * 32 and set(np.round(y, 2)) == {1.0, 0.25}  # every lane joined


def test_tiled_copies_follow_the_selected_block_and_warp(view):
    trace = simulate("tiled", tile=16, pad=0)
    view.session.set_trace(trace)
    choose(view, "ld_A → st_As")
    assert "4 sectors of 32 B" in view.summary.text() and "coalesced" in view.summary.text()
    view.warp_box.setValue(3)
    assert view.key[1] == 3 and "warp 3" in view.summary.text()
    last = len(trace.blocks) - 1
    view.session.select_block(last)
    assert view.key[0] == last and f"block {last}" in view.summary.text()


def test_chinese(view):
    i18n.set_language("zh_CN")
    view.session.set_trace(simulate("naive", tile=16, b_col_major=1))
    choose(view, "ld_B")
    assert "合并" in view.title.text()


def test_a_cp_async_into_rows_that_start_mid_sector_says_its_shared_sectors(view, qtbot):
    """Kernel 09's pipelined copy of A: 16 global sectors, coalesced, but 24 shared sectors
    written (ncu's count), in both languages; its copy through registers says nothing more."""
    tile = {"BM": 64, "BN": 64, "BK": 16, "WT": 32, "PAD": 8}
    view.session.set_trace(simulate("wmma", 256, STAGES=2, **tile))
    choose(view, "ld_A → st_As")
    text = view.summary.text()
    assert "16 sectors of 32 B" in text and "coalesced" in text
    assert "it writes 24 shared sectors, the count ncu gives" in text
    i18n.set_language("zh_CN")
    qtbot.waitUntil(lambda: "它写了 24 个共享内存扇区" in view.summary.text())
    i18n.set_language("en")
    view.session.set_trace(simulate("wmma", 256, STAGES=1, **tile))
    choose(view, "ld_A → st_As")
    assert "shared sectors" not in view.summary.text()

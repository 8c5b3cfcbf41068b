"""Legend entries as a projector shows them: a short label stays on one line."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QTextDocument

from matviz.app.views import palette

# the grid view's block states in Chinese, which a 1920x1080 window broke as "计" / "算中"
STATES = ("等待中", "加载 tile", "计算中", "已完成", "运行中")


def _lines(html: str, width: float) -> list[str]:
    doc = QTextDocument()
    doc.setHtml(html)
    doc.setTextWidth(width)
    doc.size()  # lays the text out
    block, out = doc.firstBlock(), []
    while block.isValid():
        layout = block.layout()
        for i in range(layout.lineCount()):
            line = layout.lineAt(i)
            out.append(block.text()[line.textStart() : line.textStart() + line.textLength()])
        block = block.next()
    return [line.replace(palette.WORD_JOINER, "").replace("\xa0", " ") for line in out]


ENGLISH = ("waiting", "loading tiles", "computing", "done", "running")


@pytest.mark.parametrize("width", [120, 160, 200, 260, 330])
@pytest.mark.parametrize(
    "title, states", [("播放头时刻的线程块状态", STATES), ("Block state at the playhead", ENGLISH)]
)
def test_a_short_label_never_breaks_inside(qapp, width, title, states):
    """The legend wraps between its entries, never inside one ("loading" / "tiles" was read
    as two states at 1920x1080)."""
    entries = " &nbsp; ".join(palette.swatch((40, 120, 210), s) for s in states)
    lines = _lines(f"{title}: " + entries, width)
    assert len(lines) > 1  # it does wrap at this width
    for state in states:
        assert any(state in line for line in lines), (state, lines)


def test_a_long_label_may_still_wrap(qapp):
    long = "由所选线程在这个 k-tile 中读取的元素"
    assert palette.WORD_JOINER not in palette.swatch((0, 0, 0), long)
    assert " k-tile " in palette.swatch((0, 0, 0), long)
    assert palette.swatch((0, 0, 0), "a <b>5</b>").endswith("&nbsp;a&nbsp;<b>5</b>")

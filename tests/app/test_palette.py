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


@pytest.mark.parametrize("width", [120, 160, 200, 260, 330])
def test_a_short_chinese_label_never_breaks_inside_a_word(qapp, width):
    entries = " &nbsp; ".join(palette.swatch((40, 120, 210), s) for s in STATES)
    lines = _lines("播放头时刻的线程块状态: " + entries, width)
    assert len(lines) > 1  # it does wrap at this width
    for word in (w for state in STATES for w in state.split()):
        assert any(word in line for line in lines), (word, lines)


def test_a_long_label_may_still_wrap_and_latin_labels_are_unchanged(qapp):
    long = "由所选线程在这个 k-tile 中读取的元素"
    assert palette.WORD_JOINER not in palette.swatch((0, 0, 0), long)
    assert palette.swatch((0, 0, 0), "loading tiles").endswith("&nbsp;loading tiles")

"""Legend entries as a projector shows them: a short label stays on one line."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QFontMetrics, QTextDocument

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


LONG_AXIS_LABEL = "distinct words in the bank (passes)"


@pytest.mark.parametrize("height", [140, 200, 300, 600])
def test_a_vertical_axis_label_fits_the_axis(qapp, height):
    """A left label longer than its plot is tall wraps onto more lines inside the axis: a
    1280x720 export cut the banks panel's to 'distinct words in the bank (pass'."""
    import pyqtgraph as pg

    widget = pg.PlotWidget()
    try:
        _check_label_fits(qapp, widget, height)
    finally:
        widget.close()


def _check_label_fits(qapp, widget, height):
    plot = widget.getPlotItem()
    palette.set_label(plot, "left", LONG_AXIS_LABEL)
    widget.resize(400, height)
    widget.show()
    for _ in range(4):
        qapp.processEvents()
    axis = plot.getAxis("left")
    label = axis.label
    along_axis = label.boundingRect().width()  # the label is turned a quarter
    assert along_axis <= axis.geometry().height()
    assert label.toPlainText().strip() == LONG_AXIS_LABEL
    font = QFontMetrics(label.font())
    one_line = label.boundingRect().height() < 2 * font.height()
    assert one_line == (font.horizontalAdvance(LONG_AXIS_LABEL) < axis.geometry().height() - 16)
    # both ends lie within the axis's height, where the plot draws them
    drawn = axis.mapRectFromItem(label, label.boundingRect())
    assert 0 <= drawn.top() and drawn.bottom() <= axis.geometry().height()

"""The ladder's chart marks what shared memory alone allows each rung (the model's ceiling)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from matviz.app.ladder_plot import build_widget
from matviz.bench import ladder
from matviz.paths import RESOURCE_DIR


@pytest.fixture(scope="module")
def rows():
    return ladder.load_rows(RESOURCE_DIR / "bench" / "h200_ladder_4096.json")


def items(widget, kind):
    plot = widget.findChild(pg.PlotWidget).getPlotItem()
    return [i for i in plot.items if isinstance(i, kind)]


def test_a_dash_at_each_ceiling_below_the_peak_and_a_tag_for_those_above(qapp, rows):
    fp32 = ladder.by_dtype(rows)[0]
    peak = fp32[0]["peak_gflops"]
    ceilings = [ladder.shared_ceiling_pct(r) for r in fp32]
    below = [(i, pct * peak / 100) for i, pct in enumerate(ceilings) if pct and pct <= 100]
    above = [pct * peak / 100 for pct in ceilings if pct and pct > 100]
    assert below and above  # the bundled ladder has both
    widget = build_widget(fp32)
    (dashes,) = items(widget, pg.PlotDataItem)
    x, y = dashes.getData()
    assert list(y[::2]) == pytest.approx([value for _, value in below])
    assert list((x[::2] + x[1::2]) / 2) == pytest.approx([i for i, _ in below])  # over its bar
    tags = [t.toPlainText() for t in items(widget, pg.TextItem) if "↑" in t.toPlainText()]
    assert tags == [f"↑ {value:,.0f}" for value in above]
    # every rung's label stands over its bar and its dash
    labels = {round(t.pos().x()): t.pos().y() for t in items(widget, pg.TextItem)
              if "of cuBLAS" in t.toPlainText()}  # fmt: skip
    for i, value in below:
        assert labels[i] >= value


def test_a_chart_without_ceilings_has_no_legend_for_them(qapp, rows):
    bf16 = [r for r in rows if r["kernel"] == "wgmma_tma"]
    widget = build_widget(bf16)
    assert not items(widget, pg.PlotDataItem)
    title = widget.findChild(pg.QtWidgets.QLabel).text()
    assert "shared memory" not in title
    assert "shared memory" in build_widget(rows[:3]).findChild(pg.QtWidgets.QLabel).text()

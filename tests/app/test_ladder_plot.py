"""The ladder's chart marks what shared memory alone allows each rung (the model's ceiling),
and what issuing its k loop allows each FP32 rung."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from matviz.app.ladder_plot import build_widget
from matviz.app.views import palette
from matviz.bench import ladder
from matviz.paths import RESOURCE_DIR


@pytest.fixture(scope="module")
def rows():
    return ladder.load_rows(RESOURCE_DIR / "bench" / "h200_ladder_4096.json")


def items(widget, kind):
    plot = widget.findChild(pg.PlotWidget).getPlotItem()
    return [i for i in plot.items if isinstance(i, kind)]


def marks(widget, colour) -> list[pg.PlotDataItem]:
    """The dashes drawn in ``colour`` (the shared-memory or the issue ceiling's)."""
    return [
        d for d in items(widget, pg.PlotDataItem) if d.opts["pen"].color().getRgb()[:3] == colour
    ]


def test_a_dash_at_each_ceiling_below_the_peak_and_a_tag_for_those_above(qapp, rows):
    fp32 = ladder.by_dtype(rows)[0]
    peak = fp32[0]["peak_gflops"]
    ceilings = [ladder.shared_ceiling_pct(r) for r in fp32]
    below = [(i, pct * peak / 100) for i, pct in enumerate(ceilings) if pct and pct <= 100]
    above = [pct * peak / 100 for pct in ceilings if pct and pct > 100]
    assert below and above  # the bundled ladder has both
    widget = build_widget(fp32)
    (dashes,) = marks(widget, palette.SHARED_CEILING)
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


def test_a_dotted_dash_at_what_issue_allows_each_fp32_rung(qapp, rows):
    fp32 = ladder.by_dtype(rows)[0]
    peak = fp32[0]["peak_gflops"]
    issues = [ladder.issue_ceiling_pct(r) for r in fp32]
    assert all(
        pct is not None and r["pct_peak"] < pct < 100 for r, pct in zip(fp32, issues, strict=True)
    )
    widget = build_widget(fp32)
    (dashes,) = marks(widget, palette.ISSUE_CEILING)
    x, y = dashes.getData()
    assert list(y[::2]) == pytest.approx([pct * peak / 100 for pct in issues])
    assert list((x[::2] + x[1::2]) / 2) == pytest.approx(range(len(fp32)))
    labels = [t.pos().y() for t in items(widget, pg.TextItem) if "of cuBLAS" in t.toPlainText()]
    assert all(label >= value for label, value in zip(labels, y[::2], strict=True))
    assert "issuing ptxas's k loop" in widget.findChild(pg.QtWidgets.QLabel).text()
    tensor = [r for r in rows if r["dtype"] != "float32"]
    assert all(ladder.issue_ceiling_pct(r) is None for r in tensor)


def test_a_chart_without_ceilings_has_no_legend_for_them(qapp, rows):
    bf16 = [r for r in rows if r["kernel"] == "wgmma_tma"]
    widget = build_widget(bf16)
    assert not items(widget, pg.PlotDataItem)
    title = widget.findChild(pg.QtWidgets.QLabel).text()
    assert "shared memory" not in title and "issuing" not in title
    assert "shared memory" in build_widget(rows[:3]).findChild(pg.QtWidgets.QLabel).text()


def test_each_rung_gives_its_share_of_cublas_to_a_tenth(qapp, rows):
    """89.5% of cuBLAS read "90%" over kernel 07's bar, the SIMT target's value."""
    fp32 = ladder.by_dtype(rows)[0]
    widget = build_widget(fp32)
    texts = sorted(
        (round(t.pos().x()), t.toPlainText()) for t in items(widget, pg.TextItem)
        if "of cuBLAS" in t.toPlainText()
    )  # fmt: skip
    assert [text.splitlines()[1] for _, text in texts] == [
        f"{r['pct_cublas']:.1f}% of cuBLAS" for r in fp32
    ]

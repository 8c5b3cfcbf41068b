"""The sweep's chart: generic labels from the run, and each configuration's shared-memory
ceiling over its bar (the same marks as the ladder's)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from matviz import sweep
from matviz.app.sweep_plot import build_widget
from matviz.app.views import palette
from matviz.core.ceilings import issue_ceiling, shared_ceiling
from matviz.core.registry import get_kernel


def items(widget, kind):
    plot = widget.findChild(pg.PlotWidget).getPlotItem()
    return [i for i in plot.items if isinstance(i, kind)]


def ran(kernel: str, **axes):
    rows = sweep.plan(kernel, axes, 512, 512, 512, "sim", 1)
    return sweep.run_sweep(rows)


def test_padding_sweep_marks_each_configurations_ceiling(qapp):
    rows = ran("tiled_transposed", tile=[32], pad=[0, 1, 2])
    assert all(r.status == sweep.OK for r in rows)
    widget = build_widget(rows)
    shared, issue = (
        [d for d in items(widget, pg.PlotDataItem) if d.opts["pen"].color().getRgb()[:3] == c]
        for c in (palette.SHARED_CEILING, palette.ISSUE_CEILING)
    )
    (dashes,) = shared
    _, y = dashes.getData()
    spec = get_kernel("tiled_transposed")
    configs = [spec.configure(r.params, 512, 512, 512) for r in rows]
    want = [shared_ceiling(c, r.device).gflops for c, r in zip(configs, rows, strict=True)]
    assert list(y[::2]) == pytest.approx(want)
    (dots,) = issue  # and what issuing each configuration's k loop allows
    allowed = [issue_ceiling(c, r.device).gflops for c, r in zip(configs, rows, strict=True)]
    assert list(dots.getData()[1][::2]) == pytest.approx(allowed)
    assert want[0] < want[1]  # the conflicted P0 is capped lowest
    plot = widget.findChild(pg.PlotWidget).getPlotItem()
    assert plot.getAxis("bottom").labelText == "configuration"  # no kernel's own names
    labels = [t for t in items(widget, pg.TextItem) if t.toPlainText().replace(",", "").isdigit()]
    for label, ceiling in zip(labels, want, strict=True):
        assert label.pos().y() >= ceiling  # each value stands over its bar and its dash


def test_a_tensor_core_sweep_says_whose_cublas_it_is(qapp):
    rows = ran("wmma")
    widget = build_widget(rows)
    lines = [i for i in items(widget, pg.InfiniteLine) if i.label is not None]
    texts = [line.label.format for line in lines]
    assert any(t.startswith("cuBLAS on float16") for t in texts), texts
    assert not any("SGEMM" in t for t in texts)

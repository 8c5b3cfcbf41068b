"""The ladder's bar chart (``matviz bench --plot F.png``): each kernel at its best configuration
against cuBLAS and the FP32 peak, measured in one run, drawn with pyqtgraph offscreen."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from matviz.app.export_render import ensure_app
from matviz.app.sweep_plot import (
    BAR,
    BAR_WIDTH,
    CEILING_LEGEND,
    ISSUE_LEGEND,
    SIZE,
    ceiling_marks,
    chart,
    hline,
    issue_marks,
    save_widget,
)
from matviz.app.views import palette
from matviz.app.views.throughput_view import CUBLAS_COLOR, PEAK_COLOR
from matviz.bench.ladder import by_dtype, issue_ceiling_pct, row_dtype, shared_ceiling_pct
from matviz.errors import MatvizError

TICK_CHARS = 17  # characters per line of a tick's configuration
SHORT_TYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
MIN_SLOTS = 4  # a chart of one or two rungs keeps its bars narrow
TOP = 1.1  # the y range, times the peak


def build_widget(rows: list[dict[str, Any]]) -> QWidget:
    first = rows[0]
    size = first["size"]
    dtype = SHORT_TYPE.get(row_dtype(first), row_dtype(first))
    fp32 = dtype == "fp32"
    peak = float(first["peak_gflops"])
    ceilings = [None if (pct := shared_ceiling_pct(r)) is None else pct / 100.0 * peak
                for r in rows]  # fmt: skip
    issues = [None if (pct := issue_ceiling_pct(r)) is None else pct / 100.0 * peak
              for r in rows]  # fmt: skip
    widget, plot = chart(
        f"<b>The ladder to cuBLAS</b> · {size}×{size}×{size} {dtype} · "
        f"<b>recorded on "
        f"{first.get('device', 'the GPU')}</b> · each kernel at its fastest measured "
        "configuration, cuBLAS in the same run"
        + (CEILING_LEGEND if any(c is not None for c in ceilings) else "")
        + (ISSUE_LEGEND if any(c is not None for c in issues) else "")
    )
    gflops = np.array([float(r["gflops"]) for r in rows])
    x = np.arange(len(rows))
    bars = pg.BarGraphItem(x=x, height=gflops, width=BAR_WIDTH, brush=BAR, pen=palette.FOREGROUND)
    plot.addItem(bars)
    cublas = float(np.median([r["cublas_gflops"] for r in rows]))
    blas = "cuBLAS SGEMM" if fp32 else f"cuBLAS on {dtype}"
    tops = issue_marks(plot, issues, ceiling_marks(plot, ceilings, gflops, peak, peak))
    # the lines' labels go to the end whose rung labels stand lower (a short chart's right end
    # is empty), clear of the fast rungs' labels
    left = len(rows) >= MIN_SLOTS and tops[0] < tops[-1]
    hline(plot, cublas, CUBLAS_COLOR, f"{blas}: {cublas:,.0f} GFLOP/s (median of its runs)",
          left=left)  # fmt: skip
    peak_text = f"{'FP32' if fp32 else 'Tensor Core'} peak: {peak:,.0f} GFLOP/s"
    hline(plot, peak, PEAK_COLOR, peak_text, left=left)
    for i, row in enumerate(rows):
        # a tenth of a point: the SIMT target is 90%, and 89.5 rounded read as reached
        item = pg.TextItem(f"{row['gflops']:,.0f}\n{row['pct_cublas']:.1f}% of cuBLAS",
                           color=palette.FOREGROUND, anchor=(0.5, 1.15))  # fmt: skip
        item.setPos(i, tops[i])  # above the bar, and above its ceiling's dash
        plot.addItem(item)
    # a long configuration wraps, so that eight or more rungs keep their labels apart
    ticks = [(i, "\n".join([f"{r.get('number', 0):02d} {r['kernel']}",
                             *textwrap.wrap(str(r["config"]), TICK_CHARS)]))
             for i, r in enumerate(rows)]  # fmt: skip
    lines = max(label.count("\n") + 1 for _, label in ticks)
    plot.getAxis("bottom").setTicks([ticks])
    plot.getAxis("bottom").setHeight(18 * lines + 12)
    palette.count_axis(plot)  # before its label: the axis is a new one
    plot.setLabel("left", "GFLOP/s")
    plot.setXRange(-0.6, max(len(rows), MIN_SLOTS) - 0.4, padding=0)
    plot.setYRange(0, TOP * max(peak, float(gflops.max())), padding=0)
    return widget


def render_plot(rows: list[dict[str, Any]], path: str | os.PathLike[str], size=SIZE) -> Path:
    if not rows:
        raise MatvizError("nothing to plot: the benchmark has no rows")
    ensure_app()
    groups = by_dtype(rows)
    if len(groups) == 1:
        return save_widget(lambda: build_widget(rows), path, size)
    return save_widget(lambda: _stacked(groups), path, (size[0], size[1] * len(groups) * 3 // 4))


def _stacked(groups: list[list[dict[str, Any]]]) -> QWidget:
    """One chart per element type, one above the other (the ticks need the width), each
    against its own cuBLAS and peak."""
    stacked = QWidget()
    layout = QVBoxLayout(stacked)
    layout.setContentsMargins(0, 0, 0, 0)
    for group in groups:
        layout.addWidget(build_widget(group))
    return stacked

"""The source view lights the lines of the selected block's current phase and follows it."""

from __future__ import annotations

import numpy as np
import pytest

from matviz.app import i18n
from matviz.app.session import Session
from matviz.app.views.source_view import SourceView
from matviz.backends.contract import RunRequest, run
from matviz.core.timeline import BlockState


@pytest.fixture
def view(qtbot):
    widget = SourceView(Session())
    qtbot.addWidget(widget)
    widget.resize(700, 600)
    yield widget
    i18n.set_language("en")


def first_time(session, block: int, state: BlockState) -> int:
    trace, timeline = session.trace, session.timeline
    start, end = int(trace.blocks["start"][block]), int(trace.blocks["end"][block])
    for t in np.linspace(start, end, 400).astype(int):
        if timeline.block_phase(block, t)[0] == state:
            return int(t)
    raise AssertionError(f"block {block} is never {state.name}")


def lit_text(view) -> str:
    lines = view.text.toPlainText().splitlines()
    return "\n".join(lines[n - 1] for n in view.lit)


@pytest.mark.parametrize("kernel", ["tiled", "register_tiling_1d"])
def test_load_and_compute_lines_follow_the_playhead(view, kernel):
    session = view.session
    session.set_trace(run(RunRequest(kernel, 256, 256, 256, level=2)))
    session.select_block(3)
    session.set_playhead(first_time(session, 3, BlockState.LOADING))
    loading = lit_text(view)
    assert "barrier 1" in loading and "sm.As[" in loading and "for (int k" not in loading
    assert "Block 3 is loading tiles" in view.caption.text()
    session.set_playhead(first_time(session, 3, BlockState.COMPUTING))
    computing = lit_text(view)
    assert "for (int k" in computing and "barrier 2" in computing and "barrier 1" not in computing
    selections = view.text.extraSelections()  # the lit lines and the grey instrumentation
    grey = [sel for sel in selections if sel.format.foreground().color().red() == 150]
    assert grey and all("MV_" in sel.cursor.selectedText() for sel in grey)
    session.select_block(0)  # another block in another state: the caption follows
    assert "Block 0" in view.caption.text()
    assert ".cu" in view.title.text()


def test_naive_has_no_phases(view):
    session = view.session
    session.set_trace(run(RunRequest("naive", 64, 64, 64, level=1)))
    session.set_playhead(int(session.trace.blocks["start"][0]) + 1)
    assert view.lit == () and "no k-steps" in view.caption.text()
    assert "B_COL_MAJOR" in view.text.toPlainText()


def test_code_the_configuration_does_not_compile_is_grey(view):
    session = view.session
    session.set_trace(run(RunRequest("naive", 64, 64, 64, {"b_col_major": 1}, level=1)))
    left_out = grey_text(view)
    assert "B[k * N + col]" in left_out and "B[col * K + k]" not in left_out
    session.set_trace(run(RunRequest("tiled", 128, 128, 128, level=2)))
    assert view.left_out == () and "#if" not in view.caption.text()


def grey_text(view) -> str:
    """The lines the configuration leaves out, after checking they are grey and said so."""
    lines = view.text.toPlainText().splitlines()
    grey = {sel.cursor.blockNumber() + 1 for sel in view.text.extraSelections()
            if sel.format.foreground().color().red() == 150}  # fmt: skip
    assert set(view.left_out) <= grey
    assert "does not compile (#if)" in view.caption.text()
    return "\n".join(lines[n - 1] for n in view.left_out)


@pytest.mark.parametrize(("kernel", "multiply", "waits_inside"),
                         [("async_pipeline", "+=", False), ("mma_pipeline", "mma_16816(", True)])
def test_a_pipeline_lights_its_copies_while_it_only_loads(view, kernel, multiply, waits_inside):
    """A cp.async pipeline's copy channel (MV_STEP_OPEN ... MV_STEP_CLOSE): while a block only
    waits for its tiles (the prologue), the copies it issued and the wait and barrier are lit.
    Computing lights the multiply, and the wait for the next step only where the kernel waits
    for it before its last multiply (kernel 10 loads that step's first fragments early)."""
    session = view.session
    session.set_trace(run(RunRequest(kernel, 256, 256, 256, level=2)))
    session.select_block(0)
    session.set_playhead(first_time(session, 0, BlockState.LOADING))
    loading = lit_text(view)
    assert "copy_step" in loading and "cp_async_wait<STAGES - 2>" in loading
    assert "__syncthreads" in loading and "mma_16816(" not in loading and "+=" not in loading
    session.set_playhead(first_time(session, 0, BlockState.COMPUTING))
    computing = lit_text(view)
    assert multiply in computing
    assert ("cp_async_wait<STAGES - 2>" in computing) == waits_inside


def test_a_pipelined_configuration_greys_the_synchronous_loop(view):
    session = view.session
    session.set_trace(run(RunRequest("wmma", 256, 256, 256, {"STAGES": 3}, level=2)))
    session.select_block(0)
    session.set_playhead(first_time(session, 0, BlockState.COMPUTING))
    left_out = grey_text(view)
    # the synchronous copy and barrier 2 (STAGES 1) are left out; the pipelined loop is lit
    assert "barrier 2" in left_out and "load_chunk(A, M, K" in left_out
    assert "cp_async_wait<STAGES - 2>" not in left_out
    assert "wmma::mma_sync" in lit_text(view) and not set(view.lit) & set(view.left_out)
    session.set_trace(run(RunRequest("tiled", 128, 128, 128, level=2)))
    assert view.left_out == () and "#if" not in view.caption.text()


def test_the_kernels_own_code_that_passes_the_trace_on_is_not_grey(view):
    """Grey means matviz's instrumentation: a copy call that passes the trace on
    (MV_TRACE_FORWARD) and the kernel's signature (MV_LAUNCH_BOUNDS) are the kernel's code."""
    session = view.session
    session.set_trace(run(RunRequest("async_pipeline", 256, 256, 256, level=2)))
    lines = view.text.toPlainText().splitlines()
    grey = {sel.cursor.blockNumber() + 1 for sel in view.text.extraSelections()
            if sel.format.foreground().color().red() == 150}  # fmt: skip
    copies = [n for n, line in enumerate(lines, 1) if "copy_step<" in line and "(A, B" in line]
    kernel = [n for n, line in enumerate(lines, 1) if "__global__" in line]
    stamps = [n for n, line in enumerate(lines, 1) if line.strip().startswith("MV_STEP_OPEN(")]
    assert copies and kernel and stamps
    assert not grey & set(copies + kernel) and set(stamps) <= grey

"""Issue 12, item 1: every step of the lesson opens the state it names, in the window."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from matviz.app import i18n
from matviz.app.main_window import MainWindow
from matviz.app.runner import Runner


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    win = MainWindow(None, settings=settings, runner=Runner())
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitExposed(win)
    yield win
    i18n.set_language("en")


def _check_step(window, index: int) -> None:
    step = window.lessons.lesson.steps[index]
    session, trace = window.session, window.session.trace
    if step.trace:
        assert window.trace_path.name == step.trace and not trace.is_simulated
    else:
        sim = step.simulate
        assert trace.is_simulated and trace.kernel == sim.kernel and trace.shape == (
            sim.M, sim.N, sim.K,
        )  # fmt: skip
        assert {k: trace.params[k] for k in sim.params} == sim.params
    gx, gy = trace.grid
    want = (gx // 2, gy // 2) if step.block == "middle" else tuple(step.block)
    b = trace.blocks[session.selected_block]
    assert (int(b["bx"]), int(b["by"])) == want
    assert abs(session.playhead_ns - step.at * session.duration_ns) <= 1
    view = window.views[step.view]
    assert view.isVisible(), step.view
    if step.access and step.view == "banks":
        assert window.banks_view.instruction().site == step.access
    if step.access and step.view == "coalescing":
        assert window.coalescing_view.request().name == step.access
    text = window.lessons.text.text()
    assert step.section in text and step.title.en in text and "{" not in text
    assert (
        window.lessons.position.text() == f"step {index + 1} of {len(window.lessons.lesson.steps)}"
    )


def test_every_step_opens_what_it_names(qtbot, window):
    steps = window.lessons.lesson.steps
    for index, step in enumerate(steps):
        window.lessons.go(index)
        if step.simulate:
            qtbot.waitUntil(lambda i=index: window.lessons.index == i, timeout=60_000)
        _check_step(window, index)


def test_next_and_previous_and_chinese(qtbot, window):
    window.lessons.go(0)
    assert not window.lessons.previous_button.isEnabled()
    window.lessons.next_button.click()
    assert window.lessons.index == 1
    i18n.set_language("zh_CN")
    qtbot.wait(10)
    window.lessons.retranslate()
    assert window.lessons.lesson.steps[1].title.zh_CN in window.lessons.text.text()
    assert window.lessons.next_button.text() == "下一步 →"
    window.lessons.previous_button.click()
    assert window.lessons.index == 0 and window.lessons_dock.windowTitle() == "课程"


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_a_long_step_scrolls_to_its_last_line_at_1280x720(qtbot, window, language):
    window.resize(1280, 720)
    i18n.set_language(language)
    steps = window.lessons.lesson.steps
    longest = max(range(len(steps)), key=lambda i: len(steps[i].text.get(language)))
    window.lessons_dock.raise_()
    window.show_lesson_step(longest)
    scroll = window.lessons.text_scroll
    bar = scroll.verticalScrollBar()
    # the step is longer than the short dock shows: it scrolls, and its end can be reached
    qtbot.waitUntil(lambda: window.lessons.text.height() > scroll.viewport().height() > 0)
    qtbot.waitUntil(lambda: bar.maximum() > 0)
    bar.setValue(bar.maximum())
    shown = scroll.viewport().rect().translated(0, bar.value())
    assert shown.bottom() >= window.lessons.text.height() - 1
    assert window.lessons.text.width() <= scroll.viewport().width()  # no sideways scrolling

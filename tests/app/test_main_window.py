"""The main window: a trace at start, linked views, runs in a worker, errors that change nothing."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from PySide6.QtCore import QSettings, Qt

from matviz.app import i18n
from matviz.app.main_window import BUNDLED_TRACE, MEMORY_TABS, MainWindow
from matviz.app.runner import Runner
from matviz.backends.contract import RunRequest, run
from matviz.core.timeline import Timeline
from matviz.core.trace_io import save_trace

PY = sys.executable
ABORTS = [PY, "-c", "import os, sys; sys.stdin.read(); os.abort()"]
RAISES = [PY, "-c", "import sys; sys.stdin.read(); raise SystemExit('worker blew up')"]
SLOW = [PY, "-c", "import sys, time; sys.stdin.read(); time.sleep(60)"]


def simulate(kernel: str, M: int, N: int, K: int, level: int = 3, **params):
    return run(RunRequest(kernel, M, N, K, params=params, level=level))


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)


@pytest.fixture
def make_window(qtbot, settings):
    def make(trace=None, command=None, **kw) -> MainWindow:
        window = MainWindow(trace, settings=settings, runner=Runner(command=command), **kw)
        qtbot.addWidget(window)
        window.resize(1600, 1000)
        window.show()
        qtbot.waitExposed(window)
        return window

    return make


@pytest.fixture
def window(make_window):
    return make_window()


def _small_sizes(qtbot, window, size: int = 128) -> None:
    """Switch the controls to size^3 and wait for that run to land."""
    for name in "MNK":
        window.controls.sizes[name].setValue(size)
    qtbot.waitUntil(
        lambda: window.session.trace.shape == (size,) * 3 and not window.runner.busy,
        timeout=60_000,
    )


def _distinct_colours(widget) -> int:
    image = widget.grab().toImage()
    step = max(image.width() // 120, 1)
    return len(
        {
            image.pixel(x, y)
            for x in range(0, image.width(), step)
            for y in range(0, image.height(), step)
        }
    )


# -- start-up ----------------------------------------------------------------------------------
def test_window_opens_with_a_trace_and_every_view_shows_it(window):
    trace = window.session.trace
    assert trace is not None
    if BUNDLED_TRACE.is_file():
        # every bundled H200 recording is a throughput point from the start
        bundled = sorted(BUNDLED_TRACE.parent.glob("*.mvz"))
        assert len(window.session.runs) == len(bundled)
        assert {p.backend for p in window.session.runs} == {"cuda"}
        assert "replay" in window.windowTitle() and "replay" in window.source_status.text()
    else:
        assert "simulated" in window.windowTitle() and len(window.session.runs) == 1
    for name, view in window.views.items():
        tab = window.memory_tabs.indexOf(view)
        if tab >= 0:  # banks, coalescing and source share a place: bring each to the front
            window.memory_tabs.setCurrentIndex(tab)
        assert view.isVisible() and view.width() > 200 and view.height() > 150, name
        assert _distinct_colours(view) > 8, f"{name} view looks empty"
    window.memory_tabs.setCurrentIndex(0)
    assert "t = " in window.playback.time_label.text()
    assert window.explain.plain_text().strip()


def test_a_simulated_trace_is_labelled_simulated(make_window):
    window = make_window(simulate("tiled", 64, 64, 64, tile=16, pad=1, level=3))
    assert "simulated" in window.windowTitle() and "replay" not in window.windowTitle()
    assert "simulated" in window.source_status.text()
    assert "tiled T16 P1 64×64×64" in window.windowTitle() and "{" not in window.windowTitle()


def test_without_the_bundled_file_the_start_up_is_simulated_without_nvcc(
    make_window, monkeypatch, tmp_path
):
    import matviz.app.main_window as main_window
    import matviz.backends.simulator as simulator

    def no_nvcc(*args, **kwargs):
        raise AssertionError("nvcc must not run on the GUI thread")

    monkeypatch.setattr(main_window, "BUNDLED_TRACE", tmp_path / "missing.mvz")
    monkeypatch.setattr(simulator, "registers_for", no_nvcc)
    window = make_window()
    trace = window.session.trace
    assert trace.is_simulated and "simulated" in window.windowTitle()
    assert trace.kernel == main_window.DEFAULT_RUN["kernel"] and trace.manifest["level"] == 3
    assert trace.params == trace.config.kernel.resolve_params(main_window.DEFAULT_RUN["params"])
    occ = trace.manifest["occupancy"]
    assert occ["registers"] == trace.config.kernel.registers and occ["register_source"] == "given"
    assert window.controls.job()["params"] == trace.params  # the controls show that setup


# -- playback ----------------------------------------------------------------------------------
def test_stepping_moves_block_states_as_the_trace_says(qtbot, window):
    session, trace = window.session, window.session.trace
    timeline = Timeline(trace)
    block = int(trace.phase_blocks[len(trace.phase_blocks) // 2])
    session.select_block(block)
    session.set_playhead(int(trace.blocks["start"][block]) + 1)
    window.activateWindow()
    qtbot.waitActive(window)
    for key, modifier, block_arg in (
        (Qt.Key_Right, Qt.NoModifier, block),
        (Qt.Key_Right, Qt.NoModifier, block),
        (Qt.Key_Left, Qt.NoModifier, block),
        (Qt.Key_Right, Qt.ShiftModifier, None),
        (Qt.Key_Left, Qt.ShiftModifier, None),
    ):
        before = session.playhead_ns
        expected = timeline.step(before, 1 if key == Qt.Key_Right else -1, block=block_arg)
        qtbot.keyClick(window, key, modifier)
        assert session.playhead_ns == expected != before
        if block_arg is not None:  # the selected block itself changed phase
            assert timeline.block_phase(block, before) != timeline.block_phase(block, expected)
        shown = window.grid_view.image.image.ravel()
        assert np.array_equal(shown, timeline.states(session.playhead_ns))


def test_space_plays_and_pauses(qtbot, window):
    window.activateWindow()
    qtbot.waitActive(window)
    window.session.set_playhead(0)
    qtbot.keyClick(window, Qt.Key_Space)
    assert window.playback.playing
    qtbot.waitUntil(lambda: window.session.playhead_ns > 0, timeout=5_000)
    qtbot.keyClick(window, Qt.Key_Space)
    assert not window.playback.playing


def test_the_slider_scrubs(window):
    slider = window.playback.slider
    slider.setValue(slider.maximum() // 2)
    duration = window.session.trace.duration_ns
    assert abs(window.session.playhead_ns - duration / 2) <= duration / 1000


# -- runs --------------------------------------------------------------------------------------
def test_changing_pad_reruns_and_adds_a_plot_point(qtbot, window):
    _small_sizes(qtbot, window)
    runs = len(window.session.runs)
    pad = window.controls.params_boxes["pad"]
    pad.setCurrentIndex(pad.findData(2))
    qtbot.waitUntil(lambda: len(window.session.runs) == runs + 1, timeout=60_000)
    trace = window.session.trace
    assert trace.params["pad"] == 2 and trace.shape == (128, 128, 128)
    assert dict(window.session.runs[-1].params)["pad"] == 2
    assert "simulated" in window.windowTitle() and not window.error


@pytest.mark.parametrize("command", [ABORTS, RAISES], ids=["abort", "raise"])
def test_a_failing_worker_shows_an_error_and_the_window_survives(qtbot, make_window, command):
    window = make_window(simulate("tiled", 128, 128, 128, tile=16, pad=0, level=3))
    window.runner.set_command(command)
    before, runs = window.session.trace, len(window.session.runs)
    pad = window.controls.params_boxes["pad"]
    pad.setCurrentIndex(pad.findData(1))
    qtbot.waitUntil(lambda: bool(window.error), timeout=60_000)
    assert not window.error_label.isHidden() and "Run failed" in window.error_label.text()
    assert window.isVisible() and window.session.trace is before
    assert len(window.session.runs) == runs and pad.currentData() == 1  # settings kept
    window.runner.set_command(None)  # the next run gets a fresh, working worker
    window.controls.request_run()
    qtbot.waitUntil(lambda: window.session.trace is not before, timeout=60_000)
    assert window.session.trace.params["pad"] == 1 and window.error_label.isHidden()


def test_long_runs_show_progress_and_can_be_cancelled(qtbot, make_window):
    window = make_window(simulate("tiled", 64, 64, 64, tile=16, level=3), command=SLOW)
    before = window.session.trace
    window.controls.request_run()
    qtbot.waitUntil(lambda: window.progress_bar.isVisible(), timeout=5_000)
    assert window.cancel_button.isVisible()
    window.cancel_button.click()
    assert not window.progress_bar.isVisible() and not window.runner.busy
    assert window.session.trace is before and not window.error


# -- files -------------------------------------------------------------------------------------
def test_a_corrupt_file_shows_the_error_and_keeps_the_trace(window, tmp_path):
    bad = tmp_path / "broken.mvz"
    bad.write_bytes(b"PK\x03\x04 this is not a zip")
    before = window.session.trace
    assert window.open_file(bad) is False
    assert not window.error_label.isHidden() and "broken.mvz" in window.error_label.text()
    assert window.session.trace is before


def test_a_trace_of_an_unknown_kernel_is_refused_in_one_line(window, tmp_path):
    trace = simulate("tiled", 64, 64, 64, tile=16, level=1)
    trace.manifest["kernel"] = "gone"  # a kernel this checkout has no description of
    path = tmp_path / "gone.mvz"
    save_trace(trace, path)
    before = window.session.trace
    assert window.open_file(path) is False
    assert "unknown kernel 'gone'" in window.error and "gone.mvz" in window.error
    assert "\n" not in window.error
    assert window.session.trace is before


def test_save_open_and_recent_files(window, tmp_path):
    path = tmp_path / "saved.mvz"
    assert window.save_trace(path) and path.is_file()
    other = tmp_path / "other.mvz"
    save_trace(simulate("naive", 64, 64, 64, tile=8, level=1), other)
    assert window.open_file(other)
    assert window.session.trace.kernel == "naive" and "pad" not in window.controls.params_boxes
    assert "naive T8 64×64×64" in window.windowTitle()
    assert window.recent_files()[:2] == [str(other.resolve()), str(path.resolve())]
    path.unlink()
    assert window.recent_files() == [str(other.resolve())]  # missing files are pruned


# -- language ----------------------------------------------------------------------------------
def test_language_switch_changes_visible_texts(qtbot, window):
    assert window.file_menu.title() == "&File"
    explained = window.explain.plain_text()
    combo = window.explain.language
    combo.setCurrentIndex(combo.findData("zh_CN"))
    try:
        assert i18n.current_language() == "zh_CN"
        assert window.settings.value("language") == "zh_CN"
        qtbot.waitUntil(lambda: window.file_menu.title() == "文件(&F)")
        assert window.controls.run_button.text() == "运行"
        assert window.playback.play_button.text() == "▶ 播放"
        assert "– replay" not in window.windowTitle()
        assert window.explain.plain_text() != explained
    finally:
        i18n.set_language("en")
    qtbot.waitUntil(lambda: window.file_menu.title() == "&File")
    assert combo.currentData() == "en"


# -- the command line --------------------------------------------------------------------------
def test_cli_refuses_a_missing_trace_before_any_window(capsys, tmp_path):
    from matviz import cli

    assert cli.main([str(tmp_path / "missing.mvz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("matviz: error:") and "missing.mvz" in err[0]
    bad = tmp_path / "bad.mvz"
    bad.write_text("nope")
    assert cli.main([str(bad)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_other_commands_never_import_qt():
    code = (
        "import sys; from matviz import cli; cli.main(['kernels']); "
        "print('QT' if 'PySide6' in sys.modules else 'NOQT')"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.strip().splitlines()[-1] == "NOQT"


def test_a_recorded_trace_says_replay_and_edits_survive_a_finishing_run(
    qtbot, make_window, tmp_path
):
    from matviz.core.trace_io import load_trace

    trace = simulate("tiled", 128, 128, 128, tile=32, pad=0, level=3)
    trace.manifest["backend"] = "cuda"  # stands in for an H200 recording
    path = tmp_path / "recorded.mvz"
    save_trace(trace, path)
    window = make_window(load_default=False)
    assert window.open_file(path)
    title = window.windowTitle()
    assert "recorded on NVIDIA H200 – replay" in title and "simulated" not in title
    assert "replay" in window.source_status.text()
    assert window.controls.backend.currentData() in ("cuda", "sim")  # sim where CUDA is missing
    # A run finishing while the user already edited the controls must not undo the edit.
    window.controls.request_run()
    qtbot.waitUntil(lambda: window.runner.busy)
    tile = window.controls.params_boxes["tile"]
    tile.setCurrentIndex(tile.findData(16))
    window.runner.cancel()
    window._run_finished(load_trace(path))
    assert tile.currentData() == 16


def test_colour_mode_from_the_view_menu(window):
    window.color_actions["sm"].trigger()
    assert window.session.color_mode == "sm"
    window.session.set_color_mode("state")
    assert window.color_actions["state"].isChecked()


def test_cli_opens_the_window_on_a_trace_file(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings as Settings
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from matviz import cli

    Settings.setPath(Settings.NativeFormat, Settings.UserScope, str(tmp_path))  # no real config
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "sim.mvz"
    save_trace(simulate("tiled", 64, 64, 64, tile=16, pad=1, level=3), path)
    seen = []

    def check_and_close() -> None:
        windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
        windows = [w for w in windows if w.isVisible()]
        seen.extend(w.windowTitle() for w in windows)
        for w in windows:
            w.close()
            w.deleteLater()
        QApplication.quit()

    QTimer.singleShot(0, check_and_close)
    assert cli.main([str(path)]) == 0
    assert len(seen) == 1 and "simulated" in seen[0] and "T16 P1 64×64×64" in seen[0]


# -- transport ---------------------------------------------------------------------------------
def _time_now(window) -> str:
    return window.playback.time_label.text().split(" / ")[0]


def test_start_and_end_by_button_and_home_end_keys(qtbot, window):
    session, bar = window.session, window.playback
    duration = session.trace.duration_ns
    session.set_playhead(duration // 2)
    bar.start_button.click()
    assert session.playhead_ns == 0
    bar.end_button.click()
    assert session.playhead_ns == duration
    window.activateWindow()
    qtbot.waitActive(window)
    qtbot.keyClick(window, Qt.Key_Home)
    assert session.playhead_ns == 0
    qtbot.keyClick(window, Qt.Key_End)
    assert session.playhead_ns == duration
    assert "(Home)" in bar.start_button.toolTip() and "(End)" in bar.end_button.toolTip()


def test_step_buttons_say_what_they_do(window):
    bar = window.playback
    tips = {
        bar.prev_block: ("selected block", "previous", "(←)"),
        bar.next_block: ("selected block", "next", "(→)"),
        bar.prev_global: ("any block", "previous", "(Shift+←)"),
        bar.next_global: ("any block", "next", "(Shift+→)"),
    }
    for button, words in tips.items():
        tip = button.toolTip()
        assert all(w in tip for w in words) and "phase boundary" in tip, tip
    texts = {button.text() for button in (*tips, bar.start_button, bar.end_button)}
    assert len(texts) == 6  # six different faces


def test_the_time_reads_in_ns_while_stepping(window):
    session, bar = window.session, window.playback
    trace = session.trace
    block = int(trace.phase_blocks[len(trace.phase_blocks) // 2])
    session.select_block(block)
    session.set_playhead(int(trace.blocks["start"][block]) + 1)
    assert "µs" in _time_now(window) or "ms" in _time_now(window)
    before = session.playhead_ns
    bar.next_block.click()
    after = session.playhead_ns
    now = _time_now(window)
    assert bar.stepping and " ns" in now and "µs" not in now
    assert f"{after:,}".replace(",", "\u2009") in now  # whole nanoseconds
    assert f"+{after - before:,}".replace(",", "\u2009") in now  # and the step's length
    bar.slider.setValue(bar.slider.maximum() // 3)  # scrubbing: back to µs
    assert not bar.stepping and "µs" in _time_now(window)
    bar.prev_global.click()
    assert " ns" in _time_now(window)
    session.set_playhead(0)  # moved by something else (a drag in a view)
    assert "µs" in _time_now(window)


def test_the_wave_legend_covers_every_wave():
    from matviz.app.views.palette import WAVE_COLORS
    from matviz.app.views.sm_lanes import wave_legend

    assert len(wave_legend(4)) == 4 and "wave&nbsp;4" in wave_legend(4)[-1]  # never wrapped
    legend = wave_legend(63)
    assert "1–63" in legend[0] and len(legend) == 1 + len(WAVE_COLORS)
    firsts = [int(entry.split("&nbsp;")[1].split(",")[0]) for entry in legend[1:]]
    assert firsts == list(range(1, len(WAVE_COLORS) + 1))  # wave w has colour (w - 1) % 9


def test_the_sm_lanes_caption_shows_the_legend(make_window):
    window = make_window(simulate("tiled", 1024, 1024, 1024, tile=8, pad=0, level=1))
    text = window.lanes_view.caption.text().replace("&nbsp;", " ")
    waves = int(window.lanes_view.wave.max()) + 1
    if waves > 9:
        assert f"1–{waves}" in text
    else:
        assert f"wave {waves}" in text


# -- menus -------------------------------------------------------------------------------------
def test_view_menu_hides_and_shows_every_panel(qtbot, window):
    tabs = window.memory_tabs
    for name, action in window.panel_actions.items():
        view = window.views[name]
        assert action.isChecked() and action.text() and action in window.view_menu.actions()
        tab = tabs.indexOf(view)
        action.trigger()
        assert view.isHidden() or (tab >= 0 and not tabs.isTabVisible(tab))
        action.trigger()
        assert not view.isHidden() or (tab >= 0 and tabs.isTabVisible(tab))
    for name in MEMORY_TABS:  # all the tabs hidden: their place too
        window.panel_actions[name].trigger()
    assert tabs.isHidden()
    for name in MEMORY_TABS:
        window.panel_actions[name].trigger()
    assert not tabs.isHidden()
    for dock in (window.controls_dock, window.explain_dock):
        toggle = dock.toggleViewAction()
        assert toggle in window.view_menu.actions()
        toggle.trigger()
        assert dock.isHidden()
        toggle.trigger()
        assert not dock.isHidden()
    # hiding both views of a row hides the row, so the others get the room
    for name in (*MEMORY_TABS, "throughput"):
        window.panel_actions[name].trigger()
    assert window.throughput_view.parentWidget().isHidden() or window.compact
    for name in (*MEMORY_TABS, "throughput"):
        window.panel_actions[name].trigger()
    shown = [v for v in window.views.values() if tabs.indexOf(v) < 0] + [tabs.currentWidget()]
    assert all(view.isVisible() for view in shown)


def test_help_menu_has_the_keys_and_the_lesson_map(window):
    assert window.help_action in window.help_menu.actions()
    window.help_action.trigger()
    dialog = window.help_dialog
    assert dialog.isVisible()
    text = dialog.text.toPlainText()
    for key in ("Space", "Shift+←", "Home / End", "F1"):
        assert key in text
    for section in ("§2-5", "§6-17", "§11-12", "§13", "§17", "§18", "§26", "§27-28"):
        assert section in text
    for view in ("Block grid", "SM lanes", "Tiles", "Banks", "Throughput", "Explanation"):
        assert view in text
    dialog.close()


def test_the_concept_link_opens_the_map_at_its_section(window):
    from PySide6.QtCore import QUrl

    from matviz.app.explain_panel import LESSON_MAP, lesson_row

    assert lesson_row(12) == 2 and lesson_row(14) == 1 and lesson_row(17) == 4
    assert lesson_row(19) == 6 and lesson_row(20) == lesson_row(23) == 7
    assert lesson_row(24) == lesson_row(25) == 8 and lesson_row(27) == 10
    assert lesson_row(3) == 0 and lesson_row(1) is None
    link = window.explain.concept_link()
    assert link and link.startswith("lesson:")
    section = int(link.split(":")[1])
    window.explain.text.anchorClicked.emit(QUrl(link))  # what a click on the link does
    dialog = window.help_dialog
    assert dialog is not None and dialog.isVisible() and dialog.section == section
    row = dialog.highlighted_row
    lo, hi, _, _ = LESSON_MAP[row]
    assert lo <= section <= hi
    assert "#fff3a0" in dialog.text.toHtml().lower()  # that row is highlighted
    dialog.close()


def test_every_window_string_is_translated():
    import ast
    import re
    from pathlib import Path

    from matviz.app import explain_panel

    used = set()
    app_dir = Path(explain_panel.__file__).parent
    for name in ("main_window.py", "playback.py", "explain_panel.py"):
        tree = ast.parse((app_dir / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr":
                if isinstance(node.args[0], ast.Constant):
                    used.add(node.args[0].value)
    for _, _, topic, views in explain_panel.LESSON_MAP:
        used.update((topic, *views))
    used.update(what for _, what in explain_panel.KEYS)
    used.add("Click a block")  # the one key column entry in words
    table = i18n.load_table("zh_CN")
    missing = sorted(used - set(table))
    assert not missing, f"add to zh_CN_transport.json: {missing}"
    fields = re.compile(r"\{[^}]*\}")
    for source in used:
        assert sorted(fields.findall(source)) == sorted(fields.findall(table[source])), source


def test_the_app_opens_no_larger_than_the_screen(qapp, monkeypatch, tmp_path):
    """On a 1280x720 projector the window must fit, not open at its 1600x1000 default."""
    import PySide6.QtCore as QtCore
    from PySide6.QtCore import QRect, QSettings
    from PySide6.QtWidgets import QApplication

    from matviz.app import main as app_main

    shown = []
    monkeypatch.setattr(QApplication, "exec", lambda self: 0)
    monkeypatch.setattr(MainWindow, "show", lambda self: shown.append(self))
    # run_gui opens the user's settings: a private file here
    monkeypatch.setattr(
        QtCore, "QSettings", lambda *a: QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat)
    )
    screen = qapp.primaryScreen()
    monkeypatch.setattr(type(screen), "availableGeometry", lambda self: QRect(0, 0, 1280, 720))
    assert app_main.run_gui([]) == 0
    window = shown[0]
    try:
        assert (window.width(), window.height()) == (1280, 720)
    finally:
        window.runner.shutdown()
        window.close()


def test_a_view_on_a_closed_tab_waits_and_shows_the_playhead_when_opened(make_window):
    """Playback leaves the closed memory tabs alone (each had redrawn at every frame), and a
    tab opened later shows the k-tile at the playhead, not the one it last drew."""
    window = make_window(simulate("tiled", 128, 128, 512, tile=16, pad=1))
    session, banks = window.session, window.banks_view
    window.memory_tabs.setCurrentWidget(window.source_view)
    assert not banks.isVisible() and window.isVisible()
    drawn = []
    banks._load_records = lambda real=banks._load_records: (drawn.append(1), real())[1]
    block = session.selected_block
    start, end = (int(session.trace.blocks[block][f]) for f in ("start", "end"))
    for frac in (0.3, 0.5, 0.8):
        session.set_playhead(start + int((end - start) * frac))
    assert drawn == []  # closed: nothing rebuilt while the playhead moved
    window.memory_tabs.setCurrentWidget(banks)
    assert len(drawn) == 1 and banks.key == banks._current_key()
    assert banks.key[2] > 0  # the k-tile at 80% of the block, not the first
    session.set_playhead(start + int((end - start) * 0.2))
    assert len(drawn) == 2  # open: it follows every move again


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_the_side_docks_tab_titles_are_whole_at_1280x720(qtbot, tmp_path, language):
    """Explain, Barrier waits and Lessons share one tab bar as wide as the left column: on a
    projector at 1280x720 each title must read whole, not 'Le...'."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QTabBar

    from matviz.app import i18n
    from matviz.app.main_window import MainWindow
    from matviz.app.runner import Runner

    window = MainWindow(None, settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat),
                        runner=Runner())  # fmt: skip
    qtbot.addWidget(window)
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    i18n.set_language(language)
    try:
        titles = {d.windowTitle() for d in (window.explain_dock, window.diagnostics_dock,
                                            window.lessons_dock)}  # fmt: skip
        bars = [b for b in window.findChildren(QTabBar)
                if {b.tabText(i) for i in range(b.count())} == titles]  # fmt: skip
        assert len(bars) == 1
        bar = bars[0]
        qtbot.waitUntil(lambda: bar.width() > 0)
        window.show_trace(window.session.trace)  # as after opening a file
        qtbot.wait(50)
        for i in range(bar.count()):  # a tab squeezed below its size elides its title
            assert bar.tabRect(i).width() >= bar.tabSizeHint(i).width(), bar.tabText(i)
    finally:
        i18n.set_language("en")


def test_a_window_deleted_with_its_layout_passes_queued_leaves_no_error(qtbot, settings):
    """A resize queues fit_grid and _fit_docks; a window deleted before they run drops them:
    nothing reaches the deleted window (they raised RuntimeError, which fails the test)."""
    import shiboken6
    from PySide6.QtCore import QCoreApplication, QEvent

    window = MainWindow(
        simulate("tiled", 256, 256, 256, tile=16, pad=0, level=3),
        settings=settings,
        runner=Runner(prewarm=False),
    )
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    window.resize(1300, 740)  # queues the fits
    window.runner.shutdown()
    window.close()
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    assert not shiboken6.isValid(window)
    qtbot.wait(50)  # the queued calls would run here


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_run_stays_in_sight_at_1280x720_with_the_most_parameters(make_window, qtbot, language):
    """The kernel with the most parameters makes the form taller than a 720-px window's dock:
    the form scrolls, but the Run button stays whole on screen (it sat below the fold)."""
    from PySide6.QtCore import QPoint, QRect

    from matviz.app import i18n
    from matviz.core import registry

    window = make_window()
    i18n.set_language(language)
    try:
        controls = window.controls
        most = max(registry.kernels().values(), key=lambda k: len(k.params))
        controls.kernel.setCurrentIndex(controls.kernel.findData(most.name))
        window.resize(1280, 720)
        qtbot.wait(100)  # the queued dock fit
        # as short as a user may drag it, whatever the fonts make the form's height
        window.resizeDocks([window.controls_dock], [260], Qt.Vertical)
        qtbot.wait(50)
        form = controls.form_scroll
        assert form.verticalScrollBar().maximum() > 0  # the premise: too tall to show whole
        button = controls.run_button
        shown = button.visibleRegion().boundingRect()
        assert button.isVisible() and shown.size() == button.size()
        on_window = QRect(button.mapTo(window, QPoint(0, 0)), button.size())
        assert window.rect().contains(on_window)
    finally:
        i18n.set_language("en")

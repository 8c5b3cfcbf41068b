"""Video frames are pictures: no input widgets, no mouse hints, and the last one is the end."""

import imageio.v3 as iio
import numpy as np
import pytest
from PySide6.QtWidgets import QAbstractSpinBox, QComboBox, QLabel, QWidget

from matviz import cli
from matviz.app import export_render
from matviz.app.export_render import INPUT_WIDGETS, FrameRenderer
from matviz.core.timeline import BlockState, Timeline
from matviz.core.trace_io import load_trace

# words of a sentence that asks for the mouse (English or Chinese): never in a video frame
MOUSE_WORDS = ("hover", "mouse", "wheel", "zoom", "click", "drag", "悬停", "鼠标", "滚轮")


def visible_inputs(renderer):
    return [
        type(w).__name__
        for w in renderer.container.findChildren(QWidget)
        if isinstance(w, INPUT_WIDGETS) and w.isVisible()
    ]


def visible_texts(renderer):
    return [
        w.text()
        for w in renderer.container.findChildren(QLabel)
        if w.isVisible() and w is not renderer.caption
    ]


def test_the_views_write_their_mouse_hints_only_where_a_mouse_can_use_them(trace, qapp):
    from matviz.app.session import Session
    from matviz.app.views.tiles_view import TilesView

    for interactive in (True, False):
        session = Session(interactive=interactive)
        view = TilesView(session)
        session.set_trace(trace)
        caption = view.caption.text()
        assert "'0': outside the matrix" in caption
        assert ("Hover a cell" in caption) == interactive
        view.deleteLater()


@pytest.mark.parametrize("views", [("all",), ("sm", "banks"), ("tiles",)])
def test_frames_show_no_input_widgets_and_no_mouse_hints(trace, views, closes_its_windows):
    renderer = FrameRenderer(trace, views, (640, 360), block=0)
    try:
        before = [
            w
            for w in renderer.container.findChildren(QWidget)
            if isinstance(w, (QComboBox, QAbstractSpinBox))
        ]
        for t in (0, trace.duration_ns // 2, trace.duration_ns):
            renderer.render(t)
            assert visible_inputs(renderer) == []
            texts = visible_texts(renderer)
            hints = [s for s in texts if any(word in s.lower() for word in MOUSE_WORDS)]
            assert hints == []
        # each combo box's choice is still there to read, as a plain label
        for combo in (w for w in before if isinstance(w, QComboBox)):
            if combo.currentText():
                assert combo.currentText() in texts
    finally:
        renderer.close()


def test_the_sm_view_colour_choice_is_a_label_not_a_combo(trace, closes_its_windows):
    renderer = FrameRenderer(trace, ("sm",), (640, 360), block=0)
    try:
        renderer.render(0)
        combo = renderer.views["sm"].findChild(QComboBox)
        assert combo is not None and combo.currentText() and not combo.isVisible()
        assert combo.currentText() in visible_texts(renderer)
    finally:
        renderer.close()


def test_the_last_frame_of_a_gif_is_the_kernel_finished(
    mvz, no_leftovers, closes_its_windows, capsys, monkeypatch
):
    rendered = []
    render = export_render.FrameRenderer.render

    def recording(self, t_ns):
        rendered.append((int(t_ns), self.caption_html(int(t_ns))))
        return render(self, t_ns)

    monkeypatch.setattr(export_render.FrameRenderer, "render", recording)
    out = no_leftovers / "end.gif"
    argv = ["export", mvz, "--fps", 4, "--duration", 1, "--size", "320x180", "-o", out]
    assert cli.main([str(a) for a in argv]) == 0
    capsys.readouterr()
    trace = load_trace(mvz)
    frames = iio.imread(out, index=None)
    assert len(frames) == 4
    t_last, caption = rendered[-1]  # the palette samples come first, then frames in order
    assert t_last == trace.duration_ns
    assert (Timeline(trace).states(t_last) == BlockState.DONE).all()
    end = f"{trace.duration_ns / 1000:,.1f}"
    assert f"<b>t = {end}</b> / {end} µs" in caption and "done" in caption
    assert not np.array_equal(frames[0], frames[-1])


@pytest.mark.parametrize(("signum", "code"), [(2, 130), (15, 143)])
def test_a_stop_signal_mid_export_keeps_the_old_file(mvz, tmp_path, signum, code):
    # Qt swallows an exception raised inside its paint calls, so a Ctrl-C there used to be lost:
    # the export went on and replaced the file with exit code 0
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "old.mp4"
    out.write_bytes(b"the user's film")
    cmd = [sys.executable, "-m", "matviz.cli", "export", str(mvz), "--fps", "30",
           "--duration", "20", "--size", "320x180", "-o", str(out)]  # fmt: skip
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".old.*.part.mp4")) and time.monotonic() < deadline:
        time.sleep(0.05)  # frames are being written
    assert list(tmp_path.glob(".old.*.part.mp4")), "the export never started writing"
    proc.send_signal(signal.Signals(signum))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert err.strip().splitlines() == ["matviz: interrupted"]
    assert out.read_bytes() == b"the user's film"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mvz.name, "old.mp4"])

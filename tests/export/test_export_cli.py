"""``matviz export``: GIF, MP4 and PNG decoded again; every user error is one line and exit 2,
and no partial file survives an error or Ctrl-C."""

import os
import subprocess
import sys

import imageio.v3 as iio
import numpy as np
import pytest

from matviz import cli
from matviz.export import writers

PY = sys.executable


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, fragment):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("matviz: error: ") and fragment in lines[0], err


def frames_of(path):
    return iio.imread(path, index=None, **({"plugin": "FFMPEG"} if path.suffix == ".mp4" else {}))


@pytest.mark.parametrize("fmt", ["gif", "mp4"])
def test_video_has_fps_x_duration_frames_of_the_right_size(
    fmt, mvz, no_leftovers, closes_its_windows, capsys
):
    out = no_leftovers / f"anim.{fmt}"
    argv = ["export", mvz, "--view", "all", "--fps", 8, "--duration", 1.5, "--size", "320x180"]
    code, stdout, _ = run(capsys, *argv, "-o", out)
    assert code == 0 and f"wrote      {out}" in stdout and "12 frames" in stdout
    frames = frames_of(out)[..., :3]
    assert frames.shape[:3] == (12, 180, 320)
    for frame in frames[[0, 6, 11]]:  # not blank: a white page with nothing drawn is one colour
        assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 8
    assert any(not np.array_equal(frames[0], f) for f in frames[1:])  # the playhead moves
    assert not np.array_equal(frames[0], frames[-1])


def test_gif_delays_keep_the_length_right():
    durations = writers.gif_durations(30, 30)
    assert sum(durations) == 1000 and set(durations) <= {30, 40}


@pytest.mark.parametrize("view", ["grid", "sm", "tiles", "banks", "throughput", "grid,sm"])
def test_png_still_of_each_view(view, mvz, no_leftovers, closes_its_windows, capsys):
    out = no_leftovers / "still.png"
    code, _, _ = run(
        capsys, "export", mvz, "--view", view, "--at", 1.0, "--size", "400x300", "-o", out
    )
    assert code == 0
    image = iio.imread(out)
    assert image.shape[:2] == (300, 400)
    assert len(np.unique(image[..., :3].reshape(-1, 3), axis=0)) > 8


def test_caption_names_time_phase_configuration_and_source(trace, closes_its_windows):
    from matviz.app.export_render import FrameRenderer

    renderer = FrameRenderer(trace, ("grid",), (320, 240), block=0)
    try:
        html = renderer.caption_html(trace.duration_ns // 2)
        frame = renderer.render(trace.duration_ns // 2)
    finally:
        renderer.close()
    assert "t = " in html and "block (0, 0) on SM" in html and "tiled" in html
    assert "simulated" in html and frame.shape == (240, 320, 3)


def test_perfetto_export_never_imports_qt(mvz, tmp_path):
    out = tmp_path / "t.json"
    code = (
        "import sys; from matviz import cli; "
        f"rc = cli.main(['export', {str(mvz)!r}, '-o', {str(out)!r}]); "
        "print(rc, 'QT' if 'PySide6' in sys.modules else 'NOQT')"
    )
    result = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip().splitlines()[-1] == "0 NOQT", result.stderr
    assert out.stat().st_size > 0


# -- errors: one line, exit 2, nothing left behind ---------------------------------------------
@pytest.mark.parametrize(
    ("extra", "output", "fragment"),
    [
        (["--format", "avi"], "a.gif", "invalid choice"),
        (["--format", "gif"], "a.mp4", "should end in .gif"),
        ([], "a.avi", "cannot tell the format"),
        (["--view", "nope"], "a.gif", "unknown view"),
        (["--size", "12x"], "a.gif", "not of the form"),
        (["--size", "321x180"], "a.mp4", "even width and height"),
        (["--fps", "60"], "a.gif", "at most 50 fps"),
        (["--from", "1", "--to", "1"], "a.gif", "empty time range"),
        (["--from", "2", "--to", "1"], "a.gif", "must be later than --from"),
        (["--from", "-1"], "a.gif", "at least 0"),
        (["--to", "1e9"], "a.gif", "after the end of the kernel"),
        (["--at", "1e9"], "a.png", "outside the kernel"),
        (["--at", "1"], "a.gif", "--at does not apply"),
        (["--fps", "5"], "a.json", "--fps does not apply"),
        (["--block", "99,0"], "a.png", "outside the"),
        (["--duration", "0"], "a.gif", "must be a finite number > 0"),
        ([], "a\nb.gif", "line break"),
        ([], "x" * 252 + ".gif", "too long"),
    ],
)
def test_bad_options(extra, output, fragment, mvz, no_leftovers, capsys):
    out = no_leftovers / output
    code, _, err = run(capsys, "export", mvz, *extra, "-o", out)
    assert_one_line_error(code, err, fragment)
    assert out.name not in os.listdir(no_leftovers)  # exists() raises on a name too long


def test_bad_paths_and_files(tmp_path, mvz, capsys):
    code, _, err = run(capsys, "export", mvz, "-o", tmp_path / "missing" / "a.gif")
    assert_one_line_error(code, err, "does not exist")
    code, _, err = run(capsys, "export", mvz, "-o", tmp_path)
    assert_one_line_error(code, err, "cannot tell the format")
    (tmp_path / "dir.gif").mkdir()
    code, _, err = run(capsys, "export", mvz, "-o", tmp_path / "dir.gif")
    assert_one_line_error(code, err, "is a folder")
    bad = tmp_path / "bad.mvz"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    code, _, err = run(capsys, "export", bad, "-o", tmp_path / "a.gif")
    assert_one_line_error(code, err, "bad.mvz")
    code, _, err = run(capsys, "export", tmp_path / "gone.mvz", "-o", tmp_path / "a.gif")
    assert_one_line_error(code, err, "gone.mvz")
    assert not (tmp_path / "a.gif").exists()


def test_unwritable_folder(tmp_path, mvz, capsys, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() != 0:  # root writes anywhere: then stand in for the permission check
        locked.chmod(0o500)
    else:
        real = os.access
        monkeypatch.setattr(
            os, "access", lambda p, m: False if str(p) == str(locked) else real(p, m)
        )
    try:
        code, _, err = run(capsys, "export", mvz, "-o", locked / "a.gif")
    finally:
        locked.chmod(0o700)
    assert_one_line_error(code, err, "not writable")
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize("fmt", ["gif", "mp4"])
def test_a_write_failure_midway_removes_the_partial_file(
    fmt, mvz, no_leftovers, closes_its_windows, capsys, monkeypatch
):
    cls = writers.GifWriter if fmt == "gif" else writers.Mp4Writer
    real, calls = cls.write, {"n": 0}

    def disk_full(self, frame):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        real(self, frame)

    monkeypatch.setattr(cls, "write", disk_full)
    out = no_leftovers / f"a.{fmt}"
    code, _, err = run(capsys, "export", mvz, "--size", "320x180", "--duration", "1", "-o", out)
    assert_one_line_error(code, err, "No space left on device")
    assert not out.exists() and calls["n"] == 3


def test_ctrl_c_removes_the_partial_file(
    mvz, no_leftovers, closes_its_windows, capsys, monkeypatch
):
    from matviz.app.export_render import FrameRenderer

    real = FrameRenderer.render
    calls = {"n": 0}

    def interrupted(self, t_ns):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(self, t_ns)

    monkeypatch.setattr(FrameRenderer, "render", interrupted)
    out = no_leftovers / "a.mp4"
    code, _, err = run(capsys, "export", mvz, "--size", "320x180", "--duration", "1", "-o", out)
    assert code == 130 and "interrupted" in err
    assert not out.exists()


def test_without_qt_a_picture_is_one_line_and_perfetto_still_works(mvz, tmp_path):
    code = (
        "import sys; sys.modules['PySide6'] = None; from matviz import cli; "
        "sys.exit(cli.main(sys.argv[1:]))"
    )
    gif = subprocess.run(
        [PY, "-c", code, "export", str(mvz), "-o", str(tmp_path / "a.gif")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gif.returncode == 2 and gif.stderr.count("\n") == 1, gif.stderr
    assert "draws with Qt, but PySide6 is not installed" in gif.stderr
    assert [p.name for p in tmp_path.iterdir()] == [mvz.name]
    json_out = tmp_path / "a.json"
    ok = subprocess.run(
        [PY, "-c", code, "export", str(mvz), "-o", str(json_out)], capture_output=True, timeout=120
    )
    assert ok.returncode == 0 and json_out.stat().st_size > 0


def test_default_times_are_never_blamed_on_options_not_given(tmp_path):
    from matviz.errors import MatvizError
    from matviz.export.options import build_options, frame_times

    video = build_options(tmp_path / "a.gif", fps=4, duration=1)
    with pytest.raises(MatvizError, match="took no time: there is nothing to animate"):
        frame_times(video, 0)  # not "--to (0 µs) must be later than --from (0 µs)"
    end = 2**53 + 3  # float(end) rounds up, past the end; the default --to is still the end
    times = frame_times(video, end)
    assert times[0] == 0 and times[-1] >= end - 2 and len(times) == 4
    with pytest.raises(MatvizError, match="--to 1e\\+13 µs is after the end"):
        frame_times(build_options(tmp_path / "a.gif", to=1e13), end)


@pytest.mark.parametrize("size", [(1280, 720), (640, 360)])
def test_a_long_caption_wraps_rather_than_losing_its_end(size, closes_its_windows):
    """A 1280x720 export of a simulated kernel 09 cut its caption at '⚠ simulated (NVIDIA H20':
    the caption wraps (three lines at most) and says where the data came from right after the
    time."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel

    from matviz.app.export_render import FrameRenderer
    from matviz.backends.contract import RunRequest, run

    params = {"BM": 256, "BN": 128, "BK": 32, "WT": 64, "PAD": 8, "STAGES": 3}
    trace = run(RunRequest("wmma", 1024, 1024, 1024, params=params, level=2))
    renderer = FrameRenderer(trace, ("all",), size, block=0)
    try:
        frame = renderer.render(trace.duration_ns // 2)
        caption = renderer.caption
        html = caption.text()
        height, width = caption.height(), caption.width()
        needed = caption.heightForWidth(width)
        alike = QLabel("t", textFormat=Qt.RichText, wordWrap=True)  # the same style, one line
        alike.setStyleSheet(caption.styleSheet())
        alike.ensurePolished()
        one_line = alike.heightForWidth(width)
        spacing = caption.fontMetrics().lineSpacing()
    finally:
        renderer.close()
    assert frame.shape == (size[1], size[0], 3)
    assert html.index("simulated") < html.index("block (")
    assert one_line < height <= one_line + 2 * spacing  # wrapped, three lines at most
    if size == (1280, 720):  # room enough: every line of it shows
        assert height >= needed

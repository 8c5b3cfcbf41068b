"""What goes wrong during an export: a view that raises, hostile output paths, one-frame GIFs and
GIFs too large to hold. Always one line and exit 2, the user's file as it was, nothing partial."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from matviz import cli
from matviz.errors import MatvizError
from matviz.export import atomic, options

OLD = b"the user's old file"


def run(capfd, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capfd.readouterr()
    return code, out, err


def assert_one_line_error(code, err, fragment):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("matviz: error: ") and fragment in lines[0], err


def folder_state(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


# -- item 2: a view that raises fails the export -------------------------------------------------
def _raise_in_slot(monkeypatch):
    from matviz.app.views.grid_view import GridView

    real = GridView._on_playhead

    def on_playhead(self, ns):
        if ns > 0:  # a trace whose values break the view once the playhead moves
            raise ZeroDivisionError("division by zero")
        real(self, ns)

    monkeypatch.setattr(GridView, "_on_playhead", on_playhead)


def _raise_in_paint(monkeypatch):
    from matviz.app.views.grid_view import GridView

    def paint_event(self, event):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(GridView, "paintEvent", paint_event, raising=False)


def _raise_in_swallowing_paint(monkeypatch):
    # pyqtgraph's scatter paint() prints its exceptions as a warning and goes on
    import pyqtgraph as pg

    def paint(self, *args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(pg.ScatterPlotItem, "paint", pg.debug.warnOnException(paint))


FAILURES = {
    "slot": _raise_in_slot,
    "paint": _raise_in_paint,
    "pyqtgraph": _raise_in_swallowing_paint,
}


@pytest.mark.parametrize("fmt", ["png", "gif", "mp4"])
@pytest.mark.parametrize("where", list(FAILURES))
def test_a_view_that_raises_fails_the_export_and_keeps_the_old_file(
    fmt, where, mvz, no_leftovers, closes_its_windows, capfd, monkeypatch
):
    out = no_leftovers / f"old.{fmt}"
    out.write_bytes(OLD)
    FAILURES[where](monkeypatch)
    timing = ["--at", "1"] if fmt == "png" else ["--fps", "4", "--duration", "1"]
    code, stdout, err = run(capfd, "export", mvz, "--size", "320x180", *timing, "-o", out)
    assert_one_line_error(code, err, "cannot draw the ")
    assert "ZeroDivisionError: division by zero" in err and "Traceback" not in err
    assert "wrote" not in stdout
    assert out.read_bytes() == OLD
    assert sorted(p.name for p in no_leftovers.iterdir()) == sorted([mvz.name, out.name])


def test_the_failing_view_is_named(trace, closes_its_windows, monkeypatch):
    from matviz.app.export_render import FrameRenderer

    _raise_in_slot(monkeypatch)
    renderer = FrameRenderer(trace, ("grid", "sm"), (320, 180), block=0)
    try:
        with pytest.raises(MatvizError, match=r"the grid view at t = 1\.0 µs: ZeroDivision"):
            renderer.render(1000)
    finally:
        renderer.close()


def test_a_swallowed_paint_error_names_its_view(trace, closes_its_windows, monkeypatch):
    from matviz.app.export_render import FrameRenderer

    _raise_in_swallowing_paint(monkeypatch)
    with pytest.raises(MatvizError, match="the throughput view for this trace: ZeroDivision"):
        FrameRenderer(trace, ("grid", "throughput"), (320, 180), block=0)


def test_frames_still_pass_other_warnings_on(trace, closes_its_windows, monkeypatch):
    import warnings

    from matviz.app.export_render import FrameRenderer
    from matviz.app.views.grid_view import GridView

    real = GridView._on_playhead

    def noisy(self, ns):
        warnings.warn("only a remark", UserWarning, stacklevel=1)
        real(self, ns)

    monkeypatch.setattr(GridView, "_on_playhead", noisy)
    renderer = FrameRenderer(trace, ("grid",), (320, 180), block=0)
    try:
        with pytest.warns(UserWarning, match="only a remark"):
            frame = renderer.render(trace.duration_ns // 2)
    finally:
        renderer.close()
    assert frame.shape == (180, 320, 3)


# -- item 7: output paths --------------------------------------------------------------------
def test_check_writable_turns_a_folder_it_may_not_search_into_one_line(unsearchable):
    with pytest.raises(MatvizError, match="Permission denied") as info:
        atomic.check_writable(unsearchable / "a.gif")
    assert "\n" not in str(info.value)


def test_check_writable_refuses_a_name_over_the_limit_with_one_line(tmp_path):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    with pytest.raises(MatvizError, match=f"at most {limit} fit here"):
        atomic.check_writable(tmp_path / ("x" * (limit - 3) + ".gif"))
    assert atomic.check_writable(tmp_path / ("x" * (limit - 4) + ".gif"))


def test_export_into_a_folder_it_may_not_search(unsearchable, mvz, capfd):
    code, _, err = run(capfd, "export", mvz, "-o", unsearchable / "a.json")
    assert_one_line_error(code, err, "Permission denied")


@pytest.mark.parametrize("name", [".mp4", ".gif", ".png", ".json", ".json.gz", ".MP4"])
def test_a_name_that_is_only_a_suffix_is_refused(name, mvz, no_leftovers, capfd):
    code, _, err = run(capfd, "export", mvz, "-o", no_leftovers / name)
    assert_one_line_error(code, err, "is only a suffix")
    assert not (no_leftovers / name).exists()


def test_record_refuses_a_name_that_is_only_a_suffix(tmp_path, capfd):
    code, _, err = run(capfd, "record", "tiled", "--backend", "sim", "-o", tmp_path / ".mvz")
    assert_one_line_error(code, err, "is only a suffix")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "stem", ["x" * 251, "é" * 125 + "x", "clip.v2." + "x" * 243, "x" * 100, "a"]
)
def test_the_temporary_name_fits_and_keeps_the_suffix(tmp_path, stem):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    path = tmp_path / (stem + ".mp4")
    assert len(os.fsencode(path.name)) <= limit
    out = atomic.AtomicOutput(path)
    assert len(os.fsencode(out.tmp.name)) <= limit and out.tmp.suffix == ".mp4"
    assert out.tmp.parent == path.parent and out.tmp.name.startswith(".")
    out.tmp.write_bytes(b"ok")  # the file system takes it
    assert out.commit() == path and path.read_bytes() == b"ok"
    with_room = atomic.AtomicOutput(path, reserve=24)
    assert len(os.fsencode(with_room.tmp.name)) <= limit - 24


def test_a_write_that_fails_is_one_error_and_the_old_file_stays(tmp_path):
    """An OSError inside ``with AtomicOutput(path)`` (a full disk: `python -m
    matviz.bench.readme_table` gave a traceback on a 600k tmpfs) is one MatvizError; the old
    file is kept and no temporary is left."""
    path = tmp_path / "README.md"
    path.write_text("old\n")
    with pytest.raises(MatvizError) as raised, atomic.AtomicOutput(path) as tmp:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert str(raised.value) == f"cannot write '{path}': No space left on device"
    assert list(tmp_path.iterdir()) == [path] and path.read_text() == "old\n"


@pytest.mark.parametrize("fmt", ["png", "mp4"])
def test_a_name_of_255_bytes_exports(fmt, mvz, no_leftovers, closes_its_windows, capfd):
    out = no_leftovers / ("x" * (255 - 4) + f".{fmt}")
    timing = ["--at", "1"] if fmt == "png" else ["--fps", "2", "--duration", "1"]
    code, _, err = run(capfd, "export", mvz, "--size", "320x180", *timing, "-o", out)
    assert code == 0, err
    assert iio.imread(out, index=None, **({"plugin": "FFMPEG"} if fmt == "mp4" else {})).size


def test_a_name_of_256_bytes_is_one_line(mvz, no_leftovers, capfd):
    code, _, err = run(capfd, "export", mvz, "-o", no_leftovers / ("x" * 252 + ".gif"))
    assert_one_line_error(code, err, "too long (256 bytes, at most 255 here)")


def test_a_line_break_in_the_output_is_shown_escaped(mvz, no_leftovers, capfd):
    code, _, err = run(capfd, "export", mvz, "-o", no_leftovers / "a\nb\r.gif")
    assert_one_line_error(code, err, "line break")
    assert "a\\nb\\r.gif" in err


# -- item 8: one-frame GIF ------------------------------------------------------------------------
@pytest.mark.parametrize(("fps", "duration", "frames"), [(1, 1, 1), (1, 0.4, 1), (2, 1, 2)])
def test_a_gif_of_one_or_two_frames(fps, duration, frames, mvz, no_leftovers, closes_its_windows,
                                    capfd):  # fmt: skip
    out = no_leftovers / "few.gif"
    argv = ["export", mvz, "--fps", fps, "--duration", duration, "--size", "160x90", "-o", out]
    code, stdout, err = run(capfd, *argv)
    assert code == 0, err
    assert f"{frames} frame" in stdout
    decoded = iio.imread(out, index=None)
    assert decoded.shape[:3] == (frames, 90, 160)
    assert len(np.unique(decoded[0].reshape(-1, decoded.shape[-1]), axis=0)) > 4


# -- item 13: the GIF memory guard ----------------------------------------------------------------
def test_the_gif_guard_counts_every_copy_it_holds():
    big = options.ExportOptions(format="gif", fps=30, duration_s=3.0, size=(7680, 4320))
    # 90 frames of 8K: one byte per pixel (~2.8 GiB) passed the old 3 GiB limit; the export
    # peaked at 6.25 GB: imageio's frames, Pillow's copies, each frame in flight
    assert big.n_frames * 7680 * 4320 < options.GIF_MEMORY_LIMIT
    assert options.gif_memory(big) > 2 * big.n_frames * 7680 * 4320
    with pytest.raises(MatvizError, match=r"needs ~6\.\d GiB"):
        options.check(big)
    small = options.ExportOptions(format="gif", fps=30, duration_s=10.0, size=(1280, 720))
    options.check(small)  # the default export still passes
    assert options.gif_memory(small) < 2**30


def test_palette_indices_in_slabs_are_those_of_the_whole_frame():
    from matviz.export import writers

    rng = np.random.default_rng(11)
    frame = rng.integers(0, 256, (1100, 1500, 3), dtype=np.uint8)  # > INDEX_CHUNK_PIXELS
    assert frame.shape[0] * frame.shape[1] > writers.INDEX_CHUNK_PIXELS
    palette = writers.FixedPalette(rng.integers(0, 256, (40, 3), dtype=np.uint8))
    q = (frame >> (8 - writers.LUT_BITS)).astype(np.int32)
    bits = writers.LUT_BITS
    whole = palette.lut[(q[..., 0] << (2 * bits)) | (q[..., 1] << bits) | q[..., 2]]
    assert np.array_equal(palette.index(frame), whole)


def test_a_gif_logical_layout_larger_than_the_frame_counts_too():
    tiny = options.ExportOptions(format="gif", fps=1, duration_s=1.0, size=(64, 64))
    lw, lh = options.logical_size(tiny.views, tiny.size)
    assert (lw, lh) == (1760, 1760)  # square frame: the layout is scaled up to fit its width
    assert options.gif_memory(tiny) >= options.GIF_FRAME_PER_LOGICAL_PIXEL * lw * lh


@pytest.mark.parametrize(
    ("size", "fps", "duration"), [("7680x4320", 30, 3), ("3840x2160", 50, 4), ("1920x1080", 50, 20)]
)
def test_the_gif_guard_refuses_before_rendering(size, fps, duration, mvz, tmp_path, capfd,
                                                monkeypatch):  # fmt: skip
    from matviz.app import export_render

    drawn = []
    monkeypatch.setattr(export_render.FrameRenderer, "__init__", lambda *a, **k: drawn.append(a))
    out = tmp_path / "big.gif"
    out.write_bytes(OLD)
    before = folder_state(tmp_path)
    argv = ["export", mvz, "--size", size, "--fps", fps, "--duration", duration, "-o", out]
    code, _, err = run(capfd, *argv)
    assert_one_line_error(code, err, "GiB of memory while it is written")
    assert drawn == [] and folder_state(tmp_path) == before


# -- Perfetto stops cleanly too ---------------------------------------------------------------
def test_a_stop_signal_mid_perfetto_export_keeps_the_old_file(tmp_path, make_sim):
    import signal
    import subprocess
    import sys
    import time

    from matviz.core.trace_io import save_trace

    mvz = tmp_path / "big.mvz"
    save_trace(make_sim(m=12000, n=12000, k=32, level=1), mvz)  # 562,500 blocks: seconds
    out = tmp_path / "old.json"
    out.write_bytes(OLD)
    cmd = [sys.executable, "-m", "matviz.cli", "export", str(mvz), "--max-events", "600000",
           "-o", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".old.*.part.json")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert list(tmp_path.glob(".old.*.part.json")), "the export never started writing"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines() == ["matviz: interrupted"]
    assert out.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.mvz", "old.json"]


@pytest.mark.parametrize(("free", "expected"), [(0, "No space left on device"), (1 << 40, "pipe")])
def test_a_failed_mp4_write_names_a_full_disk(tmp_path, monkeypatch, free, expected):
    """ffmpeg runs quiet (its lines would break the one-line promise); a full disk reaches us
    only as a broken pipe, so the writer says what happened."""
    import shutil
    from collections import namedtuple

    from matviz.export import writers

    writer = writers.Mp4Writer(tmp_path / "v.mp4", 10)

    def broken(frame):
        raise BrokenPipeError(32, "Broken pipe")

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(writer.file, "append_data", broken)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(1 << 41, 1 << 41, free))
    with pytest.raises(OSError, match=expected):
        writer.write(np.zeros((64, 64, 3), np.uint8))
    monkeypatch.undo()
    writer.abort()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_png_write_on_a_full_disk_fails_once_and_quietly():
    # imageio writing to the file itself failed again while it was collected, printing a
    # second traceback after `matviz bench --plot` had said its one line (found on a 600k tmpfs)
    code = (
        "import gc, numpy as np\n"
        "from pathlib import Path\n"
        "from matviz.export.writers import PngWriter\n"
        "w = PngWriter(Path('/dev/full'))\n"
        "w.write(np.zeros((8, 8, 3), np.uint8))\n"
        "try:\n"
        "    w.close()\n"
        "except OSError as exc:\n"
        "    print('failed', exc.errno)\n"
        "del w\n"
        "gc.collect()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == f"failed {errno.ENOSPC}" and done.stderr == ""

"""`matviz compare A.mvz B.mvz -o out.png|gif|mp4` and File → Compare with…"""

from __future__ import annotations

import imageio.v3 as iio
import pytest

from matviz import cli
from matviz.paths import TRACE_DIR

NAIVE, TILED = TRACE_DIR / "naive_t16_1024.mvz", TRACE_DIR / "tiled_t32_p0_1024.mvz"


def run(capsys, *argv):
    code = cli.main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_still_and_an_animation(capsys, tmp_path):
    png = tmp_path / "c.png"
    code, out, err = run(capsys, "compare", NAIVE, TILED, "-o", png, "--size", "960x540")
    assert code == 0, err and "1 frame" in out
    assert iio.imread(png).shape == (540, 960, 3)
    gif = tmp_path / "c.gif"
    code, out, err = run(capsys, "compare", NAIVE, TILED, "-o", gif, "--fps", 4, "--duration", 1)
    assert code == 0, err
    frames = iio.imread(gif, index=None)
    assert frames.shape[0] == 4 and not (frames[0] == frames[-1]).all()  # the playhead moves


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["BAD", "x.txt"], "write .png, .gif or .mp4"),
        (["GONE", "x.png"], "gone.mvz"),
        (["OK", "x.png", "--fps", "3"], "do not apply to a .png"),
    ],
)
def test_mistakes_are_one_line_and_keep_the_old_file(capsys, tmp_path, args, fragment):
    second = {"BAD": TILED, "GONE": tmp_path / "gone.mvz", "OK": TILED}[args[0]]
    out = tmp_path / args[1]
    out.write_bytes(b"keep me")
    code, _, err = run(capsys, "compare", NAIVE, second, "-o", out, *args[2:])
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err
    assert out.read_bytes() == b"keep me"


def test_a_full_disk_keeps_the_old_file(capsys, tmp_path, monkeypatch):
    """The comparison is written through the export job: its guard and atomic rename hold."""
    from matviz.export import writers

    def full(self, frame):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writers.GifWriter, "write", full)
    out = tmp_path / "c.gif"
    out.write_bytes(b"keep me")
    code, _, err = run(capsys, "compare", NAIVE, TILED, "-o", out, "--fps", 2, "--duration", 1)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "No space left" in err
    assert out.read_bytes() == b"keep me" and sorted(p.name for p in tmp_path.iterdir()) == [
        "c.gif"
    ]

"""The GUI benchmark's command line: a bad speed or a bad trace is one line and exit 2."""

from __future__ import annotations

import pytest

from matviz.bench import gui
from matviz.paths import TRACE_DIR


def test_a_speed_the_player_has_not_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        gui.main(["--speed", "3", "--trace", str(TRACE_DIR / "tiled_t32_p0_1024.mvz")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and "--speed: invalid choice: 3.0" in err


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 cut short", b"\x00" * 4096])
def test_a_bad_trace_is_one_line_before_anything_plays(qapp, tmp_path, capsys, content):
    bad = tmp_path / "bad.mvz"
    bad.write_bytes(content)
    good = TRACE_DIR / "tiled_t32_p0_1024.mvz"
    assert gui.main(["--quick", "--trace", str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "cannot read trace" in err and str(bad) in err
    assert "playback" not in out  # the good trace was not played first

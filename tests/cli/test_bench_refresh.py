"""``python -m matviz.bench.kernels --from F [--stale]``: time again the configurations an
earlier benchmark holds, or only those whose rows timed an earlier version of the code."""

from __future__ import annotations

import json
import os

import pytest

from matviz.bench import kernels as bench
from matviz.core.registry import configure
from matviz.errors import MatvizError
from matviz.toolchain.code_digest import level0_digest
from matviz.toolchain.nvcc import nvcc_path

needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc tells which code a row timed")


def _row(kernel: str, params: dict, code: str | None) -> dict:
    row = {"kernel": kernel, "label": "x", "params": params, "size": 256, "ms": 1.5}
    return row if code is None else row | {"code": code}


def _today(kernel: str, params: dict) -> str:
    return level0_digest(configure(kernel, params, 256, 256, 256))


@needs_nvcc
def test_stale_keeps_only_rows_of_earlier_code_in_the_files_order(tmp_path):
    t16, t32 = {"tile": 16, "pad": 0}, {"tile": 32, "pad": 0}
    naive = {"tile": 16, "b_col_major": 0}
    rows = [
        _row("tiled", t32, "0123456789abcdef"),  # an earlier version
        _row("tiled", t16, _today("tiled", t16)),  # today's code
        _row("naive", naive, None),  # no digest: taken as earlier
        _row("tiled", t32, "0123456789abcdef"),  # the same configuration again
    ]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    assert bench.configurations_from(str(path), stale=True) == [("tiled", t32), ("naive", naive)]
    assert bench.configurations_from(str(path)) == [("tiled", t32), ("tiled", t16),
                                                    ("naive", naive)]  # fmt: skip
    # a kernel named by number or stem, as --kernels allows
    assert bench.configurations_from(str(path), ["01_naive"], stale=True) == [("naive", naive)]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--stale"], "--stale needs --from"),
        (["--from", "{missing}"], "no such file"),
        (["--from", "{garbage}"], "is not JSON"),
        (["--from", "{deep}"], "nested too deeply"),
        (["--from", "{bad_row}"], "malformed row"),
        (["--from", "{unknown}"], "unknown kernel"),
    ],
)
def test_a_bad_earlier_file_is_one_line_and_times_nothing(tmp_path, capsys, monkeypatch,
                                                          argv, fragment):  # fmt: skip
    files = {"missing": tmp_path / "none.json", "garbage": tmp_path / "g.json",
             "bad_row": tmp_path / "b.json", "unknown": tmp_path / "u.json",
             "deep": tmp_path / "d.json"}  # fmt: skip
    files["deep"].write_text("[" * 100_000 + "]" * 100_000)
    files["garbage"].write_bytes(b"\x00\xff{")
    files["bad_row"].write_text(json.dumps([{"kernel": "tiled", "params": 3}]))
    files["unknown"].write_text(json.dumps([_row("no_such_kernel", {}, None)]))
    timed = []
    monkeypatch.setattr(bench, "measure", lambda *a, **k: timed.append(a))
    out = tmp_path / "out.json"
    monkeypatch.setattr("sys.argv", ["kernels", "--json", str(out),
                                     *[a.format(**files) for a in argv]])  # fmt: skip
    with pytest.raises(SystemExit) as stop:
        bench.main()
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and fragment in err and "Traceback" not in err
    assert len(err.splitlines()) == 1 or err.startswith("usage:")
    assert not timed and not out.exists()


def test_a_fifo_is_refused_unread(tmp_path):
    fifo = tmp_path / "rows.json"
    os.mkfifo(fifo)
    with pytest.raises(MatvizError, match="not a regular file"):
        bench.configurations_from(str(fifo))


def test_a_failed_measurement_is_one_line_and_keeps_the_rows_before(tmp_path, capsys,
                                                                    monkeypatch):  # fmt: skip
    path = tmp_path / "rows.json"
    t16, t32 = {"tile": 16, "pad": 0}, {"tile": 32, "pad": 0}
    path.write_text(json.dumps([_row("tiled", t16, None), _row("tiled", t32, None)]))

    def measure(kernel, params, *rest):
        if params["tile"] == 32:
            raise MatvizError("CUDA backend needs CuPy")
        return {"kernel": kernel, "params": params}

    monkeypatch.setattr(bench, "measure", measure)
    out = tmp_path / "out.json"
    monkeypatch.setattr("sys.argv", ["kernels", "--from", str(path), "--json", str(out)])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "needs CuPy" in err[0]
    assert json.loads(out.read_text()) == [{"kernel": "tiled", "params": t16}]


@pytest.mark.parametrize("target", ["same", "no_folder", "folder", "control"])
def test_an_output_it_cannot_or_must_not_write_is_refused_before_any_timing(
    tmp_path, capsys, monkeypatch, target
):
    earlier = tmp_path / "rows.json"
    earlier.write_text(json.dumps([_row("tiled", {"tile": 16, "pad": 0}, None)]))
    before = earlier.read_bytes()
    out = {"same": tmp_path / "." / "rows.json", "no_folder": tmp_path / "none" / "out.json",
           "folder": tmp_path, "control": tmp_path / "a\nb.json"}[target]  # fmt: skip
    timed = []
    monkeypatch.setattr(bench, "measure", lambda *a, **k: timed.append(a))
    monkeypatch.setattr("sys.argv", ["kernels", "--from", str(earlier), "--json", str(out)])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and not timed
    assert earlier.read_bytes() == before  # the file it reads is never replaced

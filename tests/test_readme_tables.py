"""The README's benchmark tables are what the commands make from the bundled results."""

from __future__ import annotations

import json
import math
import re

from matviz.bench import ladder, readme_table
from matviz.cli import bench
from matviz.paths import RESOURCE_DIR

README = readme_table.README


def section(start: str, end: str) -> str:
    found = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), README.read_text(), re.S)
    assert found, start
    return found.group(1)


def test_the_kernel_table_is_the_saved_benchmark():
    source = "resources/bench/h200_kernels_4096.json"
    rows = json.loads((RESOURCE_DIR / "bench" / "h200_kernels_4096.json").read_text())
    text = section(readme_table.START, readme_table.END)
    assert text == readme_table.table(rows, source)
    # one table per input type, each against cuBLAS on its own inputs
    assert text.count("| kernel | parameters |") == len({r.get("dtype", "float32") for r in rows})


def test_the_ladder_table_is_the_saved_ladder():
    source = "resources/bench/h200_ladder_4096.json"
    rows = ladder.load_rows(RESOURCE_DIR / "bench" / "h200_ladder_4096.json")
    assert section(bench.README_START, bench.README_END) == ladder.markdown(rows, source)


def test_the_kernel_table_command_refuses_a_bad_file_in_one_line_and_keeps_the_readme(
    tmp_path, capsys
):
    """`python -m matviz.bench.readme_table F`: a truncated, mistyped or empty file, or a FIFO,
    ends in one line and exit 2 with the README untouched; a good file rewrites the section."""
    import os

    saved = (RESOURCE_DIR / "bench" / "h200_kernels_4096.json").read_bytes()
    readme = tmp_path / "README.md"
    before = f"intro\n{readme_table.START}\nold\n{readme_table.END}\nend\n"
    readme.write_text(before)
    rows = json.loads(saved)
    rows[0]["gflops"] = "fast"
    bad = {"truncated.json": saved[: len(saved) // 2], "typed.json": json.dumps(rows).encode(),
           "empty.json": b"[]"}  # fmt: skip
    # json reads these as numbers; the table printed them (a size of 400 digits, 'nan')
    for name, key, value in (("huge.json", "size", 10**400), ("nan.json", "gflops", math.nan),
                             ("infinite.json", "rel_error", math.inf),
                             ("big.json", "gflops", 10**60), ("zero.json", "size", 0)):  # fmt: skip
        rows = json.loads(saved)
        rows[-1][key] = value
        bad[name] = json.dumps(rows).encode()
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    os.mkfifo(tmp_path / "fifo.json")
    for name in [*bad, "fifo.json"]:
        assert readme_table.main([str(tmp_path / name), "--readme", str(readme)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("readme_table: error: ") and err.count("\n") == 1, err
        assert readme.read_text() == before
    (tmp_path / "good.json").write_bytes(saved)
    assert readme_table.main([str(tmp_path / "good.json"), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("end\n") and "| kernel |" in text


def test_the_kernel_table_on_a_full_disk_is_one_line_and_keeps_the_readme(
    tmp_path, capsys, monkeypatch
):
    """A full disk while the section is written (a 600k tmpfs gave a traceback, exit 1)."""
    import errno
    import os
    from pathlib import Path

    readme = tmp_path / "README.md"
    before = f"intro\n{readme_table.START}\nold\n{readme_table.END}\n"
    readme.write_text(before)

    def full(self, *_args, **_kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    saved = RESOURCE_DIR / "bench" / "h200_kernels_4096.json"
    assert readme_table.main([str(saved), "--readme", str(readme)]) == 2
    err = capsys.readouterr().err
    assert err == f"readme_table: error: cannot write '{readme}': No space left on device\n"
    assert readme.read_text() == before and list(tmp_path.iterdir()) == [readme]


def test_ctrl_c_while_the_kernel_table_is_written_keeps_the_readme(tmp_path, capsys, monkeypatch):
    from pathlib import Path

    readme = tmp_path / "README.md"
    before = f"{readme_table.START}\nold\n{readme_table.END}\n"
    readme.write_text(before)
    real = Path.write_text

    def interrupted(self, data, *args, **kwargs):
        real(self, data[: len(data) // 2], *args, **kwargs)  # halfway
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", interrupted)
    saved = RESOURCE_DIR / "bench" / "h200_kernels_4096.json"
    assert readme_table.main([str(saved), "--readme", str(readme)]) == 130
    assert capsys.readouterr().err == "readme_table: interrupted\n"
    assert readme.read_text() == before and list(tmp_path.iterdir()) == [readme]

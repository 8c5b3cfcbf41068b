"""The README's benchmark tables are what the commands make from the bundled results."""

from __future__ import annotations

import json
import math
import re

from matviz.bench import ladder, readme_table
from matviz.cli import bench
from matviz.core.registry import get_kernel
from matviz.errors import MatvizError
from matviz.paths import RESOURCE_DIR

README = readme_table.README


def section(start: str, end: str) -> str:
    found = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), README.read_text(), re.S)
    assert found, start
    return found.group(1)


SAVED_RUNS = ("h200_kernels_4096.json", "h100_kernels_4096.json")  # the README's, in order


def test_the_kernel_table_is_the_saved_benchmark():
    runs = [json.loads((RESOURCE_DIR / "bench" / name).read_text()) for name in SAVED_RUNS]
    text = section(readme_table.START, readme_table.END)
    assert text == "\n\n".join(
        readme_table.table(rows, f"resources/bench/{name}")
        for name, rows in zip(SAVED_RUNS, runs, strict=True)
    )
    # one table per GPU and input type, each against cuBLAS on its own inputs
    groups = {(ladder.row_device(r), ladder.row_dtype(r)) for rows in runs for r in rows}
    assert text.count("| kernel | parameters |") == len(groups)
    assert "on one NVIDIA H100 80GB HBM3" in text and "on one NVIDIA H200" in text


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


def test_the_kernel_table_gives_level_2_as_recorded_where_it_was_measured():
    """Level 2 as `matviz record` keeps it (its overhead, and how many blocks stamped), beside
    level 2 with every block stamping; rows saved before it was measured say so, and the
    targets count only the rows that measured it."""
    row = {"kernel": "tiled", "label": "T32 P2", "size": 4096, "gflops": 8814.5,
           "cublas_gflops": 47764.0, "pct_cublas": 18.5, "overhead_l1_pct": 0.55,
           "overhead_l2_pct": 5.53, "span_vs_event_l1": 0.9998, "rel_error": 1.1e-6}  # fmt: skip
    kept = {**row, "label": "T32 P0", "overhead_l2kept_pct": 2.08, "phase_every_l2kept": 4,
            "stamp_form_l2kept": "store"}  # fmt: skip
    every = {**row, "label": "T16 P0", "overhead_l2_pct": 1.0, "overhead_l2kept_pct": -0.4,
             "phase_every_l2": 2, "phase_every_l2kept": 2}  # the budget's stride  # fmt: skip
    text = readme_table.table([row, kept, every], "rows.json")
    assert "| +5.53% | not measured |" in text
    assert "| +5.53% | +2.08% (stored), 1 block in 4 |" in text
    assert "| +1.00%, 1 block in 2 | -0.40%, 1 block in 2 |" in text
    assert "level 2 with no target within 3% of level 0 in 1 of 3" in text
    assert "level 2 as recorded within 3% of level 0 in 2 of 2 configurations" in text
    assert "(stored)" in text.split("Targets:")[1]  # the note on the stored form


def test_a_row_that_kept_the_held_form_says_so_and_the_note_says_what_it_is():
    row = {"kernel": "register_tiling_1d", "label": "BM64 BN64 BK8 TM16", "size": 4096,
           "gflops": 18834.0, "cublas_gflops": 51032.0, "pct_cublas": 36.9,
           "overhead_l1_pct": 0.06, "overhead_l2_pct": 7.93, "span_vs_event_l1": 0.9995,
           "rel_error": 1.1e-6, "overhead_l2kept_pct": 2.71, "phase_every_l2kept": 8,
           "stamp_form_l2kept": "held"}  # fmt: skip
    text = readme_table.table([row], "rows.json")
    assert "| +7.93% | +2.71% (held), 1 block in 8 |" in text
    note = text.split("Targets:")[1]
    assert "(held): level 2's marks kept in the lanes, a step's middle mark in shared" in note
    assert "(stored)" not in note  # no row kept the stored form


def test_the_k_loop_table_is_the_saved_ladder_with_the_bundled_k_loops():
    from matviz.bench import sass_loops
    from matviz.core import sass_table

    # the H200's ladder: the one measured with the whole-tile k loops of 06-10 (2026-12-06)
    source = "resources/bench/h200_ladder_4096.json"
    rows = ladder.load_rows(RESOURCE_DIR / "bench" / "h200_ladder_4096.json")
    text = section(sass_loops.START, sass_loops.END)
    assert text == sass_loops.markdown(rows, source)
    # every rung but wgmma's (its loop waits on asynchronous Tensor Core work) has a k loop
    shown = [r for r in rows if f"| {r['kernel']} |" in text]
    assert [r["kernel"] for r in rows if r not in shown] == ["wgmma_tma"]
    for row in shown:
        spec = get_kernel(row["kernel"])
        loop = sass_table.k_loop(spec.stem, spec.labels(row["params"]))
        assert loop is not None and (loop.math_op == "HMMA") == (row["dtype"] != "float32")
        if loop.math_op == "FFMA":  # below what issue allows, on the H200 as measured
            assert row["pct_peak"] < loop.math_share


def test_the_k_loop_command_refuses_a_bad_ladder_in_one_line(tmp_path, capsys):
    from matviz.bench import sass_loops

    bad = tmp_path / "ladder.json"
    bad.write_text('[{"kernel": "tiled", "gflops": "fast"}]')
    readme = tmp_path / "README.md"
    readme.write_text("x\n<!-- sassloops:start -->\nold\n<!-- sassloops:end -->\n")
    for path in (bad, tmp_path / "missing.json"):
        assert sass_loops.main([str(path), "--readme", str(readme)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("matviz: error: ")
    assert "old" in readme.read_text()


def test_the_k_loop_table_is_written_whole_or_not_at_all(tmp_path, capsys, monkeypatch):
    """`--table --out F`: without nvcc, or into a folder that is not there, one line and exit 2,
    and a table that was there is kept as it was."""
    from matviz.bench import sass_loops
    from matviz.toolchain import sass

    out = tmp_path / "loops.json"
    out.write_text('{"kept": true}')

    def no_tools(*_a, **_k):
        raise MatvizError("reading SASS needs nvcc and cuobjdump")

    monkeypatch.setattr(sass, "sass", no_tools)
    assert sass_loops.main(["--table", "--out", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert out.read_text() == '{"kept": true}'
    monkeypatch.setattr(sass_loops, "count", lambda config: None)  # compiles nothing
    assert sass_loops.main(["--table", "--out", str(tmp_path / "no" / "loops.json")]) == 2
    assert capsys.readouterr().err.startswith("matviz: error: ")
    assert sass_loops.main(["--table", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["per_k_step"] == {}


def test_a_k_loop_counts_the_loads_that_run(monkeypatch):
    """The ``@!PT LDS RZ, [RZ]`` ptxas puts after a cp.async wait never runs: the k-loop table
    counted three of them as shared loads in each of kernels 07, 09 and 10 (67 for 64)."""
    from matviz.bench import sass_loops
    from matviz.core.registry import get_kernel
    from matviz.toolchain import sass

    listing = [
        (0x00, "LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR6][R4.64]"),
        (0x10, "@!PT LDS RZ, [RZ]"),
        (0x20, "LDSM.16.M88.4 R8, [R2]"),
        (0x30, "LDS.128 R20, [R2+0x10]"),
        (0x40, "HMMA.16816.F32 R12, R8, R10, R12"),
        (0x50, "BAR.SYNC.DEFER_BLOCKING 0x0"),
        (0x60, "@P0 BRA 0x0"),
    ]
    monkeypatch.setattr(sass, "sass", lambda config, level: listing)
    kernel = get_kernel("mma_pipeline")
    config = kernel.configure(kernel.resolve_params({}), 64, 64, 64)
    loop = sass_loops.count(config)
    assert loop is not None and config.n_barriers == 1
    assert (loop.instructions, loop.math, loop.shared_loads, loop.copies) == (7, 1, 2, 1)


def test_the_shared_ops_table_is_written_whole_or_not_at_all(tmp_path, capsys, monkeypatch):
    """`python -m matviz.bench.sass_table --out F`: without nvcc, into a folder that is not
    there, or interrupted, one line and exit 2 (130), and a table that was there is kept."""
    from matviz.bench import sass_table as shared_ops
    from matviz.toolchain import sass

    out = tmp_path / "ops.json"
    out.write_text('{"kept": true}')

    def no_tools(*_a, **_k):
        raise MatvizError("reading SASS needs nvcc and cuobjdump")

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(sass, "sass", no_tools)
    assert shared_ops.main(["--out", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    monkeypatch.setattr(sass, "sass", interrupted)
    assert shared_ops.main(["--out", str(out)]) == 130
    assert capsys.readouterr().err == "matviz: interrupted\n"
    assert out.read_text() == '{"kept": true}'
    monkeypatch.setattr(shared_ops, "_row", lambda job: ("k", {}))  # compiles nothing
    assert shared_ops.main(["--out", str(tmp_path / "no" / "ops.json")]) == 2
    assert capsys.readouterr().err.startswith("matviz: error: ")
    assert shared_ops.main(["--out", str(out)]) == 0
    assert json.loads(out.read_text())["per_warp_and_k_step"] == {"k": {}}
    assert [p.name for p in tmp_path.iterdir()] == ["ops.json"]  # no temporary left

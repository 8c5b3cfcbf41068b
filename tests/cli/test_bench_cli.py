"""``matviz bench``: the ladder's table, markdown, README section and plot from saved rows, and
the best configuration each kernel runs at."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from matviz import cli
from matviz.backends.cuda_status import cuda_status
from matviz.bench import ladder
from matviz.core.registry import get_kernel, kernels
from matviz.errors import MatvizError

ROWS = [
    {"kernel": "naive", "number": 1, "params": {"tile": 16, "b_col_major": 0}, "config": "T16",
     "size": 4096, "device": "NVIDIA H200", "gflops": 5285.0, "cublas_gflops": 49500.0,
     "pct_cublas": 10.7, "pct_peak": 7.9, "peak_gflops": 66908.16, "rel_error": 1.1e-6,
     "registers": 32, "blocks_per_sm": 8, "limiter": "threads", "overhead_l1_pct": 0.16,
     "overhead_l2_pct": 0.05, "ms": 26.0},
    {"kernel": "tiled", "number": 2, "params": {"tile": 32, "pad": 0, "drop_sync": 0},
     "config": "T32 P0", "size": 4096, "device": "NVIDIA H200", "gflops": 8900.0,
     "cublas_gflops": 50100.0, "pct_cublas": 17.8, "pct_peak": 13.3, "peak_gflops": 66908.16,
     "rel_error": 1.1e-6, "registers": 32, "blocks_per_sm": 2, "limiter": "threads",
     "overhead_l1_pct": -0.2, "overhead_l2_pct": 1.4, "ms": 15.4},
]  # fmt: skip


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps(ROWS))
    return path


def test_saved_rows_become_table_markdown_readme_and_plot(tmp_path, saved, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{cli.bench.README_START}\nold\n{cli.bench.README_END}\nafter\n")
    md, png = tmp_path / "t.md", tmp_path / "p.png"
    code, out, err = run(capsys, "bench", "--from", str(saved), "--markdown", str(md),
                         "--readme", str(readme), "--plot", str(png))  # fmt: skip
    assert code == 0, err
    assert "8,900" in out and "17.8" in out and "13.3" in out and "+1.40%" in out
    table = md.read_text()
    assert table.count("\n| ") == 3  # the rule under the header, then one line per kernel
    assert "| tiled | T32 P0 | 8,900 | 17.8 | 13.3 |" in table
    # the model's shared-memory ceiling, not measured: none for the naive kernel, 16% for 02
    assert table.splitlines()[2].endswith("| n/a |")
    assert table.splitlines()[3].endswith("| +1.40% | 16 |")
    assert "cuBLAS 49,500-50,100 GFLOP/s in the same process" in table
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("after\n") and "old" not in text
    assert table in text
    with Image.open(png) as image:
        assert image.size == (1200, 620)


@pytest.mark.parametrize("change", [
    {"params": None}, {"params": {"tile": 33}}, {"kernel": "kernel_99"}, {"params": {"tile": "32"}},
])  # fmt: skip
def test_a_row_the_model_cannot_configure_has_no_ceiling(tmp_path, capsys, change):
    path = tmp_path / "ladder.json"
    row = {k: v for k, v in (ROWS[1] | change).items() if v is not None}  # None: saved without
    path.write_text(json.dumps([ROWS[0], row]))
    md = tmp_path / "t.md"
    code, _, err = run(capsys, "bench", "--from", str(path), "--markdown", str(md))
    assert code == 0, err
    assert md.read_text().splitlines()[3].endswith("| +1.40% | n/a |")


def test_a_thinned_level_2_says_how_many_blocks_stamped(tmp_path, capsys):
    """Rows measured since the recorder keeps level 2 within its target say how many blocks
    stamped where it was fewer than all; older rows, measured with every block, say nothing."""
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps([{**ROWS[0], "phase_every_l2": 1},
                                {**ROWS[1], "phase_every_l2": 4}]))  # fmt: skip
    md = tmp_path / "t.md"
    code, out, err = run(capsys, "bench", "--from", str(path), "--markdown", str(md))
    assert code == 0, err
    table = md.read_text()
    assert "| +0.16% | +0.05% |" in table
    assert "| -0.20% | +1.40% (1 block in 4 stamping) |" in table
    assert "+1.40% (1 block in 4 stamping)" in out


@pytest.mark.parametrize("sources, says", [
    ((None, "measured"), "each kernel at its fastest measured configuration;"),
    ((None, "default"), "each kernel at its fastest measured configuration (tiled: the "
                        "description's default, none measured on this GPU at this size);"),
    (("tuned", "default"), "each kernel at its fastest measured configuration (naive: the "
                           "configuration `matviz sweep --tune` kept; tiled: the description's "
                           "default, none measured on this GPU at this size);"),
    (("default", "default"), "each kernel at the description's default, none measured on this "
                             "GPU at this size;"),
])  # fmt: skip
def test_the_table_says_which_rungs_ran_no_measured_configuration(tmp_path, capsys, sources,
                                                                   says):  # fmt: skip
    """An H100 with no rows of kernels 06 and 07 ran their defaults (77.9% of cuBLAS against
    88.3% tuned) under a line that said 'each kernel at its fastest measured configuration'."""
    path = tmp_path / "ladder.json"
    rows = [row | ({"config_source": src} if src else {})
            for row, src in zip(ROWS, sources, strict=True)]  # fmt: skip
    path.write_text(json.dumps(rows))
    md = tmp_path / "t.md"
    code, _, err = run(capsys, "bench", "--from", str(path), "--markdown", str(md))
    assert code == 0, err
    assert f"4096³ fp32 on one NVIDIA H200, {says} cuBLAS" in md.read_text()


def _table_and_tuned(tmp_path, device: str):
    """A measured table with kernel 02 at T32 P1, and a tuned file with T16 P1 for ``device``."""
    from matviz.core import tuned

    table = tmp_path / "all.json"
    table.write_text(json.dumps([
        {"kernel": "tiled", "params": {"tile": 32, "pad": 1}, "size": 4096, "gflops": 9000},
    ]))  # fmt: skip
    kept = tuned.Tuned(params={"tile": 16, "pad": 1}, gflops=9500.0, backend="cuda",
                       evaluated=4, space=6)  # fmt: skip
    return table, tuned.save("tiled", 4096, 4096, 4096, device, kept, tmp_path / "t.json")


def test_a_rung_knows_where_its_configuration_came_from(tmp_path):
    table, path = _table_and_tuned(tmp_path, "NVIDIA H200")
    empty = tmp_path / "none.json"
    assert ladder.best_choice("tiled", 4096, "NVIDIA H200", table, path)[1] == ladder.TUNED
    assert ladder.best_choice("tiled", 4096, "NVIDIA H200", table, empty) == (
        {"tile": 32, "pad": 1, "drop_sync": 0}, ladder.MEASURED)  # fmt: skip
    assert ladder.best_choice("tiled", 4096, "Other GPU", table, empty) == (
        get_kernel("tiled").default_params(), ladder.DEFAULT)  # fmt: skip


TENSOR_ROW = {
    "kernel": "wmma", "number": 9, "params": {"BM": 128, "BN": 128, "BK": 32, "WT": 32, "PAD": 8},
    "config": "BM128 BN128 BK32 W32 P8", "size": 4096, "dtype": "float16",
    "device": "NVIDIA H200", "gflops": 89234.0, "cublas_gflops": 694529.0, "pct_cublas": 12.8,
    "pct_peak": 8.3, "peak_gflops": 1070530.56, "rel_error": 4.9e-6, "registers": 96,
    "blocks_per_sm": 1, "limiter": "registers", "overhead_l1_pct": -0.36,
    "overhead_l2_pct": 1.02, "ms": 1.54,
}  # fmt: skip


def test_each_input_type_gets_its_own_table_and_chart(tmp_path, capsys):
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps([*ROWS, TENSOR_ROW]))  # the fp32 rows predate "dtype"
    md, png = tmp_path / "t.md", tmp_path / "p.png"
    code, out, err = run(capsys, "bench", "--from", str(path), "--markdown", str(md),
                         "--plot", str(png))  # fmt: skip
    assert code == 0, err
    assert "% of Tensor Core peak" in out and "89,234" in out
    fp32, fp16 = md.read_text().split("\n\n| kernel")
    assert "| tiled | T32 P0 |" in fp32 and "wmma" not in fp32 and "FP32 peak 66,908" in fp32
    assert "| wmma | BM128 BN128 BK32 W32 P8 | 89,234 | 12.8 | 8.3 |" in fp16
    assert "cuBLAS 694,529 GFLOP/s" in fp16 and "Tensor Core peak 1,070,531" in fp16
    with Image.open(png) as image:  # one chart above the other
        assert image.size == (1200, 620 * 2 * 3 // 4)


@pytest.mark.parametrize(("content", "fragment"), [
    ("{", "is not JSON"),
    ("[]", "is not a `matviz bench --json` file"),
    ('[{"kernel": "naive"}]', "is not a `matviz bench --json` file"),
    # json reads NaN and 400 digits as numbers; the table printed them
    ('[{"kernel": "naive", "config": "T32", "size": 4096, "gflops": NaN, "cublas_gflops": 1,'
     ' "peak_gflops": 2}]', "is not a `matviz bench --json` file"),
    ('[{"kernel": "naive", "config": "T32", "size": 1' + "0" * 400 + ', "gflops": 1,'
     ' "cublas_gflops": 1, "peak_gflops": 2}]', "is not a `matviz bench --json` file"),
])  # fmt: skip
def test_a_bad_rows_file_is_one_line(tmp_path, capsys, content, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _, err = run(capsys, "bench", "--from", str(bad))
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err


S, E = "<!-- ladder:start -->", "<!-- ladder:end -->"


@pytest.mark.parametrize(
    "text",
    [
        "no section here\n",
        f"{S}\nprose the user wrote\n{S}\nold table\n{E}\n",  # a stray second start
        f"{S}\nold table\n{E}\nprose\n{E}\n",
        f"{E}\nprose\n{S}\n",  # the markers the wrong way round
    ],
)
def test_a_readme_without_exactly_one_section_is_left_alone(tmp_path, saved, capsys, text):
    readme = tmp_path / "README.md"
    readme.write_text(text)
    code, _, err = run(capsys, "bench", "--from", str(saved), "--readme", str(readme))
    assert code == 2 and "needs exactly one" in err and len(err.strip().splitlines()) == 1
    assert readme.read_text() == text


def test_the_readme_outside_its_section_is_kept_byte_for_byte(tmp_path, saved, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"# top\n\n{S}\nold\n{E}\ntail \\1 $ \\g<0>\n")
    code, _, _ = run(capsys, "bench", "--from", str(saved), "--readme", str(readme))
    text = readme.read_text()
    assert code == 0 and text.startswith(f"# top\n\n{S}\n| kernel |")
    assert text.endswith(f"\n{E}\ntail \\1 $ \\g<0>\n") and "old" not in text


@pytest.mark.skipif(cuda_status()[0], reason="this machine has a GPU")
def test_measuring_needs_a_gpu(capsys):
    code, _, err = run(capsys, "bench", "--size", "64")
    assert code == 2 and "--from FILE.json" in err and len(err.strip().splitlines()) == 1


def test_best_configuration_is_the_fastest_measured_one(tmp_path):
    table = tmp_path / "all.json"
    table.write_text(json.dumps([
        {"kernel": "tiled", "params": {"tile": 16, "pad": 0}, "size": 4096, "gflops": 7000},
        {"kernel": "tiled", "params": {"tile": 32, "pad": 1}, "size": 4096, "gflops": 9000},
        {"kernel": "tiled", "params": {"tile": 32, "pad": 7}, "size": 4096, "gflops": 9999},
        {"kernel": "tiled", "params": {"tile": 8, "pad": 0}, "size": 1024, "gflops": 99999},
    ]))  # fmt: skip
    best = ladder.best_params("tiled", 4096, "NVIDIA H200", table)
    assert best == {"tile": 32, "pad": 1, "drop_sync": 0}  # pad 7 is not allowed: skipped
    assert ladder.best_params("tiled", 2048, "NVIDIA H200", table) == get_kernel(
        "tiled"
    ).default_params()  # no row at that size
    assert ladder.best_params("tiled", 4096, "Other GPU", table)["tile"] == 16  # the default


def test_a_tuned_configuration_stands_on_the_ladder_before_the_measured_table(tmp_path):
    """`matviz sweep --tune` on this GPU at this size names the rung; elsewhere the table."""
    table, path = _table_and_tuned(tmp_path, "NVIDIA H100 80GB HBM3")
    best = ladder.best_params("tiled", 4096, "NVIDIA H100 80GB HBM3", table, path)
    assert best == {"tile": 16, "pad": 1, "drop_sync": 0}
    assert ladder.best_params("tiled", 4096, "NVIDIA H200", table, path)["tile"] == 32
    assert ladder.best_params("tiled", 2048, "NVIDIA H100 80GB HBM3", table, path) == get_kernel(
        "tiled"
    ).default_params()  # tuned at 4096 only


def test_the_best_configuration_keeps_the_default_input_type(tmp_path):
    table = tmp_path / "all.json"
    fp16, bf16 = {"STAGES": 3}, {"STAGES": 3, "BF16": 1}
    table.write_text(json.dumps([
        {"kernel": "mma_pipeline", "params": fp16, "size": 4096, "gflops": 360000},
        {"kernel": "mma_pipeline", "params": bf16, "size": 4096, "gflops": 364000},
    ]))  # fmt: skip
    best = ladder.best_params("mma_pipeline", 4096, "NVIDIA H200", table)
    assert best["BF16"] == 0 and best["STAGES"] == 3  # fp16 like the default, though slower


@pytest.mark.parametrize("bad", ["garbage", "fifo", "wrong types"])
def test_an_unreadable_tuned_file_stops_the_ladder_with_one_line(tmp_path, bad):
    """The ladder never guesses past a tuned file it cannot read: a MatvizError, which the CLI
    prints as one line with exit 2; the file is left as it was."""
    import os

    path = tmp_path / "tuned.json"
    if bad == "fifo":
        os.mkfifo(path)
    else:
        text = "{not json" if bad == "garbage" else '{"version": 1, "devices": {"x": 3}}'
        path.write_text(text)
    before = None if bad == "fifo" else path.read_bytes()
    with pytest.raises(MatvizError, match="tuned") as caught:
        ladder.best_params("tiled", 4096, "NVIDIA H100 80GB HBM3", tuned_file=path)
    assert "\n" not in str(caught.value)
    if before is not None:
        assert path.read_bytes() == before


def test_each_gpu_takes_its_own_rows_from_the_bundled_tables():
    """The H100's table gives the H100 its fastest kernel 02 (T32 P4 there), the H200's the
    H200 its own (T32 P0): rows name their GPU, and one GPU's never stand for another's."""
    for device, table in (("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100")):
        path = next(p for p in ladder.BENCH_ALL if p.name.startswith(table))
        rows = [r for r in json.loads(path.read_text()) if r["kernel"] == "tiled"]
        fastest = max(rows, key=lambda r: r["gflops"])["params"]
        best = ladder.best_params("tiled", 4096, device)
        assert {k: best[k] for k in fastest} == fastest, device


def test_the_bundled_benchmark_gives_every_kernel_a_configuration():
    for name in kernels():
        params = ladder.best_params(name, 4096, "NVIDIA H200")
        assert get_kernel(name).resolve_params(params) == params
        assert not get_kernel(name).configure(params, 64, 64, 64).broken


def test_a_fifo_a_device_or_a_huge_file_is_refused_unread(tmp_path, capsys):
    import os

    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate(ladder.MAX_ROWS_BYTES + 1)  # sparse: no disk needed
    for path, fragment in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                           (huge, "larger than 16 MiB"), (tmp_path, "directory"),
                           (tmp_path / "none.json", "no such file")):  # fmt: skip
        code, _, err = run(capsys, "bench", "--from", str(path))
        assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err


def test_a_readme_that_is_a_fifo_is_refused_unread(tmp_path, saved, capsys):
    import os

    fifo = tmp_path / "README.md"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "bench", "--from", str(saved), "--readme", str(fifo))
    assert code == 2 and "not a regular file" in err and len(err.strip().splitlines()) == 1


def test_a_readme_in_a_read_only_folder_is_kept(tmp_path, saved, capsys):
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    readme = folder / "README.md"
    readme.write_text(f"{cli.bench.README_START}\nold\n{cli.bench.README_END}\n")
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):  # root writes anywhere: the test has nothing to show
            pytest.skip("running as root")
        code, _, err = run(capsys, "bench", "--from", str(saved), "--readme", str(readme))
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert "old" in readme.read_text()
    finally:
        folder.chmod(0o700)


@pytest.mark.parametrize("change", [
    {"pct_cublas": "x"}, {"number": "x"}, {"overhead_l2_pct": "x"}, {"registers": [1]},
    {"phase_every_l2": "x"}, {"dtype": 5}, {"device": [1]}, {"params": "notadict"},
    {"kernel": 42}, {"gflops": True},
])  # fmt: skip
def test_a_field_of_the_wrong_type_is_one_line_and_keeps_the_old_table(tmp_path, capsys, change):
    """Each of these was a traceback (the table or the chart formatting a string as a number)
    or a table with a nonsense group; now the file is refused before anything is written."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([ROWS[0], ROWS[1] | change]))
    md, png = tmp_path / "t.md", tmp_path / "p.png"
    md.write_text("old table")
    code, _, err = run(capsys, "bench", "--from", str(bad), "--markdown", str(md),
                       "--plot", str(png))  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "is not a `matviz bench --json` file" in err
    assert md.read_text() == "old table" and not png.exists()

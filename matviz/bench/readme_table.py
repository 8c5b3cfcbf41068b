"""Regenerate the README's benchmark table from a saved kernel benchmark (never typed by hand).

python -m matviz.bench.kernels --json resources/bench/h200_kernels_4096.json   # on a GPU
python -m matviz.bench.readme_table resources/bench/h200_kernels_4096.json \
    resources/bench/h100_kernels_4096.json                                      # anywhere

Each saved run gives its tables (one per GPU and element type), in the order given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from matviz.bench import run_script
from matviz.bench.ladder import by_dtype, measured, read_rows, row_device, row_dtype
from matviz.core.metrics import whole_count
from matviz.core.sampling import OVERHEAD_TARGET_PCT
from matviz.core.summary import FORM_NAMES

README = Path(__file__).resolve().parents[2] / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"

KEPT = "l2kept"  # matviz.bench.kernels' tag of level 2 as the recorder keeps it
# the instrumentation targets (issue 9): level 1 within 1%, level 2 within 3% of level 0
TARGETS = (("level 1", "overhead_l1_pct", OVERHEAD_TARGET_PCT[1]),
           ("level 2 with no target", "overhead_l2_pct", OVERHEAD_TARGET_PCT[2]),
           ("level 2 as recorded", f"overhead_{KEPT}_pct", OVERHEAD_TARGET_PCT[2]))  # fmt: skip
# the level-2 runs' tags, and how the table marks a form other than the lanes (trace.cuh)
TAGS = ("l2", KEPT)
FORM_LABELS = {"store": "stored", "held": "held"}  # the lanes form is the unmarked one
# what _table formats from each row
NUMBERS = ("gflops", "pct_cublas", "overhead_l1_pct", "overhead_l2_pct", "span_vs_event_l1",
           "rel_error", "size")  # fmt: skip
MAX_BYTES = 16 << 20


def table(rows: list[dict], source: str) -> str:
    """One table per GPU and element type of A and B (rows saved before they kept them: the
    H200, fp32), each with its own cuBLAS range."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row_device(row), []).append(row)
    return "\n\n".join(
        _table(group, row_dtype(group[0]), source)
        for on_one_gpu in groups.values()
        for group in by_dtype(on_one_gpu)
    )


def _table(rows: list[dict], dtype: str, source: str) -> str:
    lines = [
        "| kernel | parameters | GFLOP/s | % of cuBLAS | level-1 overhead | level-2 overhead, "
        "no target | level-2 overhead as recorded | %globaltimer span / event | rel. error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['label']} | {r['gflops']:.0f} "
            f"| {r['pct_cublas']:.1f} | {r['overhead_l1_pct']:+.2f}% "
            f"| {_level_2(r, 'l2')} | {_level_2(r, KEPT)} "
            f"| {r['span_vs_event_l1']:.4f} | {r['rel_error']:.1e} |"
        )
    size = rows[0]["size"]
    lines.append("")
    blas = [r["cublas_gflops"] for r in rows]
    what = "fp32" if dtype == "float32" else f"{dtype} inputs (fp32 sums)"
    as_recorded = (
        f" As recorded: `matviz record` stamps the k-steps of 1 block in 2, 4 ... until level 2 "
        f"runs within {OVERHEAD_TARGET_PCT[2]:g}% of level 0 (a block that stamps runs slower)."
        if any(measured(r, (f"overhead_{KEPT}_pct",)) for r in rows)
        else ""
    )
    lines.append(
        f"{size}³ {what} on one {row_device(rows[0])}, cuBLAS on the same inputs {min(blas):.0f}-"
        f"{max(blas):.0f} GFLOP/s in the same runs; medians of CUDA-event times, level-0 and "
        f"instrumented builds interleaved in one process.{as_recorded} Source: `{source}`."
    )
    lines.append("")
    lines.append(_targets(rows))
    forms = {r.get(f"stamp_form_{tag}") for r in rows for tag in TAGS}
    marked = [form for form in FORM_LABELS if form in forms]
    if marked:
        notes = "; ".join(f"({FORM_LABELS[f]}): level 2's marks {FORM_NAMES[f]}" for f in marked)
        lines.append("")
        lines.append(
            f"{notes}. The recorder kept that form where it ran closer to level 0; elsewhere the "
            f"marks are kept in the stamping warp's lanes."
        )
    return "\n".join(lines)


def _level_2(row: dict, tag: str) -> str:
    """A level-2 run's overhead and, where it was saved, how many blocks stamped (level 2 as
    recorded in rows saved before the recorder kept a stride: not measured)."""
    if not measured(row, (f"overhead_{tag}_pct",)):
        return "not measured"
    text = f"{row[f'overhead_{tag}_pct']:+.2f}%{_form(row, tag)}"
    every = whole_count(row.get(f"phase_every_{tag}"))
    if every is None:
        return text
    return text + (", every block" if every == 1 else f", 1 block in {every}")


def _targets(rows: list[dict]) -> str:
    """How many configurations meet each overhead target, and the furthest from it."""
    parts = []
    for what, key, limit in TARGETS:
        have = [r for r in rows if measured(r, (key,))]
        if not have:
            continue
        within = sum(abs(r[key]) <= limit for r in have)
        worst = max(have, key=lambda r: abs(r[key]))
        parts.append(
            f"{what} within {limit:g}% of level 0 in {within} of {len(have)} configurations "
            f"(furthest: {worst['kernel']} {worst['label']}, {worst[key]:+.2f}%)"
        )
    return "Targets: " + "; ".join(parts) + "."


def _form(row: dict, tag: str) -> str:
    """' (stored)' or ' (held)' where the level-``tag`` run kept its marks in that form."""
    label = FORM_LABELS.get(row.get(f"stamp_form_{tag}"))  # type: ignore[arg-type]
    return f" ({label})" if label else ""


def load_rows(path: Path) -> list[dict]:
    """The rows ``python -m matviz.bench.kernels --json`` saved; MatvizError if not."""

    def fits(r: object) -> bool:
        return (isinstance(r, dict) and isinstance(r.get("kernel"), str)
                and isinstance(r.get("label"), str) and measured(r, NUMBERS))  # fmt: skip

    return read_rows(path, MAX_BYTES, fits, "matviz.bench.kernels --json")


def rewrite_section(path: Path, start: str, end: str, body: str, max_bytes: int = 4 << 20) -> None:
    """Replace the one ``start`` ... ``end`` section of the text file ``path`` with ``body``,
    atomically (a failed write leaves the file as it was); MatvizError otherwise."""
    from matviz.core.trace_io import read_small_file
    from matviz.errors import MatvizError
    from matviz.export.atomic import AtomicOutput

    try:
        text = read_small_file(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise MatvizError(f"{path} is not UTF-8 text") from None
    # one marker of each, in order: a stray second start would take the prose before it along
    first, last = text.find(start), text.find(end)
    if text.count(start) != 1 or text.count(end) != 1 or last < first:
        raise MatvizError(f"{path} needs exactly one {start} ... {end} section")
    new = f"{text[:first]}{start}\n{body}\n{end}{text[last + len(end) :]}"
    with AtomicOutput(path) as tmp:
        Path(tmp).write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bench_json", type=Path, nargs="+")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)

    def work() -> None:
        tables = [table(load_rows(path), path.as_posix()) for path in args.bench_json]
        rewrite_section(args.readme, START, END, "\n\n".join(tables))
        print(f"updated {args.readme}")

    return run_script("readme_table", work)  # the README is kept (AtomicOutput)


if __name__ == "__main__":
    sys.exit(main())

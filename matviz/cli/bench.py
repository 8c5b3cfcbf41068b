"""``matviz bench``: the ladder to cuBLAS, every kernel at its best configuration, in one run.

On a GPU it measures (``--json`` keeps the rows); anywhere, ``--from F.json`` reads saved rows
back. Either way it prints the table and can write it as markdown, into the README's benchmark
section (``--readme``) and as a plot (``--plot``, which needs Qt).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matviz.cli.common as common

NAME = "bench"
README_START, README_END = "<!-- ladder:start -->", "<!-- ladder:end -->"
README_MAX_BYTES = 4 << 20


def add_parser(sub) -> None:
    b = sub.add_parser(NAME, help="every kernel at its best configuration against cuBLAS")
    b.add_argument("--size", type=common.positive_int, default=4096, help="M = N = K (4096)")
    b.add_argument("--kernels", help="comma list of kernels (default: all)")
    b.add_argument("--repeats", type=common.positive_int, default=30, help="timed runs (30)")
    b.add_argument("--json", type=Path, help="FILE.json: save the rows")
    b.add_argument("--from", dest="source", type=Path, help="FILE.json: rows saved before")
    b.add_argument("--markdown", type=Path, help="FILE.md: the table")
    b.add_argument("--readme", type=Path, help="README.md whose ladder section to rewrite")
    b.add_argument("--plot", type=Path, help="FILE.png: a bar chart (needs Qt)")


def run(args) -> int:
    from matviz.bench import ladder
    from matviz.export.atomic import AtomicOutput

    for path, suffix in ((args.json, ".json"), (args.markdown, ".md"), (args.plot, ".png")):
        if path is not None:
            common.check_output(path, suffix)
    if args.source is not None:
        rows = ladder.load_rows(args.source)
        source = args.source.as_posix()
    else:
        from matviz.backends.cuda_status import cuda_status
        from matviz.errors import MatvizError

        ok, device = cuda_status()
        if not ok:
            raise MatvizError(f"matviz bench measures on a GPU ({device}); "
                              "give --from FILE.json to use saved rows")  # fmt: skip
        names = [n for n in args.kernels.split(",") if n] if args.kernels else None
        rows = ladder.run_ladder(
            names, args.size, args.repeats, device,
            progress=lambda text: print(f"bench      {text} ...", file=sys.stderr, flush=True),
        )  # fmt: skip
        source = "matviz bench" + (f" --json {args.json.as_posix()}" if args.json else "")
        if args.json is not None:
            with AtomicOutput(args.json) as tmp:
                Path(tmp).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
            print(f"saved      {args.json}")
    print("\n".join(ladder.text_table(rows)))
    table = ladder.markdown(rows, source)
    if args.markdown is not None:
        with AtomicOutput(args.markdown) as tmp:
            Path(tmp).write_text(table + "\n", encoding="utf-8")
        print(f"saved      {args.markdown}")
    if args.readme is not None:
        _rewrite_readme(args.readme, table)
        print(f"updated    {args.readme}")
    if args.plot is not None:
        with common.needs_qt("--plot", "matviz.app.ladder_plot"):
            from matviz.app.ladder_plot import render_plot

            render_plot(rows, args.plot)
        print(f"saved      {args.plot}")
    return 0


def _rewrite_readme(path: Path, table: str) -> None:
    from matviz.bench.readme_table import rewrite_section

    rewrite_section(path, README_START, README_END, table, README_MAX_BYTES)

"""``matviz sweep``: every combination of the given parameter values: table, CSV, plot.

Each parameter option of the kernel descriptions takes a comma list and becomes an axis;
a parameter not given stays at the kernel's default. No Qt unless ``--plot`` asks for one.
"""

from __future__ import annotations

from pathlib import Path

import matviz.cli.common as common
import matviz.cli.params as params
from matviz.backends.devices import tuned_key
from matviz.core.kernel import LEVELS

NAME = "sweep"


def add_parser(sub) -> None:
    sw = sub.add_parser(NAME, help="run every combination of parameter values: table, CSV, plot")
    sw.add_argument("kernel", help="name, file stem or number, e.g. 2 or 02_tiled")
    common.add_size_options(sw)
    sw.add_argument("--backend", default="auto", choices=common.BACKEND_CHOICES)
    sw.add_argument("--level", type=int, default=1, choices=LEVELS, help=common.level_help(1))
    sw.add_argument(
        "--isolate", action="store_true", help="simulations too each in a worker process"
    )
    sw.add_argument("-o", "--output", type=Path, help="FILE.csv (needed unless --tune)")
    sw.add_argument(
        "--tune", action="store_true",
        help="search the kernel's parameters for the fastest configuration at this size (a "
        "pruned search, not every combination) and keep it as the default `matviz record` "
        "starts from on this GPU (the file: $MATVIZ_TUNED or ~/.config/matviz/tuned.json)",
    )  # fmt: skip
    sw.add_argument("--plot", type=Path, help="FILE.png: a bar chart of GFLOP/s")
    params.add_options(sw, lists=True)  # last: a clash with the options above is caught


def run(args) -> int:
    from matviz import sweep
    from matviz.core import registry
    from matviz.errors import MatvizError

    if args.tune:
        return _tune(args)
    if args.output is None:
        raise MatvizError("sweep needs -o FILE.csv (or --tune)")
    common.check_output(args.output, ".csv")
    if args.plot is not None:
        common.check_output(args.plot, ".png", "plot")
    kernel = registry.get_kernel(args.kernel)  # an unknown kernel is the one error, before notes
    backend, why = common.choose_backend(args.backend)
    common.note(why)
    axes = params.given(args, kernel)
    rows = sweep.plan(kernel.name, axes, args.M, args.N, args.K, backend, args.level)

    def progress(i: int, total: int, row, finished: bool) -> None:
        text = sweep.result_text(row) if finished else f"[{i}/{total}] {row.label} ..."
        common.progress(text, finished)

    sweep.run_sweep(rows, progress, isolate=args.isolate)
    print("\n".join(sweep.table_lines(rows)))
    ran = sum(r.status == sweep.OK for r in rows)
    print(f"ran        {ran} of {len(rows)} configurations ({backend})")
    sweep.write_csv(rows, args.output)
    print(f"saved      {args.output}")
    if args.plot is not None:
        with common.needs_qt("--plot", "matviz.app.sweep_plot"):
            from matviz.app.sweep_plot import render_plot  # Qt only for the picture

            render_plot(rows, args.plot)
        print(f"saved      {args.plot}")
    return 0


def _tune(args) -> int:
    from matviz import sweep
    from matviz.core import registry, tuned
    from matviz.errors import MatvizError

    kernel = registry.get_kernel(args.kernel)
    if params.given(args, kernel):
        raise MatvizError("--tune searches every parameter itself: give no parameter values")
    if args.output is not None:
        common.check_output(args.output, ".csv")
    # a tuned file that could not be read or written stops the search before it runs
    kept = tuned.tuned_path()
    tuned.load(kept)
    if kept.parent.is_dir():  # else tuned.save makes the folder
        common.check_file_writable(kept)
    backend, why = common.choose_backend(args.backend)
    common.note(why)

    def progress(i: int, _total: int, row, finished: bool) -> None:
        common.progress(sweep.result_text(row) if finished else f"[{i}] {row.label} ...", finished)

    top, rows = sweep.tune(kernel.name, args.M, args.N, args.K, backend, args.level, progress,
                           isolate=args.isolate)  # fmt: skip
    print("\n".join(sweep.table_lines(rows)))
    space = len(kernel.configurations())
    ran = sum(r.status == sweep.OK for r in rows)
    pruned = sum(r.status == sweep.PRUNED for r in rows)
    skipped = f", {pruned} not run: shared memory alone caps them below the best" if pruned else ""
    print(f"ran        {ran} of the {space} configurations ({backend}; {len(rows)} tried{skipped})")
    if args.output is not None:
        sweep.write_csv(rows, args.output)
        print(f"saved      {args.output}")
    if top is None:
        raise MatvizError("no configuration ran: nothing to keep")
    entry = tuned.Tuned(params=dict(top.params), gflops=float(top.gflops), backend=backend,
                        evaluated=ran, space=space)  # fmt: skip
    key = tuned_key(backend)
    path = tuned.save(kernel.name, args.M, args.N, args.K, key, entry)
    print(f"best       {top.label}: {top.gflops:,.1f} GFLOP/s on {key}")
    print(f"saved      {path} (the default `matviz record` starts from at this size)")
    return 0

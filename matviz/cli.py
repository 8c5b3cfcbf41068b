"""The ``matviz`` command line. Every user error is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from matviz.errors import MatvizError

EXIT_USER_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints usage + message; we want one line
        raise MatvizError(f"{message} (see 'matviz {self.prog.split()[-1]} --help')")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def _pair(text: str) -> tuple[int, int]:
    try:
        x, y = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not of the form BX,BY") from None
    return x, y


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="matviz", description=__doc__)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    sub.add_parser("info", help="backends available here, the device, and why CUDA is missing")
    sub.add_parser("kernels", help="the kernel catalog and its parameters")

    rec = sub.add_parser("record", help="run a kernel and save its trace (.mvz)")
    rec.add_argument("kernel", help="catalog name, e.g. tiled or 02_tiled")
    rec.add_argument("-M", type=_positive_int, default=1024)
    rec.add_argument("-N", type=_positive_int, default=1024)
    rec.add_argument("-K", type=_positive_int, default=1024)
    rec.add_argument("--tile", type=int, help="tile edge T (thread block is T x T)")
    rec.add_argument("--pad", type=int, help="extra shared-memory columns per tile row")
    rec.add_argument(
        "--level",
        type=int,
        default=2,
        choices=(0, 1, 2, 3),
        help="0 timing, 1 blocks, 2 phases, 3 diagnostics (default 2)",
    )
    rec.add_argument("--backend", default="auto", choices=("auto", "cuda", "sim"))
    rec.add_argument("--repeats", type=int, default=20, help="timed runs (median), >= 10")
    rec.add_argument(
        "--budget-mib",
        type=_positive_int,
        default=256,
        help="memory for per-tile phases before blocks are sampled (MiB)",
    )
    rec.add_argument(
        "--phase-every",
        type=_positive_int,
        default=1,
        help="only every n-th block records per-tile phases (less overhead); default all",
    )
    rec.add_argument("--probe-block", type=_pair, default=(0, 0), metavar="BX,BY")
    rec.add_argument("--probe-warp", type=int, default=0)
    rec.add_argument("--probe-ktile", type=int, default=0)
    rec.add_argument("--seed", type=int, default=0, help="simulator jitter seed")
    rec.add_argument("-o", "--output", required=True, type=Path, help="FILE.mvz")

    show = sub.add_parser("show", help="summarise a saved trace")
    show.add_argument("file", type=Path)
    show.add_argument("--json", action="store_true", help="print the manifest as JSON")
    from matviz import cli_export  # its commands import their heavy parts lazily too

    cli_export.add_parsers(sub)
    return parser


# -- commands ---------------------------------------------------------------------------------
def cmd_info(_args) -> int:
    from matviz.backends.cuda_status import cuda_status

    ok, detail = cuda_status()
    print(f"cuda       {'available: ' + detail if ok else 'unavailable: ' + detail}")
    print("sim        available (simulated traces are labelled as such)")
    if ok:
        from matviz.backends.cuda_build import device_info

        dev = device_info()
        print(
            f"device     {dev['name']}, {dev['sm_count']} SMs, {dev['clock_mhz']} MHz, "
            f"compute capability {dev['compute_capability']}"
        )
    from matviz.core.compile_report import nvcc_path

    print(f"nvcc       {nvcc_path() or 'not found (register counts use catalog estimates)'}")
    return 0


def cmd_kernels(_args) -> int:
    from matviz.core.catalog import CATALOG

    for spec in CATALOG.values():
        params = "  ".join(
            f"--{name} {'|'.join(map(str, values))}" for name, values in spec.params.items()
        )
        print(f"{spec.number:02d}_{spec.name:<18} {spec.title}")
        print(f"    {spec.concept}")
        print(f"    seed: {spec.seed_sections}   file: kernels/{spec.source.name}")
        print(f"    {params}")
    return 0


def _check_writable(path: Path) -> None:
    """Fail before a long run, not after it, when the trace could not be saved."""
    if path.suffix != ".mvz":
        raise MatvizError(f"output '{path}' must end in .mvz")
    parent = path.resolve().parent
    if not parent.is_dir():
        raise MatvizError(f"cannot write '{path}': folder '{parent}' does not exist")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".matviz-check-"):
            pass
    except OSError as exc:
        raise MatvizError(f"cannot write '{path}': {exc.strerror or exc}") from None


def choose_backend(requested: str) -> tuple[str, str | None]:
    """(backend, note for the user)."""
    from matviz.backends.cuda_status import cuda_status

    if requested == "sim":
        return "sim", None
    ok, why = cuda_status()
    if requested == "cuda":
        if not ok:
            raise MatvizError(f"CUDA backend unavailable: {why}")
        return "cuda", None
    if ok:
        return "cuda", None
    return "sim", f"CUDA unavailable ({why}); using the simulator"


def cmd_record(args) -> int:
    from matviz.core.catalog import get_kernel
    from matviz.core.trace_io import save_trace

    spec = get_kernel(args.kernel)
    given = {"tile": args.tile, "pad": args.pad}
    params = spec.resolve_params(**{k: v for k, v in given.items() if k in spec.params or v})
    spec.validate(params, args.M, args.N, args.K)
    _check_writable(args.output)
    backend, note = choose_backend(args.backend)
    if note:
        print(f"note: {note}", file=sys.stderr)
    budget = args.budget_mib * 2**20
    if backend == "cuda":
        from matviz.backends.cupy_recorder import RecordOptions, record

        opts = RecordOptions(
            level=args.level,
            repeats=args.repeats,
            budget_bytes=budget,
            phase_every=args.phase_every,
            probe_block=args.probe_block,
            probe_warp=args.probe_warp,
            probe_ktile=args.probe_ktile,
        )
        trace = record(spec.name, args.M, args.N, args.K, params, opts)
    else:
        from matviz.backends.simulator import simulate

        trace = simulate(
            spec.name,
            args.M,
            args.N,
            args.K,
            level=args.level,
            seed=args.seed,
            budget_bytes=budget,
            phase_every=args.phase_every,
            probe_block=args.probe_block,
            probe_warp=args.probe_warp,
            probe_ktile=args.probe_ktile,
            **params,
        )
    save_trace(trace, args.output)
    from matviz.core.summary import summary_lines

    print("\n".join(summary_lines(trace)))
    print(f"saved      {args.output}")
    return 0


def cmd_show(args) -> int:
    from matviz.core.summary import summary_lines
    from matviz.core.trace_io import load_trace

    trace = load_trace(args.file)
    if args.json:
        print(json.dumps(trace.manifest, indent=2, sort_keys=True))
    else:
        print("\n".join(summary_lines(trace)))
    return 0


COMMANDS = {"info": cmd_info, "kernels": cmd_kernels, "record": cmd_record, "show": cmd_show}


def _wants_gui(argv: list[str]) -> bool:
    """No arguments, or a trace file first: open the desktop app."""
    return not argv or argv[0].endswith(".mvz")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        if _wants_gui(argv):
            from matviz.app.main import run_gui  # lazily: other commands never import Qt

            return run_gui(argv)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        if args.command in COMMANDS:
            return COMMANDS[args.command](args)
        from matviz import cli_export

        return cli_export.COMMANDS[args.command](args)
    except MatvizError as exc:
        print(f"matviz: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:  # e.g. `matviz kernels | head`
        sys.stdout = open(os.devnull, "w")
        return 0
    except KeyboardInterrupt:
        print("matviz: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

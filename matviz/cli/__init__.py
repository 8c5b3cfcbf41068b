"""The ``matviz`` command line. Every user error is one line on stderr and exit code 2.

One module per command (``add_parser(sub)`` and ``run(args)``); the options that set kernel
parameters are made from the kernel descriptions (:mod:`matviz.cli.params`). The command
modules import only :mod:`matviz.cli.common` and :mod:`matviz.cli.params`, never each other or
this package, and load their heavy parts (Qt above all) only when they run.
"""

from __future__ import annotations

import argparse
import os
import sys

import matviz.cli.bench as bench
import matviz.cli.common as common
import matviz.cli.compare as compare
import matviz.cli.export as export
import matviz.cli.info as info
import matviz.cli.kernels as kernels
import matviz.cli.record as record
import matviz.cli.show as show
import matviz.cli.sweep as sweep
from matviz.errors import MatvizError

EXIT_USER_ERROR = common.EXIT_USER_ERROR
COMMANDS = {m.NAME: m for m in (info, kernels, record, show, export, compare, sweep, bench)}


def build_parser() -> argparse.ArgumentParser:
    parser = common.Parser(prog="matviz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", parser_class=common.Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def _wants_gui(argv: list[str]) -> bool:
    """No arguments, or a trace file first: open the desktop app."""
    return not argv or argv[0].endswith(".mvz")


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """The arguments, or the exit code when argparse is done already (--help)."""
    try:
        args, extra = parser.parse_known_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    if extra:  # named by the command they were given to, not by the top-level parser
        where = f"matviz {args.command}" if args.command else "matviz"
        raise MatvizError(f"unrecognized arguments: {' '.join(extra)} (see '{where} --help')")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for stream in (sys.stdout, sys.stderr):
        # An output that cannot encode µ, ³ or § (PYTHONIOENCODING=ascii, a Latin-1 locale)
        # shows them escaped, as stderr does by default, not as a UnicodeEncodeError.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        if _wants_gui(argv):
            from matviz.app.main import run_gui  # lazily: other commands never import Qt

            return run_gui(argv)
        parser = build_parser()
        args = _parse(parser, argv)
        if isinstance(args, int):
            return args
        if args.command is None:
            parser.print_help()
            return 0
        return COMMANDS[args.command].run(args)
    except MatvizError as exc:
        common.end_progress_line()
        print(f"matviz: error: {common.one_line(str(exc))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:  # e.g. `matviz kernels | head`
        sys.stdout = open(os.devnull, "w")
        return 0
    except KeyboardInterrupt as exc:  # Ctrl-C; an export also ends so on SIGTERM and SIGHUP
        common.end_progress_line()
        print("matviz: interrupted", file=sys.stderr)
        return 128 + int(getattr(exc, "signum", 2))
    except Exception as exc:
        # Ctrl-C inside a class body's __set_name__ (a cached_property: any module being
        # imported) comes out as the RuntimeError it caused; it is still the interrupt
        if not any(isinstance(e, KeyboardInterrupt) for e in _causes(exc)):
            raise
        common.end_progress_line()
        print("matviz: interrupted", file=sys.stderr)
        return 128 + 2


def _causes(exc: BaseException) -> list[BaseException]:
    """The exceptions that led to ``exc``, nearest first (its cause, else its context)."""
    out: list[BaseException] = []
    seen = exc.__cause__ or exc.__context__
    while seen is not None and seen not in out:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


__all__ = ["COMMANDS", "build_parser", "main"]

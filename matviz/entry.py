"""The ``matviz`` console command. Loading the command line takes a fifth of a second (numpy and
the kernel descriptions); Ctrl-C meanwhile is one line too, not a traceback."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from matviz.cli import main as command_line
    except KeyboardInterrupt:
        print("matviz: interrupted", file=sys.stderr)
        return 128 + 2  # as matviz.cli.main ends on SIGINT
    return command_line()

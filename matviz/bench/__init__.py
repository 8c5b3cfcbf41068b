"""Benchmark scripts. They print ratios measured in one run; they are not tests."""

from __future__ import annotations

import sys
from collections.abc import Callable


def run_script(name: str, work: Callable[[], int | None]) -> int:
    """A script's exit code: ``work()``'s (0 for None); a MatvizError is one line on stderr and
    2, Ctrl-C "interrupted" and 130. What it writes goes through AtomicOutput, so a file that
    was there is kept whole."""
    from matviz.errors import MatvizError

    try:
        return work() or 0
    except MatvizError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130

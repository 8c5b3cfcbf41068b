"""``matviz show``: the summary (or the manifest) of a saved trace."""

from __future__ import annotations

import json
from pathlib import Path

NAME = "show"


def add_parser(sub) -> None:
    show = sub.add_parser(NAME, help="summarise a saved trace")
    show.add_argument("file", type=Path)
    show.add_argument("--json", action="store_true", help="print the manifest as JSON")


def run(args) -> int:
    from matviz.core.summary import summary_lines
    from matviz.core.trace_io import load_trace

    trace = load_trace(args.file)
    if args.json:
        print(json.dumps(trace.manifest, indent=2, sort_keys=True))
    else:
        print("\n".join(summary_lines(trace)))
    return 0

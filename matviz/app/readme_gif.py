"""Regenerate the README's animation from the bundled H200 recording.

``python -m matviz.app.readme_gif`` runs, from the repository root, exactly the ``matviz export``
command it prints (the five views, 10 s at 15 fps, 1280x720, following block (16, 16)) and
checks that the GIF stays small enough for a README (under 3 MB).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from matviz.paths import RESOURCE_DIR, TRACE_DIR

ROOT = RESOURCE_DIR.parent  # the repository root in a checkout; paths below are relative to it
TRACE = (TRACE_DIR / "tiled_t32_p0_1024.mvz").relative_to(ROOT).as_posix()
OUT = (RESOURCE_DIR / "screenshots" / "tiled_t32.gif").relative_to(ROOT).as_posix()
ARGS = ("--view", "all", "--size", "1280x720", "--fps", "15", "--duration", "10")
ARGS += ("--block", "16,16")
MAX_BYTES = 3_000_000


def command(out: str = OUT) -> list[str]:
    """The ``matviz`` arguments that make the README GIF (paths relative to the repo root)."""
    return ["export", TRACE, *ARGS, "-o", out]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.app.readme_gif", description=__doc__)
    parser.add_argument("--out", default=OUT, help=f"relative to the repository root ({OUT})")
    args = parser.parse_args(argv)
    from matviz import cli

    argv_cli = command(args.out)
    print("from the repository root, ran:")
    print("  matviz " + shlex.join(argv_cli), flush=True)
    here = Path.cwd()
    try:
        os.chdir(ROOT)  # the printed command is relative to the root: run it exactly so
        code = cli.main(argv_cli)
        size = (ROOT / args.out).stat().st_size if code == 0 else 0
    finally:
        os.chdir(here)
    if code:
        return code
    print(f"size       {size / 1e6:.2f} MB (limit {MAX_BYTES / 1e6:.0f} MB)")
    if size > MAX_BYTES:
        print("matviz: error: the GIF is too large for the README", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

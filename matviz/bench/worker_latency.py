"""Seconds from a parameter change to a finished trace, through the GUI's worker process.

    python -m matviz.bench.worker_latency [--backend cuda|sim] [--size 1024]

Like the GUI's Runner, each job goes to a worker process started ahead of time (it has
imported everything and made its CUDA context while the user was choosing), which records or
simulates tiled T=32 at the next padding and writes the trace; the GUI then only loads it and
redraws (see ``matviz.bench.gui``). The time counted is from sending the job to the answer.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPARE_WARMUP_S = 5.0  # a user takes longer than this to change a setting


def run(job: dict) -> tuple[float, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "matviz.backends.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(SPARE_WARMUP_S)
    start = time.perf_counter()
    out, _ = proc.communicate(json.dumps(job))
    seconds = time.perf_counter() - start
    return seconds, json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="cuda", choices=("cuda", "sim"))
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for i, pad in enumerate((0, 1, 2, 0, 1)):
            job = {
                "backend": args.backend,
                "kernel": "tiled",
                "M": args.size,
                "N": args.size,
                "K": args.size,
                "params": {"tile": 32, "pad": pad},
                "level": 3,
                "out": str(Path(tmp) / f"{i}.mvz"),
            }
            seconds, answer = run(job)
            note = "first (compiles)" if i < 3 else "kernel compiled before"
            print(
                f"{args.backend} tiled T32 pad {pad} {args.size}^3: {seconds:.2f} s  "
                f"ok={answer['ok']} {answer.get('gflops', answer.get('error'))}  ({note})"
            )


if __name__ == "__main__":
    main()

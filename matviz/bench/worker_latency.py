"""Seconds from a parameter change to a finished trace, through the GUI's worker process.

    python -m matviz.bench.worker_latency [--kernel NAME] [--backend cuda|sim] [--size 1024]

Like the GUI's Runner, each job goes to a worker process started ahead of time (it has
imported everything and made its CUDA context while the user was choosing), which records or
simulates the kernel with its last parameter at the next value and writes the trace; the GUI
then only loads it and redraws (see ``matviz.bench.gui``). The time counted is from sending
the job to the answer. The default kernel is the registered one with the most parameters.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from matviz import jobs
from matviz.backends.contract import RunRequest
from matviz.core import registry

SPARE_WARMUP_S = 5.0  # a user takes longer than this to change a setting
CHANGES = 5  # jobs in a row; the values repeat, so the later ones find the kernel compiled


def run(request: RunRequest, out: Path) -> tuple[float, dict]:
    proc = subprocess.Popen(
        list(jobs.command()),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=jobs.worker_env(),
    )
    time.sleep(SPARE_WARMUP_S)
    start = time.perf_counter()
    stdout, _ = proc.communicate(jobs.job_text(request, out))
    seconds = time.perf_counter() - start
    return seconds, jobs.parse_answer(stdout) or {"ok": False, "error": "no answer"}


def main() -> None:
    kernels = registry.kernels()
    richest = max(kernels.values(), key=lambda k: (len(k.params), -k.number))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kernel", default=richest.name, choices=list(kernels))
    parser.add_argument("--backend", default="cuda", choices=("cuda", "sim"))
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    kernel = kernels[args.kernel]
    if not kernel.params:
        parser.error(f"kernel {kernel.name} has no parameter to change")
    changed = kernel.params[-1]  # the one the user changes; the others stay at their defaults
    seen = set()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(CHANGES):
            value = changed.values[i % min(3, len(changed.values))]
            params = {**kernel.default_params(), changed.name: value}
            request = RunRequest(
                kernel.name, args.size, args.size, args.size, params, args.backend, level=3
            )
            seconds, answer = run(request, Path(tmp) / f"{i}.mvz")
            note = "kernel compiled before" if value in seen else "first (compiles)"
            seen.add(value)
            print(
                f"{args.backend} {kernel.name} {kernel.labels(params)} {args.size}^3: "
                f"{seconds:.2f} s  ok={answer.get('ok')} "
                f"{answer.get('gflops', answer.get('error'))}  ({note})"
            )


if __name__ == "__main__":
    main()

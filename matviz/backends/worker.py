"""Run one recording or simulation in a process of its own, so a crash cannot take the GUI down.

``python -m matviz.backends.worker`` reads one JSON job from stdin::

    {"backend": "cuda" | "sim", "kernel": "tiled", "M": 1024, "N": 1024, "K": 1024,
     "params": {"tile": 32, "pad": 0}, "level": 3, "out": "/tmp/x.mvz"}

writes the trace to ``out`` and prints one JSON line on stdout: ``{"ok": true, "out": ...,
"gflops": ...}`` (exit 0) or ``{"ok": false, "error": "<one line>"}`` (exit 2). Progress notes
go to stderr as ``matviz-progress: <text>`` lines. The heavy imports happen before the job is
read, so a process started ahead of time (see ``matviz.app.runner``) answers quickly.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy  # noqa: F401  (imported before the job arrives: a pre-started worker is warm)

from matviz.backends import simulator  # noqa: F401
from matviz.core import catalog, trace_io
from matviz.errors import MatvizError

PROGRESS_PREFIX = "matviz-progress: "
EXIT_OK = 0
EXIT_FAILED = 2
JOB_KEYS = ("backend", "kernel", "M", "N", "K", "params", "level", "out")


def progress(text: str) -> None:
    print(PROGRESS_PREFIX + text, file=sys.stderr, flush=True)


def one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _check_job(job: Any) -> dict[str, Any]:
    if not isinstance(job, dict):
        raise MatvizError("the job is not a JSON object")
    missing = [k for k in JOB_KEYS if k not in job]
    if missing:
        raise MatvizError(f"the job lacks {', '.join(missing)}")
    if job["backend"] not in ("cuda", "sim"):
        raise MatvizError(f"unknown backend {job['backend']!r} (use cuda or sim)")
    if not isinstance(job["params"], dict):
        raise MatvizError("the job's params must be an object")
    return job


def run_job(job: dict[str, Any]):
    """Record or simulate the job's configuration and return the Trace (MatvizError on a fault)."""
    job = _check_job(job)
    spec = catalog.get_kernel(job["kernel"])
    params = spec.resolve_params(**job["params"])
    M, N, K, level = job["M"], job["N"], job["K"], job["level"]
    spec.validate(params, M, N, K)
    label = f"{spec.name} {M}x{N}x{K} {params}"
    if job["backend"] == "sim":
        progress(f"simulating {label}")
        return simulator.simulate(
            spec.name, M, N, K, level=level, seed=int(job.get("seed", 0)), **params
        )
    from matviz.backends.cuda_status import cuda_status

    ok, why = cuda_status()
    if not ok:
        raise MatvizError(f"CUDA backend unavailable: {why}")
    from matviz.backends.cupy_recorder import RecordOptions, record

    progress(f"recording {label} on the GPU")
    try:
        return record(spec.name, M, N, K, params, RecordOptions(level=level))
    except MatvizError:
        raise
    except Exception as exc:  # a CUDA runtime/driver/compile fault the recorder did not wrap
        raise MatvizError(f"CUDA fault: {type(exc).__name__}: {one_line(exc)}") from exc


def handle(job: Any) -> dict[str, Any]:
    """The worker's answer to one job: never raises for a bad job or a failed run."""
    try:
        trace = run_job(job)
        progress("saving the trace")
        trace_io.save_trace(trace, job["out"])
    except MatvizError as exc:
        return {"ok": False, "error": one_line(exc)}
    except MemoryError:
        return {"ok": False, "error": "out of memory: try a smaller size or a larger tile"}
    except Exception as exc:  # anything else is a bug, but still one line for the user
        return {"ok": False, "error": f"{type(exc).__name__}: {one_line(exc)}"}
    return {"ok": True, "out": str(job["out"]), "gflops": float(trace.manifest["stats"]["gflops"])}


def parse_answer(stdout: str) -> dict[str, Any] | None:
    """The worker's answer: the last stdout line that is a JSON object (None if there is none,
    e.g. when it crashed before answering)."""
    for line in reversed(stdout.splitlines()):
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(answer, dict):
            return answer
    return None


def warm_up_cuda() -> None:
    """Import CuPy and create the CUDA context before the job arrives (a pre-started worker
    then answers a GPU job without that second or so); silently nothing without a GPU."""
    from matviz.backends.cuda_status import cuda_status

    if cuda_status()[0]:
        import cupy

        cupy.zeros(1).sum()


def main() -> int:
    warm_up_cuda()
    try:
        job = json.loads(sys.stdin.read())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        answer: dict[str, Any] = {"ok": False, "error": f"the job is not valid JSON ({exc})"}
    else:
        answer = handle(job)
    print(json.dumps(answer), flush=True)
    return EXIT_OK if answer["ok"] else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

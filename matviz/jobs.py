"""One recording or simulation in a worker process, so a crash cannot take its caller down.

The GUI's runner (QProcess) and sweeps (subprocess) both use this protocol. A job is a
:class:`~matviz.backends.contract.RunRequest` as JSON plus ``"out"``, the trace file to write::

    {"kernel": "...", "M": 1024, "N": 1024, "K": 1024, "params": {...}, "backend": "sim",
     "level": 3, ..., "out": "/tmp/x.mvz"}

``python -m matviz.jobs`` imports what a run needs and makes its CUDA context first (a process
started ahead of time then answers quickly), reads one job from stdin, runs it through
:func:`matviz.backends.contract.run`, saves the trace and prints one JSON line on stdout:
``{"ok": true, "out": ..., "gflops": ...}`` (exit 0) or ``{"ok": false, "error": "<one line>"}``
(exit 2). Progress notes go to stderr as ``matviz-progress: <text>`` lines.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matviz
from matviz import paths
from matviz.backends.contract import RunRequest
from matviz.errors import MatvizError

MODULE = "matviz.jobs"
PROGRESS_PREFIX = "matviz-progress: "
EXIT_OK = 0
EXIT_FAILED = 2


def command() -> tuple[str, ...]:
    """The program and arguments that start a worker with this interpreter."""
    return (sys.executable, "-m", MODULE)


# -- the worker's environment -------------------------------------------------------------------
def _checkout_root() -> Path | None:
    """The source checkout this matviz runs from, or None for an installed wheel (whose kernels
    live inside the package, see :mod:`matviz.paths`)."""
    package = Path(matviz.__file__).resolve().parent
    root = package.parent
    return root if paths.KERNEL_DIR.resolve().parent == root else None


def _installed_editable(root: Path) -> bool:
    """Is ``root`` pip-installed in editable mode here (then any interpreter imports it)?"""
    for dist in importlib.metadata.distributions(name="matviz"):
        try:
            info = json.loads(dist.read_text("direct_url.json") or "{}")
        except (OSError, json.JSONDecodeError):
            continue
        if info.get("dir_info", {}).get("editable") and info.get("url") == root.as_uri():
            return True
    return False


def worker_pythonpath(current: str = "") -> str:
    """PYTHONPATH for a worker: ``current`` with the checkout in front when matviz runs from a
    checkout that is not installed (the worker may start elsewhere); else ``current``."""
    root = _checkout_root()
    if root is None or _installed_editable(root):
        return current
    parts = [p for p in current.split(os.pathsep) if p]
    if str(root) in parts:
        return current
    return os.pathsep.join([str(root), *parts])


def worker_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a worker process (``base``: default this process's)."""
    env = dict(os.environ if base is None else base)
    path = worker_pythonpath(env.get("PYTHONPATH", ""))
    if path:
        env["PYTHONPATH"] = path
    return env


# -- talking to a worker --------------------------------------------------------------------------
def job_text(request: RunRequest | Mapping[str, Any], out: str | os.PathLike[str]) -> str:
    """The job as the worker reads it: the request's JSON plus ``out``."""
    data = request.to_json() if isinstance(request, RunRequest) else dict(request)
    return json.dumps({**data, "out": str(out)})


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


def last_line(text: str) -> str:
    """The last non-empty line of a worker's stderr that is not a progress note."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(PROGRESS_PREFIX)]
    return lines[-1] if lines else ""


def _same(text: str) -> str:
    return text


def start_failure(program: str, reason: str, translate: Callable[[str], str] = _same) -> str:
    """The message for a worker that could not be started."""
    return translate("could not start the worker ({program}): {reason}").format(
        program=program, reason=reason
    )


def result(
    answer: dict[str, Any] | None,
    out: str | os.PathLike[str],
    *,
    returncode: int | None,
    crashed: bool = False,
    stderr_tail: str = "",
    translate: Callable[[str], str] = _same,
) -> Path:
    """The finished worker's trace file, or MatvizError with one line saying why there is none.

    ``returncode``: the exit code (negative: killed by that signal, as subprocess reports it;
    None when unknown); ``crashed``: it died without exiting (QProcess.CrashExit);
    ``stderr_tail``: its last stderr line, the best clue when it died before answering.
    ``translate`` is the GUI's ``tr`` (the English texts are the keys).
    """
    signal = -returncode if returncode is not None and returncode < 0 else None
    crashed = crashed or signal is not None
    if answer is not None and answer.get("ok") and not crashed and returncode == 0:
        return Path(str(answer.get("out") or out))
    if answer is not None and "error" in answer:
        raise MatvizError(one_line(str(answer["error"])))
    detail = f": {one_line(stderr_tail)}" if stderr_tail.strip() else ""
    if crashed:
        how = f" (signal {signal})" if signal is not None else ""
        raise MatvizError(translate("the worker crashed") + how + detail)
    message = translate("the worker stopped with exit code {code}").format(code=returncode)
    raise MatvizError(message + detail)


# -- the worker ----------------------------------------------------------------------------------
def progress(text: str) -> None:
    print(PROGRESS_PREFIX + text, file=sys.stderr, flush=True)


def one_line(exc: BaseException | str) -> str:
    lines = str(exc).strip().splitlines()
    if lines:
        return lines[0]
    return type(exc).__name__ if isinstance(exc, BaseException) else ""


def parse_job(job: Any) -> tuple[RunRequest, str]:
    """The request and the output path of one job (MatvizError if it is malformed)."""
    if not isinstance(job, dict):
        raise MatvizError("the job is not a JSON object")
    if "out" not in job:
        raise MatvizError("the job lacks out")
    data = {k: v for k, v in job.items() if k != "out"}
    return RunRequest.from_json(data), str(job["out"])


def run_request(request: RunRequest):
    """Record or simulate ``request`` and return its Trace (MatvizError on any fault)."""
    from matviz.backends import contract

    config = request.config()  # a size or parameter mistake is the answer, before any work
    request.check_probe(config)
    label = f"{request.kernel} {request.M}x{request.N}x{request.K}"
    label += f" {config.kernel.labels(request.params)}".rstrip()
    if request.backend == "sim":
        progress(f"simulating {label}")
        return contract.run(request)
    progress(f"recording {label} on the GPU")
    try:
        return contract.run(request)
    except MatvizError:
        raise
    except Exception as exc:  # a CUDA runtime/driver/compile fault the recorder did not wrap
        raise MatvizError(f"CUDA fault: {type(exc).__name__}: {one_line(exc)}") from exc


def handle(job: Any) -> dict[str, Any]:
    """The worker's answer to one job: never raises for a bad job or a failed run."""
    from matviz.core import trace_io

    try:
        request, out = parse_job(job)
        trace = run_request(request)
        progress("saving the trace")
        trace_io.save_trace(trace, out)
    except MatvizError as exc:
        return {"ok": False, "error": one_line(exc)}
    except MemoryError:
        return {"ok": False, "error": "out of memory: try a smaller size"}
    except Exception as exc:  # anything else is a bug, but still one line for the user
        return {"ok": False, "error": f"{type(exc).__name__}: {one_line(exc)}"}
    return {"ok": True, "out": out, "gflops": float(trace.manifest["stats"]["gflops"])}


def _prewarm() -> None:
    """Import what a run needs before the job arrives: a spare worker is then warm."""
    import numpy  # noqa: F401

    from matviz.backends import simulator  # noqa: F401
    from matviz.core import trace_io  # noqa: F401


def warm_up_cuda() -> None:
    """Import CuPy and create the CUDA context before the job arrives (a pre-started worker
    then answers a GPU job without that second or so); silently nothing without a GPU."""
    from matviz.backends.cuda_status import cuda_status

    if cuda_status()[0]:
        import cupy

        cupy.zeros(1).sum()


def main() -> int:
    _prewarm()
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

"""Runs happen in a worker process: results come back as traces, crashes as one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from matviz import jobs
from matviz.backends.contract import RunRequest

REQUEST = RunRequest("tiled", 128, 128, 128, {"tile": 32, "pad": 1}, backend="sim", level=3)
SMALL = REQUEST.to_json()
PY = sys.executable
WORKER = list(jobs.command())
CRASHES = {
    "raises": [PY, "-c", "import sys; sys.stdin.read(); raise RuntimeError('boom in worker')"],
    "exits": [
        PY,
        "-c",
        "import sys; sys.stdin.read(); print('bad things', file=sys.stderr); sys.exit(3)",
    ],
    "aborts": [PY, "-c", "import os, sys; sys.stdin.read(); os.abort()"],
}
SLOW = [PY, "-c", "import sys, time; sys.stdin.read(); time.sleep(60)"]


# -- the worker itself (no Qt) -------------------------------------------------------------------
def test_worker_writes_the_trace_and_one_json_line(tmp_path):
    out = tmp_path / "run.mvz"
    proc = subprocess.run(
        WORKER,
        input=json.dumps({**SMALL, "out": str(out)}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip())
    assert answer["ok"] and answer["out"] == str(out) and answer["gflops"] > 0
    from matviz.core.trace_io import load_trace

    trace = load_trace(out)
    assert trace.params == {"tile": 32, "pad": 1, "drop_sync": 0} and trace.backend == "sim"
    assert "matviz-progress: simulating" in proc.stderr


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"M": 0}, "M must be"),
        ({"params": {"tile": 12}}, "tile=12 is not allowed"),
        ({"backend": "gpu"}, "unknown backend"),
        ({"kernel": "nope"}, "unknown kernel"),
        ({"params": {"tile": 32, "swizzle": 1}}, "has no parameter 'swizzle'"),
        ({"colour": "red"}, "unknown fields: colour"),
        ({"probe_warp": 99}, "probe warp 99 is outside"),
    ],
)
def test_worker_refuses_bad_jobs_in_one_line(tmp_path, change, needle):
    answer = jobs.handle({**SMALL, "out": str(tmp_path / "x.mvz"), **change})
    assert answer["ok"] is False and needle in answer["error"]
    assert "\n" not in answer["error"]


def test_a_job_is_a_request_and_an_out():
    request, out = jobs.parse_job(json.loads(jobs.job_text(REQUEST, "/tmp/x.mvz")))
    assert request == REQUEST and out == "/tmp/x.mvz"
    answer = jobs.handle(SMALL)
    assert answer == {"ok": False, "error": "the job lacks out"}
    assert jobs.handle([1, 2])["error"] == "the job is not a JSON object"


def test_worker_exit_code_and_cuda_unavailable_here(tmp_path):
    proc = subprocess.run(
        WORKER,
        input=json.dumps({**SMALL, "backend": "cuda", "out": str(tmp_path / "x.mvz")}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    from matviz.backends.cuda_status import cuda_status

    if cuda_status()[0]:
        pytest.skip("a GPU is present: the CUDA job may succeed")
    assert proc.returncode == 2
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answer == {"ok": False, "error": answer["error"]} and "CUDA" in answer["error"]


def test_worker_rejects_non_json(tmp_path):
    proc = subprocess.run(
        WORKER,
        input="not json",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "not valid JSON" in json.loads(proc.stdout)["error"]


# -- the Qt side ---------------------------------------------------------------------------------
@pytest.fixture
def runner(qapp):
    from matviz.app.runner import Runner

    r = Runner()
    yield r
    r.shutdown()


@pytest.mark.parametrize("job", [REQUEST, SMALL], ids=["request", "json"])
def test_a_run_returns_a_trace_and_deletes_its_file(qtbot, runner, job):
    busy = []
    runner.busyChanged.connect(busy.append)
    with qtbot.waitSignal(runner.finished, timeout=60_000) as blocker:
        runner.start(job)
        out = runner._out
        assert out and os.path.exists(out)
    trace = blocker.args[0]
    assert trace.shape == (128, 128, 128)
    assert trace.params == {"tile": 32, "pad": 1, "drop_sync": 0}
    assert not os.path.exists(out)
    assert busy == [True, False] and not runner.busy


@pytest.mark.parametrize("kind", sorted(CRASHES))
def test_a_failing_worker_is_reported_and_the_next_job_works(qtbot, runner, kind):
    runner.set_command(CRASHES[kind])
    with qtbot.waitSignal(runner.failed, timeout=60_000) as blocker:
        runner.start(SMALL)
    message = blocker.args[0]
    assert message and "\n" not in message
    expected = {"raises": "boom in worker", "exits": "exit code 3", "aborts": "crashed"}[kind]
    assert expected in message
    assert not runner.busy
    runner.set_command(None)  # the real worker again: a fresh process runs the next job
    with qtbot.waitSignal(runner.finished, timeout=60_000):
        runner.start(SMALL)


def test_a_bad_request_comes_back_from_the_worker(qtbot, runner):
    with qtbot.waitSignal(runner.failed, timeout=60_000) as blocker:
        runner.start({**SMALL, "params": {"tile": 12}})
    assert "tile=12 is not allowed" in blocker.args[0]


def test_a_worker_that_cannot_start_is_reported(qtbot, runner):
    runner.set_command(["/nonexistent/matviz-python"])
    with qtbot.waitSignal(runner.failed, timeout=30_000) as blocker:
        runner.start(SMALL)
    assert "could not start the worker" in blocker.args[0]


def test_only_the_latest_job_counts(qtbot, runner):
    got, failed = [], []
    runner.finished.connect(got.append)
    runner.failed.connect(failed.append)
    runner.set_command(SLOW)
    runner.start(SMALL)  # never finishes by itself
    runner.set_command(None)
    with qtbot.waitSignal(runner.finished, timeout=60_000):
        runner.start({**SMALL, "params": {"tile": 16, "pad": 2}})
    qtbot.waitUntil(lambda: runner.workers_running() <= 1, timeout=10_000)  # slow one killed
    assert [t.params for t in got] == [{"tile": 16, "pad": 2, "drop_sync": 0}] and not failed


def test_cancel_stops_the_job_silently(qtbot, runner):
    reports = []
    runner.finished.connect(reports.append)
    runner.failed.connect(reports.append)
    runner.set_command(SLOW)
    runner.start(SMALL)
    out = runner._out
    with qtbot.waitSignal(runner.busyChanged, timeout=5_000) as blocker:
        runner.cancel()
    assert blocker.args == [False] and not runner.busy
    qtbot.waitUntil(lambda: runner.workers_running() <= 1, timeout=10_000)
    assert not reports and not os.path.exists(out)

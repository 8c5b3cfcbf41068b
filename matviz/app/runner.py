"""Runs recordings and simulations in a worker process (:mod:`matviz.jobs`) via QProcess.

A segfault, CUDA fault or compile error kills only the worker: the Runner reports it through
``failed`` and the next job starts a fresh process. Only the latest job counts: starting a job
cancels the one that is running. One spare worker is kept started ahead of time (its imports
done, waiting on stdin), which saves the interpreter start-up on the next run. The protocol,
the worker's environment and the failure messages are :mod:`matviz.jobs`'; this is the Qt side.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Mapping
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Signal

from matviz import jobs
from matviz.app.i18n import tr
from matviz.backends.contract import RunRequest
from matviz.core.trace import Trace
from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError


def _disconnect(proc: QProcess) -> None:
    """Drop every connection to ``proc``'s signals (and the closures that hold ``self``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a signal with no connections
        for signal in (proc.finished, proc.errorOccurred, proc.readyReadStandardError):
            try:
                signal.disconnect()
            except (RuntimeError, TypeError):
                pass


class Runner(QObject):
    finished = Signal(object)  # Trace
    failed = Signal(str)  # one line for the user
    unreadable = Signal(str)  # the run's trace file could not be read: one line
    progress = Signal(str)
    busyChanged = Signal(bool)

    def __init__(
        self,
        parent: QObject | None = None,
        command: tuple[str, ...] | list[str] | None = None,
        prewarm: bool = True,
    ) -> None:
        super().__init__(parent)
        self.command = tuple(command or jobs.command())
        self.prewarm = prewarm
        self._proc: QProcess | None = None  # the process running the latest job
        self._out: str | None = None  # its temporary trace file
        self._spare: QProcess | None = None
        self._retired: list[QProcess] = []  # done with; deleted once they have exited
        self.last_job: dict[str, Any] | None = None  # the latest job's request as JSON
        self._stderr_tail = ""  # the worker's last non-progress stderr line (a crash's reason)
        self._shut_down = False
        if prewarm:
            self._start_spare()

    # -- public ----------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._proc is not None

    def start(self, job: RunRequest | Mapping[str, Any]) -> None:
        """Run ``job`` (a RunRequest or its JSON); cancels a job already running. A bad
        request is the worker's to refuse: it comes back through ``failed``."""
        if self._shut_down:
            return
        was_busy = self.busy
        self._abandon()
        self._collect()
        fd, out = tempfile.mkstemp(prefix="matviz-run-", suffix=".mvz")
        os.close(fd)
        self._out = out
        self._stderr_tail = ""
        self.last_job = job.to_json() if isinstance(job, RunRequest) else dict(job)
        proc = self._take_spare() or self._spawn()
        self._proc = proc
        proc.finished.connect(lambda code, status, p=proc: self._on_finished(p, code, status))
        proc.errorOccurred.connect(lambda err, p=proc: self._on_error(p, err))
        proc.readyReadStandardError.connect(lambda p=proc: self._on_stderr(p))
        proc.write(jobs.job_text(self.last_job, out).encode())
        proc.closeWriteChannel()
        if not was_busy:
            self.busyChanged.emit(True)

    def cancel(self) -> None:
        """Stop the running job, if any; nothing is reported for it."""
        if self.busy:
            self._abandon()
            self._start_spare()
            self.busyChanged.emit(False)

    def set_command(self, command: tuple[str, ...] | list[str] | None) -> None:
        """Use another worker command from the next job on (None: the real worker)."""
        self.command = tuple(command or jobs.command())
        spare, self._spare = self._spare, None
        if spare is not None:
            self._retire(spare)
        self._start_spare()

    def shutdown(self) -> None:
        """Kill every worker this Runner started and accept no more jobs (the window closes)."""
        self._shut_down = True
        self.prewarm = False
        self._abandon()
        spare, self._spare = self._spare, None
        if spare is not None:
            self._retire(spare)
        for proc in self._retired:
            if proc.state() != QProcess.NotRunning:
                proc.kill()
                proc.waitForFinished(2000)
        self._collect()

    def workers_running(self) -> int:
        """Worker processes alive now: the job's, the spare, and killed ones not yet gone."""
        procs = [self._proc, self._spare, *self._retired]
        return sum(p is not None and p.state() != QProcess.NotRunning for p in procs)

    # -- processes -------------------------------------------------------------------------
    def _spawn(self) -> QProcess:
        proc = QProcess(self)
        env = QProcessEnvironment.systemEnvironment()
        path = jobs.worker_pythonpath(env.value("PYTHONPATH", ""))
        if path:
            env.insert("PYTHONPATH", path)
        proc.setProcessEnvironment(env)
        proc.setProgram(self.command[0])
        proc.setArguments(list(self.command[1:]))
        proc.setReadChannel(QProcess.StandardError)  # readLine() reads progress notes
        proc.start()
        return proc

    def _start_spare(self) -> None:
        if self.prewarm and self._spare is None:
            self._spare = self._spawn()
            self._spare.finished.connect(lambda *_, p=self._spare: self._spare_died(p))

    def _spare_died(self, proc: QProcess) -> None:
        if proc is self._spare:  # it exited before it got a job: do not reuse it
            self._spare = None
            if shiboken6.isValid(proc):  # not when Qt is already destroying the Runner
                self._retire(proc)

    def _take_spare(self) -> QProcess | None:
        proc, self._spare = self._spare, None
        if proc is not None and proc.state() == QProcess.Running:
            _disconnect(proc)
            return proc
        if proc is not None:
            self._retire(proc)
        return None

    def _abandon(self) -> None:
        """Forget the current job: kill its process and delete its file."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._retire(proc)
        self._remove_out()

    def _retire(self, proc: QProcess) -> None:
        """Stop listening to ``proc`` and kill it; it is deleted later by ``_collect``."""
        _disconnect(proc)
        if proc.state() != QProcess.NotRunning:
            proc.kill()
        self._retired.append(proc)

    def _collect(self) -> None:
        """Delete retired processes that have exited (never from inside their own signals)."""
        gone = [p for p in self._retired if p.state() == QProcess.NotRunning]
        self._retired = [p for p in self._retired if p.state() != QProcess.NotRunning]
        for proc in gone:
            proc.setParent(None)  # Python owns it now: it goes when `gone` does

    def _remove_out(self) -> None:
        out, self._out = self._out, None
        if out:
            try:
                os.unlink(out)
            except OSError:
                pass

    # -- reports ---------------------------------------------------------------------------
    def _on_stderr(self, proc: QProcess) -> None:
        while proc.canReadLine():
            line = bytes(proc.readLine()).decode("utf-8", "replace").strip()
            if line.startswith(jobs.PROGRESS_PREFIX):
                self.progress.emit(line[len(jobs.PROGRESS_PREFIX) :])
            elif line:
                self._stderr_tail = line

    def _on_error(self, proc: QProcess, error: QProcess.ProcessError) -> None:
        if proc is self._proc and error == QProcess.FailedToStart:
            self._finish_with_error(jobs.start_failure(self.command[0], proc.errorString(), tr))

    def _on_finished(self, proc: QProcess, code: int, status: QProcess.ExitStatus) -> None:
        if proc is not self._proc:
            return
        self._on_stderr(proc)
        rest = bytes(proc.readAllStandardError()).decode("utf-8", "replace")
        stderr_tail = jobs.last_line(rest) or self._stderr_tail
        answer = jobs.parse_answer(bytes(proc.readAllStandardOutput()).decode("utf-8", "replace"))
        try:
            path = jobs.result(
                answer,
                self._out,
                returncode=code,
                crashed=status == QProcess.CrashExit,
                stderr_tail=stderr_tail,
                translate=tr,
            )
        except MatvizError as exc:
            self._finish_with_error(str(exc))
            return
        self._load(str(path))

    def _load(self, path: str) -> None:
        try:
            trace: Trace = load_trace(path)
        except MatvizError as exc:
            self._done()
            self.unreadable.emit(str(exc))
            return
        self._done()
        self.finished.emit(trace)

    def _finish_with_error(self, message: str) -> None:
        self._done()
        self.failed.emit(message)

    def _done(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            self._retire(proc)
        self._remove_out()
        self._start_spare()
        self.busyChanged.emit(False)

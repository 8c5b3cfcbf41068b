"""Parameter sweeps: every (tile, pad) of one kernel, one row each, failures included.

A configuration that cannot run (a pad the kernel lacks, a tile the catalog refuses, a size it
cannot launch, a CUDA fault, a crashed worker) becomes a row with a status and a reason; the
sweep goes on. CUDA runs go through the worker process (``matviz.backends.worker``), so a crash
costs one row; simulations run in this process unless ``isolate`` asks for the worker too.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matviz
from matviz.backends import simulator, worker
from matviz.core import metrics
from matviz.core.catalog import get_kernel
from matviz.core.trace import Trace
from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError
from matviz.export.atomic import AtomicOutput

OK, UNSUPPORTED, INVALID, FAILED = "ok", "unsupported", "invalid", "failed"
WORKER_COMMAND = (sys.executable, "-m", "matviz.backends.worker")
PROJECT_ROOT = Path(matviz.__file__).resolve().parents[1]
TIMEOUT_S = 900.0  # one configuration: compile + verify + 20 timed runs take far less
CSV_COLUMNS = (
    "kernel", "tile", "pad", "M", "N", "K", "backend", "level", "status", "reason", "gflops",
    "cublas_gflops", "pct_cublas", "rel_error", "overhead_pct", "time_ms", "blocks_per_sm",
    "limiter", "waves",
)  # fmt: skip


@dataclass
class SweepRow:
    kernel: str
    tile: int
    pad: int | None  # as asked (None: the kernel's default or no pad at all)
    M: int
    N: int
    K: int
    backend: str
    level: int
    params: dict[str, int] = field(default_factory=dict)
    status: str = ""  # '' until run, then OK / UNSUPPORTED / INVALID / FAILED
    reason: str = ""
    gflops: float | None = None
    cublas_gflops: float | None = None
    pct_cublas: float | None = None
    rel_error: float | None = None
    overhead_pct: float | None = None
    time_ms: float | None = None
    blocks_per_sm: int | None = None
    limiter: str | None = None
    waves: int | None = None

    @property
    def label(self) -> str:
        """'tiled T16 P1' (the pad as asked, also when the kernel has none)."""
        return f"{self.kernel} T{self.tile}" + ("" if self.pad is None else f" P{self.pad}")

    @property
    def runnable(self) -> bool:
        return self.status in ("", OK)

    def csv_row(self) -> dict[str, Any]:
        return {name: _csv_value(getattr(self, name)) for name in CSV_COLUMNS}


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


# -- planning ------------------------------------------------------------------------------------
def plan(
    kernel: str,
    tiles: Sequence[int] | None,
    pads: Sequence[int] | None,
    M: int,
    N: int,
    K: int,
    backend: str,
    level: int,
) -> list[SweepRow]:
    """One row per (tile, pad), tile major; rows that cannot run are already marked."""
    spec = get_kernel(kernel)  # an unknown kernel is the user's one-line error, not a row
    tiles = list(tiles) if tiles else list(spec.params["tile"])
    pads_asked: list[int | None] = list(pads) if pads else [None]
    rows = []
    for tile in tiles:
        for pad in pads_asked:
            row = SweepRow(spec.name, tile, pad, M, N, K, backend, level)
            rows.append(row)
            if pad not in (None, 0) and "pad" not in spec.params:
                row.status, row.reason = UNSUPPORTED, f"kernel {spec.name} has no padding (pad)"
                continue
            given = {"tile": tile, "pad": pad if "pad" in spec.params else None}
            try:
                row.params = spec.resolve_params(**given)
                spec.validate(row.params, M, N, K)
            except MatvizError as exc:
                row.status, row.reason = INVALID, str(exc)
    return rows


# -- running -------------------------------------------------------------------------------------
def _in_worker(job: dict[str, Any], command: Sequence[str], timeout: float) -> Trace:
    """Run one job in a fresh worker process and load its trace; MatvizError on any failure."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="matviz-sweep-") as tmp:
        out = Path(tmp) / "run.mvz"
        try:
            proc = subprocess.run(
                list(command),
                input=json.dumps({**job, "out": str(out)}),
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
            )
        except subprocess.TimeoutExpired:
            raise MatvizError(f"no answer from the worker after {timeout:.0f} s") from None
        except OSError as exc:
            raise MatvizError(f"could not start the worker: {exc.strerror or exc}") from None
        answer = worker.parse_answer(proc.stdout) or {}
        if answer.get("ok") and proc.returncode == 0:
            return load_trace(out)
        if "error" in answer:
            raise MatvizError(str(answer["error"]))
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        detail = f": {tail[-1].strip()}" if tail else ""
        if proc.returncode < 0:
            raise MatvizError(f"the worker crashed (signal {-proc.returncode}){detail}")
        raise MatvizError(f"the worker stopped with exit code {proc.returncode}{detail}")


def _fill(row: SweepRow, trace: Trace) -> None:
    stats = trace.manifest["stats"]
    occ = trace.manifest.get("occupancy") or {}
    row.gflops = stats.get("gflops")
    row.cublas_gflops = stats.get("cublas_gflops")
    row.pct_cublas = stats.get("pct_cublas")
    row.rel_error = stats.get("rel_error")
    row.overhead_pct = stats.get("overhead_pct")
    row.time_ms = stats.get("time_ms_median")
    row.blocks_per_sm = occ.get("blocks_per_sm")
    row.limiter = occ.get("limiter")
    row.waves = metrics.waves(trace)


def run_row(
    row: SweepRow,
    *,
    isolate: bool = False,
    command: Sequence[str] = WORKER_COMMAND,
    timeout: float = TIMEOUT_S,
) -> SweepRow:
    """Run one planned row (CUDA always in a worker) and fill its numbers or its reason."""
    if not row.runnable:
        return row
    job = {"backend": row.backend, "kernel": row.kernel, "M": row.M, "N": row.N, "K": row.K,
           "params": row.params, "level": row.level}  # fmt: skip
    try:
        if isolate or row.backend == "cuda":
            trace = _in_worker(job, command, timeout)
        else:  # in process: fast, and the simulator cannot crash the interpreter
            trace = simulator.simulate(
                row.kernel, row.M, row.N, row.K, level=row.level, **row.params
            )
        _fill(row, trace)
        row.status = OK
    except MatvizError as exc:
        row.status, row.reason = FAILED, worker.one_line(exc)
    except MemoryError:
        row.status, row.reason = FAILED, "out of memory: try a smaller size"
    except Exception as exc:  # a bug in one configuration must not end the whole sweep
        row.status, row.reason = FAILED, f"{type(exc).__name__}: {worker.one_line(exc)}"
    return row


Progress = Callable[[int, int, SweepRow, bool], None]  # (index, total, row, finished)


def run_sweep(rows: list[SweepRow], progress: Progress | None = None, **run_kw) -> list[SweepRow]:
    """Run every row in order; ``progress`` hears about each before and after it runs."""
    for i, row in enumerate(rows, 1):
        if progress:
            progress(i, len(rows), row, False)
        run_row(row, **run_kw)
        if progress:
            progress(i, len(rows), row, True)
    return rows


# -- reporting -----------------------------------------------------------------------------------
def _num(value: float | None, spec: str, missing: str = "–") -> str:
    return missing if value is None else format(value, spec)


def result_text(row: SweepRow) -> str:
    """What the progress line says when a row is done."""
    if row.status == OK:
        return f"{row.gflops:,.1f} GFLOP/s"
    return f"{row.status}: {row.reason}"


def table_lines(rows: list[SweepRow]) -> list[str]:
    """The printed table: one line per configuration, reasons last (they are long)."""
    header = ("config", "status", "GFLOP/s", "% cuBLAS", "rel.error", "overhead",
              "blocks/SM", "limiter", "reason")  # fmt: skip
    body = []
    for r in rows:
        sim = r.backend == "sim" and r.status == OK
        body.append((
            r.label, r.status, _num(r.gflops, ",.1f"), _num(r.pct_cublas, ".1f"),
            _num(r.rel_error, ".1e", "n/a (sim)" if sim else "–"),
            _num(r.overhead_pct, "+.1f", "n/a (sim)" if sim else "–"),
            _num(r.blocks_per_sm, "d"), r.limiter or "–", r.reason,
        ))  # fmt: skip
    widths = [max(len(str(line[i])) for line in (header, *body)) for i in range(len(header))]
    right = {2, 3, 4, 5, 6}
    out = []
    for line in (header, *body):
        cells = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return out


def write_csv(rows: list[SweepRow], path: str | os.PathLike[str]) -> Path:
    """One row per configuration, atomically."""
    with AtomicOutput(path) as tmp:
        try:
            with open(tmp, "w", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
                writer.writeheader()
                writer.writerows(r.csv_row() for r in rows)
        except OSError as exc:
            raise MatvizError(f"cannot write '{path}': {exc.strerror or exc}") from None
    return Path(path)

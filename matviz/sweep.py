"""Parameter sweeps: every combination of the asked parameter values of one kernel, one row each.

The axes are any of the kernel description's parameters (an axis not asked stays at the
kernel's default). A configuration that cannot run (a parameter the kernel lacks, a value it
does not allow, a size it cannot launch, a CUDA fault, a crashed worker) becomes a row with a
status and a reason; the sweep goes on. CUDA runs go through a worker process
(:mod:`matviz.jobs`), so a crash costs one row; simulations run in this process unless
``isolate`` asks for the worker too.
"""

from __future__ import annotations

import csv
import itertools
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matviz import jobs
from matviz.backends import contract
from matviz.backends.contract import RunRequest
from matviz.core import metrics, registry
from matviz.core.ceilings import configuration_ceiling
from matviz.core.kernel import Kernel
from matviz.core.trace import Trace
from matviz.core.trace_io import load_trace
from matviz.errors import MatvizError
from matviz.export.atomic import AtomicOutput

OK, UNSUPPORTED, INVALID, FAILED = "ok", "unsupported", "invalid", "failed"
PRUNED = "pruned"  # --tune: not run, its shared-memory ceiling is below the best so far
TIMEOUT_S = 900.0  # one configuration: compile + verify + 20 timed runs take far less
HEAD_COLUMNS = ("kernel", "config")
TAIL_COLUMNS = (
    "M", "N", "K", "backend", "level", "status", "reason", "gflops", "cublas_gflops",
    "pct_cublas", "rel_error", "overhead_pct", "time_ms", "blocks_per_sm", "limiter", "waves",
)  # fmt: skip


@dataclass
class SweepRow:
    kernel: str
    asked: dict[str, Any]  # this row's value of every asked axis, as asked
    M: int
    N: int
    K: int
    backend: str
    level: int
    # the kernel's parameters: defaults with the asked values over them (checked once OK)
    params: dict[str, Any] = field(default_factory=dict)
    status: str = ""  # '' until run, then OK / UNSUPPORTED / INVALID / FAILED (or PRUNED)
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
    device: dict[str, Any] | None = None  # the manifest's, of the GPU (or model) that ran it

    @property
    def label(self) -> str:
        """'tiled T16 P1': the kernel and what was asked (every parameter if nothing was)."""
        shown = _labels(registry.get_kernel(self.kernel), self.asked or self.params)
        return f"{self.kernel} {shown}".rstrip()

    @property
    def runnable(self) -> bool:
        return self.status in ("", OK)

    def request(self) -> RunRequest:
        return RunRequest(
            kernel=self.kernel, M=self.M, N=self.N, K=self.K, params=dict(self.params),
            backend=self.backend, level=self.level,
        )  # fmt: skip

    def csv_row(self, columns: Sequence[str]) -> dict[str, Any]:
        row = {"config": self.label}
        by_column = {param_column(n): v for n, v in self.params.items()}
        for name in columns:
            if name not in row:
                value = by_column[name] if name in by_column else getattr(self, name, None)
                row[name] = _csv_value(value)
        return row


def _labels(kernel: Kernel, values: Mapping[str, Any]) -> str:
    """``Kernel.labels`` for the kernel's own parameters; others by the label a registered
    kernel gives them (or name=value), so a row asking for a missing parameter says so."""
    own = kernel.labels({n: v for n, v in values.items() if n in kernel.param_names})
    parts = [own] if own else []
    for name, value in values.items():
        if name not in kernel.param_names:
            parts.append(_foreign_label(name, value))
    return " ".join(parts)


def _foreign_label(name: str, value: Any) -> str:
    for other in registry.kernels().values():
        if name in other.param_names:
            return other.param(name).short(value)
    return f"{name}={value}"


def param_column(name: str) -> str:
    """A parameter's CSV column: its name, unless a fixed column is called that."""
    return f"param_{name}" if name in (*HEAD_COLUMNS, *TAIL_COLUMNS) else name


def csv_columns(kernel: Kernel) -> tuple[str, ...]:
    """The fixed columns with one column per parameter of ``kernel``, in description order."""
    return (*HEAD_COLUMNS, *map(param_column, kernel.param_names), *TAIL_COLUMNS)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


# -- planning ------------------------------------------------------------------------------------
def plan(
    kernel: str,
    axes: Mapping[str, Sequence[Any]],
    M: int,
    N: int,
    K: int,
    backend: str,
    level: int,
) -> list[SweepRow]:
    """One row per combination of the ``axes`` values (parameter name -> values); the first
    axis in the kernel's description order varies slowest. Rows that cannot run are marked."""
    spec = registry.get_kernel(kernel)  # an unknown kernel is the user's one-line error
    order = {name: i for i, name in enumerate(spec.param_names)}
    names = sorted((n for n in axes if axes[n]), key=lambda n: order.get(n, len(order)))
    rows = []
    for combo in itertools.product(*(list(axes[n]) for n in names)):
        asked = dict(zip(names, combo, strict=True))
        row = SweepRow(spec.name, asked, M, N, K, backend, level)
        row.params = {**spec.default_params(), **{
            n: v for n, v in asked.items() if n in spec.param_names
        }}  # fmt: skip
        rows.append(row)
        missing = [n for n in asked if n not in spec.param_names]
        if missing:
            row.status = UNSUPPORTED
            row.reason = f"kernel {spec.name} has no parameter " + ", ".join(map(repr, missing))
            continue
        try:
            row.params = spec.configure(row.params, M, N, K).params
        except MatvizError as exc:
            row.status, row.reason = INVALID, jobs.one_line(exc)
    return rows


# -- running -------------------------------------------------------------------------------------
def _in_worker(request: RunRequest, command: Sequence[str], timeout: float) -> Trace:
    """Run one request in a fresh worker process and load its trace; MatvizError on failure."""
    with tempfile.TemporaryDirectory(prefix="matviz-sweep-") as tmp:
        out = Path(tmp) / "run.mvz"
        try:
            proc = subprocess.run(
                list(command),
                input=jobs.job_text(request, out),
                capture_output=True,
                text=True,
                timeout=timeout,
                env=jobs.worker_env(),
            )
        except subprocess.TimeoutExpired:
            raise MatvizError(f"no answer from the worker after {timeout:.0f} s") from None
        except OSError as exc:
            raise MatvizError(jobs.start_failure(command[0], exc.strerror or str(exc))) from None
        path = jobs.result(
            jobs.parse_answer(proc.stdout),
            out,
            returncode=proc.returncode,
            stderr_tail=jobs.last_line(proc.stderr),
        )
        return load_trace(path)


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
    row.device = trace.manifest.get("device")


def run_row(
    row: SweepRow,
    *,
    isolate: bool = False,
    command: Sequence[str] | None = None,
    timeout: float = TIMEOUT_S,
) -> SweepRow:
    """Run one planned row (CUDA always in a worker) and fill its numbers or its reason."""
    if not row.runnable:
        return row
    try:
        request = row.request()
        if isolate or row.backend == "cuda":
            trace = _in_worker(request, command or jobs.command(), timeout)
        else:  # in process: fast, and the simulator cannot crash the interpreter
            trace = contract.run(request)
        _fill(row, trace)
        row.status = OK
    except MatvizError as exc:
        row.status, row.reason = FAILED, jobs.one_line(exc)
    except MemoryError:
        row.status, row.reason = FAILED, "out of memory: try a smaller size"
    except Exception as exc:  # a bug in one configuration must not end the whole sweep
        row.status, row.reason = FAILED, f"{type(exc).__name__}: {jobs.one_line(exc)}"
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


def tune(
    kernel: str,
    M: int,
    N: int,
    K: int,
    backend: str,
    level: int,
    progress: Progress | None = None,
    max_rounds: int = 3,
    **run_kw: Any,
) -> tuple[SweepRow | None, list[SweepRow]]:
    """A pruned search for the fastest configuration: coordinate descent from the default.

    Each parameter in turn tries its allowed values (never a deliberately broken one) with the
    others at the best so far; a value the others forbid is tried with each single change of
    another parameter that allows it. Rounds repeat until a round improves nothing. It runs a few
    configurations per parameter instead of their product, and none whose shared-memory
    ceiling (:mod:`matviz.core.ceilings`, on the GPU the best row ran on) is below the best so
    far: it cannot beat it. Returns the best row (None when nothing ran) and every row it
    tried, in order.
    """
    spec = registry.get_kernel(kernel)
    rows: dict[tuple[tuple[str, Any], ...], SweepRow] = {}

    def evaluate(params: dict[str, Any]) -> SweepRow:
        key = tuple(sorted(params.items()))
        if key not in rows:
            row = plan(spec.name, {n: [v] for n, v in params.items()}, M, N, K, backend, level)[0]
            if progress:
                progress(len(rows) + 1, 0, row, False)
            why = _cannot_win(row, top)
            if why:
                row.status, row.reason = PRUNED, why
            else:
                run_row(row, **run_kw)
            rows[key] = row
            if progress:
                progress(len(rows), 0, row, True)
        return rows[key]

    def faster(row: SweepRow, than: SweepRow | None) -> bool:
        if row.status != OK or row.gflops is None:
            return False
        return than is None or than.gflops is None or row.gflops > than.gflops

    top: SweepRow | None = None
    current = spec.default_params()
    start = evaluate(current)
    top = start if start.status == OK else None
    for _ in range(max_rounds):
        improved = False
        for param in spec.params:
            for value in param.values:
                if value in param.broken or value == current[param.name]:
                    continue
                for params in _moves(spec, {**current, param.name: value}, param.name):
                    row = evaluate(params)
                    if faster(row, top):
                        top, current, improved = row, dict(row.params), True
        if not improved:
            break
    return top, list(rows.values())


def _cannot_win(row: SweepRow, best: SweepRow | None) -> str:
    """Why ``row`` cannot beat ``best``: shared memory alone, on the GPU ``best`` ran on, caps
    it below; '' where it may."""
    if best is None or best.gflops is None or best.device is None or not row.runnable:
        return ""
    ceiling = configuration_ceiling(row.kernel, row.params, row.M, row.N, row.K, best.device)
    if ceiling is None or ceiling.gflops >= best.gflops:
        return ""
    return (f"shared memory alone allows {ceiling.gflops:,.0f} GFLOP/s, below the best so far "
            f"({best.gflops:,.0f})")  # fmt: skip


def _moves(spec: Kernel, moved: dict[str, Any], changed: str) -> list[dict[str, Any]]:
    """``moved`` where its parameters allow it; else each way one other parameter can change to
    make it allowed (pad 4 needs swizzle 0: coordinate descent alone never leaves pad 0 X1)."""
    if _allowed(spec, moved):
        return [moved]
    repairs = [
        {**moved, other.name: value}
        for other in spec.params
        if other.name != changed
        for value in other.values
        if value not in other.broken and value != moved[other.name]
    ]
    return [params for params in repairs if _allowed(spec, params)]


def _allowed(spec: Kernel, params: dict[str, Any]) -> bool:
    try:
        spec.resolve_params(params)
    except MatvizError:
        return False
    return True


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
    """One row per configuration, atomically; the columns are those of the rows' kernel."""
    kernels = {r.kernel for r in rows}
    if len(kernels) > 1:
        raise ValueError(f"a sweep CSV holds one kernel, not {sorted(kernels)}")
    columns = (
        csv_columns(registry.get_kernel(rows[0].kernel)) if rows else (*HEAD_COLUMNS, *TAIL_COLUMNS)
    )
    with AtomicOutput(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(r.csv_row(columns) for r in rows)
    return Path(path)

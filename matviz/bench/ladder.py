"""The ladder to cuBLAS: every kernel at its best configuration, measured side by side.

Each kernel runs at its best configuration for this GPU and size (:func:`best_params`), with
cuBLAS (``cupy.matmul``) timed in the same process on the same inputs; level-1 and level-2
builds are timed interleaved with level 0 to give the instrumentation's overhead. The rows
become a printed table, a markdown table (the README's, never typed by hand) and a plot.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from matviz.core import tuned
from matviz.core.ceilings import configuration_ceiling, configuration_issue_ceiling
from matviz.core.metrics import peak_gflops, whole_count
from matviz.core.occupancy import occupancy_dict
from matviz.core.registry import get_kernel, kernels
from matviz.core.trace_schema import Count, InputType, Number
from matviz.errors import MatvizError
from matviz.paths import RESOURCE_DIR

MAX_ROWS_BYTES = 16 << 20  # a --json file of rows is a few kB
# every configuration, measured (`python -m matviz.bench.kernels --json`), each row naming its GPU
BENCH_ALL = (
    RESOURCE_DIR / "bench" / "h200_kernels_4096.json",
    RESOURCE_DIR / "bench" / "h100_kernels_4096.json",
)
Tables = Path | tuple[Path, ...]
SAVED_DEVICE = "NVIDIA H200"  # the GPU of rows saved before rows named theirs
LADDER_H200 = RESOURCE_DIR / "bench" / "h200_ladder_4096.json"  # `matviz bench --json`, bundled
COLUMNS = (
    ("kernel", "kernel"), ("config", "configuration"), ("gflops", "GFLOP/s"),
    ("pct_cublas", "% of cuBLAS"), ("pct_peak", "% of FP32 peak"), ("rel_error", "rel. error"),
    ("registers", "registers"), ("occupancy", "blocks/SM (limit)"),
    ("overhead_l1_pct", "level-1 overhead"), ("overhead_l2_pct", "level-2 overhead"),
    ("smem_ceiling_pct", "shared-memory ceiling, % of peak (model)"),
)  # fmt: skip


@functools.lru_cache(maxsize=4)
def _table_rows(table: Path) -> tuple[dict[str, Any], ...]:
    try:
        rows = json.loads(table.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    return tuple(r for r in rows if isinstance(r, dict)) if isinstance(rows, list) else ()


def measured_configs(
    kernel: str, size: int = 4096, device: str = SAVED_DEVICE, table: Tables = BENCH_ALL
) -> list[tuple[dict[str, Any], float]]:
    """(parameters, GFLOP/s) of every configuration of ``kernel`` the benchmark of every
    configuration (``table``: one file or several) measured on this GPU at this size, fastest
    first; a row benched before a parameter was added holds it at its default, one whose
    values the description no longer allows is left out."""
    return [(dict(params), gflops) for params, gflops in _measured(kernel, size, device, table)]


@functools.lru_cache(maxsize=32)  # the banks view asks at every k-step of a playback
def _measured(kernel: str, size: int, device: str, table: Tables):
    spec = get_kernel(kernel)
    out = []
    rows = (
        row
        for path in (table if isinstance(table, tuple) else (table,))
        for row in _table_rows(path)
    )
    for row in rows:
        if (row.get("kernel"), row.get("size"), row_device(row)) != (
            spec.name,
            size,
            device,
        ) or not isinstance(row.get("gflops"), (int, float)):
            continue
        try:
            out.append((spec.resolve_params(row.get("params") or {}), float(row["gflops"])))
        except MatvizError:
            continue
    return tuple(sorted(out, key=lambda item: -item[1]))


# where a rung's configuration came from, as a row's "config_source" says, and what the
# progress line and the table's caption say of it (the fastest measured goes without saying)
ConfigSource = Literal["tuned", "measured", "default"]
TUNED: ConfigSource = "tuned"
MEASURED: ConfigSource = "measured"
DEFAULT: ConfigSource = "default"
SOURCE_WHY = {
    TUNED: "the configuration `matviz sweep --tune` kept",
    DEFAULT: "the description's default, none measured on this GPU at this size",
}


def best_params(
    kernel: str, size: int, device: str, table: Tables = BENCH_ALL, tuned_file: Path | None = None
) -> dict[str, Any]:
    """The configuration of ``kernel`` to stand on the ladder for this GPU and size: the one
    ``matviz sweep --tune`` kept for them (``tuned_file``, by default the user's), else the
    fastest in the measured benchmark of every configuration (``table``), among those with the
    input type of its default (a rung stands against cuBLAS on its own inputs: kernel 10's bf16
    build is not its fp16 rung); the description's default where there is neither."""
    return best_choice(kernel, size, device, table, tuned_file)[0]


def best_choice(
    kernel: str, size: int, device: str, table: Tables = BENCH_ALL, tuned_file: Path | None = None
) -> tuple[dict[str, Any], ConfigSource]:
    """:func:`best_params` and where it came from: TUNED, MEASURED or DEFAULT."""
    spec = get_kernel(kernel)
    default = spec.default_params()
    dtype = spec.configure(default, 1, 1, 1, check=False).input_dtype

    def same_inputs(params: dict[str, Any]) -> bool:
        return spec.configure(params, 1, 1, 1, check=False).input_dtype == dtype

    kept = tuned.best(spec.name, size, size, size, tuned.device_key(device, "cuda"), tuned_file)
    if kept and same_inputs(kept):
        return kept, TUNED
    for params, _ in measured_configs(kernel, size, device, table):
        if same_inputs(params):
            return params, MEASURED
    return default, DEFAULT


def measure(kernel: str, params: dict[str, Any], size: int, repeats: int) -> dict[str, Any]:
    """One row of the ladder: levels 1 and 2 each timed against level 0, cuBLAS alongside."""
    from matviz.backends.contract import RunRequest
    from matviz.backends.cupy_recorder import Recorder

    spec = get_kernel(kernel)
    row: dict[str, Any] = {"kernel": spec.name, "number": spec.number, "params": params,
                           "config": spec.labels(params), "size": size}  # fmt: skip
    for level in (1, 2):
        request = RunRequest(spec.name, size, size, size, params, backend="cuda", level=level,
                             repeats=repeats)  # fmt: skip
        manifest = Recorder(request).run().manifest
        stats = manifest["stats"]
        row[f"overhead_l{level}_pct"] = stats["overhead_pct"]
        if level == 2:  # how many blocks stamped, as `matviz record` keeps within its target
            row["phase_every_l2"] = manifest["sampling"]["phase_every"]
        if level == 1:
            registers = manifest["geometry"]["registers"].get("level_0")
            config = spec.configure(params, size, size, size)
            # residency of the kernel as timed (level 0), not of the instrumented build
            occ = occupancy_dict(config, manifest["device"], registers) if registers else {}
            dtype = manifest.get("dtype", "float32")
            peak, _ = peak_gflops(manifest["device"], dtype)
            row.update(
                dtype=dtype,
                device=manifest["device"]["name"],
                gflops=stats["gflops"],
                cublas_gflops=stats["cublas_gflops"],
                pct_cublas=stats["pct_cublas"],
                pct_peak=100.0 * stats["gflops"] / peak,
                peak_gflops=peak,
                rel_error=stats["rel_error"],
                ms=stats["time_ms_median"],
                registers=registers,
                blocks_per_sm=occ.get("blocks_per_sm"),
                limiter=occ.get("limiter"),
            )
    return row


def run_ladder(
    names: Sequence[str] | None,
    size: int,
    repeats: int,
    device: str,
    progress: Callable[[str], None] = lambda text: None,
) -> list[dict[str, Any]]:
    chosen = [get_kernel(n).name for n in names] if names else list(kernels())
    rows = []
    for name in chosen:
        params, source = best_choice(name, size, device)
        why = f" ({SOURCE_WHY[source]})" if source in SOURCE_WHY else ""
        progress(f"{name} {get_kernel(name).labels(params)}{why}")
        rows.append(measure(name, params, size, repeats) | {"config_source": source})
    return rows


def _row_problem(row: dict[str, Any]) -> tuple[str, dict[str, Any], int, int, int] | None:
    """The row's kernel, parameters and n x n x n shape; None for a row saved without its
    parameters."""
    size, params = row.get("size"), row.get("params")
    if not isinstance(params, dict) or not isinstance(size, int) or not 0 < size < 1 << 20:
        return None
    return str(row["kernel"]), params, size, size, size


def shared_ceiling_pct(row: dict[str, Any]) -> float | None:
    """What shared memory alone allows the row's kernel, in % of the peak for its inputs: a
    property of the configuration (:mod:`matviz.core.ceilings`), not a measurement."""
    problem = _row_problem(row)
    ceiling = None if problem is None else configuration_ceiling(*problem, None)
    return None if ceiling is None else ceiling.pct_of_peak


def issue_ceiling_pct(row: dict[str, Any]) -> float | None:
    """What issuing its k loop allows the row's FP32 configuration, in % of the FP32 peak: the
    FFMA share of the k loop ptxas emits for it (:func:`matviz.core.ceilings.issue_ceiling`);
    None for a Tensor Core loop or a configuration this matviz does not have."""
    problem = _row_problem(row)
    issue = None if problem is None else configuration_issue_ceiling(*problem, None)
    return None if issue is None else issue.loop.math_share


def _cell(row: dict[str, Any], key: str) -> str:
    if key == "smem_ceiling_pct":
        pct = shared_ceiling_pct(row)
        return "n/a" if pct is None else f"{pct:.0f}"
    if key == "occupancy":
        return f"{row.get('blocks_per_sm', '?')} ({row.get('limiter', '?')})"
    value = row.get(key)
    if value is None:
        return "n/a"
    if key == "gflops":
        return f"{value:,.0f}"
    if key in ("pct_cublas", "pct_peak"):
        return f"{value:.1f}"
    if key.startswith("overhead"):
        every = whole_count(row.get("phase_every_l2")) if key == "overhead_l2_pct" else None
        if every is not None and every > 1:
            return f"{value:+.2f}% (1 block in {every} stamping)"
        return f"{value:+.2f}%"
    if key == "rel_error":
        return f"{value:.1e}"
    return str(value)


def row_device(row: dict[str, Any]) -> str:
    """The GPU a benchmark row was measured on."""
    return str(row.get("device", SAVED_DEVICE))


def row_dtype(row: dict[str, Any]) -> str:
    """The element type of a benchmark row's A and B (rows saved before it was kept: fp32)."""
    return str(row.get("dtype", "float32"))


def by_dtype(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows grouped by the element type of A and B, each group against its own cuBLAS and
    peak."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row_dtype(row), []).append(row)
    return list(groups.values())


def markdown(rows: list[dict[str, Any]], source: str) -> str:
    """The ladder as markdown tables, one per element type, each with the line that says how
    it was measured."""
    if not rows:
        raise MatvizError("the benchmark has no rows")
    return "\n\n".join(_markdown_group(group, source) for group in by_dtype(rows))


def _markdown_group(rows: list[dict[str, Any]], source: str) -> str:
    dtype = row_dtype(rows[0])
    lines = ["| " + " | ".join(_titles(rows)) + " |", "|" + " --- |" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row, key) for key, _ in COLUMNS) + " |")
    blas = [r["cublas_gflops"] for r in rows]
    if dtype == "float32":
        what = "fp32"
        peak = f"FP32 peak {rows[0]['peak_gflops']:,.0f} GFLOP/s"
    else:
        what = f"{dtype} inputs, fp32 sums,"
        peak = f"dense {dtype} Tensor Core peak {rows[0]['peak_gflops']:,.0f} GFLOP/s"
    lines += [
        "",
        f"{rows[0]['size']}³ {what} on one {rows[0].get('device', 'GPU')}, "
        f"{_configurations(rows)}; cuBLAS {_span(blas)} GFLOP/s in "
        f"the same process on the same inputs; {peak}. Medians of CUDA-event times, "
        f"instrumented builds interleaved with level 0. Made by `matviz bench` (`{source}`).",
    ]
    return "\n".join(lines)


def _configurations(rows: list[dict[str, Any]]) -> str:
    """Which configuration the kernels ran: the fastest measured on this GPU, but where a row
    says it ran the one `matviz sweep --tune` kept or its description's default (none of its
    configurations measured on this GPU at this size). Rows saved before they said ran the
    fastest measured."""
    named = {source: [str(r["kernel"]) for r in rows if r.get("config_source") == source]
             for source in SOURCE_WHY}  # fmt: skip
    for source, kernels_ in named.items():
        if len(kernels_) == len(rows):
            return f"each kernel at {SOURCE_WHY[source]}"
    but = "; ".join(f"{', '.join(k)}: {SOURCE_WHY[source]}" for source, k in named.items() if k)
    return "each kernel at its fastest measured configuration" + (f" ({but})" if but else "")


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:,.0f}" if round(low) == round(high) else f"{low:,.0f}-{high:,.0f}"


def text_table(rows: list[dict[str, Any]]) -> list[str]:
    """The rows for a terminal: aligned columns, a block per element type."""
    out: list[str] = []
    for group in by_dtype(rows):
        cells = [_titles(group)] + [[_cell(row, key) for key, _ in COLUMNS] for row in group]
        widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
        out += ([""] if out else []) + [
            "  ".join(c[i].ljust(widths[i]) for i in range(len(COLUMNS))).rstrip() for c in cells
        ]
    return out


def _titles(rows: list[dict[str, Any]]) -> list[str]:
    """Column titles; the peak is the Tensor Core's for fp16/bf16 rows."""
    titles = [title for _, title in COLUMNS]
    if row_dtype(rows[0]) != "float32":
        titles = [t.replace("% of FP32 peak", "% of Tensor Core peak") for t in titles]
    return titles


def read_rows(
    path: Path, max_bytes: int, fits: Callable[[Any], bool], what: str
) -> list[dict[str, Any]]:
    """The JSON list of rows in ``path``, each of which ``fits``; MatvizError naming ``what``
    (the command that writes such files) when the file is not one."""
    from matviz.core.json_input import read_json_file

    rows = read_json_file(path, max_bytes, str(path))
    if not isinstance(rows, list) or not rows or not all(fits(r) for r in rows):
        raise MatvizError(f"{path} is not a `{what}` file")
    return rows


MAX_SIZE = 1 << 17  # M = N = K of a saved run: a 131072³ fp32 GEMM needs 192 GiB


def measured(row: dict[str, Any], numbers: Sequence[str]) -> bool:
    """Whether ``row`` holds a finite number at each of ``numbers`` and a whole size from 1 to
    MAX_SIZE (json reads NaN, Infinity and 10**400 as numbers; a table would print them)."""
    size = row.get("size")
    return (
        all(_finite(row.get(k)) for k in numbers)
        and isinstance(size, int)
        and not isinstance(size, bool)
        and 1 <= size <= MAX_SIZE
    )


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 53


class LadderRow(BaseModel):
    """One rung as ``matviz bench --json`` saves it: the fields the table, the chart and the
    app read, each of the type they format it as (json reads NaN and 10**400 as numbers, and a
    hand-edited file can put a string where a number goes), in the trace schema's types. Other
    fields are kept."""

    model_config = ConfigDict(extra="allow", strict=True)
    kernel: str
    config: str
    size: Annotated[int, Field(ge=1, le=MAX_SIZE)]
    params: dict[str, int | str] = {}
    number: Count | None = None
    gflops: Number
    cublas_gflops: Number
    peak_gflops: Number
    pct_cublas: Number | None = None
    pct_peak: Number | None = None
    rel_error: Number | None = None
    overhead_l1_pct: Number | None = None
    overhead_l2_pct: Number | None = None
    ms: Number | None = None
    registers: Count | None = None
    blocks_per_sm: Count | None = None
    phase_every_l2: Count | None = None
    limiter: str | None = None
    device: str | None = None
    config_source: ConfigSource | None = None
    dtype: InputType | None = None


def load_rows(path: Path) -> list[dict[str, Any]]:
    """Rows a ``--json`` run saved; MatvizError when the file is not one."""

    def fits(r: object) -> bool:
        try:
            LadderRow.model_validate(r)
        except ValidationError:
            return False
        return True

    return read_rows(path, MAX_ROWS_BYTES, fits, "matviz bench --json")

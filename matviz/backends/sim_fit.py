"""Check the simulator against real H200 recordings and fit its constants to them.

``python -m matviz.backends.sim_fit`` loads every bundled recording (``matviz.paths.TRACE_DIR``),
simulates the same configuration and prints, per recording, the recorded and simulated kernel
time, the error, the wave count and how well the blocks-per-SM histograms match.
It also prints the first wave's first retirement (the median over SMs of when each SM's first
block ended: a block's alone duration), which ``load_latency_ns`` and ``k_step_latency_cycles``
are set from. ``--fit`` then adjusts a few model constants (log-space Levenberg-Marquardt on the
log time ratios, finite-difference Jacobian), prints the fit and writes it into the device JSON:
the constants and a ``fit`` entry (the recordings and other cases, the rms and per-case errors,
the date) that every simulated trace's manifest carries (``--dry-run``: only print).
``--seed-figures`` uses the measured 4096^3 H200 rates the lessons quote instead of recordings;
``--with-seed-figures`` fits to both. ``--with-ladder`` adds the bundled ladder (``matviz bench``
rows: every kernel at its fastest configuration, 4096^3, with the registers ptxas gave it).
``--validate FILE`` simulates every row of a ``python -m matviz.bench.kernels --json`` file (each
configuration of each kernel, measured on a GPU) and writes, per kernel, how close the model
came into the device JSON's ``validation`` entry, which every simulated trace carries and its
info box states (``--dry-run``: only print). Only rows that timed the code the kernel compiles
today are compared (a row's ``code``: :mod:`matviz.toolchain.code_digest`); the others are
counted apart.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from matviz.backends.contract import RunRequest
from matviz.backends.devices import DEFAULT_DEVICE, device_path, load_device
from matviz.backends.simulator import simulate
from matviz.core import metrics
from matviz.core.json_input import read_json_file
from matviz.core.registry import get_kernel
from matviz.core.trace import Trace
from matviz.errors import MatvizError
from matviz.paths import TRACE_DIR
from matviz.toolchain.code_digest import level0_digest

RECORDINGS_DIR = TRACE_DIR
# The SM time a block uses (the per-SM retirement rate, hence the kernel time) depends on these.
FIT_NAMES = (
    "lds128_site_cost",
    "tile_overhead_cycles",
    "store_cycles_per_wavefront",
    "naive_reuse",
)
# For the seed figures latency, bandwidth and the inner loop's 1/8 stay at first principles.
SEED_FIT_NAMES = (
    "overlap_sharpness",
    "tile_overhead_cycles",
    "lds128_site_cost",
    "store_cycles_per_wavefront",
    "naive_reuse",
)
FIT_SEED = 0


@dataclass
class Case:
    """One configuration with a measured kernel time to compare against."""

    label: str
    kernel: str
    params: dict[str, Any]
    shape: tuple[int, int, int]
    time_ms: float
    registers: int | None = None
    trace: Trace | None = field(default=None, repr=False)
    code: str | None = None  # the level-0 digest of the code timed (matviz.toolchain.code_digest)


def _seed_case(label: str, kernel: str, params: dict, tflops: float) -> Case:
    n = 4096
    return Case(label, kernel, params, (n, n, n), 2.0 * n**3 / (tflops * 1e9))


# Measured on the H200 at 4096^3 (TFLOP/s). Tiled T=32 PAD 1 was ~21% slower than PAD 0 (no
# LDS.128); the transposed kernel at PAD 1 equals the tiled one at PAD 1 in the model (same
# costs) and PAD 1 made it ~39% faster than PAD 0.
SEED_FIGURES = (
    _seed_case("naive T16", "naive", {"tile": 16}, 5.3),
    _seed_case("tiled T16 P0", "tiled", {"tile": 16, "pad": 0}, 8.1),
    _seed_case("tiled T32 P0", "tiled", {"tile": 32, "pad": 0}, 8.8),
    _seed_case("tiled T32 P1", "tiled", {"tile": 32, "pad": 1}, 8.8 / 1.21),
    _seed_case("transposed T32 P0", "tiled_transposed", {"tile": 32, "pad": 0}, 8.8 / 1.21 / 1.39),
)


def ladder_cases(path: Path | None = None) -> list[Case]:
    """A case per row of a ``matviz bench --json`` file (default: the bundled H200 ladder)."""
    from matviz.bench.ladder import LADDER_H200, load_rows

    path = LADDER_H200 if path is None else Path(path)
    cases = []
    for row in load_rows(path):
        try:
            n, ms = int(row["size"]), float(row["ms"])
            label = f"ladder {row['kernel']} {row['config']}"
            cases.append(Case(label, row["kernel"], dict(row["params"]), (n, n, n), ms,
                              int(row["registers"])))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            raise MatvizError(f"the ladder {path} has a malformed row") from None
    return cases


MAX_BENCHMARK_BYTES = 64 * 2**20  # the H200 file of 157 configurations is 120 KB


def benchmark_rows(path: Path) -> list:
    """The rows of a ``python -m matviz.bench.kernels --json`` file, read once."""
    path = Path(path)
    try:
        rows = read_json_file(path, MAX_BENCHMARK_BYTES, f"the benchmark {path}")
    except MatvizError as exc:  # a FIFO, a folder, no file, too large, not JSON
        raise MatvizError(f"{exc} (a JSON file of at most 64 MB is needed)") from None
    if not isinstance(rows, list):
        raise MatvizError(f"the benchmark {path} is not a list of rows")
    return rows


def configuration_cases(path: Path, rows: list | None = None) -> list[Case]:
    """A case per row of a ``python -m matviz.bench.kernels --json`` file (``rows``: that
    file's rows as already read)."""
    if rows is None:
        rows = benchmark_rows(path)
    try:
        cases = []
        for row in rows:
            n, ms = int(row["size"]), float(row["ms"])
            label = f"{row['kernel']} {row['label']}"
            code = row.get("code")
            if code is not None and not isinstance(code, str):
                raise TypeError("code")
            case = Case(label, str(row["kernel"]), dict(row["params"]), (n, n, n), ms, code=code)
            cases.append(case)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise MatvizError(f"the benchmark {path} has a malformed row") from None
    if not cases:
        raise MatvizError(f"the benchmark {path} has no rows")
    bad = next((c for c in cases if c.time_ms <= 0 or not math.isfinite(c.time_ms)), None)
    if bad is not None:  # an infinite time (1e999 reads as inf) is not positive either
        raise MatvizError(f"the benchmark {path} has a time of {bad.time_ms} ms ({bad.label}): "
                          "a positive, finite number is needed")  # fmt: skip
    return cases


# what the model's time may differ from the measured one by and still count as close
VALIDATION_TOLERANCE = 0.25


def timed_todays_code(case: Case) -> bool:
    """Whether ``case`` timed the code its kernel compiles today at level 0 (a row without a
    digest is taken as an earlier version)."""
    config = get_kernel(case.kernel).configure(case.params, *case.shape)
    return case.code is not None and case.code == level0_digest(config)


def validation(cases: list[Case], device: dict, source: str, date: str | None = None) -> dict:
    """Per kernel, how the simulated rate of each case compares with the measured one:
    {kernel: {configurations, within (time within VALIDATION_TOLERANCE), ratio_min,
    ratio_median, ratio_max (simulated ÷ measured rate), earlier_code}}, with the source, size
    and date. Only cases that timed today's code are compared; ``earlier_code`` counts the others
    (a kernel whose every case timed an earlier version has no ratios)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # one nvcc run a case
        todays = list(pool.map(timed_todays_code, cases))
    current = [case for case, today in zip(cases, todays, strict=True) if today]
    errors: dict[str, list[float]] = {case.kernel: [] for case in cases}  # time errors (%)
    for case, row in zip(current, compare(current, device), strict=True):
        errors[case.kernel].append(row["error_pct"])
    timed = Counter(case.kernel for case in cases)
    earlier = {name: timed[name] - len(pct) for name, pct in errors.items()}
    kernels: dict[str, dict] = {}
    for name, pct in errors.items():
        if not pct:
            kernels[name] = {"configurations": 0, "within": 0, "earlier_code": earlier[name]}
            continue
        ratios = [100.0 / (100.0 + e) for e in pct]  # simulated ÷ measured rate
        kernels[name] = {
            "configurations": len(pct),
            "within": sum(1 for e in pct if abs(e) <= 100 * VALIDATION_TOLERANCE),
            "ratio_min": round(min(ratios), 3),
            "ratio_median": round(float(np.median(ratios)), 3),
            "ratio_max": round(max(ratios), 3),
            "earlier_code": earlier[name],
        }
    sizes = sorted({c.shape[0] for c in cases})
    return {
        "source": source,
        "size": sizes[0] if len(sizes) == 1 else None,
        "tolerance": VALIDATION_TOLERANCE,
        "date": date or datetime.date.today().isoformat(),
        "kernels": kernels,
    }


def print_validation(entry: dict, out=None) -> None:
    out = out or sys.stdout
    print(f"validation against {entry['source']} (time within {entry['tolerance']:.0%}):", file=out)
    for name, k in entry["kernels"].items():
        earlier = f"; {k['earlier_code']} timed earlier code" if k.get("earlier_code") else ""
        if not k["configurations"]:
            print(f"  {name:20} none of today's code{earlier}", file=out)
            continue
        print(
            f"  {name:20} {k['within']:>3} of {k['configurations']:<3} simulated/measured rate "
            f"{k['ratio_min']:.2f}-{k['ratio_max']:.2f}x (median {k['ratio_median']:.2f}x)"
            f"{earlier}",
            file=out,
        )


def recording_cases(folder: Path = RECORDINGS_DIR) -> list[Case]:
    """A case per ``.mvz`` recording (CUDA backend only) in ``folder``."""
    from matviz.core.trace_io import load_trace

    cases = []
    for path in sorted(Path(folder).glob("*.mvz")):
        trace = load_trace(path)
        ms = trace.manifest["stats"].get("time_ms_median")
        if trace.is_simulated or not ms:
            continue
        occ = trace.manifest.get("occupancy") or {}
        cases.append(
            Case(
                path.stem,
                trace.kernel,
                dict(trace.params),
                trace.shape,
                float(ms),
                occ.get("registers"),
                trace,
            )
        )
    return cases


def simulate_case(case: Case, device: dict) -> Trace:
    request = RunRequest(case.kernel, *case.shape, params=case.params, level=0, seed=FIT_SEED)
    return simulate(request, device=device, registers=case.registers)


def first_retirement_us(trace: Trace) -> float:
    """Median over SMs of when the SM's first block ended (us): a block's alone duration."""
    blocks = trace.blocks
    order = np.lexsort((blocks["end"], blocks["smid"]))
    smid = blocks["smid"][order]
    first = np.r_[True, smid[1:] != smid[:-1]]
    return float(np.median(blocks["end"][order][first] - blocks["start"].min()) / 1e3)


def histogram_match(a: Trace, b: Trace) -> float:
    """Overlap (0..1) of the distributions of blocks run per SM."""
    ha = np.bincount(metrics.blocks_per_sm_histogram(a))
    hb = np.bincount(metrics.blocks_per_sm_histogram(b))
    n = max(len(ha), len(hb))
    pa, pb = (np.pad(h, (0, n - len(h))) / h.sum() for h in (ha, hb))
    return float(np.minimum(pa, pb).sum())


def compare(cases: list[Case], device: dict) -> list[dict[str, Any]]:
    rows = []
    for case in cases:
        sim = simulate_case(case, device)
        sim_ms = sim.manifest["stats"]["time_ms_median"]
        row = {
            "label": case.label,
            "recorded_ms": case.time_ms,
            "sim_ms": sim_ms,
            "error_pct": 100.0 * (sim_ms / case.time_ms - 1.0),
            "sim_waves": metrics.waves(sim),
            "rec_waves": None,
            "hist_match": None,
            "rec_first_us": None,
            "sim_first_us": first_retirement_us(sim),
            "sim_tflops": sim.manifest["stats"]["gflops"] / 1e3,
            "rec_tflops": 2.0 * math.prod(case.shape) / (case.time_ms * 1e9),
        }
        if case.trace is not None and case.trace.manifest.get("level", 0) >= 1:
            row.update(
                rec_waves=metrics.waves(case.trace),
                hist_match=histogram_match(case.trace, sim),
                rec_first_us=first_retirement_us(case.trace),
            )
        rows.append(row)
    return rows


def print_rows(rows: list[dict[str, Any]], out=None) -> None:
    out = out or sys.stdout  # at call time: a default bound at import would outlive a redirect
    print(
        f"{'recording':28s} {'rec ms':>9s} {'sim ms':>9s} {'err %':>7s} {'rec TF':>7s} "
        f"{'sim TF':>7s} {'waves':>9s} {'hist':>5s} {'1st us rec/sim':>15s}",
        file=out,
    )
    for r in rows:
        waves = f"{r['rec_waves'] if r['rec_waves'] is not None else '-'}/{r['sim_waves']}"
        hist = "-" if r["hist_match"] is None else f"{100 * r['hist_match']:.0f}%"
        first = r["rec_first_us"]
        first = f"{'-' if first is None else f'{first:.1f}'}/{r['sim_first_us']:.1f}"
        print(
            f"{r['label']:28s} {r['recorded_ms']:9.3f} {r['sim_ms']:9.3f} "
            f"{r['error_pct']:+7.1f} {r['rec_tflops']:7.2f} {r['sim_tflops']:7.2f} "
            f"{waves:>9s} {hist:>5s} {first:>15s}",
            file=out,
        )
    if rows:
        rms = math.sqrt(np.mean([r["error_pct"] ** 2 for r in rows]))
        print(f"rms error {rms:.1f}% over {len(rows)} configurations", file=out)


def _residuals(cases: list[Case], device: dict) -> np.ndarray:
    return np.array(
        [
            math.log(simulate_case(c, device).manifest["stats"]["time_ms_median"] / c.time_ms)
            for c in cases
        ]
    )


def _with(device: dict, names, log_values) -> dict:
    new = json.loads(json.dumps(device))
    for name, value in zip(names, log_values, strict=True):
        new["model"][name] = float(f"{math.exp(value):.4g}")  # readable in the JSON
    return new


def fit(
    cases: list[Case],
    device: dict,
    names=FIT_NAMES,
    iterations: int = 25,
    source: str = "",
    date: str | None = None,
) -> dict:
    """Device with ``names`` fitted to the cases' times (least squares on log time ratios).

    Constants the cases do not depend on (say ``naive_reuse`` without a naive recording) keep
    their values.
    """
    if not cases:
        raise MatvizError("no recorded configurations to fit to")
    names = tuple(names)
    unknown = [n for n in names if n not in device["model"]]
    if unknown:
        raise MatvizError(f"unknown model constant {unknown[0]!r}")
    x = np.log([max(device["model"][n], 1e-12) for n in names])
    res = _residuals(cases, device)
    damping, step = 1e-2, 0.05
    for _ in range(iterations):
        jac = np.column_stack(
            [
                (_residuals(cases, _with(device, names, x + step * np.eye(len(x))[i])) - res) / step
                for i in range(len(x))
            ]
        )
        jac[:, np.all(np.abs(jac) < 1e-9, axis=0)] = 0.0
        lhs = jac.T @ jac + damping * np.diag(np.diag(jac.T @ jac) + 1e-9)
        delta = np.clip(np.linalg.solve(lhs, -jac.T @ res), -1.0, 1.0)
        trial = _residuals(cases, _with(device, names, x + delta))
        if trial @ trial < res @ res:
            x, res, damping = x + delta, trial, damping / 3
            if np.abs(delta).max() < 1e-3:
                break
        else:
            damping *= 5
    previous = device["model"].get("fit")
    fitted = _with(device, names, x)
    errors = {
        c.label: round(100.0 * math.expm1(r), 2) + 0.0 for c, r in zip(cases, res, strict=True)
    }
    entry: dict[str, Any] = {
        "source": source,
        "date": date or datetime.date.today().isoformat(),
        "names": list(names),
        "recordings": [c.label for c in cases if c.trace is not None],
        "cases": [c.label for c in cases],
        "target": "kernel time (stats.time_ms_median)",
        "rms_log_error": round(float(np.sqrt(np.mean(res**2))), 5),
        "rms_error_pct": round(float(np.sqrt(np.mean(np.square(list(errors.values()))))), 2),
        "errors_pct": errors,
    }
    if isinstance(previous, dict) and set(previous.get("names", ())) - set(names):
        # the other constants keep the values an earlier fit gave them: say which and when
        earlier = previous.get("earlier", [])
        before = {k: previous.get(k) for k in ("date", "source", "names", "rms_error_pct")}
        entry["earlier"] = [*earlier, before]
    fitted["model"]["fit"] = entry
    fitted["model"].pop("validation", None)  # it checked the constants before: run it again
    return fitted


def print_fit(entry: dict, out=None) -> None:
    """The fit entry as the README quotes it."""
    out = out or sys.stdout
    print(f"fit of {', '.join(entry['names'])} ({entry['date']}, {entry['source']}):", file=out)
    for label, err in entry["errors_pct"].items():
        print(f"  {label:28s} {err:+6.2f}%", file=out)
    print(f"  rms error {entry['rms_error_pct']:.2f}% over {len(entry['cases'])} cases", file=out)


def write_device(device: dict, path: Path) -> None:
    path.write_text(json.dumps(device, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.backends.sim_fit", description=__doc__)
    parser.add_argument("--device", default=DEFAULT_DEVICE, help="bundled name or JSON path")
    parser.add_argument("--recordings", type=Path, default=RECORDINGS_DIR)
    parser.add_argument(
        "--seed-figures",
        action="store_true",
        help="compare with the measured 4096^3 rates instead of recordings",
    )
    parser.add_argument(
        "--with-seed-figures",
        action="store_true",
        help="fit to the recordings and the measured 4096^3 rates together",
    )
    parser.add_argument(
        "--with-ladder",
        action="store_true",
        help="add the bundled ladder: every kernel at its fastest configuration, 4096^3",
    )
    parser.add_argument("--fit", action="store_true", help="fit constants and write the JSON")
    parser.add_argument("--names", nargs="+", help="constants to fit")
    parser.add_argument("--date", help="date of the fit (default: today)")
    parser.add_argument("--dry-run", action="store_true", help="fit but do not write")
    parser.add_argument(
        "--validate",
        type=Path,
        metavar="FILE",
        help="simulate every row of a matviz.bench.kernels JSON file and store how close it came",
    )
    args = parser.parse_args(argv)
    try:
        device = load_device(args.device)
        if args.validate is not None:
            return _validate(args, device)
        cases = list(SEED_FIGURES) if args.seed_figures else recording_cases(args.recordings)
        if args.with_seed_figures and not args.seed_figures:
            cases += SEED_FIGURES
        if args.with_ladder:
            cases += ladder_cases()
        if not cases:
            print(f"no recordings in {args.recordings}; try --seed-figures")
            return 1
        print(f"device {device['name']} ({args.device}); {len(cases)} configurations")
        print_rows(compare(cases, device))
        if args.fit:
            names = tuple(args.names or (SEED_FIT_NAMES if args.seed_figures else FIT_NAMES))
            source = "seed figures (4096^3 H200)" if args.seed_figures else "recordings"
            if args.with_seed_figures and not args.seed_figures:
                source = "recordings + seed figures (4096^3 H200)"
            if args.with_ladder:
                source += " + ladder (4096^3 H200)"
            fitted = fit(cases, device, names, source=source, date=args.date)
            print("\nfitted: " + ", ".join(f"{n}={fitted['model'][n]:.4g}" for n in names))
            print_rows(compare(cases, fitted))
            print_fit(fitted["model"]["fit"])
            if not args.dry_run:
                write_device(fitted, device_path(args.device))
                print(f"wrote {device_path(args.device)}")
    except MatvizError as exc:
        print(f"matviz: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _validate(args, device: dict) -> int:
    entry = validation(configuration_cases(args.validate), device, args.validate.name, args.date)
    print_validation(entry)
    if not args.dry_run:
        device["model"]["validation"] = entry
        write_device(device, device_path(args.device))
        print(f"wrote {device_path(args.device)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Kernel benchmark on the GPU: GFLOP/s, % of cuBLAS, instrumentation overhead, timer span.

    python -m matviz.bench.kernels [--size 4096] [--json out.json] [--kernels tiled,naive]
                                   [--from earlier.json [--stale]] [--update rows.json]

Every configuration of every registered kernel (each parameter at each allowed value), or those
an earlier benchmark file holds (--from), or of those only the ones whose row timed an earlier
version of the kernel's code (--stale): what a refresh of the bundled rows needs to time again.
--update F does that refresh in F itself: each stale row of this GPU and size is timed again and
put in its place at once, so a run cut short keeps what it timed and the next run goes on from
there.

Every figure in a row comes from one process: level-0 and level-N builds are timed interleaved
with CUDA events (median of --repeats after warm-up), and cuBLAS on the same inputs.
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from matviz.backends.contract import (
    DEFAULT_OVERHEAD_TARGET_PCT,
    DEFAULT_STAMP_FORM,
    STAMP_FORM_CHOICES,
    RunRequest,
)
from matviz.backends.cupy_recorder import Recorder
from matviz.backends.sim_fit import benchmark_rows, configuration_cases, timed_todays_code
from matviz.bench import run_script
from matviz.core.registry import get_kernel, kernels
from matviz.core.sampling import OVERHEAD_TARGET_PCT
from matviz.errors import MatvizError
from matviz.export.atomic import AtomicOutput, check_writable
from matviz.toolchain.code_digest import level0_digest

# (tag, level, overhead target): level 1; level 2 stamping the blocks the trace budget holds
# (all at most sizes); level 2 as `matviz record` keeps it, stamping fewer blocks until within
# the default target
RUNS = (("l1", 1, None), ("l2", 2, None), ("l2kept", 2, DEFAULT_OVERHEAD_TARGET_PCT))


def configurations(names: list[str] | None = None) -> list[tuple[str, dict]]:
    chosen = [get_kernel(n) for n in names] if names else list(kernels().values())
    return [(k.name, params) for k in chosen for params in k.configurations()]


def configurations_from(
    path: str, names: list[str] | None = None, stale: bool = False
) -> list[tuple[str, dict]]:
    """The configurations an earlier ``--json`` file timed, in its order, once each (of the
    kernels ``names``); ``stale``: only those whose row timed an earlier version of the code
    (or carries no digest)."""
    wanted = {get_kernel(n).name for n in names} if names else None
    chosen: list[tuple[str, dict]] = []
    for case in configuration_cases(path):
        kernel = get_kernel(case.kernel).name
        if wanted is not None and kernel not in wanted:
            continue
        if (kernel, case.params) in chosen:
            continue
        if stale and timed_todays_code(case):
            continue
        chosen.append((kernel, case.params))
    return chosen


def misses_target(row: dict) -> bool:
    """Whether ``row``'s overheads miss a target: level 1 above 1%, level 2 as recorded (or,
    in a row from before the recorder kept fewer stamping blocks, with every block stamping)
    above 3%. The digest covers level 0's code only, so such a row may have timed earlier
    instrumentation."""
    l2 = row.get("overhead_l2kept_pct", row.get("overhead_l2_pct"))
    return any(
        isinstance(v, (int, float)) and v > target
        for v, target in (
            (row.get("overhead_l1_pct"), OVERHEAD_TARGET_PCT[1]),
            (l2, OVERHEAD_TARGET_PCT[2]),
        )
    )


def update_plan(
    path: str, device: str, size: int, names: list[str] | None = None, over_target: bool = False
):
    """The rows of ``path`` (as read) and the (index, kernel, params) of each row to time again
    for ``--update``: rows of ``device`` at ``size`` (of the kernels ``names``) that timed an
    earlier version of the code or carry no digest (``over_target``: or miss an overhead
    target), each configuration once. A row that names no GPU (written before rows did) is
    taken to be of the one GPU the file's other rows name."""
    rows = benchmark_rows(path)
    cases = configuration_cases(path, rows)  # every row checked, one case a row
    named = {row["device"] for row in rows if "device" in row}
    files_gpu = named.pop() if len(named) == 1 else None
    wanted = {get_kernel(n).name for n in names} if names else None
    mine = [
        (i, get_kernel(case.kernel).name, case)
        for i, (row, case) in enumerate(zip(rows, cases, strict=True))
        if row.get("device", files_gpu) == device
        and case.shape == (size, size, size)
        and (wanted is None or get_kernel(case.kernel).name in wanted)
    ]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # one nvcc run a row
        todays = list(pool.map(timed_todays_code, [case for _, _, case in mine]))
    plan: list[tuple[int, str, dict]] = []
    for (i, kernel, case), today in zip(mine, todays, strict=True):
        again = not today or (over_target and misses_target(rows[i]))
        if again and not any(p[1:] == (kernel, case.params) for p in plan):
            plan.append((i, kernel, case.params))
    if not plan:
        what = "timed earlier code" + (" or misses an overhead target" if over_target else "")
        raise MatvizError(f"{path} has no row of {device} at {size}³ that {what}")
    return rows, plan


def _update(
    path: str, names: list[str] | None, size: int, repeats: int, stamp_form: str, over: bool
) -> None:
    from matviz.backends.cuda_status import cuda_status

    check_writable(path)
    ok, device = cuda_status()
    if not ok:
        raise MatvizError(f"--update times on a GPU ({device})")
    rows, plan = update_plan(path, device, size, names, over)
    print(f"{len(plan)} of {len(rows)} rows of {path} to time again on {device}", flush=True)
    for n, (i, kernel, params) in enumerate(plan, 1):
        row = measure(kernel, params, size, repeats, stamp_form)
        if row["device"] != device:  # the recorder ran on another GPU than cuda_status saw
            raise MatvizError(f"{kernel} {params} ran on {row['device']}, not {device}")
        rows[i] = row
        _write_rows(path, rows)  # each row in place at once: a cut-short run keeps it
        print(f"{n}/{len(plan)} {kernel} {row['label']}: {row['gflops']:.0f} GFLOP/s, "
              f"level 1 {row['overhead_l1_pct']:+.2f}%, level 2 kept "
              f"{row['overhead_l2kept_pct']:+.2f}%", flush=True)  # fmt: skip


def _write_rows(path: str, rows: list[dict]) -> None:
    """The rows, whole or not at all, in one layout for --json and --update alike."""
    with AtomicOutput(path) as tmp:
        tmp.write_text(json.dumps(rows, indent=1) + "\n")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


def measure(
    kernel: str, params: dict, size: int, repeats: int, stamp_form: str = DEFAULT_STAMP_FORM
) -> dict:
    row: dict = {"kernel": kernel, "params": params, "label": get_kernel(kernel).labels(params)}
    row["size"] = size
    # which code the row timed: the simulator's check counts only rows of today's code
    row["code"] = level0_digest(get_kernel(kernel).configure(params, size, size, size))
    for tag, level, target in RUNS:
        req = RunRequest(kernel, size, size, size, params, backend="cuda", level=level,
                         repeats=repeats, stamp_form=stamp_form,
                         overhead_target_pct=target)  # fmt: skip
        manifest = Recorder(req).run().manifest
        stats = manifest["stats"]
        row["dtype"], row["device"] = manifest["dtype"], manifest["device"]["name"]
        row[f"overhead_{tag}_pct"] = stats["overhead_pct"]
        row[f"span_vs_event_{tag}"] = stats["span_vs_event"]
        row[f"gflops_{tag}run"] = stats["gflops"]
        if stats.get("stamp_form"):  # the form of the marks kept, and each form's overhead
            row[f"stamp_form_{tag}"] = stats["stamp_form"]
            row[f"stamp_form_overheads_{tag}_pct"] = stats.get("stamp_form_overheads_pct")
        if level == 2 and manifest["geometry"]["n_tiles"]:  # 1 block in how many stamped k-steps
            row[f"phase_every_{tag}"] = manifest["sampling"]["phase_every"]
        if target is not None:  # each stride timed on the way to the one kept
            row[f"phase_every_overheads_{tag}_pct"] = stats.get("phase_every_overheads_pct")
        if level == 1:
            row.update(
                gflops=stats["gflops"],
                cublas_gflops=stats["cublas_gflops"],
                pct_cublas=stats["pct_cublas"],
                rel_error=stats["rel_error"],
                ms=stats["time_ms_median"],
            )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument(
        "--json",
        help="save the rows: a new file row by row as they are timed, a file that is there only "
        "when the whole run is done (a run cut short leaves it as it was)",
    )
    parser.add_argument("--kernels", help="comma list (default: every registered kernel)")
    parser.add_argument(
        "--from",
        dest="earlier",
        metavar="FILE",
        help="time the configurations an earlier --json file holds instead of every one",
    )
    parser.add_argument(
        "--stale",
        action="store_true",
        help="with --from: only those whose row timed an earlier version of the kernel's code",
    )
    parser.add_argument(
        "--update",
        metavar="FILE",
        help="time again the rows of FILE from this GPU and size whose code changed, each put "
        "back into FILE as soon as it is timed",
    )
    parser.add_argument(
        "--over-target",
        action="store_true",
        help="with --update: also the rows whose level-1 overhead is above 1%% or level-2 above "
        "3%% (their code may be today's and their instrumentation not)",
    )
    parser.add_argument(
        "--stamp-form",
        default=DEFAULT_STAMP_FORM,
        choices=STAMP_FORM_CHOICES,
        help="how level 2 keeps its marks (matviz record --stamp-form)",
    )
    args = parser.parse_args()
    names = args.kernels.split(",") if args.kernels else None
    for option, value in (("--size", args.size), ("--repeats", args.repeats)):
        if value < 1:  # before any configuration is built, not at the first
            parser.error(f"{option} {value} must be >= 1")
    if args.stale and not args.earlier:
        parser.error("--stale needs --from")
    if args.over_target and not args.update:
        parser.error("--over-target needs --update")
    if args.update and (args.earlier or args.json):
        parser.error("--update reads and writes its own file: not with --from or --json")
    if args.update:
        work = partial(_update, args.update, names, args.size, args.repeats, args.stamp_form,
                       args.over_target)  # fmt: skip
    else:
        work = partial(_benchmark, args, names)
    # no GPU, a bad file, a failed build, a full disk: one line and 2; Ctrl-C: one line and 130.
    # Whatever was written went through AtomicOutput, so the file is whole either way.
    return run_script("matviz bench", work)


def _benchmark(args: argparse.Namespace, names: list[str] | None) -> None:
    if args.json:  # before minutes on the GPU, not after
        check_writable(args.json)
        if args.earlier and _same_file(args.json, args.earlier):
            raise MatvizError(f"--json {args.json} would replace the --from file it reads")
    if args.earlier:
        chosen = configurations_from(args.earlier, names, args.stale)
    else:
        chosen = configurations(names)
    # A new file gets every row as it is timed, so a run cut short still leaves its figures;
    # a file that was there is replaced only by the whole run, so a run cut short keeps it.
    every_row = bool(args.json) and not os.path.lexists(args.json)
    print(f"{len(chosen)} configurations", flush=True)
    rows: list[dict] = []
    for kernel, params in chosen:
        try:
            rows.append(measure(kernel, params, args.size, args.repeats, args.stamp_form))
        except MatvizError as exc:  # which configuration failed, in the one line
            kept = f"; {args.json} is as it was" if args.json and not every_row else ""
            raise MatvizError(f"{kernel} {params}: {exc}{kept}") from None
        if every_row:
            _write_rows(args.json, rows)
    if args.json and not every_row:
        _write_rows(args.json, rows)
    print(
        f"{'kernel':<18}{'params':<8}{'ms':>9}{'GFLOP/s':>10}{'cuBLAS':>10}{'%cuBLAS':>9}"
        f"{'L1 ovh%':>9}{'L2 ovh%':>9}{'kept ovh%':>10}{'1 in':>5}{'span/evt':>10}{'rel.err':>10}"
    )
    for r in rows:
        print(
            f"{r['kernel']:<18}{r['label']:<8}{r['ms']:>9.3f}"
            f"{r['gflops']:>10.0f}{r['cublas_gflops']:>10.0f}{r['pct_cublas']:>9.1f}"
            f"{r['overhead_l1_pct']:>9.2f}{r['overhead_l2_pct']:>9.2f}"
            f"{r['overhead_l2kept_pct']:>10.2f}{r.get('phase_every_l2kept', '-'):>5}"
            f"{r['span_vs_event_l1']:>10.4f}{r['rel_error']:>10.1e}"
        )


if __name__ == "__main__":
    raise SystemExit(main())

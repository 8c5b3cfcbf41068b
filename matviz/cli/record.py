"""``matviz record``: run (or simulate) one kernel configuration and save its trace."""

from __future__ import annotations

import argparse
from pathlib import Path

import matviz.cli.common as common
import matviz.cli.params as params
from matviz.backends.contract import (
    DEFAULT_OVERHEAD_TARGET_PCT,
    DEFAULT_STAMP_FORM,
    MAX_BUDGET_MIB,
    STAMP_FORM_CHOICES,
    RunRequest,
)
from matviz.backends.devices import tuned_key
from matviz.core import registry
from matviz.core.kernel import LEVELS
from matviz.errors import MatvizError

NAME = "record"
# save_trace writes ".{name}.{12 hex}.tmp" next to the file it is given: 18 bytes more
SAVE_TRACE_EXTRA = 24
DEFAULT_BUDGET_MIB = 256
DEFAULT_LEVEL = 3  # the app's default (matviz.app.controls)


def add_parser(sub) -> None:
    rec = sub.add_parser(NAME, help="run a kernel and save its trace (.mvz)")
    rec.add_argument("kernel", help="name, file stem or number, e.g. 2 or 02_tiled")
    common.add_size_options(rec)
    # Level 3, as in the app: the timeline stays level 2 (a separate run adds the barrier waits
    # and the shared-memory probe), so a recording fills every view and its exports show banks.
    rec.add_argument(
        "--level",
        type=int,
        default=DEFAULT_LEVEL,
        choices=LEVELS,
        help=common.level_help(DEFAULT_LEVEL),
    )
    rec.add_argument("--backend", default="auto", choices=common.BACKEND_CHOICES)
    rec.add_argument("--repeats", type=common.positive_int, default=20, help="timed runs (median)")
    rec.add_argument(
        "--budget-mib",
        type=common.int_between(1, MAX_BUDGET_MIB),
        default=DEFAULT_BUDGET_MIB,
        help=f"memory for per-step phases before blocks are sampled (MiB, at most "
        f"{MAX_BUDGET_MIB}; default {DEFAULT_BUDGET_MIB})",
    )
    rec.add_argument(
        "--phase-every",
        type=common.positive_int,
        default=1,
        help="only every n-th block records per-step phases (less overhead); default all",
    )
    rec.add_argument(
        "--max-overhead",
        type=overhead_target,
        default=DEFAULT_OVERHEAD_TARGET_PCT,
        metavar="PCT|off",
        help=f"level 2 on a GPU: stamp the k-steps of every 2nd, 4th ... block until the build "
        f"runs within PCT%% of level 0 (default {DEFAULT_OVERHEAD_TARGET_PCT:g}); off: the "
        f"blocks --phase-every and the budget give",
    )
    rec.add_argument(
        "--stamp-form",
        default=DEFAULT_STAMP_FORM,
        choices=STAMP_FORM_CHOICES,
        help=f"how the level-2 build keeps its marks: lanes, store or held, that form alone, or "
        f"auto: each built, the one closer to level 0 kept (default {DEFAULT_STAMP_FORM})",
    )
    rec.add_argument("--probe-block", type=common.pair, default=(0, 0), metavar="BX,BY")
    rec.add_argument("--probe-warp", type=int, default=0)
    rec.add_argument("--probe-ktile", type=int, default=0)
    rec.add_argument("--seed", type=int, default=0, help="simulator jitter seed")
    rec.add_argument("-o", "--output", required=True, type=Path, help="FILE.mvz")
    params.add_options(rec, lists=False)  # last: a clash with the options above is caught


def overhead_target(text: str) -> float | None:
    """--max-overhead: a percentage in (0, 100], or off."""
    if text.strip().lower() == "off":
        return None
    value = common.positive_float(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"{common.one_line(text)} must be at most 100")
    return value


def request_of(args) -> RunRequest:
    """The request the arguments ask for, checked (it can launch) before anything runs."""
    kernel = registry.get_kernel(args.kernel)
    request = RunRequest(
        kernel=kernel.name,
        M=args.M,
        N=args.N,
        K=args.K,
        params=params.given(args, kernel),
        level=args.level,
        budget_bytes=args.budget_mib * 2**20,
        phase_every=args.phase_every,
        probe_block=args.probe_block,
        probe_warp=args.probe_warp,
        probe_ktile=args.probe_ktile,
        seed=args.seed,
        repeats=args.repeats,
        stamp_form=args.stamp_form,
        overhead_target_pct=args.max_overhead,
    )
    request.check_probe(request.config())
    return request


def _with_tuned(request: RunRequest, args, backend: str) -> RunRequest:
    """Start from the configuration `matviz sweep --tune` kept for this GPU and size, under the
    parameters the user gave."""
    from dataclasses import replace

    from matviz.core import tuned

    key = tuned_key(backend)
    try:
        best = tuned.best(request.kernel, request.M, request.N, request.K, key)
    except MatvizError as exc:  # a broken tuned file must not stop a recording
        common.note(f"{exc}; using the description's defaults")
        return request
    if best is None:
        return request
    given = params.given(args, registry.get_kernel(request.kernel))
    labels = registry.get_kernel(request.kernel).labels(best)
    common.note(f"starting from the configuration tuned for {key} at this size: {labels}")
    request = replace(request, params={**best, **given})
    request.check_probe(request.config())
    return request


def run(args) -> int:
    from matviz.backends import contract
    from matviz.core.summary import summary_lines
    from matviz.core.trace_io import save_trace
    from matviz.export.atomic import AtomicOutput

    common.check_output(args.output, ".mvz")  # first: a bad path must cost no simulation
    request = request_of(args)
    backend, why = common.choose_backend(args.backend)
    common.note(why)
    request = _with_tuned(request, args, backend)
    trace = contract.run(request.with_backend(backend))
    # Through a short temporary name, so any name the folder takes works (save_trace's own
    # temporary is longer than the name it is given).
    with AtomicOutput(args.output, reserve=SAVE_TRACE_EXTRA) as tmp:
        try:
            save_trace(trace, tmp)
        except MatvizError as exc:
            raise MatvizError(str(exc).replace(str(tmp), str(args.output))) from None
    print("\n".join(summary_lines(trace)))
    print(f"saved      {args.output}")
    return 0

"""The text summary printed by ``matviz record`` and ``matviz show``."""

from __future__ import annotations

import numpy as np

from matviz.core import metrics
from matviz.core.explain import (
    dram_floor_bytes,
    dram_floor_formula,
    measured_bytes,
    simulation_check,
)
from matviz.core.kernel import LEVEL_NAMES
from matviz.core.trace import Trace

# what each of config.STAMP_FORMS means (a test holds the keys to them)
FORM_NAMES = {
    "lanes": "kept in the stamping warp's lanes",
    "store": "stored as taken",
    "held": "kept in the lanes, a step's middle mark in shared memory",
}


def _fmt(value, spec: str, missing: str = "n/a") -> str:
    return missing if value is None else format(value, spec)


def summary_lines(trace: Trace) -> list[str]:
    m = trace.manifest
    stats = m["stats"]
    M, N, K = trace.shape
    config = trace.config
    params = "  ".join(f"{k}={v}" for k, v in config.params.items())
    level = m["level"]
    lines = [
        f"kernel     {trace.kernel}  {params}  {M}x{N}x{K} {m['dtype']}",
        f"source     {trace.provenance} (backend {trace.backend}, level {level} "
        f"{LEVEL_NAMES.get(level, '?')})",
        f"time       {_fmt(stats.get('time_ms_median'), '.4f')} ms median "
        f"(min {_fmt(stats.get('time_ms_min'), '.4f')}, max {_fmt(stats.get('time_ms_max'), '.4f')}"
        f", {stats.get('repeats', 1)} runs)",
        f"GFLOP/s    {_fmt(stats.get('gflops'), '.1f')}   "
        f"cuBLAS {_fmt(stats.get('cublas_gflops'), '.1f')}   "
        f"= {_fmt(stats.get('pct_cublas'), '.1f')}% of cuBLAS",
        f"rel.error  {_fmt(stats.get('rel_error'), '.2e', 'not computed (simulated)')}",
    ]
    checked = simulation_check(trace)
    if checked is not None and "n" not in checked:
        lines.append(
            f"model      not yet checked against today's code of {trace.kernel}: the "
            f"{checked['earlier']} configurations timed on the GPU at {checked['size']}³ ran an "
            "earlier version of it"
        )
    elif checked is not None:
        lines.append(
            f"model      checked against {checked['n']} configurations of {trace.kernel} timed on "
            f"the GPU at {checked['size']}³: time within {checked['tolerance']}% in "
            f"{checked['within']}; simulated/timed rate {checked['low']}-{checked['high']}x "
            f"(median {checked['median']}x)"
        )
    lines += _correctness_lines(trace)
    cost = metrics.timeline_cost(trace)
    if cost is not None:
        bound = cost.min_blocks
        kept = f" (registers bounded to keep {bound} blocks/SM, as level 0)" if bound else ""
        lines.append(
            f"overhead   level-{cost.level} build {cost.overhead_pct:+.2f}% against level 0{kept}"
        )
        strides = stats.get("phase_every_overheads_pct") or []
        if strides:
            timed = ", ".join(f"1 in {n} {pct:+.2f}%" for n, pct in strides)
            lines.append(f"stamping   1 block in {cost.every} (timed beside level 0: {timed})")
        slow = metrics.stamping_slowdown(trace)
        if slow is not None:
            lines.append(
                f"stamped    the {slow.stamped} blocks that stamped their k-steps ran "
                f"{slow.pct:+.1f}% against the {slow.others} others (median "
                f"{slow.stamped_ns / 1e3:.1f} against {slow.others_ns / 1e3:.1f} µs)"
            )
            lines.append(
                f"           a launch ends with its slowest SM: {slow.most_on_one_sm} of them on "
                f"one SM x {slow.extra_ns / 1e3:.1f} µs = {slow.slowest_sm_pct:.1f}% of the "
                f"{slow.launch_ns / 1e3:.1f} µs launch"
            )
        tried = stats.get("stamp_form_overheads_pct") or {}
        if stats.get("stamp_form"):
            forms = ", ".join(f"{FORM_NAMES[f]} {pct:+.2f}%" for f, pct in sorted(tried.items()))
            chosen = FORM_NAMES[stats["stamp_form"]]
            closer = f" (closer to level 0 of {forms})" if forms else ""
            lines.append(f"marks      {chosen}{closer}")
    diag = stats.get("diagnostics_overhead_pct")
    if diag is not None:
        lines.append(f"diagnosis  level-3 run (probe, barrier waits) {diag:+.1f}% against level 0")
    if stats.get("span_vs_event") is not None:
        lines.append(
            f"span       %globaltimer {stats['span_ns'] / 1e6:.4f} ms vs CUDA event "
            f"{stats['event_ms']:.4f} ms ({100 * stats['span_vs_event']:.1f}%)"
        )
    per_sm = metrics.blocks_per_sm_histogram(trace)
    used = per_sm[per_sm > 0]
    lines.append(
        f"waves      {metrics.waves(trace)} ({len(trace.blocks)} blocks, at most "
        f"{metrics.max_resident(trace)} resident; blocks per SM {used.min() if len(used) else 0}"
        f"..{used.max() if len(used) else 0} on {len(used)} SMs)"
    )
    occ = m.get("occupancy")
    if occ:
        lines.append(f"occupancy  {occ['blocks_per_sm']} blocks/SM, limited by {occ['limiter']}")
    floor = dram_floor_bytes(config)  # A and B read once, C written once
    terms = dram_floor_formula(config)
    by = "TMA copies" if config.copies else "load instructions"
    lines.append(
        f"global     {config.issued_bytes / 1e6:.1f} MB requested by {by}; lesson "
        f"formula {config.kernel.work.formula} = {config.formula_bytes / 1e6:.1f} MB; DRAM floor "
        f"{terms} = {floor / 1e6:.1f} MB"
    )
    measured = measured_bytes(m)
    if measured is not None:
        lines.append(
            f"measured   {measured.get('tool', 'ncu')}: "
            f"L1 global loads {measured['l1_global_load_bytes'] / 1e6:.1f} MB, "
            + (
                f"TMA copies {measured['copy_engine_load_bytes'] / 1e6:.1f} MB, "
                if "copy_engine_load_bytes" in measured
                else ""
            )
            + f"L2 {measured['l2_bytes'] / 1e6:.1f} MB, "
            f"DRAM read {measured['dram_read_bytes'] / 1e6:.1f} MB"
        )
    sampling = m["sampling"]
    if len(trace.phase_blocks):
        layout = trace.layout
        steps = " -> ".join(ph.name for ph in layout.phases)
        if len(layout.channels) > 1:  # several k-steps in flight: the phases of each channel
            steps = " | ".join(
                " -> ".join(ph.name for ph in layout.phases if ph.channel == c) or "-"
                for c in range(len(layout.channels))
            )
        lines.append(
            f"phases     {len(trace.phase_blocks)} of {len(trace.blocks)} blocks x "
            f"{trace.n_tiles} k-tiles of depth {config.step_depth}: {steps} "
            f"(1 block in {sampling.get('phase_every', 1)})"
        )
    if len(trace.probe):
        worst = int(np.max(_degrees(trace)))
        lines.append(f"probe      {len(trace.probe)} shared accesses; worst conflict {worst}-way")
    return lines


def _correctness_lines(trace: Trace) -> list[str]:
    """How many elements of C are wrong, and, for a deliberately broken kernel, why."""
    checked = trace.correctness
    if not checked:
        return ["C          not checked element by element (recorded before matviz mapped C)"]
    wrong, total = checked["wrong"], checked["total"]
    if not wrong:
        line = f"C          all {total:,} elements within {checked['tolerance']:.2g} of float64"
    else:
        worst = checked["max_abs_error"]
        worst_text = f"{worst:.3g}" if np.isfinite(worst) else "not finite (a NaN or inf)"
        line = (f"C          {wrong:,} of {total:,} elements WRONG ({100 * wrong / total:.2f}%), "
                f"largest error {worst_text}")  # fmt: skip
    lines = [line]
    config = trace.config
    for name in checked["broken"]:
        param = config.kernel.param(name)
        lines.append(f"broken     {name}={config.params[name]}: {param.help}")
    reads = checked.get("stale_reads")
    if reads and (reads["before_written"] or reads["overwritten"] or reads["other"]):
        lines.append(
            f"reads      probed warp, first k-steps: {reads['before_written']} before written, "
            f"{reads['overwritten']} after overwritten, {reads['other']} other, "
            f"{reads['current']} correct"
        )
    return lines


def _degrees(trace: Trace) -> np.ndarray:
    from matviz.core.banks import conflict_degree

    widths = trace.probe["width"]
    return np.concatenate(
        [conflict_degree(trace.probe["offsets"][widths == w], int(w)) for w in np.unique(widths)]
    )

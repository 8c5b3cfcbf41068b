"""Plain-language explanations: what the selected block does at the playhead, and why.

Every sentence is an English template (a module constant listed in ``TEMPLATES``); ``tr`` is
applied to the template before ``.format``, so the Qt layer can translate it
(``resources/i18n/zh_CN_explain.json``). Numbers come from the trace itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from matviz.core import banks, catalog, metrics
from matviz.core import explain_texts as txt
from matviz.core.explain_texts import TEMPLATES  # noqa: F401  (the app and tests use it here)
from matviz.core.timeline import BlockState, Timeline
from matviz.core.trace import Trace
from matviz.errors import MatvizError

Tr = Callable[[str], str]


@dataclass(frozen=True)
class Explanation:
    title: str
    body: str
    concept: str
    numbers: dict[str, float | int | str] = field(default_factory=dict)


def fmt_ns(ns: float) -> str:
    """A duration or time in the unit a reader takes in at a glance."""
    if abs(ns) < 10_000:
        return f"{ns:.0f} ns"
    if abs(ns) < 10_000_000:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns / 1e6:.3f} ms"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _join(first: str, second: str) -> str:
    """Two sentences: a space after Latin punctuation, none after a CJK full stop."""
    return first + ("" if first.endswith(("。", "！", "？")) else " ") + second


def _spec(trace: Trace) -> catalog.KernelSpec | None:
    try:
        return catalog.get_kernel(trace.kernel)
    except MatvizError:
        return None  # a kernel this version does not know: explain what the trace says


def _layout(trace: Trace) -> dict[str, int | bool]:
    """Tile, threads, pad and whether the kernel stages tiles, from manifest or catalog."""
    geom = trace.manifest.get("geometry", {})
    block = geom.get("block", [trace.params.get("tile", 1)] * 2)
    tile = int(trace.params.get("tile", block[0]))
    spec = _spec(trace)
    tiled = spec.uses_shared if spec else trace.n_tiles > 0
    return {
        "tile": tile,
        "pad": int(trace.params.get("pad", 0)),
        "threads": int(geom.get("threads", int(block[0]) * int(block[1]))),
        "tiled": tiled,
    }


def _global_bytes(trace: Trace) -> tuple[float, float] | None:
    """(bytes the kernel loads, bytes the lesson's formula predicts)."""
    known = trace.manifest.get("global_bytes")
    if known:
        return float(known["issued"]), float(known["formula"])
    spec = _spec(trace)
    if spec is None:
        return None
    M, N, K = trace.shape
    return (
        float(spec.issued_global_bytes(trace.params, M, N, K)),
        float(spec.predicted_global_bytes(trace.params, M, N, K)),
    )


def _edge(trace: Trace, bx: int, by: int, lay: dict, tr: Tr) -> str:
    M, N, K = trace.shape
    T = lay["tile"]
    gx, gy = trace.grid
    parts = []
    if by == gy - 1 and M % T:
        parts.append(tr(txt.EDGE_ROWS).format(rows=M % T, tile=T, M=M))
    if bx == gx - 1 and N % T:
        parts.append(tr(txt.EDGE_COLS).format(cols=N % T, tile=T, N=N))
    if lay["tiled"] and K % T:
        parts.append(tr(txt.EDGE_K).format(krem=K % T, tile=T, K=K))
    if not parts:
        return ""
    return tr(txt.EDGE_TILED if lay["tiled"] else txt.EDGE_NAIVE).format(
        what=tr(txt.EDGE_SEP).join(parts)
    )


def _reuse(trace: Trace, lay: dict, tr: Tr) -> tuple[str, dict]:
    M, N, K = trace.shape
    T = lay["tile"]
    naive = metrics.global_load_bytes_formula(M, N, K, T, tiled=False)
    moved = _global_bytes(trace)
    if lay["tiled"]:
        if moved is None:
            return "", {}
        issued, formula = moved
        text = tr(txt.REUSE_TILED).format(
            loads=2 * T * T,
            fmas=T**3,
            tile=T,
            issued=fmt_bytes(issued),
            formula=fmt_bytes(formula),
            naive=fmt_bytes(naive),
        )
        nums = {"loads_per_tile": 2 * T * T, "fmas_per_tile": T**3}
        return text, nums | {"global_bytes": round(issued), "formula_bytes": round(formula)}
    issued = moved[0] if moved else naive
    formula = metrics.global_load_bytes_formula(M, N, K, T)
    text = tr(txt.REUSE_NAIVE).format(issued=fmt_bytes(issued), tile=T, formula=fmt_bytes(formula))
    return text, {"loads_per_thread": 2 * K, "global_bytes": round(issued)}


def explain(
    trace: Trace, timeline: Timeline, block: int, t_ns: int, tr: Tr = lambda s: s
) -> Explanation:
    """What ``block`` is doing at ``t_ns``, why, and the lesson section that explains it."""
    if not 0 <= block < len(trace.blocks):
        raise IndexError(f"block {block} is outside the grid of {len(trace.blocks)} blocks")
    row = trace.blocks[block]
    bx, by, sm = int(row["bx"]), int(row["by"]), int(row["smid"])
    start, end = int(row["start"]), int(row["end"])
    lay = _layout(trace)
    state, k = timeline.block_phase(block, t_ns)
    begin, stop = timeline.phase_span(block, t_ns)
    n = trace.n_tiles
    base = {"bx": bx, "by": by, "sm": sm, "t": k, "n": n, "threads": lay["threads"]}
    span = {"begin": fmt_ns(begin), "end": fmt_ns(stop), "dur": fmt_ns(stop - begin)}
    nums: dict[str, float | int | str] = {
        "block": block,
        "bx": bx,
        "by": by,
        "sm": sm,
        "state": state.name.lower(),
        "ktile": k,
        "n_tiles": n,
        "phase_ns": stop - begin,
        "phase_begin_ns": begin,
        "phase_end_ns": stop,
        "threads": lay["threads"],
        "tile": lay["tile"],
    }
    timed = True  # append txt.PHASE_TIME unless the text already gives the times

    if state == BlockState.WAITING:
        resident = max(timeline.max_resident, 1)
        wave, waves = block // resident + 1, -(-len(trace.blocks) // resident)
        fill = {"index": block, "blocks": len(trace.blocks), "wave": wave, "waves": waves}
        fill |= {"start": fmt_ns(start), "wait": fmt_ns(start - t_ns)}
        text = tr(txt.WAITING_FIRST if wave == 1 else txt.WAITING_LATER).format(**base, **fill)
        occ = trace.manifest.get("occupancy")
        if occ:
            limiter = tr(txt.LIMITERS.get(occ["limiter"], occ["limiter"]))
            fit = {"per_sm": occ["blocks_per_sm"], "resident": occ["resident_blocks"]}
            text = _join(text, tr(txt.WAITING_OCCUPANCY).format(**fit, limiter=limiter))
            nums["blocks_per_sm"] = int(occ["blocks_per_sm"])
        title, concept, timed = txt.TITLE_WAITING, txt.CONCEPT_WAITING, False
        nums |= {"wave": wave, "waves": waves, "start_ns": start}
    elif state == BlockState.LOADING:
        text = tr(txt.LOADING).format(**base)
        title, concept = txt.TITLE_LOADING, txt.CONCEPT_LOADING
    elif state == BlockState.AT_BARRIER:
        prow = timeline.phase_row(block)
        second = prow is not None and t_ns >= trace.loaded[prow, k]
        waits = timeline.waits_at(block, k)[:, int(second)]
        slow = int(np.argmin(waits))  # the warp that arrived last waited least
        others = np.delete(waits, slow)
        mean = float(others.mean()) if len(others) else 0.0
        fill = {"slow": slow, "others": len(others), "max_wait": fmt_ns(waits.max())}
        fill["mean_wait"] = fmt_ns(mean)
        text = tr(txt.BARRIER_2 if second else txt.BARRIER_1).format(**base, **fill)
        title = txt.TITLE_BARRIER_2 if second else txt.TITLE_BARRIER_1
        concept = txt.CONCEPT_BARRIER_2 if second else txt.CONCEPT_BARRIER_1
        nums |= {"barrier": 2 if second else 1, "slowest_warp": slow}
        nums |= {"max_wait_ns": int(waits.max()), "mean_wait_ns": round(mean, 1)}
    elif state == BlockState.COMPUTING:
        text = tr(txt.COMPUTING).format(**base, tile=lay["tile"])
        title, concept = txt.TITLE_COMPUTING, txt.CONCEPT_COMPUTING
    elif state == BlockState.DONE:
        text = tr(txt.DONE).format(**base, end=fmt_ns(end), run=fmt_ns(end - start))
        title, concept, timed = txt.TITLE_DONE, txt.CONCEPT_DONE, False
        nums["run_ns"] = end - start
    elif (prow := timeline.phase_row(block)) is not None:  # a sampled block's prologue/epilogue
        if t_ns < trace.issue[prow, 0]:
            text = tr(txt.PROLOGUE).format(**base, next=fmt_ns(stop))
            title, concept = txt.TITLE_PROLOGUE, txt.CONCEPT_PROLOGUE
        else:
            text = tr(txt.EPILOGUE).format(**base)
            title, concept = txt.TITLE_EPILOGUE, txt.CONCEPT_EPILOGUE
    elif lay["tiled"]:
        every = trace.manifest.get("sampling", {}).get("phase_every")
        if not isinstance(every, int):
            every = max(1, round(len(trace.blocks) / max(len(trace.phase_blocks), 1)))
        sampled = len(trace.phase_blocks) > 0
        text = tr(txt.RUNNING_SAMPLED if sampled else txt.RUNNING_NO_PHASES).format(
            **base, **span, every=every
        )
        title, concept, timed = txt.TITLE_RUNNING, txt.CONCEPT_RUNNING, False
    else:
        K = trace.shape[2]
        text = tr(txt.RUNNING_NAIVE).format(**base, **span, loads=2 * K, K=K)
        title, concept, timed = txt.TITLE_RUNNING, txt.CONCEPT_NAIVE, False

    if timed:
        text = _join(text, tr(txt.PHASE_TIME).format(**span))
    reuse, extra = _reuse(trace, lay, tr)
    nums |= extra
    paragraphs = [text, reuse, _edge(trace, bx, by, lay, tr)]
    body = "\n\n".join(p for p in paragraphs if p)
    return Explanation(tr(title).format(**base), body, tr(concept), nums)


def _worst_conflict(trace: Trace) -> tuple[int, str]:
    probe = trace.probe
    degree = np.zeros(len(probe), np.int64)
    for width in np.unique(probe["width"]):
        mine = probe["width"] == width
        degree[mine] = banks.conflict_degree(probe["offsets"][mine], int(width))
    worst = int(np.argmax(degree))
    return int(degree[worst]), str(probe["site"][worst])


def trace_facts(trace: Trace, tr: Tr = lambda s: s) -> list[str]:
    """Kernel-level sentences for an info box: speed, waves, occupancy, memory, banks."""
    m = trace.manifest
    stats = m.get("stats", {})
    device = m["device"].get("name", "unknown GPU")
    M, N, K = trace.shape
    lay = _layout(trace)
    facts = []
    if trace.is_simulated:
        facts.append(tr(txt.FACT_SIMULATED).format(device=device))
    else:
        timer = m["timer"].get("name", "?") if isinstance(m["timer"], dict) else m["timer"]
        facts.append(tr(txt.FACT_RECORDED).format(device=device, timer=timer))

    ms = stats.get("time_ms_median")
    if isinstance(ms, (int, float)) and ms > 0:
        gflops = metrics.achieved_gflops(trace)
        cublas = stats.get("cublas_gflops") or m["device"].get("cublas_fp32_gflops")
        rate = {"gflops": f"{gflops:.1f}", "M": M, "N": N, "K": K, "time": fmt_ns(ms * 1e6)}
        if cublas:
            pct = f"{100 * gflops / cublas:.1f}"
            facts.append(tr(txt.FACT_RATE).format(**rate, pct=pct, cublas=f"{cublas:.0f}"))
        else:
            facts.append(tr(txt.FACT_RATE_ONLY).format(**rate))

    per_sm = metrics.blocks_per_sm_histogram(trace)
    used = per_sm[per_sm > 0]
    resident = metrics.max_resident(trace)
    waves = -(-len(trace.blocks) // resident) if resident else 0  # metrics.waves, reusing resident
    fill = {"blocks": len(trace.blocks), "waves": waves, "resident": resident, "sms": len(used)}
    fill |= {"lo": int(used.min()) if len(used) else 0, "hi": int(used.max()) if len(used) else 0}
    facts.append(tr(txt.FACT_WAVES if waves > 1 else txt.FACT_ONE_WAVE).format(**fill))
    occ = m.get("occupancy")
    if occ:
        limiter = tr(txt.LIMITERS.get(occ["limiter"], occ["limiter"]))
        facts.append(
            tr(txt.FACT_OCCUPANCY).format(
                per_sm=occ["blocks_per_sm"], limiter=limiter, registers=occ["registers"]
            )
        )

    T, pad = lay["tile"], lay["pad"]
    if lay["tiled"]:
        smem = int(m.get("geometry", {}).get("smem_bytes", 2 * T * (T + pad) * 4))
        if pad:
            padding = fmt_bytes(2 * T * pad * 4)
            fill = {"smem": fmt_bytes(smem), "tile": T, "pad": pad, "padding": padding}
            facts.append(tr(txt.FACT_SMEM_PAD).format(**fill))
        else:
            facts.append(tr(txt.FACT_SMEM).format(smem=fmt_bytes(smem), tile=T))
    else:
        facts.append(tr(txt.FACT_NO_SMEM))
    moved = _global_bytes(trace)
    if moved:
        issued, formula = (fmt_bytes(b) for b in moved)
        facts.append(tr(txt.FACT_GLOBAL).format(issued=issued, formula=formula))
    if len(trace.phase_blocks) and len(trace.phase_blocks) < len(trace.blocks):
        kept = len(trace.phase_blocks)
        facts.append(tr(txt.FACT_SAMPLED).format(kept=kept, blocks=len(trace.blocks)))
    if len(trace.probe):
        degree, site = _worst_conflict(trace)
        if degree > 1:
            facts.append(tr(txt.FACT_BANKS).format(degree=degree, site=site))
        else:
            facts.append(tr(txt.FACT_NO_CONFLICT))
    return facts

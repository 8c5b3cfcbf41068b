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
from matviz.core.timeline import BlockState, Timeline
from matviz.core.trace import Trace
from matviz.errors import MatvizError

Tr = Callable[[str], str]

# -- titles ---------------------------------------------------------------------------------
TITLE_WAITING = "Block ({bx}, {by}): waiting"
TITLE_LOADING = "Block ({bx}, {by}): loading k-tile t = {t}"
TITLE_BARRIER_1 = "Block ({bx}, {by}): at barrier 1 of k-tile t = {t}"
TITLE_BARRIER_2 = "Block ({bx}, {by}): at barrier 2 of k-tile t = {t}"
TITLE_COMPUTING = "Block ({bx}, {by}): computing k-tile t = {t}"
TITLE_DONE = "Block ({bx}, {by}): done"
TITLE_RUNNING = "Block ({bx}, {by}): running"
TITLE_PROLOGUE = "Block ({bx}, {by}): starting"
TITLE_EPILOGUE = "Block ({bx}, {by}): writing C"

# -- what the block is doing ----------------------------------------------------------------
WAITING_FIRST = (
    "Block ({bx}, {by}) has not started yet. It is block {index} of {blocks} in launch order, "
    "in the first wave, so a slot is free for it: the GPU just hands blocks to the SMs one "
    "after another. It starts on SM {sm} at {start}, {wait} from now."
)
WAITING_LATER = (
    "Block ({bx}, {by}) has not started: every SM slot is still taken by earlier blocks. It is "
    "block {index} of {blocks} in launch order, so it runs in wave {wave} of {waves}; it "
    "starts on SM {sm} at {start}, {wait} from now, when a block there finishes."
)
WAITING_OCCUPANCY = (
    "One SM holds at most {per_sm} blocks of this kernel at once (limited by {limiter}), "
    "{resident} on the whole GPU."
)
LOADING = (
    "Block ({bx}, {by}) on SM {sm} is loading k-tile t = {t} of {n}: its {threads} threads "
    "each copy one element of A and one of B into shared memory (As, Bs), then wait at the "
    "first __syncthreads so the tiles are complete before anyone reads them."
)
BARRIER_1 = (
    "Block ({bx}, {by}) on SM {sm} waits at the first __syncthreads of k-tile t = {t}: warp "
    "{slow} arrived last, and the other {others} warps waited up to {max_wait} for it "
    "(on average {mean_wait}). The barrier opens only when every warp has stored its part of "
    "As and Bs, so no thread reads an incomplete tile."
)
BARRIER_2 = (
    "Block ({bx}, {by}) on SM {sm} waits at the second __syncthreads of k-tile t = {t}: warp "
    "{slow} finished its multiply-adds last, and the other {others} warps waited up to "
    "{max_wait} for it (on average {mean_wait}). The barrier stops anyone overwriting As and "
    "Bs with the next tile while another warp still reads them."
)
COMPUTING = (
    "Block ({bx}, {by}) on SM {sm} is computing k-tile t = {t} of {n}: all {threads} threads "
    "multiply-accumulate {tile} products from As and Bs into the sum kept in a register; the "
    "second __syncthreads stops anyone overwriting the tiles while another warp still reads "
    "them."
)
DONE = (
    "Block ({bx}, {by}) finished at {end} after {run} on SM {sm}. Each of its {threads} threads "
    "wrote its element of C once, from the sum in its register (§14)."
)
RUNNING_SAMPLED = (
    "Block ({bx}, {by}) is running on SM {sm}, from {begin} to {end} ({dur}). The trace kept "
    "per-tile marks for only one block in {every}, to stay within its size budget, so which "
    "k-tile this one is on was not recorded; the sampled blocks around it show the phases."
)
RUNNING_NAIVE = (
    "Block ({bx}, {by}) of the naive kernel is running on SM {sm}, from {begin} to {end} "
    "({dur}). There are no tiles and no per-tile marks: each of its {threads} threads reads "
    "its row of A and its column of B straight from global memory, 2·K = {loads} loads for "
    "K = {K} multiply-adds, and keeps the sum in a register."
)
RUNNING_NO_PHASES = (
    "Block ({bx}, {by}) is running on SM {sm}, from {begin} to {end} ({dur}). This trace was "
    "recorded without per-tile marks, so it shows only when each block started and ended; "
    "record at level 2 or higher to see its k-tiles."
)
PROLOGUE = (
    "Block ({bx}, {by}) has just started on SM {sm}: each thread works out its row and column "
    "from blockIdx and threadIdx and sets sum = 0 in a register. Its first tile loads go out "
    "at {next}."
)
EPILOGUE = (
    "Block ({bx}, {by}) on SM {sm} has passed the last barrier of all {n} k-tiles: each thread "
    "now writes its sum from a register to C, once."
)
PHASE_TIME = "In this trace this phase lasts {dur}, from {begin} to {end}."

# -- data reuse and edges ---------------------------------------------------------------------
REUSE_TILED = (
    "Data reuse: per k-tile the block loads 2·T² = {loads} floats from global memory and does "
    "T³ = {fmas} FMAs with them, so each loaded float is used {tile} times (§13). Over the "
    "whole kernel the blocks load {issued} of A and B; the formula 2mnk/b × 4 B gives "
    "{formula}, where the naive kernel would load 2mnk × 4 B = {naive}."
)
REUSE_NAIVE = (
    "No data reuse through shared memory: the kernel issues 2mnk loads, {issued} from global "
    "memory in all (the caches absorb part of it). A tiled kernel with b = {tile} would need "
    "2mnk/b × 4 B = {formula} (§5-6)."
)
EDGE_TILED = (
    "This is an edge block ({what}): out-of-range elements of A and B are stored in shared "
    "memory as 0, so the inner loop needs no test, and the store to C is guarded by "
    "row < M && col < N (§26)."
)
EDGE_NAIVE = (
    "This is an edge block ({what}): threads outside C skip all work, guarded by "
    "if (row < M && col < N) (§26)."
)
EDGE_ROWS = "only {rows} of its {tile} rows lie inside M = {M}"
EDGE_COLS = "only {cols} of its {tile} columns lie inside N = {N}"
EDGE_K = "its last k-tile holds only {krem} of {tile} values of K = {K}"
EDGE_SEP = "; "

# -- lesson sections ------------------------------------------------------------------------
CONCEPT_WAITING = "Lesson 8 §17: blocks per SM (occupancy) and waves"
CONCEPT_LOADING = "Lesson 8 §8, §11: tiles into shared memory, the first __syncthreads"
CONCEPT_BARRIER_1 = "Lesson 8 §11: the first __syncthreads"
CONCEPT_BARRIER_2 = "Lesson 8 §12: the second __syncthreads"
CONCEPT_COMPUTING = "Lesson 8 §12-14: multiply-add from shared memory, sum in a register"
CONCEPT_DONE = "Lesson 8 §14: the result is written once"
CONCEPT_RUNNING = "Lesson 8 §9-10: the k-tile loop"
CONCEPT_NAIVE = "Lesson 8 §4-5: the naive kernel re-reads global memory"
CONCEPT_PROLOGUE = "Lesson 8 §3: 2-D grid, each thread finds its row and column"
CONCEPT_EPILOGUE = "Lesson 8 §14, §26: one guarded write of C"

# -- facts about the whole run --------------------------------------------------------------
FACT_SIMULATED = "Simulated: these times come from a model of the {device}, not a measurement."
FACT_RECORDED = "Recorded on {device} (timer: {timer})."
FACT_RATE = "{gflops} GFLOP/s for {M}×{N}×{K} in {time}: {pct}% of cuBLAS ({cublas} GFLOP/s)."
FACT_RATE_ONLY = "{gflops} GFLOP/s for {M}×{N}×{K} in {time}."
FACT_WAVES = (
    "{blocks} blocks ran in {waves} waves: at most {resident} at once, {lo}-{hi} blocks per SM "
    "over the run, on {sms} SMs."
)
FACT_ONE_WAVE = (
    "All {blocks} blocks fit on the GPU at once (one wave): {lo}-{hi} blocks per SM, on {sms} SMs."
)
FACT_OCCUPANCY = (
    "At most {per_sm} blocks fit on one SM at a time, limited by {limiter} ({registers} "
    "registers per thread)."
)
FACT_SMEM = (
    "Each block keeps As and Bs in {smem} of shared memory: 2 × {tile} × {tile} floats × 4 B."
)
FACT_SMEM_PAD = (
    "Each block keeps As and Bs in {smem} of shared memory: 2 × {tile} × ({tile} + {pad}) "
    "floats × 4 B, of which {padding} is padding."
)
FACT_NO_SMEM = (
    "The naive kernel uses no shared memory: every thread reads A and B from global memory."
)
FACT_BANKS = "Worst shared-memory bank conflict in the probed warp: {degree}-way, at {site}."
FACT_NO_CONFLICT = "The probed warp's shared-memory accesses are free of bank conflicts."
FACT_GLOBAL = "Global memory: the kernel loads {issued}; the lesson's formula gives {formula}."
FACT_SAMPLED = "Per-tile phases were kept for {kept} of {blocks} blocks."

LIMITERS = {
    "blocks": "block slots per SM",
    "threads": "threads per SM",
    "warps": "warps per SM",
    "shared_memory": "shared memory per SM",
    "registers": "registers per SM",
}

TEMPLATES: tuple[str, ...] = tuple(
    value
    for name, value in sorted(globals().items())
    if name.isupper() and isinstance(value, str) and name != "TEMPLATES"
) + tuple(LIMITERS.values())


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
        parts.append(tr(EDGE_ROWS).format(rows=M % T, tile=T, M=M))
    if bx == gx - 1 and N % T:
        parts.append(tr(EDGE_COLS).format(cols=N % T, tile=T, N=N))
    if lay["tiled"] and K % T:
        parts.append(tr(EDGE_K).format(krem=K % T, tile=T, K=K))
    if not parts:
        return ""
    return tr(EDGE_TILED if lay["tiled"] else EDGE_NAIVE).format(what=tr(EDGE_SEP).join(parts))


def _reuse(trace: Trace, lay: dict, tr: Tr) -> tuple[str, dict]:
    M, N, K = trace.shape
    T = lay["tile"]
    naive = metrics.global_load_bytes_formula(M, N, K, T, tiled=False)
    moved = _global_bytes(trace)
    if lay["tiled"]:
        if moved is None:
            return "", {}
        issued, formula = moved
        text = tr(REUSE_TILED).format(
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
    text = tr(REUSE_NAIVE).format(issued=fmt_bytes(issued), tile=T, formula=fmt_bytes(formula))
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
    timed = True  # append PHASE_TIME unless the text already gives the times

    if state == BlockState.WAITING:
        resident = max(timeline.max_resident, 1)
        wave, waves = block // resident + 1, -(-len(trace.blocks) // resident)
        fill = {"index": block, "blocks": len(trace.blocks), "wave": wave, "waves": waves}
        fill |= {"start": fmt_ns(start), "wait": fmt_ns(start - t_ns)}
        text = tr(WAITING_FIRST if wave == 1 else WAITING_LATER).format(**base, **fill)
        occ = trace.manifest.get("occupancy")
        if occ:
            limiter = tr(LIMITERS.get(occ["limiter"], occ["limiter"]))
            fit = {"per_sm": occ["blocks_per_sm"], "resident": occ["resident_blocks"]}
            text = _join(text, tr(WAITING_OCCUPANCY).format(**fit, limiter=limiter))
            nums["blocks_per_sm"] = int(occ["blocks_per_sm"])
        title, concept, timed = TITLE_WAITING, CONCEPT_WAITING, False
        nums |= {"wave": wave, "waves": waves, "start_ns": start}
    elif state == BlockState.LOADING:
        text = tr(LOADING).format(**base)
        title, concept = TITLE_LOADING, CONCEPT_LOADING
    elif state == BlockState.AT_BARRIER:
        prow = timeline.phase_row(block)
        second = prow is not None and t_ns >= trace.loaded[prow, k]
        waits = timeline.waits_at(block, k)[:, int(second)]
        slow = int(np.argmin(waits))  # the warp that arrived last waited least
        others = np.delete(waits, slow)
        mean = float(others.mean()) if len(others) else 0.0
        fill = {"slow": slow, "others": len(others), "max_wait": fmt_ns(waits.max())}
        fill["mean_wait"] = fmt_ns(mean)
        text = tr(BARRIER_2 if second else BARRIER_1).format(**base, **fill)
        title = TITLE_BARRIER_2 if second else TITLE_BARRIER_1
        concept = CONCEPT_BARRIER_2 if second else CONCEPT_BARRIER_1
        nums |= {"barrier": 2 if second else 1, "slowest_warp": slow}
        nums |= {"max_wait_ns": int(waits.max()), "mean_wait_ns": round(mean, 1)}
    elif state == BlockState.COMPUTING:
        text = tr(COMPUTING).format(**base, tile=lay["tile"])
        title, concept = TITLE_COMPUTING, CONCEPT_COMPUTING
    elif state == BlockState.DONE:
        text = tr(DONE).format(**base, end=fmt_ns(end), run=fmt_ns(end - start))
        title, concept, timed = TITLE_DONE, CONCEPT_DONE, False
        nums["run_ns"] = end - start
    elif (prow := timeline.phase_row(block)) is not None:  # a sampled block's prologue/epilogue
        if t_ns < trace.issue[prow, 0]:
            text = tr(PROLOGUE).format(**base, next=fmt_ns(stop))
            title, concept = TITLE_PROLOGUE, CONCEPT_PROLOGUE
        else:
            text = tr(EPILOGUE).format(**base)
            title, concept = TITLE_EPILOGUE, CONCEPT_EPILOGUE
    elif lay["tiled"]:
        every = trace.manifest.get("sampling", {}).get("phase_every")
        if not isinstance(every, int):
            every = max(1, round(len(trace.blocks) / max(len(trace.phase_blocks), 1)))
        sampled = len(trace.phase_blocks) > 0
        text = tr(RUNNING_SAMPLED if sampled else RUNNING_NO_PHASES).format(
            **base, **span, every=every
        )
        title, concept, timed = TITLE_RUNNING, CONCEPT_RUNNING, False
    else:
        K = trace.shape[2]
        text = tr(RUNNING_NAIVE).format(**base, **span, loads=2 * K, K=K)
        title, concept, timed = TITLE_RUNNING, CONCEPT_NAIVE, False

    if timed:
        text = _join(text, tr(PHASE_TIME).format(**span))
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
        facts.append(tr(FACT_SIMULATED).format(device=device))
    else:
        timer = m["timer"].get("name", "?") if isinstance(m["timer"], dict) else m["timer"]
        facts.append(tr(FACT_RECORDED).format(device=device, timer=timer))

    ms = stats.get("time_ms_median")
    if isinstance(ms, (int, float)) and ms > 0:
        gflops = metrics.achieved_gflops(trace)
        cublas = stats.get("cublas_gflops") or m["device"].get("cublas_fp32_gflops")
        rate = {"gflops": f"{gflops:.1f}", "M": M, "N": N, "K": K, "time": fmt_ns(ms * 1e6)}
        if cublas:
            pct = f"{100 * gflops / cublas:.1f}"
            facts.append(tr(FACT_RATE).format(**rate, pct=pct, cublas=f"{cublas:.0f}"))
        else:
            facts.append(tr(FACT_RATE_ONLY).format(**rate))

    per_sm = metrics.blocks_per_sm_histogram(trace)
    used = per_sm[per_sm > 0]
    resident = metrics.max_resident(trace)
    waves = -(-len(trace.blocks) // resident) if resident else 0  # metrics.waves, reusing resident
    fill = {"blocks": len(trace.blocks), "waves": waves, "resident": resident, "sms": len(used)}
    fill |= {"lo": int(used.min()) if len(used) else 0, "hi": int(used.max()) if len(used) else 0}
    facts.append(tr(FACT_WAVES if waves > 1 else FACT_ONE_WAVE).format(**fill))
    occ = m.get("occupancy")
    if occ:
        limiter = tr(LIMITERS.get(occ["limiter"], occ["limiter"]))
        facts.append(
            tr(FACT_OCCUPANCY).format(
                per_sm=occ["blocks_per_sm"], limiter=limiter, registers=occ["registers"]
            )
        )

    T, pad = lay["tile"], lay["pad"]
    if lay["tiled"]:
        smem = int(m.get("geometry", {}).get("smem_bytes", 2 * T * (T + pad) * 4))
        if pad:
            padding = fmt_bytes(2 * T * pad * 4)
            fill = {"smem": fmt_bytes(smem), "tile": T, "pad": pad, "padding": padding}
            facts.append(tr(FACT_SMEM_PAD).format(**fill))
        else:
            facts.append(tr(FACT_SMEM).format(smem=fmt_bytes(smem), tile=T))
    else:
        facts.append(tr(FACT_NO_SMEM))
    moved = _global_bytes(trace)
    if moved:
        issued, formula = (fmt_bytes(b) for b in moved)
        facts.append(tr(FACT_GLOBAL).format(issued=issued, formula=formula))
    if len(trace.phase_blocks) and len(trace.phase_blocks) < len(trace.blocks):
        kept = len(trace.phase_blocks)
        facts.append(tr(FACT_SAMPLED).format(kept=kept, blocks=len(trace.blocks)))
    if len(trace.probe):
        degree, site = _worst_conflict(trace)
        if degree > 1:
            facts.append(tr(FACT_BANKS).format(degree=degree, site=site))
        else:
            facts.append(tr(FACT_NO_CONFLICT))
    return facts

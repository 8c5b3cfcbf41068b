"""Plain-language explanations: what the selected block does at the playhead, and why.

Every sentence is an English template (a module constant listed in ``TEMPLATES``); ``tr`` is
applied to the template before ``.format``, so the Qt layer can translate it
(``resources/i18n/zh_CN_explain.json``). Numbers come from the trace and from its kernel's
description (``trace.config``): threads, staged elements and FMAs per k-step, shared arrays,
traffic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from matviz.core import banks, metrics
from matviz.core import explain_texts as txt
from matviz.core.ceilings import issue_ceiling, shared_ceiling
from matviz.core.config import KernelConfig, PhaseMarks
from matviz.core.explain_texts import TEMPLATES  # noqa: F401  (the app and tests use it here)
from matviz.core.timeline import BlockState, Timeline
from matviz.core.trace import Trace

Tr = Callable[[str], str]
FLOAT_BYTES = 4  # the traces are float32 GEMMs


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


def inputs_bytes(config: KernelConfig) -> int:
    """A and B, each read once."""
    return (config.M * config.K + config.K * config.N) * config.element_bytes("A")


def dram_floor_bytes(config: KernelConfig) -> int:
    """The least DRAM traffic a GEMM can have: A and B read once, C written once."""
    return inputs_bytes(config) + config.M * config.N * config.element_bytes("C")


def dram_floor_formula(config: KernelConfig) -> str:
    """:func:`dram_floor_bytes` as the lesson writes it, in the kernel's element sizes."""
    ab, c = config.element_bytes("A"), config.element_bytes("C")
    if ab == c:
        return f"(MK + KN + MN) × {c} B"
    return f"(MK + KN) × {ab} B + MN × {c} B"


def written_elements(config: KernelConfig, bx: int, by: int) -> int:
    """Elements of C block (bx, by) really writes: its C tile clipped to M x N."""
    rows, cols = config.launch.c_tile
    inside_rows = max(0, min(rows, config.M - by * rows))
    inside_cols = max(0, min(cols, config.N - bx * cols))
    return inside_rows * inside_cols


def measured_bytes(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """Memory traffic measured with a profiler (ncu), where the trace carries it: the bundled
    H200 recordings do. Schema-2 manifests keep it in ``details`` (the free-form section, so
    recorded and simulated manifests keep the same sections); schema-1 files, whose migration
    rebuilds ``details``, at the top level."""
    details = manifest.get("details")
    found = details.get("measured") if isinstance(details, dict) else None
    found = found if found is not None else manifest.get("measured")
    keys = ("dram_read_bytes", "l2_bytes", "l1_global_load_bytes")
    if isinstance(found, dict) and all(isinstance(found.get(k), (int, float)) for k in keys):
        return found
    return None


def blocks_per_sm(lo: int, hi: int, tr: Tr = lambda s: s) -> str:
    """'one block per SM', '2 blocks per SM' or '1-2 blocks per SM'."""
    if lo == hi == 1:
        return tr(txt.PER_SM_ONE)
    if lo == hi:
        return tr(txt.PER_SM_EVEN).format(n=hi)
    return tr(txt.PER_SM_RANGE).format(lo=lo, hi=hi)


def join_sentences(*parts: str) -> str:
    """Sentences as one text: a space after Latin punctuation, none after a CJK full stop;
    empty parts left out."""
    out = ""
    for part in filter(None, parts):
        out += part if not out or out.endswith(("。", "！", "？")) else " " + part
    return out


def _arrays(config: KernelConfig, staged_only: bool = False) -> str:
    """The shared arrays, or only those staging A or B (not, e.g., C on its way out)."""
    return ", ".join(arr.name for arr in config.shared if arr.source or not staged_only)


def _mma_fill(config: KernelConfig) -> dict[str, Any]:
    """A Tensor Core k-step in the description's terms: per warp, the MMA instructions and
    the fragments they multiply."""
    mma = config.mma
    assert mma is not None
    m, n, k = mma.shape
    # the threads that issue one MMA together (a warp, or a warpgroup of 4), after the warps
    # that multiply nothing (a producer)
    groups = (config.threads - 32 * mma.first_warp) // mma.group_threads
    per_group = config.fmas_per_step // groups // (m * n * k)  # MMAs a warp (group) issues
    loads = [rs.site for rs in config.sites if rs.site.kind == "load"]
    ops = dict.fromkeys(s.matrix_load or f"{s.width}-byte loads" for s in loads)
    return {
        "ops": ", ".join(ops),
        "warps": config.warps,
        "groups": groups,
        "group_threads": mma.group_threads,
        "group_rows": mma.warp_tile[0] * mma.group_threads // 32,
        "mmas": per_group,
        "instruction": mma.instruction,
        "sass": mma.sass,
        "fmas": _num(m * n * k),
        "warp_rows": mma.warp_tile[0],
        "warp_cols": mma.warp_tile[1],
    }


def _copy_fill(config: KernelConfig, copies, t: int) -> dict[str, Any]:
    """A k-step's TMA copies: what they bring, into which slot of the ring."""
    elems = {config.array(rc.copy.array).source: rc.rows * rc.cols for rc in copies}
    slots = max(int(config.layout.in_flight), 1)
    return {
        "a_elems": elems.get("A", 0),
        "b_elems": elems.get("B", 0),
        "bytes": fmt_bytes(sum(elems.values()) * config.element_bytes("A")),
        "instruction": copies[0].copy.instruction,
        "swizzle": copies[0].copy.swizzle_bytes,
        "slot": t % slots,
        "slots": slots,
        "ahead": slots - 1,
    }


def _which(phase: PhaseMarks, n_barriers: int, tr: Tr) -> dict[str, Any]:
    """The barrier that ends ``phase``: its name as the description gives it ('__syncthreads'),
    its number among the k-step's ``n_barriers`` barriers, and that number as a word."""
    return {
        "barrier": phase.phase.barrier,
        "number": phase.barrier + 1,
        "which": barrier_ordinal(phase.barrier, n_barriers, tr),
    }


def barrier_ordinal(index: int, n_barriers: int, tr: Tr = lambda s: s) -> str:
    """Barrier ``index`` of a k-step's ``n_barriers`` as a word: 'first', 'second', or the
    k-step's own where it has only one (no 'first' without a second)."""
    if n_barriers == 1:
        return tr(txt.ORDINAL_ONLY)
    which = txt.ORDINALS.get(index + 1)
    return tr(which) if which else tr(txt.ORDINAL_N).format(number=index + 1)


def _stores(config: KernelConfig, phase: PhaseMarks) -> list:
    """The description's shared-memory stores made during ``phase`` (resolved sites)."""
    return [rs for rs in config.sites if rs.site.kind == "store" and rs.site.phase == phase.name]


def _async_copies(config: KernelConfig, phase: PhaseMarks) -> bool:
    """Whether every store of ``phase`` is an asynchronous copy (cp.async): the threads issue
    it and go on; it lands in shared memory later, while they compute."""
    stores = _stores(config, phase)
    return bool(stores) and all(rs.site.async_copy for rs in stores)


def _staged(config: KernelConfig, phase: PhaseMarks) -> dict[str, int]:
    """Elements of A and of B the block copies into shared memory during ``phase``, per k-step
    (the description's store sites of that phase)."""
    out: dict[str, int] = {}
    for rs in _stores(config, phase):
        if rs.site.source is not None:
            arr = config.array(rs.site.array)
            elems = rs.repeat * config.threads * (rs.site.width // arr.elem_bytes)
            out[arr.source] = out.get(arr.source, 0) + elems
    return out


def _per_thread(config: KernelConfig) -> float:
    """Elements of C each thread computes."""
    rows, cols = config.launch.c_tile
    return rows * cols / config.threads


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else round(float(x), 2)


def _edge(config: KernelConfig, bx: int, by: int, tr: Tr) -> str:
    M, N, K = config.M, config.N, config.K
    rows, cols = config.launch.c_tile
    gx, gy = config.grid
    depth = config.step_depth
    parts = []
    if by == gy - 1 and M % rows:
        parts.append(tr(txt.EDGE_ROWS).format(rows=M % rows, size=rows, M=M))
    if bx == gx - 1 and N % cols:
        parts.append(tr(txt.EDGE_COLS).format(cols=N % cols, size=cols, N=N))
    if config.n_steps and K % depth:
        parts.append(tr(txt.EDGE_K).format(krem=K % depth, depth=depth, K=K))
    if not parts:
        return ""
    return tr(txt.EDGE_SHARED if config.uses_shared else txt.EDGE_NAIVE).format(
        what=tr(txt.EDGE_SEP).join(parts)
    )


def _reuse(config: KernelConfig, tr: Tr) -> tuple[str, dict]:
    issued, formula = config.issued_bytes, config.formula_bytes
    floor = dram_floor_bytes(config)
    moved = {
        "global_bytes": round(issued), "formula_bytes": round(formula), "dram_floor_bytes": floor
    }  # fmt: skip
    formula_text = config.kernel.work.formula
    loads = sum(config.staged_per_step.values()) if config.uses_shared else 0
    floor_text = tr(txt.DRAM_FLOOR).format(
        floor_formula=dram_floor_formula(config), floor=fmt_bytes(floor)
    )
    if loads:
        fmas = config.fmas_per_step
        text = tr(txt.REUSE_SHARED_TMA if config.copies else txt.REUSE_SHARED).format(
            depth=config.step_depth,
            loads=loads,
            fmas=fmas,
            uses=_num(2 * fmas / loads),  # each FMA reads one element of A and one of B
            issued=fmt_bytes(issued),
            formula_text=formula_text,
            formula=fmt_bytes(formula),
            naive=fmt_bytes(config.flops * config.element_bytes("A")),
            elem=config.element_bytes("A"),
        )
        per_step = {"loads_per_step": loads, "fmas_per_step": fmas}
        return join_sentences(text, floor_text), per_step | moved
    text = tr(txt.REUSE_NONE).format(issued=fmt_bytes(issued), formula_text=formula_text)
    return join_sentences(text, floor_text), moved


def explain(
    trace: Trace, timeline: Timeline, block: int, t_ns: int, tr: Tr = lambda s: s
) -> Explanation:
    """What ``block`` is doing at ``t_ns``, why, and the lesson section that explains it."""
    if not 0 <= block < len(trace.blocks):
        raise IndexError(f"block {block} is outside the grid of {len(trace.blocks)} blocks")
    row = trace.blocks[block]
    bx, by, sm = int(row["bx"]), int(row["by"]), int(row["smid"])
    start, end = int(row["start"]), int(row["end"])
    config = trace.config
    state, k = timeline.block_phase(block, t_ns)
    begin, stop = timeline.phase_span(block, t_ns)
    n = trace.n_tiles
    in_phase = state in (BlockState.LOADING, BlockState.COMPUTING)
    phase = timeline.phase_at(block, t_ns) if in_phase else None
    fill: dict[str, Any]  # the placeholders of one branch's template
    base = {"bx": bx, "by": by, "sm": sm, "t": k, "n": n, "threads": config.threads}
    if phase is not None:
        base["phase"] = phase.name
    smem = {"arrays": _arrays(config, staged_only=True)}
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
        "threads": config.threads,
        "step_depth": config.step_depth,
    }
    timed = True  # append txt.PHASE_TIME unless the text already gives the times
    note = ""  # after the times: where the barrier waits are (another run, another panel)

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
            one = txt.WAITING_OCCUPANCY_ONE if fit["per_sm"] == 1 else txt.WAITING_OCCUPANCY
            text = join_sentences(text, tr(one).format(**fit, limiter=limiter))
            nums["blocks_per_sm"] = int(occ["blocks_per_sm"])
        title, concept, timed = txt.TITLE_WAITING, txt.CONCEPT_WAITING, False
        nums |= {"wave": wave, "waves": waves, "start_ns": start}
    elif phase is not None:  # loading or computing, in one of the description's phases
        staged = _staged(config, phase)
        pipelined = _async_copies(config, phase)  # cp.async: issued, landing while it computes
        copies = [rc for rc in config.copies if rc.copy.phase == phase.name]
        if phase.phase.state == "loading" and copies:
            text = tr(txt.LOADING_TMA).format(**base, **smem, **_copy_fill(config, copies, k))
            after = txt.IN_PHASE_BARRIER
        elif phase.phase.state == "loading" and config.copies:
            text = tr(txt.WAITING_TMA).format(**base, **_copy_fill(config, config.copies, k))
            after = txt.IN_PHASE_BARRIER
        elif phase.phase.state == "computing" and config.mma and config.mma.from_shared:
            text = tr(txt.COMPUTING_MMA_SHARED).format(**base, **smem, **_mma_fill(config))
            if config.mma.first_warp:  # warps that only copy
                last = {"last_idle": config.mma.first_warp - 1}
                text = join_sentences(text, tr(txt.PRODUCER_IDLE).format(**last))
            after = txt.COMPUTING_BARRIER
        elif phase.phase.state == "loading" and staged and pipelined:
            fill = {"a_elems": staged.get("A", 0), "b_elems": staged.get("B", 0)}
            fill["in_flight"] = trace.layout.in_flight
            text = tr(txt.LOADING_ASYNC).format(**base, **smem, **fill)
            after = txt.LOADING_NO_BARRIER if phase.left_out else txt.LOADING_ASYNC_BARRIER
        elif phase.phase.state == "loading" and staged:
            fill = {"a_elems": staged.get("A", 0), "b_elems": staged.get("B", 0)}
            text = tr(txt.LOADING).format(**base, **smem, **fill)
            after = txt.LOADING_NO_BARRIER if phase.left_out else txt.LOADING_BARRIER
        elif phase.phase.state == "computing" and config.mma is not None:
            text = tr(txt.COMPUTING_MMA).format(**base, **smem, **_mma_fill(config))
            after = txt.COMPUTING_NO_BARRIER if phase.left_out else txt.COMPUTING_BARRIER
        elif phase.phase.state == "computing" and config.uses_shared:
            computing = sum(ph.phase.state == "computing" for ph in trace.layout.phases)
            products = _num(config.fmas_per_step / config.threads / max(computing, 1))
            text = tr(txt.COMPUTING).format(**base, **smem, products=products)
            after = txt.COMPUTING_NO_BARRIER if phase.left_out else txt.COMPUTING_BARRIER
        else:
            text = tr(txt.IN_PHASE).format(**base)
            after = txt.IN_PHASE_NO_BARRIER if phase.left_out else txt.IN_PHASE_BARRIER
        if phase.barrier >= 0:
            which = _which(phase, trace.layout.n_barriers, tr)
            text = join_sentences(text, tr(after).format(**which))
            # measured in the level-3 run, never on this time axis; a left-out barrier has none
            if len(trace.warp_blocks) and not phase.left_out:
                note = tr(txt.WAITS_ELSEWHERE).format(**which)
        title = txt.TITLE_PHASE
        loading = state == BlockState.LOADING
        concept = txt.CONCEPT_LOADING if loading else txt.CONCEPT_COMPUTING
        if not loading and config.mma is not None:
            from_shared = bool(config.mma.from_shared)
            concept = txt.CONCEPT_COMPUTING_WGMMA if from_shared else txt.CONCEPT_COMPUTING_MMA
        elif loading and config.copies:
            concept = txt.CONCEPT_LOADING_TMA
        elif loading and pipelined:
            concept = txt.CONCEPT_LOADING_ASYNC
        nums["phase"] = phase.name
    elif state == BlockState.DONE:
        fill = {"end": fmt_ns(end), "run": fmt_ns(end - start)}
        rows, cols = config.launch.c_tile
        written = written_elements(config, bx, by)
        if written < rows * cols:  # an edge block: part of its C tile lies outside C
            outside = {"tile_elems": rows * cols, "outside": rows * cols - written}
            edge = {"M": config.M, "N": config.N, **outside}
            text = tr(txt.DONE_EDGE).format(**base, **fill, **edge, c_elems=written)
        else:
            text = tr(txt.DONE).format(**base, **fill, c_elems=written)
        title, concept, timed = txt.TITLE_DONE, txt.CONCEPT_DONE, False
        nums |= {"run_ns": end - start, "c_written": written}
    elif (prow := timeline.phase_row(block)) is not None:  # a sampled block outside its phases
        marks = trace.marks[prow]  # (k-steps, marks)
        if t_ns < marks[0].min():
            text = tr(txt.PROLOGUE).format(**base, next=fmt_ns(int(marks[0].min())))
            title, concept = txt.TITLE_PROLOGUE, txt.CONCEPT_PROLOGUE
        elif t_ns >= marks[-1].max():
            text = tr(txt.EPILOGUE).format(**base)
            title, concept = txt.TITLE_EPILOGUE, txt.CONCEPT_EPILOGUE
        else:  # between two k-steps of a channel whose steps do not follow at once
            done = int(np.count_nonzero(marks.max(axis=1) <= t_ns))
            text = tr(txt.BETWEEN_STEPS).format(**base, done=done)
            title, concept = txt.TITLE_RUNNING, txt.CONCEPT_RUNNING
    elif config.kstep is not None:
        every = trace.manifest.get("sampling", {}).get("phase_every")
        if not isinstance(every, int):
            every = max(1, round(len(trace.blocks) / max(len(trace.phase_blocks), 1)))
        sampled = len(trace.phase_blocks) > 0
        text = tr(txt.RUNNING_SAMPLED if sampled else txt.RUNNING_NO_PHASES).format(
            **base, **span, every=every
        )
        title, concept, timed = txt.TITLE_RUNNING, txt.CONCEPT_RUNNING, False
    else:
        M, N, K = trace.shape
        per_thread = _per_thread(config)
        loads = config.issued_bytes / config.element_bytes("A") / (M * N) * per_thread
        fill = {"kernel": trace.kernel, "K": K, "loads": _num(loads), "fmas": _num(K * per_thread)}
        text = tr(txt.RUNNING_NO_STEPS).format(**base, **span, **fill)
        title, concept, timed = txt.TITLE_RUNNING, txt.CONCEPT_NO_STEPS, False

    if timed:
        text = join_sentences(text, tr(txt.PHASE_TIME).format(**span))
    if phase is not None and (overlap := _overlap(trace, block, t_ns, phase, tr)):
        text = join_sentences(text, overlap)
    if note:
        text = join_sentences(text, note)
    reuse, extra = _reuse(config, tr)
    nums |= extra
    paragraphs = [text, reuse, _edge(config, bx, by, tr)]
    body = "\n\n".join(p for p in paragraphs if p)
    return Explanation(tr(title).format(**base), body, tr(concept), nums)


def _overlap(trace: Trace, block: int, t_ns: int, phase: PhaseMarks, tr: Tr) -> str:
    """The other channels' phases ``block`` ran at ``t_ns`` (a pipeline's copies beside its
    compute), from its own marks; "" with one channel or nothing else running."""
    layout, row = trace.layout, trace.phase_row(block)
    if len(layout.channels) < 2 or row is None:
        return ""
    marks = trace.marks[row]
    parts = []
    for other in layout.phases:
        if other.channel == phase.channel:
            continue
        steps = np.flatnonzero((marks[:, other.begin] <= t_ns) & (t_ns < marks[:, other.end]))
        if len(steps):
            listed = ", ".join(str(int(s)) for s in steps)
            parts.append(tr(txt.OVERLAP).format(other=tr(other.phase.name), steps=listed,
                                                in_flight=layout.in_flight))  # fmt: skip
    return " ".join(parts)


def diagnostics_slowdown_pct(trace: Trace) -> float | None:
    """How much slower (%) the separate level-3 run that measured the barrier waits was than
    the run the timeline comes from (its instrumented time where stored, else the plain one);
    None when the trace does not say (simulated traces)."""
    stats = trace.manifest.get("stats", {})
    diag = stats.get("diagnostics_ms")
    base = stats.get("instrumented_ms_median") or stats.get("time_ms_median")
    if isinstance(diag, (int, float)) and isinstance(base, (int, float)) and base > 0:
        return 100.0 * (diag / base - 1.0)
    pct = stats.get("diagnostics_overhead_pct")
    return float(pct) if isinstance(pct, (int, float)) else None


@dataclass(frozen=True)
class BarrierWaits:
    """Per-warp waits at each barrier of one k-step of one block, from the level-3 run.

    ``waits[w, i]`` is how long warp w waited at ``barriers[i]`` (ns); the warp that arrived
    last waited least (``last[i]``). ``block`` is the block shown: the selected one when its
    warps were sampled, else the nearest sampled block (``block != requested``).
    """

    requested: int
    block: int
    ktile: int
    barriers: tuple[PhaseMarks, ...]
    waits: np.ndarray
    last: tuple[int, ...]
    max_ns: tuple[int, ...]
    mean_ns: tuple[float, ...]

    @property
    def substituted(self) -> bool:
        return self.block != self.requested


def barrier_waits(timeline: Timeline, block: int, ktile: int) -> BarrierWaits | None:
    """The waits of ``block`` (or the nearest sampled block) at k-step ``ktile`` (clipped to the
    trace's k-steps); None when no block's warps were sampled or the kernel has no barrier."""
    trace = timeline.trace
    barriers = tuple(
        sorted((ph for ph in trace.layout.phases if ph.barrier >= 0), key=lambda ph: ph.barrier)
    )
    shown = timeline.nearest_warp_block(block)
    if shown is None or not barriers or timeline.n_tiles <= 0:
        return None
    k = min(max(int(ktile), 0), timeline.n_tiles - 1)
    found = timeline.waits_at(shown, k)
    if found is None:
        return None
    waits = np.asarray(found)[:, [ph.barrier for ph in barriers]]
    return BarrierWaits(
        requested=int(block),
        block=shown,
        ktile=k,
        barriers=barriers,
        waits=waits,
        last=tuple(int(np.argmin(waits[:, i])) for i in range(len(barriers))),
        max_ns=tuple(int(waits[:, i].max()) for i in range(len(barriers))),
        mean_ns=tuple(float(waits[:, i].mean()) for i in range(len(barriers))),
    )


def _shape_text(arr) -> str:
    """'As[32][32 + 1]': the declaration, padding shown apart."""
    cols = f"{arr.cols} + {arr.pad}" if arr.pad else str(arr.cols)
    return f"{arr.name}[{arr.rows}][{cols}]"


def _worst_conflict(trace: Trace) -> tuple[int, str]:
    probe = trace.probe
    degree = np.zeros(len(probe), np.int64)
    for width in np.unique(probe["width"]):
        mine = probe["width"] == width
        degree[mine] = banks.conflict_degree(probe["offsets"][mine], int(width))
    worst = int(np.argmax(degree))
    return int(degree[worst]), str(probe["site"][worst])


def shared_reuse(config: KernelConfig) -> dict[str, Any] | None:
    """Multiply-adds per value read from shared memory in one k-step, per thread and per
    block, from the description's load sites (§13, §18: what register tiling raises)."""
    if not config.kstep or not config.threads:
        return None
    reads = sum(
        rs.repeat * rs.site.width // config.array(rs.site.array).elem_bytes
        for rs in config.sites
        if rs.site.kind == "load"
    )
    if not reads:
        return None
    fmas = config.fmas_per_step / config.threads
    return {
        "depth": config.step_depth,
        "fmas": _num(fmas),
        "reads": reads,
        "ratio": f"{fmas / reads:.2f}",
        "block_fmas": f"{config.fmas_per_step:,}",
        "block_reads": f"{reads * config.threads:,}",
    }


def simulation_check(trace: Trace) -> dict[str, str] | None:
    """How the model fared against this kernel's measured configurations (the device file's
    ``validation``, which the simulated trace carries), as text fields; None where it has no
    such check. Without ``n``: every configuration timed ran an earlier version of the kernel's
    code (``earlier`` of them), so the model is not checked against today's."""
    details = trace.manifest.get("details")  # free-form: any JSON a file holds
    model = details.get("model") if isinstance(details, dict) else None
    check = model.get("validation") if isinstance(model, dict) else None
    if not isinstance(check, dict) or not isinstance(check.get("kernels"), dict):
        return None
    kernel = check["kernels"].get(trace.kernel)
    if not isinstance(kernel, dict):
        return None
    try:
        n, earlier = int(kernel["configurations"]), int(kernel.get("earlier_code", 0))
        fields = {"size": str(int(check["size"])), "earlier": str(earlier)}
        if n == 0:
            return fields if earlier > 0 else None
        return fields | {
            "n": str(n),
            "within": str(int(kernel["within"])),
            "tolerance": f"{100 * float(check['tolerance']):.0f}",
            "low": f"{float(kernel['ratio_min']):.2f}",
            "high": f"{float(kernel['ratio_max']):.2f}",
            "median": f"{float(kernel['ratio_median']):.2f}",
        }
    except (KeyError, TypeError, ValueError, OverflowError):  # an older trace or device file,
        return None  # or a figure that is not finite: nothing said


def trace_facts(trace: Trace, tr: Tr = lambda s: s) -> list[str]:
    """Kernel-level sentences for an info box: speed, waves, occupancy, memory, banks."""
    m = trace.manifest
    stats = m.get("stats", {})
    device = m["device"].get("name", "unknown GPU")
    M, N, K = trace.shape
    config = trace.config
    facts = []
    if trace.is_simulated:
        facts.append(tr(txt.FACT_SIMULATED).format(device=device))
        checked = simulation_check(trace)
        if checked is not None and "n" in checked:
            facts.append(tr(txt.FACT_SIMULATED_CHECKED).format(device=device, **checked))
        elif checked is not None:
            facts.append(tr(txt.FACT_SIMULATED_UNCHECKED).format(device=device, **checked))
    else:
        timer = m["timer"].get("name", "?") if isinstance(m["timer"], dict) else m["timer"]
        facts.append(tr(txt.FACT_RECORDED).format(device=device, timer=timer))

    ms = stats.get("time_ms_median")
    gflops = None  # the run's rate, where it was timed
    if isinstance(ms, (int, float)) and ms > 0:
        gflops = metrics.achieved_gflops(trace)
        cublas = stats.get("cublas_gflops") or m["device"].get("cublas_fp32_gflops")
        rate = {"gflops": f"{gflops:.1f}", "M": M, "N": N, "K": K, "time": fmt_ns(ms * 1e6)}
        if cublas:
            pct = f"{100 * gflops / cublas:.1f}"
            facts.append(tr(txt.FACT_RATE).format(**rate, pct=pct, cublas=f"{cublas:.0f}"))
        else:
            facts.append(tr(txt.FACT_RATE_ONLY).format(**rate))
        cost = metrics.timeline_cost(trace)  # what the record cost the times on the timeline
        if cost is not None:
            pct = f"{cost.overhead_pct:+.1f}%"
            text = tr(txt.FACT_TIMELINE_COST).format(level=cost.level, pct=pct)
            if cost.min_blocks:
                bound = blocks_per_sm(cost.min_blocks, cost.min_blocks, tr)
                text += " " + tr(txt.FACT_TIMELINE_BOUNDED).format(per_sm=bound)
            if cost.denser is not None:
                n, denser = cost.denser
                thinned = (
                    txt.FACT_TIMELINE_THINNED_ALL if n == 1 else txt.FACT_TIMELINE_THINNED_SOME
                )
                text += " " + tr(thinned).format(n=n, denser=f"{denser:+.1f}%", every=cost.every)
            slow = metrics.stamping_slowdown(trace)
            if slow is not None and slow.extra_ns > 0:
                one = slow.most_on_one_sm == 1
                tail = txt.FACT_STAMPING_TAIL_ONE if one else txt.FACT_STAMPING_TAIL
                text += " " + tr(tail).format(
                    extra=fmt_ns(slow.extra_ns), most=slow.most_on_one_sm,
                    share=f"{slow.slowest_sm_pct:.1f}%",
                )  # fmt: skip
            facts.append(text)

    per_sm = metrics.blocks_per_sm_histogram(trace)
    used = per_sm[per_sm > 0]
    resident = metrics.max_resident(trace)
    waves = -(-len(trace.blocks) // resident) if resident else 0  # metrics.waves, reusing resident
    fill: dict[str, Any] = {
        "blocks": len(trace.blocks),
        "waves": waves,
        "resident": resident,
        "sms": len(used),
    }
    lo, hi = (int(used.min()), int(used.max())) if len(used) else (0, 0)
    fill["per_sm"] = blocks_per_sm(lo, hi, tr)
    facts.append(tr(txt.FACT_WAVES if waves > 1 else txt.FACT_ONE_WAVE).format(**fill))
    occ = m.get("occupancy")
    if occ:
        limiter = tr(txt.LIMITERS.get(occ["limiter"], occ["limiter"]))
        facts.append(
            tr(txt.FACT_OCCUPANCY_ONE if occ["blocks_per_sm"] == 1 else txt.FACT_OCCUPANCY).format(
                per_sm=occ["blocks_per_sm"], limiter=limiter, registers=occ["registers"]
            )
        )
    level0 = (m.get("geometry") or {}).get("registers", {}).get("level_0")
    if level0 and (not occ or level0 != occ.get("registers")):
        facts.append(tr(txt.FACT_REGISTERS).format(registers=level0))
    issue = issue_ceiling(config, m["device"])
    if issue is not None and gflops is not None:
        loop = issue.loop
        facts.append(tr(txt.FACT_ISSUE_CEILING).format(
            instructions=f"{loop.instructions:,g}", fmas=f"{loop.math:,g}",
            share=f"{loop.math_share:.1f}", ceiling=f"{issue.gflops:,.0f}",
            peak=f"{issue.peak_gflops:,.0f}", reached=f"{100.0 * gflops / issue.gflops:.0f}",
        ))  # fmt: skip

    if config.uses_shared:
        arrays = ", ".join(_shape_text(arr) for arr in config.shared)
        padding = sum(arr.padding_bytes for arr in config.shared)
        fill = {"arrays": arrays, "smem": f"{config.smem_bytes} B"}  # the lesson's unit: bytes
        if padding:
            facts.append(tr(txt.FACT_SMEM_PAD).format(**fill, padding=f"{padding} B"))
        else:
            facts.append(tr(txt.FACT_SMEM).format(**fill))
        reuse = shared_reuse(config)
        if reuse is not None:
            facts.append(tr(txt.FACT_REUSE).format(**reuse))
        ceiling = shared_ceiling(config, m["device"])
        if ceiling is not None:
            above = ceiling.gflops > ceiling.peak_gflops
            text = txt.FACT_SHARED_CEILING_ABOVE if above else txt.FACT_SHARED_CEILING
            facts.append(tr(text).format(
                wavefronts=f"{ceiling.wavefronts:,}", flop=f"{ceiling.flop:,}",
                per=f"{ceiling.flop_per_wavefront:.0f}", ceiling=f"{ceiling.gflops:,.0f}",
                sms=ceiling.sm_count, clock=f"{ceiling.clock_mhz:.0f}",
                pct=f"{ceiling.pct_of_peak:.0f}", peak=f"{ceiling.peak_gflops:,.0f}",
            ))  # fmt: skip
    else:
        facts.append(tr(txt.FACT_NO_SMEM).format(kernel=trace.kernel))
    issued, formula = fmt_bytes(config.issued_bytes), fmt_bytes(config.formula_bytes)
    facts.append(
        tr(txt.FACT_GLOBAL_TMA if config.copies else txt.FACT_GLOBAL).format(
            issued=issued,
            formula=formula,
            formula_text=config.kernel.work.formula,
            floor_formula=dram_floor_formula(config),
            floor=fmt_bytes(dram_floor_bytes(config)),
        )
    )
    measured = measured_bytes(m)
    if measured is not None:
        keys = ("l1_global_load_bytes", "l2_bytes", "dram_read_bytes")
        l1, l2, dram = (fmt_bytes(measured[k]) for k in keys)
        where = measured.get("device", device)
        ab = fmt_bytes(inputs_bytes(config))
        fill = {"device": where, "l1": l1, "l2": l2, "dram": dram, "ab": ab}
        if isinstance(measured.get("copy_engine_load_bytes"), (int, float)):
            copies = fmt_bytes(measured["copy_engine_load_bytes"])
            facts.append(tr(txt.FACT_MEASURED_COPIES).format(**fill, copies=copies))
        else:
            facts.append(tr(txt.FACT_MEASURED).format(**fill))
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

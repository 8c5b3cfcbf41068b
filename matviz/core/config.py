"""A kernel at given parameters and problem shape, and where its k-step sits in a trace.

:class:`KernelConfig` derives everything the rest of matviz needs from a description
(:mod:`matviz.core.kernel`): launch geometry, shared-array layout, probe slots, program order,
work, compile defines and the manifest's ``description`` section. :class:`StepLayout` locates
marks and phases in a trace's ``marks`` from that section alone, so a trace reads the same
whether or not this matviz knows its kernel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from matviz.core.kernel import (
    DYNAMIC_SMEM_LIMIT,
    INPUT_BYTES,
    LEVELS,
    MAX_GRID_X,
    MAX_GRID_Y,
    MAX_INDEX,
    MAX_THREADS_PER_BLOCK,
    STATIC_SMEM_LIMIT,
    WARP,
    BulkCopy,
    GlobalAccess,
    Kernel,
    KStep,
    Lanes,
    Launch,
    Mma,
    Params,
    ParamValue,
    Phase,
    SharedArray,
    Site,
    Where,
    cdiv,
    resolved,
    value_of,
)
from matviz.errors import MatvizError, RefusedConfiguration


@dataclass(frozen=True)
class PhaseMarks:
    """A phase located in the trace's ``marks``: the indices of its begin and end marks."""

    phase: Phase
    begin: int
    end: int
    channel: int
    barrier: int  # index in barrier_wait's last axis, -1 if no barrier ends the phase
    left_out: bool = False  # its barrier is in the source but left out on purpose in this run

    @property
    def name(self) -> str:
        return self.phase.name


@dataclass(frozen=True)
class StepLayout:
    """Where each mark and phase of a k-step sits in a trace's ``marks`` (rows, steps, marks).

    Built from the description's ``kstep`` section as a manifest stores it, so a trace is read
    the same whether or not this matviz knows its kernel.
    """

    marks: tuple[str, ...] = ()
    channels: tuple[tuple[int, ...], ...] = ()
    phases: tuple[PhaseMarks, ...] = ()
    chained: bool = True
    in_flight: int = 1  # k-steps whose phases overlap (a pipeline's stages)

    @classmethod
    def of(cls, kstep: Mapping[str, Any] | None) -> StepLayout:
        if not kstep:
            return cls()
        names = tuple(str(m) for channel in kstep["channels"] for m in channel)
        channels, start = [], 0
        for channel in kstep["channels"]:
            channels.append(tuple(range(start, start + len(channel))))
            start += len(channel)
        phases, barrier = [], 0
        for ph in kstep["phases"]:
            phase = Phase(ph["name"], ph["begin"], ph["end"], ph["state"], ph.get("barrier") or "")
            begin, end = names.index(phase.begin), names.index(phase.end)
            channel = next(i for i, ch in enumerate(channels) if begin in ch)
            index = barrier if phase.barrier else -1
            left_out = bool(ph.get("barrier_left_out", False))
            phases.append(PhaseMarks(phase, begin, end, channel, index, left_out))
            barrier += bool(phase.barrier)
        return cls(
            names,
            tuple(channels),
            tuple(phases),
            bool(kstep.get("chained", True)),
            int(kstep.get("in_flight", 1)),
        )

    @property
    def n_barriers(self) -> int:
        return sum(ph.barrier >= 0 for ph in self.phases)


@dataclass(frozen=True)
class ResolvedCopy:
    copy: BulkCopy
    rows: int  # the box, as the matrix lies in memory
    cols: int

    @property
    def name(self) -> str:
        return self.copy.name


@dataclass(frozen=True)
class ResolvedSite:
    site: Site
    repeat: int
    slot: int  # first probe slot; instance k uses slot + k

    @property
    def name(self) -> str:
        return self.site.name


# The level-3 probe keeps the values its warp read in the first VALUE_TILES k-steps (the read
# race of a missing barrier shows in a few; a bound keeps the buffer small at any K).
VALUE_TILES = 256
# trace.cuh's forms of the level-2 marks: kept in the stamping warp's lanes and flushed, stored
# as they are taken (MV_STAMP_STORE), or the lanes with a step's middle mark held in shared
# memory (MV_STAMP_HELD; only for a channel of three marks)
STAMP_FORMS = ("lanes", "store", "held")


class KernelConfig:
    """A kernel at given parameters and problem shape: everything derived from its description."""

    def __init__(self, kernel: Kernel, params: Mapping[str, ParamValue], M: int, N: int, K: int):
        self.kernel = kernel
        self.params = dict(params)
        self.p = Params(self.params)
        self.M, self.N, self.K = M, N, K

    def __repr__(self) -> str:
        return f"KernelConfig({self.kernel.name}, {self.params}, {self.M}x{self.N}x{self.K})"

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two configurations the same: description, parameters and shape."""
        return (self.kernel, tuple(sorted(self.params.items())), self.M, self.N, self.K)

    @property
    def broken(self) -> list[str]:
        """The parameters set to a value that breaks the kernel on purpose (wrong results are
        expected), e.g. ``["drop_sync"]``."""
        return [n for n, v in self.params.items() if v in self.kernel.param(n).broken]

    # -- geometry ---------------------------------------------------------------------------
    @cached_property
    def launch(self) -> Launch:
        return self.kernel.launch(self.p, self.M, self.N, self.K)

    @property
    def grid(self) -> tuple[int, int]:
        return self.launch.grid

    @property
    def block(self) -> tuple[int, int]:
        return self.launch.block

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def warps(self) -> int:
        return cdiv(self.threads, WARP)

    @property
    def n_blocks(self) -> int:
        return self.grid[0] * self.grid[1]

    @cached_property
    def shared(self) -> tuple[SharedArray, ...]:
        return tuple(self.kernel.shared(self.p))

    @property
    def uses_shared(self) -> bool:
        return bool(self.shared)

    @cached_property
    def array_bases(self) -> dict[str, int]:
        """Byte offset of each shared array inside the kernel's one shared struct."""
        bases, end = {}, 0
        for arr in self.shared:
            start = cdiv(end, arr.align) * arr.align
            bases[arr.name] = start
            end = start + arr.nbytes
        return bases

    @property
    def smem_bytes(self) -> int:
        """The shared struct's size: the arrays, then the kernel's 8-byte mbarriers."""
        end = 0
        if self.shared:
            last = self.shared[-1]
            end = self.array_bases[last.name] + last.nbytes
        barriers = value_of(self.kernel.mbarriers, self.p)
        return cdiv(end, 8) * 8 + 8 * barriers if barriers else end

    @cached_property
    def copies(self) -> tuple[ResolvedCopy, ...]:
        """The k-step's TMA copies with their box sizes."""
        return tuple(
            ResolvedCopy(c, value_of(c.rows, self.p), value_of(c.cols, self.p))
            for c in self.kernel.copies
        )

    def copied_matrices(self) -> dict[str, ResolvedCopy]:
        """The matrices (A, B) that TMA copies, each with its copy."""
        return {self.array(rc.copy.array).source: rc for rc in self.copies}

    def array(self, name: str) -> SharedArray:
        for arr in self.shared:
            if arr.name == name:
                return arr
        raise KeyError(name)

    # -- k-steps ----------------------------------------------------------------------------
    @property
    def kstep(self) -> KStep | None:
        return resolved(self.kernel.kstep, self.p)

    @property
    def step_depth(self) -> int:
        return value_of(self.kstep.depth, self.p) if self.kstep else 0

    @property
    def n_steps(self) -> int:
        """k-steps every block walks through (0: the kernel has no k-steps)."""
        return cdiv(self.K, self.step_depth) if self.kstep else 0

    @property
    def stamp_forms(self) -> tuple[str, ...]:
        """The forms of the level-2 marks worth building for this kernel: "held" changes only
        a channel of three marks, and its static shared word would move shared memory sized at
        launch (tiles aligned to 1024 bytes by 1 KiB, past the limit at the largest)."""
        channels = self.kstep.channels if self.kstep else ()
        held = any(len(marks) == 3 for marks in channels) and not self.dynamic_shared
        return STAMP_FORMS if held else tuple(f for f in STAMP_FORMS if f != "held")

    @property
    def marks(self) -> tuple[str, ...]:
        return self.kstep.marks if self.kstep else ()

    @property
    def n_barriers(self) -> int:
        return len(self.kstep.barriers) if self.kstep else 0

    def left_out(self, phase: Phase) -> bool:
        """Whether ``phase``'s barrier is left out on purpose at these parameters (it still
        counts among the k-step's barriers: the source has it, behind a switch)."""
        when = phase.left_out_when
        return bool(phase.barrier and when and self.params.get(when[0]) == when[1])

    @cached_property
    def layout(self) -> StepLayout:
        return StepLayout.of(self.describe()["kstep"])

    def mark_index(self, name: str) -> int:
        return self.layout.marks.index(name)

    @property
    def phases(self) -> tuple[PhaseMarks, ...]:
        """The k-step's phases with their mark indices, channels and barrier indices."""
        return self.layout.phases

    @property
    def channel_marks(self) -> tuple[tuple[int, ...], ...]:
        """Mark indices of each channel, in stamp order."""
        return self.layout.channels

    # -- access sites -----------------------------------------------------------------------
    @cached_property
    def sites(self) -> tuple[ResolvedSite, ...]:
        """Sites with their repeat counts and probe slots (site-major: slot + k)."""
        out, slot = [], 0
        for site in self.kernel.sites_at(self.params):
            repeat = value_of(site.repeat, self.p)
            out.append(ResolvedSite(site, repeat, slot))
            slot += repeat
        return tuple(out)

    def site(self, name: str) -> ResolvedSite:
        for rs in self.sites:
            if rs.name == name:
                return rs
        raise KeyError(name)

    @property
    def probe_slots(self) -> int:
        return sum(rs.repeat for rs in self.sites)

    @property
    def value_tiles(self) -> int:
        """k-steps whose read values the level-3 probe keeps."""
        return min(self.n_steps, VALUE_TILES)

    @cached_property
    def program(self) -> tuple[tuple[str, int], ...]:
        """(site, k) in the order one warp executes them in one k-step.

        Phases in k-step order; inside a phase, instances interleave in proportion to their
        repeat counts (k / repeat), ties in declaration order: a site repeated 8 times per step
        next to one repeated 64 times runs once per 8 of the other.
        """
        phase_order = {ph.name: i for i, ph in enumerate(self.kstep.phases)} if self.kstep else {}
        longest = max((rs.repeat for rs in self.sites), default=1)
        keys = []
        for decl, rs in enumerate(self.sites):
            phase = phase_order.get(rs.site.phase, len(phase_order))
            for k in range(rs.repeat):
                keys.append(((phase, k * longest // rs.repeat, decl, k), (rs.name, k)))
        return tuple(item for _, item in sorted(keys))

    # -- global memory ----------------------------------------------------------------------
    @cached_property
    def global_accesses(self) -> tuple[tuple[GlobalAccess, int], ...]:
        """Every global load and store with its repeat count: the loads that feed shared
        stores (named after the store they feed), then the description's own."""
        out = []
        for rs in self.sites:
            if rs.site.kind == "store" and rs.site.source is not None:
                matrix = self.array(rs.site.array).source
                # one load feeds `group` consecutive store instances (a float4 stored as 4)
                group = rs.site.loaded_width // rs.site.width
                source = rs.site.source
                at = source if group == 1 else _every(source, group)
                name = f"ld_{matrix} → {rs.name}"
                lands_in = rs.name if rs.site.async_copy and group == 1 else None
                access = GlobalAccess(
                    name, "load", matrix, at, width=rs.site.loaded_width, lands_in=lands_in
                )
                out.append((access, rs.repeat // group))
        out += [(g, value_of(g.repeat, self.p)) for g in self.kernel.global_accesses]
        return tuple(out)

    def matrix_layout(self, matrix: str) -> str:
        """'row' (row-major, the default) or 'col' (column-major)."""
        return str(self.kernel.layouts(self.p).get(matrix, "row"))

    @cached_property
    def input_dtype(self) -> str:
        """The element type of A and B in memory (C is always float32)."""
        dtype = str(self.kernel.inputs(self.p))
        if dtype not in INPUT_BYTES:
            raise MatvizError(f"kernel {self.kernel.name}: inputs of type {dtype} are not known")
        return dtype

    def element_bytes(self, matrix: str) -> int:
        return 4 if matrix == "C" else INPUT_BYTES[self.input_dtype]

    @cached_property
    def mma(self) -> Mma | None:
        """The Tensor Core MMA a warp issues, or None for a CUDA-core (FFMA) kernel."""
        return self.kernel.mma(self.p) if self.kernel.mma else None

    def matrix_shape(self, matrix: str) -> tuple[int, int]:
        return {"A": (self.M, self.K), "B": (self.K, self.N), "C": (self.M, self.N)}[matrix]

    # -- work -------------------------------------------------------------------------------
    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def formula_bytes(self) -> float:
        return float(self.kernel.work.formula_bytes(self.p, self.M, self.N, self.K))

    @property
    def issued_bytes(self) -> float:
        return float(self.kernel.work.issued_bytes(self.p, self.M, self.N, self.K))

    @property
    def fmas_per_step(self) -> int:
        """Multiply-adds one block does per k-step (a full C tile times the step depth)."""
        rows, cols = self.launch.c_tile
        return rows * cols * self.step_depth

    @cached_property
    def staged_per_step(self) -> dict[str, int]:
        """Elements of A and of B one block copies into shared memory per k-step."""
        out: dict[str, int] = {}
        for rs in self.sites:
            if rs.site.kind == "store" and rs.site.source is not None:
                arr = self.array(rs.site.array)
                per_lane = rs.site.width // arr.elem_bytes
                out[arr.source] = out.get(arr.source, 0) + rs.repeat * self.threads * per_lane
        for matrix, rc in self.copied_matrices().items():
            out[matrix] = out.get(matrix, 0) + rc.rows * rc.cols
        return out

    # -- checks and build -------------------------------------------------------------------
    @property
    def dynamic_shared(self) -> bool:
        """The shared struct is sized at launch (dynamic shared memory), not static."""
        return bool(resolved(self.kernel.dynamic_shared, self.p))

    @property
    def smem_limit(self) -> int:
        """Shared memory a block of this kernel may have: 48 KiB of static arrays, or what
        sm_90 lets a block opt in to where the kernel sizes its shared memory at launch."""
        return DYNAMIC_SMEM_LIMIT if self.dynamic_shared else STATIC_SMEM_LIMIT

    def check(self, smem_limit: int | None = None) -> KernelConfig:
        """Raise a one-line MatvizError unless this configuration can launch (on a device
        whose blocks may have ``smem_limit`` bytes of shared memory, where given)."""
        M, N, K = self.M, self.N, self.K
        for rule in self.kernel.shape_rules:
            if not rule.holds(self.p, M, N, K):
                raise RefusedConfiguration(self.kernel.name, rule.message, {"M": M, "N": N, "K": K})
        for label, size in (("M*K", M * K), ("K*N", K * N), ("M*N", M * N)):
            if size > MAX_INDEX:
                raise MatvizError(
                    f"{label} = {size} elements is more than the kernels' 32-bit indexing allows"
                )
        gx, gy = self.grid
        if gy > MAX_GRID_Y:
            raise MatvizError(
                f"M={M} needs {gy} block rows; CUDA allows {MAX_GRID_Y} "
                f"(use a larger tile or a smaller M)"
            )
        if gx > MAX_GRID_X:
            raise MatvizError(f"N={N} needs {gx} block columns; CUDA allows {MAX_GRID_X}")
        if self.threads > MAX_THREADS_PER_BLOCK:
            raise MatvizError(
                f"{self.threads} threads per block is more than the limit of "
                f"{MAX_THREADS_PER_BLOCK}"
            )
        smem_limit = min(self.smem_limit, smem_limit or self.smem_limit)
        if self.smem_bytes > smem_limit:
            raise MatvizError(
                f"{self.smem_bytes} bytes of shared memory per block is more than the "
                f"limit of {smem_limit}"
            )
        return self

    def defines(self, level: int, stamp_form: str = "lanes") -> list[str]:
        """The ``-DNAME=VALUE`` list for nvcc and NVRTC: parameters, level, probe slots,
        barriers, channels per k-step and the marks of each; ``stamp_form``: how the level-2
        build keeps its marks (STAMP_FORMS; trace.cuh's MV_STAMP_STORE and
        MV_STAMP_HELD)."""
        if level not in LEVELS:
            allowed = ", ".join(map(str, LEVELS))
            raise MatvizError(f"level {level} is not a trace level (allowed: {allowed})")
        if stamp_form not in STAMP_FORMS:
            raise MatvizError(f"stamp form must be one of {', '.join(STAMP_FORMS)}")
        out = [f"-D{self.kernel.param(n).define}={v}" for n, v in self.params.items()]
        out.append(f"-DMV_LEVEL={level}")
        if self.sites:
            out += [f"-DMV_SITE_{rs.name}={rs.slot}" for rs in self.sites]
            out.append(f"-DMV_PROBE_SLOTS={self.probe_slots}")
            out.append(f"-DMV_VALUE_TILES={VALUE_TILES}")
        if self.n_barriers:
            out.append(f"-DMV_BARRIERS={self.n_barriers}")
        if self.kstep:
            out.append(f"-DMV_CHANNELS={len(self.kstep.channels)}")
            out += [f"-DMV_MARKS_{c}={len(marks)}" for c, marks in enumerate(self.kstep.channels)]
        if self.dynamic_shared:
            out.append(f"-DMV_SMEM_BYTES={self.smem_bytes}")
        if stamp_form != "lanes":
            out.append(f"-DMV_STAMP_{stamp_form.upper()}=1")
        return out

    def lanes(self, warp: int, block: tuple[int, int] = (0, 0), t: int = 0, k: int = 0) -> Lanes:
        return self._lanes(warp, warp * WARP + np.arange(WARP), block, t, k)

    def block_lanes(self, block: tuple[int, int] = (0, 0), t: int = 0) -> Lanes:
        """Every lane of the block's warps, warp after warp (k = 0)."""
        tid = np.arange(self.warps * WARP)
        return self._lanes(tid // WARP, tid, block, t, 0)

    def _lanes(
        self, warp: int | np.ndarray, tid: np.ndarray, block: tuple[int, int], t: int, k: int
    ) -> Lanes:
        bx_threads = self.block[0]
        return Lanes(
            warp=warp,
            tid=tid,
            tx=tid % bx_threads,
            ty=tid // bx_threads,
            active=tid < self.threads,
            bx=int(block[0]),
            by=int(block[1]),
            t=int(t),
            k=int(k),
        )

    def describe(self) -> dict[str, Any]:
        """The description at these parameters, as the manifest's ``description`` section."""
        k = self.kernel
        kstep = None
        if self.kstep:
            kstep = {
                "depth": self.step_depth,
                "count": self.n_steps,
                "channels": [list(ch) for ch in self.kstep.channels],
                "phases": [
                    {
                        "name": ph.name,
                        "begin": ph.begin,
                        "end": ph.end,
                        "state": ph.state,
                        "barrier": ph.barrier,
                        "barrier_left_out": self.left_out(ph),
                    }
                    for ph in self.kstep.phases
                ],  # fmt: skip
                "chained": self.kstep.chained,
                "in_flight": value_of(self.kstep.in_flight, self.p),
            }
        return {
            "number": k.number,
            "name": k.name,
            "title": k.title,
            "concept": k.concept,
            "sections": k.sections,
            "params": [
                {
                    "name": p.name,
                    "value": self.params[p.name],
                    "values": list(p.values),
                    "label": p.label,
                    "define": p.define,
                    "broken": list(p.broken),
                    "layout": p.layout,
                }
                for p in k.params
            ],  # fmt: skip
            "launch": {
                "grid": list(self.grid),
                "block": list(self.block),
                "c_tile": list(self.launch.c_tile),
            },
            "shared": [
                {
                    "name": a.name,
                    "rows": a.rows,
                    "cols": a.cols,
                    "pad": a.pad,
                    "elem_bytes": a.elem_bytes,
                    "dtype": a.dtype,
                    "source": a.source,
                    "base": self.array_bases[a.name],
                    "swizzle": a.swizzle_text,
                }
                for a in self.shared
            ],  # fmt: skip
            "sites": [
                {
                    "name": rs.name,
                    "kind": rs.site.kind,
                    "array": rs.site.array,
                    "phase": rs.site.phase,
                    "width": rs.site.width,
                    "repeat": rs.repeat,
                    "slot": rs.slot,
                }
                for rs in self.sites
            ],  # fmt: skip
            "copies": [
                {
                    "name": rc.name,
                    "array": rc.copy.array,
                    "phase": rc.copy.phase,
                    "rows": rc.rows,
                    "cols": rc.cols,
                    "swizzle_bytes": rc.copy.swizzle_bytes,
                    "instruction": rc.copy.instruction,
                }
                for rc in self.copies
            ],  # fmt: skip
            "mbarriers": value_of(self.kernel.mbarriers, self.p),
            "arch": self.kernel.arch,
            "kstep": kstep,
            "inputs": self.input_dtype,
            "mma": self._describe_mma(),
            "work": {
                "flops": self.flops,
                "formula": k.work.formula,
                "formula_bytes": self.formula_bytes,
                "issued_bytes": self.issued_bytes,
            },
        }

    def _describe_mma(self) -> dict[str, Any] | None:
        mma = self.mma
        if mma is None:
            return None
        return {
            "instruction": mma.instruction,
            "sass": mma.sass,
            "shape": list(mma.shape),
            "warps": list(mma.warps),
            "warp_tile": list(mma.warp_tile),
            "from_shared": list(mma.from_shared),
            "group_threads": mma.group_threads,
            "first_warp": mma.first_warp,
            "fragments": [
                {
                    "operand": f.operand,
                    "rows": f.rows,
                    "cols": f.cols,
                    "dtype": f.dtype,
                    "elements": f.elements().tolist(),
                }
                for f in mma.fragments
            ],  # fmt: skip
        }


def _every(source: Where, group: int) -> Where:
    """``source`` at instance k x ``group``: the first of the stores one global load feeds."""
    return lambda lanes, p: source(dataclasses.replace(lanes, k=lanes.k * group), p)

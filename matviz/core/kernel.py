"""Kernel descriptions: all that matviz knows about a kernel, in one object per kernel.

A kernel is ``kernels/NN_name.cu`` plus ``kernels/NN_name.py``, a small module that defines
``KERNEL = Kernel(...)``; the number and the name come from the file name
(:mod:`matviz.core.registry` finds the files). The description holds:

* the title, concept and lesson sections;
* the parameters (any names, each with its allowed values, default, C macro and label) and
  constraints between them;
* the launch geometry as a function of the parameters and M, N, K (the thread block is not
  necessarily the C tile a block computes);
* the shared arrays and the access sites (per lane, which element of which array, and for a
  store fed from global memory, which element of A or B it holds);
* the k-step: the marks a block stamps per step, grouped in channels (a channel is one
  sequence of steps; several channels overlap, e.g. the copy of step t+1 and the compute of
  step t), and the phases between marks;
* the work: the lesson's global-traffic formula and the bytes the kernel issues.

Everything else (compile defines, probe slot numbers, the access model, the simulator's work,
the GUI controls, the CLI options, the sweep axes, the manifest) is derived from it through
:class:`KernelConfig`, a description with its parameters and problem shape filled in.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from matviz.errors import MatvizError

WARP = 32
MAX_THREADS_PER_BLOCK = 1024
STATIC_SMEM_LIMIT = 48 * 1024  # static __shared__ arrays may not exceed 48 KiB per block
MAX_GRID_Y = 65535
MAX_GRID_X = 2**31 - 1
MAX_INDEX = 2**31 - 1  # the kernels index with 32-bit ints
LEVELS = (0, 1, 2, 3)
LEVEL_NAMES = {0: "timing", 1: "blocks", 2: "phases", 3: "diagnostics"}
PHASE_STATES = ("loading", "computing")
ParamValue = int | str


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Params(Mapping[str, ParamValue]):
    """Resolved parameter values, read as ``p.tile`` or ``p["tile"]`` in descriptions."""

    def __init__(self, values: Mapping[str, ParamValue]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> ParamValue:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> ParamValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Params({self._values})"


IntOf = int | Callable[[Params], int]


def _value(spec: IntOf, p: Params) -> int:
    return int(spec(p) if callable(spec) else spec)


# -- the parts of a description ------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One kernel parameter: its allowed values, default, C macro, short label and meaning."""

    name: str  # as the CLI, the GUI and the manifest spell it: "tile", "BM"
    values: tuple[ParamValue, ...]
    default: ParamValue
    define: str  # the macro the .cu reads: -DTILE=32
    label: str  # short, for plot ticks and titles: "T" gives "T32"
    help: str

    def __post_init__(self) -> None:
        if self.default not in self.values:
            raise ValueError(f"parameter {self.name}: default {self.default} is not allowed")

    @property
    def option(self) -> str:
        """The command-line option: ``--tile``, ``--bm``."""
        return "--" + self.name.lower().replace("_", "-")

    def short(self, value: ParamValue) -> str:
        return f"{self.label}{value}"


@dataclass(frozen=True)
class Constraint:
    """A relation between parameters; ``message`` is formatted with the parameter values."""

    holds: Callable[[Params], bool]
    message: str


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int]  # blocks in x (along N) and y (along M)
    block: tuple[int, int]  # threads in x and y
    c_tile: tuple[int, int]  # rows x columns of C one block computes


@dataclass(frozen=True)
class SharedArray:
    """A ``__shared__`` array ``name[rows][cols + pad]`` staging part of global ``source``."""

    name: str
    rows: int
    cols: int
    pad: int = 0
    elem_bytes: int = 4
    dtype: str = "float32"
    source: str = ""  # "A" or "B": the global matrix it stages
    align: int = 4  # byte alignment of its start inside the shared struct

    @property
    def stride(self) -> int:
        """Elements per row, padding included."""
        return self.cols + self.pad

    @property
    def nbytes(self) -> int:
        return self.rows * self.stride * self.elem_bytes

    @property
    def padding_bytes(self) -> int:
        return self.rows * self.pad * self.elem_bytes


@dataclass(frozen=True)
class Lanes:
    """The 32 lanes of one warp at one access: ids, block, k-step and the site's inner index."""

    warp: int
    tid: np.ndarray
    tx: np.ndarray
    ty: np.ndarray
    active: np.ndarray  # lanes that exist in the block
    bx: int
    by: int
    t: int  # k-step
    k: int  # the site's inner index (0 .. repeat - 1)

    @property
    def lane(self) -> np.ndarray:
        return self.tid % WARP


Where = Callable[[Lanes, Params], tuple[Any, ...]]  # (row, col) or (row, col, mask), arrays or ints


@dataclass(frozen=True)
class Site:
    """One shared-memory access in the source, executed ``repeat`` times per k-step.

    ``at`` gives each lane's (row, col) in ``array`` (optionally a third item, a mask of the
    lanes that access); a store with ``source`` also gives the (row, col) of the global element
    it copies (``source`` of the array: A or B).
    """

    name: str
    kind: str  # "load" or "store"
    array: str
    phase: str
    at: Where
    width: int = 4  # bytes per lane
    repeat: IntOf = 1
    source: Where | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("load", "store"):
            raise ValueError(f"site {self.name}: kind must be load or store")


@dataclass(frozen=True)
class Phase:
    """Part of a k-step, from mark ``begin`` to mark ``end`` (of the same step)."""

    name: str  # "load", "compute"
    begin: str
    end: str
    state: str  # how the block grid colours it: "loading" or "computing"
    barrier: str = ""  # the barrier that ends it, if any ("__syncthreads")

    def __post_init__(self) -> None:
        if self.state not in PHASE_STATES:
            raise ValueError(f"phase {self.name}: state must be one of {PHASE_STATES}")


@dataclass(frozen=True)
class KStep:
    """How a block walks K: steps of ``depth`` elements, each stamped with marks.

    ``channels`` groups the marks: one channel is one sequence of steps (its first mark starts
    a step); channels overlap when several k-steps are in flight. ``chained``: a channel's last
    mark of step t is read at the same instant as its first mark of step t + 1 (one clock read
    serves both).
    """

    depth: IntOf
    channels: tuple[tuple[str, ...], ...]
    phases: tuple[Phase, ...]
    chained: bool = True
    in_flight: IntOf = 1

    @property
    def marks(self) -> tuple[str, ...]:
        return tuple(m for channel in self.channels for m in channel)

    @property
    def barriers(self) -> tuple[Phase, ...]:
        return tuple(ph for ph in self.phases if ph.barrier)

    def __post_init__(self) -> None:
        marks = self.marks
        if len(set(marks)) != len(marks):
            raise ValueError("k-step marks must be unique")
        for ph in self.phases:
            if ph.begin not in marks or ph.end not in marks:
                raise ValueError(f"phase {ph.name} names a mark the k-step does not stamp")
            if self.channel_of(ph.begin) != self.channel_of(ph.end):
                raise ValueError(f"phase {ph.name} spans two channels")

    def channel_of(self, mark: str) -> int:
        return next(i for i, ch in enumerate(self.channels) if mark in ch)


@dataclass(frozen=True)
class Work:
    """Global traffic: the lesson's formula (text and bytes) and the bytes the loads issue."""

    formula: str  # e.g. "2mnk/T × 4 B"
    formula_bytes: Callable[[Params, int, int, int], float]
    issued_bytes: Callable[[Params, int, int, int], float]


@dataclass(frozen=True)
class Kernel:
    """The description a ``kernels/NN_name.py`` file defines as ``KERNEL``."""

    title: str
    concept: str
    sections: str  # lesson sections, e.g. "lesson 8 §6-17; article §3-4"
    params: tuple[Param, ...]
    launch: Callable[[Params, int, int, int], Launch]
    work: Work
    shared: Callable[[Params], Sequence[SharedArray]] = lambda p: ()
    sites: tuple[Site, ...] = ()
    kstep: KStep | None = None
    constraints: tuple[Constraint, ...] = ()
    registers: int = 32  # estimate used where nvcc is missing
    number: int = 0  # from the file name
    name: str = ""  # from the file name
    source: Path = field(default=Path(), compare=False)

    # -- identity ---------------------------------------------------------------------------
    @property
    def stem(self) -> str:
        return f"{self.number:02d}_{self.name}"

    @property
    def entry_point(self) -> str:
        return f"mv_{self.name}"

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise MatvizError(f"kernel {self.name} has no parameter '{name}'")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    # -- parameters -------------------------------------------------------------------------
    def default_params(self) -> dict[str, ParamValue]:
        return {p.name: p.default for p in self.params}

    def resolve_params(
        self, given: Mapping[str, Any] | None = None, **more: Any
    ) -> dict[str, ParamValue]:
        """Defaults filled in and every value checked; MatvizError names the bad one."""
        params = self.default_params()
        for name, value in {**(given or {}), **more}.items():
            if value is None:
                continue
            spec = self.param(name)
            ok = not isinstance(value, bool) and value in spec.values
            if ok and isinstance(value, (int, float, np.integer)) and int(value) != value:
                ok = False
            if not ok:
                allowed = ", ".join(map(str, spec.values))
                raise MatvizError(
                    f"{name}={value} is not allowed for kernel {self.name} (allowed: {allowed})"
                )
            params[name] = type(spec.default)(value)
        p = Params(params)
        for rule in self.constraints:
            if not rule.holds(p):
                raise MatvizError(f"kernel {self.name}: " + rule.message.format(**params))
        return params

    def configurations(self) -> list[dict[str, ParamValue]]:
        """Every combination of allowed values that meets the constraints, in order."""
        out = []
        for values in itertools.product(*(p.values for p in self.params)):
            params = dict(zip(self.param_names, values, strict=True))
            if all(rule.holds(Params(params)) for rule in self.constraints):
                out.append(params)
        return out

    def configure(
        self, params: Mapping[str, Any] | None, M: int, N: int, K: int, *, check: bool = True
    ) -> KernelConfig:
        """This kernel at ``params`` (defaults filled) for an M x N x K problem."""
        config = KernelConfig(self, self.resolve_params(params), *_shape(M, N, K))
        if check:
            config.check()
        return config

    def labels(self, params: Mapping[str, Any]) -> str:
        """'T32 P0' for plot ticks and titles."""
        return " ".join(self.param(n).short(v) for n, v in params.items() if n in self.param_names)


def _shape(M: Any, N: Any, K: Any) -> tuple[int, int, int]:
    for label, value in (("M", M), ("N", N), ("K", K)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise MatvizError(f"{label} must be a whole number >= 1 (got {value!r})")
    return int(M), int(N), int(K)  # numpy int32 products would wrap


@dataclass(frozen=True)
class PhaseMarks:
    """A phase located in the trace's ``marks``: the indices of its begin and end marks."""

    phase: Phase
    begin: int
    end: int
    channel: int
    barrier: int  # index in barrier_wait's last axis, -1 if no barrier ends the phase

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
            phases.append(PhaseMarks(phase, begin, end, channel, barrier if phase.barrier else -1))
            barrier += bool(phase.barrier)
        return cls(names, tuple(channels), tuple(phases), bool(kstep.get("chained", True)))

    @property
    def n_barriers(self) -> int:
        return sum(ph.barrier >= 0 for ph in self.phases)


@dataclass(frozen=True)
class ResolvedSite:
    site: Site
    repeat: int
    slot: int  # first probe slot; instance k uses slot + k

    @property
    def name(self) -> str:
        return self.site.name


class KernelConfig:
    """A kernel at given parameters and problem shape: everything derived from its description."""

    def __init__(self, kernel: Kernel, params: Mapping[str, ParamValue], M: int, N: int, K: int):
        self.kernel = kernel
        self.params = dict(params)
        self.p = Params(self.params)
        self.M, self.N, self.K = M, N, K

    def __repr__(self) -> str:
        return f"KernelConfig({self.kernel.name}, {self.params}, {self.M}x{self.N}x{self.K})"

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
        if not self.shared:
            return 0
        last = self.shared[-1]
        return self.array_bases[last.name] + last.nbytes

    def array(self, name: str) -> SharedArray:
        for arr in self.shared:
            if arr.name == name:
                return arr
        raise KeyError(name)

    # -- k-steps ----------------------------------------------------------------------------
    @property
    def kstep(self) -> KStep | None:
        return self.kernel.kstep

    @property
    def step_depth(self) -> int:
        return _value(self.kstep.depth, self.p) if self.kstep else 0

    @property
    def n_steps(self) -> int:
        """k-steps every block walks through (0: the kernel has no k-steps)."""
        return cdiv(self.K, self.step_depth) if self.kstep else 0

    @property
    def marks(self) -> tuple[str, ...]:
        return self.kstep.marks if self.kstep else ()

    @property
    def n_barriers(self) -> int:
        return len(self.kstep.barriers) if self.kstep else 0

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
        for site in self.kernel.sites:
            repeat = _value(site.repeat, self.p)
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
        return out

    # -- checks and build -------------------------------------------------------------------
    def check(self, smem_limit: int = STATIC_SMEM_LIMIT) -> KernelConfig:
        """Raise a one-line MatvizError unless this configuration can launch."""
        M, N, K = self.M, self.N, self.K
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
        if self.smem_bytes > smem_limit:
            raise MatvizError(
                f"{self.smem_bytes} bytes of shared memory per block is more than the "
                f"limit of {smem_limit}"
            )
        return self

    def defines(self, level: int) -> list[str]:
        """The ``-DNAME=VALUE`` list for nvcc and NVRTC: parameters, level, probe slots,
        barriers and channels per k-step."""
        if level not in LEVELS:
            allowed = ", ".join(map(str, LEVELS))
            raise MatvizError(f"level {level} is not a trace level (allowed: {allowed})")
        out = [f"-D{self.kernel.param(n).define}={v}" for n, v in self.params.items()]
        out.append(f"-DMV_LEVEL={level}")
        if self.sites:
            out += [f"-DMV_SITE_{rs.name}={rs.slot}" for rs in self.sites]
            out.append(f"-DMV_PROBE_SLOTS={self.probe_slots}")
        if self.n_barriers:
            out.append(f"-DMV_BARRIERS={self.n_barriers}")
        if self.kstep:
            out.append(f"-DMV_CHANNELS={len(self.kstep.channels)}")
        return out

    def lanes(self, warp: int, block: tuple[int, int] = (0, 0), t: int = 0, k: int = 0) -> Lanes:
        tid = warp * WARP + np.arange(WARP)
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
                    {"name": ph.name, "begin": ph.begin, "end": ph.end, "state": ph.state,
                     "barrier": ph.barrier}
                    for ph in self.kstep.phases
                ],  # fmt: skip
                "chained": self.kstep.chained,
                "in_flight": _value(self.kstep.in_flight, self.p),
            }
        return {
            "number": k.number,
            "name": k.name,
            "title": k.title,
            "concept": k.concept,
            "sections": k.sections,
            "params": [
                {"name": p.name, "value": self.params[p.name], "values": list(p.values),
                 "label": p.label, "define": p.define}
                for p in k.params
            ],  # fmt: skip
            "launch": {
                "grid": list(self.grid),
                "block": list(self.block),
                "c_tile": list(self.launch.c_tile),
            },
            "shared": [
                {"name": a.name, "rows": a.rows, "cols": a.cols, "pad": a.pad,
                 "elem_bytes": a.elem_bytes, "dtype": a.dtype, "source": a.source,
                 "base": self.array_bases[a.name]}
                for a in self.shared
            ],  # fmt: skip
            "sites": [
                {"name": rs.name, "kind": rs.site.kind, "array": rs.site.array,
                 "phase": rs.site.phase, "width": rs.site.width, "repeat": rs.repeat,
                 "slot": rs.slot}
                for rs in self.sites
            ],  # fmt: skip
            "kstep": kstep,
            "work": {
                "flops": self.flops,
                "formula": k.work.formula,
                "formula_bytes": self.formula_bytes,
                "issued_bytes": self.issued_bytes,
            },
        }


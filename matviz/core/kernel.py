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
* the global accesses no shared store implies (the naive kernel's loads, every kernel's
  store of C) and the layout of A, B and C in memory (row- or column-major);
* the k-step: the marks a block stamps per step, grouped in channels (a channel is one
  sequence of steps; several channels overlap, e.g. the copy of step t+1 and the compute of
  step t), and the phases between marks;
* the work: the lesson's global-traffic formula and the bytes the kernel issues.

Everything else (compile defines, probe slot numbers, the access model, the simulator's work,
the GUI controls, the CLI options, the sweep axes, the manifest) is derived from it through
:class:`matviz.core.config.KernelConfig`, a description with its parameters and problem shape
filled in.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from matviz.errors import MatvizError, RefusedConfiguration

if TYPE_CHECKING:
    from matviz.core.config import KernelConfig

WARP = 32
MAX_THREADS_PER_BLOCK = 1024
STATIC_SMEM_LIMIT = 48 * 1024  # static __shared__ arrays may not exceed 48 KiB per block
DYNAMIC_SMEM_LIMIT = 227 * 1024  # dynamic shared memory a block may opt in to on sm_90
MAX_GRID_Y = 65535
MAX_GRID_X = 2**31 - 1
MAX_INDEX = 2**31 - 1  # the kernels index with 32-bit ints
LEVELS = (0, 1, 2, 3)
LEVEL_NAMES = {0: "timing", 1: "blocks", 2: "phases", 3: "diagnostics"}
PHASE_STATES = ("loading", "computing")
ParamValue = int | str
# a trace's fragments keep at least 32 slots per lane (its first format had exactly 32) and at
# most 128 (wgmma m64n256k16's accumulators: 16 x 256 per warp)
MIN_FRAGMENT_SLOTS, MAX_FRAGMENT_SLOTS = 32, 128
# bytes per element of the types A and B may have in memory (Kernel.inputs); C is float32
INPUT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


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
T = TypeVar("T")


def resolved(spec: T | Callable[[Params], T], p: Params) -> T:
    """A description's fact at parameters ``p``: the fact itself, or the function giving it."""
    return spec(p) if callable(spec) else spec


def value_of(spec: IntOf, p: Params) -> int:
    return int(resolved(spec, p))


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
    # False: a variant switch (e.g. a column-major B) that labels name only when it is set
    label_default: bool = True
    # values that break the kernel on purpose, to teach what goes wrong (a missing barrier):
    # their results are expected to be wrong, and benches and sweeps leave them out
    broken: tuple[ParamValue, ...] = ()
    # what a shared-memory layout parameter does, for views that compare layouts: "pad"
    # (columns added to each row) or "swizzle" (an XOR swizzle on or off); 0 is the plain layout
    layout: str = ""

    def __post_init__(self) -> None:
        if self.layout not in ("", "pad", "swizzle") or (self.layout and 0 not in self.values):
            raise ValueError(f"parameter {self.name}: layout must be pad or swizzle, 0 allowed")
        if self.default not in self.values:
            raise ValueError(f"parameter {self.name}: default {self.default} is not allowed")
        if self.default in self.broken or not set(self.broken) <= set(self.values):
            raise ValueError(f"parameter {self.name}: broken values must be allowed, not default")

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
    """A ``__shared__`` array ``name[rows][cols + pad]`` staging part of global ``source``.

    ``swizzle`` (an XOR swizzle): element (row, col) is stored at column ``col ^ swizzle(row)``
    of its row. The mask depends on the row only, so applying it twice gives the element back,
    and it must leave a vector access's columns together (a multiple of its width in elements).
    ``swizzle_text`` says it in the kernel's own terms, for the views.
    """

    name: str
    rows: int
    cols: int
    pad: int = 0
    elem_bytes: int = 4
    dtype: str = "float32"
    source: str = ""  # "A" or "B": the global matrix it stages
    align: int = 4  # byte alignment of its start inside the shared struct
    swizzle: Callable[[np.ndarray], np.ndarray] | None = field(default=None, compare=False)
    swizzle_text: str = ""

    def stored_col(self, row: Any, col: Any) -> Any:
        """The column that holds element (row, col): ``col`` unless the array is swizzled. The
        same call maps a stored column back to the element's (the XOR is its own inverse)."""
        if self.swizzle is None:
            return col
        return np.bitwise_xor(col, self.swizzle(np.asarray(row)))

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
    """The 32 lanes of one warp at one access: ids, block, k-step and the site's inner index
    (or every lane of the block, warp after warp: ``warp`` is then each lane's warp)."""

    warp: int | np.ndarray
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
    # bytes per lane of the global load that feeds a store with ``source`` (0: ``width``): a
    # float4 load stored as 4 scalars (a transpose) is 16, feeding 4 consecutive instances
    global_width: int = 0
    # a cp.async (SASS LDGSTS): the store goes from global memory straight to shared memory,
    # with no register in between and no wait for the load
    async_copy: bool = False
    # an ldmatrix .x4, named by its SASS ("LDSM.16.M88.4"; MT88: transposed): each lane gives
    # the address of one 16-byte row of an 8x8 matrix (lanes 8i..8i+7: matrix i) and the warp
    # receives the matrices spread over its lanes as MMA fragments; ``at`` is that row
    matrix_load: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("load", "store"):
            raise ValueError(f"site {self.name}: kind must be load or store")
        if self.async_copy and (self.kind != "store" or self.source is None):
            raise ValueError(f"site {self.name}: an async copy is a store with a source")
        if self.matrix_load and (self.kind != "load" or self.width != 16):
            raise ValueError(f"site {self.name}: a matrix load reads 16-byte rows")
        if self.global_width and (self.source is None or self.global_width % self.width):
            raise ValueError(
                f"site {self.name}: global_width needs a source and a multiple of the width"
            )

    @property
    def loaded_width(self) -> int:
        """Bytes per lane of the global load feeding this store."""
        return self.global_width or self.width


@dataclass(frozen=True)
class GlobalAccess:
    """A global-memory load or store that no shared-memory site implies (a store site with a
    ``source`` already says which element of A or B it loads): ``at`` gives each lane's (row,
    col) of ``matrix`` (A, B or C; optionally a mask), ``repeat`` instances per k-step, or per
    iteration of a kernel without k-steps, where every iteration looks alike (``th.k`` = 0)."""

    name: str
    kind: str  # "load" or "store"
    matrix: str  # "A", "B" or "C"
    at: Where
    repeat: IntOf = 1
    width: int = 4  # bytes per lane (16: a float4)
    # the store site a cp.async copy writes itself (LDGSTS): where each lane's bytes land
    lands_in: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("load", "store"):
            raise ValueError(f"global access {self.name}: kind must be load or store")
        if self.matrix not in ("A", "B", "C"):
            raise ValueError(f"global access {self.name}: matrix must be A, B or C")


@dataclass(frozen=True)
class BulkCopy:
    """A copy the tensor memory accelerator (TMA) makes once per k-step: one thread asks the
    copy engine for a ``rows`` x ``cols`` box of the array's source matrix as it lies in memory
    (a column-major B's box rows are columns of B), and the engine writes it into ``array``
    from row ``first_row(t, p)`` on, each row's 16-byte chunks where the array's swizzle puts
    them (``swizzle_bytes``: the tensor map's swizzle mode, 0, 32, 64 or 128). No lane computes
    an address and no register holds the data; elements outside the matrix arrive as zeros.
    ``at(bx, by, t, r, c, p)`` gives the (row, col) of the logical matrix that box cell (r, c)
    holds (arrays or ints)."""

    name: str
    array: str
    phase: str  # the k-step phase whose thread issues it
    rows: IntOf
    cols: IntOf
    first_row: Callable[[int, Params], int]
    at: Callable[..., tuple[Any, Any]]
    swizzle_bytes: int = 0
    instruction: str = "cp.async.bulk.tensor.2d"

    def __post_init__(self) -> None:
        if self.swizzle_bytes not in (0, 32, 64, 128):
            raise ValueError(f"copy {self.name}: a tensor map swizzles 0, 32, 64 or 128 bytes")


@dataclass(frozen=True)
class ShapeRule:
    """What the problem shape must meet for the kernel to run (a hardware rule, e.g. TMA's
    16-byte row pitch); ``message`` is formatted with M, N and K."""

    holds: Callable[[Params, int, int, int], bool]
    message: str


@dataclass(frozen=True)
class Phase:
    """Part of a k-step, from mark ``begin`` to mark ``end`` (of the same step)."""

    name: str  # "load", "compute"
    begin: str
    end: str
    state: str  # how the block grid colours it: "loading" or "computing"
    barrier: str = ""  # the barrier that ends it, if any ("__syncthreads")
    # (parameter, value) that leaves the barrier out on purpose: ("drop_sync", 1)
    left_out_when: tuple[str, ParamValue] | None = None

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


Slots = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Fragment:
    """One operand of a warp's MMA as its lanes hold it in registers: ``at(lane, slot)`` gives
    the (row, col) of the ``rows`` x ``cols`` operand tile that ``slot`` of ``lane`` holds."""

    operand: str  # "A", "B" or "C"
    rows: int
    cols: int
    slots: int  # elements per lane
    dtype: str
    at: Slots

    def elements(self) -> np.ndarray:
        """(32, slots) row-major element numbers, row * cols + col."""
        lane, slot = np.meshgrid(np.arange(WARP), np.arange(self.slots), indexing="ij")
        row, col = self.at(lane, slot)
        return np.asarray(np.asarray(row) * self.cols + np.asarray(col))


@dataclass(frozen=True)
class Mma:
    """A Tensor Core kernel's matrix multiply-accumulate: one warp-wide ``instruction`` on an
    ``shape`` = (m, n, k) tile, the fragments its lanes hold, and how the warps of a block
    share the C tile (``warps`` along M and N, each ``warp_tile`` rows x cols of C)."""

    instruction: str  # as the source writes it: "wmma::mma_sync m16n16k16"
    sass: str  # what ptxas makes of it: "2 x HMMA.16816.F32"
    shape: tuple[int, int, int]
    sass_shape: tuple[int, int, int]  # (m, n, k) of one SASS MMA instruction: (16, 8, 16)
    fragments: tuple[Fragment, ...]
    warps: tuple[int, int]
    warp_tile: tuple[int, int]
    # operands the Tensor Cores read straight from shared memory (wgmma's descriptors): no
    # lane holds them, so they have no fragment
    from_shared: tuple[str, ...] = ()
    # threads that issue one MMA together (128: a warpgroup) and that the fragment probe runs
    group_threads: int = 32
    # the warp that holds the block's first accumulators (warps before it do not multiply)
    first_warp: int = 0

    def fragment(self, operand: str) -> Fragment:
        return next(f for f in self.fragments if f.operand == operand)

    @property
    def probe_slots(self) -> int:
        """Slots per lane of the fragment probe's output (and of a trace's ``fragments``)."""
        return max(MIN_FRAGMENT_SLOTS, *(f.slots for f in self.fragments))


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
    # the shared-memory accesses; a function of the parameters where they change what the
    # k-step does (a synchronous copy at one value, a pipelined one at another)
    sites: tuple[Site, ...] | Callable[[Params], tuple[Site, ...]] = ()
    global_accesses: tuple[GlobalAccess, ...] = ()
    # how A, B and C lie in memory: "row" (the default) or "col" (column-major, §28)
    layouts: Callable[[Params], Mapping[str, str]] = lambda p: {}
    kstep: KStep | None | Callable[[Params], KStep | None] = None
    # the element type of A and B in memory ("float32", "float16", "bfloat16"); C is float32
    inputs: Callable[[Params], str] = lambda p: "float32"
    # Tensor Core kernels: the MMA and its fragments (None: FP32 FMAs on the CUDA cores)
    mma: Callable[[Params], Mma] | None = None
    # the shared struct lives in dynamic shared memory, sized at launch: a block may then have
    # more than the 48 KiB static arrays allow (the .cu checks its size against MV_SMEM_BYTES)
    dynamic_shared: bool | Callable[[Params], bool] = False
    # tiles the copy engine brings in (TMA): the recorder passes a tensor map of the matrix
    # instead of its pointer
    copies: tuple[BulkCopy, ...] = ()
    # 8-byte mbarriers the shared struct holds after its arrays (a TMA pipeline's full and
    # empty barriers per slot)
    mbarriers: IntOf = 0
    # the GPU target the source needs: "sm_90a" for wgmma and setmaxnreg
    arch: str = "sm_90"
    constraints: tuple[Constraint, ...] = ()
    shape_rules: tuple[ShapeRule, ...] = ()
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

    def sites_at(self, params: Mapping[str, ParamValue]) -> tuple[Site, ...]:
        """The shared-memory access sites at ``params``."""
        return resolved(self.sites, Params(params))

    def site(self, name: str) -> Site:
        """The shared-memory access site ``name``, for a description that varies another's
        (one whose sites do not depend on its parameters)."""
        if callable(self.sites):
            raise MatvizError(f"kernel {self.name}'s access sites depend on its parameters")
        for s in self.sites:
            if s.name == name:
                return s
        raise MatvizError(f"kernel {self.name} has no access site '{name}'")

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
                raise RefusedConfiguration(self.name, rule.message, params)
        return params

    def configurations(self, *, broken: bool = False) -> list[dict[str, ParamValue]]:
        """Every combination of allowed values that meets the constraints, in order; the
        deliberately broken values only when ``broken``."""
        out = []
        choices = [[v for v in p.values if broken or v not in p.broken] for p in self.params]
        for values in itertools.product(*choices):
            params = dict(zip(self.param_names, values, strict=True))
            if all(rule.holds(Params(params)) for rule in self.constraints):
                out.append(params)
        return out

    def configure(
        self, params: Mapping[str, Any] | None, M: int, N: int, K: int, *, check: bool = True
    ) -> KernelConfig:
        """This kernel at ``params`` (defaults filled) for an M x N x K problem."""
        from matviz.core.config import KernelConfig  # it builds on these types

        config = KernelConfig(self, self.resolve_params(params), *_shape(M, N, K))
        if check:
            config.check()
        return config

    def labels(self, params: Mapping[str, Any]) -> str:
        """'T32 P0' for plot ticks and titles."""
        return " ".join(
            spec.short(v)
            for n, v in params.items()
            if n in self.param_names
            and ((spec := self.param(n)).label_default or v != spec.default)
        )


def _shape(M: Any, N: Any, K: Any) -> tuple[int, int, int]:
    for label, value in (("M", M), ("N", N), ("K", K)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise MatvizError(f"{label} must be a whole number >= 1 (got {value!r})")
    return int(M), int(N), int(K)  # numpy int32 products would wrap

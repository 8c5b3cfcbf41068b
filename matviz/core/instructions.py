"""The shared-memory instructions ptxas emits for a kernel's access sites (pure numpy).

A description's sites are per-element accesses: ``ld_As`` k = 0 .. T-1 reads one float per lane
each. ptxas merges consecutive instances of a site into one vector load (LDS.64, LDS.128) where
the layout allows it (:func:`vector_width`, checked against the SASS of every configuration by
``tests/core/test_sass.py``). :func:`instructions` turns one warp's access records
(:func:`matviz.core.access.access_records`) into those instructions, with the n-way conflict and
the wavefronts of each (:mod:`matviz.core.banks`, including the warp-wide broadcast rule
measured on the H200).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matviz.core import access, banks
from matviz.core.config import KernelConfig
from matviz.core.recent import Recent

OPCODES = {("load", 4): "LDS", ("load", 8): "LDS.64", ("load", 16): "LDS.128",
           ("store", 4): "STS", ("store", 8): "STS.64", ("store", 16): "STS.128",
           ("copy", 4): "LDGSTS", ("copy", 8): "LDGSTS.64", ("copy", 16): "LDGSTS.128"}  # fmt: skip
# ncu counts 7-16% more store wavefronts than bank conflicts explain: L1 fills of the tile's
# global loads share the data banks (matviz/core/store_fills.py). The model counts the banks.


def _all_records(config: KernelConfig) -> list[np.ndarray]:
    return [access.access_records(config, w) for w in range(config.warps)]


def _site_offsets(config: KernelConfig, site: str, records: list[np.ndarray]) -> np.ndarray:
    """(repeat, warps * lanes): every lane's offset at each instance of ``site``."""
    repeat = config.site(site).repeat
    row = {k: i for i, (name, k) in enumerate(config.program) if name == site}
    offsets = np.stack([r["offsets"][[row[k] for k in range(repeat)]] for r in records], axis=1)
    return offsets.reshape(repeat, -1).astype(np.int64)


def chains(config: KernelConfig, site: str, records: list[np.ndarray] | None = None):
    """The instances of ``site`` as chains [k0, k1, ...] in which, in every warp, each lane's
    next instance lies one element after the last; None where they form no such chains (a
    store, a single instance, lanes active in some instances only, a cycle)."""
    rs = config.site(site)
    elem, repeat = rs.site.width, rs.repeat
    if rs.site.kind != "load" or repeat < 2:
        return None
    if records is None:
        records = _all_records(config)
    offsets = _site_offsets(config, site, records)
    active = offsets[0] >= 0
    if not active.any() or np.any((offsets >= 0) != active):
        return None
    index = {offsets[k, active].tobytes(): k for k in range(repeat)}
    after = [index.get((offsets[k, active] + elem).tobytes()) for k in range(repeat)]
    has_before = {j for j in after if j is not None}
    out = []
    for k in range(repeat):
        if k in has_before:
            continue
        chain, j = [k], after[k]
        while j is not None and len(chain) <= repeat:
            chain.append(j)
            j = after[j]
        out.append(chain)
    if sum(len(c) for c in out) != repeat:
        return None  # a cycle: not a layout any kernel has
    return out, offsets, active


def vector_width(config: KernelConfig, site: str, records: list[np.ndarray] | None = None) -> int:
    """Widest load (16, 8 bytes, else the site's own width) the compiler can use at ``site``.

    The site's instances (its unrolled loops) can merge into vector loads of v instances when
    they form chains in which, in every warp, each lane's next instance lies one element after
    the last, every chain is a whole number of vectors long and starts aligned to the vector.
    The chain need not follow k: kernel 04 reads As[row + r][k] for r < TM inside a k loop, and
    ptxas merges the k direction. ptxas agrees (tests/core/test_sass.py): kernel 02's A-tile
    load is LDS.128 at PAD 0 and 4, LDS.64 at PAD 2 and scalar at PAD 1; a load that walks a
    column never merges. ``records``: every warp's ``access_records`` when the caller has them.
    """
    elem = config.site(site).site.width
    found = chains(config, site, records)
    if found is None:
        return elem
    out, offsets, active = found
    for width in (16, 8):
        v = width // elem
        if v >= 2 and all(
            len(c) % v == 0 and np.all(offsets[c[0], active] % width == 0) for c in out
        ):
            return width
    return elem


_PLANS: Recent[dict[str, tuple]] = Recent(32)  # every warp's records: views ask at each k-tile


def plan(config: KernelConfig, records: list[np.ndarray] | None = None) -> dict[str, tuple]:
    """Per site: (width in bytes, the instances each of its instructions covers), from every
    warp's records (``records``, computed when None). Instances of a vectorised site merge in
    runs of ``width / element`` along its chains; the instructions are sorted by first instance."""
    if records is None:
        return _PLANS.get(config.key, lambda: plan(config, _all_records(config)))
    out = {}
    for rs in config.sites:
        width = vector_width(config, rs.name, records)
        v = width // rs.site.width
        if v < 2:
            members = [(k,) for k in range(rs.repeat)]
        else:
            members = []
            for chain in chains(config, rs.name, records)[0]:
                members += [tuple(chain[i : i + v]) for i in range(0, len(chain), v)]
            members.sort()
        out[rs.name] = (width, members)
    return out


@dataclass(frozen=True)
class Instruction:
    """One shared-memory instruction of one warp: ``ks`` are the site's instances it covers,
    ``rows`` their rows in the access records, ``offsets`` the first instance's (the vector's
    start), ``width`` bytes per lane."""

    site: str
    kind: str
    width: int
    ks: tuple[int, ...]
    rows: tuple[int, ...]
    offsets: np.ndarray
    per_step: int  # instructions of this site per warp and k-step
    async_copy: bool = False  # a cp.async store (LDGSTS), see Site.async_copy
    matrix_load: str = ""  # an ldmatrix's SASS, see Site.matrix_load
    # the n-way conflict and the wavefronts: from the offsets when not given (-1); views read
    # them several times a frame, and :func:`instructions` gives them for a whole k-step at once
    conflict_degree: int = -1
    wavefronts: int = -1

    def __post_init__(self) -> None:
        if self.conflict_degree < 0:
            degree = int(banks.conflict_degree(self.offsets, self.width))
            object.__setattr__(self, "conflict_degree", degree)  # frozen: set once, here
        if self.wavefronts < 0:
            waves = int(banks.wavefronts(self.offsets, self.width))
            object.__setattr__(self, "wavefronts", waves)

    @property
    def opcode(self) -> str:
        return self.matrix_load or OPCODES[("copy" if self.async_copy else self.kind, self.width)]

    @property
    def ideal_wavefronts(self) -> int:
        """Wavefronts without a conflict: the phases with an active lane (fewer for a broadcast)."""
        phases = (self.offsets >= 0).reshape(self.width // banks.BANK_BYTES, -1).any(axis=1)
        return min(int(phases.sum()), self.wavefronts)

    def ks_text(self) -> str:
        """'k=0', 'k=0–3' (consecutive) or 'k=0,8,16,24'."""
        ks = list(self.ks)
        if len(ks) > 2 and ks == list(range(ks[0], ks[-1] + 1)):
            return f"k={ks[0]}–{ks[-1]}"
        return "k=" + ",".join(map(str, ks))


_INSTRUCTIONS: Recent[tuple[Instruction, ...]] = Recent(32)


def instructions(
    config: KernelConfig, records: np.ndarray, sites: dict[str, tuple] | None = None
) -> list[Instruction]:
    """One warp's access records (in ``config.program`` order) as the instructions ptxas emits,
    in program order of each instruction's first instance. ``sites``: :func:`plan` when the
    caller has it (it depends on every warp, not only this one).

    The same records of the same kernel make the same instructions, and k-steps repeat theirs
    (every step, or every STAGES steps in a ring of slots): the last ones are kept, keyed by
    the records' bytes, which playback had rebuilt three times a k-step."""
    planned = plan(config)
    if sites is not None and sites is not planned:
        return _instructions(config, records, sites)
    key = (config.key, records.tobytes())
    return list(_INSTRUCTIONS.get(key, lambda: tuple(_instructions(config, records, planned))))


def _instructions(
    config: KernelConfig, records: np.ndarray, sites: dict[str, tuple]
) -> list[Instruction]:
    # rows follow config.program (a probe's site field may be truncated to its dtype)
    row_of = {item: i for i, item in enumerate(config.program) if i < len(records)}
    covered: dict[int, tuple[str, int, tuple[int, ...]]] = {}
    per_step: dict[str, int] = {}
    for rs in config.sites:
        width, members = sites[rs.name]
        per_step[rs.name] = len(members)
        for ks in members:
            rows = tuple(row_of[(rs.name, k)] for k in ks if (rs.name, k) in row_of)
            if rows:
                covered[min(rows)] = (rs.name, width, ks)
    firsts = sorted(covered)
    # the vector starts at its first k
    starts = [records[row_of.get((covered[f][0], covered[f][2][0]), f)] for f in firsts]
    offsets = [np.asarray(rec["offsets"], np.int64) for rec in starts]
    costs = _bank_costs([covered[f][1] for f in firsts], offsets)
    out = []
    for first, rec, off, (degree, waves) in zip(firsts, starts, offsets, costs, strict=True):
        name, width, ks = covered[first]
        out.append(
            Instruction(
                site=name,
                kind=str(rec["kind"]),
                width=int(width),
                ks=ks,
                rows=tuple(row_of[(name, k)] for k in ks if (name, k) in row_of),
                offsets=off,
                per_step=per_step[name],
                async_copy=config.site(name).site.async_copy,
                matrix_load=config.site(name).site.matrix_load,
                conflict_degree=degree,
                wavefronts=waves,
            )
        )
    return out


def _bank_costs(widths: list[int], offsets: list[np.ndarray]) -> list[tuple[int, int]]:
    """(n-way conflict, wavefronts) of each access, one :mod:`banks` call per width for all of
    them (a k-step of kernel 08 has a hundred instructions; one call each cost a frame 30 ms)."""
    out = [(0, 0)] * len(widths)
    for width in set(widths):
        mine = [i for i, w in enumerate(widths) if w == width]
        stacked = np.stack([offsets[i] for i in mine])
        degrees = banks.conflict_degree(stacked, width)
        waves = banks.wavefronts(stacked, width)
        for i, degree, wave in zip(mine, degrees, waves, strict=True):
            out[i] = (int(degree), int(wave))
    return out


@dataclass(frozen=True)
class SiteSummary:
    """What one site costs one warp per k-step, as instructions."""

    site: str
    kind: str
    array: str
    opcode: str
    width: int
    repeat: int  # the site's instances (k steps) per k-step
    count: int  # instructions per k-step
    wavefronts: int  # summed over them
    degree: int  # the worst n-way conflict among them

    @property
    def each(self) -> int | None:
        """Wavefronts of each instruction when they are all equal, else None."""
        return self.wavefronts // self.count if self.count and self.wavefronts % self.count == 0 \
            else None  # fmt: skip


def summarise(config: KernelConfig, instrs: list[Instruction]) -> list[SiteSummary]:
    """Per site, in declaration order: opcode, instructions and wavefronts per warp and k-step."""
    out = []
    for rs in config.sites:
        mine = [i for i in instrs if i.site == rs.name]
        if not mine:
            continue
        waves = [i.wavefronts for i in mine]
        out.append(
            SiteSummary(
                site=rs.name,
                kind=rs.site.kind,
                array=rs.site.array,
                opcode=mine[0].opcode,
                width=mine[0].width,
                repeat=rs.repeat,
                count=len(mine),
                wavefronts=sum(waves),
                degree=max(i.conflict_degree for i in mine),
            )
        )
    return out


def block_costs(config: KernelConfig, t: int | None = None, block=(0, 0)) -> dict[str, float]:
    """Instructions and wavefronts of every warp of ``block`` per k-step, shared loads and
    stores apart, summed over ``t`` (every k-step of the kernel when None): what ncu counts as
    ``smsp__inst_executed_op_shared_{ld,st}`` and ``l1tex__data_pipe_lsu_wavefronts_mem_shared_
    op_{ld,st}`` for that block."""
    sites = plan(config)
    steps = range(max(config.n_steps, 1)) if t is None else [t]
    out = dict.fromkeys(("ld_inst", "st_inst", "ld_wavefronts", "st_wavefronts"), 0.0)
    out |= {"ld_ideal": 0.0, "st_ideal": 0.0}  # the wavefronts without a conflict
    for step in steps:
        for warp in range(config.warps):
            rec = access.access_records(config, warp, block, step)
            for ins in instructions(config, rec, sites):
                if not (ins.offsets >= 0).any():
                    continue  # no lane active: the instruction is predicated off
                key = "ld" if ins.kind == "load" else "st"
                out[f"{key}_inst"] += 1
                out[f"{key}_wavefronts"] += ins.wavefronts
                out[f"{key}_ideal"] += ins.ideal_wavefronts
    return out


def warp_summary(config: KernelConfig, warp: int = 0, block=(0, 0), t: int = 0, sites=None):
    """:func:`summarise` of one warp's instructions in one k-step, from the access model."""
    rec = access.access_records(config, warp, block, t)
    return summarise(config, instructions(config, rec, plan(config) if sites is None else sites))


@dataclass(frozen=True)
class ConflictPair:
    """Two lanes whose different words land in one bank: why an access is n-way."""

    site: str
    lanes: tuple[int, int]
    bytes: tuple[int, int]  # their byte offsets
    bank: int


def conflict_pair(ins: Instruction) -> ConflictPair | None:
    """Two lanes of ``ins`` on one bank in different words, in one phase (None: no conflict)."""
    off = ins.offsets
    lanes_per_phase = 128 // ins.width
    for first in range(0, banks.WARP_SIZE, lanes_per_phase):
        seen: dict[int, tuple[int, int]] = {}  # bank -> (lane, word)
        for lane in range(first, first + lanes_per_phase):
            if off[lane] < 0:
                continue
            for j in range(ins.width // banks.BANK_BYTES):
                word = int(off[lane]) // banks.BANK_BYTES + j
                bank = word % banks.N_BANKS
                if bank in seen and seen[bank][1] != word:
                    a = seen[bank][0]
                    return ConflictPair(ins.site, (a, lane), (int(off[a]), int(off[lane])), bank)
                seen.setdefault(bank, (lane, word))
    return None


@dataclass(frozen=True)
class SiteChange:
    """One site at two configurations (``before`` -> ``after``) of one warp and k-step."""

    before: SiteSummary
    after: SiteSummary
    pair: ConflictPair | None  # two lanes in one bank in ``after``, where it has a conflict
    pitch_bytes: int  # the row pitch of the site's array in ``after``

    @property
    def changed(self) -> bool:
        b, a = self.before, self.after
        return (b.opcode, b.count, b.wavefronts, b.degree) != (a.opcode, a.count, a.wavefronts,
                                                                a.degree)  # fmt: skip


def compare(before: KernelConfig, after: KernelConfig, warp: int = 0, block=(0, 0), t: int = 0):
    """Per site, what changes from ``before`` to ``after`` (e.g. the same kernel at PAD 0 and
    PAD 1) for one warp and k-step: opcode, instructions, wavefronts, n-way conflict."""
    warp = min(warp, before.warps - 1, after.warps - 1)
    out = []
    rec = access.access_records(after, warp, block, t)
    instrs = instructions(after, rec)
    old = {s.site: s for s in warp_summary(before, warp, block, t)}
    for new in summarise(after, instrs):
        if new.site not in old:
            continue
        pair = None
        if new.degree > 1:
            worst = max((i for i in instrs if i.site == new.site), key=lambda i: i.conflict_degree)
            pair = conflict_pair(worst)
        arr = after.array(new.array)
        out.append(SiteChange(old[new.site], new, pair, arr.stride * arr.elem_bytes))
    return out

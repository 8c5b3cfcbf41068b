"""Which lines of a kernel's ``.cu`` each phase of its k-step covers, read from the stamp
macros of ``kernels/trace.cuh`` in the source (no kernel is named here).

A phase runs from the line that stamps its begin mark to the next line that stamps its end
mark. The macros name marks by channel and index: ``MV_STEP_BEGIN(c, t)`` stamps mark 0 of
channel c, ``MV_STEP_MARK(c, t, j)`` mark j, ``MV_STEP_BEGIN_CHAINED(c, t, j)`` mark 0 and mark j
of the step before, ``MV_CHANNEL_FLUSH_CHAINED(c, j)`` mark j of the last step. A call of a
macro the kernels' headers define (the seed kernels' ``MV_MARK_ISSUED`` ...) stamps what its
expansion stamps. Only the lines the
preprocessor keeps at the configuration's parameters count (the naive kernel holds two loads of B
under ``#if B_COL_MAJOR`` ... ``#else``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from matviz.core.config import KernelConfig
from matviz.core.preprocessor import compiled_lines, config_defines

_CALL = re.compile(r"\b(MV_\w+)\s*\(([^()]*)\)")
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\(([^()]*)\)(.*)$")
_EXPANSION_DEPTH = 4  # headers' macros calling macros: MV_MARK_ISSUED -> MV_STEP_BEGIN_CHAINED


@dataclass(frozen=True)
class PhaseLines:
    phase: str
    state: str  # "loading" or "computing"
    spans: tuple[tuple[int, int], ...]  # 1-based, inclusive line ranges


Macros = dict[str, list[tuple[list[str], str]]]


@functools.cache
def header_macros(directory: Path) -> Macros:
    """The function-like macros the headers (``*.cuh``) in ``directory`` define: name ->
    [(parameters, body)], one entry per definition (a header may define a name once per
    ``#if`` branch)."""
    out: Macros = {}
    for path in sorted(directory.glob("*.cuh")):
        for line in _header_text(path).replace("\\\n", " ").splitlines():
            found = _DEFINE.match(line)
            if found and "..." not in found[2]:
                params = [p.strip() for p in found[2].split(",") if p.strip()]
                out.setdefault(found[1], []).append((params, found[3].split("//", 1)[0]))
    return out


_DEFINED = re.compile(r"^\s*#\s*define\s+(\w+)")
_WORD = re.compile(r"\b\w+\b")
_PUNCTUATION_ONLY = re.compile(r"[\s;{}(),]*")


@functools.cache
def defined_names(header: Path) -> frozenset[str]:
    """Every macro name ``header`` defines (none where it is not a readable regular file)."""
    lines = _header_text(header).splitlines()
    return frozenset(found[1] for found in map(_DEFINED.match, lines) if found)


def _header_text(path: Path) -> str:
    """A header's text; empty where it cannot be read as text or is not a regular file (a FIFO
    would block the read), so the view still shows what the kernel's own source says."""
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return ""


def instrumentation_lines(source: str, names: frozenset[str]) -> list[int]:
    """The 1-based lines whose code is instrumentation alone: uses of ``names`` (the macros
    ``trace.cuh`` defines) with nothing but punctuation beside them. A line that passes the
    trace on (``copy_step(..., s MV_TRACE_FORWARD);``) or declares the kernel
    (``void MV_LAUNCH_BOUNDS(THREADS) mv_tiled(...)``) is the kernel's own code."""
    out = []
    for number, line in enumerate(source.splitlines(), start=1):
        code = line.split("//", 1)[0]
        rest = _without_uses(code, names)
        if rest != code and _PUNCTUATION_ONLY.fullmatch(rest):
            out.append(number)
    return out


def _without_uses(code: str, names: frozenset[str]) -> str:
    """``code`` with each use of ``names`` taken out, a call with its arguments (to the line's
    end where they continue on the next)."""
    kept, at = [], 0
    for found in _WORD.finditer(code):
        if found.start() < at or found[0] not in names:
            continue
        kept.append(code[at : found.start()])
        at = found.end()
        after = code[at:].lstrip()
        if after.startswith("("):
            at = _past_call(code, len(code) - len(after))
    return "".join(kept) + code[at:]


def _past_call(code: str, opening: int) -> int:
    """Where the argument list opening at ``opening`` ends (the line's end if it does not)."""
    depth = 0
    for at in range(opening, len(code)):
        depth += {"(": 1, ")": -1}.get(code[at], 0)
        if depth == 0:
            return at + 1
    return len(code)


def _literal(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _marks_of_call(
    name: str, args: list[str], macros: Macros, depth: int = 0
) -> list[tuple[int, int]]:
    """(channel, mark index) pairs one macro call stamps."""
    if name in _STAMPS:
        return _stamped(name, args)
    out: list[tuple[int, int]] = []
    if depth >= _EXPANSION_DEPTH:
        return out
    for params, body in macros.get(name, []):
        if len(params) != len(args):
            continue
        expanded = _substituted(body, dict(zip(params, args, strict=True)))
        for inner, inner_args in _CALL.findall(expanded):
            for mark in _marks_of_call(inner, _split(inner_args), macros, depth + 1):
                if mark not in out:
                    out.append(mark)
    return out


_STAMPS = ("MV_STEP_BEGIN", "MV_STEP_OPEN", "MV_STEP_CLOSE", "MV_STEP_BEGIN_CHAINED",
           "MV_STEP_MARK", "MV_CHANNEL_FLUSH_CHAINED")  # fmt: skip


def _stamped(name: str, args: list[str]) -> list[tuple[int, int]]:
    """(channel, mark index) pairs a call of one of trace.cuh's stamp macros stamps."""
    c = _literal(args[0]) if args else None
    if c is None:
        return []
    j = _literal(args[-1]) if len(args) > 1 else None
    if name in ("MV_STEP_BEGIN", "MV_STEP_OPEN"):
        return [(c, 0)]
    if j is None:
        return []
    return [(c, 0), (c, j)] if name == "MV_STEP_BEGIN_CHAINED" else [(c, j)]


def _substituted(body: str, given: dict[str, str]) -> str:
    return _WORD.sub(lambda m: given.get(m[0], m[0]), body)


def _split(args: str) -> list[str]:
    return [a.strip() for a in args.split(",")] if args.strip() else []


def mark_lines(
    source: str,
    channels: tuple[tuple[str, ...], ...],
    kept: list[bool] | None = None,
    macros: Macros | None = None,
) -> dict[str, list[int]]:
    """Mark name -> the 1-based lines that stamp it, in order (of the ``kept`` lines only);
    ``macros``: the headers' (:func:`header_macros`), followed where a line calls one."""
    out: dict[str, list[int]] = {}
    for number, line in enumerate(source.splitlines(), start=1):
        if kept is not None and not kept[number - 1]:
            continue
        code = line.split("//", 1)[0]
        for name, args in _CALL.findall(code):
            for c, j in _marks_of_call(name, _split(args), macros or {}):
                if c < len(channels) and j < len(channels[c]):
                    out.setdefault(channels[c][j], []).append(number)
    return out


def phase_lines(config: KernelConfig, source: str) -> list[PhaseLines]:
    """Each phase's line ranges: from a line stamping its begin mark to the next line that
    stamps its end mark."""
    if config.kstep is None:
        return []
    kept = compiled_lines(source, config_defines(config))
    macros = header_macros(config.kernel.source.parent)
    marks = mark_lines(source, config.kstep.channels, kept, macros)
    out = []
    for phase in config.kstep.phases:
        spans: list[tuple[int, int]] = []
        for begin in marks.get(phase.begin, []):
            ends = [line for line in marks.get(phase.end, []) if line > begin]
            if ends:
                spans += _kept_runs(begin, min(ends), kept)
        out.append(PhaseLines(phase.name, phase.state, tuple(spans)))
    return out


def _kept_runs(first: int, last: int, kept: list[bool]) -> list[tuple[int, int]]:
    """The runs of kept lines in first..last (1-based, inclusive)."""
    runs: list[tuple[int, int]] = []
    for n in range(first, last + 1):
        if not kept[n - 1]:
            continue
        if runs and runs[-1][1] == n - 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs

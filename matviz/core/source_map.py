"""Which lines of a kernel's ``.cu`` each phase of its k-step covers, read from the stamp
macros of ``kernels/trace.cuh`` in the source (no kernel is named here).

A phase runs from the line that stamps its begin mark to the next line that stamps its end
mark. The macros name marks by channel and index: ``MV_STEP_BEGIN(c, t)`` stamps mark 0 of
channel c, ``MV_STEP_MARK(c, t, j)`` mark j, ``MV_STEP_BEGIN_CHAINED(c, t, j)`` mark 0 and mark j
of the step before, ``MV_CHANNEL_FLUSH_CHAINED(c, j)`` mark j of the last step; the seed
kernels' shorthands (``MV_MARK_ISSUED`` ...) are those of channel 0. Only the lines the
preprocessor keeps at the configuration's parameters count (the naive kernel holds two loads of B
under ``#if B_COL_MAJOR`` ... ``#else``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from matviz.core.config import KernelConfig
from matviz.core.preprocessor import compiled_lines, config_defines

_CALL = re.compile(r"\b(MV_\w+)\s*\(([^()]*)\)")
# macro -> (channel argument index or fixed channel, [(mark index or argument index), ...])
_SHORTHANDS = {
    "MV_MARK_ISSUED": [(0, 0), (0, 2)],
    "MV_MARK_LOADED": [(0, 1)],
    "MV_MARK_LAST_COMPUTED": [(0, 2)],
}


@dataclass(frozen=True)
class PhaseLines:
    phase: str
    state: str  # "loading" or "computing"
    spans: tuple[tuple[int, int], ...]  # 1-based, inclusive line ranges


def _literal(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _marks_of_call(name: str, args: list[str]) -> list[tuple[int, int]]:
    """(channel, mark index) pairs one macro call stamps."""
    if name in _SHORTHANDS:
        return _SHORTHANDS[name]
    c = _literal(args[0]) if args else None
    if c is None:
        return []
    j = _literal(args[-1]) if len(args) > 1 else None
    if name in ("MV_STEP_BEGIN", "MV_STEP_OPEN"):
        return [(c, 0)]
    if name == "MV_STEP_CLOSE" and j is not None:
        return [(c, j)]
    if name == "MV_STEP_BEGIN_CHAINED" and j is not None:
        return [(c, 0), (c, j)]
    if name == "MV_STEP_MARK" and j is not None:
        return [(c, j)]
    if name == "MV_CHANNEL_FLUSH_CHAINED" and j is not None:
        return [(c, j)]
    return []


def mark_lines(
    source: str, channels: tuple[tuple[str, ...], ...], kept: list[bool] | None = None
) -> dict[str, list[int]]:
    """Mark name -> the 1-based lines that stamp it, in order (of the ``kept`` lines only)."""
    out: dict[str, list[int]] = {}
    for number, line in enumerate(source.splitlines(), start=1):
        if kept is not None and not kept[number - 1]:
            continue
        code = line.split("//", 1)[0]
        for name, args in _CALL.findall(code):
            for c, j in _marks_of_call(name, args.split(",")):
                if c < len(channels) and j < len(channels[c]):
                    out.setdefault(channels[c][j], []).append(number)
    return out


def phase_lines(config: KernelConfig, source: str) -> list[PhaseLines]:
    """Each phase's line ranges: from a line stamping its begin mark to the next line that
    stamps its end mark."""
    if config.kstep is None:
        return []
    kept = compiled_lines(source, config_defines(config))
    marks = mark_lines(source, config.kstep.channels, kept)
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

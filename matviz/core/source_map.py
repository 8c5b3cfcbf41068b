"""Which lines of a kernel's ``.cu`` each phase of its k-step covers, read from the stamp
macros of ``kernels/trace.cuh`` in the source (no kernel is named here).

A phase runs from the line that stamps its begin mark to the next line that stamps its end
mark. The macros name marks by channel and index: ``MV_STEP_BEGIN(c, t)`` stamps mark 0 of
channel c, ``MV_STEP_MARK(c, t, j)`` mark j, ``MV_STEP_BEGIN_CHAINED(c, t, j)`` mark 0 and mark j
of the step before, ``MV_CHANNEL_FLUSH_CHAINED(c, j)`` mark j of the last step; the seed
kernels' shorthands (``MV_MARK_ISSUED`` ...) are those of channel 0. Only the lines the
preprocessor keeps at the configuration's parameters count (a kernel may hold two forms of its
loop under ``#if STAGES == 1`` ... ``#else``).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass

from matviz.core.config import KernelConfig

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
    if name == "MV_STEP_BEGIN":
        return [(c, 0)]
    if name == "MV_STEP_BEGIN_CHAINED" and j is not None:
        return [(c, 0), (c, j)]
    if name == "MV_STEP_MARK" and j is not None:
        return [(c, j)]
    if name == "MV_CHANNEL_FLUSH_CHAINED" and j is not None:
        return [(c, j)]
    return []


# -- the preprocessor's conditionals ------------------------------------------------------------
_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|define)\b(.*)$")
_DEFINED = re.compile(r"\bdefined\s*(?:\(\s*(\w+)\s*\)|(\w+))")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor}  # fmt: skip
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}  # fmt: skip


def _value(node: ast.AST) -> int:
    """An integer expression of literals, arithmetic, comparisons and logic, nothing else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return int(_BINARY[type(node.op)](_value(node.left), _value(node.right)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return int(not _value(node.operand))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return -_value(node.operand) if isinstance(node.op, ast.USub) else _value(node.operand)
    if isinstance(node, ast.BoolOp):
        values = [_value(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        left, right = _value(node.left), _value(node.comparators[0])
        return int(_COMPARE[type(node.ops[0])](left, right))
    raise ValueError("not a preprocessor expression")


def _holds(expr: str, defines: Mapping[str, int]) -> bool:
    """A ``#if`` condition, names replaced by their values (an unknown name is 0, as in C); a
    condition this cannot read counts as true, so no code is hidden that might compile."""
    text = _DEFINED.sub(lambda m: "1" if (m[1] or m[2]) in defines else "0", expr)
    text = _NAME.sub(lambda m: str(defines.get(m[0], 0)), text.split("//", 1)[0])
    text = text.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        return bool(_value(ast.parse(text.strip(), mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError):
        return True


def compiled_lines(source: str, defines: Mapping[str, int]) -> list[bool]:
    """For each line, whether the preprocessor keeps it with ``defines`` (``#if``, ``#ifdef``,
    ``#ifndef``, ``#elif``, ``#else``, ``#endif``; an integer ``#define`` on a kept line counts
    from there). Directive lines themselves are not code: False."""
    known = dict(defines)
    kept: list[bool] = []
    stack: list[tuple[bool, bool]] = []  # (this branch is kept, some branch was taken)
    for line in source.splitlines():
        outer = all(k for k, _ in stack)
        directive = _DIRECTIVE.match(line)
        if directive is None:
            kept.append(outer)
            continue
        kind, rest = directive[1], directive[2].strip()
        if kind in ("if", "ifdef", "ifndef"):
            name = rest.split()[0] if rest.split() else ""
            if kind == "if":
                cond = _holds(rest, known)
            else:
                cond = (name in known) == (kind == "ifdef")
            stack.append((cond, cond))
        elif kind == "elif" and stack:
            taken = stack[-1][1]
            cond = not taken and _holds(rest, known)
            stack[-1] = (cond, taken or cond)
        elif kind == "else" and stack:
            stack[-1] = (not stack[-1][1], True)
        elif kind == "endif" and stack:
            stack.pop()
        elif kind == "define" and outer:
            parts = rest.split(None, 1)
            if len(parts) == 2 and re.fullmatch(r"\d+", parts[1].split("//")[0].strip()):
                known.setdefault(parts[0], int(parts[1].split("//")[0]))
        kept.append(False)
    return kept


def config_defines(config: KernelConfig) -> dict[str, int]:
    """The -DNAME=VALUE the configuration compiles with, as numbers."""
    out = {}
    for flag in config.defines(0):
        name, _, value = flag.removeprefix("-D").partition("=")
        if re.fullmatch(r"-?\d+", value):
            out[name] = int(value)
    return out


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

"""Which lines of a kernel's ``.cu`` the C preprocessor keeps at a configuration: its
``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else``/``#endif``, read with the configuration's
defines. A kernel may hold two forms of a loop in one file (``#if STAGES == 1`` ... ``#else``);
the views light and grey its lines by what this configuration compiles."""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping

from matviz.core.config import KernelConfig

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


def left_out_lines(source: str, defines: Mapping[str, int]) -> tuple[int, ...]:
    """The 1-based lines of code (not blank, not a conditional or ``#define``) that the
    preprocessor drops with ``defines``."""
    kept = compiled_lines(source, defines)
    return tuple(
        n for n, line in enumerate(source.splitlines(), start=1)
        if not kept[n - 1] and line.strip() and not _DIRECTIVE.match(line)
    )  # fmt: skip


def config_defines(config: KernelConfig) -> dict[str, int]:
    """The -DNAME=VALUE the configuration compiles with, as numbers."""
    out = {}
    for flag in config.defines(0):
        name, _, value = flag.removeprefix("-D").partition("=")
        if re.fullmatch(r"-?\d+", value):
            out[name] = int(value)
    return out

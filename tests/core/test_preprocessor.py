"""Which lines of a kernel's source the preprocessor keeps at a configuration."""

from __future__ import annotations

import pytest

from matviz.core import preprocessor
from matviz.core.registry import get_kernel

SOURCE = """\
a
#if STAGES == 1
b
#elif STAGES == 2 && defined(FAST)
c
#else
d
#endif
#ifdef FAST
e
#endif
#ifndef TILE
#define TILE 16
#endif
#if TILE > 8 || !FAST
f
#endif
#if 1 / 0
g
#endif
#if __import__("os")
h
#endif
"""


@pytest.mark.parametrize(
    ("defines", "kept"),
    [
        ({"STAGES": 1}, "abfgh"),
        ({"STAGES": 2, "FAST": 1}, "acefgh"),
        ({"STAGES": 2}, "adfgh"),  # FAST undefined: its #elif fails
        ({"STAGES": 3, "FAST": 1, "TILE": 8}, "adegh"),  # TILE given: no default, 8 > 8 fails
    ],
)
def test_compiled_lines_follow_the_conditionals(defines, kept):
    lines = SOURCE.splitlines()
    got = preprocessor.compiled_lines(SOURCE, defines)
    assert len(got) == len(lines)
    # a condition it cannot read (1 / 0, a call) keeps its code: nothing is hidden that might
    # compile; directive lines are never code
    assert "".join(line for line, k in zip(lines, got, strict=True) if k) == kept


def test_a_configuration_keeps_its_own_branch_of_the_source():
    """The naive kernel's B_COL_MAJOR picks one of two loads (§28): each configuration keeps its
    own and drops the other's; every other kernel's marks stand outside any #if."""
    kernel = get_kernel("naive")
    text = kernel.source.read_text()
    lines = text.splitlines()

    def kept_code(col_major: int) -> str:
        config = kernel.configure({"b_col_major": col_major}, 64, 64, 64)
        kept = preprocessor.compiled_lines(text, preprocessor.config_defines(config))
        return "\n".join(line for line, k in zip(lines, kept, strict=True) if k)

    assert "B[k * N + col]" in kept_code(0) and "B[col * K + k]" not in kept_code(0)
    assert "B[col * K + k]" in kept_code(1) and "B[k * N + col]" not in kept_code(1)


def test_left_out_lines_are_the_dropped_code_not_the_directives():
    source = "#if A\n#pragma unroll\nx();\n\n#else\ny();\n#endif\n#define B 2\n"
    assert preprocessor.left_out_lines(source, {"A": 0}) == (2, 3)
    assert preprocessor.left_out_lines(source, {"A": 1}) == (6,)

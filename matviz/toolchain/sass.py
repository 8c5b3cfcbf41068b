"""The SASS ptxas really emitted for a kernel (nvcc -cubin, then cuobjdump -sass).

Checks what the app and the simulator rely on but PTX cannot show: which shared loads ptxas
vectorises (LDS.128 at PAD 0, none at PAD 1), and that instrumentation leaves the naive kernel's
loop scheduled exactly as at level 0.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from matviz.core.config import KernelConfig
from matviz.errors import MatvizError
from matviz.toolchain.nvcc import compile_flags, cubin_command, nvcc_path, run_tool

_LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA (0x[0-9a-f]+)")
_REGISTER = re.compile(r"\bU?R\d+\b|\bU?P\d\b")
_TARGET = re.compile(r"\b(BRA|BSSY|CALL\.\w+) (\S+, )?0x[0-9a-f]+")

Instruction = tuple[int, str]  # (address, text without the encoding)


def cuobjdump_path() -> str | None:
    """cuobjdump on PATH, else the one the nvidia-cuda-cuobjdump wheel installs (the test extra)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for site in map(Path, sys.path):
        wheel = sorted(site.glob("nvidia/cu*/bin/cuobjdump"))
        if wheel:
            return str(wheel[-1])
    return None


def sass(config: KernelConfig, level: int) -> list[Instruction]:
    """The kernel's instructions for the GPU target it needs, in address order."""
    nvcc, cuobjdump = nvcc_path(), cuobjdump_path()
    if nvcc is None or cuobjdump is None:
        raise MatvizError(
            "reading SASS needs nvcc and cuobjdump"
            " (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
        )
    with tempfile.TemporaryDirectory(prefix="matviz-sass-") as tmp:
        cubin = str(Path(tmp) / "kernel.cubin")
        flags = compile_flags(config, level)
        run_tool(cubin_command(nvcc, str(config.kernel.source), flags, config.kernel.arch, cubin))
        # cuobjdump runs nvdisasm, which the wheels install next to it
        path = f"{Path(cuobjdump).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        listing = run_tool([cuobjdump, "-sass", cubin], {**os.environ, "PATH": path})
    return [(int(m[1], 16), m[2]) for m in map(_LINE.match, listing.splitlines()) if m]


def loops(instructions: list[Instruction]) -> list[list[str]]:
    """Every loop body: from a backward branch's target to the branch, in address order."""
    found = []
    for address, text in instructions:
        branch = _BRANCH.search(text)
        if branch and int(branch[1], 16) < address:
            start = int(branch[1], 16)
            found.append([t for a, t in instructions if start <= a <= address])
    return found


def main_loop(instructions: list[Instruction]) -> list[str]:
    """The longest loop body."""
    return max(loops(instructions), key=len, default=[])


_MATH_OPS = ("FFMA", "HMMA.", "HGMMA.")


def opcode(text: str) -> str:
    """The instruction's opcode with its modifiers, past any predicate (``@!P0 LDG.E.U16 ...``
    gives ``LDG.E.U16``)."""
    words = text.split()
    return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


def math_ops(body: list[str]) -> int:
    """Multiply-add instructions (FFMA, HMMA, HGMMA) in ``body``."""
    return sum(1 for text in body if (opcode(text) + ".").startswith(_MATH_OPS))


def fast_loop(instructions: list[Instruction]) -> list[str]:
    """The k loop a run on whole, 16-byte aligned tiles takes. A kernel may carry one copy of
    its loop per case (aligned rows or not, whole tiles or not); each does the k-step's whole
    math, and the one without the element-by-element fallback is the leanest: among the loops
    with the most multiply-add instructions, the shortest. A pipeline's last steps may get a
    loop of their own that copies nothing (ptxas peels them off): the steady loop reads global
    memory, so a loop that does is preferred."""
    counted = [
        (math_ops(body), bool(global_reads(body)), -len(body), body)
        for body in loops(instructions)
    ]
    most, _, _, body = max(counted, key=lambda c: c[:3], default=(0, False, 0, []))
    return body if most else []


_GLOBAL_READS = ("LDG.", "LDGSTS.", "UTMALDG")  # loads, cp.async copies, TMA copies


def global_reads(body: list[str]) -> list[str]:
    """The instructions of ``body`` that read global memory."""
    return [text for text in body if opcode(text).startswith(_GLOBAL_READS)]


def schedule(body: list[str]) -> list[str]:
    """Instructions with registers, predicates and branch targets blanked: the order ptxas
    chose, comparable between builds whose code sits at different addresses."""
    return [_TARGET.sub(r"\1 \2L", _REGISTER.sub("R", text)) for text in body]


_LOAD_OP = re.compile(r"\bLDSM(\.\w+)+|\bLDS(\.\d+)?\b")


def shared_load_widths(instructions: list[Instruction]) -> Counter:
    """How many LDS, LDS.64, LDS.128 and ldmatrix (LDSM.16.M88.4, ...) the kernel has."""
    ops = (_LOAD_OP.search(text) for _, text in instructions)
    return Counter(op[0] for op in ops if op)


_SHARED_OP = re.compile(r"\bLDSM(\.\w+)+|\b(LDS|STS)(\.\d+)?\b")
_COPY_WIDTH = re.compile(r"\.(64|128)$")


def shared_op(text: str) -> str | None:
    """The shared-memory opcode of an instruction as the bank model names it (LDS.128, STS,
    LDSM.16.MT88.4), a cp.async by its width (LDGSTS.E.BYPASS.LTC128B.128 is LDGSTS.128), or
    None for an instruction that does not touch shared memory this way."""
    if text.startswith("@!PT "):  # never runs: ptxas's filler after a cp.async wait
        return None
    op = opcode(text)
    if op.startswith("LDGSTS"):
        width = _COPY_WIDTH.search(op)
        return f"LDGSTS.{width[1]}" if width else "LDGSTS"
    found = _SHARED_OP.search(text)
    return found[0] if found else None


def shared_ops_per_step(instructions: list[Instruction], barriers_per_step: int) -> dict[str, int]:
    """Shared loads, stores and cp.async copies of one k-step in the k loop of whole tiles
    (:func:`fast_loop`), by opcode: the loop's counts divided by the k-steps it holds (ptxas
    may unroll several; each has its barriers)."""
    body = fast_loop(instructions) or main_loop(instructions)
    bars = sum(1 for text in body if re.search(r"\bBAR\.SYNC\b", text))
    if not body or bars == 0 or bars % barriers_per_step:
        raise MatvizError(f"no k loop with a multiple of {barriers_per_step} barriers in the SASS")
    steps = bars // barriers_per_step
    ops = Counter(op for op in map(shared_op, body) if op)
    if any(n % steps for n in ops.values()):
        raise MatvizError(f"the k loop's shared instructions do not divide into {steps} k-steps")
    return {op: n // steps for op, n in sorted(ops.items())}

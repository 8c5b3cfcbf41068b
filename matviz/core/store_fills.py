"""Why conflict-free shared stores read high in ncu: L1 fills, measured on the H200.

``resources/bench/h200_ncu_store_fills_1024.txt`` holds ncu's shared-store instructions and
wavefronts for one level-0 launch at 1024³ of each listed configuration, in three variants of
the kernel source (``matviz/bench/ncu_store_fills.py``): ``plain``; ``ldcg``, whose global loads
are cached in L2 only (``__ldcg``), so no L1 fill shares the data banks with the stores; and
``const``, which stores values made in registers (no global load at all). Without the fills ncu
counts exactly the bank model's wavefronts; with them, stores count more.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from matviz.paths import RESOURCE_DIR

if TYPE_CHECKING:
    from matviz.core.kernel import Kernel

MEASUREMENTS = RESOURCE_DIR / "bench" / "h200_ncu_store_fills_1024.txt"
# ncu against the bank model at 1024^3; its cp.async table rows: | configuration | model | ncu |
BANKS_TABLE = RESOURCE_DIR / "bench" / "h200_ncu_banks_1024.md"
_COPY_HEADER = "| configuration | LDGSTS conflicts per instruction, model | ncu |"
VARIANTS = ("plain", "ldcg", "const")
_LINE = re.compile(r"^(\w+) (\{[^}]*\}) (\w+) (.*)$")
_METRIC = re.compile(r"([\w.]+)=([\d,]+)")
_ST_INST = "smsp__inst_executed_op_shared_st.sum"
_ST_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"


@dataclass(frozen=True)
class StoreCount:
    kernel: str
    params: dict
    variant: str
    instructions: int
    wavefronts: int

    @property
    def per_instruction(self) -> float:
        return self.wavefronts / self.instructions


def read(path: Path = MEASUREMENTS) -> list[StoreCount]:
    """Every measured (configuration, variant); lines that are not measurements are skipped."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _LINE.match(line.strip())
        if not m or m[3] not in VARIANTS:
            continue
        metrics = {name: int(value.replace(",", "")) for name, value in _METRIC.findall(m[4])}
        if metrics.get(_ST_INST) and _ST_WAVEFRONTS in metrics:
            out.append(
                StoreCount(m[1], json.loads(m[2]), m[3], metrics[_ST_INST], metrics[_ST_WAVEFRONTS])
            )
    return out


@lru_cache(maxsize=1)
def excess_range() -> tuple[float, float]:
    """Smallest and largest share of extra store wavefronts the fills cost (plain over ldcg)."""
    counts = read()
    base = {(c.kernel, json.dumps(c.params)): c for c in counts if c.variant == "ldcg"}
    shares = [
        c.wavefronts / base[key].wavefronts - 1.0
        for c in counts
        if c.variant == "plain" and (key := (c.kernel, json.dumps(c.params))) in base
    ]
    return (min(shares), max(shares)) if shares else (0.0, 0.0)


def table_tag(kernel: Kernel, params: dict) -> str:
    """How the ncu tables name a configuration: ``07_async_pipeline_BM64_BN64_...``."""
    return f"{kernel.stem}_{kernel.labels(params).replace(' ', '_')}"


def copy_conflicts_of(
    kernel: Kernel, params: dict, path: Path = BANKS_TABLE
) -> tuple[float, float] | None:
    """(model, ncu) bank conflicts per cp.async store of this configuration; None where ncu
    has not measured it."""
    tag = table_tag(kernel, params)
    return next(((m, n) for t, m, n in copy_conflicts(path) if t == tag), None)


@lru_cache(maxsize=1)
def copy_conflicts(path: Path = BANKS_TABLE) -> tuple[tuple[str, float, float], ...]:
    """(configuration tag, model, ncu) bank conflicts per cp.async store instruction (LDGSTS)
    of every measured configuration; () where the table has none. A tag starts with the
    kernel's stem: ``07_async_pipeline_BM64_...``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ()
    out = []
    inside = False
    for line in lines:
        if line.strip() == _COPY_HEADER:
            inside = True
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if inside and len(cells) == 3 and not cells[1].startswith("-"):
            try:
                out.append((cells[0], float(cells[1]), float(cells[2])))
            except ValueError:
                continue
        elif inside and line.strip() and not line.startswith("|"):
            inside = False
    return tuple(out)

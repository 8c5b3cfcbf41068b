"""What ptxas emitted for each configuration, from the bundled table
(``resources/bench/sass_sm90_shared_ops.json``, written by ``python -m matviz.bench.sass_table``):
the shared loads and stores of one warp in one k-step, by opcode. The bank model merges a
description's accesses the way ptxas usually does; this table is what it really did."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from matviz.paths import RESOURCE_DIR

TABLE = RESOURCE_DIR / "bench" / "sass_sm90_shared_ops.json"


def key(stem: str, labels: str) -> str:
    return f"{stem} {labels}"


@lru_cache(maxsize=1)
def _table() -> dict:
    try:
        return json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def source() -> str:
    return str(_table().get("source", ""))


def emitted(stem: str, labels: str) -> dict[str, int] | None:
    """Opcode -> instructions per warp and k-step, or None for a configuration not in it."""
    rows = _table().get("per_warp_and_k_step", {})
    row = rows.get(key(stem, labels))
    return {str(op): int(n) for op, n in row.items()} if isinstance(row, dict) else None


# -- the k loop ptxas emits (resources/bench/sass_sm90_k_loops.json) ------------------------------
K_LOOPS = RESOURCE_DIR / "bench" / "sass_sm90_k_loops.json"


@dataclass(frozen=True)
class KLoop:
    """One k-step of a configuration's fast k loop (aligned rows, whole tiles), level 0, as
    ptxas emitted it (``python -m matviz.bench.sass_loops --table``)."""

    instructions: float
    math_op: str  # FFMA (the FP32 pipe) or HMMA (the Tensor Cores)
    math: float
    shared_loads: float
    copies: float  # global loads, cp.async copies and shared stores

    @property
    def math_share(self) -> float:
        """Multiply-adds, % of the loop's instructions."""
        return 100.0 * self.math / self.instructions


@lru_cache(maxsize=1)
def _k_loops() -> dict:
    try:
        return json.loads(K_LOOPS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def k_loop(stem: str, labels: str) -> KLoop | None:
    """The configuration's k loop, or None where the table has none (no multiply-add loop, or a
    configuration not in it)."""
    row = _k_loops().get("per_k_step", {}).get(key(stem, labels))
    try:
        return KLoop(**row) if isinstance(row, dict) else None
    except TypeError:  # a table from another version
        return None


def k_loops_source() -> str:
    return str(_k_loops().get("source", ""))

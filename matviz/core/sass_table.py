"""What ptxas emitted for each configuration, from two bundled tables.

``resources/bench/sass_sm90_shared_ops.json`` (``python -m matviz.bench.sass_table``): the
shared loads and stores of one warp in one k-step, by opcode. The bank model merges a
description's accesses the way ptxas usually does; this table is what it really did.

``resources/bench/sass_sm90_k_loops.json`` (``python -m matviz.bench.sass_loops --table``): the
instructions of one k-step of the k loop, and how many are multiply-adds (the issue ceiling,
:func:`matviz.core.ceilings.issue_ceiling`)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class KLoop(BaseModel):
    """One k-step of a configuration's fast k loop (aligned rows, whole tiles), level 0, as
    ptxas emitted it (``python -m matviz.bench.sass_loops --table``)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    instructions: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    math_op: Literal["FFMA", "HMMA"]  # the FP32 pipe or the Tensor Cores
    math: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    shared_loads: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    copies: Annotated[float, Field(ge=0, allow_inf_nan=False)]  # global loads, cp.async, STS

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
    table = _k_loops()
    rows = table.get("per_k_step") if isinstance(table, dict) else None
    row = rows.get(key(stem, labels)) if isinstance(rows, dict) else None
    try:
        loop = KLoop.model_validate(row) if row is not None else None
    except ValidationError:  # a table from another version, or damaged
        return None
    return loop if loop is None or loop.math <= loop.instructions else None

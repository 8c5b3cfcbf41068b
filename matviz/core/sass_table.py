"""What ptxas emitted for each configuration, from two bundled tables.

``resources/bench/sass_sm90_shared_ops.json`` (``python -m matviz.bench.sass_table``): the
shared loads, stores, ldmatrix and cp.async copies of one warp in one k-step, by opcode. The
bank model merges a description's accesses the way ptxas usually does; this table is what it
really did.

``resources/bench/sass_sm90_k_loops.json`` (``python -m matviz.bench.sass_loops --table``): the
instructions of one k-step of the k loop, and how many are multiply-adds (the issue ceiling,
:func:`matviz.core.ceilings.issue_ceiling`)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from matviz.paths import RESOURCE_DIR

TABLE = RESOURCE_DIR / "bench" / "sass_sm90_shared_ops.json"


def key(stem: str, labels: str) -> str:
    return f"{stem} {labels}"


@lru_cache(maxsize=4)
def _load(path: Path) -> dict:
    """A bundled table ({} where it is missing or not a JSON object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def source() -> str:
    return str(_load(TABLE).get("source", ""))


def emitted(stem: str, labels: str) -> dict[str, int] | None:
    """Opcode -> instructions per warp and k-step, or None for a configuration not in it."""
    rows = _load(TABLE).get("per_warp_and_k_step", {})
    row = rows.get(key(stem, labels)) if isinstance(rows, dict) else None
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

    @model_validator(mode="after")
    def _math_among_instructions(self) -> KLoop:
        if self.math > self.instructions:
            raise ValueError("more multiply-adds than instructions")
        return self

    @property
    def math_share(self) -> float:
        """Multiply-adds, % of the loop's instructions."""
        return 100.0 * self.math / self.instructions


def k_loop(stem: str, labels: str) -> KLoop | None:
    """The configuration's k loop, or None where the table has none (no multiply-add loop, a
    configuration not in it, or a damaged row)."""
    return _k_loop_in(K_LOOPS, key(stem, labels))


@lru_cache(maxsize=512)  # the info box, the views and the lessons ask for the same ones
def _k_loop_in(path: Path, name: str) -> KLoop | None:
    rows = _load(path).get("per_k_step")
    row = rows.get(name) if isinstance(rows, dict) else None
    try:
        return KLoop.model_validate(row) if row is not None else None
    except ValidationError:  # a table from another version, or damaged
        return None

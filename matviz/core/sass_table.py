"""What ptxas emitted for each configuration, from the bundled table
(``resources/bench/sass_sm90_shared_ops.json``, written by ``python -m matviz.bench.sass_table``):
the shared loads and stores of one warp in one k-step, by opcode. The bank model merges a
description's accesses the way ptxas usually does; this table is what it really did."""

from __future__ import annotations

import json
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

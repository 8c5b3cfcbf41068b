"""The README's benchmark tables are what the commands make from the bundled results."""

from __future__ import annotations

import json
import re

from matviz.bench import ladder, readme_table
from matviz.cli import bench
from matviz.paths import RESOURCE_DIR

README = readme_table.README


def section(start: str, end: str) -> str:
    found = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), README.read_text(), re.S)
    assert found, start
    return found.group(1)


def test_the_kernel_table_is_the_saved_benchmark():
    source = "resources/bench/h200_kernels_4096.json"
    rows = json.loads((RESOURCE_DIR / "bench" / "h200_kernels_4096.json").read_text())
    text = section(readme_table.START, readme_table.END)
    assert text == readme_table.table(rows, source)
    # one table per input type, each against cuBLAS on its own inputs
    assert text.count("| kernel | parameters |") == len({r.get("dtype", "float32") for r in rows})


def test_the_ladder_table_is_the_saved_ladder():
    source = "resources/bench/h200_ladder_4096.json"
    rows = ladder.load_rows(RESOURCE_DIR / "bench" / "h200_ladder_4096.json")
    assert section(bench.README_START, bench.README_END) == ladder.markdown(rows, source)

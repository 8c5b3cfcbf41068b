"""One level-0 launch of a kernel at 1024³ in one of three variants of its source, for ncu to
count shared-store wavefronts (``matviz/bench/ncu_store_fills.sh`` runs it; the table it writes
is ``resources/bench/h200_ncu_store_fills_1024.txt``, read by ``matviz/core/store_fills.py``):

* ``plain``: the kernel as it is;
* ``ldcg``: every load of A and B through ``__ldcg`` (cached in L2, not L1), so no L1 fill
  lands in the data banks while the tile is stored;
* ``const``: stores a value made in registers instead of loading A and B.

    python3 -m matviz.bench.ncu_store_fills VARIANT KERNEL 'PARAMS_JSON'
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from matviz.core.registry import get_kernel
from matviz.paths import KERNEL_DIR

_GLOBAL_LOAD = re.compile(r"\b([AB])\[([^\]]+)\]")
SIZE = 1024


def variant_source(source: str, variant: str) -> str:
    """The kernel's source with its A and B loads rewritten for ``variant``."""
    if variant == "ldcg":
        return _GLOBAL_LOAD.sub(r"__ldcg(&\1[\2])", source)
    if variant == "const":
        return _GLOBAL_LOAD.sub(r"((float)((\2) & 7) * 0.125f)", source)
    if variant == "plain":
        return source
    raise ValueError(f"unknown variant {variant!r}")


def main(argv: list[str] | None = None) -> int:
    import cupy
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", choices=("plain", "ldcg", "const"))
    parser.add_argument("kernel")
    parser.add_argument("params", help='JSON, e.g. \'{"tile": 32, "pad": 0}\'')
    args = parser.parse_args(argv)
    kernel = get_kernel(args.kernel)
    n = SIZE
    config = kernel.configure(json.loads(args.params), n, n, n)
    header = (KERNEL_DIR / "trace.cuh").read_text(encoding="utf-8")
    source = kernel.source.read_text(encoding="utf-8").replace('#include "trace.cuh"', header)
    module = cupy.RawModule(
        code=variant_source(source, args.variant), options=("-std=c++17", *config.defines(0))
    )
    function = module.get_function(config.kernel.entry_point)
    rng = cupy.random.default_rng(7)
    A = rng.uniform(-1.0, 1.0, (n, n), dtype=cupy.float32)
    B = rng.uniform(-1.0, 1.0, (n, n), dtype=cupy.float32)
    C = cupy.full((n, n), cupy.nan, cupy.float32)
    function(config.grid, config.block, (A, B, C, np.int32(n), np.int32(n), np.int32(n)))
    cupy.cuda.runtime.deviceSynchronize()
    if bool(cupy.isnan(C).any()):
        print("ncu_store_fills: the kernel left C unwritten", file=sys.stderr)
        return 1
    if args.variant != "const":
        ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
        err = float(cupy.linalg.norm(C - ref) / cupy.linalg.norm(ref))
        if err > 1e-5:
            print(f"ncu_store_fills: wrong result (relative error {err:.1e})", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

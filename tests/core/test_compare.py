"""Issue 12, item 2: the figures the compare view shows, from the bundled H200 recordings."""

from __future__ import annotations

import pytest

from matviz.core import compare
from matviz.core.trace_io import load_trace
from matviz.paths import TRACE_DIR

BANDWIDTH = 4300.0


@pytest.mark.parametrize(
    ("name", "requested_mb", "per_element", "per_block"),
    [
        ("naive_t16_1024", 8589.9, 2 * 1024, 2 * 1024 * 256),  # 2k per element, 256 of them
        ("tiled_t16_p0_1024", 536.9, 2 * 1024 / 16, 2 * 16 * 1024),  # 2k/b and 2bk
        ("tiled_t32_p0_1024", 268.4, 2 * 1024 / 32, 2 * 32 * 1024),
    ],
)
def test_the_lessons_traffic_figures(name, requested_mb, per_element, per_block):
    trace = load_trace(TRACE_DIR / f"{name}.mvz")
    f = compare.figures(trace, BANDWIDTH)
    assert f.requested_bytes / 1e6 == pytest.approx(requested_mb, rel=1e-3)
    assert f.loads_per_element == per_element and f.loads_per_block == per_block
    assert f.intensity == pytest.approx(2 * 1024**3 / f.requested_bytes)
    assert f.dram_ceiling_gflops == pytest.approx(f.intensity * BANDWIDTH)
    assert f.gflops == trace.manifest["stats"]["gflops"] and f.gflops > 0


def test_caches_carry_the_naive_kernel_past_the_dram_ceiling():
    naive = compare.figures(load_trace(TRACE_DIR / "naive_t16_1024.mvz"), BANDWIDTH)
    tiled = compare.figures(load_trace(TRACE_DIR / "tiled_t32_p0_1024.mvz"), BANDWIDTH)
    assert naive.gflops > naive.dram_ceiling_gflops  # L1/L2 served most of its 8.6 GB
    assert tiled.gflops < tiled.dram_ceiling_gflops  # the tiled kernel is not memory-bound


def test_padding_lifts_the_shared_memory_ceiling_and_leaves_dram_s():
    """§27: the same kernel, padded: the same bytes from DRAM, fewer wavefronts in shared
    memory. Both recorded runs stay under their shared-memory ceilings."""
    p0 = compare.figures(load_trace(TRACE_DIR / "tiled_transposed_t32_p0_1024.mvz"), BANDWIDTH)
    p1 = compare.figures(load_trace(TRACE_DIR / "tiled_transposed_t32_p1_1024.mvz"), BANDWIDTH)
    assert p0.dram_ceiling_gflops == pytest.approx(p1.dram_ceiling_gflops)
    assert p0.shared_ceiling_gflops < p1.shared_ceiling_gflops
    for f in (p0, p1):
        assert f.gflops < f.shared_ceiling_gflops
    naive = compare.figures(load_trace(TRACE_DIR / "naive_t16_1024.mvz"), BANDWIDTH)
    assert naive.shared_ceiling_gflops is None  # no shared memory

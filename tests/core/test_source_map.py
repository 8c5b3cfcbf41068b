"""The lines of a kernel's source each phase covers, at a configuration."""

from __future__ import annotations

from matviz.core import source_map
from matviz.core.registry import get_kernel


def test_a_pipelined_configuration_lights_its_own_loop_only():
    kernel = get_kernel("wmma")
    text = kernel.source.read_text()
    lines = text.splitlines()

    def lit(stages: int, phase: str) -> str:
        config = kernel.configure({"STAGES": stages}, 1000, 777, 336)
        spans = next(p.spans for p in source_map.phase_lines(config, text) if p.phase == phase)
        return "\n".join(lines[n - 1] for first, last in spans for n in range(first, last + 1))

    synchronous, pipelined = lit(1, "compute"), lit(3, "compute")
    for code in (synchronous, pipelined):
        assert "wmma::mma_sync" in code and "#if" not in code and "#else" not in code
    assert "barrier 2" in synchronous and "cp_async_wait" not in synchronous
    assert "barrier 2" not in pipelined and "MV_STEP_MARK(1, t, 1)" in pipelined
    assert "barrier 1" in lit(1, "load") and "load_chunk(A" in lit(1, "load")

"""GPU tests: they need CuPy and a CUDA device, and skip cleanly anywhere else."""

import pytest

from matviz.backends.cuda_status import cuda_status


def pytest_collection_modifyitems(config, items):
    ok, why = cuda_status()
    for item in items:
        if "tests/gpu" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if not ok:
                item.add_marker(pytest.mark.skip(reason=f"CUDA unavailable: {why}"))

"""Export tests: offscreen Qt, small simulated traces shared between tests (never mutated)."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from functools import cache  # noqa: E402

import pytest  # noqa: E402

from matviz.backends.contract import RunRequest, run  # noqa: E402
from matviz.core.trace_io import save_trace  # noqa: E402


@cache
def sim(kernel="tiled", m=64, n=96, k=80, tile=16, pad=0, level=3, phase_every=1):
    """Deterministic, so tests can share them; 64x96x80 at T16 = 24 blocks x 5 k-tiles."""
    params = {"tile": tile} if kernel == "naive" else {"tile": tile, "pad": pad}
    request = RunRequest(kernel, m, n, k, params=params, level=level, phase_every=phase_every)
    return run(request)


@pytest.fixture
def trace():
    return sim()


@pytest.fixture
def make_sim():
    return sim


@pytest.fixture
def mvz(tmp_path, trace):
    path = tmp_path / "small.mvz"
    save_trace(trace, path)
    return path


@pytest.fixture
def no_leftovers(tmp_path):
    """After the test, the folder holds no hidden temporary (partial) export files."""
    yield tmp_path
    hidden = [p.name for p in tmp_path.iterdir() if p.name.startswith(".") and ".part" in p.name]
    assert not hidden, f"partial files left behind: {hidden}"



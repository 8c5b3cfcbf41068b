"""On real hardware: correctness, the probe against the access model, trace integrity, timers."""


import numpy as np
import pytest

from matviz.backends.contract import RunRequest
from matviz.core import access, metrics
from matviz.core.registry import get_kernel, kernels
from matviz.core.trace_io import load_trace, save_trace

cupy_recorder = pytest.importorskip("matviz.backends.cupy_recorder")
Recorder = cupy_recorder.Recorder

SHAPES = [(256, 256, 256), (1000, 777, 333), (1, 1, 1), (33, 65, 17)]
CONFIGS = [(k.name, params) for k in kernels().values() for params in k.configurations()]


def request(kernel, M, N, K, params, **more) -> RunRequest:
    return RunRequest(kernel, M, N, K, params, backend="cuda", **more)


@pytest.mark.parametrize("kernel,params", CONFIGS, ids=lambda v: str(v))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_configuration_is_correct(kernel, params, shape):
    for level in (0, 1, 2, 3):
        rec = Recorder(request(kernel, *shape, params, level=level))
        assert rec.verify() <= 1e-5


# one conformance test per registered kernel configuration with shared-memory sites
MODELLED = [(name, p) for name, p in CONFIGS if get_kernel(name).sites]


@pytest.mark.parametrize("kernel,params", MODELLED, ids=lambda v: str(v))
def test_probe_equals_access_model(kernel, params):
    M, N, K = 200, 150, 100  # several blocks and k-tiles, ragged edges
    config = get_kernel(kernel).configure(params, M, N, K)
    gx, gy = config.grid
    probe = dict(
        probe_block=(gx - 1, gy // 2),
        probe_warp=config.warps - 1,
        probe_ktile=config.n_steps - 1,
    )
    trace = Recorder(request(kernel, M, N, K, params, level=3, **probe)).run()
    model = access.access_records(
        config, probe["probe_warp"], probe["probe_block"], probe["probe_ktile"]
    )
    np.testing.assert_array_equal(trace.probe["site"], model["site"])
    np.testing.assert_array_equal(trace.probe["k"], model["k"])
    np.testing.assert_array_equal(trace.probe["offsets"], model["offsets"])
    # banks depend on the absolute address: the tiles must start on a 128-byte boundary
    assert trace.manifest["sampling"]["probe"]["smem_base"] % 128 == 0


@pytest.mark.parametrize("kernel", list(kernels()))
def test_trace_integrity(kernel, tmp_path):
    M, N, K = 700, 600, 500
    trace = Recorder(request(kernel, M, N, K, {}, level=3)).run()
    geometry = trace.config
    blocks = trace.blocks
    # every block once, in launch order
    assert len(blocks) == geometry.n_blocks
    linear = blocks["by"].astype(int) * geometry.grid[0] + blocks["bx"]
    np.testing.assert_array_equal(linear, np.arange(geometry.n_blocks))
    assert blocks["start"].min() == 0
    assert np.all(blocks["end"] >= blocks["start"])
    assert blocks["smid"].max() < trace.manifest["device"]["sm_count"]
    # the occupancy model, fed the compiled register count, predicts the residency seen
    occ = trace.manifest["occupancy"]
    assert metrics.max_resident(trace) == min(occ["resident_blocks"], geometry.n_blocks)
    assert metrics.waves(trace) == occ["waves"]
    # this GPU's own limits give the residency the driver's occupancy calculator gives
    assert occ["blocks_per_sm"] == occ["driver_blocks_per_sm"]
    if geometry.n_steps:
        issue, loaded, computed = trace.issue, trace.loaded, trace.computed
        assert np.all(issue <= loaded) and np.all(loaded <= computed)
        assert np.all(computed[:, :-1] <= issue[:, 1:])
        starts = blocks["start"][trace.phase_blocks][:, None]
        ends = blocks["end"][trace.phase_blocks][:, None]
        assert np.all(issue >= starts) and np.all(computed <= ends)
        # the last warp to arrive at a barrier hardly waits: the per-warp clocks are right
        assert trace.manifest["stats"]["last_arrival_wait_ns_max"] <= 2000
        # a warp cannot wait at a barrier longer than its block ran
        durations = (ends - starts)[np.searchsorted(trace.phase_blocks, trace.warp_blocks)]
        assert np.all(trace.barrier_wait <= durations[:, :, None, None])
    path = tmp_path / "t.mvz"
    save_trace(trace, path)
    again = load_trace(path)
    np.testing.assert_array_equal(again.blocks, trace.blocks)


def test_globaltimer_span_matches_cuda_events():
    trace = Recorder(request("tiled", 2048, 2048, 2048, {"tile": 32, "pad": 0}, level=1)).run()
    stats = trace.manifest["stats"]
    assert abs(stats["span_vs_event"] - 1.0) <= 0.02, stats


def test_probe_outside_grid_is_refused():
    from matviz.errors import MatvizError

    with pytest.raises(MatvizError, match="probe block"):
        Recorder(request("tiled", 64, 64, 64, {"tile": 16}, level=3, probe_block=(9, 9)))


def test_recorded_and_simulated_manifests_have_the_same_keys():
    from matviz.backends.simulator import simulate

    req = request("tiled", 256, 192, 160, {"tile": 16, "pad": 1}, level=3)
    recorded = Recorder(req).run().manifest
    simulated = simulate(req.with_backend("sim")).manifest
    assert list(recorded) == list(simulated)
    for section in ("timer", "geometry", "sampling", "stats", "description"):
        assert set(recorded[section]) == set(simulated[section]), section
    assert recorded["description"] == simulated["description"]

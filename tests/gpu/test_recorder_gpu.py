"""On real hardware: correctness, the probe against the access model, trace integrity, timers."""

from pathlib import Path

import numpy as np
import pytest

from matviz.backends.contract import RunRequest
from matviz.core import access, metrics, registry, sampling
from matviz.core.config import STAMP_FORMS
from matviz.core.kernel import Params
from matviz.core.registry import get_kernel, kernels
from matviz.core.trace_io import load_trace, save_trace

cupy_recorder = pytest.importorskip("matviz.backends.cupy_recorder")
Recorder = cupy_recorder.Recorder

SHAPES = [(256, 256, 256), (1000, 777, 333), (1, 1, 1), (33, 65, 17)]
CONFIGS = [(k.name, params) for k in kernels().values() for params in k.configurations()]


def allowed(kernel: str, M: int, N: int, K: int) -> tuple[int, int, int]:
    """The shape, or the nearest larger K the kernel's shape rules accept (kernel 11's TMA
    rows need K % 8 == 0): odd M and N stay odd."""
    spec = get_kernel(kernel)
    p = Params(spec.resolve_params({}))
    while not all(rule.holds(p, M, N, K) for rule in spec.shape_rules):
        K += 1
    return M, N, K


def request(kernel, M, N, K, params, **more) -> RunRequest:
    return RunRequest(kernel, M, N, K, params, backend="cuda", **more)


@pytest.mark.parametrize("kernel,params", CONFIGS, ids=lambda v: str(v))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_configuration_is_correct(kernel, params, shape):
    # fp16/bf16 kernels are held to the same bound: the recorder rounds A and B to the
    # kernel's type before the float64 reference multiplies them, so only the kernel's own
    # arithmetic differs: products of 11- (8-) bit significands are exact in fp32, and the
    # sums accumulate in fp32 as in the fp32 kernels (measured 1e-7 to 4e-7 on the H200)
    for level in (0, 1, 2, 3):
        rec = Recorder(request(kernel, *allowed(kernel, *shape), params, level=level))
        assert rec.verify() <= 1e-5


# one conformance test per registered kernel configuration with shared-memory sites
MODELLED = [(name, p) for name, p in CONFIGS if get_kernel(name).sites_at(p)]


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


TENSOR_CORE = [(name, p) for name, p in CONFIGS if get_kernel(name).mma]


@pytest.mark.parametrize("kernel,params", TENSOR_CORE, ids=lambda v: str(v))
def test_fragments_the_gpu_loads_are_the_descriptions(kernel, params):
    """Which element each lane holds in each fragment slot: measured on the GPU (the level-3
    fragment probe) against the description the fragment view draws from."""
    trace = Recorder(request(kernel, 64, 64, 64, params, level=3)).run()
    described = trace.manifest["description"]["mma"]["fragments"]
    assert trace.fragments.shape[0] == len(described)
    for measured, fragment in zip(trace.fragments, described, strict=True):
        elements = np.asarray(fragment["elements"])
        slots = elements.shape[1]
        np.testing.assert_array_equal(measured[:, :slots], elements, err_msg=fragment["operand"])
        assert np.all(measured[:, slots:] == -1), fragment["operand"]  # no slot left out
        # every element of the operand's tile is held by some lane
        assert set(elements.ravel()) == set(range(fragment["rows"] * fragment["cols"]))


FORMS = STAMP_FORMS  # trace.cuh's forms of the level-2 marks (MV_STAMP_STORE, MV_STAMP_HELD)
# the pipelined kernels' channels hold two marks, or their shared memory is sized at launch: no
# held form (config.stamp_forms; test_trace_integrity sees it refused)
PIPELINE_FORMS = [form for form in FORMS if form != "held"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kernel", list(kernels()))
def test_trace_integrity(kernel, form, tmp_path):
    M, N, K = allowed(kernel, 700, 600, 500)
    asked = request(kernel, M, N, K, {}, level=3, stamp_form=form)
    config = get_kernel(kernel).configure({}, M, N, K)
    if config.n_steps and form not in config.stamp_forms:  # one line, nothing recorded
        with pytest.raises(MatvizError, match=f"has no {form} form"):
            Recorder(asked).run()
        return
    trace = Recorder(asked).run()
    geometry = trace.config
    if geometry.n_steps:
        assert trace.manifest["stats"]["stamp_form"] == form
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
    # occupancy is the timeline build's (level 2 here), not the plain or the level-3 one
    timeline = trace.manifest["sampling"]["timeline_level"]
    assert occ["registers"] == trace.manifest["geometry"]["registers"][f"level_{timeline}"]
    # this GPU's own limits give the residency the driver's occupancy calculator gives
    assert occ["blocks_per_sm"] == occ["driver_blocks_per_sm"]
    if geometry.n_steps:
        marks = trace.marks
        assert marks.shape == (len(trace.phase_blocks), geometry.n_steps, len(geometry.marks))
        # a pipeline's copy of step t + S - 1 goes out once step t's has landed (S in flight)
        ahead = max(1, geometry.layout.in_flight - 1)
        for channel in geometry.channel_marks:
            stamped = marks[:, :, list(channel)]
            # a channel stamps its marks in order, each mark step by step, and a step ends
            # before the step `ahead` later begins
            assert np.all(np.diff(stamped, axis=2) >= 0)
            assert np.all(np.diff(stamped, axis=1) >= 0)
            assert np.all(stamped[:, :-ahead, -1] <= stamped[:, ahead:, 0])
        starts = blocks["start"][trace.phase_blocks][:, None]
        ends = blocks["end"][trace.phase_blocks][:, None]
        assert np.all(marks >= starts[..., None]) and np.all(marks <= ends[..., None])
        if geometry.n_barriers:
            # the last warp to arrive at a barrier hardly waits: the per-warp clocks are right
            assert trace.manifest["stats"]["last_arrival_wait_ns_max"] <= 2000
        # a warp cannot wait at a barrier longer than its block ran
        durations = (ends - starts)[np.searchsorted(trace.phase_blocks, trace.warp_blocks)]
        assert np.all(trace.barrier_wait <= durations[:, :, None, None])
    path = tmp_path / "t.mvz"
    save_trace(trace, path)
    again = load_trace(path)
    np.testing.assert_array_equal(again.blocks, trace.blocks)


def test_the_recorder_keeps_the_form_of_the_marks_closer_to_level_0():
    """Left to the recorder, each form is built and timed beside level 0; the one kept is
    the one whose overhead is nearer zero, and the trace says so with every figure."""
    req = request("vectorized", 2048, 2048, 2048, {}, level=2, repeats=5, stamp_form="auto")
    trace = Recorder(req).run()
    stats = trace.manifest["stats"]
    tried = stats["stamp_form_overheads_pct"]
    # the forms whose builds keep level 0's blocks per SM; the lanes form among them here
    assert "lanes" in tried and set(tried) <= set(trace.config.stamp_forms)
    assert stats["stamp_form"] == min(tried, key=lambda f: abs(tried[f]))
    print(f"\nvectorized 2048^3: {tried}, kept {stats['stamp_form']}")


@pytest.mark.parametrize(
    "kernel,params,size,target",
    [("tiled", {"tile": 32, "pad": 2}, 4096, 3.0),  # measured +5.5% with every block stamping
     ("register_tiling_1d", {"BM": 64, "BN": 128, "BK": 8, "TM": 16}, 2048, 3.0),
     # +8.5% at every stride in the lanes form, +2.75% at 1 in 8 held (H100)
     ("register_tiling_1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 16}, 4096, 3.0),
     ("tiled", {"tile": 16, "pad": 0}, 1024, 0.001),  # a target no stride meets
     # 1,024 blocks: +9.7% every block, +5.5% at 1 in 4, +1.0% at 1 in 16 (64 blocks; H100)
     ("mma_pipeline", {"BM": 128, "BN": 128, "BK": 32, "STAGES": 3, "SWIZZLE": 1}, 4096, 3.0)],
    ids=["T32-P2", "04-TM16", "04-BK8-held", "unreachable", "10-sparse"],
)  # fmt: skip
def test_the_recorder_stamps_fewer_blocks_until_within_its_target(kernel, params, size, target):
    """Level 2 is timed beside level 0 with 1 block in 1, 2, 4 ... stamping; the first stride
    within the target is kept, or, where none is, the closest before too few blocks would
    stamp. The trace holds that stride's phases and every figure on the way."""
    req = request(kernel, size, size, size, params, level=2, repeats=5, overhead_target_pct=target)
    trace = Recorder(req).run()
    stats, sampled = trace.manifest["stats"], trace.manifest["sampling"]
    config, sms = trace.config, trace.manifest["device"]["sm_count"]
    tried = stats["phase_every_overheads_pct"]
    strides = [n for n, _ in tried]
    assert strides == [2**i for i in range(len(strides))]
    within = [n for n, pct in tried if abs(pct) <= target]
    assert within in ([], [strides[-1]])  # no stride is timed past the first within
    if within:
        assert sampled["phase_every"] == within[0]
    else:  # doubling stopped where too few blocks would stamp, and the closest was kept
        least = sampling.least_stamped_blocks(sms)
        wider = 2 * strides[-1]
        assert sampling.sampled_blocks(config.n_blocks, wider) < least or (
            wider > sampling.MAX_KEPT_STRIDE
        )
        assert sampled["phase_every"] == min(tried, key=lambda t: (abs(t[1]), t[0]))[0]
    every = sampled["phase_every"]
    np.testing.assert_array_equal(trace.phase_blocks, np.arange(0, config.n_blocks, every))
    assert trace.marks.shape == (len(trace.phase_blocks), config.n_steps, len(config.marks))
    print(f"\n{kernel} {params} {size}^3: tried {tried}, kept 1 in {every}, "
          f"overhead {stats['overhead_pct']:+.2f}%")  # fmt: skip


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


# -- several k-steps in flight: the test-only double-buffered kernel (issue 9) -------------------
PROOF = Path(__file__).resolve().parents[1] / "kernels" / "05_double_buffered.py"


@pytest.fixture
def double_buffered(monkeypatch):
    """The registry with the test kernel added, for RunRequest and Trace.config."""
    kernel = registry._load(PROOF)
    found = {**registry.kernels(), kernel.name: kernel}
    monkeypatch.setattr(registry, "kernels", lambda: found)
    return kernel


@pytest.mark.parametrize(
    "tile,level,every",
    [(16, 3, 1), (32, 2, 3), (8, 2, 1)],
    ids=["T16-level3", "T32-every3", "T8"],
)
def test_double_buffered_copy_overlaps_compute(double_buffered, tile, level, every, tmp_path):
    # K = 1000: a ragged last tile, 63 steps at T=16 (two flushes of 32 and a partial one),
    # 32 at T=32 (exactly one flush), 125 at T=8
    M, N, K = 520, 384, 1000
    for check_level in (0, 1, 2, 3):
        rec = Recorder(request("double_buffered", M, N, K, {"tile": tile}, level=check_level))
        assert rec.verify() <= 1e-5, check_level
    req = request("double_buffered", M, N, K, {"tile": tile}, level=level, phase_every=every,
                  repeats=3, overhead_target_pct=None)  # fmt: skip
    trace = Recorder(req).run()
    config = trace.config
    stats = trace.manifest["stats"]
    assert stats["rel_error"] <= 1e-5 and stats["rel_error_instrumented"] <= 1e-5
    assert stats["saturated_phase_spans"] == 0  # every offset below is exact
    np.testing.assert_array_equal(trace.phase_blocks, np.arange(0, config.n_blocks, every))
    assert trace.marks.shape == (len(trace.phase_blocks), config.n_steps, 4)

    def mark(name):
        return trace.marks[:, :, config.mark_index(name)]

    issue, stored = mark("copy_issue"), mark("copy_stored")
    begin, end = mark("compute_begin"), mark("compute_end")
    # Warp 0 stamps both channels, so their order is its program order: copy t+1 issued,
    # compute t, copy t+1 stored, barrier, compute t+1 (clamping into the block keeps <=).
    assert np.all(issue <= stored) and np.all(begin <= end)
    assert np.all(stored <= begin)  # a step computes on a tile already stored
    assert np.all(issue[:, 1:] <= begin[:, :-1])
    assert np.all(end[:, :-1] <= stored[:, 1:])
    # every step of every sampled block was stamped: an unwritten one decodes to equal marks
    # (only a mark clamped to its block's end may tie by accident)
    written = float(np.mean((stored > issue) & (end > begin)))
    assert written >= 0.99, written
    # measured: the copy of step t + 1 is in flight for a positive time during compute t
    overlap = np.minimum(stored[:, 1:], end[:, :-1]) - np.maximum(issue[:, 1:], begin[:, :-1])
    share = float(np.mean(overlap > 0))
    after = stored[:, 1:] - end[:, :-1]  # how long the copy outlives the compute
    summary = (
        f"overlap in {share:.1%} of steps, median overlap {np.median(overlap)} ns, "
        f"copy stored a median {np.median(after)} ns after compute ends"
    )
    print(f"\ndouble_buffered T={tile}: {summary}")
    assert share >= 0.9, summary
    assert float(np.median(after)) > 0, summary
    if level >= 3:
        assert trace.barrier_wait.shape[1:] == (config.n_steps, config.warps, 1)
    path = tmp_path / "double_buffered.mvz"
    save_trace(trace, path)
    np.testing.assert_array_equal(load_trace(path).marks, trace.marks)


# -- a cp.async pipeline: the copy of step t + S - 1 stamped beside the compute of step t ---------
@pytest.mark.parametrize(
    "kernel,params,K,level,every",
    [
        ("async_pipeline", {"BM": 64, "BN": 64, "BK": 16, "STAGES": 4}, 1000, 3, 1),  # 63 steps
        ("async_pipeline", {"BM": 64, "BN": 64, "BK": 8, "STAGES": 3, "pad": 0, "swizzle": 1},
         768, 2, 3),  # 96
        ("async_pipeline", {"BM": 128, "BN": 128, "BK": 16, "STAGES": 2}, 768, 2, 1),  # a flush
        ("mma_pipeline", {"STAGES": 4}, 1000, 3, 1),  # 32 steps, ragged
        ("mma_pipeline", {"STAGES": 3, "BF16": 1}, 2048, 2, 3),  # 64
        ("mma_pipeline", {"STAGES": 2, "BN": 256}, 1536, 2, 1),  # 48: ends on a flush
        ("wmma", {"STAGES": 3, "WT": 64}, 1000, 3, 1),  # 32 steps, ragged
        ("wmma", {"STAGES": 2, "BM": 64, "BN": 64, "BK": 16}, 1024, 2, 3),  # 64
    ],
    ids=["S4-level3", "S3-every3", "S2", "mma-S4-level3", "mma-S3-every3-bf16", "mma-S2",
         "wmma-S3-level3", "wmma-S2-every3"],
)  # fmt: skip
@pytest.mark.parametrize("form", PIPELINE_FORMS)
def test_pipeline_copies_run_ahead_of_the_compute(kernel, params, K, level, every, form):
    M, N = 520, 384
    req = request(kernel, M, N, K, params, level=level, phase_every=every, repeats=3,
                  stamp_form=form, overhead_target_pct=None)  # fmt: skip
    trace = Recorder(req).run()
    config = trace.config
    stages = config.layout.in_flight
    assert stages == params["STAGES"]
    stats = trace.manifest["stats"]
    assert stats["rel_error"] <= 1e-5 and stats["rel_error_instrumented"] <= 1e-5
    assert stats["saturated_phase_spans"] == 0
    np.testing.assert_array_equal(trace.phase_blocks, np.arange(0, config.n_blocks, every))

    def mark(name):
        return trace.marks[:, :, config.mark_index(name)]

    issue, landed = mark("issue"), mark("landed")
    begin, computed = mark("begin"), mark("computed")
    # warp 0 stamps both channels in program order. Kernel 07: in step u it passes the barrier
    # (landed u), issues the copy of u + S - 1, computes u. Kernels 09 and 10 pass the barrier
    # that lands u + 1 before u's last mma (its fragments load while u's finish), then issue
    # the copy of u + S. Either way the first S - 1 copies go out before
    ahead = stages - 1
    assert np.all(issue <= landed) and np.all(landed <= begin) and np.all(begin <= computed)
    assert np.all(computed[:, :-1] <= begin[:, 1:]) and np.all(begin[:, :-1] <= landed[:, 1:])
    assert np.all(landed[:, :-ahead] <= issue[:, ahead:])
    assert np.all(issue[:, ahead:] <= begin[:, :-ahead])
    assert np.all(issue[:, :ahead] <= landed[:, :1])
    # every step was stamped (an unwritten one decodes to equal marks), the steps after a
    # flush of 16 and the partial flush after the loop included
    written = float(np.mean((landed > issue) & (computed > begin)))
    assert written >= 0.99, written
    # measured, not drawn: each copy is in flight through S - 1 computes
    flight = landed[:, ahead:] - issue[:, ahead:]
    computes = computed[:, ahead:] - begin[:, ahead:]
    wait = landed[:, 1:] - computed[:, :-1]
    print(
        f"\n{kernel} S={stages}: copy in flight a median {np.median(flight)} ns, "
        f"compute {np.median(computes)} ns, wait + barrier {np.median(wait)} ns"
    )
    assert float(np.median(flight)) > float(np.median(computes)) * (ahead - 0.5)
    if level >= 3:
        assert trace.barrier_wait.shape[1:] == (config.n_steps, config.warps, 1)


# -- warp specialisation: a producer warp fills a ring of slots, a consumer warp drains it ------
# Measured on the H200: clock64 read by warps 0-11 of one block right after one barrier agreed
# within 30 cycles (132 blocks), so the two channels' marks, stamped by warps 0 and 4 and both
# anchored with warp 0's clock, compare to within CROSS_WARP_NS.
CROSS_WARP_NS = 64


@pytest.mark.parametrize(
    "params,K,level,every",
    [
        ({"STAGES": 4}, 1000, 3, 1),  # 16 steps, a ragged last one
        ({"STAGES": 3, "BN": 128, "BF16": 0}, 2048, 2, 3),  # 32: ends on a flush
        ({"STAGES": 5, "BN": 128}, 4104, 2, 1),  # 65
    ],
    ids=["S4-level3", "S3-every3-fp16", "S5"],
)
@pytest.mark.parametrize("form", PIPELINE_FORMS)
def test_producer_fills_the_ring_ahead_of_the_consumers(params, K, level, every, form):
    M, N = 520, 384
    req = request("wgmma_tma", M, N, K, params, level=level, phase_every=every, repeats=3,
                  stamp_form=form, overhead_target_pct=None)  # fmt: skip
    trace = Recorder(req).run()
    config = trace.config
    ring = config.layout.in_flight
    assert ring == params["STAGES"]
    stats = trace.manifest["stats"]
    assert stats["rel_error"] <= 1e-5 and stats["rel_error_instrumented"] <= 1e-5
    assert stats["saturated_phase_spans"] == 0
    np.testing.assert_array_equal(trace.phase_blocks, np.arange(0, config.n_blocks, every))

    def mark(name):
        return trace.marks[:, :, config.mark_index(name)].astype(np.int64)

    request_, issued = mark("request"), mark("issued")
    wait, landed, computed = mark("wait"), mark("landed"), mark("computed")
    # each warp's own program order
    assert np.all(request_ <= issued) and np.all(issued[:, :-1] <= request_[:, 1:])
    assert np.all(wait <= landed) and np.all(landed <= computed)
    assert np.all(computed[:, :-1] <= wait[:, 1:])
    # across the two warps: a slot's tiles land after the producer asked for them, and the
    # producer refills a slot only once the consumers freed it (the empty mbarrier)
    assert np.all(landed >= issued - CROSS_WARP_NS)
    assert np.all(issued[:, ring:] >= computed[:, :-ring] - CROSS_WARP_NS)
    # every step was stamped (an unwritten one decodes to equal marks)
    written = float(np.mean((landed > wait) & (computed > landed) & (issued > request_)))
    assert written >= 0.99, written
    # measured, not drawn: the producer runs ahead, its copy of step t + S - 1 asked for
    # before the consumers finish step t, so the tiles are mostly in when a consumer waits
    ahead = issued[:, ring - 1 :] <= computed[:, : 1 - ring] + CROSS_WARP_NS
    waiting = landed - wait
    computing = computed - landed
    print(
        f"\nwgmma_tma S={ring}: producer ahead in {ahead.mean():.1%} of steps, consumer waits a "
        f"median {np.median(waiting[:, 1:])} ns, computes {np.median(computing)} ns"
    )
    assert ahead.mean() >= 0.9
    assert float(np.median(waiting[:, 1:])) < float(np.median(computing))
    if level >= 3:
        assert trace.fragments.shape == (1, 32, config.mma.probe_slots)


# -- correctness: what the probed warp read, and the deliberately broken barriers (§11-12) ------
from matviz.core import correctness  # noqa: E402
from matviz.errors import MatvizError  # noqa: E402

# kernels with loads whose value a lane reads is the element it addresses (an ldmatrix lane
# receives fragment elements instead: test_fragments_the_gpu_loads_are_the_descriptions)
VALUE_PROBED = [
    (name, p)
    for name, p in MODELLED
    if any(s.kind == "load" and not s.matrix_load for s in get_kernel(name).sites_at(p))
]


@pytest.mark.parametrize("kernel,params", VALUE_PROBED, ids=lambda v: str(v))
def test_every_probed_read_is_the_k_steps_value(kernel, params):
    """With both barriers, every shared load of the probed warp reads what its k-step stored:
    the value probe and the classification agree with a correct kernel."""
    M, N, K = 200, 150, 100
    config = get_kernel(kernel).configure(params, M, N, K)
    trace = Recorder(request(kernel, M, N, K, params, level=3,
                             probe_block=(config.grid[0] - 1, 0))).run()  # fmt: skip
    loads = trace.probe["kind"] == "load"
    checked = trace.stale[:, loads]
    assert checked.shape[0] == config.n_steps
    assert (checked[checked != correctness.UNCHECKED] == correctness.CURRENT).all()
    assert (checked == correctness.CURRENT).sum() > 0
    assert trace.manifest["correctness"]["wrong"] == 0
    assert trace.manifest["correctness"]["broken"] == []
    assert not trace.c_wrong.any()


@pytest.mark.parametrize("drop", [1, 2])
@pytest.mark.parametrize("tile", [8, 16, 32])
def test_a_dropped_barrier_is_recorded_with_its_wrong_elements(drop, tile, tmp_path):
    M = N = K = 512
    trace = Recorder(request("tiled", M, N, K, {"tile": tile, "drop_sync": drop}, level=3,
                             repeats=3)).run()  # fmt: skip
    section = trace.manifest["correctness"]
    assert section["broken"] == ["drop_sync"]
    assert section["wrong"] == int(trace.c_wrong.sum())
    assert trace.c_wrong.shape == (M, N)
    reads = section["stale_reads"]
    assert sum(reads.values()) == int((trace.stale != correctness.UNCHECKED).sum())
    # a dropped barrier can only ever make a read early (1) or late (2)
    wrong_way = correctness.OVERWRITTEN if drop == 1 else correctness.BEFORE_WRITTEN
    assert not (trace.stale[1:] == wrong_way).any()
    save_trace(trace, tmp_path / "broken.mvz")
    back = load_trace(tmp_path / "broken.mvz")
    np.testing.assert_array_equal(back.c_wrong, trace.c_wrong)
    np.testing.assert_array_equal(back.stale, trace.stale)


def test_barrier_1_removed_gives_wrong_results_on_the_gpu():
    trace = Recorder(request("tiled", 1024, 1024, 1024, {"tile": 16, "drop_sync": 1}, level=2,
                             repeats=3)).run()  # fmt: skip
    assert trace.manifest["correctness"]["wrong"] > 0


def test_wrong_results_of_a_correct_kernel_are_refused():
    rec = Recorder(request("tiled", 256, 256, 256, {"tile": 16}, level=1))
    rec._fresh_inputs()
    C = rec.ref.astype(cupy_recorder.cupy.float32)
    assert rec._check_output(C, "the kernel") <= 1e-6
    C[3, 5] += 1.0
    with pytest.raises(MatvizError, match="1 of 65536 elements of C wrong"):
        rec._check_output(C, "the kernel")


def test_mma_sync_alone_outruns_the_kernels_built_on_it():
    """README (kernel 10): mma.sync is not what holds kernels 09 and 10 back. Warps issuing
    only independent mma.sync from registers run faster than kernel 10 at its default, both
    against cuBLAS fp16 at 4096^3 timed in the same process."""
    from matviz.bench import mma_ceiling

    ceiling = max(row["pct_cublas"] for row in mma_ceiling.measure("float16"))
    kernel = Recorder(request("mma_pipeline", 4096, 4096, 4096, {}, level=0)).run()
    reached = kernel.manifest["stats"]["pct_cublas"]
    print(f"\nmma.sync alone {ceiling:.1f}% of cuBLAS fp16, kernel 10 {reached:.1f}%")
    assert ceiling > reached

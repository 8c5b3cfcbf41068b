"""Record a kernel on a real GPU through CuPy.

One recording = verify the level-0 build against float64, time it and cuBLAS with CUDA events,
time the instrumented build against it (interleaved, so drift hits both), then run the
instrumented build once more on fresh NaN-filled output and decode its buffers into a Trace.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from matviz.backends import trace_decode
from matviz.backends.contract import RunRequest
from matviz.backends.cuda_status import _one_line
from matviz.core import correctness, elements, sampling
from matviz.core.config import KernelConfig
from matviz.core.manifest import (
    Correctness,
    Geometry,
    Sampling,
    Stats,
    Timer,
    build_manifest,
)
from matviz.core.occupancy import occupancy_dict
from matviz.core.trace import BLOCK_DTYPE, Trace
from matviz.errors import MatvizError

try:
    import cupy

    from matviz.backends.cuda_build import (
        SPACER_CYCLES,
        blas_matmul,
        compiled_kernel,
        cuda_errors,
        device_info,
        driver_blocks_per_sm,
        software_versions,
        spacer,
        tensor_map,
    )
except ImportError:  # the CLI checks cuda_status() before it gets here
    cupy = None

UNWRITTEN_PROBE = 0xFFFFFFFF
WARMUP = 3
CHOICE_TRIALS = 7  # timed runs of each candidate (a form of the marks, a stride) beside level 0


@dataclass
class _Buffers:
    """Device buffers of one instrumented launch and the sampling strides they were sized for."""

    phase_every: int
    warp_every: int
    blocks: Any  # cupy arrays
    phases: Any
    warps: Any
    probe: Any


class Recorder:
    """Runs one request on the GPU; every CUDA failure surfaces as a one-line MatvizError."""

    def __init__(self, request: RunRequest):
        if cupy is None:
            raise MatvizError("CUDA backend needs CuPy: pip install 'matviz[cuda13]'")
        self.request = request
        self.device = device_info()
        self.config: KernelConfig = request.config().check(self.device["smem_per_block"])
        _check_arch(self.config.kernel.arch, self.device)
        self.M, self.N, self.K = self.config.M, self.config.N, self.config.K
        request.check_probe(self.config)

    # -- launching -------------------------------------------------------------------------
    def _launch(self, kernel, C, trace_args: tuple = ()) -> None:
        args = (*self.kernel_inputs, C, np.int32(self.M), np.int32(self.N), np.int32(self.K))
        kernel(self.config.grid, self.config.block, args + trace_args)

    def _timed(self, fn) -> float:
        """Event time of ``fn``'s GPU work alone. A spacer kernel keeps the GPU busy while the
        host enqueues the launch, so the start event fires when the kernel can really start and
        host-side launch cost (more arguments at higher levels) is not counted as overhead."""
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        spacer()((1,), (1,), (np.int64(SPACER_CYCLES),))
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop)

    def _fresh_inputs(self) -> None:
        rng = cupy.random.default_rng(int.from_bytes(os.urandom(8), "little"))
        dtype = self.config.input_dtype
        # rounded to the kernel's element type first, so the float64 reference multiplies the
        # very values the kernel reads and only the kernel's own arithmetic differs
        self.A = elements.rounded(
            cupy, rng.uniform(-1.0, 1.0, (self.M, self.K), dtype=cupy.float32), dtype
        )
        self.B = elements.rounded(
            cupy, rng.uniform(-1.0, 1.0, (self.K, self.N), dtype=cupy.float32), dtype
        )
        # what the kernel reads: a column-major matrix is its transpose, row-major (§28)
        self.stored = tuple(
            cupy.ascontiguousarray(m.T) if self.config.matrix_layout(name) == "col" else m
            for name, m in (("A", self.A), ("B", self.B))
        )
        # a matrix the copy engine reads (TMA) is passed as its tensor map
        copied = self.config.copied_matrices()
        self.kernel_inputs = tuple(
            tensor_map(m, dtype, (copied[name].rows, copied[name].cols),
                       copied[name].copy.swizzle_bytes) if name in copied else m
            for name, m in zip("AB", self.stored, strict=True)
        )  # fmt: skip
        self.blas = blas_matmul(self.A, self.B, dtype)
        ref = elements.as_float64(cupy, self.A, dtype) @ elements.as_float64(cupy, self.B, dtype)
        self.ref = ref
        self.ref_norm = float(cupy.linalg.norm(ref))

    def _check_output(self, C, what: str) -> float:
        """Rel. error of C against float64. Wrong elements refuse the run unless the kernel is
        deliberately broken: then they are expected, and counted (``_wrong_map``)."""
        broken = bool(self.config.broken)
        unwritten = int(cupy.count_nonzero(cupy.isnan(C)))
        if unwritten and not broken:
            raise MatvizError(f"{what} left {unwritten} elements of C unwritten (NaN)")
        if not broken:
            _, wrong, worst = correctness.wrong_map(cupy, C, self.ref, self.K)
            if wrong:
                raise MatvizError(
                    f"{what} computed {wrong} of {C.size} elements of C wrong (largest error "
                    f"{worst:.3g}, tolerance {correctness.tolerance(self.K):.3g}); not recorded"
                )
        err = float(cupy.linalg.norm(cupy.nan_to_num(C.astype(cupy.float64)) - self.ref))
        return err / self.ref_norm if self.ref_norm else err

    def _correctness(self, C, checked: str) -> tuple[Correctness, np.ndarray]:
        c_wrong, wrong, worst = correctness.wrong_map(cupy, C, self.ref, self.K)
        section = Correctness(
            broken=self.config.broken,
            wrong=wrong,
            total=int(C.size),
            tolerance=correctness.tolerance(self.K),
            max_abs_error=worst,
            cell=list(correctness.cell_shape(self.M, self.N)),
            checked=checked,
        )
        return section, c_wrong

    def _fetch(self, matrix: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Elements of the logical A or B, for classifying the probed warp's reads."""
        m = self.A if matrix == "A" else self.B
        picked = m[cupy.asarray(rows), cupy.asarray(cols)]
        return elements.as_float64(cupy, picked, self.config.input_dtype).astype(cupy.float32).get()

    def _stride(self, every: int | None = None) -> int:
        """1 block in how many stamps its k-steps: ``every`` (default: the request's), or more
        where the budget needs it."""
        c, req = self.config, self.request
        # the budget holds every block's record first, as in the simulator
        left = sampling.after_block_records(c.n_blocks, BLOCK_DTYPE.itemsize, req.budget_bytes)
        return sampling.phase_every(
            c.n_blocks, c.n_steps, left, every or req.phase_every, marks=len(c.marks)
        )

    def _trace_buffers(self, every: int | None = None) -> _Buffers:
        """Buffers for a launch in which 1 block in :meth:`_stride` stamps its k-steps."""
        c, req = self.config, self.request
        steps = max(c.n_steps, 1)
        phase_every = self._stride(every)
        warp_every = sampling.warp_every(c.n_blocks, phase_every)
        phase_rows = self._rows(phase_every) if req.level >= 2 else 0
        warp_rows = self._rows(warp_every) if req.level >= 3 else 0
        words = phase_rows * steps * trace_decode.step_words(c)  # [rows][steps][channels][2]
        barriers = max(c.n_barriers, 1)
        return _Buffers(
            phase_every=phase_every,
            warp_every=warp_every,
            blocks=cupy.zeros((c.n_blocks, 6), cupy.uint64),
            phases=cupy.zeros(max(words, 1), cupy.uint32),
            warps=cupy.zeros(max(warp_rows * steps * c.warps * barriers, 1), cupy.uint32),
            probe=cupy.full((self._probe_rows(), 32), UNWRITTEN_PROBE, cupy.uint32),
        )

    def _probe_rows(self) -> int:
        """The probe's rows: the shared base, each slot's offsets and, at level 3, the values
        read in the first k-steps (trace.cuh's MV_PROBE_VALUE)."""
        c = self.config
        values = c.probe_slots * c.value_tiles if self.request.level >= 3 else 0
        return 1 + c.probe_slots + values

    def _trace_args(self, buf: _Buffers) -> tuple:
        bx, by = self.request.probe_block
        probe_block = by * self.config.grid[0] + bx
        return (
            buf.blocks,
            buf.phases,
            buf.warps,
            buf.probe,
            np.int32(buf.phase_every),
            np.int32(buf.warp_every),
            np.int32(probe_block),
            np.int32(self.request.probe_warp),
            np.int32(self.request.probe_ktile),
        )

    # -- the recording -----------------------------------------------------------------------
    def verify(self) -> float:
        """One run of the requested level on fresh inputs: rel. error against float64."""
        level = self.request.level
        try:
            kernel = compiled_kernel(self.config, level)
            self._fresh_inputs()
            C = cupy.full((self.M, self.N), cupy.nan, cupy.float32)
            args = self._trace_args(self._trace_buffers()) if level else ()
            self._launch(kernel, C, args)
            cupy.cuda.get_current_stream().synchronize()
            return self._check_output(C, f"the level-{level} kernel")
        except cuda_errors() as exc:
            raise MatvizError(f"CUDA error while verifying: {_one_line(exc)}") from exc

    def run(self) -> Trace:
        try:
            return self._run()
        except cuda_errors() as exc:
            raise MatvizError(f"CUDA error while recording: {_one_line(exc)}") from exc

    def _run(self) -> Trace:
        c, level = self.config, self.request.level
        plain = compiled_kernel(c, 0)
        # Level 3's probe and per-warp stamps slow the kernel a lot, so the timeline always
        # comes from a level <= 2 run and level 3 adds a separate diagnostics run.
        timeline_level = min(level, 2) or 1
        self._fresh_inputs()
        C = cupy.full((self.M, self.N), cupy.nan, cupy.float32)
        self._launch(plain, C)
        cupy.cuda.get_current_stream().synchronize()
        rel_error = self._check_output(C, "the kernel")
        checked, c_wrong = self._correctness(C, "the level-0 kernel (uninstrumented)")

        (instr, bounded), form, every, form_overheads, stride_overheads = self._chosen(
            plain, timeline_level, C
        )
        args = self._trace_args(self._trace_buffers(every))
        registers = {"level_0": plain.num_regs, f"level_{timeline_level}": instr.num_regs}
        for _ in range(WARMUP):
            self._launch(plain, C)
            self._launch(instr, C, args)
            self.blas()
        plain_ms, instr_ms, blas_ms = [], [], []
        for _ in range(self.request.repeats):
            plain_ms.append(self._timed(lambda: self._launch(plain, C)))
            instr_ms.append(self._timed(lambda: self._launch(instr, C, args)))
            blas_ms.append(self._timed(self.blas))
        stats = self._stats(plain_ms, instr_ms if level else [], blas_ms, rel_error)
        stats["instrumented_min_blocks"] = bounded
        if form is not None:
            stats.update(stamp_form=form, stamp_form_overheads_pct=form_overheads)
        if stride_overheads is not None:
            stats["phase_every_overheads_pct"] = [[n, pct] for n, pct in stride_overheads.items()]

        buf = self._trace_buffers(every)  # fresh, so every record comes from this one run
        C.fill(cupy.nan)
        event_ms = self._timed(lambda: self._launch(instr, C, self._trace_args(buf)))
        stats["rel_error_instrumented"] = self._check_output(C, "the instrumented kernel")
        times = self._decode_times(buf)
        arrays = {"blocks": times.blocks, **self._decode_phases(buf, times, timeline_level)}
        arrays["c_wrong"] = c_wrong
        if timeline_level >= 2 and c.n_steps:
            raw = buf.phases.get()[: self._mark_words(buf)]
            stats["saturated_phase_spans"] = trace_decode.saturated_spans(raw, c)
        span_ns = int(times.blocks["end"].max())
        stats.update(span_ns=span_ns, event_ms=event_ms, span_vs_event=span_ns / 1e6 / event_ms)
        probe_info = None
        warp_every = None
        if level >= 3 and c.n_steps:
            diag, smem_base, warp_every = self._diagnostics(C, stats, every)
            arrays.update(diag)
            if c.mma is not None:
                arrays["fragments"] = self._fragments()
            probe_info = {
                "block": list(self.request.probe_block),
                "warp": self.request.probe_warp,
                "ktile": self.request.probe_ktile,
                "smem_base": smem_base,
            }
            if "stale" in arrays:
                checked = dataclasses.replace(
                    checked, stale_reads=correctness.read_counts(arrays["stale"])
                )
        sampled = Sampling(
            budget_bytes=self.request.budget_bytes,
            timeline_level=timeline_level,
            phase_every=buf.phase_every if level >= 2 else 1,
            phase_blocks=len(arrays.get("phase_blocks", ())),
            warp_every=warp_every,
            warp_blocks=len(arrays.get("warp_blocks", ())),
            probe=probe_info,
            diagnostics="separate level-3 run: probe and barrier waits; the timeline "
            "(blocks, phases) is the level-2 run"
            if probe_info
            else None,
        )
        timer = Timer(
            name="globaltimer+clock64",
            resolution_ns=32,
            block_times="%globaltimer",
            step_marks="clock64 anchored per block",
            ns_per_cycle=times.ns_per_cycle,
        )
        manifest = build_manifest(
            c,
            backend="cuda",
            level=level,
            device=self.device,
            timer=timer,
            geometry=Geometry.of(c, registers),
            sampling=sampled,
            software=software_versions(),
            stats=Stats(**stats),
            # the blocks and marks on screen come from the timeline build, so its residency
            occupancy=self._occupancy(instr, instr.num_regs),
            correctness=checked,
            details={"command": " ".join(sys.argv)},
        )
        return Trace(manifest=manifest, **arrays)

    def _chosen(self, plain, level: int, C):
        """The level-``level`` build, bounded (:meth:`_instrumented`), and how it stamps:
        ((build, bounded), form, every, {form: overhead %}, {stride: overhead %}). Each form of
        the marks (trace.cuh) the request leaves open is timed beside level 0 at the budget's
        stride (:meth:`_stride`), then at 2, 4 ... times it while none is within the request's
        overhead target (sampling.stride_within); the stride and the form closest to level 0
        are kept. The forms' overheads (at the stride kept) are None where one form was built,
        the strides' (the kept form's at each) None where there is no target; level 1 and a
        kernel with no k-steps time nothing."""
        first = self._stride()
        wanted = self.request.stamp_form
        threads = self.config.threads
        resident = driver_blocks_per_sm(plain, threads)  # level 0's blocks per SM
        if level < 2 or not self.config.n_steps:
            return self._instrumented(resident, level), None, first, None, None
        if wanted not in ("auto", *self.config.stamp_forms):
            usable = ", ".join(self.config.stamp_forms)
            raise MatvizError(
                f"{self.config.kernel.name} has no {wanted} form of its marks (a step's middle "
                f"mark needs a channel of three and shared memory sized at compile time); "
                f"use auto, {usable}"
            )
        forms = self.config.stamp_forms if wanted == "auto" else (wanted,)
        builds = {form: self._instrumented(resident, level, form) for form in forms}
        # a form whose build keeps another number of blocks per SM than level 0 (fewer
        # registers: 04 BM64 BN64 BK16 TM8 held ran 2 blocks where level 0 runs 1, -32%) does
        # not stand for the kernel; the first form asked for stays if none does
        same = {f: b for f, b in builds.items() if driver_blocks_per_sm(b[0], threads) == resident}
        builds = same or {forms[0]: builds[forms[0]]}
        target = self.request.overhead_target_pct
        if len(builds) == 1 and target is None:
            (form,) = builds
            return builds[form], form, first, None, None

        def overheads_at(stride: int) -> dict[str, float]:
            args = self._trace_args(self._trace_buffers(stride))
            return self._beside_level_0(
                plain, C, {form: (instr, args) for form, (instr, _) in builds.items()}
            )

        least = sampling.least_stamped_blocks(int(self.device["sm_count"]))
        every, form, tried = sampling.stride_within(
            overheads_at, first, self.config.n_blocks, least, math.inf if target is None else target
        )
        form_overheads = tried[every] if len(builds) > 1 else None
        strides = {n: pct[form] for n, pct in tried.items()} if target is not None else None
        return builds[form], form, every, form_overheads, strides

    def _beside_level_0(self, plain, C, runs: dict) -> dict:
        """{name: overhead %} of each (build, trace args) in ``runs``, timed interleaved with
        level 0 after a warm-up (CHOICE_TRIALS runs each, medians)."""
        for _ in range(WARMUP):
            for kernel, args in runs.values():
                self._launch(kernel, C, args)
        plain_ms: list[float] = []
        times: dict = {name: [] for name in runs}
        for _ in range(CHOICE_TRIALS):
            plain_ms.append(self._timed(lambda: self._launch(plain, C)))
            for name, (kernel, args) in runs.items():
                times[name].append(self._timed(lambda k=kernel, a=args: self._launch(k, C, a)))
        base = float(np.median(plain_ms))
        return {name: 100.0 * (float(np.median(t)) / base - 1.0) for name, t in times.items()}

    def _instrumented(
        self, want: int | None, level: int, form: str = "lanes"
    ) -> tuple[Any, int | None]:
        """The level-``level`` build, and the blocks per SM its registers were bounded to: where
        its extra registers would leave fewer blocks resident than level 0's (``want``), it is
        rebuilt with __launch_bounds__ keeping them, so the timeline shows the kernel's
        residency."""
        instr = compiled_kernel(self.config, level, stamp_form=form)
        have = driver_blocks_per_sm(instr, self.config.threads)
        if want is None or have is None or have >= want:
            return instr, None
        return compiled_kernel(self.config, level, min_blocks=want, stamp_form=form), want

    def _fragments(self) -> np.ndarray:
        """Which element each lane holds in each fragment slot, measured (trace.py's
        ``fragments``): the source's ``<entry>_fragments`` loads one warp's fragments as the
        kernel does, from tiles (up to 16x16, row-major) whose elements hold their own numbers,
        exact in every input type, and writes out[operand][lane][slot] (-1: no such slot)."""
        c = self.config
        assert c.mma is not None  # only Tensor Core kernels have a fragment probe
        probe = compiled_kernel(c, 0, entry=c.kernel.entry_point + "_fragments")
        numbers = cupy.arange(256, dtype=cupy.float32)
        tile = elements.rounded(cupy, numbers, c.input_dtype)
        out = cupy.full((len(c.mma.fragments), 32, c.mma.probe_slots), -1, cupy.int32)
        probe((1,), (c.mma.group_threads,), (tile, tile, numbers, out))
        cupy.cuda.get_current_stream().synchronize()
        return out.get().astype(np.int16)

    def _diagnostics(self, C, stats: dict, every: int) -> tuple[dict, int, int]:
        """The level-3 run: the shared-memory probe and how long each warp waited at barriers,
        in blocks among those 1 in ``every`` that have phases.

        Each warp times its own wait: its clock after the barrier minus before it. Waits are
        durations, so they need no common clock with the timeline run.
        Returns the arrays, the shared base address of the probed block and the warp stride.
        """
        c = self.config
        buf = self._trace_buffers(every)
        C.fill(cupy.nan)
        diag = compiled_kernel(c, 3)
        diag_ms = self._timed(lambda: self._launch(diag, C, self._trace_args(buf)))
        self._check_output(C, "the level-3 kernel")
        ns_per_cycle = self._decode_times(buf).ns_per_cycle
        words = self._rows(buf.warp_every) * c.n_steps * c.warps * c.n_barriers
        warp_blocks, wait = trace_decode.decode_waits(
            buf.warps.get()[:words],
            buf.warp_every,
            c.n_steps,
            c.warps,
            c.n_barriers,
            ns_per_cycle,
            c.n_blocks,
        )
        raw_probe = buf.probe.get()
        probe, smem_base = trace_decode.decode_probe(raw_probe[: 1 + c.probe_slots], c)
        stats.update(
            diagnostics_ms=diag_ms,
            diagnostics_overhead_pct=100.0 * (diag_ms / stats["time_ms_median"] - 1.0),
        )
        if wait.size:
            # the last warp to arrive releases a barrier: its wait shows the clocks agree
            stats["last_arrival_wait_ns_max"] = int(wait.min(axis=2).max())
        arrays = {"warp_blocks": warp_blocks, "barrier_wait": wait, "probe": probe}
        values = trace_decode.probe_values(raw_probe, c)
        if values.size:
            arrays["stale"] = correctness.classify_reads(
                c, self.request.probe_block, self.request.probe_warp, values, self._fetch
            )
        return arrays, smem_base, buf.warp_every

    def _decode_times(self, buf: _Buffers) -> trace_decode.BlockTimes:
        nominal = self.device["clock_mhz"] or 1980.0
        return trace_decode.decode_blocks(buf.blocks.get(), self.config.grid, nominal)

    def _decode_phases(self, buf: _Buffers, times, level: int) -> dict:
        c = self.config
        if level < 2 or not c.n_steps:
            return {}
        phase_blocks, marks = trace_decode.decode_marks(
            buf.phases.get()[: self._mark_words(buf)], buf.phase_every, c.n_steps, c, times
        )
        return {"phase_blocks": phase_blocks, "marks": marks}

    def _mark_words(self, buf: _Buffers) -> int:
        """uint32 words of the marks buffer that the sampled blocks fill."""
        c = self.config
        return self._rows(buf.phase_every) * c.n_steps * trace_decode.step_words(c)

    def _rows(self, every: int) -> int:
        return sampling.sampled_blocks(self.config.n_blocks, every)

    def _stats(self, plain_ms, instr_ms, blas_ms, rel_error) -> dict:
        flops = self.config.flops
        med = float(np.median(plain_ms))
        blas = float(np.median(blas_ms))
        stats = {
            "time_ms_median": med,
            "time_ms_min": float(np.min(plain_ms)),
            "time_ms_max": float(np.max(plain_ms)),
            "repeats": len(plain_ms),
            "gflops": flops / med / 1e6,
            "cublas_ms_median": blas,
            "cublas_gflops": flops / blas / 1e6,
            "pct_cublas": 100.0 * blas / med,
            "rel_error": rel_error,
        }
        if instr_ms:
            instr = float(np.median(instr_ms))
            stats.update(instrumented_ms_median=instr, overhead_pct=100.0 * (instr / med - 1.0))
        return stats

    def _occupancy(self, kernel, registers: int) -> dict:
        """Occupancy of ``kernel`` (the timeline's build) from this GPU's own limits and its
        real register count, with the driver's own figure beside it."""
        occ = occupancy_dict(self.config, self.device, registers, register_source="compiled")
        occ["driver_blocks_per_sm"] = driver_blocks_per_sm(kernel, self.config.threads)
        return occ


def _check_arch(arch: str, device: dict) -> None:
    """One line where this GPU cannot run the kernel's target: ``sm_XY`` needs compute
    capability X.Y or later, an arch-specific ``sm_XYa`` (wgmma, setmaxnreg) exactly X.Y."""
    digits = arch.removeprefix("sm_").rstrip("a")
    need = (int(digits[:-1]), int(digits[-1]))
    have = tuple(int(x) for x in str(device.get("compute_capability", "0.0")).split("."))
    if (have != need) if arch.endswith("a") else (have < need):
        which = "exactly" if arch.endswith("a") else "at least"
        raise MatvizError(
            f"this kernel is built for {arch}: it needs a GPU of compute capability {which} "
            f"{need[0]}.{need[1]} (this {device.get('name', 'GPU')} is "
            f"{device.get('compute_capability')})"
        )


def record(request: RunRequest) -> Trace:
    return Recorder(request).run()

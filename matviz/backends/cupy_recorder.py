"""Record a catalog kernel on a real GPU through CuPy.

One recording = verify the level-0 build against float64, time it and cuBLAS with CUDA events,
time the instrumented build against it (interleaved, so drift hits both), then run the
instrumented build once more on fresh NaN-filled output and decode its buffers into a Trace.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

from matviz.backends import trace_decode
from matviz.backends.cuda_status import _one_line
from matviz.backends.devices import load_device
from matviz.core import catalog, sampling
from matviz.core.occupancy import occupancy_dict
from matviz.core.trace import SCHEMA_VERSION, Trace
from matviz.errors import MatvizError

try:
    import cupy

    from matviz.backends.cuda_build import (
        SPACER_CYCLES,
        compiled_kernel,
        cuda_errors,
        device_info,
        software_versions,
        spacer,
    )
except ImportError:  # the CLI checks cuda_status() before it gets here
    cupy = None

UNWRITTEN_PROBE = 0xFFFFFFFF


@dataclass(frozen=True)
class RecordOptions:
    level: int = 2
    repeats: int = 20
    warmup: int = 3
    budget_bytes: int = sampling.DEFAULT_BUDGET_BYTES
    phase_every: int = 1  # >1: only every n-th block stamps its tiles (lower overhead)
    probe_block: tuple[int, int] = (0, 0)
    probe_warp: int = 0
    probe_ktile: int = 0


class Recorder:
    """Runs one configuration; every CUDA failure surfaces as a one-line MatvizError."""

    def __init__(self, kernel: str, M: int, N: int, K: int, params: dict, opts: RecordOptions):
        if cupy is None:
            raise MatvizError("CUDA backend needs CuPy: pip install 'matviz[cuda13]'")
        self.spec = catalog.get_kernel(kernel)
        self.params = self.spec.resolve_params(**params)
        self.M, self.N, self.K = M, N, K
        self.opts = opts
        if opts.level not in catalog.LEVELS:
            raise MatvizError(f"level must be one of {catalog.LEVELS} (got {opts.level})")
        if opts.repeats < 10:
            raise MatvizError("repeats must be at least 10 for a meaningful median")
        self.device = device_info()
        self.geometry = self.spec.validate(
            self.params,
            M,
            N,
            K,
            smem_limit=min(catalog.STATIC_SMEM_LIMIT, self.device["smem_per_block"]),
        )
        self._check_probe()

    def _check_probe(self) -> None:
        gx, gy = self.geometry.grid
        bx, by = self.opts.probe_block
        if not (0 <= bx < gx and 0 <= by < gy):
            raise MatvizError(f"probe block ({bx}, {by}) is outside the {gx}x{gy} grid")
        last_warp = self.geometry.warps_per_block - 1
        if not 0 <= self.opts.probe_warp <= last_warp:
            raise MatvizError(f"probe warp {self.opts.probe_warp} is outside 0..{last_warp}")
        if self.geometry.n_tiles and not 0 <= self.opts.probe_ktile < self.geometry.n_tiles:
            raise MatvizError(
                f"probe k-tile {self.opts.probe_ktile} is outside 0..{self.geometry.n_tiles - 1}"
            )

    # -- launching -------------------------------------------------------------------------
    def _launch(self, kernel, C, trace_args: tuple = ()) -> None:
        args = (self.A, self.B, C, np.int32(self.M), np.int32(self.N), np.int32(self.K))
        kernel(self.geometry.grid, self.geometry.block, args + trace_args)

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
        self.A = rng.uniform(-1.0, 1.0, (self.M, self.K), dtype=cupy.float32)
        self.B = rng.uniform(-1.0, 1.0, (self.K, self.N), dtype=cupy.float32)
        ref = self.A.astype(cupy.float64) @ self.B.astype(cupy.float64)
        self.ref = ref
        self.ref_norm = float(cupy.linalg.norm(ref))

    def _check_output(self, C, what: str) -> float:
        unwritten = int(cupy.count_nonzero(cupy.isnan(C)))
        if unwritten:
            raise MatvizError(f"{what} left {unwritten} elements of C unwritten (NaN)")
        err = float(cupy.linalg.norm(C.astype(cupy.float64) - self.ref))
        return err / self.ref_norm if self.ref_norm else err

    def _trace_buffers(self) -> dict:
        g = self.geometry
        n_blocks = g.n_blocks
        level = self.opts.level
        tiles = max(g.n_tiles, 1)
        phase_every = sampling.phase_every(
            n_blocks, g.n_tiles, self.opts.budget_bytes, self.opts.phase_every
        )
        warp_every = sampling.warp_every(n_blocks, phase_every)
        phase_rows = sampling.sampled_blocks(n_blocks, phase_every) if level >= 2 else 0
        warp_rows = sampling.sampled_blocks(n_blocks, warp_every) if level >= 3 else 0
        n_sites = 2 + 2 * self.params["tile"]
        return {
            "phase_every": phase_every,
            "warp_every": warp_every,
            "blocks": cupy.zeros((n_blocks, 6), cupy.uint64),
            "phases": cupy.zeros(
                max(phase_rows * tiles * trace_decode.PHASE_WORDS, 1), cupy.uint32
            ),
            "warps": cupy.zeros(max(warp_rows * tiles * g.warps_per_block * 2, 1), cupy.uint32),
            "probe": cupy.full((1 + n_sites, 32), UNWRITTEN_PROBE, cupy.uint32),
        }

    def _trace_args(self, buf: dict) -> tuple:
        bx, by = self.opts.probe_block
        probe_block = by * self.geometry.grid[0] + bx
        return (
            buf["blocks"],
            buf["phases"],
            buf["warps"],
            buf["probe"],
            np.int32(buf["phase_every"]),
            np.int32(buf["warp_every"]),
            np.int32(probe_block),
            np.int32(self.opts.probe_warp),
            np.int32(self.opts.probe_ktile),
        )

    # -- the recording -----------------------------------------------------------------------
    def verify(self) -> float:
        """One run of the configured level on fresh inputs: rel. error against float64."""
        try:
            key = tuple(sorted(self.params.items()))
            kernel = compiled_kernel(self.spec.name, key, self.opts.level)
            self._fresh_inputs()
            C = cupy.full((self.M, self.N), cupy.nan, cupy.float32)
            args = self._trace_args(self._trace_buffers()) if self.opts.level else ()
            self._launch(kernel, C, args)
            cupy.cuda.get_current_stream().synchronize()
            return self._check_output(C, f"the level-{self.opts.level} kernel")
        except cuda_errors() as exc:
            raise MatvizError(f"CUDA error while verifying: {_one_line(exc)}") from exc

    def run(self) -> Trace:
        try:
            return self._run()
        except cuda_errors() as exc:
            raise MatvizError(f"CUDA error while recording: {_one_line(exc)}") from exc

    def _run(self) -> Trace:
        key = tuple(sorted(self.params.items()))
        plain = compiled_kernel(self.spec.name, key, 0)
        level = self.opts.level
        # Level 3's probe and per-warp stamps slow the kernel a lot, so the timeline always
        # comes from a level <= 2 run and level 3 adds a separate diagnostics run.
        timeline_level = min(level, 2) or 1
        self._fresh_inputs()
        C = cupy.full((self.M, self.N), cupy.nan, cupy.float32)
        self._launch(plain, C)
        cupy.cuda.get_current_stream().synchronize()
        rel_error = self._check_output(C, "the kernel")

        instr = compiled_kernel(self.spec.name, key, timeline_level)
        self.registers = {"level_0": plain.num_regs, f"level_{timeline_level}": instr.num_regs}
        buf = self._trace_buffers()
        args = self._trace_args(buf)
        for _ in range(self.opts.warmup):
            self._launch(plain, C)
            self._launch(instr, C, args)
            cupy.matmul(self.A, self.B)
        plain_ms, instr_ms, blas_ms = [], [], []
        for _ in range(self.opts.repeats):
            plain_ms.append(self._timed(lambda: self._launch(plain, C)))
            instr_ms.append(self._timed(lambda: self._launch(instr, C, args)))
            blas_ms.append(self._timed(lambda: cupy.matmul(self.A, self.B)))
        stats = self._stats(plain_ms, instr_ms if level else [], blas_ms, rel_error)

        buf = self._trace_buffers()  # fresh, so every record comes from this one run
        C.fill(cupy.nan)
        event_ms = self._timed(lambda: self._launch(instr, C, self._trace_args(buf)))
        stats["rel_error_instrumented"] = self._check_output(C, "the instrumented kernel")
        times = self._decode_times(buf)
        arrays = {"blocks": times.blocks, **self._decode_phases(buf, times, timeline_level)}
        if timeline_level >= 2 and self.geometry.n_tiles:
            stats["saturated_phase_spans"] = trace_decode.saturated_spans(
                buf["phases"].get()[: self._rows(buf["phase_every"]) * self.geometry.n_tiles * 2]
            )
        span_ns = int(times.blocks["end"].max())
        stats.update(span_ns=span_ns, event_ms=event_ms, span_vs_event=span_ns / 1e6 / event_ms)
        self.ns_per_cycle = times.ns_per_cycle
        if level >= 3 and self.geometry.n_tiles:
            arrays.update(self._diagnostics(key, C, stats))
        return Trace(manifest=self._manifest(stats, buf), **arrays)

    def _diagnostics(self, key: tuple, C, stats: dict) -> dict:
        """The level-3 run: the shared-memory probe and how long each warp waited at barriers.

        Each warp times its own wait: its clock after the barrier minus before it. Waits are
        durations, so they need no common clock with the timeline run.
        """
        g = self.geometry
        buf = self._trace_buffers()
        C.fill(cupy.nan)
        diag = compiled_kernel(self.spec.name, key, 3)
        diag_ms = self._timed(lambda: self._launch(diag, C, self._trace_args(buf)))
        self._check_output(C, "the level-3 kernel")
        ns_per_cycle = self._decode_times(buf).ns_per_cycle
        rows = self._rows(buf["warp_every"]) * g.n_tiles * g.warps_per_block * 2
        warp_blocks, wait = trace_decode.decode_waits(
            buf["warps"].get()[:rows],
            buf["warp_every"],
            g.n_tiles,
            g.warps_per_block,
            ns_per_cycle,
            g.n_blocks,
        )
        probe, self.smem_base = trace_decode.decode_probe(buf["probe"].get(), self.params["tile"])
        stats.update(
            diagnostics_ms=diag_ms,
            diagnostics_overhead_pct=100.0 * (diag_ms / stats["time_ms_median"] - 1.0),
            # the last warp to arrive releases the barrier: its wait shows the clocks agree
            last_arrival_wait_ns_max=int(wait.min(axis=2).max()),
        )
        self.warp_every = buf["warp_every"]
        return {"warp_blocks": warp_blocks, "barrier_wait": wait, "probe": probe}

    def _decode_times(self, buf) -> trace_decode.BlockTimes:
        nominal = self.device["clock_mhz"] or 1980.0
        return trace_decode.decode_blocks(buf["blocks"].get(), self.geometry.grid, nominal)

    def _decode_phases(self, buf: dict, times, level: int) -> dict:
        g = self.geometry
        if level < 2 or not g.n_tiles:
            return {}
        pb, issue, loaded, computed = trace_decode.decode_phases(
            buf["phases"].get()[
                : self._rows(buf["phase_every"]) * g.n_tiles * trace_decode.PHASE_WORDS
            ],
            buf["phase_every"],
            g.n_tiles,
            times,
        )
        return {"phase_blocks": pb, "issue": issue, "loaded": loaded, "computed": computed}

    def _rows(self, every: int) -> int:
        return sampling.sampled_blocks(self.geometry.n_blocks, every)

    def _stats(self, plain_ms, instr_ms, blas_ms, rel_error) -> dict:
        flops = self.spec.flops(self.M, self.N, self.K)
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
            "overhead_pct": None,
            "instrumented_ms_median": None,
            "span_ns": None,
            "event_ms": None,
            "span_vs_event": None,
        }
        if instr_ms:
            instr = float(np.median(instr_ms))
            stats.update(instrumented_ms_median=instr, overhead_pct=100.0 * (instr / med - 1.0))
        return stats

    def _occupancy(self) -> dict:
        """Occupancy of the plain build, from this GPU's limits and its real register count."""
        limits = load_device("h200")  # allocation granularities; the limits come from the GPU
        limits.update(
            name=self.device["name"],
            sm_count=self.device["sm_count"],
            max_threads_per_sm=self.device["max_threads_per_sm"],
            smem_per_sm=self.device["smem_per_sm"],
            regs_per_sm=self.device["regs_per_sm"],
        )
        return occupancy_dict(
            self.spec,
            self.params,
            self.M,
            self.N,
            self.K,
            limits,
            registers=self.registers["level_0"],
        )

    def _manifest(self, stats: dict, buf: dict) -> dict:
        g, level = self.geometry, self.opts.level
        sampling_info: dict = {
            "budget_bytes": self.opts.budget_bytes,
            "blocks": "every block",
            "timeline_level": min(level, 2) or 1,
        }
        if level >= 2:
            sampling_info.update(
                phase_every=buf["phase_every"],
                phase_blocks=self._rows(buf["phase_every"]) if g.n_tiles else 0,
            )
        if level >= 3 and g.n_tiles:
            sampling_info.update(
                diagnostics="separate level-3 run: probe and barrier waits; the timeline "
                "(blocks, phases) is the level-2 run",
                warp_every=self.warp_every,
                warp_blocks=self._rows(self.warp_every),
                probe={
                    "block": list(self.opts.probe_block),
                    "warp": self.opts.probe_warp,
                    "ktile": self.opts.probe_ktile,
                    "smem_base": getattr(self, "smem_base", None),
                },
            )
        return {
            "schema_version": SCHEMA_VERSION,
            "kernel": self.spec.name,
            "params": self.params,
            "M": self.M,
            "N": self.N,
            "K": self.K,
            "dtype": "float32",
            "backend": "cuda",
            "device": self.device,
            "timer": {
                "name": "globaltimer+clock64",
                "resolution_ns": 32,
                "block_times": "%globaltimer",
                "tile_marks": "clock64 anchored per block",
                "ns_per_cycle": getattr(self, "ns_per_cycle", None),
            },
            "level": level,
            "geometry": {
                "grid": list(g.grid),
                "block": list(g.block),
                "threads": g.threads,
                "warps": g.warps_per_block,
                "registers": self.registers,
                "smem_bytes": g.smem_bytes,
                "n_tiles": g.n_tiles,
            },
            "sampling": sampling_info,
            "software": software_versions(),
            "stats": stats,
            "occupancy": self._occupancy(),
            "flops": self.spec.flops(self.M, self.N, self.K),
            "global_bytes": {
                "formula": self.spec.predicted_global_bytes(self.params, self.M, self.N, self.K),
                "issued": self.spec.issued_global_bytes(self.params, self.M, self.N, self.K),
            },
            "command": " ".join(sys.argv),
        }


def record(kernel: str, M: int, N: int, K: int, params: dict, opts: RecordOptions) -> Trace:
    return Recorder(kernel, M, N, K, params, opts).run()

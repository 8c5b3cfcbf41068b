"""One point of the throughput plot: a finished run and the configuration that made it."""

from __future__ import annotations

from dataclasses import dataclass

from matviz.core.trace import Trace


@dataclass(frozen=True)
class RunPoint:
    kernel: str
    params: tuple[tuple[str, int | str], ...]  # in the description's order
    labels: str  # the description's short labels of ``params``: 'T32 P1'
    shape: tuple[int, int, int]
    backend: str  # "cuda" or "sim"
    gflops: float
    cublas_gflops: float | None
    wrong: int = 0  # elements of C the run got wrong (a deliberately broken kernel)

    @property
    def label(self) -> str:
        """Short configuration label for a plot axis, e.g. 'tiled T32 P1'; a run whose C is
        wrong says so, so its speed is never read as a correct kernel's."""
        sim = " (sim)" if self.backend == "sim" else ""
        wrong = " (C wrong)" if self.wrong else ""
        return f"{self.kernel} {self.labels}{sim}{wrong}"

    @classmethod
    def from_bench_row(cls, row: dict) -> RunPoint:
        """A rung of ``matviz bench`` (one kernel at its best configuration, on the GPU)."""
        size = int(row["size"])
        params = row.get("params") or {}
        return cls(
            kernel=str(row["kernel"]),
            params=tuple(params.items()),
            labels=str(row.get("config", "")),
            shape=(size, size, size),
            backend="cuda",
            gflops=float(row["gflops"]),
            cublas_gflops=float(row["cublas_gflops"]),
        )

    @classmethod
    def from_trace(cls, trace: Trace) -> RunPoint:
        stats = trace.manifest["stats"]
        config = trace.config
        return cls(
            kernel=trace.kernel,
            params=tuple(config.params.items()),
            labels=config.kernel.labels(config.params),
            shape=trace.shape,
            backend=trace.backend,
            gflops=float(stats["gflops"]),
            cublas_gflops=stats.get("cublas_gflops"),
            wrong=int((trace.correctness or {}).get("wrong") or 0),
        )

"""The one backend contract: a RunRequest goes in, a Trace comes out.

Both backends (the CuPy recorder and the simulator) take the same request; the CLI, the GUI's
worker and sweeps build one and call :func:`run`. A request travels to a worker process as
JSON (:meth:`RunRequest.to_json` / :meth:`RunRequest.from_json`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Protocol

from matviz.core import sampling
from matviz.core.config import STAMP_FORMS, KernelConfig
from matviz.core.kernel import LEVELS
from matviz.core.registry import get_kernel
from matviz.core.trace import Trace
from matviz.errors import MatvizError

BACKENDS = ("cuda", "sim")
# How a level-2 build keeps its marks: one form alone (config.STAMP_FORMS), or "auto": every
# form the kernel can use built and timed beside level 0, the one closer to it kept, stride by
# stride (sampling.stride_within). The GPU tests run each form (tests/gpu).
STAMP_FORM_CHOICES = ("auto", *STAMP_FORMS)
DEFAULT_STAMP_FORM = "auto"
DEFAULT_OVERHEAD_TARGET_PCT = sampling.OVERHEAD_TARGET_PCT[2]
MAX_BUDGET_MIB = sampling.MAX_BUDGET_BYTES // 2**20  # why: matviz.core.sampling
# The kernels take the stride as a C int; the simulator's inputs key on 2 * seed + 1 as uint64.
MAX_INT_FIELDS = {"phase_every": 2**31 - 1, "seed": 2**63 - 1}


@dataclass(frozen=True)
class RunRequest:
    kernel: str
    M: int
    N: int
    K: int
    params: dict[str, Any] = field(default_factory=dict)
    backend: str = "sim"
    level: int = 2
    budget_bytes: int = sampling.DEFAULT_BUDGET_BYTES
    phase_every: int = 1  # > 1: only every n-th block stamps its k-steps (less overhead)
    probe_block: tuple[int, int] = (0, 0)
    probe_warp: int = 0
    probe_ktile: int = 0
    seed: int = 0  # the simulator's jitter
    repeats: int = 20  # timed runs on the GPU (median)
    stamp_form: str = DEFAULT_STAMP_FORM  # see STAMP_FORM_CHOICES
    # level 2 on a GPU: the recorder stamps every 2nd, 4th ... block (from phase_every on) until
    # the build runs within this many % of level 0 (sampling.stride_within); None: as asked
    overhead_target_pct: float | None = DEFAULT_OVERHEAD_TARGET_PCT

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise MatvizError(f"unknown backend {self.backend!r} (use cuda or sim)")
        if isinstance(self.level, bool) or self.level not in LEVELS:
            raise MatvizError(f"level must be one of {LEVELS} (got {self.level!r})")
        for name, low in (("budget_bytes", 1), ("phase_every", 1), ("seed", 0), ("repeats", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise MatvizError(f"{name} must be a whole number >= {low} (got {value!r})")
            high = MAX_INT_FIELDS.get(name)
            if high is not None and value > high:
                raise MatvizError(f"{name} must be at most {high} (got {value})")
        if self.stamp_form not in STAMP_FORM_CHOICES:
            choices = ", ".join(STAMP_FORM_CHOICES)
            raise MatvizError(f"stamp form must be one of {choices} (got {self.stamp_form!r})")
        target = self.overhead_target_pct
        if target is not None and (
            isinstance(target, bool)
            or not isinstance(target, (int, float))
            or not (math.isfinite(target) and 0 < target <= 100)
        ):
            raise MatvizError(
                f"the overhead target must be a percentage above 0 and at most 100, or none "
                f"(got {target!r})"
            )
        if self.budget_bytes > MAX_BUDGET_MIB * 2**20:
            raise MatvizError(
                f"the trace budget may be at most {MAX_BUDGET_MIB} MiB (got "
                f"{-(-self.budget_bytes // 2**20)} MiB): it bounds the run's memory"
            )
        object.__setattr__(self, "probe_block", tuple(int(v) for v in self.probe_block))
        # the kernel's own parameter names and values, defaults filled in
        object.__setattr__(self, "params", get_kernel(self.kernel).resolve_params(self.params))

    def config(self) -> KernelConfig:
        """The kernel at this request's parameters and shape (checked: it can launch)."""
        return get_kernel(self.kernel).configure(self.params, self.M, self.N, self.K)

    def check_probe(self, config: KernelConfig) -> None:
        gx, gy = config.grid
        bx, by = self.probe_block
        if not (0 <= bx < gx and 0 <= by < gy):
            raise MatvizError(f"probe block ({bx}, {by}) is outside the {gx}x{gy} grid")
        if not 0 <= self.probe_warp < config.warps:
            raise MatvizError(f"probe warp {self.probe_warp} is outside 0..{config.warps - 1}")
        if config.n_steps and not 0 <= self.probe_ktile < config.n_steps:
            raise MatvizError(f"probe k-tile {self.probe_ktile} is outside 0..{config.n_steps - 1}")

    def with_backend(self, backend: str) -> RunRequest:
        return replace(self, backend=backend)

    # -- the worker's JSON ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["probe_block"] = list(self.probe_block)
        return data

    @classmethod
    def from_json(cls, data: Any) -> RunRequest:
        if not isinstance(data, dict):
            raise MatvizError("the request is not a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise MatvizError(f"the request has unknown fields: {', '.join(unknown)}")
        missing = [n for n in ("kernel", "M", "N", "K") if n not in data]
        if missing:
            raise MatvizError(f"the request lacks {', '.join(missing)}")
        if not isinstance(data.get("params", {}), dict):
            raise MatvizError("the request's params must be an object")
        try:
            return cls(**data)
        except TypeError as exc:
            raise MatvizError(f"bad request: {exc}") from None


class Backend(Protocol):
    def __call__(self, request: RunRequest) -> Trace: ...


def run(request: RunRequest) -> Trace:
    """Record (cuda) or simulate (sim) ``request``; every failure is a one-line MatvizError."""
    if request.backend == "sim":
        from matviz.backends.simulator import simulate

        return simulate(request)
    from matviz.backends.cuda_status import cuda_status

    ok, why = cuda_status()
    if not ok:
        raise MatvizError(f"CUDA backend unavailable: {why}")
    from matviz.backends.cupy_recorder import record

    return record(request)

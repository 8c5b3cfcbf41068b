"""Compile a kernel with nvcc and report what ptxas says about it.

One nvcc run (``-cubin -Xptxas -v -keep``) yields both the resource report (registers, spills,
stack, shared memory, barriers) and the PTX, so the level-0 "no instrumentation" check costs no
extra build. Results are memoised in-process and on disk under ``~/.cache/matviz/nvcc/`` (or
``$XDG_CACHE_HOME/matviz/nvcc/``), keyed by a hash of the kernel source, the kernel headers, the
defines, the target and nvcc's version, so a stale entry can never be returned.

:meth:`KernelConfig.defines` is the single source of the ``-D`` list; the CuPy recorder passes the
same strings to NVRTC.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from pathlib import Path

from matviz.core.config import KernelConfig
from matviz.core.json_input import read_json_file
from matviz.core.trace_io import read_small_file
from matviz.errors import MatvizError
from matviz.paths import KERNEL_DIR

DEFAULT_ARCH = "sm_90"
NVCC_TIMEOUT_S = 300
# Bump when the cached record's layout or the nvcc command line changes.
_CACHE_FORMAT = 1


@dataclass(frozen=True)
class CompileReport:
    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_bytes: int
    smem_bytes: int
    barriers: int
    ptxas_log: str  # ptxas lines for this kernel's entry only

    @property
    def spills(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


def nvcc_path() -> str | None:
    """Where nvcc is, or None when the CUDA toolkit is not on PATH."""
    return shutil.which("nvcc")


def compile_flags(config: KernelConfig, level: int, stamp_form: str = "lanes") -> list[str]:
    """nvcc flags for ``config``: its defines plus the include path for ``trace.cuh``."""
    return [*config.defines(level, stamp_form), f"-I{KERNEL_DIR}"]


def compile_report(
    config: KernelConfig, level: int, arch: str = "", stamp_form: str = "lanes"
) -> CompileReport:
    """Registers, spills, stack, shared memory and barriers ptxas reports for ``config``
    (built for ``arch``, by default the one its kernel needs; ``stamp_form``: see
    :meth:`KernelConfig.defines`)."""
    return _build(config, level, arch or config.kernel.arch, stamp_form)[0]


def ptx(config: KernelConfig, level: int, arch: str = "") -> str:
    """The PTX nvcc generates for ``config`` (identical to ``nvcc -ptx``)."""
    return _build(config, level, arch or config.kernel.arch)[1]


def inlined_source(path: Path) -> str:
    """The kernel source at ``path`` with every header it includes from kernels/ (trace.cuh,
    float4.cuh) inlined, each once: what NVRTC compiles without an include path."""
    return _inline(path.read_text(encoding="utf-8"), set())


def _inline(text: str, done: set[str]) -> str:
    def header(match: re.Match[str]) -> str:
        name = match[1]
        if name in done:  # each header once, as its #pragma once would have it
            return ""
        done.add(name)
        return _inline((KERNEL_DIR / name).read_text(encoding="utf-8"), done)

    return _INCLUDE.sub(header, text)


_INCLUDE = re.compile(r'^#include "([\w.]+\.cuh)"$', re.MULTILINE)


def registers_for(config: KernelConfig, level: int = 0) -> tuple[int, str]:
    """Registers per thread and their origin: "nvcc", or the description's "estimate"."""
    if nvcc_path() is None:
        return config.kernel.registers, "estimate"
    return compile_report(config, level).registers, "nvcc"


# -- building ---------------------------------------------------------------------------------


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "matviz" / "nvcc"


def release() -> str:
    """The last line of ``nvcc --version`` (its build), for the tables that quote it; "nvcc"
    where it is missing."""
    nvcc = nvcc_path()
    lines = nvcc_version(nvcc).strip().splitlines() if nvcc else []
    return lines[-1] if lines else "nvcc"


@cache
def nvcc_version(nvcc: str) -> str:
    try:
        done = subprocess.run(
            [nvcc, "--version"], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise MatvizError(f"could not run '{nvcc} --version': {exc}") from exc
    return done.stdout


def _cache_key(source: Path, entry: str, flags: list[str], arch: str, nvcc: str) -> str:
    digest = hashlib.sha256()
    # Every header in the kernel directory, not just trace.cuh, so a new shared header that a
    # kernel includes also invalidates the cache.
    headers = sorted(KERNEL_DIR.glob("*.cuh"))
    for path in (source, *headers):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    # The -I path is left out so checkouts in different places share entries.
    defs = [f for f in flags if not f.startswith("-I")]
    meta = [str(_CACHE_FORMAT), arch, entry, *defs, nvcc_version(nvcc)]
    digest.update("\0".join(meta).encode())
    return digest.hexdigest()[:32]


def _build(
    config: KernelConfig, level: int, arch: str, stamp_form: str = "lanes"
) -> tuple[CompileReport, str]:
    nvcc = nvcc_path()
    if nvcc is None:
        raise MatvizError("nvcc was not found on PATH; install the CUDA toolkit to compile")
    source, entry = config.kernel.source, config.kernel.entry_point
    if not source.is_file():
        raise MatvizError(f"kernel source {source} does not exist")
    flags = compile_flags(config, level, stamp_form)
    key = _cache_key(source, entry, flags, arch, nvcc)
    return _build_keyed(key, str(source), entry, tuple(flags), arch, nvcc)


@lru_cache(maxsize=1024)
def _build_keyed(
    key: str, source: str, entry: str, flags: tuple[str, ...], arch: str, nvcc: str
) -> tuple[CompileReport, str]:
    """In-process memo over the disk cache; ``key`` already covers every input."""
    cached = _read_cache(key)
    if cached is not None:
        return cached
    report, ptx_text = _run_nvcc(source, entry, list(flags), arch, nvcc)
    _write_cache(key, report, ptx_text)
    return report, ptx_text


def _run_nvcc(
    source: str, entry: str, flags: list[str], arch: str, nvcc: str
) -> tuple[CompileReport, str]:
    with tempfile.TemporaryDirectory(prefix="matviz-nvcc-") as tmp:
        # -keep leaves the PTX next to the cubin, so one run gives both.
        out = str(Path(tmp) / "kernel.cubin")
        verbose_keep = ("-Xptxas", "-v", "-keep", "-keep-dir", tmp)
        cmd = cubin_command(nvcc, source, flags, arch, out, *verbose_keep)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise MatvizError(f"nvcc took longer than {NVCC_TIMEOUT_S} s on {source}") from exc
        except OSError as exc:
            raise MatvizError(f"could not run nvcc: {exc}") from exc
        log = done.stderr + done.stdout
        defs = " ".join(f for f in flags if f.startswith("-D"))
        if done.returncode != 0:
            raise MatvizError(f"nvcc failed on {Path(source).name} ({defs}): {_first_error(log)}")
        ptx_files = sorted(Path(tmp).glob("*.ptx"))
        if not ptx_files:
            raise MatvizError(f"nvcc kept no PTX for {Path(source).name} ({defs})")
        ptx_text = ptx_files[0].read_text()
    return parse_ptxas(log, entry), ptx_text


def cubin_command(
    nvcc: str, source: str, flags: list[str], arch: str, out: str, *extra: str
) -> list[str]:
    """The nvcc command line that builds ``source`` into the cubin ``out``."""
    return [nvcc, target_flag(arch), "-cubin", *extra, *flags, source, "-o", out]


def target_flag(arch: str) -> str:
    """nvcc's flag for one target. An arch-specific one (sm_90a) goes through -gencode: nvcc
    13.0's -arch=sm_90a also runs a plain sm_90 pass, which rejects wgmma."""
    if arch.endswith("a"):
        return f"-gencode=arch=compute_{arch[3:]},code={arch}"
    return f"-arch={arch}"


def run_tool(cmd: list[str], env: dict | None = None) -> str:
    """Run a toolkit program (nvcc, cuobjdump) and return its stdout; a failure, a timeout or a
    missing program is one MatvizError line."""
    name = Path(cmd[0]).name
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        raise MatvizError(f"could not run {name}: {exc}") from exc
    if done.returncode != 0:
        raise MatvizError(f"{name} failed: {_first_error(done.stderr + done.stdout)}")
    return done.stdout


def _first_error(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[0] if lines else "no output"


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")


def parse_ptxas(log: str, entry: str) -> CompileReport:
    """Pick the ``-Xptxas -v`` lines of ``entry`` out of nvcc's output and read them."""
    lines: list[str] = []
    current = None
    for line in log.splitlines():
        match = _ENTRY.search(line)
        if match:
            current = match.group(1)
        # The compile-time line changes every run; leaving it out keeps reports comparable.
        if current == entry and "Compile time" not in line:
            lines.append(line.rstrip())
    text = "\n".join(lines)
    used = re.search(r"Used (\d+) registers(.*)", text)
    if used is None:
        raise MatvizError(f"ptxas gave no register count for kernel entry {entry}")
    # The frame line follows "Function properties for <entry>"; a non-inlined callee would get
    # its own properties block, which must not be mistaken for the entry's.
    frame = re.search(
        rf"Function properties for {re.escape(entry)}\s*\n\s*(\d+) bytes stack frame, "
        r"(\d+) bytes spill stores, (\d+) bytes spill loads",
        text,
    )
    stack, spill_store, spill_load = (int(g) for g in frame.groups()) if frame else (0, 0, 0)
    rest = used.group(2)

    def field(pattern: str) -> int:
        # ptxas leaves out some fields when they are zero (e.g. no shared memory).
        match = re.search(pattern, rest)
        return int(match.group(1)) if match else 0

    return CompileReport(
        registers=int(used.group(1)),
        spill_store_bytes=spill_store,
        spill_load_bytes=spill_load,
        stack_bytes=stack,
        smem_bytes=field(r"(\d+) bytes smem"),
        barriers=field(r"used (\d+) barriers"),
        ptxas_log=text,
    )


# far above what one kernel's report (with its ptxas log) and PTX take
MAX_CACHED_REPORT_BYTES = 1 << 22
MAX_CACHED_PTX_BYTES = 1 << 26


def _read_cache(key: str) -> tuple[CompileReport, str] | None:
    folder = _cache_dir()
    try:
        record = read_json_file(folder / f"{key}.json", MAX_CACHED_REPORT_BYTES, "the entry")
        ptx_text = read_small_file(folder / f"{key}.ptx", MAX_CACHED_PTX_BYTES).decode()
        return CompileReport(**record), ptx_text
    except (MatvizError, ValueError, TypeError):
        return None  # missing, damaged, a FIFO or not a file: rebuild


def _write_cache(key: str, report: CompileReport, ptx_text: str) -> None:
    folder = _cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # PTX first, JSON last: a reader only trusts an entry whose JSON exists.
        _write_atomic(folder / f"{key}.ptx", ptx_text)
        _write_atomic(folder / f"{key}.json", json.dumps(asdict(report)))
    except OSError:
        pass  # a read-only home only costs speed


def _write_atomic(path: Path, text: str) -> None:
    # Parallel builds of the same key must never leave a half-written file behind.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

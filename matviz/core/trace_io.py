"""The ``.mvz`` trace file: a zip of ``manifest.json`` and the arrays.

Format 3 stores each array as its own zstd-compressed ``.npy`` member (``marks.npy.zst``...).
The time arrays (marks, barrier_wait) are stored as per-row differences along their k-steps
(the first from the block's start, so the values are phase lengths), in the narrowest integer
type that holds them, laid out column-wise (one k-step mark after another across all rows) and
split into byte planes. A 4096^3 T32 simulation so writes ~3x smaller and ~20x faster than
with numpy's savez_compressed (``python -m matviz.bench.trace_io`` measures it). Formats 1 and 2
(``arrays.npz``, uint32 deltas from block start) are still read.

Reading trusts nothing: the file must be a regular file, the manifest must pass the schema
(:mod:`matviz.core.trace_schema`), and every member's and array's declared size is checked
against what the manifest implies before anything of that size is allocated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import secrets
import stat
import tokenize
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any

import numpy as np
import zstandard

from matviz.core.config import KernelConfig
from matviz.core.manifest import Stats
from matviz.core.registry import get_kernel
from matviz.core.trace import BLOCK_DTYPE, PROBE_DTYPE, SCHEMA_VERSION, Trace
from matviz.errors import MatvizError

FORMAT_VERSION = 3  # 3: zstd .npy members, delta time columns; 2: arrays.npz; 1: three tiles

MANIFEST_MEMBER = "manifest.json"
ARRAYS_MEMBER = "arrays.npz"  # formats 1 and 2
ZSTD_LEVEL = 3  # measured: level 3 of the byte planes beats levels 1 and 5 in size and speed
MAX_MANIFEST_BYTES = 1 << 22
NPY_SLACK = 1 << 12  # an .npy header, or zstd's framing around a member

TIME_ARRAYS = ("marks", "barrier_wait")
INDEX_ARRAYS = ("phase_blocks", "warp_blocks")
PLAIN_ARRAYS = {"blocks": BLOCK_DTYPE, "probe": PROBE_DTYPE,
                "phase_blocks": np.dtype(np.int64), "warp_blocks": np.dtype(np.int64)}  # fmt: skip
# Arrays added after format 3 began: older format-3 files lack them (the Trace's empty default)
OPTIONAL_ARRAYS: dict[str, tuple[np.dtype[Any], int]] = {
    "c_wrong": (np.dtype(np.uint32), 2),
    "stale": (np.dtype(np.int8), 3),
    "fragments": (np.dtype(np.int16), 3),
}
# Dimensions of the time arrays of each format; format 1's three per-tile arrays are read back
# as the marks (issue, loaded, computed) of the seed kernels.
_FORMAT_TIMES = {
    1: {"issue": 2, "loaded": 2, "computed": 2, "barrier_wait": 4},
    2: {"marks": 3, "barrier_wait": 4},
    3: {"marks": 3, "barrier_wait": 4},
}

# Everything a damaged or foreign file can make zipfile, zlib, zstd, json or numpy raise.
_READ_ERRORS = (
    OSError,
    EOFError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    zstandard.ZstdError,
    ValueError,
    KeyError,
    TypeError,
    IndexError,
    NotImplementedError,
    RuntimeError,
    OverflowError,
    SyntaxError,
)


class _BadFile(Exception):
    """Internal: a reason the file cannot be read; load_trace adds the file name."""


# -- the time-array codec ----------------------------------------------------------------------


def encode_times(times: np.ndarray, base: np.ndarray) -> np.ndarray:
    """(rows, *steps) int64 -> uint8 byte planes (itemsize, *steps, rows) of the row deltas.

    int64 differences wrap, and so does the cumulative sum that undoes them: exact for any
    int64 input. The narrowest signed type that holds every delta is chosen.
    """
    rows, steps = times.shape[0], times.shape[1:]
    flat = np.asarray(times, np.int64).reshape(rows, math.prod(steps))
    deltas = np.empty_like(flat)  # np.diff with prepend= copies the whole array first
    if deltas.size:
        deltas[:, 0] = flat[:, 0] - np.asarray(base, np.int64)
        np.subtract(flat[:, 1:], flat[:, :-1], out=deltas[:, 1:])
    lo, hi = (int(deltas.min()), int(deltas.max())) if deltas.size else (0, 0)
    width = next(w for w in (1, 2, 4, 8) if -(2 ** (8 * w - 1)) <= lo and hi < 2 ** (8 * w - 1))
    columns = np.ascontiguousarray(deltas.astype(f"<i{width}").T)  # transposed while narrow
    as_bytes = columns.view(np.uint8).reshape(-1, width)
    planes = np.empty((width, as_bytes.shape[0]), np.uint8)
    for i in range(width):  # one strided copy per byte beats a transposing copy
        planes[i] = as_bytes[:, i]
    return planes.reshape(width, *steps, rows)


def decode_times(planes: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The inverse of :func:`encode_times`."""
    width, steps, rows = planes.shape[0], planes.shape[1:-1], planes.shape[-1]
    if planes.dtype != np.uint8 or width not in (1, 2, 4, 8):
        raise _BadFile(f"time planes of dtype {planes.dtype} and width {width}")
    columns = np.empty(math.prod(steps) * rows, f"<i{width}")
    as_bytes = columns.view(np.uint8).reshape(-1, width)
    for i, plane in enumerate(planes.reshape(width, -1)):
        as_bytes[:, i] = plane
    # transposed while narrow, then summed in place along contiguous rows: the fastest order
    times = np.ascontiguousarray(columns.reshape(math.prod(steps), rows).T).astype(np.int64)
    if times.size:
        times[:, 0] += np.asarray(base, np.int64)
    np.cumsum(times, axis=1, out=times)
    return times.reshape(rows, *steps)


def _time_base(name: str, blocks: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Marks count from their block's start; barrier waits are durations already."""
    if name == "barrier_wait":
        return np.zeros(len(rows), np.int64)
    return blocks["start"][np.asarray(rows, np.int64)]


# -- saving --------------------------------------------------------------------------------


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def _members(trace: Trace) -> dict[str, bytes]:
    blocks = np.asarray(trace.blocks, BLOCK_DTYPE)
    arrays: dict[str, np.ndarray] = {
        name: np.asarray(getattr(trace, name), dtype) for name, dtype in PLAIN_ARRAYS.items()
    }
    for name, (dtype, _) in OPTIONAL_ARRAYS.items():
        arrays[name] = np.asarray(getattr(trace, name), dtype)
    for name, rows in zip(TIME_ARRAYS, INDEX_ARRAYS, strict=True):
        arrays[name] = encode_times(
            getattr(trace, name), _time_base(name, blocks, getattr(trace, rows))
        )
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
    return {f"{n}.npy.zst": compressor.compress(_npy_bytes(a)) for n, a in arrays.items()}


def _json_default(value: Any) -> Any:
    # Recorders naturally put numpy scalars (e.g. a median) into the stats.
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def save_trace(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write ``trace`` to ``path`` atomically: a failed save leaves any old file untouched."""
    path = Path(path)
    manifest = {**trace.manifest, "format_version": FORMAT_VERSION}
    try:
        manifest_text = json.dumps(manifest, indent=1, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise MatvizError(f"cannot write trace to {path}: manifest is not JSON: {exc}") from exc
    members = _members(trace)

    tmp_name: str | None = None
    try:
        # Same directory as the target, so os.replace is an atomic rename. Not mkstemp: its
        # 0600 mode would stick to the trace; os.open lets the umask decide as for any file.
        candidate = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        tmp_name = candidate  # only now is it ours to delete
        with os.fdopen(fd, "wb") as fh:
            with zipfile.ZipFile(fh, "w") as zf:
                zf.writestr(MANIFEST_MEMBER, manifest_text, zipfile.ZIP_DEFLATED)
                for name, data in members.items():  # zstd already; deflate would only cost time
                    zf.writestr(name, data, zipfile.ZIP_STORED)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as exc:
        raise MatvizError(f"cannot write trace to {path}: {exc.strerror or exc}") from exc
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


# -- bounded reading -----------------------------------------------------------------------


def _open_regular(path: Path) -> IO[bytes]:
    """The file opened for reading, refused unless it is a regular file (not /dev/zero, not a
    FIFO, which O_NONBLOCK keeps from blocking should it replace the file after the stat)."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise _BadFile("it is a directory")
    if not stat.S_ISREG(mode):
        raise _BadFile("not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _BadFile("not a regular file")
    return os.fdopen(fd, "rb")


def read_small_file(path: str | os.PathLike[str], cap: int) -> bytes:
    """A regular file of at most ``cap`` bytes (a JSON side file); MatvizError otherwise: a
    FIFO, /dev/zero or a huge file is refused, not read."""
    try:
        with _open_regular(Path(path)) as fh:
            data = fh.read(cap + 1)
    except _BadFile as exc:
        raise MatvizError(f"cannot read {path}: {exc}") from None
    except FileNotFoundError:
        raise MatvizError(f"cannot read {path}: no such file") from None
    except OSError as exc:
        raise MatvizError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > cap:
        raise MatvizError(f"cannot read {path}: larger than {cap >> 20} MiB")
    return data


def _read_member(zf: zipfile.ZipFile, name: str, cap: int) -> bytes:
    """A member's bytes, refused when its header claims more than ``cap`` or it holds more."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise _BadFile(f"not a matviz trace (no {name})") from None
    if info.file_size > cap:
        raise _BadFile(f"{name} claims {info.file_size} bytes, more than the {cap} it may hold")
    with zf.open(info) as fh:
        data = fh.read(cap + 1)  # a lying header cannot make this read more
    if len(data) > cap:
        raise _BadFile(f"{name} holds more than the {cap} bytes it may hold")
    return data


def _read_exact(fh: IO[bytes], nbytes: int) -> bytearray:
    buf = bytearray(nbytes)
    view, done = memoryview(buf), 0
    while done < nbytes:
        got = fh.readinto(view[done:])  # type: ignore[attr-defined]
        if not got:
            raise _BadFile("an array ends early")
        done += got
    return buf


def _npy_header(fh: IO[bytes], name: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(fh)
    raise _BadFile(f"array {name} has .npy version {version}")


def _read_npy(fh: IO[bytes], name: str, cap: int) -> np.ndarray:
    """One .npy array, its header checked against ``cap`` bytes before its data is read."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a mangled header's escapes warn while parsed
            shape, fortran, dtype = _npy_header(fh, name)
    except (ValueError, SyntaxError, TypeError, tokenize.TokenError) as exc:  # a Python literal
        raise _BadFile(f"array {name} has a bad .npy header ({type(exc).__name__})") from None
    if dtype.hasobject:
        raise _BadFile(f"array {name} holds Python objects")
    if any(dim < 0 for dim in shape):
        raise _BadFile(f"array {name} has a negative dimension")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > cap:
        raise _BadFile(f"array {name} declares shape {shape} of {nbytes} bytes, "
                       f"more than the {cap} this trace can hold")  # fmt: skip
    data = _read_exact(fh, nbytes)
    if fh.read(1):
        raise _BadFile(f"array {name} has data after its end")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")


def _read_manifest(zf: zipfile.ZipFile) -> tuple[dict[str, Any], int]:
    """The manifest (migrated to this schema) and the file's format version."""
    try:
        manifest = json.loads(_read_member(zf, MANIFEST_MEMBER, MAX_MANIFEST_BYTES))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _BadFile(f"{MANIFEST_MEMBER} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise _BadFile(f"{MANIFEST_MEMBER} is not a JSON object")
    version = manifest.pop("format_version", None)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _BadFile(f"{MANIFEST_MEMBER} has no valid format_version")
    if version > FORMAT_VERSION:
        raise _BadFile(
            f"written by a newer matviz (format {version}); "
            f"this matviz reads up to {FORMAT_VERSION}: upgrade matviz"
        )
    schema = manifest.get("schema_version")
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise _BadFile(f"schema_version must be a whole number, not {schema!r}")
    if schema == 1:
        manifest = _migrate_v1(manifest)
    elif schema != SCHEMA_VERSION:
        raise _BadFile(f"unknown schema_version {schema} (this matviz reads 1 to {SCHEMA_VERSION})")
    return _with_stats(_with_layouts(_with_correctness(manifest))), version


def _with_stats(manifest: dict[str, Any]) -> dict[str, Any]:
    """Stats written before one of their optional figures existed (the form of the marks, say)
    get it as None, not measured: every manifest has the same keys."""
    stats = manifest.get("stats")
    if isinstance(stats, dict):
        for field in dataclasses.fields(Stats):
            if field.default is None:
                stats.setdefault(field.name, None)
    return manifest


def _with_layouts(manifest: dict[str, Any]) -> dict[str, Any]:
    """Descriptions written before shared layouts were described get them: no swizzle (no
    kernel had one), and each parameter's layout role as the kernel's description gives it."""
    description = manifest.get("description")
    if not isinstance(description, dict):
        return manifest  # the schema check names what is wrong
    params, shared = description.get("params"), description.get("shared")
    roles = {}
    with contextlib.suppress(MatvizError):
        roles = {p.name: p.layout for p in get_kernel(str(description.get("name"))).params}
    if isinstance(params, list):
        for p in params:
            if isinstance(p, dict):
                p.setdefault("layout", roles.get(str(p.get("name")), ""))
    if isinstance(shared, list):
        for a in shared:
            if isinstance(a, dict):
                a.setdefault("swizzle", "")
    # before Tensor Core kernels: fp32 inputs, no MMA
    description.setdefault("inputs", "float32")
    description.setdefault("mma", None)
    # before kernel 11: no TMA copies or mbarriers, plain sm_90, every MMA operand in registers
    # and issued by one warp from warp 0 on
    description.setdefault("copies", [])
    description.setdefault("mbarriers", 0)
    description.setdefault("arch", "sm_90")
    mma = description["mma"]
    if isinstance(mma, dict):
        mma.setdefault("from_shared", [])
        mma.setdefault("group_threads", 32)
        mma.setdefault("first_warp", 0)
    return manifest


def _with_correctness(manifest: dict[str, Any]) -> dict[str, Any]:
    """Traces made before C was mapped get an empty correctness section (None: not checked),
    in its place before ``details``, so every manifest has the same sections."""
    if "correctness" in manifest:
        return manifest
    out = {k: v for k, v in manifest.items() if k != "details"}
    out["correctness"] = None
    if "details" in manifest:
        out["details"] = manifest["details"]
    return out


def _migrate_v1(manifest: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 (matviz before kernel descriptions): add the description from the registry."""
    try:
        config = _configure_v1(manifest)
    except (MatvizError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise _BadFile(f"cannot upgrade a schema-1 manifest: {exc}") from None
    details = {k: manifest.pop(k) for k in ("sim_seed", "model", "command") if k in manifest}
    return {**manifest, "schema_version": SCHEMA_VERSION, "description": config.describe(),
            "details": details}  # fmt: skip


def _configure_v1(manifest: dict[str, Any]) -> KernelConfig:
    if not isinstance(manifest.get("params"), dict):
        raise TypeError("params is not an object")
    return get_kernel(manifest["kernel"]).configure(
        manifest["params"], manifest["M"], manifest["N"], manifest["K"], check=True
    )


# -- arrays --------------------------------------------------------------------------------


def _check(arrays: dict[str, np.ndarray], name: str, ndim: int, dtype: np.dtype | None) -> None:
    arr = arrays[name]
    if arr.ndim != ndim:
        raise _BadFile(f"array {name} has {arr.ndim} dimensions, expected {ndim}")
    if dtype is not None and arr.dtype != dtype:
        raise _BadFile(f"array {name} has dtype {arr.dtype}, expected {dtype}")


def _check_indices(arrays: dict[str, np.ndarray]) -> None:
    n_blocks = len(arrays["blocks"])
    for name in INDEX_ARRAYS:
        _check(arrays, name, 1, np.dtype(np.int64))
        rows = arrays[name]
        if len(rows) and (rows.min() < 0 or rows.max() >= n_blocks):
            raise _BadFile(f"array {name} names a block outside the grid")


def _read_arrays_v3(zf: zipfile.ZipFile, caps: dict[str, int]) -> dict[str, np.ndarray]:
    arrays = {}
    for name in (*PLAIN_ARRAYS, *TIME_ARRAYS):
        raw = _read_member(zf, f"{name}.npy.zst", caps[name] + caps[name] // 64 + NPY_SLACK)
        with zstandard.ZstdDecompressor().stream_reader(raw) as fh:
            arrays[name] = _read_npy(fh, name, caps[name])  # type: ignore[arg-type]
    present = set(zf.namelist())
    for name, (dtype, ndim) in OPTIONAL_ARRAYS.items():
        if f"{name}.npy.zst" not in present:
            continue
        raw = _read_member(zf, f"{name}.npy.zst", caps[name] + caps[name] // 64 + NPY_SLACK)
        with zstandard.ZstdDecompressor().stream_reader(raw) as fh:
            arrays[name] = _read_npy(fh, name, caps[name])  # type: ignore[arg-type]
        _check(arrays, name, ndim, dtype)
    for name, dtype in PLAIN_ARRAYS.items():
        _check(arrays, name, 1, dtype)
    _check_indices(arrays)
    for (name, ndim), rows in zip(_FORMAT_TIMES[3].items(), INDEX_ARRAYS, strict=True):
        planes = arrays[name]
        _check(arrays, name, ndim + 1, np.dtype(np.uint8))
        if planes.shape[-1] != len(arrays[rows]):
            raise _BadFile(f"array {name} has {planes.shape[-1]} rows for {len(arrays[rows])}")
        if planes.size // max(planes.shape[0], 1) * 8 > caps[name]:
            raise _BadFile(f"array {name} would decode to more than {caps[name]} bytes")
        arrays[name] = decode_times(planes, _time_base(name, arrays["blocks"], arrays[rows]))
    return arrays


def _read_arrays_npz(
    zf: zipfile.ZipFile, version: int, caps: dict[str, int]
) -> dict[str, np.ndarray]:
    """Formats 1 and 2: an ``arrays.npz`` (itself a zip) with uint32 deltas from block start."""
    times_ndim = _FORMAT_TIMES[version]
    names = ("blocks", *INDEX_ARRAYS, *times_ndim, "probe", "delta_encoded")
    total = sum(caps[n] + NPY_SLACK for n in names)
    with zipfile.ZipFile(io.BytesIO(_read_member(zf, ARRAYS_MEMBER, total))) as npz:
        present = set(npz.namelist())
        missing = [n for n in names if f"{n}.npy" not in present]
        if missing:
            raise _BadFile(f"{ARRAYS_MEMBER} lacks {', '.join(missing)}")
        arrays = {}
        for name in names:
            info = npz.getinfo(f"{name}.npy")
            if info.file_size > caps[name] + NPY_SLACK:
                raise _BadFile(f"array {name} claims {info.file_size} bytes, more than "
                               f"the {caps[name]} this trace can hold")  # fmt: skip
            with npz.open(info) as fh:
                arrays[name] = _read_npy(fh, name, caps[name])

    _check(arrays, "blocks", 1, BLOCK_DTYPE)
    _check(arrays, "probe", 1, PROBE_DTYPE)
    _check(arrays, "delta_encoded", 1, np.dtype(np.bool_))
    if arrays["delta_encoded"].shape != (len(times_ndim),):
        raise _BadFile(f"array delta_encoded has shape {arrays['delta_encoded'].shape}")
    _check_indices(arrays)
    for (name, ndim), encoded in zip(times_ndim.items(), arrays.pop("delta_encoded"), strict=True):
        _check(arrays, name, ndim, np.dtype(np.uint32 if encoded else np.int64))
        rows = arrays["warp_blocks" if name == "barrier_wait" else "phase_blocks"]
        if arrays[name].shape[0] != len(rows):
            raise _BadFile(f"array {name} has {arrays[name].shape[0]} rows for {len(rows)} blocks")
        times = arrays[name].astype(np.int64)
        if encoded:
            base = _time_base(name, arrays["blocks"], rows)
            times += base.reshape(base.shape + (1,) * (ndim - 1))
        arrays[name] = times
    if version == 1:
        tiles = [arrays.pop(name) for name in ("issue", "loaded", "computed")]
        if len({t.shape for t in tiles}) != 1:
            raise _BadFile("arrays issue, loaded and computed differ in shape")
        arrays["marks"] = np.stack(tiles, axis=-1)
    return arrays


def _read_trace(fh: IO[bytes]) -> Trace:
    # Imported here: saving needs no schema, so `matviz record` does not pay for pydantic.
    from matviz.core.trace_schema import array_caps, check_arrays, step_layout, validate_manifest

    with zipfile.ZipFile(fh) as zf:
        manifest, version = _read_manifest(zf)
        typed, _ = validate_manifest(manifest)
        caps = array_caps(typed, step_layout(typed.description))
        if version >= 3:
            arrays = _read_arrays_v3(zf, caps)
        else:
            arrays = _read_arrays_npz(zf, version, caps)
    check_arrays(typed, arrays)
    return Trace(manifest=manifest, **arrays)


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a ``.mvz`` file; any problem with it raises MatvizError naming the file."""
    path = Path(path)
    try:
        with _open_regular(path) as fh:
            return _read_trace(fh)
    except (_BadFile, MatvizError) as exc:
        # A kernel name or key from the file may hold a line break: escape it, stay one line.
        reason = str(exc).replace("\r", "\\r").replace("\n", "\\n")
        raise MatvizError(f"cannot read trace {path}: {reason}") from None
    except FileNotFoundError:
        raise MatvizError(f"cannot read trace {path}: no such file") from None
    except zipfile.BadZipFile as exc:
        raise MatvizError(f"cannot read trace {path}: not a valid .mvz file ({exc})") from None
    except OSError as exc:
        raise MatvizError(f"cannot read trace {path}: {exc.strerror or exc}") from None
    except _READ_ERRORS as exc:
        # Trace.validate's ValueError lands here too: the arrays disagree with the manifest.
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MatvizError(f"cannot read trace {path}: {reason}") from None
    except MemoryError:
        raise MatvizError(
            f"cannot read trace {path}: too large for this machine's memory"
        ) from None

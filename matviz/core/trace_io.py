"""The ``.mvz`` trace file: a zip of ``manifest.json`` and ``arrays.npz``.

Phase and warp times are stored as uint32 deltas from their block's start, which roughly halves
the file; a delta that does not fit (a run over ~4.29 s) falls back to absolute int64, and the
``delta_encoded`` flag array says which arrays were encoded so either form reads back exactly.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from matviz.core.registry import get_kernel
from matviz.core.trace import (
    BLOCK_DTYPE,
    PROBE_DTYPE,
    REQUIRED_MANIFEST_KEYS,
    SCHEMA_VERSION,
    Trace,
)
from matviz.errors import MatvizError

FORMAT_VERSION = 2  # 2: one marks array per k-step; 1 had issue, loaded, computed

MANIFEST_MEMBER = "manifest.json"
ARRAYS_MEMBER = "arrays.npz"

# Arrays stored as uint32 when they fit, in the order of the ``delta_encoded`` flags: phase
# times relative to their block's start, barrier waits (durations) as they are.
TIME_ARRAYS = ("marks", "barrier_wait")
DURATION_ARRAYS = ("barrier_wait",)
INDEX_ARRAYS = ("phase_blocks", "warp_blocks")
# The time arrays of each file format, with their dimensions; format 1's three per-tile arrays
# are read back as the marks (issue, loaded, computed) of the seed kernels.
_FORMAT_TIMES = {
    1: {"issue": 2, "loaded": 2, "computed": 2, "barrier_wait": 4},
    2: {"marks": 3, "barrier_wait": 4},
}
_U32_MAX = np.iinfo(np.uint32).max

# Everything a damaged or foreign file can make zipfile, zlib, json or numpy raise.
_READ_ERRORS = (
    OSError,
    EOFError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    ValueError,
    KeyError,
    TypeError,
    IndexError,
    NotImplementedError,
    RuntimeError,
)


class _BadFile(Exception):
    """Internal: a reason the file cannot be read; load_trace adds the file name."""


# -- saving --------------------------------------------------------------------------------


def _block_starts(blocks: np.ndarray, rows: np.ndarray, ndim: int, name: str) -> np.ndarray:
    """Start times of ``blocks[rows]`` shaped to broadcast against an ndim time array."""
    starts = blocks["start"][np.asarray(rows, np.int64)]
    if name in DURATION_ARRAYS:
        starts = np.zeros_like(starts)
    return starts.reshape(starts.shape + (1,) * (ndim - 1))


def _encode_times(times: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, bool]:
    """uint32 deltas from block start when they all fit, else the absolute int64 times."""
    times = np.asarray(times, np.int64)
    delta = times - starts
    if np.all((delta >= 0) & (delta <= _U32_MAX)):
        return delta.astype(np.uint32), True
    return times, False


def _encode_arrays(trace: Trace) -> dict[str, np.ndarray]:
    blocks = np.asarray(trace.blocks, BLOCK_DTYPE)
    arrays: dict[str, np.ndarray] = {
        "blocks": blocks,
        "phase_blocks": np.asarray(trace.phase_blocks, np.int64),
        "warp_blocks": np.asarray(trace.warp_blocks, np.int64),
        "probe": np.asarray(trace.probe, PROBE_DTYPE),
    }
    flags = []
    for name in TIME_ARRAYS:
        rows = arrays["warp_blocks" if name == "barrier_wait" else "phase_blocks"]
        times = getattr(trace, name)
        encoded, ok = _encode_times(times, _block_starts(blocks, rows, np.ndim(times), name))
        arrays[name] = encoded
        flags.append(ok)
    arrays["delta_encoded"] = np.array(flags, np.bool_)
    return arrays


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
    npz = io.BytesIO()
    np.savez_compressed(npz, **_encode_arrays(trace))  # type: ignore[arg-type]

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
                # Already compressed by numpy; deflating again only costs time.
                zf.writestr(ARRAYS_MEMBER, npz.getvalue(), zipfile.ZIP_STORED)
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


# -- loading -------------------------------------------------------------------------------


def _read_manifest(zf: zipfile.ZipFile) -> tuple[dict[str, Any], int]:
    """The manifest (migrated to this schema) and the file's format version."""
    try:
        manifest = json.loads(zf.read(MANIFEST_MEMBER).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _BadFile(f"{MANIFEST_MEMBER} is not valid JSON ({exc})") from exc
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
    missing = [k for k in REQUIRED_MANIFEST_KEYS if k not in manifest]
    if missing:
        raise _BadFile(f"manifest lacks {', '.join(missing)}")
    return manifest, version


def _migrate_v1(manifest: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 (matviz before kernel descriptions): add the description from the registry."""
    try:
        config = get_kernel(manifest["kernel"]).configure(
            manifest["params"], manifest["M"], manifest["N"], manifest["K"], check=False
        )
    except (MatvizError, KeyError, TypeError, AttributeError) as exc:
        raise _BadFile(f"cannot upgrade a schema-1 manifest: {exc}") from None
    details = {k: manifest.pop(k) for k in ("sim_seed", "model", "command") if k in manifest}
    return {**manifest, "schema_version": SCHEMA_VERSION, "description": config.describe(),
            "details": details}  # fmt: skip


def _check(arrays: dict[str, np.ndarray], name: str, ndim: int, dtype: np.dtype | None) -> None:
    arr = arrays[name]
    if arr.ndim != ndim:
        raise _BadFile(f"array {name} has {arr.ndim} dimensions, expected {ndim}")
    if dtype is not None and arr.dtype != dtype:
        raise _BadFile(f"array {name} has dtype {arr.dtype}, expected {dtype}")


def _read_arrays(zf: zipfile.ZipFile, version: int) -> dict[str, np.ndarray]:
    times_ndim = _FORMAT_TIMES[version]
    names = ("blocks", *INDEX_ARRAYS, *times_ndim, "probe", "delta_encoded")
    with np.load(io.BytesIO(zf.read(ARRAYS_MEMBER)), allow_pickle=False) as npz:
        missing = [n for n in names if n not in npz.files]
        if missing:
            raise _BadFile(f"{ARRAYS_MEMBER} lacks {', '.join(missing)}")
        arrays = {name: npz[name] for name in names}

    _check(arrays, "blocks", 1, BLOCK_DTYPE)
    _check(arrays, "probe", 1, PROBE_DTYPE)
    _check(arrays, "delta_encoded", 1, np.dtype(np.bool_))
    if arrays["delta_encoded"].shape != (len(times_ndim),):
        raise _BadFile(f"array delta_encoded has shape {arrays['delta_encoded'].shape}")
    n_blocks = len(arrays["blocks"])
    for name in INDEX_ARRAYS:
        _check(arrays, name, 1, np.dtype(np.int64))
        rows = arrays[name]
        if len(rows) and (rows.min() < 0 or rows.max() >= n_blocks):
            raise _BadFile(f"array {name} names a block outside the grid")

    for (name, ndim), encoded in zip(times_ndim.items(), arrays["delta_encoded"], strict=True):
        _check(arrays, name, ndim, np.dtype(np.uint32 if encoded else np.int64))
        rows = arrays["warp_blocks" if name == "barrier_wait" else "phase_blocks"]
        if arrays[name].shape[0] != len(rows):
            raise _BadFile(f"array {name} has {arrays[name].shape[0]} rows for {len(rows)} blocks")
        times = arrays[name].astype(np.int64)
        if encoded:
            times += _block_starts(arrays["blocks"], rows, times.ndim, name)
        arrays[name] = times
    if version == 1:
        tiles = [arrays.pop(name) for name in ("issue", "loaded", "computed")]
        if len({t.shape for t in tiles}) != 1:
            raise _BadFile("arrays issue, loaded and computed differ in shape")
        arrays["marks"] = np.stack(tiles, axis=-1)
    return arrays


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a ``.mvz`` file; any problem with it raises MatvizError naming the file."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            for member in (MANIFEST_MEMBER, ARRAYS_MEMBER):
                if member not in names:
                    raise _BadFile(f"not a matviz trace (no {member})")
            manifest, version = _read_manifest(zf)
            arrays = _read_arrays(zf, version)
        arrays.pop("delta_encoded")
        return Trace(manifest=manifest, **arrays)
    except _BadFile as exc:
        raise MatvizError(f"cannot read trace {path}: {exc}") from exc
    except FileNotFoundError as exc:
        raise MatvizError(f"cannot read trace {path}: no such file") from exc
    except zipfile.BadZipFile as exc:
        raise MatvizError(f"cannot read trace {path}: not a valid .mvz file ({exc})") from exc
    except OSError as exc:
        raise MatvizError(f"cannot read trace {path}: {exc.strerror or exc}") from exc
    except KeyError as exc:
        # Trace's properties index nested manifest entries such as geometry.grid.
        raise MatvizError(f"cannot read trace {path}: manifest lacks {exc.args[0]}") from exc
    except _READ_ERRORS as exc:
        # Trace.validate's ValueError lands here too: the arrays disagree with the manifest.
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MatvizError(f"cannot read trace {path}: {reason}") from exc

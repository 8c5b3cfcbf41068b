"""Corrupt variants of a valid trace either load into a valid Trace or raise one MatvizError line.

The variants come from a seeded generator: flipped bytes in the file, truncations, flipped
bytes inside an array's decompressed data (past the checksums), and mutated or deleted manifest
fields. A few hundred run in every CI run; thousands behind the ``slow`` marker.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zstandard

from matviz.core.summary import summary_lines
from matviz.core.trace_io import load_trace, save_trace
from matviz.errors import MatvizError

ODD_VALUES = [None, True, -1, 0, 1, 3, 2**31, 2**70, 1.5, -0.0, "x", "", [], [1, 2], {}, {"a": 1}]


def _files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def flip_bytes(rng: np.random.Generator, data: bytes, files: dict[str, bytes]) -> bytes:
    out = bytearray(data)
    for at in rng.integers(0, len(out), rng.integers(1, 9)):
        out[at] ^= 1 << int(rng.integers(8))
    return bytes(out)


def truncate(rng: np.random.Generator, data: bytes, files: dict[str, bytes]) -> bytes:
    return data[: int(rng.integers(0, len(data)))]


def flip_array_bytes(rng: np.random.Generator, data: bytes, files: dict[str, bytes]) -> bytes:
    """Corrupt decompressed .npy bytes (header or data) and recompress: past zstd and CRC."""
    name = str(rng.choice(sorted(n for n in files if n.endswith(".npy.zst"))))
    raw = bytearray(zstandard.ZstdDecompressor().stream_reader(files[name]).read())
    for at in rng.integers(0, len(raw), rng.integers(1, 5)):
        raw[at] = int(rng.integers(256))
    return _zip({**files, name: zstandard.ZstdCompressor().compress(bytes(raw))})


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def mutate_field(rng: np.random.Generator, data: bytes, files: dict[str, bytes]) -> bytes:
    manifest = json.loads(files["manifest.json"])
    paths = [p for p in _paths(manifest) if p]
    path = paths[int(rng.integers(len(paths)))]
    parent = manifest
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[path[-1]]
    else:
        parent[path[-1]] = ODD_VALUES[int(rng.integers(len(ODD_VALUES)))]
    return _zip({**files, "manifest.json": json.dumps(manifest).encode()})


MUTATIONS: list[Callable[[np.random.Generator, bytes, dict[str, bytes]], bytes]] = [
    flip_bytes,
    truncate,
    flip_array_bytes,
    mutate_field,
]


@pytest.fixture(scope="module")
def valid(tmp_path_factory, make_trace) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "valid.mvz"
    save_trace(make_trace(warps=True, probe=True), path)
    return path


@pytest.fixture(scope="module")
def valid_format_2(tmp_path_factory, make_trace) -> Path:
    """The same trace as matviz wrote it before format 3 (savez of uint32 deltas)."""
    trace = make_trace(warps=True, probe=True)
    starts = trace.blocks["start"][trace.phase_blocks][:, None, None]
    arrays = {
        "blocks": trace.blocks,
        "phase_blocks": trace.phase_blocks,
        "warp_blocks": trace.warp_blocks,
        "probe": trace.probe,
        "marks": (trace.marks - starts).astype(np.uint32),
        "barrier_wait": trace.barrier_wait.astype(np.uint32),
        "delta_encoded": np.array([True, True]),
    }
    npz = io.BytesIO()
    np.savez_compressed(npz, **arrays)
    manifest = json.dumps({**trace.manifest, "format_version": 2}).encode()
    path = tmp_path_factory.mktemp("fuzz2") / "valid2.mvz"
    path.write_bytes(_zip({"manifest.json": manifest, "arrays.npz": npz.getvalue()}))
    return path


def fuzz(valid: Path, tmp_path: Path, cases: int, seed: int, mutations=MUTATIONS) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    data, files = valid.read_bytes(), _files(valid)
    outcomes = {"loaded": 0, "refused": 0}
    target = tmp_path / "case.mvz"
    for case in range(cases):
        mutation = mutations[case % len(mutations)]
        target.write_bytes(mutation(rng, data, files))
        try:
            trace = load_trace(target)
        except MatvizError as exc:
            assert "\n" not in str(exc) and str(target) in str(exc), (case, mutation, exc)
            outcomes["refused"] += 1
            continue
        # whatever loads is a trace the views can use
        trace.validate()
        assert summary_lines(trace)
        outcomes["loaded"] += 1
    return outcomes


def test_fuzzed_files_load_or_raise_one_line(valid, tmp_path):
    outcomes = fuzz(valid, tmp_path, cases=400, seed=2026)
    assert outcomes["refused"] > 200  # the corruptions mostly matter
    assert outcomes["loaded"] > 0  # and some (a changed title, a flip in unused slack) do not


def test_fuzzed_old_format_files_load_or_raise_one_line(valid_format_2, tmp_path):
    assert load_trace(valid_format_2).marks.size  # the uncorrupted file loads
    outcomes = fuzz(valid_format_2, tmp_path, 200, 7, [flip_bytes, truncate, mutate_field])
    assert outcomes["refused"] > 100


@pytest.mark.fuzz
@pytest.mark.parametrize("seed", range(4))
def test_fuzzed_files_many(valid, tmp_path, seed):
    outcomes = fuzz(valid, tmp_path, cases=750, seed=seed)
    assert outcomes["refused"] > 0

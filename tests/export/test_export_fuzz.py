"""Hostile command lines for ``matviz export`` and ``matviz record --backend sim``, made by a
seeded generator and run in-process: every one ends with exit code 0 or 2; a 2 is exactly one
line on stderr and no traceback, and leaves every file that was there byte for byte as it was;
a 0 leaves a file that decodes, and nothing partial."""

import gzip
import json
import os
import random

import imageio.v3 as iio
import pytest

from matviz import cli
from matviz.backends.contract import RunRequest, run
from matviz.core.trace_io import load_trace, save_trace

NUMBERS = [
    "-1", "0", "-0", "nan", "NaN", "inf", "-inf", "1e309", "abc", "", " ", "1", "2", "+2",
    "0.5", "2.5", "1e12", "-1e-9", "1e-9", "99999999999999999999", "0x10", "1,2", "٣", "2 ",
    "\n", "1\n2", "1_0", "--", "-5e3",
]  # fmt: skip
SIZES = [
    "0x0", "-64x64", "64x-64", "nanxnan", "99999x99999", "128x72", "130x72", "63x63",
    "1e3x1e3", "x", "128", "64x64x64", "128×72", " 128x72 ", "", "abc", "7680x4320",
]  # fmt: skip
VIEWS = ["nope", "", ",", "all,grid", "grid,grid", "grid", "GRID", "sm,tiles", "all\n", "ALL"]
BLOCKS = ["-1,-1", "nan,0", "999999,0", "1", "1,2,3", "0,0", "", "a,b", "1,1", "2,-0"]
FORMATS = ["gif", "mp4", "png", "perfetto", "avi", "", "GIF", "json"]
EXPORT_OPTIONS = {
    "--fps": NUMBERS, "--duration": NUMBERS, "--size": SIZES, "--view": VIEWS,
    "--format": FORMATS, "--block": BLOCKS, "--from": NUMBERS, "--to": NUMBERS,
    "--at": NUMBERS, "--max-events": NUMBERS,
}  # fmt: skip
RECORD_OPTIONS = {
    "-M": NUMBERS, "-N": NUMBERS, "-K": NUMBERS, "--tile": [*NUMBERS, "16", "32", "64"],
    "--pad": NUMBERS, "--level": NUMBERS, "--repeats": NUMBERS, "--budget-mib": NUMBERS,
    "--phase-every": NUMBERS, "--probe-block": BLOCKS, "--probe-warp": NUMBERS,
    "--probe-ktile": NUMBERS, "--seed": NUMBERS,
}  # fmt: skip
# Plausible values, so that a hostile value often meets otherwise good ones and gets past
# the argument parser to the checks behind it.
PLAUSIBLE = {
    "--fps": ["1", "2", "3"], "--duration": ["0.4", "1", "1.5"],
    "--size": ["128x72", "130x72", "96x64"], "--view": ["grid", "sm", "all", "tiles,banks"],
    "--format": ["gif", "mp4", "png", "perfetto"], "--block": ["0,0", "1,1", "5,3"],
    "--from": ["0", "0.5"], "--to": ["1", "2", "3"], "--at": ["0", "1", "3"],
    "--max-events": ["1", "10", "100000"], "-M": ["16", "33", "48"], "-N": ["16", "33"],
    "-K": ["16", "40"], "--tile": ["8", "16", "32"], "--pad": ["0", "1"],
    "--level": ["1", "2", "3"], "--repeats": ["1", "3"], "--budget-mib": ["1", "16"],
    "--phase-every": ["1", "2"], "--probe-block": ["0,0", "1,0"], "--probe-warp": ["0", "1"],
    "--probe-ktile": ["0", "1"], "--seed": ["0", "7", "-3"],
}  # fmt: skip
# the options that mean something for each output (the others are refused, rightly)
VIDEO = ["--fps", "--duration", "--size", "--view", "--block", "--from", "--to"]
APPLIES = {
    ".gif": VIDEO, ".mp4": VIDEO, ".png": ["--size", "--view", "--block", "--at"],
    ".json": ["--max-events"], ".json.gz": ["--max-events"],
}  # fmt: skip
KERNELS = ["tiled", "naive", "tiled_transposed", "2", "nope", "", "99"]
EXPORT_SUFFIXES = [".gif", ".mp4", ".png", ".json", ".json.gz", ".avi", "", ".MP4", ".PNG"]
RECORD_SUFFIXES = [".mvz", ".MVZ", ".txt", ""]
# where -o points: hostile places, and fine ones (a file that is there already must be kept
# whenever the command fails)
GOOD_PATHS = ["new", "existing", "longest", "locked"]  # root may write into a chmod-000 folder
HOSTILE_PATHS = ["folder", "locked", "missing", "long", "newline", "only-suffix", "control"]
PATHS = GOOD_PATHS + HOSTILE_PATHS
# what makes a video cheap when no option says otherwise (hostile options come after: the
# last value wins)
BASE = {
    ".gif": ["--view", "grid", "--size", "128x72", "--fps", "2", "--duration", "1"],
    ".mp4": ["--view", "grid", "--size", "128x72", "--fps", "2", "--duration", "1"],
    ".png": ["--view", "grid", "--size", "128x72"],
}
PRECIOUS = b"the user's file, which must survive any failed command"


def generate(seed: int, count: int) -> list[tuple[str, list[str], str, str]]:
    """(command, options, path kind, suffix) for ``count`` invocations. Most change one thing
    only (a hostile path, or one hostile value among plausible ones), so that each hostile
    input gets past the others to the checks behind them; some change several, some none."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        command = rng.choice(["export", "export", "record"])
        table = EXPORT_OPTIONS if command == "export" else RECORD_OPTIONS
        mode = rng.choice(["path", "value", "value", "several", "plausible"])
        suffixes = EXPORT_SUFFIXES if command == "export" else RECORD_SUFFIXES
        good = [".gif", ".mp4", ".png", ".json", ".json.gz"] if command == "export" else [".mvz"]
        suffix = rng.choice(suffixes if mode in ("path", "several") else good)
        kind = rng.choice(HOSTILE_PATHS if mode == "path" else GOOD_PATHS)
        kind = rng.choice(PATHS) if mode == "several" else kind
        options: list[str] = []
        if command == "record":
            options += [rng.choice(KERNELS) if mode == "several" else "tiled"]
            options += ["-M", "32", "-N", "32", "-K", "32", "--backend", "sim"]
        else:
            options += BASE.get(suffix.lower(), [])
            if rng.random() < 0.15:
                options.append(rng.choice(["--caption", "--no-caption"]))
        fits = APPLIES.get(suffix.lower(), sorted(table)) if mode != "several" else sorted(table)
        names = rng.sample(fits, k=min(len(fits), rng.choice([1, 2, 3])))
        for i, name in enumerate(names):
            hostile = mode == "several" and rng.random() < 0.6 or mode == "value" and i == 0
            options += [name, rng.choice(table[name] if hostile else PLAUSIBLE[name])]
        cases.append((command, options, kind, suffix))
    return cases


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "small.mvz"
    save_trace(run(RunRequest("tiled", 64, 96, 80, params={"tile": 16, "pad": 0})), path)
    return path


def output_path(kind: str, suffix: str, folder):
    """The -o for ``kind``, made ready in ``folder``."""
    if kind in ("new", "existing"):
        path = folder / f"out{suffix}"
        if kind == "existing":
            path.write_bytes(PRECIOUS)
        return path
    if kind == "folder":
        path = folder / f"dir{suffix}"
        path.mkdir()
        return path
    if kind == "locked":
        locked = folder / "locked"
        locked.mkdir()
        locked.chmod(0)
        return locked / f"out{suffix}"
    if kind == "missing":
        return folder / "missing" / f"out{suffix}"
    if kind == "long":  # one byte over the limit
        return folder / ("x" * (256 - len(suffix)) + suffix)
    if kind == "longest":
        return folder / ("x" * (255 - len(suffix)) + suffix)
    if kind == "newline":
        return folder / f"two\nlines{suffix}"
    if kind == "control":
        return folder / f"bell\a{suffix}"
    assert kind == "only-suffix"
    return folder / (suffix or ".gif")


def files_in(folder) -> dict[str, bytes]:
    """Every file under ``folder`` (folders it may not read count as empty)."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                found[os.path.relpath(path, folder)] = fh.read()
    return found


def assert_decodes(path, command: str) -> None:
    """A finished output is whole: it opens as what its name says."""
    name = path.name.lower()
    if command == "record":
        load_trace(path)
    elif name.endswith(".json.gz"):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            assert json.load(fh)["traceEvents"]
    elif name.endswith(".json"):
        with open(path, encoding="utf-8") as fh:
            assert json.load(fh)["traceEvents"]
    else:
        plugin = {"plugin": "FFMPEG"} if name.endswith(".mp4") else {}
        assert iio.imread(path, index=None, **plugin).size > 0


def check(case, trace_file, folder, capfd) -> None:
    command, options, kind, suffix = case
    (folder / "bystander.txt").write_bytes(PRECIOUS)
    out = output_path(kind, suffix, folder)
    argv = [command, *([str(trace_file)] if command == "export" else []), *options, "-o", str(out)]
    before = files_in(folder)
    try:
        code = cli.main(argv)
        stdout, stderr = capfd.readouterr()
        after = files_in(folder)
    finally:
        if (folder / "locked").exists():
            (folder / "locked").chmod(0o700)
    shown = f"{argv!r}\nexit {code}\nstderr: {stderr!r}"
    assert code in (0, 2), shown
    assert "Traceback" not in stderr, shown
    assert not [name for name in after if ".part" in name or name.endswith(".tmp")], shown
    if code == 2:
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("matviz: error: "), shown
        assert after == before, shown  # every file as it was, nothing new
        return
    assert stdout.strip().splitlines()[-1].startswith(("wrote", "saved")), shown
    assert {k: v for k, v in after.items() if k != os.path.relpath(out, folder)} == {
        k: v for k, v in before.items() if k != os.path.relpath(out, folder)
    }, shown
    assert_decodes(out, command)


CASES = generate(seed=11, count=200)


@pytest.mark.parametrize("case", CASES, ids=[f"{i:03d}-{c[0]}-{c[2]}" for i, c in enumerate(CASES)])
def test_hostile_command_lines(case, trace_file, tmp_path, capfd):
    check(case, trace_file, tmp_path, capfd)


@pytest.mark.fuzz
@pytest.mark.parametrize("seed", range(100, 104))
def test_more_hostile_command_lines(seed, trace_file, tmp_path_factory, capfd):
    for i, case in enumerate(generate(seed=seed, count=150)):
        check(case, trace_file, tmp_path_factory.mktemp(f"s{seed}-{i}"), capfd)


def test_the_generator_reaches_every_hostile_path_and_option():
    kinds = {kind for _, _, kind, _ in CASES}
    assert kinds == set(PATHS)
    bare = {suffix.lower() for _, _, kind, suffix in CASES if kind == "only-suffix"}
    assert {".mp4", ".gif", ".png", ".json", ".mvz"} <= bare  # '.mp4' used to crash ffmpeg
    given = {opt for _, options, _, _ in CASES for opt in options if opt.startswith("-")}
    assert set(EXPORT_OPTIONS) | set(RECORD_OPTIONS) <= given

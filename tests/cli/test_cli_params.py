"""The command line is made from the kernel descriptions: a parameter added to a description
is an option of ``record``, an axis of ``sweep`` and a column of its CSV, with nothing else
changed. And the command modules import no cycle."""

import ast
import csv
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

import matviz
from matviz import cli, sweep
from matviz.backends import contract
from matviz.backends.contract import RunRequest
from matviz.core import registry
from matviz.core.kernel import Param

SMALL = ["-M", "64", "-N", "64", "-K", "64"]
ROTATE = Param("rotate", (0, 1, 3), 0, "ROTATE", "R", "rotate the tile's columns (10%)")
PACKAGE = Path(matviz.__file__).resolve().parent


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fake(monkeypatch):
    """A registered kernel with one parameter more than the kernel it copies."""
    real = registry.kernels()
    base = next(k for k in real.values() if len(k.params) >= 2)
    kernel = dataclasses.replace(base, name="rotated", number=99, params=(*base.params, ROTATE))
    monkeypatch.setattr(registry, "kernels", lambda: {**real, kernel.name: kernel})
    return base, kernel


@pytest.fixture
def fake_runs(monkeypatch):
    """contract.run answering every request with one small real trace; the requests it got."""
    trace = contract.run(RunRequest(next(iter(registry.kernels())), 64, 64, 64, level=1))
    requests = []

    def answer(request):
        requests.append(request)
        return trace

    monkeypatch.setattr(contract, "run", answer)
    return requests


def test_every_description_parameter_is_an_option_once(capsys):
    code, out, _ = run(capsys, "record", "--help")
    assert code == 0
    options = [p.option for k in registry.kernels().values() for p in k.params]
    for option in set(options):
        assert out.count(f"  {option} ") == 1, option


def test_a_new_parameter_is_a_record_option(fake, capsys, fake_runs, tmp_path):
    base, kernel = fake
    code, out, _ = run(capsys, "record", "--help")
    assert code == 0
    assert "--rotate R" in out and "rotate the tile's columns (10%)" in out
    assert "rotated: 0|1|3, default 0" in " ".join(out.split())
    code, _, err = run(capsys, "record", "rotated", "--rotate", "2", "-o", tmp_path / "a.mvz")
    assert code == 2 and "rotate=2 is not allowed for kernel rotated" in err
    code, _, err = run(capsys, "record", base.name, "--rotate", "1", "-o", tmp_path / "a.mvz")
    assert code == 2 and "has no parameter 'rotate'" in err
    code, _, _ = run(
        capsys, "record", "rotated", "--rotate", "3", *SMALL, "--backend", "sim",
        "-o", tmp_path / "a.mvz",
    )  # fmt: skip
    assert code == 0 and fake_runs[-1].params == {**kernel.default_params(), "rotate": 3}


def test_a_new_parameter_is_a_sweep_axis_and_a_csv_column(fake, capsys, fake_runs, tmp_path):
    base, kernel = fake
    first = base.params[0]
    out = tmp_path / "s.csv"
    argv = ["sweep", "rotated", first.option, first.values[0], "--rotate", "0,1,3", *SMALL]
    code, stdout, stderr = run(capsys, *argv, "--backend", "sim", "-o", out)
    assert code == 0, stderr
    assert [r.params["rotate"] for r in fake_runs] == [0, 1, 3]
    assert all(r.params[first.name] == first.values[0] for r in fake_runs)
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    header = list(rows[0])
    assert header == list(sweep.csv_columns(kernel))
    assert header[2 : 2 + len(kernel.params)] == [p.name for p in kernel.params]
    assert [r["rotate"] for r in rows] == ["0", "1", "3"]
    label = f"rotated {first.short(first.values[0])} R1"
    assert rows[1]["config"] == label and f"[2/3] {label} ..." in stderr
    # the kernel it copies lacks the parameter: a row that says so, not a failed sweep
    code, stdout, _ = run(capsys, "sweep", base.name, "--rotate", "1", *SMALL, "-o", out)
    assert code == 0 and "ran        0 of 1 configurations" in stdout
    with open(out, newline="", encoding="utf-8") as fh:
        (row,) = csv.DictReader(fh)
    assert row["status"] == "unsupported" and "has no parameter 'rotate'" in row["reason"]
    assert row["config"] == f"{base.name} R1" and "rotate" not in row


def test_a_parameter_named_like_a_command_option_is_a_clear_developer_error(monkeypatch):
    real = registry.kernels()
    base = next(iter(real.values()))
    level = Param("level", (1, 2), 1, "LVL", "L", "clashes with --level")
    kernel = dataclasses.replace(base, name="clash", number=98, params=(*base.params, level))
    monkeypatch.setattr(registry, "kernels", lambda: {**real, kernel.name: kernel})
    with pytest.raises(RuntimeError, match="parameter option --level of kernel clash clashes"):
        cli.build_parser()


def test_parameter_options_and_values_are_no_strings_in_the_cli():
    names = {p.name for k in registry.kernels().values() for p in k.params}
    names |= set(registry.kernels())
    sources = [*(PACKAGE / "cli").glob("*.py"), PACKAGE / "jobs.py", PACKAGE / "sweep.py"]
    for path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        assert not strings & names, f"{path.name} names {strings & names}"


# -- imports ---------------------------------------------------------------------------------------
def _imports(path: Path, module: str) -> set[str]:
    """The matviz modules ``module`` (the file ``path``) imports, at any depth in the file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:  # `from pkg import sub` imports pkg.sub when it is one
                sub = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / (sub.replace(".", "/") + ".py")).is_file()
                out.add(sub if is_module else node.module)
    return {m for m in out if m.startswith("matviz.") and m != module}


def _graph() -> dict[str, set[str]]:
    files = {"matviz.jobs": PACKAGE / "jobs.py", "matviz.sweep": PACKAGE / "sweep.py"}
    for path in (PACKAGE / "cli").glob("*.py"):
        if path.stem == "__main__":  # the entry point: it runs main, nothing imports it
            continue
        name = "matviz.cli" if path.stem == "__init__" else f"matviz.cli.{path.stem}"
        files[name] = path
    return {name: _imports(path, name) & set(files) for name, path in files.items()}


def test_cli_modules_import_no_cycle():
    graph = _graph()
    commands = {f"matviz.cli.{name}" for name in cli.COMMANDS}
    for name, deps in graph.items():
        if name != "matviz.cli":
            assert "matviz.cli" not in deps, f"{name} imports the cli package"
        if name in commands:
            assert not deps & commands, f"{name} imports other commands {deps & commands}"
    done, path = set(), []

    def visit(name):  # depth-first: a module met again on the current path is a cycle
        assert name not in path, " -> ".join([*path, name])
        if name in done:
            return
        path.append(name)
        for dep in sorted(graph[name]):
            visit(dep)
        path.pop()
        done.add(name)

    for name in graph:
        visit(name)
    assert not graph["matviz.jobs"] - {"matviz.jobs"} and "matviz.cli" not in graph["matviz.sweep"]


def test_every_cli_module_imports_first_in_a_fresh_interpreter():
    modules = sorted(_graph())
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    for m in [m for m in sys.modules if m == 'matviz' or m.startswith('matviz.')]:\n"
        "        del sys.modules[m]\n"
        "    importlib.import_module(name)\n"
        "print('ok', 'PySide6' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "ok False", proc.stderr


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--pad", "4"], "padding (pad=4) or a swizzle (swizzle=1), not both: set one to 0"),
        (["--stages", "4", "--bk", "16"], "exceed the 48 KiB of static shared memory"),
        (["--stages", "5"], "STAGES=5 is not allowed for kernel async_pipeline"),
    ],
)
def test_a_pipeline_configuration_it_cannot_build_is_one_line(capsys, tmp_path, argv, needle):
    out = tmp_path / "x.mvz"
    code, _, err = run(capsys, "record", "async_pipeline", "-M", "64", "-N", "64", "-K", "64",
                       "--backend", "sim", *argv, "-o", str(out))  # fmt: skip
    assert code == 2 and needle in err and err.count("\n") == 1 and not out.exists()

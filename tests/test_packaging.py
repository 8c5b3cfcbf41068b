"""What the wheel ships, checked against pyproject.toml without building it (CI builds it)."""

from __future__ import annotations

import fnmatch
import importlib.util
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _shipped(package: str, directory: Path) -> set[str]:
    """Files under ``directory`` that a package-data glob of ``package`` matches."""
    globs = SETUPTOOLS["package-data"][package]
    files = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}
    return {f for f in files if any(fnmatch.fnmatchcase(f, g) for g in globs)}


def test_every_package_under_matviz_is_listed():
    found = {
        ".".join(init.parent.relative_to(ROOT).parts) for init in ROOT.glob("matviz/**/__init__.py")
    }
    listed = set(SETUPTOOLS["packages"])
    assert found - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - found == {"matviz._kernels", "matviz._resources"}


def test_the_data_packages_map_to_the_top_level_directories():
    assert SETUPTOOLS["package-dir"] == {
        "matviz._kernels": "kernels",
        "matviz._resources": "resources",
    }


def test_every_kernel_file_ships():
    kernels = ROOT / "kernels"
    wanted = {
        p.name for p in kernels.iterdir() if p.is_file() and p.suffix in (".cu", ".cuh", ".py")
    }
    assert any(name.endswith(".py") for name in wanted)  # the descriptions
    assert _shipped("matviz._kernels", kernels) == wanted


def test_traces_translations_and_benchmarks_ship_but_not_screenshots():
    resources = ROOT / "resources"
    shipped = _shipped("matviz._resources", resources)
    for sub in ("traces", "i18n", "bench"):
        files = {f"{sub}/{p.name}" for p in (resources / sub).iterdir() if p.is_file()}
        assert files and files <= shipped, sub
    assert "traces/tiled_t32_p0_1024.mvz" in shipped  # the app opens on it
    assert not any(f.startswith("screenshots/") for f in shipped)


def _paths_module(package: Path):
    """matviz/paths.py loaded as if it lived in ``package``."""
    package.mkdir(parents=True, exist_ok=True)
    (package / "paths.py").write_text((ROOT / "matviz" / "paths.py").read_text())
    spec = importlib.util.spec_from_file_location("matviz_paths_copy", package / "paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paths_prefer_the_copies_inside_the_package(tmp_path):
    site = tmp_path.resolve() / "site-packages"
    (site / "matviz" / "_kernels").mkdir(parents=True)
    (site / "matviz" / "_resources").mkdir()
    paths = _paths_module(site / "matviz")
    assert paths.KERNEL_DIR == site / "matviz" / "_kernels"
    assert paths.TRACE_DIR == site / "matviz" / "_resources" / "traces"
    assert paths.I18N_DIR == site / "matviz" / "_resources" / "i18n"


def test_paths_fall_back_to_the_checkout(tmp_path):
    checkout = tmp_path.resolve() / "checkout"
    paths = _paths_module(checkout / "matviz")
    assert paths.KERNEL_DIR == checkout / "kernels"
    assert paths.RESOURCE_DIR == checkout / "resources"


def test_this_checkout_uses_its_top_level_directories():
    from matviz import paths

    assert paths.KERNEL_DIR == ROOT / "kernels"
    assert paths.TRACE_DIR == ROOT / "resources" / "traces"

"""Which code a timing ran: a benchmark row's level-0 digest (matviz.toolchain.code_digest)."""

from __future__ import annotations

import shutil

import pytest

from matviz.core.registry import configure
from matviz.errors import MatvizError
from matviz.paths import KERNEL_DIR
from matviz.toolchain import code_digest
from matviz.toolchain.code_digest import level0_digest
from matviz.toolchain.nvcc import nvcc_path

pytestmark = pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not on PATH")
TILED = configure("tiled", {"tile": 32, "pad": 0}, 512, 512, 512)


@pytest.fixture
def kernel_copy(tmp_path):
    folder = tmp_path / "kernels"
    shutil.copytree(KERNEL_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return folder


def test_instrumentation_alone_leaves_the_digest_and_level_0_code_changes_it(kernel_copy):
    source = kernel_copy / "02_tiled.cu"
    text = source.read_text()
    assert level0_digest(TILED, kernel_copy) == level0_digest(TILED)
    # a comment and a level-2-only line: level 0 compiles the same code
    source.write_text("// a note\n" + text + "\n#if MV_LEVEL >= 2\nint mv_extra;\n#endif\n")
    assert level0_digest(TILED, kernel_copy) == level0_digest(TILED)
    source.write_text(text + "\nint mv_extra;\n")  # what level 0 compiles changed
    assert level0_digest(TILED, kernel_copy) != level0_digest(TILED)


def test_a_header_of_the_kernel_folder_counts_and_the_configuration_too(kernel_copy):
    (kernel_copy / "trace.cuh").write_text((kernel_copy / "trace.cuh").read_text() + "\nint x;\n")
    assert level0_digest(TILED, kernel_copy) != level0_digest(TILED)
    other = configure("tiled", {"tile": 16, "pad": 0}, 512, 512, 512)
    wider = configure("tiled", {"tile": 32, "pad": 0}, 1024, 512, 512)  # another grid
    assert len({level0_digest(TILED), level0_digest(other), level0_digest(wider)}) == 3


def test_without_nvcc_or_with_a_broken_kernel_it_is_one_line(kernel_copy, monkeypatch):
    (kernel_copy / "02_tiled.cu").write_text('#include "absent.cuh"\n')
    with pytest.raises(MatvizError, match="could not preprocess 02_tiled.cu"):
        level0_digest(TILED, kernel_copy)
    monkeypatch.setattr(code_digest, "nvcc_path", lambda: None)
    with pytest.raises(MatvizError, match="nvcc is needed"):
        level0_digest(TILED)

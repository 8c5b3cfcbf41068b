"""The mma.sync ceiling benchmark (matviz.bench.mma_ceiling): its kernel compiles for sm_90 in
every variant it times, to the instruction it is meant to time, and its FLOP count."""

from __future__ import annotations

import subprocess

import pytest

from matviz.bench import mma_ceiling
from matviz.toolchain.nvcc import nvcc_path
from matviz.toolchain.sass import cuobjdump_path

needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not on PATH")


def test_flop_counts_every_warps_mma():
    # 2 warps x 3 blocks x 4 chains x 5 iterations of 16x8x16 multiply-adds
    assert mma_ceiling.flop(4, 5, 2, 3) == 2 * 16 * 8 * 16 * 4 * 5 * 2 * 3


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("dtype", sorted(mma_ceiling.TYPES))
@pytest.mark.parametrize("chains", mma_ceiling.CHAINS)
def test_kernel_is_chains_hmma_per_iteration(tmp_path, dtype, chains):
    """Each iteration is CHAINS HMMA.16816.F32 and no memory access: the loop times the Tensor
    Cores and nothing else."""
    src = tmp_path / "mma.cu"
    src.write_text(mma_ceiling.MMA_SOURCE)
    cubin = tmp_path / "mma.cubin"
    subprocess.run([nvcc_path(), "-cubin", "-arch=sm_90", *mma_ceiling.defines(dtype, chains),
                    "-o", str(cubin), str(src)], check=True)  # fmt: skip
    sass = subprocess.run([cuobjdump_path(), "-sass", str(cubin)], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    hmma = [line for line in sass.splitlines() if "HMMA.16816.F32" in line]
    kind = ".BF16" if dtype == "bfloat16" else ""
    assert len(hmma) % chains == 0 and hmma and all(f"F32{kind} " in h for h in hmma)
    loop = sass[sass.index("HMMA") : sass.rindex("HMMA")]
    assert "LDG" not in loop and "LDS" not in loop and "STG" not in loop


def _run(capsys, *argv):
    code = mma_ceiling.main(list(argv))
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize(
    "argv,why",
    [(["--dtypes", "float32"], "--dtypes takes bfloat16, float16, not 'float32'"),
     (["--json", "/nonexistent-folder/out.json"], "does not exist"),
     (["--json", "/tmp"], "it is a folder"),
     (["--json", "bad\nname.json"], "control character")],
    ids=["dtype", "missing-folder", "folder", "control-char"],
)  # fmt: skip
def test_bad_options_are_one_line_and_exit_2_before_any_gpu_work(capsys, argv, why):
    code, err = _run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and why in err, err


def test_without_a_gpu_it_says_why_in_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("matviz.backends.cuda_status.cuda_status", lambda: (False, "no GPU here"))
    out = tmp_path / "ceiling.json"
    out.write_text("kept")
    code, err = _run(capsys, "--json", str(out))
    assert code == 2 and err == "mma_ceiling: error: needs a CUDA GPU: no GPU here\n"
    assert out.read_text() == "kept"  # the file the user had is untouched

"""``matviz info``: the backends available here, the device, and why CUDA is missing."""

from __future__ import annotations

NAME = "info"


def add_parser(sub) -> None:
    sub.add_parser(NAME, help="backends available here, the device, and why CUDA is missing")


def run(_args) -> int:
    from matviz.backends.cuda_status import cuda_status
    from matviz.toolchain.nvcc import nvcc_path

    ok, detail = cuda_status()
    print(f"cuda       {'available: ' + detail if ok else 'unavailable: ' + detail}")
    print("sim        available (simulated traces are labelled as such)")
    if ok:
        from matviz.backends.cuda_build import device_info

        dev = device_info()
        print(
            f"device     {dev['name']}, {dev['sm_count']} SMs, {dev['clock_mhz']} MHz, "
            f"compute capability {dev['compute_capability']}"
        )
    print(f"nvcc       {nvcc_path() or 'not found (register counts use description estimates)'}")
    return 0

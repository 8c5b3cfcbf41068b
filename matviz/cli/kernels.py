"""``matviz kernels``: every registered kernel with its parameters, from its description."""

from __future__ import annotations

NAME = "kernels"


def add_parser(sub) -> None:
    sub.add_parser(NAME, help="the kernels, their parameters and the lesson sections they teach")


def run(_args) -> int:
    from matviz.cli.params import describe
    from matviz.core import registry

    for kernel in registry.kernels().values():
        source = f"{kernel.source.parent.name}/{kernel.source.name}"
        print(f"{kernel.stem:<21} {kernel.title}")
        print(f"    {kernel.concept}")
        print(f"    sections: {kernel.sections}   file: {source}")
        for line in describe(kernel):
            print(f"    {line}")
    return 0

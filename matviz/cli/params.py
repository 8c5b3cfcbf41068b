"""Command-line options made from the kernel descriptions: one per parameter option (``--tile``),
however many kernels offer it, with each kernel's values and default in its help.

``record`` takes one value per option, ``sweep`` a comma list (an axis). A value given for a
kernel that lacks the parameter is passed on under the parameter's name, so the kernel's own
check (``Kernel.resolve_params``) or the sweep's plan reports it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from matviz.cli.common import one_line
from matviz.core import registry
from matviz.core.kernel import Kernel, Param


@dataclass(frozen=True)
class Option:
    flag: str  # "--tile"
    offers: tuple[tuple[Kernel, Param], ...]  # every kernel that has it, in number order

    @property
    def dest(self) -> str:
        return "param_" + self.flag[2:].replace("-", "_")

    @property
    def name(self) -> str:
        """The parameter's name where the kernel asked for lacks it (the first kernel's)."""
        return self.offers[0][1].name

    def name_in(self, kernel: Kernel) -> str:
        for k, p in self.offers:
            if k.name == kernel.name:
                return p.name
        return self.name

    @property
    def values(self) -> tuple[Any, ...]:
        """Every value some kernel allows, in first-seen order."""
        return tuple(dict.fromkeys(v for _, p in self.offers for v in p.values))

    @property
    def numeric(self) -> bool:
        return all(isinstance(v, int) and not isinstance(v, bool) for v in self.values)

    def help(self, n_kernels: int) -> str:
        groups: dict[tuple, list[str]] = {}
        for kernel, p in self.offers:
            groups.setdefault((p.values, p.default), []).append(kernel.name)
        parts = []
        for (values, default), names in groups.items():
            choice = f"{'|'.join(map(str, values))}, default {default}"
            shared = len(groups) == 1 and len(names) == n_kernels
            parts.append(choice if shared else f"{', '.join(names)}: {choice}")
        text = f"{self.offers[0][1].help} ({'; '.join(parts)})"
        return text.replace("%", "%%")  # argparse formats help with %

    # -- parsing ---------------------------------------------------------------------------------
    def value(self, text: str) -> Any:
        """One value: an int where every allowed value is one, else the allowed value spelled
        ``text`` (or ``text`` itself, which the kernel then refuses by name)."""
        text = text.strip()
        if self.numeric:
            try:
                return int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"'{one_line(text)}' is not a whole number"
                ) from None
        for v in self.values:
            if str(v) == text:
                return v
        return text

    def values_list(self, text: str) -> list[Any]:
        parts = [t for t in text.split(",") if t.strip()]
        if not parts:
            raise argparse.ArgumentTypeError("the list is empty")
        try:
            return list(dict.fromkeys(self.value(t) for t in parts))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"'{one_line(text)}' is not a comma list of whole numbers"
            ) from None


def options() -> list[Option]:
    """One option per distinct parameter option of the registered kernels."""
    found: dict[str, list[tuple[Kernel, Param]]] = {}
    for kernel in registry.kernels().values():
        for p in kernel.params:
            found.setdefault(p.option, []).append((kernel, p))
    return [Option(flag, tuple(offers)) for flag, offers in found.items()]


def add_options(parser: argparse.ArgumentParser, *, lists: bool) -> list[Option]:
    """Add every parameter option to ``parser`` (comma lists with ``lists``)."""
    opts = options()
    n_kernels = len(registry.kernels())
    if lists:
        about = "comma lists, each an axis of the sweep; one not given stays at the default"
    else:
        about = "a parameter not given is the kernel's default"
    group = parser.add_argument_group("kernel parameters", about)
    for opt in opts:
        label = opt.offers[0][1].label or opt.name.upper()
        try:
            group.add_argument(
                opt.flag,
                dest=opt.dest,
                type=opt.values_list if lists else opt.value,
                metavar=f"{label},..." if lists else label,
                help=opt.help(n_kernels),
            )
        except argparse.ArgumentError as exc:  # a description's mistake, not the user's
            kernels = ", ".join(k.name for k, _ in opt.offers)
            raise RuntimeError(
                f"parameter option {opt.flag} of kernel {kernels} clashes with an option of "
                f"'{parser.prog}': rename the parameter ({exc})"
            ) from None
    parser.set_defaults(param_options=opts)
    return opts


def given(args: argparse.Namespace, kernel: Kernel) -> dict[str, Any]:
    """The parameter values (or value lists) given on the command line, by ``kernel``'s
    parameter names (by the first kernel's name for an option ``kernel`` lacks)."""
    out: dict[str, Any] = {}
    opts: Sequence[Option] = getattr(args, "param_options", ())
    for opt in opts:
        value = getattr(args, opt.dest, None)
        if value is not None:
            out[opt.name_in(kernel)] = value
    return out


def describe(kernel: Kernel) -> list[str]:
    """One line per parameter: option, values, default and meaning (``matviz kernels``)."""
    return [
        f"{p.option} {'|'.join(map(str, p.values))} (default {p.default})  {p.help}"
        for p in kernel.params
    ]

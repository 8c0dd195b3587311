"""`capacity` — a thin CLI over the package. Each sub-command lives in part1_capacity/commands/<name>.py and
exposes ``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.

Bad input raises ``InputError`` anywhere below; it is printed as one line and the exit status is 2.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from part1_capacity.calculator.base.errors import InputError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and no abbreviations: ``--index 5`` must not be read as ``--index-gb 5``
    (the sub-commands' parsers are built from this class too, so the rule holds for every command)."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message):  # argparse's own errors: one line, exit 2
        self.exit(2, f"capacity: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    import part1_capacity.commands as commands

    parser = _Parser(prog="capacity", description="How much memory does inference need, and why.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        importlib.import_module(f"part1_capacity.commands.{info.name}").register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"capacity: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `capacity ... | head`: the reader left; exit quietly as Unix tools do.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("capacity: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""`capacity` — a thin CLI over the package. Each sub-command lives in part1_capacity/commands/<name>.py and
exposes ``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.

Bad input raises ``InputError`` anywhere below; it is printed as one line and the exit status is 2.
Everything the commands print passes through ``validate.printable`` (``_Escaped``): text that came from a file or a
server (a model_type, an accelerator's name) never reaches the terminal as an escape sequence or a character the
terminal's encoding cannot take.
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
        from part1_capacity.calculator.base.validate import printable

        self.exit(2, f"capacity: error: {printable(message, limit=None)}\n")


class _Escaped:
    """A text stream whose writes go through ``validate.printable`` (line ends kept): the one escaping of
    every printer, whatever a command prints."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        from part1_capacity.calculator.base.validate import printable

        return self._stream.write(printable(text, limit=None, keep="\n"))

    @property
    def unescaped(self):
        """The stream itself, for the few control sequences the CLI writes on purpose (a progress bar's carriage
        return and clear-line on a terminal), never for text."""
        return self._stream

    def __getattr__(self, name):          # flush, fileno, isatty, encoding, buffer: the stream's own
        return getattr(self._stream, name)


# `capacity --help` lists the commands in three groups, in this order; a command not named here (a new one) is
# listed with the calculator's, after these.
GROUPS = (
    ("the calculator", ("plan", "compare", "sweep", "list", "index")),
    ("experiments: the calculator checked on this machine", ("e1", "e2", "e3")),
    ("the course: who buys inference, and the evidence", ("archetypes", "propose", "claims")),
)
EXAMPLES = """examples:
  capacity plan --model llama-3.1-70b --accelerator h100 --context 32K --batch 16
  capacity plan --model path/to/config.json --accelerator mi300x --context 8K --kv-dtype fp8
  capacity compare                   the four attention structures at 128K on one accelerator
  capacity list models               the bundled ids (also: accelerators, tiers)
  capacity plan --help               every flag of a command, the common ones first"""


def grouped_commands(sub) -> str:
    """The sub-commands' one-line helps under GROUPS' headings (argparse lists them in one block)."""
    actions = {a.dest: a for a in sub._choices_actions}
    named = {c for _, cmds in GROUPS for c in cmds}
    out = []
    for i, (title, cmds) in enumerate(GROUPS):
        rest = sorted(c for c in actions if c not in named) if i == 0 else []
        out.append(f"{title}:")
        for c in [*cmds, *rest]:
            if c in actions:
                a = actions[c]
                name = a.metavar or a.dest       # "e1 (kv-allocation)": the name and its aliases
                out.append(f"  {name:<20} {a.help}" if len(name) < 20 else f"  {name}\n  {'':<20} {a.help}")
        out.append("")
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    import part1_capacity.commands as commands

    parser = _Parser(prog="capacity", usage="capacity [-h] COMMAND ...", epilog=EXAMPLES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser, help=argparse.SUPPRESS,
                                prog="capacity")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        importlib.import_module(f"part1_capacity.commands.{info.name}").register(sub)
    parser.description = "How much memory does inference need, and why.\n\n" + grouped_commands(sub).rstrip()
    return parser


def main(argv=None) -> int:
    from part1_capacity.calculator.readers import hub_http

    hub_http.start_command()              # the Hub's deadline for all the requests of this command starts now
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Escaped(out), _Escaped(err)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv=None) -> int:
    from part1_capacity.calculator.base.validate import printable

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        # one line whatever the message quotes (a file's text with a newline in it)
        print(f"capacity: error: {printable(str(exc), limit=None)}", file=sys.stderr)
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

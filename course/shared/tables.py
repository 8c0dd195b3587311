"""One way to write a Markdown table on every generated page.

A table is a header line, a separator that says each column's alignment, and rows of cells. The header stays one
string (``"| model | bytes |"``) because the Korean catalogue translates it whole; the separator is derived from
it, so a header and its separator cannot disagree on the number of columns; a row is its cells between pipes.
``cell`` escapes what would break a table (a pipe, a newline) in a value read from data.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

ALIGN = {"l": "---", "r": "---:", "c": ":---:"}


def cell(x) -> str:
    """A value as one table cell: pipes escaped, newlines folded into spaces."""
    return str(x).replace("|", "\\|").replace("\n", " ")


def columns(header: str) -> int:
    """How many columns a header line has (escaped pipes ``\\|`` inside a title do not count)."""
    return header.replace("\\|", "").strip().strip("|").count("|") + 1


def head(header: str, align: str = "") -> list[str]:
    """The header line and its separator. ``align``: one letter per column — ``l`` (default), ``r`` or ``c`` —
    shorter than the columns means the rest are ``l``."""
    n = columns(header)
    if len(align) > n or set(align) - set(ALIGN):
        raise ValueError(f"align: {align!r} for {n} columns; one of {', '.join(ALIGN)} per column")
    return [header, "|" + "|".join(ALIGN[a] for a in align.ljust(n, "l")) + "|"]


def row(*cells) -> str:
    """One row: the cells as given (``str``), between pipes; an empty cell is ``| |``."""
    return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def table(header: str, rows: Iterable[Sequence], align: str = "") -> str:
    """The whole table as Markdown lines (no trailing newline); each row must have the header's columns."""
    n = columns(header)
    lines = head(header, align)
    for r in rows:
        if len(r) != n:
            raise ValueError(f"a row of {len(r)} cells under a header of {n} columns: {r!r}")
        lines.append(row(*r))
    return "\n".join(lines)

"""The one Markdown table helper every generated page uses (course/shared/tables.py), and that no generator writes a
table separator by hand."""
import re
from pathlib import Path

import pytest

from course.shared import tables

REPO = Path(__file__).resolve().parents[3]


def test_the_separator_follows_the_header_and_the_alignment():
    assert tables.head("| model | bytes | share |", "lr") == ["| model | bytes | share |", "|---|---:|---|"]
    assert tables.head("| a | b |", "c") == ["| a | b |", "|:---:|---|"]
    # a pipe escaped inside a title is not a column
    assert tables.columns("| max \\|err\\| | mean |") == 2
    with pytest.raises(ValueError, match="align: 'lrr' for 2 columns"):
        tables.head("| a | b |", "lrr")
    with pytest.raises(ValueError, match="one of l, r, c"):
        tables.head("| a | b |", "x")


def test_rows_cells_and_whole_tables():
    assert tables.row("`gpt2`", 124, "") == "| `gpt2` | 124 | |"
    assert tables.cell("a|b\nc") == "a\\|b c"
    assert tables.table("| a | b |", [[1, 2], ["x", "y"]], "r") == "| a | b |\n|---:|---|\n| 1 | 2 |\n| x | y |"
    with pytest.raises(ValueError, match="a row of 3 cells under a header of 2 columns"):
        tables.table("| a | b |", [[1, 2, 3]])


def test_no_generator_writes_a_separator_by_hand():
    sep = re.compile(r"""["']\|:?-{3,}""")     # a string literal that starts a separator: "|---|…", "|---" * n
    found = []
    for pkg in ("course", "part0_foundations", "part1_capacity"):
        for p in (REPO / pkg).rglob("*.py"):
            if p.name == "tables.py":
                continue
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if sep.search(line):
                    found.append(f"{p.relative_to(REPO)}:{i}")
    assert not found, "hand-written Markdown separators (use course.shared.tables.head): " + ", ".join(found)

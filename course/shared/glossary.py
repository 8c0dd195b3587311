"""The Korean edition's glossary (course/locale/ko/glossary.toml): the one rendering of each term that every Korean
page and notebook uses, shown on the site (site/glossary.md, through ``glossary_table``) and enforced by
tests/site/test_i18n.py (no Korean page uses a rendering the glossary lists under ``avoid``)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache

from course.shared import tables
from course.shared.i18n import LOCALE, translator


@dataclass(frozen=True)
class Term:
    en: str
    ko: str
    note: str = ""
    avoid: tuple[str, ...] = ()


@lru_cache(maxsize=1)
def terms() -> tuple[Term, ...]:
    raw = tomllib.loads((LOCALE / "ko" / "glossary.toml").read_text(encoding="utf-8"))
    return tuple(Term(t["en"], t["ko"], t.get("note", ""), tuple(t.get("avoid", ()))) for t in raw["term"])


def glossary_table(lang: str) -> str:
    """A Markdown table of the glossary, with its headers in ``lang``."""
    tr = translator(lang)
    rows = tables.head(tr("| English | Korean | how it is used |"))
    rows += [tables.row(t.en, t.ko, t.note) for t in terms()]
    return "\n".join(rows) + "\n"

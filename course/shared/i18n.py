"""The course in two languages from one source: English (the default) and Korean.

Text that code writes — the site's generated tables and sentences, figure labels, the grader's failure messages,
the notebooks' instructions — is written in English in the code and looked up, for Korean, in a message catalogue:
``course/locale/ko/<domain>.toml``, one table of ``"English text" = "한국어 텍스트"`` per domain (``site``,
``grading``, ``notebooks``). The English text is the key, as in gettext: when the English changes, the Korean
lookup fails loudly (a ``KeyError`` naming the message and the file to add it to) instead of showing a stale
translation. Placeholders are ``str.format`` fields (``{n}``), filled after the lookup, so the numbers in both
languages come from the same values.

Generated files are named in mkdocs-static-i18n's suffix layout: ``results.md`` (English) and ``results.ko.md``.
"""
from __future__ import annotations

import json
import os
import string
import tomllib
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

LANGS = ("en", "ko")
DEFAULT = "en"
LOCALE = Path(__file__).resolve().parents[1] / "locale"
# matplotlib's font list for figures: Latin text in DejaVu Sans (matplotlib's own), Hangul (and kanji) from Noto
# Sans CJK, which Debian's `fonts-noto-cjk` installs. matplotlib falls back glyph by glyph along the list.
FIGURE_FONTS = ["DejaVu Sans", "Noto Sans CJK KR"]
CJK_PACKAGE = "fonts-noto-cjk"
SITE_KO_ENV = "COURSE_SITE_KO"


class MissingTranslation(KeyError):
    def __str__(self) -> str:
        return self.args[0]


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise ValueError(f"lang: {lang!r} is not a course language; allowed: {', '.join(LANGS)}")
    return lang


@lru_cache(maxsize=None)
def catalogue(lang: str, domain: str) -> dict[str, str]:
    """{English message: translation} of one domain (empty for English): ``<domain>.toml`` and its parts
    ``<domain>.<part>.toml`` (``site.archetypes.toml``: the archetypes' data), merged."""
    if check_lang(lang) == DEFAULT:
        return {}
    out = {}
    for path in sorted((LOCALE / lang).glob(f"{domain}.toml")) + sorted((LOCALE / lang).glob(f"{domain}.*.toml")):
        out.update(tomllib.loads(path.read_text(encoding="utf-8")))
    return out


def fields(text: str) -> set[str]:
    """The ``str.format`` field names of a message (what a translation must keep)."""
    return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}


@dataclass(frozen=True)
class Translator:
    """``tr("{n} test dates", n="2,000")``: the message in ``lang``, its fields filled."""

    lang: str
    domain: str
    _messages: dict = field(repr=False, compare=False, default_factory=dict)

    def __call__(self, message: str, /, **values) -> str:
        text = message
        if self.lang != DEFAULT:
            try:
                text = self._messages[message]
            except KeyError:
                raise MissingTranslation(
                    f"no {self.lang} translation of {message!r} in {LOCALE / self.lang / (self.domain + '.toml')}"
                ) from None
        return text.format(**values) if values else text


def translator(lang: str, domain: str = "site") -> Translator:
    return Translator(check_lang(lang), domain, catalogue(lang, domain))


def localized(name: str | Path, lang: str) -> str | Path:
    """``results.md`` → ``results.ko.md`` for Korean; unchanged for English (mkdocs-static-i18n's suffix layout)."""
    p = Path(name)
    out = p if check_lang(lang) == DEFAULT else p.with_name(f"{p.stem}.{lang}{p.suffix}")
    return out if isinstance(name, Path) else out.as_posix()


def each_language(domain: str = "site"):
    """``(lang, translator)`` for every course language, English first."""
    for lang in LANGS:
        yield lang, translator(lang, domain)


def write_text(out: Path, name: str, render) -> None:
    """Write ``render(tr)`` once per language: ``out/name`` and ``out/name.ko`` (suffix layout)."""
    for lang, tr in each_language():
        (out / localized(name, lang)).write_text(render(tr), encoding="utf-8")


def notebook_lang(path) -> str:
    """The language a notebook was released in: ``metadata.course.lang`` (written by ``course.grading.notebook_spec`` for
    a translated release), English when absent or unreadable — the grader then speaks the learner's language."""
    try:
        lang = json.loads(Path(path).read_text(encoding="utf-8")).get("metadata", {}).get("course", {}).get("lang")
    except (OSError, ValueError, AttributeError, RecursionError, MemoryError):
        return DEFAULT
    return lang if lang in LANGS else DEFAULT


def failure_message(lang: str, rule: str, message: str) -> str:
    """A failed check's message for a learner of ``lang``: the check's rule in that language (the grading
    catalogue, keyed by the English rule), then the grader's own details as it wrote them."""
    if lang == DEFAULT:
        return message
    say = translator(lang, "grading")   # the grading catalogue (tests/site/test_i18n.py checks it, not the site's)
    return say("Rule: {rule}", rule=say(rule)) + "\n" + say("Details (as the grader wrote them): {message}",
                                                              message=message)


def site_languages() -> tuple[str, ...]:
    """The languages this site build makes: all of them, unless ``COURSE_SITE_KO`` is ``false`` (what
    ``tools/build_site.py`` sets on a machine without a CJK font, so that ``make run`` still builds the English site;
    mkdocs.yml reads the same variable)."""
    if os.environ.get(SITE_KO_ENV, "true").strip().lower() in ("false", "0", "no", "off"):
        return (DEFAULT,)
    return LANGS


def has_figure_fonts() -> bool:
    """Whether matplotlib can draw Hangul here (Noto Sans CJK KR, from Debian's ``fonts-noto-cjk``).

    matplotlib caches the system's font list the first time it runs: a font installed after that (the Makefile's
    apt step on a machine whose cache is older) is added here from the system's font folders."""
    # matplotlib: a second to import, only for figures (the grader's messages use this module too)
    from matplotlib import font_manager

    def found() -> bool:
        try:
            font_manager.findfont(FIGURE_FONTS[1], fallback_to_default=False)
            return True
        except ValueError:
            return False

    if not found():
        for path in font_manager.findSystemFonts():
            if "NotoSansCJK" in Path(path).name:
                font_manager.fontManager.addfont(path)
    return found()


def use_figure_fonts() -> None:
    """Figures draw Hangul with a CJK font; without one, matplotlib draws boxes — so say which package is missing.

    In an English-only build (``site_languages()``: no CJK font on this machine) the figures use DejaVu Sans alone:
    the Korean figures it still draws are not published, so their missing-glyph warnings are silenced."""
    # matplotlib: a second to import, only for figures (the grader's messages use this module too)
    import matplotlib

    if has_figure_fonts():
        matplotlib.rcParams["font.family"] = FIGURE_FONTS
    elif "ko" not in site_languages():
        matplotlib.rcParams["font.family"] = FIGURE_FONTS[:1]
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
    else:
        raise RuntimeError(f"no {FIGURE_FONTS[1]} font for the figures' Korean labels: install Debian's "
                           f"{CJK_PACKAGE} (`apt-get install {CJK_PACKAGE}`)")

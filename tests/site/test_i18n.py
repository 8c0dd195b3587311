"""The Korean edition stays in step with the English one: page for page, number for number, term for term.

- every English page has its Korean page (``x.md`` → ``x.ko.md``) and back, and both include the same generated
  snippets and figures (the Korean ones through their ``.ko`` files);
- every number in a generated Korean snippet is one of the English snippet's numbers, as many times: both are written
  by one generator from one set of values (course/shared/i18n.py), only the words around them differ;
- a Korean page reads as Korean: Hangul is most of its letters once code, math, links and numbers are left out,
  and no prose paragraph of it is left in English;
- the glossary is followed (no rendering that it rules out) and the message catalogue covers every message the
  generators send through it, with the same placeholders.
"""
from __future__ import annotations

import ast
import re
import warnings
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from course.shared import i18n
from course.shared.glossary import terms

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "site"
GENERATED = SITE / "generated"
# `--8<-- "site/generated/x.md"` (a snippet) and `](../generated/x.png)` (a figure), as the pages write them.
SNIPPET = re.compile(r'--8<-- "(site/generated/[^"]+)"')
FIGURE = re.compile(r"\]\(((?:\.\./)*generated/[^)\s]+\.png)\)")
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
HANGUL = re.compile(r"[\uac00-\ud7a3]")
LATIN = re.compile(r"[A-Za-z]")


def english_pages() -> list[Path]:
    return sorted(p for p in SITE.rglob("*.md")
                  if "generated" not in p.relative_to(SITE).parts and not p.name.endswith(".ko.md"))


def korean_pages() -> list[Path]:
    return sorted(p for p in SITE.rglob("*.ko.md") if "generated" not in p.relative_to(SITE).parts)


def _ko(p: Path) -> Path:
    return p.with_name(p.name[: -len(".md")] + ".ko.md")


def _unko(name: str) -> str:
    return name.replace(".ko.", ".")


@pytest.mark.parametrize("page", english_pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_every_english_page_has_its_korean_page(page):
    assert _ko(page).exists(), f"{page.relative_to(REPO)} has no Korean page {_ko(page).relative_to(REPO)}"


@pytest.mark.parametrize("page", korean_pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_every_korean_page_has_its_english_page(page):
    en = page.with_name(page.name.replace(".ko.md", ".md"))
    assert en.exists(), f"{page.relative_to(REPO)} has no English page {en.relative_to(REPO)}"


def _refs(text: str) -> tuple[list[str], list[str]]:
    return SNIPPET.findall(text), FIGURE.findall(text)


@pytest.mark.parametrize("page", english_pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_korean_page_shows_the_same_generated_files(page):
    """Same snippets and figures, in the same order; the Korean page takes each one's Korean file."""
    ko = _ko(page)
    if not ko.exists():
        pytest.fail(f"no Korean page {ko.relative_to(REPO)}")
    en_snips, en_figs = _refs(page.read_text(encoding="utf-8"))
    ko_snips, ko_figs = _refs(ko.read_text(encoding="utf-8"))
    assert [_unko(s) for s in ko_snips] == en_snips, "the Korean page includes other snippets than the English page"
    assert [_unko(f) for f in ko_figs] == en_figs, "the Korean page shows other figures than the English page"
    untranslated = [s for s in ko_snips if ".ko." not in s] + [f for f in ko_figs if ".ko." not in f]
    assert not untranslated, f"the Korean page includes English generated files: {untranslated}"


def heading_levels(text: str) -> list[int]:
    """The levels of a page's headings in order (``## x`` is 2), code blocks left out (a shell comment is no heading)."""
    text = re.sub(r"(?ms)^\s*```.*?^\s*```", "", text)
    return [len(m.group(1)) for m in re.finditer(r"(?m)^(#{1,6}) ", text)]


def test_the_section_check_catches_a_missing_section():
    en = "# A\n\n## B\n\n```bash\n# a comment\n```\n\n### C\n"
    assert heading_levels(en) == [1, 2, 3]
    assert heading_levels("# 가\n\n## 나\n\n### 다\n") == heading_levels(en)
    assert heading_levels("# 가\n\n## 나\n") != heading_levels(en)


@pytest.mark.parametrize("page", english_pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_korean_page_has_the_english_pages_sections(page):
    """Same sections at the same levels, in the same order: a section added to the English page alone shows here."""
    ko = _ko(page)
    en_levels, ko_levels = heading_levels(page.read_text(encoding="utf-8")), heading_levels(ko.read_text(encoding="utf-8"))
    assert ko_levels == en_levels, (f"{ko.relative_to(REPO)} has {len(ko_levels)} headings at levels {ko_levels}, "
                                    f"its English page {len(en_levels)} at {en_levels}")


@pytest.fixture(scope="module")
def generated(built_site):
    """site/generated/ as this code generates it, for every page of both languages: the run's one site build
    (conftest's `built_site`, which tests/site/test_site.py checks too: the generators run once per run)."""
    from hooks.generated import missing_generated

    missing = missing_generated(SITE)
    assert not missing, f"the generators did not write {missing[:3]}"
    return GENERATED


def _pairs() -> list[tuple[str, str]]:
    """(English snippet, Korean snippet) that the pages include, from the Korean pages' references."""
    out = []
    for ko in korean_pages():
        for s in SNIPPET.findall(ko.read_text(encoding="utf-8")):
            if ".ko." in s and (_unko(s), s) not in out:
                out.append((_unko(s), s))
    return out


@pytest.mark.parametrize("en,ko", _pairs(), ids=lambda s: s.removeprefix("site/generated/"))
def test_generated_numbers_are_the_same_in_both_languages(generated, en, ko):
    en_text, ko_text = (REPO / en).read_text(encoding="utf-8"), (REPO / ko).read_text(encoding="utf-8")
    en_numbers, ko_numbers = Counter(NUMBER.findall(en_text)), Counter(NUMBER.findall(ko_text))
    assert ko_numbers == en_numbers, (f"{ko} has numbers {sorted((ko_numbers - en_numbers).elements())} that "
                                      f"{en} lacks, and lacks {sorted((en_numbers - ko_numbers).elements())}")


# --- the built site, page for page -------------------------------------------------------------------------------

class _ArticleText(HTMLParser):
    """The text a reader sees in a built page's article (scripts and styles left out)."""

    def __init__(self):
        super().__init__()
        self.depth, self.hidden, self.parts = 0, 0, []

    def handle_starttag(self, tag, attrs):
        self.depth += tag == "article"
        self.hidden += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.depth -= tag == "article"
        self.hidden -= tag in ("script", "style")

    def handle_data(self, data):
        if self.depth > 0 and not self.hidden:
            self.parts.append(data)


def article_numbers(html: str) -> set[str]:
    parser = _ArticleText()
    parser.feed(html)
    return set(NUMBER.findall(" ".join(parser.parts)))


def numbers_differ(en_html: str, ko_html: str) -> str:
    """'' when both built pages show the same numbers, else what each shows that the other does not."""
    en, ko = article_numbers(en_html), article_numbers(ko_html)
    return "" if en == ko else f"only the English page shows {sorted(en - ko)}; only the Korean page {sorted(ko - en)}"


def test_the_built_page_check_catches_a_missing_or_changed_number():
    en = "<article><p>The cache is 40,960 bytes per token on 127.0.0.1.</p><script>var x = 7</script></article>"
    assert numbers_differ(en, "<article><p>캐시는 127.0.0.1에서 토큰당 40,960바이트다.</p></article>") == ""
    assert "40,960" in numbers_differ(en, "<article><p>캐시는 127.0.0.1에서 토큰당 40,961바이트다.</p></article>")
    assert "127.0" in numbers_differ(en, "<article><p>캐시는 토큰당 40,960바이트다.</p></article>")
    assert numbers_differ("<nav>3</nav><article>x</article>", "<article>x</article>") == ""


@pytest.mark.parametrize("page", english_pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_built_korean_page_shows_the_english_pages_numbers(built_site, page):
    """What a reader sees: the built Korean page (ko/x.html) shows the same numbers as the built English page x.html,
    generated (tables, run records) and typed alike, none missing and none of its own."""
    rel = page.relative_to(SITE).with_suffix(".html")
    en, ko = built_site / rel, built_site / "ko" / rel
    assert ko.exists(), f"the built site has no Korean page ko/{rel.as_posix()}"
    diff = numbers_differ(en.read_text(encoding="utf-8"), ko.read_text(encoding="utf-8"))
    assert not diff, f"{rel.as_posix()}: {diff}"


# What is not prose: fenced code, inline code, math, link targets, HTML tags, numbers, snippet lines.
_NOT_PROSE = [re.compile(p, re.S) for p in (r"```.*?```", r"`[^`\n]*`", r"\\\[.*?\\\]", r"\\\(.*?\\\)",
                                            r"\]\([^)]*\)", r"<[^>]+>", r'--8<-- "[^"]*"', r"https?://\S+")]


def _prose(text: str) -> str:
    for p in _NOT_PROSE:
        text = p.sub(" ", text)
    return text


def _expanded(page: Path) -> str:
    """The page with its generated Korean snippets included, as the reader sees it."""
    text = page.read_text(encoding="utf-8")
    return SNIPPET.sub(lambda m: (REPO / m.group(1)).read_text(encoding="utf-8")
                       if (REPO / m.group(1)).exists() else "", text)


def hangul_share(text: str) -> float:
    """Hangul syllables among Hangul syllables and Latin letters of the prose: code, math, links and tables left out
    (a table's cells are mostly names, sources and figures, which stay as they are in both editions)."""
    prose = "\n".join(ln for ln in _prose(text).splitlines() if not ln.lstrip().startswith("|"))
    h, latin = len(HANGUL.findall(prose)), len(LATIN.findall(prose))
    return h / (h + latin) if h + latin else 1.0


def english_paragraphs(text: str) -> list[str]:
    """Prose paragraphs (not tables, not headings) of at least eight Latin words with no Hangul."""
    out = []
    for para in re.split(r"\n\s*\n", _prose(text)):
        lines = [ln for ln in para.strip().splitlines() if ln.strip() and not ln.lstrip().startswith(("|", "#"))]
        body = " ".join(lines)
        if len(re.findall(r"\b[A-Za-z]{2,}\b", body)) >= 8 and not HANGUL.search(body):
            out.append(body.strip()[:120])
    return out


def test_the_prose_check_catches_an_english_paragraph():
    ko = "이 문단은 한국어로 썼다. KV 캐시는 토큰마다 자란다.\n\n"
    en = "This paragraph was left in English by mistake, and the check has to find it.\n"
    assert english_paragraphs(ko) == [] and hangul_share(ko) > 0.9
    assert english_paragraphs(ko + en) == [en.strip()[:120]]
    assert hangul_share(en) == 0.0
    assert english_paragraphs("`code stays code in any language of the course ever written`\n") == []


@pytest.mark.parametrize("page", korean_pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_korean_page_reads_as_korean(generated, page):
    text = _expanded(page)
    assert hangul_share(text) >= 0.6, f"only {hangul_share(text):.0%} of the letters of {page.name} are Hangul"
    left = english_paragraphs(text)
    assert not left, f"{page.name} has paragraphs left in English: {left[:3]}"


@pytest.mark.parametrize("page", korean_pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_korean_page_keeps_the_numbers_it_types(page):
    """Numbers typed in the English page (not generated) are all on the Korean page too."""
    en = page.with_name(page.name.replace(".ko.md", ".md"))
    missing = set(NUMBER.findall(en.read_text(encoding="utf-8"))) - set(NUMBER.findall(page.read_text(encoding="utf-8")))
    assert not missing, f"{page.name} lacks the numbers {sorted(missing)} of {en.name}"


def test_korean_pages_follow_the_glossary(generated):
    texts = {p.name: _expanded(p) for p in korean_pages()}
    texts.update({p.name: p.read_text(encoding="utf-8") for p in GENERATED.rglob("*.ko.md")})
    wrong = [(name, bad, t.ko) for name, text in texts.items() for t in terms() for bad in t.avoid if bad in text]
    assert not wrong, f"renderings the glossary rules out (page, found, use instead): {wrong[:5]}"


def test_the_glossary_check_can_fail():
    kv = next(t for t in terms() if t.en == "KV cache")
    assert "키-값 캐시" in kv.avoid and kv.ko == "KV 캐시"


# --- the message catalogue ---------------------------------------------------------------------------------------

def _messages(path: Path) -> list[str]:
    """The literal first arguments of every ``tr(...)`` call in a module."""
    return [n.args[0].value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "tr" and n.args
            and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)]


SOURCES = sorted(p for pkg in ("course", "part0_foundations", "part1_capacity")
                 for p in (REPO / pkg).rglob("*.py") if "tr(" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_site_message_has_its_korean_text(src):
    catalogue = i18n.catalogue("ko", "site")
    missing = [m for m in _messages(src) if m not in catalogue]
    assert not missing, f"{len(missing)} message(s) of {src.name} missing from course/locale/ko/site.toml: {missing[:3]}"


def test_every_family_description_has_its_korean_text():
    """The calculator page's family table translates configs.FAMILIES' descriptions (sitegen passes each to tr as a
    value, which the literal scan above cannot see): a family added without its Korean text stops the site build."""
    from part1_capacity.calculator.model.configs import FAMILIES

    catalogue = i18n.catalogue("ko", "site")
    missing = [what for what, _ in FAMILIES.values() if what not in catalogue]
    assert not missing, f"family descriptions missing from course/locale/ko/site.toml: {missing[:3]}"


def test_translations_keep_their_placeholders():
    bad = [(en, sorted(i18n.fields(en) ^ i18n.fields(ko))) for en, ko in i18n.catalogue("ko", "site").items()
           if i18n.fields(en) != i18n.fields(ko)]
    assert not bad, f"translations whose placeholders differ from the English: {bad[:3]}"


def test_translator_fills_fields_after_lookup_and_names_a_missing_message():
    tr = i18n.translator("ko")
    assert tr("decoder layer {n}", n=2) == "디코더 레이어 2"
    assert i18n.translator("en")("decoder layer {n}", n=2) == "decoder layer 2"
    with pytest.raises(i18n.MissingTranslation, match=r"no ko translation of 'not a message' in .*site\.toml"):
        tr("not a message")
    with pytest.raises(ValueError, match=r"lang: 'fr' is not a course language; allowed: en, ko"):
        i18n.translator("fr")


def test_localized_names_follow_the_suffix_layout():
    assert i18n.localized("results.md", "ko") == "results.ko.md"
    assert i18n.localized("results.md", "en") == "results.md"
    assert i18n.localized(Path("a/b.png"), "ko") == Path("a/b.ko.png")


# --- figures -------------------------------------------------------------------------------------------------------

def _missing_glyph_warnings(families) -> list[str]:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"font.family": families}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig, ax = plt.subplots()
        ax.set_title("디코더 레이어 1 — decoder layer 1")
        fig.savefig(io.BytesIO(), format="png")
        plt.close(fig)
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def test_figures_draw_hangul_with_a_cjk_font():
    i18n.use_figure_fonts()   # raises, naming fonts-noto-cjk, when the font is not installed
    assert _missing_glyph_warnings(i18n.FIGURE_FONTS) == []
    # The same title with matplotlib's default font alone draws boxes: the check above can fail.
    assert _missing_glyph_warnings(["DejaVu Sans"])


# --- the Korean exercise notebooks ----------------------------------------------------------------------------------

def _specs():
    from course.grading.notebook_spec import all_specs

    return all_specs()


def _lesson(spec):
    import importlib

    return getattr(importlib.import_module(spec.__name__.rsplit(".", 1)[0] + ".checks"), "LESSON", None)


def test_every_notebook_cell_and_check_rule_has_its_korean_text():
    cells, rules = i18n.catalogue("ko", "notebooks"), i18n.catalogue("ko", "grading")
    missing = [(s.ASSIGNMENT, c.source[:60]) for s in _specs() for c in s.CELLS
               if c.kind == "markdown" and c.source not in cells]
    assert not missing, f"markdown cells missing from course/locale/ko/notebooks.toml: {missing[:3]}"
    lessons = [lesson for lesson in map(_lesson, _specs()) if lesson]
    missing = [c.id for lesson in lessons for c in lesson.checks if c.rule not in rules]
    assert not missing, f"check rules missing from course/locale/ko/grading.toml: {missing[:5]}"
    # Markdown cells are not templates (their braces are LaTeX); the grader's sentences are.
    bad = [en for en, ko in rules.items() if i18n.fields(en) != i18n.fields(ko)]
    assert not bad, f"translations whose placeholders differ: {bad[:3]}"


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.ASSIGNMENT)
def test_korean_notebooks_are_the_generated_ones_and_grade_the_same_cells(spec):
    """solutions/ko/ is what the spec builds in Korean (`make notebooks`); both Korean notebooks carry their
    language and the very grade ids, points and code of the English ones."""
    import nbformat

    from course.grading.notebook_spec import build_source_notebook, course_dirs

    def cells(nb):
        return [(c.cell_type, c.source) for c in nb.cells]

    def graded(nb):
        return [(c.metadata["nbgrader"]["grade_id"], c.metadata["nbgrader"].get("points"))
                for c in nb.cells if "nbgrader" in c.metadata]

    def code(nb):
        return [c.source for c in nb.cells if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("grade")]

    built = build_source_notebook(spec, "ko")
    ko_src = nbformat.read(course_dirs("ko")[0] / spec.ASSIGNMENT / spec.NOTEBOOK, 4)
    assert cells(ko_src) == cells(built), f"solutions/ko/{spec.ASSIGNMENT} is stale: run `make notebooks`"
    en_rel = nbformat.read(course_dirs()[1] / spec.ASSIGNMENT / spec.NOTEBOOK, 4)
    ko_rel = nbformat.read(course_dirs("ko")[1] / spec.ASSIGNMENT / spec.NOTEBOOK, 4)
    for nb in (ko_src, ko_rel):
        assert nb.metadata["course"]["lang"] == "ko"
    assert graded(ko_rel) == graded(en_rel) and code(ko_rel) == code(en_rel)
    assert "course" not in en_rel.metadata   # English is the default: no language written


# One lesson end to end (the others share the machinery): the Korean notebook, finished, blank and with a mistake,
# earns exactly what the English one earns, check by check; its failures state the rule in Korean.
MUTANT = ("        allowed = mask\n", "        allowed = None\n")   # the mask ignored: every masked check fails


class _Gradings(dict):
    """(language, kind) → the grader's report, each notebook graded when a test first asks for it (a test skipped
    as long grades nothing)."""

    def __init__(self, notebooks):
        super().__init__()
        self.notebooks = notebooks

    def __missing__(self, key):
        from course.grading.autograde import Limits, grade

        self[key] = grade("part0_foundations.l01_attention.checks", self.notebooks[key], Limits(check_s=60))
        return self[key]


@pytest.fixture(scope="module")
def attention_gradings(tmp_path_factory):
    """The Korean notebook finished, blank and with the mutant, and the English one with the same mutant (the English
    finished and blank notebooks are graded in tests/course/classroom/test_notebooks.py: full points and none)."""
    import json as _json

    from course.grading.notebook_spec import course_dirs

    tmp = tmp_path_factory.mktemp("ko-grading")
    notebooks = {}
    for lang in ("en", "ko"):
        sol, rel = (d / "01_attention" / "attention.ipynb" for d in course_dirs(lang))
        nb = _json.loads(sol.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if MUTANT[0] in src:
                cell["source"] = src.replace(MUTANT[0], MUTANT[1])
                break
        else:
            pytest.fail("the mutant's text is not in the solution notebook")
        mutant = tmp / f"mutant-{lang}.ipynb"
        mutant.write_text(_json.dumps(nb), encoding="utf-8")
        kinds = (("full", sol), ("blank", rel), ("mutant", mutant)) if lang == "ko" else (("mutant", mutant),)
        notebooks.update({(lang, kind): path for kind, path in kinds})
    return _Gradings(notebooks)


# The finished and the blank Korean notebook are long runs; the mutant (graded like the English one, check by check,
# its failure stated in Korean) stands in for them: the same notebook, language and grader.
_SMOKE = "tests/site/test_i18n.py::test_korean_notebook_grades_like_the_english_one[mutant]"


@pytest.mark.parametrize("kind", [pytest.param("full", marks=pytest.mark.long(smoke=_SMOKE)),
                                  pytest.param("blank", marks=pytest.mark.long(smoke=_SMOKE)), "mutant"])
def test_korean_notebook_grades_like_the_english_one(attention_gradings, kind):
    from part0_foundations.l01_attention.checks import LESSON

    ko = attention_gradings["ko", kind]
    assert [r.id for r in ko.results] == LESSON.ids()
    if kind == "full":
        assert all(r.passed for r in ko.results), [r.message for r in ko.results if not r.passed]
    elif kind == "blank":
        assert ko.earned == 0
    else:
        en = attention_gradings["en", kind]
        assert [(r.id, r.passed) for r in ko.results] == [(r.id, r.passed) for r in en.results]
        assert 0 < en.earned < en.points and not en.get("sdpa_matches_torch").passed


def test_korean_failures_state_the_rule_in_korean(attention_gradings):
    from part0_foundations.l01_attention.checks import LESSON

    rules = i18n.catalogue("ko", "grading")
    ko, en = attention_gradings["ko", "mutant"], attention_gradings["en", "mutant"]
    failed = ko.get("sdpa_matches_torch")
    rule = LESSON.get("sdpa_matches_torch").rule
    assert failed.message.startswith(f"규칙: {rules[rule]}\n"), failed.message
    assert en.get("sdpa_matches_torch").message in failed.message          # the grader's details, as written
    assert not en.get("sdpa_matches_torch").message.startswith("규칙")

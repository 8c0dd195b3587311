"""The course site builds strictly and renders in a real headless browser (Debian's chromium).

Every page is opened from a local HTTP server at 1280 × 900: no console errors, every image loads, the pages that
contain math have it typeset by the MathJax copy shipped with the site (no CDN), and nothing is wider than the
window or its own box (no cut-off equation or code line, no table wider than its column). At a phone's 390 px a
display formula fits or scrolls inside its own block; the 404 page links relatively. Previous/next links walk the
nav in order. The calculator page is checked against the CLI, a pasted published config included.
"""
import functools
import json
import http.server
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(built_site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(built_site))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _pages():
    """Every lesson page in the nav, as built HTML paths."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    nav = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]
    out = []

    def walk(items):
        for item in items:
            for v in item.values():
                walk(v) if isinstance(v, list) else out.append(v.replace(".md", ".html"))

    walk(nav)
    return out


PAGES = _pages()


@pytest.fixture(scope="module")
def browser():
    from tests.support.chromium import launch

    with launch() as b:
        yield b


# Elements that must fit their own box: code lines and display equations (tables may scroll inside their wrapper).
_OVERFLOW_JS = """() => {
  const wide = [];
  for (const el of document.querySelectorAll('.md-typeset pre > code, .md-typeset div.arithmatex')) {
    if (el.scrollWidth > el.clientWidth + 1) wide.push(`${el.tagName} ${el.scrollWidth} > ${el.clientWidth} px: `
                                                       + (el.textContent || '').trim().slice(0, 50));
  }
  // A table fits its column: it may not lean on the theme's scroll wrapper at this width.
  for (const t of document.querySelectorAll('.md-typeset table')) {
    const column = t.closest('.md-typeset__scrollwrap') || t.parentElement;
    if (t.scrollWidth > column.clientWidth + 1) wide.push(`table ${t.scrollWidth} > ${column.clientWidth} px: `
                                                           + (t.rows[0] ? t.rows[0].textContent : '').trim().slice(0, 50));
  }
  const d = document.documentElement;
  if (d.scrollWidth > d.clientWidth) wide.push(`page ${d.scrollWidth} > ${d.clientWidth} px`);
  return wide;
}"""

# At a phone's width a display formula either fits or scrolls inside its own block, which stays inside the page.
_PHONE_MATH_JS = """() => {
  const bad = [], page = document.documentElement.clientWidth;
  for (const el of document.querySelectorAll('.md-typeset div.arithmatex')) {
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
    const box = el.getBoundingClientRect();
    if ((el.scrollWidth > el.clientWidth + 1 && !scrolls) || box.right > page + 1 || box.left < -1)
      bad.push(`${el.scrollWidth} px in a ${el.clientWidth} px block (overflow-x ${getComputedStyle(el).overflowX}): `
               + (el.textContent || '').trim().slice(0, 40));
  }
  return bad;
}"""


@pytest.mark.parametrize("page_path", PAGES)
def test_page_renders(browser, server, page_path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, external = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: external.append(r.url) if not r.url.startswith(("http://127.0.0.1", "data:")) else None)
    page.goto(f"{server}/{page_path}", wait_until="networkidle")
    has_math = page.locator(".arithmatex").count() > 0
    if has_math:
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20000)
        page.evaluate("() => MathJax.startup.promise")
        assert page.locator("mjx-container").count() >= page.locator(".arithmatex").count(), "math not typeset"
        assert page.locator("mjx-merror").count() == 0, "MathJax reported a TeX error"
    broken = page.evaluate("() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert broken == [], f"images that did not load: {broken}"
    assert errors == [], f"console errors: {errors}"
    assert external == [], f"requests outside the site (no CDN allowed): {external}"
    assert page.evaluate(_OVERFLOW_JS) == [], "cut off at 1280 px"
    page.close()


# `make test` checks one page at a phone's width and plans three published configs on the calculator page; every
# page and every config are long runs (`make test-long`), the one page and the three configs stand in for them.
PHONE_SMOKE = ("part0/03_kv_cache.html",)


@pytest.mark.parametrize("pages", [
    pytest.param(PHONE_SMOKE, id="one"),
    pytest.param(PAGES, id="every", marks=pytest.mark.long(
        smoke="tests/site/test_site.py::test_display_formulas_fit_or_scroll_in_their_block_on_a_phone[one]"))])
def test_display_formulas_fit_or_scroll_in_their_block_on_a_phone(browser, server, pages):
    """390 × 844 (a phone): every display formula of every page with math fits, or scrolls inside its block."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    checked = 0
    for path in pages:
        page.goto(f"{server}/{path}", wait_until="networkidle")
        if page.locator("div.arithmatex").count() == 0:
            continue
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20000)
        page.evaluate("() => MathJax.startup.promise")
        assert page.evaluate(_PHONE_MATH_JS) == [], path
        checked += 1
    assert checked >= 3 if pages is PAGES else checked == len(pages)
    page.close()


_SIDEWAYS_JS = """() => {
  // Wider than the window: the page itself, or any element of the article that ends past the window's right edge
  // without a scrolling box of its own around it (a wide formula, table or code block scrolls inside its block;
  // a control cut off at the edge is as lost as one that widens the page). MathJax's screen-reader copy of a
  // formula is clipped to nothing: only its effect on the page's width counts.
  const page = document.documentElement.clientWidth, bad = [];
  const scrolls = (el) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement)
      if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) return true;
    return false;
  };
  if (document.documentElement.scrollWidth > page + 1)
    bad.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${page} px window`);
  for (const el of document.querySelectorAll('.md-content *')) {
    const box = el.getBoundingClientRect();
    if (box.width && box.height && box.right > page + 1 && !scrolls(el) && !el.closest('mjx-assistive-mml'))
      bad.push(`${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''} ends at ${Math.round(box.right)} px`);
  }
  return bad.slice(0, 6);
}"""
# `make test` checks the calculator page (its selects and sliders, once 685 px wide) and a lesson page at a phone's
# width; every page of both editions is a long run (`make test-long`).
FIT_SMOKE = ("part1/live.html", "part0/03_kv_cache.html")


@pytest.mark.parametrize("pages", [
    pytest.param(FIT_SMOKE, id="one"),
    pytest.param("every", id="every", marks=pytest.mark.long(
        smoke="tests/site/test_site.py::test_every_page_fits_a_phone_without_sideways_scrolling[one]"))])
def test_every_page_fits_a_phone_without_sideways_scrolling(browser, server, built_site, pages):
    """390 × 844: no page is wider than the window (wide content scrolls inside its own block or folds); the
    calculator page is measured with its form shown, once its Python has started."""
    if pages == "every":
        pages = [p for p in PAGES + [f"ko/{p}" for p in PAGES] if (built_site / p).is_file()]
        assert len(pages) > len(PAGES), "the Korean edition was not built"
    page = browser.new_page(viewport={"width": 390, "height": 844})
    for path in pages:
        page.goto(f"{server}/{path}", wait_until="networkidle")
        if path.endswith("part1/live.html"):
            _ready(page)
        assert page.evaluate(_SIDEWAYS_JS) == [], path
    page.close()


def test_a_page_opened_as_a_file_says_how_to_open_it(browser, server, built_site):
    """Opened from disk (file://, as `make run` once said to), a browser loads neither the calculator's Python nor
    the search: the page says so in one line naming `make serve`. Served (http), the line is not there."""
    page = browser.new_page()
    page.goto((built_site / "part1" / "live.html").as_uri())
    note = page.locator(".file-note")
    assert note.count() == 1 and "make serve" in note.inner_text()
    page.goto((built_site / "ko" / "index.html").as_uri())
    assert "make serve" in page.locator(".file-note").inner_text()      # the Korean edition says it in Korean
    assert "강좌 폴더" in page.locator(".file-note").inner_text()
    page.goto(f"{server}/part1/live.html")
    assert page.locator(".file-note").count() == 0
    page.close()


def test_404_page_links_are_relative(built_site):
    """The 404 page works wherever the site is served from (a project page, a folder): no root-absolute links."""
    import re

    html = (built_site / "404.html").read_text(encoding="utf-8")
    absolute = re.findall(r'\b(?:href|src)="/(?!/)[^"]*"', html)
    assert absolute == [], absolute[:5]
    assert re.search(r'href="\./assets/stylesheets/', html), "the theme's stylesheet link is gone"


def test_previous_next_follow_the_nav(built_site):
    """Each page's footer links to the page before and after it in the nav (mkdocs-material navigation.footer)."""
    import posixpath
    import re

    for i, path in enumerate(PAGES):
        html = (built_site / path).read_text(encoding="utf-8")
        for kind, want in (("prev", PAGES[i - 1] if i else None), ("next", PAGES[i + 1] if i + 1 < len(PAGES) else None)):
            m = re.search(rf'<a[^>]*href="([^"]+)"[^>]*class="md-footer__link md-footer__link--{kind}"', html) or \
                re.search(rf'<a[^>]*class="md-footer__link md-footer__link--{kind}"[^>]*href="([^"]+)"', html)
            got = posixpath.normpath(posixpath.join(posixpath.dirname(path), m.group(1))) if m else None
            assert got == want, f"{path}: {kind} link goes to {got}, the nav says {want}"


def test_hook_names_missing_generated_files(tmp_path):
    """The hook that lets `mkdocs serve` work on a fresh checkout finds the snippets and figures a page lacks."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("generated_hook", REPO / "hooks" / "generated.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    docs = tmp_path / "site"
    (docs / "part0").mkdir(parents=True)
    (docs / "generated" / "x").mkdir(parents=True)
    (docs / "generated" / "x" / "there.md").write_text("ok")
    (docs / "part0" / "p.md").write_text('--8<-- "site/generated/x/there.md"\n--8<-- "site/generated/x/gone.md"\n'
                                         "![f](../generated/x/fig.png)\n")
    assert hook.missing_generated(docs, root=tmp_path) == ["site/generated/x/gone.md", "site/generated/x/fig.png"]


def test_lesson_page_has_math_and_figure(browser, server):
    page = browser.new_page()
    page.goto(f"{server}/part0/01_attention.html", wait_until="networkidle")
    page.evaluate("() => MathJax.startup.promise")
    assert page.locator("mjx-container").count() > 3
    assert page.evaluate("() => [...document.images].filter(i => i.naturalWidth > 200).length") >= 1
    page.close()


# --- the calculator in the browser (part1/live.md) -----------------------------------------------------------------
LIVE_KEYS = ("weights_bytes", "kv_bytes_per_token", "kv_bytes_per_sequence", "kv_bytes_total",
             "kv_to_weights_ratio", "accelerators_needed", "accelerators_without_kv", "accelerators_added_by_kv",
             "bottleneck")


def _shown(page):
    """What the page shows: its inputs and each figure's raw value (the data-value the text was written from)."""
    return page.evaluate("""() => {
        const out = document.getElementById('lc-out');
        const vals = Object.fromEntries([...out.querySelectorAll('[data-key]')].map(c => [c.dataset.key, c.dataset.value]));
        return {inputs: JSON.parse(out.dataset.inputs), values: vals};
    }""")


def _cli_plan(inputs):
    from tests.support.in_process import capacity

    cmd = ["plan", "--model", inputs["model"], "--accelerator", inputs["accelerator"], "--context",
           str(inputs["context"]), "--batch", str(inputs["batch"]), "--kv-dtype", inputs["kv_dtype"],
           "--engine", inputs["engine"], "--json"]
    if inputs["weights_dtype"]:
        cmd += ["--weights-dtype", inputs["weights_dtype"]]
    res = capacity(*cmd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _assert_same_as_cli(shown):
    want = _cli_plan(shown["inputs"])
    for key in LIVE_KEYS:
        got, exp = shown["values"][key], want[key]
        if exp is None or isinstance(exp, str):
            assert got == (exp or ""), (key, shown["inputs"], got, exp)
        else:
            assert float(got) == pytest.approx(exp, rel=1e-12), (key, shown["inputs"], got, exp)


def _ready(page):
    page.wait_for_function("() => document.getElementById('live-calculator').dataset.ready === 'true'"
                           " || /could not/.test(document.getElementById('lc-status').textContent)", timeout=90000)
    assert page.locator("#live-calculator").get_attribute("data-ready") == "true", page.inner_text("#lc-status")


def _settled(page, **want):
    """Wait until the page has planned these inputs (its data-inputs say so)."""
    page.wait_for_function("(w) => { const s = document.getElementById('lc-out').dataset.inputs; if (!s) return false;"
                           " const i = JSON.parse(s); return Object.keys(w).every(k => i[k] === w[k]); }", arg=want)


@pytest.fixture(scope="module")
def live(browser, server):
    """One load of the calculator page, shared by the tests below (they only change its inputs)."""
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/part1/live.html")
    _ready(page)
    yield page, errors
    page.close()


def test_live_calculator_moves_with_its_slider_and_agrees_with_the_cli(live):
    page, errors = live
    page.select_option("#lc-model", "llama-3.1-70b")
    page.select_option("#lc-accelerator", "h100")
    page.select_option("#lc-kv", "fp8")
    _settled(page, model="llama-3.1-70b", kv_dtype="fp8")
    before = _shown(page)
    assert before["inputs"]["kv_dtype"] == "fp8"
    _assert_same_as_cli(before)

    # One step of the context slider, as a learner's arrow key moves it: the context doubles, the numbers follow.
    page.focus("#lc-context")
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => JSON.parse(document.getElementById('lc-out').dataset.inputs).context "
                           f"!== {json.dumps(before['inputs']['context'])}")
    after = _shown(page)
    assert float(after["values"]["kv_bytes_total"]) == 2 * float(before["values"]["kv_bytes_total"])
    _assert_same_as_cli(after)

    # The batch slider and the weights precision too.
    page.select_option("#lc-weights", "int4")
    page.focus("#lc-batch")
    page.keyboard.press("End")
    _settled(page, batch="1024", weights_dtype="int4")
    _assert_same_as_cli(_shown(page))
    assert errors == []


def test_live_calculator_keeps_typed_sizes_and_engine_in_its_address(live, browser):
    page, errors = live
    page.select_option("#lc-model", "llama-3.1-8b")
    page.select_option("#lc-engine", "vllm")
    page.fill("#lc-context-text", "100K")
    page.fill("#lc-batch-text", "3")
    _settled(page, model="llama-3.1-8b", engine="vllm", context="100K", batch="3")
    shown = _shown(page)
    want = _cli_plan(shown["inputs"])
    assert want["workload"]["context"] == 102400 and want["workload"]["engine"] == "vllm"
    assert json.loads(page.get_attribute("#lc-out", "data-plan")) == want

    # The address holds the inputs: opening it in a new page gives the same plan.
    link = page.get_attribute("#lc-link", "href")
    assert "context=100K" in link and "engine=vllm" in link
    other = browser.new_page()
    other.goto(link)
    _ready(other)
    assert json.loads(other.get_attribute("#lc-out", "data-plan")) == want
    other.close()

    page.fill("#lc-context-text", "12Q")
    _settled(page, context="12Q")
    assert page.inner_text("#lc-error").startswith("context: expected an integer")
    page.select_option("#lc-engine", "law")
    page.fill("#lc-batch-text", "8")
    page.fill("#lc-context-text", "32K")
    assert errors == []


CONFIGS = sorted(p for p in (REPO / "tests" / "data" / "configs").glob("*/config.json"))
# GQA, MLA, and GPT-2 (MHA; a context shorter than 8K).
CONFIGS_SMOKE = [REPO / "tests" / "data" / "configs" / name / "config.json"
                 for name in ("llama-3.1-70b", "deepseek-r1", "gpt2")]


@pytest.mark.parametrize("paths", [
    pytest.param(CONFIGS_SMOKE, id="three"),
    pytest.param(CONFIGS, id="every", marks=pytest.mark.long(
        smoke="tests/site/test_site.py::test_live_calculator_plans_every_published_config_as_the_cli_does[three]"))])
def test_live_calculator_plans_every_published_config_as_the_cli_does(live, paths):
    """Each verbatim published config pasted into the page: the whole `capacity plan --json` for the types the
    page reads (every field; the model id is the pasted file's, "config"), the CLI's way named for the others."""
    from part1_capacity.calculator.model import configs
    from part1_capacity.calculator.readers.loader import load_model
    from tests.support.in_process import capacity

    page, errors = live
    page.select_option("#lc-accelerator", "h100")
    page.select_option("#lc-weights", "")
    page.select_option("#lc-kv", "bf16")
    page.select_option("#lc-engine", "law")
    page.fill("#lc-batch-text", "4")
    if not page.eval_on_selector(".lc-own", "el => el.open"):  # the smoke run before may have left it open
        page.click(".lc-own summary")      # the learner opens "Your own model"
    planned = refused = 0
    for path in paths:
        text = path.read_text()
        # 8K, or the model's whole context where it is shorter (GPT-2: 1,024 positions; OLMo 2: 4,096)
        context = str(min(8192, load_model(str(path)).max_context))
        page.fill("#lc-context-text", context)
        # the file as one paste: one input event with the whole text. Playwright's fill has Chromium insert it as
        # typed edits, which for Nemotron-Super's 1,484-line file (its block_configs) outlasts the 30 s timeout
        # (measured: 35 KB over 541 lines 34 s, 26 KB on one line 0.1 s); the page plans it in under a second
        page.eval_on_selector("#lc-config", "(el, t) => { el.value = t; "
                                            "el.dispatchEvent(new Event('input', {bubbles: true})); }", text)
        _settled(page, config=text.strip())
        d = json.loads(text)
        if configs.stored_type(d) is None and d.get("model_type") in configs.stored_defaults()["known_types"]:
            error = page.inner_text("#lc-error")
            assert f"model_type {d['model_type']!r}" in error and "capacity plan --model config.json" in error, path
            refused += 1
            continue
        got = page.get_attribute("#lc-out", "data-plan")
        assert got, (path.parent.name, page.inner_text("#lc-error"))
        res = capacity("plan", "--model", str(path), "--accelerator", "h100", "--context", context, "--batch", "4",
                       "--json")
        assert res.returncode == 0, res.stderr
        want = json.loads(res.stdout)
        got = json.loads(got)
        assert got["model"] == "config" and want["model"] == path.parent.name
        got["model"] = want["model"]
        assert got == want, path.parent.name
        planned += 1
    assert (planned >= 8 if paths is CONFIGS else planned == len(paths)), (planned, refused)
    # A type transformers knows whose parameters only its own classes count (StableLM: LayerNorm biases and optional
    # q/k norms no layout row reads): the page names the command line instead of a number. Every published config
    # above is counted in the page, so this one is derived.
    other = {**json.loads((CONFIGS[0].parents[1] / "gemma-2-9b" / "config.json").read_text()), "model_type": "stablelm"}
    assert configs.stored_type(other) is None and "stablelm" in configs.stored_defaults()["known_types"]
    text = json.dumps(other)
    page.fill("#lc-context-text", "8K")
    page.fill("#lc-config", text)
    _settled(page, config=text.strip())
    error = page.inner_text("#lc-error")
    assert "model_type 'stablelm'" in error and "capacity plan --model config.json" in error, error
    page.click("#lc-clear")
    assert errors == []


def test_live_calculator_python_is_the_package_and_needs_no_numpy(built_site):
    """The page runs the package's own files (no second copy), and none of them imports numpy: the page's
    Python (Pyodide, from the npm registry) has none."""
    import ast

    files = json.loads((built_site / "assets" / "calculator" / "python.json").read_text())
    for needed in ("part1_capacity/calculator/plan/plan.py", "part0_foundations/l03_kv_cache/laws.py",
                   "part1_capacity/calculator/model/configs.py", "part1_capacity/calculator/data/config_defaults.json"):
        assert needed in files
    for path, text in files.items():
        assert text == (REPO / path).read_text(), f"{path}: the site's copy differs from the package"
        if path.endswith(".py"):
            for node in ast.walk(ast.parse(text, filename=path)):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert not any(n.split(".")[0] == "numpy" for n in names), f"{path} imports numpy"


LESSONS = [p for p in PAGES if p.startswith("part0/")]
# Pages that teach (every lesson and the Part 1 pages but the overview and the interactive page) end with questions.
TEACHING = [p for p in PAGES if p.startswith(("part0/", "part1/")) and p not in ("part1/index.html", "part1/live.html")]


@pytest.mark.parametrize("page_path", TEACHING)
def test_teaching_page_ends_with_self_check_questions(built_site, page_path):
    """At least two self-check questions whose answers are folded away (``??? question`` → <details>)."""
    import re

    html = (built_site / page_path).read_text(encoding="utf-8")
    questions = re.findall(r'<details class="question">\s*<summary>(.*?)</summary>(.*?)</details>', html, re.S)
    assert len(questions) >= 2, "fewer than two self-check questions"
    assert all(re.sub(r"<[^>]+>", "", answer).strip() for _, answer in questions), "a question without an answer"


@pytest.mark.parametrize("page_path", LESSONS)
def test_lesson_ends_with_questions_exercise_and_next(built_site, page_path):
    """Self-check questions with folded answers, a linked "Do the exercise" block (open and grade commands), Next."""
    import posixpath
    import re

    html = (built_site / page_path).read_text(encoding="utf-8")
    block = re.search(r'<div class="admonition example">\s*<p class="admonition-title">Do the exercise</p>(.*?)'
                      r'</div>\s*<p><strong>Next:</strong>\s*<a href="([^"]+)"', html, re.S)
    assert block, "no 'Do the exercise' block followed by a Next link"
    body, next_href = block.groups()
    nb = re.search(r'href="([^"]+\.ipynb)"', body)
    assert nb and (built_site / posixpath.normpath(posixpath.join(posixpath.dirname(page_path), nb.group(1)))).is_file()
    text = re.sub(r"<[^>]+>", "", body)
    assert "jupyter lab exercises/" in text and "pytest tests/autograder/" in text
    target = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), next_href))
    assert target == PAGES[PAGES.index(page_path) + 1], f"Next goes to {target}"


def test_calculator_page_opens_with_a_worked_answer_ends_with_reference():
    """The calculator page is a tutorial first: the question, then one answer (the CLI's printed output, generated),
    then how it is computed; the reference (every command, every JSON key) is its last section."""
    import re

    text = (REPO / "site" / "part1" / "calculator.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)
    intro, first, last = sections[0], sections[1], sections[-1]
    assert "```" not in intro and "kv_bytes_total" not in intro          # no command block, no key list up front
    assert first.startswith("A first answer") and '--8<-- "site/generated/calc/first_answer.md"' in first
    assert last.startswith("Reference: commands, flags and JSON keys")
    assert "`kv_bytes_per_token`" in last and ".venv/bin/capacity plan" in last


def test_first_answer_is_the_cli_output_and_its_numbers():
    """The worked example quotes what `capacity plan` prints, and its prose numbers are the plan's own (a changed
    number in the prose could not come from anywhere else)."""
    from part1_capacity.pages import sitegen

    printed = sitegen.first_output()
    md = sitegen.first_answer(printed)
    assert md.startswith("```console\n$ .venv/bin/capacity plan --model llama-3.1-70b") and printed in md
    row = {ln.strip().split("  ")[0]: ln for ln in printed.splitlines()}
    weights = row["weights"].split()[1:3]                  # "131.4 GiB" as the table prints it
    assert f"**{' '.join(weights)}**" in md
    added = row["added by the KV cache"].split()[-1]
    assert f"the cache adds **{added}**" in md


def test_corrections_of_the_study_are_named_as_corrections():
    """Where the course's measurement contradicts the original study, the page says it is a correction."""
    engine = (REPO / "site" / "part1" / "engine_checks.md").read_text(encoding="utf-8")
    q5 = next(p for p in engine.split("\n- ") if p.startswith("**Q5_0**"))
    assert "a correction of the original study" in q5 and "ggml_vec_dot_q5_0_q8_0" in q5
    e3 = (REPO / "site" / "part1" / "e3_page_cache.md").read_text(encoding="utf-8")
    means = next(p for p in e3.split("\n\n") if p.startswith("**Mean and median are different questions.**"))
    assert "This corrects the original study" in means and "median" in means.split("corrects", 1)[1]


@pytest.mark.parametrize("page", sorted(str(p.relative_to(REPO)) for p in (REPO / "site").rglob("*.md")
                                        if "generated" not in p.parts))
def test_no_page_holds_a_control_character(page):
    """A tab typed where `\\t` was meant (Python's escape) broke `\\text{miss}` in a formula of the E3 page."""
    text = (REPO / page).read_text(encoding="utf-8")
    assert not [c for c in text if ord(c) < 32 and c != "\n"], page

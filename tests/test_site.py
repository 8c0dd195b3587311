"""The course site builds strictly and renders in a real headless browser (Debian's chromium).

Every page is opened from a local HTTP server: no console errors, every image loads, and the pages that
contain math have it typeset by the MathJax copy shipped with the site (no CDN).
"""
import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SITE = REPO / "_build" / "site"


@pytest.fixture(scope="module")
def built_site():
    subprocess.run([sys.executable, str(REPO / "tools" / "build_site.py")], cwd=REPO, check=True,
                   capture_output=True, text=True)
    assert (SITE / "index.html").exists()
    return SITE


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
    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(exe).exists(), "Debian's chromium is missing: `make setup` installs it"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        yield b
        b.close()


@pytest.mark.parametrize("page_path", PAGES)
def test_page_renders(browser, server, page_path):
    page = browser.new_page()
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
    page.close()


def test_lesson_page_has_math_and_figure(browser, server):
    page = browser.new_page()
    page.goto(f"{server}/part0/01_attention.html", wait_until="networkidle")
    page.evaluate("() => MathJax.startup.promise")
    assert page.locator("mjx-container").count() > 3
    assert page.evaluate("() => [...document.images].filter(i => i.naturalWidth > 200).length") >= 1
    page.close()

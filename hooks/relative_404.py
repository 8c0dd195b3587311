"""mkdocs hook: the 404 page with relative links, like every other page.

With no ``site_url`` mkdocs writes 404.html with root-absolute paths (``/assets/...``), which break wherever the
site is not served from the root of its host (a project page, a folder on a course server, a local file).
The page lives at the site's root, so ``./`` is the root it means.
"""
import re
from pathlib import Path

_ROOT_ABSOLUTE = re.compile(r'\b(href|src)="/(?!/)')


def relative(html: str) -> str:
    """Every ``href="/…"``/``src="/…"`` as ``"./…"`` (protocol-relative ``//host`` left alone)."""
    return _ROOT_ABSOLUTE.sub(r'\1="./', html)


def on_post_build(config, **kwargs):
    page = Path(config["site_dir"]) / "404.html"
    if page.exists():
        page.write_text(relative(page.read_text(encoding="utf-8")), encoding="utf-8")

"""mkdocs hook: the pages stand on generated files, and the lesson pages link the exercise notebooks.

- The pages include snippets and figures that `tools/build_site.py` writes under `site/generated/` (never typed in,
  never committed). When some are missing — a fresh checkout, after `make clean` — this hook runs those generators
  first, so `mkdocs serve` and `mkdocs build` work after `make setup`; if they fail, the build stops with one line
  naming `tools/build_site.py`.
- The release notebooks (`exercises/*/*.ipynb`, and the Korean course's `exercises/ko/*/*.ipynb`) are published
  with the site, so "Do the exercise" links work from the built pages too.
"""
from __future__ import annotations

import importlib.util
import logging
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parent.parent
log = logging.getLogger("mkdocs.hooks.generated")
# `--8<-- "site/generated/x.md"` (a snippet) and `](../generated/x.png)` (a figure), as the pages write them.
_REFS = re.compile(r'--8<-- "(site/generated/[^"]+)"|\]\((?:\.\./)+(generated/[^)\s]+)\)')


def missing_generated(docs: Path, root: Path = REPO) -> list[str]:
    """Generated files the pages under ``docs`` refer to that do not exist (paths relative to ``root``)."""
    missing = []
    for page in sorted(docs.rglob("*.md")):
        if "generated" in page.relative_to(docs).parts:
            continue
        for snippet, figure in _REFS.findall(page.read_text(encoding="utf-8")):
            rel = snippet or f"{docs.relative_to(root).as_posix()}/{figure}"
            if not (root / rel).exists() and rel not in missing:
                missing.append(rel)
    return missing


def _run_generators() -> None:
    spec = importlib.util.spec_from_file_location("build_site", REPO / "tools" / "build_site.py")
    build_site = importlib.util.module_from_spec(spec)
    sys.modules["build_site"] = build_site  # its generators run in worker processes, which find them by module name
    spec.loader.exec_module(build_site)
    build_site.run_generators()


def on_config(config, **kwargs):
    docs = Path(config["docs_dir"])
    missing = missing_generated(docs)
    if not missing:
        return config
    log.info("%d generated file(s) missing (e.g. %s): running the generators of tools/build_site.py (~1 min)",
             len(missing), missing[0])
    try:
        _run_generators()
    except Exception as exc:  # any failure: one line, naming the command that shows the whole error
        raise PluginError(f"site/generated/ is incomplete and generating it failed ({type(exc).__name__}: {exc}); "
                          f"run `.venv/bin/python tools/build_site.py` to see why") from None
    still = missing_generated(docs)
    if still:
        raise PluginError(f"site/generated/ still lacks {still[0]} after the generators ran: "
                          f"check the sitegen.py that should write it (`.venv/bin/python tools/build_site.py`)")
    return config


def on_files(files, config, **kwargs):
    for nb in sorted((REPO / "exercises").glob("*/*.ipynb")) + sorted((REPO / "exercises").glob("ko/*/*.ipynb")):
        files.append(File.generated(config, nb.relative_to(REPO).as_posix(), abs_src_path=str(nb)))
    return files

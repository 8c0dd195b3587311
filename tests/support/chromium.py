"""Debian's Chromium, headless, as the tests drive it (the site, the calculator page, the class's hub).

The switches keep it off the network it would otherwise try to reach (updates, sync, field trials); every page the
tests open is on 127.0.0.1 or a local file.
"""
import shutil
from contextlib import contextmanager
from pathlib import Path

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


def executable() -> str:
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(exe).exists(), "Debian's chromium is missing: `make setup` installs it"
    return exe


@contextmanager
def launch():
    """A headless Chromium (Playwright's browser object) until the block ends."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable(), headless=True, args=ARGS)
        try:
            yield b
        finally:
            b.close()

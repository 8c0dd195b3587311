"""Benchmark: what the calculator page (part1/live.html) downloads and how soon it is usable, in headless Chromium.

    .venv/bin/python -m part1_capacity.experiments.bench_live_page [--runs 3] [--mbit 20]

Serves the built site (``make site`` first: _build/site) from 127.0.0.1, opens the page in a fresh browser context
(empty cache) and prints, per run: the bytes the page fetched (every response's encoded body, from the browser's
own network records), the seconds from navigation to the first plan shown (the page sets ``data-ready``), and the
page's own measurement from script start. ``--mbit`` adds a run with the network throttled to that many Mbit/s
(Chromium's network emulation). Timings depend on the machine and its load; nothing here is asserted by the tests.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "_build" / "site"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory: Path):
    handler = functools.partial(_Quiet, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def one_run(browser, url: str, mbit: float | None = None) -> dict:
    ctx = browser.new_context()
    page = ctx.new_page()
    if mbit:
        cdp = ctx.new_cdp_session(page)
        cdp.send("Network.enable")
        rate = mbit * 1e6 / 8
        cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 20, "downloadThroughput": rate,
                                                      "uploadThroughput": rate})
    finished = []
    page.on("requestfinished", lambda r: finished.append(r))
    t0 = time.perf_counter()
    page.goto(url + "/part1/live.html")
    page.wait_for_function("() => document.getElementById('live-calculator').dataset.ready === 'true'"
                           " || /could not/.test(document.getElementById('lc-status').textContent)", timeout=600000)
    usable = time.perf_counter() - t0
    own = page.evaluate("() => document.getElementById('live-calculator').dataset.usableMs")
    marks = page.evaluate("() => performance.getEntriesByType('mark').filter(m => m.name.startsWith('lc-'))"
                          ".map(m => [m.name.slice(3), Math.round(m.startTime)])")
    page.wait_for_load_state("networkidle")
    sizes = {r.url: r.sizes()["responseBodySize"] for r in finished}     # asked after the run: not timed
    ctx.close()
    return {"bytes": sum(sizes.values()), "usable_s": usable, "page_ms": own, "files": len(sizes), "marks": marks,
            "largest": sorted(sizes.items(), key=lambda kv: -kv[1])[:4]}


def main(argv=None) -> int:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mbit", type=float, default=None, help="one more run throttled to this many Mbit/s")
    a = ap.parse_args(argv)
    if not (SITE / "part1" / "live.html").exists():
        raise SystemExit("no built site: run `make site` first")
    httpd, url = serve(SITE)
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=ARGS)
        runs = [one_run(browser, url) for _ in range(a.runs)]
        for i, r in enumerate(runs, 1):
            print(f"run {i}: {r['bytes'] / 1e6:.2f} MB in {r['files']} files, usable after {r['usable_s']:.2f} s "
                  f"(page's own clock {r['page_ms']} ms; ms since navigation: "
                  f"{', '.join(f'{n} {t}' for n, t in r['marks'])})")
        print("largest files: " + ", ".join(f"{u.rsplit('/', 1)[-1]} {n / 1e6:.2f} MB" for u, n in runs[0]["largest"]))
        print(f"best of {a.runs}: usable after {min(r['usable_s'] for r in runs):.2f} s")
        if a.mbit:
            r = one_run(browser, url, a.mbit)
            print(f"at {a.mbit:g} Mbit/s: {r['bytes'] / 1e6:.2f} MB, usable after {r['usable_s']:.2f} s")
        browser.close()
    httpd.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The README's main command: the calculator on the bundled default data, then the course site; and `make serve`.

    python tools/main_job.py               # both, then what to do next
    python tools/main_job.py calculator    # the calculator only: needs nothing but numpy and the package
    python tools/main_job.py site          # the course site: needs the whole stack (`make setup-core pyodide`)
    python tools/main_job.py serve         # serves the built site on 127.0.0.1 (`make serve`)

`make run` runs the two steps apart, so the calculator's answer comes before the rest of the stack is installed,
then `next`, which prints the way on for each reader (the README's first screen says the same).
"""
import functools
import http.server
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SITE = REPO / "_build" / "site"
# The built site's address under `make serve`: 127.0.0.1 only (nothing is offered to the network). Opened as a
# file, the live calculator (Pyodide imports modules) and the search (a web worker) cannot load: browsers refuse
# both from file:// addresses.
SERVE_HOST, SERVE_PORT = "127.0.0.1", 8080
SERVE_URL = f"http://{SERVE_HOST}:{SERVE_PORT}/"

STEPS = {
    # The four attention structures at 128K on one accelerator, with the kind of bottleneck for each.
    "calculator": [str(BIN / "capacity"), "compare"],
    "site": [sys.executable, str(REPO / "tools" / "build_site.py")],
}

# What each reader does after `make run`, every command runnable as written from the clone's folder (the README's
# first screen shows the same commands; tests/house/test_main_job.py checks they agree).
NEXT = (
    ("learner", ".venv/bin/jupyter lab exercises/01_attention/attention.ipynb",
     "lesson 01's notebook (as root: add --allow-root); fill in the cells marked YOUR CODE HERE, save"),
    ("", ".venv/bin/pytest tests/autograder/test_attention.py --notebook exercises/01_attention/attention.ipynb",
     "grades the saved notebook, one line per check"),
    ("engineer", ".venv/bin/capacity plan --model llama-3.1-70b --accelerator h100 --context 32K --batch 16",
     "your model: --model config.json, a model folder, a .gguf or org/name"),
    ("instructor", "site/instructors.md", "the instructors' guide: register, release, collect, grade, export"),
    ("the site", "make serve", f"then open {SERVE_URL} (the live calculator and search need a server)"),
)


def next_steps() -> str:
    """The lines `make run` ends with: one block per reader, the command then what it does."""
    lines = ["", "Next, by who you are:"]
    for who, command, what in NEXT:
        lines.append(f"  {who:<11} {command}")
        lines.append(f"  {'':<11}   {what}")
    return "\n".join(lines)


def make_server(site: Path, port: int = SERVE_PORT) -> http.server.ThreadingHTTPServer:
    """An HTTP server of the folder ``site`` on 127.0.0.1:``port`` (0: any free port), not yet serving."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a, **k: None      # one line per file fetched would bury the address
    return http.server.ThreadingHTTPServer((SERVE_HOST, port), handler)


def serve(site: Path = SITE, port: int = SERVE_PORT) -> int:
    """Serves the built site on 127.0.0.1:``port`` until interrupted; one line naming `make run` when it is not
    built, or when the port is taken."""
    if not (site / "index.html").is_file():
        print(f"serve: no built site in {site}: run `make run` (or `make site`) first", file=sys.stderr)
        return 2
    try:
        httpd = make_server(site, port)
    except OSError as exc:
        print(f"serve: cannot listen on {SERVE_HOST}:{port} ({exc.strerror}): is another `make serve` running?",
              file=sys.stderr)
        return 2
    print(f"Serving the course site at http://{SERVE_HOST}:{httpd.server_address[1]}/ (Ctrl-C stops it)", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


def main(argv: list[str], steps: dict[str, list[str]] = STEPS) -> int:
    """Runs the named steps (all when none) in order; the exit code of the first that fails, else 0. `next` prints
    the way on; `serve` serves the built site."""
    if argv == ["serve"]:
        return serve()
    if argv == ["next"]:
        print(next_steps())
        return 0
    wanted = argv or list(steps)
    unknown = [w for w in wanted if w not in steps]
    if unknown:
        print(f"main_job: unknown step {unknown[0]!r}; the steps are: {', '.join(steps)}, next, serve",
              file=sys.stderr)
        return 2
    for name in wanted:
        # A failing step has said why above; one line here names it, and its exit code is `make run`'s (no traceback).
        code = subprocess.run(steps[name], cwd=REPO).returncode
        if code:
            print(f"main_job: the {name} step failed (exit {code}); its own messages are above", file=sys.stderr)
            return code
    if not argv:
        print(next_steps())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The README's main command: the calculator on the bundled default data, then the course site.

    python tools/main_job.py               # both
    python tools/main_job.py calculator    # the calculator only: needs nothing but numpy and the package
    python tools/main_job.py site          # the course site: needs the whole stack (`make setup-core pyodide`)

`make run` runs the two steps apart, so the calculator's answer comes before the rest of the stack is installed.
"""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

STEPS = {
    # The four attention structures at 128K on one accelerator, with the kind of bottleneck for each.
    "calculator": [str(BIN / "capacity"), "compare"],
    "site": [sys.executable, str(REPO / "tools" / "build_site.py")],
}


def main(argv: list[str], steps: dict[str, list[str]] = STEPS) -> int:
    """Runs the named steps (all when none) in order; the exit code of the first that fails, else 0."""
    wanted = argv or list(steps)
    unknown = [w for w in wanted if w not in steps]
    if unknown:
        print(f"main_job: unknown step {unknown[0]!r}; the steps are: {', '.join(steps)}", file=sys.stderr)
        return 2
    for name in wanted:
        # A failing step has said why above; one line here names it, and its exit code is `make run`'s (no traceback).
        code = subprocess.run(steps[name], cwd=REPO).returncode
        if code:
            print(f"main_job: the {name} step failed (exit {code}); its own messages are above", file=sys.stderr)
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

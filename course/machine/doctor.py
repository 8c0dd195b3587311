"""What this machine has installed for the course and what not, and which commands need which (``make doctor``).

Standard library only, nothing imported from the venv: it runs before ``make setup-core`` as well as after. It
looks where the Makefile puts things: ``.venv`` (the pinned stack; packages read from its ``*.dist-info``
folders), ``build/llama.cpp`` and ``build/llama.cpp-src`` (links into the llama.cpp cache), ``build/matmul-bench``,
``build/pyodide``, and the cache itself (``$LLAMA_CACHE``, by default
``${XDG_CACHE_HOME:-~/.cache}/inference-memory-course/llama``: one folder per build key, complete when it holds
``done``). Run: ``python -m course.machine.doctor [--repo DIR] [--cache DIR]``.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The venv's packages that stand for "the stack is there" (dist-info names, lower case).
CORE_PACKAGES = ("torch", "numpy", "transformers", "nbgrader", "mkdocs_material", "pytest")
# Where Debian's fonts-noto-cjk puts its fonts.
NOTO_CJK = ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
            "/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc")


@dataclass(frozen=True)
class Component:
    name: str
    ok: bool
    detail: str        # what was found, or what is missing
    fix: str           # the command that installs it
    needed_by: str     # the commands that need it


def default_cache() -> Path:
    """The llama.cpp cache root, as the Makefile's LLAMA_CACHE (tests/house/test_doctor.py checks they agree)."""
    if os.environ.get("LLAMA_CACHE"):
        return Path(os.environ["LLAMA_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inference-memory-course" / "llama"


def venv_packages(repo: Path) -> dict[str, str]:
    """Installed distributions of the repo's .venv: normalized name -> version (empty without a venv)."""
    found = {}
    for info in (repo / ".venv").glob("lib/python3*/site-packages/*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        found[name.lower().replace("-", "_").replace(".", "_")] = version
    return found


def cache_entries(cache: Path) -> list[tuple[Path, bool]]:
    """Each build folder in the cache and whether it is complete (its ``done`` written last)."""
    if not cache.is_dir():
        return []
    return [(p, (p / "done").is_file()) for p in sorted(cache.iterdir()) if p.is_dir() and p.name != "sdist"]


def pyodide_stamp(repo: Path) -> Path:
    """The file `make pyodide` writes last, named by the Makefile's PYODIDE_PKG (read from the Makefile, the one
    place the version is written; a clone without one is read with this clone's)."""
    makefile = repo / "Makefile" if (repo / "Makefile").is_file() else REPO / "Makefile"
    found = re.search(r"^PYODIDE_PKG\s*:=\s*(\S+)", makefile.read_text(encoding="utf-8"), re.M)
    return repo / "build" / "pyodide" / f".done-{found.group(1) if found else 'pyodide'}"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def check(repo: Path = REPO, cache: Path | None = None) -> list[Component]:
    cache = cache if cache is not None else default_cache()
    pkgs = venv_packages(repo)
    missing = [p for p in CORE_PACKAGES if p not in pkgs]
    found = ", ".join(f"{p} {pkgs[p]}" for p in CORE_PACKAGES[:3] if p in pkgs)
    out = [Component("Python stack (.venv)", bool(pkgs) and not missing,
                     "no .venv" if not pkgs else f"missing {', '.join(missing)}" if missing else found,
                     "make setup-core", "notebooks and their grading, make run, make site, make test")]

    entries = cache_entries(cache)
    complete = [p for p, done in entries if done]
    if complete:
        state = f"{len(complete)} complete build(s)" + (f", {len(entries) - len(complete)} unfinished"
                                                         if len(entries) > len(complete) else "")
    else:
        state = "only an unfinished build" if entries else "empty"
    out.append(Component("llama.cpp cache", bool(complete), f"{cache}: {state}",
                         "make llama (compiles once per machine)", "every clone's make test, make setup"))

    build = repo / "build" / "llama.cpp"
    if build.is_symlink():
        target = Path(os.path.realpath(build)).parent
        linked = target.is_dir() and (target / "done").is_file()
        where = f"linked to {target}" + ("" if linked else " (gone or unfinished)")
    else:
        linked = build.is_dir()
        where = "own build folder (from before the cache)" if linked else "not linked"
    llama_py = "llama_cpp_python" in pkgs
    out.append(Component("llama.cpp (llama_cpp + build)", linked and llama_py,
                         f"{where}; llama_cpp " + (pkgs["llama_cpp_python"] if llama_py else "not installed"),
                         "make llama", "make test, capacity e1, capacity e2"))

    bench = build / "bin" / "llama-bench"
    out.append(Component("llama-bench", _executable(bench), str(bench.relative_to(repo)) if _executable(bench)
                         else "not built", "make llama", "make test (E2 agreement), capacity e2"))
    mm = repo / "build" / "matmul-bench"
    out.append(Component("matmul-bench", _executable(mm), "build/matmul-bench" if _executable(mm) else "not built",
                         "make matmul-bench", "capacity e2 --calibrate, part1_capacity.experiments.engine.kernels --save, "
                                              "part1_capacity.experiments.bench_stream"))

    chromium = shutil.which("chromium")
    out.append(Component("Chromium", bool(chromium), chromium or "not on PATH",
                         "make system-packages (apt: chromium)", "make test (the site in a headless browser)"))
    pyodide = pyodide_stamp(repo)
    out.append(Component("Pyodide", pyodide.is_file(), f"build/pyodide ({pyodide.name[len('.done-'):]})"
                         if pyodide.is_file() else f"not unpacked ({pyodide.name[len('.done-'):]})",
                         "make pyodide", "make run, make site, make test (the calculator page)"))
    bwrap = shutil.which("bwrap")
    out.append(Component("bubblewrap", bool(bwrap), bwrap or "bwrap not on PATH",
                         "make system-packages (apt: bubblewrap)", "make test"))
    fonts = [f for f in NOTO_CJK if Path(f).is_file()]
    out.append(Component("Noto CJK fonts", bool(fonts), fonts[0] if fonts else "not installed",
                         "make site-packages (apt: fonts-noto-cjk)",
                         "make test, the Korean edition of make run's site"))
    return out


def render(components: list[Component]) -> str:
    width = max(len(c.name) for c in components)
    lines = []
    for c in components:
        lines.append(f"{'ok' if c.ok else 'MISSING':7} {c.name:{width}}  {c.detail}")
        lines.append(f"{'':7} {'':{width}}  needed by: {c.needed_by}" + ("" if c.ok else f"; install: {c.fix}"))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course.machine.doctor", description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=REPO, help="the clone to look at (default: this one)")
    ap.add_argument("--cache", type=Path, default=None, help="the llama.cpp cache (default: $LLAMA_CACHE or "
                                                             "~/.cache/inference-memory-course/llama)")
    args = ap.parse_args(argv)
    print(render(check(args.repo.resolve(), args.cache)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build the course site: run every lesson's figure/table generator, then `mkdocs build --strict`.

Generators are the `sitegen.py` modules of the packages (`build(out_dir)`); they write PNGs and Markdown
snippets under site/generated/<name>/, which the pages include — each in English (`x.md`, `x.png`) and in Korean
(`x.ko.md`, `x.ko.png`) from the same numbers, the Korean text from course/locale/ko/site.toml. Nothing on the site is typed in by hand.
They use shipped checkpoints and saved experiment results, so the whole build takes seconds.
"""
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")


def generators():
    for pkg in ("course", "part0_foundations", "part1_capacity"):
        for p in sorted((REPO / pkg).glob("**/sitegen.py")):
            rel = p.relative_to(REPO).with_suffix("")
            yield ".".join(rel.parts)


class GeneratorFailed(Exception):
    """A generator stopped: its module and its error, said in one line (the reader of `make run` is not the one
    who can fix a generator, and the message names what went wrong; `python -m <module>` shows the traceback)."""


def _run_one(mod_name: str) -> str:
    from course.shared.i18n import use_figure_fonts

    use_figure_fonts()  # Korean figure labels need a CJK font (fonts-noto-cjk): say so before any figure is drawn
    mod = importlib.import_module(mod_name)
    out = REPO / "site" / "generated" / mod.NAME
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        mod.build(out)
    except Exception as e:  # noqa: BLE001 -- any error of a generator becomes its one line
        raise GeneratorFailed(f"{mod_name}: {type(e).__name__}: {e}") from None
    return f"  generated {out.relative_to(REPO)} ({time.time() - t0:.1f} s)"


def run_generators(only=None, jobs: int = 2):
    """Each generator writes only its own folder, so they run side by side (two at a time: the build is mostly
    model runs and figure drawing, one core each)."""
    from concurrent.futures import ProcessPoolExecutor

    names = [m for m in generators() if not only or any(o in m for o in only)]
    if jobs <= 1 or len(names) <= 1:
        for name in names:
            print(_run_one(name), flush=True)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for line in pool.map(_run_one, names):
            print(line, flush=True)


def choose_languages() -> tuple[str, ...]:
    """Both languages where the Korean figures can be drawn; else the English site alone, said in one line (the
    generators and mkdocs.yml read the choice from the environment, so it reaches every worker)."""
    from course.shared import i18n

    if "ko" in i18n.site_languages() and not i18n.has_figure_fonts():
        os.environ[i18n.SITE_KO_ENV] = "false"
        print(f"No CJK font for the Korean figures (Debian's {i18n.CJK_PACKAGE}): building the English site only, "
              f"in DejaVu Sans; `sudo apt-get install {i18n.CJK_PACKAGE}` adds the Korean edition.", flush=True)
    return i18n.site_languages()


def main() -> int:
    choose_languages()
    print("Generating figures and tables from code:")
    try:
        run_generators(sys.argv[1:])
    except GeneratorFailed as e:
        print(f"build_site: a generator failed, {e}", file=sys.stderr)
        return 1
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"], cwd=REPO)
    if done.returncode:
        print(f"build_site: mkdocs build --strict failed (exit {done.returncode}): its messages are above",
              file=sys.stderr)
        return done.returncode
    from main_job import SERVE_URL   # tools/, this script's folder

    print(f"Site built in {REPO / '_build' / 'site'}: `make serve` serves it at {SERVE_URL} (opened as a file, "
          f"the live calculator and the search cannot load)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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


def run_generators(only=None):
    out_root = REPO / "site" / "generated"
    from course.i18n import use_figure_fonts

    use_figure_fonts()  # Korean figure labels need a CJK font (fonts-noto-cjk): say so before any figure is drawn
    for mod_name in generators():
        if only and not any(o in mod_name for o in only):
            continue
        mod = importlib.import_module(mod_name)
        out = out_root / mod.NAME
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        mod.build(out)
        print(f"  generated {out.relative_to(REPO)} ({time.time() - t0:.1f} s)", flush=True)


def main():
    print("Generating figures and tables from code:")
    run_generators(sys.argv[1:])
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"], cwd=REPO, check=True)
    index = REPO / "_build" / "site" / "index.html"
    print(f"Site built: open {index}")


if __name__ == "__main__":
    main()

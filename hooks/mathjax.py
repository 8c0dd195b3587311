"""mkdocs hook: copy MathJax 3 (es5 build) from the installed `django-static-mathjax` wheel into the built site.

The math renderer ships with the site, so pages render offline; nothing is fetched from a CDN.
"""
import shutil
from pathlib import Path


def _mathjax_es5() -> Path:
    import mathjax  # the django-static-mathjax package

    root = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
    if not (root / "tex-mml-chtml.js").exists():
        raise RuntimeError(f"MathJax assets not found under {root}: reinstall django-static-mathjax")
    return root


def on_post_build(config, **kwargs):
    src = _mathjax_es5()
    dst = Path(config["site_dir"]) / "assets" / "mathjax"
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "tex-mml-chtml.js", dst / "tex-mml-chtml.js")
    shutil.copytree(src / "output" / "chtml" / "fonts", dst / "output" / "chtml" / "fonts", dirs_exist_ok=True)

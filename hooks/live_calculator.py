"""mkdocs hook: give the calculator page (part1/live.md) its Python and the Python to run it, served by the site.

- Pyodide (CPython 3.14 compiled to WebAssembly), unpacked from the npm registry by `make pyodide` into
  build/pyodide/, is copied to assets/pyodide/ (no numpy: the plan path is plain Python).
- The calculator's light path is copied from the package into assets/calculator/python.json ({path: text}): the
  modules that ``part1_capacity.calculator.uses.browser`` imports (plan, profiles, the cache laws, dtypes, hardware, tiers,
  roofline, weights, ...) and their data files. Found by importing it, so a module added to the light path comes
  along by itself; there is no second copy of any of them in git, and nothing is fetched from elsewhere at
  read time.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

REPO = Path(__file__).resolve().parent.parent
PYODIDE = REPO / "build" / "pyodide"
# What the page loads of Pyodide, and its package.json (version, MPL-2.0 licence); see the Makefile's `pyodide`.
PYODIDE_FILES = ("pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json",
                 "package.json")
PACKAGES = ("part0_foundations", "part1_capacity", "course")
DATA_SUFFIXES = (".json", ".toml", ".csv")

# Run in a fresh interpreter: import the page's entry module and call it once (lazy imports included), then list
# the course modules it pulled in.
_CLOSURE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from part1_capacity.calculator.uses import browser
browser.choices()
browser.plan("llama-3.1-8b", "h100", "8K", 4)
browser.plan("", "h100", 8192, 4, config=json.dumps({"model_type": "llama", "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64, "max_position_embeddings": 8192,
             "vocab_size": 100, "intermediate_size": 128}))
assert "numpy" not in sys.modules, "the page's Python imported numpy"
names = sys.argv[2].split(",")
print(json.dumps(sorted(m.__file__ for n, m in list(sys.modules.items())
                        if n.split(".")[0] in names and getattr(m, "__file__", None))))
"""


def light_path_files() -> dict[str, str]:
    """{repo-relative path: text} of the modules the page's Python imports, and the data files beside them."""
    out = subprocess.run([sys.executable, "-c", _CLOSURE, str(REPO), ",".join(PACKAGES)], cwd=REPO,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise PluginError("the calculator page's Python does not import: " + out.stderr.strip().splitlines()[-1])
    files = {}
    for f in json.loads(out.stdout):
        p = Path(f).resolve()
        files[p.relative_to(REPO).as_posix()] = p.read_text()
        data = p.parent / "data"
        for q in sorted(data.glob("*")) if data.is_dir() else ():
            if q.suffix in DATA_SUFFIXES:
                files[q.relative_to(REPO).as_posix()] = q.read_text()
    return files


def on_post_build(config, **kwargs):
    missing = [f for f in PYODIDE_FILES if not (PYODIDE / f).exists()]
    if missing:
        raise PluginError(f"build/pyodide/ lacks {', '.join(missing)} (Python for the calculator page): run "
                           f"`make pyodide`")
    site = Path(config["site_dir"]) / "assets"
    (site / "pyodide").mkdir(parents=True, exist_ok=True)
    for f in PYODIDE_FILES:
        shutil.copy2(PYODIDE / f, site / "pyodide" / f)
    (site / "calculator").mkdir(parents=True, exist_ok=True)
    (site / "calculator" / "python.json").write_text(json.dumps(light_path_files()))

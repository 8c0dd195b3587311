"""mkdocs hook: give the calculator page (part1/live.md) its Python and the Python to run it, served by the site.

- Pyodide (CPython 3.14 compiled to WebAssembly), unpacked from the npm registry by `make pyodide` into
  build/pyodide/, is copied to assets/pyodide/ (no numpy: the plan path is plain Python).
- The calculator's light path is copied from the package into assets/calculator/python.json ({path: text}): the
  modules that ``part1_capacity.calculator.browser`` imports (plan, profiles, the cache laws, dtypes, hardware, tiers,
  roofline, weights, ...) and their data files. Found by importing it, so a module added to the light path comes
  along by itself; there is no second copy of any of them in git, and nothing is fetched from elsewhere at
  read time.
- The defaults ``transformers`` gives each causal-LM model type, for a pasted config.json, into
  assets/calculator/defaults.json (``browser.defaults_table``): generated here from ``transformers`` itself, the
  one source the CLI reads too.
"""
import json
import os
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
from part1_capacity.calculator import browser
browser.choices()
browser.plan("llama-3.1-8b", "h100", "8K", 4)
browser.plan("", "h100", 8192, 4, config=json.dumps({"model_type": "llama", "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64, "max_position_embeddings": 8192,
             "vocab_size": 100, "intermediate_size": 128}), table={"model_types": {"llama": {}}, "architectures": {}})
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


_DEFAULTS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from part1_capacity.calculator import browser, hf_config
hf_config._transformers()
from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as LM,
                                                    MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES as VLM)
architectures = {}
for mapping in (LM, VLM):
    for mt, cls in mapping.items():
        for c in cls if isinstance(cls, (list, tuple)) else [cls]:
            architectures.setdefault(c, mt)
print(json.dumps(browser.defaults_table(sorted(set(LM) | set(VLM)), hf_config.class_defaults, architectures),
                 separators=(",", ":")))
"""


def defaults_table() -> str:
    """The JSON of ``browser.defaults_table`` over transformers' causal (and image-text) language models."""
    out = subprocess.run([sys.executable, "-c", _DEFAULTS, str(REPO)], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if out.returncode != 0:
        raise PluginError("the defaults table for pasted configs: " + out.stderr.strip().splitlines()[-1])
    return out.stdout


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
    (site / "calculator" / "defaults.json").write_text(defaults_table())

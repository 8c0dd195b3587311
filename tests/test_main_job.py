"""`make run` installs no llama.cpp (only `make test` builds it): the calculator's answer and the site's Part 1
generators must work on a machine without llama_cpp, whatever the engine experiments import when they run."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# llama_cpp made unimportable, as in a venv where `make run` installed the stack without it.
_WITHOUT_LLAMA = """
import importlib, pathlib, sys
sys.modules["llama_cpp"] = None
sys.path.insert(0, sys.argv[1])
from part1_capacity.cli import main
assert main(["compare"]) == 0
sys.path.insert(0, sys.argv[1] + "/tools")
import build_site
for name in build_site.generators():
    if name.startswith("part1_capacity"):
        out = pathlib.Path(sys.argv[2]) / name
        out.mkdir(parents=True)
        importlib.import_module(name).build(out)
"""


def test_calculator_and_part1_site_generators_run_without_llama_cpp(tmp_path):
    done = subprocess.run([sys.executable, "-c", _WITHOUT_LLAMA, str(REPO), str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bottleneck" in done.stdout

"""The README's main command: the calculator on the bundled default data, then the course site."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

steps = []
if (REPO / "part1_capacity" / "commands" / "compare.py").exists():
    # The four attention structures at 128K on one accelerator, with the kind of bottleneck for each.
    steps.append([str(BIN / "capacity"), "compare"])
steps.append([sys.executable, str(REPO / "tools" / "build_site.py")])
for cmd in steps:
    subprocess.run(cmd, cwd=REPO, check=True)

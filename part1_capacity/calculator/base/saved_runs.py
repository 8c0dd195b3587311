"""Where Part 1's saved runs live: ``results/part1/`` at the repository's root.

Saved runs are generated (each by the command that names it in its record), so they sit beside the other generated
results (``results/course/``, ``results/mutation/``) and outside the code tree. The calculator reads the E3 runs there
(a host's hot page cache); the experiments and their commands write there; the site is built from them.
"""
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[3] / "results" / "part1"

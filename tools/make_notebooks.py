"""Regenerate solutions/ (nbgrader source) from the package and exercises/ (release) with real nbgrader.

    python tools/make_notebooks.py            # every lesson
    python tools/make_notebooks.py 01_attention
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course.notebook_spec import REPO, all_specs, generate_release, write_source_notebook  # noqa: E402

wanted = set(sys.argv[1:])
for spec in all_specs():
    if wanted and spec.ASSIGNMENT not in wanted:
        continue
    src = write_source_notebook(spec)
    rel = generate_release(spec.ASSIGNMENT, REPO / "solutions", REPO / "exercises")
    print(f"{spec.ASSIGNMENT}: {src.relative_to(REPO)} -> {rel.relative_to(REPO)}")

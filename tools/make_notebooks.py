"""Regenerate solutions/ (nbgrader source) from the package and exercises/ (release) with real nbgrader, in every
course language (the Korean course in solutions/ko/ and exercises/ko/).

    python tools/make_notebooks.py            # every lesson
    python tools/make_notebooks.py 01_attention
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course.shared.i18n import LANGS  # noqa: E402
from course.grading.notebook_spec import REPO, all_specs, course_dirs, generate_release, write_source_notebook  # noqa: E402

wanted = set(sys.argv[1:])
for spec in all_specs():
    if wanted and spec.ASSIGNMENT not in wanted:
        continue
    for lang in LANGS:
        solutions, exercises = course_dirs(lang)
        src = write_source_notebook(spec, lang=lang)
        rel = generate_release(spec.ASSIGNMENT, solutions, exercises)
        print(f"{spec.ASSIGNMENT} ({lang}): {src.relative_to(REPO)} -> {rel.relative_to(REPO)}")

"""Site snippets for Part 1's exercises: each one's "Do the exercise" block (notebook, open and grade commands,
measured times), written from its notebook spec by the same helper as the Part 0 lessons' blocks."""
from __future__ import annotations

from pathlib import Path

from course.shared import i18n
from course.site.exercises import exercise_block
from part1_capacity.exercises.kv_from_config import notebook as kv_from_config
from part1_capacity.exercises.one_more_accelerator import notebook as one_more_accelerator

NAME = "p1_exercises"


def build(out: Path) -> None:
    for spec in (kv_from_config, one_more_accelerator):
        i18n.write_text(out, f"{spec.ASSIGNMENT}.md", lambda tr, spec=spec: exercise_block(spec, lang=tr.lang))

"""Autograder for the Part 1 exercise `kv_from_config`.

`pytest tests/autograder/test_kv_from_config.py --notebook PATH` grades a notebook; without --notebook it grades
the reference solution. Each check is its own test; the score is printed at the end."""
import pytest

from part1_capacity.exercises.kv_from_config import checks
from tests.support.adapters import run_check

LESSON = checks.LESSON


@pytest.mark.parametrize("check_id", LESSON.ids())
def test_kv_from_config(graded, check_id):
    run_check(graded, check_id)

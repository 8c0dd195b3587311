"""Autograder for the Part 1 exercise `one_more_accelerator`.

`pytest tests/autograder/test_one_more_accelerator.py --notebook PATH` grades a notebook; without --notebook it grades
the reference solution. Each check is its own test; the score is printed at the end."""
import pytest

from part1_capacity.exercises.one_more_accelerator import checks
from tests.support.adapters import run_check

LESSON = checks.LESSON


@pytest.mark.parametrize("check_id", LESSON.ids())
def test_one_more_accelerator(graded, check_id):
    run_check(graded, check_id)

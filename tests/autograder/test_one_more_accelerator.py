"""Autograder for the Part 1 exercise `one_more_accelerator`.

`pytest tests/autograder/test_one_more_accelerator.py --notebook PATH` grades a notebook; without --notebook it grades
the reference solution. Each check is its own test."""
import pytest

from part1_capacity.exercises.one_more_accelerator import checks
from tests.adapters import run_check

REFERENCE = "part1_capacity.exercises.one_more_accelerator.reference"


@pytest.mark.parametrize("check_id", list(checks.ALL))
def test_one_more_accelerator(learner, check_id):
    run_check(learner, checks.ALL, check_id)

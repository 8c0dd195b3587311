"""Autograder for the Part 1 exercise `kv_from_config`.

`pytest tests/autograder/test_kv_from_config.py --notebook PATH` grades a notebook; without --notebook it grades
the reference solution. Each check is its own test."""
import pytest

from part1_capacity.exercises.kv_from_config import checks
from tests.adapters import run_check

REFERENCE = "part1_capacity.exercises.kv_from_config.reference"


@pytest.mark.parametrize("check_id", list(checks.ALL))
def test_kv_from_config(learner, check_id):
    run_check(learner, checks.ALL, check_id)

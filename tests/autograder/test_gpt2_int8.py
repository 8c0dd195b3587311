"""Autograder for lesson 04. `pytest tests/autograder/test_gpt2_int8.py --notebook PATH` grades a notebook;
without --notebook it grades the reference solution. Each check is its own test."""
import pytest

from part0_foundations.l04_gpt2_int8 import checks
from tests.adapters import run_check

REFERENCE = "part0_foundations.l04_gpt2_int8.int8"


@pytest.mark.parametrize("check_id", list(checks.ALL))
def test_gpt2_int8(learner, check_id):
    run_check(learner, checks.ALL, check_id)

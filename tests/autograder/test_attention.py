"""Autograder for lesson 01. `pytest tests/autograder/test_attention.py --notebook PATH` grades a notebook;
without --notebook it grades the reference solution. Each check is its own test."""
import pytest

from part0_foundations.l01_attention import checks
from tests.adapters import run_check

REFERENCE = "part0_foundations.l01_attention.attention"


@pytest.mark.parametrize("check_id", list(checks.ALL))
def test_attention(learner, check_id):
    run_check(learner, checks.ALL, check_id)

"""Autograder for lesson 01. `pytest tests/autograder/test_attention.py --notebook PATH` grades a notebook;
without --notebook it grades the reference solution. Each check is its own test; the score is printed at the end."""
import pytest

from part0_foundations.l01_attention import checks
from tests.support.adapters import run_check

LESSON = checks.LESSON


@pytest.mark.parametrize("check_id", LESSON.ids())
def test_attention(graded, check_id):
    run_check(graded, check_id)

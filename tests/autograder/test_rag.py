"""Autograder for lesson 05. `pytest tests/autograder/test_rag.py --notebook PATH` grades a notebook; without
--notebook it grades the reference solution. Each check is its own test."""
import pytest

from part0_foundations.l05_rag import checks
from tests.support.adapters import run_check

LESSON = checks.LESSON


@pytest.mark.parametrize("check_id", LESSON.ids())
def test_rag(graded, check_id):
    run_check(graded, check_id)

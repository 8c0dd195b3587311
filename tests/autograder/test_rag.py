"""Autograder for lesson 05. `pytest tests/autograder/test_rag.py --notebook PATH` grades a notebook; without
--notebook it grades the reference solution. Each check is its own test."""
import pytest

from part0_foundations.l05_rag import checks
from tests.adapters import run_check

REFERENCE = "part0_foundations.l05_rag.reference"


@pytest.mark.parametrize("check_id", list(checks.ALL))
def test_rag(learner, check_id):
    run_check(learner, checks.ALL, check_id)

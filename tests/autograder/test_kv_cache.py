"""Autograder for lesson 03. `pytest tests/autograder/test_kv_cache.py --notebook PATH` grades a notebook;
without --notebook it grades the reference solution. Each check is its own test."""
import pytest

from part0_foundations.l03_kv_cache import checks
from tests.adapters import run_check

REFERENCE = "part0_foundations.l03_kv_cache.gpt"


@pytest.mark.parametrize("check_id", list(checks.ALL))
def test_kv_cache(learner, check_id):
    run_check(learner, checks.ALL, check_id)

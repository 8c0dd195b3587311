"""Autograder for lesson 02. `pytest tests/autograder/test_encoder_decoder.py --notebook PATH` grades a notebook;
without --notebook it grades the reference solution. Each check is its own test."""
import pytest

from part0_foundations.l02_encoder_decoder import checks
from tests.adapters import run_check

REFERENCE = "part0_foundations.l02_encoder_decoder.model"


@pytest.mark.parametrize("check_id", list(checks.ALL))
def test_encoder_decoder(learner, check_id):
    run_check(learner, checks.ALL, check_id)

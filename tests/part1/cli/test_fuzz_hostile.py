"""The property-based fuzz of tests/support/fuzz_hostile.py in the suite: per class of hostile input (config fields,
checkpoint folders, a hostile Hub's answers, output paths), a few dozen derandomized cases, each one a right answer
(its class's oracle holds) or one printable line — bounded: modest ``max_examples`` and a Hypothesis deadline per
case (generous: a guard against a hang, not a timing assertion); a hung case also meets the 60 s alarm.
The long run (1,200 cases, with its figures) is ``python tests/support/fuzz_hostile.py``."""
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support import fuzz_hostile as fz

BOUNDED = settings(max_examples=12, deadline=timedelta(seconds=20), derandomize=True, database=None,
                   suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module", autouse=True)
def hub():
    import os
    saved = dict(os.environ)
    h = fz.start_hub()
    # the first plan imports transformers: done here, outside any case's deadline
    fz.run_case(["plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "64"], None)
    yield h
    h.stop()
    fz.HUB = None
    os.environ.clear()
    os.environ.update(saved)


def check(case):
    argv, oracle = case
    outcome, detail = fz.run_case(argv, oracle)
    assert outcome in ("answer", "refusal"), detail


@BOUNDED
@given(fz.config_cases())
def test_config_fields(case):
    check(case)


@BOUNDED
@given(fz.folder_cases())
def test_checkpoint_folders(case):
    check(case)


@BOUNDED
@given(fz.hub_cases())
def test_hub_answers(case):
    check(case)


@settings(BOUNDED, max_examples=8)        # each written heatmap is a matplotlib drawing: fewer cases
@given(fz.path_cases())
def test_output_paths(case):
    check(case)

"""The Part 1 exercises' grades mean the learner did the work: each degenerate answer (zeros, ones, the input echoed,
uniform, random, a constant, the identity, noise around the right answer) earns 0 points in total."""
import numpy as np
import pytest

from part1_capacity.exercises.kv_from_config import checks as kv_checks
from part1_capacity.exercises.kv_from_config.reference import kv_bytes_per_token
from part1_capacity.exercises.one_more_accelerator import checks as acc_checks
from tests.support.rules import DEGENERATE_KINDS as KINDS, lesson_points


def part1_degenerate(kind):
    rng = np.random.default_rng(10)

    def kv(config, bytes_per_element):
        right = kv_bytes_per_token(config, bytes_per_element)
        return {"zeros": 0, "ones": 1, "echo": bytes_per_element, "uniform": 1024 * bytes_per_element,
                "random": float(rng.uniform(1, 1e6)), "constant": 131072, "identity": config.get("hidden_size", 1),
                "noise": right * 1.01}[kind]

    def first(added, max_context):
        return {"zeros": 0, "ones": 1, "echo": max_context, "uniform": max_context // 2,
                "random": int(rng.integers(1, max_context + 1)), "constant": None, "identity": 1,
                "noise": None}[kind]

    return {"kv_bytes_per_token": kv, "first_context_adding_an_accelerator": first}


@pytest.mark.parametrize("kind", KINDS)
def test_part1_degenerate_answers_earn_nothing(kind):
    impls = part1_degenerate(kind)
    for lesson in (kv_checks.LESSON, acc_checks.LESSON):
        earned, failed = lesson_points(lesson, impls)
        assert earned == 0, (lesson.package, [c.id for c in lesson.checks if c.id not in failed])

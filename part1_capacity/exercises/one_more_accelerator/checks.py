"""Checks of the one-more-accelerator exercise: called by the notebook's autograder cells, by
tests/autograder/test_one_more_accelerator.py and by the reference tests. Each takes the learner's
``first_context_adding_an_accelerator`` and raises CheckFailed with a message for the learner.

Nothing is compared with the reference solution: a result is right when the calculator says so on both sides of
it — ``added(T) != 0`` and ``added(T − 1) == 0`` — and the search asks few enough questions.
"""
from __future__ import annotations

import math

from course.grading.contract import Check, Lesson, call, expect
from part1_capacity.exercises.one_more_accelerator.reference import added_by_kv
from part1_capacity.calculator.readers.loader import load_model

# (model, accelerator, batch, KV dtype): deployments whose cache starts adding accelerators at some context.
DEPLOYMENTS = (("llama-3.1-70b", "h100", 8, "bf16"), ("llama-3.1-8b", "l4", 4, "fp8"), ("qwen3-8b", "h100", 32, "bf16"))
NEVER = ("qwen2.5-0.5b", "h200", 1, "bf16")  # a tiny model's cache never adds one, up to its longest context


class Counted:
    """``added`` for a made-up deployment whose cache starts adding accelerators at ``threshold`` tokens; counts
    the questions and refuses contexts outside 1 … max_context."""

    def __init__(self, threshold: int, max_context: int):
        self.threshold, self.max_context, self.calls = threshold, max_context, 0
        self.budget = math.ceil(math.log2(max_context)) + 2

    def __call__(self, context):
        self.calls += 1
        expect(isinstance(context, int) and 1 <= context <= self.max_context,
               f"added() was asked about context {context!r}: contexts are whole tokens from 1 to max_context "
               f"({self.max_context:,})")
        expect(self.calls <= self.budget,
               f"more than {self.budget} calls of added() for max_context = {self.max_context:,}: each one is a "
               f"full plan; halve the interval at each call (bisection) instead of stepping through it")
        return 0 if context < self.threshold else 1 + (context - self.threshold) // 1000


def check_bisection(first_context_adding_an_accelerator):
    """On made-up deployments: the exact first context at which an accelerator is added, with at most
    ⌈log2(max_context)⌉ + 2 calls of added(), wherever that context lies (1, a power of two or not, max_context)."""
    for max_context in (1, 4096, 131072, 1_000_000):
        for threshold in sorted({1, 2, 777, 4096, 4097, 65537, max_context // 3 or 1, max_context}):
            if threshold > max_context:
                continue
            added = Counted(threshold, max_context)
            got = call(first_context_adding_an_accelerator, added, max_context,
                       what=f"first_context_adding_an_accelerator(added, {max_context:,})")
            expect(got == threshold,
                   f"max_context {max_context:,}: the first context with an accelerator added is {threshold:,} tokens "
                   f"(added({threshold - 1:,}) = 0, added({threshold:,}) = 1); you return {got!r}")


def check_none_when_never(first_context_adding_an_accelerator):
    """None when even max_context adds no accelerator (a made-up deployment and a real one)."""
    for max_context in (1, 131072):
        added = Counted(max_context + 1, max_context)
        got = call(first_context_adding_an_accelerator, added, max_context,
                   what=f"first_context_adding_an_accelerator(added, {max_context:,})")
        expect(got is None, f"max_context {max_context:,}: the cache adds no accelerator even at max_context, so the "
                            f"answer is None; you return {got!r}")
    model, acc, batch, kv = NEVER
    got = call(first_context_adding_an_accelerator, added_by_kv(model, acc, batch, kv), load_model(model).max_context,
               what=f"first_context_adding_an_accelerator(<{model} on {acc}>, ...)")
    expect(got is None, f"{model} on {acc}, batch {batch}: its cache never adds an accelerator; you return {got!r}")
    # None for every deployment is not the answer: the same search must still find a context that exists.
    added = Counted(131072 // 3, 131072)
    got = call(first_context_adding_an_accelerator, added, 131072,
               what="first_context_adding_an_accelerator(added, 131,072)")
    expect(got == 131072 // 3, f"max_context 131,072: the first context with an accelerator added is "
                               f"{131072 // 3:,} tokens, so the answer is not None there; you return {got!r}")


def check_real_deployments(first_context_adding_an_accelerator):
    """On the calculator's own plans (Llama 3.1 70B on H100, Llama 3.1 8B on L4 with an fp8 cache, Qwen3 8B on
    H100): added(T) > 0 at the context you return, and added(T − 1) == 0."""
    for model, acc, batch, kv in DEPLOYMENTS:
        added, max_context = added_by_kv(model, acc, batch, kv), load_model(model).max_context
        label = f"{model} on {acc}, batch {batch}, KV {kv}"
        got = call(first_context_adding_an_accelerator, added, max_context,
                   what=f"first_context_adding_an_accelerator(<{label}>, {max_context:,})")
        expect(isinstance(got, int) and not isinstance(got, bool) and 1 <= got <= max_context,
               f"{label}: expected a context in 1 … {max_context:,} tokens, got {got!r}")
        expect(added(got) != 0, f"{label}: at {got:,} tokens the cache adds no accelerator yet")
        expect(got == 1 or added(got - 1) == 0,
               f"{label}: at {got - 1:,} tokens the cache already adds {added(got - 1)}: {got:,} is not the first")


LESSON = Lesson(
    package="part1_capacity.exercises.one_more_accelerator",
    reference=("part1_capacity.exercises.one_more_accelerator.reference",),
    checks=(
        Check("bisection", "first_context_adding_an_accelerator", check_bisection, 2),
        Check("none_when_never", "first_context_adding_an_accelerator", check_none_when_never, 1),
        Check("real_deployments", "first_context_adding_an_accelerator", check_real_deployments, 2),
    ),
)
"""The exercise's contract: the notebook's test cells, tests/autograder and the checks' own tests all read it."""
ALL = LESSON.table()

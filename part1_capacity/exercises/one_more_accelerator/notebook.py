"""Spec of the Part 1 exercise "the context that needs one more accelerator" (see course/grading/notebook_spec.py). Run
`make notebooks` after editing."""
from course.grading.notebook_spec import code, given, graded, md, solution
from part1_capacity.exercises.one_more_accelerator import checks

ASSIGNMENT = "p1_02_one_more_accelerator"
NOTEBOOK = "one_more_accelerator.ipynb"
AUTOGRADER = "tests/autograder/test_one_more_accelerator.py"
SRC = "part1_capacity/exercises/one_more_accelerator/reference.py"

CELLS = [
    md(r"""
# Part 1 · Exercise 2 — The context at which a deployment needs one more accelerator

A deployment sized for the weights has some memory left beside them; the KV cache fills it as the context grows.
At some context the cache no longer fits and the plan needs another accelerator — the first accelerator that exists
only because of the cache. A capacity planner asks exactly this: *up to what context does this deployment hold,
and what does the next step cost?*

You will find that context with the calculator itself, asking it as few questions as possible. About 20 minutes.
"""),
    code("""
from part1_capacity.exercises.one_more_accelerator import checks
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.plan.plan import Workload, make_plan
"""),
    md(r"""
## 1. One question: how many accelerators does the cache add?

`added_by_kv(model, accelerator, batch, kv_dtype)` is given: it returns a function of the context `T` that runs the
calculator's full plan (`capacity plan`) and returns `accelerators_added_by_kv` — 0 while the cache fits beside
the weights, then 1, 2, … (None if nothing fits at all). It never decreases as `T` grows.
"""),
    given(SRC, ["added_by_kv"]),
    code("""
added = added_by_kv("llama-3.1-70b", "h100", batch=8)
for T in (8192, 32768, 65536, 131072):
    print(f"{T:>7,} tokens: the KV cache adds {added(T)} H100")
"""),
    md(r"""
## 2. The first context that adds one

Write `first_context_adding_an_accelerator(added, max_context)`: the smallest `T` in `1 … max_context` with
`added(T) != 0`, or `None` when even `max_context` adds none. Each call of `added` is a whole plan, so do not step
through the contexts one by one: **bisect**. Keep an interval whose lower end adds nothing and whose upper end
adds something, and halve it at every question — about $\log_2(\text{max\_context})$ calls, 17 for 128K tokens.
"""),
    solution(SRC, ["first_context_adding_an_accelerator"], grade_id="first_context_impl"),
    *graded(checks.LESSON, "bisection", "none_when_never", "real_deployments"),
    md(r"""
## 3. Read it off for real deployments

At the context you find, the cache of the whole batch has just outgrown the memory left beside the weights. A
cheaper KV dtype moves the step out; a larger batch pulls it in:
"""),
    code("""
for model, acc, batch, kv in (("llama-3.1-70b", "h100", 8, "bf16"), ("llama-3.1-70b", "h100", 8, "fp8"),
                              ("llama-3.1-70b", "h100", 32, "bf16"), ("qwen3-8b", "h100", 32, "bf16")):
    T = first_context_adding_an_accelerator(added_by_kv(model, acc, batch, kv), load_model(model).max_context)
    if T is None:
        print(f"{model} on {acc}, {batch} sequences, KV {kv}: no accelerator added up to the longest context")
        continue
    p = make_plan(model, acc, Workload(context=T, batch=batch, kv_dtype=kv))
    print(f"{model} on {acc}, {batch} sequences, KV {kv}: from {T:,} tokens the cache "
          f"({p.kv_bytes_total / 2**30:,.1f} GiB) adds an accelerator: {p.accelerators_without_kv} → "
          f"{p.accelerators_needed}")
"""),
]

"""What the rule tests of learner checks share: the message a check fails with, how a check labels an
implementation that raised (the learner reads that label, so the tests pin it exactly), and how a message that
states a measured number is matched: by the rule it states, the number read back and compared within a tolerance
(its last printed digits depend on the CPU's float rounding and BLAS kernels), the words around it exactly."""
import math
import re

import pytest

from course.grading.contract import CheckFailed

BOOM = "raised RuntimeError: boom"   # a check's words for a call that raised RuntimeError("boom")

# A number as a check prints it (`:g`, `:.3g`, `:.2f`, `:,`): sign, digits, decimal point, exponent, nan, inf.
NUMBER = r"[-+]?(?:nan|inf|(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)"


def message(check, impl) -> str:
    """The message ``check(impl)`` fails with (the test fails if the check passes)."""
    with pytest.raises(CheckFailed) as err:
        check(impl)
    return str(err.value)


def figures(text: str, template: str, *, prefix: bool = False) -> list[float]:
    """The numbers ``text`` states where ``template`` has ``{}``, its other words matched exactly (``prefix``: the
    text may go on after the template). Fails, showing both, if the words differ."""
    parts = template.split("{}")
    pattern = f"({NUMBER})".join(map(re.escape, parts)) + (".*" if prefix else "")
    found = re.fullmatch(pattern, text, flags=re.S)
    assert found, f"message {text!r}\n does not read as {template!r}"
    return [float(g.replace(",", "")) for g in found.groups()]


def states(text: str, template: str, *expected: float, rel: float = 0.02, prefix: bool = False) -> bool:
    """Whether ``text`` reads as ``template`` with each ``{}`` a number within ``rel`` of ``expected`` (in order).
    The default 2 % is far wider than float32 rounding between CPUs and far narrower than any rule's margin."""
    got = figures(text, template, prefix=prefix)
    assert len(got) == len(expected), f"{template!r} has {len(got)} numbers, {len(expected)} expected"
    for g, want in zip(got, expected):
        assert math.isclose(g, want, rel_tol=rel), f"message {text!r}\n states {g:g} where {want:g} ± {rel:.0%} is due"
    return True


# The degenerate implementations every lesson's checks must give 0 points in total (tests/part0/*/test_meaning.py).
DEGENERATE_KINDS = ["zeros", "ones", "echo", "uniform", "random", "constant", "identity", "noise"]


def lesson_points(lesson, impls: dict) -> tuple[int, dict]:
    """Grade ``impls`` (check name → implementation) in-process against a lesson's contract: the points earned and,
    per failed check id, its message."""
    earned, messages = 0, {}
    for c in lesson.checks:
        try:
            c.fn(impls[c.name])
            earned += c.points
        except CheckFailed as exc:
            messages[c.id] = str(exc)
    return earned, messages

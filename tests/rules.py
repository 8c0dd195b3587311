"""What the rule tests of learner checks share: the message a check fails with, and how a check labels an
implementation that raised (the learner reads that label, so the tests pin it exactly)."""
import pytest

from course.grading import CheckFailed

BOOM = "raised RuntimeError: boom"   # a check's words for a call that raised RuntimeError("boom")


def message(check, impl) -> str:
    """The message ``check(impl)`` fails with (the test fails if the check passes)."""
    with pytest.raises(CheckFailed) as err:
        check(impl)
    return str(err.value)

"""What a check raises when the learner's code does not pass it — below both the grading helpers
(``course.grading.contract``, which re-exports these names) and the channel to the learner's process (``course.grading.proxy``,
which raises ``Delegated`` when a forbidden implementation is reached on the learner's side)."""
from __future__ import annotations


class CheckFailed(AssertionError):
    """A check did not pass; the message is written for the learner."""


class Delegated(CheckFailed):
    """The learner's code reached a ready-made implementation its lesson forbids (``course.grading.method``)."""

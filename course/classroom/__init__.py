"""A class on nbgrader (``python -m course.classroom``), the student build and the timing of a class's grading.
Imports ``shared``, ``machine`` and ``grading``, never ``site``."""

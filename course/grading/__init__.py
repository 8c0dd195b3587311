"""Grading learner code: the checks' base and lesson contract, the notebook spec, the grader's and the learner's
processes, the sandbox and the channel between them. Imports ``shared`` and ``machine``, nothing above."""

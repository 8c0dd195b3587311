"""nbgrader configuration for the course (instructor side).

solutions/ holds the nbgrader *source* notebooks, exercises/ the *release* notebooks that
`nbgrader generate_assignment` makes from them. The gradebook, submitted/ and autograded/
live under the course root and stay out of git (see .gitignore).
"""
import os

c = get_config()  # noqa: F821  (provided by nbgrader)

c.CourseDirectory.root = os.environ.get("COURSE_ROOT", os.path.dirname(os.path.abspath(__file__)))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.course_id = "inference-memory"
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", os.path.join(c.CourseDirectory.root, "nbgrader_root", "exchange"))
# Training cells in some lessons take longer than the default 30 s.
c.ExecutePreprocessor.timeout = 300
c.Execute.timeout = 300

# Autograding runs the learner's notebook in a separate, limited process and the checks from each lesson's contract
# (course/grading/autograde.py), not the test cells in a kernel beside the learner's code: a notebook cannot patch the
# checks, the references or torch, write to the course, or stop the grader. Per-check limit in seconds:
# `nbgrader autograde ... --IsolatedExecute.check_timeout=60`.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades)

from course.grading.autograde import nbgrader_preprocessor  # noqa: E402

c.Autograde.autograde_preprocessors = [
    nbgrader_preprocessor(), IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
    AssignLatePenalties, CheckCellMetadata,
]

# A class (course/classroom/nbgrader_ext.py): no checksum warning for a hidden check's cell as released; feedback HTML with
# MathJax inside the page (reads offline) and hidden checks shown as their rule and result only.
from nbgrader.preprocessors import ClearOutput, DeduplicateIds, OverwriteKernelspec  # noqa: E402
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import GetGrades  # noqa: E402

from course.classroom.nbgrader_ext import (HiddenChecksAsRules, LmsCollector, OfflineFeedback, QuietOverwriteCells,  # noqa: E402
                                 TextOnly, register_missing_assignment, sqlite_busy_timeout)

c.Autograde.sanitize_preprocessors = [TextOnly, ClearOutput, DeduplicateIds, OverwriteKernelspec,
                                      QuietOverwriteCells, CheckCellMetadata]
c.GenerateFeedback.exporter_class = OfflineFeedback
c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, HiddenChecksAsRules]

# Plain `nbgrader autograde <lesson>` works on a course whose gradebook lacks the assignment (`make notebooks` releases
# in a throw-away course): the assignment is registered from solutions/ first, once, under a lock on the gradebook's
# folder, so several autogrades may start at once (e.g. `--CourseDirectory.student_id='s[123]'` and `'s[456]'` in two
# terminals). Gradebook writes wait for each other (SQLite's busy timeout) instead of failing after 5 s.
c.Autograde.pre_convert_hook = register_missing_assignment
sqlite_busy_timeout()

# `nbgrader zip_collect` (and `python -m course.classroom zip-collect`): an LMS's zip of every submission in
# downloaded/<assignment>/archive/, Moodle's layout by default; another LMS: set FileNameCollectorPlugin.named_regexp.
c.ZipCollectApp.collector_plugin = LmsCollector

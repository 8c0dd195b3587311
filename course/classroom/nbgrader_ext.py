"""nbgrader set-up for a class (used by nbgrader_config.py): quiet hidden-check cells, feedback that reads offline.

- ``QuietOverwriteCells``: a hidden check's test cell is released without its hidden region, so nbgrader's
  checksum of it never matches the source's and every submission logged a warning. The cell is put back from the
  gradebook exactly as before; a warning is left for cells a learner really changed.
- ``OfflineFeedback``: nbgrader's feedback HTML loads MathJax 2 from a CDN (raw LaTeX offline). This exporter puts
  MathJax 3 (the ``django-static-mathjax`` wheel the site uses, SVG output: no font files) inside the page, so the one
  HTML file nbgrader's exchange hands a student renders its math with no network.
- ``TextOnly``: the first step of ``nbgrader autograde``: a lone surrogate (half an emoji) in a submission is read
  as U+FFFD, as the grader reads it, so nbgrader can write the notebook back.
- ``HIDDEN_FEEDBACK``: feedback shows a hidden check's cell as its rule (the comment above the hidden region) and its
  result (the cell's output), not the code that runs it.
- ``LmsCollector``: ``nbgrader zip_collect``'s collector for the zip of every submission an LMS hands out (Moodle's
  layout by default); what it leaves out is logged one line each.
- ``register_missing_assignment``: ``nbgrader autograde``'s pre-convert hook. ``make notebooks`` releases in a
  throw-away course, so the course's gradebook has no assignment until ``python -m course.classroom register``; an
  autograde of an assignment the gradebook lacks registers it first (from solutions/, as register does), once, under
  a lock: two autogrades started at once (two terminals, two student-id patterns) both grade.
- ``sqlite_busy_timeout``: every SQLite connection of the process waits for another process's write to the gradebook
  (up to ``GRADEBOOK_BUSY_S``) instead of pysqlite's 5 s, after which nbgrader gives up on the whole run.
"""
from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import sys
import time
import unicodedata
from functools import lru_cache
from pathlib import Path

from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbgrader.plugins import FileNameCollectorPlugin
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells
from nbgrader import utils
from traitlets import Bool, List, default

from course.classroom.nbgrader_class import ClassroomError, register
from course.grading.notebook_spec import SKIPPED
from course.shared.text import text_only_tree

# nbconvert's base/mathjax.html.j2 macro: a CDN script and a MathJax 2 configuration, between these comments.
_MATHJAX_BLOCK = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
MATHJAX_CONFIG = ("window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], "
                  "displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true, processEnvironments: true}, "
                  "svg: {fontCache: 'global'}};")


@lru_cache(maxsize=1)
def mathjax_js() -> str:
    """MathJax 3's single-file TeX → SVG build, from the installed wheel."""
    # mathjax (the django-static-mathjax package, 3 MB of JavaScript): loaded only when feedback is written
    import mathjax  # the django-static-mathjax package

    path = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5" / "tex-svg-full.js"
    if not path.exists():
        raise RuntimeError(f"MathJax not found at {path}: reinstall django-static-mathjax (requirements.txt)")
    js = path.read_text(encoding="utf-8")
    if "</script" in js.lower():
        raise RuntimeError(f"{path} cannot be inlined in a page: it contains a closing script tag")
    return js


def offline_mathjax(html: str) -> str:
    """``html`` with nbconvert's CDN MathJax block replaced by MathJax 3 inside the page."""
    inline = f"<script>{MATHJAX_CONFIG}</script>\n<script>{mathjax_js()}</script>"
    return _MATHJAX_BLOCK.sub(lambda _: inline, html)


class OfflineFeedback(HTMLExporter):
    """nbgrader's feedback HTML, with MathJax inside the page."""

    def from_notebook_node(self, nb, resources=None, **kw):
        html, resources = super().from_notebook_node(nb, resources, **kw)
        return offline_mathjax(html), resources


class TextOnly(Preprocessor):
    """nbgrader's first step on a submission: every lone surrogate (half an emoji, which UTF-8 cannot encode) in the
    notebook becomes U+FFFD, so nbgrader can write the notebook it grades (it stopped with UnicodeEncodeError)."""

    enabled = Bool(True, help="nbconvert runs a preprocessor only when it is enabled").tag(config=True)

    def preprocess(self, nb, resources):
        # nbformat (nbgrader's, its JSON schemas): loaded only when nbgrader runs this preprocessor
        from nbformat import from_dict

        return from_dict(text_only_tree(nb)), resources


class HiddenChecksAsRules(ClearHiddenTests):
    """Feedback: a hidden check's cell keeps its rule and its result, not the code between the hidden markers."""

    # The HTML exporter configures `display_data_priority` for every NbConvertBase; nbgrader's preprocessors carry
    # it without the config tag, so traitlets warned "not recognized by HiddenChecksAsRules" on every
    # generate_feedback. Declared configurable here (as nbgrader's own GetGrades does), with nbgrader's default.
    display_data_priority = List(["text/html", "application/pdf", "text/latex", "image/svg+xml", "image/png",
                                  "image/jpeg", "text/plain"]).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and self.begin_test_delimeter in cell.source:
            self._remove_hidden_test_region(cell)
        return cell, resources


def _released(source: str) -> str:
    """A test cell's source as the release shows it: without its hidden region (nbgrader's own rule)."""
    # nbformat (its JSON schemas): loaded only when a notebook is read or written
    from nbformat.v4 import new_code_cell

    cell = new_code_cell(source)
    ClearHiddenTests()._remove_hidden_test_region(cell)
    return cell.source.rstrip("\n")


class QuietOverwriteCells(OverwriteCells):
    """nbgrader's OverwriteCells, silent about a hidden check's cell that is exactly as it was released."""

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and utils.is_locked(cell):
            try:
                source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id).source
            except Exception:  # a cell unknown to the gradebook: nbgrader reports it below
                source = None
            if source and "### BEGIN HIDDEN TESTS" in source and cell.source.rstrip("\n") == _released(source):
                cell.source = source
        return super().preprocess_cell(cell, resources, cell_index)


# Moodle's "Download all submissions", one folder per student and plugin (mod/assign/locallib.php,
# download_submissions: the full name with "_" made " ", "_", the participant's number, "_assignsubmission_file_").
MOODLE_LAYOUT = r".*/(?P<student_id>[^/_]+)_(?P<participant>[0-9]+)_assignsubmission_file_/(?P<file_id>[^/]+)$"
MOODLE_EXAMPLE = "<Full Name>_<number>_assignsubmission_file_/<notebook>"


class LmsCollector(FileNameCollectorPlugin):
    """Each extracted file of an LMS's download → its student (the full name, in Unicode's composed form, so a name
    typed on another system is the same id) and notebook. A file outside the layout, a file that is not a notebook,
    and a second participant with a name already collected are left out with one line each; a notebook of another
    name is collected, and grading names it."""

    @default("named_regexp")
    def _moodle(self):
        return MOODLE_LAYOUT

    def collect(self, submitted_file):
        where = os.path.relpath(submitted_file, self.parent.coursedir.root)
        m = re.match(self.named_regexp, submitted_file)
        if m is None:
            self.log.warning("%s%snot in the LMS's layout (%s)", where, SKIPPED, MOODLE_EXAMPLE)
            return None
        info = {k: v for k, v in m.groupdict().items() if v is not None}
        info["student_id"] = unicodedata.normalize("NFC", info["student_id"])
        student, name = info["student_id"], info["file_id"]
        if os.path.splitext(name)[1] not in self.valid_ext:
            self.log.warning("%s%s%s is not a notebook (allowed: %s)", student, SKIPPED, name, ", ".join(self.valid_ext))
            return None
        seen = self.__dict__.setdefault("_participants", {})
        number = info.get("participant")
        if seen.setdefault(student, number) != number:
            self.log.warning("%s%sa second participant of this name (number %s; number %s is collected): grade it "
                             "by hand", student, SKIPPED, number, seen[student])
            return None
        return info


GRADEBOOK_BUSY_S = 120.0   # how long a gradebook write waits for another process's (SQLite's busy timeout)
GRADEBOOK_LOCK_S = 600.0   # how long an autograde waits for another one registering an assignment


def _busy_timeout(dbapi_connection, _record):
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.execute(f"PRAGMA busy_timeout = {int(GRADEBOOK_BUSY_S * 1000)}")


def sqlite_busy_timeout() -> None:
    """Every SQLite connection SQLAlchemy opens in this process (nbgrader's gradebook) waits up to
    ``GRADEBOOK_BUSY_S`` for a lock another process holds. Idempotent."""
    # sqlalchemy (nbgrader's database, half a second to import): only when the gradebook is opened
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _busy_timeout):
        event.listen(Engine, "connect", _busy_timeout)


class _Refusal(SystemExit):
    """One line in nbgrader's log, then exit 1: a SystemExit passes nbgrader's per-submission ``except Exception``
    (which would log a traceback and go on to "No assignment ... exists in the database")."""


def _refuse(log, line: str):
    log.error("%s", line)
    raise _Refusal(1)


def _calling_converter():
    """The nbgrader converter running this hook: nbgrader calls a hook with the assignment pattern, the student
    pattern and the notebooks only, and the gradebook's URL and the course root are the converter's."""
    # nbgrader (seconds to import): this hook runs inside nbgrader, which has it loaded already
    from nbgrader.converters.base import BaseConverter

    frame = sys._getframe(1)
    while frame is not None:
        conv = frame.f_locals.get("self")
        if isinstance(conv, BaseConverter):
            return conv
        frame = frame.f_back
    return None


class _FolderLock:
    """An exclusive flock on a folder (the gradebook's): no file is made, and SQLite's own locks on the database
    file (POSIX record locks) are not touched by opening or closing it."""

    def __init__(self, folder: str, log, step: str):
        self.folder, self.log, self.step = folder, log, step

    def __enter__(self):
        self.fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        deadline = time.monotonic() + GRADEBOOK_LOCK_S
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    _refuse(self.log, f"{self.step}: another nbgrader process has held the gradebook's lock on "
                                      f"{self.folder} for {GRADEBOOK_LOCK_S:g} s; stop it, then run this again")
                time.sleep(0.2)

    def __exit__(self, *exc):
        os.close(self.fd)  # releases the flock
        return False


_REGISTERED: set = set()  # (db_url, assignment) known to be in the gradebook, per process


def register_missing_assignment(assignment=None, student=None, notebooks=None):
    """``c.Autograde.pre_convert_hook``: before a submission is graded, the gradebook gets its assignment if it has
    none (registered from the course's solutions/ by course.classroom.nbgrader_class.register, the gradebook created if there is
    none). Under an exclusive lock on the gradebook's folder, so two autogrades at once register it once and the
    second finds it. An assignment already in the gradebook is left exactly as it is."""
    # nbgrader and sqlalchemy (seconds to import): loaded only when an assignment is registered
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.engine import make_url

    conv = _calling_converter()
    if conv is None or not notebooks:
        return
    cd, log = conv.coursedir, conv.log
    regexp = conv._format_source("(?P<assignment_id>.*)", "(?P<student_id>.*)", escape=True)
    m = re.match(regexp, os.path.dirname(notebooks[0]))
    aid = m.group("assignment_id") if m else assignment
    if (cd.db_url, aid) in _REGISTERED:
        return
    step = f"nbgrader autograde {aid}: registering {aid} in the gradebook"
    url = make_url(cd.db_url)
    db_file = url.database if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") else None
    folder = os.path.dirname(os.path.abspath(db_file)) if db_file else cd.root
    with _FolderLock(folder, log, step):
        missing = True
        if not db_file or os.path.exists(db_file):  # (a new gradebook is made by register: nbgrader runs alembic)
            try:
                with Gradebook(cd.db_url, cd.course_id) as gb:
                    gb.find_assignment(aid)
                missing = False
            except MissingEntry:
                pass
        if missing:
            source = os.path.normpath(cd.format_path(cd.source_directory, ".", aid))
            if not os.path.isdir(source):
                _refuse(log, f"{step}: the gradebook has no assignment {aid} and there is no source folder {source} "
                             f"to register it from; run `make notebooks` (it writes solutions/) first")
            log.info("%s: not in %s yet; registering it from %s", aid, cd.db_url, source)
            try:
                register(Path(cd.root), [aid], db_url=cd.db_url)
            except ClassroomError as exc:
                _refuse(log, f"{step}: {exc}; run `nbgrader generate_assignment {aid}` first")
            except RuntimeError as exc:
                why = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                _refuse(log, f"{step} failed: {why[-1] if why else exc}; "
                             f"`python -m course.classroom register {aid}` shows the whole log")
    _REGISTERED.add((cd.db_url, aid))

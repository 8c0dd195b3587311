"""A class on nbgrader: register every assignment, grade a class on every core, export each check's points.

    python -m course.classroom register                       # every assignment into the course's gradebook.db
    python -m course.classroom autograde 01_attention --jobs 2
    python -m course.classroom export-checks                  # checks.csv: student, assignment, check, points, max
    python -m course.classroom zip-collect 01_attention       # an LMS's zip in downloaded/01_attention/archive/

The course root is the folder of nbgrader_config.py (``COURSE_ROOT`` overrides it, as in nbgrader_config.py).
Grading runs real ``nbgrader autograde``, one student per process, ``--jobs`` at a time: the integrity check hashes
only the grader's own files (course.grading.autograde.GRADING_INPUTS), so gradings of different students may overlap.
Bad input (an unknown assignment, no submission, a file that is not a notebook, another lesson's notebook) is one
line naming the student and the file; the other students are graded as usual. ``zip-collect`` runs real
``nbgrader zip_collect`` with the course's collector (course.classroom.nbgrader_ext.LmsCollector: Moodle's layout) and says
in one line each what it left out.
"""
from __future__ import annotations

import argparse
import csv
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from course.grading.notebook_spec import REPO, SKIPPED, all_specs, nbgrader_cmd
from course.shared.text import printable
from course.grading.grade_worker import NotebookError, read_cells


class ClassroomError(ValueError):
    """Bad input for a class operation; the message is one line naming the field and what is allowed."""


def course_root() -> Path:
    return Path(os.environ.get("COURSE_ROOT", REPO)).resolve()


def notebooks() -> dict[str, str]:
    """assignment id → the notebook file a submission of it holds."""
    return {s.ASSIGNMENT: s.NOTEBOOK for s in all_specs()}


def check_assignment(assignment: str) -> str:
    known = notebooks()
    if assignment not in known:
        raise ClassroomError(f"assignment: unknown id {assignment!r}; one of: {', '.join(sorted(known))}")
    return known[assignment]


def _env(root: Path) -> dict:
    """nbgrader's environment: this course root, this grader, and this interpreter's tools (alembic) on PATH."""
    env = dict(os.environ, COURSE_ROOT=str(root))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def register(root: Path, assignments: list[str] | None = None, db_url: str | None = None) -> list[str]:
    """Record every assignment (its notebook, cells and points) in ``root``'s gradebook.db (or ``db_url``), as
    nbgrader's generate_assignment does, without touching ``root``'s exercises/. Safe to repeat: an assignment already
    there is updated in place."""
    ids = assignments or sorted(notebooks())
    for a in ids:
        check_assignment(a)
    db = db_url or f"sqlite:///{root / 'gradebook.db'}"
    with tempfile.TemporaryDirectory(prefix="register-") as tmp:
        shutil.copytree(root / "solutions", Path(tmp) / "solutions")
        shutil.copy(root / "nbgrader_config.py", Path(tmp) / "nbgrader_config.py")
        # One nbgrader process for every assignment (its start-up is most of the time).
        script = ("import sys\nfrom nbgrader.apps.nbgraderapp import NbGraderApp\n"
                  "from nbgrader.apps.api import NbGraderAPI\n"
                  "app = NbGraderApp(); app.initialize([]); app.config.CourseDirectory.db_url = sys.argv[1]\n"
                  "api = NbGraderAPI(config=app.config)\n"
                  "for a in sys.argv[2:]:\n"
                  "    r = api.generate_assignment(a, force=True)\n"
                  "    if not r['success']:\n"
                  "        sys.exit(f'{a}: ' + (r.get('error') or '') + (r.get('log') or '')[-2000:])\n")
        env = dict(_env(Path(tmp)), NBGRADER_EXCHANGE=str(Path(tmp) / "exchange"))
        proc = subprocess.run([sys.executable, "-c", script, db, *ids], cwd=tmp, env=env, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"registering failed: {proc.stderr.strip()[-3000:]}")
    return ids


@dataclass
class Submission:
    student: str
    folder: Path
    problem: str = ""  # why it cannot be graded, or ""


def submissions(root: Path, assignment: str) -> list[Submission]:
    """Every ``submitted/<student>/<assignment>/`` folder, each with what stops it being graded (if anything)."""
    nb_name = check_assignment(assignment)
    sub = root / "submitted"
    folders = sorted(p for p in sub.glob(f"*/{glob.escape(assignment)}") if p.is_dir()) if sub.is_dir() else []
    if not folders:
        raise ClassroomError(f"submitted/: no submission of {assignment} (expected "
                             f"submitted/<student>/{assignment}/{nb_name})")
    by_notebook = {n: a for a, n in notebooks().items()}
    out = []
    for folder in folders:
        s = Submission(folder.parent.name, folder)
        nb = folder / nb_name
        if s.student != s.student.strip():
            s.problem = f"the student folder's name {s.student!r} starts or ends with a space (nbgrader strips it): rename it"
        elif not nb.is_file():
            found = sorted(x.name for x in folder.glob("*.ipynb"))
            other = [by_notebook[f] for f in found if f in by_notebook]
            s.problem = (f"holds {found[0]}, lesson {other[0]}'s notebook, not {nb_name}" if other else
                         f"no {nb_name} in it (found: {', '.join(found) or 'no notebook'})")
        else:
            try:
                read_cells(str(nb))
            except NotebookError as exc:
                s.problem = f"{nb_name}: {exc}"
        out.append(s)
    return out


@dataclass
class Outcome:
    student: str
    graded: bool
    line: str
    warnings: list[str] = field(default_factory=list)


def _autograde_one(root: Path, assignment: str, s: Submission, extra: list[str]) -> Outcome:
    if s.problem:
        return Outcome(s.student, False, printable(f"{s.student}: not graded: {s.problem}"))
    cmd = nbgrader_cmd() + ["autograde", assignment, "--student", glob.escape(s.student), "--force", *extra]
    proc = subprocess.run(cmd, cwd=root, env=_env(root), capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    # nbgrader's warnings (a test cell the student changed, a missing cell), but not its routine re-grade notice.
    warnings = [printable(f"{s.student}: {ln.split('WARNING]', 1)[1].strip()}") for ln in log.splitlines()
                if "| WARNING]" in ln and "Removing existing assignment" not in ln]
    if proc.returncode == 0:
        return Outcome(s.student, True, "", warnings)
    void = [ln for ln in log.splitlines() if "grade void" in ln]
    broke = [ln for ln in log.splitlines() if "grader error for " in ln]
    why = void[0].split("grade void for ", 1)[1].split(": ", 1)[-1] if void else \
        "the grader failed, not the notebook: " + broke[0].split("(nothing about the notebook): ", 1)[-1] if broke else \
        next((ln for ln in reversed(log.splitlines()) if "Error" in ln or "error" in ln), log.strip()[-300:])
    return Outcome(s.student, False, f"{s.student}: not graded (nbgrader exited {proc.returncode}): "
                                     f"{printable(why.strip())}", warnings)


def scores(root: Path, assignment: str) -> dict[str, tuple[float, float]]:
    """student → (score, max score) of ``assignment``, from the gradebook."""
    # nbgrader (Jupyter and SQLAlchemy behind it, seconds to import): loaded only where the gradebook is used
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {s.student_id: (s.score, s.max_score) for s in gb.assignment_submissions(assignment)}


def autograde(root: Path, assignment: str, jobs: int = 2, extra: list[str] = ()) -> list[Outcome]:
    """``nbgrader autograde`` of every submission of ``assignment``, one student per process, ``jobs`` at a time."""
    subs = submissions(root, assignment)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(lambda s: _autograde_one(root, assignment, s, list(extra)), subs))
    got = scores(root, assignment)
    for o in outcomes:
        if o.graded:
            score, top = got[o.student]
            o.line = printable(f"{o.student}: {score:g}/{top:g}")
    return outcomes


@dataclass
class Collected:
    students: list[str]        # whose submission is now in submitted/<student>/<assignment>/
    skipped: list[str]         # one line per file left out


def zip_collect(root: Path, assignment: str) -> Collected:
    """``nbgrader zip_collect`` of the files and zips in ``downloaded/<assignment>/archive/`` into submitted/ (a
    student's earlier submission of it is replaced; nobody else's is touched)."""
    check_assignment(assignment)
    archive = root / "downloaded" / assignment / "archive"
    if not archive.is_dir() or not any(archive.iterdir()):
        raise ClassroomError(f"downloaded/{assignment}/archive/: no file in it; allowed: the LMS's download of "
                             f"every submission (a .zip, or its folders)")
    cmd = nbgrader_cmd() + ["zip_collect", assignment, "--force"]
    proc = subprocess.run(cmd, cwd=root, env=_env(root), capture_output=True, text=True)
    log = (proc.stdout + proc.stderr).splitlines()
    if proc.returncode != 0:
        why = next((ln for ln in reversed(log) if "ERROR" in ln or "Error" in ln), log[-1] if log else "")
        raise ClassroomError(f"downloaded/{assignment}/: nbgrader zip_collect exited {proc.returncode}: {why.strip()}")
    submitted = (root / "submitted").resolve()
    students = sorted({Path(ln.split("Copying to:", 1)[1].strip()).resolve().relative_to(submitted).parts[0]
                       for ln in log if "Copying to:" in ln
                       and Path(ln.split("Copying to:", 1)[1].strip()).resolve().is_relative_to(submitted)})
    skipped = [ln.split("] ", 1)[-1].strip() for ln in log if SKIPPED in ln]
    if not students:
        raise ClassroomError(f"downloaded/{assignment}/archive/: no submission of {assignment} in it"
                             + (f" ({'; '.join(skipped)})" if skipped else ""))
    return Collected(students, skipped)


CSV_FIELDS = ["student", "assignment", "notebook", "check", "points", "max_points"]


def check_rows(root: Path) -> list[dict]:
    """One row per student × graded check (nbgrader grade cell) × assignment, from the gradebook."""
    # nbgrader (Jupyter and SQLAlchemy behind it, seconds to import): loaded only where the gradebook is used
    from nbgrader.api import Gradebook

    rows = []
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for a in gb.assignments:
            for sub in gb.assignment_submissions(a.name):
                for nb in sub.notebooks:
                    for g in sorted(nb.grades, key=lambda g: g.name):
                        if g.cell_type == "code":
                            rows.append(dict(student=printable(sub.student_id), assignment=printable(a.name),
                                             notebook=printable(nb.name), check=printable(g.name), points=g.score,
                                             max_points=g.max_score))
    return rows


def export_checks(root: Path, out: Path) -> int:
    rows = check_rows(root)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        w.writerows(rows)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course.classroom", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("register", help="record every assignment in the course's gradebook (safe to repeat)")
    r.add_argument("assignment", nargs="*")
    g = sub.add_parser("autograde", help="nbgrader autograde every submission of an assignment, in parallel")
    g.add_argument("assignment")
    g.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="gradings at a time (default: every core)")
    e = sub.add_parser("export-checks", help="each check's points per student (CSV)")
    e.add_argument("--out", default="checks.csv")
    z = sub.add_parser("zip-collect", help="nbgrader zip_collect an LMS's zip of submissions into submitted/")
    z.add_argument("assignment")
    args, extra = ap.parse_known_args(argv)
    if extra and args.cmd != "autograde":
        ap.error(f"unrecognized arguments: {' '.join(extra)}")
    root = course_root()
    try:
        if args.cmd == "register":
            for a in register(root, args.assignment or None):
                print(f"{a}: in {root / 'gradebook.db'}")
        elif args.cmd == "autograde":
            if args.jobs < 1:
                raise ClassroomError(f"--jobs: {args.jobs}; allowed: a whole number of at least 1")
            outcomes = autograde(root, args.assignment, args.jobs, extra)
            for o in outcomes:
                for w in o.warnings:
                    print(w, file=sys.stderr)
                print(o.line, file=sys.stdout if o.graded else sys.stderr)
            return 0 if all(o.graded for o in outcomes) else 1
        elif args.cmd == "zip-collect":
            got = zip_collect(root, args.assignment)
            for s in got.students:
                print(f"{s}: collected into submitted/{s}/{args.assignment}/")
            for line in got.skipped:
                print(line, file=sys.stderr)
            return 1 if got.skipped else 0
        else:
            n = export_checks(root, Path(args.out))
            print(f"{args.out}: {n} rows (student, assignment, check)")
    except ClassroomError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The "Do the exercise" block of a lesson page, and how long each exercise takes to run and to grade.

One source for every lesson: the notebook path, the command that opens it and the grading command come from the
lesson's notebook spec (``ASSIGNMENT``, ``NOTEBOOK``, ``AUTOGRADER``, ``CELLS``); the times are measured, never
guessed, by

    .venv/bin/python -m course.exercises            # runs and grades every finished notebook, saves the times

which executes each *solution* notebook with nbconvert (what a learner's finished notebook costs to run) and grades
it with its autograder (what ``pytest ... --notebook`` costs), and saves the seconds with a run record in
``results/course/exercise_times.json``. Seconds are wall-clock on a shared machine: the record gives its load.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course.shared import tables
from course.shared.i18n import DEFAULT, translator
from course.grading.notebook_spec import REPO, all_specs
from course.machine.records import run_record
from course.shared.saved_runs import RESULTS

TIMES = RESULTS / "exercise_times.json"


def notebook_path(spec, lang: str = DEFAULT) -> str:
    """The release notebook a learner opens, relative to the repository: ``exercises/<assignment>/<notebook>``
    (the Korean course's: ``exercises/ko/<assignment>/<notebook>``)."""
    folder = "exercises" if lang == DEFAULT else f"exercises/{lang}"
    return f"{folder}/{spec.ASSIGNMENT}/{spec.NOTEBOOK}"


def answer_names(spec) -> list[str]:
    """The functions and classes the learner writes: the top-level definitions of the spec's answer cells."""
    names = []
    for cell in spec.CELLS:
        if cell.kind == "solution":
            names += [n.name for n in ast.parse(cell.source).body
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return names


def open_command(spec, lang: str = DEFAULT) -> str:
    return f".venv/bin/jupyter lab {notebook_path(spec, lang)}"


def grade_command(spec, lang: str = DEFAULT) -> str:
    return f".venv/bin/pytest {spec.AUTOGRADER} --notebook {notebook_path(spec, lang)}"


def saved_times() -> dict:
    """The saved measurement ({} when none has been run)."""
    return json.loads(TIMES.read_text()) if TIMES.exists() else {}


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


def time_sentence(spec, times: dict | None = None, lang: str = DEFAULT) -> str:
    """How long the finished notebook takes to run and to grade, from the saved measurement."""
    tr = translator(lang)
    times = saved_times() if times is None else times
    t = times.get("exercises", {}).get(spec.ASSIGNMENT)
    if not t:
        return tr("(not timed yet: `.venv/bin/python -m course.exercises` measures it)")
    rec = times["record"]
    return tr("Measured on {cpus} cores ({cpu}, load average {load}, {date}): the finished notebook runs in "
              "**{run}** and grading it takes **{grade}**.", cpus=rec["host"]["cpus"], cpu=rec["host"]["cpu"],
              load=f"{rec['load_average_at_start']:.1f}", date=rec["date_utc"], run=_seconds(t["run_s"]),
              grade=_seconds(t["grade_s"]))


def exercise_block(spec, times: dict | None = None, lang: str = DEFAULT) -> str:
    """The Markdown admonition that ends a lesson page (links are relative to a page one folder below site/);
    in Korean it names the Korean notebook."""
    tr = translator(lang)
    nb = notebook_path(spec, lang)
    names = ", ".join(f"`{n}`" for n in answer_names(spec))
    return (f'!!! example "{tr("Do the exercise")}"\n\n    '
            + tr("Open [`{nb}`](../{nb}) (in a clone of the course; the link downloads it), write {names} in the "
                 "cells marked `YOUR CODE HERE` and run the test cells under each. Then grade the whole notebook:",
                 nb=nb, names=names) + "\n\n"
            f"    ```bash\n"
            f"    {open_command(spec, lang)}    # " + tr("as root: add --allow-root") + "\n"
            f"    {grade_command(spec, lang)}\n"
            f"    ```\n\n"
            f"    {time_sentence(spec, times, lang)} "
            + tr("Each check is a test of its own; a failure says what to fix.") + "\n")


def exercise_table(pages: dict[str, str], times: dict | None = None, lang: str = DEFAULT) -> str:
    """A Markdown table of every exercise: lesson page (``pages``: assignment → page path relative to site/),
    notebook, what you write, and the measured seconds to run and to grade it."""
    tr = translator(lang)
    times = saved_times() if times is None else times
    rows = tables.head(tr("| lesson | notebook | you write | runs in | grades in |"))
    for spec in all_specs():
        t = times.get("exercises", {}).get(spec.ASSIGNMENT)
        page = pages.get(spec.ASSIGNMENT)
        lesson = f"[{spec.ASSIGNMENT}]({page})" if page else spec.ASSIGNMENT
        run, grade = (_seconds(t["run_s"]), _seconds(t["grade_s"])) if t else ("—", "—")
        nb = notebook_path(spec, lang)
        rows.append(tables.row(lesson, f"[`{nb}`]({nb})", ", ".join(f"`{n}`" for n in answer_names(spec)), run, grade))
    if times:
        rec = times["record"]
        rows += ["", tr("Seconds measured by `{command}` on {date}: the finished (solution) notebook executed with "
                        "nbconvert, then graded with its autograder, on {cpus} cores ({cpu}) at a load average of "
                        "{load} — a shared machine, so an idle one is faster.", command=rec["command"],
                        date=rec["date_utc"], cpus=rec["host"]["cpus"], cpu=rec["host"]["cpu"],
                        load=f"{rec['load_average_at_start']:.1f}")]
    return "\n".join(rows) + "\n"


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - t0


def measure() -> dict:
    """Run and grade every finished (solution) notebook; the seconds of each, with one run record."""
    bin_dir = Path(sys.executable).parent
    out = {"record": run_record(["-m", "course.exercises"], program="python"), "exercises": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in all_specs():
            solved = f"solutions/{spec.ASSIGNMENT}/{spec.NOTEBOOK}"
            run_s = _timed([str(bin_dir / "jupyter"), "nbconvert", "--to", "notebook", "--execute", solved,
                            "--output-dir", tmp])
            grade_s = _timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", spec.AUTOGRADER,
                              "--notebook", solved])
            out["exercises"][spec.ASSIGNMENT] = {"run_s": round(run_s, 1), "grade_s": round(grade_s, 1)}
            print(f"{spec.ASSIGNMENT}: runs in {run_s:.1f} s, grades in {grade_s:.1f} s", flush=True)
    return out


def main() -> None:
    """``python -m course.exercises``: measure every exercise and save the times."""
    result = measure()
    TIMES.parent.mkdir(exist_ok=True)
    TIMES.write_text(json.dumps(result, indent=1) + "\n")
    print(f"saved {TIMES.relative_to(REPO)}")


if __name__ == "__main__":
    main()

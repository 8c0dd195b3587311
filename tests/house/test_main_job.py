"""`make run` installs no llama.cpp (only `make test` builds it): the calculator's answer and the site's Part 1
generators must work on a machine without llama_cpp, whatever the engine experiments import when they run; and
on a machine without a CJK font it builds the English site, saying so in one line, never with a traceback."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# llama_cpp made unimportable, as in a venv where `make run` installed the stack without it.
_WITHOUT_LLAMA = """
import importlib, pathlib, sys
sys.modules["llama_cpp"] = None
sys.path.insert(0, sys.argv[1])
from part1_capacity.cli import main
assert main(["compare"]) == 0
sys.path.insert(0, sys.argv[1] + "/tools")
import build_site
for name in build_site.generators():
    if name.startswith("part1_capacity"):
        out = pathlib.Path(sys.argv[2]) / name
        out.mkdir(parents=True)
        importlib.import_module(name).build(out)
"""


def test_calculator_and_part1_site_generators_run_without_llama_cpp(tmp_path):
    done = subprocess.run([sys.executable, "-c", _WITHOUT_LLAMA, str(REPO), str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bottleneck" in done.stdout


# --- `make run` on a machine without a CJK font: the English site, said in one line, never a traceback ------------

sys.path.insert(0, str(REPO / "tools"))
import build_site  # noqa: E402
import main_job  # noqa: E402

from course.shared import i18n  # noqa: E402


def test_without_a_cjk_font_the_site_is_english_and_says_so_once(monkeypatch, capsys):
    # setenv, not delenv: choose_languages writes the variable itself, and only a recorded setenv is undone after the
    # test (a leaked "false" made a later site build in the same process English only). "" means both languages.
    monkeypatch.setenv(i18n.SITE_KO_ENV, "")
    monkeypatch.setattr(i18n, "has_figure_fonts", lambda: False)
    assert build_site.choose_languages() == ("en",)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and i18n.CJK_PACKAGE in lines[0] and "English site only" in lines[0], lines
    assert i18n.site_languages() == ("en",)          # the generators' workers and mkdocs.yml read the same variable
    # the figures then use DejaVu Sans alone, without raising
    import matplotlib

    with matplotlib.rc_context():
        i18n.use_figure_fonts()
        assert list(matplotlib.rcParams["font.family"]) == i18n.FIGURE_FONTS[:1]


def test_with_a_cjk_font_both_languages_are_built_silently(monkeypatch, capsys):
    monkeypatch.setenv(i18n.SITE_KO_ENV, "")
    monkeypatch.setattr(i18n, "has_figure_fonts", lambda: True)
    assert build_site.choose_languages() == i18n.LANGS and "ko" in i18n.LANGS
    assert capsys.readouterr().out == ""


def test_a_korean_build_without_the_font_names_the_package(monkeypatch):
    # asked for both languages (the tests' site build) on a machine without the font: refused, naming the package
    monkeypatch.setenv(i18n.SITE_KO_ENV, "")
    monkeypatch.setattr(i18n, "has_figure_fonts", lambda: False)
    with pytest.raises(RuntimeError, match=f"install Debian's {i18n.CJK_PACKAGE}"):
        i18n.use_figure_fonts()


@pytest.mark.parametrize("value, langs", [("false", ("en",)), ("0", ("en",)), ("true", None), ("", None)])
def test_site_languages_read_the_variable(monkeypatch, value, langs):
    monkeypatch.setenv(i18n.SITE_KO_ENV, value)
    assert i18n.site_languages() == (langs or i18n.LANGS)


def test_a_failing_step_is_one_line_and_its_exit_code(capsys):
    steps = {"calculator": [sys.executable, "-c", "pass"],
             "site": [sys.executable, "-c", "import sys; sys.exit(3)"],
             "never": [sys.executable, "-c", "raise SystemExit('must not run')"]}
    assert main_job.main([], steps) == 3
    err = capsys.readouterr().err
    assert err == "main_job: the site step failed (exit 3); its own messages are above\n"
    assert main_job.main(["calculator"], steps) == 0
    assert main_job.main(["nope"], steps) == 2
    assert capsys.readouterr().err == ("main_job: unknown step 'nope'; the steps are: calculator, site, never, next, "
                                       "serve\n")


def test_a_failing_generator_is_one_line_naming_it(monkeypatch, tmp_path, capsys):
    """A generator that raises stops the site build with one line naming its module and its error, not a traceback
    (a missing Korean text stopped `make run` this way); mkdocs is not reached."""
    import types

    fake = types.ModuleType("fake_sitegen")
    fake.NAME = "fake"

    def build(out):
        raise i18n.MissingTranslation("no ko translation of 'x' in site.toml")

    fake.build = build
    monkeypatch.setitem(sys.modules, "fake_sitegen", fake)
    monkeypatch.setattr(build_site, "REPO", tmp_path)
    monkeypatch.setattr(build_site, "generators", lambda: iter(["fake_sitegen"]))
    monkeypatch.setattr(build_site, "choose_languages", lambda: ("en",))
    real_run = build_site.subprocess.run

    def run(cmd, *a, **k):   # the font lookup runs fc-list through subprocess too; only mkdocs must not run
        assert "mkdocs" not in cmd, "mkdocs ran after a failing generator"
        return real_run(cmd, *a, **k)

    monkeypatch.setattr(build_site.subprocess, "run", run)
    monkeypatch.setattr(sys, "argv", ["build_site.py"])
    assert build_site.main() == 1
    out, err = capsys.readouterr()
    assert err == ("build_site: a generator failed, fake_sitegen: MissingTranslation: "
                   "no ko translation of 'x' in site.toml\n"), err
    assert "Traceback" not in out + err


# --- the way on after `make run`: the README's first screen, the printed next steps, `make serve` ----------------

README = (REPO / "README.md").read_text(encoding="utf-8")


def test_make_run_ends_with_the_next_steps_the_readme_shows():
    make = (REPO / "Makefile").read_text()
    run = make.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert run.rstrip().endswith("tools/main_job.py next"), run
    first_screen = README.split("\n## ", 3)[2]             # "Then, by who you are", right after "Two commands"
    assert first_screen.startswith("Then, by who you are"), first_screen[:80]
    for who, command, _ in main_job.NEXT:
        assert command in first_screen, f"the README's first screen lacks the {who or 'learner'} line {command!r}"
        assert command in main_job.next_steps()
    # a wrong README (the command edited) is caught by the same check
    assert ".venv/bin/capacity plan --model llama-3.1-70b" in first_screen


def test_the_engineer_command_runs_as_written():
    """The README's engineer line, split as a shell splits it, is a working `capacity plan` (exit 0, a table)."""
    import shlex

    from part1_capacity.cli import main

    command = next(c for who, c, _ in main_job.NEXT if who == "engineer")
    argv = shlex.split(command)
    assert argv[0] == ".venv/bin/capacity"       # the form every page uses (pyproject's console script in .venv)
    assert main(argv[1:]) == 0


def _code_lines(text: str):
    """Each line of a fenced block, and each inline code span, of a Markdown text."""
    import re

    code = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            code = not code
        elif code:
            yield line.strip().removeprefix("$ ")
        else:
            yield from re.findall(r"`([^`]+)`", line)


@pytest.mark.parametrize("page", ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "site").rglob("*.md")
                                                   if "generated" not in p.parts)])
def test_every_capacity_command_is_written_as_it_runs(page):
    """`capacity` is on no PATH after set-up: every page writes it `.venv/bin/capacity` (runnable as written from the
    clone's folder), never bare."""
    bare = [c for c in _code_lines((REPO / page).read_text(encoding="utf-8"))
            if c.startswith("capacity ") or " -- capacity " in c]
    assert not bare, f"{page}: write .venv/bin/capacity: {bare[:3]}"


def test_the_bare_command_check_catches_one():
    assert list(_code_lines("run `capacity plan --model x`\n```bash\ncapacity compare\n```\n")) == \
        ["capacity plan --model x", "capacity compare"]


def test_serve_serves_the_site_on_localhost_and_names_make_run_without_one(tmp_path, capsys):
    import threading
    import urllib.request

    assert main_job.serve(tmp_path / "none") == 2
    assert capsys.readouterr().err == (f"serve: no built site in {tmp_path / 'none'}: run `make run` (or `make site`) "
                                       f"first\n")
    (tmp_path / "index.html").write_text("<p>home</p>")
    (tmp_path / "m.mjs").write_text("export const x = 1;")
    httpd = main_job.make_server(tmp_path, 0)
    host, port = httpd.server_address
    assert host == "127.0.0.1"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=10) as r:
            assert r.read() == b"<p>home</p>"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/m.mjs", timeout=10) as r:
            # a module script is refused by the browser unless served as JavaScript (Pyodide's pyodide.asm.mjs)
            assert r.headers["Content-Type"].split(";")[0] in ("text/javascript", "application/javascript")
    finally:
        httpd.shutdown()
        httpd.server_close()

"""`make doctor` (course/machine/doctor.py) tells a missing component from a present one, in a made-up clone and cache."""
import subprocess

from course.machine import doctor

REPO = doctor.REPO


def by_name(components):
    return {c.name: c for c in components}


def make_entry(cache, name, done):
    entry = cache / name
    (entry / "build" / "bin").mkdir(parents=True)
    bench = entry / "build" / "bin" / "llama-bench"
    bench.write_text("#!/bin/sh\n")
    bench.chmod(0o755)
    if done:
        (entry / "done").write_text("")
    return entry


def fake_venv(repo, names):
    site = repo / ".venv" / "lib" / "python3.11" / "site-packages"
    for n in names:
        (site / f"{n}-1.0.dist-info").mkdir(parents=True)


def test_an_empty_clone_and_cache_report_everything_built_as_missing(tmp_path):
    repo, cache = tmp_path / "clone", tmp_path / "cache"
    repo.mkdir()
    cache.mkdir()
    c = by_name(doctor.check(repo, cache))
    for name in ("Python stack (.venv)", "llama.cpp cache", "llama.cpp (llama_cpp + build)", "llama-bench",
                 "matmul-bench", "Pyodide"):
        assert not c[name].ok, name
    assert c["llama.cpp cache"].detail == f"{cache}: empty"
    assert c["Python stack (.venv)"].detail == "no .venv"
    text = doctor.render(list(c.values()))
    assert "MISSING llama.cpp cache" in text and "install: make llama (compiles once per machine)" in text


def test_a_clone_linked_to_a_complete_cache_entry_is_ready(tmp_path):
    repo, cache = tmp_path / "clone", tmp_path / "cache"
    entry = make_entry(cache, "0123456789abcdef", done=True)
    (repo / "build").mkdir(parents=True)
    (repo / "build" / "llama.cpp").symlink_to(entry / "build")
    fake_venv(repo, doctor.CORE_PACKAGES + ("llama_cpp_python",))
    c = by_name(doctor.check(repo, cache))
    for name in ("Python stack (.venv)", "llama.cpp cache", "llama.cpp (llama_cpp + build)", "llama-bench"):
        assert c[name].ok, (name, c[name].detail)
    assert c["llama.cpp cache"].detail == f"{cache}: 1 complete build(s)"
    assert not c["matmul-bench"].ok


def test_an_unfinished_entry_or_a_missing_package_is_not_ready(tmp_path):
    repo, cache = tmp_path / "clone", tmp_path / "cache"
    entry = make_entry(cache, "0123456789abcdef", done=False)    # a build that was interrupted
    (repo / "build").mkdir(parents=True)
    (repo / "build" / "llama.cpp").symlink_to(entry / "build")
    fake_venv(repo, doctor.CORE_PACKAGES[1:])                     # no torch, no llama_cpp
    c = by_name(doctor.check(repo, cache))
    assert not c["llama.cpp cache"].ok and c["llama.cpp cache"].detail.endswith("only an unfinished build")
    assert not c["llama.cpp (llama_cpp + build)"].ok
    assert "(gone or unfinished)" in c["llama.cpp (llama_cpp + build)"].detail
    assert "llama_cpp not installed" in c["llama.cpp (llama_cpp + build)"].detail
    assert not c["Python stack (.venv)"].ok and c["Python stack (.venv)"].detail == "missing torch"


def test_the_doctor_looks_in_the_cache_the_makefile_builds_into(tmp_path, monkeypatch):
    monkeypatch.delenv("LLAMA_CACHE", raising=False)
    for var in ("MAKEFLAGS", "MAKELEVEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    made = subprocess.run(["make", "-s", "--no-print-directory", "print-llama-cache"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(doctor.default_cache()) == str(tmp_path / "inference-memory-course" / "llama")


def test_pyodide_is_found_by_the_stamp_the_makefile_writes(tmp_path, monkeypatch):
    """After `make pyodide` (a step of `make run`) the doctor says Pyodide is there: it looks for the very file the
    Makefile's pyodide rule touches last, asked of make itself."""
    for var in ("MAKEFLAGS", "MAKELEVEL"):
        monkeypatch.delenv(var, raising=False)
    made = subprocess.run(["make", "-s", "--no-print-directory", "print-pyodide-stamp"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    stamp = made.stdout.strip()
    assert stamp.startswith("build/pyodide/.done-pyodide@"), stamp
    assert doctor.pyodide_stamp(REPO) == REPO / stamp
    repo = tmp_path / "clone"
    (repo / "build" / "pyodide").mkdir(parents=True)
    (repo / "build" / "pyodide" / ".done").write_text("")        # the name the doctor once looked for: not the stamp
    assert not by_name(doctor.check(repo, tmp_path / "cache"))["Pyodide"].ok
    (repo / stamp).write_text("")
    assert by_name(doctor.check(repo, tmp_path / "cache"))["Pyodide"].ok

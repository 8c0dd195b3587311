"""The sandbox around learner code: bubblewrap's namespaces and read-only view of the course (stubbed references, no
checks), Linux Landlock inside (no writes outside one folder, no TCP, no signals to other processes), and the
clean-up that leaves no process behind.

Used by ``course.grading.grade_worker`` (the grader's process, which starts the learner's process) and ``course.grading.learner``
(which confines itself); see ``course.grading.autograde``.
"""
from __future__ import annotations

import ast
import ctypes
import os
import shutil
import signal
import site
import subprocess
import sys

# Linux syscall numbers (the same on x86_64 and aarch64) and Landlock constants, from linux/landlock.h.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_FS_WRITE_FILE, _FS_READ_FILE = 1 << 1, 1 << 2
_FS_WRITES_V1 = (1 << 1) | (1 << 4) | (1 << 5) | sum(1 << b for b in range(6, 13))  # write, remove, make *
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is not available."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    v = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(v), 0)


def confine_writes(writable: list[str], scope_signals: bool = True) -> int:
    """Forbid, for this process and its children, irrevocably: writing, creating, deleting or renaming files
    outside ``writable``; TCP (ABI ≥ 4); signals to processes outside (ABI ≥ 6, unless ``scope_signals`` is False:
    the grader's process keeps the right to kill the sandbox it started). Returns the Landlock ABI used
    (0: not available, nothing was confined)."""
    abi = landlock_abi()
    if abi == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    fs = _FS_WRITES_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
                        (_SCOPE_ABSTRACT_UNIX_SOCKET | (_SCOPE_SIGNAL if scope_signals else 0)) if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in writable:
            is_dir = os.path.isdir(path)
            allowed = fs if is_dir else (_FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0))
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(allowed, pfd)
                if libc.syscall(_SYS_ADD_RULE, fd, 1, ctypes.byref(rule), 0) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)
    return abi


# --- bubblewrap: the learner's process in its own namespaces, seeing only what a notebook may read --------------------
# Folders of the repository a notebook may read (read-only): the course's packages and the published configs a Part 1
# exercise reads. Not solutions/, exercises/, tests/ (other than those configs), .git, nor any course root.
READABLE = ("course", "part0_foundations", "part1_capacity", "tests/data/configs")
STUB_NOTE = "This file is not available while grading: the checks run in the grader, outside your notebook."


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox here (not installed, or no user namespaces), or None when it can."""
    exe = bwrap_path()
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    probe = subprocess.run([exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--", "/bin/true"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here ({(probe.stderr or '').strip()[:200]})"
    return None


def _python_dirs() -> list[str]:
    """The Python environment: the virtual environment, the interpreter it was made from, what they link to, and the
    site-packages folders its path files add (a virtual environment that extends another one)."""
    out = []
    candidates = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    candidates += [p for p in sys.path if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")]
    try:
        candidates += site.getsitepackages()
    except AttributeError:
        pass
    for p in candidates:
        if not p or not os.path.isdir(p):
            continue
        p = os.path.realpath(p)
        if p.endswith("/bin"):
            p = os.path.dirname(p)
        if not any(p == q or p.startswith(q + "/") for q in out):
            out = [q for q in out if not q.startswith(p + "/")] + [p]
    return out


def bwrap_argv(repo: str, view_files: dict[str, str], scratch: str, fds: list[int], disk_bytes: int | None = None,
               files: dict[str, str] | None = None) -> list[str]:
    """The bubblewrap command line: new user, PID, network, IPC, UTS and cgroup namespaces; a private /tmp, then the
    system's programs and libraries, the Python environment and the readable course folders read-only (after /tmp, so
    an environment or a clone under /tmp stays visible); ``view_files`` (path in the repository → file shown instead:
    stubs) over them; ``scratch`` the only writable folder (also its home and TMPDIR): a tmpfs of ``disk_bytes`` when
    given (the grading's disk, in memory, counted in its cgroup), else the host folder itself; ``files`` (path inside
    → host file) shown read-only in it; killed with its parent."""
    argv = [bwrap_path(), "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sandbox"]
    # /tmp first: a tmpfs mounted after the environment's binds would hide an environment under /tmp.
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += (["--size", str(int(min(disk_bytes, TMP_BYTES)))] if disk_bytes else []) + ["--tmpfs", "/tmp"]
    for top in ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for p in _python_dirs():
        if not p.startswith("/usr/"):
            argv += ["--ro-bind", p, p]
    for rel in READABLE:
        src = os.path.join(repo, rel)
        if os.path.isdir(src):
            argv += ["--ro-bind", src, src]
    for dirpath, dirnames, _ in os.walk(repo):
        if "__pycache__" in dirnames:  # compiled copies of the reference modules
            argv += ["--tmpfs", os.path.join(dirpath, "__pycache__"),
                     "--remount-ro", os.path.join(dirpath, "__pycache__")]
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in ("build", "node_modules")]
    for dest, src in sorted(view_files.items()):
        argv += ["--ro-bind", src, os.path.join(repo, dest)]
    if disk_bytes:
        argv += ["--size", str(int(disk_bytes)), "--perms", "0700", "--tmpfs", scratch]
    else:
        argv += ["--bind", scratch, scratch]
    for dest, src in sorted((files or {}).items()):
        argv += ["--ro-bind", src, dest]
    argv += ["--chdir", scratch, "--setenv", "HOME", scratch, "--setenv", "TMPDIR", scratch]
    return argv


TMP_BYTES = 16 << 20  # the sandbox's /tmp (Landlock leaves it read-only where the kernel has Landlock)


def stub_module(text: str, note: str = STUB_NOTE) -> str:
    """``text`` (a reference module) with each ``### BEGIN SOLUTION``…``### END SOLUTION`` region replaced by a line
    that raises NotImplementedError: the rest of the module (the parts a notebook is given) stays as it is."""
    lines = text.splitlines()
    if not any(line.strip() == "### BEGIN SOLUTION" for line in lines):
        raise ValueError("a reference module without ### BEGIN SOLUTION regions: nothing marks what to hide")
    out, skipping = [], False
    for line in lines:
        stripped = line.strip()
        if stripped == "### BEGIN SOLUTION":
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}raise NotImplementedError({note!r})")
            skipping = True
        elif stripped == "### END SOLUTION":
            skipping = False
        elif not skipping:
            out.append(line)
    if skipping:
        raise ValueError("a ### BEGIN SOLUTION region has no ### END SOLUTION")
    return "\n".join(out) + "\n"


def stub_checks(text: str, given: tuple[str, ...]) -> str:
    """A lesson's checks module as the sandbox shows it: its imports and the helpers ``given`` to notebooks (with the
    module-level constants they use), no checks."""
    tree = ast.parse(text)
    keep = [f'"""{STUB_NOTE}"""']
    if not given:
        return keep[0] + "\n"
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.append(ast.get_source_segment(text, node))
    used = set()
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in given]
    for d in defs:
        used |= {n.id for n in ast.walk(d) if isinstance(n, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in used for t in node.targets):
            keep.append(ast.get_source_segment(text, node))
    keep += [ast.get_source_segment(text, d) for d in defs]
    return "\n\n".join(keep) + "\n"


def kill_descendants(root_pid: int | None = None) -> int:
    """SIGKILL every process descended from ``root_pid`` (default: this process), found in /proc; how many. With this
    process a child subreaper, a double fork does not escape the search."""
    root_pid = root_pid or os.getpid()
    killed = 0
    for _ in range(5):
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read().decode("ascii", "replace")
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        found, todo = [], list(children.get(root_pid, []))
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += children.get(pid, [])
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        for pid in found:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
    return killed


def become_subreaper() -> None:
    """Orphans of the processes this one starts become its children (Linux), so none outlives grading unseen."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER

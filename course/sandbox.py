"""Limits for a process that runs learner code: memory and file-size limits, no writes outside one folder, no
signals to other processes, no TCP (Linux Landlock), and a seal that puts back every module attribute the learner
changed.

Used by ``course.grade_worker`` (the process that runs a learner's notebook and the checks). The process that starts
it never runs learner code; see ``course.autograde``.
"""
from __future__ import annotations

import ctypes
import os
import resource
import sys
from dataclasses import dataclass, field

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


def confine_writes(writable: list[str]) -> int:
    """Forbid, for this process and its children, irrevocably: writing, creating, deleting or renaming files
    outside ``writable``; TCP (ABI ≥ 4); signals to processes outside (ABI ≥ 6). Returns the Landlock ABI used
    (0: not available, nothing was confined)."""
    abi = landlock_abi()
    if abi == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    fs = _FS_WRITES_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
                        (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
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


def limit_resources(memory_bytes: int, file_bytes: int) -> None:
    """Address-space and file-size limits (inherited by children); no core dumps."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# --- the seal: module and class attributes as they were before any learner code ran ---------------------------------
_MISSING = object()
SYS_HOOKS = ("stdout", "stderr", "stdin", "excepthook", "displayhook", "breakpointhook")


@dataclass
class Seal:
    modules: dict = field(default_factory=dict)   # name -> (module, copy of its __dict__)
    classes: dict = field(default_factory=dict)   # class -> copy of its __dict__
    sys_attrs: dict = field(default_factory=dict)

    @classmethod
    def take(cls, roots: tuple[str, ...]) -> "Seal":
        """Copy the namespace of every loaded module under ``roots`` (and builtins), and of the classes they define."""
        import warnings

        seal = cls()
        with warnings.catch_warnings():  # reading deprecated module attributes warns
            warnings.simplefilter("ignore")
            seal._collect(roots)
        seal.sys_attrs = {k: getattr(sys, k) for k in SYS_HOOKS}
        return seal

    def _collect(self, roots):
        seal = self
        for name, mod in list(sys.modules.items()):
            if mod is None or (name.split(".")[0] not in roots and name != "builtins"):
                continue
            d = getattr(mod, "__dict__", None)
            if not isinstance(d, dict):
                continue
            seal.modules[name] = (mod, dict(d))
            for v in list(d.values()):
                if isinstance(v, type) and getattr(v, "__module__", None) == name and v not in seal.classes:
                    try:
                        seal.classes[v] = dict(vars(v))
                    except TypeError:
                        pass

    def restore(self) -> list[str]:
        """Put back every sealed attribute that was replaced or deleted, and remove attributes added to sealed
        classes. Returns what was put back ("module.name")."""
        changed = []
        for name, (mod, saved) in self.modules.items():
            if sys.modules.get(name) is not mod:
                sys.modules[name] = mod
                changed.append(f"sys.modules[{name!r}]")
            cur = mod.__dict__
            for k, v in saved.items():
                if cur.get(k, _MISSING) is not v:
                    cur[k] = v
                    changed.append(f"{name}.{k}")
        for klass, saved in self.classes.items():
            cur = vars(klass)
            for k in [k for k in cur if k not in saved]:
                try:
                    delattr(klass, k)
                    changed.append(f"{klass.__module__}.{klass.__qualname__}.{k}")
                except (AttributeError, TypeError):
                    pass
            for k, v in saved.items():
                if cur.get(k, _MISSING) is not v:
                    try:
                        setattr(klass, k, v)
                        changed.append(f"{klass.__module__}.{klass.__qualname__}.{k}")
                    except (AttributeError, TypeError):
                        pass
        for k, v in self.sys_attrs.items():
            if getattr(sys, k) is not v:
                setattr(sys, k, v)
                changed.append(f"sys.{k}")
        return changed

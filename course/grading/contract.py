"""Helpers shared by every lesson's ``checks`` module, and the lesson contract.

A check is a plain function that takes the learner's implementation and raises ``CheckFailed`` (an
``AssertionError``) with a message that states the rule it tests. Each lesson's ``checks.py`` ends with its contract,
``LESSON = Lesson(...)``: the checks, their ids (also the grade ids of the notebook's test cells), points, which are
hidden, the reference modules, and what the exercise may not delegate (``forbids``: torch's own attention, layers or
quantization, from ``course.grading.method``; a learner call that reaches one fails its check, naming it). The notebook's test cells (``course.grading.notebook_spec.graded``),
``pytest tests/autograder/... --notebook PATH`` and ``nbgrader autograde`` (both through ``course.grading.autograde``) read
it. Learner code that raises, hangs or returns the wrong shape or dtype fails the check with a message.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable

from course.grading.failures import CheckFailed, Delegated  # noqa: F401  (the checks' names for them, since the start)
from course.grading.proxy import ChannelBroken, fetch, type_name
from course.grading import method


class TimedOut(BaseException):
    # BaseException so that a learner's `except Exception:` cannot swallow it; ``owner`` is the limit that ran out.
    def __init__(self, owner=None):
        super().__init__()
        self.owner = owner


@contextlib.contextmanager
def time_limit(seconds: float, what: str = "your code"):
    """Fail with CheckFailed if the block runs longer than ``seconds`` (main thread only; elsewhere no limit).

    A timer already running (pytest-timeout's, an outer limit) is put back afterwards with its remaining time; when
    the outer limit runs out first, the message is the outer limit's."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    start = time.monotonic()
    me = object()
    restored = False

    def restore(rearm_outer: bool = True):
        # Run by the handler as well as on leaving the block: an alarm can fire as the block ends, on entering the
        # context manager's exit, where the exception leaves before this generator's `finally` runs (it would run
        # only when the generator is collected, and then re-arm an outer timer long after its block ended).
        nonlocal restored
        if restored:
            return
        restored = True
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer_left and rearm_outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 1e-3))

    def _raise(signum, frame):
        if outer_left and outer_left < seconds and callable(old):
            restore(rearm_outer=False)  # the outer limit came first: its handler decides (and restores its own)
            return old(signum, frame)
        restore()
        raise TimedOut(me)

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, min(seconds, outer_left) if outer_left else seconds)
    try:
        yield
    except TimedOut as exc:
        if exc.owner is not me:
            raise
        raise CheckFailed(f"{what} did not finish within {seconds:g} s (an infinite loop?)") from None
    finally:
        restore()


def call(fn, *args, what=None, timeout: float = 30.0, **kwargs):
    """Call learner code; turn an exception or a hang into a CheckFailed that names the function."""
    name = what or getattr(fn, "__qualname__", None) or type_name(fn)
    # A stand-in's call is watched in the learner's process (course.grading.proxy); code in this process is watched here.
    local = method.forbidden() and not getattr(type(fn), "_wire_handle", False)
    with time_limit(timeout, name):
        try:
            if not local:
                return fn(*args, **kwargs)
            failure = None
            with method.watch(method.forbidden()) as seen:
                try:
                    out = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - what was reached decides first
                    failure = exc
            if seen:
                raise Delegated(method.message(seen))
            if failure is not None:
                raise failure
            return out
        except NotImplementedError:
            raise CheckFailed(f"{name} is not implemented yet (it raised NotImplementedError)") from None
        except (CheckFailed, TimedOut, ChannelBroken):
            raise
        except BaseException as exc:  # noqa: BLE001 - any learner error (even KeyboardInterrupt) is a message
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            raise CheckFailed(f"{name} raised {tb}") from None


def one_torch_thread(check):
    """Run a check on one torch thread (restored afterwards). The lessons' models are tiny: extra OpenMP threads
    only spin-wait for each other, which on a busy 2-core machine made checks several times slower."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return check(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return run


def expect(condition: bool, message: str):
    """Raise CheckFailed(message) unless ``condition``."""
    if not condition:
        raise CheckFailed(message)


def expect_shape(t, shape, what: str):
    """The tensor/array ``t`` must have exactly ``shape``."""
    got = tuple(getattr(t, "shape", ()))
    expect(hasattr(t, "shape"), f"{what}: expected a tensor of shape {tuple(shape)}, got {type_name(t)}")
    expect(got == tuple(shape), f"{what}: expected shape {tuple(shape)}, got {got}")


def _plain(x, what: str):
    """Learner results are compared as plain tensors/arrays: a subclass could redefine comparison itself."""
    # numpy and torch: loaded only when a result is compared (the grader starts without them)
    import numpy as np
    import torch

    x = fetch(x)  # a learner's tensor read as an attribute (a stand-in): its value
    if isinstance(x, torch.Tensor):
        expect(type(x) in (torch.Tensor, torch.nn.Parameter),
               f"{what}: expected a torch.Tensor, got the subclass {type(x).__name__}")
        return x.detach().cpu().double().numpy()
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
        raise CheckFailed(f"{what}: expected a numpy array, got the subclass {type(x).__name__}")
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise CheckFailed(f"{what}: expected numbers, got {type(x).__name__}") from None


def expect_close(got, want, what: str, atol: float = 1e-5, rtol: float = 1e-5):
    """Element-wise closeness for torch tensors or numpy arrays, with the worst difference in the message. A torch
    result must also have the reference's dtype (float64 where float32 is expected is a mistake, not a pass)."""
    # numpy: loaded only when an array is there (the light path never loads it)
    import numpy as np

    if hasattr(want, "detach") and hasattr(got, "detach") and hasattr(got, "dtype"):
        expect(got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype} (keep the inputs' dtype)")
    g, w = _plain(got, what), _plain(want, what)
    expect(g.shape == w.shape, f"{what}: expected shape {w.shape}, got {g.shape}")
    expect(bool(np.all(np.isfinite(g))), f"{what}: the result contains NaN or inf")
    diff = np.abs(g - w)
    ok = bool(np.all(diff <= atol + rtol * np.abs(w)))
    expect(ok, f"{what}: differs from the reference by up to {diff.max():.3g} (allowed {atol:g} + {rtol:g}·|ref|)")


def same(a, b, atol: float = 1e-4) -> bool:
    """Whether two results are one and the same up to ``atol`` (absolute and relative): equal shapes, and non-finite
    entries in the same places (two ways of overflowing alike are the same mistake)."""
    # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
    import torch

    a, b = fetch(a), fetch(b)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
        return False
    a, b = a.detach().double(), b.detach().double()
    bad_a, bad_b = ~torch.isfinite(a), ~torch.isfinite(b)
    if bool(bad_a.any()) or bool(bad_b.any()):
        return bool(torch.equal(bad_a, bad_b))
    return bool(torch.allclose(a, b, atol=atol, rtol=atol))


def recognise(got, want, mistakes: dict):
    """The key of the first mistake whose own result ``got`` equals, where that result is not ``want``; or None.
    ``mistakes``: key → the result the mistake gives on the same inputs (or a callable computing it)."""
    for key, made in mistakes.items():
        made = made() if callable(made) else made
        if not same(made, want, atol=1e-3) and same(got, made):
            return key
    return None


def expect_close_naming(got, want, what: str, mistakes: dict, atol: float = 1e-5, rtol: float = 1e-5):
    """``expect_close``; on failure, when ``got`` is one mistake's own result, the message names that mistake
    (``mistakes``: the words naming it → its result) instead of a difference: a hint names only a cause committed."""
    try:
        expect_close(got, want, what, atol=atol, rtol=rtol)
    except CheckFailed:
        cause = recognise(got, want, mistakes)
        if cause is None:
            raise
        raise CheckFailed(f"{what}: {cause}") from None


def expect_raises(fn, exc_type, must_mention: str, what: str):
    """``fn()`` must raise ``exc_type`` whose message mentions ``must_mention``."""
    try:
        with time_limit(30, what):
            fn()
    except exc_type as exc:
        expect(
            must_mention in str(exc),
            f"{what}: raised {exc_type.__name__} but the message does not name '{must_mention}': {exc}",
        )
        return
    except (CheckFailed, TimedOut, ChannelBroken):
        raise
    except BaseException as exc:  # noqa: BLE001
        raise CheckFailed(f"{what}: expected {exc_type.__name__} naming '{must_mention}', got {type(exc).__name__}: {exc}") from None
    raise CheckFailed(f"{what}: expected {exc_type.__name__} naming '{must_mention}', but nothing was raised")


# --- the lesson contract: written once per lesson, in its checks.py --------------------------------------------------
@dataclass(frozen=True)
class Check:
    """One graded check. ``id`` is also the grade id of its test cell in the notebook (one check per cell, so the
    points nbgrader records per cell are the points of the check). ``name`` is the learner definition it grades.
    ``allows`` names reference definitions of the lesson that the check itself hands to the learner's code (the
    reference KV caches given to a learner's attention): calling those is not copying the reference."""

    id: str
    name: str
    fn: Callable
    points: int
    hidden: bool = False
    allows: tuple[str, ...] = ()

    @property
    def rule(self) -> str:
        """The rule the check tests: the first paragraph of its docstring, on one line."""
        return " ".join((self.fn.__doc__ or self.id).strip().split("\n\n")[0].split())


@dataclass(frozen=True)
class Lesson:
    """A lesson's contract: its package (learner code may not take the reference from it), the modules holding the
    reference definitions (searched in order) and the checks, in notebook order."""

    package: str
    reference: tuple[str, ...]
    checks: tuple[Check, ...]
    given: tuple[str, ...] = ()  # helpers of the checks module that notebooks import (the sandbox shows only these)
    # What the exercise may not delegate (course.grading.method.CATALOGUE): a check whose learner call reaches one fails.
    forbids: tuple = ()

    def __post_init__(self):
        ids = [c.id for c in self.checks]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.package}: duplicate check ids in {ids}")
        if self.forbids:
            keys = tuple(d.key for d in self.forbids)
            unknown = [k for k in keys if k not in method.CATALOGUE]
            if unknown:
                raise ValueError(f"{self.package}: forbids {unknown}, which course.grading.method.CATALOGUE does not hold")
            object.__setattr__(self, "checks", tuple(dataclasses.replace(c, fn=method.enforcing(c.fn, keys))
                                                     for c in self.checks))

    def ids(self) -> list[str]:
        return [c.id for c in self.checks]

    @property
    def checks_module(self) -> str:
        """The module that defines the checks and this contract."""
        return f"{self.package}.checks"

    def get(self, check_id: str) -> Check:
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(f"{self.package}: no check {check_id!r}; the checks are {self.ids()}")

    def names(self) -> list[str]:
        """The graded definitions, in order."""
        return list(dict.fromkeys(c.name for c in self.checks))

    @property
    def points(self) -> int:
        return sum(c.points for c in self.checks)

    def table(self) -> dict:
        """check id → (graded definition, check function)."""
        return {c.id: (c.name, c.fn) for c in self.checks}

    def reference_definition(self, name: str):
        for mod in self.reference:
            m = importlib.import_module(mod)
            if hasattr(m, name):
                return getattr(m, name)
        raise KeyError(f"{name} is in none of {self.reference}")

    def source_file(self, module: str | None = None) -> str:
        """Repository path of a reference module (the first by default), e.g. for the notebook spec."""
        return (module or self.reference[0]).replace(".", "/") + ".py"

"""Helpers shared by every lesson's ``checks`` module.

A check is a plain function that takes the learner's implementation and raises ``CheckFailed`` (an
``AssertionError``) with a message that tells the learner what to fix. The same checks run in three places:
the nbgrader test cells of the notebooks, ``pytest tests/autograder/... --notebook PATH`` and the reference
tests. Learner code that raises, hangs or returns the wrong shape fails the check with a message; it never
crashes the grader.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import traceback


class CheckFailed(AssertionError):
    """A check did not pass; the message is written for the learner."""


class _Timeout(BaseException):
    # BaseException so that a learner's `except Exception:` cannot swallow it.
    pass


@contextlib.contextmanager
def time_limit(seconds: float, what: str = "your code"):
    """Fail with CheckFailed if the block runs longer than ``seconds`` (main thread only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def _raise(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Timeout:
        raise CheckFailed(f"{what} did not finish within {seconds:g} s (an infinite loop?)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def call(fn, *args, what=None, timeout: float = 30.0, **kwargs):
    """Call learner code; turn an exception or a hang into a CheckFailed that names the function."""
    name = what or getattr(fn, "__qualname__", None) or type(fn).__name__
    with time_limit(timeout, name):
        try:
            return fn(*args, **kwargs)
        except NotImplementedError:
            raise CheckFailed(f"{name} is not implemented yet (it raised NotImplementedError)") from None
        except CheckFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - any learner error becomes a message
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            raise CheckFailed(f"{name} raised {tb}") from None


def one_torch_thread(check):
    """Run a check on one torch thread (restored afterwards). The lessons' models are tiny: extra OpenMP threads
    only spin-wait for each other, which on a busy 2-core machine made checks several times slower."""
    import functools

    @functools.wraps(check)
    def run(*args, **kwargs):
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
    expect(hasattr(t, "shape"), f"{what}: expected a tensor of shape {tuple(shape)}, got {type(t).__name__}")
    expect(got == tuple(shape), f"{what}: expected shape {tuple(shape)}, got {got}")


def expect_close(got, want, what: str, atol: float = 1e-5, rtol: float = 1e-5):
    """Element-wise closeness for torch tensors or numpy arrays, with the worst difference in the message."""
    import numpy as np

    g = got.detach().cpu().double().numpy() if hasattr(got, "detach") else np.asarray(got, dtype=float)
    w = want.detach().cpu().double().numpy() if hasattr(want, "detach") else np.asarray(want, dtype=float)
    expect(g.shape == w.shape, f"{what}: expected shape {w.shape}, got {g.shape}")
    expect(bool(np.all(np.isfinite(g))), f"{what}: the result contains NaN or inf")
    diff = np.abs(g - w)
    ok = bool(np.all(diff <= atol + rtol * np.abs(w)))
    expect(ok, f"{what}: differs from the reference by up to {diff.max():.3g} (allowed {atol:g} + {rtol:g}·|ref|)")


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
    except CheckFailed:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CheckFailed(f"{what}: expected {exc_type.__name__} naming '{must_mention}', got {type(exc).__name__}: {exc}") from None
    raise CheckFailed(f"{what}: expected {exc_type.__name__} naming '{must_mention}', but nothing was raised")

"""The channel between the grader's checks and the learner's process (course/grading/wire.py, course/grading/proxy.py) and the
sandbox's view of the course (course/grading/sandbox.py): plain data only, refused when malformed, the grader's objects
read-only to the learner's side, no reference body and no check in what the sandbox shows."""
import dataclasses
import math
import os
import threading

import numpy as np
import pytest
import torch

from course.grading import proxy, sandbox, wire
from course.grading.notebook_spec import REPO


def _pipe_pair():
    a_r, b_w = os.pipe()
    b_r, a_w = os.pipe()
    return (a_r, a_w), (b_r, b_w)


def _roundtrip(value):
    frame = wire.Encoder(lambda obj, enc: (_ for _ in ()).throw(AssertionError(f"exported {obj!r}"))).frame(value)
    r, w = os.pipe()
    t = threading.Thread(target=wire.write_frame, args=(w, frame))
    t.start()
    tree, blob = wire.read_frame(r)
    t.join()
    os.close(r)
    os.close(w)
    return wire.Decoder(blob, lambda d: None).decode(tree)


def test_plain_values_cross_unchanged():
    values = [torch.arange(12, dtype=dt).reshape(3, 4) for dt in (torch.float32, torch.float64, torch.int8, torch.int64)]
    values += [torch.tensor([1.5, -2.25], dtype=torch.bfloat16), torch.tensor([True, False]), torch.tensor(3.0),
               torch.empty(0, 5), torch.arange(6.0).reshape(2, 3).t()]  # 0-dim, empty, non-contiguous
    for v in values:
        got = _roundtrip(v)
        assert type(got) is torch.Tensor and got.dtype == v.dtype and got.shape == v.shape and torch.equal(got, v), v
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = _roundtrip(arr)
    assert type(got) is np.ndarray and got.dtype == np.float32 and (got == arr).all()
    nested = {"a": (1, 2.5, "x", None, True), 3: [torch.Size([2, 3]), torch.float16, slice(1, None, 2)],
              "n": np.int64(7), "f": np.float32(0.5)}
    got = _roundtrip(nested)
    assert got["a"] == (1, 2.5, "x", None, True) and type(got["a"]) is tuple
    assert got[3][0] == torch.Size([2, 3]) and got[3][1] is torch.float16 and got[3][2] == slice(1, None, 2)
    assert type(got["n"]) is np.int64 and got["n"] == 7 and type(got["f"]) is np.float32 and got["f"] == 0.5
    assert math.isnan(_roundtrip(float("nan"))) and _roundtrip(float("-inf")) == float("-inf")


def test_subclasses_cross_as_the_plain_type():
    """A learner's float, tuple or tensor subclass that redefines comparison arrives as the plain type."""
    class Liar(float):
        def __eq__(self, other):
            return True

    class LyingTuple(tuple):
        def __len__(self):
            return 2

    class LyingTensor(torch.Tensor):
        def __eq__(self, other):
            return True

    got = _roundtrip([Liar(1.0), LyingTuple((1, 2, 3)), torch.zeros(2).as_subclass(LyingTensor)])
    assert type(got[0]) is float and got[0] != 2.0
    assert type(got[1]) is tuple and len(got[1]) == 3
    assert type(got[2]) is torch.Tensor


def _frame_bytes(tree_text: bytes, blob: bytes = b"", magic=wire.MAGIC, n_json=None, n_blob=None):
    return wire.HEADER.pack(magic, len(tree_text) if n_json is None else n_json,
                            len(blob) if n_blob is None else n_blob) + tree_text + blob


@pytest.mark.parametrize("raw, says", [
    (_frame_bytes(b"{}", magic=b"NOTAFRAM"), "frame marker"),
    (_frame_bytes(b"", n_json=wire.MAX_JSON + 1), "bytes of data \\(at most"),
    (_frame_bytes(b"", n_blob=wire.MAX_BLOB + 1), "bytes of tensors \\(at most"),
    (_frame_bytes(b"[" * 100_000), "not JSON"),
])
def test_malformed_frames_are_refused_before_reading(raw, says):
    """A wrong marker or an announced size over the cap is refused from the 24-byte header, before the announced
    bytes are waited for; JSON nested 100 000 deep is an error, not a crash."""
    import time

    r, w = os.pipe()
    t = threading.Thread(target=wire.write_frame, args=(w, raw))
    t.start()
    with pytest.raises(wire.WireError, match=says):
        wire.read_frame(r, deadline=time.monotonic() + 10)
    os.close(r)
    t.join()
    os.close(w)


@pytest.mark.parametrize("tree, says", [
    ({"$t": ["float32", [2, 2], 0, 12, False]}, "with 12 bytes"),          # 4 elements need 16 bytes
    ({"$t": ["float32", [1], 0, 4, False]}, "outside the message"),       # the blob is empty
    ({"$t": ["object", [1], 0, 4, False]}, "dtype"),
    ({"$a": ["float64", [-1], 0, 0]}, "shape"),
    ({"$z": 1}, "unknown or malformed"),
    ({"a": 1, "b": 2, "c": 3}, "not a tagged value"),
])
def test_malformed_values_are_refused(tree, says):
    with pytest.raises(wire.WireError, match=says):
        wire.Decoder(memoryview(b""), lambda d: None).decode(tree)
    deep = 1
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(wire.WireError, match="nested deeper"):
        wire.Decoder(memoryview(b""), lambda d: None).decode(deep)


class GraderObject:
    """Stands for what a check hands to learner code (a reference cache)."""

    def __init__(self):
        self._secret = "reference answer"
        self.weight = torch.ones(3)
        self.appended = []

    def append(self, x):
        self.appended.append(x)
        return x * 2

    def load_state_dict(self, d):
        raise AssertionError("must never be reachable from the learner's side")


def _probe(obj):
    """Learner code: everything it tries on the grader's object, and what happened."""
    out = {}
    for name, act in (("call", lambda: obj.append(torch.full((2,), 3.0))), ("private", lambda: obj._secret),
                      ("dunder", lambda: obj.__init__), ("mutator", lambda: obj.load_state_dict({})),
                      ("setattr", lambda: setattr(obj, "weight", torch.zeros(3))),
                      ("weight", lambda: obj.weight)):
        try:
            out[name] = act()
        except Exception as exc:  # noqa: BLE001
            out[name] = f"{type(exc).__name__}: {exc}"
    w = out["weight"]
    if isinstance(w, torch.Tensor):
        w.zero_()  # a copy: the grader's tensor stays as it is
    return out


def _raiser(kind):
    raise {"value": ValueError("k has the wrong head_dim"), "interrupt": KeyboardInterrupt("stop"),
           "exit": SystemExit(3)}[kind]


@pytest.fixture
def channels():
    (t_r, t_w), (l_r, l_w) = _pipe_pair()
    from part0_foundations.l04_gpt2_int8 import int8

    namespace = {"probe": _probe, "raiser": _raiser, "convert": int8.conv1d_to_linear,
                 "round_trip": int8.int8_round_trip, "new_norm": lambda m: torch.nn.LayerNorm(4)}
    learner = proxy.Channel(l_r, l_w, trusted=False, namespace=namespace, on_call=proxy.learner_call)
    thread = threading.Thread(target=learner.serve_forever, daemon=True)
    thread.start()
    grader = proxy.Channel(t_r, t_w, trusted=True)
    import time

    grader.deadline = time.monotonic() + 60
    yield grader
    # Close the grader's write end first and wait for the learner's thread to see the end of its pipe: an fd closed
    # under a thread still reading it is reused by the next test's pipe, and that stale thread would answer (or
    # swallow) the next test's requests.
    os.close(t_w)
    thread.join(timeout=30)
    assert not thread.is_alive(), "the learner's side did not stop when the grader's end closed"
    for fd in (t_r, l_r, l_w):
        os.close(fd)


def test_the_graders_objects_are_read_only_to_the_learners_side(channels):
    obj = GraderObject()
    out = channels.request("lookup", None, "probe")(obj)
    assert torch.equal(out["call"], torch.full((2,), 6.0)) and len(obj.appended) == 1
    assert "do not show attribute '_secret'" in out["private"]
    assert "do not show attribute '__init__'" in out["dunder"]
    assert out["mutator"].startswith("PermissionError") and "load_state_dict is not available" in out["mutator"]
    assert out["setattr"] == "PermissionError: the grader's objects are read-only"
    assert torch.equal(obj.weight, torch.ones(3)), "the learner's side changed the grader's tensor"


def test_learner_errors_cross_as_messages_never_as_interrupts(channels):
    raiser = channels.request("lookup", None, "raiser")
    with pytest.raises(ValueError, match="k has the wrong head_dim"):
        raiser("value")
    for kind, name in (("interrupt", "KeyboardInterrupt"), ("exit", "SystemExit")):
        with pytest.raises(proxy.RemoteError) as info:
            raiser(kind)
        assert type(info.value).__name__ == name and isinstance(info.value, Exception)
    with pytest.raises(NameError, match="'missing' is not defined"):
        channels.request("lookup", None, "missing")


def test_library_models_cross_by_value_and_come_back_applied(channels):
    """GPT-2 converted in place on the learner's side: the grader's own model object comes back converted, with its
    lm_head the same module, still tied to wte, and the same logits; a copy returned is a new nn.Linear and leaves
    the original alone; a new module of a class the grader does not build is refused."""
    import copy

    from transformers.pytorch_utils import Conv1D

    from part0_foundations.l04_gpt2_int8 import checks as l04, int8

    model = l04._tiny_gpt2()
    expected = int8.conv1d_to_linear(copy.deepcopy(model))  # the same conversion, done here
    head, wte = model.lm_head, model.transformer.wte
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    out = channels.request("lookup", None, "convert")(model)
    assert out is model and model.lm_head is head and model.transformer.wte is wte
    assert model.lm_head.weight is model.transformer.wte.weight
    assert not [m for m in model.modules() if isinstance(m, Conv1D)]
    with torch.no_grad():
        assert torch.equal(model(x).logits, expected(x).logits)
    layer = torch.nn.Linear(6, 4)
    before = layer.weight.detach().clone()
    copy_ = channels.request("lookup", None, "round_trip")(layer)
    assert isinstance(copy_, torch.nn.Linear) and copy_ is not layer and torch.equal(layer.weight.detach(), before)
    assert torch.equal(copy_.weight.detach(), int8.int8_round_trip(layer).weight.detach())
    with pytest.raises(proxy.ChannelBroken, match="a new module of class torch.nn.modules.normalization.LayerNorm"):
        channels.request("lookup", None, "new_norm")(layer)


def test_requests_about_objects_never_handed_over_are_refused():
    """The learner's side naming handle 1 without the grader having handed it over: refused, not looked up."""
    grader = proxy.Channel(-1, -1, trusted=True)
    grader.exports[1] = GraderObject()
    with pytest.raises(PermissionError, match="never handed over"):
        grader._perform("getattr", {"q": "getattr", "h": {"$h": 1}, "n": "append"}, lambda k, d=None: None)


@pytest.mark.parametrize("lesson", ["part0_foundations.l01_attention.checks", "part0_foundations.l05_rag.checks",
                                    "part0_foundations.l03_kv_cache.checks"])
def test_the_sandbox_shows_no_reference_body_and_no_check(lesson, tmp_path):
    import importlib

    from course.grading.grade_worker import build_view, view_spec

    les = importlib.import_module(lesson).LESSON
    view = build_view(view_spec(lesson), str(REPO), str(tmp_path))
    for mod in les.reference:
        original = (REPO / (mod.replace(".", "/") + ".py")).read_text().splitlines()
        inside, outside, region = set(), set(), False
        for line in original:
            mark = line.strip()
            if mark in ("### BEGIN SOLUTION", "### END SOLUTION"):
                region = mark == "### BEGIN SOLUTION"
            elif mark:
                (inside if region else outside).add(mark)
        assert inside, f"{mod} has no solution region"
        text = open(view[mod.replace(".", "/") + ".py"]).read()
        shown = {line.strip() for line in text.splitlines()}
        assert not (inside - outside) & shown, (mod, sorted((inside - outside) & shown)[:5])
        assert text.count("raise NotImplementedError") >= sum(1 for ln in original if ln.strip() == "### BEGIN SOLUTION")
        compile(text, mod, "exec")
    checks = [rel for rel in view if rel.endswith("checks.py")]
    assert len(checks) >= 7
    for rel in checks:
        text = open(view[rel]).read()
        assert "def check_" not in text and "LESSON" not in text, rel


def test_a_helper_given_to_notebooks_stays_in_the_checks_stub(tmp_path):
    from course.grading.grade_worker import build_view, view_spec

    view = build_view(view_spec("part1_capacity.exercises.kv_from_config.checks"), str(REPO), str(tmp_path))
    ns = {"__file__": str(REPO / "part1_capacity/exercises/kv_from_config/checks.py")}
    text = open(view["part1_capacity/exercises/kv_from_config/checks.py"]).read()
    exec(compile(text, "stub", "exec"), ns)  # noqa: S102
    assert ns["read_config"]("gpt2")["n_layer"] == 12  # GPT-2 small: 12 layers (tests/data/configs/gpt2)
    assert "def check_" not in text


def test_bubblewrap_runs_here():
    """The sandbox the grader relies on is installed by set-up (Makefile) and can make namespaces here."""
    assert sandbox.bwrap_problem() is None


def test_an_alarm_that_outlives_its_check_is_a_time_out_not_a_crash(channels):
    """The check's alarm can fire on entering its time limit's exit, after the block ended and before the limit is
    disarmed, where no handler of the limit can catch it (seen with a loop whose channel deadline and alarm fell
    together). The grader's process must record a time-out for that check and go on, not end with a traceback that
    leaves every later check unanswered."""
    from course.grading import grade_worker, contract as grading
    from part0_foundations.l01_attention.checks import LESSON

    def check_whose_alarm_escapes(defn):
        raise grading.TimedOut(object())  # an owner no limit claims: it leaves the check's limit as the race does

    c = next(c for c in LESSON.checks if c.name == "scaled_dot_product_attention")
    fake = dataclasses.replace(c, name="probe", fn=check_whose_alarm_escapes)
    job = {"check_s": 5}
    assert grade_worker._run(fake, channels, job, LESSON, [], grading, proxy) == (False, "")
    assert channels.broken == "timeout", "the learner's fork must be replaced before the next check"


def test_an_alarm_as_the_block_ends_leaves_the_outer_limit_as_it_was():
    """The same race seen from the time limit: an alarm taken outside the limit's own frame (here, raised right after
    entering, as it is when it fires on the way out) must leave the outer limit's handler and timer as they were, now
    and when the abandoned limit is collected, so no later code gets a stray alarm."""
    import gc
    import signal

    from course.grading import contract as grading

    with grading.time_limit(60, "the outer block"):
        outer = signal.getsignal(signal.SIGALRM)
        inner = grading.time_limit(30, "the inner block")
        inner.__enter__()
        with pytest.raises(grading.TimedOut):
            signal.raise_signal(signal.SIGALRM)
        assert signal.getsignal(signal.SIGALRM) is outer, "the inner limit's handler was left installed"
        assert 50 < signal.getitimer(signal.ITIMER_REAL)[0] <= 60, "the outer timer was not put back"
        del inner
        gc.collect()
        assert signal.getsignal(signal.SIGALRM) is outer
        assert 50 < signal.getitimer(signal.ITIMER_REAL)[0] <= 60, "collecting the inner limit re-armed a timer"

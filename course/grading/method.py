"""What an exercise may not delegate: torch's own implementation of the thing the learner is asked to write.

A lesson's contract (``Lesson.forbids``, in its checks.py) names entries of ``CATALOGUE``; a graded call of the
learner's code that reaches one of them fails its check with a message naming the call ("calls torch's
scaled_dot_product_attention: write it from matrix products and softmax").

It is decided in the learner's process, where the learner's code runs, three ways at once, so that no one dodge
(a name looked up with ``getattr`` or ``importlib``, a reference saved early, a private binding, an operator called
through ``torch.ops``) gets past:

- tripwires: before any learner code runs, every Python entry point of the catalogue (``torch.nn.functional.
  scaled_dot_product_attention`` and its ``torch._C._nn`` binding, ``nn.MultiheadAttention``'s methods...) is replaced
  by a wrapper; outside a graded call it passes through (a notebook may compare with torch in its own cells), inside
  one that forbids it, it records the call and refuses;
- a ``TorchFunctionMode`` around each graded call, which sees every torch function called, however reached: an
  original kept aside, a C binding (``torch._C._nn.scaled_dot_product_attention``) or an ATen operator called by
  name (``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu``, ``torch._scaled_dot_product_attention_math``).
  (A ``TorchDispatchMode`` would see operators below that, but entering one imports torch._dynamo: 5 s a grading.)

What is seen goes back to the grader with the call's answer (``course.grading.proxy``); the grader fails the check. The same
watch runs in the grader's process when a check calls a local implementation (the reference solution, or the wrong
implementations of the tests): ``course.grading.contract.call``.
"""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import importlib.abc
import importlib.util
import sys
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Delegation:
    """One ready-made implementation an exercise may not call. ``paths``: Python entry points, "module:attr" (a
    class's methods as "module:Class.method"); ``ops``: its ATen operator names (prefixes), as torch's bindings of
    them are named."""

    key: str
    what: str
    advice: str
    paths: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        return f"calls {self.what}: {self.advice}"


SDPA = Delegation(
    "torch_sdpa", "torch's scaled_dot_product_attention", "write it from matrix products and softmax",
    paths=("torch.nn.functional:scaled_dot_product_attention", "torch._C._nn:scaled_dot_product_attention",
           "torch.nn.attention.flex_attention:flex_attention"),
    ops=("aten::scaled_dot_product_attention", "aten::_scaled_dot_product", "aten::_fused_sdp_choice",
         "aten::_flash_attention", "aten::_efficient_attention", "aten::_cudnn_attention",
         "aten::_triton_scaled_dot"))
MHA = Delegation(
    "torch_mha", "torch's nn.MultiheadAttention", "write the projections and the heads yourself",
    paths=("torch.nn.modules.activation:MultiheadAttention.__init__",
           "torch.nn.modules.activation:MultiheadAttention.forward",
           "torch.nn.functional:multi_head_attention_forward", "torch:_native_multi_head_attention"),
    ops=("aten::_native_multi_head_attention", "aten::_triton_multi_head_attention", "aten::_masked_softmax"))
TRANSFORMER = Delegation(
    "torch_transformer", "torch's nn.Transformer layers", "build the layer from your own attention and linear layers",
    paths=tuple(f"torch.nn.modules.transformer:{c}.{m}" for c in
                ("Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                 "TransformerDecoderLayer") for m in ("__init__", "forward")) + ("torch:_transformer_encoder_layer_fwd",),
    ops=("aten::_transformer_encoder_layer_fwd", "aten::_native_multi_head_attention"))
QUANTIZE = Delegation(
    "torch_quantize", "torch's own quantization", "compute the scale, round and clamp yourself",
    paths=("torch:quantize_per_tensor", "torch:quantize_per_channel", "torch:quantize_per_tensor_dynamic",
           "torch:fake_quantize_per_tensor_affine", "torch:fake_quantize_per_channel_affine",
           "torch:dequantize", "torch.ao.quantization:quantize_dynamic", "torch.ao.quantization:quantize",
           "torch.ao.quantization:convert", "torch.ao.quantization:prepare",
           "torch.ao.quantization.observer:MinMaxObserver.forward",
           "torch.ao.quantization.observer:PerChannelMinMaxObserver.forward"),
    ops=("aten::quantize_per", "aten::fake_quantize", "aten::_fake_quantize", "aten::dequantize",
         "aten::fused_moving_avg_obs_fake_quant", "aten::_fused_moving_avg_obs_fq_helper",
         "aten::_choose_qparams", "aten::choose_qparams"))

CATALOGUE = {d.key: d for d in (SDPA, MHA, TRANSFORMER, QUANTIZE)}


def message(keys) -> str:
    """The learner's message for what was seen (catalogue keys, first seen first)."""
    seen = [CATALOGUE[k] for k in dict.fromkeys(keys) if k in CATALOGUE]
    return "; ".join(d.message for d in seen)


# --- which keys the running check forbids (the grader's side) -------------------------------------------------------
_FORBIDDEN: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("forbidden", default=())


def forbidden() -> tuple[str, ...]:
    """The catalogue keys the running check forbids (sent with each call of learner code)."""
    return _FORBIDDEN.get()


def enforcing(check, keys: tuple[str, ...]):
    """``check`` with ``keys`` forbidden to every learner call it makes."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        token = _FORBIDDEN.set(tuple(keys))
        try:
            return check(*args, **kwargs)
        finally:
            _FORBIDDEN.reset(token)

    return run


# --- the watch (wherever the learner's code runs) ---------------------------------------------------------------------
_ACTIVE: list[frozenset] = [frozenset()]   # keys forbidden by the graded call in progress (process-wide: threads too)
_HITS: list[str] = []                     # keys seen during it
_ORIGINAL_IDS: dict[int, str] = {}        # id of an original entry point -> its key
_NAMES: dict[str, str] = {}               # "module:name" of torch functions -> key (as a function mode sees them)


class Refused(RuntimeError):
    """A forbidden entry point called during a graded call (it still does not run)."""


def _record(key: str) -> None:
    if key in _ACTIVE[0]:
        _HITS.append(key)


def _op_key(name: str, active) -> str | None:
    for key in active:
        if any(name.startswith(p) for p in CATALOGUE[key].ops):
            return key
    return None


def _mode(active):
    # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
    from torch.overrides import TorchFunctionMode

    class Watch(TorchFunctionMode):
        """Every torch function the graded call reaches, whatever name it was reached by."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            key = _ORIGINAL_IDS.get(id(func))
            if key is None:
                mod, name = getattr(func, "__module__", None), getattr(func, "__name__", None)
                if isinstance(mod, str) and isinstance(name, str) and mod.split(".")[0] == "torch":
                    # torch.ops.aten.X, torch.X and torch._C._nn.X bindings of an ATen operator carry its name
                    key = _NAMES.get(f"{mod}:{name}") or _op_key(f"aten::{name.split('.')[0]}", active)
            if key is not None:
                _record(key)
            return func(*args, **(kwargs or {}))

    return Watch()


@contextlib.contextmanager
def watch(keys):
    """Run a graded call with ``keys`` forbidden; yields the list that receives the keys seen."""
    active = frozenset(k for k in keys if k in CATALOGUE)
    seen: list[str] = []
    outer, _ACTIVE[0] = _ACTIVE[0], active | _ACTIVE[0]
    start = len(_HITS)
    try:
        if active and "torch" in sys.modules:
            _names()
            with _mode(active):
                yield seen
        else:
            yield seen
    finally:
        seen += _HITS[start:]
        del _HITS[start:]
        _ACTIVE[0] = outer


def _names() -> None:
    """The catalogue's torch functions as a function mode sees them (module and name of the C binding)."""
    if _NAMES:
        return
    for d in CATALOGUE.values():
        for path in d.paths:
            mod, _, attr = path.partition(":")
            if "." not in attr:
                _NAMES[f"{mod}:{attr}"] = d.key
    # The public name of a C binding reports its binding module.
    _NAMES["torch._C._nn:scaled_dot_product_attention"] = SDPA.key


# --- tripwires (the learner's process, before its first cell) ---------------------------------------------------------
def _tripwire(original, key: str, label: str):
    def tripwire(*args, **kwargs):
        if key in _ACTIVE[0]:
            _HITS.append(key)
            raise Refused(f"{label} may not be used here: {CATALOGUE[key].advice}")
        return original(*args, **kwargs)

    tripwire.__name__ = getattr(original, "__name__", "tripwire")
    tripwire.__qualname__ = getattr(original, "__qualname__", tripwire.__name__)
    tripwire.__doc__ = getattr(original, "__doc__", None)
    return tripwire


_DONE: set[str] = set()      # entry points patched (a tripwire, or a refusal when locked)
_SEALED: set[str] = set()    # entry points whose refusal holds no original (course.grading.method.lock)
_LOCKED: set[str] = set()    # catalogue keys locked in this process


def _resolve(mod: str):
    """A module of the catalogue if imported (a C binding such as torch._C._nn is an attribute of its parent)."""
    if mod in sys.modules:
        return sys.modules[mod]
    parent, _, leaf = mod.rpartition(".")
    owner = _resolve(parent) if parent else None
    return getattr(owner, leaf, None) if owner is not None else None


def _patch_all() -> None:
    for d in CATALOGUE.values():
        locked = d.key in _LOCKED
        for path in d.paths:
            if path in (_SEALED if locked else _DONE):
                continue
            mod, _, attr = path.partition(":")
            target = _resolve(mod)
            owner, _, leaf = attr.rpartition(".")
            if target is not None and owner:
                target = getattr(target, owner, None)
            original = getattr(target, leaf, None) if target is not None else None
            if original is None:
                continue  # not yet defined (a module still importing): the next import's patch does it
            _DONE.add(path)
            if locked:
                _SEALED.add(path)
                wire = _refusal(original, d.key, f"{mod}.{attr}")
            elif getattr(original, "_course_tripwire", False):
                continue
            else:
                _ORIGINAL_IDS[id(original)] = d.key
                wire = _tripwire(original, d.key, f"{mod}.{attr}")
                wire._course_tripwire = True
            try:
                setattr(target, leaf, wire)
            except (AttributeError, TypeError):
                continue


class _Finder(importlib.abc.MetaPathFinder):
    """Patches a catalogue module right after it is imported, before the importer gets it."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader

                class Wired(importlib.abc.Loader):
                    def __getattr__(self, name):
                        return getattr(loader, name)

                    def create_module(self, spec):
                        return loader.create_module(spec)

                    def exec_module(self, module):
                        loader.exec_module(module)
                        _patch_all()

                spec.loader = Wired()
                return spec
            if spec is not None:
                return spec
        return None


def install() -> None:
    """Tripwires for every entry point of the catalogue: now for the modules already imported, and as each of the
    others is imported (run in the learner's process before any of its code)."""
    names = {p.partition(":")[0] for d in CATALOGUE.values() for p in d.paths} | {"torch", "torch.nn.functional"}
    _patch_all()
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(names))


# --- the lock (a grading sandbox: the learner's process, before its first cell) --------------------------------------
# A tripwire passes through outside a graded call and decides inside one from state in this module, and it keeps the
# original it wraps in its closure: code in the same process can reach both (``course.grading.method._ACTIVE``, a tripwire's
# ``__closure__``, a C-level call with the function mode disabled). In a grading sandbox nothing the lesson forbids has
# to run at all (the checks that compare with torch run in the grader's process), so there it is taken away instead of
# watched: each Python entry point becomes a refusal that holds no original, and each of its ATen operators gets a
# refusing kernel at every dispatch key it has one for, through a dispatcher handle nothing in Python refers to, so it
# cannot be unregistered. A reference saved early, a C binding, ``torch.ops``, ``inference_mode`` or a disabled function
# mode: every road ends at a refusal.
_KERNEL_KEYS = ("CPU", "QuantizedCPU", "SparseCPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                "CompositeExplicitAutogradNonFunctional", "Autograd", "AutogradCPU")


def _refusal(original, key: str, label: str):
    def refused(*args, **kwargs):
        _HITS.append(key)
        raise Refused(f"{label} is not available while this exercise is graded: {CATALOGUE[key].advice}")

    refused.__name__ = getattr(original, "__name__", "refused")
    refused.__qualname__ = getattr(original, "__qualname__", refused.__name__)
    refused._course_tripwire = True
    return refused


def _op_refusal(key: str, name: str):
    def refused(*args, **kwargs):
        _HITS.append(key)
        raise Refused(f"{name}, {CATALOGUE[key].what}, is not available while this exercise is graded: "
                      f"{CATALOGUE[key].advice}")

    return refused


def lock(keys) -> list[str]:
    """Take the catalogue's ``keys`` away from this process for good (the learner's process of a grading, after
    ``install`` and before any learner code). Returns the ATen operators given a refusing kernel."""
    keys = [k for k in dict.fromkeys(keys) if k in CATALOGUE and k not in _LOCKED]
    if not keys:
        return []
    _LOCKED.update(keys)
    _patch_all()
    if "torch" not in sys.modules:
        return []  # nothing to take away at the operator level (torch's own import then meets the refusals above)
    # torch: loaded already (checked above); this module never loads it itself
    import torch

    refusals = {}
    for key in keys:
        for name in torch._C._dispatch_get_all_op_names():
            if any(name.startswith(p) for p in CATALOGUE[key].ops):
                refusals.setdefault(name, _op_refusal(key, name))
    handle = torch._C._dispatch_library("IMPL", "aten", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel": that is the point
        for name, kernel in sorted(refusals.items()):
            for dispatch_key in _KERNEL_KEYS:
                if torch._C._dispatch_has_kernel_for_dispatch_key(name, dispatch_key):
                    handle.impl(name.removeprefix("aten::"), dispatch_key, kernel, False)
    # The registration lives as long as the handle: one reference more than any name holds, and no name.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))
    del handle
    return sorted(refusals)

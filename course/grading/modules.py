"""Library models handed to learner code, by value: in as a copy, back as a plain description applied here.

A check may give learner code a model made only of ``torch.nn`` / ``transformers`` classes (GPT-2 to convert, a
MiniLM layer to round-trip). It crosses to the learner's side as a copy (``torch.save``: from the grader to the
sandbox only, never back). When a learner call returns such a module, it comes back as plain data: per module its
class (a library class), which module it was when it arrived (if any), its parameters as tensors with which received
parameter each was (ties), its buffers and its children. Here the description is applied to the grader's own
objects: a module that was received is the grader's original (so ``conv1d_to_linear(model) is model`` holds and a
tied ``lm_head`` stays tied), a new one is built from a short list of library classes (``BUILDERS``), values are
copied in. Anything else is refused.
"""
from __future__ import annotations

import io
import sys

from course.grading import wire

LIBRARY_ROOTS = ("torch.nn.", "transformers.")
MAX_MODULES = 20_000


def _path(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def is_library_module(obj) -> bool:
    """An nn.Module whose every submodule is of a torch.nn or transformers class (no course or learner class)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.nn.Module):
        return False
    try:
        return all(_path(type(m)).startswith(LIBRARY_ROOTS) for m in obj.modules())
    except Exception:  # noqa: BLE001 - a learner's module may refuse to be walked
        return False


def _builders():
    # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
    from torch import nn

    return {
        "torch.nn.modules.linear.Linear": lambda a: nn.Linear(int(a["in_features"]), int(a["out_features"]),
                                                              bias=bool(a["bias"])),
    }


# --- the grader's side ----------------------------------------------------------------------------------------------
class Sent:
    """Modules this side handed over, by token: their submodules and parameters by dotted path."""

    def __init__(self):
        self.modules, self.params, self.keep = {}, {}, []

    def add(self, module) -> int:
        token = len(self.keep) + 1
        self.keep.append(module)
        self.modules[token] = dict(module.named_modules(remove_duplicate=False))
        self.params[token] = dict(module.named_parameters(remove_duplicate=False))
        return token

    def pack(self, module, enc: wire.Encoder) -> dict:
        # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
        import torch

        buf = io.BytesIO()
        torch.save(module, buf)
        off, n = enc._blob(buf.getvalue())
        return {"$pm": [off, n, self.add(module)]}

    def _lookup(self, table, ref):
        if not (isinstance(ref, list) and len(ref) == 2 and type(ref[0]) is int and isinstance(ref[1], str)):
            return None
        return table.get(ref[0], {}).get(ref[1])

    def apply(self, desc, count=None):
        """The grader's module the description stands for, changed as described."""
        # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
        import torch

        count = count if count is not None else [0]
        count[0] += 1
        if count[0] > MAX_MODULES or not isinstance(desc, dict):
            raise wire.WireError("a module description too large or not a description")
        cls_path = desc.get("cls")
        module = self._lookup(self.modules, desc.get("orig"))
        if module is None or _path(type(module)) != cls_path:
            build = _builders().get(cls_path)
            attrs = desc.get("attrs") if isinstance(desc.get("attrs"), dict) else {}
            if build is None:
                raise wire.WireError(f"a new module of class {str(cls_path)[:80]} (only {sorted(_builders())})")
            try:
                module = build(attrs)
            except (KeyError, TypeError, ValueError, RuntimeError) as exc:
                raise wire.WireError(f"a {cls_path} that cannot be built: {exc}") from None
        children = desc.get("children") if isinstance(desc.get("children"), dict) else {}
        for name, child_desc in children.items():
            if not isinstance(name, str) or not name.isidentifier() and not name.isdigit():
                raise wire.WireError("a child module with a name that is not a name")
            child = self.apply(child_desc, count)
            if module._modules.get(name) is not child:
                module._modules[name] = child
        for name in [n for n in module._modules if n not in children]:
            del module._modules[name]
        params = desc.get("params") if isinstance(desc.get("params"), dict) else {}
        with torch.no_grad():
            for name, entry in params.items():
                if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], torch.Tensor)):
                    raise wire.WireError("a parameter that is not [tensor, origin]")
                value, origin = entry
                target = self._lookup(self.params, origin)
                if target is None or target.shape != value.shape or target.dtype != value.dtype:
                    target = torch.nn.Parameter(value.clone())
                elif not torch.equal(target, value):
                    target.copy_(value)
                if module._parameters.get(name) is not target:
                    module._parameters[name] = target
            for name in desc.get("none_params", []) if isinstance(desc.get("none_params"), list) else []:
                if isinstance(name, str):
                    module._parameters[name] = None
            buffers = desc.get("buffers") if isinstance(desc.get("buffers"), dict) else {}
            for name, value in buffers.items():
                if isinstance(value, torch.Tensor):
                    old = module._buffers.get(name)
                    if old is not None and old.shape == value.shape and old.dtype == value.dtype:
                        old.copy_(value)
                    else:
                        module._buffers[name] = value
        return module


# --- the learner's side ---------------------------------------------------------------------------------------------
class Received:
    """Modules the grader handed over: which token and path each submodule and parameter had when it arrived."""

    def __init__(self):
        self.modules, self.params, self.keep = {}, {}, []

    def unpack(self, v, dec: wire.Decoder):
        # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
        import torch

        if not (isinstance(v, list) and len(v) == 3 and all(type(x) is int for x in v)):
            raise wire.WireError("a module that is not [offset, length, token]")
        module = torch.load(io.BytesIO(dec.blob_bytes(v[0], v[1])), weights_only=False)
        subs = list(module.named_modules(remove_duplicate=False))
        params = list(module.named_parameters(remove_duplicate=False))
        self.keep.append((subs, params))  # alive as long as their ids are keys here: an id is never reused
        for path, sub in subs:
            self.modules.setdefault(id(sub), [v[2], path])
        for path, p in params:
            self.params.setdefault(id(p), [v[2], path])
        return module

    def describe(self, module, count=None) -> dict:
        count = count if count is not None else [0]
        count[0] += 1
        if count[0] > MAX_MODULES:
            raise wire.WireError(f"a model of more than {MAX_MODULES} modules")
        attrs = {k: getattr(module, k) for k in ("in_features", "out_features") if hasattr(module, k)}
        attrs["bias"] = getattr(module, "bias", None) is not None
        return {"cls": _path(type(module)), "orig": self.modules.get(id(module)),
                "params": {n: [p.detach(), self.params.get(id(p))] for n, p in module._parameters.items()
                           if p is not None},
                "none_params": [n for n, p in module._parameters.items() if p is None],
                "buffers": {n: b for n, b in module._buffers.items() if b is not None},
                "children": {n: self.describe(c, count) for n, c in module._modules.items() if c is not None},
                "attrs": attrs}

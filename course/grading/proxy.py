"""Calls between the grader's checks and the learner's definitions, which live in another (sandboxed) process.

Both processes hold a ``Channel`` over a pair of pipes. A value crosses as plain data (``course.grading.wire``); any other
object stays where it is and the other side gets a stand-in (``Remote``) whose attribute reads, calls, indexing and
iteration are requests answered by the owner. The grader's side is the trusted one: the checks hand the learner's
code their own inputs (tensors as copies, reference caches and models as stand-ins it may call but not change), and
every answer they get is data they judge themselves. Requests from the learner's side may read public attributes and
call public methods of what a check handed over, nothing else (no ``_`` names, no setting, no methods that change a
model's weights, mode or device).
"""
from __future__ import annotations

import builtins
import json
import sys
import time

from course.grading import method, modules, wire
from course.grading.failures import Delegated

# Builtin exceptions that cross as themselves (a learner's ValueError is the checks' ValueError); any other type
# crosses as an Exception subclass of that name. KeyboardInterrupt, SystemExit and StopIteration never cross as
# themselves: in the grader they would stop the grader.
_CROSSING = ("ValueError", "TypeError", "KeyError", "IndexError", "AttributeError", "NotImplementedError",
             "RuntimeError", "AssertionError", "ZeroDivisionError", "OverflowError", "ArithmeticError", "LookupError",
             "ImportError", "ModuleNotFoundError", "NameError", "UnboundLocalError", "RecursionError", "OSError",
             "FileNotFoundError", "PermissionError", "TimeoutError", "MemoryError", "UnicodeError", "Exception")
# Methods of the grader's objects that the learner's side may not call: they change weights, mode, device or hooks.
READ_ONLY_DENY = {"load_state_dict", "to", "cuda", "cpu", "type", "half", "float", "double", "bfloat16", "apply",
                  "train", "eval", "zero_grad", "share_memory", "save_pretrained", "push_to_hub", "tie_weights",
                  "resize_token_embeddings", "set_input_embeddings", "set_output_embeddings", "init_weights",
                  "post_init", "set_extra_state", "requires_grad_", "set_", "copy_"}
READ_ONLY_DENY_PREFIXES = ("register_", "add_", "set_", "load_", "save_", "remove_", "del")
# Classes a stand-in may claim to be (``isinstance(out, nn.Linear)``): only library classes the grader has imported.
CLASS_ROOTS = ("torch", "transformers", "numpy")
MAX_EXPORTS = 200_000
MAX_ITEMS = 1_000_000


class RemoteError(Exception):
    """An exception raised on the other side whose type is not one of the builtins that cross as themselves."""


class ChannelBroken(BaseException):
    """The other side sent what cannot be read, closed, or did not answer in time; the message says which. A
    BaseException: no ``except Exception`` in a check turns it into a verdict."""


_ERROR_TYPES: dict[tuple[str, str], type] = {}


def _exception(name: str, base: str, message: str) -> BaseException:
    name = name if isinstance(name, str) and name.isidentifier() and len(name) <= 80 else "Error"
    message = str(message)[:2000]
    if name in _CROSSING:
        return getattr(builtins, name)(message)
    parent = getattr(builtins, base) if base in _CROSSING else Exception
    key = (name, parent.__name__)
    cls = _ERROR_TYPES.get(key)
    if cls is None:
        if len(_ERROR_TYPES) > 500:
            _ERROR_TYPES.clear()
        # Named like the original, shown without a module: messages read "raised KeyboardInterrupt: ...".
        cls = _ERROR_TYPES[key] = type(name, (RemoteError, parent), {"__module__": "builtins"})
    return cls(message)


def _describe_error(exc: BaseException) -> list:
    base = next((k.__name__ for k in type(exc).__mro__ if k.__name__ in _CROSSING and getattr(builtins, k.__name__,
                                                                                              None) is k), "")
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a learner's __str__ may raise
        message = "(its message could not be read)"
    return [type(exc).__name__[:80], base, message[:2000]]


def resolve_class(path) -> type | None:
    """A library class the grader has already imported, by "module.Qualname"; None for anything else."""
    if not isinstance(path, str) or path.split(".")[0] not in CLASS_ROOTS:
        return None
    mod_name, _, qual = path.rpartition(".")
    while mod_name:
        mod = sys.modules.get(mod_name)
        if mod is not None:
            break
        mod_name, _, head = mod_name.rpartition(".")
        qual = f"{head}.{qual}"
    else:
        return None
    obj = mod
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) else None


def type_name(x) -> str:
    """The name of a value's type; for a stand-in, the type of the object it stands for."""
    if getattr(type(x), "_wire_handle", False):
        name = object.__getattribute__(x, "_meta").get("type")
        return name if isinstance(name, str) else "object"
    return type(x).__name__


def fetch(x):
    """The value behind a stand-in of a tensor (a learner's parameter, read as an attribute); anything else as is."""
    if getattr(type(x), "_wire_handle", False):
        return object.__getattribute__(x, "_ch").request("value", x)
    return x


def _fetch_all(x):
    if isinstance(x, (list, tuple)):
        return type(x)(_fetch_all(v) for v in x)
    if isinstance(x, dict):
        return {k: _fetch_all(v) for k, v in x.items()}
    return fetch(x)


_LOCAL = frozenset({"_ch", "_id", "_meta", "_cls", "__dict__", "__torch_function__", "_wire_handle", "__reduce_ex__",
                    "__reduce__", "__getstate__", "__class_getitem__"})


class _RemoteMixin:
    """What every stand-in does: forward to the owner."""

    _wire_handle = True

    def __init__(self, ch, hid, meta):
        object.__setattr__(self, "_ch", ch)
        object.__setattr__(self, "_id", hid)
        object.__setattr__(self, "_meta", meta if isinstance(meta, dict) else {})
        object.__setattr__(self, "_cls", None)

    def __getattribute__(self, name):
        if name in _LOCAL:
            return object.__getattribute__(self, name)
        if name == "__class__":
            cls = object.__getattribute__(self, "_cls")
            if cls is None:
                meta = object.__getattribute__(self, "_meta")
                found = [resolve_class(b) for b in meta.get("bases", [])[:8]]
                cls = next((c for c in found if c is not None and c is not object), None) \
                    if meta.get("kind") == "module" else None
                cls = cls or type(self)
                object.__setattr__(self, "_cls", cls)
            return cls
        try:
            return object.__getattribute__(self, "_ch").request("getattr", self, name)
        except AttributeError as exc:
            _LAST_ATTRIBUTE_ERROR[0] = exc
            raise

    def __getattr__(self, name):
        # Python's fallback after a failed lookup (nn.Module has its own): the other side's message, kept.
        exc, _LAST_ATTRIBUTE_ERROR[0] = _LAST_ATTRIBUTE_ERROR[0], None
        raise exc if isinstance(exc, AttributeError) else AttributeError(name)

    def __setattr__(self, name, value):
        object.__getattribute__(self, "_ch").request("setattr", self, name, value)

    def __delattr__(self, name):
        object.__getattribute__(self, "_ch").request("delattr", self, name)

    def __call__(self, *args, **kwargs):
        return object.__getattribute__(self, "_ch").request("call", self, args, kwargs)

    def __getitem__(self, key):
        return object.__getattribute__(self, "_ch").request("getitem", self, key)

    def __setitem__(self, key, value):
        object.__getattribute__(self, "_ch").request("setitem", self, key, value)

    def __len__(self):
        n = object.__getattribute__(self, "_ch").request("len", self)
        if type(n) is not int or n < 0:
            raise TypeError("len() of the other side's object is not a non-negative int")
        return n

    def __iter__(self):
        items = object.__getattribute__(self, "_ch").request("iter", self)
        if type(items) is not list:
            raise TypeError("the other side's object did not iterate to a list")
        return iter(items)

    def __contains__(self, item):
        return bool(object.__getattribute__(self, "_ch").request("contains", self, item) is True)

    def __bool__(self):
        return object.__getattribute__(self, "_ch").request("bool", self) is True

    def __repr__(self):
        text = object.__getattribute__(self, "_ch").request("repr", self)
        return text if isinstance(text, str) else "<object>"

    __str__ = __repr__

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # A tensor read as an attribute of learner code: torch functions see its value.
        return func(*_fetch_all(args), **_fetch_all(kwargs or {}))

    # Arithmetic on a stand-in of a tensor works on its value.
    def __neg__(self): return -fetch(self)
    def __abs__(self): return abs(fetch(self))
    def __add__(self, o): return fetch(self) + _fetch_all(o)
    def __radd__(self, o): return _fetch_all(o) + fetch(self)
    def __sub__(self, o): return fetch(self) - _fetch_all(o)
    def __rsub__(self, o): return _fetch_all(o) - fetch(self)
    def __mul__(self, o): return fetch(self) * _fetch_all(o)
    def __rmul__(self, o): return _fetch_all(o) * fetch(self)
    def __truediv__(self, o): return fetch(self) / _fetch_all(o)
    def __matmul__(self, o): return fetch(self) @ _fetch_all(o)
    def __float__(self): return float(fetch(self))
    def __int__(self): return int(fetch(self))
    def __index__(self): return fetch(self).__index__()


_LAST_ATTRIBUTE_ERROR: list = [None]


class Remote(_RemoteMixin):
    """A stand-in for an object on the other side."""


_MODULE_CLASS = None


def _module_class():
    """A stand-in that is an ``nn.Module`` (a learner's layer put inside the checks' model)."""
    global _MODULE_CLASS
    if _MODULE_CLASS is None:
        # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
        from torch import nn

        class RemoteModule(_RemoteMixin, nn.Module):
            pass

        _MODULE_CLASS = RemoteModule
    return _MODULE_CLASS


def _meta(obj) -> dict:
    """What the other side may know about one of our objects: its kind and the library classes it derives from
    (and, for reference detection, the modules of its classes)."""
    try:
        t = type(obj)
        mro = t.__mro__ if isinstance(t.__mro__, tuple) else ()
        cls = obj if isinstance(obj, type) else t
        own = cls.__mro__ if isinstance(cls.__mro__, tuple) else ()
        bases = [f"{b.__module__}.{b.__qualname__}" for b in mro
                 if isinstance(b.__module__, str) and b.__module__.split(".")[0] in CLASS_ROOTS][:8]
        kind = "tensor" if "torch._tensor.Tensor" in bases else \
            "module" if "torch.nn.modules.module.Module" in bases else "object"
        origins = [str(getattr(k, "__module__", ""))[:200] + "." + str(getattr(k, "__qualname__", ""))[:200]
                   for k in own[:16]]
        fn_mod = getattr(obj, "__module__", None) if callable(obj) and not isinstance(obj, type) else None
        return {"kind": kind, "bases": bases, "origins": origins, "type": str(t.__qualname__)[:100],
                "module": fn_mod[:200] if isinstance(fn_mod, str) else None}
    except BaseException:  # noqa: BLE001 - a learner's class may refuse introspection
        return {"kind": "object", "bases": [], "origins": []}


class Channel:
    """One end of the conversation. ``trusted``: this end is the grader's (what the other end may do to its objects
    is restricted; every wait has ``deadline``). ``namespace``: the learner's definitions (``lookup``), on the
    learner's end."""

    def __init__(self, rfd: int, wfd: int, trusted: bool, namespace: dict | None = None, on_call=None,
                 watch: int | None = None):
        self.rfd, self.wfd, self.trusted, self.namespace, self.watch = rfd, wfd, trusted, namespace, watch
        self.exports: dict[int, object] = {}
        self.by_obj: dict[int, int] = {}
        self.deadline: float | None = None
        self.broken: str | None = None
        self.on_call = on_call  # wraps calls of learner code on the learner's end (grad mode)
        self.sent, self.received = modules.Sent(), modules.Received()  # library models crossing by value
        # The grader's end: reference code the learner's side may not run through what a check handed over
        # (code object → its name), and the ones it ran.
        self.forbidden: dict = {}
        self.hits: list[str] = []

    # --- our objects going out, theirs coming in ---------------------------------------------------------------
    def _export(self, obj, enc) -> dict:
        if getattr(type(obj), "_wire_handle", False) and object.__getattribute__(obj, "_ch") is self:
            return {"$r": object.__getattribute__(obj, "_id")}
        if self.trusted and modules.is_library_module(obj):
            return self.sent.pack(obj, enc)
        if not self.trusted and enc.module_values and modules.is_library_module(obj):
            return {"$md": enc.encode(self.received.describe(obj), 1)}
        hid = self.by_obj.get(id(obj))
        if hid is None:
            if len(self.exports) >= MAX_EXPORTS:
                raise wire.WireError(f"more than {MAX_EXPORTS} objects handed over")
            hid = len(self.exports) + 1
            self.exports[hid] = obj
            self.by_obj[id(obj)] = hid
        return {"$h": hid, "m": _meta(obj)}

    def _handle(self, d: dict):
        if "$r" in d:
            obj = self.exports.get(d["$r"], self)
            if obj is self:
                raise wire.WireError("a reference to an object this side never handed over")
            return obj
        meta = d.get("m") if isinstance(d.get("m"), dict) else {}
        kind = meta.get("kind")
        if kind == "module" and "torch" in sys.modules:
            return _module_class()(self, d["$h"], meta)
        return Remote(self, d["$h"], meta)

    def _special(self, tag, v, dec, depth):
        if tag == "$pm" and not self.trusted:
            return self.received.unpack(v, dec)
        if tag == "$md" and self.trusted:
            return self.sent.apply(dec.decode(v, depth + 1))
        raise wire.WireError(f"a module value tagged {tag} from this side")

    def _frame(self, msg: dict, values: dict, tensor_handles=False, module_values=False) -> bytes:
        enc = wire.Encoder(self._export, tensor_handles, module_values)
        body = dict(msg)
        for k, v in values.items():
            body[k] = enc.encode(v)

        text = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        if len(text) > wire.MAX_JSON:
            raise wire.WireError(f"a message of more than {wire.MAX_JSON >> 20} MiB")
        return wire.HEADER.pack(wire.MAGIC, len(text), enc.size) + text + b"".join(enc.parts)

    def _send(self, msg: dict, values: dict, tensor_handles=False, module_values=False):
        try:
            data = self._frame(msg, values, tensor_handles, module_values)
        except (wire.WireError, RecursionError, ValueError, TypeError, OverflowError) as exc:
            if "q" in msg:
                raise ChannelBroken(f"could not send the request: {exc}") from None
            data = self._frame({"e": ["WireError", "ValueError", f"the answer is not plain data: {exc}"]}, {})
        wire.write_frame(self.wfd, data)

    def _receive(self):
        try:
            tree, blob = wire.read_frame(self.rfd, self.deadline, self.watch)
        except wire.WireTimeout:
            self.broken = "timeout"
            raise ChannelBroken("timeout") from None
        except wire.WireClosed:
            self.broken = "closed"
            raise ChannelBroken("closed") from None
        except wire.WireError as exc:
            self.broken = f"malformed: {exc}"
            raise ChannelBroken(self.broken) from None
        if not isinstance(tree, dict):
            self.broken = "malformed: a message that is not an object"
            raise ChannelBroken(self.broken)
        dec = wire.Decoder(blob, self._handle, self._special)

        def value(key, default=None):
            try:
                return dec.decode(tree[key]) if key in tree else default
            except (wire.WireError, RecursionError) as exc:
                self.broken = f"malformed: {exc}"
                raise ChannelBroken(self.broken) from None
        return tree, value

    # --- asking the other side ---------------------------------------------------------------------------------
    def request(self, op: str, target=None, *rest):
        """Send one request and serve the other side's requests until its answer comes."""
        if self.broken:
            raise ChannelBroken(self.broken)
        msg = {"q": op}
        values = {}
        if target is not None:
            values["h"] = target
        if op == "call":
            values["a"], values["k"] = list(rest[0]), dict(rest[1])
            msg["g"] = _grad_enabled()
            if self.trusted and method.forbidden():
                msg["x"] = list(method.forbidden())  # what the running check forbids this call to reach
        elif op in ("getattr", "setattr", "delattr", "lookup"):
            msg["n"] = str(rest[0])
            if op == "setattr":
                values["v"] = rest[1]
        elif op in ("getitem", "setitem", "contains"):
            values["v"] = rest[0]
            if op == "setitem":
                values["w"] = rest[1]
        self._send(msg, values)
        try:
            return self._await()
        except BaseException as exc:
            if not getattr(exc, "_wire_answer", False):  # stopped mid-conversation: the two ends are out of step
                self.broken = self.broken or "interrupted"
            raise

    def _await(self):
        while True:
            tree, value = self._receive()
            if self.trusted and ("r" in tree or "e" in tree) and tree.get("x"):
                self._delegated(tree["x"])
            if "r" in tree:
                return value("r")
            if "e" in tree:
                e = tree["e"]
                if not (isinstance(e, list) and len(e) == 3 and all(isinstance(s, str) for s in e)):
                    self.broken = "malformed: an error that is not [type, base, message]"
                    raise ChannelBroken(self.broken)
                exc = _exception(*e)
                exc._wire_answer = True
                raise exc
            if "q" in tree:
                self._serve(tree, value)
                continue
            self.broken = "malformed: neither a request nor an answer"
            raise ChannelBroken(self.broken)

    @staticmethod
    def _delegated(seen):
        """The learner's call reached what the check forbids (course.grading.method): the check fails, naming it."""
        keys = [k for k in seen if isinstance(k, str)][:20] if isinstance(seen, list) else []
        exc = Delegated(method.message(keys) or "calls a ready-made implementation the exercise forbids")
        exc._wire_answer = True  # an answer came: the two ends are still in step
        raise exc

    # --- answering the other side ------------------------------------------------------------------------------
    def serve_forever(self):
        """The learner's end: answer requests until the other side says "bye" or closes."""
        while True:
            try:
                tree, value = self._receive()
            except ChannelBroken:
                return
            if tree.get("q") == "bye":
                return
            self._serve(tree, value)

    def _profile(self, frame, event, arg):
        if event == "call" and frame.f_code in self.forbidden:
            self.hits.append(self.forbidden[frame.f_code])

    def _serve(self, tree, value):
        op = tree.get("q")
        watching = self.trusted and bool(self.forbidden)
        if watching:
            outer = sys.getprofile()
            sys.setprofile(self._profile)
        self.seen = []
        try:
            result, handles = self._perform(op, tree, value)
        except ChannelBroken:
            raise
        except BaseException as exc:  # noqa: BLE001 - any error of the called code is an answer
            if self.trusted and not isinstance(exc, Exception):
                raise  # the grader's own time limit: not an answer to the learner's side
            self._send(self._seen({"e": _describe_error(exc)}), {})
            return
        finally:
            if watching:
                sys.setprofile(outer)
        self._send(self._seen({}), {"r": result}, tensor_handles=handles,
                   module_values=op == "call" and not self.trusted)

    def _seen(self, msg: dict) -> dict:
        """The learner's end: what a graded call reached that its check forbids goes back with the answer."""
        seen, self.seen = getattr(self, "seen", []), []
        if seen and not self.trusted:
            msg["x"] = list(dict.fromkeys(seen))[:20]
        return msg

    def _target(self, tree, value):
        if self.trusted and not (isinstance(tree.get("h"), dict) and "$r" in tree["h"]):
            raise PermissionError("a request about something the grader never handed over")
        obj = value("h")
        if getattr(type(obj), "_wire_handle", False):
            raise ValueError("a request about an object of the asking side")
        return obj

    def _perform(self, op, tree, value):
        name = tree.get("n")
        if op == "lookup":
            if self.namespace is None or not isinstance(name, str):
                raise PermissionError("nothing to look up on this side")
            if name not in self.namespace:
                raise NameError(f"name {name!r} is not defined")
            return self.namespace[name], False
        obj = self._target(tree, value)
        if self.trusted:
            self._allowed(op, name)
        if op == "getattr":
            if not isinstance(name, str):
                raise TypeError("attribute name must be a string")
            return getattr(obj, name), not self.trusted
        if op == "call":
            args, kwargs = value("a", []), value("k", {})
            if not isinstance(args, list) or not isinstance(kwargs, dict) or \
                    not all(isinstance(k, str) for k in kwargs):
                raise TypeError("malformed call")
            if self.on_call is not None:
                forbid = tree.get("x") if isinstance(tree.get("x"), list) else []
                with method.watch([k for k in forbid if isinstance(k, str)]) as seen:
                    try:
                        return self.on_call(obj, args, kwargs, tree.get("g")), False
                    finally:
                        self.seen = seen
            return obj(*args, **kwargs), False
        if op == "value":
            return obj, False
        if op == "setattr":
            setattr(obj, name, value("v"))
            return None, False
        if op == "delattr":
            delattr(obj, name)
            return None, False
        if op == "getitem":
            return obj[value("v")], False
        if op == "setitem":
            obj[value("v")] = value("w")
            return None, False
        if op == "len":
            return len(obj), False
        if op == "iter":
            out = []
            for item in obj:
                out.append(item)
                if len(out) > MAX_ITEMS:
                    raise ValueError(f"more than {MAX_ITEMS} items")
            return out, False
        if op == "contains":
            return bool(value("v") in obj), False
        if op == "bool":
            return bool(obj), False
        if op == "repr":
            return repr(obj)[:300], False
        raise ValueError(f"unknown request {str(op)[:20]!r}")

    @staticmethod
    def _allowed(op, name):
        """What the learner's side may do with the grader's objects: read public attributes, call, index, iterate."""
        if op in ("setattr", "delattr", "setitem"):
            raise PermissionError("the grader's objects are read-only")
        if op == "getattr":
            if not isinstance(name, str) or name.startswith("_"):
                raise AttributeError(f"the grader's objects do not show attribute {str(name)[:40]!r}")
            if name in READ_ONLY_DENY or name.startswith(READ_ONLY_DENY_PREFIXES) or name.endswith("_"):
                raise PermissionError(f"the grader's objects are read-only: {name} is not available")


def _grad_enabled():
    torch = sys.modules.get("torch")
    return bool(torch.is_grad_enabled()) if torch is not None else True


def learner_call(obj, args, kwargs, grad):
    """On the learner's end: call with the grader's gradient mode (a check under torch.no_grad() copies weights)."""
    torch = sys.modules.get("torch")
    if torch is None or grad is None:
        return obj(*args, **kwargs)
    with torch.set_grad_enabled(bool(grad)):
        return obj(*args, **kwargs)


def now() -> float:
    return time.monotonic()

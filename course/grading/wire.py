"""Frames between the grader and the sandboxed learner process: plain data only, size-capped, read in linear time.

A frame is a 24-byte header (magic, JSON length, binary length), a JSON document and a binary blob. Values are JSON
numbers, strings, booleans, null and lists; everything else is a one-key object: ``{"$t": [dtype, shape, offset,
nbytes]}`` a torch tensor and ``{"$a": ...}`` a numpy array (raw bytes in the blob), ``{"$tu": [...]}`` a tuple,
``{"$d": [[key, value], ...]}`` a dict, ``{"$sz": [...]}`` a torch.Size, ``{"$dt": "float32"}`` a torch dtype,
``{"$sl": [start, stop, step]}`` a slice, ``{"$h": id, "m": {...}}`` an object that stays on the sender's side (a
handle), ``{"$r": id}`` one of the receiver's own handles coming back, and (``course.grading.modules``) ``{"$pm": ...}`` a
library module the grader hands over, ``{"$md": ...}`` the plain description of one coming back. No pickle, nothing is imported or run on
decoding: a frame from the learner's side can only describe data. Used by ``course.grading.proxy``.
"""
from __future__ import annotations

import json
import math
import os
import select
import struct
import sys
import time

MAGIC = b"GRADEWR1"
HEADER = struct.Struct("<8sQQ")
MAX_JSON = 16 << 20      # bytes of JSON in one frame
MAX_BLOB = 256 << 20     # bytes of tensor data in one frame
MAX_DEPTH = 64           # nesting of lists/dicts/tuples
MAX_DIMS = 16
TORCH_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool",
                "complex64", "complex128")
NUMPY_DTYPES = ("float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64", "uint16", "uint32",
                "uint64", "bool", "complex64", "complex128")


class WireError(Exception):
    """A frame that is not well-formed data (too large, too deep, a wrong field); the message names what."""


class WireTimeout(Exception):
    """No complete frame before the deadline."""


class WireClosed(Exception):
    """The other side closed its end."""


# --- encoding ---------------------------------------------------------------------------------------------------
class Encoder:
    """Turns a value into (JSON-able tree, blob). ``export(obj)`` is called for anything that is not plain data and
    returns its handle dict (the caller keeps the object alive)."""

    def __init__(self, export, tensor_handles: bool = False, module_values: bool = False):
        self.export, self.parts, self.size = export, [], 0
        self.module_values = module_values  # library modules a call returns cross as a description (course.grading.modules)
        self.tensor_handles = tensor_handles  # tensors stay behind as handles (attributes the checks copy into)

    def _blob(self, raw: bytes) -> tuple[int, int]:
        off = self.size
        self.parts.append(raw)
        self.size += len(raw)
        if self.size > MAX_BLOB:
            raise WireError(f"more than {MAX_BLOB >> 20} MiB of tensor data in one message")
        return off, len(raw)

    def encode(self, x, depth=0):
        if depth > MAX_DEPTH:
            raise WireError(f"data nested deeper than {MAX_DEPTH} levels")
        # Subclasses of plain types travel as the plain type: a redefined __eq__ never reaches the other side.
        if x is None or type(x) is bool:
            return x
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Size):
            return {"$sz": [int(v) for v in tuple.__iter__(x)]}
        if isinstance(x, str):
            return str.__str__(x)
        if isinstance(x, bool):
            return bool(x)
        if isinstance(x, int):
            return int.__int__(x)
        if isinstance(x, float):
            x = float.__float__(x)
            return x if math.isfinite(x) else {"$f": repr(x)}
        if isinstance(x, list):
            return [self.encode(v, depth + 1) for v in list.__iter__(x)]
        if isinstance(x, tuple):
            return {"$tu": [self.encode(v, depth + 1) for v in tuple.__iter__(x)]}
        if isinstance(x, dict):
            return {"$d": [[self.encode(k, depth + 1), self.encode(dict.__getitem__(x, k), depth + 1)]
                           for k in list(dict.__iter__(x))]}
        if type(x) is slice:
            return {"$sl": [self.encode(x.start, depth + 1), self.encode(x.stop, depth + 1),
                            self.encode(x.step, depth + 1)]}
        if x is Ellipsis:
            return {"$el": 0}
        if isinstance(x, bytes):
            return {"$b": list(self._blob(bytes.__bytes__(x) if hasattr(bytes, "__bytes__") else bytes(x)))}
        torch, np = sys.modules.get("torch"), sys.modules.get("numpy")
        if torch is not None:
            if isinstance(x, torch.dtype):
                return {"$dt": str(x).replace("torch.", "")}
            if isinstance(x, torch.Tensor) and not (self.tensor_handles and depth == 0):
                t = torch.Tensor.detach(x)
                if t.layout != torch.strided or t.is_quantized or t.device.type != "cpu":
                    raise WireError(f"a tensor that is not a plain CPU tensor ({t.layout}, {t.dtype}, {t.device})")
                dtype = str(t.dtype).replace("torch.", "")
                if dtype not in TORCH_DTYPES:
                    raise WireError(f"a tensor of dtype {dtype}")
                t = torch.Tensor.contiguous(t.as_subclass(torch.Tensor))
                raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
                return {"$t": [dtype, list(t.shape), *self._blob(raw), bool(torch.Tensor.requires_grad.__get__(x))]}
        if np is not None:
            if isinstance(x, np.ndarray):
                dtype = x.dtype.name
                if dtype not in NUMPY_DTYPES:
                    raise WireError(f"an array of dtype {dtype}")
                return {"$a": [dtype, list(x.shape), *self._blob(np.ascontiguousarray(x).tobytes())]}
            if isinstance(x, np.bool_):
                return bool(x)
            if isinstance(x, np.integer):
                return {"$ni": [x.dtype.name, int(x)]}
            if isinstance(x, np.floating):
                return {"$nf": [x.dtype.name, repr(float(x))]}
        return self.export(x, self)

    def frame(self, value) -> bytes:
        tree = self.encode(value)
        text = json.dumps(tree, separators=(",", ":"), allow_nan=False).encode()
        if len(text) > MAX_JSON:
            raise WireError(f"a message of more than {MAX_JSON >> 20} MiB")
        return HEADER.pack(MAGIC, len(text), self.size) + text + b"".join(self.parts)


# --- decoding ---------------------------------------------------------------------------------------------------
class Decoder:
    """Turns (JSON tree, blob) back into values; ``handle(d)`` makes the local stand-in for a handle dict."""

    def __init__(self, blob: memoryview, handle, special=None):
        self.blob, self.handle, self.special = blob, handle, special  # special: modules by value (course.grading.modules)

    def blob_bytes(self, off, n) -> bytes:
        return self._bytes(off, n)

    def _bytes(self, off, n) -> bytes:
        if type(off) is not int or type(n) is not int or off < 0 or n < 0 or off + n > len(self.blob):
            raise WireError("a tensor's bytes lie outside the message")
        return bytes(self.blob[off:off + n])

    @staticmethod
    def _shape(shape):
        if type(shape) is not list or len(shape) > MAX_DIMS or any(type(s) is not int or s < 0 for s in shape):
            raise WireError(f"a shape that is not a list of at most {MAX_DIMS} sizes")
        return shape

    def decode(self, x, depth=0):
        if depth > MAX_DEPTH:
            raise WireError(f"data nested deeper than {MAX_DEPTH} levels")
        if x is None or type(x) in (bool, int, float, str):
            return x
        if type(x) is list:
            return [self.decode(v, depth + 1) for v in x]
        if type(x) is not dict or len(x) not in (1, 2):
            raise WireError("an object that is not a tagged value")
        tag = next(iter(x))
        v = x[tag]
        if tag == "$tu" and type(v) is list:
            return tuple(self.decode(e, depth + 1) for e in v)
        if tag == "$d" and type(v) is list:
            out = {}
            for pair in v:
                if type(pair) is not list or len(pair) != 2:
                    raise WireError("a dict entry that is not a pair")
                key = self.decode(pair[0], depth + 1)
                try:
                    out[key] = self.decode(pair[1], depth + 1)
                except TypeError:
                    raise WireError("a dict key that cannot be a key") from None
            return out
        if tag == "$f" and v in ("nan", "inf", "-inf"):
            return float(v)
        if tag == "$sl" and type(v) is list and len(v) == 3:
            return slice(*(self.decode(e, depth + 1) for e in v))
        if tag == "$el":
            return Ellipsis
        if tag == "$b" and type(v) is list and len(v) == 2:
            return self._bytes(*v)
        if tag == "$sz" and type(v) is list:
            # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
            import torch

            return torch.Size(self._shape(v))
        if tag == "$dt" and v in TORCH_DTYPES:
            # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
            import torch

            return getattr(torch, v)
        if tag == "$t" and type(v) is list and len(v) == 5:
            return self._tensor(*v)
        if tag == "$a" and type(v) is list and len(v) == 4:
            return self._array(*v)
        if tag in ("$ni", "$nf") and type(v) is list and len(v) == 2 and v[0] in NUMPY_DTYPES:
            # numpy: loaded only when an array is there (the light path never loads it)
            import numpy as np

            return np.dtype(v[0]).type(int(v[1]) if tag == "$ni" else float(v[1]))
        if tag in ("$h", "$r") and type(v) is int:
            return self.handle(x)
        if tag in ("$md", "$pm") and self.special is not None:
            return self.special(tag, v, self, depth)
        raise WireError(f"an unknown or malformed value tagged {str(tag)[:20]!r}")

    def _tensor(self, dtype, shape, off, n, requires_grad):
        # torch: seconds to import, loaded only when a tensor is there (the grader starts without it)
        import torch

        if dtype not in TORCH_DTYPES:
            raise WireError(f"a tensor of dtype {str(dtype)[:20]!r}")
        shape = self._shape(shape)
        dt = getattr(torch, dtype)
        size = torch.empty(0, dtype=dt).element_size()
        if math.prod(shape) * size != n:
            raise WireError(f"a tensor of shape {shape} and dtype {dtype} with {n} bytes")
        raw = bytearray(self._bytes(off, n))
        t = torch.frombuffer(raw, dtype=dt) if n else torch.empty(0, dtype=dt)
        return t.reshape(shape)  # a copy of the data only: never a graph, never requires_grad

    def _array(self, dtype, shape, off, n):
        # numpy: loaded only when an array is there (the light path never loads it)
        import numpy as np

        if dtype not in NUMPY_DTYPES:
            raise WireError(f"an array of dtype {str(dtype)[:20]!r}")
        shape = self._shape(shape)
        dt = np.dtype(dtype)
        if math.prod(shape) * dt.itemsize != n:
            raise WireError(f"an array of shape {shape} and dtype {dtype} with {n} bytes")
        return np.frombuffer(bytearray(self._bytes(off, n)), dtype=dt).reshape(shape)


# --- reading and writing frames on pipes --------------------------------------------------------------------------
def write_frame(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None, watch: int | None = None) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        if deadline is not None or watch is not None:
            left = None if deadline is None else deadline - time.monotonic()
            ready = select.select([fd] + ([watch] if watch is not None else []), [], [], left)[0] \
                if left is None or left > 0 else []
            if not ready:
                raise WireTimeout()
            if fd not in ready:
                raise WireClosed()  # the watched descriptor spoke first: the writer is gone
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise WireClosed()
        got += k
    return buf


def read_frame(fd: int, deadline: float | None = None, watch: int | None = None) -> tuple[object, memoryview]:
    """(JSON tree, blob) of the next frame; the sizes are checked before anything is read into memory. ``watch``: a
    descriptor that becomes readable when the writer is gone (then WireClosed)."""
    magic, n_json, n_blob = HEADER.unpack(_read_exact(fd, HEADER.size, deadline, watch))
    if magic != MAGIC:
        raise WireError("a message that does not start with the frame marker")
    if n_json > MAX_JSON:
        raise WireError(f"a message announcing {n_json:,} bytes of data (at most {MAX_JSON:,})")
    if n_blob > MAX_BLOB:
        raise WireError(f"a message announcing {n_blob:,} bytes of tensors (at most {MAX_BLOB:,})")
    text = _read_exact(fd, n_json, deadline, watch)
    blob = _read_exact(fd, n_blob, deadline, watch) if n_blob else bytearray()
    try:
        tree = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a message that is not JSON: {str(exc)[:80]}") from None
    return tree, memoryview(blob)

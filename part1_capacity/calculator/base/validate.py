"""One place for checking what users hand the calculator: numbers, files and JSON.

Every reader of a user file or flag goes through here, so the rules hold everywhere:

- a number is a real ``int``/``float`` (never a bool, a string or ``None``), finite, and inside the range the
  caller allows — checked *before* it is converted or used (a ``NaN`` passes every ``<``/``>`` test, an ``inf``
  overflows ``int()``, a 400-digit integer overflows a float);
- a file is a regular file (not a directory, FIFO, device or ``/proc`` entry that never ends), at most
  ``max_bytes`` long, UTF-8 text;
- JSON input refuses ``NaN``/``Infinity`` (Python's ``json`` accepts them by default), numbers too large for a
  float, integers with absurdly many digits and nesting deeper than Python's recursion limit — but for a
  ``config.json`` (``infinity=True``), whose ``Infinity`` is what ``transformers`` writes for an unbounded default
  (Mamba-2's and Nemotron-H's ``time_step_limit`` ``[0.0, Infinity]``): read as ``inf``, and refused by ``number``
  in any field the calculator reads;
- JSON output is strict (``allow_nan=False``): a non-finite number never reaches a reader.

Each failure raises ``InputError`` with one line naming the field (or file) and what is allowed.
"""
from __future__ import annotations

import json
import math
import numbers
import os
import stat
from pathlib import Path

from part1_capacity.calculator.base.errors import InputError
from course.shared.units import MIB

MAX_FILE_BYTES = 16 * MIB     # a config.json is a few KB, an accelerator file less; a safetensors index a few MB
MAX_INT_DIGITS = 30           # no count, size or length in a model or accelerator file comes near 10^30


def show(v, limit: int = 40) -> str:
    """``repr(v)`` cut to ``limit`` characters: error messages stay one short line whatever the input."""
    r = repr(v)
    return r if len(r) <= limit else f"{r[:limit - 5]}…({len(r)} chars)"


NAME_MAX, PATH_MAX = 255, 4096     # Linux: bytes of one file name, of a whole path with its final NUL


def output_path(path, field: str, follow_symlinks: bool = False, create_folders: bool = False) -> Path:
    """``path`` as a file this process may write — checked like a path it reads, before a long run starts.

    Refused, each in one line naming ``field``: an empty name (it would mean the current folder), a NUL, a name
    longer than the system takes (``NAME_MAX`` bytes a component, ``PATH_MAX`` a path), a symbolic link unless
    ``follow_symlinks`` (writing through it would overwrite whatever it points to), a folder, a FIFO or socket
    (opening one for writing waits for a reader forever), a device that takes no bytes (``/dev/full``: refused by a
    one-byte write), a missing folder (unless ``create_folders``: then the nearest existing one must be writable),
    a file or folder without write permission."""
    s = os.fspath(path) if path is not None else ""
    if s == "":
        raise InputError(f"{field}: an empty name is not a file name; give the path of a file to write")
    if "\0" in s:
        raise InputError(f"{field}: {show(s)} holds a NUL character; not a file name")
    raw = os.fsencode(s)
    if len(raw) >= PATH_MAX or any(len(part) > NAME_MAX for part in raw.split(b"/")):
        raise InputError(f"{field}: {show(s)} is longer than a path may be (at most {NAME_MAX} bytes a name, "
                         f"{PATH_MAX - 1} a path)")
    p = Path(s)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:              # a component that is a file (ENOTDIR), a loop, no permission
        raise InputError(f"{field}: cannot write {show(s)}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        if not follow_symlinks:
            raise InputError(f"{field}: {show(s)} is a symbolic link, not followed (it would overwrite its target); "
                             f"give the target's path or a new name")
        try:
            st = os.stat(p)
        except OSError:
            st = None                   # a dangling link: writing creates its target
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{field}: {show(s)} is a folder; give a file name")
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            raise InputError(f"{field}: {show(s)} is {'a FIFO' if stat.S_ISFIFO(st.st_mode) else 'a socket'}; "
                             f"expected a regular file or a new name")
        if not stat.S_ISREG(st.st_mode):
            try:
                fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
                try:
                    os.write(fd, b"\n")
                finally:
                    os.close(fd)
            except OSError as exc:
                raise InputError(f"{field}: {show(s)} takes no writes ({exc.strerror})") from None
            return p
    folder = p.parent if str(p.parent) else Path(".")
    if create_folders:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{field}: folder {show(str(folder))} does not exist; create it first")
    if not os.access(folder, os.W_OK) or (st is not None and not os.access(p, os.W_OK)):
        raise InputError(f"{field}: {show(s)} is not writable")
    return p


def writable_path(path, field: str, follow_symlinks: bool = False) -> Path:
    """``output_path`` with the folder required to exist (the name the callers have always used)."""
    return output_path(path, field, follow_symlinks)


def open_for_write(path, field: str, follow_symlinks: bool = False):
    """A binary file object on ``path`` (checked by ``output_path`` first), opened without following a symbolic
    link unless asked and without waiting on a FIFO that appeared since the check; truncated."""
    p = output_path(path, field, follow_symlinks)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(p, flags, 0o666)
    except OSError as exc:
        raise InputError(f"{field}: cannot write {show(str(p))}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode):
        os.ftruncate(fd, 0)
    elif not stat.S_ISCHR(st.st_mode):
        os.close(fd)
        raise InputError(f"{field}: {show(str(p))} is {_kind(st.st_mode)}; expected a regular file or a new name")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "wb")


def printable(s: str, limit: int | None = 200, keep: str = "") -> str:
    """Text read from a file or a server, safe to print: every character that is not printable — terminal escape
    sequences, newlines (unless in ``keep``), bidirectional overrides, lone surrogates that no terminal encoding
    takes — written as a ``\\x1b``/``\\ud800``-style escape; cut to ``limit`` characters (None: whole). The one
    escaping every printer uses: the CLI passes all its output through it (``cli.main``)."""
    s = str(s)
    if not all(c.isprintable() or c in keep for c in s):
        s = "".join(c if c.isprintable() or c in keep else c.encode("unicode_escape", "backslashreplace")
                    .decode("ascii") for c in s)
    return s if limit is None or len(s) <= limit else f"{s[:limit - 1]}…"


# --- numbers ------------------------------------------------------------------------------------------------------
def number(v, field: str, *, lo=None, hi=None, integer=False, lo_open=False):
    """``v`` as an ``int`` (``integer=True``) or ``float``, after checking it is a finite number in
    ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``). Accepts Python and numpy numbers; a whole float
    (``32.0``) counts as an integer, as JSON writers sometimes emit."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        kind = "an integer" if integer else "a number"
        raise InputError(f"{field}: must be {kind}, got {show(v)}")
    if isinstance(v, numbers.Integral):
        v = int(v)
    else:
        v = float(v)
        if not math.isfinite(v):
            raise InputError(f"{field}: must be a finite number, got {show(v)}")
        if integer:
            if not v.is_integer():
                raise InputError(f"{field}: must be an integer, got {show(v)}")
            v = int(v)
    if (lo is not None and (v < lo or (lo_open and v == lo))) or (hi is not None and v > hi):
        raise InputError(f"{field}: must be {_range(lo, hi, lo_open, integer)}, got {show(v)}")
    return v


def _range(lo, hi, lo_open=False, integer=False) -> str:
    """``>= 0 and <= 512`` or ``a positive integer <= 512``: the allowed range, as every message states it."""
    if integer and lo == 1 and not lo_open:
        return "a positive integer" + (f" <= {_fmt(hi)}" if hi is not None else "")
    parts = ([f"{'>' if lo_open else '>='} {_fmt(lo)}"] if lo is not None else []) + (
        [f"<= {_fmt(hi)}"] if hi is not None else [])
    return " and ".join(parts)


def _fmt(x) -> str:
    """A limit as people read it: 1,000,000,000 rather than 1e+09."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def positive_int(v, field: str, hi=None) -> int:
    """A whole number >= 1 (and <= ``hi``)."""
    return number(v, field, lo=1, hi=hi, integer=True)


def parse_int(text: str, field: str, lo=1, hi=None) -> int:
    """An integer typed on the command line: ``131072``, ``128K`` (×1024), ``1M`` (×1024²), ``1_000``.
    At most ``MAX_INT_DIGITS`` digits, so a 400-digit argument is refused before any arithmetic."""
    s = str(text).strip().lower().replace("_", "").replace(",", "")
    mult = 1
    if s.endswith("k"):
        s, mult = s[:-1], 1024
    elif s.endswith("m"):
        s, mult = s[:-1], 1024 ** 2
    digits = s.lstrip("+-")
    if not digits.isdigit() or not digits.isascii():
        raise InputError(f"{field}: expected an integer (e.g. 131072 or 128K), got {show(text)}")
    if len(digits) > MAX_INT_DIGITS:
        raise InputError(f"{field}: {len(digits)} digits is beyond any sensible value"
                         f"{f'; must be <= {_fmt(hi)}' if hi is not None else ''}")
    return number(int(s) * mult, field, lo=lo, hi=hi, integer=True)


def parse_float(text: str, field: str, lo=None, hi=None, lo_open=False) -> float:
    """A number typed on the command line, finite and in range (``nan``, ``inf``, ``1e999`` refused)."""
    try:
        v = float(str(text).strip())
    except ValueError:
        raise InputError(f"{field}: expected a number, got {show(text)}") from None
    return number(v, field, lo=lo, hi=hi, lo_open=lo_open)


# --- files --------------------------------------------------------------------------------------------------------
def regular_file(path, field: str) -> Path:
    """``path`` if it names a regular file; otherwise a one-line error saying what it is (for files that a
    library maps or opens itself, such as GGUF)."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise InputError(f"{field}: no file at {p}") from None
    except OSError as exc:
        raise InputError(f"{field}: cannot open {p}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{field}: {p} is {_kind(mode)}; expected a regular file")
    return p


def _kind(mode) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def read_bytes(path, field: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file, at most ``max_bytes``. Opened non-blocking so a FIFO cannot hang the
    call; directories, devices (``/dev/zero``) and files that fail to read (``/proc/self/mem``) are refused."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise InputError(f"{field}: no file at {p}") from None
    except OSError as exc:
        raise InputError(f"{field}: cannot open {p}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{field}: {p} is {_kind(st.st_mode)}; expected a regular file")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(MIB, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise InputError(f"{field}: {p} is larger than {max_bytes / MIB:g} MiB; expected a small text file")
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"{field}: cannot read {p}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text(path, field: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """A regular file's text, UTF-8 (a leading byte-order mark is allowed), at most ``max_bytes``."""
    data = read_bytes(path, field, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{field}: {Path(path)} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start})") from None


# --- JSON ---------------------------------------------------------------------------------------------------------
def _refuse_constant(name):
    raise ValueError(f"{name} is not a number JSON allows")


def _infinity_only(name):
    """``Infinity``/``-Infinity`` as Python's ``json.dumps`` writes ``float("inf")`` (a transformers config saved
    with an unbounded default); ``NaN`` still refused: no config class defaults to it."""
    if name == "NaN":
        _refuse_constant(name)
    return float(name.replace("Infinity", "inf"))


def _finite_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise ValueError(f"{s[:20]} is too large for a number")
    return v


def _bounded_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(s.lstrip('-'))} digits is beyond any sensible value")
    return int(s)


def loads_json(text, where: str, infinity: bool = False):
    """Parse JSON strictly: no ``NaN``/``Infinity`` (``infinity``: ``Infinity`` read as ``inf``, for a
    ``config.json``), no overflowing numbers, bounded depth."""
    try:
        return json.loads(text, parse_constant=_infinity_only if infinity else _refuse_constant,
                          parse_float=_finite_float,
                          parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InputError(f"{where}: not valid JSON here (nested too deeply)") from None
    except ValueError as exc:     # from the hooks above
        raise InputError(f"{where}: not valid JSON here ({exc})") from None


def load_json(path, field: str, max_bytes: int = MAX_FILE_BYTES, infinity: bool = False):
    """Read and parse a JSON file strictly (see ``read_text`` and ``loads_json``)."""
    return loads_json(read_text(path, field, max_bytes), f"{field}: {Path(path)}", infinity)


def load_toml(path, field: str, max_bytes: int = MAX_FILE_BYTES) -> dict:
    """Read and parse a TOML file (see ``read_text``); a parse error names ``field`` and the file's name."""
    import tomllib

    text = read_text(path, field, max_bytes)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{field} {Path(path).name}: not valid TOML ({exc})") from None
    except RecursionError:
        raise InputError(f"{field} {Path(path).name}: not valid TOML here (nested too deeply)") from None


def load_json_object(path, field: str, max_bytes: int = MAX_FILE_BYTES, infinity: bool = False) -> dict:
    """As ``load_json``, and the top level must be a JSON object."""
    d = load_json(path, field, max_bytes, infinity)
    if not isinstance(d, dict):
        raise InputError(f"{field}: {Path(path)} must hold a JSON object, not {type(d).__name__}")
    return d


def _non_finite_path(obj, path="") -> str | None:
    """Where the first NaN/Infinity sits in ``obj`` (``"decode.time_s"``), for the error message."""
    stack = [(obj, path)]
    while stack:
        o, p = stack.pop()
        if isinstance(o, float) and not math.isfinite(o):
            return p or "(top level)"
        if isinstance(o, dict):
            stack.extend((v, f"{p}.{k}" if p else str(k)) for k, v in o.items())
        elif isinstance(o, (list, tuple)):
            stack.extend((v, f"{p}[{i}]") for i, v in enumerate(o))
    return None


def dumps_json(obj, **kw) -> str:
    """``json.dumps`` with ``allow_nan=False``: output JSON is strict. A non-finite number is an input the
    calculator should have refused earlier; it becomes a one-line error naming where it appeared."""
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        where = _non_finite_path(obj)
        if where is None:
            raise
        raise InputError(f"output: '{where}' is not a finite number; an input is outside the range the "
                         f"calculator can handle") from None

"""Text from learner code made safe to show: what reaches a terminal, a log, a feedback page or a CSV is text.

A learner's exception message or printout can carry terminal control sequences (ANSI escapes that move the cursor,
erase a line and draw "total 10/10" over the real score), carriage returns, bidirectional overrides or line
separators. ``printable`` writes every such character as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``), so the
report shows what the learner's code said without letting it act on the screen. One function, used by every report:
the score summary of the pytest route, nbgrader's test-cell outputs and log, ``course.classroom``'s lines and
``checks.csv``.
"""
from __future__ import annotations

import re
import unicodedata

# Categories written as escapes: controls (Cc: ESC, CR, BEL, DEL, C1), format characters (Cf: bidirectional
# overrides, zero-width), line and paragraph separators (Zl, Zp), surrogates (Cs) and unassigned code points (Cn).
_ESCAPED = {"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"}


def _escape(ch: str) -> str:
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def printable(text, newlines: bool = False) -> str:
    """``text`` (any object: its ``str``) with every control, format and separator character written as an escape;
    ``newlines``: keep line feeds and tabs (a multi-line block), else they are escaped too (one line)."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():  # the common case: nothing to escape (isprintable is False for every category above)
        return s
    keep = "\n\t" if newlines else ""
    return "".join(_escape(ch) if ch not in keep and unicodedata.category(ch) in _ESCAPED else ch for ch in s)


# Half of a UTF-16 pair alone (a truncated emoji, written as an escape in a notebook's JSON) is not text: Python cannot
# compile it and UTF-8 cannot encode it. It is read as U+FFFD instead, as an editor shows it.
_LONE_SURROGATE = re.compile("[\\ud800-\\udfff]")


def text_only(s: str) -> str:
    """``s`` with every lone surrogate replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", s)


def text_only_tree(x):
    """A JSON tree (a notebook) with ``text_only`` applied to every string in it, keys too."""
    if isinstance(x, str):
        return text_only(x)
    if isinstance(x, list):
        return [text_only_tree(v) for v in x]
    if isinstance(x, dict):
        return type(x)((text_only(k), text_only_tree(v)) for k, v in x.items())
    return x

"""A small progress bar on stderr (stdout stays clean for ``--json``)."""
from __future__ import annotations

import sys
import time


class Progress:
    """``Progress(total)``; ``step(label)`` advances by one unit (or ``update(done, label)`` sets it).

    On a terminal it redraws one line; otherwise (CI logs) it prints a line per change of label."""

    def __init__(self, total: float, title: str = "", stream=None, enabled: bool = True):
        self.total, self.done, self.title = max(total, 1e-9), 0.0, title
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()
        self._last_label = None

    def update(self, done: float, label: str = ""):
        self.done = min(done, self.total)
        if not self.enabled:
            return
        frac = self.done / self.total
        bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
        text = f"{self.title} [{bar}] {100 * frac:3.0f}% {time.perf_counter() - self.t0:5.0f} s  {label}"
        if self.tty:
            # the carriage return is the bar's own control; the text goes through the CLI's escaping (cli._Escaped)
            getattr(self.stream, "unescaped", self.stream).write("\r")
            self.stream.write(text[:150].ljust(150))
            self.stream.flush()
        elif label != self._last_label:
            self.stream.write(text + "\n")
            self.stream.flush()
        self._last_label = label

    def step(self, label: str = "", units: float = 1.0):
        self.update(self.done + units, label)

    def close(self):
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()

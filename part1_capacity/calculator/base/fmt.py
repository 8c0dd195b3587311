"""How the calculator writes its numbers for people: one wording for the CLI, the proposals and the site."""
from __future__ import annotations


def fmt_bytes(n) -> str:
    """Binary units, one decimal: ``163840`` → ``"160.0 KiB"`` (KiB = 1024 B, GiB = 1024³ B); None → ``—``."""
    if n is None:
        return "—"
    n = float(n)
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def fmt_count(n) -> str:
    """A count of accelerators; None (nothing fits) → ``does not fit``."""
    return "does not fit" if n is None else f"{int(n):,}"


def fmt_ratio(r: float) -> str:
    return f"{r:,.2f}"


def fmt_k(v: int) -> str:
    """A count of tokens or sequences in binary thousands as the CLI flags take them: 131072 → ``128K``."""
    if v >= 1 << 20 and v % (1 << 20) == 0:
        return f"{v >> 20}M"
    if v >= 1024 and v % 1024 == 0:
        return f"{v >> 10}K"
    return str(v)


def fmt_time(s) -> str:
    """Seconds as s, ms or µs; None → ``—``."""
    if s is None:
        return "—"
    if s >= 1:
        return f"{s:,.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:,.1f} ms"
    return f"{s * 1e6:,.0f} µs"


def table(rows: list[list[str]], header: list[str], left=(0,)) -> str:
    """A plain aligned text table: columns in ``left`` are left-aligned, the others (numbers) right-aligned."""
    cols = [header] + rows
    widths = [max(len(str(r[i])) for r in cols) for i in range(len(header))]

    def line(r):
        return "  ".join(str(c).ljust(w) if i in left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])

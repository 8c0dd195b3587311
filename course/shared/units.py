"""Units every part of the course writes the same way: binary sizes and round-up division.

A GiB is 2³⁰ bytes (what engines and ``free -g`` print); a GB is 10⁹ bytes (what datasheets print). The gap between
the two is 7.4 %: an "80 GB" accelerator holds 74.5 GiB.
"""
from __future__ import annotations

KIB, MIB, GIB, TIB = 2 ** 10, 2 ** 20, 2 ** 30, 2 ** 40
KB, MB, GB = 10 ** 3, 10 ** 6, 10 ** 9


def ceil_div(a: int, b: int) -> int:
    """⌈a / b⌉ for integers, exactly (no float rounding): blocks, pages, shards, ranks."""
    if b <= 0:
        raise ValueError(f"ceil_div: divisor must be positive, got {b}")
    return -(-int(a) // int(b))


def round_up(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (cells padded to 256, blocks of 16 tokens)."""
    return ceil_div(n, multiple) * multiple

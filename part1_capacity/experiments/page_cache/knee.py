"""Knee detection: the first point where a latency series rises far above its baseline, and stays there.

Pure functions on plain lists, so they are tested on synthetic series.

``find_knee`` compares each value with a baseline: by default the median of the first ``n_baseline`` values; with
``reference`` (one baseline per value, from ``trailing_baseline``) each value is compared with its own. A knee is
the first of ``confirm`` consecutive values at least ``factor`` × their baseline; one noisy spike is not a knee.
``eligible`` (optional, one bool per value) says which values may count at all — E3 passes "this cycle had major
faults": latency that rises without a single disk read is not the page cache giving way.

Why a trailing baseline: on a shared virtual machine the no-fault latency is not one number for the whole run —
it moves after the hog takes memory, with no fault in the guest (the E3 page shows by how much). E3 therefore
re-takes the baseline with the hog in place: for each cycle, the median of the last ``n`` cycles that had the hog
holding memory and no major fault. Once the faults start the baseline stops moving, so a rise *caused* by faults
can never drag its own baseline up.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Knee:
    index: int        # position in the series of the first value above the threshold
    baseline: float   # the baseline that value was compared with (same unit as the series)
    value: float      # series[index]
    confirmed: bool   # False: the run ended before ``confirm`` values in a row were seen

    @property
    def ratio(self) -> float:
        return self.value / self.baseline


def trailing_baseline(series, clean, n: int) -> list[float | None]:
    """For each position i, the median of the last ``n`` values before i whose ``clean`` flag is set (fewer if
    fewer exist; None if none). ``clean`` has one bool per value."""
    if len(clean) != len(series):
        raise ValueError(f"clean: need one flag per value ({len(series)}), got {len(clean)}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    out, window = [], []
    for value, ok in zip(series, clean):
        out.append(statistics.median(window) if window else None)
        if ok:
            window = (window + [value])[-n:]
    return out


def find_knee(series, n_baseline: int, factor: float = 10.0, confirm: int = 2, eligible=None,
              reference=None) -> Knee | None:
    """The knee of ``series`` (see module doc), or None. A run cut short by the end of the series is returned
    with ``confirmed=False``. Values before ``n_baseline`` are never knees. Raises ValueError on a series without
    a usable baseline."""
    for name, flags in (("eligible", eligible), ("reference", reference)):
        if flags is not None and len(flags) != len(series):
            raise ValueError(f"{name}: need one value per point ({len(series)}), got {len(flags)}")
    if n_baseline < 1 or len(series) < n_baseline:
        raise ValueError(f"n_baseline: need 1 <= n_baseline <= len(series) (= {len(series)}), got {n_baseline}")
    if not factor > 1 or confirm < 1:
        raise ValueError(f"factor must be > 1 and confirm >= 1, got factor={factor}, confirm={confirm}")
    if reference is None:
        fixed = statistics.median(series[:n_baseline])
        if not fixed > 0:
            raise ValueError(f"baseline must be positive, got {fixed}")
        reference = [fixed] * len(series)
    start = None
    for i in range(n_baseline, len(series)):
        base = reference[i]
        above = base is not None and base > 0 and series[i] >= factor * base
        if above and (eligible is None or eligible[i]):
            start = i if start is None else start
            if i - start + 1 >= confirm:
                return Knee(start, reference[start], series[start], True)
        else:
            start = None
    if start is not None:
        return Knee(start, reference[start], series[start], False)
    return None

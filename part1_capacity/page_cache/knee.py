"""Knee detection: the first point where a latency series rises far above its baseline, and stays there.

Pure function on plain lists, so it is tested on synthetic series. Baseline = median of the first ``n_baseline``
values (the cycles measured before the hog takes anything). A knee is the first of ``confirm`` consecutive values
at least ``factor`` × baseline; one noisy spike is not a knee. ``eligible`` (optional, one bool per value) says
which values may count at all — E3 passes "this cycle had major faults": on a busy machine CPU preemption alone
can push the p99 of a 1 µs read ×10, and that is not the page cache giving way.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Knee:
    index: int        # position in the series of the first value above the threshold
    baseline: float   # median of the baseline values (same unit as the series)
    value: float      # series[index]
    confirmed: bool   # False: the run ended before ``confirm`` values in a row were seen

    @property
    def ratio(self) -> float:
        return self.value / self.baseline


def find_knee(series, n_baseline: int, factor: float = 10.0, confirm: int = 2, eligible=None) -> Knee | None:
    """The knee of ``series`` (see module doc), or None. A run cut short by the end of the series is returned
    with ``confirmed=False``. Raises ValueError on a series without a usable baseline."""
    if eligible is not None and len(eligible) != len(series):
        raise ValueError(f"eligible: need one flag per value ({len(series)}), got {len(eligible)}")
    if n_baseline < 1 or len(series) < n_baseline:
        raise ValueError(f"n_baseline: need 1 <= n_baseline <= len(series) (= {len(series)}), got {n_baseline}")
    if factor <= 1 or confirm < 1:
        raise ValueError(f"factor must be > 1 and confirm >= 1, got factor={factor}, confirm={confirm}")
    baseline = statistics.median(series[:n_baseline])
    if not baseline > 0:
        raise ValueError(f"baseline must be positive, got {baseline}")
    threshold = factor * baseline
    start = None
    for i in range(n_baseline, len(series)):
        if series[i] >= threshold and (eligible is None or eligible[i]):
            start = i if start is None else start
            if i - start + 1 >= confirm:
                return Knee(start, baseline, series[start], True)
        else:
            start = None
    if start is not None:
        return Knee(start, baseline, series[start], False)
    return None

"""The searcher: maps the index file and times reads of random 4 KiB-aligned pages, as a search would touch them.

One read = copy one whole page out of the mapping (``m[off:off + 4096]``). When the page is in the page cache it
costs about a microsecond (a minor fault the first time this process maps it); when it was evicted, the read waits
for the disk — a *major* fault, counted by the kernel against this process.
"""
from __future__ import annotations

import mmap
import time
from dataclasses import dataclass

import numpy as np

from course.machine import memstat

PAGE = memstat.PAGE_SIZE


@dataclass
class ReadStats:
    """Result of one batch of page reads. Latencies in microseconds, faults as counts during the batch only."""

    reads: int
    p50_us: float
    p99_us: float
    p999_us: float
    mean_us: float
    max_us: float
    major_faults: int
    minor_faults: int
    seconds: float  # wall time of the batch


def percentiles_us(latencies_ns) -> tuple[float, float, float, float]:
    """(p50, p99, p99.9, mean) of a latency sample given in nanoseconds, returned in microseconds."""
    a = np.asarray(latencies_ns, dtype=np.float64) / 1e3
    p50, p99, p999 = np.percentile(a, [50, 99, 99.9])
    return float(p50), float(p99), float(p999), float(a.mean())


class Searcher:
    """Read-only mmap of ``path`` plus timed random page reads. Use as a context manager (unmaps on exit).

    The mapping gets the kernel's default advice, as FAISS's own mmap does, unless ``random_advice``."""

    def __init__(self, path, seed: int = 0, random_advice: bool = False):
        self.path = str(path)
        self._file = open(self.path, "rb")
        self.map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        if random_advice:  # the default reads around a missed page (up to 128 KiB); MADV_RANDOM reads just it
            self.map.madvise(mmap.MADV_RANDOM)
        self.n_pages = (len(self.map) + PAGE - 1) // PAGE
        self.rng = np.random.default_rng(seed)

    def close(self):
        self.map.close()
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def warm(self) -> None:
        """Touch every page through the mapping once: all of the index cached and mapped, like an index in use."""
        m = self.map
        for off in range(0, len(m), PAGE):
            m[off]

    def read_pages(self, n_reads: int, max_seconds: float | None = None) -> ReadStats:
        """Time ``n_reads`` reads of uniformly random pages (stops early after ``max_seconds``, at least 100 reads)."""
        m, page = self.map, PAGE
        offsets = (self.rng.integers(0, self.n_pages, size=n_reads) * page).tolist()  # drawn before timing
        lat = [0] * n_reads
        clock = time.perf_counter_ns
        deadline = None if max_seconds is None else clock() + int(max_seconds * 1e9)
        major0, minor0 = memstat.fault_counts()
        t0 = clock()
        done = 0
        for i, off in enumerate(offsets):
            t = clock()
            m[off:off + page]
            lat[i] = clock() - t
            done = i + 1
            if deadline is not None and done >= 100 and (done & 255) == 0 and clock() > deadline:
                break
        seconds = (clock() - t0) / 1e9
        major1, minor1 = memstat.fault_counts()
        p50, p99, p999, mean = percentiles_us(lat[:done])
        return ReadStats(reads=done, p50_us=p50, p99_us=p99, p999_us=p999, mean_us=mean,
                         max_us=max(lat[:done]) / 1e3, major_faults=major1 - major0, minor_faults=minor1 - minor0,
                         seconds=seconds)


def faiss_query_ms(index, n_queries: int, d: int, seed: int = 1) -> float:
    """Median wall time in milliseconds of ``n_queries`` single-vector k=10 searches on a real FAISS index.

    A flat index compares the query with every stored vector, so each query reads the whole file.
    """
    rng = np.random.default_rng(seed)
    times = []
    for _ in range(n_queries):
        q = rng.random((1, d), dtype=np.float32)
        t = time.perf_counter()
        index.search(q, 10)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))

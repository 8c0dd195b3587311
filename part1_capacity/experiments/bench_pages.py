"""Benchmark: does the size of the pages the weights sit in change how fast decode streams them?

    python -m part1_capacity.experiments.bench_pages [--threads 1] [--rounds 4] [--save]

llama.cpp maps a GGUF file (``mmap``) and multiplies most weight types where they lie, in the page cache; the
kernel maps large page-cache folios of the file with 2 MB page-table entries where it can (``FilePmdMapped`` in
``/proc/PID/smaps``). matmul-bench, which times the speed model's streaming constants, holds its weights in
anonymous memory from ``malloc``, which this machine backs with 4 KB pages (transparent huge pages only on
``madvise``). On a virtual machine a TLB miss walks two page tables (the guest's and the host's), so the page size
can move a pure stream by more than the speed model's goal.

This script measures both halves: (1) how much of an F32 model file llama-bench's own mapping holds in 2 MB pages
(its smaps, read while it decodes; a generated F32 llama model of about 0.5 B parameters in a scratch folder,
deleted after), and (2) matmul-bench's streamed F32 and F16 products, each run once as always (4 KB pages) and once
with glibc asked for transparent huge pages (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``; the run's own
``AnonHugePages`` is read to show it took effect), alternated round after round so the machine's drift touches both
alike. ``--save`` writes ``results/part1/e2_pages.json`` for the engine-checks page.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

TYPES = ("f32", "f16")
POLL_S = 0.1


def parse_smaps(text: str, name: str | None = None) -> dict:
    """kB of ``Rss``, ``FilePmdMapped`` and ``AnonHugePages`` summed over the mappings of ``/proc/PID/smaps``
    ``text`` whose path ends with ``name`` (every mapping when ``name`` is None)."""
    keys = ("Rss", "FilePmdMapped", "AnonHugePages")
    out = dict.fromkeys(keys, 0)
    inside = False
    for line in text.splitlines():
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):      # a mapping's header line
            inside = name is None or (len(head) >= 6 and head[-1].endswith(name))
        elif inside and head and head[0].rstrip(":") in keys:
            out[head[0].rstrip(":")] += int(head[1])
    return out


def watch(cmd, name=None, env=None) -> tuple[str, dict]:
    """Run ``cmd``, reading its smaps every ``POLL_S`` seconds; (its stdout, the largest kB seen of each field)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, **(env or {})})
    seen = dict.fromkeys(("Rss", "FilePmdMapped", "AnonHugePages"), 0)
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/smaps") as f:
                now = parse_smaps(f.read(), name)
            seen = {k: max(v, now[k]) for k, v in seen.items()}
        except OSError:
            pass
        time.sleep(POLL_S)
    out = proc.stdout.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{os.path.basename(cmd[0])} failed ({proc.returncode})")
    return out, seen


def stream(binary, type_name: str, threads: int, huge: bool, reps: int = 15) -> dict:
    """matmul-bench's streamed product (as ``engine/kernels.py`` runs it), in 4 KB or 2 MB pages."""
    from course.machine.records import load_average
    from part1_capacity.experiments.engine import kernels

    km = kernels.STREAM_KM
    copies = math.ceil(kernels.STREAM_BYTES / (km * km * kernels.BYTES_PER_WEIGHT[type_name]))
    out, seen = watch([binary, type_name, str(km), str(km), "1", str(threads), str(copies), str(reps)],
                      env=kernels.HUGE_ENV if huge else None)
    rec = {**json.loads(out.strip().splitlines()[-1]), "kind": "stream"}
    return {"type": type_name, "threads": threads, "pages": "2M" if huge else "4K",
            "gbs": kernels.stream_rate(rec) / 1e9, "anon_huge_mb": seen["AnonHugePages"] / 1024,
            "weight_mb": rec["weight_bytes"] / 2 ** 20, "load_average": load_average()}


def measure(threads, rounds: int, workdir, progress=print) -> dict:
    from part1_capacity.experiments.engine import kernels
    from part1_capacity.experiments.engine.bench import find_llama_bench
    from part1_capacity.experiments.engine.gguf_model import shape_for_params, write_llama_gguf

    path = workdir / "model-f32.gguf"
    write_llama_gguf(path, shape_for_params(500_000_000))
    _, m = watch([find_llama_bench(), "-m", str(path), "-p", "0", "-n", "16", "-t", "1", "-r", "1", "-o", "json"],
                 name=path.name)
    progress(f"llama-bench's mapping of the F32 file: {m['FilePmdMapped'] / 1024:.0f} of {m['Rss'] / 1024:.0f} MB "
             "in 2 MB pages")
    out = {"model_file_mb": path.stat().st_size / 2 ** 20, "llama_bench_mapping_mb":
           {"rss": m["Rss"] / 1024, "pmd_mapped": m["FilePmdMapped"] / 1024}, "runs": []}
    binary = kernels.find_binary()
    for i in range(rounds):
        for th in threads:
            for t in TYPES:
                pair = [stream(binary, t, th, huge) for huge in (False, True)]
                out["runs"] += [{**x, "round": i} for x in pair]
                progress(f"round {i + 1}/{rounds}, {t}, {th} thread(s): 4 KB pages {pair[0]['gbs']:.1f} GB/s, "
                         f"2 MB pages {pair[1]['gbs']:.1f} GB/s ({pair[1]['anon_huge_mb']:.0f} MB huge)")
    return out


def ratios(r: dict) -> dict:
    """{(threads, type): [2 MB ÷ 4 KB rate of each round]}, from the runs of one saved measurement."""
    by: dict = {}
    for x in r["runs"]:
        by.setdefault((x["threads"], x["type"], x["round"]), {})[x["pages"]] = x["gbs"]
    out: dict = {}
    for (th, t, _), v in sorted(by.items()):
        if {"4K", "2M"} <= v.keys():
            out.setdefault((th, t), []).append(v["2M"] / v["4K"])
    return out


def report(r: dict) -> str:
    m = r["llama_bench_mapping_mb"]
    lines = [f"llama-bench's mapping of the F32 model: {m['pmd_mapped']:.0f} of {m['rss']:.0f} MB in 2 MB pages "
             f"({m['pmd_mapped'] / m['rss']:.0%})"]
    for (th, t), v in ratios(r).items():
        lines.append(f"{t}, {th} thread(s): 2 MB ÷ 4 KB pages, per round: " + " ".join(f"{x:.2f}" for x in v)
                     + f" (median {statistics.median(v):.2f})")
    return "\n".join(lines)


def main(argv=None) -> int:
    from course.machine.records import load_average, run_record
    from part1_capacity.experiments.engine import kernels
    from part1_capacity.experiments.engine.bench import find_llama_bench
    from part1_capacity.experiments.engine.common import save_result, scratch_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--save", action="store_true", help="write results/part1/e2_pages.json")
    args = ap.parse_args(argv)
    try:
        threads = tuple(int(x) for x in args.threads.split(","))
    except ValueError:
        threads = ()
    if not threads or not all(1 <= t <= (os.cpu_count() or 1) for t in threads):
        ap.error(f"--threads must be comma-separated counts from 1 to {os.cpu_count()}, got {args.threads!r}")
    if not 1 <= args.rounds <= 50:
        ap.error(f"--rounds must be from 1 to 50, got {args.rounds}")
    if not (kernels.find_binary() and find_llama_bench()):
        print("needs matmul-bench and llama-bench: run `make matmul-bench`", file=sys.stderr)
        return 1
    if not os.path.exists("/proc/self/smaps"):
        print("needs /proc/PID/smaps (Linux)", file=sys.stderr)
        return 1
    record = run_record(program="python -m part1_capacity.experiments.bench_pages")
    with scratch_dir("pages-") as tmp:
        r = measure(threads, args.rounds, tmp, progress=lambda s: print(s, file=sys.stderr, flush=True))
    r = {**record, **r, "load_average_at_end": load_average(), "niceness": os.nice(0)}
    print(report(r))
    if args.save:
        print("saved", save_result("e2_pages", r), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

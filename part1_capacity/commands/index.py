"""`capacity index --vectors N --dim D --type flat|ivf|hnsw [--host-memory-gb G]`: a retrieval index on the host.

Reports the index's bytes (lesson 05's FAISS formulas), the memory that must stay available for search p99 to stay
flat (E3's law: MemAvailable >= index bytes + the other files' hot page cache) and, given the host's available
memory, the headroom left for everything else. JSON keys: index_bytes, hot_cache_bytes, host_memory_needed_bytes,
knee_ratio, host_memory_bytes, headroom_bytes, p99_flat, hot_cache_source, hot_cache_warning (sizes in bytes).
The hot cache is a property of the host (what else it keeps cached): measure it there with `capacity e3`, which
prints it, and pass --hot-cache-gb; without the flag the saved E3 runs of this host are used, and a warning on
stderr says when none ran here and the figure comes from another host.
"""
from __future__ import annotations

import sys

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.base.fmt import fmt_bytes


def register(sub) -> None:
    p = sub.add_parser("index", help="a vector index served from the page cache: bytes, memory for a flat p99, "
                                     "headroom", description=__doc__.split("\n\n")[0])
    p.add_argument("--vectors", type=int, required=True, help="number of vectors")
    p.add_argument("--dim", type=int, required=True, help="dimensions per vector (float32)")
    p.add_argument("--type", choices=("flat", "ivf", "hnsw"), required=True, help="FAISS index type")
    p.add_argument("--nlist", type=int, default=None, help="ivf: number of lists (default about √vectors)")
    p.add_argument("--hnsw-m", type=int, default=None, help="hnsw: neighbours per level, M (default 32)")
    p.add_argument("--host-memory-gb", type=float, default=None,
                   help="memory available on the host before the index is read (free's 'available'), GB = 10^9 B")
    p.add_argument("--hot-cache-gb", type=float, default=None,
                   help="other files' page cache kept as readily as the index, GB: measure it on the host with "
                        "`capacity e3` (it prints it); default: the saved E3 runs of this host (node and memory), "
                        "else of another host with a warning; the original study's desktop: 1.67")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=main)


def main(args) -> int:
    from part1_capacity.calculator.sizing.index_memory import DEFAULT_HNSW_M, plan_index

    # a flag of another index type would be silently ignored: the reader would believe it was used
    for flag, value, kind in (("--nlist", args.nlist, "ivf"), ("--hnsw-m", args.hnsw_m, "hnsw")):
        if value is not None and args.type != kind:
            raise InputError(f"{flag}: only with --type {kind} (got --type {args.type})")
    host = None if args.host_memory_gb is None else args.host_memory_gb * 1e9
    hot = None if args.hot_cache_gb is None else args.hot_cache_gb * 1e9
    r = plan_index(args.type, args.vectors, args.dim, host_memory_bytes=host, nlist=args.nlist,
                   hnsw_m=DEFAULT_HNSW_M if args.hnsw_m is None else args.hnsw_m, hot_cache=hot)
    if r.hot_cache_warning:
        print(f"warning: {r.hot_cache_warning}", file=sys.stderr)
    if args.json:
        print(validate.dumps_json(r.to_dict(), indent=1))
        return 0
    extra = f", nlist {r.nlist}" if r.nlist else f", M {r.hnsw_m}" if r.hnsw_m else ""
    print(f"{r.type} index, {r.vectors:,} × {r.dim} float32{extra}: {fmt_bytes(r.index_bytes)} "
          f"({r.index_bytes:,} bytes)")
    print(f"p99 stays flat while MemAvailable >= index + hot cache {fmt_bytes(r.hot_cache_bytes)} = "
          f"{fmt_bytes(r.host_memory_needed_bytes)} ({r.knee_ratio:.2f} × index)  [{r.hot_cache_source}]")
    if r.headroom_bytes is not None:
        verdict = "left for everything else" if r.p99_flat else "short: p99 breaks as soon as the index is read"
        print(f"host {fmt_bytes(r.host_memory_bytes)} available: headroom {fmt_bytes(r.headroom_bytes)} ({verdict})")
    return 0

"""`capacity list models|accelerators|tiers`: the bundled data, with sources."""
from __future__ import annotations


from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.fmt import fmt_bytes, table
from part1_capacity.calculator.hardware.accelerators import (MEMORY_UNITS, bundled_accelerators, eight_bit_cell,
                                                            marketed_gb, runtime_cell)
from part1_capacity.calculator.model.profiles import bundled_models
from part1_capacity.calculator.hardware.tiers import tier_table


def register(sub):
    p = sub.add_parser("list", help="bundled models, accelerators or memory tiers")
    p.add_argument("what", choices=["models", "accelerators", "tiers"])
    p.add_argument("--json", action="store_true")
    p.add_argument("--sources", action="store_true", help="print each entry's source")
    p.set_defaults(func=run)


def run(a) -> int:
    if a.what == "models":
        items = list(bundled_models().values())
        if a.json:
            print(validate.dumps_json([m.to_dict() for m in items], indent=2))
            return 0
        rows = [[m.id, m.structure, f"{m.params_total / 1e9:,.4g}B" + (f" / {m.params_active / 1e9:,.3g}B"
                                                                          if m.is_moe else ""),
                 m.native_dtype, fmt_bytes(m.kv_bytes_per_token(2)), f"{m.max_context:,}"] for m in items]
        print(table(rows, ["id", "structure", "params (total / active)", "native", "KV/token bf16", "max context"],
                    left=(0, 1, 3)))
    elif a.what == "accelerators":
        items = list(bundled_accelerators().values())
        if a.json:
            print(validate.dumps_json([x.to_dict() for x in items], indent=2))
            return 0
        rows = [[x.id, x.kind, f"{marketed_gb(x):,.4g}", runtime_cell(x), f"{x.bandwidth / 1e9:,.0f} GB/s",
                 f"{x.flops_16 / 1e12:,.0f}", eight_bit_cell(x), f"{x.interconnect / 1e9:,.0f} GB/s" if x.interconnect
                 else "—", f"{x.node_size} / {x.max_tp}", ", ".join(x.engines), x.status] for x in items]
        print(table(rows, ["id", "kind", "marketed GB", "runtime GiB", "bandwidth", "16-bit TFLOP/s", "fp8 / int8",
                           "interconnect", "per node / scale-up", "engines", "status"], left=(0, 1, 9, 10)))
        print(MEMORY_UNITS)
        items = [x.to_dict() for x in items]
    else:
        items = tier_table()
        if a.json:
            print(validate.dumps_json(items, indent=2))
            return 0
        rows = [[t["id"], t["name"], str(t["capacity_gb"]) + ("" if isinstance(t["capacity_gb"], str) else " GB"),
                 str(t["bandwidth_gb_s"]) + ("" if isinstance(t["bandwidth_gb_s"], str) else " GB/s"),
                 f"{t['latency_ns']:,} ns", "" if t["measured_from"] == "accelerator" else
                 f"{t['published_latency_ns']:,} ns from the {t['measured_from']}, converted"] for t in items]
        print(table(rows, ["id", "tier", "capacity / accelerator", "bandwidth (one way)", "latency from the accelerator",
                           "as published"], left=(0, 1, 5)))
    if a.sources:
        print()
        for x in items:
            d = x if isinstance(x, dict) else x.to_dict()
            print(f"{d['id']}: {d['source']}")
    return 0

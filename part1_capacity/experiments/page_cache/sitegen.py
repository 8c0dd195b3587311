"""Figures and tables for site/part1/e3_page_cache.md, from the saved runs in results/part1/e3_*.json.

Nothing is measured here (the site builds in seconds): every number on the page comes from a saved run, from the
original study's figures in study_reference.json, or from the calculator (``part1_capacity.calculator.sizing.index_memory``, the law
applied to each run's index). Runs that found a p99 knee are plotted; when none did, the largest saved run is.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from course.shared import tables
from course.machine import records
from course.shared import i18n
from part1_capacity.calculator.sizing import index_memory
from part1_capacity.experiments.page_cache import experiment
from part1_capacity.experiments.page_cache.knee import trailing_baseline
from part1_capacity.calculator.base.saved_runs import RESULTS  # results/part1/: generated, outside the code tree

NAME = "e3"
EN = i18n.translator("en")
HERE = Path(__file__).resolve().parent
STUDY = HERE / "study_reference.json"


def load_runs(results_dir: Path | None = None) -> list[dict]:
    """Saved runs, interrupted ones left out, largest index first; each gets a ``slug`` for its file names."""
    runs = []
    for p in sorted(Path(results_dir or RESULTS).glob("e3_*.json")):
        r = json.loads(p.read_text())
        if r.get("stop_reason") == "interrupted" or not r.get("cycles"):
            continue
        r["slug"], r["file"] = p.stem, p.name
        # the knees by today's rule, read from the saved cycles (a run saved under an older p50 rule reads alike)
        r["knee_p99"], r["knee_p50"] = experiment.knees_today(r)
        r["host_key"] = index_memory.run_host(r)
        runs.append(r)
    return sorted(runs, key=lambda r: (-r["index_bytes"], r["started_at"]))


def _gb(b):
    return f"{b / 1e9:.2f} GB"


def _pct(f):
    return f"{100 * f:.0f}%"


STOP_REASONS = {
    "p50_knee_confirmed": "both knees found and confirmed",
    "past_knee_limit": "the hog went the set distance past the p99 knee",
    "floor": "the MemAvailable floor was reached",
    "cap": "the hog reached its cap",
    "max_cycles": "the cycle limit was reached",
    "hog_ended": "the hog process ended unexpectedly",
}


def _x(run):
    return [c["hog_bytes"] / 1e9 for c in run["cycles"]]


def _gaps(x, step):
    """Indices i where x jumps from x[i-1] by more than 1.5 steps: nothing was measured in between."""
    return [i for i in range(1, len(x)) if x[i] - x[i - 1] > 1.5 * step]


def _broken(x, y, gaps):
    """x and y with a None inserted at each gap, so a line is not drawn across an unmeasured range."""
    xs, ys = list(x), [float("nan") if v is None else v for v in y]
    for i in reversed(gaps):
        xs.insert(i, float("nan"))
        ys.insert(i, float("nan"))
    return xs, ys


def plot_run(run, path, tr=EN):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cycles, x_measured = run["cycles"], _x(run)
    gaps = _gaps(x_measured, _step_gb(run))
    x, _ = _broken(x_measured, x_measured, gaps)

    def line(values):
        return _broken(x_measured, list(values), gaps)[1]

    fig, (ax_lat, ax_flt, ax_pct) = plt.subplots(3, 1, figsize=(8, 8.5), sharex=True,
                                                 gridspec_kw={"height_ratios": [3, 1.4, 2]})
    for key, label, style in (("p999_us", "p99.9", ":"), ("p99_us", "p99", "-"), ("p50_us", "p50", "--")):
        ax_lat.plot(x, line(c[key] for c in cycles), style, marker="o", ms=3, label=label)
    ax_lat.plot(x, line(c["mean_us"] for c in cycles), "-.", color="grey", lw=1, label=tr("mean"))
    threshold = knee_threshold(run)
    if threshold:
        ax_lat.plot(x, line(threshold), color="black", lw=0.8, alpha=0.5,
                    label=tr("{factor} × baseline with the hog in place (p99)", factor=f"{run['config']['knee_factor']:g}"))
    ax_lat.set_yscale("log")
    ax_lat.set_ylabel(tr("page read latency (µs)"))
    ax_lat.set_title(tr("{index} index on a {host} host — {date}, {node}", index=_gb(run["index_bytes"]),
                        host=_gb(run["host_mem_bytes"]), date=run["started_at"][:10], node=_node(run)))

    ax_flt.bar(x_measured, [max(c["major_faults"], 0) for c in cycles], width=0.6 * _step_gb(run), color="tab:red")
    ax_flt.set_yscale("symlog", linthresh=1)
    ax_flt.set_ylim(0, max(10, 3 * max(c["major_faults"] for c in cycles)))
    ax_flt.set_ylabel(tr("major faults\nper cycle"))

    index = run["index_bytes"]
    host = run["host_mem_bytes"]
    ax_pct.plot(x, line(100 * c["index_resident_bytes"] / index for c in cycles), "-", marker="o", ms=3,
                label=tr("index in page cache (% of index)"))
    ax_pct.plot(x, line(100 * c["mem_available_bytes"] / host for c in cycles), "-",
                label=tr("MemAvailable (% of host)"))
    if any(c["psi_some_avg10"] is not None for c in cycles):
        ax_pct.plot(x, line(c["psi_some_avg10"] for c in cycles), "--", label=tr("PSI memory some avg10 (%)"))
        ax_pct.plot(x, line(c["psi_full_avg10"] for c in cycles), ":", label=tr("PSI memory full avg10 (%)"))
    for i in gaps:  # the range the run skipped (its --start-gb): shaded, with no line across it
        for ax in (ax_lat, ax_flt, ax_pct):
            ax.axvspan(x_measured[i - 1], x_measured[i], color="#eeeeee", zorder=0)
        ax_flt.text((x_measured[i - 1] + x_measured[i]) / 2, 0.5,
                    tr("not measured: the hog went from {a} to {b} GB in one step", a=f"{x_measured[i - 1]:.1f}",
                       b=f"{x_measured[i]:.1f}"),
                    transform=ax_flt.get_xaxis_transform(), ha="center", va="center", fontsize=9, color="#777777")
    ax_pct.set_ylim(-3, 103)
    ax_pct.set_ylabel(tr("percent"))
    ax_pct.set_xlabel(tr("memory taken by the hog (GB)"))

    for knee, ls, label in ((run["knee_p99"], "-", tr("p99 knee")), (run["knee_p50"], "--", tr("p50 knee"))):
        if knee:
            for ax in (ax_lat, ax_flt, ax_pct):
                ax.axvline(knee["hog_bytes"] / 1e9, color="black", ls=ls, lw=1, alpha=0.7,
                           label=label if ax is ax_lat else None)
    ax_lat.legend(fontsize=8, loc="upper left")
    ax_pct.legend(fontsize=8, loc="center left")
    for ax in (ax_lat, ax_flt, ax_pct):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def knee_threshold(run) -> list[float | None] | None:
    """Per cycle, knee_factor × the p99 baseline re-taken with the hog in place (None for runs of the old rule)."""
    if "baselines" not in run:
        return None
    cycles, cfg = run["cycles"], run["config"]
    clean = [c["phase"] != "baseline" and c["major_faults"] == 0 for c in cycles]
    idle = statistics.median(c["p99_us"] for c in cycles[:cfg["baseline_cycles"]])
    ref = trailing_baseline([c["p99_us"] for c in cycles], clean, cfg["baseline_cycles"])
    return [cfg["knee_factor"] * (idle if b is None else b) for b in ref]


def _node(run) -> str:
    """The host's name: the run record's (``course.machine.records``), or ``host.hostname`` in a run saved before it."""
    return run["host"].get("hostname") or records.read_record(run)["host"]["node"]


def _step_gb(run):
    return run["config"]["step_bytes"] / 1e9


def _run_facts(run, tr=EN) -> str:
    h = run["host"]
    swap = tr("no swap") if not h["swap_total_bytes"] else tr("{size} swap", size=_gb(h["swap_total_bytes"]))
    dev = h.get("index_block_device") or {}
    disk = f"{h['index_filesystem']}"
    if dev.get("device"):
        disk += tr(" on `{device}`", device=dev["device"])
    if dev.get("read_ahead_kb") is not None:
        disk += tr(", read-ahead {kib} KiB", kib=f"{dev['read_ahead_kb']:,}")
    advice = "MADV_RANDOM" if run["config"].get("madvise_random") else tr("the default (read-around)")
    rec = records.read_record(run)
    # Runs saved before the shared run record kept the node, CPU, kernel and /proc/loadavg lines in ``host``.
    start, end = h.get("loadavg_at_start"), h.get("loadavg_at_end")
    start = start.split()[0] if start else f"{rec['load_average_at_start']:.2f}"
    end = end.split()[0] if end else (None if rec["load_average_at_end"] is None
                                      else f"{rec['load_average_at_end']:.2f}")
    load = tr("load average at start {start}", start=start)
    if end:
        load += tr(", at end {end} (2 cores, shared with other work)", end=end)
    system = f"Linux {h['kernel']}" if "kernel" in h else rec["host"]["system"]
    reason = tr(STOP_REASONS[run["stop_reason"]]) if run["stop_reason"] in STOP_REASONS else run["stop_reason"]
    return tr("Run of {date} UTC on host `{node}` ({cpus} × {cpu}, {ram} RAM, {swap}, {system}, index on {disk}; "
              "mapping advice {advice}); {load}. Command: `{command}`. Stopped because {reason} after {cycles} cycles "
              "of {reads} page reads. Saved in `results/part1/{file}`.",
              date=run["started_at"].replace("T", " ")[:16], node=_node(run), cpus=rec["host"]["cpus"],
              cpu=rec["host"]["cpu"], ram=_gb(run["host_mem_bytes"]), swap=swap, system=system, disk=disk,
              advice=advice, load=load, command=run["command"], reason=reason, cycles=len(run["cycles"]),
              reads=f"{run['config']['reads']:,}", file=run["file"])


def cgroup_note(run, tr=EN) -> str:
    if not in_cgroup(run):
        return ""
    return " " + tr("The run's memory was a memory cgroup limited to {memory} on this machine (`python -m "
                    "course.memcg --limit-gb {gb} -- ...`): its MemTotal and MemAvailable are the group's.",
                    memory=_gb(run["host_mem_bytes"]), gb=f"{run['host_mem_bytes'] / 1e9:g}")


def runs_md(runs, plotted, tr=EN) -> str:
    if not runs:
        return ("!!! warning \"" + tr("No saved run") + "\"\n    " + tr(
            "No E3 result is saved yet: run `capacity e3 --index-gb 5 --step-mb 256 --json` (it saves to "
            "`results/part1/`) and rebuild the site.") + "\n")
    parts = []
    for r in plotted:
        parts.append("### " + tr("{index} index on a {host} host", index=_gb(r["index_bytes"]),
                                 host=_gb(r["host_mem_bytes"])) + "\n")
        if r["knee_p99"] is None:
            taken = max(c["hog_bytes"] for c in r["cycles"])
            parts.append(
                "!!! note \"" + tr("Validation run, no knee") + "\"\n    " + tr(
                    "This is the small run committed to check the machinery: the hog took at most {taken}, far from "
                    "the point where the index is evicted, so latency stays flat. The full experiment (`capacity e3 "
                    "--index-gb 5 --step-mb 256 --json`, then a second size) replaces it.", taken=_gb(taken)) + "\n")
        parts.append(_run_facts(r, tr) + cgroup_note(r, tr) + "\n")
        # Raw HTML, not Markdown: mkdocs also reads this snippet as a page of its own (under generated/), where a
        # Markdown image link would be checked relative to the wrong folder. The path is relative to the E3 page;
        # the Korean page's figure is the localized file, which the site serves under the same name below /ko/.
        alt = tr("E3 run {slug}: latency, major faults, residency and PSI against memory taken", slug=r["slug"])
        parts.append(f'<p><img src="../generated/e3/{r["slug"]}.png" alt="{alt}" style="max-width:100%"></p>\n')
    others = [r for r in runs if r not in plotted]
    if others:
        parts.append(tr("Also saved, not plotted (no knee): {files}.", files=", ".join(f"`{r['file']}`" for r in others))
                     + "\n")
    return "\n".join(parts)


def knees_md(runs, study, tr=EN) -> str:
    """The p99 and p50 knees of every run, and the original study's, in memory taken and in MemAvailable."""
    rows = tables.head(tr("| run | index | p99 knee: memory taken | MemAvailable at the knee | MemAvailable ÷ index "
               "| p99: baseline with the hog → at the knee | major faults in that cycle | p50 knee: memory taken |"))
    for r in runs:
        k99, k50 = r["knee_p99"], r["knee_p50"]
        name = f"{r['started_at'][:16].replace('T', ' ')} `{_node(r)}`"
        if k99:
            flag = "" if k99["confirmed"] else tr(" (unconfirmed)")
            c99 = (f"{_gb(k99['hog_bytes'])}{flag}",
                   tr("{available} ({pct} of {host})", available=_gb(k99["mem_available_bytes"]),
                      pct=_pct(k99["mem_available_fraction"]), host=_gb(r["host_mem_bytes"])),
                   f"{k99['mem_available_bytes'] / r['index_bytes']:.2f}",
                   f"{k99['baseline_us']:.1f} → {k99['value_us']:,.0f} µs (×{k99['ratio']:,.0f})",
                   f"{k99['major_faults']:,}")
        else:
            c99 = (tr("none up to {taken}", taken=_gb(max(c["hog_bytes"] for c in r["cycles"]))), "—", "—", "—", "—")
        c50 = f"{_gb(k50['hog_bytes'])} (+{_gb(k50['hog_bytes'] - k99['hog_bytes'])})" if k50 and k99 else tr("none")
        rows.append(tables.row(name, _gb(r['index_bytes']), *c99, c50))
    for s in study["runs"]:
        taken = f"{s['p99_knee_taken_gb']:.2f} GB" if "p99_knee_taken_gb" in s else "—"
        lat = (f"{s['p99_baseline_us']:g} → {s['p99_knee_us']:,} µs (×{s['p99_knee_ratio']:,})"
               if "p99_knee_us" in s else "—")
        p50 = f"(+{s['p50_knee_after_p99_knee_gb']:.2f} GB)" if "p50_knee_after_p99_knee_gb" in s else "—"
        rows.append(tables.row(tr(s['label']), f"{s['index_gb']:g} GB", taken,
                               tr("{available} ({pct} of {host})", available=f"{s['available_at_p99_knee_gb']:.2f} GB",
                                  pct=_pct(s["available_at_p99_knee_fraction"]), host=f"{s['host_gb']:g} GB"),
                               f"{s['available_at_p99_knee_gb'] / s['index_gb']:.2f}", lat, "—", p50))
    return "\n".join(rows) + "\n\n" + tr("Original study figures: {source}", source=tr(study["source"])) + "\n"


def baseline_md(runs, tr=EN) -> str:
    """Does the hog disturb the searcher? The no-fault p99 before and with the hog, and the hog's CPU time."""
    new = [r for r in runs if r.get("baselines") and r["baselines"]["hog_held_p99_us"] is not None
           and r["baselines"]["no_fault_cycles"]]
    if not new:
        return tr("No saved run records its baselines yet.") + "\n"
    rows = tables.head(tr("| run | index | p99, hog at 0 | p99, hog holding its first step | p99 of all no-fault cycles with "
               "the hog: median (max) | hog CPU time during all reads | searcher preempted per cycle, median: "
               "hog at 0 → with the hog |"))
    for r in new:
        b = r["baselines"]
        idle = statistics.median(c["searcher_involuntary_switches"] for c in r["cycles"] if c["phase"] == "baseline")
        held = statistics.median(c["searcher_involuntary_switches"] for c in r["cycles"] if c["phase"] != "baseline")
        switches = f"{idle:g} → {held:g}"
        idle_faults = sum(c["major_faults"] for c in r["cycles"] if c["phase"] == "baseline")
        note = tr(" ({n} major faults: the index was not all resident)", n=f"{idle_faults:,}") if idle_faults else ""
        cycles = (tr("{n} cycle", n=b["no_fault_cycles"]) if b["no_fault_cycles"] == 1
                  else tr("{n} cycles", n=b["no_fault_cycles"]))
        rows.append(tables.row(f"`{r['file']}`", _gb(r['index_bytes']), f"{b['idle_p99_us']:.1f} µs{note}",
                               tr("{p99} µs (hog {hog})", p99=f"{b['hog_held_p99_us']:.1f}", hog=_gb(b["hog_held_bytes"])),
                               f"{b['no_fault_p99_us_median']:.1f} µs ({b['no_fault_p99_us_max']:.0f} µs), {cycles}",
                               f"{b['hog_cpu_seconds_during_reads']:.2f} s", switches))
    return "\n".join(rows) + "\n"


def in_cgroup(run) -> bool:
    """Whether the run's memory was a memory cgroup's limit (a smaller host made with ``course.memcg``)."""
    limit = run["host"].get("cgroup_memory_limit_bytes")
    return bool(limit) and limit == run["host_mem_bytes"]


def host_name(run, tr=EN) -> str:
    """The run's host as the tables name it: the machine, or the memory cgroup on it."""
    if in_cgroup(run):
        return tr("{memory} cgroup on `{node}`", memory=_gb(run["host_mem_bytes"]), node=_node(run))
    return f"`{_node(run)}` ({_gb(run['host_mem_bytes'])})"


def _hosts(rows_in) -> list:
    """The distinct hosts of the law's runs, largest memory first."""
    keys = []
    for x in sorted(rows_in, key=lambda x: -x["knee"].host.memory_bytes):
        if not any(x["knee"].host.same_as(k) for k in keys):
            keys.append(x["knee"].host)
    return keys


def law_runs(runs) -> list[dict]:
    """Each run the law is read from, with the calculator's prediction for it from the *other* runs."""
    kr = {k.file: k for k in index_memory.knee_runs(RESULTS)}
    out = []
    for r in runs:
        k = kr.get(r["file"])
        if k is None:
            continue
        c = r["cycles"][r["knee_p99"]["cycle"]]
        others = [o for f, o in kr.items() if f != r["file"] and o.host.same_as(k.host)]
        plan = index_memory.plan_index("flat", r["index_vectors"], r["index_dim"],
                                       host_memory_bytes=k.mem_available_before_hog_bytes,
                                       hot_cache=index_memory.hot_cache_bytes(others) if others else None,
                                       results_dir=RESULTS, host=k.host)
        out.append({"run": r, "knee": k, "cycle": c, "plan": plan, "from_others": bool(others)})
    return out


def first_faulting_cycle(run, share: float = 0.01) -> int | None:
    """The first cycle with the hog whose reads faulted on at least ``share`` of them: where the page's model says
    p99 must leave the memory latency, however cheap a miss is."""
    return next((i for i, c in enumerate(run["cycles"])
                 if c["phase"] != "baseline" and c["major_faults"] >= share * c["reads"]), None)


def first_faulting(run, tr=EN) -> str:
    i = first_faulting_cycle(run)
    if i is None:
        return "—"
    c = run["cycles"][i]
    return tr("{available} ({faults} of {reads})", available=_gb(c["mem_available_bytes"]),
              faults=f"{c['major_faults']:,}", reads=f"{c['reads']:,}")


def quiet_knee_notes(rows_in, tr=EN) -> str:
    """Runs whose faults passed 1 % of the reads well before the latency knee: the misses were cheap."""
    notes = []
    for x in rows_in:
        r, k = x["run"], x["knee"]
        i = first_faulting_cycle(r)
        if i is None or r["cycles"][i]["mem_available_bytes"] - k.mem_available_at_knee_bytes < 0.5e9:
            continue
        c, knee = r["cycles"][i], r["knee_p99"]
        notes.append(tr("the {index} index at {available} available (index {excess} GB; p99 {p99} µs, ×{ratio} its "
                        "baseline), its ×{factor} knee at {knee_available} with {evicted} % of the index evicted",
                        index=_gb(k.index_bytes), available=_gb(c["mem_available_bytes"]),
                        excess=f"{c['mem_available_bytes'] / 1e9 - k.index_bytes / 1e9:+.2f}", p99=f"{c['p99_us']:,.0f}",
                        ratio=f"{c['p99_us'] / knee['baseline_us']:.1f}", factor=f"{r['config']['knee_factor']:g}",
                        knee_available=_gb(k.mem_available_at_knee_bytes),
                        evicted=f"{100 * (1 - knee['index_resident_bytes'] / k.index_bytes):.0f}"))
    if not notes:
        return ""
    return " " + tr("Faults reached 1 % of the reads well before the latency knee for {notes}. Reads of evicted pages "
                    "were cheap there (under a tenth of a millisecond), so p99 rose, but less than ×10: how loud the "
                    "knee is depends on what a miss costs, and the 1 % column is the earlier warning.",
                    notes="; ".join(notes))


def law_md(runs, study, tr=EN) -> str:
    rows_in = law_runs(runs)
    if not rows_in:
        return tr("No saved run has a confirmed knee measured with the hog in place yet.") + "\n"
    rows = tables.head(tr("| host | index | MemAvailable at the knee | − index = hot cache | of which: other files cached | free "
               "| pages scanned in that cycle: kswapd / direct | MemAvailable when faults first hit 1 % of reads "
               "| predicted MemAvailable at the knee (same host's other runs) | memory taken at the knee: predicted → "
               "measured |"))
    for x in rows_in:
        r, k, c, plan = x["run"], x["knee"], x["cycle"], x["plan"]
        other_files = c["cached_bytes"] - c["index_resident_bytes"]
        note = "" if x["from_others"] else tr(" (its own run: only one saved)")
        rows.append(tables.row(host_name(r, tr), _gb(k.index_bytes), _gb(k.mem_available_at_knee_bytes),
                               f"{k.hot_cache_bytes / 1e9:+.2f} GB", _gb(other_files),
                               _gb(c['mem_free_bytes']),
                               f"{c['reclaim'].get('pgscan_kswapd', 0):,} / {c['reclaim'].get('pgscan_direct', 0):,}",
                               first_faulting(r, tr),
                               f"{_gb(plan.host_memory_needed_bytes)}{note}",
                               f"{_gb(plan.headroom_bytes)} → {_gb(k.hog_at_knee_bytes)}"))
    for s in study["runs"]:
        rows.append(tables.row(tr(s['label']), f"{s['index_gb']:g} GB", f"{s['available_at_p99_knee_gb']:.2f} GB",
                               f"{s['available_at_p99_knee_gb'] - s['index_gb']:+.2f} GB", '—',
                               '—', '—', '—', '—', '—'))
    laws = []
    for key in _hosts(rows_in):
        first = next(x for x in rows_in if x["knee"].host == key)
        law = index_memory.plan_index("flat", first["run"]["index_vectors"], first["run"]["index_dim"],
                                      results_dir=RESULTS, host=key)
        laws.append(tr("{host}: index + {hot} GB", host=host_name(first["run"], tr),
                       hot=f"{law.hot_cache_bytes / 1e9:.2f}"))
    ratios = ", ".join(f"{x['knee'].ratio:.2f}" for x in rows_in)
    tested = [x for x in rows_in if x["from_others"]]
    safe = [x for x in tested if x["plan"].host_memory_needed_bytes >= x["knee"].mem_available_at_knee_bytes]
    worst = max((x["knee"].mem_available_at_knee_bytes - x["plan"].host_memory_needed_bytes for x in tested),
                default=0)
    check = (" " + tr("Predicted from the other runs only, the knee's MemAvailable was on the safe side (predicted ≥ "
                      "measured) for {safe} of {tested} runs", safe=len(safe), tested=len(tested))
             + (tr("; the worst miss was {gb} GB", gb=f"{worst / 1e9:.2f}") if worst > 0 else "") + "." if tested else "")
    return ("\n".join(rows) + "\n\n" + tr(
        "The law per host, as the calculator uses it: **p99 stays flat while MemAvailable ≥ index + the host's hot "
        "cache** (the largest of its runs above) — {laws}. In ratios, the knees fell at MemAvailable = {ratios} × "
        "the index here, against {study} in the original study.", laws="; ".join(laws), ratios=ratios,
        study=", ".join(f"{s['available_at_p99_knee_gb'] / s['index_gb']:.2f}" for s in study["runs"]))
        + f"{check}{quiet_knee_notes(rows_in, tr)}\n")


def calculator_md(runs, tr=EN) -> str:
    """`capacity index` for the largest saved index on this host, as the page shows it (command and JSON)."""
    rows_in = law_runs(runs)
    if not rows_in:
        return tr("No saved run to apply the law to yet.") + "\n"
    # the run from a hog at 0 (no --start-gb) if there is one, else the largest index
    x = max(rows_in, key=lambda x: (not in_cgroup(x["run"]), x["run"]["config"]["start_bytes"] == 0,
                                    x["knee"].index_bytes))
    r, k = x["run"], x["knee"]
    host_gb = round(k.mem_available_before_hog_bytes / 1e9, 2)  # as typed on the command line shown
    plan = index_memory.plan_index("flat", r["index_vectors"], r["index_dim"], host_memory_bytes=host_gb * 1e9,
                                   results_dir=RESULTS, host=k.host)
    keys = {key: value for key, value in plan.to_dict().items() if key not in ("hot_cache_source", "hot_cache_warning")}
    return (f"```console\n$ .venv/bin/capacity index --vectors {r['index_vectors']} --dim {r['index_dim']} --type flat "
            f"--host-memory-gb {host_gb:.2f} --json\n{json.dumps(keys, indent=1)}\n```\n\n" + tr(
                "The host had {host} GB available with the index cached and the hog at 0; the calculator says other "
                "processes may take {headroom} before p99 leaves its baseline. The run measured its p99 knee with "
                "{taken} taken, MemAvailable then {available} against {predicted} predicted (the law takes the largest "
                "hot cache of this host's runs, so it errs on the safe side).", host=f"{host_gb:.2f}",
                headroom=_gb(plan.headroom_bytes), taken=_gb(k.hog_at_knee_bytes),
                available=_gb(k.mem_available_at_knee_bytes), predicted=_gb(plan.host_memory_needed_bytes)) + "\n")


def study_md(runs, study, tr=EN) -> str:
    """The original study's host against this one, in their own numbers."""
    s5, s25 = study["runs"]
    ours = law_runs(runs)
    hot5, hot25 = s5["available_at_p99_knee_gb"] - s5["index_gb"], s25["available_at_p99_knee_gb"] - s25["index_gb"]
    text = tr(
        "The study's host was a {host5} GB desktop. At its p99 knee ({taken5} GB taken) it still showed {avail5} GB "
        "available, {pct5} of its memory: {hot5} GB more than its {index5} GB index ({ratio5} ×). Its {index25} GB "
        "index on a {host25} GB host broke with {hot25} GB more than the index available ({ratio25} ×): the ratio "
        "moved by {dratio}, the excess by {dhot} GB. Those gigabytes are the files a desktop keeps hot — the browser, "
        "the desktop session, the libraries of everything running — which the kernel keeps as readily as the index's "
        "pages. Its watermarks were tens of MB whatever its settings: the kernel's default `min_free_kbytes` is "
        "√(16 × memory in KiB) = {minfree} MiB for its memory, and the floor for transparent huge pages (below) "
        "{thp} MiB with three zones.", host5=f"{s5['host_gb']:g}", taken5=f"{s5['p99_knee_taken_gb']:g}",
        avail5=f"{s5['available_at_p99_knee_gb']:.2f}", pct5=_pct(s5["available_at_p99_knee_fraction"]),
        hot5=f"{hot5:.2f}", index5=f"{s5['index_gb']:g}", ratio5=f"{s5['available_at_p99_knee_gb'] / s5['index_gb']:.2f}",
        index25=f"{s25['index_gb']:g}", host25=f"{s25['host_gb']:g}", hot25=f"{hot25:.2f}",
        ratio25=f"{s25['available_at_p99_knee_gb'] / s25['index_gb']:.2f}",
        dratio=f"{abs(s25['available_at_p99_knee_gb'] / s25['index_gb'] - s5['available_at_p99_knee_gb'] / s5['index_gb']):.2f}",
        dhot=f"{abs(hot5 - hot25):.2f}", minfree=f"{math.sqrt(16 * s5['host_gb'] * 1e9 / 1024) / 1024:.0f}",
        thp=f"{512 * 3 * 11 * 4096 / 2**20:.0f}")
    ours = [x for x in ours if not in_cgroup(x["run"])]
    if ours:
        hot = [x["knee"].hot_cache_bytes / 1e9 for x in ours]
        text += " " + tr("On this host, a virtual machine shared with other work, the knees came at MemAvailable = "
                         "index {hot}.", hot=", ".join(f"{h:+.2f} GB" for h in hot))
    return text + "\n"


def kernel_md(runs, tr=EN) -> str:
    """This host's reclaim settings, in numbers, from the host facts saved with the newest run."""
    r = max((r for r in runs if r["host"].get("zone_watermarks_pages")), key=lambda r: r["started_at"], default=None)
    if r is None:
        return tr("No saved run records the kernel's watermarks yet.") + "\n"
    h, page = r["host"], r["host"]["page_size_bytes"]
    zones = h["zone_watermarks_pages"]
    mb = lambda pages: f"{pages * page / 1e6:,.0f} MB"  # noqa: E731
    rows = tables.head(tr("| zone | managed | min | low | high |"))
    for z in zones:
        rows.append(tables.row(z['zone'], _gb(z['managed'] * page), mb(z['min']), mb(z['low']), mb(z['high'])))
    total = {key: sum(z[key] for z in zones) for key in ("min", "low", "high")}
    rows.append(tables.row(f"**{tr('all')}**", _gb(sum(z['managed'] for z in zones) * page), mb(total['min']),
                           mb(total['low']), mb(total['high'])))
    n_zones = len(zones)
    block = (2 << 20) // page  # a pageblock: one 2 MiB huge page
    thp = int(h["vm_min_free_kbytes"]) == block * n_zones * (2 + 9) * page // 1024
    ra = (h.get("index_block_device") or {}).get("read_ahead_kb")
    swap = tr("no swap") if not h["swap_total_bytes"] else tr("{size} swap", size=_gb(h["swap_total_bytes"]))
    return ("\n".join(rows) + "\n\n"
            f"`vm.min_free_kbytes` = {int(h['vm_min_free_kbytes']):,} KiB"
            + (tr(" = {block} pages × {zones} zones × (2 + 3²) × 4 KiB, the floor the kernel sets for transparent huge "
                  "pages (`set_recommended_min_free_kbytes`, mm/khugepaged.c)", block=block, zones=n_zones) if thp else "")
            + tr("; `vm.watermark_scale_factor` = {scale} (low and high sit {pct} % of each zone above min); "
                 "`vm.watermark_boost_factor` = {boost}; `vm.swappiness` = {swappiness} with {swap}; read-ahead of the "
                 "index's disk {ra} KiB; transparent huge pages `{thp}`. Run `{file}`.",
                 scale=h["vm_watermark_scale_factor"], pct=f"{int(h['vm_watermark_scale_factor']) / 100:g}",
                 boost=h["vm_watermark_boost_factor"], swappiness=h["vm_swappiness"], swap=swap,
                 ra=ra if ra is not None else "?", thp=h["transparent_hugepage"], file=r["file"]) + "\n")


def monitoring_md(plotted, study, tr=EN) -> str:
    """What each signal said at the p99 knee of the first plotted run that has one."""
    run = next((r for r in plotted if r["knee_p99"]), None)
    s = study["runs"][0]
    if run is None:
        return tr("The saved run has no knee yet, so here are the original study's figures: p99 went from {base} µs to "
                  "{knee} µs (×{ratio}) while MemAvailable still showed {available} GB ({pct} of the host), and p50 "
                  "moved only {later} GB of memory pressure later.", base=f"{s['p99_baseline_us']:g}",
                  knee=f"{s['p99_knee_us']:,}", ratio=f"{s['p99_knee_ratio']:,}",
                  available=f"{s['available_at_p99_knee_gb']:.2f}", pct=_pct(s["available_at_p99_knee_fraction"]),
                  later=f"{s['p50_knee_after_p99_knee_gb']:.2f}") + "\n"
    k = run["knee_p99"]
    at = run["cycles"][k["cycle"]]

    def ratio(key):
        # The same baseline as the knee itself and the median's table (re-taken with the hog in place, index
        # cached: _ratios), never the first idle cycles, which ran before the index was read into memory.
        return _ratios(run, key)[k["cycle"]]

    psi = tr("not available on this kernel") if at["psi_some_avg10"] is None else \
        tr("some {some}%, full {full}%", some=f"{at['psi_some_avg10']:.2f}", full=f"{at['psi_full_avg10']:.2f}")
    lines = [
        tr("At the p99 knee of the {index} run (hog at {hog}); each signal against its own baseline re-taken with the "
           "hog in place and the index in memory, as the knee and the median's tables above:",
           index=_gb(run["index_bytes"]), hog=_gb(k["hog_bytes"])),
        "",
        *tables.head(tr("| signal | at the p99 knee | vs. baseline |")),
        tables.row(tr("p99 page read"), f"{at['p99_us']:,.1f} µs", f"×{ratio('p99_us'):,.0f}"),
        tables.row(tr("p99.9 page read"), f"{at['p999_us']:,.1f} µs", f"×{ratio('p999_us'):,.0f}"),
        tables.row(tr("p50 page read"), f"{at['p50_us']:,.2f} µs", f"×{ratio('p50_us'):,.1f}"),
        tables.row(tr("mean page read"), f"{at['mean_us']:,.1f} µs", f"×{ratio('mean_us'):,.1f}"),
        tr("| major faults in the cycle | {faults} of {reads} reads | — |", faults=f"{at['major_faults']:,}",
           reads=f"{at['reads']:,}"),
        tables.row(tr("index in page cache"), f"{100 * at['index_resident_bytes'] / run['index_bytes']:.1f}%", f"—"),
        "| MemAvailable | " + tr("{available} ({pct} of host)", available=_gb(at["mem_available_bytes"]),
                                 pct=_pct(at["mem_available_bytes"] / run["host_mem_bytes"])) + " | — |",
        tables.row(tr("searcher RSS anonymous / file-backed"), f"{_gb(at['rss_anon_bytes'])} / {_gb(at['rss_file_bytes'])}", f"—"),
        tables.row(tr("PSI memory avg10"), psi, f"—"),
    ]
    k50 = run["knee_p50"]
    if k50:
        lines += ["", tr("p50 crossed its own threshold (×{factor} its baseline) at {taken} taken, {later} after the "
                         "p99 knee (original study: {study} GB after).", factor=f"{run['config'].get('p50_knee_factor', experiment.P50_KNEE_FACTOR):g}",
                         taken=_gb(k50["hog_bytes"]), later=_gb(k50["hog_bytes"] - k["hog_bytes"]),
                         study=f"{s['p50_knee_after_p99_knee_gb']:.2f}")]
    else:
        lines += ["", tr("p50 never crossed its own threshold in this run.")]
    return "\n".join(lines) + "\n"


def build(out):
    i18n.use_figure_fonts()  # the Korean figures' labels need the CJK font
    out = Path(out)
    study = json.loads(STUDY.read_text())
    runs = load_runs()
    with_knee = [r for r in runs if r["knee_p99"]]
    plotted = with_knee if with_knee else runs[:1]
    for lang, tr in i18n.each_language():
        for r in plotted:
            plot_run(r, out / i18n.localized(f"{r['slug']}.png", lang), tr)
    w = i18n.write_text
    w(out, "runs.md", lambda tr: runs_md(runs, plotted, tr))
    w(out, "knees.md", lambda tr: knees_md(runs, study, tr))
    w(out, "baseline.md", lambda tr: baseline_md(runs, tr))
    w(out, "law.md", lambda tr: law_md(runs, study, tr))
    w(out, "kernel.md", lambda tr: kernel_md(runs, tr))
    w(out, "calculator.md", lambda tr: calculator_md(runs, tr))
    w(out, "study.md", lambda tr: study_md(runs, study, tr))
    w(out, "monitoring.md", lambda tr: monitoring_md(plotted, study, tr))
    w(out, "p50.md", lambda tr: p50_md(runs, study, tr))
    w(out, "check_p50.md", lambda tr: check_p50_md(runs, tr))
    w(out, "hosts.md", lambda tr: hosts_md(runs, study, tr))




# --- the median, and the study's two hosts ----------------------------------------------------------------------
def _fault_share(c) -> float:
    """Share of a cycle's reads that took a fault of either kind (major: the disk; minor: a page still cached but
    unmapped by reclaim)."""
    return (c["major_faults"] + c["minor_faults"]) / c["reads"]


def _ratios(run, key) -> list[float]:
    """Each cycle's ``key`` over the baseline it is compared with (re-taken with the hog in place, as the knee)."""
    cycles, cfg = run["cycles"], run["config"]
    clean = [c["phase"] != "baseline" and c["major_faults"] == 0 for c in cycles]
    series = [c[key] for c in cycles]
    idle = statistics.median(series[:cfg["baseline_cycles"]])
    return [v / (idle if b is None else b) for v, b in
            zip(series, trailing_baseline(series, clean, cfg["baseline_cycles"]))]


def p50_facts(run) -> dict | None:
    """Where the median moved in a run with both knees: the share of the index evicted and of the reads that
    faulted there, and the most either reached before; None without both knees."""
    k99, k50 = run["knee_p99"], run["knee_p50"]
    if not (k99 and k50):
        return None
    cycles, i, n = run["cycles"], k50["cycle"], run["config"]["baseline_cycles"]
    p50, mean = _ratios(run, "p50_us"), _ratios(run, "mean_us")
    return {"after_p99_bytes": k50["hog_bytes"] - k99["hog_bytes"],
            "evicted": 1 - k50["index_resident_bytes"] / run["index_bytes"],
            "faulted": _fault_share(cycles[i]), "faulted_before": max(_fault_share(c) for c in cycles[:i]),
            "p50_ratio": p50[i], "p50_ratio_before": max(p50[n:i]),
            "mean_ratio_at_p99": mean[k99["cycle"]], "p50_ratio_at_p99": p50[k99["cycle"]],
            "confirmed": k50["confirmed"]}


def p50_md(runs, study, tr=EN) -> str:
    """Where the median moved, run by run, against the simple model's "half the index"."""
    rows = tables.head(tr("| host | index | p99 knee: memory taken | p50 knee: memory taken (after the p99 knee) | index "
               "evicted at the p50 knee | reads that faulted, major + minor: most before → at the p50 knee | p50 × "
               "its baseline: most before → at the knee | at the p99 knee: mean × its baseline, p50 × its baseline |"))
    facts = []
    for r in runs:
        f = p50_facts(r)
        if f is None:
            continue
        facts.append(f)
        flag = "" if f["confirmed"] else tr(" (unconfirmed)")
        rows.append(tables.row(host_name(r, tr), _gb(r['index_bytes']), _gb(r['knee_p99']['hog_bytes']),
                               f"{_gb(r['knee_p50']['hog_bytes'])} (+{_gb(f['after_p99_bytes'])}){flag}",
                               f"{100 * f['evicted']:.0f} %",
                               f"{100 * f['faulted_before']:.0f} % → {100 * f['faulted']:.0f} %",
                               f"×{f['p50_ratio_before']:.1f} → ×{f['p50_ratio']:.1f}",
                               f"×{f['mean_ratio_at_p99']:,.0f}, ×{f['p50_ratio_at_p99']:.1f}"))
    s = study["runs"][0]
    rows.append(tables.row(tr(s['label']), f"{s['index_gb']:g} GB", f"{s['p99_knee_taken_gb']:.2f} GB",
                           f"{s['p99_knee_taken_gb'] + s['p50_knee_after_p99_knee_gb']:.2f} GB (+{s['p50_knee_after_p99_knee_gb']:.2f} GB)",
                           '—', '—', '—', '—'))
    if not facts:
        return "\n".join(rows) + "\n"
    return ("\n".join(rows) + "\n\n" + tr(
        "In every run with both knees the median jumped in the cycle where more than half of the reads took a fault "
        "({faulted} %) — before it, never more than {before} % did — with {lo}–{hi} % of the index evicted, never "
        "half. At the p99 knee the mean was already ×{mean_lo}–×{mean_hi} its baseline, while the median of the runs "
        "where it moved later was within ×{p50_hi} of its own: the mean moves with the tail.",
        faulted=f"{100 * min(f['faulted'] for f in facts):.0f}–{100 * max(f['faulted'] for f in facts):.0f}",
        before=f"{100 * max(f['faulted_before'] for f in facts):.0f}",
        lo=f"{100 * min(f['evicted'] for f in facts):.0f}", hi=f"{100 * max(f['evicted'] for f in facts):.0f}",
        mean_lo=f"{min(f['mean_ratio_at_p99'] for f in facts):,.0f}",
        mean_hi=f"{max(f['mean_ratio_at_p99'] for f in facts):,.0f}",
        p50_hi=f"{max((f['p50_ratio_at_p99'] for f in facts if f['after_p99_bytes'] > 0), default=0):.1f}") + "\n")


def check_p50_md(runs, tr=EN) -> str:
    facts = [f for f in (p50_facts(r) for r in runs) if f]
    if not facts:
        return tr("No saved run has both knees yet.") + "\n"
    return tr("Measured here: the median moved with {lo}–{hi} % of the index evicted, in the cycle where {flo}–{fhi} % "
              "of the reads faulted ({n} runs).", lo=f"{100 * min(f['evicted'] for f in facts):.0f}",
              hi=f"{100 * max(f['evicted'] for f in facts):.0f}",
              flo=f"{100 * min(f['faulted'] for f in facts):.0f}", fhi=f"{100 * max(f['faulted'] for f in facts):.0f}",
              n=len(facts)) + "\n"


def hosts_md(runs, study, tr=EN) -> str:
    """The runs in memory cgroups of the study's two sizes, beside the study's hosts and the law."""
    rows_in = [x for x in law_runs(runs) if in_cgroup(x["run"])]
    if not rows_in:
        return tr("No saved run in a memory cgroup yet.") + "\n"
    rows = tables.head(tr("| host | index | p99 knee: memory taken (share of the host) | MemAvailable at the knee | ÷ index | "
               "hot cache = MemAvailable − index | p50 knee after the p99 knee |"))
    for x in rows_in:
        r, k = x["run"], x["knee"]
        k50 = r["knee_p50"]
        after = f"+{_gb(k50['hog_bytes'] - k.hog_at_knee_bytes)}" if k50 else tr("none")
        rows.append(tables.row(host_name(r, tr), _gb(k.index_bytes),
                               f"{_gb(k.hog_at_knee_bytes)} ({_pct(k.hog_at_knee_bytes / r['host_mem_bytes'])})",
                               _gb(k.mem_available_at_knee_bytes), f"{k.ratio:.2f}",
                               f"{k.hot_cache_bytes / 1e9:+.2f} GB", after))
    for s in study["runs"]:
        taken = (f"{s['p99_knee_taken_gb']:.2f} GB ({_pct(s['p99_knee_taken_gb'] / s['host_gb'])})"
                 if "p99_knee_taken_gb" in s else "—")
        after = f"+{s['p50_knee_after_p99_knee_gb']:.2f} GB" if "p50_knee_after_p99_knee_gb" in s else "—"
        rows.append(tables.row(f"{tr(s['label'])} ({s['host_gb']:g} GB)", f"{s['index_gb']:g} GB", taken,
                               f"{s['available_at_p99_knee_gb']:.2f} GB",
                               f"{s['available_at_p99_knee_gb'] / s['index_gb']:.2f}",
                               f"{s['available_at_p99_knee_gb'] - s['index_gb']:+.2f} GB", after))
    hot = [x["knee"].hot_cache_bytes / 1e9 for x in rows_in]
    study_hot = [s["available_at_p99_knee_gb"] - s["index_gb"] for s in study["runs"]]
    big = [x for x in law_runs(runs) if not in_cgroup(x["run"])]
    whole = ""
    if big:
        h = _hosts(big)[0]
        vm_hot = index_memory.plan_index("flat", 1, 1, results_dir=RESULTS, host=h).hot_cache_bytes
        safe = all(x["knee"].mem_available_at_knee_bytes <= x["knee"].index_bytes + vm_hot for x in rows_in)
        whole = " " + tr("The whole machine's law (index + {hot} GB, from its own runs) would have put each group's "
                         "knee {side}.", hot=f"{vm_hot / 1e9:.2f}",
                         side=tr("earlier than measured: the safe side") if safe else tr("later than measured"))
    return ("\n".join(rows) + "\n\n" + tr(
        "Inside the groups the knee came at MemAvailable = index {hot}: the law with a hot cache of about zero, since "
        "nothing else in a group keeps files hot. The study's desktops broke at index {study_hot}. So the absolute "
        "values differ — in memory taken and in MemAvailable — and the trend is the one the law states: the knee "
        "comes when MemAvailable falls to the index plus what else the host keeps hot, and that last term is the "
        "host's, to be measured there.", hot=", ".join(f"{h:+.2f} GB" for h in hot),
        study_hot=", ".join(f"{h:+.2f} GB" for h in study_hot)) + whole + "\n")

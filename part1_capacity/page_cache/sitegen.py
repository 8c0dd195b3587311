"""Figures and tables for site/part1/e3_page_cache.md, from the saved runs in part1_capacity/results/e3_*.json.

Nothing is measured here (the site builds in seconds): every number on the page comes from a saved run or from
the original study's figures in study_reference.json. Runs that found a p99 knee are plotted; when none did (the
small validation run committed before the full experiment), the largest saved run is plotted and labelled so.
"""
from __future__ import annotations

import json
from pathlib import Path

NAME = "e3"
HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"
STUDY = HERE / "study_reference.json"


def load_runs(results_dir: Path | None = None) -> list[dict]:
    """Saved runs, interrupted ones left out, largest index first; each gets a ``slug`` for its file names."""
    runs = []
    for p in sorted(Path(results_dir or RESULTS).glob("e3_*.json")):
        r = json.loads(p.read_text())
        if r.get("stop_reason") == "interrupted" or not r.get("cycles"):
            continue
        r["slug"], r["file"] = p.stem, p.name
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


def plot_run(run, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cycles, x = run["cycles"], _x(run)
    fig, (ax_lat, ax_flt, ax_pct) = plt.subplots(3, 1, figsize=(8, 8.5), sharex=True,
                                                 gridspec_kw={"height_ratios": [3, 1.4, 2]})
    for key, label, style in (("p999_us", "p99.9", ":"), ("p99_us", "p99", "-"), ("p50_us", "p50", "--")):
        ax_lat.plot(x, [c[key] for c in cycles], style, marker="o", ms=3, label=label)
    ax_lat.plot(x, [c["mean_us"] for c in cycles], "-.", color="grey", lw=1, label="mean")
    ax_lat.set_yscale("log")
    ax_lat.set_ylabel("page read latency (µs)")
    ax_lat.set_title(f"{_gb(run['index_bytes'])} index on a {_gb(run['host_mem_bytes'])} host — "
                     f"{run['started_at'][:10]}, {run['host']['hostname']}")

    ax_flt.bar(x, [max(c["major_faults"], 0) for c in cycles], width=0.6 * _step_gb(run), color="tab:red")
    ax_flt.set_yscale("symlog", linthresh=1)
    ax_flt.set_ylim(0, max(10, 3 * max(c["major_faults"] for c in cycles)))
    ax_flt.set_ylabel("major faults\nper cycle")

    index = run["index_bytes"]
    host = run["host_mem_bytes"]
    ax_pct.plot(x, [100 * c["index_resident_bytes"] / index for c in cycles], "-", marker="o", ms=3,
                label="index in page cache (% of index)")
    ax_pct.plot(x, [100 * c["mem_available_bytes"] / host for c in cycles], "-", label="MemAvailable (% of host)")
    if any(c["psi_some_avg10"] is not None for c in cycles):
        ax_pct.plot(x, [c["psi_some_avg10"] for c in cycles], "--", label="PSI memory some avg10 (%)")
        ax_pct.plot(x, [c["psi_full_avg10"] for c in cycles], ":", label="PSI memory full avg10 (%)")
    ax_pct.set_ylim(-3, 103)
    ax_pct.set_ylabel("percent")
    ax_pct.set_xlabel("memory taken by the hog (GB)")

    for knee, ls, label in ((run["knee_p99"], "-", "p99 knee"), (run["knee_p50"], "--", "p50 knee")):
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


def _step_gb(run):
    return run["config"]["step_bytes"] / 1e9


def _run_facts(run) -> str:
    h = run["host"]
    swap = "no swap" if not h["swap_total_bytes"] else f"{_gb(h['swap_total_bytes'])} swap"
    dev = h.get("index_block_device") or {}
    disk = f"{h['index_filesystem']}"
    if dev.get("device"):
        disk += f" on `{dev['device']}`"
    if dev.get("read_ahead_kb") is not None:
        disk += f", read-ahead {dev['read_ahead_kb']:,} KiB"
    advice = "MADV_RANDOM" if run["config"].get("madvise_random") else "the default (read-around)"
    return (f"Run of {run['started_at'].replace('T', ' ')[:16]} UTC on host `{h['hostname']}` ({h['cpus']} × "
            f"{h['cpu']}, {_gb(run['host_mem_bytes'])} RAM, {swap}, Linux {h['kernel']}, index on "
            f"{disk}; mapping advice {advice}); load average at start {h['loadavg_at_start'].split()[0]}. Command: "
            f"`{run['command']}`. Stopped because {STOP_REASONS.get(run['stop_reason'], run['stop_reason'])} "
            f"after {len(run['cycles'])} cycles of {run['config']['reads']:,} page reads. "
            f"Saved in `part1_capacity/results/{run['file']}`.")


def runs_md(runs, plotted) -> str:
    if not runs:
        return ("!!! warning \"No saved run\"\n    No E3 result is saved yet: run `capacity e3 --index-gb 5 "
                "--step-mb 256 --json` (it saves to `part1_capacity/results/`) and rebuild the site.\n")
    parts = []
    for r in plotted:
        parts.append(f"### {_gb(r['index_bytes'])} index on a {_gb(r['host_mem_bytes'])} host\n")
        if r["knee_p99"] is None:
            taken = max(c["hog_bytes"] for c in r["cycles"])
            parts.append(
                "!!! note \"Validation run, no knee\"\n"
                f"    This is the small run committed to check the machinery: the hog took at most {_gb(taken)}, "
                "far from the point where the index is evicted, so latency stays flat. The full experiment "
                "(`capacity e3 --index-gb 5 --step-mb 256 --json`, then a second size) replaces it.\n")
        parts.append(_run_facts(r) + "\n")
        # Raw HTML, not Markdown: mkdocs also reads this snippet as a page of its own (under generated/), where a
        # Markdown image link would be checked relative to the wrong folder. The path is relative to the E3 page.
        parts.append(f'<p><img src="../generated/e3/{r["slug"]}.png" alt="E3 run {r["slug"]}: latency, major '
                     f'faults, residency and PSI against memory taken" style="max-width:100%"></p>\n')
    others = [r for r in runs if r not in plotted]
    if others:
        parts.append("Also saved, not plotted (no knee): " + ", ".join(f"`{r['file']}`" for r in others) + ".\n")
    return "\n".join(parts)


def knees_md(runs, study) -> str:
    rows = ["| run | index | host RAM | p99 knee: memory taken | MemAvailable at p99 knee | p99 before → at knee "
            "| p50 knee: memory taken | MemAvailable at p50 knee |",
            "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        k99, k50, host = r["knee_p99"], r["knee_p50"], r["host_mem_bytes"]
        name = f"{r['started_at'][:10]} `{r['host']['hostname']}`"
        if k99:
            flag = "" if k99["confirmed"] else " (unconfirmed)"
            c99 = (f"{_gb(k99['hog_bytes'])} ({_pct(k99['hog_fraction'])}){flag}",
                   f"{_gb(k99['mem_available_bytes'])} ({_pct(k99['mem_available_fraction'])})",
                   f"{k99['baseline_us']:.1f} → {k99['value_us']:,.0f} µs (×{k99['ratio']:,.0f})")
        else:
            c99 = (f"none up to {_gb(max(c['hog_bytes'] for c in r['cycles']))}", "—", "—")
        if k50:
            after = f", +{_gb(k50['hog_bytes'] - k99['hog_bytes'])} after p99" if k99 else ""
            c50 = (f"{_gb(k50['hog_bytes'])} ({_pct(k50['hog_fraction'])}){after}",
                   f"{_gb(k50['mem_available_bytes'])} ({_pct(k50['mem_available_fraction'])})")
        else:
            c50 = ("none", "—")
        rows.append(f"| {name} | {_gb(r['index_bytes'])} | {_gb(host)} | " + " | ".join(c99 + c50) + " |")
    for s in study["runs"]:
        taken = f"{s['p99_knee_taken_gb']:.2f} GB" if "p99_knee_taken_gb" in s else "—"
        if "p99_knee_taken_gb" in s:
            taken += f" ({_pct(s['p99_knee_taken_gb'] / s['host_gb'])})"
        lat = (f"{s['p99_baseline_us']:g} → {s['p99_knee_us']:,} µs (×{s['p99_knee_ratio']:,})"
               if "p99_knee_us" in s else "—")
        p50 = f"+{s['p50_knee_after_p99_knee_gb']:.2f} GB after p99" if "p50_knee_after_p99_knee_gb" in s else "—"
        rows.append(f"| {s['label']} | {s['index_gb']:g} GB | {s['host_gb']:g} GB | {taken} | "
                    f"{s['available_at_p99_knee_gb']:.2f} GB ({_pct(s['available_at_p99_knee_fraction'])}) | "
                    f"{lat} | {p50} | — |")
    return "\n".join(rows) + f"\n\nOriginal study figures: {study['source']}\n"


def monitoring_md(plotted, study) -> str:
    """What each signal said at the p99 knee of the first plotted run that has one."""
    run = next((r for r in plotted if r["knee_p99"]), None)
    s = study["runs"][0]
    if run is None:
        return (f"The saved run has no knee yet, so here are the original study's figures: p99 went from "
                f"{s['p99_baseline_us']:g} µs to {s['p99_knee_us']:,} µs (×{s['p99_knee_ratio']:,}) while "
                f"MemAvailable still showed {s['available_at_p99_knee_gb']:.2f} GB "
                f"({_pct(s['available_at_p99_knee_fraction'])} of the host), and p50 moved only "
                f"{s['p50_knee_after_p99_knee_gb']:.2f} GB of memory pressure later.\n")
    k = run["knee_p99"]
    base = run["cycles"][: run["config"]["baseline_cycles"]]
    at = run["cycles"][k["cycle"]]

    def ratio(key):
        b = sorted(c[key] for c in base)[len(base) // 2]
        return at[key] / b if b else float("inf")

    psi = "not available on this kernel" if at["psi_some_avg10"] is None else \
        f"some {at['psi_some_avg10']:.2f}%, full {at['psi_full_avg10']:.2f}%"
    lines = [
        f"At the p99 knee of the {_gb(run['index_bytes'])} run (hog at {_gb(k['hog_bytes'])}):",
        "",
        "| signal | at the p99 knee | vs. baseline |",
        "|---|---|---|",
        f"| p99 page read | {at['p99_us']:,.1f} µs | ×{ratio('p99_us'):,.0f} |",
        f"| p99.9 page read | {at['p999_us']:,.1f} µs | ×{ratio('p999_us'):,.0f} |",
        f"| p50 page read | {at['p50_us']:,.2f} µs | ×{ratio('p50_us'):,.1f} |",
        f"| mean page read | {at['mean_us']:,.1f} µs | ×{ratio('mean_us'):,.1f} |",
        f"| major faults in the cycle | {at['major_faults']:,} of {at['reads']:,} reads | — |",
        f"| index in page cache | {100 * at['index_resident_bytes'] / run['index_bytes']:.1f}% | — |",
        f"| MemAvailable | {_gb(at['mem_available_bytes'])} ({_pct(at['mem_available_bytes'] / run['host_mem_bytes'])}"
        f" of host) | — |",
        f"| searcher RSS anonymous / file-backed | {_gb(at['rss_anon_bytes'])} / {_gb(at['rss_file_bytes'])} | — |",
        f"| PSI memory avg10 | {psi} | — |",
    ]
    k50 = run["knee_p50"]
    if k50:
        lines += ["", f"p50 crossed the same threshold only at {_gb(k50['hog_bytes'])} taken, "
                      f"{_gb(k50['hog_bytes'] - k['hog_bytes'])} later (original study: "
                      f"{s['p50_knee_after_p99_knee_gb']:.2f} GB later)."]
    else:
        lines += ["", "p50 never crossed the same threshold in this run."]
    return "\n".join(lines) + "\n"


def build(out):
    out = Path(out)
    study = json.loads(STUDY.read_text())
    runs = load_runs()
    with_knee = [r for r in runs if r["knee_p99"]]
    plotted = with_knee if with_knee else runs[:1]
    for r in plotted:
        plot_run(r, out / f"{r['slug']}.png")
    (out / "runs.md").write_text(runs_md(runs, plotted))
    (out / "knees.md").write_text(knees_md(plotted, study))
    (out / "monitoring.md").write_text(monitoring_md(plotted, study))

"""A context × batch grid of plans, vectorized: accelerators needed, without the KV cache, and added by it.

The fewest accelerators of ``deploy.fewest_accelerators`` run once over numpy arrays for the whole grid (a loop over
the allowed tensor/pipeline/expert shapes, never over grid points), so a grid of a million points takes seconds.
The counts are the plan's (``make_plan`` picks among the deployments with that count by decode time). ``bench_sweep.py`` prints the rate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.fmt import fmt_k
from part1_capacity.calculator.hardware.accelerators import Accelerator, load_accelerator
from dataclasses import replace

from part1_capacity.calculator.plan.deploy import fewest_accelerators
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.plan.resolve import Workload, resolve
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.model.profiles import ModelProfile


def pow2_grid(lo: int, hi: int) -> np.ndarray:
    """Powers of two from ``lo`` to ``hi`` (``hi`` appended when it is not one)."""
    vals = [1 << k for k in range(max(lo, 1).bit_length() - 1, hi.bit_length()) if lo <= (1 << k) <= hi]
    if not vals or vals[-1] != hi:
        vals.append(hi)
    return np.array(sorted(set(vals)), dtype=np.int64)


@dataclass
class Sweep:
    model: ModelProfile
    accelerator: Accelerator
    workload: Workload
    contexts: np.ndarray          # (n_context,)
    batches: np.ndarray           # (n_batch,)
    needed: np.ndarray            # (n_context, n_batch), inf where nothing fits
    without_kv: np.ndarray        # same shape
    kv_bytes_total: np.ndarray    # same shape
    weights_bytes: float

    @property
    def added_by_kv(self) -> np.ndarray:
        return self.needed - self.without_kv

    @property
    def points(self) -> int:
        return self.needed.size

    def to_dict(self) -> dict:
        def clean(a):
            return [[None if not np.isfinite(v) else int(v) for v in row] for row in a]
        return {"model": self.model.id, "accelerator": self.accelerator.id,
                "weights_dtype": self.workload.weights_dtype, "kv_dtype": self.workload.kv_dtype,
                "contexts": self.contexts.tolist(), "batches": self.batches.tolist(),
                "weights_bytes": self.weights_bytes,
                "accelerators_needed": clean(self.needed), "accelerators_without_kv": clean(self.without_kv),
                "accelerators_added_by_kv": clean(self.added_by_kv),
                "kv_to_weights_ratio": (self.kv_bytes_total / self.weights_bytes).tolist()}


def sweep(model, accelerator, contexts, batches, workload: Workload | None = None, **kw) -> Sweep:
    """Every (context, batch) pair of the two 1-D grids, in one vectorized pass."""
    model = model if isinstance(model, ModelProfile) else load_model(model)
    acc = accelerator if isinstance(accelerator, Accelerator) else load_accelerator(accelerator)
    contexts = np.asarray(contexts, dtype=np.int64)
    batches = np.asarray(batches, dtype=np.int64)
    if contexts.size == 0 or batches.size == 0:
        raise InputError("sweep: contexts and batches must not be empty")
    # a copy sized to the grid: the caller's workload is not changed
    wl = replace(workload, context=int(contexts.max()), batch=int(batches.max())) if workload else \
        Workload(context=int(contexts.max()), batch=int(batches.max()), **kw)
    r = resolve(model, acc, wl)        # refuses a context beyond the model's maximum, bad dtypes, …
    if contexts.min() <= 0 or batches.min() <= 0:
        raise InputError("sweep: contexts and batches must be positive integers")
    T = contexts[:, None].astype(np.float64)
    B = batches[None, :].astype(np.float64)
    grid = (len(contexts), len(batches))
    n = np.array(np.broadcast_to(fewest_accelerators(r, T, B), grid), dtype=np.float64)
    n0 = fewest_accelerators(r, T, B, with_cache=False)
    kv_total = B * model.cache_bytes(T, r.kv_bytes, r.state_bytes)
    return Sweep(model, acc, r.workload, contexts, batches, n, np.broadcast_to(n0, grid), kv_total, r.weights_bytes)


def heatmaps(s: Sweep, path, title: str | None = None, tr=None) -> None:
    """Two heatmaps side by side: accelerators needed, and how many of them the KV cache adds.

    ``tr`` translates the labels (a ``course.shared.i18n.Translator``: the site draws the map once per language)."""
    tr = tr or (lambda message, **values: message.format(**values) if values else message)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.colors import LogNorm

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, data, label, cmap in ((axes[0], s.needed, tr("accelerators needed"), "viridis"),
                                  (axes[1], s.added_by_kv, tr("added by the KV cache"), "magma")):
        shown = np.where(np.isfinite(data), data, np.nan)
        # Counts span 1 to hundreds: on a log scale 2 vs 4 is as visible as 64 vs 128. Zero (nothing added)
        # is drawn in the "under" colour, a cell where one sequence does not fit in the "bad" one.
        norm = LogNorm(vmin=1, vmax=max(2.0, float(np.nanmax(shown)) if np.isfinite(shown).any() else 2.0))
        cm = plt.get_cmap(cmap).copy()
        cm.set_under("#e8e8e8")
        cm.set_bad("white")
        im = ax.imshow(np.where(shown == 0, 0.5, shown), origin="lower", aspect="auto", cmap=cm, norm=norm)
        ax.set_xticks(range(len(s.batches)), [fmt_k(int(b)) for b in s.batches], rotation=45)
        ax.set_yticks(range(len(s.contexts)), [fmt_k(int(c)) for c in s.contexts])
        ax.set_xlabel(tr("concurrent sequences"))
        ax.set_ylabel(tr("context (tokens)"))
        ax.set_title(tr("{label} (log colour scale)", label=label))
        if len(s.contexts) * len(s.batches) <= 120:
            for i in range(len(s.contexts)):
                for j in range(len(s.batches)):
                    v = data[i, j]
                    dark = np.isfinite(v) and v >= 1 and norm(v) < 0.6
                    ax.text(j, i, "×" if not np.isfinite(v) else f"{int(v)}", ha="center", va="center",
                            fontsize=7, color="white" if dark else "black")
        bar = fig.colorbar(im, ax=ax, shrink=0.85, extend="min" if (shown == 0).any() else "neither")
        ticks = [2 ** k for k in range(int(np.log2(norm.vmax)) + 1)]
        bar.set_ticks(ticks[:: max(1, len(ticks) // 6)], labels=[f"{t:,}" for t in ticks[:: max(1, len(ticks) // 6)]])
        bar.minorticks_off()
    title = title or tr("{model} on {accelerator} (weights {weights}, KV {kv}; × = one sequence does not fit)",
                        model=s.model.name, accelerator=s.accelerator.name, weights=s.workload.weights_dtype,
                        kv=s.workload.kv_dtype)
    # names from files, escaped as every printer escapes them: a lone surrogate has no glyph (FreeType refuses it)
    fig.suptitle(validate.printable(title, limit=None), fontsize=10,
                 parse_math=False)    # a name's '$' is a character, not TeX: "$\\x$" in a file name is no formula
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")      # a path or an open file (the CLI opens it: validate.open_for_write)
    plt.close(fig)

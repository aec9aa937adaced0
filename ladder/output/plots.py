"""The figures a team looks at: ladder fit, predicted hero curve, collapsed curves, residuals, diagnostics,
training dynamics projected to the hero.

Each function takes plain curves and a `Prediction` and returns a matplotlib Figure; `save` writes
it as PNG and SVG. Losses are in nats per token, compute in FLOPs (fit compute: 3 × forward
without the head), fractions of the planned run.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib


def use_agg_outside_ipython() -> None:
    """Draw with Agg, which never opens a window, unless this runs in IPython (a Jupyter kernel): there the
    backend the shell chose stays, so a notebook shows its figures inline."""
    ipython = sys.modules.get("IPython")
    if ipython is None or ipython.get_ipython() is None:
        matplotlib.use("Agg")


use_agg_outside_ipython()
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import LogFormatterSciNotation, LogLocator, NullFormatter  # noqa: E402

from ladder.files import atomic_path  # noqa: E402
from ladder.predict.prediction import Prediction  # noqa: E402

if TYPE_CHECKING:
    from ladder.predict.dynamics import Dynamics, SeriesDynamics, SpikeDynamics

HERO = "#c0392b"
BAND = "#e67e22"


@dataclass(frozen=True)
class Curve:
    """One run's metric against fraction of its planned steps."""

    label: str
    fraction: np.ndarray
    value: np.ndarray
    compute: float = float("nan")
    """Fit compute of the whole run (FLOPs)."""
    tokens: np.ndarray | None = None

    @property
    def final(self) -> float:
        return float(self.value[-1])


MAX_LABELS = 8
"""Beyond this many runs a legend names the smallest and the largest only (the colours run between them)."""


def _labels(runs) -> list[str | None]:
    n = len(runs)
    if n <= MAX_LABELS:
        return [r.label for r in runs]
    return [f"{runs[0].label} (smallest of {n})" if i == 0 else f"{r.label} (largest)" if i == n - 1 else None
            for i, r in enumerate(runs)]


def _colors(n: int) -> list:
    cmap = plt.get_cmap("viridis")
    return [cmap(x) for x in np.linspace(0.1, 0.85, max(n, 1))]


def ladder_fit(
    rungs: Sequence[Curve],
    law: Callable[[np.ndarray], np.ndarray],
    prediction: Prediction,
    hero_compute: float,
    hero_actual: float | None = None,
    metric: str = "eval/loss",
    axis: str = "fit compute C (FLOPs, 3 × forward without head × tokens)",
    not_drawn: str = "",
    predicted_as: str | None = None,
) -> Figure:
    """Final loss against compute (`axis` labels it): the rungs, the fitted law, the hero's predicted point and band;
    `not_drawn`: the rungs without a final to draw (still training, crashed), named below the axes; `predicted_as`: the
    run predicted, where `prediction` follows another (its point is the prediction's)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    c = np.array([r.compute for r in rungs])
    grid = np.geomspace(min(c.min(), hero_compute) / 1.5, max(c.max(), hero_compute) * 1.5, 200)
    ax.plot(grid, law(grid), color="0.4", lw=1.2, label="endpoint law through the finished rungs (a guide)")
    for r, col, label in zip(rungs, _colors(len(rungs)), _labels(rungs)):
        ax.scatter(r.compute, r.final, color=col, s=36, zorder=3, label=label)
    fin = prediction.final
    if np.isfinite(fin["median"]):  # not where the laws stop short of the final step
        ax.errorbar([hero_compute], [fin["median"]], yerr=[[fin["median"] - fin["lo90"]], [fin["hi90"] - fin["median"]]],
                    fmt="D", color=HERO, capsize=4, label=f"hero predicted {fin['median']:.4f} (90% band)")
    if hero_actual is not None:
        ax.scatter([hero_compute], [hero_actual], marker="*", s=140, color="k", zorder=4,
                   label=f"hero actual {hero_actual:.4f}")
    ax.set_xscale("log")
    ax.set_xlabel(axis)
    ax.set_ylabel(f"final {metric} (nats/token)")
    ax.set_title(f"Ladder fit and the prediction of {predicted_as or prediction.run_name}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if not_drawn:
        fig.text(0.01, 0.01, textwrap.fill(f"not drawn, with no final of their plans (the prediction uses their evals): "
                                           f"{not_drawn}", width=110), fontsize=7, color="0.3", va="bottom")
    fig.tight_layout(rect=(0, 0.05 if not_drawn else 0, 1, 1))
    return fig


def _spans(flags: np.ndarray) -> list[tuple[int, int]]:
    """The (first, last) index of each stretch of consecutive True `flags`."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1))


def hero_curve(prediction: Prediction, actual: Curve | None = None, rungs: Sequence[Curve] = (),
               failed: Sequence[float] = (), predicted_as: str | None = None) -> Figure:
    """The predicted curve with its 50% and 90% bands, and the actual curve so far; `failed`: the fractions of
    the run where it logged NaN or inf (marked along the top); `predicted_as`: the run the prediction was made for,
    where the run drawn against it is another (`ladder plot --target-run`)."""
    fig, ax = plt.subplots(figsize=(10.5, 4.5))
    t = prediction.table
    f = t["fraction"].to_numpy()
    ax.fill_between(f, t["lo90"], t["hi90"], color=BAND, alpha=0.18, lw=0, label="90% band")
    ax.fill_between(f, t["lo50"], t["hi50"], color=BAND, alpha=0.35, lw=0, label="50% band")
    ax.plot(f, t["median"], color=BAND, lw=1.5, label="predicted median")
    unpredicted = ~np.isfinite(t["median"].to_numpy(float))
    out = ~t["in_assumptions"].to_numpy(bool) & ~unpredicted
    for flags, colour, label in ((unpredicted, "0.93", "not predicted (outside the rungs' evals)"),
                                 (out, "0.85", "outside assumptions (a change no law models)")):
        for i, (a, b) in enumerate(_spans(flags)):  # each stretch of its own: early steps, a late change
            # from the last eval before it (the run's start) to the next one (its last eval)
            left, right = f[a - 1] if a else 0.0, f[min(b + 1, len(f) - 1)]
            ax.axvspan(left, right, color=colour, alpha=0.6, label=None if i else label)
    for r, col, label in zip(rungs, _colors(len(rungs)), _labels(rungs)):
        ax.plot(r.fraction, r.value, color=col, lw=0.8, alpha=0.6, label=label)
    if actual is not None and len(actual.value):
        ax.plot(actual.fraction, actual.value, "o-", color=HERO, ms=3, lw=1, label=f"{actual.label} actual")
    for i, (at, said) in enumerate(_edits(prediction)):  # where the schedule the rungs never ran begins
        ax.axvline(at, color="0.35", ls=":", lw=1.2, label=f"schedule edit: {said}" if i < 2 else None)
    if len(failed):
        ax.plot(failed, np.full(len(failed), 0.97), "x", color="red", ms=7, mew=2, transform=ax.get_xaxis_transform(),
                label=f"eval not finite (NaN or inf): {len(failed)}")
    ax.set_ylim(*_curve_range(t, [actual] if actual is not None else [], rungs))
    ax.set_xlabel("fraction of the planned run")
    ax.set_ylabel(f"{prediction.metric} (nats/token)")
    seen = actual is not None and len(actual.value) > 0
    ax.set_title(textwrap.fill(_against(prediction, predicted_as) or
                               f"{prediction.run_name}: predicted{' and actual' if seen else ' (no actual value yet)'}",
                               width=90), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside: off the curves
    fig.tight_layout()
    return fig


def _edits(prediction: Prediction) -> list[tuple[float, str]]:
    """Each schedule edit of the predicted run as (its step's fraction of the plan the run started with, what it
    does)."""
    return [(e.at_step / max(prediction.started_with, 1.0), e.describe()) for e in prediction.schedule_edits()]


SHOWN_FROM = 0.1
"""The hero-curve figure's y-range is set by what it shows from this fraction of the run on (the losses of the
first steps, and the bands there, are far above)."""


def _curve_range(t, actual: Sequence[Curve], rungs: Sequence[Curve]) -> tuple[float, float]:
    """The y-range of the hero's curve: the medians, the actual curve and the rungs after `SHOWN_FROM`, and the
    90% band there as far as it lies within that spread again on each side (a band of a far extrapolation would
    flatten the rest to a line)."""
    late = t["fraction"].to_numpy() >= SHOWN_FROM
    late = late if late.any() else np.ones(len(t), dtype=bool)
    core = [t["median"].to_numpy(float)[late]]
    for c in (*actual, *rungs):
        f, v = np.asarray(c.fraction, dtype=float), np.asarray(c.value, dtype=float)
        core.append(v[f >= SHOWN_FROM] if (f >= SHOWN_FROM).any() else v)
    core = np.concatenate(core)
    lo_c, hi_c = float(np.nanmin(core)), float(np.nanmax(core))
    span = max(hi_c - lo_c, 0.02 * abs(hi_c))
    lo = max(min(lo_c, float(np.nanmin(t["lo90"].to_numpy(float)[late]))), lo_c - span)
    hi = min(max(hi_c, float(np.nanmax(t["hi90"].to_numpy(float)[late]))), hi_c + span)
    return lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)


def collapse(rungs: Sequence[Curve], E: float, hero: Curve | None = None, hero_final: float | None = None) -> Figure:
    """Normalised curves (L − E)/(L_final − E): on a fixed-ratio ladder they fall on one line. The hero is
    normalised by `hero_final` where given (its predicted final, while it has not finished), else by its own."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r, col, label in zip(rungs, _colors(len(rungs)), _labels(rungs)):
        ax.plot(r.fraction, (r.value - E) / (r.final - E), color=col, lw=1.2, label=label)
    if hero is not None and len(hero.value):
        final = hero.final if hero_final is None else hero_final
        label = hero.label if hero_final is None else f"{hero.label} (by its predicted final)"
        if hero_final is None and hero.fraction[-1] < 0.999:  # finished on a plan edited shorter: its end is not 1
            label = f"{hero.label} (plan edited to end at {hero.fraction[-1]:.0%}: by its final there)"
        ax.plot(hero.fraction, (hero.value - E) / (final - E), "o", color=HERO, ms=3, label=label)
    ax.set_xlabel("fraction of the planned run")
    ax.set_ylabel("(L − E) / (L_final − E)")
    at_bound = ", at its lower bound" if E <= 0 else ""  # the fit found no floor above 0
    ax.set_title(f"Collapsed curves (E = {E:.4f} nats/token{at_bound})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _against(prediction: Prediction, predicted_as: str | None) -> str:
    """A title's "RUN: against the prediction of TARGET" for a run drawn against another's prediction; "" else."""
    other = predicted_as is not None and predicted_as != prediction.run_name
    return f"{prediction.run_name}: against the prediction of {predicted_as}" if other else ""


def residuals(prediction: Prediction, actual: Curve, predicted_as: str | None = None) -> Figure:
    """Predicted over actual minus one (the error as `score` and `watch` give it), against fraction, with the
    bands on the same scale: an eval is inside a band where its point is. The y-range is that of the errors and
    bands from `SHOWN_FROM` of the run on (as `ladder score` scores them), where there are any, and the run's errors
    before it while it has none later: a wide early band would flatten the rest."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    t = prediction.table
    f = t["fraction"].to_numpy()
    med = t["median"].to_numpy()
    for lo, hi, alpha, label in (("lo90", "hi90", 0.18, "90% band"), ("lo50", "hi50", 0.35, "50% band")):
        ax.fill_between(f, 100 * (med / t[hi] - 1), 100 * (med / t[lo] - 1), color=BAND, alpha=alpha, lw=0,
                        label=label)
    known = np.isfinite(med)  # the evals the prediction covers, as `ladder score` scores them: none past its end
    shown = [100 * (med / t[b].to_numpy(float) - 1)[f >= SHOWN_FROM] for b in ("lo90", "hi90")]
    if len(actual.value) and known.any():
        pred_at = np.interp(actual.fraction, f[known], med[known], left=np.nan, right=np.nan)
        error = 100 * (pred_at / actual.value - 1)
        ax.plot(actual.fraction, error, "o-", color=HERO, ms=3, lw=1, label=actual.label)
        after = np.asarray(actual.fraction) >= SHOWN_FROM
        shown.append(error[after] if after.any() else error)  # a run not yet 10% in: its errors so far
    late = np.concatenate([[0.0], *shown])
    late = late[np.isfinite(late)]
    if late.size > 1 and late.max() > late.min():
        lo, hi = float(late.min()), float(late.max())
        ax.set_ylim(lo - 0.08 * (hi - lo), hi + 0.08 * (hi - lo))
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("fraction of the planned run")
    ax.set_ylabel("predicted / actual − 1 (%)")
    whose = _against(prediction, predicted_as) or prediction.run_name
    ax.set_title(textwrap.fill(f"{whose}: errors of the prediction (above 0: predicted too high)"
                               + (f"; scaled from {SHOWN_FROM:.0%} of the run on" if late.size > 1 else ""), width=90),
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def diagnostics(grad: Sequence[Curve], drop: Sequence[Curve], hero_last: bool = True) -> Figure:
    """Grad norm and MoE drop fraction against fraction, rungs and hero (the hero last, in red); the drop fraction
    only where a run logs it (a dense model has none)."""
    panels = [(grad, "grad norm (global L2)")] + [(drop, "MoE drop fraction")] * any(len(c.value) for c in drop)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
    a = axes[0][0]
    for ax, (curves, quantity) in zip(axes[0], panels):
        rungs = curves[:-1] if hero_last and curves else curves  # "smallest of n", "largest" count the rungs only
        cols = _colors(len(rungs))[:len(rungs)] + [HERO] * (len(curves) - len(rungs))
        names = _labels(rungs) + [r.label for r in curves[len(rungs):]]
        for r, col, name in zip(curves, cols, names):
            ax.plot(r.fraction, _smooth(r.value), color=col, lw=1, label=name)
        ax.set_xlabel("fraction of the planned run")
        ax.set_ylabel(quantity)
        ax.set_title(quantity, fontsize=9)
        ax.grid(True, alpha=0.3)
    a.set_yscale("log")
    a.legend(fontsize=7)
    fig.suptitle(textwrap.fill("Training diagnostics: rungs and hero at the same fraction (rolling mean over 2% of "
                               "each run)", width=65 * len(panels)), fontsize=10)  # ~13 characters an inch at 10 pt
    fig.tight_layout()
    return fig


DYNAMICS_LABELS = {
    "grad/norm/total": "grad norm (global L2)",
    "moe/drop_fraction": "MoE drop fraction",
    "train/router/load_balancing_loss": "router load-balancing loss",
    "train/router/router_z_loss": "router z-loss",
}


def dynamics(dyn: Dynamics) -> Figure:
    """One panel per projected series: the rungs' curves (rolling medians, thin), the projection to the
    hero's fit compute (median, 50% and 90% bands) and the hero's own series where logged; a last panel
    for the train-loss spike rate against compute."""
    panels = len(dyn.series) + (dyn.spikes is not None)
    cols = 2 if panels > 1 else 1
    rows = max(1, -(-panels // cols))
    width = 5.6 * cols  # inches
    fig, axes = plt.subplots(rows, cols, figsize=(width, 3.7 * rows), squeeze=False)
    flat_axes = list(axes.ravel())
    spare = flat_axes[panels:]
    for i, (ax, s) in enumerate(zip(flat_axes, dyn.series)):
        _dynamics_panel(ax, s, legend=i == 0 and not spare)
    if dyn.spikes is not None:
        _spike_panel(flat_axes[len(dyn.series)], dyn.spikes, dyn.compute)
    for ax in spare:
        ax.set_axis_off()
    if spare and dyn.series:  # the same runs and bands in every panel: one legend, in a free slot, off the data
        spare[0].legend(*flat_axes[0].get_legend_handles_labels(), loc="center", fontsize=8, frameon=False)
    title = (f"{dyn.target}: training dynamics projected to its size (fit compute {dyn.compute:.3g} FLOPs over the "
             "plan it started with) from the rungs at the same fraction")
    fig.suptitle(textwrap.fill(title, width=int(13 * width)), fontsize=10)  # ~13 characters an inch at 10 pt
    fig.tight_layout()
    return fig


def _dynamics_panel(ax, s: SeriesDynamics, legend: bool) -> None:
    from fits.trends import FRACTIONS, on_grid

    cols = _colors(len(s.rungs))
    for r, col, label in zip(s.rungs, cols, _labels(s.rungs)):
        ax.plot(FRACTIONS, on_grid(r.fraction, r.value, FRACTIONS), color=col, lw=0.8, alpha=0.8, label=label)
    p = s.projection
    if p is not None:
        f = p.fraction
        lo90, hi90 = p.interval(0.9)
        lo50, hi50 = p.interval(0.5)
        if s.metric == "moe/drop_fraction":  # a fraction: its band stops at 0 and 1
            lo90, hi90, lo50, hi50 = (np.clip(x, 0.0, 1.0) for x in (lo90, hi90, lo50, hi50))
        ax.fill_between(f, lo90, hi90, color=BAND, alpha=0.18, lw=0, label="projected 90% band")
        ax.fill_between(f, lo50, hi50, color=BAND, alpha=0.35, lw=0, label="projected 50% band")
        ax.plot(f, p.median, color=BAND, lw=1.6, label="projected median")
        if p.flat.any():
            ax.plot(f[p.flat], p.median[p.flat], "o", ms=2.5, mfc="white", color=BAND,
                    label="flat here (no trend across sizes)")
    if s.hero is not None:
        hero = on_grid(s.hero.fraction, s.hero.value, FRACTIONS)
        ax.plot(FRACTIONS, hero, "o-", color=HERO, ms=2.5, lw=1.1, label=f"{s.hero.name} actual")
    label = DYNAMICS_LABELS.get(s.metric, s.metric)
    positive = p.log_y if p is not None else all(np.nanmin(r.value) > 0 for r in s.rungs)
    if positive and s.metric != "moe/drop_fraction":
        ax.set_yscale("log")
    note = "not projected (fewer than 3 rungs)" if p is None else (
        "projected flat: no trend across sizes" if p.flat.all() else
        "power law in compute" + (f", flat at {int(p.flat.sum())} fractions" if p.flat.any() else ""))
    ax.set_title(f"{label}\n{note}", fontsize=9)
    ax.set_xlabel("fraction of the planned run")
    ax.set_ylabel(f"{s.metric} (rolling median, 2% of the run)", fontsize=8)
    ax.grid(True, alpha=0.3)
    if legend:  # the same runs and bands in every panel: one legend
        ax.legend(fontsize=6.5, loc="best")


def _spike_panel(ax, sp: SpikeDynamics, hero_compute: float) -> None:
    ax.scatter(sp.compute, sp.per_1k, color=_colors(len(sp.rungs)), s=30, zorder=3, label="rungs")
    p = sp.projection
    if p is not None:
        for level, width in ((0.9, 1.2), (0.5, 3.5)):
            lo, hi = p.interval(level)
            ax.plot([hero_compute] * 2, [1000 * lo, 1000 * hi], color=BAND, lw=width, alpha=0.7,
                    label=f"projected {level:.0%} band")
        ax.plot([hero_compute], [1000 * p.median], "D", color=BAND, label="projected")
    if sp.hero_rate is not None:
        ax.plot([hero_compute], [sp.hero_rate], "*", ms=11, color=HERO, label="hero so far")
    ax.set_xscale("log")
    # labels at 1, 2 and 5 of each decade only: over a decade or two the minor ticks' labels run into each other
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(LogFormatterSciNotation(labelOnlyBase=False))
    ax.xaxis.set_minor_formatter(NullFormatter())
    note = "not projected (fewer than 3 rungs)" if p is None else (
        "projected flat: no trend across sizes" if p.flat else f"trend in compute (exponent {p.slope:+.2f})")
    ax.set_title(f"train-loss spikes per 1,000 steps (past 5% of the run)\n{note}", fontsize=9)
    ax.set_xlabel("fit compute C (FLOPs; 6·N·D where a run gives no FLOPs per token)")
    ax.set_ylabel("spikes per 1,000 steps", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5)


def _smooth(values: np.ndarray, share: float = 0.02) -> np.ndarray:
    """Centred rolling mean over `share` of the points: per-step metrics are too noisy to read raw."""
    w = max(1, int(round(share * len(values))))
    if w == 1:
        return values
    kernel = np.ones(w) / w
    padded = np.pad(values, (w // 2, w - 1 - w // 2), mode="edge")
    return np.convolve(padded, kernel, mode="valid")


FIGURE_TAG = "scaling-ladder figure"
"""Written into every figure's metadata (PNG Software, SVG creator): how `ladder plot` tells the figures it drew
from a user's files of the same name, which it leaves alone."""


def drawn_here(path: Path) -> bool:
    """Whether the file at `path` is a figure `save` wrote (its metadata, in the first 64 KiB, carries the tag)."""
    try:
        with open(path, "rb") as f:
            return FIGURE_TAG.encode() in f.read(65536)
    except OSError:
        return False


def save(fig: Figure, out_dir: str | os.PathLike, name: str) -> list[Path]:
    """Write `name`.png and `name`.svg; close the figure. The same figure gives the same bytes on a rerun (no
    date in the SVG, its element ids from a fixed salt), so a figure that did not change shows no diff."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in ("png", "svg"):
        with atomic_path(out / f"{name}.{fmt}") as tmp, matplotlib.rc_context({"svg.hashsalt": "scaling-ladder"}):
            fig.savefig(tmp, format=fmt, dpi=130, metadata={"Date": None, "Creator": FIGURE_TAG} if fmt == "svg"
                        else {"Software": FIGURE_TAG})
        paths.append(out / f"{name}.{fmt}")
    plt.close(fig)
    return paths

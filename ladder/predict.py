"""Predict a target run (the hero) from the rungs in the store: its loss at every planned eval step.

Which law applies depends on how the target differs from the rungs:

- **Same token ratio, same schedule shape** (the fixed-ratio ladder's premise): the per-fraction law
  L(g) = E + A_g·(C·g)^−α_g, fitted across rungs and evaluated at the target's planned compute.
  By default log A_g and α_g are smooth in g (polynomials in log g, `PredictSettings.smooth`) and
  the fit takes every eval of every rung: with a handful of rungs, free (A_g, α_g) at each
  fraction follow each fraction's noise and the predicted curve jumps by several percent from one
  eval to the next. The median is the full fit's. The band combines, in quadrature: a bootstrap
  over rungs (E held at the fit's value), the rungs' own scatter around the law at each fraction
  (one run's deviation, which the target will have too), and the spread of the prediction over the
  values of E the data do not reject (a profile over E whose F test counts a run's correlated
  evals as fewer points). Then it is calibrated by a backtest: the same procedure on every rung
  but the largest predicts the largest, and when the band would have held fewer than 90% of that
  rung's evals, it is widened by the factor that makes it hold them.
- **Same token ratio, another schedule** (a horizon cut, an early cooldown, WSD): the per-fraction
  law predicts the target under the rungs' schedule shape stretched to the target's length (the
  *reference* schedule), and the schedule-aware multi-power law, fitted on the rungs' curves with
  their LR sequences, adds the difference its own schedule makes: L = PF(g) + [MP(target LRs) −
  MP(reference LRs)]. Before the first point where the two schedules part, the difference is 0.
  The difference's band comes from a jackknife over rungs and, as a cross-check of the form, half
  the gap to the momentum law's difference; both add in quadrature. The rungs share one schedule
  shape, so nothing in them pins how a schedule they never ran pays off.
- **Another token ratio**: the per-fraction law does not transfer; the multi-power law alone
  predicts, from the target's LR sequence and size.

Steps past a change the rungs did not make and no law models (a sequence-length switch, another
data mix) are flagged ``in_assumptions = False``.

A crashed rung (stopped at, say, 81% of its plan) is completed rather than dropped: the other rungs'
normalised curves (L − E)/(L_final − E) give the ratio between its last logged fraction and the end,
its endpoint follows, and the spread of that ratio across rungs widens the band.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import fits
from ladder import runfiles as keys
from ladder.errors import LadderError
from ladder.prediction import FormUsed, Prediction
from ladder.runconfig import RunConfig
from ladder.schedule import Schedule
from ladder.store import Store

PUBLISHED_SHAPE = {"C": 2.0, "beta": 0.6, "gamma": 0.6}
"""Annealing shape of the multi-power law (Luo et al. 2025 fit C ≈ 2.0–2.1, β ≈ 0.58–0.60, γ ≈ 0.64–0.66
at 25M–400M); a ladder with one schedule shape cannot pin it, so it is held at these values."""
Z50, Z90 = 0.6745, 1.6449


@dataclass(frozen=True)
class PredictSettings:
    metric: str = keys.EVAL_LOSS
    """The metric predicted (nats per token)."""
    group: str | None = None
    """Rungs are the store's runs with role 'rung' in this group (default: the target's group)."""
    n_boot: int = 400
    """Bootstrap refits of the per-fraction law."""
    curve_law: str = "multipower"
    """Schedule-aware law: 'multipower' (Luo et al. 2025) or 'momentum' (Tissue et al. 2024)."""
    shape: dict[str, float] | None = field(default_factory=lambda: dict(PUBLISHED_SHAPE))
    """Annealing shape held fixed when every rung has the same schedule shape; None fits it."""
    seed: int = 0
    smooth: int | None | str = "auto"
    """Per-fraction law: log A_g and α_g are polynomials with this many terms in log g (2: straight
    lines), fitted on every rung's every eval; None: free at every fraction the rungs share; "auto":
    chosen by leaving out one rung at a time (`fits.select_smooth`)."""
    calibrate: bool = True
    """Widen the per-fraction band when a backtest (all rungs but the largest predicting the largest)
    says it is too narrow; needs 4 rungs or more."""
    cross_check: bool = True
    """Compute a schedule difference with the other curve law too (momentum for multi-power and the
    reverse) and count half the gap between the two as a standard error of the difference."""


@dataclass(frozen=True)
class Rung:
    name: str
    config: RunConfig
    steps: np.ndarray
    values: np.ndarray
    state: str
    completed_from: float | None = None
    """For a crashed rung: the fraction it reached before its endpoint was completed."""
    completion_sd: float = 0.0
    """Relative standard deviation of the completed part's L − E (from the spread of the collapsed curves)."""
    completion_E: float = 0.0
    """The irreducible loss E the completion used."""

    @property
    def fractions(self) -> np.ndarray:
        return self.steps / self.config.schedule.total_steps

    @property
    def compute(self) -> float:
        """Fit compute of the planned (unedited) run."""
        return self.config.fit_flops_per_token * self.config.schedule.total_steps * self.config.tokens_per_step


# ---- reading the rungs ----------------------------------------------------------------------------------


def load_rungs(store: Store, group: str, metric: str) -> list[Rung]:
    runs = store.runs()
    rungs = runs[(runs["role"] == "rung") & (runs["group"] == group)]
    if len(rungs) < 3:
        raise LadderError(
            f"{store.root}: {len(rungs)} rung(s) of group {group!r} in the store; a prediction needs at least 3 "
            "(pull the ladder's rungs, or give --group)"
        )
    hist = store.history(list(rungs["run_id"]), [metric])
    out = []
    for _, row in rungs.iterrows():
        cfg = store.run_config(str(row["run_id"]))
        if cfg is None:
            raise LadderError(f"rung {row['name']!r}: its config holds no run config (schedule, sizes); "
                              "predictions need rungs trained from planner configs")
        h = hist[hist["run_id"] == row["run_id"]].sort_values("step")
        if len(h) < 3:
            raise LadderError(f"rung {row['name']!r} has {len(h)} values of {metric!r}; pull it again or drop it")
        out.append(Rung(str(row["name"]), cfg, h["step"].to_numpy(np.int64), h["value"].to_numpy(float),
                        str(row["state"])))
    return sorted(out, key=lambda r: r.compute)


def shape_signature(schedule: Schedule, n: int = 191) -> np.ndarray:
    """The unedited schedule's LR as a fraction of the peak, at fractions 5% … 100% of its run.

    The first 5% are left out: warmups of a few steps round differently at different lengths."""
    s = schedule.without_edits()
    steps = np.round(np.linspace(0.05, 1, n) * (s.total_steps - 1))
    return s.lr(steps) / s.peak_lr


def same_shape(a: Schedule, b: Schedule, tol: float = 0.03) -> bool:
    return float(np.max(np.abs(shape_signature(a) - shape_signature(b)))) <= tol


def reference_schedule(rung: Schedule, target: Schedule) -> Schedule:
    """The rungs' schedule shape stretched to the target's planned steps and peak, without edits."""
    T = target.total_steps
    ratio = T / rung.total_steps
    return dataclasses.replace(
        rung.without_edits(),
        peak_lr=target.peak_lr,
        total_steps=T,
        warmup_steps=min(int(round(rung.warmup_steps * ratio)), T - 1),
        cooldown_steps=int(round(rung.cooldown_steps * ratio)),
    )


# ---- the prediction -----------------------------------------------------------------------------------------


def prediction_steps(target: RunConfig) -> np.ndarray:
    """Every planned eval step and checkpoint of the target."""
    steps = set(target.eval_steps())
    every = target.checkpoint.every_steps
    if every > 0:
        steps |= set(range(every, target.stop_after_steps + 1, every))
    return np.array(sorted(steps), dtype=np.int64)


def planned_fraction(schedule: Schedule, steps: np.ndarray) -> np.ndarray:
    """step / the plan in force at that step (the store's convention)."""
    planned = np.full(steps.shape, float(schedule.total_steps))
    for edit in schedule.edits:
        planned = np.where(steps > edit.at_step, float(edit.horizon), planned)
    return steps / planned


def predict(store: Store, target: RunConfig, settings: PredictSettings | None = None) -> Prediction:
    settings = settings or PredictSettings()
    group = settings.group if settings.group is not None else target.group
    rungs = load_rungs(store, group, settings.metric)
    if any(r.name == target.name for r in rungs):
        raise LadderError(f"{target.name!r} is one of the rungs; predict a run that is not part of the ladder")
    ref = rungs[-1].config.schedule
    for r in rungs:
        if not same_shape(r.config.schedule, ref):
            raise LadderError(
                f"rung {r.name!r} has another schedule shape than {rungs[-1].name!r}; a ladder's rungs must share one"
            )
    tpps = {round(r.config.tpp or 0, 6) for r in rungs}
    same_tpp = len(tpps) == 1 and round(target.tpp or 0, 6) in tpps and target.tpp > 0
    # The target's own schedule without its edits, when its shape is the rungs'; else the rungs' shape.
    shape_matches = same_shape(target.schedule, ref)
    reference = target.schedule.without_edits() if shape_matches else reference_schedule(ref, target.schedule)
    same_schedule = not target.schedule.edits and shape_matches

    steps = prediction_steps(target)
    if same_tpp and target.stop_after_steps > target.schedule.total_steps:
        raise LadderError(
            f"{target.name}: its schedule runs to step {target.stop_after_steps:,}, past the {target.schedule.total_steps:,} "
            "it was planned for; the rungs never trained past their plan, so no fit covers it. "
            "Plan the run with the longer horizon instead"
        )
    g = steps / target.schedule.total_steps  # fraction of the planned, unedited run
    warnings: list[str] = []
    forms: list[FormUsed] = []
    smooth, chosen_by = _choose_smooth(rungs, settings) if same_tpp else (settings.smooth, "")
    settings = dataclasses.replace(settings, smooth=smooth)
    rungs, completion_notes = complete_crashed(rungs, settings)
    warnings += completion_notes

    if same_tpp:
        pf_band, pf_fit, pf_ens, pf_info, pf_notes = _per_fraction(rungs, target, g, settings, chosen_by)
        warnings += list(pf_fit.warnings) + list(pf_ens.warnings) + pf_notes
        forms.append(FormUsed(
            "per-fraction law",
            "the target shares the rungs' tokens per parameter"
            + (" and schedule shape" if same_schedule else "; it predicts the target under the rungs' schedule "
               "shape stretched to its length")
            + f"; {pf_info['smooth']}" + (f" ({pf_info['smooth_chosen_by']})" if pf_info["smooth_chosen_by"] else ""),
            {"E": pf_fit.E, "A_end": float(pf_fit.A[-1]), "alpha_end": float(pf_fit.alpha[-1])}
            | {k: v for k, v in pf_info.items() if isinstance(v, float)},
        ))
        median, lo50, hi50, lo90, hi90 = pf_band
    if not same_schedule or not same_tpp:
        law = _curve_law(rungs, settings)
        warnings += [w for w in law.warnings if "do not pin the annealing shape" not in w]
        lrs = target.schedule.lrs(0, int(steps.max()))
        scale = target.fit_flops_per_token
        if same_tpp:
            ref_lrs = reference.lrs(0, int(steps.max()))
            d, se = _delta_band(law, steps, lrs, ref_lrs, scale)
            if settings.cross_check:
                d_other = _other_delta(rungs, settings, steps, lrs, ref_lrs, scale)
                if d_other is not None:
                    se = np.hypot(se, np.where(d != 0, np.abs(d - d_other) / 2, 0.0))
            lo50, hi50 = _widen(median, lo50, hi50, Z50 * se)
            lo90, hi90 = _widen(median, lo90, hi90, Z90 * se)
            median, lo50, hi50, lo90, hi90 = median + d, lo50 + d, hi50 + d, lo90 + d, hi90 + d
            why = ("the target's schedule differs from the rungs' (" + target.schedule.describe()
                   + "): it adds the difference that schedule makes")
        else:
            band = fits.jackknife(law).band(steps, lrs, scale)
            median, lo50, hi50, lo90, hi90 = band.median, band.lo50, band.hi50, band.lo90, band.hi90
            why = (f"the target's token ratio ({target.tpp:g}) differs from the rungs' ({', '.join(map(str, tpps))}): "
                   "the per-fraction law does not transfer, so this law predicts from the target's LRs and size")
        forms.append(FormUsed(f"{law.form_name} (shared annealing shape)", why,
                              {k: float(v) for k, v in law.params.items()}))

    in_assumptions, assumptions = _assumptions(rungs, target, steps, same_tpp)
    if np.isnan(median).any():
        first = int(steps[np.isfinite(median)].min())
        in_assumptions &= np.isfinite(median)
        assumptions["early steps"] = f"steps before {first:,} come before the rungs' first shared eval: not predicted"
    table = pd.DataFrame({
        "step": steps,
        "tokens": steps * target.tokens_per_step,
        "fraction": planned_fraction(target.schedule, steps),
        "compute": steps * target.tokens_per_step * target.fit_flops_per_token,
        "median": median, "lo50": lo50, "hi50": hi50, "lo90": lo90, "hi90": hi90,
        "in_assumptions": in_assumptions,
    })
    return Prediction(
        run_name=target.name, metric=settings.metric, table=table, forms=tuple(forms),
        assumptions=assumptions, schedule=_schedule_dict(target.schedule),
        planned_steps=target.stop_after_steps, warnings=tuple(dict.fromkeys(warnings)),
    )


def _rung_matrix(rungs: list[Rung], smooth: int | None, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Fractions and (rungs, fractions) losses for the per-fraction law.

    The smooth law takes each rung at its own logged evals (NaN elsewhere; a crashed rung's
    completion is left out, its logged part is enough) from the first fraction three rungs have
    reached. The free law needs every rung at every fraction, so each curve, completed where a
    rung crashed, is interpolated onto the fractions every rung has, from the first that three
    rungs share; `shift` moves a completed part by that many of its standard deviations."""
    values, own = [], []
    for r in rungs:
        v, g = r.values.copy(), np.round(r.fractions, 9)
        if r.completed_from is not None:
            later = r.fractions > r.completed_from + 1e-9
            if smooth is None:
                v[later] = r.completion_E + (v[later] - r.completion_E) * (1 + shift * r.completion_sd)
            else:
                v, g = v[~later], g[~later]
        values.append(v)
        own.append(g)
    grid = np.unique(np.concatenate(own))
    grid = grid[(grid > 0) & (grid <= 1)]
    if smooth is None:
        losses = np.vstack([fits.sample_curve(r.fractions, v, 1.0, grid) for r, v in zip(rungs, values)])
        keep = np.sum(np.isfinite(losses), axis=0) >= 3
        return grid[keep], losses[:, keep]
    losses = np.full((len(rungs), grid.size), np.nan)
    for i, (g, v) in enumerate(zip(own, values)):
        ok = (g > 0) & (g <= 1)
        losses[i, np.searchsorted(grid, g[ok])] = v[ok]
    first = np.sort([g[g > 0].min() for g in own])[min(2, len(own) - 1)]
    keep = grid >= first - 1e-12
    return grid[keep], losses[:, keep]


@dataclass(frozen=True)
class _PFBand:
    median: np.ndarray
    lo50: np.ndarray
    hi50: np.ndarray
    lo90: np.ndarray
    hi90: np.ndarray
    fit: fits.PerFractionFit
    ens: fits.Ensemble
    fractions: np.ndarray
    """The fitted range's fractions (the law says nothing before the first)."""

    def scaled(self, k: float) -> _PFBand:
        m = self.median
        return dataclasses.replace(self, lo50=m - k * (m - self.lo50), hi50=m + k * (self.hi50 - m),
                                   lo90=m - k * (m - self.lo90), hi90=m + k * (self.hi90 - m))


def _pf_band(rungs: list[Rung], compute: float, g: np.ndarray, settings: PredictSettings) -> _PFBand:
    """The per-fraction law's median and bands for a run of total fit compute `compute` at fractions `g`."""
    grid, losses = _rung_matrix(rungs, settings.smooth)
    C = np.array([r.compute for r in rungs])
    at = np.clip(g, grid.min(), grid.max())
    fit = fits.fit_per_fraction(C, grid, losses, smooth=settings.smooth)
    point = fit.predict(compute, at)
    # The law's doubt: refits on rungs resampled with replacement. E is held at the fit's value
    # there (its own doubt follows), which also leaves a 3-rung backtest resamples to draw.
    pinned = fit if fit.E_pinned else fits.fit_per_fraction(C, grid, losses, E=fit.E, smooth=settings.smooth)
    ens = fits.bootstrap(pinned, settings.n_boot, settings.seed)
    q = np.quantile(ens.samples(compute, at), [0.05, 0.25, 0.75, 0.95], axis=0) - pinned.predict(compute, at)
    lo = {50: np.maximum(-q[1], 0), 90: np.maximum(-q[0], 0)}
    hi = {50: np.maximum(q[2], 0), 90: np.maximum(q[3], 0)}
    # Where one run lands around the law: the rungs' own scatter at that fraction.
    sd = np.interp(at, grid, fit.scatter()) * point
    for level, z in ((50, Z50), (90, Z90)):
        lo[level], hi[level] = np.hypot(lo[level], z * sd), np.hypot(hi[level], z * sd)
    # E is known only to a range: the predictions of the values the data do not reject.
    if not fit.E_pinned:
        prof = fit.profile_E(compute, dof=fit.effective_dof())
        for level in (50, 90):
            E_lo, E_hi, _, _ = prof.plausible(level / 100)
            preds = [point] + [fits.fit_per_fraction(C, grid, losses, E=float(e), smooth=settings.smooth).predict(compute, at)
                               for e in np.linspace(E_lo, E_hi, 5) if abs(e - fit.E) > 1e-9 * max(fit.E, 1.0)]
            preds = np.array(preds)
            lo[level] = np.hypot(lo[level], point - preds.min(axis=0))
            hi[level] = np.hypot(hi[level], preds.max(axis=0) - point)
    if settings.smooth is None and any(r.completed_from is not None for r in rungs):  # the completion's own doubt
        preds = []
        for s in (-1.0, 1.0):
            gs, ls = _rung_matrix(rungs, settings.smooth, s)
            preds.append(fits.fit_per_fraction(C, gs, ls, smooth=settings.smooth).predict(compute, at))
        sd = np.abs(preds[1] - preds[0]) / 2
        for level, z in ((50, Z50), (90, Z90)):
            lo[level], hi[level] = np.hypot(lo[level], z * sd), np.hypot(hi[level], z * sd)
    return _PFBand(point, point - lo[50], point + hi[50], point - lo[90], point + hi[90], fit, ens, grid)


def _backtest_scale(rungs: list[Rung], settings: PredictSettings, score_from: float = 0.1) -> tuple[float, dict]:
    """How much wider the per-fraction band must be to have held the largest rung predicted from the others.

    Returns the factor (at least 1) and what the backtest found. The held-out rung is scored at its
    own logged evals from `score_from` of its run on (a crashed rung's completion is not data)."""
    if not settings.calibrate or len(rungs) < 4:
        return 1.0, {}
    held, rest = rungs[-1], rungs[:-1]
    real = held.fractions <= (held.completed_from if held.completed_from is not None else 1.0) + 1e-9
    g = held.fractions[real & (held.fractions >= score_from - 1e-9)]
    y = held.values[real & (held.fractions >= score_from - 1e-9)]
    try:
        b = _pf_band(rest, held.compute, g, dataclasses.replace(settings, calibrate=False))
    except fits.FitError:
        return 1.0, {}
    inside = g >= b.fractions.min() - 1e-9
    g, y = g[inside], y[inside]
    m, lo, hi = b.median[inside], b.lo90[inside], b.hi90[inside]
    if not g.size:
        return 1.0, {}
    z = np.where(y >= m, (y - m) / np.maximum(hi - m, 1e-300), (m - y) / np.maximum(m - lo, 1e-300))
    err = m / y - 1
    info = {"backtest_rung": held.name, "backtest_extrapolation": float(held.compute / rest[-1].compute),
            "backtest_mean_abs_error": float(np.mean(np.abs(err))), "backtest_final_error": float(err[-1]),
            "backtest_coverage90": float(np.mean(z <= 1))}
    return max(1.0, float(np.quantile(z, 0.9))), info


def _choose_smooth(rungs: list[Rung], settings: PredictSettings) -> tuple[int | None, str]:
    """The per-fraction law's basis size: the setting, or for "auto" the leave-one-rung-out choice."""
    if settings.smooth != "auto":
        return settings.smooth, ""
    grid, losses = _rung_matrix(rungs, 2)
    choice = fits.select_smooth(np.array([r.compute for r in rungs]), grid, losses)
    return choice.chosen, choice.summary()


def _per_fraction(rungs: list[Rung], target: RunConfig, g: np.ndarray, settings: PredictSettings, chosen_by: str):
    target_compute = target.fit_flops_per_token * target.schedule.total_steps * target.tokens_per_step
    smooth = settings.smooth
    band = _pf_band(rungs, target_compute, g, settings)
    k, info = _backtest_scale(rungs, settings)
    notes = []
    if k > 1:
        band = band.scaled(k)
        notes.append(
            f"backtest: the rungs but {info['backtest_rung']} predicted it ({info['backtest_extrapolation']:.2g}x "
            f"compute) {info['backtest_mean_abs_error']:.1%} off on average, {info['backtest_final_error']:+.1%} at "
            f"the end, outside their 90% band at {1 - info['backtest_coverage90']:.0%} of its evals; the "
            f"per-fraction band is widened x{k:.2f} so it would have held 90% of them"
        )
    info["band_scale"] = k
    info["smooth"] = ("free (A_g, α_g) at every shared fraction" if smooth is None
                      else f"log A_g and α_g polynomials of degree {smooth - 1} in log g")
    info["smooth_chosen_by"] = chosen_by
    early = g < band.fractions.min() - 1e-9  # before the rungs' first shared eval: no law covers it
    out = [np.where(early, np.nan, x) for x in (band.median, band.lo50, band.hi50, band.lo90, band.hi90)]
    return tuple(out), band.fit, band.ens, info, notes


def _curve_law(rungs: list[Rung], settings: PredictSettings):
    curves = []
    for r in rungs:  # a crashed rung with the evals it logged, not its completion
        real = r.fractions <= (1.0 if r.completed_from is None else r.completed_from) + 1e-9
        steps, values = r.steps[real], r.values[real]
        curves.append(fits.Curve(steps, values, r.config.schedule.lrs(0, int(steps.max())),
                                 r.config.fit_flops_per_token, r.name))
    fit = fits.fit_multipower if settings.curve_law == "multipower" else fits.fit_momentum
    shape = settings.shape if settings.curve_law == "multipower" else None
    return fit(curves, shape=shape)


def _other_delta(rungs, settings, steps, lrs, ref_lrs, scale) -> np.ndarray | None:
    """The schedule difference by the other curve law (a check of the form), or None when it cannot be fitted."""
    other = dataclasses.replace(settings, curve_law="momentum" if settings.curve_law == "multipower" else "multipower")
    try:
        law = _curve_law(rungs, other)
        return law.predict(steps, lrs, scale) - law.predict(steps, ref_lrs, scale)
    except fits.FitError:
        return None


def _delta_band(law, steps, lrs, ref_lrs, scale) -> tuple[np.ndarray, np.ndarray]:
    """MP(target LRs) − MP(reference LRs) at `steps`, and its standard error by jackknife over rungs.

    Zero up to the first step whose loss has seen an LR the two schedules disagree on."""
    n = min(len(lrs), len(ref_lrs))
    differs = np.abs(lrs[:n] - ref_lrs[:n]) > 1e-9 * np.max(np.abs(ref_lrs))
    parted = steps > (int(np.argmax(differs)) if differs.any() else n)
    if not parted.any():
        return np.zeros(steps.shape), np.zeros(steps.shape)
    delta = law.predict(steps, lrs, scale) - law.predict(steps, ref_lrs, scale)
    try:
        refits = fits.jackknife(law).refits
        draws = np.stack([f.predict(steps, lrs, scale) - f.predict(steps, ref_lrs, scale) for f in refits])
        k = draws.shape[0]
        se = np.sqrt((k - 1) / k * np.sum((draws - draws.mean(axis=0)) ** 2, axis=0))
    except fits.FitError:
        se = 0.5 * np.abs(delta)  # no refits possible: take half the effect as its uncertainty
    return np.where(parted, delta, 0.0), np.where(parted, se, 0.0)


def _widen(median, lo, hi, extra):
    """A band's two half-widths combined with another independent half-width in quadrature."""
    return median - np.hypot(median - lo, extra), median + np.hypot(hi - median, extra)


# ---- crashed rungs -----------------------------------------------------------------------------------------


def complete_crashed(rungs: list[Rung], settings: PredictSettings) -> tuple[list[Rung], list[str]]:
    """Complete every crashed rung's curve from the finished rungs' collapsed shape."""
    done = [r for r in rungs if r.state == "finished" and r.fractions[-1] >= 1 - 1e-9]
    short = [r for r in rungs if r not in done]
    if not short:
        return rungs, []
    if len(done) < 3:
        raise LadderError(f"{len(short)} rung(s) did not finish and only {len(done)} did; finish more rungs")
    grid = np.unique(np.concatenate([np.round(r.fractions, 9) for r in done]))
    grid = grid[grid > 0]
    losses = np.vstack([fits.sample_curve(r.fractions, r.values, 1.0, grid) for r in done])
    pf = fits.fit_per_fraction(np.array([r.compute for r in done]), grid, losses)
    norm = (losses - pf.E) / (losses[:, -1:] - pf.E)  # (runs, fractions): 1 at the end
    out, notes = [], []
    for r in rungs:
        if r in done:
            out.append(r)
            continue
        g_last = float(r.fractions[-1])
        at = np.array([np.interp(g_last, grid, row) for row in norm])
        ratio = float(np.mean(at))
        rel = float(np.std(at, ddof=1) / ratio)
        end = pf.E + (r.values[-1] - pf.E) / ratio
        later = grid[grid > g_last + 1e-9]
        filled = pf.E + (end - pf.E) * np.array([np.mean([np.interp(x, grid, row) for row in norm]) for x in later])
        steps = np.concatenate([r.steps, np.round(later * r.config.schedule.total_steps).astype(np.int64)])
        values = np.concatenate([r.values, filled])
        out.append(dataclasses.replace(r, steps=steps, values=values, completed_from=g_last,
                                       completion_sd=rel, completion_E=pf.E))
        if settings.smooth is None:
            notes.append(
                f"rung {r.name} stopped at {g_last:.0%} of its plan; its endpoint {end:.4f} was completed from the "
                f"finished rungs' collapsed curves ((L − E)/(L_end − E) = {ratio:.3f} ± {rel * ratio:.3f} there), "
                "and it weighs in the per-fraction fit with that uncertainty; the curve law takes the evals it logged"
            )
        else:
            notes.append(
                f"rung {r.name} stopped at {g_last:.0%} of its plan; the fits take the evals it logged, not a "
                f"completed curve (the finished rungs' collapsed curves, (L − E)/(L_end − E) = {ratio:.3f} ± "
                f"{rel * ratio:.3f} there, would put its endpoint at {end:.4f})"
            )
    return out, notes


# ---- assumptions --------------------------------------------------------------------------------------------


def _assumptions(rungs: list[Rung], target: RunConfig, steps: np.ndarray, same_tpp: bool):
    ok = np.ones(steps.shape, dtype=bool)
    rung = rungs[-1].config
    out = {
        "schedule": f"rungs: {rung.schedule.without_edits().describe()}; target: {target.schedule.describe()}",
        "token ratio": f"rungs {rung.tpp:g}, target {target.tpp:g} tokens per active parameter"
                       + ("" if same_tpp else " (differs: schedule-aware law only)"),
    }
    rung_phases = [(p.start_fraction, p.seq_len) for p in rung.schedule.seq_phases]
    target_phases = [(p.start_fraction, p.seq_len) for p in target.schedule.seq_phases]
    if target.seq_len != rung.seq_len or target_phases != rung_phases:
        first = min([f for f, _ in target_phases if (f, _) not in rung_phases] or [0.0])
        ok &= steps / target.schedule.total_steps < first
        out["sequence length"] = (f"target {target.seq_len} with switches {target_phases}, rungs {rung.seq_len} with "
                                  f"{rung_phases}: steps from {first:.0%} on are outside the assumptions")
    else:
        out["sequence length"] = f"{target.seq_len} tokens" + (f", switches {target_phases}" if target_phases else "")
    if target.data != rung.data:
        ok[:] = False
        out["data mix"] = f"target {target.data.source} differs from the rungs' {rung.data.source}: not comparable"
    else:
        out["data mix"] = f"{rung.data.source}, as the rungs"
    valid = steps[ok]
    out["valid up to"] = f"step {int(valid.max()):,}" if len(valid) else "nowhere: see above"
    return ok, out


def _schedule_dict(schedule: Schedule) -> dict:
    from ladder.configio import to_dict

    return to_dict(schedule)

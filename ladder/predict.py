"""Predict a target run (the hero) from the rungs in the store: its loss at every planned eval step.

Which law applies depends on how the target differs from the rungs:

- **Same token ratio, same schedule shape** (the fixed-ratio ladder's premise): the per-fraction law
  L(g) = E + A_g·(C·g)^−α_g, fitted across rungs at each fraction g of their runs and evaluated at
  the target's planned compute. The median is the full fit's; the band is a bootstrap over rungs
  combined in quadrature with the rungs' scatter around the law (one run's own noise) and the
  spread of the prediction over the values of E the data do not reject.
- **Same token ratio, another schedule** (a horizon cut, an early cooldown, WSD): the per-fraction
  law predicts the target under the rungs' schedule shape stretched to the target's length (the
  *reference* schedule), and the schedule-aware multi-power law, fitted on the rungs' curves with
  their LR sequences, adds the difference its own schedule makes: L = PF(g) + [MP(target LRs) −
  MP(reference LRs)]. Before the first point where the two schedules part, the difference is 0.
  The difference's band comes from a jackknife over rungs and is added in quadrature.
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
    rungs, completion_notes = complete_crashed(rungs, settings)
    warnings += completion_notes

    if same_tpp:
        pf_band, pf_fit, pf_ens = _per_fraction(rungs, target, g, settings)
        warnings += list(pf_fit.warnings) + list(pf_ens.warnings)
        forms.append(FormUsed(
            "per-fraction law",
            "the target shares the rungs' tokens per parameter"
            + (" and schedule shape" if same_schedule else "; it predicts the target under the rungs' schedule "
               "shape stretched to its length"),
            {"E": pf_fit.E, "A_end": float(pf_fit.A[-1]), "alpha_end": float(pf_fit.alpha[-1])},
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


def _per_fraction(rungs: list[Rung], target: RunConfig, g: np.ndarray, settings: PredictSettings):
    grid = np.unique(np.concatenate([np.round(r.fractions, 9) for r in rungs]))
    grid = grid[(grid > 0) & (grid <= 1)]
    compute = np.array([r.compute for r in rungs])
    target_compute = target.fit_flops_per_token * target.schedule.total_steps * target.tokens_per_step

    def losses_of(shift: float) -> np.ndarray:
        rows = []
        for r in rungs:
            v = r.values.copy()
            if r.completed_from is not None:  # move the completed part by `shift` of its own sd
                later = r.fractions > r.completed_from + 1e-9
                v[later] = r.completion_E + (v[later] - r.completion_E) * (1 + shift * r.completion_sd)
            rows.append(fits.sample_curve(r.fractions, v, 1.0, grid))
        return np.vstack(rows)

    losses = losses_of(0.0)
    keep = np.sum(np.isfinite(losses), axis=0) >= 3
    grid, losses = grid[keep], losses[:, keep]
    at = np.clip(g, grid.min(), grid.max())
    fit = fits.fit_per_fraction(compute, grid, losses)
    ens = fits.bootstrap(fit, settings.n_boot, settings.seed)
    b = ens.band(target_compute, at)
    # Centre on the full fit: with a handful of rungs many resamples repeat runs and the refits'
    # median drifts; the bootstrap gives the band's widths around it.
    point = fit.predict(target_compute, at)
    lo50, hi50, lo90, hi90 = (point + (x - b.median) for x in (b.lo50, b.hi50, b.lo90, b.hi90))
    b = dataclasses.replace(b, median=point)
    # Where one run lands also scatters by the rungs' own scatter around the law (pooled over
    # fractions), and E is only known to a range: the predictions of the E values the data do not
    # reject (F test at 90%) spread the band too.
    scatter = np.sqrt(fit.s2) * point
    _, _, p_lo, p_hi = fit.profile_E(target_compute).plausible(0.9)
    e_half = 0.5 * (p_hi - p_lo) / max(p_hi + p_lo, 1e-300) * 2 * point
    lo50, hi50 = _widen(point, lo50, hi50, np.hypot(Z50 * scatter, Z50 / Z90 * e_half))
    lo90, hi90 = _widen(point, lo90, hi90, np.hypot(Z90 * scatter, e_half))
    if any(r.completed_from is not None for r in rungs):  # the completion's own uncertainty, in quadrature
        shifted = [fits.fit_per_fraction(compute, grid, losses_of(s)[:, keep]).predict(target_compute, at)
                   for s in (-1.0, 1.0)]
        sd = np.abs(shifted[1] - shifted[0]) / 2
        lo50, hi50 = _widen(b.median, lo50, hi50, Z50 * sd)
        lo90, hi90 = _widen(b.median, lo90, hi90, Z90 * sd)
    early = g < grid.min() - 1e-9  # before the rungs' first shared eval: no law covers it
    band = [np.where(early, np.nan, x) for x in (b.median, lo50, hi50, lo90, hi90)]
    return tuple(band), fit, ens


def _curve_law(rungs: list[Rung], settings: PredictSettings):
    curves = [
        fits.Curve(r.steps, r.values, r.config.schedule.lrs(0, int(r.steps.max())), r.config.fit_flops_per_token, r.name)
        for r in rungs if r.completed_from is None
    ]
    fit = fits.fit_multipower if settings.curve_law == "multipower" else fits.fit_momentum
    shape = settings.shape if settings.curve_law == "multipower" else None
    return fit(curves, shape=shape)


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
        notes.append(
            f"rung {r.name} stopped at {g_last:.0%} of its plan; its endpoint {end:.4f} was completed from the "
            f"finished rungs' collapsed curves ((L − E)/(L_end − E) = {ratio:.3f} ± {rel * ratio:.3f} there), "
            "and it weighs in the fits with that uncertainty"
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

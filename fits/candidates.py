"""The laws that can predict a target's whole curve from a ladder's runs, each with its own band.

Every candidate is fitted on a list of `fits.runs.Run` and predicts a target `Run` at given steps,
returning a `fits.Band` and the reasons behind it, or raising `FitError` when it does not apply
(too few runs with the target's token ratio, no LR sequences, ...):

- ``per-fraction``: L(g) = E + A_g·(C·g)^−α_g across the runs that share the target's token ratio
  and schedule shape, or, where fewer than 3 do, its planned tokens (a fixed-data ladder: at a fixed
  D the data term is the same for every size at each fraction, and the power law in C·g ∝ N carries
  it; on synthetic Chinchilla-surface ladders at 300B tokens within 0.5%, tests/test_fits_predictor.py)
  (smooth in g, basis chosen by leaving out one run; or free). E: fitted at the
  target's ratio; or, asked for (`Options.E_from="ladder"`), from every run of a ladder that trains
  several token ratios (`fits.asymptote`); or pinned. Band: a bootstrap over runs with E held ⊕ the
  runs' scatter around the law ⊕ the spread over the values of E the data do not reject (or over E's
  own interval). When the target's schedule was edited, the multi-power law adds the difference its
  schedule makes.
- ``multipower`` / ``momentum``: the schedule-aware curve laws fitted over every curve of every
  size and length (runs of other lengths and schedules add information), predicting the target
  from its own LR sequence and size. Band: a jackknife over sizes ⊕ the runs' scatter around the law.

The band of each candidate is its own statistics only; `fits.predictor` widens it by what a
backtest on the ladder says.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from fits.asymptote import LadderE, ladder_E
from fits.curvelaw import Curve, profile_floor, size_keys
from fits.errors import FitError
from fits.momentum import fit_momentum
from fits.multipower import fit_multipower
from fits.perfraction import fit_per_fraction, sample_curve, select_smooth
from fits.runs import (
    LR_UNITS,
    Run,
    law_compute,
    lr_units_off,
    peak_lr,
    reached_end,
    same_ratio,
    same_shape,
    same_tokens,
    sizes,
)
from fits.uncertainty import Z50, Z90, Band, Ensemble, bootstrap, stretch, widen

PUBLISHED_SHAPE = {"C": 2.0, "beta": 0.6, "gamma": 0.6}
"""Annealing shape of the multi-power law (Luo et al. 2025: C ≈ 2.0–2.1, β ≈ 0.58–0.60, γ ≈ 0.64–0.66 at
25M–400M); ladders whose runs share one schedule shape cannot pin it, so it is held at these values."""
E_SOURCES = ("fit", "ladder")
"""Where the per-fraction law's E comes from when not pinned (`Options.E_from`)."""
FLOORS = ("profile", "zero")
"""How the curve laws set the floor of L0 (`Options.floor`)."""
CURVE_LAWS = {"multipower": ("multi-power law", fit_multipower), "momentum": ("momentum law", fit_momentum)}


@dataclass(frozen=True)
class Options:
    """How the candidates fit (the predictor's settings pass through)."""

    smooth: int | None | str = "auto"
    """Per-fraction law: basis size in log g; None: free at every fraction; "auto": leave one run out."""
    smooth_note: str = ""
    """How the basis size was chosen, when "auto" was resolved (`resolve_smooth`)."""
    E: float | None = None
    """Pin the per-fraction law's irreducible loss (None: `E_from` says where it comes from)."""
    E_from: str = "fit"
    """Per-fraction law, E not pinned: "ladder" takes it from the surface of every run's final loss
    where the ladder trains several token ratios and pins it (`fits.asymptote`; else fitted); "fit"
    fits it to the runs at the target's ratio."""
    shape: dict[str, float] | None = dataclasses.field(default_factory=lambda: dict(PUBLISHED_SHAPE))
    """Multi-power annealing shape held fixed (None: fitted)."""
    floor: str = "profile"
    """Curve laws: the floor under L0's power law in size. "profile": its posterior median under a flat prior
    on [0, the smallest loss), its central interval carried into the band (`fits.curvelaw.FloorProfile`);
    "zero": L0 a pure power law (the floor at its bound)."""
    n_boot: int = 200
    seed: int = 0
    ratio_tol: float = 0.01
    score_from: float = 0.1


@dataclass(frozen=True)
class Outcome:
    """A candidate's prediction of one target."""

    band: Band
    why: str
    params: dict
    warnings: tuple[str, ...] = ()


def _shift(band: Band, d: np.ndarray) -> Band:
    return Band(*(x + d for x in (band.median, band.lo50, band.hi50, band.lo90, band.hi90)))


# ---- per-fraction law ---------------------------------------------------------------------------------


def per_fraction_runs(runs: list[Run], target: Run, tol: float) -> list[Run]:
    """The runs that share the target's token ratio and schedule shape, smallest compute first; where fewer
    than 3 do, those that share its planned tokens and schedule shape, if more do (a fixed-data ladder: every
    size trained on the same tokens, as Pythia's, where a fraction of the run is the same data for all)."""
    usable = [r for r in runs if same_shape(r, target) and r.steps.size >= 3]
    chosen = [r for r in usable if same_ratio(r, target, tol)]
    if len(chosen) < 3:
        chosen = max(chosen, [r for r in usable if same_tokens(r, target, tol)], key=len)
    return sorted(chosen, key=lambda r: r.compute)


def other_shape(runs: list[Run], target: Run, tol: float) -> list[Run]:
    """The runs that share the target's token ratio (or tokens) but not its schedule shape: the per-fraction law
    leaves them out."""
    return [r for r in runs if (same_ratio(r, target, tol) or same_tokens(r, target, tol)) and not same_shape(r, target)]


SHORT_RUN = 200
"""Planned steps under which one step of warmup or decay moves a schedule's shape in fraction of the run by 0.5% or
more: said as the likely cause where such a run's shape is not the target's."""


def _ratio_note(runs: list[Run], target: Run) -> str:
    """Why the target's token ratio is not the rungs': counted per fit FLOPs per token ÷ 6 where it gives no N and
    they do (attention's share of its FLOPs sets it apart: 16.6 tokens per parameter beside 20 on OLMo's 3.2B), which
    its N mends; else `_wider_note`."""
    if not (target.n_params or target.ratio) and any(r.n_params for r in runs):
        return (f"; the target gives no active_params, so its {target.token_ratio:.4g} tokens per parameter are counted "
                "per fit FLOPs per token ÷ 6, the rungs' per N: give the target's active_params")
    return _wider_note(runs, target)


def _wider_note(runs: list[Run], target: Run) -> str:
    """"; a ratio tolerance of 6% ... would count 3 of them" where one under 25% would: a target planned a little
    off the rungs' token ratio."""
    usable = [r for r in runs if same_shape(r, target) and r.steps.size >= 3]
    off = sorted(abs(r.token_ratio / target.token_ratio - 1) for r in usable)
    if len(off) < 3 or off[2] >= 0.25:
        return ""
    tol = np.ceil(off[2] * 100 + 1e-9) / 100
    return (f"; a ratio tolerance of {tol:.0%} (--ratio-tol {tol:g}) would count {sum(x <= tol for x in off)} of them "
            "as at the target's ratio")


def _few_evals_note(runs: list[Run]) -> str:
    """"; N rungs (...) have fewer than 3 evals, ..." where some do: a curve law leaves them out."""
    few = [r.name for r in runs if r.steps.size < 3]
    if not few:
        return ""
    shown = ", ".join(few[:4]) + (", ..." if len(few) > 4 else "")
    return (f"; {len(few)} rung{'s' if len(few) > 1 else ''} ({shown}) {'have' if len(few) > 1 else 'has'} fewer than "
            "3 evals, and a curve needs 3 or more (were only the final losses logged? `ladder fit endpoint` fits those "
            "at one token ratio, `ladder fit surface` at several)")


def _left_out_note(runs: list[Run]) -> str:
    names = [r.name for r in runs]
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    short = [r for r in runs if r.planned_steps < SHORT_RUN]
    steps = ", ".join(f"{r.name} {r.planned_steps:,} steps" for r in short[:4]) + (", ..." if len(short) > 4 else "")
    return (f"{len(names)} rung{'s' if len(names) > 1 else ''} ({shown}) share{'' if len(names) > 1 else 's'} the "
            "target's token ratio or tokens but not its schedule shape (its warmup, decay or floor as fractions of "
            "the run), so the per-fraction law leaves them out"
            + (f"; {'it trains' if len(short) == 1 else 'they train'} few steps ({steps}), where a step of warmup or "
               "decay is a large part of the run: train such rungs longer (a larger token ratio, or a smaller batch)"
               if short else ""))


def shared_axis(runs: list[Run], target: Run, tol: float) -> str:
    """What the per-fraction law's runs share with the target (`per_fraction_runs`): its token ratio, or its tokens."""
    return "token ratio" if all(same_ratio(r, target, tol) for r in runs) else "tokens"


def _matrix(runs: list[Run]) -> tuple[np.ndarray, np.ndarray]:
    """Each run at its own logged fractions (NaN elsewhere), from the first fraction three runs share."""
    own = [np.round(r.fractions, 9) for r in runs]
    grid = np.unique(np.concatenate(own))
    grid = grid[(grid > 0) & (grid <= 1)]
    losses = np.full((len(runs), grid.size), np.nan)
    for i, (g, r) in enumerate(zip(own, runs)):
        ok = (g > 0) & (g <= 1)
        losses[i, np.searchsorted(grid, g[ok])] = r.values[ok]
    first = np.sort([g[g > 0].min() for g in own])[min(2, len(own) - 1)]
    keep = grid >= first - 1e-12
    return grid[keep], losses[:, keep]


def _free_matrix(runs: list[Run], every: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Every run interpolated onto every 5% of the run (the free law has its own A_g, α_g at each
    fraction, so each needs values from the runs); crashed runs contribute up to where they stopped."""
    grid = np.round(np.arange(1, int(round(1 / every)) + 1) * every, 9)
    losses = np.vstack([sample_curve(r.fractions, r.values, 1.0, grid) for r in runs])
    keep = np.sum(np.isfinite(losses), axis=0) >= 3
    return grid[keep], losses[:, keep]


class PerFraction:
    name = "per-fraction"

    def __init__(self, runs: list[Run], options: Options) -> None:
        self.runs, self.options = runs, options

    def shared_E(self) -> LadderE | None:
        """E from the whole ladder (`ladder_E` caches it), when the options ask for it and the ladder pins it."""
        if self.options.E is not None or self.options.E_from != "ladder":
            return None
        return ladder_E(self.runs)

    def predict(self, target: Run, steps: np.ndarray) -> Outcome:
        o = self.options
        runs = per_fraction_runs(self.runs, target, o.ratio_tol)
        shapes = other_shape(self.runs, target, o.ratio_tol)
        if len(runs) < 3:
            ratios = sorted({float(f"{r.token_ratio:.3g}") for r in self.runs})
            shown = ", ".join(f"{x:g}" for x in ratios[:6]) + (", ..." if len(ratios) > 6 else "")
            raise FitError(f"the per-fraction law needs 3 runs with the target's token ratio ({target.token_ratio:.4g} "
                           f"± {o.ratio_tol * 100:g}%), or with its tokens ({target.planned_tokens:.4g}), and its schedule "
                           f"shape; the ladder has {len(runs)}" + (f" ({_left_out_note(shapes)})" if shapes else "")
                           + f"; the rungs train at {shown} tokens per parameter" + _ratio_note(self.runs, target)
                           + _few_evals_note(self.runs))
        axis_shared = shared_axis(runs, target, o.ratio_tol)
        Cs, axis = law_compute(runs + [target])
        C, compute = Cs[:-1], float(Cs[-1])
        smooth, chosen_by = choose_smooth(runs, o, C)
        if smooth is None and o.E is None and len(runs) < 4:
            raise FitError(f"the free per-fraction law needs 4 runs with the target's {axis_shared} when E is fitted "
                           f"(2 parameters per fraction and E); the ladder has {len(runs)}")
        grid2, losses2 = _matrix(runs)
        grid, losses = _free_matrix(runs) if smooth is None else (grid2, losses2)
        g = steps / float(target.planned_steps)
        shared = self.shared_E()
        if shared is not None and shared.E >= np.nanmin(losses):
            shared = None
        E = shared.E if shared is not None else o.E
        fit = fit_per_fraction(C, grid, losses, smooth=smooth, E=E)
        band, ens = self._band(fit, C, grid, losses, smooth, compute, g, shared, reach(runs))
        basis = ("free (A_g, α_g) at every shared fraction" if smooth is None
                 else f"log A_g and α_g polynomials of degree {smooth - 1} in log g")
        E_note = ("E pinned" if o.E is not None else shared.why() if shared is not None
                  else f"E fitted at the target's {axis_shared}")
        if o.E is None and o.E_from == "ladder" and shared is None:  # asked for, and not to be had: said
            E_note += (" (E from the whole ladder, as asked, needs 6 runs or more of 3 sizes at 2 token ratios or "
                       "more whose surface pins E below every loss; this ladder's does not)")
        unknown = [r.name for r in runs if r.plan_lrs is None]
        shape = ("schedule shape (assumed: the target gives no LR)" if target.plan_lrs is None else
                 f"schedule shape (assumed for the {len(unknown)} that give no LR)" if unknown else "schedule shape")
        why = (f"{len(runs)} runs share the target's {axis_shared}"
               + (" (a fixed-data ladder: a fraction of the run is the same tokens for every size)"
                  if axis_shared == "tokens" else "")
               + f" and {shape}; compute as {axis}; {basis}"
               + (f" ({chosen_by})" if chosen_by else "") + f"; {E_note}"
               + (f"; {_left_out_note(shapes)}" if shapes else ""))
        params = {"E": fit.E, "E_from": ("pinned" if o.E is not None else "ladder surface" if shared is not None
                                         else "fitted"),
                  "A_end": float(fit.A[-1]), "alpha_end": float(fit.alpha[-1]), "compute": axis,
                  "smooth": smooth, "runs": [r.name for r in runs]}
        if shared is not None:
            params["E_se"] = shared.se
        warnings = list(fit.warnings) + list(ens.warnings) + ([_left_out_note(shapes)] if shapes else [])
        if target.plan_lrs is None:
            warnings.append("the target gives no LR schedule: the per-fraction law assumes it has its rungs' schedule "
                            "shape, and no curve law can check it; give the target's schedule to have it checked")
        elif unknown:
            shown = ", ".join(unknown[:4]) + (", ..." if len(unknown) > 4 else "")
            warnings.append(f"{len(unknown)} of the {len(runs)} rungs the per-fraction law fits give no LR ({shown}): it "
                            "assumes they ran the target's schedule shape (its warmup, decay and floor as fractions of "
                            "the run) and cannot check it; give their LR (the logged optim/learning_rate, or their "
                            "schedule) to have it checked")
        if target.lrs is not None and target.plan_lrs is not None and _parted(target.lrs, target.plan_lrs, steps).any():
            try:
                band, note, edit_warnings = _schedule_difference(self.runs, target, steps, band, o)
            except FitError as exc:
                raise FitError(f"the target's schedule was edited and no curve law could model the edit: {exc}") from None
            why += "; " + note
            warnings += edit_warnings
        return Outcome(band, why, params, tuple(warnings))

    def _band(self, fit, C, grid, losses, smooth, compute: float, g: np.ndarray, shared,
              last: float) -> tuple[Band, Ensemble]:
        """The law's band at the fractions `g` of the target's run: the bootstrap over runs, the runs' scatter about
        the law, and the predictions over the values of E the runs (or the ladder's surface) do not reject; NaN
        before the first fraction the runs share, and past the `last` they reach (`reach`)."""
        n_boot, seed = self.options.n_boot, self.options.seed
        at = np.clip(g, grid.min(), grid.max())
        point = fit.predict(compute, at)
        pinned = fit if fit.E_pinned else fit_per_fraction(C, grid, losses, E=fit.E, smooth=smooth)
        ens = bootstrap(pinned, n_boot, seed)
        q = np.quantile(ens.samples(compute, at), [0.05, 0.25, 0.75, 0.95], axis=0) - pinned.predict(compute, at)
        lo = {50: np.maximum(-q[1], 0), 90: np.maximum(-q[0], 0)}
        hi = {50: np.maximum(q[2], 0), 90: np.maximum(q[3], 0)}
        sd = np.interp(at, grid, fit.scatter()) * point
        for level, z in ((50, Z50), (90, Z90)):
            lo[level], hi[level] = np.hypot(lo[level], z * sd), np.hypot(hi[level], z * sd)
        if shared is not None or not fit.E_pinned:  # the predictions over the values of E the band spans
            prof = None if shared is not None else fit.profile_E(compute, dof=fit.effective_dof())
            top = 0.999 * float(np.nanmin(losses))
            for level, z in ((50, Z50), (90, Z90)):
                if prof is None:  # E's own interval, carried through the law
                    Es = np.clip([shared.E - z * shared.se, shared.E + z * shared.se], 0.0, top)
                else:  # the values of E the runs do not reject
                    E_lo, E_hi, _, _ = prof.plausible(level / 100)
                    Es = [e for e in np.linspace(E_lo, E_hi, 5) if abs(e - fit.E) > 1e-9 * max(fit.E, 1.0)]
                preds = np.array([point] + [fit_per_fraction(C, grid, losses, E=float(e), smooth=smooth).predict(compute, at)
                                            for e in Es])
                lo[level] = np.hypot(lo[level], point - preds.min(axis=0))
                hi[level] = np.hypot(hi[level], preds.max(axis=0) - point)
        band = Band(point, point - lo[50], point + hi[50], point - lo[90], point + hi[90])
        outside = (g < grid.min() * 0.98) | (g > last + 1e-9)  # eval steps round: 2% of slack before the first
        band = Band(*(np.where(outside, np.nan, x) for x in (band.median, band.lo50, band.hi50, band.lo90, band.hi90)))
        return band, ens


def reach(runs: list[Run], slack_steps: float = 2.0, most: float = 0.005) -> float:
    """The last fraction of a run the per-fraction law predicts from `runs`: the end of the plan where a run
    `reached_end` (no later eval was due), else the last fraction any run logged, and `slack_steps` of that run for
    eval steps that round (a trainer that counts steps from 0 evaluates at 60% at step 0.6·T − 1), at `most` of
    the plan for a run of a few hundred steps but never under one step. Past it no run shows how the loss falls
    on (faster as the LR decays): a fraction further on would be the last one's value held flat."""
    out = 0.0
    for r in runs:
        f = np.sort(r.fractions[r.fractions > 0])
        if f.size:
            slack = min(slack_steps / r.planned_steps, max(most, 1.0 / r.planned_steps))
            out = max(out, 1.0 if reached_end(f, r.finished) else f[-1] + slack)
    return out


def choose_smooth(runs: list[Run], o: Options, compute: np.ndarray) -> tuple[int | None, str]:
    """The per-fraction basis size: the setting, or for "auto" the leave-one-run-out choice."""
    if o.smooth != "auto":
        return o.smooth, o.smooth_note
    grid, losses = _matrix(runs)
    try:
        choice = select_smooth(compute, grid, losses, E=o.E)
    except FitError:  # too few runs to leave one out: straight lines in log g
        return 2, "too few runs to choose by leaving one out"
    return choice.chosen, choice.summary()


def resolve_smooth(runs: list[Run], target: Run, o: Options) -> Options:
    """Options with "auto" replaced by the basis the whole ladder chooses for `target` (chosen once; a
    backtest on fewer runs then uses the same law)."""
    if o.smooth != "auto":
        return o
    chosen = per_fraction_runs(runs, target, o.ratio_tol)
    if len(chosen) < 3:
        return o
    shared = ladder_E(runs) if o.E is None and o.E_from == "ladder" else None
    pinned = o if shared is None else dataclasses.replace(o, E=shared.E)  # chosen under the E the law will use
    smooth, note = choose_smooth(chosen, pinned, law_compute(chosen + [target])[0][:-1])
    return dataclasses.replace(o, smooth=smooth, smooth_note=note)


def _parted(lrs: np.ndarray, ref: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Steps whose loss has seen an LR where the two schedules disagree."""
    n = min(len(lrs), len(ref))
    differs = np.abs(lrs[:n] - ref[:n]) > 1e-9 * max(float(np.max(np.abs(ref))), 1e-300)
    return steps > (int(np.argmax(differs)) if differs.any() else n)


def _schedule_difference(runs, target, steps, band, o: Options):
    """Add MP(target LRs) − MP(plan LRs), with a jackknife over sizes and half the gap to the momentum law, and the
    change's own size where the ladder's schedules do not pin the law (`EDIT_UNTESTED`)."""
    parted = _parted(target.lrs, target.plan_lrs, steps)
    model = CurveLaw("multipower", runs, o)
    law = model.fit()
    scale = scale_of(target)
    d = law.predict(steps, target.lrs, scale) - law.predict(steps, target.plan_lrs, scale)
    draws = np.array([f.predict(steps, target.lrs, scale) - f.predict(steps, target.plan_lrs, scale)
                      for f in model.refits()]).reshape(-1, len(steps))
    # a refit whose change is larger than the loss itself found no law (4 nats on a loss of 1.9, from curves of one
    # length per size read from a noisy per-step loss): it is left out, not taken for the law's spread
    lost = np.any(np.abs(draws) > np.abs(band.median), axis=1)
    draws = draws[~lost]
    se = _jackknife_se(draws) if len(draws) >= 2 else 0.5 * np.abs(d)
    try:
        other = CurveLaw("momentum", runs, o).fit()
        d2 = other.predict(steps, target.lrs, scale) - other.predict(steps, target.plan_lrs, scale)
        se = np.hypot(se, np.abs(d - d2) / 2)
    except FitError:
        pass
    note, warnings = "the multi-power law adds what the edited schedule changes", []
    if lost.any():
        k = int(lost.sum())
        note += (f" ({k} of its {lost.size} refits without a size left out: {'it' if k == 1 else 'each'} changed the "
                 "loss by more than the loss itself)")
    if not schedules_pinned(model.curves):
        se = np.hypot(se, np.abs(d))
        warnings.append(EDIT_UNTESTED)
        note += " (known to its order only: one sd its own size)"
    d, se = np.where(parted, d, 0.0), np.where(parted, se, 0.0)
    return widen(_shift(band, d), se), note, warnings


EDIT_UNTESTED = ("the target's schedule was edited, and no two sizes of the ladder train two schedules each: how much "
                 "an edit changes the loss is the multi-power law's annealing term, which nothing in the ladder tests, "
                 "so the band carries the change's own size as one sd; train a rung or two at a second length to pin "
                 "it")
"""The edit's effect rests on the annealing term, which only curves of several schedules at one size pin. On the
OLMo ladder with one length per size it came out 0.4–2.8× the actual change, and −0.047 nats where the actual was
nil (`benchmarks/edited_schedule.py`)."""


def schedules_pinned(curves: list[Curve]) -> bool:
    """Whether the curves tell a curve law's asymptote and annealing term from its power law: 2 sizes or more
    with 2 schedules or more each (`_schedules_per_size`)."""
    return int(np.sum(_schedules_per_size(curves) >= 2)) >= 2


def _jackknife_se(draws: np.ndarray) -> np.ndarray:
    k = draws.shape[0]
    return np.sqrt((k - 1) / k * np.sum((draws - draws.mean(axis=0)) ** 2, axis=0))


# ---- curve laws -----------------------------------------------------------------------------------------


def scale_of(r: Run) -> float:
    """The size the curve laws' parameters follow: the parameter count where known, else FLOPs per token
    (attention's FLOPs grow with the context, not the model, and weigh most at small sizes)."""
    return r.params if r.n_params else r.flops_per_token


def first_step(r: Run) -> int:
    """The first step a curve law fits: past twice the warmup and 5% of the run (the evals before follow
    the warmup and the initialisation more than the law)."""
    warmup = int(np.argmax(r.lrs >= 0.999 * np.max(r.lrs[: r.planned_steps + 1]))) if r.lrs is not None else 0
    return max(2 * warmup, int(np.ceil(0.05 * r.planned_steps)), 1)


def _curves_per_size(curves: list[Curve]) -> np.ndarray:
    """How many curves each size has (`fits.curvelaw.size_keys`)."""
    return np.unique(size_keys([c.scale for c in curves]), return_counts=True)[1]


def _schedules_per_size(curves: list[Curve]) -> np.ndarray:
    """How many different LR schedules each size has: seed copies of a run, and a run that stopped on the path
    of a longer one (its LRs a prefix of the other's), count once, since neither tells the asymptote from the
    power-law term."""
    by: dict[float, list[np.ndarray]] = {}
    for key, c in zip(size_keys([c.scale for c in curves]), curves):
        by.setdefault(float(key), []).append(np.asarray(c.lrs[:int(np.max(c.steps))], dtype=np.float64))
    counts = []
    for key in sorted(by):
        kept: list[np.ndarray] = []
        for lr in sorted(by[key], key=len, reverse=True):
            if not any(on_the_path(k, lr) for k in kept):
                kept.append(lr)
        counts.append(len(kept))
    return np.asarray(counts, dtype=np.int64)


SAME_PATH_TOL = 0.01
"""How far (a share of the peak) two LR sequences of one size may lie apart and count as one schedule there
(`on_the_path`)."""
SAME_PATH_SHARE = 0.05
"""The share of the steps compared where they may lie further apart and still count as one schedule."""


def on_the_path(longer: np.ndarray, lrs: np.ndarray) -> bool:
    """Whether `lrs` ran `longer`'s schedule as far as it goes: within `SAME_PATH_TOL` of its peak at all but
    `SAME_PATH_SHARE` of the steps past the warmup's corner (twice the step of `longer`'s peak, and at least the
    first 10% of the steps compared). An LR logged every few hundred steps is read linearly between its points and
    held after the last, which cuts the warmup's corner by several % of the peak and leaves the last steps at the
    last value logged: seed copies of OLMo's 1×C runs logged every 100 and every 200 steps differ by up to 7.6% at
    the corner, by at most 0.05% past it. Another length, another peak (by more than 1%) or another decay over more
    than 5% of the run is another schedule."""
    n = min(lrs.size, longer.size)
    if n == 0:
        return True
    past = slice(min(max(2 * int(np.argmax(longer[:n])), n // 10), n), n)
    if past.start >= n:
        return True
    peak = float(np.max(longer[:n])) or 1.0
    return bool(np.mean(np.abs(longer[past] - lrs[past]) > SAME_PATH_TOL * peak) <= SAME_PATH_SHARE)


_FITTED: OrderedDict = OrderedDict()
"""The curve laws fitted lately, by law, settings and curves: a ladder's targets (and the backtest's smaller
ladders, the same for every target) share one fit, its floor profile and its jackknife."""
_KEEP = 8


def _fingerprint(curves: list[Curve]) -> str:
    """A digest of the curves' names, sizes, evals and LR sequences."""
    h = hashlib.blake2b(digest_size=16)
    for c in curves:
        h.update(c.name.encode() + b"\0")
        for a in (c.steps, c.loss, c.lrs, [c.scale]):
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes() + b"\0")
    return h.hexdigest()


class CurveLaw:
    """A schedule-aware law over every curve with an LR sequence; its fit is shared by every target."""

    def __init__(self, name: str, runs: list[Run], options: Options) -> None:
        if name not in CURVE_LAWS:
            raise FitError(f"unknown curve law {name!r}; choose from {sorted(CURVE_LAWS)}")
        self.name, self.options = name, options
        self.label, self._fit_fn = CURVE_LAWS[name]
        self.runs = [r for r in runs if r.lrs is not None and r.steps.size >= 3]
        self._state: dict | None = None

    @functools.cached_property
    def curves(self) -> list[Curve]:
        """The runs' curves from `first_step` on, with their LR sequences (runs with under 3 such evals left out)."""
        out = []
        for r in self.runs:
            keep = r.steps >= first_step(r)
            steps = r.steps[keep]
            if steps.size < 3 or len(r.lrs) < steps.max():
                continue
            out.append(Curve(steps, r.values[keep], r.lrs, scale_of(r), r.name))
        return out

    def _fitted(self) -> dict:
        """{"fit", "profile", "refits"} of this law on these runs, shared with every equal `CurveLaw` lately made."""
        if self._state is None:
            curves = self.curves
            shape = self.options.shape if self.name == "multipower" else None
            key = (self.name, tuple(sorted((shape or {}).items())), self.options.floor, _fingerprint(curves))
            if key not in _FITTED:
                fit, profile = self._fit_on(curves, shape)
                _FITTED[key] = {"fit": fit, "profile": profile, "refits": None}
                while len(_FITTED) > _KEEP:
                    _FITTED.popitem(last=False)
            _FITTED.move_to_end(key)
            self._state = _FITTED[key]
        return self._state

    def _fit_on(self, curves, shape):
        if _curves_per_size(curves).size < 2:
            raise FitError(f"the {self.label} needs curves with their LR sequences from 2 sizes or more; "
                           f"the ladder has {len(curves)} curve(s) with LRs")
        if self.options.floor not in FLOORS:
            raise FitError(f"unknown floor {self.options.floor!r}; choose from {', '.join(FLOORS)}")
        law = self._fit_fn(curves, shape=shape)
        if self.options.floor == "zero":
            return law, None
        profile = profile_floor(law)
        return profile.at(profile.quantile(0.5)), profile

    def fit(self):
        return self._fitted()["fit"]

    @property
    def floor_profile(self):
        """The posterior over L0's floor (`fits.curvelaw.FloorProfile`); None with `Options.floor` "zero"."""
        return self._fitted()["profile"]

    def refits(self) -> list:
        """Refits each without one size (a jackknife over sizes; sizes, not curves, are the independent unit)."""
        state = self._fitted()
        if state["refits"] is None:
            out = []
            law = state["fit"]
            keys = size_keys(law.scales)  # the curves' sizes (N where known), not FLOPs per token
            if np.unique(keys).size >= 3:
                for key in np.unique(keys):
                    keep = np.flatnonzero(keys != key)
                    try:
                        out.append(law.refit(keep))  # started from the full fit
                    except FitError:
                        continue
            state["refits"] = out
        return state["refits"]

    def scatter(self) -> float:
        """Relative standard deviation of one run's level around the law (per-run mean log residual)."""
        law = self.fit()
        offsets = [float(np.mean(np.log(c.loss / law.predict(c.steps, c.lrs, c.scale)))) for c in law.curves]
        n, p = len(offsets), len(sizes(self.runs))
        return float(np.sqrt(np.sum(np.square(offsets)) / max(n - min(p, n - 1), 1)))

    def check_identified(self) -> None:
        """A curve law predicts a run on its own only when sizes have several curves each.

        With one curve per size, the law's asymptote L0 and its power-law term are not told apart within a
        size (the fit drives L0 to its bound), and the power laws across sizes extrapolate that confusion;
        curves of other lengths or schedules at the same size separate them (Luo et al. fit each size on
        several schedules). The per-fraction law still uses such a fit for the difference a schedule edit makes, with
        that difference's own size as one sd of its band (`EDIT_UNTESTED`)."""
        if not schedules_pinned(self.curves):
            per_size = _schedules_per_size(self.curves)
            has = (f"{per_size.size} size" if per_size.size < 2 else
                   f"{int(np.sum(per_size >= 2))} of {per_size.size} sizes with 2 or more, "
                   f"{int(per_size.max(initial=0))} at most per size")
            copies = " (seed copies, and runs stopped on a longer run's path, count once)" \
                if len(self.curves) > int(per_size.sum()) else ""
            raise FitError(f"the {self.label} needs 2 or more curves (lengths or schedules) at each of 2 sizes or more "
                           f"to tell its asymptote from its power-law term; the ladder has {has}{copies}")

    def check_lr_units(self, target: Run) -> None:
        """The law counts LR × steps as progress, so the target's LRs must be in the rungs' unit: a peak more than
        `fits.runs.LR_UNITS`× outside the rungs' peaks is another unit (a schedule multiplier beside an LR)."""
        peaks = [p for p in (peak_lr(c.lrs) for c in self.curves) if p is not None]
        peak = peak_lr(target.lrs)
        if not peaks or peak is None:
            return
        off = lr_units_off(peaks, peak)
        if off > LR_UNITS:
            raise FitError(f"the target's peak LR {peak:.3g} lies {off:.3g}× outside the rungs' peaks "
                           f"({min(peaks):.3g}–{max(peaks):.3g}): the {self.label} counts LR × steps as progress, so "
                           "the two must be in one unit (an LR, not a schedule multiplier); check the rungs' logged LR "
                           "and the target's peak_lr")

    def predict(self, target: Run, steps: np.ndarray) -> Outcome:
        self.check_identified()
        if target.lrs is None:
            raise FitError(f"the {self.label} needs the target's LR sequence")
        if len(target.lrs) < int(np.max(steps)):
            raise FitError(f"the target's LR sequence covers {len(target.lrs)} steps, short of step {int(np.max(steps))}")
        self.check_lr_units(target)
        law = self.fit()
        scale = scale_of(target)
        point = law.predict(steps, target.lrs, scale)
        draws = [f.predict(steps, target.lrs, scale) for f in self.refits()]
        from scipy import stats

        if len(draws) >= 2:
            se = _jackknife_se(np.array(draws))
            t = stats.t.ppf(0.95, len(draws) - 1) / Z90  # the jackknife's t quantile, as a z multiple
            se = se * t
        else:
            se = np.zeros_like(point)
        band = widen(Band(point, point, point, point, point), np.hypot(se, self.scatter() * point))
        params = {k: float(v) for k, v in law.params.items()}
        floor_note = ""
        if self.floor_profile is not None:  # the predictions over the floors the ladder leaves plausible
            prof, spans = self.floor_profile, {}
            floors = {level: np.linspace(prof.quantile((1 - level / 100) / 2), prof.quantile((1 + level / 100) / 2), 5)
                      for level in (50, 90)}
            preds = prof.predictions(steps, target.lrs, scale, np.concatenate([floors[50], floors[90]]))
            for level, p in ((50, preds[:5]), (90, preds[5:])):
                spans[level] = (point - p.min(axis=0), p.max(axis=0) - point)
                params[f"floor_lo{level}"], params[f"floor_hi{level}"] = float(floors[level][0]), float(floors[level][-1])
            band = stretch(band, spans)
            params["floor"] = float(law.E or 0.0)
            floor_note = (f"; L0's floor at its posterior median {params['floor']:.3g} (90%: {params['floor_lo90']:.3g}–"
                          f"{params['floor_hi90']:.3g}, flat prior below the smallest loss), its spread in the band")
        n_sizes = len(sizes(self.runs))
        why = (f"{len(law.curves)} curves of {n_sizes} sizes with their LR sequences; predicts the target from its "
               f"own schedule and size" + ("; annealing shape held at published values"
                                            if self.name == "multipower" and self.options.shape else "") + floor_note)
        warnings = [w for w in law.warnings if "do not pin the annealing shape" not in w]
        return Outcome(band, why, params, tuple(warnings))


def make(name: str, runs: list[Run], options: Options):
    """The candidate called `name` fitted lazily on `runs`."""
    if name == "per-fraction":
        return PerFraction(runs, options)
    if name == "per-fraction-free":
        model = PerFraction(runs, dataclasses.replace(options, smooth=None))
        model.name = name
        return model
    if name in CURVE_LAWS:
        return CurveLaw(name, runs, options)
    raise FitError(f"unknown candidate {name!r}; choose from per-fraction, per-fraction-free, "
                   + ", ".join(CURVE_LAWS) + ", ensemble")

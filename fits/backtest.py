"""Backtests: fit on the smaller runs, predict the larger ones, and score the prediction.

Each row is one held-out run predicted by a fit on every run smaller than the `k` largest: the
relative error of its final loss (and, for curves, the mean and worst error over the curve)
against the compute extrapolation ratio (held-out compute / largest fitted compute), and
whether the band covered the truth. The band scored is the one `ladder fit` gives for such a
target: the law's own (Student-t; with a bootstrap, the wider of it and the bootstrap's, around the
fit's own prediction) widened to at least `fits.predictor.UNTESTED_ERROR` (one sd) per e-fold of
extrapolation; for the surface, the form a backtest on the fitted runs chooses and its band
(`fits.surfacechoice`). Each row keeps the law's own band beside it. Over many
rows the coverage should sit near the band's level; far below it means the intervals are too
narrow to trust. A band with no finite width (a law with as many parameters as runs) is not
counted in the coverage.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fits import checks
from fits.curvelaw import Curve, CurveLawFit
from fits.endpoint import fit_endpoint
from fits.errors import FitError, GivenValueError
from fits.perfraction import fit_per_fraction
from fits.predictor import compute_efolds, floor_sd
from fits.uncertainty import bootstrap, fit_interval, resampled_params


@dataclass(frozen=True)
class BacktestRow:
    target: str
    held_out: int
    """How many of the largest runs were held out of the fit."""
    n_fit: int
    extrapolation: float
    """Compute of the target / largest compute in the fit."""
    predicted: float
    actual: float
    lo: float
    hi: float
    curve_mean_error: float = float("nan")
    curve_worst_error: float = float("nan")
    own_lo: float = float("nan")
    """The law's own band, before the widening for extrapolation (`lo`, `hi` are the band scored)."""
    own_hi: float = float("nan")
    final_fraction: float = 1.0
    """Curves: the fraction of its planned steps the held-out run reached (a run that stopped early is
    scored at its last eval)."""

    @property
    def rel_error(self) -> float:
        return self.predicted / self.actual - 1.0

    @property
    def has_band(self) -> bool:
        return bool(np.isfinite(self.lo) and np.isfinite(self.hi))

    @property
    def covered(self) -> bool | None:
        """Whether the band held the actual value; None where the band has no finite width."""
        return bool(self.lo <= self.actual <= self.hi) if self.has_band else None


@dataclass(frozen=True)
class Backtest:
    form: str
    level: float
    rows: tuple[BacktestRow, ...]
    notes: tuple[str, ...] = ()

    @property
    def coverage(self) -> float:
        """The share of rows with a band whose band held the actual value."""
        held = [r.covered for r in self.rows if r.has_band]
        return float(np.mean(held)) if held else float("nan")

    @property
    def mean_abs_error(self) -> float:
        return float(np.mean([abs(r.rel_error) for r in self.rows])) if self.rows else float("nan")

    def records(self) -> list[dict]:
        """One dict per row; a band of no finite width has no bounds (None), not a lower bound at 0."""
        return [asdict(r) | {"rel_error": r.rel_error, "covered": r.covered}
                | ({} if r.has_band else {"lo": None, "hi": None})
                | ({} if np.isfinite(r.own_lo) and np.isfinite(r.own_hi) else {"own_lo": None, "own_hi": None})
                for r in self.rows]

    def summary(self) -> str:
        lines = [f"backtest of the {self.form}: {len(self.rows)} prediction{'s' if len(self.rows) != 1 else ''}, "
                 f"{self.level:.0%} band (as `ladder fit` "
                 "gives it: the law's own, widened for extrapolation)"]
        lines.append(f"  {'target':<28}{'out':>4}{'extrap':>10}{'pred':>9}{'actual':>9}{'error':>9}"
                     f"{'curve':>8}{'worst':>8}  band")
        for r in self.rows:
            curve = "" if np.isnan(r.curve_mean_error) else f"{r.curve_mean_error:8.2%}{r.curve_worst_error:8.2%}"
            name = r.target if r.final_fraction >= 1 else f"{r.target} (to {r.final_fraction:.0%})"
            band = ("none (as many parameters as runs)" if r.covered is None
                    else f"[{r.lo:.4f}, {r.hi:.4f}] {'ok' if r.covered else 'MISSED'}")
            lines.append(
                f"  {name:<28}{r.held_out:>4} {r.extrapolation:>8.3g}x{r.predicted:>9.4f}{r.actual:>9.4f}"
                f"{r.rel_error:>+9.2%}{curve or ' ' * 16}  {band}"
            )
        banded = sum(r.has_band for r in self.rows)
        cover = f"coverage {self.coverage:.0%} of {banded}" if banded else "no row has a band"
        if 0 < banded < len(self.rows):
            cover += f" ({len(self.rows) - banded} without a band: as many parameters as runs)"
        lines.append(f"  mean |error| {self.mean_abs_error:.2%}, {cover}")
        curves = any(not np.isnan(r.curve_mean_error) for r in self.rows)
        lines.append("  out: how many of the largest sizes were held out; extrap: the run's compute over the largest fitted run's (under 1x "
                     "for a run larger in size that trained fewer tokens); error: predicted / actual − 1 at the end"
                     + ("; curve, worst: its mean and largest |error| over 10–100% of the run" if curves else ""))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _names(names, n):
    return [str(x) for x in names] if names is not None else [f"run {i}" for i in range(n)]


def holdouts(order_key: np.ndarray, holdout) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """For each k: (k, indices fitted, indices held out), holding out the k largest distinct keys."""
    distinct = np.unique(order_key)
    out = []
    if distinct.size < 2:
        raise FitError("every run is of one size (or compute, for a law in compute): a backtest holds out the "
                       "largest and predicts them from the smaller ones, and there are none; give runs of several sizes")
    for k in holdout:
        if not 1 <= k < distinct.size:
            raise FitError(f"cannot hold out {k} of {distinct.size} distinct sizes (or computes, for a law in compute): "
                           f"hold out 1 to {distinct.size - 1}")
        cut = distinct[-k]
        out.append((k, np.flatnonzero(order_key < cut), np.flatnonzero(order_key >= cut)))
    return out


def _without(k: int, fit_idx: np.ndarray, fit, *args, **kwargs):
    """`fit(*args, **kwargs)` on the runs left when the `k` largest are held out; where they are too few, the
    error says so (a value the user gave that no law takes is said as it is: more runs would not help)."""
    try:
        return fit(*args, **kwargs)
    except GivenValueError:
        raise
    except FitError as exc:
        fewer = "; hold out fewer" if k > 1 else "; the ladder needs more runs for a backtest"
        raise FitError(f"holding out the {k} largest leaves {fit_idx.size} run{'' if fit_idx.size == 1 else 's'} to fit, "
                       f"and {exc}{fewer}") from None


def _bands(fit, args, level, ens, extra_sd):
    """(median, the law's own (lo, hi), the band `ladder fit` gives (lo, hi)) at `args` and `level`: the
    Student-t band, or with a bootstrap `ens` the wider of it and the refits' around their median
    (`fits.uncertainty.fit_interval`); the band given adds `extra_sd` to each part before they are merged."""
    median, own = fit_interval(fit, *args, levels=(level,), ensemble=ens)
    _, given = fit_interval(fit, *args, levels=(level,), ensemble=ens, extra_sd=extra_sd)
    return median, own, given


def _refits(fit, n_boot, seed):
    """The bootstrap's refits of `fit`, none where it has no more runs than the parameters a resample pins: each
    refit would be the fit itself, a band of no width, which `ladder fit --bootstrap` refuses; the Student-t band,
    of no finite width there either, leaves the row out of the coverage."""
    if not n_boot or fit.n_runs <= resampled_params(fit):
        return None
    return bootstrap(fit, n_boot, seed)


def backtest_endpoint(compute, loss, names=None, holdout=(1,), *, E=None, level=0.9, n_boot=0, seed=0) -> Backtest:
    """Endpoint law fitted without the `k` largest runs (for each k in `holdout`), predicting them.

    Bands: Student-t (n − p dof) or, with `n_boot`, bootstrap over runs."""
    c = checks.as_array("compute", compute)
    y = checks.as_array("loss", loss)
    checks.same_length(compute=c, loss=y)
    names = _names(names, c.size)
    rows = []
    for k, fit_idx, out_idx in holdouts(c, holdout):
        fit = _without(k, fit_idx, fit_endpoint, c[fit_idx], y[fit_idx], E=E)
        ens = _refits(fit, n_boot, seed)
        for i in out_idx:
            far = compute_efolds(c[i], c[fit_idx])
            pred, own, (lo, hi) = _bands(fit, (c[i],), level, ens, floor_sd(fit.predict(c[i]), 0.0, far))
            pred = float(pred)
            rows.append(BacktestRow(names[i], k, fit_idx.size, float(c[i] / c[fit_idx].max()), pred, float(y[i]),
                                    float(lo), float(hi), own_lo=float(own[0]), own_hi=float(own[1])))
    return Backtest("endpoint law", level, tuple(rows))


def backtest_surface(n_params, tokens, loss, names=None, holdout=(1,), *, E=None, level=0.9, n_boot=0, seed=0,
                     budget=None, infer_budgets: bool = True) -> Backtest:
    """Chinchilla surface fitted without the runs of the `k` largest model sizes, predicting them: the form a
    backtest on the fitted runs chooses, with its band (`fits.surfacechoice`), as `ladder fit surface` gives it.
    With each run's `budget`, where the runs are an isoFLOP sweep (given, or traced by their tokens:
    `fits.isoflop.inferred_budgets`), without the `k` largest budgets."""
    N = checks.as_array("n_params", n_params)
    D = checks.as_array("tokens", tokens)
    y = checks.as_array("loss", loss)
    checks.same_length(n_params=N, tokens=D, loss=y)
    names = _names(names, N.size)
    rows = []
    from fits.surfacechoice import (  # it imports this module
        choose_surface,
        size_classes,
        sweep_budgets,
        traced,
    )

    given = budget is not None
    budget = sweep_budgets(N, budget, D if infer_budgets else None)
    key, what = (size_classes(N), "size") if budget is None else (size_classes(budget), "budget")  # as fit surface
    forms = []
    for k, fit_idx, out_idx in holdouts(key, holdout):
        choice = _without(k, fit_idx, choose_surface, N[fit_idx], D[fit_idx], y[fit_idx], E=E,
                          budget=None if budget is None else budget[fit_idx])
        forms.append(f"{choice.form} without the {f'{k} largest {what}s' if k > 1 else f'largest {what}'}")
        fit = choice.fit
        c_fit = (N[fit_idx] * D[fit_idx]).max()
        ens = _refits(fit, n_boot, seed)
        for i in out_idx:
            extra = choice.sd(fit.predict(N[i], D[i]), N[i], D[i])  # as `SurfaceChoice.band` adds it
            pred, own, (lo, hi) = _bands(fit, (N[i], D[i]), level, ens, extra)
            pred = float(pred)
            rows.append(BacktestRow(names[i], k, fit_idx.size, float(N[i] * D[i] / c_fit), pred, float(y[i]),
                                    float(lo), float(hi), own_lo=float(own[0]), own_hi=float(own[1])))
    notes = (f"form chosen: {'; '.join(forms)}",)
    if budget is not None and not given:
        notes += (f"{traced(budget)}: the largest budgets are held out",)
    return Backtest("Chinchilla surface", level, tuple(rows), notes)


def backtest_per_fraction(
    compute, fractions, losses, names=None, holdout=(1,), *, E=None, level=0.9, n_boot=0, seed=0,
    score_from: float = 0.1,
) -> Backtest:
    """Per-fraction law fitted without the `k` largest runs, predicting their whole curves.

    The row's final-loss numbers are at the last fraction; the curve errors cover fractions
    ≥ `score_from` (the first steps of a run follow warmup more than scale)."""
    C = checks.as_array("compute", compute)
    g = checks.as_array("fractions", fractions)
    Y = np.asarray(losses, dtype=np.float64)
    names = _names(names, C.size)
    scored = g >= score_from
    rows, notes = [], []
    for k, fit_idx, out_idx in holdouts(C, holdout):
        fit = _without(k, fit_idx, fit_per_fraction, C[fit_idx], g, Y[fit_idx], E=E)
        ens = _refits(fit, n_boot, seed)
        for i in out_idx:
            seen = np.flatnonzero(np.isfinite(Y[i]) & scored)
            if not seen.size:
                notes.append(f"{names[i]}: no loss at {score_from:.0%} of its steps or later, so it is not scored")
                continue
            j = seen[-1]  # its last eval: the end, or where a run that stopped early stopped
            far = compute_efolds(C[i], C[fit_idx])
            pred, own, (lo, hi) = _bands(fit, (C[i],), level, ens, floor_sd(fit.predict(C[i]), 0.0, far))
            err = np.abs(pred / Y[i] - 1.0)[seen]
            rows.append(BacktestRow(
                names[i], k, fit_idx.size, float(C[i] / C[fit_idx].max()), float(pred[j]), float(Y[i, j]),
                float(lo[j]), float(hi[j]), float(err.mean()), float(err.max()), float(own[0][j]), float(own[1][j]),
                float(g[j]),
            ))
    return Backtest("per-fraction law", level, tuple(rows), tuple(notes))


def backtest_curve_law(fit_fn, curves, compute=None, holdout=(1,), *, level=0.9, n_boot=0, seed=0,
                       score_from_step: int = 0) -> Backtest:
    """A curve law (`fit_fn(curves) -> CurveLawFit`) fitted without the curves of the `k` largest
    scales, predicting theirs from their LR sequences. `compute` (one per curve) sets the
    extrapolation ratio; by default the scale is used."""
    curves = list(curves)
    if not all(isinstance(c, Curve) for c in curves):
        raise FitError("backtest_curve_law takes fits.Curve records")
    scale = np.array([c.scale for c in curves])
    comp = scale if compute is None else checks.as_array("compute", compute)
    rows, form = [], "curve law"
    for k, fit_idx, out_idx in holdouts(scale, holdout):
        fit: CurveLawFit = _without(k, fit_idx, fit_fn, [curves[i] for i in fit_idx])
        form = fit.form_name
        ens = bootstrap(fit, n_boot, seed) if n_boot else None
        for i in out_idx:
            c = curves[i]
            pred = fit.predict(c.steps, c.lrs, c.scale)
            if ens is not None:
                lo, hi = ens.interval(c.steps, c.lrs, c.scale, level=level)
            else:
                lo = hi = pred
            err = np.abs(pred / c.loss - 1.0)[c.steps >= score_from_step]
            rows.append(BacktestRow(
                c.name or f"run {i}", k, fit_idx.size, float(comp[i] / comp[fit_idx].max()), float(pred[-1]),
                float(c.loss[-1]), float(lo[-1]), float(hi[-1]), float(err.mean()), float(err.max()),
            ))
    return Backtest(form, level, tuple(rows))


def backtest_prefix(fit_fn, curves, target: int, fractions=(0.25, 0.5, 0.75), *, level=0.9, n_boot=0,
                    seed=0) -> Backtest:
    """A curve law fitted on the other curves plus the target's own checkpoints up to each
    fraction g of its last step, predicting the rest of the target (the live-monitoring case).
    The extrapolation column holds g."""
    curves = list(curves)
    c = curves[target]
    rows, form = [], "curve law"
    for g in fractions:
        seen = c.steps <= g * c.steps.max()
        if seen.sum() < 2 or seen.all():
            raise FitError(f"fraction {g:g} leaves {int(seen.sum())} of {c.steps.size} checkpoints to fit on")
        part = Curve(c.steps[seen], c.loss[seen], c.lrs, c.scale, c.name)
        fit = fit_fn([x for i, x in enumerate(curves) if i != target] + [part])
        form = fit.form_name
        pred = fit.predict(c.steps, c.lrs, c.scale)
        lo = hi = pred
        if n_boot:
            lo, hi = bootstrap(fit, n_boot, seed).interval(c.steps, c.lrs, c.scale, level=level)
        err = np.abs(pred / c.loss - 1.0)[~seen]
        rows.append(BacktestRow(c.name or f"run {target}", 0, len(curves), float(g), float(pred[-1]),
                                float(c.loss[-1]), float(lo[-1]), float(hi[-1]), float(err.mean()), float(err.max())))
    return Backtest(form, level, tuple(rows))

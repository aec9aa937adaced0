"""Uncertainty over runs: bootstrap and jackknife refits, bands, and the spread across forms.

Runs are the unit of resampling, never the checkpoints of one run: checkpoints of a run share
its seed, data order and schedule, so their errors are not independent and resampling them would
make intervals far too narrow.

`bootstrap(fit, n)` and `jackknife(fit)` work on any fit result that offers `n_runs`,
`resample_ok(indices)`, `refit(indices)`, `predict(...)` and `params` (every fit in `fits` does).
The `Ensemble` they return predicts like the fit it came from, with intervals:

- bootstrap: percentile intervals of the refits. On synthetic data the nominal 90% interval
  covers the true parameters and predictions about 90% of the time (tests check it over many
  seeds); with few runs per parameter it is only a rough guide, and the ensemble says so.
- jackknife: the fit's value ± t(n − 1) × the jackknife standard error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from fits import checks
from fits.errors import FitError


def check_level(level: float) -> None:
    """A `FitError` for an interval's level outside (0, 1): 90 where 0.9 was meant gave NaN without a word."""
    try:
        ok = not isinstance(level, (bool, str)) and 0.0 < float(level) < 1.0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise FitError(f"level {level!r}: give the interval's probability between 0 and 1 (0.9 for 90%)")


def student_t_band(pred, grad, cov, s2: float, dof: int, level: float = 0.9, kind: str = "observation"):
    """Band around `pred` from the delta method in log space with a Student-t quantile on `dof`.

    grad: d log(pred) / d(parameters), shape (..., p); cov: the parameters' covariance.
    kind="observation": where a new run will land (the law's uncertainty plus the run-to-run
    scatter s2); kind="mean": where the law itself lies. Infinite without spare runs (dof ≤ 0).
    """
    if kind not in ("observation", "mean"):
        raise ValueError(f"kind must be 'observation' or 'mean', got {kind!r}")
    check_level(level)
    p = np.asarray(pred, dtype=np.float64)
    var = np.einsum("...i,ij,...j->...", grad, cov, grad) + (s2 if kind == "observation" else 0.0)
    if dof <= 0 or not np.all(np.isfinite(var)):
        return np.zeros(p.shape), np.full(p.shape, np.inf)
    half = stats.t.ppf(0.5 + level / 2, dof) * np.sqrt(np.maximum(var, 0.0))
    return p * np.exp(-half), p * np.exp(half)


Z50, Z90 = 0.6744897501960817, 1.6448536269514722
"""Standard normal quantiles of the 50% and 90% central intervals."""


@dataclass(frozen=True)
class Band:
    """Median and central 50% / 90% bands of a prediction."""

    median: np.ndarray
    lo50: np.ndarray
    hi50: np.ndarray
    lo90: np.ndarray
    hi90: np.ndarray


def widen(band: Band, sd: np.ndarray) -> Band:
    """Add an independent standard deviation `sd` (absolute) to both sides of a band in quadrature."""
    return stretch(band, {50: (Z50 * sd, Z50 * sd), 90: (Z90 * sd, Z90 * sd)})


def stretch(band: Band, spans: dict[int, tuple[np.ndarray, np.ndarray]]) -> Band:
    """Add independent spans (below, above the median; absolute) to the 50% and 90% sides in quadrature; a
    lower bound stops at 0 (a loss is never negative)."""
    m = band.median
    (b50, a50), (b90, a90) = (np.maximum(spans[50], 0), np.maximum(spans[90], 0))
    return Band(m, np.maximum(m - np.hypot(m - band.lo50, b50), 0.0), m + np.hypot(band.hi50 - m, a50),
                np.maximum(m - np.hypot(m - band.lo90, b90), 0.0), m + np.hypot(band.hi90 - m, a90))


def widened(median, lo, hi, sd, level: float) -> tuple[np.ndarray, np.ndarray]:
    """A `level` interval (lo, hi) around `median` with `sd` (one standard deviation, absolute) added in
    quadrature on each side; the lower edge never below 0."""
    z = stats.norm.ppf(0.5 + level / 2) * np.asarray(sd, dtype=np.float64)
    return np.maximum(median - np.hypot(median - lo, z), 0.0), median + np.hypot(hi - median, z)


def fit_band(fit, *args, ensemble: Ensemble | None = None, extra_sd=None) -> Band:
    """Median with 50% and 90% bands of a fit (`predict(*args)`, `interval(*args, level=)`, `dof`) at `args`:
    `fit_interval` at each level. One band for every route a prediction of a fitted law is asked for."""
    median, (lo50, hi50), (lo90, hi90) = fit_interval(fit, *args, levels=(0.5, 0.9), ensemble=ensemble,
                                                      extra_sd=extra_sd)
    return Band(median, lo50, hi50, lo90, hi90)


def fit_interval(fit, *args, levels=(0.9,), ensemble: Ensemble | None = None, extra_sd=None):
    """(median, (lo, hi) at each of `levels`) of a fit at `args`.

    Each interval is the fit's Student-t observation band or, with an `ensemble` of its refits (`bootstrap`), the
    wider of it and the ensemble's at each bound, held to reach the median. The median is the fit's own prediction,
    with or without refits: the value its printed parameters give (the refits' median moved it, by 0.7% on OLMo's
    13B, with the parameters unchanged). Without spare runs (dof ≤ 0) only the ensemble's is used. `extra_sd`
    (absolute) is added in quadrature to each before they are merged."""
    pred = np.asarray(fit.predict(*args), dtype=np.float64)

    def wider(m, lo, hi, level):
        return (lo, hi) if extra_sd is None else widened(m, lo, hi, extra_sd, level)

    t = [wider(pred, *fit.interval(*args, level=level), level) for level in levels]
    if ensemble is None:
        return pred, *t
    draws, center = ensemble.samples(*args), ensemble.predict(*args)
    b = [wider(pred, *ensemble._draws(draws, center, level), level) for level in levels]
    b = [(np.minimum(lo, pred), np.maximum(hi, pred)) for lo, hi in b]  # refits all to one side still hold the fit
    if fit.dof <= 0:
        return pred, *b
    # per point where the fit says (a per-fraction law whose runs stop short: `dof_at`): no spare runs, the ensemble's
    spare = np.broadcast_to(fit.dof_at(*args) > 0, np.shape(pred)) if hasattr(fit, "dof_at") else True
    return pred, *[(np.where(spare, np.minimum(bl, tl), bl), np.where(spare, np.maximum(bh, th), bh))
                   for (bl, bh), (tl, th) in zip(b, t)]


@dataclass(frozen=True)
class Ensemble:
    """A fit and its refits on resampled runs."""

    fit: Any
    refits: tuple = field(repr=False)
    method: str
    """"bootstrap" or "jackknife"."""
    failed: int = 0
    """Resamples whose refit raised FitError (left out)."""
    seed: int | None = None
    warnings: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.refits)

    def _draws(self, values: np.ndarray, center: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        """Interval at `level` from refit values (first axis) around the full fit's `center`."""
        check_level(level)
        if self.method == "jackknife":
            n = values.shape[0]
            mean = values.mean(axis=0)
            se = np.sqrt((n - 1) / n * np.sum((values - mean) ** 2, axis=0))
            half = stats.t.ppf(0.5 + level / 2, max(n - 1, 1)) * se
            return center - half, center + half
        q_lo, q_hi = np.quantile(values, [0.5 - level / 2, 0.5 + level / 2], axis=0)
        return q_lo, q_hi

    def samples(self, *args, **kwargs) -> np.ndarray:
        """Every refit's prediction, stacked on the first axis."""
        return np.stack([np.asarray(f.predict(*args, **kwargs), dtype=np.float64) for f in self.refits])

    def predict(self, *args, **kwargs) -> np.ndarray:
        """The full fit's prediction (the point estimate; `band` gives the refits' median too)."""
        return np.asarray(self.fit.predict(*args, **kwargs), dtype=np.float64)

    def interval(self, *args, level: float = 0.9, **kwargs) -> tuple[np.ndarray, np.ndarray]:
        """Interval of the prediction at `level` (see the module docstring for the method)."""
        return self._draws(self.samples(*args, **kwargs), self.predict(*args, **kwargs), level)

    def band(self, *args, **kwargs) -> Band:
        """Median with 50% and 90% bands, for a `Prediction` table.

        The median is the refits' median (bootstrap) or the full fit's prediction (jackknife)."""
        draws = self.samples(*args, **kwargs)
        center = self.predict(*args, **kwargs)
        lo50, hi50 = self._draws(draws, center, 0.5)
        lo90, hi90 = self._draws(draws, center, 0.9)
        median = np.median(draws, axis=0) if self.method == "bootstrap" else center
        return Band(median, lo50, hi50, lo90, hi90)

    def param_intervals(self, level: float = 0.9) -> dict[str, tuple[float, float]]:
        """Each parameter's interval at `level`, held within the values the law allows it (the fit's `param_bounds`,
        where it has them): a jackknife's symmetric interval can reach past a bound (E below 0) where the refits
        lie close to it."""
        names = list(self.fit.params)
        values = np.array([[f.params[k] for k in names] for f in self.refits])
        center = np.array([self.fit.params[k] for k in names])
        lo, hi = self._draws(values, center, level)
        bounds = getattr(self.fit, "param_bounds", {})
        return {k: tuple(float(v) for v in np.clip((a, b), *bounds.get(k, (-np.inf, np.inf))))
                for k, a, b in zip(names, lo, hi)}

    def summary(self, level: float = 0.9) -> str:
        lines = [f"{self.method} over runs: {self.n} refits of {self.fit.n_runs} runs"
                 + (f" ({self.failed} failed, left out)" if self.failed else "")]
        for k, (lo, hi) in self.param_intervals(level).items():
            lines.append(f"  {k} = {self.fit.params[k]:.6g}   {level:.0%} interval [{lo:.6g}, {hi:.6g}]")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def law_bounds(params, y_min: float) -> dict[str, tuple[float, float]]:
    """The values the laws of the form E + A·x^−α allow each of their `params`: E in [0, the least loss], the others
    not negative (a fit's `param_bounds`)."""
    return {k: (0.0, float(y_min)) if k == "E" else (0.0, np.inf) for k in params}


def bootstrap(fit, n: int = 1000, seed: int = 0, max_tries: int = 20) -> Ensemble:
    """Refit on `n` resamples of the runs drawn with replacement.

    Resamples that cannot support the form (too few distinct runs) are redrawn, up to
    `max_tries` times each; refits that fail are counted and left out.
    """
    runs = fit.n_runs
    if runs < 2:
        raise FitError("a bootstrap over runs needs at least 2 runs")
    rng = np.random.default_rng(seed)
    refits, failed = [], 0
    for _ in range(int(n)):
        for _ in range(max_tries):
            idx = rng.integers(0, runs, runs)
            if fit.resample_ok(idx):
                break
        else:
            failed += 1
            continue
        failed += _refit_into(refits, fit, idx)
    return _ensemble(fit, refits, "bootstrap", failed, seed)


def jackknife(fit) -> Ensemble:
    """Refit once without each run."""
    runs = fit.n_runs
    refits, failed = [], 0
    for i in range(runs):
        idx = np.delete(np.arange(runs), i)
        if not fit.resample_ok(idx):
            failed += 1
            continue
        failed += _refit_into(refits, fit, idx)
    return _ensemble(fit, refits, "jackknife", failed, None)


def _refit_into(refits: list, fit, idx) -> int:
    """Append the refit on runs `idx`; 1 when it failed, else 0."""
    try:
        refits.append(fit.refit(idx))
    except FitError:
        return 1
    return 0


def resampled_params(fit) -> int:
    """The parameters a resample of `fit`'s runs must pin: its `resample_params` where the law fits each
    fraction on its own (the per-fraction law), else all of them."""
    return int(getattr(fit, "resample_params", getattr(fit, "n_params", len(fit.params))))


def _ensemble(fit, refits, method, failed, seed) -> Ensemble:
    if len(refits) < 2:
        raise FitError(
            f"the {method} over runs left {len(refits)} usable refit{'s' if len(refits) != 1 else ''} of "
            f"{len(refits) + failed} resamples of {fit.n_runs} runs; "
            + ("ask for more resamples (200 or more)" if len(refits) + failed < 20 else "add runs")
        )
    warnings = []
    if failed > 0.1 * (len(refits) + failed):
        warnings.append(f"{failed} of {len(refits) + failed} resamples could not be refitted")
    n, p = fit.n_runs, resampled_params(fit)
    if n - p < 2:
        warnings.append(f"{n} runs for the {p} parameters each resample refits: the resampled fits barely vary the data")
    return Ensemble(fit, tuple(refits), method, failed, seed, tuple(warnings))


@dataclass(frozen=True)
class FormSpread:
    """How far fitted forms disagree on the same prediction."""

    predictions: dict[str, float]
    median: float
    lo: float
    hi: float

    @property
    def relative_spread(self) -> float:
        return (self.hi - self.lo) / self.median

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(checks.too_wide(np.array(self.lo), np.array(self.hi), np.array(self.median)))

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v:.4f}" for k, v in self.predictions.items())
        line = f"across forms: {parts}; range [{self.lo:.4f}, {self.hi:.4f}] ({self.relative_spread:.2%})"
        return "\n".join([line] + [f"  warning: {w}" for w in self.warnings])


def form_spread(predictions: Mapping[str, float]) -> FormSpread:
    """Median and range of one quantity predicted by several forms (e.g. endpoint, per-fraction, curve law)."""
    if not predictions:
        raise FitError("no predictions to compare across forms")
    values = np.array([float(v) for v in predictions.values()])
    return FormSpread(dict(predictions), float(np.median(values)), float(values.min()), float(values.max()))

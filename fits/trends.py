"""Trends of a per-run quantity across sizes, for checking a ladder before its hero run starts.

- `fit_trend(x, y)`: least-squares line in log x, y = exp(a + b·u) (a power law, `log_y=True`) or
  y = a + b·u, with u = log(x / x_ref) and x_ref the geometric mean of x. Student-t bands on n − 2
  degrees of freedom: "observation" (where a new run at x lands) or "mean" (where the line lies).
- `fit_rate_trend(x, counts, exposure)`: events per unit exposure (e.g. loss spikes per step) as
  exp(a + b·u) from Poisson counts; quasi-Poisson band (over-dispersion from the Pearson statistic).
- `leave_one_out(x, y)`: each run against the endpoint trend of the others; flags a run whose value
  sits further from the others' trend than their scatter allows.
- `smoothed_peak(fraction, values)`, `count_spikes(values)`: per-run statistics of a metric series.

Arrays in, frozen dataclasses out; nothing here knows where the numbers came from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage, stats

from fits import checks
from fits.endpoint import fit_endpoint
from fits.errors import FitError

OBSERVATION, MEAN = "observation", "mean"


# ---- a line in log x ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trend:
    """y = exp(a + b·u) (`log_y`) or y = a + b·u, with u = log(x / x_ref), fitted by least squares."""

    a: float
    b: float
    """Slope per e-fold of x: the power-law exponent when `log_y`."""
    x_ref: float
    log_y: bool
    s: float
    """Residual standard deviation (of log y when `log_y`), on `dof` degrees of freedom."""
    dof: int
    u_ss: float
    """Σ u² over the fitted points (u has mean 0 by the choice of x_ref)."""
    x: np.ndarray
    y: np.ndarray

    @property
    def n(self) -> int:
        return int(self.x.size)

    def _link(self, u: np.ndarray) -> np.ndarray:
        return self.a + self.b * u

    def _out(self, eta: np.ndarray) -> np.ndarray:
        return np.exp(eta) if self.log_y else eta

    def predict(self, x) -> np.ndarray:
        return self._out(self._link(np.log(np.asarray(x, dtype=np.float64) / self.x_ref)))

    def interval(self, x, level: float = 0.9, kind: str = OBSERVATION) -> tuple[np.ndarray, np.ndarray]:
        """Central `level` band at `x`: where a new run lands ("observation") or the line ("mean")."""
        if kind not in (OBSERVATION, MEAN):
            raise ValueError(f"kind must be {OBSERVATION!r} or {MEAN!r}, got {kind!r}")
        u = np.log(np.asarray(x, dtype=np.float64) / self.x_ref)
        var = self.s**2 * ((kind == OBSERVATION) + 1.0 / self.n + u**2 / self.u_ss)
        half = stats.t.ppf(0.5 + level / 2, self.dof) * np.sqrt(var)
        eta = self._link(u)
        return self._out(eta - half), self._out(eta + half)

    def slope_interval(self, level: float = 0.9) -> tuple[float, float]:
        half = float(stats.t.ppf(0.5 + level / 2, self.dof) * self.s / np.sqrt(self.u_ss))
        return self.b - half, self.b + half

    def growing(self, level: float = 0.9) -> bool:
        """The slope's central `level` interval lies above 0."""
        return self.slope_interval(level)[0] > 0

    def summary(self) -> str:
        form = f"y = {np.exp(self.a):.4g}·(x/{self.x_ref:.3g})^{self.b:.3f}" if self.log_y else \
            f"y = {self.a:.4g} + {self.b:.4g}·ln(x/{self.x_ref:.3g})"
        return f"{form} on {self.n} runs (residual sd {self.s:.3g}{' in ln y' if self.log_y else ''})"


def fit_trend(x, y, *, log_y: bool = True) -> Trend:
    """Least-squares line of log y (or y) on log x; needs 3 runs at 2 or more distinct x."""
    x = checks.as_array("x", x)
    y = checks.as_array("y", y, positive=log_y)
    n = checks.same_length(x=x, y=y)
    checks.need_runs(n, 3, "trend")
    x_ref = float(np.exp(np.mean(np.log(x))))
    u = np.log(x / x_ref)
    u_ss = float(np.sum(u * u))
    if u_ss <= 1e-12:
        raise FitError("a trend needs runs of different sizes; all x are equal")
    z = np.log(y) if log_y else y
    a = float(np.mean(z))
    b = float(np.sum(u * (z - a)) / u_ss)
    resid = z - a - b * u
    dof = n - 2
    return Trend(a, b, x_ref, log_y, float(np.sqrt(np.sum(resid**2) / dof)), dof, u_ss, x, y)


# ---- an event rate in log x ----------------------------------------------------------------------
@dataclass(frozen=True)
class RateTrend:
    """Events per unit exposure r(x) = exp(a + b·u), u = log(x / x_ref), from Poisson counts."""

    a: float
    b: float
    x_ref: float
    cov: np.ndarray
    """Covariance of (a, b), scaled by `dispersion`."""
    dispersion: float
    """Pearson χ² / (n − 2), at least 1: how much more the counts scatter than Poisson."""
    x: np.ndarray
    counts: np.ndarray
    exposure: np.ndarray

    def predict(self, x) -> np.ndarray:
        return np.exp(self.a + self.b * np.log(np.asarray(x, dtype=np.float64) / self.x_ref))

    def interval(self, x, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Central `level` band of the rate at `x` (Wald, on the log rate)."""
        u = np.log(np.asarray(x, dtype=np.float64) / self.x_ref)
        var = self.cov[0, 0] + 2 * u * self.cov[0, 1] + u**2 * self.cov[1, 1]
        half = stats.norm.ppf(0.5 + level / 2) * np.sqrt(var)
        eta = self.a + self.b * u
        return np.exp(eta - half), np.exp(eta + half)

    def slope_interval(self, level: float = 0.9) -> tuple[float, float]:
        half = float(stats.norm.ppf(0.5 + level / 2) * np.sqrt(self.cov[1, 1]))
        return self.b - half, self.b + half

    def growing(self, level: float = 0.9) -> bool:
        return self.slope_interval(level)[0] > 0


def fit_rate_trend(x, counts, exposure, *, slope_sd: float = 1.0) -> RateTrend:
    """Poisson regression of `counts` on log x with `exposure` (e.g. steps examined) per run.

    A Gaussian prior of sd `slope_sd` on the slope keeps it finite when only one run has events
    (a slope of 1 is a rate proportional to x). Needs 3 runs and at least one event."""
    x = checks.as_array("x", x)
    c = checks.as_array("counts", counts, positive=False)
    t = checks.as_array("exposure", exposure)
    n = checks.same_length(x=x, counts=c, exposure=t)
    checks.need_runs(n, 3, "rate trend")
    if np.any(c < 0):
        raise FitError("counts must not be negative")
    if c.sum() == 0:
        raise FitError("no events in any run: there is no rate to fit")
    x_ref = float(np.exp(np.mean(np.log(x))))
    u = np.log(x / x_ref)
    theta = np.array([np.log(c.sum() / t.sum()), 0.0])
    prior = np.array([0.0, 1.0 / slope_sd**2])

    def penalised(th: np.ndarray) -> float:
        eta = th[0] + th[1] * u + np.log(t)
        return float(np.sum(c * eta - np.exp(eta)) - 0.5 * prior[1] * th[1] ** 2)

    X = np.stack([np.ones(n), u], axis=1)
    for _ in range(100):
        mu = t * np.exp(X @ theta)
        grad = X.T @ (c - mu) - prior * theta
        info = (X * mu[:, None]).T @ X + np.diag(prior)
        step = np.linalg.solve(info, grad)
        scale, before = 1.0, penalised(theta)
        while penalised(theta + scale * step) < before - 1e-12 and scale > 1e-6:
            scale /= 2
        theta = theta + scale * step
        if np.max(np.abs(scale * step)) < 1e-10:
            break
    mu = t * np.exp(X @ theta)
    info = (X * mu[:, None]).T @ X + np.diag(prior)
    pearson = float(np.sum((c - mu) ** 2 / mu))
    dispersion = max(1.0, pearson / (n - 2)) if n > 2 else 1.0
    return RateTrend(float(theta[0]), float(theta[1]), x_ref, np.linalg.inv(info) * dispersion,
                     dispersion, x, c, t)


# ---- one run against the others' trend ----------------------------------------------------------
@dataclass(frozen=True)
class HeldOut:
    """One run left out: its value against the trend of the others."""

    index: int
    value: float
    expected: float
    """The others' trend at this run's x."""
    rel_error: float
    """value / expected − 1."""
    scale: float
    """Relative standard error of a new run at this x (the others' scatter, floored, times leverage)."""
    score: float
    """rel_error / scale."""
    limit: float
    """|score| beyond this flags the run."""
    E: float
    """The offset used: y − E is a power law of x."""

    @property
    def flagged(self) -> bool:
        return abs(self.score) > self.limit


@dataclass(frozen=True)
class LeaveOneOut:
    held: tuple[HeldOut, ...]
    level: float
    floor: float
    dof: int

    @property
    def flagged(self) -> list[int]:
        return [h.index for h in self.held if h.flagged]

    def worst(self) -> HeldOut:
        return max(self.held, key=lambda h: abs(h.score) / h.limit)


def leave_one_out(x, y, *, level: float = 0.95, floor: float = 0.002, offset: bool = True) -> LeaveOneOut:
    """Each run against the endpoint trend y = E + A·x^−α of the others.

    For each run, E comes from the endpoint law fitted to the others (to all runs when only 3 are
    left, too few for it) and is then held fixed: the others' log(y − E) is a line in log x, whose
    residuals give their scatter (relative, at least `floor`, on n − 3 degrees of freedom). The run
    is flagged when its relative distance from that line exceeds the Student-t quantile of the
    externally studentised residual, with a Bonferroni correction over the n runs so that a clean
    ladder flags any run with probability about 1 − `level`. With 4 runs there is 1 degree of
    freedom and only a gross outlier can show."""
    x = checks.as_array("x", x)
    y = checks.as_array("y", y)
    n = checks.same_length(x=x, y=y)
    checks.need_runs(n, 4, "leave-one-out check")
    dof = n - 3
    limit = float(stats.t.ppf(1 - (1 - level) / (2 * n), dof))
    E_all = _offset(x, y) if offset else 0.0
    held = []
    for i in range(n):
        keep = np.arange(n) != i
        xo, yo = x[keep], y[keep]
        E = (_offset(xo, yo) if keep.sum() >= 4 else min(E_all, 0.98 * float(yo.min()))) if offset else 0.0
        u = np.log(xo)
        u_mean = float(u.mean())
        u_ss = float(np.sum((u - u_mean) ** 2))
        b, a = np.polyfit(u - u_mean, np.log(yo - E), 1)
        fitted = E + np.exp(a + b * (u - u_mean))
        spread = max(float(np.sqrt(np.sum((yo / fitted - 1) ** 2) / dof)), floor)
        u0 = float(np.log(x[i])) - u_mean
        expected = float(E + np.exp(a + b * u0))
        scale = spread * float(np.sqrt(1 + 1 / keep.sum() + u0**2 / u_ss))
        rel = float(y[i] / expected - 1)
        held.append(HeldOut(i, float(y[i]), expected, rel, scale, rel / scale, limit, float(E)))
    return LeaveOneOut(tuple(held), level, floor, dof)


def _offset(x: np.ndarray, y: np.ndarray) -> float:
    """E of the endpoint law on (x, y), kept below the smallest y so log(y − E) stays finite."""
    try:
        E = fit_endpoint(x, y).E
    except FitError:
        E = 0.0
    return float(min(max(E, 0.0), 0.98 * float(y.min())))


# ---- per-run statistics of a series ---------------------------------------------------------------
@dataclass(frozen=True)
class Peak:
    height: float
    """Largest rolling median of the series after `skip`."""
    fraction: float
    """Where it occurs, as a fraction of the run."""
    window: int
    """Points in the rolling median."""


def smoothed_peak(fraction, values, *, skip: float = 0.05, window: float = 0.02, min_points: int = 5) -> Peak:
    """The highest rolling median of `values` at fractions ≥ `skip`.

    The median runs over `window` of the run (at least `min_points` points), so a single noisy
    step does not make the peak and runs with more steps are not favoured by having more draws."""
    f = checks.as_array("fraction", fraction, positive=False)
    v = checks.as_array("values", values, positive=False)
    checks.same_length(fraction=f, values=v)
    w = _window(window * f.size, min_points)
    smooth = ndimage.median_filter(v, size=w, mode="nearest")
    ok = f >= skip
    if not ok.any():
        raise FitError(f"no values past fraction {skip:g} of the run")
    i = int(np.flatnonzero(ok)[np.argmax(smooth[ok])])
    return Peak(float(smooth[i]), float(f[i]), w)


@dataclass(frozen=True)
class Spikes:
    count: int
    starts: np.ndarray
    """Index of the first point of each spike."""
    heights: np.ndarray
    """Largest robust z-score within each spike."""
    checked: int
    """Points examined (after `start`)."""


def count_spikes(values, *, window: int = 21, k: float = 6.0, start: int = 0) -> Spikes:
    """Upward spikes of a series such as the train loss.

    The residual is the value minus a centred rolling median over `window` points; its scale is the
    local noise, 1.4826 / √2 × the rolling MAD of the step-to-step differences over 5 × `window`
    points (so a quieter late phase is judged by its own noise, and a steep trend is not taken for
    noise). A point is in a spike when its residual exceeds `k` scales; exceedances closer than
    `window` / 2 to each other are one spike. Points before index `start` (e.g. the warmup, where
    the loss falls faster than any window follows) are not examined."""
    v = checks.as_array("values", values, positive=False)
    w = _window(window, 5)
    base = ndimage.median_filter(v, size=w, mode="reflect")
    resid = v - base
    # The noise scale comes from step-to-step differences, which a steep but smooth trend only
    # shifts: where the trend dominates the noise, a window's median is its middle value and the
    # residuals above are exactly 0, so their own MAD would see no noise at all.
    diff = np.diff(v, prepend=v[0] if v.size < 2 else 2 * v[0] - v[1])
    centred = diff - ndimage.median_filter(diff, size=_window(5 * w, 5), mode="reflect")
    spread = 1.4826 / np.sqrt(2) * ndimage.median_filter(np.abs(centred), size=_window(5 * w, 5), mode="reflect")
    floor = 1e-12 * max(float(np.median(np.abs(v))), 1e-300)
    z = resid / np.maximum(spread, floor)
    idx = np.flatnonzero(z > k)
    idx = idx[idx >= start]
    starts: list[int] = []
    heights: list[float] = []
    last = -w
    for i in idx:
        if starts and i - last <= w // 2:
            heights[-1] = max(heights[-1], float(z[i]))
        else:
            starts.append(int(i))
            heights.append(float(z[i]))
        last = i
    return Spikes(len(starts), np.asarray(starts, dtype=np.int64), np.asarray(heights), max(v.size - start, 0))


def _window(points: float, at_least: int) -> int:
    """An odd window of at least `at_least` points."""
    w = max(int(round(points)), at_least)
    return w if w % 2 else w + 1

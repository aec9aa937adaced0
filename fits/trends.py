"""Trends of a per-run quantity across sizes, for checking a ladder before its hero run starts.

- `fit_trend(x, y)`: least-squares line in log x, y = exp(a + b·u) (a power law, `log_y=True`) or
  y = a + b·u, with u = log(x / x_ref) and x_ref the geometric mean of x. Student-t bands on n − 2
  degrees of freedom: "observation" (where a new run at x lands) or "mean" (where the line lies).
- `fit_rate_trend(x, counts, exposure)`: events per unit exposure (e.g. loss spikes per step) as
  exp(a + b·u) from Poisson counts; quasi-Poisson band (over-dispersion from the Pearson statistic).
- `leave_one_out(x, y)`: each run against the endpoint trend of the others; flags a run whose value
  sits further from the others' trend than their scatter allows.
- `smoothed_peak(fraction, values)`, `count_spikes(values)`: per-run statistics of a metric series.
- `on_grid(fraction, values)`, `project_series(x, values, x_target)`: a series such as the grad norm,
  sampled on a common grid of fractions of each run, projected fraction by fraction to a larger run
  (the same line in log x as `fit_trend` at each fraction, or flat where the runs show no trend).
- `project_rate(x, counts, exposure, x_target)`: an event rate (e.g. spikes per step) projected the
  same way, from `fit_rate_trend`.

Arrays in, frozen dataclasses out; nothing here knows where the numbers came from.
"""

from __future__ import annotations

import dataclasses
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
    checks.need_runs(n, 3, "trend", "runs")
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
    checks.need_runs(n, 3, "rate trend", "runs")
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
    dof: int
    """Degrees of freedom of the scatter it is judged by (the runs of its trend − 2, less 1 for E)."""
    without: tuple[int, ...] = ()
    """The runs flagged before this one that its trend leaves out too (`leave_one_out`), worst first."""

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
    freedom and only a gross outlier can show.

    A run far off drags the others' trend towards itself, so a clean run beside it can look off too.
    Where several runs are flagged, one is set aside and the rest are judged again without it (their
    trends leave it out, on one run fewer): the flagged run whose absence leaves the others most in
    line (the least largest |score| / limit among them), not the one with the largest score, which on
    a short ladder can be a clean end rung extrapolated through a bad neighbour. Backward deletion, one
    outlier at a time, while the runs judged again keep 2 degrees of freedom (6 runs or more; with
    fewer the limit grows too wide to clear anyone). Each `HeldOut.without` names the runs set aside
    for it."""
    x = checks.as_array("x", x)
    y = checks.as_array("y", y)
    n = checks.same_length(x=x, y=y)
    checks.need_runs(n, 4, "leave-one-out check", "runs")
    loo = _leave_each_out(x, y, level, floor, offset)
    if len(loo.flagged) < 2 or (n - 1) - 3 < 2:
        return loo

    def spread_without(i: int) -> float:  # how far the rest lie off, one pass each (no deeper deletion)
        rest = np.arange(n) != i
        return max(abs(h.score) / h.limit for h in _leave_each_out(x[rest], y[rest], level, floor, offset).held)

    worst = min(loo.flagged, key=spread_without)
    rest = np.flatnonzero(np.arange(n) != worst)
    again = leave_one_out(x[rest], y[rest], level=level, floor=floor, offset=offset)
    held = list(loo.held)
    for h in again.held:
        i = int(rest[h.index])
        held[i] = dataclasses.replace(h, index=i, without=(worst, *(int(rest[j]) for j in h.without)))
    return LeaveOneOut(tuple(held), level, floor, loo.dof)


def _leave_each_out(x: np.ndarray, y: np.ndarray, level: float, floor: float, offset: bool) -> LeaveOneOut:
    """`leave_one_out` before any run is set aside: each run against the trend of all the others."""
    n = len(x)
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
        held.append(HeldOut(i, float(y[i]), expected, rel, scale, rel / scale, limit, float(E), dof))
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
    the loss falls faster than any window follows) are not examined. Near the start the window is
    filled with the first value: there the median of a falling loss is the point itself, where a window
    reflected about the start sat below it and made the fall a spike (a series of a few dozen points,
    logged sparsely, showed one in every run). Near the end it is reflected, which keeps the last point
    judged by its neighbours (filled with its own value, a spike there would be its own median)."""
    v = checks.as_array("values", values, positive=False)
    w = _window(window, 5)
    base = ndimage.median_filter(v, size=w, mode="reflect")
    base[:w // 2] = ndimage.median_filter(v[:w], size=w, mode="nearest")[:w // 2]
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


SPIKE_SKIP = 0.05
"""Leading fraction of a run (warmup) where spikes are not counted."""
SPIKE_WINDOW = 0.02
"""Share of a run's points (at least 21) in the rolling median a spike stands out from."""
SPIKE_Z = 6.0
"""Robust z-score above that rolling median that makes a spike."""


def spikes_in_run(fraction, values, steps, *, skip: float = SPIKE_SKIP, window: float = SPIKE_WINDOW,
                  k: float = SPIKE_Z) -> tuple[int, float]:
    """Spikes of one run's series past `skip` of its plan (`count_spikes`, a rolling median over
    `window` of the points and at least 21), and the optimizer steps examined: a series logged every
    few steps counts the steps it spans (0 when nothing is past `skip`)."""
    fraction = np.asarray(fraction, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    start, n = int(np.searchsorted(fraction, skip)), len(fraction)
    if n == 0 or start >= n:
        return 0, 0.0
    sp = count_spikes(values, window=max(21, window * n), k=k, start=start)
    return sp.count, float(steps[-1] - steps[start]) + 1.0


def _window(points: float, at_least: int) -> int:
    """An odd window of at least `at_least` points."""
    w = max(int(round(points)), at_least)
    return w if w % 2 else w + 1


# ---- a series projected across sizes, fraction by fraction ---------------------------------------
FRACTIONS = np.round(np.arange(1, 51) * 0.02, 10)
"""The default grid: 2%, 4%, …, 100% of the planned run."""


def on_grid(fraction, values, grid=FRACTIONS, *, window: float = 0.02, min_points: int = 5) -> np.ndarray:
    """A run's series at each `grid` fraction: the median of its points within ±`window`/2 of it
    (the `min_points` nearest where the window holds fewer), so single noisy steps do not dominate.

    NaN at grid fractions outside what the run logged (before its first point or after its last, by
    more than half a window). Non-finite values are dropped first."""
    f = np.asarray(fraction, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    checks.same_length(fraction=f, values=v)
    g = np.asarray(grid, dtype=np.float64)
    ok = np.isfinite(f) & np.isfinite(v)
    f, v = f[ok], v[ok]
    order = np.argsort(f, kind="stable")
    f, v = f[order], v[order]
    out = np.full(g.size, np.nan)
    if f.size == 0:
        return out
    lo = np.searchsorted(f, g - window / 2, side="left")
    hi = np.searchsorted(f, g + window / 2, side="right")
    inside = (g >= f[0] - window / 2) & (g <= f[-1] + window / 2)
    k = min(min_points, f.size)
    for i in np.flatnonzero(inside):
        a, b = int(lo[i]), int(hi[i])
        if b - a < k:  # too few in the window: the k points nearest to the grid fraction
            j = int(np.clip(np.searchsorted(f, g[i]), 1, f.size - 1)) if f.size > 1 else 0
            nearest = j - 1 if j > 0 and g[i] - f[j - 1] <= f[j] - g[i] else j
            a = int(np.clip(nearest - k // 2, 0, f.size - k))
            b = a + k
        out[i] = float(np.median(v[a:b]))
    return out


@dataclass(frozen=True)
class Projection:
    """A series projected to size `x`, fraction by fraction.

    At each fraction, across the runs that reach it: z = a + b·u with z = ln y (`log_y`) or y, and
    u = ln(x / x_ref) (x_ref their geometric mean), by least squares, as `fit_trend`. Where the slope's
    central `flat_level` interval contains 0 (no trend distinguishable across sizes; voted over
    neighbouring fractions, see `project_series`), the projection is flat: the runs' mean of z; where the
    vote is split, the mix of the two by its shares (`flat_weight`). Bands are Student-t prediction
    intervals for a new run at `x`: on n − 2 degrees of freedom with any trend, on n − 1 when wholly flat
    (the runs' spread around their mean).
    """

    x: float
    """The size projected to (e.g. the hero's fit compute, FLOPs)."""
    fraction: np.ndarray
    centre: np.ndarray
    """Projected z at each fraction (NaN where fewer than `min_runs` runs reach it)."""
    se: np.ndarray
    """Standard error of a new run's z about `centre`."""
    dof: np.ndarray
    slope: np.ndarray
    """b at each fraction (z per e-fold of x): the power-law exponent when `log_y`."""
    slope_lo: np.ndarray
    slope_hi: np.ndarray
    """Central `flat_level` interval of b."""
    flat: np.ndarray
    """True where the projection is flat (the slope's interval contains 0 at half or more of the
    neighbouring fractions, or the sizes are all equal)."""
    runs: np.ndarray
    """Runs with a value at each fraction."""
    log_y: bool
    flat_level: float
    grid: np.ndarray
    """The runs' values on the grid (runs × fractions), NaN where a run has none."""
    xs: np.ndarray
    """The runs' sizes."""
    flat_weight: np.ndarray | None = None
    """Share of the neighbouring fractions that vote flat: the projection is this mix of flat and trend (1 where
    the sizes are all equal; None: `flat` as 1 or 0)."""

    @property
    def median(self) -> np.ndarray:
        return self._out(self.centre)

    def interval(self, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Central `level` band where a new run of size `x` lands, at each fraction."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        q = stats.t.ppf(0.5 + level / 2, np.maximum(self.dof, 1))
        half = np.where(self.dof >= 1, q * self.se, np.nan)
        return self._out(self.centre - half), self._out(self.centre + half)

    def at(self, fraction, level: float = 0.9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(median, lo, hi) of the `level` band at any fractions: linear between grid fractions (in z),
        NaN outside the grid or where the projection is missing."""
        f = np.atleast_1d(np.asarray(fraction, dtype=np.float64))
        lo, hi = self.interval(level)
        out = []
        for y in (self.median, lo, hi):
            z = self._z(y)
            ok = np.isfinite(z)
            if ok.sum() < 2:
                out.append(np.full(f.shape, np.nan))
                continue
            zi = np.interp(f, self.fraction[ok], z[ok], left=np.nan, right=np.nan)
            # no bridging across a stretch without a projection
            gap = np.interp(f, self.fraction, (~ok).astype(float), left=1.0, right=1.0) > 0
            out.append(self._out(np.where(gap, np.nan, zi)))
        return out[0], out[1], out[2]

    @property
    def usable(self) -> bool:
        return bool(np.isfinite(self.centre).any())

    def summary(self) -> str:
        ok = np.isfinite(self.centre)
        if not ok.any():
            return "no projection: fewer runs than needed at every fraction"
        n_flat = int((self.flat & ok).sum())
        text = f"projected at {int(ok.sum())} fractions from {int(self.runs[ok].max())} runs"
        if n_flat == ok.sum():
            return text + (f"; flat at every fraction (no trend across sizes: the slope's "
                           f"{self.flat_level:.0%} interval contains 0)")
        b = float(np.nanmedian(self.slope[ok & ~self.flat]))
        unit = "exponent" if self.log_y else "slope per e-fold"
        text += f"; trend across sizes at {int((ok & ~self.flat).sum())} (median {unit} {b:+.3f})"
        if n_flat:
            text += f", flat at {n_flat} (slope's {self.flat_level:.0%} interval contains 0)"
        return text

    def _out(self, z: np.ndarray) -> np.ndarray:
        return np.exp(z) if self.log_y else z

    def _z(self, y: np.ndarray) -> np.ndarray:
        if not self.log_y:
            return y
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y)


def project_series(x, values, x_target: float, *, fractions=FRACTIONS, log_y: bool | None = None,
                   flat_level: float = 0.9, flat_span: float = 0.1, min_runs: int = 3) -> Projection:
    """Project each column of `values` (runs × fractions, NaN where a run has no value, e.g. from
    `on_grid`) to size `x_target` across the runs' sizes `x`. See `Projection` for the method.

    Flat or not is voted over the fractions within ±`flat_span` of each (with a projection): the
    projection is the mix of flat and trend weighted by the share of them where the slope's interval
    contains 0 (`flat` where that is half or more). One fraction's slope is noisy, and a projection
    that switched between trend and flat from one fraction to the next would jump by the whole trend
    at the target; `flat_span=0` decides each fraction on its own slope.

    `log_y` None: in log y when every value is positive, else in y. Fractions with fewer than
    `min_runs` runs (at least 3) have no projection (NaN)."""
    xs = checks.as_array("x", x)
    Y = np.asarray(values, dtype=np.float64)
    fr = np.asarray(fractions, dtype=np.float64)
    if Y.ndim != 2 or Y.shape != (xs.size, fr.size):
        raise FitError(f"values: expected shape (runs, fractions) = ({xs.size}, {fr.size}), got {Y.shape}")
    if not (np.isfinite(x_target) and x_target > 0):
        raise FitError(f"x_target must be a positive number, got {x_target}")
    min_runs = max(int(min_runs), 3)
    have = np.isfinite(Y)
    if log_y is None:
        log_y = bool(have.any() and np.all(Y[have] > 0))
    if log_y and np.any(Y[have] <= 0):
        raise FitError("values must be positive for a projection in log y; use log_y=False")
    Z = np.where(have, np.log(np.where(have & (Y > 0), Y, 1.0)) if log_y else Y, np.nan)
    m = fr.size
    names = ("flat_centre", "flat_se", "trend_centre", "trend_se", "slope", "slope_lo", "slope_hi", "n")
    cols = {k: np.full(m, np.nan) for k in names}
    runs = have.sum(axis=0)
    # Columns with the same runs present share one design: solve each group at once.
    patterns: dict[bytes, list[int]] = {}
    for j in np.flatnonzero(runs >= min_runs):
        patterns.setdefault(have[:, j].tobytes(), []).append(int(j))
    for key, js in patterns.items():
        rows = np.frombuffer(key, dtype=bool)
        for k, v in _project_columns(xs[rows], Z[rows][:, js], float(x_target), flat_level).items():
            cols[k][js] = v
    made = np.isfinite(cols["flat_centre"])
    no_slope = ~((cols["slope_lo"] > 0) | (cols["slope_hi"] < 0))  # NaN slope (equal sizes): no slope
    w = np.zeros(m)  # the weight of flat: its share of the votes
    for j in np.flatnonzero(made):
        near = made & (np.abs(fr - fr[j]) <= flat_span + 1e-9)
        w[j] = 1.0 if not np.isfinite(cols["slope"][j]) else no_slope[near].mean()
    n = cols["n"]
    trend_c, trend_se = np.where(w < 1, cols["trend_centre"], 0.0), np.where(w < 1, cols["trend_se"], 0.0)
    # The two projections averaged by the vote (a mixture: its variance holds the gap between them), so that the
    # projection passes from trend to flat over the fractions where the votes change, without a jump.
    centre = w * cols["flat_centre"] + (1 - w) * trend_c
    se = np.sqrt(w * cols["flat_se"] ** 2 + (1 - w) * trend_se**2 + w * (1 - w) * (cols["flat_centre"] - trend_c) ** 2)
    dof = np.where(made, np.where(w >= 1, n - 1.0, n - 2.0), np.nan)
    return Projection(float(x_target), fr, centre, se, dof, cols["slope"], cols["slope_lo"], cols["slope_hi"],
                      (w >= 0.5) & made, runs, log_y, flat_level, Y, xs, np.where(made, w, np.nan))


def _project_columns(x: np.ndarray, Z: np.ndarray, x_target: float, level: float) -> dict[str, np.ndarray]:
    """Both projections of columns of Z (runs × k) that share the runs `x`: flat (the runs' mean and
    spread) and the least-squares line in u = ln(x / x_ref), with the slope's central `level` interval."""
    n = x.size
    x_ref = float(np.exp(np.mean(np.log(x))))
    u = np.log(x / x_ref)
    u_ss = float(np.sum(u * u))
    u0 = float(np.log(x_target / x_ref))
    a = Z.mean(axis=0)
    nan = np.full(a.shape, np.nan)
    # flat: a new run's z has variance s²·(1 + 1/n) about the runs' mean
    out = {"flat_centre": a, "flat_se": Z.std(axis=0, ddof=1) * np.sqrt(1 + 1 / n), "n": np.full(a.shape, n),
           "trend_centre": nan, "trend_se": nan, "slope": nan, "slope_lo": nan, "slope_hi": nan}
    if u_ss <= 1e-12:
        return out
    b = u @ (Z - a) / u_ss
    s = np.sqrt(np.sum((Z - a - np.outer(u, b)) ** 2, axis=0) / (n - 2))
    half = stats.t.ppf(0.5 + level / 2, n - 2) * s / np.sqrt(u_ss)
    out.update(trend_centre=a + b * u0, trend_se=s * np.sqrt(1 + 1 / n + u0**2 / u_ss),
               slope=b, slope_lo=b - half, slope_hi=b + half)
    return out


@dataclass(frozen=True)
class RateProjection:
    """An event rate (events per unit exposure) projected to size `x`.

    From `fit_rate_trend` where its slope's central `flat_level` interval excludes 0; otherwise
    flat: the pooled rate Σ counts / Σ exposure, its band widened by the trend fit's dispersion.
    With no events at all the median and lower bounds are 0 and the upper bound the rate at which
    seeing none would have had probability (1 − level) / 2. Bands are for the rate, not a count."""

    x: float
    median: float
    bands: dict[float, tuple[float, float]]
    """level → (lo, hi), for 0.5 and 0.9."""
    flat: bool
    slope: float
    slope_lo: float
    slope_hi: float
    rates: np.ndarray
    """Each run's counts / exposure."""
    xs: np.ndarray

    def interval(self, level: float = 0.9) -> tuple[float, float]:
        if level not in self.bands:
            raise ValueError(f"level must be one of {sorted(self.bands)}, got {level}")
        return self.bands[level]

    def summary(self) -> str:
        if self.flat:
            return f"flat (no trend across sizes distinguishable from 0): {self.median:.3g}"
        return f"trend across sizes (exponent {self.slope:+.2f}): {self.median:.3g}"


def project_rate(x, counts, exposure, x_target: float, *, flat_level: float = 0.9,
                 levels: tuple[float, ...] = (0.5, 0.9)) -> RateProjection:
    """Project the rate counts / exposure of 3 or more runs to size `x_target` (see `RateProjection`)."""
    xs = checks.as_array("x", x)
    c = checks.as_array("counts", counts, positive=False)
    t = checks.as_array("exposure", exposure)
    checks.same_length(x=xs, counts=c, exposure=t)
    checks.need_runs(xs.size, 3, "rate projection", "runs")
    rates = c / t
    if c.sum() == 0:
        bands = {lv: (0.0, float(-np.log((1 - lv) / 2) / t.sum())) for lv in levels}
        return RateProjection(float(x_target), 0.0, bands, True, float("nan"), float("nan"), float("nan"), rates, xs)
    fit = fit_rate_trend(xs, c, t)
    lo_b, hi_b = fit.slope_interval(flat_level)
    flat = bool(lo_b <= 0 <= hi_b)
    if flat:
        pooled = float(c.sum() / t.sum())
        se = float(np.sqrt(fit.dispersion / c.sum()))
        bands = {lv: (pooled * float(np.exp(-stats.norm.ppf(0.5 + lv / 2) * se)),
                      pooled * float(np.exp(stats.norm.ppf(0.5 + lv / 2) * se))) for lv in levels}
        median = pooled
    else:
        median = float(fit.predict(x_target))
        bands = {lv: tuple(float(v) for v in fit.interval(x_target, lv)) for lv in levels}
    return RateProjection(float(x_target), median, bands, flat, fit.b, lo_b, hi_b, rates, xs)

"""Per-fraction law for whole loss curves of a fixed-ratio ladder.

All rungs share the tokens-per-parameter ratio and the schedule's shape, so the loss at the same
fraction g of every run follows its own power law in the compute spent so far:
L(g) = E + A_g·(C·g)^−α_g, with one irreducible loss E for every fraction. A target run's curve
is then each fraction's law evaluated at its compute. The equivalent view: the normalised curves
(L(g) − E)/(L(1) − E) collapse onto one shape across sizes (`PerFractionFit.collapse`).

With `smooth=K`, A_g and α_g are not free at every fraction but smooth functions of it: log A_g
(at the reference compute) and α_g are polynomials of degree K − 1 in log g (Legendre, over the
fitted range). With a handful of runs and ~1% noise per eval, free per-fraction parameters jump
from one fraction to the next (the robust objective then behaves like a median of very few
points); the smooth law pools every run's every eval into 2K shape parameters and E, and each
run may be logged at its own fractions (NaN elsewhere).

How smooth is a question for the data: `select_smooth` picks the basis size by leaving out one
run at a time (predicting it from the others) and takes the simplest candidate within one standard
error of the best (the one-standard-error rule). Noisy micro ladders land on straight lines in
log g; clean curves (the OLMo ladder, 0.05% noise) on many terms or the free law.

`sample_curve` puts runs logged at different steps onto common fractions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fits import checks
from fits.errors import FitError
from fits.objective import REFIT_TOL, TOL
from fits.powerlaw import ALPHA_MAX, EProfile, fit_offset_power, fit_offset_power_basis, profile_E
from fits.uncertainty import law_bounds, student_t_band

FORM = "per-fraction law L(g) = E + A_g·(C·g)^-α_g"


def sample_curve(steps, values, total_steps: float, fractions, slack: float = 1e-9) -> np.ndarray:
    """A run's metric at `fractions` of its planned `total_steps`, by linear interpolation between
    logged steps; NaN where a fraction falls outside the logged range by more than `slack` (a fraction of
    the run: evals rounded to whole steps sit a little off the fractions they were planned at)."""
    s = checks.as_array("steps", steps, positive=False)
    v = checks.as_array("values", values, positive=False)
    checks.same_length(steps=s, values=v)
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    target = np.asarray(fractions, dtype=np.float64) * float(total_steps)
    out = np.interp(target, s, v)
    tol = slack * max(float(total_steps), 1.0)
    out[(target < s[0] - tol) | (target > s[-1] + tol)] = np.nan
    return out


@dataclass(frozen=True)
class Collapse:
    """Normalised curves (L(g) − E)/(L(1) − E) of every run, and how tightly they collapse."""

    fractions: np.ndarray
    normalised: np.ndarray
    """(runs, fractions)."""
    mean: np.ndarray
    spread: np.ndarray
    """Standard deviation across runs at each fraction (0 = perfect collapse)."""


@dataclass(frozen=True)
class PerFractionFit:
    """E shared, (A_g, α_g) per fraction; `compute` is each run's total fit compute (FLOPs at g = 1)."""

    E: float
    a: np.ndarray
    """log A_g at C·g = c_ref."""
    alpha: np.ndarray
    c_ref: float
    fractions: np.ndarray
    compute: np.ndarray
    losses: np.ndarray
    objective: float
    E_pinned: bool
    converged: bool
    cov: np.ndarray = field(repr=False)
    s2: float = field(repr=False)
    warnings: tuple[str, ...] = ()
    smooth: int | None = None
    """Basis size K of the smooth law (log A_g and α_g polynomials of degree K − 1 in log g); None:
    one (A_g, α_g) per fraction. With K, `a` and `alpha` hold the law's values at `fractions`."""
    theta: np.ndarray | None = field(default=None, repr=False)
    """Smooth law: the coefficients of a(g), then of α(g), on `basis(g)`."""

    form = FORM

    def basis(self, fractions) -> np.ndarray:
        """Legendre polynomials of degree < K in log g, over the log range of the fitted fractions."""
        return legendre_basis(fractions, self.fractions.min(), self.fractions.max(), int(self.smooth or 0))

    @property
    def A(self) -> np.ndarray:
        return np.exp(self.a + self.alpha * np.log(self.c_ref))

    @property
    def params(self) -> dict[str, float]:
        """E, and A and α at the last fraction (the end of the run)."""
        return {"E": self.E, "A": float(self.A[-1]), "alpha": float(self.alpha[-1])}

    @property
    def param_bounds(self) -> dict[str, tuple[float, float]]:
        return law_bounds(self.params, float(np.nanmin(self.losses)))

    @property
    def n_runs(self) -> int:
        return int(self.compute.size)

    @property
    def n_params(self) -> int:
        per_curve = self.fractions.size if self.smooth is None else self.smooth
        return 2 * per_curve + (0 if self.E_pinned else 1)

    @property
    def resample_params(self) -> int:
        """Free parameters at one fraction (A, α and a free E): what a resample of runs must pin."""
        return 2 if self.E_pinned else 3

    def _at(self, fractions):
        g = np.asarray(self.fractions if fractions is None else fractions, dtype=np.float64)
        lo, hi = self.fractions.min(), self.fractions.max()
        if np.any((g < lo - 1e-12) | (g > hi + 1e-12)):
            raise FitError(
                f"fractions must lie within the fitted range [{lo:g}, {hi:g}]; the law says nothing outside it"
            )
        if self.smooth is not None:
            B = self.basis(g)
            K = self.smooth
            return g, B @ self.theta[:K], B @ self.theta[K:]
        return g, np.interp(g, self.fractions, self.a), np.interp(g, self.fractions, self.alpha)

    def predict(self, compute: float, fractions=None) -> np.ndarray:
        """Loss of a run of total fit compute `compute` at `fractions` (default: the fitted ones)."""
        g, a, al = self._at(fractions)
        return self.E + np.exp(a - al * np.log(checks.at_positive("compute", compute) * g / self.c_ref))

    @property
    def dof(self) -> int:
        """The Student-t band's degrees of freedom: runs − 2 at each fraction (A, α), − 1 more with E free."""
        return self.n_runs - 2 - (0 if self.E_pinned else 1)

    def dof_at(self, compute: float | None = None, fractions=None) -> np.ndarray:
        """The Student-t band's degrees of freedom at each of `fractions` (default: the fitted ones), `dof` counted on
        the runs with a loss there (at both fitted fractions it lies between): the free law fits each fraction on
        the runs that reach it, so a run that stopped short leaves the fractions past it fewer. The smooth law's
        polynomials tie the fractions together: `dof` at each. (`compute` is not used: the signature is `interval`'s.)"""
        g = np.atleast_1d(np.asarray(self.fractions if fractions is None else fractions, dtype=np.float64))
        if self.smooth is not None:
            return np.full(g.shape, self.dof)
        nf = self.fractions.size
        n = np.isfinite(self.losses).sum(axis=0)
        j = np.clip(np.searchsorted(self.fractions, g, side="right") - 1, 0, nf - 1)
        j2 = np.minimum(j + 1, nf - 1)
        between = (j2 > j) & (g > self.fractions[j] + 1e-12)
        return np.minimum(n[j], np.where(between, n[j2], n[j])) - 2 - (0 if self.E_pinned else 1)

    def interval(self, compute: float, fractions=None, level: float = 0.9, kind: str = "observation"):
        """Per-fraction Student-t band (n − 2 dof, or n − 3 with E free, n the runs at the fraction: `dof_at`) by the
        delta method, with the runs' scatter about the law at each fraction (`scatter`), not one pooled over the run:
        runs stray most early, and a variance pooled over every fitted fraction let how finely the early ones are
        sampled set the band at the end."""
        checks.at_positive("compute", compute)
        g, a, al = self._at(fractions)
        shape = np.shape(g)
        g, a, al = (np.atleast_1d(x) for x in (g, a, al))
        local = np.interp(g, self.fractions, self.scatter() ** 2)  # the scatter where the band is
        ratio = np.sqrt(local / self.s2) if self.s2 > 0 else np.ones_like(g)
        lo, hi = self._interval(compute, g, a, al, level, kind, ratio[:, None], local)
        return np.reshape(lo, shape), np.reshape(hi, shape)

    def _interval(self, compute, g, a, al, level, kind, ratio, local):
        """`interval` at `g` with the gradients scaled by `ratio` (the parameters' covariance, fitted with the pooled
        variance, carried at the local one) and the observation variance `local`. An approximation for a free E, which
        every fraction pins: its share is scaled by the local scatter too (least at the end, where runs agree most)."""
        u = np.log(compute * g / self.c_ref)
        t = np.exp(a - al * u)
        p = self.E + t
        nf = self.fractions.size
        off = 0 if self.E_pinned else 1
        dof = self.dof
        if self.smooth is not None:
            B = self.basis(g)
            G = np.hstack([B * (t / p)[:, None], -B * (u * t / p)[:, None]])
            if off:
                G = np.hstack([(1.0 / p)[:, None], G])
            return student_t_band(p, G * ratio, self.cov, local, dof, level, kind)
        # Each fraction's (a, α) is interpolated between its two neighbours; their covariance carries over.
        j = np.clip(np.searchsorted(self.fractions, g, side="right") - 1, 0, nf - 1)
        j2 = np.minimum(j + 1, nf - 1)
        span = np.where(j2 > j, self.fractions[j2] - self.fractions[j], 1.0)
        wt2 = np.where(j2 > j, (g - self.fractions[j]) / span, 0.0)
        G = np.zeros((g.size, self.cov.shape[0]))
        rows = np.arange(g.size)
        if off:
            G[:, 0] = 1.0 / p
        for idx, wt in ((j, 1.0 - wt2), (j2, wt2)):
            np.add.at(G, (rows, off + idx), wt * t / p)
            np.add.at(G, (rows, off + nf + idx), -wt * u * t / p)
        dofs = self.dof_at(compute, g)  # fewer where a run stopped short of the fraction
        lo, hi = np.empty_like(p), np.empty_like(p)
        for d in np.unique(dofs):
            at = dofs == d
            lo[at], hi[at] = student_t_band(p[at], (G * ratio)[at], self.cov, local[at], int(d), level, kind)
        return lo, hi

    def collapse(self) -> Collapse:
        end = self.losses[:, -1:] - self.E
        norm = (self.losses - self.E) / end
        return Collapse(self.fractions, norm, np.nanmean(norm, axis=0), np.nanstd(norm, axis=0))

    def residuals(self) -> np.ndarray:
        """(runs, fractions): log(observed) − log(law), NaN where a run has no loss."""
        P = np.vstack([self.predict(c) for c in self.compute])
        return np.log(self.losses / P)

    def scatter(self, bandwidth: float = 0.4) -> np.ndarray:
        """Relative standard deviation of one run around the law at each fitted fraction.

        The mean squared log residual across runs at each fraction, times n/(n − 2) (each fraction's
        level and slope in compute come out of the same n runs, which pulls their residuals in),
        smoothed over fractions by a Gaussian kernel of `bandwidth` in log g (0: no smoothing):
        with a handful of runs one fraction's scatter is itself noisy, while how far runs stray
        from the law changes slowly along the run (most early, where warmup leaves its mark)."""
        R = self.residuals()
        n = np.sum(np.isfinite(R), axis=0).astype(float)
        ok = n > 0
        ms = np.full(n.shape, np.nan)
        ms[ok] = np.nansum(R[:, ok] ** 2, axis=0) / n[ok] * n[ok] / np.maximum(n[ok] - 2, 1)
        lg = np.log(self.fractions)
        if bandwidth <= 0:
            return np.sqrt(ms)
        W = np.exp(-0.5 * ((lg[:, None] - lg[None, ok]) / bandwidth) ** 2) * n[ok][None, :]
        return np.sqrt(W @ ms[ok] / W.sum(axis=1))

    def effective_dof(self) -> int:
        """Residual degrees of freedom counting correlated checkpoints of a run as fewer points.

        Residuals along one run are correlated (a run that strays stays astray for a while), so
        points × (1 − ρ)/(1 + ρ), ρ the lag-1 autocorrelation of the log residuals along the runs
        (pooled, floored at 0), less the parameter count; at least 1. For F tests such as
        `EProfile.plausible`, which with every checkpoint counted as independent rule out far
        too much."""
        R = self.residuals()
        num = den = 0.0
        for r in R:
            r = r[np.isfinite(r)]
            if r.size > 2:
                r = r - r.mean()
                num += float(np.sum(r[:-1] * r[1:]))
                den += float(np.sum(r * r))
        rho = max(num / den, 0.0) if den > 0 else 0.0
        points = int(np.isfinite(R).sum())
        return max(int(points * (1 - rho) / (1 + rho)) - self.n_params, 1)

    def profile_E(self, at: float, n: int = 41, dof: int | None = None) -> EProfile:
        """Refit with E pinned on a grid and predict the final fraction of a run of total compute `at`.

        `dof`: residual degrees of freedom of the profile's F test (default: points − parameters;
        `effective_dof()` allows for correlated checkpoints)."""
        ri, ci = np.nonzero(np.isfinite(self.losses))
        u = np.log(self.compute[ri] * self.fractions[ci] / self.c_ref)
        se = float(np.sqrt(self.cov[0, 0])) if not self.E_pinned else float("nan")
        last = self.fractions.size - 1
        at_u = float(np.log(at * self.fractions[last] / self.c_ref))
        if self.smooth is not None:
            return profile_E(u, self.losses[ri, ci], ci, self.fractions.size, at_u, last, self.E, se, n, at,
                             basis=self.basis(self.fractions[ci]), at_basis=self.basis(self.fractions[last:])[0], dof=dof)
        return profile_E(u, self.losses[ri, ci], ci, self.fractions.size, at_u, last, self.E, se, n, at, dof=dof)

    def resample_ok(self, indices) -> bool:
        """Enough distinct runs for the law (see `EndpointFit.resample_ok`) and two at every fraction."""
        idx = np.asarray(indices)
        need = checks.resample_need(np.unique(self.compute).size, self.resample_params)
        if np.unique(self.compute[idx]).size < need:
            return False
        if self.smooth is not None:
            return bool(np.isfinite(self.losses[idx]).any(axis=0).sum() >= self.smooth)
        present = np.isfinite(self.losses[idx])
        return bool(np.all(sizes_present(self.compute[idx], present) >= SIZES_PER_FRACTION))

    def refit(self, indices) -> PerFractionFit:
        idx = np.asarray(indices)
        return fit_per_fraction(
            self.compute[idx], self.fractions, self.losses[idx], E=self.E if self.E_pinned else None, tol=REFIT_TOL,
            smooth=self.smooth,
        )

    def summary(self, at: float | None = None, level: float = 0.9) -> str:
        lines = [
            f"{FORM}{'' if self.smooth is None else f' (log A_g, α_g of degree {self.smooth - 1} in log g)'}: "
            f"{self.n_runs} runs x {self.fractions.size} fractions "
            f"({self.fractions.min():.3g} .. {self.fractions.max():.3g}), compute {self.compute.min():.3g} .. "
            f"{self.compute.max():.3g} FLOPs",
            f"  E = {self.E:.4f}{' (pinned)' if self.E_pinned else ''}   at the end: A = {self.A[-1]:.4g}, "
            f"alpha = {self.alpha[-1]:.4f}   alpha over the run {self.alpha.min():.3f} .. {self.alpha.max():.3f}   "
            f"objective = {self.objective:.3e}",
        ]
        warnings = list(self.warnings)
        if at is not None:
            pred = self.predict(at)
            lo, hi = self.interval(at, level=level)
            lines.append(
                f"  at C = {at:.3g}: final L = {pred[-1]:.4f}, {level:.0%} band [{lo[-1]:.4f}, {hi[-1]:.4f}] "
                f"(extrapolation x{at / self.compute.max():.3g})"
            )
            warnings += checks.too_wide(lo, hi, pred)
        lines += [f"  warning: {w}" for w in warnings]
        return "\n".join(lines)


SMOOTH_CANDIDATES = (2, 3, 4, 6, None)
"""Basis sizes `select_smooth` tries, simplest first; None is the free law (one (A_g, α_g) per fraction)."""


@dataclass(frozen=True)
class SmoothChoice:
    """Leave-one-run-out comparison of basis sizes and the one chosen."""

    chosen: int | None
    errors: dict[int | None, np.ndarray]
    """Per candidate: the RMS log error on each left-out run (candidates that could not be fitted are absent)."""

    @property
    def mean_errors(self) -> dict[int | None, float]:
        return {k: float(v.mean()) for k, v in self.errors.items()}

    def summary(self) -> str:
        parts = [f"{'free' if k is None else k}: {v:.2%}" for k, v in self.mean_errors.items()]
        chosen = "the free law" if self.chosen is None else f"{self.chosen} terms"
        return f"leave-one-run-out RMS error by basis size ({', '.join(parts)}): {chosen}"


def select_smooth(
    compute, fractions, losses, candidates=SMOOTH_CANDIDATES, *, E: float | None = None, score_from: float = 0.1
) -> SmoothChoice:
    """Choose the per-fraction law's basis size by leaving out each run in turn.

    Every candidate (in order of complexity, simplest first) is fitted without one run and scored
    by its RMS log error on that run's losses from `score_from` of the run on (as in
    `fits.backtest_per_fraction`: the first steps follow warmup more than scale); the choice is the
    simplest candidate whose mean error is within one standard error (across left-out runs) of the
    best. Runs are the unit here, as in the bootstrap: a run's checkpoints are not independent of
    each other. Every candidate is still fitted on all fractions."""
    C = checks.as_array("compute", compute)
    g = checks.as_array("fractions", fractions)
    Y = np.asarray(losses, dtype=np.float64)
    errors: dict[int | None, np.ndarray] = {}
    for K in candidates:
        errs = []
        for i in range(C.size):
            keep = np.arange(C.size) != i
            try:
                fit = fit_per_fraction(C[keep], g, Y[keep], E=E, smooth=K, tol=REFIT_TOL)
            except FitError:
                break
            ok = np.isfinite(Y[i]) & (g >= max(fit.fractions.min(), score_from - 1e-9)) & (g <= fit.fractions.max())
            if not ok.any():
                continue
            r = np.log(fit.predict(C[i], g[ok]) / Y[i, ok])
            errs.append(float(np.sqrt(np.mean(r * r))))
        else:
            if len(errs) >= 2:
                errors[K] = np.array(errs)
    if not errors:
        raise FitError("no basis size could be fitted with one run left out; add runs")
    means = {k: float(v.mean()) for k, v in errors.items()}
    best = min(means, key=means.get)
    se = float(np.std(errors[best], ddof=1) / np.sqrt(errors[best].size))
    chosen = next(k for k in errors if means[k] <= means[best] + se)
    return SmoothChoice(chosen, errors)


def legendre_basis(fractions, lo: float, hi: float, K: int) -> np.ndarray:
    """(points, K): Legendre polynomials of degree < K in log g, with [log lo, log hi] mapped to [−1, 1]."""
    x = np.log(np.asarray(fractions, dtype=np.float64))
    span = np.log(hi) - np.log(lo)
    z = 2.0 * (x - np.log(lo)) / span - 1.0 if span > 0 else np.zeros_like(x)
    return np.polynomial.legendre.legvander(z, K - 1)


SIZES_PER_FRACTION = 2
"""Sizes (distinct computes) the free per-fraction law needs at each fraction for its power law there."""


def sizes_present(compute: np.ndarray, present: np.ndarray) -> np.ndarray:
    """How many distinct computes (sizes) have a loss in each column of `present` (runs × fractions)."""
    _, size = np.unique(compute, return_inverse=True)
    onehot = np.zeros((present.shape[0], int(size.max()) + 1 if size.size else 0))
    onehot[np.arange(size.size), size] = 1.0
    return np.count_nonzero(onehot.T @ present.astype(np.float64), axis=0)


def fit_per_fraction(
    compute, fractions, losses, *, E: float | None = None, tol: float = TOL, smooth: int | None = None
) -> PerFractionFit:
    """Fit L(g) = E + A_g·(C·g)^−α_g across runs.

    compute: (runs,) total fit compute of each run (FLOPs); fractions: (k,) increasing in (0, 1];
    losses: (runs, k) each run's loss at those fractions (NaN where missing). `E` pins the
    irreducible loss; otherwise one E is fitted for all fractions. `tol`: the solver's stopping tolerance.
    `smooth=K`: log A_g and α_g are polynomials of degree K − 1 in log g (see the module docstring)
    instead of free at every fraction.
    """
    C = checks.as_array("compute", compute)
    g = checks.as_array("fractions", fractions)
    Y = np.asarray(losses, dtype=np.float64)
    if Y.shape != (C.size, g.size):
        raise FitError(f"losses must have shape (runs, fractions) = ({C.size}, {g.size}), got {Y.shape}")
    if np.any(np.diff(g) <= 0) or g.max() > 1 + 1e-9:
        raise FitError("fractions must increase strictly and lie in (0, 1]")
    if np.any(Y[np.isfinite(Y)] <= 0) or np.any(np.isinf(Y)):
        raise FitError("losses must be positive and finite (NaN marks a missing point)")
    present = np.isfinite(Y)
    per_col = sizes_present(C, present)
    need = 2 if E is not None else 3
    checks.need_runs(int(np.unique(C).size), need, FORM.split(" L")[0], free_E=E is None)
    if smooth is not None:
        if int(smooth) != smooth or smooth < 1:
            raise FitError(f"smooth must be a whole number of basis functions ≥ 1, got {smooth!r}")
        if np.sum(per_col > 0) < smooth:
            raise FitError(f"the smooth law with {smooth} basis functions needs losses at {smooth} fractions or more, "
                           f"got {int(np.sum(per_col > 0))}")
    elif np.any(per_col < SIZES_PER_FRACTION):
        j = int(np.argmin(per_col))
        raise FitError(f"fraction {g[j]:g} has losses from {per_col[j]} run(s); each fraction needs at least "
                       f"{SIZES_PER_FRACTION} "
                       "(sample the runs at fractions where they have evals: coarser ones, or from their first eval on)")
    c_ref = float(np.exp(np.mean(np.log(C))))
    ri, ci = np.nonzero(present)
    u = np.log(C[ri] * g[ci] / c_ref)
    theta = None
    if smooth is None:
        sol = fit_offset_power(u, Y[ri, ci], ci, g.size, E=E, tol=tol)
        a, alpha = sol.a, sol.alpha
    else:
        K = int(smooth)
        B = legendre_basis(g, g.min(), g.max(), K)
        sol = fit_offset_power_basis(u, Y[ri, ci], B[ci], E=E, tol=tol)
        theta = np.concatenate([sol.a, sol.alpha])
        a, alpha = B @ sol.a, B @ sol.alpha
    n = C.size
    least = int(np.isfinite(Y).sum(axis=0).min()) if smooth is None else n  # the free law: each fraction on its own
    few = checks.few_runs(least, 2 + (0 if E is not None else 1), FORM.split(" L")[0])
    if few and least < n:  # counted where the fewest runs have a loss, as the band's dof are (`dof_at`)
        few = [few[0] + f" at the fractions the fewest runs reach ({least} of {n}: a run stops short)"]
    warnings = (
        few
        + checks.not_converged(sol.converged, sol.message)
        + checks.E_at_bound(sol.E, float(np.nanmin(Y)), E is not None)
    )
    if smooth is None and (np.any(alpha <= 1e-9) or np.any(alpha >= ALPHA_MAX * (1 - 1e-9))):
        warnings.append("an exponent alpha_g sits at its bound; the curves do not follow a power law there")
    if smooth is not None:
        fine = np.geomspace(g.min(), g.max(), 200)
        if np.any(legendre_basis(fine, g.min(), g.max(), int(smooth)) @ sol.alpha <= 0):
            warnings.append("the exponent alpha(g) falls to 0 or below within the fitted fractions; "
                            "the curves do not follow a power law there")
    return PerFractionFit(
        E=sol.E, a=a, alpha=alpha, c_ref=c_ref, fractions=g, compute=C, losses=Y,
        objective=sol.objective, E_pinned=E is not None, converged=sol.converged,
        cov=sol.cov, s2=sol.s2, warnings=tuple(warnings), smooth=None if smooth is None else int(smooth), theta=theta,
    )

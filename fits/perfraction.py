"""Per-fraction law for whole loss curves of a fixed-ratio ladder.

All rungs share the tokens-per-parameter ratio and the schedule's shape, so the loss at the same
fraction g of every run follows its own power law in the compute spent so far:
L(g) = E + A_g·(C·g)^−α_g, with one irreducible loss E for every fraction. A target run's curve
is then each fraction's law evaluated at its compute. The equivalent view: the normalised curves
(L(g) − E)/(L(1) − E) collapse onto one shape across sizes (`PerFractionFit.collapse`).

`sample_curve` puts runs logged at different steps onto common fractions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fits import checks
from fits.errors import FitError
from fits.objective import REFIT_TOL, TOL
from fits.powerlaw import ALPHA_MAX, EProfile, fit_offset_power, profile_E
from fits.uncertainty import student_t_band

FORM = "per-fraction law L(g) = E + A_g·(C·g)^-α_g"


def sample_curve(steps, values, total_steps: float, fractions) -> np.ndarray:
    """A run's metric at `fractions` of its planned `total_steps`, by linear interpolation between
    logged steps; NaN where a fraction falls outside the logged range."""
    s = checks.as_array("steps", steps, positive=False)
    v = checks.as_array("values", values, positive=False)
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    target = np.asarray(fractions, dtype=np.float64) * float(total_steps)
    out = np.interp(target, s, v)
    tol = 1e-9 * max(float(total_steps), 1.0)
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

    form = FORM

    @property
    def A(self) -> np.ndarray:
        return np.exp(self.a + self.alpha * np.log(self.c_ref))

    @property
    def params(self) -> dict[str, float]:
        """E, and A and α at the last fraction (the end of the run)."""
        return {"E": self.E, "A": float(self.A[-1]), "alpha": float(self.alpha[-1])}

    @property
    def n_runs(self) -> int:
        return int(self.compute.size)

    @property
    def n_params(self) -> int:
        return 2 * self.fractions.size + (0 if self.E_pinned else 1)

    def _at(self, fractions):
        g = np.asarray(self.fractions if fractions is None else fractions, dtype=np.float64)
        lo, hi = self.fractions.min(), self.fractions.max()
        if np.any((g < lo - 1e-12) | (g > hi + 1e-12)):
            raise FitError(
                f"fractions must lie within the fitted range [{lo:g}, {hi:g}]; the law says nothing outside it"
            )
        return g, np.interp(g, self.fractions, self.a), np.interp(g, self.fractions, self.alpha)

    def predict(self, compute: float, fractions=None) -> np.ndarray:
        """Loss of a run of total fit compute `compute` at `fractions` (default: the fitted ones)."""
        g, a, al = self._at(fractions)
        return self.E + np.exp(a - al * np.log(compute * g / self.c_ref))

    def interval(self, compute: float, fractions=None, level: float = 0.9, kind: str = "observation"):
        """Per-fraction Student-t band (n − 2 dof, or n − 3 with E free) by the delta method."""
        g, a, al = self._at(fractions)
        u = np.log(compute * g / self.c_ref)
        t = np.exp(a - al * u)
        p = self.E + t
        nf = self.fractions.size
        off = 0 if self.E_pinned else 1
        dof = self.n_runs - 2 - off
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
        return student_t_band(p, G, self.cov, self.s2, dof, level, kind)

    def collapse(self) -> Collapse:
        end = self.losses[:, -1:] - self.E
        norm = (self.losses - self.E) / end
        return Collapse(self.fractions, norm, np.nanmean(norm, axis=0), np.nanstd(norm, axis=0))

    def profile_E(self, at: float, n: int = 41) -> EProfile:
        """Refit with E pinned on a grid and predict the final fraction of a run of total compute `at`."""
        ri, ci = np.nonzero(np.isfinite(self.losses))
        u = np.log(self.compute[ri] * self.fractions[ci] / self.c_ref)
        se = float(np.sqrt(self.cov[0, 0])) if not self.E_pinned else float("nan")
        last = self.fractions.size - 1
        at_u = float(np.log(at * self.fractions[last] / self.c_ref))
        return profile_E(u, self.losses[ri, ci], ci, self.fractions.size, at_u, last, self.E, se, n, at)

    def resample_ok(self, indices) -> bool:
        """Enough distinct runs for the law (see `EndpointFit.resample_ok`) and two at every fraction."""
        idx = np.asarray(indices)
        need = checks.resample_need(np.unique(self.compute).size, 2 if self.E_pinned else 3)
        if np.unique(self.compute[idx]).size < need:
            return False
        present = np.isfinite(self.losses[idx])
        return all(np.unique(self.compute[idx][present[:, j]]).size >= 2 for j in range(self.fractions.size))

    def refit(self, indices) -> PerFractionFit:
        idx = np.asarray(indices)
        return fit_per_fraction(
            self.compute[idx], self.fractions, self.losses[idx], E=self.E if self.E_pinned else None, tol=REFIT_TOL
        )

    def summary(self, at: float | None = None, level: float = 0.9) -> str:
        lines = [
            f"{FORM}: {self.n_runs} runs x {self.fractions.size} fractions "
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


def fit_per_fraction(compute, fractions, losses, *, E: float | None = None, tol: float = TOL) -> PerFractionFit:
    """Fit L(g) = E + A_g·(C·g)^−α_g across runs.

    compute: (runs,) total fit compute of each run (FLOPs); fractions: (k,) increasing in (0, 1];
    losses: (runs, k) each run's loss at those fractions (NaN where missing). `E` pins the
    irreducible loss; otherwise one E is fitted for all fractions. `tol`: the solver's stopping tolerance.
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
    per_col = np.array([np.unique(C[present[:, j]]).size for j in range(g.size)])
    need = 2 if E is not None else 3
    checks.need_runs(int(np.unique(C).size), need, FORM.split(" L")[0])
    if np.any(per_col < 2):
        j = int(np.argmin(per_col))
        raise FitError(f"fraction {g[j]:g} has losses from {per_col[j]} run(s); each fraction needs at least 2")
    c_ref = float(np.exp(np.mean(np.log(C))))
    ri, ci = np.nonzero(present)
    u = np.log(C[ri] * g[ci] / c_ref)
    sol = fit_offset_power(u, Y[ri, ci], ci, g.size, E=E, tol=tol)
    n = C.size
    warnings = (
        checks.few_runs(n, 2 + (0 if E is not None else 1), FORM.split(" L")[0])
        + checks.not_converged(sol.converged, sol.message)
        + checks.E_at_bound(sol.E, float(np.nanmin(Y)), E is not None)
    )
    if np.any(sol.alpha <= 1e-9) or np.any(sol.alpha >= ALPHA_MAX * (1 - 1e-9)):
        warnings.append("an exponent alpha_g sits at its bound; the curves do not follow a power law there")
    return PerFractionFit(
        E=sol.E, a=sol.a, alpha=sol.alpha, c_ref=c_ref, fractions=g, compute=C, losses=Y,
        objective=sol.objective, E_pinned=E is not None, converged=sol.converged,
        cov=sol.cov, s2=sol.s2, warnings=tuple(warnings),
    )

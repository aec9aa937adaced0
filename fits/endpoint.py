"""Endpoint law L(C) = E + A·C^−α on the final losses of runs that share a recipe.

Fitted by a profile over E (variable projection, `fits.powerlaw`), E optionally pinned. The
result carries a Student-t band with n − p degrees of freedom (delta method in log space), and
on request the profile over E: how the objective and the prediction move as E moves, which is
where most of an extrapolation's doubt lives.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from fits import checks
from fits.objective import REFIT_TOL, TOL
from fits.powerlaw import EProfile, OffsetPower, fit_offset_power, profile_E
from fits.uncertainty import law_bounds, student_t_band

FORM = "endpoint law L(C) = E + A·C^-α"


@dataclass(frozen=True)
class EndpointFit:
    """L(C) = E + A·C^−α; `compute` and `loss` are the runs it was fitted on."""

    E: float
    alpha: float
    a: float
    """log of A at C = c_ref (A = exp(a)·c_ref^α); kept for numerical range."""
    c_ref: float
    objective: float
    compute: np.ndarray
    loss: np.ndarray
    E_pinned: bool
    converged: bool
    cov: np.ndarray = field(repr=False)
    s2: float = field(repr=False)
    warnings: tuple[str, ...] = ()
    points: str = "runs"
    """What each fitted point is, as the summary counts them ("budgets' least losses" for an isoFLOP sweep)."""

    form = FORM

    @property
    def A(self) -> float:
        return float(np.exp(self.a + self.alpha * np.log(self.c_ref)))

    @property
    def params(self) -> dict[str, float]:
        return {"E": self.E, "A": self.A, "alpha": self.alpha}

    @property
    def param_bounds(self) -> dict[str, tuple[float, float]]:
        return law_bounds(self.params, float(self.loss.min()))

    @property
    def n_runs(self) -> int:
        return int(self.loss.size)

    @property
    def n_params(self) -> int:
        return 2 if self.E_pinned else 3

    @property
    def dof(self) -> int:
        return self.n_runs - self.n_params

    def predict(self, compute) -> np.ndarray:
        u = np.log(checks.at_positive("compute", compute) / self.c_ref)
        return self.E + np.exp(self.a - self.alpha * u)

    def interval(self, compute, level: float = 0.9, kind: str = "observation") -> tuple[np.ndarray, np.ndarray]:
        """Student-t band with n − p dof around the prediction, in log space.

        kind="observation": where a new run at `compute` will land (fit + run-to-run scatter);
        kind="mean": where the law itself lies.
        """
        u = np.log(checks.at_positive("compute", compute) / self.c_ref)
        t = np.exp(self.a - self.alpha * u)
        p = self.E + t
        g = [t / p, -u * t / p]
        if not self.E_pinned:
            g = [1.0 / p] + g
        g = np.stack(np.broadcast_arrays(*g), axis=-1)
        return student_t_band(p, g, self.cov, self.s2, self.dof, level, kind)

    def profile_E(self, at: float, n: int = 41) -> EProfile:
        """Refit with E pinned on a grid over [0, smallest loss) and predict at compute `at`."""
        u = np.log(self.compute / self.c_ref)
        se = float(np.sqrt(self.cov[0, 0])) if not self.E_pinned else float("nan")
        return profile_E(u, self.loss, np.zeros(u.size, np.int64), 1, np.log(at / self.c_ref), 0, self.E, se, n, at)

    def resample_ok(self, indices) -> bool:
        """Whether runs at `indices` can support this fit: one distinct run beyond the parameter
        count (else the refit interpolates), when the data have that many."""
        need = checks.resample_need(np.unique(self.compute).size, self.n_params)
        return np.unique(self.compute[np.asarray(indices)]).size >= need

    def refit(self, indices) -> EndpointFit:
        """The same fit on the runs at `indices` (repeats allowed: bootstrap resamples)."""
        idx = np.asarray(indices)
        return fit_endpoint(self.compute[idx], self.loss[idx], E=self.E if self.E_pinned else None, tol=REFIT_TOL)

    def summary(self, at: float | None = None, level: float = 0.9) -> str:
        lines = [
            f"{FORM}: {self.n_runs} {self.points}, compute {self.compute.min():.3g} .. {self.compute.max():.3g} FLOPs",
            f"  E = {self.E:.4f}{' (pinned)' if self.E_pinned else ''}   A = {self.A:.4g}   "
            f"alpha = {self.alpha:.4f}   objective = {self.objective:.3e} (mean Huber, log residuals)",
        ]
        warnings = list(self.warnings)
        if at is not None:
            lo, hi = self.interval(at, level)
            pred = float(self.predict(at))
            lines.append(
                f"  at C = {at:.3g}: L = {pred:.4f}, {level:.0%} band [{float(lo):.4f}, {float(hi):.4f}] "
                f"(Student-t, {self.dof} dof; extrapolation x{at / self.compute.max():.3g})"
            )
            warnings += checks.too_wide(lo, hi, pred)
        lines += [f"  warning: {w}" for w in warnings]
        return "\n".join(lines)


def fit_endpoint(compute, loss, *, E: float | None = None, tol: float = TOL, counted: bool = False,
                 names=None) -> EndpointFit:
    """Fit L(C) = E + A·C^−α to final losses `loss` (nats) at fit compute `compute` (FLOPs).

    `E` pins the irreducible loss; otherwise it is fitted by a profile over E in [0, min loss).
    `tol` is the solver's stopping tolerance. `counted`: the computes were counted in FLOPs from the runs' sizes
    and tokens, not given (a tiny compute is then no sign of other units).
    """
    c = checks.as_array("compute", compute)
    y = checks.as_array("loss", loss)
    checks.same_length(compute=c, loss=y)
    n_distinct = np.unique(c).size
    checks.need_runs(n_distinct, 2 if E is not None else 3, FORM, free_E=E is None)
    c_ref = float(np.exp(np.mean(np.log(c))))
    sol: OffsetPower = fit_offset_power(np.log(c / c_ref), y, E=E, tol=tol)
    p = 2 if E is not None else 3
    warnings = (
        checks.few_runs(y.size, p, FORM)
        + checks.not_converged(sol.converged, sol.message)
        + checks.E_at_bound(sol.E, float(y.min()), E is not None)
        + checks.at_bound("alpha", float(sol.alpha[0]), 0.0, 10.0)
        + checks.units_warnings(y, compute=c, counted=counted)
    )
    fit = EndpointFit(
        E=sol.E,
        alpha=float(sol.alpha[0]),
        a=float(sol.a[0]),
        c_ref=c_ref,
        objective=sol.objective,
        compute=c,
        loss=y,
        E_pinned=E is not None,
        converged=sol.converged,
        cov=sol.cov,
        s2=sol.s2,
        warnings=tuple(warnings),
    )
    if names is not None:
        checks.same_length(compute=c, names=names)
    off = checks.off_the_law(y, fit.predict(c), lambda i: f"at C = {c[i]:.3g}", names=names)
    return replace(fit, warnings=fit.warnings + tuple(off))

"""The offset power law y = E + exp(a − α·u), u = log x, fitted on one or several columns at once.

The endpoint law is one column (x = compute); the per-fraction law is one column per fraction
(x = compute × fraction) with E shared. For a fixed E the rest is a straight line in log space,
log(y − E) = a − α·u, so the search is a profile over E (variable projection): every E of a grid
gets its closed-form weighted line per column, all in one array computation, then the best E and
its lines start a joint Huber refinement of every parameter.

`fit_offset_power_basis` is the same law with a and α smooth functions instead of one value per
column: a = B·θ_a, α = B·θ_α for a basis B evaluated at each point (the smooth per-fraction law
uses polynomials in log g). For a fixed E it is one weighted linear least-squares problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from fits import checks
from fits.errors import FitError
from fits.objective import HUBER_DELTA, TOL, Solution, huber, huber_rows, solve

ALPHA_MAX = 10.0
E_GRID = 96


@dataclass(frozen=True)
class OffsetPower:
    """A solved offset power law: E, and a and α per column."""

    E: float
    a: np.ndarray
    alpha: np.ndarray
    objective: float
    converged: bool
    message: str
    cov: np.ndarray
    """Covariance of (E, a…, α…) (or of (a…, α…) when E was pinned) from the residual scale."""
    s2: float
    """Residual variance of the log losses, Σw·r²/Σw · n/dof."""
    dof: int
    E_fixed: bool


def predict(E: float, a: np.ndarray | float, alpha: np.ndarray | float, u: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return E + np.exp(a - alpha * u)


def _line_fits(u, y, col, n_cols, w, E):
    """Weighted lines log(y−E) = a − α·u per column for each E (shape (k,)): returns a, α of shape (k, n_cols)."""
    E = np.atleast_1d(E)[:, None]
    gap = y[None, :] - E
    z = np.log(gap)
    v = w[None, :] * (gap / y[None, :]) ** 2  # makes the line's residual ≈ the log-loss residual

    onehot = np.zeros((y.size, n_cols))
    onehot[np.arange(y.size), col] = 1.0

    def colsum(q):
        return q @ onehot

    s0, su, suu = colsum(v), colsum(v * u), colsum(v * u * u)
    sz, suz = colsum(v * z), colsum(v * u * z)
    det = s0 * suu - su * su
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (s0 * suz - su * sz) / det
        a = (sz - slope * su) / s0
    return a, -slope


def _objective_grid(u, y, col, w, E, a, alpha, delta):
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        pred = E[:, None] + np.exp(a[:, col] - alpha[:, col] * u[None, :])
        r = np.log(pred) - np.log(y)[None, :]
    return huber_rows(r, delta, w)


def _residual_fns(u, y, col, n_cols, E_fixed):
    logy = np.log(y)
    n = y.size
    rows = np.arange(n)

    def unpack(x):
        if E_fixed is None:
            return x[0], x[1 : 1 + n_cols], x[1 + n_cols :]
        return E_fixed, x[:n_cols], x[n_cols:]

    def res(x):
        E, a, al = unpack(x)
        with np.errstate(divide="ignore"):  # a trial step whose loss underflows to 0: an infinite residual the solver refuses
            return np.log(predict(E, a[col], al[col], u)) - logy

    def jac(x):
        E, a, al = unpack(x)
        t = np.exp(a[col] - al[col] * u)
        p = E + t
        off = 0 if E_fixed is not None else 1
        J = np.zeros((n, off + 2 * n_cols))
        if E_fixed is None:
            J[:, 0] = 1.0 / p
        J[rows, off + col] = t / p
        J[rows, off + n_cols + col] = -u * t / p
        return J

    return res, jac


def fit_offset_power(
    u: np.ndarray,
    y: np.ndarray,
    col: np.ndarray | None = None,
    n_cols: int = 1,
    weights: np.ndarray | None = None,
    E: float | None = None,
    delta: float = HUBER_DELTA,
    tol: float = TOL,
) -> OffsetPower:
    """Fit y = E + exp(a_c − α_c·u) with E shared by all columns c (pinned when `E` is given)."""
    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    col = np.zeros(y.size, dtype=np.int64) if col is None else np.asarray(col, dtype=np.int64)
    w = np.ones(y.size) if weights is None else np.asarray(weights, dtype=np.float64)
    y_min = float(y.min())
    if E is not None:
        checks.pinned_E(E, y_min)
        E_start = float(E)
    else:
        # Dense near the smallest loss, where the lines change fastest.
        q = np.concatenate([np.geomspace(1e-5, 1.0, E_GRID - 1), [1.0]])
        grid = y_min * (1.0 - q)
        grid[-1] = 0.0
        a_g, al_g = _line_fits(u, y, col, n_cols, w, grid)
        obj = _objective_grid(u, y, col, w, grid, a_g, al_g, delta)
        if not np.any(np.isfinite(obj)):
            raise FitError("no irreducible loss E in [0, min loss) gives a finite fit; check the losses")
        E_start = float(grid[int(np.argmin(obj))])
    a0, al0 = _line_fits(u, y, col, n_cols, w, E_start)
    a0, al0 = a0[0], np.clip(al0[0], 0.0, ALPHA_MAX)
    res, jac = _residual_fns(u, y, col, n_cols, None if E is None else float(E))
    inf = np.full(n_cols, np.inf)
    if E is None:
        x0 = np.concatenate([[E_start], a0, al0])
        lo = np.concatenate([[0.0], -inf, np.zeros(n_cols)])
        hi = np.concatenate([[y_min * (1 - 1e-12)], inf, np.full(n_cols, ALPHA_MAX)])
    else:
        x0 = np.concatenate([a0, al0])
        lo = np.concatenate([-inf, np.zeros(n_cols)])
        hi = np.concatenate([inf, np.full(n_cols, ALPHA_MAX)])
    sol = solve(res, jac, x0, lo, hi, weights=w, delta=delta, tol=tol)
    return _package(sol, n_cols, E, w)


def _package(sol: Solution, n_cols: int, E: float | None, w: np.ndarray) -> OffsetPower:
    x = sol.x
    off = 0 if E is not None else 1
    dof = sol.residuals.size - x.size
    cov, s2 = residual_covariance(sol.residuals, sol.jac, w, dof)
    return OffsetPower(
        E=float(E) if E is not None else float(x[0]),
        a=x[off : off + n_cols].copy(),
        alpha=x[off + n_cols :].copy(),
        objective=sol.objective,
        converged=sol.converged,
        message=sol.message,
        cov=cov,
        s2=s2,
        dof=dof,
        E_fixed=E is not None,
    )


def _basis_lines(u, y, basis, w, E):
    """Weighted least squares log(y−E) = B·θ_a − (B·θ_α)·u for each E (shape (k,)): θ of shape (k, 2K)."""
    E = np.atleast_1d(E)[:, None]
    gap = y[None, :] - E
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.log(gap)
    v = w[None, :] * (gap / y[None, :]) ** 2
    X = np.hstack([basis, -basis * u[:, None]])
    G = np.einsum("kn,ni,nj->kij", v, X, X)
    r = np.einsum("kn,ni->ki", v * z, X)
    ridge = 1e-12 * np.trace(G, axis1=1, axis2=2)[:, None, None] * np.eye(X.shape[1])
    with np.errstate(all="ignore"):
        theta = np.linalg.solve(G + ridge, r[..., None])[..., 0]
    return theta, X


def _basis_fns(u, y, X, E_fixed):
    logy = np.log(y)

    def unpack(x):
        return (x[0], x[1:]) if E_fixed is None else (E_fixed, x)

    def res(x):
        E, th = unpack(x)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return np.log(E + np.exp(X @ th)) - logy

    def jac(x):
        E, th = unpack(x)
        with np.errstate(over="ignore"):
            t = np.exp(X @ th)
        p = E + t
        J = X * (t / p)[:, None]
        return np.hstack([(1.0 / p)[:, None], J]) if E_fixed is None else J

    return res, jac


def fit_offset_power_basis(
    u: np.ndarray,
    y: np.ndarray,
    basis: np.ndarray,
    weights: np.ndarray | None = None,
    E: float | None = None,
    delta: float = HUBER_DELTA,
    tol: float = TOL,
) -> OffsetPower:
    """Fit y = E + exp(a − α·u) with a = basis·θ_a and α = basis·θ_α at every point (E pinned when given).

    basis: (points, K), e.g. polynomials in log g evaluated at each point's fraction. The result's
    `a` and `alpha` hold θ_a and θ_α (K each); its covariance is over (E, θ_a, θ_α)."""
    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    B = np.asarray(basis, dtype=np.float64)
    K = B.shape[1]
    w = np.ones(y.size) if weights is None else np.asarray(weights, dtype=np.float64)
    y_min = float(y.min())
    if E is not None:
        checks.pinned_E(E, y_min)
        theta, X = _basis_lines(u, y, B, w, float(E))
        x0 = theta[0]
        lo, hi = np.full(2 * K, -np.inf), np.full(2 * K, np.inf)
    else:
        q = np.concatenate([np.geomspace(1e-5, 1.0, E_GRID - 1), [1.0]])
        grid = y_min * (1.0 - q)
        grid[-1] = 0.0
        theta, X = _basis_lines(u, y, B, w, grid)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            r = np.log(grid[:, None] + np.exp(theta @ X.T)) - np.log(y)[None, :]
        obj = huber_rows(np.where(np.isfinite(theta).all(axis=1)[:, None], r, np.nan), delta, w)
        if not np.any(np.isfinite(obj)):
            raise FitError("no irreducible loss E in [0, min loss) gives a finite fit; check the losses")
        i = int(np.argmin(obj))
        x0 = np.concatenate([[grid[i]], theta[i]])
        lo = np.concatenate([[0.0], np.full(2 * K, -np.inf)])
        hi = np.concatenate([[y_min * (1 - 1e-12)], np.full(2 * K, np.inf)])
    res, jac = _basis_fns(u, y, X, None if E is None else float(E))
    sol = solve(res, jac, x0, lo, hi, weights=w, delta=delta, tol=tol)
    return _package(sol, K, E, w)


def residual_covariance(r: np.ndarray, J: np.ndarray, w: np.ndarray, dof: int) -> tuple[np.ndarray, float]:
    """Least-squares covariance s²·(JᵀWJ)⁻¹ and s² = Σw·r² / Σw · n/dof (NaN without spare points)."""
    p = J.shape[1]
    if dof <= 0:
        return np.full((p, p), np.nan), float("nan")
    s2 = float(np.sum(w * r * r) / np.sum(w) * r.size / dof)
    return s2 * np.linalg.pinv((J * w[:, None]).T @ J), s2


def objective_at(u, y, col, w, E, a, alpha, delta=HUBER_DELTA) -> float:
    r = np.log(predict(E, a[col], alpha[col], u)) - np.log(y)
    return huber(r, delta, w)


@dataclass(frozen=True)
class EProfile:
    """The fit redone with E pinned at each of `E`: objective and prediction at `at`."""

    at: float
    E: np.ndarray
    objective: np.ndarray
    prediction: np.ndarray
    E_best: float
    prediction_best: float
    dof: int
    dispersion: float = float("nan")
    """E[ψ(r)²] / E[ψ'(r)] of the best fit's log residuals r (ψ: the Huber objective's derivative;
    `huber_dispersion`): the scale of the robust drop-in-dispersion test in `plausible`."""

    def plausible(self, level: float = 0.9) -> tuple[float, float, float, float]:
        """E range whose fits are not rejected at `level`, and the range of predictions over it:
        (E_lo, E_hi, pred_lo, pred_hi).

        The test is on the objective the fits minimise (the robust drop-in-dispersion test of Schrader
        and Hettmansperger, 1980): 2·dof·(objective(E) − the least objective) / `dispersion` against
        F(1, dof). With residuals inside the Huber threshold it is the F test on the residual sum of
        squares; with larger ones (most ladders: δ is 0.1%) a sum of squares would rank E by a criterion
        the fit did not use, and can reject the fitted E itself."""
        obj = self.objective
        best = float(np.nanmin(obj))
        if self.dof <= 0 or not (np.isfinite(self.dispersion) and self.dispersion > 0):
            ok = np.isfinite(obj)
        else:
            f = stats.f.ppf(level, 1, self.dof)
            ok = 2.0 * self.dof * (obj - best) / self.dispersion <= f
        return (
            float(self.E[ok].min()),
            float(self.E[ok].max()),
            float(self.prediction[ok].min()),
            float(self.prediction[ok].max()),
        )

    def sensitivity(self) -> float:
        """d(prediction)/dE along the profile at the best E (loss per unit of E)."""
        i = int(np.argmin(np.abs(self.E - self.E_best)))
        j = slice(max(i - 1, 0), min(i + 2, self.E.size))
        e, p = self.E[j], self.prediction[j]
        return float(np.polyfit(e, p, 1)[0]) if e.size > 1 else float("nan")


def profile_E(
    u, y, col, n_cols, at_u: float, at_col: int, E_best: float, se: float, n: int = 41, at: float | None = None,
    *, basis: np.ndarray | None = None, at_basis: np.ndarray | None = None, dof: int | None = None,
) -> EProfile:
    """Refit with E pinned on a grid over [0, min y) (dense within ±4 standard errors of the best E)
    and record the objective and the prediction at (at_u, column at_col).

    With `basis` (points, K) the law is `fit_offset_power_basis`'s and the prediction is at `at_u`
    with basis row `at_basis` (columns are ignored). `dof` overrides the residual degrees of
    freedom of the F test in `EProfile.plausible` (default: points − parameters)."""
    y_min = float(y.min())
    q = np.geomspace(1e-4, 1.0, n // 2)
    grid = [y_min * (1.0 - q), [0.0, E_best]]
    if np.isfinite(se) and se > 0:
        grid.append(E_best + se * np.linspace(-4.0, 4.0, n))
    grid = np.unique(np.concatenate(grid))
    grid = grid[(grid >= 0) & (grid < y_min)]

    def pinned(e: float) -> tuple[np.ndarray, float, float]:
        if basis is None:
            sol = fit_offset_power(u, y, col, n_cols, E=e)
            r = np.log(predict(sol.E, sol.a[col], sol.alpha[col], u)) - np.log(y)
            return r, sol.objective, float(predict(sol.E, sol.a[at_col], sol.alpha[at_col], at_u))
        sol = fit_offset_power_basis(u, y, basis, E=e)
        r = np.log(predict(sol.E, basis @ sol.a, basis @ sol.alpha, u)) - np.log(y)
        return r, sol.objective, float(predict(sol.E, at_basis @ sol.a, at_basis @ sol.alpha, at_u))

    objective, pred = [], []
    for e in grid:
        _, obj, p = pinned(float(e))
        objective.append(obj)
        pred.append(p)
    n_par = 2 * (n_cols if basis is None else basis.shape[1])
    r_best, _, p_best = pinned(float(E_best))
    dof = int(y.size - n_par if dof is None else dof)
    return EProfile(
        at=float(at_u if at is None else at),
        E=grid,
        objective=np.array(objective),
        prediction=np.array(pred),
        E_best=float(E_best),
        prediction_best=p_best,
        dof=dof,
        dispersion=huber_dispersion(r_best, dof),
    )


def huber_dispersion(r: np.ndarray, dof: int, delta: float = HUBER_DELTA) -> float:
    """E[ψ²] / E[ψ'] for the Huber loss (ψ(r) = r clipped to ±δ) under normal residuals of variance
    Σr² / dof: the residual variance where residuals are well inside δ, less where most lie outside it
    (a smooth estimate: counting the residuals inside δ is too coarse with a few runs)."""
    r = np.asarray(r, dtype=np.float64)
    r = r[np.isfinite(r)]
    if r.size == 0 or dof <= 0:
        return float("nan")
    s2 = float(np.sum(r * r)) / dof
    if s2 <= 0:
        return float("nan")
    z = delta / np.sqrt(s2)
    inside = 2.0 * stats.norm.cdf(z) - 1.0
    psi2 = s2 * (inside - 2.0 * z * stats.norm.pdf(z)) + delta * delta * (1.0 - inside)
    return float(psi2 / inside)

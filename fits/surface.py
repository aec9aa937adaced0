"""Chinchilla surface L(N, D) = E + A/N^α + B/D^β, for runs that vary size and tokens independently.

Variable projection: for fixed exponents (α, β) the loss is linear in (E, A, B), so a grid over
(α, β) is solved in one array computation: every grid point gets its non-negative weighted
least-squares (E, A, B) (weights 1/L², so residuals approximate log residuals) by enumerating the
active sets of the 3-variable NNLS. The best few grid points then start a Huber refinement of all
five parameters. This replaces the thousands of random or gridded starts of the published fits.

`shared_exponent=True` fits one exponent for both terms (α = β), the constrained variant that Li,
Kudugunta & Zettlemoyer 2025 ("(Mis)Fitting", arXiv:2502.18969) fit beside the free form: only the
diagonal of the grid is searched, and the refinement moves α and β together.

`kaplan=True` fits L(N, D) = E + (A/N^α + B/D^β)^γ: Kaplan et al.'s (2020) composition of the two terms, with
an irreducible loss (γ = 1 is the Chinchilla form). Along a compute budget C = 6·N·D the additive form ties
the curvature of the budget's valley in log N to the slope of its least loss in log C: their ratio is α + β
at every budget. With γ the ratio is α + β while the least loss falls as C^(−γαβ/(α+β)), so a fit can follow
both the valleys and the budgets' least losses. Only runs that trace valleys (an isoFLOP sweep: several sizes
per budget) pin γ; elsewhere it trades with E. Its starts are the additive fit's best grid points, each
rescaled to a few values of γ.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from fits import checks
from fits.errors import FitError
from fits.linear import nnls_batch
from fits.objective import HUBER_DELTA, REFIT_TOL, TOL, huber, huber_rows, solve
from fits.powerlaw import residual_covariance
from fits.uncertainty import Band, Ensemble, fit_band, law_bounds, student_t_band

FORM = "Chinchilla surface L(N, D) = E + A/N^α + B/D^β"
KAPLAN_FORM = "Kaplan-Chinchilla surface L(N, D) = E + (A/N^α + B/D^β)^γ"
GAMMA_BOUNDS = (0.05, 3.0)
GAMMA_STARTS = (1.0, 0.5, 0.25)
"""γ's starting values: each start of the additive fit is rescaled to each (the same terms' sum at γ = 1)."""
EXP_MAX = 3.0
GRID = 48
STARTS = 4
REFIT_GRID = 16


@dataclass(frozen=True)
class SurfaceFit:
    """L(N, D) = E + A/N^α + B/D^β; `params_count` (N), `tokens` (D), `loss` are the runs fitted."""

    E: float
    a: float
    """log A at N = n_ref (A = exp(a)·n_ref^α)."""
    b: float
    alpha: float
    beta: float
    n_ref: float
    d_ref: float
    objective: float
    params_count: np.ndarray
    tokens: np.ndarray
    loss: np.ndarray
    E_pinned: bool
    converged: bool
    cov: np.ndarray = field(repr=False)
    s2: float = field(repr=False)
    warnings: tuple[str, ...] = ()
    shared_exponent: bool = False
    """α = β was imposed (one exponent for N and D); `params` still lists both."""
    gamma: float = 1.0
    """The power of the terms' sum: 1 in the Chinchilla form, fitted in the Kaplan-Chinchilla form."""
    gamma_free: bool = False

    @property
    def form(self) -> str:
        return KAPLAN_FORM if self.gamma_free else FORM

    @property
    def A(self) -> float:
        return float(np.exp(self.a + self.alpha * np.log(self.n_ref)))

    @property
    def B(self) -> float:
        return float(np.exp(self.b + self.beta * np.log(self.d_ref)))

    @property
    def params(self) -> dict[str, float]:
        gamma = {"gamma": self.gamma} if self.gamma_free else {}
        return {"E": self.E, "A": self.A, "B": self.B, "alpha": self.alpha, "beta": self.beta} | gamma

    @property
    def param_bounds(self) -> dict[str, tuple[float, float]]:
        return law_bounds(self.params, float(self.loss.min())) | {"gamma": GAMMA_BOUNDS}

    @property
    def n_runs(self) -> int:
        return int(self.loss.size)

    @property
    def n_params(self) -> int:
        return 5 - self.E_pinned - self.shared_exponent + self.gamma_free

    @property
    def dof(self) -> int:
        return self.n_runs - self.n_params

    def _terms(self, n_params, tokens):
        un = np.log(checks.at_positive("n_params", n_params) / self.n_ref)
        ud = np.log(checks.at_positive("tokens", tokens) / self.d_ref)
        return un, ud, np.exp(self.a - self.alpha * un), np.exp(self.b - self.beta * ud)

    def predict(self, n_params, tokens) -> np.ndarray:
        """Loss at N = `n_params`, D = `tokens` (same conventions as the fit)."""
        _, _, tn, td = self._terms(n_params, tokens)
        return self.E + (tn + td) ** self.gamma

    def interval(self, n_params, tokens, level: float = 0.9, kind: str = "observation"):
        """Student-t band with n − p dof (delta method in log space); see `EndpointFit.interval`."""
        un, ud, tn, td = self._terms(n_params, tokens)
        p = self.E + (tn + td) ** self.gamma
        g = _log_grad(un, ud, tn, td, p, not self.E_pinned, self.shared_exponent, self.gamma if self.gamma_free else None)
        return student_t_band(p, g, self.cov, self.s2, self.dof, level, kind)

    def band(self, n_params, tokens, ensemble: Ensemble | None = None, extra_sd=None) -> Band:
        """Median with 50% and 90% bands at N = `n_params`, D = `tokens` (`fits.uncertainty.fit_band`)."""
        return fit_band(self, n_params, tokens, ensemble=ensemble, extra_sd=extra_sd)

    def resample_ok(self, indices) -> bool:
        idx = np.asarray(indices)
        N, D = self.params_count[idx], self.tokens[idx]
        pairs = np.unique(np.stack([N, D], axis=1), axis=0).shape[0]
        full = np.unique(np.stack([self.params_count, self.tokens], axis=1), axis=0).shape[0]
        need = checks.resample_need(full, self.n_params)
        return pairs >= need and np.unique(N).size >= 2 and np.unique(D).size >= 2

    def refit(self, indices) -> SurfaceFit:
        """The same fit on the runs at `indices` (repeats allowed), started from this fit and from
        the best point of a coarse grid."""
        idx = np.asarray(indices)
        return fit_surface(
            self.params_count[idx], self.tokens[idx], self.loss[idx],
            E=self.E if self.E_pinned else None, grid=REFIT_GRID, starts=1, start=self.params, tol=REFIT_TOL,
            shared_exponent=self.shared_exponent, kaplan=self.gamma_free,
        )

    def summary(self, at: tuple[float, float] | None = None, level: float = 0.9) -> str:
        p = self.params
        exps = (f"alpha = beta = {p['alpha']:.4f} (shared)" if self.shared_exponent
                else f"alpha = {p['alpha']:.4f}   beta = {p['beta']:.4f}")
        if self.gamma_free:
            exps += f"   gamma = {self.gamma:.4f}"
        lines = [
            f"{self.form}: {self.n_runs} runs, N {self.params_count.min():.3g} .. {self.params_count.max():.3g}, "
            f"D {self.tokens.min():.3g} .. {self.tokens.max():.3g} tokens",
            f"  E = {p['E']:.4f}{' (pinned)' if self.E_pinned else ''}   A = {p['A']:.4g}   B = {p['B']:.4g}   "
            f"{exps}   objective = {self.objective:.4e}",
        ]
        warnings = list(self.warnings)
        if at is not None:
            lo, hi = self.interval(*at, level=level)
            pred = float(self.predict(*at))
            lines.append(
                f"  at N = {at[0]:.3g}, D = {at[1]:.3g}: L = {pred:.4f}, {level:.0%} band "
                f"[{float(lo):.4f}, {float(hi):.4f}] (Student-t, {self.dof} dof)"
            )
            warnings += checks.too_wide(lo, hi, pred)
        lines += [f"  warning: {w}" for w in warnings]
        return "\n".join(lines)


def _grid_solutions(x, y, L, w, E_fixed):
    """Best non-negative weighted least-squares (E, A, B) for every (α, β) of the grid.

    x: (nα, n) values of N^−α; y: (nβ, n) values of D^−β. Returns coefficients (nα·nβ, 3), their
    mean Huber objective on log residuals, and the grid indices of α and β."""
    na, nb = x.shape[0], y.shape[0]
    v = w / (L * L)
    target = L - (E_fixed or 0.0)
    # Gram matrix of the features [1, x, y] under weights v, for every (α, β) at once.
    G = np.empty((na, nb, 3, 3))
    G[..., 0, 0] = v.sum()
    G[..., 0, 1] = G[..., 1, 0] = (x @ v)[:, None]
    G[..., 0, 2] = G[..., 2, 0] = (y @ v)[None, :]
    G[..., 1, 1] = ((x * x) @ v)[:, None]
    G[..., 2, 2] = ((y * y) @ v)[None, :]
    G[..., 1, 2] = G[..., 2, 1] = (x * v) @ y.T
    r = np.empty((na, nb, 3))
    r[..., 0] = np.sum(v * target)
    r[..., 1] = (x @ (v * target))[:, None]
    r[..., 2] = (y @ (v * target))[None, :]
    G = G.reshape(-1, 3, 3)
    r = r.reshape(-1, 3)
    tt = float(np.sum(v * target * target))
    if E_fixed is None:
        coef = nnls_batch(G, r, tt)
    else:
        coef = np.zeros((G.shape[0], 3))
        coef[:, 1:] = nnls_batch(G[:, 1:, 1:], r[:, 1:], tt)
        coef[:, 0] = E_fixed
    ai = np.repeat(np.arange(na), nb)
    bi = np.tile(np.arange(nb), na)
    pred = coef[:, :1] + coef[:, 1:2] * x[ai] + coef[:, 2:3] * y[bi]
    with np.errstate(divide="ignore", invalid="ignore"):
        res = np.log(pred) - np.log(L)[None, :]
    return coef, huber_rows(res, HUBER_DELTA, w), ai, bi


def _log_grad(un, ud, tn, td, pred, E_free: bool, shared: bool, gamma: float | None = None) -> np.ndarray:
    """d log L / d(free parameters), on the last axis: (E,) log A, log B, α (, β) (, γ); one exponent
    column for both terms when `shared`; a column for γ where `gamma` (its value) is given."""
    total = tn + td
    k = 1.0 if gamma is None else gamma * total ** (gamma - 1.0)
    cols = [k * tn / pred, k * td / pred]
    cols += [-k * (un * tn + ud * td) / pred] if shared else [-k * un * tn / pred, -k * ud * td / pred]
    if gamma is not None:
        cols.append(total**gamma * np.log(total) / pred)
    if E_free:
        cols = [1.0 / pred] + cols
    return np.stack(np.broadcast_arrays(*cols), axis=-1)


def _full(q, E_fixed: float | None, shared: bool, kaplan: bool = False) -> tuple:
    """(E, log A, log B, α, β, γ) from the free parameters `q`."""
    q = ([E_fixed] if E_fixed is not None else []) + list(q)
    if shared:
        q = q[:4] + [q[3]] + q[4:]
    return tuple(q) if kaplan else (*q, 1.0)


def _free(full, E_fixed: float | None, shared: bool, kaplan: bool = False) -> list:
    """The free parameters of (E, log A, log B, α, β, γ): the inverse of `_full`."""
    q = list(full)[: 6 if kaplan else 5]
    if shared:
        del q[4]
    return q[1:] if E_fixed is not None else q


def fit_surface(
    n_params,
    tokens,
    loss,
    *,
    E: float | None = None,
    shared_exponent: bool = False,
    grid: int = GRID,
    starts: int = STARTS,
    start: dict[str, float] | None = None,
    weights=None,
    tol: float = TOL,
    kaplan: bool = False,
    names=None,
) -> SurfaceFit:
    """Fit L(N, D) = E + A/N^α + B/D^β to runs of `n_params` parameters trained on `tokens` tokens.

    `E` pins the irreducible loss; `shared_exponent` imposes α = β; `kaplan` fits E + (A/N^α + B/D^β)^γ
    (module docstring). `grid` points per exponent on (0, 3]; the `starts` best grid points (and `start`,
    parameters of an earlier fit, if given) are refined on the Huber objective and the lowest wins. `tol`: the
    solver's stopping tolerance.
    """
    N = checks.as_array("n_params", n_params)
    D = checks.as_array("tokens", tokens)
    L = checks.as_array("loss", loss)
    checks.same_length(n_params=N, tokens=D, loss=L)
    if kaplan and shared_exponent:
        raise FitError("the Kaplan-Chinchilla surface has its own exponents for N and D; drop the shared exponent")
    p = 5 - (E is not None) - shared_exponent + kaplan
    form = KAPLAN_FORM if kaplan else FORM
    n_distinct = len({(a, b) for a, b in zip(N, D)})
    checks.need_runs(n_distinct, p, form, "runs of distinct (N, D)", free_E=E is None)
    if np.unique(N).size < 2 or np.unique(D).size < 2:
        raise FitError(f"the {form.split(' L(')[0]} needs runs that differ in both size and tokens")
    if E is not None:
        checks.pinned_E(E, float(L.min()))
    w = np.ones(L.size) if weights is None else checks.as_array("weights", weights)
    checks.same_length(loss=L, weights=w)
    n_ref = float(np.exp(np.mean(np.log(N))))
    d_ref = float(np.exp(np.mean(np.log(D))))
    un, ud = np.log(N / n_ref), np.log(D / d_ref)
    exps = np.linspace(EXP_MAX / grid, EXP_MAX, grid)
    x = np.exp(-exps[:, None] * un[None, :])
    y = np.exp(-exps[:, None] * ud[None, :])
    coef, obj, ai, bi = _grid_solutions(x, y, L, w, E)
    if shared_exponent:
        obj = np.where(ai == bi, obj, np.inf)
    order = np.argsort(obj)[: max(starts, 1)]
    if not np.isfinite(obj[order[0]]):
        raise FitError("no grid point gives a finite surface fit; check the losses")
    inits = [(*coef[k], exps[ai[k]], exps[bi[k]], 1.0) for k in order]
    if kaplan:  # A·n^−α = (A^(1/γ)·n^(−α/γ))^γ: each additive start, its terms rescaled to each γ (a refit: to its own)
        gammas = GAMMA_STARTS if start is None else (start.get("gamma", 1.0),)
        inits = [(e0, A0 ** (1 / g), B0 ** (1 / g), al / g, be / g, g) for e0, A0, B0, al, be, _ in inits
                 for g in gammas if A0 > 0 and B0 > 0]
    if start is not None:  # an earlier fit's parameters, in this form's own terms
        inits.append((start["E"], start["A"] * n_ref ** -start["alpha"], start["B"] * d_ref ** -start["beta"],
                      start["alpha"], start["beta"], start.get("gamma", 1.0) if kaplan else 1.0))
    if not inits:
        raise FitError("no start of the grid has both terms; the runs do not show a loss falling in both N and D")
    best = _refine(inits, un, ud, L, w, E, shared_exponent, tol, kaplan)
    q = np.asarray(_full(best.x, E, shared_exponent, kaplan), dtype=np.float64)
    cov, s2 = residual_covariance(best.residuals, best.jac, w, L.size - p)
    warnings = (
        checks.few_runs(L.size, p, form.split(" L(")[0])
        + checks.not_converged(best.converged, best.message)
        + checks.E_at_bound(float(q[0]), float(L.min()), E is not None)
        + checks.at_bound("alpha", float(q[3]), 0.0, 2 * EXP_MAX)
        + ([] if shared_exponent else checks.at_bound("beta", float(q[4]), 0.0, 2 * EXP_MAX))
        + (checks.at_bound("gamma", float(q[5]), *GAMMA_BOUNDS) if kaplan else [])
        + checks.rises_with_tokens(N, D, L)
        + checks.units_warnings(L, compute=6 * N * D, n_params=N, tokens=D, counted=True)
    )
    fit = SurfaceFit(
        E=float(q[0]), a=float(q[1]), b=float(q[2]), alpha=float(q[3]), beta=float(q[4]),
        n_ref=n_ref, d_ref=d_ref, objective=huber(best.residuals, HUBER_DELTA, w),
        params_count=N, tokens=D, loss=L, E_pinned=E is not None, converged=best.converged,
        cov=cov, s2=s2, warnings=tuple(warnings), shared_exponent=shared_exponent,
        gamma=float(q[5]), gamma_free=kaplan,
    )
    if names is not None:
        checks.same_length(n_params=N, names=names)
    off = checks.off_the_law(L, fit.predict(N, D), lambda i: f"at N = {N[i]:.3g}, D = {D[i]:.3g}", names=names)
    return replace(fit, warnings=fit.warnings + tuple(off))


def _refine(inits, un, ud, L, w, E_fixed, shared, tol, kaplan: bool = False):
    """Huber refinement from each start (E, A, B, α, β, γ) at the reference size and tokens; the
    lowest objective wins."""
    logL = np.log(L)

    def res(q):
        e, a, b, al, be, g = _full(q, E_fixed, shared, kaplan)
        with np.errstate(over="ignore"):
            return np.log(e + (np.exp(a - al * un) + np.exp(b - be * ud)) ** g) - logL

    def jac(q):
        e, a, b, al, be, g = _full(q, E_fixed, shared, kaplan)
        with np.errstate(over="ignore", invalid="ignore"):
            tn, td = np.exp(a - al * un), np.exp(b - be * ud)
            return _log_grad(un, ud, tn, td, e + (tn + td) ** g, E_fixed is None, shared, g if kaplan else None)

    exp_max = 2 * EXP_MAX / (GAMMA_BOUNDS[0] if kaplan else 1.0)
    lo = np.array(_free([0.0, -np.inf, -np.inf, 0.0, 0.0, GAMMA_BOUNDS[0]], E_fixed, shared, kaplan))
    hi = np.array(_free([L.min() * (1 - 1e-12), np.inf, np.inf, exp_max, exp_max, GAMMA_BOUNDS[1]], E_fixed, shared,
                        kaplan))
    tiny = 1e-12 * L.min()
    best = None
    for e0, A0, B0, al0, be0, g0 in inits:
        q0 = [min(e0, L.min() * (1 - 1e-9)), np.log(max(A0, tiny)), np.log(max(B0, tiny)), min(al0, exp_max),
              min(be0, exp_max), g0]
        sol = solve(res, jac, np.array(_free(q0, E_fixed, shared, kaplan)), lo, hi, weights=w, tol=tol)
        if best is None or sol.objective < best.objective:
            best = sol
    return best

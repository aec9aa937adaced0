"""Schedule-aware curve laws fitted on one or several runs, across sizes.

Both forms share the skeleton L(t) = L0 + A·S1(t)^−α − B·D(t; shape): S1 is the LR area of the
steps before t, D the form's annealing term (`fits.multipower`, `fits.momentum`). The shape
parameters (the multi-power law's C, β, γ; the momentum law's λ) barely move with scale, so one
set is shared by every run; L0, A, α and B follow power laws in each run's `scale` (a size
measure shared by runs of the same model, e.g. FLOPs per token or parameters):
P(scale) = P_ref·(scale / scale_ref)^k_P. Runs of one size share one value of each. Optionally
L0 = E + (power law), with the irreducible loss E pinned.

A fitted law predicts a new run's curve at another scale under any LR sequence: `predict`.

Fitting: each size first gets its own fit (a grid over the shape starts and α with L0, A, B by
non-negative least squares, then a Huber refinement of the best starts); the power laws through
those values start the joint Huber fit of every run. Bootstrap refits start from the full fit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from fits import checks
from fits.errors import FitError
from fits.linear import gram, nnls_batch
from fits.objective import HUBER_DELTA, REFIT_TOL, huber, solve

RUN_PARAMS = ("L0", "A", "alpha", "B")
ALPHA_STARTS = (0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 1.0)
STARTS_REFINED = 3
SCREEN_TOL = 1e-6
_LEVEL_LO = np.array([-60.0, -60.0, np.log(1e-3), -60.0])
_LEVEL_HI = np.array([60.0, 60.0, np.log(5.0), 60.0])
_SLOPE_LIM = 5.0


@dataclass(frozen=True)
class Curve:
    """One run's loss curve and the LR of every step it took.

    steps: the steps of the logged losses (updates completed; the loss at step t has seen the LRs
    of steps 0 … t−1); loss: nats/token; lrs: LR of steps 0, 1, …, at least up to max(steps) − 1;
    scale: size measure shared by runs of the same model (power laws across sizes use it).

    A curve is a value: its S1 and annealing terms are computed once and kept, so its arrays must not
    change once it is made (its steps and LRs are read-only views).
    """

    steps: np.ndarray
    loss: np.ndarray
    lrs: np.ndarray
    scale: float = 1.0
    name: str = ""
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    """S1 ("area") and each form's annealing terms (by form), once computed."""

    def __post_init__(self) -> None:
        where = f"curve {self.name!r}" if self.name else "curve"
        steps = checks.as_array(f"{where} steps", self.steps)
        loss = checks.as_array(f"{where} loss", self.loss)
        lrs = checks.as_array(f"{where} lrs", self.lrs, positive=False)
        checks.same_length(steps=steps, loss=loss)
        if np.any(steps != np.round(steps)):
            raise FitError(f"{where}: steps must be whole numbers of optimizer updates")
        if np.any(lrs < 0):
            raise FitError(f"{where}: learning rates must be non-negative")
        if lrs.size < steps.max():
            raise FitError(
                f"{where}: the LR sequence covers {lrs.size} steps but losses go to step {int(steps.max())}; "
                "pass the LR of every step"
            )
        if not np.isfinite(self.scale) or self.scale <= 0:
            raise FitError(f"{where}: scale must be positive, got {self.scale}")
        object.__setattr__(self, "steps", _read_only(steps.astype(np.int64)))
        object.__setattr__(self, "loss", loss)
        object.__setattr__(self, "lrs", _read_only(lrs))

    @property
    def area(self) -> np.ndarray:
        """S1 at every logged step: the LR summed over the steps before it."""
        if "area" not in self._memo:
            c = np.concatenate([[0.0], np.cumsum(self.lrs[: int(self.steps.max())])])
            self._memo["area"] = _read_only(c[self.steps])
        return self._memo["area"]

    def terms(self, form):
        """`form`'s annealing terms at the logged steps (its `precompute`)."""
        if form not in self._memo:
            self._memo[form] = form.precompute(self.lrs, self.steps)
        return self._memo[form]


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.setflags(write=False)
    return view


def _target(steps, lrs, scale: float) -> Curve:
    """The curve a prediction is made on: its steps, LRs and scale (no losses)."""
    return Curve(np.asarray(steps), np.ones(np.size(steps)), lrs, scale)


@dataclass(frozen=True)
class _Prepared:
    area: np.ndarray
    pre: object
    s: float
    loss: np.ndarray


class _Problem:
    """Residuals and Jacobian of a curve law over a set of prepared curves."""

    def __init__(self, form, prepared: list[_Prepared], slopes: bool, E: float | None, fixed: dict | None = None):
        self.form, self.prep, self.slopes, self.E = form, prepared, slopes, E
        fixed = fixed or {}
        self.free = np.array([n not in fixed for n in form.shape_names])
        self.fixed_values = np.array([fixed.get(n, np.nan) for n in form.shape_names], dtype=np.float64)
        self.k = int(self.free.sum())
        self.logy = np.log(np.concatenate([p.loss for p in prepared]))

    def unpack(self, x):
        shape = self.fixed_values.copy()
        shape[self.free] = x[: self.k]
        level = x[self.k : self.k + 4]
        slope = x[self.k + 4 : self.k + 8] if self.slopes else np.zeros(4)
        return shape, level, slope

    def _pieces(self, x, jac: bool):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return self._evaluate(x, jac)

    def _evaluate(self, x, jac: bool):
        shape, level, slope = self.unpack(x)
        preds, jacs = [], []
        for p in self.prep:
            L0x, A, al, B = np.exp(level + slope * p.s)
            L0 = L0x + (self.E or 0.0)
            D, dD = self.form.drop(p.pre, shape)
            powr = A * p.area**-al
            pred = L0 + powr - B * D
            preds.append(pred)
            if jac:
                logS = np.log(p.area)
                cols = [-B * dD[:, i] for i in np.flatnonzero(self.free)]
                base = [np.full_like(pred, L0x), powr, -powr * logS * al, -B * D]
                cols += base
                if self.slopes:
                    cols += [b * p.s for b in base]
                jacs.append(np.stack(cols, axis=1) / pred[:, None])
        pred = np.concatenate(preds)
        return pred, (np.concatenate(jacs) if jac else None)

    def _cached(self, x):
        # least_squares asks for the residuals and then the Jacobian at the same point.
        key = x.tobytes()
        if getattr(self, "_key", None) != key:
            self._key, self._value = key, self._pieces(x, True)
        return self._value

    def residuals(self, x):
        pred, _ = self._cached(x)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.log(pred) - self.logy
        return np.where(np.isfinite(r), r, 1e3)

    def jacobian(self, x):
        return self._cached(x)[1]

    def bounds(self):
        lo = [self.form.shape_lower[self.free], _LEVEL_LO]
        hi = [self.form.shape_upper[self.free], _LEVEL_HI]
        if self.slopes:
            lo.append(np.full(4, -_SLOPE_LIM))
            hi.append(np.full(4, _SLOPE_LIM))
        return np.concatenate(lo), np.concatenate(hi)

    def solve(self, x0, tol=None):
        lo, hi = self.bounds()
        kw = {} if tol is None else {"tol": tol}
        return solve(self.residuals, self.jacobian, np.clip(x0, lo, hi), lo, hi, **kw)

    def best_of(self, starts):
        """Screen `starts` with a loose tolerance, then polish the best."""
        screened = [self.solve(x0, tol=SCREEN_TOL) for x0 in starts]
        best = min(screened, key=lambda s: s.objective)
        return self.solve(best.x)


@dataclass(frozen=True)
class CurveLawFit:
    """A fitted schedule-aware curve law; see the module docstring for the parameterisation."""

    form_name: str
    shape: dict[str, float]
    level: dict[str, float]
    """Value of each run parameter at scale_ref (for L0: of L0 − E)."""
    slope: dict[str, float]
    """Power-law exponent of each run parameter in scale (0 when every run has one scale)."""
    scale_ref: float
    E: float | None
    curves: tuple[Curve, ...] = field(repr=False)
    objective: float
    converged: bool
    warnings: tuple[str, ...] = ()
    form: object = field(default=None, repr=False)
    fixed_shape: tuple[str, ...] = ()
    """Shape parameters held at given values rather than fitted."""

    @property
    def scales(self) -> np.ndarray:
        return np.array([c.scale for c in self.curves])

    @property
    def n_runs(self) -> int:
        return len(self.curves)

    @property
    def has_slopes(self) -> bool:
        return np.unique(self.scales).size > 1

    def run_params(self, scale: float | None = None) -> dict[str, float]:
        """L0, A, α, B at `scale` (default: scale_ref), plus the shared shape parameters."""
        s = 0.0 if scale is None else float(np.log(scale / self.scale_ref))
        out = {k: float(np.exp(np.log(self.level[k]) + self.slope[k] * s)) for k in RUN_PARAMS}
        out["L0"] += self.E or 0.0
        return out | self.shape

    @property
    def params(self) -> dict[str, float]:
        """Shape parameters and, for each run parameter, its value at scale_ref and its exponent."""
        out = dict(self.shape)
        for k in RUN_PARAMS:
            out[k] = self.run_params()[k]
            if self.has_slopes:
                out[f"{k}_exponent"] = self.slope[k]
        return out

    def predict(self, steps, lrs, scale: float) -> np.ndarray:
        """Loss at `steps` of a run of size `scale` trained with LR sequence `lrs` (one LR per step)."""
        return self._predict_curve(_target(steps, lrs, scale))

    def _predict_curve(self, c: Curve) -> np.ndarray:
        """Loss at the steps of `c`, at its scale and under its LRs (its losses unused)."""
        p = self.run_params(c.scale)
        D, _ = self.form.drop(c.terms(self.form), np.array(list(self.shape.values())))
        return p["L0"] + p["A"] * c.area ** -p["alpha"] - p["B"] * D

    def interval(self, steps, lrs, scale: float, level: float = 0.9, n_boot: int = 200, seed: int = 0):
        """Interval of `predict` from `n_boot` refits over resampled runs.

        Checkpoints of one run share its seed and schedule, so a band from their scatter would be
        far too narrow; only runs are resampled. To reuse the refits, keep `fits.bootstrap(fit)`.
        """
        from fits.uncertainty import bootstrap

        return bootstrap(self, n_boot, seed).interval(steps, lrs, scale, level=level)

    def errors(self, curves=None) -> list[tuple[str, float, float]]:
        """(name, mean, worst) relative error of the law on each curve (default: the fitted ones)."""
        out = []
        for c in self.curves if curves is None else curves:
            e = np.abs(self._predict_curve(c) / c.loss - 1.0)
            out.append((c.name, float(e.mean()), float(e.max())))
        return out

    def resample_ok(self, indices) -> bool:
        """Resamples must keep two sizes when the fit has power laws across sizes."""
        return np.unique(self.scales[np.asarray(indices)]).size >= (2 if self.has_slopes else 1)

    def refit(self, indices) -> CurveLawFit:
        """The same law on the runs at `indices` (repeats allowed), started from this fit."""
        curves = [self.curves[i] for i in np.asarray(indices)]
        fixed = {k: self.shape[k] for k in self.fixed_shape}
        return _fit(self.form, curves, self.E, fixed, start=self)

    def at_floor(self, E: float | None) -> CurveLawFit:
        """The same law with L0's floor pinned at `E` (None: 0), started from this fit (L0's level moved by
        the change in floor, so a profile over floors refits in one solve each)."""
        level = dict(self.level)
        level["L0"] = max(level["L0"] + (self.E or 0.0) - (E or 0.0), 1e-8 * level["L0"])
        start = dataclasses.replace(self, level=level)
        fixed = {k: self.shape[k] for k in self.fixed_shape}
        return _fit(self.form, list(self.curves), E, fixed, start=start)

    def summary(self, at: float | None = None) -> str:
        sizes = np.unique(self.scales)
        lines = [
            f"{self.form_name}: {self.n_runs} runs at {sizes.size} scale(s) "
            f"({sizes.min():.3g} .. {sizes.max():.3g}), objective {self.objective:.3e}",
            "  shared: " + "   ".join(
                f"{k} = {v:.4g}" + (" (fixed)" if k in self.fixed_shape else "") for k, v in self.shape.items()
            ),
        ]
        for s in sizes if at is None else np.append(sizes, at):
            p = self.run_params(s)
            tag = "  (prediction)" if at is not None and s == at and s not in sizes else ""
            lines.append(
                f"  scale {s:.3g}: " + "   ".join(f"{k} = {p[k]:.4g}" for k in RUN_PARAMS) + tag
            )
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


FLOOR_GRID = np.arange(10) / 10
"""Floors of L0 profiled, as fractions of the smallest loss fitted: a flat prior on [0, that loss)."""


@dataclass(frozen=True)
class FloorProfile:
    """A curve law refitted with L0's floor E pinned at each of `floors`, and the posterior over E.

    Within a size, L0 and the power-law term trade off; across sizes, a floor E under L0's power law
    in scale is pinned only where the sizes' L0 bend towards it (with two sizes any E fits equally
    well). Fixing E at 0 takes the bound of its range, where the law keeps falling as a pure power law
    and a larger run is predicted low. Instead E gets a flat prior on [0, the smallest loss fitted)
    and the profile likelihood of one observation per curve (a curve's checkpoints share its seed
    and schedule, so its residuals are not independent): weight ∝ (objective / least)^(−curves/2).
    The law predicts at the posterior median of E and carries the predictions over its central
    interval into the band."""

    floors: np.ndarray
    objective: np.ndarray
    weight: np.ndarray
    fits: tuple = field(repr=False)

    def quantile(self, p: float) -> float:
        """The floor at posterior probability `p` (each grid floor holds its weight at its point)."""
        cdf = np.cumsum(self.weight) - self.weight / 2
        return float(np.interp(p, cdf, self.floors))

    def at(self, E: float) -> CurveLawFit:
        """The law with its floor at `E`, refitted from the nearest grid fit."""
        i = int(np.argmin(np.abs(self.floors - E)))
        if abs(self.floors[i] - E) <= 1e-12 * max(E, 1.0):
            return self.fits[i]
        return self.fits[i].at_floor(E)

    def predictions(self, steps, lrs, scale: float, floors) -> np.ndarray:
        """The law's predictions with its floor at each of `floors`, interpolated between grid fits."""
        target = _target(steps, lrs, scale)
        grid = np.array([f._predict_curve(target) for f in self.fits])
        if grid.shape[0] == 1:
            return np.repeat(grid, np.size(floors), axis=0)
        out = []
        for E in np.atleast_1d(floors):
            j = int(np.clip(np.searchsorted(self.floors, E), 1, self.floors.size - 1))
            w = (E - self.floors[j - 1]) / (self.floors[j] - self.floors[j - 1])
            out.append((1 - w) * grid[j - 1] + w * grid[j])
        return np.array(out)


def profile_floor(fit: CurveLawFit) -> FloorProfile:
    """`fit` (floor 0) refitted at each floor of `FLOOR_GRID` × the smallest loss, each from the last."""
    if fit.E:
        raise FitError("profile the floor from a fit whose floor is 0")
    low = min(float(c.loss.min()) for c in fit.curves)
    fits = [fit]
    for q in FLOOR_GRID[1:]:
        try:
            fits.append(fits[-1].at_floor(float(q * low)))
        except FitError:
            break
    obj = np.array([f.objective for f in fits])
    w = np.exp(-(len(fit.curves) / 2) * np.log(obj / obj.min()))
    return FloorProfile(FLOOR_GRID[: len(fits)] * low, obj, w / w.sum(), tuple(fits))


def fit_curve_law(form, curves, *, E: float | None = None, shape: dict[str, float] | None = None) -> CurveLawFit:
    """Fit a curve law (`fits.multipower.MultiPower` or `fits.momentum.Momentum`) to `curves`.

    `E` pins the floor of L0 (L0 = E + power law). `shape` fixes some or all shape parameters
    (e.g. published values) when the runs' schedules cannot identify them: runs that all share one
    decay shape say little about how a different schedule would pay off.
    """
    curves = list(curves)
    if not curves:
        raise FitError("a curve law needs at least one run's curve")
    for c in curves:
        if not isinstance(c, Curve):
            raise FitError(f"expected fits.Curve records, got {type(c).__name__}")
    fixed = dict(shape or {})
    unknown = set(fixed) - set(form.shape_names)
    if unknown:
        raise FitError(f"the {form.name} has no shape parameter {sorted(unknown)}; it has {list(form.shape_names)}")
    for name, value in fixed.items():
        i = form.shape_names.index(name)
        if not form.shape_lower[i] <= value <= form.shape_upper[i]:
            raise FitError(f"{name} = {value:g} is outside [{form.shape_lower[i]:g}, {form.shape_upper[i]:g}]")
    return _fit(form, curves, E, fixed, start=None)


def _prepare(form, curves, scale_ref):
    out = []
    for c in curves:
        area = c.area
        if np.any(area <= 0):
            raise FitError(
                f"curve {c.name!r}: a loss is logged before any LR was applied (step {int(c.steps[np.argmin(area)])});"
                " drop points before the first update"
            )
        out.append(_Prepared(area, c.terms(form), float(np.log(c.scale / scale_ref)), c.loss))
    return out


def _fit(form, curves, E, fixed: dict, start: CurveLawFit | None) -> CurveLawFit:
    scales = np.array([c.scale for c in curves])
    distinct = np.unique(scales)
    scale_ref = start.scale_ref if start is not None else float(np.exp(np.mean(np.log(distinct))))
    prep = _prepare(form, curves, scale_ref)
    slopes = distinct.size > 1
    if E is not None:
        low = min(float(c.loss.min()) for c in curves)
        checks.pinned_E(E, low)
    problem = _Problem(form, prep, slopes, E, fixed)
    if start is not None:
        free_shape = [v for k, v in start.shape.items() if k not in fixed]
        levels = [np.log(start.level[k]) for k in RUN_PARAMS]
        x0 = np.concatenate([free_shape, levels, [start.slope[k] for k in RUN_PARAMS] if slopes else []])
        sol = problem.solve(x0, tol=REFIT_TOL)
    else:
        sol = _joint_from_groups(form, prep, scales, distinct, slopes, E, fixed)
    shape, level, slope = problem.unpack(sol.x)
    warnings = checks.not_converged(sol.converged, sol.message)
    for name, v, lo, hi in zip(form.shape_names, shape, form.shape_lower, form.shape_upper):
        if name not in fixed:
            warnings += checks.at_bound(name, float(v), float(lo), float(hi))
    if len(warnings) > len(checks.not_converged(sol.converged, sol.message)):
        warnings.append(
            "the runs' LR schedules do not pin the annealing shape, so predictions under other schedules "
            "are guesses: fix it (shape=..., e.g. published values) or add a run with another schedule"
        )
    if distinct.size == 2:
        warnings.append("power laws across sizes rest on two sizes only: nothing checks them")
    if not any(np.any(np.diff(c.lrs[: int(c.steps.max())]) < 0) for c in curves):
        warnings.append("no fitted curve has a falling LR: the annealing term is not identified")
    warnings += mixed_peaks(form, curves)
    return CurveLawFit(
        form_name=form.name,
        shape={n: float(v) for n, v in zip(form.shape_names, shape)},
        level={n: float(np.exp(v)) for n, v in zip(RUN_PARAMS, level)},
        slope={n: float(v) for n, v in zip(RUN_PARAMS, slope)},
        scale_ref=scale_ref,
        E=E,
        curves=tuple(curves),
        objective=huber(sol.residuals, HUBER_DELTA),
        converged=sol.converged,
        warnings=tuple(warnings),
        form=form,
        fixed_shape=tuple(sorted(fixed)),
    )


def size_keys(scales) -> np.ndarray:
    """One key per curve for its size: curves whose sizes agree to 3 decimals of their log are one size."""
    return np.round(np.log(np.asarray(scales, dtype=np.float64)), 3)


def mixed_peaks(form, curves) -> list[str]:
    """A warning when curves of one size train at different peak LRs.

    The law counts LR × steps as progress (its area), which holds across schedule shapes at one peak LR
    (Luo et al. fit each size at one peak), not across peak LRs: past the best LR a higher one does worse.
    A ladder of best-LR runs whose best peak moves with the length mixes the two."""
    peaks: dict[float, set[float]] = {}
    for key, c in zip(size_keys([c.scale for c in curves]), curves):
        peaks.setdefault(float(key), set()).add(float(np.max(c.lrs)))
    # 5% apart at least: a peak read off an LR logged every few steps can miss the top by a little
    mixed = {float(np.exp(k)): sorted(v) for k, v in sorted(peaks.items()) if max(v) > 1.05 * min(v)}
    if not mixed:
        return []
    size, lrs = next(iter(mixed.items()))
    return [f"curves of one size train at different peak LRs ({len(mixed)} of {len(peaks)} sizes; at {size:.3g}: "
            f"{', '.join(f'{x:.3g}' for x in lrs)}): the {form.name} counts LR × steps as progress, which holds "
            f"across schedule shapes at one peak LR but not across peak LRs (past the best LR a higher one does "
            f"worse), so its fit and predictions may be off; one peak LR per size avoids it"]


def _group_fit(form, prep: list[_Prepared], E, fixed):
    """Best single-size fit: grid over shape starts × α, linear (L0, A, B), then Huber refinement."""
    y = np.concatenate([p.loss for p in prep])
    area = np.concatenate([p.area for p in prep])
    w = 1.0 / (y * y)
    problem = _Problem(form, prep, False, E, fixed)
    shape_starts = {tuple(np.where(problem.free, s, problem.fixed_values)) for s in form.shape_starts}
    cands = []
    for shape in sorted(shape_starts):
        D = np.concatenate([form.drop(p.pre, np.array(shape))[0] for p in prep])
        feats = np.stack([np.stack([np.ones_like(y), area**-a, -D], axis=1) for a in ALPHA_STARTS])
        G, r, tt = gram(feats, y - (E or 0.0), w)
        coef = nnls_batch(G, r, tt)
        for j, a in enumerate(ALPHA_STARTS):
            L0, A, B = coef[j]
            pred = (E or 0.0) + L0 + A * area**-a - B * D
            if np.all(pred > 0):
                cands.append((huber(np.log(pred / y)), np.array(shape)[problem.free], L0, A, a, B))
    if not cands:
        raise FitError(f"no start of the {form.name} gives positive losses; check the curves")
    cands.sort(key=lambda c: c[0])
    tiny = 1e-8 * float(y.min())
    starts = [
        np.concatenate([shape, np.log([max(L0, tiny), max(A, tiny), a, max(B, tiny)])])
        for _, shape, L0, A, a, B in cands[:STARTS_REFINED]
    ]
    return problem.best_of(starts)


def _joint_from_groups(form, prep, scales, distinct, slopes, E, fixed):
    groups = [[p for p, s in zip(prep, scales) if s == d] for d in distinct]
    fits = [_group_fit(form, g, E, fixed) for g in groups]
    if not slopes:
        return fits[0]
    k = len(form.shape_names) - len(fixed)
    s = np.array([g[0].s for g in groups])
    levels = np.array([f.x[k : k + 4] for f in fits])
    coef = np.polyfit(s, levels, 1)  # rows: slope, intercept
    order = np.argsort([-sum(p.loss.size for p in g) for g in groups])
    starts = [  # the shapes of the best-sampled sizes, the power laws through every size
        np.concatenate([fits[i].x[:k], coef[1], np.clip(coef[0], -_SLOPE_LIM, _SLOPE_LIM)]) for i in order[:2]
    ]
    return _Problem(form, prep, True, E, fixed).best_of(starts)

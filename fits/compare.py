"""Two ladders that differ in one recipe choice, as a compute-equivalent multiplier.

Each ladder's final losses follow L(C) = E + A·C^−α. The multiplier at compute C is how much more
compute ladder B needs to reach the loss ladder A reaches at C:

    m(C) = C_B(L_A(C)) / C,   C_B(L) = (A_B / (L − E_B))^(1/α_B)

so m > 1 means B is worse (needs more compute for the same loss), m < 1 that B is better. It is
given at each rung's compute (A's) and at a target compute (the hero's), with the loss each
ladder's law predicts there and their difference.

The irreducible loss E, three ways (the choice is part of the result, `E_mode`):

- ``"shared"`` (the default): one E for both ladders, fitted jointly with each ladder's own A and
  α. A handful of rungs hardly pins E for one ladder, let alone the difference of two; two free
  E's let the extrapolated multiplier swing on noise (and B may never reach A's loss when
  E_B > L_A). With E shared the multiplier is exp((a_B − a_A + α_A·u)/α_B − u) in log compute u:
  always finite, and constant when the two laws share their slope too.
- ``"separate"``: each ladder its own E (recipes that change what is learnable in the limit, e.g.
  two data mixes scored on one eval set). Needs more rungs to mean anything.
- a number: E pinned for both ladders.

Band: a paired bootstrap over sizes. Rungs are paired by rank of compute (the i-th smallest of A
with the i-th smallest of B: they share a model size); each resample draws size indices with
replacement, takes both ladders' rungs at those indices, refits both laws and recomputes the
multiplier. Resamples with fewer distinct sizes than the laws need (one spare point beyond the
parameters) are redrawn. Refits minimise the same objective as every fit here (mean Huber,
δ = 1e-3, on log residuals) by a profile over E on a grid, refined twice around its best value,
then at the vertex of a parabola through the best three, with iteratively reweighted lines
for a fixed E; all resamples at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fits import checks
from fits.errors import FitError
from fits.objective import HUBER_DELTA
from fits.powerlaw import ALPHA_MAX, fit_offset_power
from fits.uncertainty import Band

FORM = "comparison of two endpoint laws L(C) = E + A·C^-α"
E_MODES = ("shared", "separate")
_COARSE = np.concatenate([np.geomspace(1e-5, 1.0, 47), [1.0]])
"""Grid of the profile over E as fractions q of the smallest loss (E = y_min·(1 − q)); the last
point is E = 0. Dense near the smallest loss, where the lines change fastest."""
_FINE = 9
_IRLS = 6


@dataclass(frozen=True)
class Law:
    """One ladder's L(C) = E + A·C^−α (loss in nats, compute in FLOPs)."""

    E: float
    A: float
    alpha: float

    def predict(self, compute) -> np.ndarray:
        return self.E + self.A * checks.at_positive("compute", compute) ** -self.alpha

    def compute_at(self, loss) -> np.ndarray:
        """Compute at which the law reaches `loss`; inf where loss ≤ E (never)."""
        gap = np.asarray(loss, dtype=np.float64) - self.E
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            c = (self.A / gap) ** (1.0 / self.alpha)
        return np.where(gap > 0, c, np.inf)


@dataclass(frozen=True)
class Comparison:
    """Ladder B against ladder A: compute multiplier and loss difference, with bootstrap bands."""

    compute_a: np.ndarray
    loss_a: np.ndarray
    compute_b: np.ndarray
    loss_b: np.ndarray
    """Final losses (nats) at fit compute (FLOPs), paired by rank: index i of A and of B is one size."""
    law_a: Law
    law_b: Law
    E_mode: str
    """"shared" (one E fitted for both), "separate" (one each) or "pinned" (E given)."""
    target: float
    """Target compute (FLOPs), e.g. the hero's."""
    at: np.ndarray
    """Compute where the multiplier is given: A's rungs, then the target."""
    multiplier: np.ndarray
    """m(C) = C_B(L_A(C)) / C of the full fit at `at` (> 1: B needs more compute, B is worse)."""
    band: Band
    """Bootstrap median and 50% / 90% bands of the multiplier at `at`."""
    loss_gap_band: Band
    """Bootstrap band of L_B(target) − L_A(target) (nats; > 0: B is worse)."""
    n_boot: int
    failed: int
    seed: int
    warnings: tuple[str, ...] = ()
    objective: float = field(default=float("nan"), repr=False)
    no_bands: str = ""
    """Why the comparison has no bands though resamples were asked for ("" where it has them, or none were)."""

    @property
    def n_sizes(self) -> int:
        return int(self.loss_a.size)

    @property
    def multiplier_target(self) -> float:
        return float(self.multiplier[-1])

    @property
    def loss_target_a(self) -> float:
        return float(self.law_a.predict(self.target))

    @property
    def loss_target_b(self) -> float:
        return float(self.law_b.predict(self.target))

    @property
    def loss_gap(self) -> float:
        """L_B(target) − L_A(target) of the full fit (nats)."""
        return self.loss_target_b - self.loss_target_a

    def multiplier_at(self, compute) -> np.ndarray:
        """m(C) of the full fit at any compute."""
        c = np.asarray(compute, dtype=np.float64)
        return self.law_b.compute_at(self.law_a.predict(c)) / c

    def summary(self) -> str:
        E = (f"E shared = {self.law_a.E:.4f}" if self.E_mode != "separate"
             else f"E_A = {self.law_a.E:.4f}, E_B = {self.law_b.E:.4f} (separate)")
        if self.E_mode == "pinned":
            E = f"E pinned = {self.law_a.E:.4f}"
        b = self.band
        lines = [
            f"{FORM}: {self.n_sizes} sizes per ladder, {E}",
            f"  A: alpha = {self.law_a.alpha:.4f}   B: alpha = {self.law_b.alpha:.4f}",
            f"  multiplier at C = {self.target:.3g} FLOPs: {self.multiplier_target:.4g} "
            + (f"(90% band [{b.lo90[-1]:.4g}, {b.hi90[-1]:.4g}], {self.n_boot} paired resamples over sizes)"
               if self.n_boot else f"(no band: {self.no_bands or 'no resamples'})"),
            f"  loss at the target: A {self.loss_target_a:.4f}, B {self.loss_target_b:.4f}, "
            f"B − A {self.loss_gap:+.4f} nats",
        ]
        return "\n".join(lines + [f"  warning: {w}" for w in self.warnings])


def compare_ladders(
    compute_a, loss_a, compute_b, loss_b, target: float, *,
    E: str | float = "shared", n_boot: int = 1000, seed: int = 0,
) -> Comparison:
    """Compare ladder B with ladder A (final `loss` in nats at fit `compute` in FLOPs per rung).

    The ladders must have the same number of rungs, at least 3; they are paired by rank of compute.
    `E`: "shared", "separate" or a number to pin it (see the module docstring). `target`: the
    compute (FLOPs) to extrapolate the multiplier to. `n_boot` paired resamples over sizes give the
    bands (0: none, the bands are the full fit's value)."""
    ca, ya, cb, yb = _paired(compute_a, loss_a, compute_b, loss_b)
    target = float(checks.as_array("target", [target])[0])
    mode, E_pin = _mode(E, min(ya.min(), yb.min()))
    n = ya.size
    c_ref = float(np.exp(np.mean(np.log(np.concatenate([ca, cb])))))
    u, y, col = _stack(ca, ya, cb, yb, c_ref)
    need = _sizes_needed(mode, n)
    if n < need:
        raise FitError(f"the {FORM} with E {mode} needs at least {need} sizes per ladder, got {n}")

    laws, objective, ok_fit = _full_fit(u, y, col, mode, E_pin, c_ref)
    at = np.concatenate([ca, [target]])
    mult = laws[1].compute_at(laws[0].predict(at)) / at

    # with as many sizes as the fit needs, every usable resample holds all of them: a band of no width
    no_bands = (f"{n} sizes, the fewest E {mode} needs: every usable resample holds all of them, so resamples "
                "cannot vary the fit" if n_boot and n == need else "")
    draws, gaps, failed = _bootstrap(u, y, col, mode, E_pin, c_ref, n, need, at, target, 0 if no_bands else n_boot, seed)
    if draws is not None:
        draws, gaps = _inflate(draws, gaps, _inflation(mode, n))
    if draws is None:
        draws, gaps = mult[None, :], np.array([laws[1].predict(target) - laws[0].predict(target)])
    warnings = _warnings(laws, mode, n, need, ca, cb, ya, yb, target, mult, failed, n_boot, ok_fit)
    warnings += _outside_resamples(draws[:, -1], float(mult[-1]), mode) if n_boot and not no_bands else []
    return Comparison(
        compute_a=ca, loss_a=ya, compute_b=cb, loss_b=yb, law_a=laws[0], law_b=laws[1], E_mode=mode,
        target=target, at=at, multiplier=mult, band=_band(draws, mult),
        loss_gap_band=_band(gaps[:, None], np.array([laws[1].predict(target) - laws[0].predict(target)])),
        n_boot=int(draws.shape[0]) if n_boot and not no_bands else 0, failed=failed, seed=int(seed),
        warnings=tuple(warnings), objective=objective, no_bands=no_bands,
    )


# ---- inputs -----------------------------------------------------------------------------------------
def _paired(compute_a, loss_a, compute_b, loss_b):
    ca, ya = checks.as_array("compute_a", compute_a), checks.as_array("loss_a", loss_a)
    cb, yb = checks.as_array("compute_b", compute_b), checks.as_array("loss_b", loss_b)
    checks.same_length(compute_a=ca, loss_a=ya)
    checks.same_length(compute_b=cb, loss_b=yb)
    if ca.size != cb.size:
        raise FitError(f"the ladders differ in rungs: A has {ca.size}, B has {cb.size}; "
                       "pairing by size needs the same rungs in both")
    for name, c in (("A", ca), ("B", cb)):
        if np.unique(c).size != c.size:
            raise FitError(f"ladder {name} has two rungs at the same compute; give one final loss per size")
    ia, ib = np.argsort(ca, kind="stable"), np.argsort(cb, kind="stable")
    return ca[ia], ya[ia], cb[ib], yb[ib]


def _mode(E: str | float, y_min: float) -> tuple[str, float | None]:
    if isinstance(E, str):
        if E not in E_MODES:
            raise FitError(f"E {E!r}: give 'shared', 'separate' or a number to pin it")
        return E, None
    e = float(E)
    checks.pinned_E(e, y_min)
    return "pinned", e


def _stack(ca, ya, cb, yb, c_ref):
    u = np.log(np.concatenate([ca, cb]) / c_ref)
    y = np.concatenate([ya, yb])
    col = np.repeat([0, 1], ya.size)
    return u, y, col


def _sizes_needed(mode: str, n: int) -> int:
    """Distinct sizes a fit (or a resample) needs: one spare point beyond the parameters, the way
    `checks.resample_need` counts, with a shared E counted once for both ladders."""
    if mode == "shared":  # 2 points per size, 5 parameters
        return 3
    p = 3 if mode == "separate" else 2
    return checks.resample_need(n, p)


# ---- fits -------------------------------------------------------------------------------------------
def _full_fit(u, y, col, mode, E_pin, c_ref) -> tuple[tuple[Law, Law], float, bool]:
    if mode == "separate":
        sols = [fit_offset_power(u[col == k], y[col == k]) for k in (0, 1)]
        laws = tuple(_law(s.E, s.a[0], s.alpha[0], c_ref) for s in sols)
        return laws, float(np.mean([s.objective for s in sols])), all(s.converged for s in sols)
    s = fit_offset_power(u, y, col, 2, E=E_pin)
    return tuple(_law(s.E, s.a[k], s.alpha[k], c_ref) for k in (0, 1)), s.objective, s.converged


def _law(E: float, a: float, alpha: float, c_ref: float) -> Law:
    # y = E + exp(a − α·log(C/c_ref)) = E + exp(a + α·log c_ref)·C^−α
    return Law(float(E), float(np.exp(a + alpha * np.log(c_ref))), float(alpha))


def _profile(u, y, col, n_cols, W, E_pin=None):
    """Huber fits of y = E + exp(a_c − α_c·u), one per row of counts W (resamples, points).

    E is located on a coarse grid with plain lines, refined on two finer grids between the best
    point's neighbours, then by the vertex of a parabola through the best three (kept when better).
    Returns E (R,), a (R, n_cols), α (R, n_cols) and whether each row found a finite fit."""
    R = W.shape[0]
    if E_pin is not None:
        return _grid_fits(u, y, col, n_cols, W, np.full((R, 1), E_pin), _IRLS)[:4]
    y_min = np.where(W > 0, y, np.inf).min(axis=1)
    top = y_min * (1 - 1e-12)
    grid = y_min[:, None] * (1.0 - _COARSE[None, :])
    rows = np.arange(R)
    for irls in (0, _IRLS, _IRLS):
        E, a, al, ok, k, obj = _grid_fits(u, y, col, n_cols, W, grid, irls)
        lo = grid[rows, np.maximum(k - 1, 0)]
        hi = grid[rows, np.minimum(k + 1, grid.shape[1] - 1)]
        last = (grid, k, obj)
        grid = np.minimum(lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, _FINE)[None, :], top[:, None])
    vertex = _vertex(*last)
    E2, a2, al2, ok2, _, obj2 = _grid_fits(u, y, col, n_cols, W, np.clip(vertex, 0.0, top)[:, None], _IRLS)
    better = ok2 & (obj2[:, 0] < last[2][rows, last[1]])
    return (np.where(better, E2, E), np.where(better[:, None], a2, a), np.where(better[:, None], al2, al),
            ok | ok2)


def _vertex(grid, k, obj):
    """Vertex of the parabola through the best grid point and its neighbours (the best point where none)."""
    rows = np.arange(grid.shape[0])
    i = np.clip(k, 1, grid.shape[1] - 2)
    x0, x1, x2 = grid[rows, i - 1], grid[rows, i], grid[rows, i + 1]
    f0, f1, f2 = obj[rows, i - 1], obj[rows, i], obj[rows, i + 1]
    with np.errstate(all="ignore"):
        num = (x1 - x0) ** 2 * (f1 - f2) - (x1 - x2) ** 2 * (f1 - f0)
        den = (x1 - x0) * (f1 - f2) - (x1 - x2) * (f1 - f0)
        v = x1 - 0.5 * num / den
    inside = np.isfinite(v) & (v >= np.minimum(x0, x2)) & (v <= np.maximum(x0, x2))
    return np.where(inside, v, grid[rows, k])


def _grid_fits(u, y, col, n_cols, W, grid, irls: int):
    """For every row r and candidate E = grid[r, k]: lines per column, reweighted `irls` times for
    the Huber objective; the best E of each row, its lines, whether finite, its index and all objectives."""
    onehot = np.eye(n_cols)[col]
    E = grid[:, :, None]
    w = W[:, None, :].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        gap = y[None, None, :] - E
        valid = (gap > 0) | (w == 0)
        z = np.log(np.where(gap > 0, gap, 1.0))
        base = np.where(gap > 0, w * (gap / y) ** 2, 0.0)  # line residual × gap/y ≈ the log-loss residual
        v = base
        for i in range(irls + 1):
            a, al = _lines(u, z, v, onehot)
            pred = E + np.exp(a @ onehot.T - (al @ onehot.T) * u)
            r = np.where(w > 0, np.log(pred) - np.log(y), 0.0)
            if i < irls:
                v = base * np.minimum(1.0, HUBER_DELTA / np.maximum(np.abs(r), 1e-300))
    h = np.where(np.abs(r) <= HUBER_DELTA, 0.5 * r * r, HUBER_DELTA * (np.abs(r) - 0.5 * HUBER_DELTA))
    obj = (h * w).sum(axis=-1) / w.sum(axis=-1)
    bad = ~np.all(valid & np.isfinite(r), axis=-1) | np.any((al < 0) | (al > ALPHA_MAX) | ~np.isfinite(al), axis=-1)
    obj = np.where(bad, np.inf, obj)
    k = np.argmin(obj, axis=1)
    rows = np.arange(grid.shape[0])
    ok = np.isfinite(obj[rows, k])
    return grid[rows, k], a[rows, k], al[rows, k], ok, k, obj


def _lines(u, z, v, onehot):
    """Weighted lines z = a − α·u per column (last axis of the sums): a, α of shape (..., n_cols)."""
    s0, su, suu = v @ onehot, (v * u) @ onehot, (v * u * u) @ onehot
    sz, suz = (v * z) @ onehot, (v * u * z) @ onehot
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (s0 * suz - su * sz) / (s0 * suu - su * su)
        a = (sz - slope * su) / s0
    return a, -slope


# ---- bootstrap --------------------------------------------------------------------------------------
def _bootstrap(u, y, col, mode, E_pin, c_ref, n, need, at, target, n_boot, seed):
    """Paired resamples over sizes → multiplier draws (R, at) and loss-gap draws (R,); failures."""
    if n_boot < 0:
        raise FitError(f"n_boot = {n_boot}: must be 0 or more")
    if n_boot == 0:
        return None, None, 0
    rng = np.random.default_rng(seed)
    idx = _draw_sizes(rng, n, need, int(n_boot))
    counts = np.zeros((idx.shape[0], n))
    np.add.at(counts, (np.arange(idx.shape[0])[:, None], idx), 1.0)
    W = np.hstack([counts, counts])  # the same sizes for both ladders: the pairing
    if mode == "separate":
        fa = _profile(u[:n], y[:n], np.zeros(n, np.int64), 1, counts)
        fb = _profile(u[n:], y[n:], np.zeros(n, np.int64), 1, counts)
        E = np.stack([fa[0], fb[0]], axis=1)
        a, al, ok = np.hstack([fa[1], fb[1]]), np.hstack([fa[2], fb[2]]), fa[3] & fb[3]
    else:
        E1, a, al, ok = _profile(u, y, col, 2, W, E_pin)
        E = np.stack([E1, E1], axis=1)
    ua = np.log(at / c_ref)[None, :]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        level_a = E[:, :1] + np.exp(a[:, :1] - al[:, :1] * ua)  # L_A at `at`
        gap = level_a - E[:, 1:]
        u_b = (a[:, 1:] - np.log(np.where(gap > 0, gap, 1.0))) / al[:, 1:]
        mult = np.where(gap > 0, np.exp(u_b - ua), np.inf)
        ut = np.log(target / c_ref)
        loss_gap = (E[:, 1] + np.exp(a[:, 1] - al[:, 1] * ut)) - (E[:, 0] + np.exp(a[:, 0] - al[:, 0] * ut))
    ok = ok & ~np.any(np.isnan(mult), axis=1)
    failed = int(n_boot - ok.sum())
    if ok.sum() < 2:
        more = "give more resamples (--bootstrap), or add rungs" if n_boot < 100 else "add rungs"
        raise FitError(f"the paired bootstrap over sizes left {int(ok.sum())} usable refits of {n_boot}; {more}")
    return mult[ok], loss_gap[ok], failed


def _inflation(mode: str, n: int) -> float:
    """sqrt(points / (points − parameters)): resamples of a few sizes spread less than new ladders would
    (the same correction as an unbiased residual variance); 2n points, 5 parameters with E shared, 6 with
    E per ladder, 4 with E pinned."""
    p = {"shared": 5, "separate": 6}.get(mode, 4)
    return float(np.sqrt(2 * n / max(2 * n - p, 1)))


def _inflate(mult: np.ndarray, gaps: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray]:
    """The draws spread k times as far from their median (the multiplier in log space)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logm = np.log(mult)
        finite = np.isfinite(logm)
        mid = np.array([np.median(col[ok]) if ok.any() else 0.0 for col, ok in zip(logm.T, finite.T)])
        out = np.where(finite, np.exp(mid + k * (logm - mid)), mult)
    g_mid = np.median(gaps)
    return out, g_mid + k * (gaps - g_mid)


def _draw_sizes(rng, n: int, need: int, n_boot: int, max_tries: int = 20) -> np.ndarray:
    """`n_boot` resamples of n size indices with replacement, each with at least `need` distinct."""
    out = np.empty((0, n), dtype=np.int64)
    for _ in range(max_tries):
        idx = rng.integers(0, n, (2 * (n_boot - out.shape[0]) + 8, n))
        distinct = (np.sort(idx, axis=1)[:, 1:] != np.sort(idx, axis=1)[:, :-1]).sum(axis=1) + 1
        out = np.vstack([out, idx[distinct >= need]])[:n_boot]
        if out.shape[0] == n_boot:
            return out
    raise FitError(f"could not draw resamples with {need} distinct sizes out of {n}; add rungs")


def _band(draws: np.ndarray, point: np.ndarray) -> Band:
    """Percentiles of the resampled values, widened where needed to hold the full fit's value: with few
    sizes the resamples leave out an end of the ladder and their spread can sit beside the estimate."""
    with np.errstate(invalid="ignore"):  # infinite draws (B never reaching A's loss) stay infinite
        q = np.quantile(draws, [0.5, 0.25, 0.75, 0.05, 0.95], axis=0)
        point = np.broadcast_to(point, q[0].shape)
        return Band(q[0], np.fmin(q[1], point), np.fmax(q[2], point), np.fmin(q[3], point), np.fmax(q[4], point))


# ---- warnings ---------------------------------------------------------------------------------------
def _outside_resamples(draws: np.ndarray, point: float, mode: str) -> list[str]:
    """A warning where the full fit's multiplier at the target lies outside the resamples' 50% range, which
    `_band` then stretches to hold it: the band's side there is the full fit, not a percentile (never on 30
    synthetic ladders of 5 noisy sizes; the published misfitting ladders with E separate, 10.8 against a
    resampled median of 5.1)."""
    with np.errstate(invalid="ignore"):
        lo90, lo50, mid, hi50, hi90 = np.quantile(draws, [0.05, 0.25, 0.5, 0.75, 0.95])
    # within 0.1%, which the 4 digits printed do not show: resamples of an exact law end where their fits stop
    # (1.4999 to 1.5000 against 1.5000000000000648), not outside
    slack = 1e-3 * abs(point)
    if not (np.isfinite(point) and np.isfinite(mid)) or lo50 - slack <= point <= hi50 + slack:
        return []
    which = "50% band is" if lo90 <= point <= hi90 else "50% and 90% bands are"
    return [f"the full fit's multiplier at the target ({point:.4g}) lies outside the resamples' 50% range "
            f"[{lo50:.4g}, {hi50:.4g}] (their median {mid:.4g}, 90% range [{lo90:.4g}, {hi90:.4g}]): the {which} "
            "stretched to hold it; the fit rests on rungs that resamples leave out, so read the multiplier "
            f"with care (add rungs{', or share E' if mode == 'separate' else ''})"]


LAW_MISS = 0.01
"""How far (relative) a ladder's fitted law may miss one of its rungs before it is warned of (with E pinned: that the
ladders do not bear the E out): several times the seed-to-seed spread of final losses (0.1–0.3% on public
ladders)."""


def _warnings(laws, mode, n, need, ca, cb, ya, yb, target, mult, failed, n_boot, ok_fit) -> list[str]:
    out = [] if ok_fit else ["the solver did not converge on the full fit"]
    if n == need:
        out.append(f"{n} sizes: every usable resample would hold all of them, so no band is given; add rungs"
                   + ("" if mode == "shared" else " or share E"))
    elif mode == "shared" and n < 5:  # benchmarks/compare_coverage.py: 0.81 with 4 sizes, 0.85-0.94 with 5 or more
        out.append(f"{n} sizes per ladder: on synthetic ladders the 90% band held the true multiplier about 80% "
                   "of the time with 4 sizes (85–94% with 5 or more); add rungs for a band to rely on")
    if mode == "separate" and n - 3 < 2:
        out.append(f"{n} sizes per ladder for E separate: too few runs left over the parameters to trust the band")
    if mode == "shared":
        out += checks.E_at_bound(laws[0].E, float(min(ya.min(), yb.min())), False)
    elif mode == "separate":
        for name, law, y in (("A", laws[0], ya), ("B", laws[1], yb)):
            out += [w.replace("E at", f"E_{name} at", 1) for w in checks.E_at_bound(law.E, float(y.min()), False)]
    if not np.isfinite(mult[-1]):
        out.append("ladder B never reaches A's loss at the target under the fitted laws (E_B above it)")
    misses = [(abs(law.predict(c) / y - 1), name, c, law.predict(c) / y - 1)
              for name, law, cs, ys in (("A", laws[0], ca, ya), ("B", laws[1], cb, yb)) for c, y in zip(cs, ys)]
    worst, name, c, signed = max(misses)
    if worst > LAW_MISS and mode == "pinned":  # a pinned E the ladders do not bear out: the laws bend to it
        out.append(f"with E pinned at {laws[0].E:.4g} the law misses ladder {name}'s rung at C = {c:.3g} by "
                   f"{signed:+.2%}: the ladders do not bear that E out, and the multiplier follows the bent law; "
                   "share E (the default) or pin another")
    elif worst > LAW_MISS:  # a rung off its ladder's trend: the multiplier at it is the laws', which it bends
        out.append(f"ladder {name}'s law misses its rung at C = {c:.3g} by {signed:+.2%} (predicted / actual − 1), "
                   f"more than {LAW_MISS:.0%}: the multiplier at each rung is the fitted laws', not the rungs' own "
                   "losses, so it does not show that rung; check the rung (`ladder check`) before reading the "
                   "multiplier")
    if n_boot and failed > 0.1 * n_boot:
        out.append(f"{failed} of {n_boot} resamples could not be refitted")
    if np.any(np.abs(np.log(cb / ca)) > np.log(1.5)):
        out.append("paired rungs (the i-th smallest of each ladder) differ in compute by more than 1.5×: the ladders "
                   "train other sizes or token counts; the multiplier compares their laws at equal compute, but the "
                   "bands' paired resamples draw those unlike rungs together; check the pairs")
    reach = target / max(ca.max(), cb.max())
    if reach > 1e3:
        out.append(f"the target is {reach:.3g}× the largest rung's compute: a long extrapolation")
    return out

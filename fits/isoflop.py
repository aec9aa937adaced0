"""IsoFLOP sweeps: each compute budget's least loss, for the endpoint law (Hoffmann et al.'s approach 2).

An isoFLOP sweep trains several model sizes at each of a few compute budgets. The endpoint law
L(C) = E + A·C^-α describes the least loss a budget can reach, so it is fitted to one point per
budget, not to every run: a budget's runs trace a valley in log N, and its floor is the vertex of a
parabola in log N through the budget's lowest run and its neighbours (up to two on each side). A
budget whose lowest run is the smallest or the largest model of the budget does not bracket its
optimum: its lowest run stands (an upper bound on the floor), and the minimum says so. A budget of
one or two model sizes is a run of a plain ladder: its lowest run stands. Where a budget holds several
runs of one size (within 1%: seeds, or a run the table gives the wrong budget), the size's best run
stands for it: the valley is the least loss each size reached.

A table of runs that does not give their budgets can still be a sweep, and its tokens say so
(`inferred_budgets`): at one budget D = C / f(N), with f the FLOPs per token, so one size's runs at
several budgets sit at the same ratios of D as another size's runs at those budgets, and at every
budget D falls as N grows. A plain ladder's grid (each size at a few token ratios) has the first
property but not the second: there D grows with N.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fits import checks
from fits.errors import FitError
from fits.runs import distinct

BUDGET_TOL = 0.01
"""Computes within 1% (relative) are one budget."""

SWEEP_SIZES = 3
"""A budget of at least this many model sizes is swept (its floor is a parabola's vertex)."""

LEVEL_TOL = 0.02
"""Budgets inferred from tokens: two runs of one size whose token counts' ratio is a ratio of budgets within 2%."""
ALIGN_WINDOW = 0.15
"""How far (e-folds) one size's FLOPs per token over N may part from its nearest neighbour's: the search for
where its runs sit among the budgets starts at D ∝ 1/N from that neighbour and looks this far either side."""
VALLEY_SLOPE = (-1.5, -0.5)
"""The range of d log D / d log N along an inferred budget: −1 where FLOPs per token grow as N, less steep where
the embeddings N counts weigh most at the small sizes."""
LONE_TOL = 0.1
"""A size with one run (or none that align) sits at the budget its neighbours' alignment puts within 10%."""
ON_VALLEYS = 2 / 3
"""The share of runs that must lie on the inferred valleys for the table to be taken for a sweep."""


@dataclass(frozen=True)
class BudgetMinimum:
    compute: float
    """The budget: its runs' median compute."""
    runs: int
    loss: float
    """The least loss the budget reaches."""
    n_params: float
    """The model size at that loss (the vertex, or the lowest run's)."""
    how: str
    """"vertex": a parabola in log N through the lowest run's size and its neighbours; "edge": the lowest
    run is the budget's smallest or largest size, so the sweep does not bracket the optimum; "run": fewer
    than `SWEEP_SIZES` sizes, so the lowest run stands; "flat": a parabola that does not open upwards, so
    the lowest run stands."""

    def record(self) -> dict:
        return {"compute": self.compute, "runs": self.runs, "loss": self.loss, "params": self.n_params, "how": self.how}


def budgets(compute, tol: float = BUDGET_TOL) -> np.ndarray:
    """Each run's budget index (0 for the smallest); computes within `tol` of a budget's first are one."""
    return _groups(checks.as_array("compute", compute), tol)


def _groups(x: np.ndarray, tol: float) -> np.ndarray:
    """Each value's group index, ascending: the group of the last of `fits.runs.distinct`'s values at or below it."""
    return np.searchsorted(distinct(x, tol), x, side="right") - 1


def is_sweep(compute, n_params, tol: float = BUDGET_TOL) -> bool:
    """Whether some budget holds `SWEEP_SIZES` model sizes or more (sizes within 1% are one)."""
    return swept_budgets(compute, n_params, tol) > 0


def swept_budgets(compute, n_params, tol: float = BUDGET_TOL) -> int:
    """How many budgets hold `SWEEP_SIZES` model sizes or more (sizes within 1% are one): the valleys a sweep traces."""
    return len(_valleys(*_by_budget(compute, n_params, tol)))


def swept_share(compute, n_params, tol: float = BUDGET_TOL) -> float:
    """The share of runs in budgets of `SWEEP_SIZES` model sizes or more: 1 for a sweep logged at its budgets, low
    where the computes only scatter around them (`inferred_budgets` may then read them from the tokens)."""
    label, n = _by_budget(compute, n_params, tol)
    return float(np.isin(label, _valleys(label, n)).mean()) if n.size else 0.0


def _by_budget(compute, n_params, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """(each run's budget index, N), checked."""
    c = checks.as_array("compute", compute)
    n = checks.as_array("n_params", n_params)
    checks.same_length(compute=c, n_params=n)
    return budgets(c, tol), n


def _valleys(label: np.ndarray, n: np.ndarray) -> list:
    """The budget labels (≥ 0) that hold `SWEEP_SIZES` model sizes or more."""
    return [b for b in np.unique(label[label >= 0]) if _sizes(n[label == b]) >= SWEEP_SIZES]


def budget_minima(compute, n_params, loss, tol: float = BUDGET_TOL) -> list[BudgetMinimum]:
    """One `BudgetMinimum` per budget, by increasing compute."""
    c = checks.as_array("compute", compute)
    n = checks.as_array("n_params", n_params)
    y = checks.as_array("loss", loss)
    checks.same_length(compute=c, n_params=n, loss=y)
    if not c.size:
        raise FitError("no runs: an isoFLOP sweep needs runs at two budgets or more")
    label = budgets(c, tol)
    return [_minimum(c[label == b], n[label == b], y[label == b]) for b in range(label.max() + 1)]


def inferred_budgets(n_params, tokens, min_budgets: int = 3) -> np.ndarray | None:
    """Each run's compute budget where the runs' (N, D) trace an isoFLOP sweep that the table does not label:
    `min_budgets` budgets or more of `SWEEP_SIZES` sizes or more, each with D falling as N grows, holding
    `ON_VALLEYS` of the runs; None where they do not. A budget's value is its runs' median 6·N·D; a run on no
    valley joins the valley nearest in 6·N·D.

    Where 6·N·D itself falls into such budgets (within 1%), they are those. Else (a table whose N or FLOPs per
    token are not 6·N's: embeddings counted, attention) each size's runs are placed among the budgets by the
    ratios of their token counts: from the size with the most distinct token counts outwards, each next size
    is shifted (in log D) to where most of its runs meet the budgets found so far, searching `ALIGN_WINDOW`
    around the shift D ∝ 1/N predicts from its nearest placed neighbour (so a pattern of budgets that repeats
    a decade up is not mistaken for it); its runs that meet none open new budgets."""
    N = checks.as_array("n_params", n_params)
    D = checks.as_array("tokens", tokens)
    checks.same_length(n_params=N, tokens=D)
    if not N.size:
        return None
    for label in (budgets(6 * N * D), _traced_levels(N, D)):
        if label is not None:
            value = _valley_budgets(N, D, label, min_budgets)
            if value is not None:
                return value
    return None


def _valley_budgets(N: np.ndarray, D: np.ndarray, label: np.ndarray, min_budgets: int) -> np.ndarray | None:
    """Each run's budget (its valley's median 6·N·D; a run on none, the nearest valley's) where the runs `label`
    puts on valleys (`SWEEP_SIZES` sizes or more, D falling as N grows) make `min_budgets` valleys or more and hold
    `ON_VALLEYS` of the runs; else None."""
    valleys = _valleys(label, N)
    on = np.isin(label, valleys)
    if len(valleys) < min_budgets or on.sum() < ON_VALLEYS * N.size or not all(
            _falls(N[label == v], D[label == v]) for v in valleys):
        return None
    c = np.log(6 * N * D)
    value = np.array([np.median(c[label == v]) for v in valleys])
    nearest = np.argmin(np.abs(c[:, None] - value[None, :]), axis=1)
    own = np.minimum(np.searchsorted(valleys, label), len(valleys) - 1)
    return np.exp(np.where(on, value[own], value[nearest]))


def _traced_levels(N: np.ndarray, D: np.ndarray) -> np.ndarray | None:
    """Each run's budget index (-1: none) as the ratios of each size's token counts place it (`inferred_budgets`);
    None where fewer than `SWEEP_SIZES` sizes have two token counts."""
    size = _groups(N, BUDGET_TOL)
    x, ln = np.log(D), np.log(N)
    runs = [np.flatnonzero(size == k) for k in range(size.max() + 1)]
    ln_k = np.array([np.median(ln[r]) for r in runs])
    counts = np.array([distinct(D[r], LEVEL_TOL).size for r in runs])
    if np.sum(counts >= 2) < SWEEP_SIZES:
        return None
    anchor = int(np.argmax(counts))
    shift = {anchor: 0.0}
    levels = list(np.log(distinct(D[runs[anchor]], LEVEL_TOL)))
    for k in _outwards(ln_k, anchor, counts >= 2):
        s = _placement(x[runs[k]], levels, _expected_shift(shift, ln_k, k))
        if s is None:
            continue
        shift[k] = s
        levels += [v for v in x[runs[k]] + s if _gap(v, levels) >= LEVEL_TOL]
    return _levels_of(x, runs, ln_k, shift, np.sort(levels))


def _outwards(ln_k: np.ndarray, anchor: int, usable: np.ndarray) -> list[int]:
    """The usable sizes other than `anchor`, nearest to it in log N first."""
    return [int(k) for k in np.argsort(np.abs(ln_k - ln_k[anchor]), kind="stable") if usable[k] and k != anchor]


def _expected_shift(shift: dict[int, float], ln_k: np.ndarray, k: int) -> float:
    """Size k's shift were D ∝ 1/N at fixed compute from its nearest placed neighbour."""
    near = min(shift, key=lambda a: abs(ln_k[a] - ln_k[k]))
    return shift[near] + ln_k[k] - ln_k[near]


def _gap(v: float, levels) -> float:
    return float(np.min(np.abs(np.asarray(levels) - v)))


def _placement(x: np.ndarray, levels: list[float], expected: float) -> float | None:
    """The shift of one size's log token counts that puts most of them on `levels` (ties: nearest `expected`),
    within `ALIGN_WINDOW` of it; None where no shift puts two there."""
    best = None
    for s in sorted({lv - xi for lv in levels for xi in x if abs(lv - xi - expected) < ALIGN_WINDOW}):
        key = (sum(_gap(xi + s, levels) < LEVEL_TOL for xi in x), -abs(s - expected))
        if best is None or key > best[0]:
            best = (key, s)
    return best[1] if best is not None and best[0][0] >= 2 else None


def _levels_of(x, runs, ln_k, shift, levels: np.ndarray) -> np.ndarray:
    """Each run's budget index among `levels` (-1: none): a placed size's within `LEVEL_TOL`; any other size's
    at its nearest placed neighbour's shift, within `LONE_TOL`."""
    label = np.full(x.size, -1)
    for k, r in enumerate(runs):
        s, tol = (shift[k], LEVEL_TOL) if k in shift else (_expected_shift(shift, ln_k, k), LONE_TOL)
        gap = np.abs(x[r, None] + s - levels[None, :])
        label[r] = np.where(gap.min(axis=1) < tol, gap.argmin(axis=1), -1)
    return label


def _falls(N: np.ndarray, D: np.ndarray) -> bool:
    """Whether D falls as N grows across one budget's sizes (a size's runs by their median), at a slope in log-log
    within `VALLEY_SLOPE`."""
    cls = _groups(N, BUDGET_TOL)
    n, d = (np.log([np.median(v[cls == k]) for k in range(cls.max() + 1)]) for v in (N, D))
    slope = np.polyfit(n, d, 1)[0]
    return bool(np.all(np.diff(d) < 0) and VALLEY_SLOPE[0] <= slope <= VALLEY_SLOPE[1])


@dataclass(frozen=True)
class OptimalSize:
    """N at a budget's least loss as a power law in compute, N_opt = N_ref·(C / C_ref)^exponent, through the
    budgets whose minimum is a vertex (Hoffmann et al.'s approach 2; 0.5 when N and D scale alike)."""

    exponent: float
    n_ref: float
    c_ref: float
    budgets: int

    def predict(self, compute) -> np.ndarray:
        return self.n_ref * (np.asarray(compute, dtype=np.float64) / self.c_ref) ** self.exponent


def optimal_size(minima: list[BudgetMinimum]) -> OptimalSize | None:
    """The power law of N at the least loss through the vertices; None with fewer than two vertices."""
    v = [m for m in minima if m.how == "vertex"]
    if len(v) < 2:
        return None
    x = np.log([m.compute for m in v])
    y = np.log([m.n_params for m in v])
    slope, icept = np.polyfit(x - x.mean(), y, 1)
    return OptimalSize(float(slope), float(np.exp(icept)), float(np.exp(x.mean())), len(v))


def _sizes(n: np.ndarray) -> int:
    """How many model sizes: sizes within 1% are one (seeds)."""
    return int(distinct(n, BUDGET_TOL).size)


def _minimum(c: np.ndarray, n: np.ndarray, y: np.ndarray) -> BudgetMinimum:
    """The budget's least loss: the vertex of the parabola in log N through the best run of the lowest run's
    size and of up to two sizes on each side, or the lowest run where that cannot be."""
    cls = _groups(n, BUDGET_TOL)
    best = np.array([np.flatnonzero(cls == k)[np.argmin(y[cls == k])] for k in range(cls.max() + 1)])
    n_s, y_s = n[best], y[best]
    i = int(np.argmin(y_s))
    budget, runs = float(np.median(c)), int(y.size)
    if n_s.size < SWEEP_SIZES:
        return BudgetMinimum(budget, runs, float(y_s[i]), float(n_s[i]), "run")
    if i in (0, n_s.size - 1):
        return BudgetMinimum(budget, runs, float(y_s[i]), float(n_s[i]), "edge")
    near = slice(max(i - 2, 0), i + 3)
    x, v = np.log(n_s[near]), y_s[near]
    coef = np.polyfit(x, v, 2)
    if not coef[0] > 0:
        return BudgetMinimum(budget, runs, float(y_s[i]), float(n_s[i]), "flat")
    top = float(np.clip(-coef[1] / (2 * coef[0]), x.min(), x.max()))
    return BudgetMinimum(budget, runs, float(np.polyval(coef, top)), float(np.exp(top)), "vertex")


__all__ = ["BUDGET_TOL", "BudgetMinimum", "OptimalSize", "SWEEP_SIZES", "budget_minima", "budgets",
           "inferred_budgets", "is_sweep", "optimal_size", "swept_share"]

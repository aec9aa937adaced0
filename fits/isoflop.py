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
    c = checks.as_array("compute", compute)
    n = checks.as_array("n_params", n_params)
    checks.same_length(compute=c, n_params=n)
    label = budgets(c, tol)
    return sum(_sizes(n[label == b]) >= SWEEP_SIZES for b in np.unique(label))


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


__all__ = ["BUDGET_TOL", "BudgetMinimum", "OptimalSize", "SWEEP_SIZES", "budget_minima", "budgets", "is_sweep",
           "optimal_size"]

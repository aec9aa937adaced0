"""IsoFLOP sweeps (`fits.isoflop`): each budget's least loss, on synthetic sweeps of a known surface."""

from __future__ import annotations

import numpy as np
import pytest

from fits import FitError, fit_endpoint
from fits.isoflop import budget_minima, budgets, is_sweep, optimal_size
from fits.synthetic import EPOCH_CHINCHILLA, isoflop_sweep, surface_optimum

LAW = EPOCH_CHINCHILLA
"""Epoch AI's replication of the Chinchilla surface."""


def true_minimum(C: float) -> tuple[float, float]:
    """(least loss, N there) of the surface along 6·N·D = C."""
    return surface_optimum(C, **LAW)


def sweep(budgets_=(1e18, 1e19, 1e20), spread=(1 / 8, 8), sizes=9, noise=0.0, seed=0):
    """A sweep: at each budget, `sizes` models log-spaced around the optimum over `spread`."""
    return isoflop_sweep(np.random.default_rng(seed), budgets_, LAW, spread, sizes, noise)


def test_a_budgets_least_loss_is_the_vertex_of_its_valley():
    C, N, _, y = sweep()
    minima = budget_minima(C, N, y)
    assert [m.how for m in minima] == ["vertex"] * 3 and [m.runs for m in minima] == [9, 9, 9]
    for m, c in zip(minima, (1e18, 1e19, 1e20)):
        loss, n_opt = true_minimum(c)
        assert m.compute == pytest.approx(c, rel=0.005)
        assert m.loss == pytest.approx(loss, rel=5e-4)  # the lowest run alone sits up to a grid step off
        assert m.n_params == pytest.approx(n_opt, rel=0.15)
    # a second, worse run of every size (another seed, a run given the wrong budget): each size's best stands
    worse = budget_minima(np.r_[C, C], np.r_[N, N], np.r_[y, y * 1.02])
    for m, w in zip(minima, worse):
        assert (w.how, w.runs, w.loss, w.n_params) == (m.how, 2 * m.runs, m.loss, m.n_params)


def test_the_endpoint_law_on_the_minima_predicts_a_larger_budgets_least_loss():
    """Fitted on every run the law follows each budget's average over its valley and lands high; on the
    budgets' minima it predicts the least loss 10× beyond them."""
    C, N, _, y = sweep(budgets_=(1e18, 3e18, 1e19, 3e19, 1e20), noise=0.002, seed=3)
    minima = budget_minima(C, N, y)
    fit = fit_endpoint([m.compute for m in minima], [m.loss for m in minima])
    truth = true_minimum(1e21)[0]
    assert float(fit.predict(1e21)) == pytest.approx(truth, rel=0.005)
    every_run = fit_endpoint(C, y)
    assert float(every_run.predict(1e21)) / truth - 1 > 0.008


def test_the_optimal_size_follows_the_budgets_vertices():
    """N at the least loss grows as C^(β/(α+β)) on the surface (0.513 for these exponents)."""
    C, N, _, y = sweep(budgets_=(1e18, 3e18, 1e19, 3e19, 1e20), noise=0.002, seed=3)
    size = optimal_size(budget_minima(C, N, y))
    assert size.budgets == 5
    assert size.exponent == pytest.approx(LAW["beta"] / (LAW["alpha"] + LAW["beta"]), abs=0.02)
    assert float(size.predict(1e21)) == pytest.approx(true_minimum(1e21)[1], rel=0.1)
    # an edge or a plain run says nothing of where the valley's floor sits
    C1, N1, _, y1 = sweep(budgets_=(1e18,), noise=0.0)
    assert optimal_size(budget_minima(np.r_[C1, 1e19], np.r_[N1, 1e9], np.r_[y1, 2.9])) is None


def test_a_sweep_that_does_not_bracket_its_optimum_keeps_its_lowest_run():
    C, N, _, y = sweep(budgets_=(1e19,), spread=(1 / 30, 1 / 3), sizes=5)  # every size below the optimum
    [m] = budget_minima(C, N, y)
    assert m.how == "edge" and m.loss == pytest.approx(y.min()) and m.n_params == pytest.approx(N.max())
    assert m.loss > true_minimum(1e19)[0]  # an upper bound on the budget's floor


def test_budgets_of_one_or_two_sizes_are_plain_runs():
    C = np.array([1e18, 1e18, 1e19, 1e20])
    N = np.array([1e8, 2e8, 3e8, 1e9])
    y = np.array([3.2, 3.1, 2.9, 2.7])
    assert budgets(C).tolist() == [0, 0, 1, 2]
    assert not is_sweep(C, N)  # one run per compute, or two sizes: a plain ladder
    minima = budget_minima(C, N, y)
    assert [(m.how, m.loss, m.n_params) for m in minima] == [("run", 3.1, 2e8), ("run", 2.9, 3e8), ("run", 2.7, 1e9)]
    assert budgets([1e18, 1.009e18, 1.02e18]).tolist() == [0, 0, 1]  # within 1% of a budget's first
    # three sizes at one budget make a sweep; three seeds of one size do not
    assert is_sweep([1e18] * 3, [1e8, 2e8, 4e8]) and not is_sweep([1e18] * 3, [1e8] * 3)
    with pytest.raises(FitError, match="no runs"):
        budget_minima([], [], [])

"""Budgets a table of runs does not give, read from the runs' tokens (`fits.isoflop.inferred_budgets`): sweeps
whose N or FLOPs per token are not 6·N's, and ladders that are not sweeps."""

from __future__ import annotations

import numpy as np
import pytest

from fits.isoflop import budgets, inferred_budgets
from fits.surfacechoice import choose_surface
from fits.synthetic import EPOCH_CHINCHILLA, isoflop_sweep, surface_losses

REPEATING = np.array([6e17, 1e18, 3e18, 6e18, 1e19, 3e19, 6e19, 1e20])
"""Budgets whose ratios (3, 2, 5/3) repeat a decade up: a size seen only at the upper ones fits both decades."""
SIZES = np.geomspace(1.5e8, 1.2e10, 22)


def flops_ratio(N):
    """6·N·D over the budget, as where N counts the embeddings and the budget's FLOPs per token do not: 4 at the
    smallest size, 2.8 at the largest (the shape of a public sweep's table)."""
    return 2.8 + 1.2 * (SIZES[0] / N) ** 0.6


def embedded_sweep(budgets=REPEATING, per_budget=9, rng=None):
    """At each budget, the `per_budget` sizes of `SIZES` nearest 20 tokens per parameter, D = ratio · C / 6N, with
    tokens rounded to a batch of 2^20. Returns (N, D, index of each run's budget)."""
    N, D, which = [], [], []
    for i, c in enumerate(budgets):
        d = flops_ratio(SIZES) * c / (6 * SIZES)
        near = np.argsort(np.abs(np.log(d / SIZES / 20)))[:per_budget]
        N += list(SIZES[near])
        D += list(np.round(d[near] / 2**20) * 2**20)
        which += [i] * near.size
    return np.array(N), np.array(D), np.array(which)


def same_partition(a, b) -> bool:
    """Whether two labellings group the runs alike."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_a_sweep_whose_n_counts_embeddings_gets_its_budgets_back():
    N, D, which = embedded_sweep()
    assert not same_partition(budgets(6 * N * D), which)  # 6·N·D alone does not group them
    got = inferred_budgets(N, D)
    assert got is not None and same_partition(got, which)
    for i in range(REPEATING.size):  # each budget named by its runs' median 6·N·D
        assert got[which == i][0] == pytest.approx(np.median((6 * N * D)[which == i]))
    # shuffled rows, and a run off every valley (a size trained once at another compute) joins the nearest
    order = np.random.default_rng(0).permutation(N.size)
    N2, D2, which2 = np.r_[N[order], 7e8], np.r_[D[order], 3e9], np.r_[which[order], -1]
    got2 = inferred_budgets(N2, D2)
    assert got2 is not None and same_partition(got2[:-1], which2[:-1])
    assert got2[-1] == got2[np.argmin(np.abs(np.log(got2[:-1] / (6 * 7e8 * 3e9))))]


def test_a_sweep_logged_at_6nd_is_grouped_by_its_compute():
    C, N, D, _ = isoflop_sweep(np.random.default_rng(1), np.geomspace(1e18, 3e19, 5), EPOCH_CHINCHILLA)
    got = inferred_budgets(N, D)  # no size repeats across budgets, so only the computes can say
    assert got is not None and same_partition(got, np.round(np.log10(C), 1))
    np.testing.assert_allclose(np.unique(got), np.geomspace(1e18, 3e19, 5), rtol=0.005)


@pytest.mark.parametrize("case", ["token ratios", "one token count", "scatter", "two budgets"])
def test_what_is_not_a_sweep_gets_no_budgets(case):
    rng = np.random.default_rng(2)
    if case == "token ratios":  # a ladder's grid: every size at five token ratios, so D grows with N
        N = np.repeat(SIZES[::3], 5)
        D = N * np.tile([5.0, 10.0, 20.0, 40.0, 80.0], SIZES[::3].size)
    elif case == "one token count":  # sizes trained at the same few token counts
        N = np.repeat(SIZES[::2], 3)
        D = np.tile([1e10, 2e10, 4e10], SIZES[::2].size)
    elif case == "scatter":  # runs read off a figure: no two at one budget's ratios
        N = np.exp(rng.uniform(np.log(1e8), np.log(1e10), 120))
        D = N * np.exp(rng.uniform(np.log(2), np.log(200), 120))
    else:
        N, D, which = embedded_sweep()
        N, D = N[which < 2], D[which < 2]
    assert inferred_budgets(N, D) is None


def test_the_surface_backtests_a_sweep_given_without_budgets_as_one_given_them():
    N, D, which = embedded_sweep(REPEATING[2:])
    y = surface_losses(np.random.default_rng(3), N, D, **EPOCH_CHINCHILLA, noise=0.002)
    given = choose_surface(N, D, y, budget=REPEATING[2:][which])
    traced = choose_surface(N, D, y)
    assert traced.form == given.form and [t.by for t in traced.trials] == [t.by for t in given.trials]
    assert all(t.by == "budget" for t in traced.trials) and {t.form for t in traced.trials} == {"free", "shared", "kaplan"}
    for a, b in zip(traced.trials, given.trials):
        np.testing.assert_allclose(a.errors, b.errors)
    assert "tokens trace" in traced.why and "tokens trace" not in given.why
    by_size = choose_surface(N, D, y, infer_budgets=False)
    assert all(t.by == "size" for t in by_size.trials)


def test_the_choice_says_which_budgets_it_held_out_and_where_they_came_from():
    N, D, which = embedded_sweep(REPEATING[2:])
    y = surface_losses(np.random.default_rng(4), N, D, **EPOCH_CHINCHILLA, noise=0.002)
    traced = choose_surface(N, D, y).budget_record()
    assert traced["traced"] and [b["runs"] for b in traced["budgets"]] == list(np.bincount(which))
    assert [b["sizes"] for b in traced["budgets"]] == list(np.bincount(which))  # one run of each size per budget
    jittered = REPEATING[2:][which] * (1 + 0.004 * np.cos(np.arange(N.size)))  # logged within 0.4% of the budget
    given = choose_surface(N, D, y, budget=jittered).budget_record()
    assert not given["traced"] and [b["runs"] for b in given["budgets"]] == list(np.bincount(which))
    np.testing.assert_allclose([b["budget"] for b in given["budgets"]], REPEATING[2:], rtol=0.005)
    assert choose_surface(N, D, y, infer_budgets=False).budget_record() is None

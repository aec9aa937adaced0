"""The Kaplan-Chinchilla surface E + (A/N^α + B/D^β)^γ, and an isoFLOP sweep's backtest by budget
(`fits.surface`, `fits.surfacechoice`): on arrays drawn from known surfaces."""

from __future__ import annotations

import numpy as np
import pytest

from fits import FitError, bootstrap, fit_surface
from fits.frontier import least_loss
from fits.surfacechoice import choose_surface
from fits.synthetic import EPOCH_CHINCHILLA, isoflop_sweep, surface_optimum

GAMMA = 0.5
KAPLAN = dict(E=1.82, A=482.0 ** (1 / GAMMA), B=2085.0 ** (1 / GAMMA), alpha=0.348 / GAMMA, beta=0.366 / GAMMA,
              gamma=GAMMA)
"""Epoch AI's Chinchilla terms, composed with γ = 1/2: the same exponents far from the optimum (A/N^α alone is
482/N^0.348), a budget's valleys twice as curved for the same fall of the least loss with compute."""
BUDGETS = np.geomspace(1e18, 3e19, 5)
TARGETS = (1e20, 3e20)


def sweep(law: dict, seed: int, noise: float = 0.002):
    """Nine sizes per budget around each budget's optimum; (N, D, loss, budget) and the optima at `TARGETS`."""
    _, N, D, y = isoflop_sweep(np.random.default_rng(seed), BUDGETS, law, noise=noise)
    optima = [surface_optimum(c, **law) for c in TARGETS]
    Nt = np.array([n for _, n in optima])
    return N, D, y, np.repeat(BUDGETS, 9), Nt, np.array(TARGETS) / (6 * Nt), np.array([loss for loss, _ in optima])


def test_recovers_an_exact_kaplan_surface_and_nests_the_additive_one():
    N, D, y, *_ = sweep(KAPLAN, seed=0, noise=0.0)
    fit = fit_surface(N, D, y, kaplan=True)
    assert fit.converged and fit.gamma_free and fit.n_params == 6 and "^γ" in fit.form
    for k, v in KAPLAN.items():
        assert fit.params[k] == pytest.approx(v, rel=1e-3), k
    N, D, y, *_ = sweep(EPOCH_CHINCHILLA, seed=0, noise=0.0)
    nested = fit_surface(N, D, y, kaplan=True)
    assert nested.gamma == pytest.approx(1.0, abs=1e-3)  # γ = 1 is the Chinchilla surface
    np.testing.assert_allclose(nested.predict(7e10, 1.4e12), fit_surface(N, D, y).predict(7e10, 1.4e12), rtol=1e-4)
    with pytest.raises(FitError, match="own exponents"):
        fit_surface(N, D, y, kaplan=True, shared_exponent=True)


def test_its_least_loss_at_a_compute_is_its_minimum_over_sizes():
    N, D, y, *_ = sweep(KAPLAN, seed=1)
    fit = fit_surface(N, D, y, kaplan=True)
    for c in (1e19, 1e21):
        n = np.geomspace(1e5, 1e13, 20001)
        assert float(least_loss(fit, c)) == pytest.approx(float(np.min(fit.predict(n, c / (6 * n)))), rel=1e-7)


def test_its_bootstrap_refits_keep_the_form_and_its_band_holds_the_truth():
    N, D, y, _, Nt, Dt, yt = sweep(KAPLAN, seed=2)
    fit = fit_surface(N, D, y, kaplan=True)
    ens = bootstrap(fit, 40, seed=0)
    assert ens.refits and all(m.gamma_free for m in ens.refits)
    band = fit.band(Nt, Dt, ens)
    assert np.all((band.lo90 <= yt) & (yt <= band.hi90))
    assert np.all(band.hi90 - band.lo90 < 0.05 * yt)  # and says something: within ±2.5%


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_sweep_given_its_budgets_holds_out_the_largest_and_finds_the_form_it_follows(seed):
    """Held out by size, the sweep's largest models (the least-trained runs of each budget) are predicted well by
    every form, and the additive form is chosen and misses the larger budgets' optima by 3–6%; held out by
    budget, the composed form is chosen and lands within 0.5%."""
    N, D, y, budget, Nt, Dt, yt = sweep(KAPLAN, seed)
    by_size = choose_surface(N, D, y, infer_budgets=False)
    assert {t.form for t in by_size.trials} == {"free", "shared"} and all(t.by == "size" for t in by_size.trials)
    assert np.all(by_size.fit.predict(Nt, Dt) / yt - 1 > 0.02)
    ch = choose_surface(N, D, y, budget=budget)
    assert ch.form == "kaplan" and {t.form for t in ch.trials} == {"free", "shared", "kaplan"}
    held = sorted({t.held_out for t in ch.trials}, key=len)  # five budgets: the largest, then the two largest
    assert held == [pytest.approx(tuple(BUDGETS[-1:])), pytest.approx(tuple(BUDGETS[-2:]))]
    assert all(r["held_out_budgets"] for r in ch.table())
    np.testing.assert_allclose(ch.fit.predict(Nt, Dt), yt, rtol=0.005)
    band = ch.band(Nt, Dt)
    assert np.all((band.lo90 <= yt) & (yt <= band.hi90))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_chinchilla_sweep_given_its_budgets_loses_nothing(seed):
    N, D, y, budget, Nt, Dt, yt = sweep(EPOCH_CHINCHILLA, seed)
    ch = choose_surface(N, D, y, budget=budget)
    np.testing.assert_allclose(ch.fit.predict(Nt, Dt), yt, rtol=0.005)


def test_budgets_must_be_one_per_run_and_a_kaplan_fit_may_be_named():
    N, D, y, budget, *_ = sweep(KAPLAN, seed=3)
    with pytest.raises(FitError, match="budget"):
        choose_surface(N, D, y, budget=budget[:-1])
    named = choose_surface(N, D, y, form="kaplan")
    assert named.form == "kaplan" and named.fit.gamma_free and len(named.others) == 2
    with pytest.raises(FitError, match="auto, free, shared or kaplan"):
        choose_surface(N, D, y, form="both")


def test_budgets_that_trace_no_valleys_are_not_a_sweep():
    """A ladder that labels each run's budget (one or two sizes per budget) has no valleys to pin γ: it is
    backtested by size among the two forms, and told why."""
    N = np.repeat(np.geomspace(5e7, 5e9, 6), 2)
    D = N * np.tile([10.0, 40.0], 6)
    from fits.synthetic import surface_losses

    y = surface_losses(np.random.default_rng(4), N, D, **EPOCH_CHINCHILLA, noise=0.002)
    labelled = choose_surface(N, D, y, budget=6 * N * D)
    assert {t.form for t in labelled.trials} == {"free", "shared"} and all(t.by == "size" for t in labelled.trials)
    assert any("not an isoFLOP sweep" in w for w in labelled.warnings)
    plain = choose_surface(N, D, y)
    assert labelled.form == plain.form and labelled.fit.params == plain.fit.params

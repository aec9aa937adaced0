"""The least loss at each compute through the runs' lower envelope (`fits.frontier`), and the surface's band
that holds it (`fits.surfacechoice`): on arrays."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fits import fit_surface
from fits.frontier import envelope_law, least_loss, lower_envelope, scaled_by_envelope
from fits.surfacechoice import choose_surface
from fits.synthetic import surface_losses

TRUTH = dict(E=1.8, A=480.0, B=2100.0, alpha=0.34, beta=0.28)


def sweep(budgets, tilt: float, seed: int, noise: float = 0.002):
    """An isoFLOP sweep: nine sizes per budget around 0.1·sqrt(C/6), losses from the surface times
    (C / 1e18)^−tilt (tilt > 0: the least loss falls faster with compute than the valleys' shape implies)."""
    n = np.concatenate([0.1 * np.sqrt(c / 6) * np.geomspace(1 / 8, 8, 9) for c in budgets])
    C = np.repeat(np.asarray(budgets, dtype=np.float64), 9)
    D = C / (6 * n)
    y = surface_losses(np.random.default_rng(seed), n, D, noise=noise, **TRUTH) * (C / 1e18) ** -tilt
    return n, D, y


def test_the_lower_envelope_is_each_budgets_best_run_falling_with_compute():
    N, D, y = sweep(np.geomspace(1e18, 3e19, 5), 0.0, seed=0, noise=0.0)
    C = 6 * N * D
    idx = lower_envelope(C, y)
    assert np.all(np.diff(C[idx]) > 0) and np.all(np.diff(y[idx]) < 0)
    assert idx.size >= 3
    for i in idx:  # every run on it is the least loss of its budget
        same = np.isclose(C, C[i], rtol=1e-6)
        assert y[i] == y[same].min()
    # a run above the others' chord is not on it; one below every run is
    assert lower_envelope([1.0, 2.0, 4.0], [3.0, 2.9, 2.0]).tolist() == [0, 2]
    assert lower_envelope([1.0, 2.0, 4.0], [3.0, 2.0, 1.9]).tolist() == [0, 1, 2]
    assert lower_envelope([1.0, 2.0, 4.0], [3.0, 2.0, 2.5]).tolist() == [0, 1]  # up to the lowest loss


def test_least_loss_is_the_surfaces_minimum_over_sizes_at_a_compute():
    N, D, y = sweep(np.geomspace(1e18, 3e19, 5), 0.0, seed=1)
    fit = fit_surface(N, D, y)
    for c in (1e19, 1e21):
        n = np.geomspace(1e5, 1e13, 20001)
        assert float(least_loss(fit, c)) == pytest.approx(float(np.min(fit.predict(n, c / (6 * n)))), rel=1e-7)
    vanished = dataclasses.replace(fit, b=-np.inf)  # B = 0: more data always helps, no least loss at a size
    assert np.isnan(least_loss(vanished, 1e20))
    assert np.all(np.isnan(scaled_by_envelope(fit, None, N[:2], D[:2])))


def test_runs_that_follow_the_surface_leave_its_band_as_it_was():
    N, D, y = sweep(np.geomspace(1e18, 3e19, 5), 0.0, seed=2)
    Nt, Dt, _ = sweep([1e20, 3e20], 0.0, seed=3, noise=0.0)
    ch = choose_surface(N, D, y)
    assert ch.envelope is not None and ch.envelope_runs >= 3
    scaled = scaled_by_envelope(ch.fit, ch.envelope, Nt, Dt)
    np.testing.assert_allclose(scaled, ch.fit.predict(Nt, Dt), rtol=0.01)  # the two frontiers agree within 1%
    law, idx = envelope_law(N, D, y)
    assert law.E == pytest.approx(ch.envelope.E) and idx.size == ch.envelope_runs


def test_a_frontier_the_surface_cannot_follow_is_held_by_the_band():
    """Losses whose least value falls faster with compute than the surface's valleys imply: held out by size, the
    surface misses the larger budgets (low, here), and its band holds them only with the envelope's frontier
    beside it. Held out by the budgets the runs' tokens trace (the default), the composed form follows them."""
    with_env, without, width = [], [], []
    for seed in range(3):
        N, D, y = sweep(np.geomspace(1e18, 3e19, 5), 0.01, seed=seed)
        Nt, Dt, yt = sweep([1e20, 3e20], 0.01, seed=seed + 100, noise=0.0)
        traced = choose_surface(N, D, y)
        assert traced.form == "kaplan" and np.max(np.abs(traced.fit.predict(Nt, Dt) / yt - 1)) < 0.01
        ch = choose_surface(N, D, y, infer_budgets=False)
        assert np.mean(ch.fit.predict(Nt, Dt) / yt - 1) < -0.008  # the surface misses by about 1% or more
        b, b0 = ch.band(Nt, Dt), dataclasses.replace(ch, envelope=None).band(Nt, Dt)
        with_env.append((b.lo90 <= yt) & (yt <= b.hi90))
        without.append((b0.lo90 <= yt) & (yt <= b0.hi90))
        width.append(np.mean((b.hi90 - b.lo90) / (b0.hi90 - b0.lo90)))
    assert np.mean(np.concatenate(without)) < 0.8 <= 0.9 <= np.mean(np.concatenate(with_env))
    assert max(width) < 1.6  # wider where the frontiers part, not unbounded

"""Two ladders compared as a compute multiplier: known multipliers recovered, bands that cover them."""

from __future__ import annotations

import numpy as np
import pytest

from fits.compare import _profile, compare_ladders
from fits.errors import FitError
from fits.powerlaw import fit_offset_power, objective_at

E_TRUE, A_TRUE, ALPHA = 1.8, 400.0, 0.15


def ladders(n: int, m: float, noise: float, seed: int, E_b: float = E_TRUE):
    """A: L = E + A·C^−α; B: A's law at C/m (B needs m× the compute), each with relative noise."""
    rng = np.random.default_rng(seed)
    c = np.geomspace(1e17, 1e17 * 4 ** (n - 1), n)
    la = E_TRUE + A_TRUE * c**-ALPHA
    lb = E_b + A_TRUE * (c / m) ** -ALPHA
    return c, la * (1 + noise * rng.standard_normal(n)), c.copy(), lb * (1 + noise * rng.standard_normal(n))


@pytest.mark.parametrize("E", ["shared", "separate", E_TRUE])
@pytest.mark.parametrize("m", [0.6, 1.0, 2.5])
def test_exact_ladders_give_the_known_multiplier_everywhere(E, m):
    ca, ya, cb, yb = ladders(6, m, 0.0, 0)
    r = compare_ladders(ca, ya, cb, yb, target=ca.max() * 100, E=E, n_boot=50)
    np.testing.assert_allclose(r.multiplier, m, rtol=1e-3)
    np.testing.assert_allclose(r.band.median, m, rtol=1e-3)
    truth_gap = A_TRUE * (r.target / m) ** -ALPHA - A_TRUE * r.target**-ALPHA
    assert r.loss_gap == pytest.approx(truth_gap, abs=1e-4)
    assert r.E_mode == ("pinned" if isinstance(E, float) else E)
    assert r.at[-1] == r.target and r.at.size == 7


def test_rungs_are_paired_by_rank_of_compute():
    ca, ya, cb, yb = ladders(5, 1.7, 0.0, 0)
    order = np.array([3, 0, 4, 1, 2])
    r = compare_ladders(ca[order], ya[order], cb[::-1], yb[::-1], target=1e22, n_boot=20)
    np.testing.assert_allclose(r.multiplier, 1.7, rtol=1e-3)
    np.testing.assert_array_equal(r.compute_a, ca)


def test_band_covers_the_true_multiplier_about_nine_times_in_ten():
    m, seeds, hits90, hits50, estimates = 1.3, 200, 0, 0, []
    for seed in range(seeds):
        ca, ya, cb, yb = ladders(6, m, 0.003, seed)
        r = compare_ladders(ca, ya, cb, yb, target=ca.max() * 10, n_boot=200, seed=seed)
        b = r.band
        hits90 += b.lo90[-1] <= m <= b.hi90[-1]
        hits50 += b.lo50[-1] <= m <= b.hi50[-1]
        estimates.append(r.multiplier_target)
    assert 0.80 <= hits90 / seeds <= 0.99
    assert 0.35 <= hits50 / seeds <= 0.70
    assert np.median(estimates) == pytest.approx(m, rel=0.03)


def test_a_ladder_against_itself_has_multiplier_one_inside_its_band():
    ca, ya, _, _ = ladders(5, 1.0, 0.004, 3)
    r = compare_ladders(ca, ya, ca, ya, target=ca.max() * 30, n_boot=300)
    np.testing.assert_allclose(r.multiplier, 1.0, rtol=1e-9)
    assert np.all(r.band.lo90 <= 1.0) and np.all(r.band.hi90 >= 1.0)
    assert r.loss_gap == pytest.approx(0.0, abs=1e-9 * r.loss_target_a)  # to the solver's precision, as the multiplier


def test_two_noisy_ladders_with_the_same_law_have_one_inside_the_band():
    ca, ya, cb, yb = ladders(6, 1.0, 0.003, 11)
    r = compare_ladders(ca, ya, cb, yb, target=ca.max() * 10, n_boot=400)
    assert r.band.lo90[-1] <= 1.0 <= r.band.hi90[-1]
    assert r.loss_gap_band.lo90[0] <= 0.0 <= r.loss_gap_band.hi90[0]


def test_resample_fits_reach_the_full_fits_objective():
    ca, ya, cb, yb = ladders(6, 1.3, 0.003, 5)
    u = np.log(np.concatenate([ca, cb]) / 1e18)
    y, col = np.concatenate([ya, yb]), np.repeat([0, 1], 6)
    full = fit_offset_power(u, y, col, 2)
    E, a, alpha, ok = _profile(u, y, col, 2, np.ones((1, 12)))
    assert ok[0]
    assert objective_at(u, y, col, np.ones(12), E[0], a[0], alpha[0]) <= full.objective * 1.01
    np.testing.assert_allclose(alpha[0], full.alpha, rtol=0.05)


def test_b_that_never_reaches_as_loss_has_an_infinite_multiplier():
    ca, ya, cb, yb = ladders(6, 1.0, 0.0, 0, E_b=2.3)
    r = compare_ladders(ca, ya, cb, yb, target=ca.max() * 1e3, E="separate", n_boot=50)
    assert r.law_b.E == pytest.approx(2.3, rel=1e-3)
    assert np.isinf(r.multiplier_target)
    assert any("never reaches" in w for w in r.warnings)


def test_three_rungs_fit_but_give_no_band_a_resample_cannot_vary():
    ca, ya, cb, yb = ladders(3, 1.5, 0.002, 0)
    r = compare_ladders(ca, ya, cb, yb, target=1e21, n_boot=50)
    assert np.isfinite(r.multiplier_target)
    assert any("so no band is given" in w for w in r.warnings)
    assert r.n_boot == 0 and r.no_bands.startswith("3 sizes, the fewest E shared needs")  # not a band of no width
    assert "(no band: 3 sizes, the fewest E shared needs" in r.summary()
    separate = compare_ladders(ca, ya, cb, yb, target=1e21, E="separate", n_boot=50)  # as few sizes as it needs
    assert separate.n_boot == 0 and separate.no_bands.startswith("3 sizes, the fewest E separate needs")
    four = compare_ladders(*ladders(4, 1.5, 0.002, 0), target=1e21, n_boot=50)
    assert four.n_boot == 50 and not four.no_bands and four.band.hi90[-1] > four.band.lo90[-1]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda ca, ya, cb, yb: (ca, ya, cb[:-1], yb[:-1]), "differ in rungs"),
        (lambda ca, ya, cb, yb: (ca[:2], ya[:2], cb[:2], yb[:2]), "at least 3 sizes"),
        (lambda ca, ya, cb, yb: (ca, ya, cb, -yb), "positive"),
        (lambda ca, ya, cb, yb: (np.r_[ca[:-1], ca[0]], ya, cb, yb), "same compute"),
    ],
)
def test_bad_input_says_what_is_wrong(change, message):
    with pytest.raises(FitError, match=message):
        compare_ladders(*change(*ladders(5, 1.2, 0.0, 0)), target=1e21, n_boot=10)


@pytest.mark.parametrize("E, message", [("free", "shared"), (5.0, "pinned E")])
def test_bad_E_says_what_to_give(E, message):
    with pytest.raises(FitError, match=message):
        compare_ladders(*ladders(5, 1.2, 0.0, 0), target=1e21, E=E, n_boot=10)


def test_a_pinned_E_the_ladders_do_not_bear_out_is_warned_of_and_the_true_one_is_not():
    ca, ya, cb, yb = ladders(6, 2.0, 0.0, 0)
    right = compare_ladders(ca, ya, cb, yb, target=ca.max() * 10, E=E_TRUE, n_boot=0)
    assert not [w for w in right.warnings if "E pinned" in w]
    wrong = compare_ladders(ca, ya, cb, yb, target=ca.max() * 10, E=0.99 * min(ya.min(), yb.min()), n_boot=0)
    (said,) = [w for w in wrong.warnings if "E pinned" in w]
    misses = [(abs(float(law.predict(c)) / v - 1), name, c, float(law.predict(c)) / v - 1)
              for name, law, ys in (("A", wrong.law_a, ya), ("B", wrong.law_b, yb)) for c, v in zip(ca, ys)]
    worst, name, c, signed = max(misses)
    assert worst > 0.01 and said.startswith(f"with E pinned at {wrong.law_a.E:.4g} the law misses ladder {name}'s rung "
                                            f"at C = {c:.3g} by {signed:+.2%}: the ladders do not bear that E out")


def test_a_band_stretched_to_hold_the_full_fit_is_said_and_a_band_that_holds_it_is_not():
    from fits.compare import _outside_resamples

    draws = np.random.default_rng(0).lognormal(np.log(5.0), 0.5, 1000)  # resampled multipliers about 5
    assert _outside_resamples(draws, 5.2, "shared") == []
    (inside_90,) = _outside_resamples(draws, 8.0, "shared")  # above the 75th percentile (7.0), below the 95th (11.4)
    assert inside_90.startswith("the full fit's multiplier at the target (8) lies outside the resamples' 50% range")
    assert "the 50% band is stretched to hold it" in inside_90 and inside_90.endswith("(add rungs)")
    (beyond,) = _outside_resamples(draws, 40.0, "separate")
    assert "the 50% and 90% bands are stretched" in beyond and beyond.endswith("(add rungs, or share E)")
    assert _outside_resamples(np.full(10, np.inf), 3.0, "shared") == []  # B never reaching A's loss: no percentile
    for seed in range(5):  # ordinary noisy ladders: the full fit sits among its resamples
        r = compare_ladders(*ladders(5, 1.5, 0.002, seed), target=1e20, n_boot=200, seed=seed)
        assert not any("stretched" in w for w in r.warnings)

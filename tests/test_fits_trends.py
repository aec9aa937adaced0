"""`fits.trends`: trends across sizes recovered from synthetic runs, calibrated bands, the
leave-one-out check and the spike counter."""

from __future__ import annotations

import numpy as np
import pytest

from fits.errors import FitError
from fits.trends import count_spikes, fit_rate_trend, fit_trend, leave_one_out, smoothed_peak

X = np.geomspace(1e18, 1e20, 5)
X_HERO = 1e21  # 10× beyond the largest run


def power(x, scale=2.0, exponent=0.1):
    return scale * (x / 1e18) ** exponent


def test_power_trend_recovers_the_law_and_its_90_band_covers_about_90_percent():
    rng = np.random.default_rng(0)
    seeds, sd = 200, 0.05
    new_inside = mean_inside = 0
    exponents = []
    for _ in range(seeds):
        trend = fit_trend(X, power(X) * np.exp(sd * rng.standard_normal(X.size)))
        exponents.append(trend.b)
        new_run = power(X_HERO) * np.exp(sd * rng.standard_normal())
        lo, hi = trend.interval(X_HERO, 0.9, "observation")
        new_inside += lo <= new_run <= hi
        lo, hi = trend.interval(X_HERO, 0.9, "mean")
        mean_inside += lo <= power(X_HERO) <= hi
    assert abs(np.mean(exponents) - 0.1) < 0.005
    # binomial sd at 200 seeds is 2.1%: ±3 sd
    assert 0.835 <= new_inside / seeds <= 0.965
    assert 0.835 <= mean_inside / seeds <= 0.965


def test_exact_power_law_is_recovered_exactly():
    trend = fit_trend(X, power(X, 3.0, 0.37))
    assert trend.b == pytest.approx(0.37, rel=1e-12)
    assert trend.predict(X_HERO) == pytest.approx(power(X_HERO, 3.0, 0.37), rel=1e-12)
    assert trend.growing()


def test_linear_trend_in_log_x():
    y = 0.1 + 0.02 * np.log(X / 1e18)
    trend = fit_trend(X, y + 1e-4 * np.array([1, -1, 0, 1, -1]), log_y=False)
    assert trend.predict(X_HERO) == pytest.approx(0.1 + 0.02 * np.log(1e3), abs=2e-3)


def test_trend_needs_three_runs_of_different_sizes():
    with pytest.raises(FitError, match="at least 3"):
        fit_trend(X[:2], [1.0, 2.0])
    with pytest.raises(FitError, match="different sizes"):
        fit_trend([1e18] * 3, [1.0, 2.0, 3.0])


def test_rate_trend_recovers_a_growing_rate():
    rng = np.random.default_rng(1)
    exposure = np.full(X.size, 20_000.0)
    rate = 1e-4 * (X / 1e18) ** 0.7
    covered, slopes = 0, []
    for _ in range(100):
        fit = fit_rate_trend(X, rng.poisson(rate * exposure), exposure, slope_sd=10.0)
        lo, hi = fit.slope_interval(0.9)
        covered += lo <= 0.7 <= hi
        slopes.append(fit.b)
    assert abs(np.median(slopes) - 0.7) < 0.05
    assert covered >= 80
    assert fit.growing()


def test_rate_trend_with_one_event_stays_finite_and_not_growing():
    fit = fit_rate_trend(X[:4], [1, 0, 0, 0], [340, 740, 1100, 1900])
    assert np.isfinite(fit.b) and fit.b < 0 and not fit.growing()
    with pytest.raises(FitError, match="no events"):
        fit_rate_trend(X[:4], [0, 0, 0, 0], [340, 740, 1100, 1900])


def endpoint_losses(seed, n=6, noise=0.001):
    compute = np.geomspace(1e18, 1e21, n)
    loss = 1.8 + 400 * compute**-0.15
    return compute, loss * (1 + noise * np.random.default_rng(seed).standard_normal(n))


@pytest.mark.parametrize("planted", [0, 2, 5])
def test_leave_one_out_finds_the_planted_rung(planted):
    compute, loss = endpoint_losses(planted)
    loss[planted] *= 1.05
    result = leave_one_out(compute, loss)
    assert result.flagged == [planted]
    held = result.held[planted]
    assert held.rel_error == pytest.approx(0.05, abs=0.01)


def test_leave_one_out_is_quiet_on_clean_ladders():
    flagged = sum(bool(leave_one_out(*endpoint_losses(seed)).flagged) for seed in range(60))
    assert flagged <= 3  # 5% nominal


def test_leave_one_out_needs_four_runs():
    with pytest.raises(FitError, match="at least 4"):
        leave_one_out(X[:3], [3.0, 2.5, 2.2])


def decaying_loss(n, seed, noise=0.005):
    t = np.arange(n)
    loss = 2.0 + 3.0 * np.exp(-t / (0.1 * n))
    return loss * (1 + noise * np.random.default_rng(seed).standard_normal(n))


def test_count_spikes_counts_planted_spikes():
    loss = decaying_loss(3000, 0)
    planted = [400, 1100, 1700, 2500]
    for start, width, height in zip(planted, [1, 3, 8, 2], [0.1, 0.2, 0.5, 0.08]):
        loss[start:start + width] += height
    spikes = count_spikes(loss, window=61, start=150)
    assert spikes.count == 4
    np.testing.assert_array_equal(spikes.starts, planted)


@pytest.mark.parametrize("seed", range(5))
def test_count_spikes_finds_none_in_noise_on_a_steep_trend(seed):
    assert count_spikes(decaying_loss(3000, seed), window=61, start=150).count == 0


def test_smoothed_peak_ignores_the_warmup_and_single_steps():
    n = 1000
    f = np.arange(1, n + 1) / n
    grad = 0.5 + 0.5 * f
    grad[:20] = 8.0  # first steps: random weights
    grad[500] = 20.0  # one noisy step
    peak = smoothed_peak(f, grad, skip=0.05, window=0.02)
    assert peak.height == pytest.approx(1.0, abs=0.02)
    assert peak.fraction > 0.98

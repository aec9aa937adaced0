"""Backtests on known laws: hold out the largest runs, predict them, score error and coverage."""

from __future__ import annotations

import numpy as np
import pytest

from fits import (
    Curve,
    FitError,
    Momentum,
    backtest_curve_law,
    backtest_endpoint,
    backtest_per_fraction,
    backtest_prefix,
    backtest_surface,
    fit_momentum,
)
from fits.synthetic import endpoint_losses, known_law, per_fraction_losses, surface_losses
from ladder import Schedule

COMPUTE = np.geomspace(1e18, 1e22, 10)


def test_endpoint_backtest_scores_each_held_out_run():
    y = endpoint_losses(np.random.default_rng(0), COMPUTE, 1.7, 2e3, 0.2, noise=0.002)
    bt = backtest_endpoint(COMPUTE, y, [f"r{i}" for i in range(10)], holdout=(1, 3))
    assert [r.target for r in bt.rows] == ["r9", "r7", "r8", "r9"]
    first = bt.rows[0]
    assert first.extrapolation == pytest.approx(COMPUTE[9] / COMPUTE[8])
    assert first.rel_error == pytest.approx(first.predicted / first.actual - 1)
    assert bt.mean_abs_error < 0.01 and 0.5 <= bt.coverage <= 1
    assert "coverage" in bt.summary() and len(bt.records()) == 4
    lines = bt.summary().splitlines()[2:6]
    for r, line in zip(bt.rows, lines):  # signed, as every other error is printed (a positive one had no "+")
        assert f"{r.rel_error:+.2%}" in line.split(), line


def test_exact_laws_backtest_to_zero_error():
    y = 1.7 + 2e3 * COMPUTE**-0.2
    bt = backtest_endpoint(COMPUTE, y, holdout=(2,))
    assert max(abs(r.rel_error) for r in bt.rows) < 1e-6 and bt.coverage == 1.0
    N = np.repeat(np.geomspace(5e7, 5e9, 6), 4)
    D = N * np.tile([5.0, 20.0, 80.0, 300.0], 6)
    ys = surface_losses(np.random.default_rng(0), N, D, 1.8, 480.0, 2100.0, 0.35, 0.37, noise=0.0)
    bts = backtest_surface(N, D, ys, holdout=(1,))
    assert len(bts.rows) == 4 and max(abs(r.rel_error) for r in bts.rows) < 1e-5


def test_a_pinned_asymptote_no_law_takes_is_refused_as_given_not_blamed_on_the_ladders_size():
    y = 1.7 + 2e3 * COMPUTE**-0.2
    for E in (5.0, -1.0):
        with pytest.raises(FitError, match=r"^pinned E = .* \(--E\) must be in \[0, the smallest loss") as err:
            backtest_endpoint(COMPUTE, y, holdout=(1,), E=E)
        assert "more runs" not in str(err.value) and "holding out" not in str(err.value)


def test_per_fraction_backtest_scores_the_whole_curve():
    G = np.arange(1, 11) / 10
    C = np.geomspace(1e19, 1e21, 6)
    exact = per_fraction_losses(np.random.default_rng(1), C, G, 2.0, np.full(10, 900.0), 0.16 + 0.04 * G, noise=0.0)
    row = backtest_per_fraction(C, G, exact, holdout=(1,)).rows[0]
    assert row.curve_mean_error < 1e-6 and row.curve_worst_error < 1e-6
    noisy = exact * np.exp(np.random.default_rng(2).normal(0, 0.002, exact.shape))
    row = backtest_per_fraction(C, G, noisy, holdout=(1,), n_boot=40).rows[0]
    assert row.curve_mean_error < 0.01 and row.lo < row.predicted < row.hi


def _momentum_curves(noise=0.0):
    law = known_law(Momentum, {"lambda": 0.995}, dict(L0=2.6, A=0.6, alpha=0.45, B=0.9),
                    dict(L0=-0.07, A=0.08, alpha=-0.05, B=0.1), scale_ref=1e8)
    base = dict(peak_lr=3e-4, total_steps=3000, warmup_steps=100, min_lr_ratio=0.1)
    out = []
    rng = np.random.default_rng(0)
    for s in (2.5e7, 1e8, 4e8, 1.6e9):
        for decay in ("cosine", "linear"):
            lrs = Schedule(decay=decay, **base).lrs()
            steps = np.arange(200, 3001, 100)
            loss = law.predict(steps, lrs, s) * np.exp(rng.normal(0, noise, steps.size))
            out.append(Curve(steps, loss, lrs, s, f"{s:.2g} {decay}"))
    return out


@pytest.mark.slow
def test_curve_law_backtests_on_larger_sizes_and_on_prefixes():
    curves = _momentum_curves()
    bt = backtest_curve_law(fit_momentum, curves, holdout=(1,))
    assert len(bt.rows) == 2 and bt.form == "momentum law"
    assert all(r.extrapolation == pytest.approx(4.0) for r in bt.rows)
    assert max(r.curve_worst_error for r in bt.rows) < 1e-3
    pre = backtest_prefix(fit_momentum, curves, target=7, fractions=(0.5,))
    assert pre.rows[0].extrapolation == 0.5 and pre.rows[0].curve_worst_error < 1e-3


def test_holding_out_everything_is_refused():
    with pytest.raises(FitError, match="cannot hold out"):
        backtest_endpoint(COMPUTE, 1.7 + 2e3 * COMPUTE**-0.2, holdout=(10,))


def test_the_band_scored_is_the_one_fit_gives_with_the_law_s_own_beside_it():
    """Exact losses leave the law's own band a point; the band scored still widens by 1% (one sd) per
    e-fold of extrapolation, half the e-folds in compute beyond the fitted runs, as `ladder fit` gives it."""
    y = 1.7 + 2e3 * COMPUTE**-0.2
    row = backtest_endpoint(COMPUTE, y, holdout=(1,)).rows[0]
    assert row.own_hi - row.own_lo < 1e-6 * row.predicted
    sd = 0.01 * 0.5 * np.log(COMPUTE[9] / COMPUTE[8]) * row.predicted
    assert row.hi - row.predicted == pytest.approx(1.6449 * sd, rel=1e-3)
    assert row.covered


def test_a_band_of_no_width_is_not_counted_and_a_stopped_run_is_scored_where_it_stopped():
    C4 = COMPUTE[:4]
    y4 = 1.7 + 2e3 * C4**-0.2 * (1 + np.array([0, 0.01, -0.01, 0.02]))
    bt = backtest_endpoint(C4, y4, holdout=(1,))
    (row,) = bt.rows  # three runs, three parameters: a Student-t band of 0 dof
    assert row.covered is None and np.isnan(bt.coverage) and "no row has a band" in bt.summary()
    # nor with a bootstrap: each refit of every run is the fit itself (`ladder fit --bootstrap` refuses it)
    boot = backtest_endpoint(C4, y4, holdout=(1,), n_boot=50)
    assert boot.rows[0].covered is None and np.isnan(boot.coverage) and "no row has a band" in boot.summary()
    assert "none (as many parameters as runs)" in bt.summary() and "inf" not in bt.summary()
    (rec,) = bt.records()  # no bounds, not a lower one at 0 beside none above
    assert (rec["lo"], rec["hi"], rec["own_lo"], rec["own_hi"]) == (None, None, None, None)
    G = np.arange(1, 11) / 10
    C = np.geomspace(1e19, 1e21, 6)
    Y = per_fraction_losses(np.random.default_rng(1), C, G, 2.0, np.full(10, 900.0), 0.16 + 0.04 * G, noise=0.0)
    Y[-1, 8:] = np.nan  # the largest run stopped at 80%
    row = backtest_per_fraction(C, G, Y, [f"r{i}" for i in range(6)], holdout=(1,)).rows[0]
    assert row.final_fraction == pytest.approx(0.8) and row.actual == Y[-1, 7] and np.isfinite(row.rel_error)
    assert "r5 (to 80%)" in backtest_per_fraction(C, G, Y, [f"r{i}" for i in range(6)], holdout=(1,)).summary()


def test_with_a_bootstrap_the_band_scored_is_the_one_fit_gives_the_wider_of_it_and_the_student_t():
    """`ladder fit endpoint --at C --bootstrap N` gives the refits' median and, at each bound, the wider of the
    bootstrap's band and the Student-t's, each widened for extrapolation: the backtest scores that band."""
    from fits import bootstrap, fit_endpoint
    from fits.predictor import compute_efolds, floor_sd
    from fits.uncertainty import fit_band

    c = np.geomspace(1e18, 3e20, 6)
    y = (1.8 + 2000 * c**-0.15) * (1 + 0.003 * (-1.0) ** np.arange(6))
    row = backtest_endpoint(c, y, holdout=(1,), n_boot=200, seed=3).rows[0]
    fit = fit_endpoint(c[:5], y[:5])
    ens = bootstrap(fit, 200, 3)
    want = fit_band(fit, c[5], ensemble=ens, extra_sd=floor_sd(fit.predict(c[5]), 0.0, compute_efolds(c[5], c[:5])))
    assert (row.predicted, row.lo, row.hi) == pytest.approx((float(want.median), float(want.lo90), float(want.hi90)))
    boot_lo, boot_hi = ens.interval(c[5], level=0.9)
    t_lo, t_hi = fit.interval(c[5], level=0.9)
    assert (row.own_lo, row.own_hi) == pytest.approx((min(boot_lo, t_lo), max(boot_hi, t_hi)))
    assert row.own_hi - row.own_lo > boot_hi - boot_lo  # the Student-t's reach is kept where it is the wider


def test_the_surface_holds_out_sizes_within_one_percent_of_the_largest_together_as_fit_surface_does():
    N = np.r_[np.repeat(np.geomspace(5e7, 5e9, 6), 4), 5e9 * 1.0001]
    D = N * np.r_[np.tile([5.0, 20.0, 80.0, 300.0], 6), 40.0]
    y = surface_losses(np.random.default_rng(0), N, D, 1.8, 480.0, 2100.0, 0.35, 0.37, noise=0.0)
    bt = backtest_surface(N, D, y, [f"r{i}" for i in range(N.size)], holdout=(1,))
    assert sorted(r.target for r in bt.rows) == sorted(f"r{i}" for i in (20, 21, 22, 23, 24))
    assert all(r.n_fit == 20 for r in bt.rows)


def test_runs_all_of_one_size_are_said_to_leave_nothing_to_backtest_from():
    with pytest.raises(FitError, match="every run is of one size .*give runs of several sizes") as refused:
        backtest_endpoint(np.full(4, 1e20), np.array([3.0, 2.9, 2.95, 2.92]))
    assert "hold out 1 to 0" not in str(refused.value)

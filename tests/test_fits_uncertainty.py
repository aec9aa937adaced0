"""Bootstrap and jackknife over runs, bands, the spread across forms, and coverage on known truth:
the nominal 90% bootstrap interval holds the true parameters about 90% of the time."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fits import FitError, bootstrap, fit_endpoint, form_spread, jackknife
from fits.synthetic import endpoint_losses

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.fit_coverage import coverage  # noqa: E402

COMPUTE = np.geomspace(1e18, 1e21, 8)


@pytest.fixture(scope="module")
def fit():
    return fit_endpoint(COMPUTE, endpoint_losses(np.random.default_rng(0), COMPUTE, 1.7, 2e3, 0.2, noise=0.004))


def test_bootstrap_resamples_runs_and_is_reproducible(fit):
    a = bootstrap(fit, n=50, seed=3)
    b = bootstrap(fit, n=50, seed=3)
    assert a.n + a.failed == 50 and a.method == "bootstrap"
    np.testing.assert_array_equal(a.samples(1e22), b.samples(1e22))
    assert not np.array_equal(a.samples(1e22), bootstrap(fit, n=50, seed=4).samples(1e22))
    # Every refit saw whole runs: its data are a multiset of the fitted runs.
    for refit in a.refits[:10]:
        assert set(refit.compute) <= set(fit.compute)
        assert np.unique(refit.compute).size >= 4  # one run beyond the three parameters


def test_intervals_and_bands(fit):
    ens = bootstrap(fit, n=200, seed=0)
    lo, hi = ens.interval(1e22, level=0.9)
    lo50, hi50 = ens.interval(1e22, level=0.5)
    assert lo < lo50 < float(fit.predict(1e22)) < hi50 < hi
    band = ens.band(np.array([1e21, 1e22, 1e23]))
    assert np.all(band.lo90 < band.lo50) and np.all(band.hi50 < band.hi90)
    assert np.all(np.diff(band.hi90 - band.lo90) > 0)  # wider the further it extrapolates
    iv = ens.param_intervals()
    assert set(iv) == {"E", "A", "alpha"}
    assert all(lo <= fit.params[k] <= hi for k, (lo, hi) in iv.items())
    assert "bootstrap over runs: 200 refits" in ens.summary()


@pytest.mark.parametrize("level", [90, 1.5, 0, -0.1, "0.9", True])
def test_an_interval_at_a_level_that_is_no_probability_is_refused(fit, level):
    """level=90 (a percent) gave (nan, nan) without a word."""
    with pytest.raises(FitError, match=r"give the interval's probability between 0 and 1 \(0\.9 for 90%\)"):
        fit.interval(1e22, level=level)
    with pytest.raises(FitError, match="between 0 and 1"):
        jackknife(fit).interval(1e22, level=level)
    lo, hi = fit.interval(1e22, level=np.float32(0.9))  # a numpy float is a level
    assert lo < float(fit.predict(1e22)) < hi


def test_arrays_of_two_lengths_are_refused_by_name():
    from fits import fit_surface, sample_curve

    with pytest.raises(FitError, match="inputs differ in length: steps=3, values=2"):
        sample_curve([10, 20, 30], [3.0, 2.9], 30, [0.5, 1.0])
    n, d = np.repeat([1e8, 2e8, 4e8], 3), np.tile([2e9, 4e9, 8e9], 3)
    with pytest.raises(FitError, match="inputs differ in length: loss=9, weights=3"):
        fit_surface(n, d, 1.8 + 400 / n**0.3 + 400 / d**0.3, weights=np.ones(3))


def test_jackknife_leaves_each_run_out_once(fit):
    ens = jackknife(fit)
    assert ens.n == 8 and ens.method == "jackknife"
    assert sorted(len(r.compute) for r in ens.refits) == [7] * 8
    lo, hi = ens.interval(1e22)
    center = float(fit.predict(1e22))
    assert lo < center < hi and (center - lo) == pytest.approx(hi - center)


def test_too_few_runs_to_resample():
    small = fit_endpoint(COMPUTE[:3], 1.7 + 2e3 * COMPUTE[:3] ** -0.2)
    ens = bootstrap(small, n=20, seed=0)  # three runs: only their permutations refit
    assert any("barely vary" in w for w in ens.warnings)
    with pytest.raises(FitError, match="usable refits"):
        jackknife(small)  # two runs cannot refit three parameters


def test_spread_across_forms():
    spread = form_spread({"endpoint": 2.40, "per-fraction": 2.43, "curve law": 2.45})
    assert spread.median == 2.43 and spread.lo == 2.40 and spread.hi == 2.45
    assert spread.relative_spread == pytest.approx(0.05 / 2.43)
    assert spread.warnings == ()
    wide = form_spread({"a": 2.0, "b": 2.3})
    assert wide.warnings and "too wide" in wide.summary()
    with pytest.raises(FitError):
        form_spread({})


# ---- known truth: coverage over many seeds --------------------------------------------------------
def assert_about_90_percent(cov: dict[str, float], seeds: int) -> None:
    """Each quantity within 3 binomial standard errors of 90%, their mean within 2."""
    se = np.sqrt(0.9 * 0.1 / seeds)
    for k, v in cov.items():
        assert abs(v - 0.9) <= 3 * se, (k, v, cov)
    assert abs(np.mean(list(cov.values())) - 0.9) <= 2 * se, cov


@pytest.mark.slow
@pytest.mark.parametrize(("form", "seeds", "boots"), [("endpoint", 100, 40), ("per-fraction", 80, 40)])
def test_bootstrap_interval_covers_the_truth_about_90_percent(form, seeds, boots):
    # The surface and the curve laws are checked the same way, with more seeds, in
    # benchmarks/fit_coverage.py (numbers in benchmarks/RESULTS.md).
    assert_about_90_percent(coverage(form, seeds, boots, first_seed=1000), seeds)


def test_a_jackknife_interval_stays_within_the_values_the_law_allows():
    compute = np.geomspace(1e18, 1e21, 5)
    y = endpoint_losses(np.random.default_rng(3), compute, E=1.7, A=2e3, alpha=0.2, noise=0.01)
    ens = jackknife(fit_endpoint(compute, y))
    names = list(ens.fit.params)
    values = np.array([[f.params[k] for k in names] for f in ens.refits])
    raw_lo, raw_hi = ens._draws(values, np.array([ens.fit.params[k] for k in names]), 0.9)
    assert raw_lo[0] < 0 and raw_hi[0] > y.min() and raw_lo[2] < 0  # E below 0 and above the least loss, α below 0
    iv = ens.param_intervals(0.9)
    assert iv["E"] == (0.0, pytest.approx(y.min())) and iv["alpha"][0] == 0.0 and iv["A"][0] == 0.0
    assert iv["alpha"][1] == pytest.approx(raw_hi[2]) and iv["A"][1] == pytest.approx(raw_hi[1])  # inside: as it was
    assert "E = " in ens.summary() and "interval [0, " in ens.summary()

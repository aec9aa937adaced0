"""Schedule-aware curve laws (multi-power and momentum): the binned annealing sum against the full
sum, derivatives, recovery of known laws across sizes, predictions under new schedules, and the
published multi-power fits on the schedule dataset."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import fits.multipower as mp
from fits import Curve, FitError, Momentum, MultiPower, fit_momentum, fit_multipower
from fits.curvelaw import profile_floor
from fits.multipower import DropTerms, drop_terms, exact_drop
from fits.synthetic import curve_law_curves, known_law
from ladder import Schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import fit_datasets as ds  # noqa: E402

PEAK = 3e-4


def schedules(T=4000, warmup=100):
    base = dict(peak_lr=PEAK, total_steps=T, warmup_steps=warmup, min_lr_ratio=0.1)
    return {
        "cosine": Schedule(decay="cosine", **base).lrs(),
        "wsd": Schedule(decay="wsd", cooldown_steps=T // 5, **base).lrs(),
        "constant": Schedule(decay="constant", **base).lrs(),
        "step": np.where(np.arange(T) < T // 2, Schedule(decay="constant", **base).lrs(), 0.3 * PEAK),
        "to-zero": Schedule(peak_lr=PEAK, total_steps=T, warmup_steps=warmup, decay="linear").lrs(),
    }


@pytest.mark.parametrize("name", ["cosine", "wsd", "step", "to-zero"])
def test_binned_annealing_sum_matches_the_full_sum(name):
    lrs = schedules(T=20000, warmup=500)[name]
    steps = np.arange(600, 20001, 350)
    shape = np.array([2.0, 0.6, 0.6])
    D, _ = MultiPower.drop(drop_terms(lrs, steps), shape)
    exact = exact_drop(lrs, steps, *shape)
    # B·D is the loss drop: with B = 500 and losses near 2.5 the error stays below 1e-5 of the loss.
    assert np.max(np.abs(D - exact)) * 500 / 2.5 < 1e-5


def plain_drop_terms(lrs, steps) -> DropTerms:
    """The binning with every prefix sum taken over every step and nothing kept: what `drop_terms` must give."""
    lrs = np.asarray(lrs, dtype=np.float64)
    t = np.asarray(steps, dtype=np.int64)
    area = np.concatenate([[0.0], np.cumsum(lrs)])
    drop = np.zeros(lrs.size)
    drop[1:] = lrs[:-1] - lrs[1:]
    log_lr = np.log(np.maximum(lrs, 1e-30))
    lo, hi, point = mp._bins(t, mp._distance_edges(int(t.max())), mp._level_edges(log_lr))
    out = []
    for sign in (1.0, -1.0):
        d = np.where(sign * drop > 0, drop, 0.0)
        a = np.abs(d)

        def binsum(x):
            c = np.concatenate([[0.0], np.cumsum(x)])
            return c[hi + 1] - c[lo]

        weight = binsum(a)
        keep = weight > 0
        w = weight[keep]
        out.append((point[keep], binsum(d)[keep], area[t[point[keep]]] - binsum(a * area[:-1])[keep] / w,
                    binsum(a * log_lr)[keep] / w))
    p, amp, ar, lg = (np.concatenate(x) for x in zip(*out))
    return DropTerms(point=p, amplitude=amp, area=np.maximum(ar, 0.0), log_lr=lg, n_points=t.size)


def assert_same_terms(got: DropTerms, want: DropTerms):
    assert got.n_points == want.n_points
    np.testing.assert_array_equal(got.point, want.point)
    for name in ("amplitude", "area", "log_lr"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-12, atol=0, err_msg=name)


@pytest.mark.parametrize("name", ["cosine", "wsd", "constant", "step", "to-zero", "noisy"])
def test_binning_matches_the_plain_prefix_sums(name):
    lrs = schedules(T=6000, warmup=150).get(name, np.random.default_rng(0).uniform(0, 1e-3, 6000))
    lrs = np.concatenate([lrs, np.full(40, 7e-4)])  # steps past the last eval count for nothing
    for steps in (np.arange(1, 6001, 37), np.array([1]), np.array([2, 3, 6000]), np.array([4321])):
        assert_same_terms(drop_terms(lrs, steps), plain_drop_terms(lrs, steps))


def test_binned_terms_are_kept_by_content():
    lrs = schedules()["cosine"].copy()
    steps = np.arange(200, 4001, 100)
    first = drop_terms(lrs, steps)
    assert drop_terms(lrs.copy(), steps.copy()) is first  # equal arrays find the kept terms
    with pytest.raises(ValueError, match="read-only"):
        first.amplitude[0] = 0.0
    lrs[2000:] *= 0.5  # changed in place: binned afresh
    assert_same_terms(drop_terms(lrs, steps), plain_drop_terms(lrs, steps))
    assert drop_terms(lrs, steps[:-1]) is not drop_terms(lrs, steps)
    c = Curve(steps, np.full(steps.size, 3.0), lrs)
    assert c.terms(MultiPower) is c.terms(MultiPower) and c.area is c.area
    with pytest.raises(ValueError, match="read-only"):
        c.lrs[0] = 1.0


def test_fits_and_predictions_match_the_plain_binning(monkeypatch):
    shape = LAW["MultiPower"][0]
    lrs, steps = schedules(T=6000)["wsd"], np.arange(300, 6001, 100)

    def profile_and_predictions():
        _, curves = floored_ladder(1.5, 0, sizes=(2.5e7, 1e8, 4e8))  # new curves: none has terms yet
        prof = profile_floor(fit_multipower(curves, shape=shape))
        preds = [f.predict(steps, lrs, 1.6e9) for f in prof.fits] + [prof.fits[2].refit([0, 1, 2, 3]).predict(
            steps, lrs, 1.6e9)]
        return prof, np.array(preds)

    kept, kept_preds = profile_and_predictions()
    monkeypatch.setattr(MultiPower, "precompute", staticmethod(plain_drop_terms))
    plain, plain_preds = profile_and_predictions()
    np.testing.assert_allclose(plain.objective, kept.objective, rtol=1e-9)
    for a, b in zip(kept.fits, plain.fits, strict=True):
        for part in ("level", "slope"):
            np.testing.assert_allclose(list(getattr(a, part).values()), list(getattr(b, part).values()), rtol=1e-9)
    np.testing.assert_allclose(kept_preds, plain_preds, rtol=1e-9)


@pytest.mark.parametrize("form", [MultiPower, Momentum])
def test_annealing_derivatives_match_finite_differences(form):
    lrs = schedules()["wsd"]
    pre = form.precompute(lrs, np.arange(150, 4001, 50))
    shape = np.array([2.0, 0.6, 0.6]) if form is MultiPower else np.array([0.995])
    D, dD = form.drop(pre, shape)
    for i in range(shape.size):
        h = 1e-6 * max(shape[i], 1e-3)
        up, down = shape.copy(), shape.copy()
        up[i] += h
        down[i] -= h
        numeric = (form.drop(pre, up)[0] - form.drop(pre, down)[0]) / (2 * h)
        np.testing.assert_allclose(dD[:, i], numeric, rtol=2e-4, atol=1e-6 * np.max(np.abs(numeric)))


def test_momentum_term_is_the_filtered_sum_of_drops():
    lrs = schedules()["step"]
    steps = np.array([1000, 2000, 2001, 2500, 4000])
    S2, _ = Momentum.drop(Momentum.precompute(lrs, steps), np.array([0.99]))
    for t, s2 in zip(steps, S2):
        m, total = 0.0, 0.0
        for k in range(1, t):
            m = 0.99 * m + (lrs[k - 1] - lrs[k])
            total += m
        assert s2 == pytest.approx(total, rel=1e-10, abs=1e-18)


LAW = dict(
    MultiPower=(dict(C=2.0, beta=0.6, gamma=0.6), dict(L0=2.6, A=0.6, alpha=0.45, B=450.0)),
    Momentum=(dict(**{"lambda": 0.995}), dict(L0=2.6, A=0.6, alpha=0.45, B=0.9)),
)
EXPONENTS = dict(L0=-0.07, A=0.08, alpha=-0.05, B=0.1)


def synthetic_ladder(form, noise, seed=0, sizes=(2.5e7, 1e8, 4e8), kinds=("cosine", "step", "constant")):
    shape, params = LAW["MultiPower" if form is MultiPower else "Momentum"]
    law = known_law(form, shape, params, EXPONENTS, scale_ref=1e8)
    lr = schedules()
    combos = [(lr[k], s) for s in sizes for k in kinds]
    steps = [np.arange(200, 4001, 100)] * len(combos)
    curves = curve_law_curves(np.random.default_rng(seed), law, [c[0] for c in combos], steps,
                              [c[1] for c in combos], noise=noise)
    return law, curves


@pytest.mark.slow
@pytest.mark.parametrize(("form", "fit_fn"), [(MultiPower, fit_multipower), (Momentum, fit_momentum)])
def test_recovers_a_known_law_across_sizes_and_predicts_a_new_schedule(form, fit_fn):
    law, curves = synthetic_ladder(form, noise=0.0)
    fit = fit_fn(curves)
    assert fit.converged
    for k, v in law.shape.items():
        assert fit.shape[k] == pytest.approx(v, rel=2e-3), k
    for k in ("L0", "A", "alpha", "B"):
        assert fit.run_params(1e8)[k] == pytest.approx(law.run_params(1e8)[k], rel=2e-3), k
        assert fit.slope[k] == pytest.approx(law.slope[k], abs=2e-3), k
    # A larger run under a schedule no rung had (WSD), 4x the largest size.
    lrs = schedules(T=8000)["wsd"]
    steps = np.arange(300, 8001, 100)
    np.testing.assert_allclose(fit.predict(steps, lrs, 1.6e9), law.predict(steps, lrs, 1.6e9), rtol=2e-4)


def test_fixed_shape_is_kept_and_refits_keep_it():
    law, curves = synthetic_ladder(MultiPower, noise=0.001, sizes=(2.5e7, 1e8, 4e8), kinds=("cosine", "constant"))
    fit = fit_multipower(curves, shape=dict(C=2.0, beta=0.6, gamma=0.6))
    assert fit.shape == dict(C=2.0, beta=0.6, gamma=0.6) and fit.fixed_shape == ("C", "beta", "gamma")
    again = fit.refit([0, 1, 1])
    assert again.shape == fit.shape
    assert "(fixed)" in fit.summary()
    lrs = schedules(T=6000)["wsd"]
    lo, hi = fit.interval([6000], lrs, 4e8, n_boot=20)
    pred = fit.predict([6000], lrs, 4e8)
    assert lo[0] < hi[0] and lo[0] <= pred[0] <= hi[0]
    with pytest.raises(FitError, match="no shape parameter"):
        fit_multipower(curves, shape=dict(delta=1.0))


def test_curves_of_one_size_at_different_peak_lrs_are_flagged():
    # the law counts LR × steps as progress: right across schedule shapes at one peak LR, not across peaks
    _, curves = synthetic_ladder(MultiPower, noise=0.001, sizes=(2.5e7, 1e8, 4e8), kinds=("cosine", "constant"))
    shape = dict(C=2.0, beta=0.6, gamma=0.6)
    assert not any("peak LRs" in w for w in fit_multipower(curves, shape=shape).warnings)
    c = curves[0]
    hot = fit_multipower([Curve(c.steps, c.loss, 2 * c.lrs, c.scale, c.name)] + curves[1:], shape=shape)
    (w,) = [w for w in hot.warnings if "peak LRs" in w]
    assert "(1 of 3 sizes; at 2.5e+07: 0.0003, 0.0006)" in w and "multi-power law" in w and w in hot.summary()


def floored_ladder(E, seed, sizes):
    shape, params = LAW["MultiPower"]
    law = known_law(MultiPower, shape, params, dict(EXPONENTS, L0=-0.15 if E else -0.07), scale_ref=1e8, E=E or None)
    lr = schedules()
    combos = [(lr[k], s) for s in sizes for k in ("cosine", "constant")]
    curves = curve_law_curves(np.random.default_rng(seed), law, [c[0] for c in combos],
                              [np.arange(200, 4001, 100)] * len(combos), [c[1] for c in combos],
                              noise=5e-4, run_noise=5e-4)
    return law, curves


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("E", [0.0, 1.5])
def test_the_floor_profile_finds_a_floor_the_sizes_pin(E, seed):
    law, curves = floored_ladder(E, seed, sizes=(2.5e7, 1e8, 4e8, 1.6e9))
    prof = profile_floor(fit_multipower(curves, shape=LAW["MultiPower"][0]))
    assert prof.quantile(0.05) <= E <= prof.quantile(0.95)
    assert abs(prof.quantile(0.5) - E) < 0.35
    median = prof.at(prof.quantile(0.5))
    assert median.E == pytest.approx(prof.quantile(0.5)) and median.converged
    lrs = schedules()["cosine"]
    assert median.predict([4000], lrs, 1.28e10)[0] == pytest.approx(law.predict([4000], lrs, 1.28e10)[0], rel=3e-3)


def test_two_sizes_leave_the_floor_to_its_prior():
    # with two sizes L0's power law passes through both sizes' L0 for any floor below them: the objective
    # is flat there, and the posterior is the prior's (the floors near the smallest loss fit worse)
    _, curves = floored_ladder(1.5, 0, sizes=(2.5e7, 1e8))
    fit = fit_multipower(curves, shape=LAW["MultiPower"][0])
    prof = profile_floor(fit)
    low = min(float(c.loss.min()) for c in curves)
    np.testing.assert_allclose(prof.floors, np.arange(10) / 10 * low)
    np.testing.assert_allclose(prof.objective[:8], prof.objective[0], rtol=1e-6)
    np.testing.assert_allclose(prof.weight[:8], prof.weight[0], rtol=1e-5)
    assert prof.objective[9] > 2 * prof.objective[0]
    assert 0.35 * low < prof.quantile(0.5) < 0.45 * low
    assert prof.fits[0] is fit and prof.at(0.0) is fit
    with pytest.raises(FitError, match="whose floor is 0"):
        profile_floor(prof.fits[3])


def test_curves_are_validated():
    lrs = schedules()["cosine"]
    with pytest.raises(FitError, match="LR sequence covers"):
        Curve(np.array([100, 5000]), np.array([3.0, 2.9]), lrs)
    with pytest.raises(FitError, match="loss must be positive"):
        Curve(np.array([100, 200]), np.array([3.0, 0.0]), lrs)
    with pytest.raises(FitError, match="steps must be positive"):
        Curve(np.array([0, 200]), np.array([9.0, 3.0]), lrs)
    warm_from_zero = np.concatenate([[0.0], lrs])
    with pytest.raises(FitError, match="before any LR"):
        fit_multipower([Curve(np.array([1, 200, 400]), np.array([9.0, 3.0, 2.9]), warm_from_zero)])


# ---- the published schedule dataset (Luo et al. 2025) --------------------------------------------
def _errors(fit_or_params, curves):
    out = []
    for c in curves:
        if isinstance(fit_or_params, tuple):
            L0, A, alpha, B, C, beta, gamma = fit_or_params
            law = known_law(MultiPower, dict(C=C, beta=beta, gamma=gamma), dict(L0=L0, A=A, alpha=alpha, B=B))
            pred = law.predict(c.steps, c.lrs, 1.0)
        else:
            pred = fit_or_params.predict(c.steps, c.lrs, c.scale)
        e = np.abs(pred / c.loss - 1)
        out.append((e.mean(), e.max()))
    return np.array(out)


def test_published_parameters_reproduce_the_published_accuracy(shared_data):
    # With the authors' fitted parameters, our implementation matches every 400M held-out curve
    # to about 0.17% mean relative error (their README: 0.168%).
    err = _errors(ds.MPL_README["400M"], ds.mpl_curves(shared_data, "400M", "test"))
    assert err[:, 0].mean() < 0.0018
    assert err[:, 1].max() < 0.018


@pytest.mark.slow
def test_fit_on_three_schedules_predicts_the_other_six(shared_data):
    fit = fit_multipower(ds.mpl_curves(shared_data, "400M", "fit"))
    held_out = _errors(fit, ds.mpl_curves(shared_data, "400M", "test"))
    every = _errors(fit, ds.mpl_curves(shared_data, "400M"))
    # The authors at 400M: 0.168% mean error and 1.0% worst (each held-out curve's worst point,
    # averaged). Ours: worst 0.63% averaged, 1.07% at most; mean 0.22% held out (short of 0.17%:
    # cosine_72000, 3x the fitted horizon, is off by 0.64%) and 0.16% over all nine curves.
    assert held_out[:, 1].mean() < 0.0100 and held_out[:, 1].max() < 0.011
    assert held_out[:, 0].mean() < 0.0023
    assert every[:, 0].mean() < 0.0017

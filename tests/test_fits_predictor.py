"""The prediction core on arrays: runs drawn from known laws, no store, config or file."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import fits.multipower as mp
from fits import FitError
from fits import candidates as cand
from fits import predictor as core
from fits.candidates import Z90, CurveLaw, Options
from fits.runs import Run, lrs_from_logged, same_ratio, sizes
from fits.synthetic import EPOCH_CHINCHILLA, fixed_data_ladder, known_law
from fits.uncertainty import Band

FAST = core.Settings(options=Options(n_boot=60))
TPS = 4096.0  # tokens per step
TPP = 20.0


def linear_lrs(T: int, peak: float, warmup: float = 0.02, floor: float = 0.05) -> np.ndarray:
    s = np.arange(T + 1, dtype=np.float64)
    w = max(int(warmup * T), 1)
    return np.where(s < w, peak * (s + 1) / w, peak * (1 - (1 - floor) * (s - w) / (T - w)))


def ladder_run(name: str, n: float, law, rng, noise=0.002, lr_peak=None, ratio=TPP, upto: float = 1.0) -> Run:
    """A fixed-ratio run of n parameters (6·n FLOPs per token), evals every 5%, losses from `law(run, steps)`."""
    T = int(round(ratio * n / TPS))
    lrs = linear_lrs(T, lr_peak or 0.01 * (n / 1e5) ** -0.3)
    run = Run(name, 6 * n, TPS, T, lrs=lrs, n_params=n)
    steps = np.round(np.arange(1, 21) * 0.05 * T).astype(np.int64)
    steps = steps[steps <= upto * T + 1e-9]
    values = law(run, steps) * np.exp(rng.normal(0, noise, steps.size))
    return dataclasses.replace(run, steps=steps, values=values, finished=upto >= 1)


def pf_law(run: Run, steps: np.ndarray) -> np.ndarray:
    """L(g) = E + A_g (C g)^-α_g with A_g, α_g smooth in g."""
    g = steps / run.planned_steps
    alpha = 0.09 + 0.02 * np.log(g)
    A = 60.0 * g**-0.1
    return 1.5 + A * (run.compute * g) ** -alpha


MP_LAW = known_law(mp.MultiPower, {"C": 2.0, "beta": 0.6, "gamma": 0.6},
                   {"L0": 1.8, "A": 0.8, "alpha": 0.45, "B": 300.0}, {"L0": -0.05, "A": -0.1, "B": -0.1},
                   scale_ref=1e5)


def mp_law(run: Run, steps: np.ndarray) -> np.ndarray:
    return MP_LAW.predict(steps, run.lrs, run.n_params)


def ladder(law, seed=0, n_sizes=5, **kw) -> tuple[list[Run], Run]:
    """Runs at the hero's token ratio and at twice it (a second curve per size, which the curve laws need)."""
    rng = np.random.default_rng(seed)
    ns = 1e5 * 2.0 ** np.arange(n_sizes)
    runs = [ladder_run(f"r{i}", n, law, rng, **kw) for i, n in enumerate(ns)]
    runs += [ladder_run(f"r{i}-2x", n, law, rng, ratio=2 * TPP, **kw) for i, n in enumerate(ns)]
    hero = ladder_run("hero", ns[-1] * 8, law, rng, noise=0.0)
    return runs, hero


def test_the_backtest_chooses_the_law_the_ladder_follows():
    for law, name in ((pf_law, "per-fraction"), (mp_law, "multipower")):
        runs, hero = ladder(law)
        blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
        res = core.predict(runs, blank, hero.steps, FAST)
        assert res.method == name, (name, res.scores())
        # the law the ladder follows beats the other law and the mean of the two
        assert res.scores()[name] < min(v for k, v in res.scores().items() if k != name)
        assert set(res.scores()) == {"per-fraction", "multipower", "ensemble"}
        err = res.band.median / hero.values - 1
        assert np.max(np.abs(err)) < 0.01  # 8x in size, 0.2% noise
        inside = (res.band.lo90 <= hero.values) & (hero.values <= res.band.hi90)
        assert inside.mean() >= 0.8
        # two held-out cuts with five sizes: the largest, and the two largest
        held = {s.held_out for s in res.backtest}
        # every run of the held-out sizes, at both token ratios: each is one more draw of the law's carry in size
        assert held == {("r4", "r4-2x"), ("r3", "r4", "r3-2x", "r4-2x")}
        assert all(s.final_errors.size == len(s.held_out) for s in res.backtest)


def test_the_methods_are_scored_on_the_held_out_runs_each_could_predict():
    runs, hero = ladder(pf_law, seed=6, n_sizes=4)
    # the largest size also trains a length no smaller size has: the per-fraction law cannot predict it
    runs.append(ladder_run("r3-5x", 8e5, pf_law, np.random.default_rng(7), ratio=5 * TPP))
    res = core.predict(runs, hero, hero.steps, FAST)
    rows = {s.method: s for s in res.backtest}
    assert set(rows) == {"per-fraction", "multipower", "ensemble"} and not any(s.failed for s in rows.values())
    # every method, the mean too, scored on the same runs: the two the per-fraction law can predict
    assert {s.held_out for s in rows.values()} == {("r3", "r3-2x")}
    # the run only the multi-power law predicts is left out of every score, not counted against the other law
    alone = core.backtest([r for r in runs if r.name != "r3-2x"], dataclasses.replace(FAST, candidates=("multipower",)))
    assert {s.held_out for s in alone} == {("r3", "r3-5x")}


def test_a_rung_whose_eval_spikes_is_named_in_a_warning():
    rng = np.random.default_rng(8)
    runs = [ladder_run(f"r{i}", n, pf_law, rng) for i, n in enumerate(1e5 * 2.0 ** np.arange(4))]
    hero = ladder_run("hero", 3e6, pf_law, rng, noise=0.0)
    fast = dataclasses.replace(FAST, method="per-fraction", backtest=False)
    clean = core.predict(runs, hero, hero.steps, fast)
    assert not any("rises" in w for w in clean.warnings)  # 0.2% eval noise is not a spike
    values = runs[2].values.copy()
    values[10] *= 1.12  # one eval at half the run, 12% up: above the evals before it
    runs[2] = dataclasses.replace(runs[2], values=values)
    spiked = core.predict(runs, hero, hero.steps, fast)
    (w,) = [w for w in spiked.warnings if "rises" in w]
    assert "'r2'" in w and f"step {runs[2].steps[10]:,}" in w and "(55% of its run)" in w


def test_a_rung_ending_above_a_smaller_one_is_named_in_a_warning():
    rng = np.random.default_rng(8)
    runs = [ladder_run(f"r{i}", n, pf_law, rng) for i, n in enumerate(1e5 * 2.0 ** np.arange(4))]
    hero = ladder_run("hero", 3e6, pf_law, rng, noise=0.0)
    fast = dataclasses.replace(FAST, method="per-fraction", backtest=False)
    assert not any("ends" in w and "above the smaller" in w for w in core.predict(runs, hero, hero.steps, fast).warnings)
    low = runs[2].values[-1]  # the lowest smaller rung
    runs[3] = dataclasses.replace(runs[3], values=runs[3].values * (1.02 * low / runs[3].values[-1]))
    (w,) = [w for w in core.predict(runs, hero, hero.steps, fast).warnings if "above the smaller" in w]
    assert "'r3' ends 2.0% above the smaller 'r2'" in w
    # a rung at another token ratio is not compared, nor one that stopped early
    other = ladder_run("r4-2x", 8e5 * 2, pf_law, rng, ratio=2 * TPP)
    other = dataclasses.replace(other, values=other.values * 1.5)
    stopped = ladder_run("r5-half", 8e5 * 2, pf_law, rng, upto=0.5)
    stopped = dataclasses.replace(stopped, values=stopped.values * 1.5, finished=False)
    assert core.size_order_warnings(runs[:3] + [other, stopped]) == []


def test_a_target_lr_in_another_unit_or_off_the_rungs_trend_is_caught():
    runs, hero = ladder(mp_law, seed=1, n_sizes=4)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    fast = dataclasses.replace(FAST, backtest=False)
    assert not any("peak LR" in w for w in core.predict(runs, blank, hero.steps, fast).warnings)  # on the trend
    # a typo: ten times the peak. Every law still predicts; the warning names it
    typo = dataclasses.replace(blank, lrs=blank.lrs * 10)
    res = core.predict(runs, typo, hero.steps, fast)
    (w,) = [w for w in res.warnings if "peak LR" in w]
    assert "is 10× the power law in size" in w and "typo" in w and "multipower" not in res.failed
    # rungs that logged the schedule's multiplier (peak 1) beside a target in LR units: the curve laws refuse
    multiplier = [dataclasses.replace(r, lrs=r.lrs / r.lrs.max()) for r in runs]
    res = core.predict(multiplier, blank, hero.steps, fast)
    assert "one unit" in res.failed["multipower"] and "schedule multiplier" in res.failed["multipower"]
    assert res.method == "per-fraction" and any("peak LR" in w for w in res.warnings)


def test_a_run_imported_twice_under_two_names_is_warned():
    runs, _ = ladder(pf_law, seed=2, n_sizes=4)
    assert core.copies_warning(runs) == []
    (w,) = core.copies_warning(runs + [dataclasses.replace(runs[1], name="r1-copy")])
    assert "'r1' and 'r1-copy'" in w and "imported or pulled twice" in w
    (w,) = core.copies_warning(runs + [runs[1]])  # one name twice (pulled from its folder and its wandb files)
    assert w.startswith("the rung 'r1' is there twice, with the very same evals")
    (w,) = core.copies_warning(runs + runs[1:])  # every rung but the smallest from two sources
    assert w.startswith(f"the rung 'r1' (and {len(runs) - 2} more such rungs) is there twice")
    reseeded = dataclasses.replace(runs[1], name="r1-seed2", values=runs[1].values * 1.001)
    assert core.copies_warning(runs + [reseeded]) == []  # another seed is another run


def test_token_ratios_no_run_trains_at_are_warned_and_named_when_none_match():
    runs, hero = ladder(pf_law, seed=2, n_sizes=4)
    assert core.ratio_warning(runs + [hero]) == []
    millions = [dataclasses.replace(r, n_params=r.n_params / 1e6) for r in runs]  # N written in millions
    (w,) = core.ratio_warning(millions + [hero])
    assert w.startswith("'r0' (and 7 more) trains at 2e+07 tokens per parameter") and "millions" in w
    fast = dataclasses.replace(FAST, method="per-fraction", backtest=False)
    with pytest.raises(FitError, match=r"the rungs train at 2e\+07, 4e\+07 tokens per parameter"):
        core.predict(millions, hero, hero.steps, fast)


def test_a_target_without_its_parameter_count_is_told_to_give_it_not_a_wider_ratio_tolerance():
    """A target of fit FLOPs per token alone reads its token ratio per FLOPs ÷ 6 (16.6 on OLMo's 3.2B, which trains at
    20 per N, as its rungs do): the error advised --ratio-tol 0.21, which then printed the false 16.57."""
    runs, hero = ladder(pf_law, seed=2, n_sizes=4)
    runs = [r for r in runs if "-2x" not in r.name]
    attention = dataclasses.replace(hero, flops_per_token=hero.flops_per_token * 1.2, n_params=None)
    fast = dataclasses.replace(FAST, method="per-fraction", backtest=False)
    with pytest.raises(FitError, match=r"the target gives no active_params, so its 16\.67 tokens per parameter are "
                                       r"counted per fit FLOPs per token ÷ 6, the rungs' per N: give the target's "
                                       r"active_params") as caught:
        core.predict(runs, attention, attention.steps, fast)
    assert "--ratio-tol" not in str(caught.value)
    assert core.predict(runs, hero, hero.steps, fast).method == "per-fraction"  # with its N


def test_a_law_whose_own_band_missed_the_held_out_size_is_warned_of():
    """On a ladder of one length per size the backtest showed the chosen law's own 90% band holding 11% of the held-out
    1.3B's evals, and the prediction said nothing of it; its band then held 12% of the 3.2B's early evals at 0.5×C."""
    runs, hero = ladder(pf_law, seed=4, n_sizes=5)
    one = [r for r in runs if "-2x" not in r.name]
    fast = dataclasses.replace(FAST, method="per-fraction")
    clean = core.predict(one, hero, hero.steps, fast)
    assert not [w for w in clean.warnings if "own 90% band held" in w]
    off = [dataclasses.replace(r, values=r.values * 1.03) if r.name == "r4" else r for r in one]  # the largest, 3% up
    res = core.predict(off, hero, hero.steps, fast)
    held = [s for s in res.backtest if s.method == "per-fraction" and not s.failed]
    share = np.mean(np.concatenate([s.inside90 | (np.abs(s.errors) <= core.MEASURED_TO) for s in held]))
    (said,) = [w for w in res.warnings if "own 90% band held" in w]
    assert share < core.OWN_BAND_HELD and said.startswith(
        f"in the backtest the per-fraction law's own 90% band held {share:.0%} of the held-out size's "
        f"{sum(s.inside90.size for s in held)} evals: its band here adds")


def test_rungs_of_one_eval_each_are_named_as_the_reason_no_curve_law_applies():
    runs, hero = ladder(pf_law, seed=2, n_sizes=4)
    finals = [dataclasses.replace(r, steps=r.steps[-1:], values=r.values[-1:]) for r in runs]  # only final losses
    fast = dataclasses.replace(FAST, method="per-fraction", backtest=False)
    with pytest.raises(FitError, match=r"8 rungs \(r0, .*\) have fewer than 3 evals, and a curve needs 3 or more") as e:
        core.predict(finals, hero, hero.steps, fast)
    assert "`ladder fit endpoint` fits those at one token ratio, `ladder fit surface` at several" in str(e.value)


def test_a_rung_of_two_evals_is_named_as_left_out_of_the_curve_laws():
    runs, hero = ladder(pf_law, seed=2, n_sizes=4)
    runs = [r for r in runs if r.token_ratio < 1.5 * TPP]  # one curve per size: 4 sizes
    two = [dataclasses.replace(r, steps=r.steps[-2:], values=r.values[-2:]) if i == 2 else r for i, r in enumerate(runs)]
    res = core.predict(two, hero, hero.steps, dataclasses.replace(FAST, method="auto"))
    assert any(w.startswith(f"1 rung ({runs[2].name}) has fewer than 3 evals: every curve law leaves it out")
               for w in res.warnings)
    assert "3 sizes with 3 or more evals, too few for any law without the largest" in res.why


def test_a_crashed_rung_s_logged_lr_and_rungs_without_lr_keep_their_shape():
    from fits.runs import same_shape

    rng = np.random.default_rng(3)
    runs = [ladder_run(f"r{i}", n, pf_law, rng) for i, n in enumerate(1e5 * 2.0 ** np.arange(4))]
    hero = ladder_run("hero", 3e6, pf_law, rng, noise=0.0)
    # a rung that stopped at 80%, its LR logged up to there: the same schedule as far as it went
    crashed = ladder_run("r3", 8e5, pf_law, rng, upto=0.8)
    crashed = dataclasses.replace(crashed, lrs=crashed.lrs[:int(crashed.steps[-1]) + 1])
    assert same_shape(crashed, hero)
    assert not same_shape(dataclasses.replace(crashed, lrs=np.full(crashed.lrs.size, 0.01)), hero)  # constant: not
    fast = dataclasses.replace(FAST, method="per-fraction", backtest=False)
    res = core.predict(runs[:3] + [crashed], hero, hero.steps, fast)
    assert "r3" in res.outcomes["per-fraction"].params["runs"] and not any("not its schedule shape" in w for w in res.warnings)
    # rungs with no LR beside a target with one: assumed, and said
    bare = [dataclasses.replace(r, lrs=None) for r in runs[:2]] + runs[2:]
    res = core.predict(bare, hero, hero.steps, fast)
    (w,) = [w for w in res.warnings if "give no LR" in w]
    assert w.startswith("2 of the 4 rungs") and "'r0'" not in w and "r0, r1" in w
    assert "schedule shape (assumed for the 2 that give no LR)" in res.outcomes["per-fraction"].why


def test_one_curve_per_size_leaves_the_curve_laws_out():
    rng = np.random.default_rng(5)
    runs = [ladder_run(f"r{i}", n, mp_law, rng) for i, n in enumerate(1e5 * 2.0 ** np.arange(4))]
    hero = ladder_run("hero", 3e6, mp_law, rng, noise=0.0)
    res = core.predict(runs, hero, hero.steps, FAST)
    assert res.method == "per-fraction" and "multipower" in res.failed
    assert "curves (lengths or schedules) at each of 2 sizes" in res.failed["multipower"]


def test_seed_copies_and_a_run_stopped_on_a_longer_path_are_not_other_schedules():
    rng = np.random.default_rng(5)
    sizes_ = 1e5 * 2.0 ** np.arange(4)
    seeds = [ladder_run(f"r{i}-s{s}", n, mp_law, rng) for i, n in enumerate(sizes_) for s in range(2)]
    hero = ladder_run("hero", 3e6, mp_law, rng, noise=0.0)
    res = core.predict(seeds, hero, hero.steps, FAST)
    assert "multipower" in res.failed and "seed copies" in res.failed["multipower"]
    assert "0 of 4 sizes with 2 or more" in res.failed["multipower"]
    # a copy stopped at half its run took the same LRs as far as it went: still one schedule per size
    stopped = [ladder_run(f"r{i}-half", n, mp_law, rng, upto=0.5) for i, n in enumerate(sizes_)]
    both = [ladder_run(f"r{i}", n, mp_law, rng) for i, n in enumerate(sizes_)] + stopped
    assert "multipower" in core.predict(both, hero, hero.steps, FAST).failed
    # a copy whose LR was logged every 40 steps is read linearly between its points, which cuts the warmup's
    # corner: still the same schedule, and neither the law nor the answer depends on how often a run logged its LR
    logged = []
    for i, n in enumerate(sizes_):
        run = ladder_run(f"r{i}-logged", n, mp_law, rng)
        at = np.arange(0, run.planned_steps + 1, 40)
        logged.append(dataclasses.replace(run, lrs=lrs_from_logged(at, run.lrs[at], run.planned_steps)))
    exact = [ladder_run(f"r{i}", n, mp_law, rng) for i, n in enumerate(sizes_)]
    assert any(np.max(np.abs(a.lrs - b.lrs)) > 0.05 * a.lrs.max() for a, b in zip(exact, logged))
    assert "seed copies" in core.predict(exact + logged, hero, hero.steps, FAST).failed["multipower"]
    # a second length at each size is another schedule, and the law is fitted
    longer = [ladder_run(f"r{i}-2x", n, mp_law, rng, ratio=2 * TPP) for i, n in enumerate(sizes_)]
    two = [ladder_run(f"r{i}", n, mp_law, rng) for i, n in enumerate(sizes_)] + longer
    assert "multipower" not in core.predict(two, hero, hero.steps, FAST).failed


def test_an_edit_no_two_schedules_of_the_ladder_test_carries_its_own_size_in_the_band():
    """An edited target's change is the multi-power law's annealing term, its shape held at published values: with
    one schedule per size nothing in the ladder tests it, so the band carries the change's own size as one sd and
    says so; a second length at each size tests it, and the band is the law's own."""
    pf = dataclasses.replace(FAST, method="per-fraction", backtest=False)
    for second in (False, True):
        runs, hero = ladder(mp_law, seed=3, n_sizes=4)
        if not second:
            runs = [r for r in runs if not r.name.endswith("-2x")]
        T = hero.planned_steps
        at, end = int(0.3 * T), int(0.6 * T)  # the horizon cut to 60% at 30%: the decay re-aimed
        cut = hero.lrs[:end + 1].copy()
        cut[at:] = np.linspace(hero.lrs[at], hero.lrs[-1], end + 1 - at)
        blank = dataclasses.replace(hero, steps=np.zeros(0, np.int64), values=np.zeros(0))
        steps = hero.steps[hero.steps <= end]
        res = core.predict(runs, dataclasses.replace(blank, lrs=cut, reference_lrs=hero.lrs), steps, pf)
        plan = core.predict(runs, blank, steps, pf)
        change = res.band.median[-1] - plan.band.median[-1]
        assert change < -0.01 * plan.band.median[-1]  # the cut decays sooner, and lands lower
        untested = cand.EDIT_UNTESTED in res.warnings
        assert untested == (not second)
        assert ("known to its order only" in res.outcomes["per-fraction"].why) == (not second)
        below, above = res.band.median[-1] - res.band.lo90[-1], res.band.hi90[-1] - res.band.median[-1]
        if untested:
            assert min(below, above) >= Z90 * abs(change) - 1e-12
        truth = MP_LAW.predict(steps[-1:], cut, hero.n_params)[0]
        assert res.band.lo90[-1] <= truth <= res.band.hi90[-1]


def test_a_refit_whose_edit_changes_the_loss_by_more_than_the_loss_is_left_out_of_the_edits_spread(monkeypatch):
    """On a per-step train loss one of the multi-power law's refits without a size changed the loss by 24 nats, and
    the band read 0–31.7 around 1.92; such a refit found no law, and is left out and said."""
    pf = dataclasses.replace(FAST, method="per-fraction", backtest=False)
    runs, hero = ladder(mp_law, seed=3, n_sizes=4)
    T = hero.planned_steps
    at, end = int(0.3 * T), int(0.6 * T)
    cut = hero.lrs[:end + 1].copy()
    cut[at:] = np.linspace(hero.lrs[at], hero.lrs[-1], end + 1 - at)
    target = dataclasses.replace(hero, steps=np.zeros(0, np.int64), values=np.zeros(0), lrs=cut,
                                 reference_lrs=hero.lrs)
    steps = hero.steps[hero.steps <= end]
    sane = core.predict(runs, target, steps, pf)
    refits = CurveLaw.refits

    class Lost:  # a refit that found no law: its change from one schedule to the other is 30 nats
        def predict(self, at_steps, lrs, scale):
            return np.full(len(at_steps), 30.0 if len(lrs) == len(cut) else 0.0)

    monkeypatch.setattr(CurveLaw, "refits", lambda self: [*refits(self), Lost()])
    cand._FITTED.clear()
    res = core.predict(runs, target, steps, pf)
    assert "(1 of its 5 refits without a size left out: it changed the loss by more than the loss itself)" in \
        res.outcomes["per-fraction"].why
    np.testing.assert_allclose(res.band.hi90, sane.band.hi90, rtol=1e-9)  # the band is the one without it


def test_the_band_is_never_narrower_than_the_carried_backtest_error():
    runs, hero = ladder(mp_law, seed=1, noise=0.01)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    res = core.predict(runs, blank, hero.steps, dataclasses.replace(FAST, method="per-fraction"))
    distance = np.log(hero.flops_per_token / sizes(runs)[-1])
    carried = core.carried_error(res.backtest, "per-fraction", distance, hero.steps / hero.planned_steps)
    half = np.minimum(res.band.hi90 - res.band.median, res.band.median - res.band.lo90) / res.band.median
    assert np.all(carried > 0)
    assert np.all(half >= carried * (1 - 1e-9))
    # carried errors grow with the distance, in proportion to its log
    far = core.carried_error(res.backtest, "per-fraction", 2 * distance, hero.steps / hero.planned_steps)
    np.testing.assert_allclose(far, 2 * carried)


def test_the_prediction_states_what_sets_its_band_at_the_end():
    runs, hero = ladder(mp_law, seed=1, noise=0.01)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    res = core.predict(runs, blank, hero.steps, dataclasses.replace(FAST, method="per-fraction"))
    p = res.parts()
    half = lambda b: (b.hi90[-1] - b.lo90[-1]) / 2 / b.median[-1]  # noqa: E731
    assert p["band"] == pytest.approx(half(res.band)) and p["own"] == pytest.approx(half(res.candidates["per-fraction"]))
    distance = np.log(hero.flops_per_token / sizes(runs)[-1])
    assert p["floor"] == pytest.approx(core.UNTESTED_ERROR * distance * 1.6448536, rel=1e-6)
    assert p["carried"] > 0 and p["band"] >= max(p["own"], p["carried"], p["floor"])
    other = res.candidates["multipower"].median[-1]
    assert p["laws"] == pytest.approx(abs(other / res.candidates["per-fraction"].median[-1] - 1))
    assert p["below"] + p["above"] == pytest.approx(2 * p["band"])
    reach = (f"−{p['below']:.1%} / +{p['above']:.1%} (±{p['band']:.1%} on average)"
             if abs(p["above"] - p["below"]) > 0.1 * p["band"] else f"±{p['band']:.1%}")
    assert (f"At the end the 90% band reaches {reach}: the law's own ±{p['own']:.1%}, the larger of the backtest's "
            f"error carried (±{p['carried']:.1%}) and the floor (±{p['floor']:.1%}) and the farthest other law's "
            f"median, {p['laws']:.1%} away, added in quadrature") in res.why
    # the parts add as the text says (the band's own sides are summed one by one: a lopsided one adds near it)
    assert p["band"] == pytest.approx(np.sqrt(p["own"] ** 2 + max(p["carried"], p["floor"]) ** 2 + p["laws"] ** 2),
                                      rel=0.05)


def test_a_target_below_the_rungs_is_an_extrapolation_too():
    """A run smaller than the smallest rung is as far out as one larger than the largest: the floor and
    the carried error grow with log(smallest rung / target); one between the rungs is 0 e-folds out."""
    runs, _ = ladder(pf_law, seed=1, noise=0.01)
    rng = np.random.default_rng(5)
    settings = dataclasses.replace(FAST, method="per-fraction")
    small = ladder_run("small", sizes(runs)[0] / 6 / 8, pf_law, rng, noise=0.0)
    res = core.predict(runs, dataclasses.replace(small, steps=np.zeros(0), values=np.zeros(0)), small.steps, settings)
    assert res.distance == pytest.approx(np.log(8.0))
    assert res.parts()["floor"] == pytest.approx(core.UNTESTED_ERROR * np.log(8.0) * 1.6448536, rel=1e-6)
    assert res.parts()["band"] >= res.parts()["floor"]
    inside = ladder_run("inside", sizes(runs)[1] / 6 * 1.5, pf_law, rng, noise=0.0)
    res = core.predict(runs, dataclasses.replace(inside, steps=np.zeros(0), values=np.zeros(0)), inside.steps, settings)
    assert res.distance == 0.0 and res.parts()["floor"] == 0.0


def test_a_named_method_and_the_ensemble():
    runs, hero = ladder(pf_law, seed=2)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    res = core.predict(runs, blank, hero.steps, dataclasses.replace(FAST, method="ensemble"))
    pf, m = res.candidates["per-fraction"].median, res.candidates["multipower"].median
    np.testing.assert_allclose(res.band.median, (pf + m) / 2, rtol=1e-12)  # the mean of the laws, equal weights
    assert res.weights == {"per-fraction": 1.0, "multipower": 1.0}
    assert "the mean of per-fraction and multipower, equal weights" in res.why
    # its 90% band holds both laws' medians (the spread across forms)
    assert np.all(res.band.lo90 <= np.minimum(pf, m) + 1e-12) and np.all(np.maximum(pf, m) - 1e-12 <= res.band.hi90)
    with pytest.raises(FitError, match="unknown method"):
        core.predict(runs, blank, hero.steps, dataclasses.replace(FAST, method="cubic"))


def test_token_ratios_within_the_tolerance_are_one_ratio():
    rng = np.random.default_rng(3)
    runs = [ladder_run(f"r{i}", n, pf_law, rng, ratio=TPP * (1 + 0.003 * i)) for i, n in enumerate(1e5 * 2.0 ** np.arange(4))]
    hero = ladder_run("hero", 4e6, pf_law, rng, ratio=TPP)
    assert all(same_ratio(r, hero) for r in runs)
    assert not same_ratio(dataclasses.replace(runs[0], ratio=TPP * 1.02), hero)
    out = core.predict(runs, hero, hero.steps, dataclasses.replace(FAST, method="per-fraction", backtest=False))
    assert np.all(np.isfinite(out.band.median))
    strict = dataclasses.replace(FAST.options, ratio_tol=0.001)
    with pytest.raises(FitError, match="per-fraction law needs 3 runs") as e:
        core.predict(runs, hero, hero.steps, core.Settings(method="per-fraction", options=strict, backtest=False))
    assert "a ratio tolerance of 1% (--ratio-tol 0.01) would count 4 of them" in str(e.value)  # 0.9% off at most
    with pytest.raises(FitError) as e:  # 2× off: no tolerance is offered
        core.predict(runs, dataclasses.replace(hero, ratio=2 * TPP), hero.steps,
                     core.Settings(method="per-fraction", options=strict, backtest=False))
    assert "ratio tolerance" not in str(e.value)


def test_a_crashed_run_enters_with_the_evals_it_logged():
    rng = np.random.default_rng(4)
    ns = 1e5 * 2.0 ** np.arange(4)
    runs = [ladder_run(f"r{i}", n, pf_law, rng, upto=0.8 if i == 3 else 1.0) for i, n in enumerate(ns)]
    hero = ladder_run("hero", ns[-1] * 6, pf_law, rng, noise=0.0)
    res = core.predict(runs, hero, hero.steps, FAST)
    assert not runs[3].finished and runs[3].fractions.max() <= 0.8
    assert np.max(np.abs(res.band.median / hero.values - 1)) < 0.015


def test_the_per_fraction_law_predicts_no_step_past_the_last_fraction_the_rungs_reached():
    rng = np.random.default_rng(4)
    ns = 1e5 * 2.0 ** np.arange(4)
    runs = [ladder_run(f"r{i}", n, pf_law, rng, upto=0.8) for i, n in enumerate(ns)]  # every rung's evals end at 80%
    hero = ladder_run("hero", ns[-1] * 6, pf_law, rng, noise=0.0)
    settings = dataclasses.replace(FAST, candidates=("per-fraction",))
    steps = np.sort(np.r_[hero.steps, round(0.81 * hero.planned_steps)])  # one eval 1% of the plan past the rungs'
    res = core.predict(runs, hero, steps, settings)
    g = steps / hero.planned_steps
    late = g > 0.8 + 1e-3  # a step past the rungs' last share: it would be their last value held flat
    assert late.any() and np.isnan(res.band.median[late]).all() and np.isnan(res.band.lo90[late]).all()
    assert np.isfinite(res.band.median[g == 0.8]).all()
    assert np.isfinite(res.band.median[(g >= 0.1) & ~late]).all()  # no value held flat to the end
    scored = np.isin(steps, hero.steps) & ~late & (g >= 0.1)
    assert np.max(np.abs(res.band.median[scored] / hero.values[np.isin(hero.steps, steps[scored])] - 1)) < 0.015
    whole = core.predict([ladder_run(f"r{i}", n, pf_law, np.random.default_rng(i)) for i, n in enumerate(ns)],
                         hero, hero.steps, settings)
    g = hero.fractions
    assert np.isfinite(whole.band.median[g >= 0.1]).all()  # rungs to the end of their plans: predicted to the end
    # a last eval nearer the end than the run's eval interval is its end (no later eval was due), as the store reads
    # it; one a whole interval before the end is not (an eval was due at the end)
    whole_runs = [ladder_run(f"r{i}", n, pf_law, np.random.default_rng(i)) for i, n in enumerate(ns)]
    near = [dataclasses.replace(r, steps=np.r_[r.steps[:-1], r.planned_steps - 2]) for r in whole_runs]
    assert cand.reach(near) == 1.0
    short = [dataclasses.replace(r, steps=r.steps[:-1], values=r.values[:-1], finished=False) for r in whole_runs]
    assert max(r.fractions[-1] for r in short) == pytest.approx(0.95, abs=0.01)
    # eval steps that round: 2 steps of a run past its last eval (one that counts steps from 0 logs 60% at 0.6·T − 1),
    # at most 0.5% of its plan (never under one step)
    assert cand.reach(short) == pytest.approx(max(r.fractions[-1] + min(2 / r.planned_steps, 0.005) for r in short))
    assert all(r.planned_steps > 400 for r in short)  # 2 steps under 0.5% of the plan: the 2 steps
    assert cand.reach([dataclasses.replace(r, finished=True) for r in short]) == 1.0  # said finished: its final
    assert cand.reach(runs) == pytest.approx(max(r.fractions[-1] + min(2 / r.planned_steps, 0.005) for r in runs))
    tiny = [dataclasses.replace(r, planned_steps=100, steps=np.arange(1, 81), values=np.linspace(4, 3, 80))
            for r in runs]  # 2 steps of 100 would be 2% of the plan: at most 0.5%, but never under one step
    assert cand.reach(tiny) == pytest.approx(0.81)


def test_the_backtest_scores_a_final_only_where_every_law_reached_it():
    rng = np.random.default_rng(5)
    ns = 1e5 * 2.0 ** np.arange(4)
    # the three smaller sizes' evals end at 60% of their plans (still training); the largest finished
    runs = [ladder_run(f"r{i}{tag}", n, mp_law, rng, ratio=ratio, upto=1.0 if i == 3 else 0.6)
            for i, n in enumerate(ns) for tag, ratio in (("", TPP), ("-2x", 2 * TPP))]
    rows = {s.method: s for s in core.backtest(runs, FAST)}
    assert set(rows) == {"per-fraction", "multipower", "ensemble"} and not any(s.failed for s in rows.values())
    # the per-fraction law predicts nothing past 60%: no law's final is set beside an error at 60%
    assert rows["per-fraction"].fractions.max() < 0.62 and rows["multipower"].fractions.max() == 1.0
    assert all(s.final_errors.size == 0 and s.score == s.mean_abs for s in rows.values())
    # and every method's mean |error| is over the evals every method predicted: none past the rungs' reach
    for s in rows.values():
        assert s.fractions[s.shared].max() < 0.62
        assert s.mean_abs == pytest.approx(np.mean(np.abs(s.errors[s.shared])))
    assert rows["multipower"].errors.size > rows["multipower"].shared.sum()  # its later errors kept, to carry out
    alone = core.backtest(runs, dataclasses.replace(FAST, candidates=("multipower",)))
    assert [s.final_errors.size for s in alone] == [2]  # the multi-power law alone reaches both held-out ends
    assert alone[0].score == pytest.approx(0.5 * (alone[0].final_abs + alone[0].mean_abs))
    hero = ladder_run("hero", ns[-1] * 4, mp_law, rng, noise=0.0)
    why = core.predict(runs, hero, hero.steps, FAST).why
    assert "mean |error| predicting the held-out largest size from the smaller ones; no held-out run's final is scored" in why


def test_past_the_rungs_reach_the_ensemble_is_carried_on_by_the_law_that_goes_on():
    x = np.linspace(1.0, 2.0, 11)
    lasting = Band(3.0 / x, 2.9 / x, 3.1 / x, 2.8 / x, 3.2 / x)
    stops = np.where(np.arange(11) <= 6, 1.0, np.nan)  # the per-fraction law ends at the rungs' reach
    short = Band(3.3 / x * stops, 3.25 / x * stops, 3.35 / x * stops, 3.2 / x * stops, 3.4 / x * stops)
    band = core.ensemble({"pf": short, "mp": lasting}, {"pf": 1.0, "mp": 1.0})
    assert np.isfinite(band.median).all() and np.isfinite(band.hi90).all()
    # up to the reach the mean of both; past it the lasting law's fall, from the mean's value at the reach
    assert band.median[6] == pytest.approx(3.15 / x[6])
    assert band.median[7:] == pytest.approx(3.15 / x[7:])
    # each bound keeps the mean's relative reach there where it is the wider
    rel = (band.hi90[6] - band.median[6]) / band.median[6]
    assert (band.hi90[7:] - band.median[7:]) / band.median[7:] == pytest.approx(np.full(4, rel))
    alone = core.ensemble({"pf": short}, {"pf": 1.0})
    assert np.isnan(alone.median[7:]).all()  # no law goes on: nothing is carried
    # a law that goes on with a wider band: its own relative reach past the step, on both sides
    wide = Band(3.0 / x, 2.4 / x, 3.6 / x, 2.0 / x, 4.2 / x)
    band, carried = core.ensemble_carried({"pf": short, "mp": wide}, {"pf": 1.0, "mp": 1.0})
    assert (carried.at, carried.by, carried.stopped) == (6, ("mp",), ("pf",))
    for attr, rel in (("lo50", 0.8), ("hi50", 1.2), ("lo90", 2.0 / 3), ("hi90", 1.4)):
        assert getattr(band, attr)[7:] / band.median[7:] == pytest.approx(np.full(4, rel)), attr
    # a law that goes on only part of the way: carried as far as it goes, and said
    ends = np.where(np.arange(11) <= 8, 1.0, np.nan)
    partial = Band(*(v * ends for v in (3.0 / x, 2.9 / x, 3.1 / x, 2.8 / x, 3.2 / x)))
    band, carried = core.ensemble_carried({"pf": short, "mp": partial}, {"pf": 1.0, "mp": 1.0})
    assert carried.at == 6 and np.isfinite(band.median[:9]).all() and np.isnan(band.median[9:]).all()
    with pytest.raises(FitError, match="a law of positive weight"):
        core.ensemble({"pf": short, "mp": lasting}, {"pf": 0.0, "mp": 0.0})


def test_rungs_still_training_get_a_final_from_the_ensemble_carried_on():
    rng = np.random.default_rng(8)
    ns = 1e5 * 2.0 ** np.arange(4)
    runs = [ladder_run(f"r{i}{tag}", n, mp_law, rng, ratio=ratio, upto=0.6)
            for i, n in enumerate(ns) for tag, ratio in (("", TPP), ("-2x", 2 * TPP))]
    hero = ladder_run("hero", ns[-1] * 4, mp_law, rng, noise=0.0)
    res = core.predict(runs, hero, hero.steps, dataclasses.replace(FAST, method="ensemble"))
    pf, mp = res.candidates["per-fraction"].median, res.candidates["multipower"].median
    i = int(np.flatnonzero(np.isfinite(pf))[-1])
    assert res.carried_from == hero.steps[i] and res.carried_by == ("multipower",)
    assert hero.fractions[i] == pytest.approx(0.6, abs=0.02) and np.isfinite(res.band.median[i:]).all()
    assert res.band.median[-1] / res.band.median[i] == pytest.approx(mp[-1] / mp[i])
    assert res.band.lo90[-1] <= mp[-1] <= res.band.hi90[-1]  # the band holds the law it rests on
    assert abs(res.band.median[-1] / hero.values[-1] - 1) < 0.02
    assert "carries the mean on" in res.why and any("rests on the multipower law alone" in w for w in res.warnings)
    full = core.predict(runs, hero, hero.steps, dataclasses.replace(FAST, method="per-fraction"))
    assert full.carried_from is None and np.isnan(full.band.median[-1])  # a law named alone is not carried


def test_two_sizes_cannot_be_backtested_and_say_so():
    runs, hero = ladder(mp_law, n_sizes=2)
    res = core.predict(runs, hero, hero.steps, FAST)
    assert res.backtest == () and res.method in ("multipower", "per-fraction")
    assert any("fewer than 3 sizes" in w for w in res.warnings)
    # no evidence of its own: the band assumes 1% (one sd) per e-fold of extrapolation, and says so
    assert any("not checked by a backtest" in w for w in res.warnings) and "assumed 1% per e-fold" in res.why
    assert "the floor ±" in res.why and "the backtest's error carried" not in res.why  # none to carry
    half = (res.band.hi90 - res.band.lo90) / 2 / res.band.median
    own = res.candidates[res.method]
    assert np.all(half >= core.Z90 * core.UNTESTED_ERROR * res.distance * 0.999)
    assert np.all(half > (own.hi90 - own.lo90) / 2 / own.median)
    assert res.distance == pytest.approx(np.log(8.0))


def test_a_target_off_the_rungs_batch_trend_is_warned():
    from fits.runs import batch_off_trend, batch_trend

    rng = np.random.default_rng(3)
    ns = 1e5 * 2.0 ** np.arange(4)
    runs = [dataclasses.replace(ladder_run(f"r{i}", n, pf_law, rng), tokens_per_step=2.0 * n**0.5) for i, n in enumerate(ns)]
    k, c, size, batch = batch_trend(runs)
    assert k == pytest.approx(0.5) and np.exp(c) == pytest.approx(2.0)
    np.testing.assert_allclose(size, ns)
    hero = ladder_run("hero", 8 * ns[-1], pf_law, rng, noise=0.0)
    on_trend = dataclasses.replace(hero, tokens_per_step=2.0 * hero.params**0.5)
    assert batch_off_trend(runs, on_trend) == pytest.approx(1.0)
    assert core.batch_warning(runs, dataclasses.replace(on_trend, tokens_per_step=1.4 * on_trend.tokens_per_step)) == []
    big = core.batch_warning(runs, dataclasses.replace(on_trend, tokens_per_step=2 * on_trend.tokens_per_step))
    small = core.batch_warning(runs, dataclasses.replace(on_trend, tokens_per_step=0.25 * on_trend.tokens_per_step))
    assert len(big) == 1 and "is 2× the power law" in big[0] and "may land above" in big[0]
    assert len(small) == 1 and "is 0.25× the power law" in small[0] and "may land below" in small[0]
    # one batch for every rung: the trend is flat
    flat = [dataclasses.replace(r, tokens_per_step=4096.0) for r in runs]
    assert batch_trend(flat)[0] == pytest.approx(0.0) and batch_off_trend(flat, hero) == pytest.approx(1.0)
    # the prediction carries it
    wide = dataclasses.replace(hero, tokens_per_step=3 * 4096.0, ratio=hero.token_ratio)  # the same plan in tokens
    res = core.predict(flat, wide, hero.steps, FAST)
    assert any("3× the power law" in w for w in res.warnings)


def test_bad_runs_are_refused_with_the_field_named():
    with pytest.raises(FitError, match="FLOPs per token must be a positive number"):
        Run("x", -1.0, 10.0, 100)
    with pytest.raises(FitError, match="strictly increasing"):
        Run("x", 1.0, 10.0, 100, steps=[5, 5], values=[1.0, 1.0])
    with pytest.raises(FitError, match="its value at step 6 is nan; the laws fit positive, finite losses"):
        Run("x", 1.0, 10.0, 100, steps=[5, 6], values=[1.0, np.nan])


@pytest.mark.parametrize("fields, says", [
    ({"flops_per_token": None}, "FLOPs per token must be a positive number, got None"),
    ({"planned_steps": "11420"}, "planned steps must be a positive number, got '11420'"),
    ({"planned_steps": 100.5}, "planned steps must be a whole number of optimizer steps, got 100.5"),
    ({"n_params": 0}, "n_params (active parameters), where known (else None), must be a positive number, got 0"),
    ({"n_params": -5.0}, "must be a positive number, got -5.0"),
    ({"finished": "False"}, "finished must be True or False, got 'False'"),
    ({"steps": [0.05, 0.1], "values": [3.0, 2.9]},
     "steps must be whole optimizer steps; got 0.05 at position 0; fractions of the plan? give step = fraction × 100 "
     "planned steps"),
    ({"steps": [10, 20.5], "values": [3.0, 2.9]}, "steps must be whole optimizer steps; got 20.5 at position 1"),
    ({"lrs": np.zeros(0)}, "lrs is empty; give the LR of every step from 0, or None"),
    ({"steps": [50, 100], "values": [3.0, 2.9], "lrs": np.full(2, 1e-3)},
     "lrs holds 2 values, short of its eval at step 100; give the LR of every step from 0 to its last eval (one "
     "value per step, not one per eval)"),
])
def test_a_run_given_the_wrong_kind_of_value_is_refused_with_it_named(fields, says):
    """Numbers of the wrong type were raw TypeErrors; fractions as steps were cast to 0 and 1, one LR per eval left
    the curve laws out with "the ladder has 0 sizes", and n_params 0 read as unknown."""
    base = {"name": "x", "flops_per_token": 6e5, "tokens_per_step": 10.0, "planned_steps": 100}
    with pytest.raises(FitError) as err:
        Run(**{**base, **fields})
    assert says in str(err.value)
    assert Run(**{**base, "n_params": float("nan")}).n_params is None  # a missing count read by pandas: unknown


def test_the_steps_to_predict_and_the_target_lrs_are_checked_before_any_fit():
    runs, hero = ladder(pf_law, n_sizes=4)
    T = hero.planned_steps
    good = np.arange(1, 21) * T // 20
    for steps, says in [(T, "give a 1-D array of its steps"), (good[None, :], "an array of shape (1, 20)"),
                        (np.zeros(0), "give a 1-D array"), (good[::-1], "strictly increasing"),
                        (np.arange(1, 21) / 20, "must be whole optimizer steps; got 0.05 at position 0; fractions of the plan?"),
                        (2 * good, f"short of step {2 * T:,} asked for")]:
        with pytest.raises(FitError, match=re.escape(says)):
            core.predict(runs, hero, steps, FAST)
    with pytest.raises(FitError, match=re.escape(f"target 'hero': lrs holds {T // 2:,} values, short of step {T:,}")):
        core.predict(runs, dataclasses.replace(hero, steps=np.zeros(0, np.int64), values=np.zeros(0),
                                               lrs=hero.lrs[:T // 2]), good, FAST)
    with pytest.raises(FitError, match="runs and the target must be fits.runs.Run records; got a dict"):
        core.predict(runs + [{"name": "r9"}], hero, good, FAST)
    as_tuple = core.predict(tuple(runs), hero, good, core.Settings(options=Options(n_boot=20), backtest=False))
    assert np.isfinite(as_tuple.band.median[-1])  # a tuple of runs (it was concatenated with a list, a TypeError)


def test_settings_round_trip():
    s = core.Settings(method="multipower", options=Options(smooth=3, E=1.2, n_boot=50))
    assert core.Settings.from_dict(s.to_dict()) == s
    # a record from before the curve laws profiled their floor re-predicts with the floor it was made with
    old = s.to_dict()
    del old["options"]["floor"]
    assert core.Settings.from_dict(old).options.floor == "zero" and s.options.floor == "profile"


def test_the_curve_laws_profile_their_floor_and_carry_it_in_the_band():
    runs, hero = ladder(mp_law, seed=0)  # the law's L0 is a pure power law in size: its floor is 0
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    named = dataclasses.replace(FAST, method="multipower", backtest=False)
    res = core.predict(runs, blank, hero.steps, named)
    zero = core.predict(runs, blank, hero.steps, dataclasses.replace(named, options=Options(n_boot=60, floor="zero")))
    got, plain = res.outcomes["multipower"], zero.outcomes["multipower"]
    assert got.params["floor_lo90"] == 0.0 <= got.params["floor"] <= got.params["floor_hi90"]
    assert got.params["floor_lo50"] <= got.params["floor"] <= got.params["floor_hi50"] <= got.params["floor_hi90"]
    assert "posterior median" in got.why and "floor" not in plain.params and "posterior" not in plain.why
    assert np.max(np.abs(res.band.median / hero.values - 1)) < 0.01
    # the band carries the predictions over the plausible floors: at least as wide as the floor-0 law's own
    own = res.candidates["multipower"]
    assert np.all(own.lo90 <= np.minimum(own.median, zero.band.median) + 1e-12)
    with pytest.raises(FitError, match="unknown floor 'lowest'"):
        CurveLaw("multipower", runs, Options(floor="lowest")).fit()


def test_a_ladder_s_curve_law_is_fitted_once_for_every_target():
    """Targets of one ladder (and the backtest's smaller ladders) share the fit, its floor profile and its jackknife;
    runs that differ in one eval, or other settings, fit anew."""
    runs, _ = ladder(mp_law, seed=3, n_sizes=3)
    first = CurveLaw("multipower", runs, Options())
    again = CurveLaw("multipower", [dataclasses.replace(r) for r in runs], Options(n_boot=7))
    assert again.fit() is first.fit() and again.floor_profile is first.floor_profile
    assert again.refits() is first.refits() and len(first.refits()) == 3
    # the jackknife leaves out one size per refit (the runs give N, so sizes are parameter counts, not FLOPs)
    assert [len(f.curves) for f in first.refits()] == [4, 4, 4]
    nudged = [dataclasses.replace(runs[0], values=runs[0].values * (1 + 1e-9))] + runs[1:]
    assert CurveLaw("multipower", nudged, Options()).fit() is not first.fit()
    assert CurveLaw("multipower", runs, Options(floor="zero")).fit() is not first.fit()
    renamed = [dataclasses.replace(runs[0], name="other")] + runs[1:]
    assert CurveLaw("multipower", renamed, Options()).fit().curves[0].name == "other"


def test_the_per_fraction_law_counts_compute_by_parameters_when_they_are_known():
    """Losses that follow 6·N·D while the FLOPs per token also count attention, a larger share of the small
    runs' (here 2× 6N at the smallest size, 1.33× at the largest rung, 1.14× at the hero): with N known the law is fitted on 6·N·D and
    lands on the hero; with only FLOPs it is fitted on them, and the small rungs' inflated compute steepens
    its slope, so it lands low."""
    runs, hero = ladder(pf_law)

    def with_attention(r: Run, known: bool) -> Run:
        inflated = r.flops_per_token * (1 + 1.0 * (r.n_params / 1e5) ** -0.4)
        return dataclasses.replace(r, flops_per_token=inflated, n_params=r.n_params if known else None, ratio=r.token_ratio)

    errs = {}
    for known in (True, False):
        rs = [with_attention(r, known) for r in runs]
        target = with_attention(hero, known)
        blank = dataclasses.replace(target, steps=np.zeros(0), values=np.zeros(0))
        res = core.predict(rs, blank, target.steps, dataclasses.replace(FAST, method="per-fraction"))
        errs[known] = res.band.median[-1] / hero.values[-1] - 1
        assert ("6·N·D" if known else "fit FLOPs") in res.outcomes["per-fraction"].why
    assert abs(errs[True]) < 0.003  # 8× in size, 0.2% noise
    assert errs[False] < errs[True] - 0.003


def test_a_widened_band_stops_at_zero_loss():
    from fits.uncertainty import Band, widen

    one = np.array([2.0, 2.0])
    band = widen(Band(one, one * 0.9, one * 1.1, one * 0.8, one * 1.2), np.array([0.1, 5.0]))
    assert band.lo90[0] == pytest.approx(2.0 - np.hypot(0.4, 1.6448536269514722 * 0.1))
    assert band.lo90[1] == 0.0 and band.lo50[1] == 0.0 and band.hi90[1] > 8.0


def test_why_says_when_a_better_scored_law_cannot_predict_the_target():
    runs, hero = ladder(mp_law)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0), lrs=None)  # no schedule given
    res = core.predict(runs, blank, hero.steps, FAST)
    assert "multipower" in res.failed and res.method == "per-fraction"
    assert res.scores()["multipower"] < res.scores()["per-fraction"]
    assert res.why.startswith("lowest backtest score of the laws that apply to this target")
    assert f"multipower scored lower ({res.scores()['multipower']:.2%}) but cannot predict it: " in res.why
    assert "ensemble scored lower" in res.why and "it needs two laws that apply" in res.why
    assert "assumed: the target gives no LR" in res.outcomes["per-fraction"].why
    assert any("the target gives no LR schedule" in w for w in res.warnings)


def test_a_target_below_the_ladder_is_warned_about():
    runs, hero = ladder(pf_law, seed=4)
    rng = np.random.default_rng(4)
    small = ladder_run("small", 2.5e4, pf_law, rng, noise=0.0)
    res = core.predict(runs, small, small.steps, FAST)
    assert any("the target is smaller than every rung (0.25×" in w for w in res.warnings)
    assert not any("smaller than every rung" in w for w in core.predict(runs, hero, hero.steps, FAST).warnings)
    long = ladder_run("long", 2e5, pf_law, rng, noise=0.0, ratio=10 * TPP)
    res = core.predict(runs, long, long.steps, dataclasses.replace(FAST, backtest=False))
    assert any("the target trains at 200 tokens per parameter, far outside the rungs' 20–40" in w for w in res.warnings)


def test_a_fixed_data_ladder_is_predicted_by_the_per_fraction_law():
    """Every size on the same tokens and schedule (as Pythia): no two rungs share a token ratio, so the per-fraction
    law takes the runs that share the target's tokens, where a fraction of the run is the same data for every size
    and the power law in C·g ∝ N carries the data term. Known truth: Epoch AI's Chinchilla surface at 300B tokens."""
    D, tps = 3e11, 2.0**21
    lrs = linear_lrs(int(D / tps), 3e-4)
    rng = np.random.default_rng(3)
    rungs = fixed_data_ladder(rng, [7e7, 1.6e8, 4.1e8, 1e9, 1.4e9, 2.8e9], D, EPOCH_CHINCHILLA, 0.002, tps, lrs=lrs)
    (hero,) = fixed_data_ladder(rng, [6.9e9], D, EPOCH_CHINCHILLA, 0.0, tps, lrs=lrs)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    assert len(cand.per_fraction_runs(rungs, blank, 0.01)) == 6  # none shares the hero's token ratio, all its tokens
    res = core.predict(rungs, blank, hero.steps, FAST)
    assert res.method == "per-fraction" and "fixed-data ladder" in res.outcomes["per-fraction"].why
    err = res.band.median / hero.values - 1
    assert abs(err[-1]) < 0.01 and np.nanmean(np.abs(err[1:])) < 0.01
    assert np.all((res.band.lo90[1:] <= hero.values[1:]) & (hero.values[1:] <= res.band.hi90[1:]))


def test_losses_beyond_any_nats_a_rising_prediction_and_rungs_of_another_shape_are_named():
    runs, hero = ladder(pf_law, seed=2)
    top = max(float(r.values.max()) for r in runs)
    nats = [dataclasses.replace(r, values=r.values * 6.0 / top) for r in runs]  # 6 nats at the most
    as_ppl = [dataclasses.replace(r, values=np.exp(r.values)) for r in nats]
    assert core.unit_warning(nats) == [] and "perplexities" in core.unit_warning(as_ppl)[0]
    g = np.linspace(0.05, 1.0, 20)
    falling = Band(*(3.0 - g for _ in range(5)))
    assert core.rising(falling, g) == []
    bent = 3.0 - g + 0.3 * np.maximum(g - 0.6, 0.0)  # falls more slowly past 60%: no rise
    up = Band(*(np.where(g > 0.6, 2.4 + 0.2 * (g - 0.6), 3.0 - g) for _ in range(5)))
    assert core.rising(Band(*(bent for _ in range(5))), g) == []  # still falling, more slowly
    (warning,) = core.rising(up, g)
    assert "rises 3.3% above its earlier lowest by 100%" in warning
    # a rung with another warmup shares the hero's token ratio but is left out, by name
    other = dataclasses.replace(runs[0], lrs=linear_lrs(runs[0].planned_steps, 0.01, warmup=0.3))
    assert [r.name for r in cand.other_shape([other, *runs[1:]], hero, 0.01)] == [other.name]
    # and the per-fraction law that predicts without it says so, where more than 3 runs are left
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    res = core.predict([other, *runs[1:]], blank, hero.steps,
                       core.Settings(method="per-fraction", options=Options(n_boot=20), backtest=False))
    why = res.outcomes["per-fraction"].why
    assert f"1 rung ({other.name}) shares the target's token ratio or tokens but not its schedule shape" in why
    assert other.planned_steps >= cand.SHORT_RUN and "train such rungs longer" not in why
    # a rung of a few dozen steps: the likely cause, and what to do, are said
    short = cand._left_out_note([dataclasses.replace(other, planned_steps=26)])
    assert f"; it trains few steps ({other.name} 26 steps), where a step of warmup or decay is a large part of the " \
           "run: train such rungs longer" in short


def test_a_pinned_asymptote_no_law_can_take_is_refused_whichever_method_predicts():
    """E above the ladder's losses: the per-fraction law cannot fit it, and the choice does not pass over it to a law
    that takes no E (the user's value would be dropped without a word)."""
    from fits.errors import GivenValueError

    runs, hero = ladder(mp_law, seed=0)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    high = 10.0 * max(float(r.values.max()) for r in runs)
    with pytest.raises(GivenValueError, match=r"pinned E = .* \(--E\) must be in \[0, the smallest loss"):
        core.predict(runs, blank, hero.steps, core.Settings(options=Options(n_boot=20, E=high)))


def test_a_refit_count_no_law_uses_is_said():
    runs, at_ratio = ladder(mp_law, seed=1)
    hero = ladder_run("hero", 1.6e6 * 8, mp_law, np.random.default_rng(3), noise=0.0, ratio=3 * TPP)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))  # no rung at its token ratio
    res = core.predict(runs, blank, hero.steps, core.Settings(options=Options(n_boot=50)))
    assert res.method == "multipower" and "per-fraction" in res.failed
    (said,) = [w for w in res.warnings if "(--n-boot)" in w]
    assert said.startswith("refits 50 (--n-boot) is a setting of the per-fraction law, which does not predict this "
                           "target (per-fraction: the per-fraction law needs 3 runs with the target's token ratio")
    assert said.endswith("it changes nothing here")
    plain = core.predict(runs, blank, hero.steps, core.Settings())
    assert not [w for w in plain.warnings if "(--n-boot)" in w]
    np.testing.assert_array_equal(plain.band.median, res.band.median)
    steps, at_ratio = at_ratio.steps, dataclasses.replace(at_ratio, steps=np.zeros(0), values=np.zeros(0))
    used = core.predict(runs, at_ratio, steps, core.Settings(options=Options(n_boot=50)))
    assert "per-fraction" in used.outcomes and not [w for w in used.warnings if "(--n-boot)" in w]


def test_a_floor_setting_no_law_uses_is_said():
    runs, hero = ladder(pf_law, seed=1)
    one_each = [r for r in runs if not r.name.endswith("-2x")]  # one curve per size: the curve laws do not predict
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    res = core.predict(one_each, blank, hero.steps, core.Settings(options=Options(n_boot=20, floor="zero")))
    (said,) = [w for w in res.warnings if "(--floor)" in w]
    assert said.startswith("floor 'zero' (--floor) is a setting of the curve laws, and none predicts this target")
    assert said.endswith("it changes nothing here") and "multipower:" in said
    plain = core.predict(one_each, blank, hero.steps, core.Settings(options=Options(n_boot=20)))
    assert not [w for w in plain.warnings if "(--floor)" in w]
    np.testing.assert_array_equal(plain.band.median, res.band.median)
    both = core.predict(runs, blank, hero.steps, core.Settings(options=Options(n_boot=20, floor="zero")))
    assert not [w for w in both.warnings if "(--floor)" in w]  # the curve laws predict: the floor is used


def test_a_target_too_little_known_for_a_law_keeps_how_far_that_law_lay_in_the_backtest():
    """A target that declares no LR schedule: the multi-power law cannot predict it, and the per-fraction law
    predicts alone. The band keeps how far the two laws' predictions of the held-out size lay apart, carried to the
    target as the backtest's errors are: knowing less of the target gives no narrower band."""
    rng = np.random.default_rng(7)
    ns = 1e5 * 2.0 ** np.arange(4)
    runs = [ladder_run(f"r{i}{tag}", n, mp_law, rng, ratio=ratio) for i, n in enumerate(ns)
            for tag, ratio in (("", TPP), ("-2x", 2 * TPP))]
    hero = dataclasses.replace(ladder_run("hero", ns[-1] * 4, mp_law, rng, noise=0.0), lrs=None)
    res = core.predict(runs, hero, hero.steps, FAST)
    assert res.method == "per-fraction" and "multipower" in res.failed and res.absent() == ["multipower"]
    alone = core.predict(runs, hero, hero.steps, dataclasses.replace(FAST, candidates=("per-fraction",)))
    held = {(s.method, s.distance): s for s in res.backtest if not s.failed}
    gaps = [core.carried_gap(res.backtest, "per-fraction", ["multipower"], res.distance, res.fractions[-1:])[0]]
    assert gaps[0] > 0 and any(m == "multipower" for m, _ in held)
    p, q = res.parts(), alone.parts()
    assert p["gap"] == pytest.approx(gaps[0]) and q["gap"] == 0.0
    assert p["band"] == pytest.approx(np.hypot(q["band"], p["gap"]), rel=1e-3)  # added in quadrature, at 90%
    assert "(the multipower law could not predict the target, which is no reason for a narrower band)" in res.why
    assert f"how far the multipower law lay from it in the backtest, carried (±{p['gap']:.1%})" in res.why


def test_a_rung_that_is_the_target_under_another_name_is_warned_of():
    rng = np.random.default_rng(8)
    runs = [ladder_run(f"r{i}", n, pf_law, rng) for i, n in enumerate(1e5 * 2.0 ** np.arange(4))]
    settings = dataclasses.replace(FAST, candidates=("per-fraction",), backtest=False)
    itself = dataclasses.replace(runs[-1], name="hero-planned")
    (said,) = [w for w in core.predict(runs, itself, itself.steps, settings).warnings if "under another name" in w]
    assert said.startswith("the rung 'r3' has the target's size, batch and planned steps: is it the target "
                           "'hero-planned' under another name?")
    larger = dataclasses.replace(itself, flops_per_token=1.5 * itself.flops_per_token)  # a larger run of that plan
    assert not [w for w in core.predict(runs, larger, larger.steps, settings).warnings if "under another name" in w]


def _cosine(total: int, peak: float, warmup: float = 0.05, floor: float = 0.1) -> np.ndarray:
    s = np.arange(total + 1, dtype=np.float64)
    w = max(1, round(warmup * total))
    decay = floor + (1 - floor) * 0.5 * (1 + np.cos(np.pi * np.clip((s - w) / (total - w), 0, 1)))
    return peak * np.where(s < w, s / w, decay)


def _wsd(total: int, peak: float, cooldown: float = 0.2) -> np.ndarray:
    s = np.arange(total + 1, dtype=np.float64)
    start = (1 - cooldown) * total
    return peak * np.where(s < 0.05 * total, s / (0.05 * total), np.clip((total - s) / (total - start), 0, 1))


def _lr_run(name: str, total: int, lrs: np.ndarray, ratio: float = 20.0) -> Run:
    """A run of `total` steps of 1,000 tokens at `ratio` tokens per parameter, with the LR `lrs`."""
    n = 1000.0 * total / ratio
    return Run(name, 6 * n, 1000, total, np.array([total]), np.array([3.0]), lrs=lrs, n_params=n)


def test_an_lr_logged_part_way_is_carried_on_in_the_shape_of_the_rungs_at_its_ratio():
    from fits.runs import lrs_in_the_ladders_shape

    rungs = [_lr_run(f"c{t}", t, _cosine(t, 0.004)) for t in (400, 800, 1600)]
    rungs += [_lr_run(f"w{t}", t, _wsd(t, 0.004), ratio=100.0) for t in (2000, 4000)]  # another ratio, another shape
    truth = _cosine(5000, 0.002)  # a larger run's lower peak
    held = np.r_[truth[:2501], np.full(2500, truth[2500])]
    target = _lr_run("hero", 5000, held)
    lrs, like, why, told = lrs_in_the_ladders_shape(target, 2500, rungs)
    assert like == "c1600" and len(lrs) == len(held) and why == "" and told
    np.testing.assert_array_equal(lrs[:2501], truth[:2501])  # what it logged stays as logged
    np.testing.assert_allclose(lrs[500:], truth[500:], rtol=2e-3)
    # logged to 10% of the plan (compared from 5% on, past its warmup): carried on as well
    lrs, like, _, told = lrs_in_the_ladders_shape(_lr_run("hero", 5000, np.r_[truth[:501], np.full(4500, truth[500])]),
                                                  500, rungs)
    assert like == "c1600" and not told  # a cosine hardly falls from 5% to 10%: a constant LR would agree as well
    np.testing.assert_allclose(lrs[500:], truth[500:], rtol=2e-3)
    # a target whose LR left the rungs' shape (held at its peak where theirs decayed), or logged over under 8%
    flat = np.r_[truth[:251], np.full(4750, 0.002)]
    left = lrs_in_the_ladders_shape(_lr_run("hero", 5000, flat), 2500, rungs)
    assert left.lrs is None and left.why_not.startswith("its logged LR lies ") and "from the rungs' schedule shape " \
        "(c1600's) at the same fraction of the run, over the 3% that counts as one shape" in left.why_not
    short = lrs_in_the_ladders_shape(_lr_run("hero", 5000, np.r_[truth[:351], np.full(4650, truth[350])]), 350, rungs)
    assert short.lrs is None and short.why_not == "its LR is logged over under 8% of its plan, mostly warmup"
    # rungs at its ratio that do not share one shape: none is guessed
    mixed = rungs[:2] + [_lr_run("w1600", 1600, _wsd(1600, 0.004))]
    assert lrs_in_the_ladders_shape(target, 2500, mixed).why_not == \
        "the rungs at its token ratio do not share one schedule shape"
    # none at its ratio: every rung's, which here share no shape with it
    assert lrs_in_the_ladders_shape(target, 2500, rungs[3:]).lrs is None
    wsd = _wsd(5000, 0.002)
    lrs, like, _, told = lrs_in_the_ladders_shape(_lr_run("hero", 5000, np.r_[wsd[:2501], np.full(2500, wsd[2500])]),
                                                  2500, rungs[3:])
    assert like == "w4000" and not told  # in its stable phase: the cooldown to come is the rungs', assumed
    np.testing.assert_allclose(lrs, wsd, rtol=2e-3, atol=1e-9)


def test_the_ensemble_s_band_is_stated_with_the_parts_it_adds():
    """The ensemble's own band holds each law's median: the laws' spread is no further part added to it, and the
    parts the text adds in quadrature give the band."""
    runs, hero = ladder(mp_law, seed=1, noise=0.01)
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    res = core.predict(runs, blank, hero.steps, dataclasses.replace(FAST, method="ensemble"))
    p = res.parts()
    assert res.method == "ensemble" and p["laws"] > 0
    assert (f"the law's own ±{p['own']:.1%} (which holds each law's median, the farthest {p['laws']:.1%} away) and "
            f"the larger of the backtest's error carried (±{p['carried']:.1%}) and the floor (±{p['floor']:.1%}), "
            "added in quadrature") in res.why
    assert "the farthest other law's median" not in res.why
    assert p["band"] == pytest.approx(np.sqrt(p["own"] ** 2 + max(p["carried"], p["floor"]) ** 2), rel=0.05)


def test_a_largest_rung_that_stopped_early_is_named_as_why_no_backtest_scored():
    """Four sizes, the largest crashed at 8% of its plan: "4 sizes, too few for any law without the largest", where
    the same four sizes had been backtested while the largest was whole."""
    runs, hero = ladder(pf_law, seed=2, n_sizes=4)
    runs = [r for r in runs if r.token_ratio < 1.5 * TPP]
    top = runs[-1]
    steps = np.arange(1, 4) * int(0.025 * top.planned_steps)  # three evals, the last at 7.5% of its plan
    runs[-1] = dataclasses.replace(top, steps=steps, values=pf_law(top, steps), finished=False)
    res = core.predict(runs, hero, hero.steps, dataclasses.replace(FAST, method="auto"))
    assert (f"4 sizes, but the largest's runs ({top.name}) logged no eval from 10% of their plan on, where the "
            "backtest scores the held-out size (stopped early?)") in res.why

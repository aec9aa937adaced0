"""A metric logged at every step (a train loss) is read at the runs' evals before the laws fit it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ladder.data import dense, fitdata
from ladder.data.runview import at_evals, rungs_from_store
from ladder.data.sources import LocalSource
from ladder.data.sources.pull import pull
from ladder.data.store import Store
from ladder.predict.adapter import PredictSettings, predict
from tests.synthetic_ladder import micro_plan, pf_truth, write_run

T = 1900
PLAN = micro_plan(batch_sequences=4)  # 340 to 1,900 steps a rung, an eval every 5%
GRID = np.arange(95, T + 1, 95)  # an eval every 5%


def curve(t):
    """A power law that falls 30% of the way to its floor over a cooldown in the last 20% of the run."""
    t = np.asarray(t, float)
    return 1.2 + 2.0 * t**-0.3 - 0.3 * np.clip((t / T - 0.8) / 0.2, 0, 1)


def test_a_per_step_curve_read_at_its_evals_keeps_the_curve_and_loses_the_noise():
    steps = np.arange(1, T + 1)
    read, plain, stated = [], [], []
    for seed in range(20):
        noisy = curve(steps) * (1 + 0.12 * np.random.default_rng(seed).standard_normal(T))  # 12% a step
        at, values, errors = dense.read_at(steps, noisy, GRID)
        assert (at == GRID).all()
        read.append(values / curve(GRID) - 1)
        stated.append(errors / values)
        plain.append([noisy[(steps > s - 95) & (steps <= s)].mean() / curve(s) - 1 for s in GRID])
    read, plain = np.array(read), np.array(plain)
    assert np.abs(read.mean(axis=0)).max() < 0.007  # no bias at any eval, the cooldown's end included
    assert read.std(axis=0)[:-1].max() < 0.015 and read.std(axis=0)[-1] < 0.03  # the end is read from one side
    # the values' stated standard errors are the spread their reads have over the draws: pooled over the evals,
    # and at each eval within what 20 draws can tell (the spread of 20 draws is itself uncertain by 16%)
    stated = np.array(stated)
    assert np.sqrt(np.mean(stated**2)) == pytest.approx(np.sqrt(np.mean(read**2)), rel=0.1)
    assert np.mean(stated, axis=0) == pytest.approx(read.std(axis=0), rel=0.4)
    # the mean of the steps up to the end, where the curve falls fastest, sits 3.7% above it
    assert plain.mean(axis=0)[-1] > 0.03


def test_only_a_metric_logged_many_times_per_interval_is_read():
    every_128 = np.arange(128, 24_001, 128)  # an eval curve, against every 1% of its run: about 2 an interval
    assert not dense.is_dense(every_128, np.arange(240, 24_001, 240), dense.READ_PER)
    assert not dense.is_dense(GRID, GRID, dense.READ_PER)
    assert dense.is_dense(np.arange(1, T + 1), GRID, dense.READ_PER)
    assert dense.is_dense(np.arange(10, 10_001, 10), np.arange(100, 10_001, 100), dense.READ_PER)  # 10 an interval


def test_a_run_that_stopped_between_evals_is_read_at_its_last_step_when_enough_came_after_the_last_eval():
    grid = np.arange(100, 2001, 100)
    for last, expect in ((1003, list(range(100, 1001, 100))), (1050, [*range(100, 1001, 100), 1050])):
        steps = np.arange(1, last + 1)
        read = at_evals(steps, curve(steps), grid)
        assert read.steps.tolist() == expect and read.read_from == last
        assert np.abs(read.values / curve(read.steps) - 1).max() < 1e-3  # a smooth curve is read as it is
    steps = np.arange(1, 103)  # stopped just after its first eval: one point is no curve to read
    assert at_evals(steps, curve(steps), grid).read_from == 0


@pytest.fixture(scope="module")
def noisy_store(tmp_path_factory) -> tuple[Path, Store]:
    """The synthetic per-fraction ladder, its train loss logged every step with 10% noise."""
    tmp = tmp_path_factory.mktemp("dense")
    for i, rung in enumerate(PLAN.rungs):
        write_run(tmp / "runs", rung, noise=0.001, seed=i, law=pf_truth, train_noise=0.10)
    store = Store(tmp / "store")
    pull(store, LocalSource(tmp / "runs"))
    return tmp, store


def test_the_laws_read_a_per_step_train_loss_at_each_rung_s_evals(noisy_store):
    _, store = noisy_store
    plan = {r.name: r for r in PLAN.rungs}
    rungs = rungs_from_store(store, plan[next(iter(plan))].group, "train/loss")
    for r in rungs:
        cfg = plan[r.name]
        assert r.read_from == cfg.stop_after_steps and r.steps.tolist() == cfg.eval_steps()
        assert np.abs(r.values / pf_truth(cfg, r.steps) - 1).max() < 0.06
    evals = rungs_from_store(store, rungs[0].group, "eval/loss")
    assert all(r.read_from == 0 for r in evals)  # an eval curve is taken as logged
    # the fits from the store read the same values
    curves = fitdata.curves_from_store(store, "train/loss", np.array([0.5, 1.0]), group=rungs[0].group)
    for name, row in zip(curves.names, curves.losses):
        r = next(x for x in rungs if x.name == name)
        assert row[-1] == pytest.approx(r.values[-1])


def test_a_per_step_train_loss_is_predicted_from_the_values_read(noisy_store):
    _, store = noisy_store
    hero = PLAN.hero
    hero = hero.replace(schedule=hero.schedule.without_edits())
    pred = predict(store, hero, PredictSettings(metric="train/loss", n_boot=100))
    end = pred.table.iloc[-1]
    truth = float(pf_truth(hero, np.array([hero.stop_after_steps]))[0])
    # on six draws of this ladder: |error| 0.3–4.1% (mean signed +0.4%), every band holding the truth, ±6–20%;
    # fitted to the values as logged: |error| 0.8–4.5%, every one low (mean −2.0%), bands ±28–48%
    assert abs(end["median"] / truth - 1) < 0.05 and end["lo90"] <= truth <= end["hi90"]
    assert (end["hi90"] - end["lo90"]) / 2 / end["median"] < 0.2
    assert "read at their evals" in pred.assumptions["values"]


def test_a_rise_within_what_the_values_errors_span_is_not_a_spike():
    from fits.predictor import rise_warnings
    from fits.runs import RISE_WARN, Run, rise, rise_limit

    steps = np.arange(19, 1901, 19)  # 100 values, 1% apart
    rng = np.random.default_rng(3)
    values = curve(steps) * (1 + 0.01 * rng.standard_normal(steps.size))  # each read to 1%
    read = Run("r", 1e6, 1000, T, steps, values, noise=0.01)
    up, _ = rise(read)
    assert RISE_WARN < up < rise_limit(read)  # past the fixed 2%, within the 8.1% that 100 such errors span
    assert rise_limit(read) == pytest.approx((2 * np.sqrt(2 * np.log(91)) + 2) * 0.01)
    spiked = values.copy()
    spiked[60] *= 1.12
    spike = Run("r", 1e6, 1000, T, steps, spiked, noise=0.01)
    assert rise(spike)[0] > rise_limit(read)
    (warning,) = rise_warnings([spike])
    assert "more than its values' standard errors (1.0% each" in warning and "The laws fit it as read" in warning
    assert rise_warnings([read]) == []
    assert rise_limit(Run("r", 1e6, 1000, T, steps, values)) == RISE_WARN  # evals as logged: the fixed limit


def test_an_imported_run_s_train_loss_is_read_at_the_steps_it_logged_its_evals(tmp_path):
    """A table with a train loss every 5 steps (3 or 4 values per 1% of the plan, too few to read there) and an
    eval every 95: read at its own evals, not left raw."""
    import pandas as pd

    from ladder.data.runview import from_store
    from ladder.data.sources.coords import CoordinateOverrides
    from ladder.data.sources.tabular import ColumnMap, TableSource

    rng = np.random.default_rng(0)
    steps = np.arange(5, T + 1, 5)
    table = pd.DataFrame({"run": "r", "step": steps, "train": curve(steps) * (1 + 0.01 * rng.standard_normal(steps.size)),
                          "eval": np.where(steps % 95 == 0, curve(steps), np.nan)})
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    store = Store(tmp_path / "s")
    columns = ColumnMap(metrics={"train/loss": "train", "eval/loss": "eval"}, run="run", step="step")
    pull(store, TableSource(path, columns), overrides=CoordinateOverrides.parse(
        [f"stop_after_steps={T}", "tokens_per_step=1000", "active_params=1e6", "total_params=unknown",
         "fit_flops_per_token=unknown"]))
    run = from_store(store, store.runs().iloc[0], "train/loss")
    assert run.read_from == steps.size and run.steps.tolist() == GRID.tolist()
    raw = table.set_index("step").loc[GRID, "train"].to_numpy()
    assert np.abs(run.values / curve(GRID) - 1).mean() < 0.5 * np.abs(raw / curve(GRID) - 1).mean()
    assert 0 < run.noise < 0.01
    from ladder.errors import LadderError

    with pytest.raises(LadderError, match=r"0 values of 'eval/los' \(it logs .*\); did you mean 'eval/loss'\? predict"):
        from_store(store, store.runs().iloc[0], "eval/los")

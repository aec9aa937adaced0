"""A metric logged at every step is judged once per step of the prediction, on arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ladder import metrics as keys
from ladder.predict.prediction import Prediction
from ladder.watch import AlertRules, Observed, evaluate
from ladder.watch.judged import compared, judged_steps, point_of

STEPS = 2000
GRID = np.arange(100, STEPS + 1, 100)
RULES = AlertRules(metric=keys.TRAIN_LOSS)


def curve(step):
    return 2.0 + 1.2 * (np.asarray(step, float) / STEPS) ** -0.25


def prediction() -> Prediction:
    med = curve(GRID)
    table = pd.DataFrame({
        "step": GRID, "tokens": GRID * 1000, "fraction": GRID / STEPS, "compute": GRID * 1e9, "median": med,
        "lo50": med * 0.997, "hi50": med * 1.003, "lo90": med * 0.992, "hi90": med * 1.008, "in_assumptions": True,
    })
    return Prediction(run_name="hero", metric=keys.TRAIN_LOSS, table=table, planned_steps=STEPS)


def per_step(upto=STEPS, noise=0.01, shift=lambda s: 0.0, seed=0) -> pd.Series:
    """A train loss logged at every step: the predicted curve times per-step noise (1%: twice the warning
    rule's 0.5% and three times the prediction's 50% band; a mean of 100 steps has 0.1%)."""
    s = np.arange(1, upto + 1)
    rng = np.random.default_rng(seed)
    return pd.Series(curve(s) * (1 + noise * rng.standard_normal(len(s))) * (1 + shift(s)), index=s)


def observed(y: pd.Series, grid=GRID) -> Observed:
    return Observed(pd.DataFrame({keys.TRAIN_LOSS: y}), planned_steps=STEPS, tokens_per_step=1000, grid=grid)


def test_per_step_noise_is_judged_once_per_predicted_step_and_raises_nothing():
    y = per_step()
    assert evaluate(observed(y), prediction(), RULES, now=0.0) == []
    # judged step by step, the same noise is a deviation at most steps
    flood = [a for a in evaluate(observed(y, grid=None), prediction(), RULES, now=0.0) if a.rule == "deviation"]
    assert len(flood) > STEPS // 2


def test_a_shift_of_two_percent_alarms_at_the_next_predicted_step_once_per_step_of_the_prediction():
    y = per_step(shift=lambda s: 0.02 * (s > 800))
    alerts = evaluate(observed(y), prediction(), RULES, now=0.0)
    alarms = [a for a in alerts if a.rule == "deviation" and a.level == "alarm"]
    assert alarms and alarms[0].step == 900  # the first point wholly after the shift
    assert {a.step for a in alerts} <= set(GRID.tolist())
    assert len(alarms) == len(set(a.key for a in alarms)) <= len(GRID)
    assert "mean of 100 values logged at steps 801–900" in alarms[0].message


def test_a_point_is_the_mean_over_its_steps_against_the_prediction_s_mean_there():
    y = per_step(upto=450)
    pred = prediction()
    points = compared(y, GRID, pred)
    assert points.index.tolist() == [100, 200, 300, 400]  # 450 is not done: the point at 500 waits for its end
    row = points.loc[300]
    assert row["n"] == row["covered"] == 100 and row["first_step"] == 201
    assert row["value"] == pytest.approx(y.loc[201:300].mean())
    assert row["median"] == pytest.approx(pred.at(np.arange(201, 301))["median"].mean())
    # the prediction begins at step 100: the point there spans one of its 100 steps and is not judged on it
    assert points.loc[100, "covered"] == 1 and points.loc[100, ["median", "lo90", "hi90"]].isna().all()


def test_a_metric_logged_at_the_prediction_s_steps_or_less_often_is_judged_at_each_step():
    # at its steps, at every third, with an eval before training, with one extra eval between two of them, at
    # its spacing before a prediction that begins late
    late = np.arange(100, 1001, 100)
    for steps in (GRID, GRID[::3], np.array([0, *GRID]), np.sort(np.array([*GRID, 250])), late):
        y = pd.Series(curve(np.maximum(steps, 1)), index=steps)
        for grid in (GRID, GRID[GRID > 500]):
            assert (point_of(steps, grid) == steps).all()
            assert judged_steps(y, grid).tolist() == steps.tolist()
    # the first two evals, at the prediction's first two steps, already say so
    assert (point_of(GRID[:2], GRID) == GRID[:2]).all()
    # an eval every 40 steps against a prediction every 100 (2 or 3 to a point) is judged at each eval too; one
    # every 20 (5 to a point, as often as the laws read a rung's metric at its evals) is averaged
    assert (point_of(np.arange(40, 401, 40), GRID) == np.arange(40, 401, 40)).all()
    assert point_of(np.arange(20, 401, 20), GRID).tolist() == [s for s in (100, 200, 300, 400) for _ in range(5)]


def test_evals_judged_once_are_not_judged_again_at_other_steps_as_the_run_goes_on():
    """A live hero's prediction made at its evals so far (every 200 steps to 10% of its 40,000) and every 1% after:
    its evals every 200 steps were averaged two to a point once most of them fell past 10% (a median of 2), and
    the evals judged before were judged again at other steps, their alerts sent twice."""
    plan = 40_000
    grid = np.r_[np.arange(200, 4001, 200), np.arange(4400, plan + 1, 400)]
    evals = np.arange(200, plan + 1, 200)
    judged = [judged_steps(pd.Series(curve(evals[evals <= upto]), index=evals[evals <= upto]), grid).tolist()
              for upto in (4_000, 10_000, 20_000, 30_000, plan)]
    for before, after in zip(judged, judged[1:]):
        assert after[:len(before)] == before
    assert judged[-1] == evals.tolist()


def test_steps_past_the_prediction_make_points_of_its_last_spacing_that_cannot_be_judged():
    y = per_step(upto=STEPS + 250)
    points = compared(y, GRID, prediction())
    past = points.loc[points.index > STEPS]
    assert past.index.tolist() == [STEPS + 100, STEPS + 200]  # the one at +300 is not done
    assert past["median"].isna().all() and (past["n"] == 100).all()


def test_a_non_finite_value_makes_its_point_not_finite():
    y = per_step(upto=600)
    y.loc[333] = np.nan
    points = compared(y, GRID, prediction())
    assert np.isnan(points.loc[400, "value"]) and np.isfinite(points.drop(index=400)["value"]).all()

"""`ladder.predict.dynamics`: the rungs' training dynamics in a store, projected to a prediction's target."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ladder import metrics as keys
from ladder.cli import app
from ladder.data.store import Store
from ladder.predict.dynamics import hero_compute, project_curves, project_dynamics
from ladder.predict.prediction import Prediction
from tests.synthetic_ladder import micro_plan, truth, write_run

runner = CliRunner()
GROWTH = 1.5
"""d ln grad-norm / d fraction of every rung; the same at every size (no trend across sizes)."""


def set_grad_norm(run_dir: Path, planned: int, growth: float, seed: int) -> None:
    """Replace the run's grad norm: 0.5·exp(growth · fraction) with 10% noise per step."""
    rng = np.random.default_rng(seed)
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for row in lines:
        if keys.GRAD_NORM in row:
            row[keys.GRAD_NORM] = 0.5 * float(np.exp(growth * row["step"] / planned + 0.1 * rng.standard_normal()))
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n")


def hero_prediction(config) -> Prediction:
    steps = np.array(config.eval_steps())
    med = truth(config, steps)
    table = pd.DataFrame({
        "step": steps, "tokens": steps * config.tokens_per_step, "fraction": steps / config.stop_after_steps,
        "compute": config.fit_flops_per_token * config.tokens_per_step * steps.astype(float), "median": med,
        "lo50": med * 0.99, "hi50": med * 1.01, "lo90": med * 0.975, "hi90": med * 1.025, "in_assumptions": True,
    })
    return Prediction(config.name, keys.EVAL_LOSS, table, planned_steps=config.stop_after_steps)


def write_ladder(root: Path, hero_growth: float | None = GROWTH, hero_upto: int | None = None):
    """The micro ladder's rungs (and its hero, unless `hero_growth` is None) as run folders."""
    plan = micro_plan()
    for i, rung in enumerate(plan.rungs):
        set_grad_norm(write_run(root, rung, noise=0.001, seed=i), rung.stop_after_steps, GROWTH, seed=i)
    if hero_growth is not None:
        run = write_run(root, plan.hero, noise=0.001, seed=9, upto=hero_upto,
                        state="running" if hero_upto else "finished")
        set_grad_norm(run, plan.hero.stop_after_steps, hero_growth, seed=9)
    return plan


@pytest.fixture(scope="module")
def ladder_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dynamics")
    plan = write_ladder(tmp / "runs", hero_upto=plan_half())
    res = runner.invoke(app, ["pull", "local", str(tmp / "runs"), "--store", str(tmp / "store")])
    assert res.exit_code == 0, res.output
    return Store(tmp / "store"), plan


def plan_half() -> int:
    return micro_plan().hero.stop_after_steps // 2


def test_hero_compute_is_the_targets_planned_fit_compute():
    hero = micro_plan().hero
    pred = hero_prediction(hero)
    planned = hero.fit_flops_per_token * hero.tokens_per_step * hero.stop_after_steps
    assert hero_compute(pred) == pytest.approx(planned, rel=1e-12)
    # a table cut short by an edited horizon: still the plan it started with
    cut = Prediction(pred.run_name, pred.metric, pred.table.iloc[:10], planned_steps=pred.planned_steps)
    assert hero_compute(cut) == pytest.approx(planned, rel=1e-12)


def test_every_series_the_rungs_log_is_projected_to_the_hero(ladder_store):
    store, plan = ladder_store
    dyn = project_dynamics(store, hero_prediction(plan.hero))
    assert dyn.compute == pytest.approx(hero_compute(hero_prediction(plan.hero)))
    # the synthetic runs log grad norm and drop fraction, not the router losses
    assert [s.metric for s in dyn.series] == [keys.GRAD_NORM, keys.DROP_FRACTION]
    grad = dyn.get(keys.GRAD_NORM)
    assert [r.name for r in grad.rungs] == [r.name for r in plan.rungs]  # smallest first
    assert grad.projection is not None and len(grad.rungs) == 4
    # the same grad norm at every size: flat, and it says so
    assert grad.projection.flat[5:].mean() > 0.8 and "flat" in grad.note
    med = grad.projection.median
    expected = 0.5 * np.exp(GROWTH * grad.projection.fraction)
    assert np.nanmedian(np.abs(med[5:] / expected[5:] - 1)) < 0.1
    # the hero so far, as a fraction of the plan it started with
    assert grad.hero is not None and grad.hero.fraction.max() == pytest.approx(0.5, abs=0.01)
    assert dyn.spikes is not None and dyn.spikes.projection is not None
    assert list(dyn.spikes.rungs) == [r.name for r in plan.rungs] and dyn.spikes.hero_rate is not None


def test_no_projection_from_fewer_than_three_rungs():
    f = np.linspace(0.01, 1, 100)
    assert project_curves([f, f], [np.ones(100), np.ones(100)], [1e9, 2e9], 1e12) is None
    three = project_curves([f, f, f], [np.ones(100)] * 3, [1e9, 2e9, 4e9], 1e12)
    assert three is not None and three.flat.all()
    assert project_curves([f, f, f], [np.ones(100)] * 3, [1e9, 2e9, float("nan")], 1e12) is None
    assert project_curves([f, f, f], [np.ones(100)] * 3, [1e9, 2e9, 4e9], float("nan")) is None

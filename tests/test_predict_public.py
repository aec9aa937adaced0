"""The default prediction on public ladders (../shared/data), pinned to the numbers in benchmarks/RESULTS.md.

These go through `fits.predictor.predict`, the core `ladder predict` runs, with the runs as the
leaderboard (`benchmarks/leaderboard.py`) builds them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fits import candidates as cand
from fits import predictor as core
from fits.candidates import Options

pytestmark = pytest.mark.usefixtures("shared_data")

FAST = core.Settings(options=Options(n_boot=60))


def score(runs, target):
    keep = target.fractions >= 0.1 - 1e-9
    steps, actual = target.steps[keep], target.values[keep]
    blank = dataclasses.replace(target, steps=np.zeros(0, np.int64), values=np.zeros(0))
    res = core.predict(runs, blank, steps, FAST)
    err = res.band.median / actual - 1
    inside = (res.band.lo90 <= actual) & (actual <= res.band.hi90)
    return res, err, inside


def test_marin_published_hero_projection_is_reproduced():
    from benchmarks.leaderboard import marin_runs, published_marin

    rungs, hero = marin_runs()
    assert [r.finished for r in rungs] == [True, True, True, False]
    assert published_marin(rungs, hero)[-1] == pytest.approx(2.0388, abs=5e-4)  # published: 2.039


def test_marin_fourth_rung_from_the_three_finished():
    from benchmarks.leaderboard import marin_tasks

    task = marin_tasks()[0]
    res, err, inside = score(task.runs, task.targets[0])
    # one curve per size: the curve laws cannot separate their asymptote, so the per-fraction law predicts
    assert res.method == "per-fraction"
    assert err[-1] == pytest.approx(PINNED["marin-d2048"], abs=1e-3)
    assert inside.mean() >= 0.8


@pytest.mark.slow
@pytest.mark.parametrize("length", ["1xC", "5xC"])
def test_olmo_3b_from_the_four_smaller_sizes(length):
    from benchmarks.leaderboard import olmo_tasks

    name = f"olmo-3.2B-{length}"
    task = next(t for t in olmo_tasks() if t.name == name)
    res, err, inside = score(task.runs, task.targets[0])
    pf, mp = res.candidates["per-fraction"].median, res.candidates["multipower"].median
    actual = task.targets[0].values[-1]
    # the two laws part ways at 3.2B: the per-fraction law lands low, the multi-power law high
    assert pf[-1] / actual - 1 < -0.008 and mp[-1] / actual - 1 > 0.004
    # the backtest (the five 1.3B runs from the three smaller sizes) prefers the mean of the two laws at every
    # length, which lands between them
    assert res.method == "ensemble"
    np.testing.assert_allclose(res.band.median, (pf + mp) / 2, rtol=1e-12)
    for s in res.backtest:
        assert set(s.held_out) == {f"olmo_ladder_1B-{x}" for x in ("0.5xC", "1xC", "2xC", "5xC", "10xC")}
    # the multi-power law's floor: its posterior median, pinned by the 20 smaller curves well above 0
    floor = res.outcomes["multipower"].params
    assert 0 < floor["floor_lo90"] < floor["floor"] < floor["floor_hi90"] and floor["floor"] > 1.0
    assert err[-1] == pytest.approx(PINNED[name], abs=1e-3)
    assert inside.mean() >= 0.9


def test_olmo_3b_from_rungs_still_training_at_60_percent():
    from benchmarks.leaderboard import olmo_tasks
    from benchmarks.rungs_still_training import cut

    task = next(t for t in olmo_tasks() if t.name == "olmo-3.2B-1xC")
    res, err, inside = score(cut(task.runs, 0.6), task.targets[0])
    pf, mp = res.candidates["per-fraction"].median, res.candidates["multipower"].median
    # the per-fraction law stops where the rungs' evals do; the mean of the two laws is carried on to the end
    last = int(np.flatnonzero(np.isfinite(pf))[-1])
    assert res.method == "ensemble" and res.fractions[last] == pytest.approx(0.6, abs=0.02)
    assert np.isfinite(res.band.median).all() and res.carried_from == res.steps[last]
    np.testing.assert_allclose(res.band.median[-1] / res.band.median[last], mp[-1] / mp[last], rtol=1e-12)
    # nearer the 3.2B's final than the multi-power law alone, as benchmarks/RESULTS.md reports
    assert err[-1] == pytest.approx(PINNED["olmo-3.2B-1xC-rungs-to-60%"], abs=1e-3)
    assert abs(err[-1]) < abs(mp[-1] / task.targets[0].values[-1] - 1) - 0.005
    assert inside.all()


def test_olmo_3b_plan_cut_to_a_length_the_ladder_trained_from_one_length_per_size():
    """The 3.2B's 1×C plan cut at warmup's end to 0.5×C is the schedule of its 0.5×C run: from rungs at 1×C alone,
    nothing tests how much the cut changes the loss, and the band says so and holds the run's end."""
    from benchmarks.edited_schedule import cut_case

    rungs, target, _, steps, actual, _ = cut_case(1.0, 0.5, both=False)
    res = core.predict(rungs, target, steps, FAST)
    b = res.band
    assert res.method == "per-fraction" and cand.EDIT_UNTESTED in res.warnings
    assert b.median[-1] / actual[-1] - 1 == pytest.approx(PINNED["olmo-3.2B-1xC-cut-to-0.5xC"], abs=1e-3)
    assert b.lo90[-1] <= actual[-1] <= b.hi90[-1]
    assert np.mean((b.lo90 <= actual) & (actual <= b.hi90)) >= 0.65
    # with the 0.5×C rungs beside them the cut is tested, and the band is the laws' own
    rungs, target, _, steps, actual, _ = cut_case(1.0, 0.5, both=True)
    res = core.predict(rungs, target, steps, FAST)
    assert cand.EDIT_UNTESTED not in res.warnings and abs(res.band.median[-1] / actual[-1] - 1) < 0.005


def test_misfitting_1b_from_every_smaller_best_lr_run():
    from benchmarks.leaderboard import misfitting_tasks

    for task in misfitting_tasks():
        res, err, inside = score(task.runs, task.targets[0])
        # cosine schedules of several lengths per size: only the multi-power law takes them all
        assert res.method == "multipower"
        # best-LR runs: the best peak LR moves with the length at 5 of the 10 sizes, which the law reads as progress
        assert any("different peak LRs (5 of 10 sizes" in w for w in res.warnings)
        assert err[-1] == pytest.approx(PINNED[task.name], abs=1e-3)
        assert inside.mean() >= 0.8


def test_mpl_400m_under_nine_schedules_from_two_smaller_sizes():
    from benchmarks.leaderboard import mpl_tasks

    task = mpl_tasks()[0]
    finals, held = [], []
    for target in task.targets:
        res, err, inside = score(task.runs, target)
        assert res.method == "multipower" and not res.backtest  # two sizes: nothing to hold out
        finals.append(err[-1])
        held.append(inside.mean())
    assert len(finals) == 9
    assert np.mean(finals) == pytest.approx(PINNED["mpl-400M"], abs=1e-3)
    assert np.mean(held) >= 0.8


PINNED = {"marin-d2048": 0.0018, "olmo-3.2B-1xC": 0.0010, "olmo-3.2B-5xC": -0.0015, "misfitting-1b-T10000": -0.0156,
          "misfitting-1b-T20000": 0.0007, "mpl-400M": -0.0068,
          "olmo-3.2B-1xC-rungs-to-60%": 0.0069, "olmo-3.2B-1xC-cut-to-0.5xC": -0.0257}
"""Final relative errors of the default (predicted / actual − 1), as benchmarks/leaderboard.py measures them."""

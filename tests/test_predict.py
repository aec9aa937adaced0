"""`ladder predict` on synthetic ladders whose truth is known, written as real run folders and pulled."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ladder.cli import app
from ladder.config.runconfig import RunConfig
from ladder.config.schedule import SeqPhase
from ladder.data.sources import LocalSource
from ladder.data.sources.pull import pull
from ladder.data.store import Store
from ladder.errors import LadderError
from ladder.predict.adapter import PredictSettings, predict, prediction_steps
from ladder.predict.prediction import CONFIG_WRITTEN, PREDICTION_FILES, WATCH_FILES, Prediction
from tests.synthetic_ladder import micro_plan, pf_truth, truth, write_run

PLAN = micro_plan()
FAST = PredictSettings(n_boot=100)
runner = CliRunner()


def ladder_store(tmp: Path, law=truth, crash: str | None = None, noise: float = 0.001) -> Store:
    for i, rung in enumerate(PLAN.rungs):
        upto = int(0.8 * rung.stop_after_steps) if rung.name == crash else None
        write_run(tmp / "runs", rung, noise=noise, seed=i, law=law, upto=upto,
                  state="crashed" if rung.name == crash else "finished")
    store = Store(tmp / "store")
    pull(store, LocalSource(tmp / "runs"))
    return store


@pytest.fixture(scope="module")
def pf_store(tmp_path_factory) -> Store:
    return ladder_store(tmp_path_factory.mktemp("pf"), law=pf_truth)


@pytest.fixture(scope="module")
def mp_store(tmp_path_factory) -> Store:
    return ladder_store(tmp_path_factory.mktemp("mp"))


UNEDITED = PLAN.hero.replace(schedule=PLAN.hero.schedule.without_edits())


@pytest.fixture(scope="module")
def pf_unedited(pf_store) -> Prediction:
    """The hero without its schedule edit predicted from `pf_store` (read by several tests, changed by none)."""
    return predict(pf_store, UNEDITED, FAST)


def test_same_schedule_uses_the_per_fraction_law_and_recovers_it(pf_unedited):
    hero = UNEDITED
    pred = pf_unedited
    assert [f.name for f in pred.forms] == ["per-fraction law"]
    t = pred.table[pred.table["in_assumptions"]]
    truth_at = pf_truth(hero, t["step"].to_numpy())
    err = t["median"].to_numpy() / truth_at - 1
    assert np.max(np.abs(err)) < 0.01  # 6x extrapolation, 0.1% eval noise
    covered = (t["lo90"] <= truth_at) & (truth_at <= t["hi90"])
    assert covered.iloc[-1] and covered.mean() >= 0.8
    assert np.all((t["lo90"] <= t["lo50"]) & (t["lo50"] <= t["median"]) & (t["median"] <= t["hi50"]) & (t["hi50"] <= t["hi90"]))


def test_table_has_every_eval_and_checkpoint_with_the_store_fraction(pf_store):
    hero = PLAN.hero
    pred = predict(pf_store, hero, FAST)
    steps = pred.table["step"].to_numpy()
    assert steps.tolist() == prediction_steps(hero).tolist()
    assert set(hero.eval_steps()) <= set(steps)
    assert pred.table["step"].iloc[-1] == hero.stop_after_steps and pred.table["fraction_edited"].iloc[-1] == 1.0
    # the fraction is of the plan the run was started with; the edited plan's is beside it
    np.testing.assert_allclose(pred.table["fraction"], pred.table["step"] / hero.schedule.total_steps)
    edit = hero.schedule.edits[0]
    before = pred.table[pred.table["step"] <= edit.at_step]
    np.testing.assert_allclose(before["fraction_edited"], before["fraction"])
    assert (pred.table["tokens"] == pred.table["step"] * hero.tokens_per_step).all()


def test_the_backtest_chooses_the_law_and_reports_why(pf_store, pf_unedited):
    hero = UNEDITED
    pred = pf_unedited
    assert pred.method == "per-fraction" and "backtest" in pred.why
    rows = {r["method"]: r for r in pred.backtest}
    assert rows["per-fraction"]["held_out"] == [PLAN.rungs[-1].name] and rows["per-fraction"]["evals"] > 0
    # one curve per size: the curve laws cannot tell their asymptote from their power law, and say so
    assert "curves (lengths or schedules)" in rows["multipower"]["failed"]
    assert pred.settings["method"] == "auto" and pred.settings["floor"] == "profile"
    again = predict(pf_store, hero, type(FAST).from_dict(pred.settings))
    np.testing.assert_allclose(again.table["median"], pred.table["median"])
    # a prediction recorded before the curve laws profiled their floor re-predicts with the floor at 0
    older = {k: v for k, v in pred.settings.items() if k != "floor"}
    assert type(FAST).from_dict(older).floor == "zero"


def test_a_shortened_hero_adds_the_schedule_difference(mp_store):
    hero = PLAN.hero  # horizon cut to 80% at half way: the rungs never did that
    pf = dataclasses.replace(FAST, method="per-fraction")
    pred = predict(mp_store, hero, pf)
    assert [f.name for f in pred.forms] == ["per-fraction law"]
    assert "edited schedule" in pred.forms[0].why
    unedited = predict(mp_store, hero.replace(schedule=hero.schedule.without_edits()), pf)
    both = pred.table.set_index("step")[["median"]].join(unedited.table.set_index("step")["median"].rename("median_u"))
    edit = hero.schedule.edits[0].at_step
    same = both[both.index <= edit]
    np.testing.assert_allclose(same["median"], same["median_u"], rtol=1e-12)
    later = both[both.index > edit + 40]
    assert (later["median"] < later["median_u"]).all()  # a faster decay lowers the loss sooner
    truth_end = truth(hero, np.array([hero.stop_after_steps]))[0]
    fin = pred.final
    assert fin["lo90"] <= truth_end <= fin["hi90"]


def test_crashed_rung_is_completed_with_a_wider_band(tmp_path, pf_unedited):
    crashed = ladder_store(tmp_path, law=pf_truth, crash=PLAN.rungs[-1].name)
    hero = UNEDITED
    full, part = pf_unedited, predict(crashed, hero, FAST)
    assert any("stopped at 80%" in w and "take the evals it logged" in w for w in part.warnings)
    width = lambda p: (p.final["hi90"] - p.final["lo90"])  # noqa: E731
    assert width(part) > width(full)
    truth_end = pf_truth(hero, np.array([hero.stop_after_steps]))[0]
    assert part.final["lo90"] <= truth_end <= part.final["hi90"]
    assert abs(part.final["median"] / truth_end - 1) < 0.02


def test_changes_no_law_models_are_flagged(pf_store):
    hero = PLAN.hero.replace(schedule=dataclasses.replace(PLAN.hero.schedule, seq_phases=(SeqPhase(0.25, 256),)))
    pred = predict(pf_store, hero, FAST)
    t = pred.table
    assert not t.loc[t["step"] >= 0.25 * hero.schedule.total_steps, "in_assumptions"].any()
    assert t.loc[(t["step"] < 0.25 * hero.schedule.total_steps) & t["median"].notna(), "in_assumptions"].all()
    assert "outside the assumptions" in pred.assumptions["sequence length"]
    from ladder.output.report import final_sentence

    valid = int(t.loc[t["in_assumptions"], "step"].max())
    assert final_sentence(pred).endswith(f", outside the prediction's assumptions (valid up to step {valid:,}: see them)")
    assert "outside" not in final_sentence(predict(pf_store, PLAN.hero, FAST))
    other_data = PLAN.hero.replace(data=dataclasses.replace(PLAN.hero.data, source="markov"))
    assert not predict(pf_store, other_data, FAST).table["in_assumptions"].any()


def test_another_token_ratio_without_curves_to_carry_it_is_refused(mp_store):
    hero = PLAN.hero.replace(tpp=30.0)
    with pytest.raises(LadderError, match="no law could predict the target") as err:
        predict(mp_store, hero, FAST)
    assert "token ratio" in str(err.value) and "curves (lengths or schedules)" in str(err.value)


def test_too_few_rungs_and_a_rung_as_target(tmp_path, pf_store):
    with pytest.raises(LadderError, match="at least 3"):
        predict(pf_store, PLAN.hero.replace(group="another-ladder"), FAST)
    with pytest.raises(LadderError, match="is one of the rungs"):
        predict(pf_store, PLAN.rungs[0], FAST)


def test_cli_writes_the_tables_and_bad_input_exits_2(tmp_path, pf_store):
    cfg = tmp_path / "hero.yaml"
    PLAN.hero.save(cfg)
    out = tmp_path / "pred"
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(pf_store.root), "--out", str(out), "--n-boot", "50"])
    assert res.exit_code == 0, res.output
    assert "Predicted final eval/loss at step" in res.stdout and "per-fraction law" in res.stdout
    table = pd.read_parquet(out / "prediction.parquet")
    assert table.equals(pd.read_csv(out / "prediction.csv").astype(table.dtypes.to_dict()))
    data = json.loads((out / "prediction.json").read_text())
    assert data["run_name"] == PLAN.hero.name and len(data["table"]) == len(table)
    assert Prediction.load(out).table["median"].round(12).equals(table["median"].round(12))
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "no store here" in res.stderr
    for name, text in (("prediction.json", '{"mine": 1}'), ("prediction.csv", "my,own\n1,2\n")):  # a user's files
        mine = tmp_path / f"mine-{name}"
        mine.mkdir()
        (mine / name).write_text(text)
        for args in (["predict", str(cfg)], ["replan", str(cfg), "--at", "5", "--shorten-to", "20"]):
            res = runner.invoke(app, [*args, "--store", str(pf_store.root), "--out", str(mine)])
            assert res.exit_code == 2 and f"{name} there is no prediction's" in res.stderr, res.output
            assert [p.name for p in mine.iterdir()] == [name] and (mine / name).read_text() == text
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(pf_store.root), "--E", "surface"])
    assert res.exit_code == 2 and "--E surface" in res.stderr and "'ladder'" in res.stderr
    # --E ladder on rungs of one token ratio: E is fitted, and the settings saved say what was asked
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(pf_store.root), "--out", str(tmp_path / "pl"),
                              "--n-boot", "20", "--E", "ladder", "--format", "json"])
    assert res.exit_code == 0, res.output
    saved = Prediction.load(tmp_path / "pl")
    assert saved.settings["E_from"] == "ladder" and saved.settings["E"] is None
    assert "E fitted at the target's token ratio" in json.dumps(json.loads(res.stdout))
    # watching another run than the one predicted
    other = tmp_path / "runs"
    write_run(other, PLAN.rungs[0])
    res = runner.invoke(app, ["watch", "--prediction", str(out), "--local", str(other / PLAN.rungs[0].name),
                              "--store", str(tmp_path / "wstore"), "--once"])
    assert res.exit_code == 2 and "the prediction is for" in res.stderr


def test_a_schedule_the_fits_cannot_cover_is_refused(tmp_path, pf_store):
    import yaml

    data = PLAN.hero.replace(schedule=PLAN.hero.schedule.without_edits()).to_dict()
    del data["coordinates"]
    data["schedule"]["edits"] = [{"kind": "shorten", "at_step": 300, "new_total_steps": 900}]  # an extension
    cfg = tmp_path / "hero.yaml"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(pf_store.root)])
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "new_total_steps=900 must not be past the current horizon (700 steps)" in said


def test_watch_predicts_again_after_a_schedule_edit(tmp_path, mp_store):
    planned = PLAN.hero.replace(schedule=PLAN.hero.schedule.without_edits())
    out = tmp_path / "pred"
    predict(mp_store, planned, FAST).save(out)
    write_run(tmp_path / "hero", PLAN.hero, upto=400, state="running")  # its run.yaml carries the cut
    store = shutil.copytree(mp_store.root, tmp_path / "store")  # the module's store stays without a hero
    res = runner.invoke(app, ["watch", "--prediction", str(out), "--local", str(tmp_path / "hero" / PLAN.hero.name),
                              "--store", str(store), "--once"])
    assert res.exit_code in (0, 4), res.output  # on track or a warning
    assert "schedule edited" in res.stdout
    kept = list(out.glob("earlier-prediction-*"))
    assert len(kept) == 1 and f"the prediction it replaces is kept in {kept[0]}/" in " ".join(res.stdout.split())
    # one schedule per size: the new prediction's band holds the cut's change at its own size, and the watch says so
    assert "warning: the new prediction: the target's schedule was edited, and no two sizes" in res.stderr, res.stderr
    again = json.loads((out / "prediction.json").read_text())
    assert again["schedule"]["edits"][0]["new_total_steps"] == PLAN.hero.stop_after_steps
    assert again["table"][-1]["step"] == PLAN.hero.stop_after_steps


def test_replan_of_a_finished_run_asks_for_a_step_and_one_before_the_run_is_a_what_if(tmp_path, mp_store):
    import shutil

    hero = PLAN.hero.replace(schedule=PLAN.hero.schedule.without_edits())
    cfg = tmp_path / "hero.yaml"
    hero.save(cfg)
    shutil.copytree(mp_store.root, tmp_path / "store")
    T = hero.stop_after_steps
    pull(Store(tmp_path / "store"), LocalSource(write_run(tmp_path / "runs", hero, upto=T // 2, state="running")),
         replace=True)  # another test may have watched a hero of that name in the shared store
    base = ["replan", str(cfg), "--store", str(tmp_path / "store"), "--n-boot", "50"]
    res = runner.invoke(app, [*base, "--at", str(T // 4), "--shorten-to", str(int(0.8 * T))])
    assert res.exit_code == 0 and "new schedule" in res.stdout, res.output
    said = " ".join(res.stderr.split())
    assert f"--at {T // 4:,}: the run is at step {T // 2:,} already, so this is a what-if" in said
    res = runner.invoke(app, [*base, "--at", str(T // 4), "--shorten-to", str(int(0.8 * T)), "--out", str(tmp_path / "w")])
    said = " ".join(res.stdout.split())
    assert res.exit_code == 0 and "a what-if: it cannot resume the run in" in said and "--resume" not in said, res.output
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(tmp_path / "store"), "--n-boot", "5",
                              "--at", str(T // 4), "--shorten-to", str(int(0.8 * T))])
    assert res.exit_code == 2 and "--n-boot 5" in res.stderr and "what-if" not in res.stderr  # refused first
    res = runner.invoke(app, [*base, "--at", str(hero.schedule.warmup_steps - 1), "--shorten-to", str(int(0.8 * T))])
    assert res.exit_code == 2 and "an edit goes after the warmup" in res.stderr and "what-if" not in res.stderr
    res = runner.invoke(app, [*base, "--shorten-to", str(int(0.8 * T))])  # at its last step: no warning
    assert res.exit_code == 0 and "what-if" not in res.stderr, res.output
    res = runner.invoke(app, [*base, "--shorten-to", str(T // 2 - 10)])  # a horizon the run has passed: said so, not
    said = " ".join(res.stderr.split())  # "cuts 52%"
    assert res.exit_code == 2 and f"--shorten-to {T // 2 - 10:,}: the run is at step {T // 2:,} already" in said, said
    pull(Store(tmp_path / "store"), LocalSource(write_run(tmp_path / "runs", hero)))  # now finished
    res = runner.invoke(app, [*base, "--shorten-to", str(int(0.8 * T))])
    assert res.exit_code == 2 and f"is done (step {T:,} of {T:,})" in res.stderr and "give --at STEP" in res.stderr


def test_replan_shows_the_new_plans_last_step_where_it_falls_between_the_old_plans(tmp_path, mp_store):
    from ladder.config.runconfig import EvalConfig

    cfg = UNEDITED.replace(eval=EvalConfig(every_fraction=0.01)).save(tmp_path / "hero.yaml")  # a table of 1 row in 5
    T = UNEDITED.stop_after_steps
    cut = int(0.8 * T) + 3  # no eval step of the old plan
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T // 2), "--shorten-to",
                              str(cut), "--n-boot", "20"])
    assert res.exit_code == 0, res.output
    new = [line for line in res.stdout.splitlines() if line.strip("│ ").startswith(f"{cut} ")]
    assert len(new) == 1 and "–" in new[0], res.stdout  # the new plan's final, where the old plan has no value
    shown = [int(line.strip("│ ").split()[0].replace(",", "")) for line in res.stdout.splitlines()
             if line.strip("│ ")[:1].isdigit()]
    marks = [round(k * T / 20) for k in range(1, 21)]  # every 5% of the plan, as the report's table (evals every 1%)
    at_marks = [s for s in shown if s in marks]
    assert len(at_marks) == 20 and sorted(set(shown) - set(at_marks)) == [cut], shown  # the edit at 50%: a mark


def test_replan_prints_old_and_new(tmp_path, mp_store):
    cfg = tmp_path / "hero.yaml"
    hero = PLAN.hero.replace(schedule=PLAN.hero.schedule.without_edits())
    hero.save(cfg)
    T = hero.stop_after_steps
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T // 2),
                              "--shorten-to", str(int(0.8 * T)), "--n-boot", "50", "--out", str(tmp_path / "new")])
    assert res.exit_code == 0, res.output
    assert "new schedule" in res.stdout and f"shortened at step {T // 2}" in res.stdout
    assert "final loss: old plan" in res.stdout
    assert (tmp_path / "new" / "prediction.json").exists()
    # one schedule per size: nothing in the ladder tests what the cut changes, and the new plan says so (once)
    assert res.stderr.count("warning: new plan: the target's schedule was edited, and no two sizes") == 1, res.stderr
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T // 4),
                              "--shorten-to", str(int(0.5 * T))])
    assert res.exit_code == 2 and "at most 25%" in res.stderr
    for at in (T, T + 5, hero.schedule.warmup_steps - 1):  # the edit's step, named by its flag
        res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(at),
                                  "--shorten-to", str(int(0.8 * T))])
        assert res.exit_code == 2 and f"--at {at:,}: an edit goes after the warmup" in res.stderr, res.output
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T // 2),
                              "--deadline", "0.001h", "--tokens-per-second", "1000"])  # 3,600 tokens: no step
    assert res.exit_code == 0 and f"the run gets no step past step {T // 2:,} by the deadline" in res.stdout
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T // 2),
                              "--deadline", "0.001h", "--tokens-per-second", "1000", "--shorten-to", str(int(0.8 * T))])
    assert res.exit_code == 0 and f"warning: --shorten-to {int(0.8 * T):,} ends the run at step {int(0.8 * T):,}, " \
        in res.stderr and "after the deadline" in res.stderr and "new schedule" in res.stdout, res.output
    # refused before any prediction is made: a deadline that has passed, two edits at once, --out a file
    base = ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T // 2)]
    for more, says in ((["--deadline", "2020-01-01T00:00"], "has passed"), (["--deadline", "-3h"], "--deadline '-3h': give a positive time from now (72h, 90m, 2d)"),
                       (["--deadline", "3 weeks"], "give an ISO time (2026-12-24T00:00) or a time from now (72h, 90m, 2d)"),
                       (["--deadline", "2999-01-01T00:00"], "more than 100 years away"),
                       (["--deadline", "1e7h"], "more than 100 years away"),
                       (["--shorten-to", str(int(0.8 * T)), "--cooldown-steps", "10"], "give one of them"),
                       (["--shorten-to", str(int(0.8 * T)), "--out", str(cfg)], "is a file, not a folder"),
                       (["--shorten-to", "-5"], "--shorten-to -5: give a step count of 1 or more"),
                       (["--cooldown-steps", "0"], "--cooldown-steps 0: give a step count of 1 or more"),
                       (["--shorten-to", str(int(0.8 * T)), "--tokens-per-second", "100"],
                        "--tokens-per-second is read with --deadline"),
                       (["--cooldown-steps", str(T)], f"ends at step {T // 2 + T:,}, past the run's horizon of {T:,} "
                                                      f"steps; an early cooldown ends sooner: give at most {T - T // 2:,}")):
        res = runner.invoke(app, base + more)
        assert res.exit_code == 2 and says in res.stderr and "new schedule" not in res.stdout, more


def test_replan_of_a_hero_not_in_the_store_asks_only_for_what_was_not_given(tmp_path, mp_store):
    cfg = tmp_path / "hero.yaml"
    UNEDITED.save(cfg)
    base = ["replan", str(cfg), "--store", str(mp_store.root), "--deadline", "10h"]
    res = runner.invoke(app, base)
    assert res.exit_code == 2 and "give --at STEP and --tokens-per-second" in res.stderr, res.output
    res = runner.invoke(app, [*base, "--tokens-per-second", "1000"])
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "is not in the store yet; give --at STEP" in said and "--tokens-per-second" not in said


@pytest.mark.parametrize("rate", ["nan", "inf", "-inf", "0", "-5", "1e308"])
def test_replan_refuses_a_throughput_that_is_not_a_positive_finite_number(tmp_path, mp_store, rate):
    cfg = PLAN.hero.save(tmp_path / "hero.yaml")
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", "10", "--deadline", "72h",
                              f"--tokens-per-second={rate}"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == (f"error: --tokens-per-second {float(rate):g}: must be a positive number up to 1e+12 "
                                  "(the measured throughput), or leave it out to take the hero's recent throughput from "
                                  "the store")


def test_replan_says_the_plan_finishes_before_a_deadline_that_allows_more(tmp_path, mp_store):
    cfg = PLAN.hero.save(tmp_path / "hero.yaml")
    T = PLAN.hero.stop_after_steps
    hours = (T - 10) * PLAN.hero.tokens_per_step / 1e6 / 3600
    assert hours < 1 / 60  # said so: "0.0 h" would say nothing
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", "10", "--deadline", "72h",
                              "--tokens-per-second", "1e6"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == (f"at 1,000,000 tokens/s the run finishes its {T:,} planned steps in under a minute, "
                                  "before the deadline (72.0 h left): the plan fits")
    out = tmp_path / "edited"  # no edit, no edited plan: said so
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", "10", "--deadline", "72h",
                              "--tokens-per-second", "1e6", "--out", str(out)])
    assert res.exit_code == 0 and f"nothing written to {out}: the plan needs no edit" in " ".join(res.stdout.split())
    assert not out.exists()


def test_an_edit_given_with_a_deadline_is_said_to_end_by_it_or_after_it():
    from ladder.predict.replan import horizon_that_fits

    fit = horizon_that_fits(300_000, 390_251, 16_000, 1e4, 30 * 3600)  # 1e4 tokens/s for 30 h: 67,500 steps more
    assert fit.reachable_steps == 367_500 and not fit.fits
    assert fit.edit_ends(367_500, "--shorten-to 367,500") == (True, "--shorten-to 367,500 ends the run at step "
                                                                     "367,500, by the deadline")
    on_time, said = fit.edit_ends(380_000, "--shorten-to 380,000")
    assert not on_time and said == ("--shorten-to 380,000 ends the run at step 380,000, 12,500 steps (5.6 h) after the "
                                    "deadline, by which it reaches step 367,500")
    done = horizon_that_fits(380_000, 390_251, 16_000, 1e8, 30 * 3600)  # far more time than the plan needs
    assert done.fits and done.reachable_steps == 390_251  # the run ends at its plan, not past it
    assert done.edit_ends(395_000, "--shorten-to 395,000")[0]  # past the plan (a planned cut replaced), in time


def test_an_edit_held_to_a_deadline_is_judged_by_its_own_end_and_only_once_it_is_an_edit(tmp_path, mp_store):
    (cut,) = PLAN.hero.schedule.edits  # the plan cuts 700 steps to 560 at step 350
    cfg = PLAN.hero.replace(name="hero-not-started").save(tmp_path / "hero.yaml")  # not in the store: no step reached
    T = UNEDITED.stop_after_steps
    base = ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(cut.at_step - 10), "--deadline", "72h",
            "--tokens-per-second", "1e6", "--n-boot", "20"]
    res = runner.invoke(app, [*base, "--shorten-to", str(T - 20)])  # past the planned cut's end, in time all the same
    assert res.exit_code == 0 and f"--shorten-to {T - 20:,} ends the run at step {T - 20:,}, by the deadline" in \
        " ".join(res.stdout.split()) and "after the deadline" not in res.stderr, res.output
    res = runner.invoke(app, [*base, "--shorten-to", str(T // 4)])  # no edit (a 75% cut): refused, nothing said of it
    assert res.exit_code == 2 and "at most 25%" in res.stderr and "ends the run" not in res.output, res.output


def test_replan_to_a_deadline_counts_the_time_left_from_where_the_run_is_not_from_at(tmp_path):
    store = ladder_store(tmp_path)
    now = UNEDITED.stop_after_steps // 2
    write_run(tmp_path / "runs", UNEDITED, upto=now, state="running")
    pull(store, LocalSource(tmp_path / "runs"))
    cfg = UNEDITED.save(tmp_path / "hero.yaml")
    more = int(0.3 * UNEDITED.stop_after_steps)  # the steps an hour holds at this throughput
    rate = str(more * UNEDITED.tokens_per_step / 3600)
    base = ["replan", str(cfg), "--store", str(store.root), "--deadline", "1h", "--tokens-per-second", rate,
            "--n-boot", "20", "--at"]
    res = runner.invoke(app, [*base, str(now + 20)])  # an edit planned a little ahead of the run
    said = " ".join(res.stdout.split())
    assert res.exit_code == 0 and f"the run reaches step {now + more:,} " in said, res.output
    late = now + more + 10  # past where the run gets by the deadline: no edit there ends by it
    res = runner.invoke(app, [*base, str(late)])
    assert res.exit_code == 2 and f"--at {late:,}: the run, at step {now:,}, reaches only step {now + more:,} by the " \
        "deadline" in " ".join(res.stderr.split()), res.output


def test_replan_to_a_deadline_no_step_fits_before_proposes_no_edit_it_then_refuses(tmp_path):
    """A deadline that leaves no step past where the run is: "shorten the horizon to 554 steps (`ladder replan
    --shorten-to 554`)" at step 554, then "--shorten-to 554 is not past --at 554" (exit 2)."""
    store = ladder_store(tmp_path)
    now = int(0.9 * UNEDITED.stop_after_steps)
    write_run(tmp_path / "runs", UNEDITED, upto=now, state="running")
    pull(store, LocalSource(tmp_path / "runs"))
    cfg = UNEDITED.save(tmp_path / "hero.yaml")
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(store.root), "--deadline", "1h",
                              "--tokens-per-second", "1", "--n-boot", "20"])
    said = " ".join(res.stdout.split())
    assert res.exit_code == 0 and f"the run gets no step past step {now:,} by the deadline" in said, res.output
    assert "--shorten-to" not in said and "stop the run where it is" in said


def test_replan_says_where_the_run_stands_against_the_old_plans_prediction(tmp_path):
    """A run 20% above its prediction was told only what each plan ends at, as if it were on track."""
    store = ladder_store(tmp_path)
    now = UNEDITED.stop_after_steps // 2
    write_run(tmp_path / "runs", UNEDITED, upto=now, state="running", law=lambda cfg, s: 1.2 * truth(cfg, s))
    pull(store, LocalSource(tmp_path / "runs"))
    cfg = UNEDITED.save(tmp_path / "hero.yaml")
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(store.root), "--shorten-to",
                              str(int(0.9 * UNEDITED.stop_after_steps)), "--n-boot", "20"])
    said = " ".join(res.stdout.split())
    assert res.exit_code == 0, res.output
    last = store.history([UNEDITED.name], ["eval/loss"]).iloc[-1]
    assert f"the run so far: eval/loss {last['value']:.4f} at step {int(last['step']):,}, where the old plan " in said
    assert "outside its 90% band): the run is off the trend both plans' curves follow" in said
    on_track = ladder_store(tmp_path / "on")
    write_run(tmp_path / "on" / "runs", UNEDITED, upto=now, state="running")
    pull(on_track, LocalSource(tmp_path / "on" / "runs"))
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(on_track.root), "--shorten-to",
                              str(int(0.9 * UNEDITED.stop_after_steps)), "--n-boot", "20"])
    said = " ".join(res.stdout.split())
    assert res.exit_code == 0 and "the run so far: eval/loss" in said and "off the trend" not in said, res.output


def test_a_deadline_is_a_time_from_now_in_seconds_minutes_hours_or_days():
    """Only hours were taken ("--deadline 90m" was refused as no ISO time)."""
    from ladder.cli.app import seconds_until

    for given, seconds in (("600s", 600), ("90m", 5400), ("72h", 259_200), ("2d", 172_800), (" 1.5h ", 5400)):
        assert seconds_until(given) == pytest.approx(seconds), given


def test_replan_to_a_deadline_says_a_run_at_its_last_step_is_done(tmp_path, mp_store):
    cfg = PLAN.hero.save(tmp_path / "hero.yaml")
    T = PLAN.hero.stop_after_steps
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T), "--deadline", "72h",
                              "--tokens-per-second", "1e6"])
    assert res.exit_code == 0, res.output
    assert " ".join(res.stdout.split()) == (f"the run is at step {T:,}, the last of its {T:,} planned: it is done, and "
                                            "no deadline asks anything of it")


def test_replan_in_json_gives_the_edit_both_plans_and_what_it_wrote_on_standard_output_alone(tmp_path, mp_store):
    cfg = UNEDITED.save(tmp_path / "hero.yaml")
    T, at, cut = UNEDITED.stop_after_steps, UNEDITED.stop_after_steps // 2, int(0.8 * UNEDITED.stop_after_steps)
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(at), "--shorten-to",
                              str(cut), "--n-boot", "50", "--out", str(tmp_path / "new"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # nothing else on standard output
    assert "new schedule" in res.stderr and "final loss: old plan" in res.stderr
    assert out["run"] == UNEDITED.name and out["at"] == at and out["deadline"] is None
    assert out["edit"]["shorten_to"] == cut and out["edit"]["cooldown_steps"] is None
    assert f"shortened at step {at}" in out["edit"]["new_schedule"] and out["edit"]["replaced"] == []
    new = Prediction.load(tmp_path / "new")
    assert out["final"]["new"]["step"] == cut and out["final"]["new"]["median"] == pytest.approx(new.final["median"])
    assert out["final"]["old"]["step"] == T and out["final"]["new"]["hi90"] > out["final"]["new"]["median"]
    steps = {r["step"] for r in out["steps"]}  # every step of either plan; the new one's end at the cut
    assert set(new.table["step"]) <= steps and max(steps) == T
    assert all((r["new"] is None) == (r["step"] > cut) for r in out["steps"])
    assert all(Path(p).exists() for p in out["written"]) and len(out["written"]) == 4
    assert [f"warning: {w}" in res.stderr for w in out["warnings"]] == [True] * len(out["warnings"])
    rate = 10 * T * UNEDITED.tokens_per_step / 3600  # the plan fits an hour ten times over: no edit
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(at), "--deadline", "1h",
                              "--tokens-per-second", str(rate), "--format", "json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 0 and out["edit"] is None and out["deadline"]["fits"] is True and out["written"] == []
    assert out["deadline"]["tokens_per_second"] == pytest.approx(rate) and "the plan fits" in out["deadline"]["message"]


def test_replan_to_a_deadline_no_cut_meets_shows_the_early_cooldown_that_does(tmp_path, mp_store):
    cfg = UNEDITED.save(tmp_path / "hero.yaml")
    T, at = UNEDITED.stop_after_steps, UNEDITED.stop_after_steps // 2
    rate = 0.1 * T * UNEDITED.tokens_per_step / 3600  # an hour left: a tenth of the plan, far past a 25% cut
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(at), "--deadline", "1h",
                              "--tokens-per-second", str(rate), "--n-boot", "20"])
    assert res.exit_code == 0, res.output
    said = " ".join(res.stdout.split())
    k = int(0.1 * T)
    assert "even a 25% cut does not fit" in said and f"the early cooldown that ends by the deadline: {k:,} steps" in said
    assert f"cooldown from step {at} over {k} steps" in said and "shortened at step" not in said


@pytest.mark.parametrize("edit", [["--shorten-to", "0.8"], ["--cooldown-steps", "0.1"]], ids=["shorten", "cooldown"])
def test_replan_predicts_to_the_new_horizon_as_predict_does_on_the_config_it_writes(tmp_path, mp_store, edit):
    import shutil

    cfg = tmp_path / "hero.yaml"
    UNEDITED.save(cfg)
    T = UNEDITED.stop_after_steps
    flag, share = edit
    store = Store(shutil.copytree(mp_store.root, tmp_path / "store"))
    if UNEDITED.name in set(store.runs()["name"]):  # a hero another test watched: past T // 2, a what-if here
        assert runner.invoke(app, ["runs", "--remove", UNEDITED.name, "--yes", "--store", str(store.root)]).exit_code == 0
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(store.root), "--at", str(T // 2),
                              flag, str(int(float(share) * T)), "--n-boot", "50", "--out", str(tmp_path / "new")])
    assert res.exit_code == 0, res.output
    written = tmp_path / "new" / f"{UNEDITED.name}.yaml"
    horizon = RunConfig.load(written).stop_after_steps
    assert horizon < T
    # `ladder train` reads a relative run_dir from the config's folder: the edited plan continues the hero's run
    from ladder.launch import run_dir_of

    home = run_dir_of(cfg, UNEDITED).resolve()
    assert run_dir_of(written, RunConfig.load(written)).resolve() == home
    assert f"train it with `ladder train {written} --resume`: it continues the run in {home}" in " ".join(res.stdout.split())
    res_again = runner.invoke(app, ["predict", str(written), "--store", str(store.root), "--n-boot", "50",
                                    "--out", str(tmp_path / "again")])
    assert res_again.exit_code == 0, res_again.output
    replanned, again = Prediction.load(tmp_path / "new"), Prediction.load(tmp_path / "again")
    assert int(replanned.table["step"].iloc[-1]) == horizon and replanned.table["fraction_edited"].max() == 1.0
    pd.testing.assert_frame_equal(replanned.table, again.table)
    final = f"new plan {again.final['median']:.4f} at step {horizon:,}"
    assert final in " ".join(res.stdout.split()) and f"Predicted final eval/loss at step {horizon:,}: {again.final['median']:.4f}" in res_again.stdout


def test_replan_before_a_planned_edit_replaces_it_until_the_run_has_made_it(tmp_path):
    cfg = tmp_path / "hero.yaml"
    PLAN.hero.save(cfg)
    (edit,) = PLAN.hero.schedule.edits
    at, to = edit.at_step - 10, PLAN.hero.stop_after_steps - 20
    args = ["replan", str(cfg), "--at", str(at), "--shorten-to", str(to), "--n-boot", "20", "--out", str(tmp_path / "new")]
    # the hero not started (not in the store): its planned edit is not reached, and the new one replaces it
    rungs = ladder_store(tmp_path / "rungs")
    res = runner.invoke(app, [*args, "--store", str(rungs.root)])
    assert res.exit_code == 0, res.output
    said = " ".join(res.stdout.split())
    assert (f"the planned edit not reached by step {at:,} (shortened at step {edit.at_step} to "
            f"{edit.new_total_steps} steps) is replaced by this one") in said
    written = RunConfig.load(tmp_path / "new" / f"{PLAN.hero.name}.yaml").schedule
    assert written.edits == (dataclasses.replace(edit, at_step=at, new_total_steps=to),)
    # a deadline with no throughput, for a run the store does not hold: the flag to give is named
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(rungs.root), "--at", str(at), "--deadline", "72h"])
    assert res.exit_code == 2 and "so no throughput is measured; give --tokens-per-second" in res.stderr
    # the hero in the store past its edit: the edit is made, and an edit before it is refused
    ladder_store(tmp_path / "live")
    write_run(tmp_path / "live" / "runs", PLAN.hero, upto=edit.at_step + 10, state="running")
    pull(Store(tmp_path / "live" / "store"), LocalSource(tmp_path / "live" / "runs"))
    res = runner.invoke(app, [*args[:-1], str(tmp_path / "new2"), "--store", str(tmp_path / "live" / "store")])
    assert res.exit_code == 2, res.output
    assert (f"--at {at:,}: the run is at step {edit.at_step + 10:,}, past its edit shortened at step {edit.at_step} "
            f"to {edit.new_total_steps} steps; a new edit goes after step {edit.at_step:,}, at step {edit.at_step + 1:,} or "
            "later") in " ".join(res.stderr.split())  # an edit at its step would replace it
    assert not (tmp_path / "new2").exists()
    # a second copy of the hero under its name (another id): how far the run has got is not taken as "not started"
    (tmp_path / "copy.csv").write_text("run,step,loss\nhero-copy,10,3.0\n")
    res = runner.invoke(app, ["import", "csv", str(tmp_path / "copy.csv"), "--run", "run", "--step", "step", "--metric",
                              "eval/loss=loss", "--coord", f"name={PLAN.hero.name}", "--coord", "group=other", "--coord",
                              f"active_params={PLAN.hero.spec.active_params()}", "--coord",
                              f"stop_after_steps={PLAN.hero.stop_after_steps}", "--coord",
                              f"tokens_per_step={PLAN.hero.tokens_per_step}", "--store", str(tmp_path / "live" / "store")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*args[:-1], str(tmp_path / "new3"), "--store", str(tmp_path / "live" / "store")])
    assert res.exit_code == 2 and f"run name '{PLAN.hero.name}' is ambiguous" in res.stderr, res.output
    assert "(group 'other')" in res.stderr  # two runs of one name, each with its group (not "one run pulled twice")
    assert not (tmp_path / "new3").exists()


def test_a_watch_keeps_a_replan_that_replaced_a_planned_cut_the_run_has_not_reached(tmp_path):
    """`ladder replan --target-run` at the live hero's last step, its planned cut further on (the run's config still
    holds it): the watch judges the run against the replan, not a prediction made again from the old plan."""
    (edit,) = PLAN.hero.schedule.edits
    store = ladder_store(tmp_path)
    at = edit.at_step - 40
    write_run(tmp_path / "runs", PLAN.hero, upto=at, state="running")
    pull(store, LocalSource(tmp_path / "runs"))
    res = runner.invoke(app, ["replan", "--target-run", PLAN.hero.name, "--store", str(store.root), "--shorten-to",
                              str(edit.new_total_steps - 10), "--n-boot", "20", "--out", str(tmp_path / "pred")])
    assert res.exit_code == 0 and "is replaced by this one" in res.stdout, res.output
    replanned = (tmp_path / "pred" / "prediction.json").read_text()
    res = runner.invoke(app, ["watch", "--prediction", str(tmp_path / "pred"), "--store", str(store.root), "--local",
                              str(tmp_path / "runs" / PLAN.hero.name), "--once"])
    assert "schedule edited" not in res.output and (tmp_path / "pred" / "prediction.json").read_text() == replanned
    assert int(Prediction.load(tmp_path / "pred").table["step"].iloc[-1]) == edit.new_total_steps - 10


def test_watch_says_the_run_passed_the_predictions_edit_without_it_not_that_its_schedule_was_edited(tmp_path, mp_store):
    (edit,) = PLAN.hero.schedule.edits
    out = tmp_path / "pred"
    predict(mp_store, PLAN.hero, FAST).save(out)  # the prediction holds the cut; the run's config does not
    unedited = PLAN.hero.replace(schedule=PLAN.hero.schedule.without_edits())
    write_run(tmp_path / "hero", unedited, upto=edit.at_step + 20, state="running")
    store = shutil.copytree(mp_store.root, tmp_path / "store")  # the module's, as it is: another test's hero in it?
    res = runner.invoke(app, ["watch", "--prediction", str(out), "--local", str(tmp_path / "hero" / PLAN.hero.name),
                              "--store", str(store), "--once", "--replace"])
    said = " ".join(res.stdout.split())
    assert f"the run passed step {edit.at_step:,} without the edit the prediction holds there: predicting again from " \
        "its own schedule" in said, res.output
    assert "schedule edited" not in said and "predicting again from its own schedule" in said
    assert json.loads((out / "prediction.json").read_text())["table"][-1]["step"] == unedited.stop_after_steps


@pytest.mark.parametrize("made_it, lr_every", [(False, 1), (True, 1), (False, 120), (True, 120)],
                         ids=["kept-its-plan", "made-the-cut", "kept-its-plan-lr-sparse", "made-the-cut-lr-sparse"])
def test_a_watch_holds_a_run_that_logs_its_lr_alone_to_its_planned_steps_and_its_lr(tmp_path, mp_store, made_it,
                                                                                     lr_every):
    """A hero imported with its LR logged and no schedule declared, a replan's cut ahead of it: past the cut, a run
    whose coordinates still plan the whole horizon and whose LR did not follow the cut is predicted again from the
    plan it runs (it was judged against the cut to its end, past it "cannot judge", without a word); one whose LR
    follows the cut keeps the replan. Where its LR is logged more seldom than its evals, the replan holds until an LR
    logged past the cut tells."""
    from ladder.predict.replan import shortened

    T, at, cut = UNEDITED.stop_after_steps, UNEDITED.stop_after_steps // 4, int(0.85 * UNEDITED.stop_after_steps)
    cfg = UNEDITED.save(tmp_path / f"{UNEDITED.name}.yaml")
    ran = shortened(UNEDITED, at, cut) if made_it else UNEDITED
    store = Store(shutil.copytree(mp_store.root, tmp_path / "store"))
    n = round(T * UNEDITED.tokens_per_step / UNEDITED.tpp)  # the token ratio the config declares, a store holds none

    def imported(upto: int) -> None:
        steps = np.arange(1, upto + 1)
        evals = np.array([s for s in ran.eval_steps() if s <= upto])
        lr = np.where(steps % lr_every == 0, ran.schedule.lrs(0, upto), np.nan)
        table = pd.DataFrame({"run": UNEDITED.name, "state": "running", "step": steps, "lr": lr})
        table = table.merge(pd.DataFrame({"step": evals, "loss": truth(ran, evals)}), on="step", how="left")
        table.to_csv(tmp_path / "hero.csv", index=False)
        res = runner.invoke(app, ["import", "csv", str(tmp_path / "hero.csv"), "--run", "run", "--step", "step",
                                  "--metric", "eval/loss=loss", "--metric", "optim/learning_rate=lr", "--coord",
                                  f"active_params={n}", "--coord",
                                  f"fit_flops_per_token={UNEDITED.fit_flops_per_token}", "--coord",
                                  f"stop_after_steps={T}", "--coord", f"tokens_per_step={UNEDITED.tokens_per_step}",
                                  "--coord", f"group={UNEDITED.group}", "--store", str(store.root)])
        assert res.exit_code == 0, res.output

    imported(at - 10)
    res = runner.invoke(app, ["replan", str(cfg), "--store", str(store.root), "--at", str(at), "--shorten-to", str(cut),
                              "--n-boot", "20", "--out", str(tmp_path / "pred")])
    assert res.exit_code == 0, res.output
    watch = ["watch", "--prediction", str(tmp_path / "pred"), "--store", str(store.root), "--once"]
    said = " ".join(runner.invoke(app, watch).output.split())
    assert "predicting again" not in said  # not at the cut yet: the replan is the plan
    imported(at + 60)
    said = " ".join(runner.invoke(app, watch).output.split())
    if lr_every > 60:  # no LR past the cut yet: the replan holds
        assert "predicting again" not in said and int(Prediction.load(tmp_path / "pred").table["step"].iloc[-1]) == cut
        imported(at + 60 + lr_every)
        said = " ".join(runner.invoke(app, watch).output.split())
    last = int(Prediction.load(tmp_path / "pred").table["step"].iloc[-1])
    if made_it:
        assert "predicting again" not in said and last == cut, said
    else:
        assert f"the run passed step {at:,} without the edit the prediction holds there: predicting again" in said, said
        assert last == T and len(list((tmp_path / "pred").glob("earlier-prediction-*"))) == 1
        assert f"{tmp_path / 'pred' / cfg.name} is the edited config an earlier `ladder replan` wrote there, not this " \
            "prediction's plan" in said  # the replan's config, still there, is said not to be the run's


def test_a_watch_takes_the_runs_edit_written_without_its_default_fields_as_the_predictions(tmp_path, mp_store):
    """A run whose config holds the prediction's cut written by hand (no `length`, no `shape`, as a cut needs neither)
    made the prediction's edit: the watch keeps the prediction (it said "schedule edited" and predicted again at every
    check, each time the same)."""
    import yaml

    (edit,) = PLAN.hero.schedule.edits
    out = tmp_path / "pred"
    predict(mp_store, PLAN.hero, FAST).save(out)
    before = (out / "prediction.json").read_text()
    run = write_run(tmp_path / "hero", PLAN.hero, upto=edit.at_step + 20, state="running")
    config = yaml.safe_load((run / "run.yaml").read_text())
    config["schedule"]["edits"] = [{"kind": "shorten", "at_step": edit.at_step, "new_total_steps": edit.new_total_steps}]
    (run / "run.yaml").write_text(yaml.safe_dump(config))
    store = shutil.copytree(mp_store.root, tmp_path / "store")
    res = runner.invoke(app, ["watch", "--prediction", str(out), "--local", str(run), "--store", str(store), "--once"])
    assert res.exit_code in (0, 4), res.output
    assert "schedule edited" not in res.output and "predicting again" not in res.output
    assert (out / "prediction.json").read_text() == before and not list(out.glob("earlier-prediction-*"))


def test_a_replans_edit_the_run_passes_without_making_it_is_not_the_runs_plan():
    """A watch keeps a replan ahead of the run until the run passes the replan's edit; past it, a run whose config
    still lacks the edit is not following it (judged against the shorter plan, its last fifth went unjudged) and is
    predicted again from its own schedule."""
    from ladder.predict.edits import plan_holds as _plan_holds

    cut = {"at_step": 16_000, "new_total_steps": 18_000}
    planned_cut = {"at_step": 17_000, "new_total_steps": 19_000}  # in the run's config, replaced by the replan
    assert _plan_holds([], [cut], [], 15_000) and _plan_holds([], [cut], [], 16_000)  # not passed yet
    assert not _plan_holds([], [cut], [], 16_500)  # passed it, and the config has no edit
    assert _plan_holds([cut], [cut], [], 16_500)  # the run made it
    assert _plan_holds([planned_cut], [cut], [planned_cut], 15_000)  # the replan replaced the run's planned cut
    assert not _plan_holds([planned_cut], [cut], [planned_cut], 16_500)
    assert not _plan_holds([planned_cut], [], [], 15_000)  # an edit the prediction never knew of


def test_a_prediction_json_edited_by_hand_with_an_edit_of_no_step_is_no_plan_to_hold_a_run_to():
    from ladder.watch.monitor import _planned_by

    plan = {"peak_lr": 1e-3, "total_steps": 20_000, "warmup_steps": 100, "decay": "cosine", "min_lr_ratio": 0.1}
    cut = {"kind": "shorten", "at_step": 8_000, "new_total_steps": 18_000}
    no_lr = lambda: (np.zeros(0, np.int64), np.zeros(0))  # noqa: E731
    assert _planned_by({**plan, "edits": [cut]}, 20_000, no_lr)["edits"] == []  # the plan without the cut
    for bad in ({**cut, "at_step": None}, "shorten at 8000", {**cut, "at_step": "8000"}):
        assert _planned_by({**plan, "edits": [bad]}, 20_000, no_lr) == {}


def test_a_replan_that_replaces_a_planned_cut_is_held_to_the_horizon_without_it():
    from ladder.predict.replan import shortened, with_cooldown

    (edit,) = PLAN.hero.schedule.edits  # the plan cuts the horizon from T to edit.new_total_steps
    T, at = UNEDITED.stop_after_steps, edit.at_step - 10
    longer = shortened(PLAN.hero, at, edit.new_total_steps + 10)  # below T, above the cut it replaces
    assert longer.schedule.edits == (dataclasses.replace(edit, at_step=at, new_total_steps=edit.new_total_steps + 10),)
    too_far = int(0.7 * T)  # 30% of T: past the 25% a shortening may cut, though within 25% of the planned cut's end
    with pytest.raises(LadderError, match=f"--shorten-to {too_far} cuts {1 - too_far / T:.2%} of the run's {T} steps"):
        shortened(PLAN.hero, at, too_far)
    with pytest.raises(LadderError) as refused:  # the horizon it is measured against is not the plan in force
        shortened(PLAN.hero, at, too_far)
    assert (f"steps (its horizon without the planned {edit.describe()}, which this edit replaces; the plan in force "
            f"ends at step {edit.new_total_steps:,})") in str(refused.value)
    with pytest.raises(LadderError, match="a replan cuts a plan short, never longer: no rung trained past its plan"):
        shortened(UNEDITED, at, T + 100)
    least = -(-3 * T // 4)  # the fewest steps a 25% cut leaves, named where one step fewer is refused
    with pytest.raises(LadderError, match=f"at most 25% is supported: give {least} or more"):
        shortened(PLAN.hero, at, least - 1)
    assert shortened(PLAN.hero, at, least).stop_after_steps == least
    k = T - at - 1  # a cooldown that ends before T, after the planned cut's end
    assert with_cooldown(PLAN.hero, at, k).schedule.horizon == at + k
    with pytest.raises(LadderError, match=f"must be below the planned {edit.new_total_steps} steps"):
        shortened(PLAN.hero, edit.at_step + 10, edit.new_total_steps + 10)  # after the planned cut: it holds


def test_replan_into_a_watched_prediction_folder_moves_the_watch_aside_with_that_prediction(tmp_path, mp_store,
                                                                                          pf_unedited):
    cfg = tmp_path / f"{UNEDITED.name}.yaml"
    UNEDITED.save(cfg)
    T = UNEDITED.stop_after_steps
    base = ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T // 2), "--shorten-to", str(int(0.8 * T)),
            "--n-boot", "50", "--out"]
    written = cfg.read_text()
    res = runner.invoke(app, [*base, str(tmp_path)])  # the folder of the config itself, no prediction in it
    assert res.exit_code == 2 and f"{cfg} is the config this replan edits: --out would write over it" in res.stderr
    pf_unedited.save(tmp_path)  # a prediction of the plan beside it (`ladder predict CONFIG --out` that folder)
    res = runner.invoke(app, [*base, str(tmp_path)])
    assert res.exit_code == 2 and "is the config this replan edits" in res.stderr and cfg.read_text() == written
    other = tmp_path / "other"
    UNEDITED.save(other / cfg.name)  # another folder's YAML of that name, no prediction beside it
    res = runner.invoke(app, [*base, str(other)])
    assert res.exit_code == 2 and f"{other / cfg.name} exists and is no earlier replan's" in res.stderr
    folder = tmp_path / "pred"
    pf_unedited.save(folder)
    for name in WATCH_FILES:
        (folder / name).write_text("{}\n")
    earlier = (folder / "prediction.json").read_text()
    res = runner.invoke(app, [*base, str(folder)])
    assert res.exit_code == 0, res.output
    (aside,) = folder.glob("earlier-watch-*")
    assert sorted(p.name for p in aside.iterdir()) == sorted(WATCH_FILES + PREDICTION_FILES)
    assert (aside / "prediction.json").read_text() == earlier != (folder / "prediction.json").read_text()
    assert not any((folder / name).exists() for name in WATCH_FILES) and f"moved to {aside}/" in " ".join(res.stdout.split())
    again = runner.invoke(app, [*base[:-5], "--shorten-to", str(int(0.85 * T)), "--n-boot", "50", "--out", str(folder)])
    assert again.exit_code == 0, again.output  # its own config, beside its own prediction: replaced
    assert f"new_total_steps: {int(0.85 * T)}" in (folder / cfg.name).read_text()
    mine = tmp_path / "mine"  # a prediction `ladder predict` wrote, and a copy of the hero's config kept beside it
    pf_unedited.save(mine)
    (mine / cfg.name).write_text("# my notes on the hero\n" + written)
    res = runner.invoke(app, [*base, str(mine)])
    assert res.exit_code == 2 and f"{mine / cfg.name} exists, and the prediction beside it does not record writing it" \
        in " ".join(res.stderr.split()), res.output
    assert (mine / cfg.name).read_text().startswith("# my notes")


def test_predict_given_a_folder_names_a_yaml_in_it(tmp_path):
    plan = tmp_path / "plan"
    PLAN.rungs[0].save(plan / "0-rung.yaml")
    PLAN.hero.save(plan / f"{PLAN.hero.name}.yaml")
    res = runner.invoke(app, ["predict", str(plan), "--store", str(tmp_path / "store")])
    says = f"{plan}: is a folder; give a YAML file in it, e.g. {plan / PLAN.hero.name}.yaml"
    assert res.exit_code == 2 and says in " ".join(res.stderr.split()), res.output


def test_fit_curve_reports_what_the_runs_say_about_the_floor(mp_store):
    base = ["fit", "curve", "--law", "multipower", "--store", str(mp_store.root), "--shape", "C=2,beta=0.6,gamma=0.6"]
    res = runner.invoke(app, base + ["--format", "json"])
    assert res.exit_code == 0, res.output
    floor = json.loads(res.stdout)["floor_posterior"]
    low = mp_store.history(list(mp_store.runs()["run_id"]), ["eval/loss"])["value"].min()
    assert 0 <= floor["lo90"] <= floor["median"] <= floor["hi90"] < low
    text = runner.invoke(app, base)
    words = " ".join(text.output.split())
    assert text.exit_code == 0 and f"posterior median {floor['median']:.4g}" in words
    assert "`ladder predict` uses the median" in words
    pinned = runner.invoke(app, base + ["--E", "0.5", "--format", "json"])
    assert pinned.exit_code == 0 and json.loads(pinned.stdout)["floor_posterior"] is None


def test_the_schedule_assumption_counts_rungs_with_a_declared_schedule_beside_those_with_a_logged_lr():
    from types import SimpleNamespace

    from ladder.predict.adapter import _describe_rungs

    def rung(name, schedule=None, logged=None):
        return SimpleNamespace(name=name, schedule=schedule, logged_lrs=logged)

    lrs = np.ones(3)
    said = _describe_rungs([rung("r1", schedule=PLAN.rungs[0].schedule), rung("r2", logged=lrs), rung("r3", logged=lrs),
                            rung("r4", logged=lrs)])
    assert said == "3 of 4 rungs with a logged LR, 1 with a declared schedule (r1)"
    said = _describe_rungs([rung("r1", schedule=PLAN.rungs[0].schedule), rung("r2"), rung("r3", logged=lrs)])
    assert said == "1 of 3 rungs with a logged LR, 1 with a declared schedule (r1), 1 with neither"
    assert _describe_rungs([rung("r1"), rung("r2", logged=lrs)]) == "1 of 2 rungs with a logged LR, no schedule declared"


def test_a_wandb_failure_after_the_prediction_says_what_is_written(tmp_path, pf_store, monkeypatch):
    import ladder.output.towandb as towandb

    def unreachable(*args, **kwargs):
        raise LadderError("wandb could not start a run in 'team/ladder': connection refused")

    monkeypatch.setattr(towandb, "check_ready", lambda project: "online")
    monkeypatch.setattr(towandb, "log_prediction", unreachable)
    cfg = PLAN.hero.save(tmp_path / "hero.yaml")
    out = tmp_path / "pred"
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(pf_store.root), "--out", str(out), "--n-boot", "20",
                              "--to-wandb", "team/ladder"])
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "connection refused; the prediction itself is written:" in said, res.output
    assert str(out / "prediction.json") in said and Prediction.load(out).run_name == PLAN.hero.name


def test_a_prediction_saved_over_a_replans_keeps_the_record_of_the_config_the_replan_wrote(tmp_path, mp_store,
                                                                                            pf_unedited):
    """A watch's new prediction (or a `ladder predict`) saved into a replan's folder: the edited config there stays
    the replan's, so a later replan into that folder replaces it rather than refusing it as the user's."""
    cfg = tmp_path / f"{UNEDITED.name}.yaml"
    UNEDITED.save(cfg)
    T = UNEDITED.stop_after_steps
    base = ["replan", str(cfg), "--store", str(mp_store.root), "--at", str(T // 2), "--n-boot", "50", "--out",
            str(tmp_path / "pred"), "--shorten-to"]
    assert runner.invoke(app, [*base, str(int(0.8 * T))]).exit_code == 0
    res = runner.invoke(app, ["predict", str(tmp_path / "pred" / cfg.name), "--store", str(mp_store.root), "--n-boot",
                              "50", "--out", str(tmp_path / "pred")])  # the replan's own config predicted again
    assert res.exit_code == 0 and "not this prediction's plan" not in res.output, res.output
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(mp_store.root), "--n-boot", "50", "--out",
                              str(tmp_path / "pred")])
    assert res.exit_code == 0 and f"{tmp_path / 'pred' / cfg.name} is the edited config an earlier `ladder replan` " \
        "wrote there, not this prediction's plan" in " ".join(res.stdout.split()), res.output
    pf_unedited.save(tmp_path / "pred")  # what the watch does when it predicts again from the run's own schedule
    assert Prediction.load(tmp_path / "pred").schedule[CONFIG_WRITTEN] == cfg.name
    res = runner.invoke(app, [*base, str(int(0.85 * T))])
    assert res.exit_code == 0, res.output
    assert f"new_total_steps: {int(0.85 * T)}" in (tmp_path / "pred" / cfg.name).read_text()
    dataclasses.replace(pf_unedited, schedule={}).save(tmp_path / "pred")  # a target of no schedule: none made up
    assert Prediction.load(tmp_path / "pred").schedule == {}
    (tmp_path / "pred" / cfg.name).unlink()  # the config gone: the record goes with it
    pf_unedited.save(tmp_path / "pred")
    assert CONFIG_WRITTEN not in Prediction.load(tmp_path / "pred").schedule


@pytest.mark.parametrize("n_boot", [0, 1, -1, 19, 10_001])
def test_the_library_s_settings_refuse_refits_the_command_refuses(n_boot):
    """`PredictSettings(n_boot=0)` was taken: the per-fraction law, left without a band, dropped out of the
    candidates and the prediction changed (+0.10% → +1.18% on OLMo 3.2B), with a warning that it changed nothing."""
    with pytest.raises(LadderError, match=rf"PredictSettings.n_boot {n_boot}: give 20 to 10,000 refits"):
        PredictSettings(n_boot=n_boot)
    assert PredictSettings(n_boot=20).n_boot == 20


def test_a_prediction_whose_rungs_changed_in_the_store_since_is_said_to_be_stale(tmp_path):
    from ladder.predict.stale import stale_warning
    from tests.synthetic_ladder import write_run

    store = ladder_store(tmp_path)
    predict(store, UNEDITED, PredictSettings(n_boot=50)).save(tmp_path / "pred")
    pred = Prediction.load(tmp_path / "pred")
    assert sorted(pred.rung_data["digests"]) == sorted(pred.rungs) and stale_warning(store, pred) is None
    hero = tmp_path / "hero-runs"
    write_run(hero, UNEDITED, seed=9, upto=350, state="running")  # the hero half way: on its prediction
    watch = ["watch", "--prediction", str(tmp_path / "pred"), "--local", str(hero), "--store", str(store.root), "--once"]
    assert "[prediction]" not in runner.invoke(app, watch).output  # (its early evals warn: the prediction is weak there)
    assert runner.invoke(app, watch).exit_code == 0  # no new eval: where it stands, on its prediction
    rung = PLAN.rungs[1]
    write_run(tmp_path / "runs", rung, noise=0.001, seed=1, train_noise=0.01)  # its train loss alone: no law reads it
    pull(store, LocalSource(tmp_path / "runs"), full=True)
    assert stale_warning(store, pred) is None
    write_run(tmp_path / "runs", rung, noise=0.003, seed=1)  # its evals: what the laws were fitted on
    pull(store, LocalSource(tmp_path / "runs"), full=True)
    said = (f"the store's data of rung {rung.name} changed since this prediction was made (values imported or pulled "
            "again, or coordinates given anew): it was fitted on the old data; `ladder predict` again to fit the new")
    assert stale_warning(store, pred) == said
    res = runner.invoke(app, ["score", "--prediction", str(tmp_path / "pred"), "--store", str(store.root), "--run",
                              PLAN.rungs[-1].name, "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["warnings"][0] == said, res.output
    first = runner.invoke(app, watch)  # no new eval, and the prediction stale: a warning, sent once to every sink
    assert first.exit_code == 4 and f"warning [prediction] step 350: {said}" in " ".join(first.output.split()), \
        first.output
    logged = [json.loads(x) for x in (tmp_path / "pred" / "alerts.jsonl").read_text().splitlines()]
    assert [a["rule"] for a in logged if a["kind"] == "alert"].count("prediction") == 1  # in the file the report reads
    again = runner.invoke(app, watch)  # a cron job's next check: counted, not sent again
    assert again.exit_code == 4 and "[prediction]" not in again.output, again.output
    assert stale_warning(store, predict(store, UNEDITED, PredictSettings(n_boot=50))) is None  # made again: not stale
    from ladder.predict.prediction import CONFIG_WRITTEN

    replanned = dataclasses.replace(pred, schedule={**pred.schedule, CONFIG_WRITTEN: "hero.yaml"})
    assert stale_warning(store, replanned).endswith("`ladder predict` the edited plan the replan wrote beside it "
                                                    "(hero.yaml) again, not the plan it edits to fit the new")


def test_a_hero_pulled_before_its_first_eval_is_predicted_from_its_logged_lr(tmp_path):
    """A hero whose LR and train loss are logged, and no eval yet (the usual time to predict), was a ValueError."""
    from ladder.data.sources import CoordinateOverrides
    from tests.synthetic_ladder import write_run

    store = ladder_store(tmp_path)
    hero = UNEDITED
    run_dir = write_run(tmp_path / "early", hero, state="running")
    logged = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    early = [r for r in logged if r["step"] <= 250 and "eval/loss" not in r]  # its evals not pulled yet
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in early))
    (run_dir / "run.yaml").unlink()  # a trainer of its own: no planner config, its LR logged
    given = {"name": hero.name, "role": "hero", "group": PLAN.rungs[0].group, "active_params": hero.spec.active_params(),
             "fit_flops_per_token": hero.fit_flops_per_token, "stop_after_steps": hero.stop_after_steps,
             "tokens_per_step": hero.tokens_per_step}
    pull(store, LocalSource(tmp_path / "early"), overrides=CoordinateOverrides(all_runs=given))
    res = runner.invoke(app, ["predict", "--store", str(store.root), "--target-run", hero.name, "--n-boot", "20",
                              "--ratio-tol", "0.02", "--out", str(tmp_path / "pred")])  # (its 6·N ratio: 1% off)
    assert res.exit_code == 0, res.output
    assert np.isfinite(Prediction.load(tmp_path / "pred").final["median"])

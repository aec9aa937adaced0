"""`ladder check`: each injected fault in a synthetic ladder is flagged with its exit code, and a clean
ladder raises nothing. Runs are written as trainer run folders and pulled into a store."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ladder.check import CHECKS, check_ladder
from ladder.cli import app
from ladder.cli.check import CHECK_NAMES
from ladder.config.plan import override, plan
from ladder.config.recipe import load_recipe
from ladder.config.runconfig import RunConfig
from ladder.data.sources import LocalSource
from ladder.data.sources.pull import pull
from ladder.data.store import Store

# Five rungs of the micro-cpu recipe at half its token ratio: 160 to 960 steps, LRs by its rule.
PLAN = plan(override(load_recipe("micro-cpu"), widths=[32, 48, 48, 64, 64], depths=[2, 2, 3, 3, 4],
                     sets=["tpp=6"]))
C_MIN = min(r.fit_flops for r in PLAN.rungs)
runner = CliRunner()


def final_loss(cfg: RunConfig) -> float:
    return 1.2 + 2.0 * (cfg.fit_flops / C_MIN) ** -0.2


def write_run(root: Path, cfg: RunConfig, seed: int, *, grad_growth: float = 0.0, spikes: int = 0,
              off_trend: float = 0.0, upto: int | None = None, state: str = "finished", last_eval: float | None = None,
              unlogged: tuple[str, ...] = (), last_train: float = 1.0) -> None:
    """A run folder: train loss, grad norm, drop fraction and LR every step, eval loss at the evals (the last one
    `last_eval` where given, the last train loss × `last_train`); the metrics in `unlogged` left out."""
    run = root / cfg.name
    run.mkdir(parents=True)
    cfg.save(run / "run.yaml")
    rng = np.random.default_rng(seed)
    T = cfg.stop_after_steps
    last = upto or T
    steps = np.arange(1, last + 1)
    g = steps / T
    curve = final_loss(cfg) * (1 + 2.0 * np.exp(-5 * g))
    train = curve * (1 + 0.005 * rng.standard_normal(steps.size))
    train[-1] *= last_train
    for at in np.linspace(0.15, 0.95, spikes) if spikes else []:
        i = int(at * T)
        train[i:i + 3] *= 1.3
    scale = (cfg.fit_flops / C_MIN) ** grad_growth
    grad = scale * (0.5 + 0.3 * g) * np.exp(0.1 * rng.standard_normal(steps.size))
    grad[:3] = 5.0  # random weights at the start
    drop = np.clip(0.08 + 0.01 * rng.standard_normal(steps.size), 0, 1)
    lines = [{"step": int(s), "tokens": int(s) * cfg.tokens_per_step, "train/loss": float(v),
              "grad/norm/total": float(gn), "moe/drop_fraction": float(d),
              "optim/learning_rate": float(cfg.schedule.lr(int(s) - 1))}
             for s, v, gn, d in zip(steps, train, grad, drop)]
    for s in cfg.eval_steps():
        if s <= last:
            value = final_loss(cfg) * (1 + 2.0 * np.exp(-5 * s / T)) * (1 + off_trend + 0.0005 * rng.standard_normal())
            lines.append({"step": int(s), "eval/loss": float(value)})
    if last_eval is not None:
        lines[-1]["eval/loss"] = last_eval
    lines = [{k: v for k, v in line.items() if k not in unlogged} for line in lines]
    lines.sort(key=lambda x: x["step"])
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (run / "status.json").write_text(json.dumps({"state": state, "step": int(last), "updated": 0.0}))


def ladder_store(tmp: Path, rungs=None, *, hero: bool = True, **faults) -> Path:
    """A store of the rungs (with per-rung faults: name → write_run options) and, if asked, a hero run
    that has just started."""
    for i, cfg in enumerate(rungs or PLAN.rungs):
        write_run(tmp / "runs", cfg, seed=i, **faults.get(cfg.name, {}))
    if hero:
        write_run(tmp / "runs", PLAN.hero, seed=99, upto=20, state="running")
    pull(Store(tmp / "store"), LocalSource(tmp / "runs"))
    return tmp / "store"


def check(store: Path, *args) -> tuple[int, dict]:
    result = runner.invoke(app, ["check", "--store", str(store), "--format", "json", *map(str, args)])
    assert result.exit_code in (0, 3, 4, 5), result.output
    return result.exit_code, json.loads(result.stdout)


def finding(report: dict, name: str) -> dict:
    return next(f for f in report["findings"] if f["name"] == name)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    return ladder_store(tmp_path_factory.mktemp("clean"))


def test_clean_ladder_raises_nothing(clean):
    code, report = check(clean)
    assert code == 0, [(f["name"], f["status"], f["evidence"]) for f in report["findings"]]
    assert {f["name"]: f["status"] for f in report["findings"]} == dict.fromkeys(CHECKS, "ok")
    assert report["rungs"] == [c.name for c in PLAN.rungs]  # by compute, as the findings list them, not as stored
    assert report["hero"]["flops"] == pytest.approx(  # the plan it starts with, as predict and compare count it
        PLAN.hero.fit_flops_per_token * PLAN.hero.tokens_per_step * PLAN.hero.schedule.total_steps)
    # `ladder plan` counts the edited run's: the hero found in the store says which it is, as a --hero config does
    assert report["hero"]["source"] == (
        f"the hero run {PLAN.hero.name!r} in the store ({PLAN.hero.schedule.total_steps:,} steps as planned at its "
        f"start, {PLAN.hero.stop_after_steps:,} with its schedule's edits)")
    grad = finding(report, "grad-norm")["values"]
    assert grad["hero"] < 4.0 and grad["hero_band"][0] < grad["hero"] < grad["hero_band"][1]
    assert min(grad["peak_fraction"]) > 0.05  # the first steps' large norm is not the peak


def test_clean_ladder_table(clean):
    result = runner.invoke(app, ["check", "--store", str(clean)])
    assert result.exit_code == 0, result.output
    assert "nothing raised" in result.output and "grad-norm" in result.output


def test_growing_grad_norm_peak_is_an_alarm(tmp_path):
    store = ladder_store(tmp_path, **{r.name: {"grad_growth": 0.5} for r in PLAN.rungs})
    code, report = check(store)
    f = finding(report, "grad-norm")
    assert code == 5 and f["status"] == "alarm"
    assert f["values"]["exponent"] == pytest.approx(0.5, abs=0.1)
    assert f["values"]["hero"] > 4.0 and "z-loss" in f["remedy"]
    code, report = check(store, "--grad-limit", 100)
    assert finding(report, "grad-norm")["status"] == "ok"


def test_a_rung_above_the_grad_limit_is_an_alarm_that_does_not_claim_the_projection_is(tmp_path):
    """Peaks falling with size, the smallest rung's above the limit: an alarm that names it, while the hero's
    projection, below the limit, is not said to be above it."""
    store = ladder_store(tmp_path, **{r.name: {"grad_growth": -0.5} for r in PLAN.rungs})
    code, report = check(store, "--grad-limit", 0.7)
    f = finding(report, "grad-norm")
    smallest = min(PLAN.rungs, key=lambda r: r.fit_flops).name
    assert f["status"] == "alarm" and f["values"]["hero"] < 0.7 < f["values"]["peak"][0]
    assert f"already above the limit 0.7: {smallest}" in f["evidence"]
    assert "projected hero peak above" not in f["evidence"]


def test_growing_spike_rate_is_flagged(tmp_path):
    counts = [0, 1, 3, 6, 12]
    store = ladder_store(tmp_path, **{r.name: {"spikes": n} for r, n in zip(PLAN.rungs, counts)})
    code, report = check(store)
    f = finding(report, "spikes")
    assert f["values"]["spikes"] == counts
    assert code == 5 and f["status"] == "alarm", f["evidence"]
    assert f["values"]["exponent_band"][0] > 0


def test_rung_off_trend_is_flagged(tmp_path):
    off = PLAN.rungs[2].name
    store = ladder_store(tmp_path, **{off: {"off_trend": 0.05}})
    code, report = check(store)
    f = finding(report, "off-trend")
    assert code == 4 and f["status"] == "warning" and off in f["evidence"]
    flagged = [r for r, s, lim in zip(f["values"]["rungs"], f["values"]["score"], [f["values"]["limit"]] * 5)
               if abs(s) > lim]
    assert flagged == [off]


def test_largest_rung_worse_than_trend_is_an_alarm(tmp_path):
    largest = max(PLAN.rungs, key=lambda r: r.fit_flops).name
    code, report = check(ladder_store(tmp_path, **{largest: {"off_trend": 0.05}}))
    assert code == 5 and finding(report, "off-trend")["status"] == "alarm"


def test_crashed_rung_is_an_alarm(tmp_path):
    cfg = PLAN.rungs[3]
    store = ladder_store(tmp_path, **{cfg.name: {"upto": cfg.stop_after_steps * 6 // 10, "state": "crashed"}})
    code, report = check(store)
    f = finding(report, "crashed")
    assert code == 5 and f["status"] == "alarm" and f"{cfg.name} crashed at step" in f["evidence"]
    # the crashed rung stays out of the trends, which still run on the other four
    assert cfg.name not in finding(report, "grad-norm")["values"]["rungs"]
    assert finding(report, "grad-norm")["status"] == "ok"


def test_rung_off_the_lr_rule_is_a_warning(tmp_path):
    rungs = list(PLAN.rungs)
    rungs[1] = rungs[1].replace(schedule=dataclasses.replace(rungs[1].schedule, peak_lr=1.3 * rungs[1].schedule.peak_lr))
    code, report = check(ladder_store(tmp_path, rungs))
    f = finding(report, "lr-rule")
    assert code == 4 and f["status"] == "warning" and rungs[1].name in f["evidence"] and "×1.30" in f["evidence"]


def test_without_a_recipe_each_rungs_logged_lr_is_held_to_the_others_trend_in_size(tmp_path, monkeypatch):
    """No recipe (a group that names no preset) or no run configs (an imported ladder): a rung trained at 4× its LR
    passed every check ("skipped"), though every rung logs its LR."""
    rungs = [r.replace(group="my-ladder") for r in PLAN.rungs]
    code, report = check(ladder_store(tmp_path / "clean", rungs, hero=False), "--hero-compute", PLAN.hero.fit_flops)
    f = finding(report, "lr-rule")
    assert code == 0 and f["status"] == "ok" and "--recipe" in f["evidence"], f
    assert "held to the power law in size through the others' (5 rungs): every one within 50% of it" in f["evidence"]
    code, report = check(tmp_path / "clean" / "store", "--hero-compute", PLAN.hero.fit_flops, "--recipe", "micro-cpu")
    assert code == 0 and finding(report, "lr-rule")["status"] == "ok"
    for hot, at in ((1, 4.0), (4, 2.0), (0, 0.25)):  # a middle rung, the largest and the smallest (an end rung's line
        hotter = list(rungs)  # runs through the bad one's neighbours)
        hotter[hot] = rungs[hot].replace(schedule=dataclasses.replace(rungs[hot].schedule,
                                                                      peak_lr=at * rungs[hot].schedule.peak_lr))
        code, report = check(ladder_store(tmp_path / f"hot{hot}", hotter, hero=False), "--hero-compute",
                             PLAN.hero.fit_flops)
        f = finding(report, "lr-rule")
        (off,) = f["values"]["off"]
        assert code == 4 and f["status"] == "warning" and off["rung"] == rungs[hot].name, f
        assert off["ratio"] == pytest.approx(at, rel=0.15) and f"{rungs[hot].name} " in f["evidence"]
    code, report = check(ladder_store(tmp_path / "three", rungs[:3], hero=False), "--hero-compute", PLAN.hero.fit_flops)
    f = finding(report, "lr-rule")
    assert f["status"] == "skipped" and "fewer than 4 finished rungs log optim/learning_rate" in f["evidence"]
    import ladder.check as checks  # an imported ladder: a recipe's rule asked for, no run config to apply it to

    monkeypatch.setattr(checks, "_run_config", lambda store, run_id: None)
    code, report = check(tmp_path / "hot1" / "store", "--hero-compute", PLAN.hero.fit_flops, "--recipe", "micro-cpu")
    f = finding(report, "lr-rule")
    assert f["status"] == "warning" and f["values"]["off"][0]["rung"] == rungs[1].name
    assert f["evidence"].startswith("no rule to hold the rungs' LRs to (no rung carries a whole run config")
    code, report = check(tmp_path / "three" / "store", "--hero-compute", PLAN.hero.fit_flops, "--recipe", "micro-cpu")
    assert finding(report, "lr-rule")["status"] == "not checked"  # asked for, and nothing to check it on


def test_hero_from_config_or_nothing(tmp_path):
    store = ladder_store(tmp_path, hero=False)
    code, report = check(store)
    assert code == 3
    assert "no hero compute" in finding(report, "grad-norm")["evidence"]
    assert finding(report, "grad-norm")["status"] == "not checked"
    hero = PLAN.hero.save(tmp_path / "hero.yaml")
    code, report = check(store, "--hero", hero)
    assert code == 0 and report["hero"]["flops"] == pytest.approx(  # the plan it starts with, as predict and compare count it
        PLAN.hero.fit_flops_per_token * PLAN.hero.tokens_per_step * PLAN.hero.schedule.total_steps)
    assert report["warnings"] == []
    assert report["hero"]["source"].endswith(  # `ladder plan` and `spec` count the edited run's: both named
        f"({PLAN.hero.schedule.total_steps:,} steps as planned at its start, {PLAN.hero.stop_after_steps:,} with its "
        "schedule's edits)")
    # A rung's config given as the hero: checked, and told that the projections describe a rung
    rung = PLAN.rungs[-1].save(tmp_path / "rung.yaml")
    code, report = check(store, "--hero", rung)
    [warning] = report["warnings"]
    assert code == 4 and report["status"] == "warning"  # a script reading the exit code is told too
    assert "not above the largest rung's" in warning and PLAN.rungs[-1].name in warning and "rung.yaml" in warning
    text = runner.invoke(app, ["check", "--store", str(store), "--hero", str(rung)])
    assert "is it a rung's" in text.output.replace("\n", " ") and text.exit_code == 4
    # a compute below the smallest rung's (GFLOPs, or a typo): every trend would run backwards; a usage error
    res = runner.invoke(app, ["check", "--store", str(store), "--hero-compute", "8.1"])
    assert res.exit_code == 2 and "the hero's compute (8.1 FLOPs, from --hero-compute) is below the smallest rung's" in \
        " ".join(res.output.split())


def test_rungs_that_give_only_n_are_checked_on_6nd_and_say_so(tmp_path):
    """Rungs whose coordinates give N and no fit FLOPs count 6·N·D, as in every other command, and so does the hero."""
    from ladder.data.sources import CoordinateOverrides

    for i, cfg in enumerate(PLAN.rungs):
        write_run(tmp_path / "runs", cfg, seed=i)
    pull(Store(tmp_path / "store"), LocalSource(tmp_path / "runs"),
         overrides=CoordinateOverrides(all_runs={"fit_flops_per_token": "unknown"}))
    code, report = check(tmp_path / "store", "--hero", PLAN.hero.save(tmp_path / "hero.yaml"))
    assert code == 0, [(f["name"], f["status"], f["evidence"]) for f in report["findings"]]
    assert {f["name"]: f["status"] for f in report["findings"]} == dict.fromkeys(CHECKS, "ok")
    h = PLAN.hero
    assert report["hero"]["flops"] == pytest.approx(6 * h.spec.active_params() * h.tokens_per_step * h.schedule.total_steps)
    assert "6·N·D as the rungs'" in report["hero"]["source"]
    [note] = [w for w in report["warnings"] if "6·N·D" in w]
    assert all(cfg.name in note for cfg in PLAN.rungs) and "only N is known" in note


def test_a_group_of_two_heroes_is_checked_at_the_larger(tmp_path):
    store = ladder_store(tmp_path)
    small = dataclasses.replace(PLAN.rungs[-1], name="hero-small", role="hero")
    write_run(tmp_path / "runs", small, seed=98, upto=20, state="running")
    pull(Store(store), LocalSource(tmp_path / "runs"))
    code, report = check(store)
    assert code == 0
    assert report["hero"]["flops"] == pytest.approx(
        PLAN.hero.fit_flops_per_token * PLAN.hero.tokens_per_step * PLAN.hero.schedule.total_steps)
    assert "largest of the group's 2 heroes (also 'hero-small'" in report["hero"]["source"]


def test_too_few_rungs_cannot_judge(tmp_path):
    code, report = check(ladder_store(tmp_path, PLAN.rungs[:2]))
    assert code == 3
    assert finding(report, "grad-norm")["evidence"].startswith("not checked: needs 3 complete rungs")
    assert finding(report, "off-trend")["status"] == "not checked"
    assert finding(report, "crashed")["status"] == "ok"


def test_skip_leaves_a_check_out(clean):
    code, report = check(clean, "--skip", "spikes", "--skip", "lr-rule")
    assert code == 0 and finding(report, "spikes")["status"] == "skipped"


@pytest.mark.parametrize("args, words", [
    (["--hero-compute", "1e20", "--hero", "x.yaml"], "not both"),
    (["--hero-compute", "-5"], "--hero-compute"),
    (["--hero-compute", "1e300"], "too large"),
    (["--hero", "missing.yaml"], "missing.yaml"),
    (["--skip", "everything"], "'everything'"),
    (["--grad-limit", "0"], "--grad-limit"),
    (["--group", "nope"], "'nope'"),
    (["--recipe", "no-such-preset"], "no-such-preset"),
])
def test_usage_errors_are_one_line_and_exit_2(clean, args, words):
    result = runner.invoke(app, ["check", "--store", str(clean), *args])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output


def test_a_target_file_gives_the_heros_compute_as_a_run_config_does(clean, tmp_path):
    target = tmp_path / "t.yaml"
    target.write_text("name: big\nfit_flops_per_token: 6e8\nstop_after_steps: 1000\ntokens_per_step: 40000\n")
    result = runner.invoke(app, ["check", "--store", str(clean), "--hero", str(target), "--format", "json"])
    assert result.exit_code in (0, 3, 4, 5), result.output
    hero = json.loads(result.stdout)["hero"]
    assert hero["flops"] == pytest.approx(6e8 * 1000 * 40000) and hero["source"] == f"target file {target} (1,000 steps)"
    # Given where a run config goes, it is named, with the commands that take it
    result = runner.invoke(app, ["train", str(target)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and f"{target}: a target file (a run's coordinates: it has fit_flops_per_token)" in text
    assert f"`ladder check` and `ladder compare` with --hero {target}" in text, text


def test_missing_store_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["check", "--store", str(tmp_path / "none")])
    assert result.exit_code == 2 and "no store here" in result.output


def test_cli_check_names_match_the_library():
    assert CHECK_NAMES == CHECKS


def test_library_call_matches_the_command(clean):
    report = check_ladder(Store(clean))
    assert report.exit_code == 0 and set(report.rungs) == {r.name for r in PLAN.rungs}


def test_check_help_loads_no_heavy_library():
    script = ("import json, sys\nfrom typer.testing import CliRunner\nfrom ladder.cli import app\n"
              "assert CliRunner().invoke(app, ['check', '--help']).exit_code == 0\n"
              "print(json.dumps([m for m in ('scipy', 'matplotlib', 'jax', 'wandb') if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_rung_logged_to_its_plan_minus_one_step_is_complete(tmp_path):
    """Trainers that count steps from 0 (levanter, Marin) log a finished run's last step at plan − 1."""
    last = PLAN.rungs[1]
    store = ladder_store(tmp_path, **{last.name: {"upto": last.stop_after_steps - 1}})
    code, report = check(store)
    assert code == 0, [(f["name"], f["evidence"]) for f in report["findings"] if f["status"] != "ok"]
    assert finding(report, "crashed")["status"] == "ok" and last.name in finding(report, "off-trend")["values"]["rungs"]


def test_a_rung_without_a_final_eval_or_a_metric_is_left_out_of_the_trend_by_name(tmp_path):
    # its last eval NaN: the eval before it is no final loss (an eval interval before its end, 1.6% above the final)
    nan_final, no_grad = PLAN.rungs[1], PLAN.rungs[3]
    store = ladder_store(tmp_path, **{nan_final.name: {"last_eval": float("nan")},
                                      no_grad.name: {"unlogged": ("grad/norm/total",)}})
    _, report = check(store)
    trend = finding(report, "off-trend")
    assert trend["values"]["rungs"] == [c.name for c in PLAN.rungs if c is not nan_final]
    # four rungs left: one degree of freedom, where "ok" would pass a rung several percent off (and exit 0)
    assert trend["status"] == "not checked" and trend["evidence"].endswith(
        f"; left out: {nan_final.name} (its last eval/loss, at step {nan_final.stop_after_steps:,}, is not finite)")
    reach = re.search(r"^not checked: 4 rungs leave 1 degree of freedom, so a rung shows off the others' trend only "
                      r"about (\d+)% off it \(score limit ±50\.9\); the largest deviation, ", trend["evidence"])
    assert reach and 3 <= int(reach.group(1)) <= 30, trend["evidence"]
    grad = finding(report, "grad-norm")
    assert grad["values"]["rungs"] == [c.name for c in PLAN.rungs if c is not no_grad]
    assert f"; left out: {no_grad.name} (no grad/norm/total);" in grad["evidence"]


def test_a_ladder_that_logs_no_drop_fraction_and_has_no_config_is_told_how_to_skip_the_check(tmp_path, monkeypatch):
    import ladder.check as checks

    store = ladder_store(tmp_path, **{c.name: {"unlogged": ("moe/drop_fraction",)} for c in PLAN.rungs})
    _, report = check(store)  # a MoE ladder by its configs: it was told that a dense model has none
    drops = finding(report, "drops")
    assert drops["status"] == "not checked" and drops["evidence"] == (
        f"not checked: no rung logs moe/drop_fraction, though the rungs' configs have {PLAN.rungs[0].spec.n_experts} "
        "experts: log it to have the check (or --skip drops)")
    # a ladder read from a table or wandb, which has no run config to say it is dense: nothing tells it from a MoE
    # ladder whose drop fraction went unlogged
    monkeypatch.setattr(checks, "_run_config", lambda store, run_id: None)
    _, report = check(store)
    drops = finding(report, "drops")
    assert drops["status"] == "not checked"
    assert drops["evidence"] == "not checked: no rung logs moe/drop_fraction (a dense model has none: --skip drops)"


def test_a_rung_whose_evals_end_well_before_its_plan_is_left_out_of_the_trend(tmp_path):
    # finished, but its evals end at half its plan (the train loss goes on): its last eval is no final loss
    short = PLAN.rungs[2]
    store = ladder_store(tmp_path, hero=False)
    hist = Store(store).history(short.name, ["eval/loss"])
    half = int(hist["step"].iloc[len(hist) // 2])
    Store(store).remove(short.name)
    write_run(tmp_path / "cut", short, seed=2)
    lines = [json.loads(x) for x in (tmp_path / "cut" / short.name / "metrics.jsonl").read_text().splitlines()]
    kept = [x for x in lines if "eval/loss" not in x or x["step"] <= half]
    (tmp_path / "cut" / short.name / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in kept) + "\n")
    pull(Store(store), LocalSource(tmp_path / "cut"))
    _, report = check(store)
    trend = finding(report, "off-trend")
    assert short.name not in trend["values"]["rungs"]
    assert f"left out: {short.name} (its last eval/loss at step {half:,} of {short.stop_after_steps:,})" in \
        trend["evidence"]


def test_rungs_pulled_without_their_role_are_told_how_to_give_it(tmp_path):
    store = ladder_store(tmp_path, [c.replace(role="single") for c in PLAN.rungs], hero=False)
    res = runner.invoke(app, ["check", "--store", str(store)])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "has no runs with role 'rung'; pull the rungs first; the runs of group 'micro-cpu' " \
        "have role " in said
    assert "'single': give the rungs theirs when you pull or import them: --coord role=rung" in said, said


def test_rungs_at_other_token_ratios_are_left_out_of_the_trend(tmp_path):
    longer = plan(override(load_recipe("micro-cpu"), widths=[32, 48], depths=[2, 2], sets=["tpp=24"]))
    others = [dataclasses.replace(c, name=c.name + "-4x", run_dir=f"runs/{c.name}-4x") for c in longer.rungs]
    store = ladder_store(tmp_path, [*PLAN.rungs, *others])
    code, report = check(store)
    trend = finding(report, "off-trend")
    assert trend["status"] == "ok" and trend["values"]["rungs"] == [c.name for c in PLAN.rungs]
    said = trend["evidence"].split("left out (a trend in compute holds at one ratio): ")[1]
    for c in others:
        assert f"{c.name} (at " in said and "tokens per parameter, not the hero's" in said  # the stored hero's ratio


def test_a_hero_of_another_ladder_is_named(tmp_path):
    store = ladder_store(tmp_path, hero=False)
    hero = plan(load_recipe("marin-moe-hero")).hero.save(tmp_path / "hero.yaml")
    code, report = check(store, "--hero", hero)
    other, far = report["warnings"]
    assert code == 4
    assert "is of group 'marin-moe-hero', the rungs checked of 'micro-cpu'" in other
    assert "the largest rung's" in far and "no trend of these rungs carries that far" in far


def test_a_metric_no_rung_logs_is_a_usage_error_that_lists_theirs(clean):
    res = runner.invoke(app, ["check", "--store", str(clean), "--metric", "eval/los"])
    assert res.exit_code == 2 and "--metric eval/los: no rung of group" in res.output and "eval/loss" in res.output


def test_rungs_that_logged_nothing_are_said_to_have_logged_nothing_not_to_lack_a_metric(tmp_path):
    """Rungs that crashed at their start: no --metric was given, so the error is not about one."""
    for cfg in PLAN.rungs[:3]:
        d = tmp_path / "runs" / cfg.name
        d.mkdir(parents=True)
        cfg.save(d / "run.yaml")
        (d / "metrics.jsonl").write_text("")
        (d / "status.json").write_text(json.dumps({"state": "crashed", "step": 0, "updated": 0.0}))
    pull(Store(tmp_path / "store"), LocalSource(tmp_path / "runs"))
    res = runner.invoke(app, ["check", "--store", str(tmp_path / "store")])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "--metric" not in said
    assert f"no rung of group {PLAN.rungs[0].group!r} has logged anything yet (3 rungs, crashed)" in said


def test_a_per_step_train_loss_is_judged_off_trend_as_the_fits_read_it_not_by_its_last_value(tmp_path):
    """`--metric train/loss` took each rung's last logged value: one noisy step 10% high at the largest rung's end
    raised an alarm that the rung was off the others' trend."""
    largest = PLAN.rungs[-1]
    store = ladder_store(tmp_path, **{largest.name: {"last_train": 1.1}})
    _, report = check(store, "--metric", "train/loss")
    trend = finding(report, "off-trend")
    assert trend["status"] == "ok", trend["evidence"]
    assert trend["values"]["final"][-1] == pytest.approx(final_loss(largest) * (1 + 2.0 * np.exp(-5.0)), rel=0.01)


def test_a_ladder_of_several_lengths_is_checked_at_the_heros(tmp_path):
    """A ladder trained at 1× and at 16× per size (as OLMo's, 0.5× to 10×): its 16× rungs were judged the ladder's for
    the trend (the larger compute, at a tie), and the hero at 1× was said not to lie above the largest rung."""
    longer = plan(override(load_recipe("micro-cpu"), widths=[32, 48, 48, 64, 64], depths=[2, 2, 3, 3, 4],
                           sets=["tpp=96"]))  # the ladder's sizes at 16× its tokens
    others = [dataclasses.replace(c, name=c.name + "-16x", run_dir=f"runs/{c.name}-16x") for c in longer.rungs]
    store = ladder_store(tmp_path, [*PLAN.rungs, *others])  # the hero, at 1×, stored beside them
    code, report = check(store)
    trend = finding(report, "off-trend")
    assert trend["values"]["rungs"] == [c.name for c in PLAN.rungs], trend
    assert f"{others[0].name} (at " in trend["evidence"] and "tokens per parameter, not the hero's" in trend["evidence"]
    assert not [w for w in report["warnings"] if "not above the largest rung" in w], report["warnings"]
    bare = ladder_store(tmp_path / "bare", [*PLAN.rungs, *others], hero=False)  # no hero known: the ladder's ratio
    trend = finding(check(bare)[1], "off-trend")
    assert trend["values"]["rungs"] == [c.name for c in others] and "not the ladder's" in trend["evidence"]

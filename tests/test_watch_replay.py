"""Replays of a public loss curve whose truth is known, fed to `ladder watch --once` eval by eval.

The run: the 400M model of Luo et al. (2025) under the WSD schedule with a linear cooldown
(`multipower_schedules`, a held-out schedule). The prediction: the multi-power law fitted on the
three other schedules the authors fit on, its band calibrated by leaving one of those curves out.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import fits
from ladder import Schedule
from ladder.cli import app
from ladder.data.store import Store
from ladder.errors import LadderError
from ladder.predict.prediction import Prediction
from ladder.predict.scoring import score_prediction
from tests.synthetic_ladder import micro_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
TARGET = "wsdld_20000_24000"
runner = CliRunner()


@pytest.fixture(scope="module")
def replay(shared_data):
    import fit_datasets as D

    fit_curves = D.mpl_curves(size="400M", split="fit")
    law = fits.fit_multipower(fit_curves)
    errors = []
    for i, held in enumerate(fit_curves):
        rest = fits.fit_multipower([c for j, c in enumerate(fit_curves) if j != i], shape=law.shape)
        errors.append(rest.predict(held.steps, held.lrs, held.scale) / held.loss - 1)
    rel_sd = float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))
    (curve,) = [c for c in D.mpl_curves(size="400M", split="test") if TARGET in c.name]
    T = int(curve.steps.max())
    idx = [int(np.argmin(np.abs(curve.steps - k * T / 20))) for k in range(1, 21)]
    steps, loss = curve.steps[idx].astype(int), curve.loss[idx]
    med = law.predict(steps, curve.lrs, curve.scale)
    sd = rel_sd * med
    table = pd.DataFrame({
        "step": steps, "tokens": steps, "fraction": steps / T, "compute": steps.astype(float), "median": med,
        "lo50": med - 0.6745 * sd, "hi50": med + 0.6745 * sd, "lo90": med - 1.6449 * sd, "hi90": med + 1.6449 * sd,
        "in_assumptions": True,
    })
    config = micro_plan().rungs[0].replace(
        name="replay-400M", batch_size=1, seq_len=1,
        schedule=Schedule(peak_lr=3e-4, total_steps=T, warmup_steps=2160, decay="constant"),
    )
    return Prediction("replay-400M", "eval/loss", table, planned_steps=T), config, steps, loss


def run_replay(tmp: Path, replay, change=lambda step, frac: 0.0, restart_every: int = 1):
    """Write the run eval by eval and check it with `ladder watch --once`; return exit codes and alerts."""
    pred, config, steps, loss = replay
    pred_dir = tmp / "prediction"
    pred.save(pred_dir)
    run_dir = tmp / "runs" / config.name
    run_dir.mkdir(parents=True)
    config.save(run_dir / "run.yaml")
    codes = []
    for k, (s, y) in enumerate(zip(steps, loss)):
        value = y * (1 + change(int(s), s / config.stop_after_steps))
        with (run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps({"step": int(s), "eval/loss": float(value)}) + "\n")
        state = "finished" if k == len(steps) - 1 else "running"
        (run_dir / "status.json").write_text(json.dumps({"state": state, "step": int(s)}))
        res = runner.invoke(app, ["watch", "--prediction", str(pred_dir), "--local", str(run_dir),
                                  "--store", str(tmp / "store"), "--once"])
        assert res.exception is None or isinstance(res.exception, SystemExit), res.output
        codes.append(res.exit_code)
    lines = [json.loads(x) for x in (pred_dir / "alerts.jsonl").read_text().splitlines()]
    alerts = [x for x in lines if x["kind"] == "alert"]
    return codes, alerts, steps


@pytest.mark.slow
def test_clean_replay_raises_no_alarm(tmp_path, replay):
    codes, alerts, _ = run_replay(tmp_path, replay)
    assert set(codes) <= {0, 4}, codes  # on track or a warning, never an alarm
    assert [a for a in alerts if a["level"] == "alarm"] == []


@pytest.mark.slow
def test_one_percent_from_40_percent_alarms_within_two_evals(tmp_path, replay):
    codes, alerts, steps = run_replay(tmp_path, replay, change=lambda s, f: 0.01 if f >= 0.4 else 0.0)
    first = int(np.argmax(steps / replay[1].stop_after_steps >= 0.4))
    assert set(codes[:first]) <= {0, 4}
    assert 5 in codes[first:first + 2], codes  # 5: alarm
    alarms = [a for a in alerts if a["level"] == "alarm"]
    assert alarms and alarms[0]["step"] <= steps[first + 1]


@pytest.mark.slow
def test_slow_drift_is_caught_by_the_drift_rule_before_the_band_rule(tmp_path, replay):
    evals = {int(s): k for k, s in enumerate(replay[2])}
    codes, alerts, _ = run_replay(tmp_path, replay, change=lambda s, f: 0.0005 * evals[s])
    drift = [a["step"] for a in alerts if a["rule"] == "drift"]
    band = [a["step"] for a in alerts if a["rule"] == "deviation"]
    assert drift, "the drift was never flagged"
    assert not band or min(drift) < min(band)


@pytest.mark.slow
def test_restarted_watcher_never_repeats_an_alert(tmp_path, replay):
    # every --once call is a fresh watcher that reloads its state: alerts must still be unique
    codes, alerts, _ = run_replay(tmp_path, replay, change=lambda s, f: 0.02 if f >= 0.5 else 0.0)
    keys = [a["key"] for a in alerts]
    assert keys and len(keys) == len(set(keys))
    assert max(codes) == 5


def test_an_eval_that_arrives_after_its_steps_train_row_still_gets_its_verdict(tmp_path, replay):
    # The trainer writes a step's train metrics, then evaluates: a check can fall in between.
    pred, config, steps, loss = replay
    pred.save(tmp_path / "prediction")
    run_dir = tmp_path / "runs" / config.name
    run_dir.mkdir(parents=True)
    config.save(run_dir / "run.yaml")
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": 0}))
    for s, y in zip(steps[:4], loss[:4]):
        for row in ({"step": int(s), "train/loss": float(y) * 1.1}, {"step": int(s), "eval/loss": float(y)}):
            with (run_dir / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
            res = runner.invoke(app, ["watch", "--prediction", str(tmp_path / "prediction"), "--local", str(run_dir),
                                      "--store", str(tmp_path / "store"), "--once"])
            assert res.exit_code in (0, 4), res.output
    state = json.loads((tmp_path / "prediction" / "watch-state.json").read_text())
    assert [v["step"] for v in state["verdicts"]] == [int(s) for s in steps[:4]]


# ---- grad norm against the rungs projected to the hero's size, replayed eval by eval -----------------
def replay_micro_hero(tmp: Path, hero_growth: float):
    """The micro ladder's rungs in the store; its hero written eval by eval and checked each time."""
    import shutil

    from tests.test_dynamics import GROWTH, hero_prediction, write_ladder

    plan = write_ladder(tmp / "rungs", hero_growth=None)
    res = runner.invoke(app, ["pull", "local", str(tmp / "rungs"), "--store", str(tmp / "store")])
    assert res.exit_code == 0, res.output
    write_ladder(tmp / "full", hero_growth=hero_growth)
    hero = plan.hero
    pred_dir = tmp / "prediction"
    hero_prediction(hero).save(pred_dir)
    run_dir = tmp / "runs" / hero.name
    run_dir.mkdir(parents=True)
    shutil.copy(tmp / "full" / hero.name / "run.yaml", run_dir / "run.yaml")
    lines = (tmp / "full" / hero.name / "metrics.jsonl").read_text().splitlines()
    evals = hero.eval_steps()
    for k, e in enumerate(evals):
        (run_dir / "metrics.jsonl").write_text("\n".join(x for x in lines if json.loads(x)["step"] <= e) + "\n")
        state = "finished" if k == len(evals) - 1 else "running"
        (run_dir / "status.json").write_text(json.dumps({"state": state, "step": int(e)}))
        res = runner.invoke(app, ["watch", "--prediction", str(pred_dir), "--local", str(run_dir),
                                  "--store", str(tmp / "store"), "--once"])
        assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    rows = [json.loads(x) for x in (pred_dir / "alerts.jsonl").read_text().splitlines()]
    alerts = [x for x in rows if x["kind"] == "alert"]
    return alerts, np.array(evals), hero, GROWTH


@pytest.mark.slow
def test_clean_micro_hero_raises_nothing_from_the_dynamics_rules(tmp_path):
    from tests.test_dynamics import GROWTH

    alerts, _, _, _ = replay_micro_hero(tmp_path, hero_growth=GROWTH)
    assert [a for a in alerts if a["rule"] in ("grad_norm", "drop_fraction")] == []


@pytest.mark.slow
def test_grad_norm_growing_twice_as_fast_as_projected_warns_within_three_evals(tmp_path):
    from ladder.predict.dynamics import hero_compute, project_curves
    from tests.test_dynamics import GROWTH, hero_prediction

    alerts, evals, hero, _ = replay_micro_hero(tmp_path, hero_growth=2 * GROWTH)
    grad = [a for a in alerts if a["rule"] == "grad_norm"]
    # at least a warning (an alarm when it is already twice the band's width above the median)
    assert grad and grad[0]["level"] in ("warning", "alarm") and "projected to this run's size" in grad[0]["message"]
    # the eval from which the hero's noise-free grad norm stays above the projection's 90% band
    from ladder.data.store import Store

    store = Store(tmp_path / "store")
    rungs = store.runs().query("role == 'rung'")
    hist = store.history(list(rungs["run_id"]), ["grad/norm/total"])
    one = [hist[hist["run_id"] == r] for r in rungs["run_id"]]
    proj = project_curves([h["fraction"].to_numpy() for h in one], [h["value"].to_numpy() for h in one],
                          list(rungs["fit_flops_per_token"] * rungs["planned_tokens"].astype(float)),
                          hero_compute(hero_prediction(hero)))
    frac = evals / hero.stop_after_steps
    above = 0.5 * np.exp(2 * GROWTH * frac) > proj.at(frac, 0.9)[2]
    exit_at = int(np.flatnonzero(~above)[-1]) + 1
    assert exit_at < len(evals) - 3
    assert evals[exit_at] <= grad[0]["step"] <= evals[exit_at + 3]


@pytest.mark.slow
def test_a_finished_run_checked_hours_later_is_not_stale(tmp_path, replay):
    codes, _, _ = run_replay(tmp_path, replay)
    pred_dir = tmp_path / "prediction"
    state_file = pred_dir / "watch-state.json"
    state = json.loads(state_file.read_text())

    def ten_hours_earlier(node):  # the last step arrived ten hours ago
        if isinstance(node, dict):
            return {k: (v - 36000.0 if k == "advanced_at" and v is not None else ten_hours_earlier(v)) for k, v in node.items()}
        return node

    shifted = ten_hours_earlier(state)
    assert shifted != state
    state_file.write_text(json.dumps(shifted))
    res = runner.invoke(app, ["watch", "--prediction", str(pred_dir), "--local", str(tmp_path / "runs" / "replay-400M"),
                              "--store", str(tmp_path / "store"), "--once"])
    assert res.exit_code == codes[-1], res.output
    lines = [json.loads(x) for x in (pred_dir / "alerts.jsonl").read_text().splitlines()]
    assert not [x for x in lines if x.get("kind") == "alert" and x.get("rule") == "stale"]


@pytest.mark.slow
def test_one_check_over_many_evals_exits_with_the_worst_of_them(tmp_path, replay):
    """A cron job's `--once` that finds several new evals exits with the worst verdict among them, though the
    last is on track: an alarm in the middle is not hidden by a good eval after it."""
    pred, config, steps, loss = replay
    pred.save(tmp_path / "prediction")
    run_dir = tmp_path / "runs" / config.name
    run_dir.mkdir(parents=True)
    config.save(run_dir / "run.yaml")
    steps, loss = steps[:len(steps) * 2 // 3], loss[:len(steps) * 2 // 3]  # the run two thirds through
    off = len(steps) // 2
    rows = [{"step": int(s), "eval/loss": float(y * (1.05 if k == off else 1.0))}
            for k, (s, y) in enumerate(zip(steps, loss))]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": int(steps[-1])}))
    res = runner.invoke(app, ["watch", "--prediction", str(tmp_path / "prediction"), "--local", str(run_dir),
                              "--store", str(tmp_path / "store"), "--once"])
    verdicts = re.findall(r"^ *([A-Z-]+) step [\d,]+ \([\d.]+%\): eval/loss ", res.output, flags=re.M)
    assert len(verdicts) == len(steps) and verdicts[off] == "ALARM" and verdicts[-1] == "OK", res.output
    assert not re.search(r"eval/loss .*: (OK|WARNING|ALARM)$", res.output, flags=re.M)  # said once, in front
    assert res.exit_code == 5, res.output


# ---- where the run comes from ----------------------------------------------------------------------------
def test_a_run_stored_from_another_folder_is_refused_until_replace_and_a_quiet_check_says_where_it_stands(tmp_path):
    from ladder.data.store import Store
    from tests.synthetic_ladder import write_run
    from tests.test_dynamics import hero_prediction

    hero = micro_plan().hero
    half = hero.stop_after_steps // 2
    for folder in ("first", "second"):
        write_run(tmp_path / folder, hero, upto=half, state="running")
    store = str(tmp_path / "store")
    assert runner.invoke(app, ["pull", "local", str(tmp_path / "first"), "--store", store]).exit_code == 0
    hero_prediction(hero).save(tmp_path / "pred")
    second = tmp_path / "second" / hero.name
    watch = ["watch", "--prediction", str(tmp_path / "pred"), "--local", str(second), "--store", store, "--once"]
    res = runner.invoke(app, watch)
    assert res.exit_code == 2 and "is already in the store from" in res.stderr and "pass --replace" in res.stderr
    assert not (tmp_path / "pred" / "watch-state.json").exists()
    res = runner.invoke(app, [*watch, "--replace"])
    assert res.exit_code == 0, res.output
    assert Store(store).run(hero.name)["source"] == f"local:{second.resolve()}"
    res = runner.invoke(app, watch)  # nothing new since: one line on where the run stands
    last = max(s for s in hero.eval_steps() if s <= half)
    assert res.exit_code == 0 and res.stdout.count("\n") == 1, res.output
    assert f"no new eval since step {last:,}; last verdict: OK" in res.stdout


def test_a_planned_run_whose_trainer_has_not_made_its_runs_folder_yet_is_waited_for_and_a_typo_refused(tmp_path):
    from tests.test_dynamics import hero_prediction

    hero = micro_plan().hero
    assert runner.invoke(app, ["plan", "micro-cpu", "--out", str(tmp_path / "plan")]).exit_code == 0
    hero_prediction(hero).save(tmp_path / "pred")
    watch = ["watch", "--prediction", str(tmp_path / "pred"), "--store", str(tmp_path / "store"), "--once", "--local"]
    res = runner.invoke(app, [*watch, str(tmp_path / "plan" / "runs" / hero.name)])  # plan/runs/ not made yet
    assert res.exit_code == 3 and "no such directory yet" in " ".join(res.output.split()), res.output
    res = runner.invoke(app, [*watch, str(tmp_path / "plan" / "runs" / f"{hero.name}-typo")])
    assert res.exit_code == 2 and "no such folder" in " ".join(res.stderr.split()), res.output


# ---- what happens between evals, and runs that stop or resume ------------------------------------------------
def _started(tmp: Path, replay, upto: int, factor: float = 1.0) -> tuple[Path, list[str]]:
    """The replay's first `upto` evals written (× `factor`), the run running; the watch command for it."""
    pred, config, steps, loss = replay
    pred.save(tmp / "prediction")
    run_dir = tmp / "runs" / config.name
    run_dir.mkdir(parents=True, exist_ok=True)
    config.save(run_dir / "run.yaml")
    rows = [{"step": int(s), "eval/loss": float(y * factor)} for s, y in zip(steps[:upto], loss[:upto])]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": int(steps[upto - 1])}))
    return run_dir, ["watch", "--prediction", str(tmp / "prediction"), "--local", str(run_dir),
                     "--store", str(tmp / "store"), "--once"]


def test_a_chat_hears_a_steady_deviation_once_and_again_when_it_worsens(tmp_path, replay):
    from ladder.data.sources import LocalSource
    from ladder.data.store import Store
    from ladder.watch import AlertRules, JsonlSink
    from ladder.watch.monitor import Watcher, only_run

    class Chat:  # a webhook's delivery rule, its posts kept
        changes_only = True

        def __init__(self):
            self.posts = []

        def send(self, alerts, verdict, summary):
            if alerts:
                self.posts.append(sorted(f"{a.rule}:{a.level}:{a.step}" for a in alerts))
            return True

    pred, _, steps, _ = replay
    t = pred.table.set_index("step")
    warn = np.maximum(t["hi50"] / t["median"] - 1, 0.005)
    alarm = np.maximum(t["hi90"] / t["median"] - 1, 0.01)
    off = {int(s): float(t.at[s, "median"] * (1 + ((warn[s] + alarm[s]) / 2 if k < 4 else 2 * alarm[s])))
           for k, s in enumerate(steps[:8])}  # the first four evals past the 50% band, the next four past the 90%
    run_dir, _ = _started(tmp_path, (pred, replay[1], steps, np.array(list(off.values()))), 1)
    chat = Chat()
    watcher = Watcher(Store(tmp_path / "store"), only_run(LocalSource(run_dir), pred.run_name), pred,
                      AlertRules(metric="eval/loss"), {"chat": chat, "jsonl": JsonlSink(tmp_path / "a.jsonl")},
                      tmp_path / "prediction" / "watch-state.json")
    verdicts = []
    for s in list(off)[1:]:  # one eval per check
        with (run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps({"step": s, "eval/loss": off[s]}) + "\n")
        verdicts.append(watcher.check().verdict)
    assert verdicts == ["warning"] * 3 + ["alarm"] * 4
    heard = [k for p in chat.posts for k in p if k.startswith("deviation:")]
    s = [int(x) for x in steps]
    # the first check judges two evals at once: the second, at the same level, is not told again
    assert heard == [f"deviation:warning:{s[0]}", f"deviation:alarm:{s[4]}"], heard
    logged = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert sum(x.get("rule") == "deviation" for x in logged) == 8  # the log keeps every one


def test_a_check_that_only_retries_an_undelivered_webhook_still_says_where_the_run_stands(tmp_path, replay,
                                                                                          monkeypatch):
    run_dir, watch = _started(tmp_path, replay, 4)
    (run_dir / "status.json").write_text(json.dumps({"state": "crashed", "step": int(replay[2][3])}))
    monkeypatch.setenv("LADDER_WEBHOOK_URL", "http://127.0.0.1:9/hook")  # nothing listens: every post fails
    outs = [runner.invoke(app, [*watch, "--webhook"]) for _ in range(2)]
    assert [r.exit_code for r in outs] == [5, 5]
    assert "[crashed]" in outs[0].stdout and "webhook delivery failed" in outs[1].stderr
    # one line however long (to cron mail or a log, not wrapped at 80 columns in mid phrase)
    (said,) = [x for x in outs[1].stderr.splitlines() if "webhook delivery failed" in x]
    assert said.endswith("will retry on the next check")
    [line] = outs[1].stdout.splitlines()  # the terminal had the alarm: the retry leaves it the standing verdict
    assert line.split()[0] == "ALARM" and "the run crashed" in line


def _warned_once(tmp: Path, replay) -> list[str]:
    """The watch command for a run of 4 evals whose first lies past the 50% band only (one warning), the rest on the
    prediction."""
    pred, config, steps, loss = replay
    t = pred.table.set_index("step")
    med = t["median"].to_numpy()
    first_off = med[0] * (1 + max(t["hi50"].iloc[0] / med[0] - 1, 0.005) * 1.2)
    return _started(tmp, (pred, config, steps, np.r_[first_off, med[1:]]), 4)[1]


def test_a_watch_whose_state_was_lost_sends_no_alert_the_alerts_file_holds_again(tmp_path, replay):
    watch = _warned_once(tmp_path, replay)
    folder = tmp_path / "prediction"

    def alerts() -> list[str]:
        rows = [json.loads(x) for x in (folder / "alerts.jsonl").read_text().splitlines()]
        return [r["key"] for r in rows if r["kind"] == "alert"]

    assert runner.invoke(app, watch).exit_code == 4
    first = alerts()
    assert len(first) == 1
    (folder / "watch-state.json").unlink()  # deleted, or lost with a disk
    again = runner.invoke(app, watch)
    assert again.exit_code in (0, 4), again.output
    assert alerts() == first  # not written (nor posted) a second time
    assert "holds 1 alert of replay-400M: taken as sent, not sent again" in " ".join(again.stderr.split())


def test_a_follow_that_ends_with_alerts_its_webhook_never_got_says_so(tmp_path, replay, monkeypatch):
    watch = _warned_once(tmp_path, replay)
    monkeypatch.setenv("LADDER_WEBHOOK_URL", "http://127.0.0.1:9/hook")  # nothing listens: every post fails
    follow = [a for a in watch if a != "--once"] + ["--webhook", "--poll", "0.01", "--max-checks", "2"]
    res = runner.invoke(app, follow)
    text = " ".join(res.stderr.split())
    assert "webhook delivery failed" in text, res.output
    assert "1 alert not delivered to the webhook sink as the watch ends" in text and "--once" in text, res.output


def test_an_earlier_alert_delivered_late_is_said_so_and_leaves_the_check_its_own_exit_code(tmp_path, replay,
                                                                                           monkeypatch):
    """A warning whose post failed is posted at the next check, which judges no new eval and stays OK: exit 0 (the
    check's verdict, as the help says), one line on the terminal that the earlier alert was delivered now, and a
    post headed as a re-delivery, not [WARNING] above a verdict of OK."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    posts = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    steps = replay[2]
    watch = _warned_once(tmp_path, replay)
    monkeypatch.setenv("LADDER_WEBHOOK_URL", "http://127.0.0.1:9/hook")  # nothing listens: the post fails
    first = runner.invoke(app, [*watch, "--webhook"])
    assert first.exit_code == 4 and "webhook delivery failed" in first.stderr, first.output
    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("LADDER_WEBHOOK_URL", f"http://127.0.0.1:{server.server_port}/hook")
        again = runner.invoke(app, [*watch, "--webhook"])
        quiet = runner.invoke(app, [*watch, "--webhook"])
    finally:
        server.shutdown()
    assert again.exit_code == 0, again.output
    [line] = again.stdout.splitlines()
    assert line.split()[0] == "OK" and line.endswith("last verdict: OK")
    [late] = again.stderr.splitlines()
    assert late == (f"webhook: the earlier alert delivered now (warning [deviation] step {steps[0]}); the verdict and "
                    "exit code are this check's")
    [post] = posts  # the third check has nothing to post
    assert post["text"].startswith("[RE-DELIVERED] the earlier alert, not delivered when raised; this check: step ")
    assert post["verdict"] == "ok" and post["redelivered"] is True
    assert post["alerts"][0]["key"] == f"deviation:warning:{steps[0]}"
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_sinks_added_on_a_later_check_get_the_earlier_alerts_marked_and_the_check_once(tmp_path, replay):
    """An alerts file and a terminal added on the second check never had the first check's alarms: they get them
    then, the file marking them re-delivered, and the check itself once (one verdict line, one line per new eval);
    only the second check's own alarm is news."""
    import io

    from rich.console import Console

    from ladder.data.sources import LocalSource
    from ladder.watch import AlertRules, JsonlSink, TerminalSink
    from ladder.watch.monitor import Watcher, only_run

    pred, config, steps, loss = replay
    run_dir, _ = _started(tmp_path, replay, 2, factor=1.2)  # far above the prediction: an alarm at every eval
    watcher = Watcher(Store(tmp_path / "store"), only_run(LocalSource(run_dir), pred.run_name), pred,
                      AlertRules(metric="eval/loss"), {"jsonl": JsonlSink(tmp_path / "a.jsonl")},
                      tmp_path / "prediction" / "watch-state.json")
    first = watcher.check()
    assert first.verdict == "alarm" and len(first.new_alerts) == 2
    shown = io.StringIO()
    watcher.sinks |= {"late": JsonlSink(tmp_path / "late.jsonl"),
                      "terminal": TerminalSink(Console(file=shown, width=400))}
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": int(steps[2]), "eval/loss": float(loss[2] * 1.2)}) + "\n")
    again = watcher.check()
    assert [a.step for a in again.new_alerts] == [steps[2]]
    rows = [json.loads(x) for x in (tmp_path / "late.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows].count("verdict") == 1
    assert sorted((r["step"], r.get("redelivered", False)) for r in rows if r["kind"] == "alert") == [
        (steps[0], True), (steps[1], True), (steps[2], False)]
    lines = shown.getvalue().splitlines()
    assert [x.split()[0] for x in lines if x.split()[0].isupper()] == ["ALARM"]  # the one new eval's verdict, once
    assert sum("(an earlier alert, not shown when raised)" in x for x in lines) == 2


def test_a_target_run_that_matches_no_run_names_the_option_and_its_value(tmp_path, replay):
    _, config, steps, loss = replay
    _, args = live_run(tmp_path, replay, [json.dumps({"step": int(steps[0]), "eval/loss": float(loss[0])})])
    res = runner.invoke(app, [*args, "--once", "--target-run", "nosuch"])
    said = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"error: --target-run 'nosuch': local:{tmp_path / 'runs' / config.name} holds {config.name}; give" in said
    assert "the prediction is for" not in said


def test_a_finished_run_whose_evals_all_precede_the_prediction_cannot_be_judged(tmp_path, replay):
    pred, config, steps, loss = replay
    first, spacing = int(steps[0]), int(steps[1] - steps[0])
    dense = np.arange(first - spacing + 8, first, 8)  # logged every 8 steps, all in the interval before its first point
    run_dir, watch = _started(tmp_path, (pred, config, dense, np.full(len(dense), loss[0])), len(dense))
    (run_dir / "status.json").write_text(json.dumps({"state": "finished", "step": int(dense[-1])}))
    res = runner.invoke(app, watch)
    assert res.exit_code >= 3, res.output  # before, "no eval yet: OK", exit 0
    said = " ".join(res.stdout.split())
    assert (f"none of its {len(dense)} eval/loss evals (steps {dense[0]:,}–{dense[-1]:,}) falls in the prediction's steps "
            f"{steps[0]:,}–{steps[-1]:,} (is it the run predicted?)") in said and "no eval yet" not in said
    with pytest.raises(LadderError, match="none of its 31 values of eval/loss falls in the prediction's steps"):  # no bug
        score_prediction(pred, pd.Series(np.full(len(dense), loss[0]), index=dense))


def test_an_alarm_between_evals_is_the_check_s_verdict_at_once(tmp_path, replay):
    run_dir, watch = _started(tmp_path, replay, 4)
    first = runner.invoke(app, watch)
    assert first.exit_code == 0 and "held no store" in first.output  # a new store: the rung rules are off
    assert "held no store" not in runner.invoke(app, watch).output
    step = int(replay[2][3]) + 10  # a training step after the 4th eval, before the 5th
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": step, "train/loss": float("nan")}) + "\n")
    res = runner.invoke(app, watch)
    assert res.exit_code == 5, res.output
    assert "non_finite" in res.output and "now: ALARM" in res.output


def test_evals_logged_again_after_a_resume_are_judged_again(tmp_path, replay):
    steps = replay[2]
    run_dir, watch = _started(tmp_path, replay, 8)
    assert runner.invoke(app, watch).exit_code == 0
    # resumed from a checkpoint after the 5th eval, which the run then logs again 5% higher
    _started(tmp_path, replay, 5)
    back = runner.invoke(app, watch)  # before it logs again: where the run stands, not past evals it no longer has
    assert back.exit_code == 0 and f"the run went back from step {int(steps[7]):,} (resumed from an earlier " \
        "checkpoint); an eval it logs again with another value is judged again" in " ".join(back.stdout.split()) \
        and "no new eval since" not in back.stdout, back.output  # (not every eval: one logged as before is not)
    with (run_dir / "metrics.jsonl").open("a") as f:
        for s, y in zip(steps[5:8], replay[3][5:8]):
            f.write(json.dumps({"step": int(s), "eval/loss": float(y) * 1.05}) + "\n")
    res = runner.invoke(app, watch)
    assert res.exit_code == 5, res.output
    lines = res.output.replace(" \n", " ")  # a line the console wrapped, whole again
    again = re.findall(r"ALARM step ([\d,]+) .*\(logged again with another value: a resume, or a table imported again\)$", lines, re.M)
    assert [int(s.replace(",", "")) for s in again] == [int(s) for s in steps[5:8]]
    state = json.loads((tmp_path / "prediction" / "watch-state.json").read_text())
    assert [v["step"] for v in state["verdicts"]] == [int(s) for s in steps[:8]]
    assert state["verdicts"][-1]["verdict"] == "alarm" and state["last_step"] == int(steps[7])


def test_a_run_that_stopped_writing_is_an_alarm_once_it_counts_as_crashed(tmp_path, replay):
    import os
    import time as clock

    run_dir, watch = _started(tmp_path, replay, 6)
    assert runner.invoke(app, [*watch, "--stale-minutes", "10"]).exit_code == 0
    old = clock.time() - 20 * 60  # nothing written for 20 minutes: stale (past 10), not yet crashed (30)
    for f in run_dir.iterdir():
        os.utime(f, (old, old))
    res = runner.invoke(app, [*watch, "--stale-minutes", "10"])
    assert res.exit_code in (0, 4) and "stopped at step" not in res.output, res.output
    old = clock.time() - 40 * 60
    for f in run_dir.iterdir():
        os.utime(f, (old, old))
    res = runner.invoke(app, [*watch, "--stale-minutes", "10"])
    assert res.exit_code == 5, res.output
    assert f"the run stopped at step {int(replay[2][5]):,}" in " ".join(res.output.split())


def test_a_first_watch_of_a_run_long_silent_says_so_at_once(tmp_path, replay):
    import os
    import time as clock

    run_dir, watch = _started(tmp_path, replay, 6)
    old = clock.time() - 20 * 60  # its files last written 20 minutes ago: stale past 10, not crashed before 30
    for f in run_dir.iterdir():
        os.utime(f, (old, old))
    res = runner.invoke(app, [*watch, "--stale-minutes", "10"])
    assert res.exit_code == 4, res.output
    said = " ".join(res.output.split())
    assert "no new telemetry for 20 min" in said and f"last step {int(replay[2][5]):,}" in said, res.output
    # watching the store as it is (kept fresh by `ladder pull`): silent since the last pull that brought it rows,
    # which was the watch above, 20 minutes before this clock
    from ladder.watch import AlertRules, JsonlSink
    from ladder.watch.monitor import Watcher

    folder = tmp_path / "prediction"
    pred = Prediction.load(folder)
    pulled = float(Store(tmp_path / "store").run(pred.run_name)["pulled_at"])
    for minutes, verdict in ((5, "ok"), (20, "warning")):
        sink = JsonlSink(tmp_path / f"alerts-{minutes}.jsonl")
        watcher = Watcher(Store(tmp_path / "store"), None, pred, AlertRules(metric="eval/loss", stale_after_s=600),
                          {"file": sink}, tmp_path / f"state-{minutes}.json", clock=lambda m=minutes: pulled + m * 60)
        got = watcher.check()
        assert got.verdict == verdict and [a.rule for a in got.new_alerts] == ["stale"] * (verdict != "ok"), got
        again = watcher.check()  # no new eval: where the run stands, and how long it has been silent
        assert again.summary.startswith(f"step {int(replay[2][5]):,} (") and (
            f", nothing new for {minutes} min (stale: a warning past 10 min, an alarm past 30 min): no new eval since "
            in again.summary), again.summary


def test_a_live_watch_waits_on_a_crashed_run_for_it_to_come_back(tmp_path, replay):
    """A run marked crashed (stopped, about to be resumed beside the watch) is watched on for three times the stale
    window; resumed, it is judged on; still crashed past that, the watch ends."""
    import time as clock

    from ladder.data.sources import LocalSource
    from ladder.watch import AlertRules
    from ladder.watch.monitor import Watcher, only_run

    steps, loss = replay[2], replay[3]
    for resumed in (True, False):
        run_dir, _ = _started(tmp_path / str(resumed), replay, 6)
        (run_dir / "status.json").write_text(json.dumps({"state": "crashed", "step": int(steps[5])}))
        folder = tmp_path / str(resumed) / "prediction"
        pred, said, late = Prediction.load(folder), [], [0.0]
        watcher = Watcher(Store(tmp_path / str(resumed) / "store"), only_run(LocalSource(run_dir), pred.run_name), pred,
                          AlertRules(metric="eval/loss", stale_after_s=600), {}, folder / "watch-state.json",
                          warn=said.append, clock=lambda late=late: clock.time() + late[0])

        def come_back(first, resumed=resumed, run_dir=run_dir, late=late):
            if not resumed:
                late[0] = 1801.0  # past 3 × 10 minutes, still crashed
                return
            with (run_dir / "metrics.jsonl").open("a") as f:  # the resumed trainer logs on
                f.writelines(json.dumps({"step": int(s), "eval/loss": float(y)}) + "\n" for s, y in zip(steps[6:8], loss[6:8]))
            (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": int(steps[7])}))

        checks, check = [], watcher.check
        watcher.check = lambda check=check, checks=checks: checks.append(1) or check()
        result = watcher.run(0.0, max_checks=3 if resumed else 50, after_first=come_back)
        assert said == [f"{pred.run_name} is marked crashed: watching on for 30 min in case it is resumed or writes "
                        "again (Ctrl-C to stop)"]
        state = json.loads((folder / "watch-state.json").read_text())
        if resumed:
            assert not result.crashed and len(state["verdicts"]) == 8  # the evals logged after the resume, judged
        else:  # ended by the wait running out, at the first check past it: not by --max-checks
            assert result.crashed and result.exit_code == 5 and len(state["verdicts"]) == 6 and len(checks) == 1


def test_a_watch_loop_follows_a_prediction_replaced_in_its_folder(tmp_path, replay):
    import dataclasses

    from ladder.data.sources import LocalSource
    from ladder.data.store import Store
    from ladder.predict.prediction import retire_watch
    from ladder.watch import AlertRules, JsonlSink
    from ladder.watch.monitor import Watcher, only_run

    run_dir, _ = _started(tmp_path, replay, 6)
    with (run_dir / "metrics.jsonl").open("a") as f:  # a NaN train loss after the 6th eval: an alarm of the run's
        f.write(json.dumps({"step": int(replay[2][5]) + 1, "train/loss": float("nan")}) + "\n")
    folder = tmp_path / "prediction"
    pred = Prediction.load(folder)
    alerts = tmp_path / "alerts.jsonl"
    watcher = Watcher(Store(tmp_path / "store"), only_run(LocalSource(run_dir), pred.run_name), pred,
                      AlertRules(metric="eval/loss"), {"jsonl": JsonlSink(alerts)}, folder / "watch-state.json",
                      prediction_dir=folder)
    first = watcher.check()
    assert len(first.lines) == 6 and [a.rule for a in first.new_alerts] == ["non_finite"]
    bands = ["median", "lo50", "hi50", "lo90", "hi90"]
    low = dataclasses.replace(pred, table=pred.table.assign(**{c: pred.table[c] * 0.9 for c in bands}))
    assert retire_watch(folder, low) is not None  # as `ladder predict --out` does
    low.save(folder)
    again = watcher.check()
    assert again.lines[0] == (f"the prediction in {folder} was replaced: the run is judged against the new one from "
                              "here: NOTE")  # a note, not the check's verdict, heads it on the terminal
    assert len(again.lines) == 7 and again.verdict == "alarm"  # every eval judged again, against the new one
    # the NaN's alarm was sent once: the new prediction judges the evals anew, not the run's own NaN
    sent = [json.loads(x) for x in alerts.read_text().splitlines()]
    assert [a["rule"] for a in sent if a["kind"] == "alert"].count("non_finite") == 1
    assert {a.rule for a in again.new_alerts} == {"deviation"}
    state = json.loads((folder / "watch-state.json").read_text())
    assert len(state["verdicts"]) == 6 and {v["verdict"] for v in state["verdicts"]} == {"alarm"}
    # replaced again, and watched by a new watch (a cron job's `--once`): its state moved aside, it hears the NaN no more
    higher = dataclasses.replace(pred, table=pred.table.assign(**{c: pred.table[c] * 1.1 for c in bands}))
    assert retire_watch(folder, higher) is not None
    higher.save(folder)
    fresh = Watcher(Store(tmp_path / "store"), only_run(LocalSource(run_dir), pred.run_name), higher,
                    AlertRules(metric="eval/loss"), {"jsonl": JsonlSink(alerts)}, folder / "watch-state.json",
                    prediction_dir=folder).check()
    assert fresh.new_alerts and "non_finite" not in {a.rule for a in fresh.new_alerts}
    sent = [json.loads(x) for x in alerts.read_text().splitlines()]
    assert [a["rule"] for a in sent if a["kind"] == "alert"].count("non_finite") == 1


def test_a_replanned_prediction_ahead_of_the_run_stays_and_an_edit_it_lacks_predicts_again(tmp_path, replay):
    import dataclasses

    from ladder.data.store import Store
    from ladder.watch import AlertRules
    from ladder.watch.monitor import Watcher

    folder = tmp_path / "prediction"
    cut = {"kind": "shorten", "at_step": 1000, "new_total_steps": 20000}
    superseded = {"kind": "shorten", "at_step": 1500, "new_total_steps": 21000}  # the edit the replan replaced
    pred = dataclasses.replace(replay[0], schedule={"peak_lr": 3e-4, "edits": [cut], "replaced": [superseded]})
    pred.save(folder)
    made, said = [], []

    def repredict(old, config, why):
        made.append(config)
        said.append(why)
        return dataclasses.replace(old, schedule=config["schedule"])

    watcher = Watcher(Store(tmp_path / "store"), None, pred, AlertRules(metric="eval/loss"), {},
                      folder / "watch-state.json", repredict=repredict, prediction_dir=folder)
    for edits, reached in (([], 800), ([cut], 1200), ([superseded], 800)):  # before the edit, with it, the old plan
        watcher._maybe_repredict({"schedule": {"peak_lr": 3e-4, "edits": edits}}, reached)
    assert made == [] and watcher.prediction is pred
    for edits, reached in (([superseded], 1100),  # past the replan's cut without it: the run does not follow it
                           ([superseded], 1600),  # the run made the old edit
                           ([{**superseded, "new_total_steps": 20500}], 800)):  # its config edited otherwise since
        watcher._maybe_repredict({"schedule": {"peak_lr": 3e-4, "edits": edits}}, reached)
        assert made[-1]["schedule"]["edits"] == edits
        assert said[-1] == ("the run passed step 1,000 without the edit the prediction holds there"
                            if reached > 1000 else "")  # else its config was edited otherwise
        watcher.prediction, made[:] = pred, []
    otherwise = {**cut, "new_total_steps": 20500}  # the run edited at the cut's step, otherwise: its own edit
    watcher._maybe_repredict({"schedule": {"peak_lr": 3e-4, "edits": [otherwise]}}, 1100)
    assert made[-1]["schedule"]["edits"] == [otherwise] and said[-1] == ""  # "schedule edited", not "without"
    watcher.prediction, made[:] = pred, []
    other = {"kind": "cooldown", "at_step": 900, "length": 500}  # an edit before the replan's, which it lacks
    watcher._maybe_repredict({"schedule": {"peak_lr": 3e-4, "edits": [other]}}, 800)
    assert len(made) == 1 and watcher.prediction.schedule["edits"] == [other]
    kept = sorted(folder.glob("earlier-prediction-*"))  # every replaced prediction, though replaced in one second
    assert Prediction.load(kept[0]).schedule["edits"] == [cut] and len(kept) == 5
    assert Prediction.load(folder).schedule["edits"] == [other]


def test_a_run_of_other_coordinates_than_predicted_is_refused_and_the_prediction_kept(tmp_path, replay):
    """Another run's prediction followed with --target-run: its size, tokens per step and schedule are not the run's,
    so a schedule edit in the run's config is no reason to predict again from it; the watch says which run the
    prediction is not for and how to predict it (exit 2), and leaves the prediction folder as it was."""
    import dataclasses

    pred, config, steps, loss = replay
    run_dir, watch = _started(tmp_path, (pred, config.replace(schedule=config.schedule.shorten(3000, 20000)),
                                         steps, loss), 3)
    T = config.stop_after_steps
    other = dataclasses.replace(pred, run_name="someone-else-7B", target_params=7e9,
                                table=pred.table.assign(tokens=pred.table["step"] * 4096),
                                schedule={"peak_lr": 3e-3, "total_steps": 2 * T, "warmup_steps": 2160, "edits": []})
    other.save(tmp_path / "prediction")
    before = {p.name: p.read_bytes() for p in (tmp_path / "prediction").iterdir()}
    res = runner.invoke(app, [*watch, "--target-run", config.name])
    said = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert (f"{config.name} is not the run the prediction in {tmp_path / 'prediction'} was made for (active_params "
            f"{config.spec.active_params():,} (predicted with 7,000,000,000), tokens_per_step 1 (predicted with 4,096), "
            f"peak_lr 0.0003 (predicted with 0.003), total_steps {T:,} (predicted with {2 * T:,})); predict it with "
            f"`ladder predict --target-run {config.name} --store {tmp_path / 'store'} --out NEW_FOLDER`") in said
    assert "schedule edited" not in said and "Traceback" not in said
    assert {p.name: p.read_bytes() for p in (tmp_path / "prediction").iterdir() if p.suffix != ".lock"} == before


def test_a_schedule_edit_of_the_predicted_run_is_not_another_run(replay):
    """Only the edits differ from the prediction's schedule (a cut horizon): the same run, whose prediction is made
    again from its edited schedule, not refused."""
    import dataclasses

    from ladder.watch.target import other_run

    pred, config, _, _ = replay
    plan = {"peak_lr": 3e-4, "total_steps": config.stop_after_steps, "warmup_steps": 2160, "decay": "constant",
            "edits": []}
    pred = dataclasses.replace(pred, schedule=plan, target_params=float(config.spec.active_params()))
    run = pd.Series({"active_params": config.spec.active_params(), "fit_flops_per_token": config.fit_flops_per_token,
                     "tokens_per_step": 1, "stop_after_steps": 20000})
    cut = {"kind": "shorten", "at_step": 1000, "new_total_steps": 20000}
    assert other_run(pred, run, {**plan, "edits": [cut]}) == ""
    assert other_run(pred, run, {**plan, "peak_lr": 3.3e-3}) == "peak_lr 0.0033 (predicted with 0.0003)"
    # a number YAML read as text (peak_lr: "3e-4") is that number, on either side
    assert other_run(pred, run, {**plan, "peak_lr": "3e-4", "total_steps": str(config.stop_after_steps)}) == ""
    assert other_run(dataclasses.replace(pred, schedule={**plan, "peak_lr": "3.0E-4"}), run, plan) == ""
    assert other_run(pred, run, {**plan, "peak_lr": "3.3e-3"}) == "peak_lr 0.0033 (predicted with 0.0003)"
    assert other_run(pred, run, {**plan, "decay": "cosine"}) == "decay cosine (predicted with constant)"


def test_the_same_named_run_with_another_schedule_than_predicted_is_refused_at_every_check(tmp_path, replay):
    """No --target-run: the run is the prediction's by name, but its config's peak LR is ten times the one the
    prediction was made with. Judged against it, it would read as far off; it is refused (exit 2) with the
    `ladder predict` that predicts it, at every check, and the prediction is not made again from its schedule."""
    import dataclasses

    pred, config, steps, loss = replay
    plan = {"peak_lr": 3e-3, "total_steps": config.stop_after_steps, "warmup_steps": 2160, "decay": "constant",
            "edits": []}
    _, watch = _started(tmp_path, (dataclasses.replace(pred, schedule=plan), config, steps, loss), 3)
    before = (tmp_path / "prediction" / "prediction.json").read_bytes()
    for _ in range(2):
        res = runner.invoke(app, watch)
        said = " ".join(res.output.split())
        assert res.exit_code == 2, res.output
        assert said == (f"error: {config.name} is not the run the prediction in {tmp_path / 'prediction'} was made "
                        f"for (peak_lr 0.0003 (predicted with 0.003)); predict it with `ladder predict --target-run "
                        f"{config.name} --store {tmp_path / 'store'} --out NEW_FOLDER` and watch it against that "
                        "prediction")
    assert (tmp_path / "prediction" / "prediction.json").read_bytes() == before
    assert not (tmp_path / "prediction" / "alerts.jsonl").exists()  # nothing judged


@pytest.mark.parametrize("times, refused", [(1.3, False), (0.75, False), (1.6, True), (0.6, True)])
def test_a_size_counted_otherwise_is_said_once_and_judged_and_one_of_another_rung_refused(tmp_path, replay, times,
                                                                                          refused):
    """The prediction's target has 1.3× (or 0.75×) the run's active parameters, as a trainer that counts embeddings
    and a target file that does not give them: the same run, said once with both numbers and where each comes
    from, and judged. 1.6× (or 0.6×) apart, as the rungs of a ladder are, it is another run: refused."""
    import dataclasses

    from ladder.data.sources import LocalSource
    from ladder.watch import AlertRules
    from ladder.watch.monitor import Watcher, WrongRun, only_run

    pred, config, steps, loss = replay
    n = config.spec.active_params()
    pred = dataclasses.replace(pred, target_params=float(round(n * times)))
    run_dir, _ = _started(tmp_path, (pred, config, steps, loss), 3)
    said = []
    watcher = Watcher(Store(tmp_path / "store"), only_run(LocalSource(run_dir), pred.run_name), pred,
                      AlertRules(metric="eval/loss"), {}, tmp_path / "prediction" / "watch-state.json",
                      warn=said.append)
    if refused:
        with pytest.raises(WrongRun, match=rf"\(active_params {n:,} \(predicted with {round(n * times):,}\)\)"):
            watcher.check()
        assert said == []
        return
    first = watcher.check()
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": int(steps[3]), "eval/loss": float(loss[3])}) + "\n")
    again = watcher.check()
    assert first.verdict == again.verdict == "ok" and len(first.lines) == 3 and len(again.lines) == 1
    assert said == [f"{config.name}'s size differs by more than 10% from that of the target the prediction was made "
                    f"for (active_params {n:,} by the run's stored coordinates, {round(n * times):,} by the "
                    "prediction's target): counted another way (with embeddings, or total rather than active "
                    "parameters)? It is judged as that run all the same (sizes 1.5× apart would be another run's)"]


def test_a_second_watcher_of_the_same_state_is_refused(tmp_path, replay):
    from ladder.watch.state import only_watcher

    _, watch = _started(tmp_path, replay, 3)
    with only_watcher(tmp_path / "prediction" / "watch-state.json"):
        res = runner.invoke(app, watch)
        assert res.exit_code == 2 and "another `ladder watch` is following this run" in res.output
        assert not (tmp_path / "prediction" / "alerts.jsonl").exists()  # nothing judged, nothing sent
    assert runner.invoke(app, watch).exit_code == 0  # the lock goes with the watcher that held it
    # one with its own state but the same alerts file would write every alert there a second time
    with only_watcher(tmp_path / "prediction" / "watch-state.json", tmp_path / "prediction" / "alerts.jsonl"):
        res = runner.invoke(app, [*watch, "--state", str(tmp_path / "own-state.json")])
        assert res.exit_code == 2 and "appends its alerts to" in res.output and "own --jsonl" in res.output
        assert not (tmp_path / "own-state.json").exists()
        ok = runner.invoke(app, [*watch, "--state", str(tmp_path / "own-state.json"), "--jsonl", str(tmp_path / "own.jsonl")])
        assert ok.exit_code == 0 and (tmp_path / "own.jsonl").exists()


@pytest.mark.parametrize("option, name, expect", [
    ("--jsonl", "prediction.json", "is a file of the prediction in"),
    ("--state", "prediction.parquet", "is a file of the prediction in"),
    ("--state", "alerts.jsonl", "is a file of"),
    ("--state", "prediction.json/state.json", "cannot write in"),  # a folder that is a file
])
def test_watch_files_that_would_destroy_another_file_or_cannot_be_written_are_refused_first(tmp_path, replay, option,
                                                                                          name, expect):
    _, watch = _started(tmp_path, replay, 3)
    assert runner.invoke(app, watch).exit_code == 0  # the watch's own files exist
    before = {p.name: p.read_bytes() for p in (tmp_path / "prediction").iterdir() if p.is_file()}
    res = runner.invoke(app, [*watch, option, str(tmp_path / "prediction" / name)])
    assert res.exit_code == 2 and expect in " ".join(res.output.split()), res.output
    assert {p.name: p.read_bytes() for p in (tmp_path / "prediction").iterdir() if p.is_file()} == before


def test_a_resume_that_changes_one_eval_judges_each_later_eval_once(tmp_path, replay):
    steps, loss = replay[2], replay[3]
    run_dir, watch = _started(tmp_path, replay, 8)
    assert runner.invoke(app, watch).exit_code == 0
    _started(tmp_path, replay, 5)
    with (run_dir / "metrics.jsonl").open("a") as f:
        for k in range(5, 8):  # the 6th eval 5% higher, the two after it as before
            f.write(json.dumps({"step": int(steps[k]), "eval/loss": float(loss[k]) * (1.05 if k == 5 else 1.0)}) + "\n")
    res = runner.invoke(app, watch)
    assert res.exit_code == 5, res.output
    assert len(re.findall(r"\(logged again with another value: a resume, or a table imported again\)", res.output.replace(" \n", " "))) == 1
    state = json.loads((tmp_path / "prediction" / "watch-state.json").read_text())
    assert [v["step"] for v in state["verdicts"]] == [int(s) for s in steps[:8]]  # each once


def test_a_source_that_names_its_runs_only_once_read_is_followed_by_name():
    """A wandb offline folder lists its run by id; the run's name comes with its records. The watch follows the
    one run such a folder holds when its name is the prediction's, and refuses one whose name is another's."""
    from ladder.data.sources.table import RunRef, SourceRun
    from ladder.watch.monitor import WrongRun, only_run

    class Offline:
        key = "offline:/runs/x/wandb"

        def __init__(self, names):
            self.names = names

        def runs(self):
            return [RunRef(f"id{i}", self.key) for i in range(len(self.names))]

        def read(self, ref, cursor=None):
            name = self.names[int(ref.run_id[2:])] if cursor is None else None  # the run's record is at the start
            return SourceRun(ref.run_id, self.key, pd.DataFrame(), {"files": 2}, "running", name=name)

    watched = only_run(Offline(["hero"]), "hero")
    [ref] = watched.runs()
    assert watched.read(ref).name == "hero"
    [ref] = watched.runs()  # the next check reads on from where this one stopped: records that do not name the run
    assert watched.read(ref, cursor={"files": 1}).name is None
    other = only_run(Offline(["rung-1"]), "hero")
    [ref] = other.runs()
    with pytest.raises(WrongRun, match="the prediction is for 'hero', but .* holds 'rung-1'"):
        other.read(ref)
    with pytest.raises(WrongRun, match="^--target-run 'nosuch': .* holds 'rung-1'; give the name or id of the run"):
        only_run(Offline(["rung-1"]), "nosuch", given=True).read(ref)
    with pytest.raises(WrongRun, match="known only once read"):  # several unnamed runs: which one is not known
        only_run(Offline(["hero", "rung-1"]), "hero").runs()
    assert [r.run_id for r in only_run(Offline(["hero", "rung-1"]), "id1").runs()] == ["id1"]  # --target-run ID


def test_a_source_without_credentials_is_a_usage_error_not_an_unreadable_run(tmp_path, replay):
    """No API key (or one the service rejects) is the user's to fix: the check stops with it (exit 2), where a
    server that does not answer is a run that cannot be read now (exit 3)."""
    from ladder.data.store import Store
    from ladder.errors import NoCredentials, SourceUnavailable
    from ladder.watch import AlertRules
    from ladder.watch.monitor import Refused, Watcher

    _, _ = _started(tmp_path, replay, 6)
    folder = tmp_path / "prediction"
    pred = Prediction.load(folder)

    class Failing:
        key = "wandb:team/p"

        def __init__(self, exc):
            self.exc = exc

        def runs(self):
            raise self.exc

    def check(exc):
        return Watcher(Store(tmp_path / "store"), Failing(exc), pred, AlertRules(metric="eval/loss"), {},
                       folder / "watch-state.json", prediction_dir=folder).check()

    with pytest.raises(Refused, match="no wandb API key"):
        check(NoCredentials("no wandb API key: set WANDB_API_KEY or run `wandb login`"))
    assert check(SourceUnavailable("wandb team/p: the server did not answer")).verdict == "unreadable"


def test_a_new_alert_on_an_earlier_eval_sets_the_exit_code():
    """A check with no new eval (verdict ok) that still raises a new warning, as when a rule now judges an old
    eval otherwise, exits 4: a cron job reads the code, not the lines."""
    from ladder.watch.monitor import CheckResult
    from ladder.watch.rules import Alert

    warning = Alert("deviation", "warning", 1662, "eval/loss 1.3512 is 3.78% below the predicted 1.4043")
    assert CheckResult("ok", (warning,)).exit_code == 4
    assert CheckResult("ok").exit_code == 0 and CheckResult("alarm", (warning,)).exit_code == 5


def live_run(tmp: Path, replay, lines: list[str], state: str = "running") -> tuple[Path, list[str]]:
    """The replay's prediction saved and its run folder with these metrics lines; the watch's arguments."""
    pred, config, _, _ = replay
    pred.save(tmp / "prediction")
    run_dir = tmp / "runs" / config.name
    run_dir.mkdir(parents=True)
    config.save(run_dir / "run.yaml")
    (run_dir / "status.json").write_text(json.dumps({"state": state, "step": json.loads(lines[-1])["step"]}))
    (run_dir / "metrics.jsonl").write_text("".join(x + "\n" for x in lines))
    return run_dir, ["watch", "--prediction", str(tmp / "prediction"), "--local", str(run_dir),
                     "--store", str(tmp / "store")]


def test_a_watch_started_before_its_run_waits_for_it_and_a_typo_is_refused(tmp_path, replay):
    from tests.synthetic_ladder import write_run

    _, config, steps, loss = replay
    _, args = live_run(tmp_path / "other", replay, [json.dumps({"step": int(steps[0]), "eval/loss": float(loss[0])})])
    runs = tmp_path / "runs"
    runs.mkdir()
    at = args.index("--local") + 1

    def watch(local: Path):
        args[at] = str(local)
        return runner.invoke(app, [*args, "--once"])

    res = watch(runs / config.name)  # its folder is not written yet
    assert res.exit_code == 3 and "no such directory yet" in res.output, res.output
    alerts = tmp_path / "other" / "prediction" / "alerts.jsonl"
    told = len(alerts.read_text().splitlines())
    args[at] = str(runs / config.name)
    looped = runner.invoke(app, [*args, "--poll", "0.01", "--max-checks", "4"])  # waiting: said once, not at each poll
    assert looped.exit_code == 3 and looped.output.count("no such directory yet") == 1, looped.output
    assert len(alerts.read_text().splitlines()) == told + 1
    for rung in micro_plan().rungs[:2]:
        write_run(runs, rung)
    res = watch(runs)  # a folder of runs without it: looked for again at each check
    assert res.exit_code == 3 and f"no run {config.name!r} in local:" in res.output, res.output
    assert "a run that has not started is looked for again" in " ".join(res.output.split())
    res = watch(tmp_path / "typo" / config.name)  # nor the folder it would be written in: a usage error
    assert res.exit_code == 2 and "no such folder" in res.output, res.output
    res = watch(runs / micro_plan().rungs[0].name)  # one run's own folder, another run: a usage error
    assert res.exit_code == 2 and f"the prediction is for {config.name!r}" in res.output, res.output
    assert f"give --target-run {micro_plan().rungs[0].name} where it is that run" in " ".join(res.output.split())


def test_a_deadline_in_hours_keeps_its_time_across_once_checks_and_says_when_it_passed(tmp_path, replay):
    # A cron job gives `--once --deadline 72h` every few minutes: counted afresh each time it would never come.
    _, _, steps, loss = replay
    _, args = live_run(tmp_path, replay, [json.dumps({"step": int(steps[0]), "eval/loss": float(loss[0]),
                                                      "throughput/tokens_per_second": 1.0})])
    state_file = tmp_path / "prediction" / "watch-state.json"

    def watch(deadline: str):
        res = runner.invoke(app, [*args, "--once", "--deadline", deadline])
        assert res.exception is None or isinstance(res.exception, SystemExit), res.output
        return res, json.loads(state_file.read_text())["deadline"]

    res, first = watch("1h")
    assert first["given"] == "1h" and 3500 < first["at"] - json.loads(state_file.read_text())["updated"] <= 3600
    assert res.exit_code == 5 and "by the deadline, 1.0 h from now" in " ".join(res.output.split())  # 1 token/s: far short
    res, again = watch("1h")
    assert again == first and "counted from the first watch given it" in " ".join(res.output.split())
    _, moved = watch("2h")
    assert moved["given"] == "2h" and moved["at"] > first["at"] + 3000
    saved = json.loads(state_file.read_text())
    saved["deadline"]["at"] -= 3 * 3600  # two hours later the same cron line runs again: the deadline has passed
    state_file.write_text(json.dumps(saved))
    res, _ = watch("2h")
    text = " ".join(res.output.split())
    assert res.exit_code == 5 and "the deadline passed 1.0 h ago with the run at step" in text


def test_a_deadline_the_run_logs_no_throughput_for_is_said_to_go_unchecked(tmp_path, replay):
    _, _, steps, loss = replay
    _, args = live_run(tmp_path, replay, [json.dumps({"step": int(steps[0]), "eval/loss": float(loss[0])})])
    res = runner.invoke(app, [*args, "--once", "--deadline", "1h"])
    text = " ".join(res.output.split())
    assert res.exit_code in (0, 4), res.output
    assert "--deadline is not checked: the run logs no throughput/tokens_per_second" in text
    assert "by the deadline" not in text


def test_a_line_of_the_metrics_file_that_cannot_be_read_is_named_by_the_watch(tmp_path, replay):
    _, _, steps, loss = replay
    rows = [json.dumps({"step": int(s), "eval/loss": float(y)}) for s, y in zip(steps[:2], loss[:2])]
    _, args = live_run(tmp_path, replay, [rows[0], rows[1][:12], rows[1]])  # a torn write on line 2
    res = runner.invoke(app, [*args, "--once"])
    text = " ".join(res.output.split())
    assert res.exit_code in (0, 4), res.output
    assert "warning:" in text and "1 line that is not a JSON object with an integer step skipped (line 2)" in text
    assert f"step {int(steps[1]):,}" in text  # the whole lines were read and judged


def test_a_watch_of_a_run_that_has_ended_says_so_and_stops(tmp_path, replay):
    _, _, steps, loss = replay
    run_dir, args = live_run(tmp_path, replay, [json.dumps({"step": int(s), "eval/loss": float(y)})
                                                for s, y in zip(steps[:2], loss[:2])])
    assert runner.invoke(app, [*args, "--once"]).exit_code in (0, 4)
    (run_dir / "status.json").write_text(json.dumps({"state": "crashed", "step": int(steps[1])}))
    # no --once: the loop waits three times --stale-minutes (1.8 s) for the run to be resumed, then ends and says so
    res = runner.invoke(app, [*args, "--poll", "0.01", "--stale-minutes", "0.01"])
    text = " ".join(res.output.split())
    assert f"the run crashed at step {int(steps[1]):,}" in text and "no new eval since" in text, res.output
    assert "is marked crashed: watching on for 2 s in case it is resumed" in text
    assert res.exit_code == 5  # a crash before the plan's end is an alarm


def test_a_run_marked_finished_short_of_its_plan_is_a_warning_not_ok(tmp_path, replay):
    _, _, steps, loss = replay
    run_dir, args = live_run(tmp_path, replay, [json.dumps({"step": int(s), "eval/loss": float(y)})
                                                for s, y in zip(steps[:2], loss[:2])])
    (run_dir / "status.json").write_text(json.dumps({"state": "finished", "step": int(steps[1])}))
    res = runner.invoke(app, [*args, "--once"])
    text = " ".join(res.output.split())
    assert f"the run is marked finished at step {int(steps[1]):,}" in text and "predicted end was not reached" in text
    assert res.exit_code == 4, res.output
    again = " ".join(runner.invoke(app, [*args, "--once"]).output.split())
    assert f"the run is marked finished, short of its plan, at step {int(steps[1]):,}" in again, again


def test_a_metric_logged_between_the_prediction_s_steps_gets_one_verdict_per_step_of_the_prediction(tmp_path, replay):
    """The replayed run's whole curve (a value every 128 steps) as its train loss, against a prediction of
    the train loss at its 20 steps: a verdict per step of the prediction, each on the mean since the last."""
    import dataclasses

    import fit_datasets as D

    pred, config, steps, _ = replay
    (curve,) = [c for c in D.mpl_curves(size="400M", split="test") if TARGET in c.name]
    pred = dataclasses.replace(pred, metric="train/loss")
    pred.save(tmp_path / "prediction")
    run_dir = tmp_path / "runs" / config.name
    run_dir.mkdir(parents=True)
    config.save(run_dir / "run.yaml")
    rows = [{"step": int(s), "train/loss": float(y)} for s, y in zip(curve.steps, curve.loss)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "status.json").write_text(json.dumps({"state": "finished", "step": int(curve.steps.max())}))
    res = runner.invoke(app, ["watch", "--prediction", str(tmp_path / "prediction"), "--local", str(run_dir),
                              "--store", str(tmp_path / "store"), "--once"])
    assert res.exit_code in (0, 4), res.output
    verdicts = json.loads((tmp_path / "prediction" / "watch-state.json").read_text())["verdicts"]
    assert [v["step"] for v in verdicts] == [int(s) for s in steps]  # not one per logged value (171)
    inside = (curve.steps > steps[1]) & (curve.steps <= steps[2])
    assert verdicts[2]["value"] == pytest.approx(float(curve.loss[inside].mean()))
    assert f"(mean of {int(inside.sum())} values logged at steps {int(curve.steps[inside][0]):,}–{int(steps[2]):,})" \
        in " ".join(res.output.split())


def test_a_watch_reads_the_copy_of_the_run_it_pulls_where_the_store_holds_another(tmp_path, replay):
    """The run imported once from a table (id = its name) and now followed from its run folder (id group/name):
    the watch judges the copy it pulls, not the other one of the same name."""
    _, config, steps, loss = replay
    _, args = live_run(tmp_path, replay, [json.dumps({"step": int(s), "eval/loss": float(v)})
                                          for s, v in zip(steps[:3], loss[:3])])
    table = tmp_path / "old.csv"  # an older copy, 10% off the run
    pd.DataFrame({"run": config.name, "step": steps[:3], "loss": loss[:3] * 1.1}).to_csv(table, index=False)
    res = runner.invoke(app, ["import", "csv", str(table), "--store", str(tmp_path / "store"), "--run", "run",
                              "--step", "step", "--metric", "eval/loss=loss", "--coord", "active_params=1000000",
                              "--coord", f"stop_after_steps={config.stop_after_steps}", "--coord", "tokens_per_step=1",
                              "--coord", "role=hero"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*args, "--once"])
    text = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert (Store(tmp_path / "store").runs()["name"] == config.name).sum() == 2 and text.count("vs predicted") == 3
    assert f"eval/loss {loss[2]:.4f} vs predicted" in text


def test_a_watch_goes_on_after_its_alerts_file_was_cut_mid_write_and_says_so_once(tmp_path, replay):
    _, watch = _started(tmp_path, replay, 3)
    assert runner.invoke(app, watch).exit_code == 0
    alerts = tmp_path / "prediction" / "alerts.jsonl"
    kept = len(alerts.read_text().splitlines())
    cut = '{"time": 1796524000.0, "kind": "verd'
    with alerts.open("a") as f:
        f.write(cut)  # a watch killed mid-write, or a full disk
    _, watch = _started(tmp_path, replay, 5)
    res = runner.invoke(app, watch)
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and said.count(f"--jsonl {alerts}: its last line was cut short") == 1, res.output
    assert "that line is ended where it stops and ignored" in said
    rows = alerts.read_text().splitlines()
    assert rows[kept] == cut and json.loads(rows[-1])["kind"] == "verdict" and len(rows) > kept + 1
    res = runner.invoke(app, watch)  # the file is whole again: nothing to say
    assert res.exit_code == 0 and "cut short" not in res.output, res.output
    (tmp_path / "r.yaml").write_text("name: hero\n" + cut)  # no alerts file, whatever its end: still refused
    res = runner.invoke(app, [*watch, "--jsonl", str(tmp_path / "r.yaml")])
    assert res.exit_code == 2 and "so it is no alerts file" in " ".join(res.output.split()), res.output


def test_a_run_the_store_lacks_cannot_be_judged_yet_and_its_closest_stored_names_are_given(tmp_path, replay):
    _, watch = _started(tmp_path, replay, 3)
    assert runner.invoke(app, watch).exit_code == 0  # the run is in the store now
    name = replay[1].name
    from_store = ["watch", "--prediction", str(tmp_path / "prediction"), "--store", str(tmp_path / "store"), "--once",
                  "--state", str(tmp_path / "typo-state.json"), "--jsonl", str(tmp_path / "typo.jsonl")]
    res = runner.invoke(app, [*from_store, "--target-run", name[:-1]])  # a typo, or a run not pulled yet: exit 3
    said = " ".join(res.output.split())
    assert res.exit_code == 3 and f"no run {name[:-1]!r} in" in said, res.output
    assert f"(not pulled yet, or a typo? the stored names closest to it: {name})" in said
    res = runner.invoke(app, [*from_store, "--target-run", "zzzz"])
    assert res.exit_code == 3 and "(not pulled yet, or a typo?)" in res.output and "closest" not in res.output
    res = runner.invoke(app, [*watch[:-1], "--target-run", "zzzz", "--once", "--state", str(tmp_path / "s.json"),
                              "--jsonl", str(tmp_path / "s.jsonl")])  # a source given: its own words, no guess
    assert "typo" not in res.output, res.output


def test_a_follow_that_ends_with_the_run_s_last_evals_says_the_watch_ends(tmp_path, replay):
    """Followed (no --once) to the end of a finished run whose last check judged new evals: the verdict lines were the
    last output, and the watch ended with no word of why."""
    _, _, steps, loss = replay
    lines = [json.dumps({"step": int(s), "eval/loss": float(v)}) for s, v in zip(steps, loss)]
    _, args = live_run(tmp_path, replay, lines, state="finished")
    res = runner.invoke(app, [*args, "--poll", "0.01", "--max-checks", "3"])
    last = res.output.strip().splitlines()[-1]
    assert res.exit_code in (0, 4, 5), res.output
    assert last == (f"replay-400M is no longer running (finished): the watch ends, exit code {res.exit_code} (the "
                    "worst verdict of its last check)"), res.output
    flat = " ".join(res.output.split())  # how it ended, as `ladder score` gives it, said before
    said = flat[flat.index("replay-400M finished: its last eval"):flat.index("replay-400M is no longer running")]
    assert f"(step {int(steps[-1]):,}) {float(loss[-1]):.4f} against the predicted" in said
    assert "of the run on, mean |error|" in said and "evals inside the 90% band (`ladder score`" in said
    once = runner.invoke(app, [*args, "--once"])  # a check of a run that finished says it too
    assert "replay-400M finished: its last eval" in " ".join(once.output.split()), once.output


def test_a_follow_says_where_the_run_stands_at_once_and_exits_with_an_earlier_check_s_alarm(tmp_path, replay,
                                                                                            monkeypatch):
    """A follow started before the run's first eval printed nothing until an eval came (minutes to hours); one whose
    run alarmed at an earlier check and then logged evals on track ended with exit code 0, the alarm lost to a
    script that reads the code (here the last check warns: 0.55% above at the end, its code 4)."""
    import time as clock

    import ladder.watch.monitor as monitor

    _, _, steps, loss = replay
    run_dir, args = live_run(tmp_path, replay, [json.dumps({"step": 10, "train/loss": 6.0})])
    logged = [[json.dumps({"step": int(steps[0]), "eval/loss": float(loss[0]) * 1.25})],  # far above the band
              [json.dumps({"step": int(s), "eval/loss": float(y)}) for s, y in zip(steps[1:], loss[1:])]]

    class LogsOn:  # between two checks the run logs its next evals; it finishes with the last
        time = staticmethod(clock.time)

        @staticmethod
        def sleep(_seconds):
            lines = logged.pop(0)
            with (run_dir / "metrics.jsonl").open("a") as f:
                f.writelines(x + "\n" for x in lines)
            state = "running" if logged else "finished"
            (run_dir / "status.json").write_text(json.dumps({"state": state, "step": json.loads(lines[-1])["step"]}))

    monkeypatch.setattr(monitor, "time", LogsOn)
    res = runner.invoke(app, [*args, "--poll", "90"])  # the run's own pace: its sleep logs the next evals at once
    out = [" ".join(x.split()) for x in res.output.strip().splitlines()]
    assert out[0] == "OK step 10 (0%): no eval yet" and out[1] == (
        "checking again every 90 s until the run ends (Ctrl-C to stop)"), res.output
    assert any(x.startswith("ALARM") for x in out[2:]) and not logged, res.output
    assert res.exit_code == 5 and out[-1] == ("replay-400M is no longer running (finished): the watch ends, exit code 5 "
                                              "(an alarm at an earlier check; the last check's verdict: WARNING)"), res.output


def test_a_warning_on_the_run_s_state_goes_when_the_state_does_not_with_the_eval_it_came_with(tmp_path, replay):
    """A run marked finished short of its plan warns ("short"); told it runs, the next check with no new eval still
    warned: the eval's kept verdict held the short warning, so a cron job saw exit 4 until the next eval came."""
    _, _, steps, loss = replay
    lines = [json.dumps({"step": int(s), "eval/loss": float(v)}) for s, v in zip(steps[:6], loss[:6])]
    run_dir, args = live_run(tmp_path, replay, lines, state="finished")
    first = runner.invoke(app, [*args, "--once"])
    assert first.exit_code == 4 and "[short]" in first.output, first.output
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": int(steps[5])}))
    again = runner.invoke(app, [*args, "--once"])
    assert again.exit_code == 0 and "no new eval since step" in again.output and "WARNING" not in again.output, \
        again.output
    state = json.loads((tmp_path / "prediction" / "watch-state.json").read_text())
    assert {v["verdict"] for v in state["verdicts"]} == {"ok"}  # each eval's own, not the run's state then


def test_the_terminals_lines_are_whole_in_a_file_and_wrapped_on_a_terminal():
    """Watch output redirected to a log broke each long alert over several lines at 150 columns: a `grep` of the log
    for a step found half the message."""
    import io

    from rich.console import Console

    from ladder.watch import TerminalSink
    from ladder.watch.rules import Alert

    message = "the prediction's error (predicted / actual − 1) is −3.21%, " + "beyond the 90% band " * 12
    alert = Alert("deviation", "alarm", 1_234, message)
    summary = "step 1,234 (50% of the plan): eval/loss 2.3456, predicted 2.2703 " + "x" * 200 + ": alarm"
    for terminal in (False, True):
        shown = io.StringIO()
        TerminalSink(Console(file=shown, width=150, force_terminal=terminal, color_system=None)).send([alert], "alarm",
                                                                                                     summary)
        lines = shown.getvalue().splitlines()
        assert (len(lines) == 2) is not terminal and all(len(x) <= 150 for x in lines) is terminal
        assert any("[deviation] step 1,234: the prediction's error" in x for x in lines)  # as the verdicts write it


@pytest.mark.parametrize("how", ["live", "new watch"])
def test_a_replaced_prediction_that_keeps_the_rows_before_its_edit_sends_their_alerts_no_second_time(tmp_path, replay,
                                                                                                     how):
    """`ladder replan --out` into a watched folder: the rows before its edit are as they were, so the alerts judged
    there stand; a chat or webhook does not hear them again, and the alerts file begun beside the new prediction (the
    report reads it) gets them marked as redelivered. Those past the edit are judged anew and sent."""
    import dataclasses

    from ladder.data.sources import LocalSource
    from ladder.data.store import Store
    from ladder.predict.prediction import retire_watch
    from ladder.watch import AlertRules, JsonlSink
    from ladder.watch.monitor import Watcher, only_run

    class Hook:  # a webhook's posts, kept
        def __init__(self):
            self.posts = []

        def send(self, alerts, verdict, summary, late=False):
            self.posts += [a.key for a in alerts]
            return True

    run_dir, _ = _started(tmp_path, replay, 8, factor=1.05)  # every eval 5% above the prediction
    folder = tmp_path / "prediction"
    pred = Prediction.load(folder)

    def watcher(hook):
        return Watcher(Store(tmp_path / "store"), only_run(LocalSource(run_dir), pred.run_name), Prediction.load(folder),
                       AlertRules(metric="eval/loss"), {"jsonl": JsonlSink(folder / "alerts.jsonl", pred.run_name),
                                                        "hook": hook}, folder / "watch-state.json", prediction_dir=folder)

    hook = Hook()
    first = watcher(hook)
    first.check()
    steps = replay[2]
    edit = int(steps[5])
    before = [k for k in hook.posts if int(k.split(":")[2]) <= edit]
    assert len([k for k in before if k.startswith("deviation:")]) >= 3, hook.posts
    assert [k for k in hook.posts if k.startswith("deviation:") and int(k.split(":")[2]) > edit], hook.posts
    bands = ["median", "lo50", "hi50", "lo90", "hi90"]
    t = pred.table
    cut = dataclasses.replace(pred, table=t.assign(**{c: t[c].where(t["step"] <= edit, t[c] * 0.98) for c in bands}))
    assert cut.same_until(pred) == edit
    assert retire_watch(folder, cut) is not None  # as `ladder replan --out` does
    cut.save(folder)
    if how == "live":
        hook.posts.clear()
        said = first.check().lines
        assert said[0].startswith(f"the prediction in {folder} was replaced"), said
        said = said[1:]
    else:
        hook = Hook()
        said = watcher(hook).check().lines
    # the evals before the edit keep their verdicts (a cron job's exit code is not raised by them again): judged anew
    # are those past it
    assert [line.split(" (")[0] for line in said] == [f"step {int(s):,}" for s in steps[6:8]], said
    assert [v["step"] for v in json.loads((folder / "watch-state.json").read_text())["verdicts"]] == \
        [int(s) for s in steps[:8]]  # the report's verdicts: those kept and those judged anew
    after = [k for k in hook.posts if int(k.split(":")[2]) > edit]  # judged anew (8% above now), sent again
    assert hook.posts == after and sum(k.startswith("deviation:") for k in after) == 2, hook.posts
    rows = [json.loads(x) for x in (folder / "alerts.jsonl").read_text().splitlines()]
    kept = {r["key"]: r.get("redelivered", False) for r in rows if r["kind"] == "alert"}
    assert kept == {**dict.fromkeys(before, True), **dict.fromkeys(after, False)}


def test_a_prediction_made_again_by_the_watch_from_rungs_changed_since_says_so(tmp_path, replay, monkeypatch):
    """A watch that predicts again (the run passed an edit its prediction lacks) fits the rungs as stored now: where
    they changed since the old prediction was made, its evals may move, and the watch says why."""
    import dataclasses

    import ladder.watch.monitor as monitor
    from ladder.data.store import Store
    from ladder.watch import AlertRules

    folder = tmp_path / "prediction"
    cut = {"kind": "shorten", "at_step": 1000, "new_total_steps": 20000}
    pred = dataclasses.replace(replay[0], schedule={"peak_lr": 3e-4, "edits": [cut]})
    pred.save(folder)
    for stale in (None, "the store's data of rung r changed since this prediction was made ..."):
        said = []
        monkeypatch.setattr(monitor, "stale_warning", lambda store, p, stale=stale: stale if p is pred else None)
        watcher = monitor.Watcher(Store(tmp_path / "store"), None, pred, AlertRules(metric="eval/loss"), {},
                                  folder / "watch-state.json", prediction_dir=folder, warn=said.append,
                                  repredict=lambda old, config, why: dataclasses.replace(old, schedule=config["schedule"]))
        watcher._maybe_repredict({"schedule": {"peak_lr": 3e-4, "edits": []}}, 1200)  # past the cut without it
        assert watcher.prediction is not pred
        assert [s for s in said if "the rungs changed in the store" in s] == (
            [] if stale is None else ["the rungs changed in the store since the prediction this one replaces was made: "
                                      "the new one is fitted on them as they are stored now, so the evals it judges "
                                      "may move"])
        pred.save(folder)

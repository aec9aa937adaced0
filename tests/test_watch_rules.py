"""Alert rules on synthetic series whose truth is known, plus the sinks and the state file."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pandas as pd
import pytest

from ladder import metrics as keys
from ladder.errors import LadderError
from ladder.predict.prediction import Prediction
from ladder.watch import AlertRules, JsonlSink, Observed, WatchState, WebhookSink, evaluate
from ladder.watch import rules as R

STEPS = 2000
EVALS = np.arange(100, STEPS + 1, 100)  # every 5%


def prediction(rel50=0.003, rel90=0.008) -> Prediction:
    f = EVALS / STEPS
    med = 2.0 + 1.2 * f**-0.25
    table = pd.DataFrame({
        "step": EVALS, "tokens": EVALS * 1000, "fraction": f, "compute": EVALS * 1e9, "median": med,
        "lo50": med * (1 - rel50), "hi50": med * (1 + rel50), "lo90": med * (1 - rel90), "hi90": med * (1 + rel90),
        "in_assumptions": True,
    })
    return Prediction(run_name="hero", metric=keys.EVAL_LOSS, table=table, planned_steps=STEPS)


def observed(eval_values, train=None, extra=None, last_update=None) -> Observed:
    series = pd.DataFrame({keys.EVAL_LOSS: pd.Series(eval_values, index=EVALS[: len(eval_values)])})
    if train is not None:
        series = series.join(pd.DataFrame({keys.TRAIN_LOSS: train}), how="outer")
    for k, v in (extra or {}).items():
        series = series.join(pd.DataFrame({k: v}), how="outer")
    return Observed(series.sort_index(), planned_steps=STEPS, tokens_per_step=1000, last_update=last_update)


def clean_values(seed=0):
    rng = np.random.default_rng(seed)
    med = prediction().table["median"].to_numpy()
    return med * (1 + 0.0005 * rng.standard_normal(len(med)))


def test_clean_run_raises_nothing():
    alerts = evaluate(observed(clean_values()), prediction(), AlertRules(), now=0.0)
    assert alerts == []


def test_one_percent_jump_alarms_within_two_evals():
    y = clean_values()
    start = int(np.argmax(EVALS / STEPS >= 0.4))
    y[start:] *= 1.01
    alerts = evaluate(observed(y), prediction(), AlertRules(), now=0.0)
    alarms = [a for a in alerts if a.level == "alarm"]
    assert alarms and alarms[0].step <= EVALS[start + 1]
    # one sign convention: the error is predicted / actual − 1 (the words say which side the actual is on)
    assert alarms[0].rule == "deviation" and "1.0" in alarms[0].message and "above the predicted" in alarms[0].message
    assert alarms[0].value == pytest.approx(1 / 1.01 - 1, abs=2e-3) and f"the prediction's error (predicted / actual − 1) is {alarms[0].value:+.2%}" in alarms[0].message
    assert "1.01% above" not in alarms[0].message  # one number for the deviation, not actual / predicted beside it


def test_a_deviation_says_when_its_prediction_warned_that_its_band_is_likely_too_narrow():
    import dataclasses

    from fits.predictor import own_band_missed

    y = clean_values()
    y[8:] *= 1.02
    plain = [a for a in evaluate(observed(y), prediction(), AlertRules(), now=0.0) if a.rule == "deviation"]
    row = type("Row", (), {"method": "per-fraction", "failed": "", "distance": 0.5, "errors": np.full(10, 0.03),
                           "inside90": np.zeros(10, bool)})()
    said = own_band_missed([row], "per-fraction")  # the core's own warning, as a prediction keeps it
    narrow = dataclasses.replace(prediction(), warnings=tuple(said))
    marked = [a for a in evaluate(observed(y), narrow, AlertRules(), now=0.0) if a.rule == "deviation"]
    assert len(said) == 1 and narrow.band_too_narrow and not prediction().band_too_narrow
    assert [a.step for a in marked] == [a.step for a in plain] and {a.level for a in plain} == {"alarm"}
    assert {a.level for a in marked} == {"warning"}  # a band its own prediction calls too narrow pages no one
    assert all("likely too narrow on this ladder" in a.message and "never an alarm" in a.message for a in marked)
    assert not any("likely too narrow" in a.message for a in plain)


def test_each_side_of_a_lopsided_band_is_its_own_limit():
    """A band of −1% / +4% (50%) and −2% / +8% (90%): 1.5% below is past the lower 50% edge (a warning) though
    far inside the upper one; 3% above is inside; 2.5% below is past the lower 90% edge, still a warning (the run
    does better than predicted), and 9% above is past the upper 90% edge (an alarm)."""
    pred = prediction()
    med = pred.table["median"].to_numpy()
    pred.table["lo50"], pred.table["hi50"] = med * 0.99, med * 1.04
    pred.table["lo90"], pred.table["hi90"] = med * 0.98, med * 1.08
    rules = AlertRules(warn_rel=0.005, alarm_rel=0.01)
    levels = {}
    messages = {}
    for shift in (-0.015, 0.03, -0.025, 0.09):
        y = med.copy()
        y[10] *= 1 + shift
        found = R.deviation(observed(y), pred, rules)
        levels[shift] = [(a.level, a.step) for a in found]
        messages[shift] = " ".join(a.message for a in found)
    assert levels == {-0.015: [("warning", EVALS[10])], 0.03: [], -0.025: [("warning", EVALS[10])],
                      0.09: [("alarm", EVALS[10])]}
    assert "the 90% band's lower edge" in messages[-0.025] and "remake the prediction" in messages[-0.025]
    assert "remake" not in messages[-0.015] + messages[0.09]
    (alert,) = R.deviation(observed(np.where(EVALS == EVALS[10], med * 0.985, med)), pred, rules)
    assert "the prediction's error (predicted / actual − 1) is +1.52%, past +1.01%, the error at " in alert.message and "the 50% band's lower edge" in alert.message


def test_slow_drift_is_caught_by_cusum_before_the_band():
    y = clean_values()
    y *= 1 + 0.0005 * np.arange(len(y))
    alerts = evaluate(observed(y), prediction(rel50=0.001, rel90=0.0025), AlertRules(), now=0.0)
    first_drift = min(a.step for a in alerts if a.rule == "drift")
    band = [a.step for a in alerts if a.rule == "deviation"]
    assert band and first_drift < min(band)


def test_an_early_offset_that_fades_does_not_hide_a_later_drift_nor_does_a_dip_raise_one():
    """The prediction is weakest early: a run 3% above it at first, on it by 25%, then climbing 0.05% an eval, is
    drifting (measured from the first evals' mean, the climb was hidden under the early offset); a run that dips
    1% below the prediction and comes back to it is not (its baseline goes no lower than the prediction)."""
    f = EVALS / STEPS
    climb = clean_values() * (1 + 0.0005 * np.maximum(0, np.arange(20) - 5))
    pred = prediction(rel50=0.001, rel90=0.0025)
    assert [a for a in evaluate(observed(climb), pred, AlertRules(), now=0.0) if a.rule == "drift"]
    early = climb * (1 + 0.03 * np.clip(1 - f / 0.25, 0, None))
    drifts = [a for a in evaluate(observed(early), pred, AlertRules(), now=0.0) if a.rule == "drift"]
    assert drifts and drifts[0].step >= 0.5 * STEPS and "over its offset before (+0." in drifts[0].message
    dip = clean_values() * np.where((f > 0.3) & (f < 0.5), 0.99, 1.0)
    assert [a for a in evaluate(observed(dip), pred, AlertRules(), now=0.0) if a.rule == "drift"] == []
    offset = clean_values() * 1.005  # a constant offset: the band rule's, not a drift
    assert [a for a in evaluate(observed(offset), pred, AlertRules(), now=0.0) if a.rule == "drift"] == []
    # noisy evals (0.4%): the lowest of many three-eval means sits below the run's level, and is followed only
    # where lower beyond that noise, so a steady 1% offset raises as many drift alerts as a run on the prediction
    # (following every lower mean, 34 runs of 60 warned and 15 alarmed; on the prediction, 10 and 5)
    pred = prediction(rel50=0.0032, rel90=0.008)
    alerted = {}
    for shift in (0.0, 0.01):
        drifts = [R.drift(observed(pred.table["median"].to_numpy() * (1 + shift) * (
            1 + 0.004 * np.random.default_rng(seed).standard_normal(len(EVALS)))), pred, AlertRules()) for seed in range(60)]
        alerted[shift] = (sum(map(bool, drifts)), sum(any(a.level == "alarm" for a in d) for d in drifts))
    assert alerted[0.01][0] <= alerted[0.0][0] + 2 and alerted[0.01][1] <= alerted[0.0][1] + 2, alerted


def test_a_drift_within_a_wide_band_is_left_to_the_band_rule():
    y = clean_values() * (1 + 0.0005 * np.arange(20))
    alerts = evaluate(observed(y), prediction(rel50=0.01, rel90=0.025), AlertRules(), now=0.0)
    assert [a for a in alerts if a.rule == "drift"] == []


def test_non_finite_is_an_alarm():
    y = clean_values()
    y[5] = np.nan
    train = pd.Series([3.0, np.inf], index=[10, 11])
    alerts = R.non_finite(observed(y, train=train), AlertRules())
    assert [(a.rule, a.level, a.step) for a in alerts] == [("non_finite", "alarm", 11)]


def test_spike_in_train_loss():
    rng = np.random.default_rng(1)
    steps = np.arange(1, 401)
    loss = 3.0 * steps**-0.1 + 0.01 * rng.standard_normal(len(steps))
    loss[300:306] += 0.5
    alerts = R.spikes(observed(clean_values(), train=pd.Series(loss, index=steps)), AlertRules())
    assert len(alerts) == 1 and 300 < alerts[0].step <= 303
    calm = R.spikes(observed(clean_values(), train=pd.Series(loss[:290], index=steps[:290])), AlertRules())
    assert calm == []


def test_stale_and_throughput():
    obs = observed(clean_values()[:10], extra={keys.TOKENS_PER_SECOND: pd.Series([100.0] * 20, index=range(981, 1001))},
                   last_update=1000.0)
    assert R.stale(obs, now=1000.0 + 1000, rules=AlertRules()) == []
    [a] = R.stale(obs, now=1000.0 + 2000, rules=AlertRules())
    assert a.level == "warning" and "no new telemetry for 33 min" in a.message
    [a] = R.stale(obs, now=1000.0 + 10, rules=AlertRules(stale_after_s=6.0))  # --stale-minutes 0.1: not "0 min"
    assert "no new telemetry for 10 s" in a.message and "warn after 6 s)" in a.message
    # 1000 steps left × 1000 tokens at 100 tokens/s needs 10,000 s
    assert R.throughput(obs, now=0.0, rules=AlertRules(deadline=20_000.0)) == []
    [t] = R.throughput(obs, now=0.0, rules=AlertRules(deadline=9_000.0))
    assert t.level == "warning" and "shorten the horizon to 1,900 steps" in t.message


def test_a_throughput_alert_is_shown_at_the_run_s_step_and_kept_once_per_plan():
    """Labelled with the step the run is at (not the plan's last), and keyed by the plan it threatens: the same
    alert at a later step is not sent again."""
    slow = {keys.TOKENS_PER_SECOND: pd.Series([100.0] * 20, index=range(981, 1001))}
    obs = observed(clean_values()[:10], extra=slow)
    [t] = R.throughput(obs, now=0.0, rules=AlertRules(deadline=9_000.0))
    [d] = R.throughput(obs, now=0.0, rules=AlertRules(deadline=-1.0))  # the deadline has passed
    assert (t.step, t.key, d.step, d.key) == (1000, f"throughput:warning:{STEPS}", 1000, f"deadline:alarm:{STEPS}")
    assert t.to_json()["step"] == 1000 and t.to_json()["key"] == t.key


def test_grad_norm_shape_against_rungs():
    f = np.linspace(0.01, 1, 200)
    rungs = R.RungCurves([f, f], [np.exp(-0.5 * f), np.exp(-0.7 * f)], np.array([1e9, 2e9]))
    steps = (f * STEPS).astype(int)
    like = observed(clean_values(), extra={keys.GRAD_NORM: pd.Series(np.exp(-0.6 * f), index=steps)})
    assert R.grad_norm_shape(like, rungs, AlertRules()) == []
    rising = observed(clean_values(), extra={keys.GRAD_NORM: pd.Series(np.exp(3.0 * f), index=steps)})
    [a] = R.grad_norm_shape(rising, rungs, AlertRules())
    assert a.rule == "grad_norm"


def test_jsonl_sink_and_state_restart(tmp_path):
    y = clean_values()
    y[8:] *= 1.02
    alerts = evaluate(observed(y), prediction(), AlertRules(), now=0.0)
    state_path = tmp_path / "state.json"
    state = WatchState.load(state_path, run="hero")
    sink = JsonlSink(tmp_path / "alerts.jsonl")
    new = [a for a in alerts if a.key not in state.delivered("jsonl")]
    sink.send(new, "alarm", "x")
    state.mark("jsonl", [a.key for a in new])
    state.save(state_path)
    again = WatchState.load(state_path, run="hero")
    assert [a for a in alerts if a.key not in again.delivered("jsonl")] == []
    lines = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert sum(1 for x in lines if x["kind"] == "alert") == len(alerts)
    with pytest.raises(Exception, match="belongs to run 'hero'"):
        WatchState.load(state_path, run="other")
    # a state that judged and sent nothing (its run was not found under that name) is taken over
    WatchState(run="hero", deadline={"given": "72h", "at": 5.0}).save(tmp_path / "empty.json")
    taken = WatchState.load(tmp_path / "empty.json", run="hero-attempt-2")
    assert taken.run == "hero-attempt-2" and taken.deadline == {"given": "72h", "at": 5.0}


class _Hook(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.received.append((self.headers["Content-Type"], json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_webhook_posts_json_to_a_real_server(monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("LADDER_WEBHOOK_URL", f"http://127.0.0.1:{server.server_port}/hook")
        sink = WebhookSink.from_env()
        alert = R.Alert("deviation", "alarm", 800, "eval/loss is +1.2% off")
        assert sink.send([alert], "alarm", "step 800 (40%)")
        assert sink.send([], "ok", "quiet") is True  # nothing to post
        # a new alert on an eval judged before, on a check with no new eval, is headed by its level, not "ok"
        assert sink.send([R.Alert("deviation", "warning", 900, "eval/loss is +0.6% off")], "ok", "no new eval")
        # an earlier alert a failed post left is headed as a re-delivery, above the check's own verdict
        assert sink.send([R.Alert("deviation", "warning", 700, "eval/loss is +0.7% off")], "ok", "no new eval: OK",
                         late=True)
        # a check that judged many evals: the verdict's line heads the post, the alerts next, the other lines last
        many = "\n".join(f"step {s}: {'ALARM' if s == 1200 else 'OK'}" for s in range(1000, 1600, 100))
        assert sink.send([R.Alert("deviation", "alarm", 1200, "eval/loss is +2.5% off")], "alarm", many)
    finally:
        server.shutdown()
    [(ctype, body), (_, new), (_, late), (_, long)] = _Hook.received
    assert long["text"].startswith("[ALARM] step 1200: ALARM\n• alarm [deviation] step 1200: eval/loss is +2.5% off\n\n")
    assert long["text"].endswith("step 1100: OK\nstep 1300: OK\nstep 1400: OK\nstep 1500: OK")
    assert ctype == "application/json"
    assert body["verdict"] == "alarm" and body["alerts"][0]["key"] == "deviation:alarm:800"
    assert "+1.2% off" in body["text"] and body["redelivered"] is False
    assert new["verdict"] == "warning" and new["text"].startswith("[WARNING] no new eval")
    assert late["verdict"] == "ok" and late["redelivered"] is True
    assert late["text"] == ("[RE-DELIVERED] the earlier alert, not delivered when raised; this check: no new eval: OK\n"
                            "• warning [deviation] step 700: eval/loss is +0.7% off")


def test_webhook_credentials_in_the_url_go_in_an_authorization_header(capsys):
    seen = []

    class Auth(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, self.headers.get("Authorization")))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = _serve(Auth)
    try:
        sink = WebhookSink(f"http://hook%40team:s3cr%3At@127.0.0.1:{server.server_port}/hook?x=1", retries=1)
        assert sink.send([R.Alert("stale", "warning", 1, "x")], "warning", "s")
    finally:
        server.shutdown()
    assert seen == [("/hook?x=1", "Basic " + base64.b64encode(b"hook@team:s3cr:t").decode())]
    assert "s3cr" not in capsys.readouterr().err


def test_webhook_failure_reports_false_without_the_url(capsys):
    sink = WebhookSink("http://127.0.0.1:9/none", timeout=0.5, retries=1)
    assert sink.send([R.Alert("stale", "warning", 1, "x")], "warning", "s") is False
    assert "127.0.0.1:9" not in capsys.readouterr().err


def _serve(handler):
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_webhook_never_follows_a_redirect_and_reports_the_alert_undelivered():
    import io

    from rich.console import Console

    hits = {"redirecting": 0, "target": []}

    class Target(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - what urllib would send after a 302
            hits["target"].append("GET")
            self.send_response(200)
            self.end_headers()

        do_POST = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    target = _serve(Target)

    class Redirecting(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            hits["redirecting"] += 1
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{target.server_port}/elsewhere")
            self.end_headers()

        def log_message(self, *args):
            pass

    redirecting = _serve(Redirecting)
    out = io.StringIO()
    try:
        sink = WebhookSink(f"http://127.0.0.1:{redirecting.server_port}/hook", retries=3, backoff=0.01,
                           console=Console(file=out, width=200))
        delivered = sink.send([R.Alert("deviation", "alarm", 800, "off")], "alarm", "step 800")
    finally:
        redirecting.shutdown()
        target.shutdown()
    assert delivered is False
    assert hits == {"redirecting": 3, "target": []}  # tried three times, never sent anywhere else
    assert "webhook delivery failed after 3 tries (HTTP 302" in out.getvalue()
    assert str(redirecting.server_port) not in out.getvalue()


def test_webhook_counts_only_a_2xx_as_delivered():
    codes = iter([500, 204])

    class Flaky(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(next(codes))
            self.end_headers()

        def log_message(self, *args):
            pass

    server = _serve(Flaky)
    try:
        sink = WebhookSink(f"http://127.0.0.1:{server.server_port}/hook", retries=1, backoff=0.01)
        alert = [R.Alert("spike", "warning", 5, "x")]
        assert sink.send(alert, "warning", "s") is False  # 500
        assert sink.send(alert, "warning", "s") is True  # 204
    finally:
        server.shutdown()


# ---- grad norm and drop fraction against the rungs projected to the run's size ----------------------
RUNG_C = np.geomspace(1e18, 1e20, 4)
RUNG_STEPS = [300, 500, 800, 1300]
HERO_C = 1e21
GROWTH = 0.8
"""d ln grad-norm / d fraction of every run."""


def grad_series(compute, steps, rng, growth=GROWTH, run_sd=0.05, step_sd=0.1):
    f = np.arange(1, steps + 1) / steps
    level = 0.4 * (compute / 1e18) ** 0.1 * np.exp(growth * f + run_sd * rng.standard_normal())
    return f, level * np.exp(step_sd * rng.standard_normal(steps))


def drop_series(compute, steps, rng, run_sd=0.05, step_sd=0.3):
    f = np.arange(1, steps + 1) / steps
    level = 0.08 * (compute / 1e18) ** -0.03 * (1.2 - 0.4 * f) * np.exp(run_sd * rng.standard_normal())
    return f, np.clip(level * np.exp(step_sd * rng.standard_normal(steps)), 0, 1)


def rung_refs(series, seed=0) -> R.RungCurves:
    from ladder.predict.dynamics import project_curves

    rng = np.random.default_rng(seed)
    fr, vals = zip(*[series(c, n, rng) for c, n in zip(RUNG_C, RUNG_STEPS)])
    proj = project_curves(list(fr), list(vals), list(RUNG_C), HERO_C)
    return R.RungCurves(list(fr), list(vals), RUNG_C, proj)


def with_series(key, values) -> Observed:
    steps = np.arange(1, len(values) + 1)
    return observed(clean_values(), extra={key: pd.Series(values, index=steps)})


def first_exit(truth, proj) -> int:
    """Index of the eval from which the run's noise-free value stays above the projection's 90% band."""
    hi = proj.at(EVALS / STEPS, 0.9)[2]
    inside = np.flatnonzero(~(truth[EVALS - 1] > hi))
    return int(inside[-1]) + 1 if len(inside) else 0


def test_grad_norm_that_grows_as_projected_raises_nothing():
    refs = rung_refs(grad_series)
    assert refs.projected is not None and not refs.projected.flat[5:].any()
    rng = np.random.default_rng(11)
    on_projection = refs.projected.at(np.arange(1, STEPS + 1) / STEPS)[0] * np.exp(0.1 * rng.standard_normal(STEPS))
    assert R.grad_norm_shape(with_series(keys.GRAD_NORM, on_projection), refs, AlertRules()) == []
    # heroes drawn like the rungs (their own offset from the trend): the band is one-sided 95%
    warned = 0
    for seed in range(25):
        _, g = grad_series(HERO_C, STEPS, np.random.default_rng(100 + seed))
        warned += bool(R.grad_norm_shape(with_series(keys.GRAD_NORM, g), rung_refs(grad_series, seed), AlertRules()))
    assert warned <= 4


def test_grad_norm_growing_twice_as_fast_as_projected_warns_within_three_evals():
    refs = rung_refs(grad_series)
    f = np.arange(1, STEPS + 1) / STEPS
    truth = 0.4 * (HERO_C / 1e18) ** 0.1 * np.exp(2 * GROWTH * f)
    fast = truth * np.exp(0.1 * np.random.default_rng(5).standard_normal(STEPS))
    alerts = R.grad_norm_shape(with_series(keys.GRAD_NORM, fast), refs, AlertRules())
    exit_at = first_exit(truth, refs.projected)
    assert 0 < exit_at < len(EVALS) - 4
    assert alerts and {a.rule for a in alerts} == {"grad_norm"}
    assert alerts[0].level == "warning" and EVALS[exit_at] <= alerts[0].step <= EVALS[exit_at + 3]
    assert "projected to this run's size" in alerts[0].message and "90% band" in alerts[0].message
    # one alert per eval while it lasts, and an alarm once it is twice the band's width above the median
    assert [a.step for a in alerts] == sorted({a.step for a in alerts})
    assert alerts[-1].level == "alarm" and alerts[-1].step == EVALS[-1]
    # judged on what was logged up to each eval: the same alerts when the run is cut there
    cut = alerts[0].step
    early = R.grad_norm_shape(with_series(keys.GRAD_NORM, fast[:cut]), refs, AlertRules())
    assert [a.key for a in early] == [a.key for a in alerts if a.step <= cut]


def test_grad_norm_falls_back_to_the_rungs_range_without_a_projection():
    refs = rung_refs(grad_series)
    few = R.RungCurves(refs.fractions[:2], refs.values[:2], RUNG_C[:2], None)
    f = np.arange(1, STEPS + 1) / STEPS
    rising = with_series(keys.GRAD_NORM, np.exp(4.0 * f))
    [a] = R.grad_norm_shape(rising, few, AlertRules())
    assert a.rule == "grad_norm" and "the rungs did" in a.message


def test_drop_fraction_against_the_projection():
    refs = rung_refs(drop_series)
    assert refs.projected is not None
    _, clean = drop_series(HERO_C, STEPS, np.random.default_rng(3), run_sd=0.0)
    assert R.drop_fraction(with_series(keys.DROP_FRACTION, clean), refs, AlertRules()) == []
    f = np.arange(1, STEPS + 1) / STEPS
    high = np.where(f >= 0.4, 0.18, clean)  # below the fixed 25% warning, far above the projection
    alerts = R.drop_fraction(with_series(keys.DROP_FRACTION, high), refs, AlertRules())
    start = int(np.argmax(EVALS / STEPS >= 0.4))
    assert alerts and {(a.rule, a.level) for a in alerts} == {("drop_fraction", "warning")}
    assert EVALS[start] <= alerts[0].step <= EVALS[start + 3]
    assert "projected" in alerts[0].message


def test_a_new_prediction_moves_the_watch_of_the_one_it_replaces_aside(tmp_path):
    from ladder.predict.prediction import PREDICTION_FILES, WATCH_FILES, retire_watch

    pred = prediction()
    pred.save(tmp_path)
    earlier = (tmp_path / "prediction.json").read_text()
    for name in WATCH_FILES:
        (tmp_path / name).write_text("{}")
    assert retire_watch(tmp_path, pred) is None  # the same prediction again: its watch goes on
    assert all((tmp_path / name).exists() for name in WATCH_FILES)
    other = prediction(rel90=0.01)
    aside = retire_watch(tmp_path, other)
    assert aside is not None and aside.parent == tmp_path and aside.name.startswith("earlier-watch-")
    assert not any((tmp_path / name).exists() for name in WATCH_FILES)
    assert sorted(p.name for p in aside.iterdir()) == sorted(WATCH_FILES + PREDICTION_FILES)
    assert (aside / "prediction.json").read_text() == earlier  # the alerts keep the prediction they were judged against
    assert retire_watch(tmp_path, other) is None  # nothing left to move


def test_a_prediction_is_the_one_it_replaces_through_the_last_step_before_their_rows_differ():
    import dataclasses

    pred = prediction()
    t = pred.table
    steps = t["step"].to_numpy()
    assert pred.same_until(pred) == steps[-1]

    def edited(**cols):
        return dataclasses.replace(pred, table=t.assign(**cols))

    assert edited(hi90=t["hi90"].where(t["step"] <= steps[2], t["hi90"] + 0.01)).same_until(pred) == steps[2]
    assert edited(in_assumptions=t["step"] < steps[4]).same_until(pred) == steps[3]  # a row the new one does not judge
    assert edited(median=t["median"] * (1 + 1e-9)).same_until(pred) == 0  # the first row already differs
    assert dataclasses.replace(pred, table=t.iloc[:5]).same_until(pred) == steps[4]  # a plan cut short there
    blank = edited(lr=np.nan, lr_lo=np.nan, lr_hi=np.nan)  # no LR known: the same as no LR known
    assert blank.same_until(edited(lr=np.nan, lr_lo=np.nan, lr_hi=np.nan)) == steps[-1]
    garbled = edited(lo50=t["lo50"].astype(object).where(t["step"] != steps[1], "n/a"))  # a table loaded unchecked
    assert garbled.same_until(edited(lo50=t["lo50"].where(t["step"] != steps[1], np.nan))) == steps[0]


def test_what_a_watch_sent_stands_for_a_new_prediction_where_the_new_one_judges_as_the_old():
    import dataclasses

    from ladder.watch.monitor import _standing

    pred = prediction()
    steps = pred.table["step"].to_numpy()
    t = pred.table
    later = dataclasses.replace(pred, table=t.assign(median=t["median"].where(t["step"] <= steps[3], t["median"] * 1.01)))
    sent = [f"deviation:warning:{steps[2]}", f"deviation:alarm:{steps[5]}", f"drift:warning:{steps[3]}",
            f"non_finite:alarm:{steps[6]}", "prediction:warning:0"]
    state = WatchState(run="hero", sent={"hook": sent}, verdicts=[{"step": int(s), "verdict": "ok"} for s in steps[:7]])
    kept, verdicts = _standing(state, pred, later)
    # the old one's rows through steps[3] are the new one's; a NaN needs no prediction; a stale prediction is the old
    assert kept == {"hook": [f"deviation:warning:{steps[2]}", f"drift:warning:{steps[3]}", f"non_finite:alarm:{steps[6]}"]}
    assert [v["step"] for v in verdicts] == [int(s) for s in steps[:4]]
    assert _standing(state, None, later)[0] == {"hook": [f"non_finite:alarm:{steps[6]}"]}  # the old one not known


@pytest.mark.parametrize("url", ["http://[::1:9/x", "http://127.0.0.1:port/x", "https:///path-only"])
def test_a_webhook_url_the_client_cannot_read_is_refused_at_start_without_showing_it(url):
    with pytest.raises(LadderError) as info:
        WebhookSink(url)
    assert "$LADDER_WEBHOOK_URL" in str(info.value) and url not in str(info.value)


@pytest.mark.parametrize("url", ["https://hooks.example.com/T0/abc def", "https://hooks.example.com/T0/abc\tdef",
                                 "https://hooks.example.com/T0/abc\x7fdef"])
def test_a_webhook_url_with_a_space_inside_is_refused_at_start_and_one_at_its_ends_is_read(url):
    """The client refused such a URL at every post, which the watch took for a failed delivery, to retry at its
    next check for as long as it ran; a newline at the end (a shell's $(cat FILE)) is no part of the URL."""
    with pytest.raises(LadderError) as info:
        WebhookSink(url)
    said = str(info.value)
    assert "$LADDER_WEBHOOK_URL holds a space or control character (character 33 of 36)" in said and "abc" not in said
    assert WebhookSink(" https://hooks.example.com/T0/abc\n")._url == "https://hooks.example.com/T0/abc"


def test_a_webhook_that_answers_other_than_http_is_an_undelivered_alert_not_a_crash(capsys):
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def answer():
        for _ in range(2):
            conn, _ = server.accept()
            conn.recv(65536)
            conn.sendall(b"HELLO THIS IS NOT HTTP\r\n\r\n")
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        sink = WebhookSink(f"http://127.0.0.1:{server.getsockname()[1]}/hook", timeout=2, retries=2, backoff=0.01)
        assert sink.send([R.Alert("deviation", "warning", 368, "off")], "warning", "s") is False
    finally:
        server.close()
    err = capsys.readouterr().err
    assert "webhook delivery failed after 2 tries (BadStatusLine)" in err and "127.0.0.1" not in err


def test_a_condition_that_lasts_is_one_alert_not_one_per_check():
    """The drop fraction above its limit, and a deadline the run will miss, keep their alert's key from check to
    check (the step the condition began at; the plan it threatens), so a sink gets each once."""
    drops = np.r_[np.full(200, 0.02), np.full(100, 0.4)]  # the mean of the last 20 crosses 25% at step 213
    keys_seen = {a.key for n in (250, 270, 300)
                 for a in R.drop_fraction(with_series(keys.DROP_FRACTION, drops[:n]), None, AlertRules())}
    assert keys_seen == {"drop_fraction:warning:213"}
    [a] = R.drop_fraction(with_series(keys.DROP_FRACTION, drops), None, AlertRules())
    assert "(since step " in a.message
    slow = {keys.TOKENS_PER_SECOND: pd.Series([100.0] * 20, index=range(981, 1001))}
    ts = {R.throughput(observed(clean_values()[:k], extra=slow), now=0.0, rules=AlertRules(deadline=9_000.0))[0].key
          for k in (8, 10)}
    assert ts == {f"throughput:warning:{STEPS}"}


def test_before_any_eval_the_grad_norm_must_stay_above_for_a_whole_smoothing_window():
    """A run with no eval yet is judged at its last step: above the band at every log of the trailing window
    (2% of the plan), not at one smoothed point (which warned the demo's hero at its first logs)."""
    refs = rung_refs(grad_series)
    f = np.arange(1, STEPS + 1) / STEPS
    med, _, hi = refs.projected.at(f, 0.9)
    w = round(AlertRules().projection_window * STEPS)
    jump = 300  # past the 5% the rules skip
    grad = np.where(np.arange(1, STEPS + 1) > jump, 3 * hi, med)

    def alerts(upto: int) -> list:
        series = pd.DataFrame({keys.GRAD_NORM: pd.Series(grad[:upto], index=np.arange(1, upto + 1))})
        return R.grad_norm_shape(Observed(series, planned_steps=STEPS, tokens_per_step=1000), refs, AlertRules())

    # the smoothed series (a rolling median over w logs) is above from about w/2 logs after the jump
    assert alerts(jump + w // 2 + 5) == [] and alerts(jump + w) == []
    [a] = alerts(jump + 2 * w)
    assert a.step == jump + 2 * w and a.rule == "grad_norm"
    assert f"at every log since step {jump + w + 1:,}" in a.message and "every eval" not in a.message


def test_a_step_is_read_as_a_fraction_of_the_plan_in_force_at_it():
    """A run planned for 5,540 steps and cut to 4,432 at step 2,770: before the cut its steps are fractions of
    5,540 (as the verdicts say: step 245 is 4%, not 6%), after it of 4,432."""
    series = pd.DataFrame({keys.GRAD_NORM: pd.Series([1.0], index=[245])})
    obs = Observed(series, planned_steps=4432, tokens_per_step=1, horizons=((2770, 4432),), started_with=5540)
    np.testing.assert_allclose(obs.fractions([245, 2770, 2771, 4432]), [245 / 5540, 0.5, 2771 / 4432, 1.0])
    plain = Observed(series, planned_steps=4432, tokens_per_step=1)
    np.testing.assert_allclose(plain.fractions([245, 4432]), [245 / 4432, 1.0])


def test_a_crash_says_its_step_as_a_share_of_both_plans_where_the_plan_was_edited():
    from ladder.watch.monitor import stopped

    series = pd.DataFrame({keys.EVAL_LOSS: pd.Series([2.0], index=[2820])})
    cut = Observed(series, planned_steps=4432, tokens_per_step=1, horizons=((2770, 4432),), started_with=5540)
    [alarm] = stopped(pd.Series({"state": "crashed"}), cut)
    assert "the run stopped at step 2,820 (51% of its plan, 64% of the edited plan)" in alarm.message
    [alarm] = stopped(pd.Series({"state": "crashed"}), Observed(series, planned_steps=5540, tokens_per_step=1))
    assert "the run stopped at step 2,820 (51% of its plan)" in alarm.message


def test_drops_of_an_untrained_router_in_warmup_are_not_a_warning():
    """40% dropped over the first 3% of the run (a router not yet trained, as the demo's rungs show) is left out;
    the same 40% past the first 5% (`projection_skip`) warns."""
    early = np.r_[np.full(60, 0.4), np.full(140, 0.02)]
    assert R.drop_fraction(with_series(keys.DROP_FRACTION, early[:60]), None, AlertRules()) == []
    assert R.drop_fraction(with_series(keys.DROP_FRACTION, early), None, AlertRules()) == []
    late = np.r_[np.full(100, 0.02), np.full(60, 0.4)]  # 5% of 2,000 steps is step 100
    [a] = R.drop_fraction(with_series(keys.DROP_FRACTION, late), None, AlertRules())
    assert a.level == "warning" and a.step > 100


def test_evals_in_the_first_five_percent_neither_make_the_drift_baseline_nor_alarm():
    """A hero's evals at 0.5–1.5% of its run, in warmup, 3% below its prediction, then 1–2% below it to the end (doing
    better than predicted): the drift rule measured from the early evals' level and alarmed on a rise back toward
    the prediction. In the first 5% a deviation past the 90% band warns; from there it alarms as before."""
    steps = np.r_[10, 20, 30, EVALS]
    f = steps / STEPS
    med = 2.0 + 1.2 * f**-0.25
    table = pd.DataFrame({"step": steps, "tokens": steps * 1000, "fraction": f, "compute": steps * 1e9, "median": med,
                          "lo50": med * 0.99, "hi50": med * 1.01, "lo90": med * 0.975, "hi90": med * 1.025,
                          "in_assumptions": True})
    pred = Prediction(run_name="hero", metric=keys.EVAL_LOSS, table=table, planned_steps=STEPS)

    def obs(values):
        return Observed(pd.DataFrame({keys.EVAL_LOSS: pd.Series(values, index=steps)}), planned_steps=STEPS,
                        tokens_per_step=1000)

    better = med * np.where(f < 0.02, 0.972, 0.985 + 0.005 * np.sin(np.arange(len(f))))
    assert R.drift(obs(better), pred, AlertRules()) == []
    assert {a.level for a in R.deviation(obs(better), pred, AlertRules())} == {"warning"}  # below: never an alarm
    high = med.copy()
    high[1] *= 1.07  # at 1%, in warmup
    (early,) = R.deviation(obs(high), pred, AlertRules())
    assert early.level == "warning" and early.step == 20
    assert "in the first 5% of the run, where the prediction is weakest, a deviation alarms only past 3× the 90% " \
           "band's distance" in early.message
    high[1] = med[1] * 1.5  # a loss half as high again as predicted, in warmup or not, is the run's: an alarm
    assert [a.level for a in R.deviation(obs(high), pred, AlertRules())] == ["alarm"]
    high = med.copy()
    high[7] *= 1.07  # at 20%
    (late,) = R.deviation(obs(high), pred, AlertRules())
    assert late.level == "alarm" and "first 5%" not in late.message
    # a plan extended later (to 10× its steps) does not put a step long past warmup back in it
    extended = Observed(pd.DataFrame({keys.EVAL_LOSS: pd.Series(high, index=steps)}), planned_steps=10 * STEPS,
                        tokens_per_step=1000, started_with=STEPS, horizons=((150, 10 * STEPS),))
    assert [a.level for a in R.deviation(extended, pred, AlertRules())] == ["alarm"]


# ---- the LR against the one the prediction assumed ----------------------------------------------


def cosine(steps, peak=1e-3, warmup=50):
    s = np.asarray(steps, dtype=float)
    return peak * np.where(s < warmup, s / warmup, 0.5 * (1 + np.cos(np.pi * (s - warmup) / (STEPS - warmup))))


def with_lr(lr_steps, lrs, pred_lr=cosine) -> tuple[Observed, Prediction]:
    """The run logging `lrs` at `lr_steps`, and a prediction that assumed `pred_lr` (at its rows, and its least and
    largest over the steps since the row before, as `ladder predict` writes them)."""
    obs = observed(clean_values(), extra={keys.LEARNING_RATE: pd.Series(lrs, index=lr_steps)})
    t = prediction().table
    every = pred_lr(np.arange(STEPS + 1))
    since = [every[a:b + 1] for a, b in zip(np.r_[0, t["step"].to_numpy()[:-1] + 1], t["step"])]
    table = t.assign(lr=every[t["step"]], lr_lo=[x.min() for x in since], lr_hi=[x.max() for x in since])
    return obs, Prediction(run_name="hero", metric=keys.EVAL_LOSS, planned_steps=STEPS, table=table)


def test_a_logged_lr_that_keeps_to_the_predicted_one_raises_nothing():
    steps = np.arange(10, STEPS + 1, 10)
    assert evaluate(*with_lr(steps, cosine(steps)), AlertRules(), now=0.0) == []
    # a WSD decay whose corner lies between two of the prediction's rows (every 5%) is no departure either
    def wsd(s):
        s = np.asarray(s, dtype=float)
        return 1e-3 * np.clip((STEPS - s) / (0.13 * STEPS), 0.0, 1.0)

    assert R.lr_departed(*with_lr(steps, wsd(steps), pred_lr=wsd), AlertRules()) == []
    # an LR that rises again between two of the prediction's rows (a rewarm at a resume, a cyclic schedule) that the
    # prediction assumed too
    def rewarm(s):
        s = np.asarray(s, dtype=float)
        return np.where((s > 1020) & (s < 1140), 1e-3 * (s - 1020) / 120, cosine(s))

    assert R.lr_departed(*with_lr(steps, rewarm(steps), pred_lr=rewarm), AlertRules()) == []
    assert len(R.lr_departed(*with_lr(steps, rewarm(steps)), AlertRules())) == 1  # not assumed: a departure
    # a prediction of an earlier version keeps no LR: nothing to compare
    obs, pred = with_lr(steps, 0.5 * cosine(steps))
    assert R.lr_departed(obs, Prediction(run_name="hero", metric=keys.EVAL_LOSS, planned_steps=STEPS,
                                         table=pred.table.drop(columns=["lr", "lr_lo", "lr_hi"])), AlertRules()) == []
    assert len(R.lr_departed(obs, pred, AlertRules(persist_evals=0))) == 1  # counted as one


def test_a_logged_lr_cut_short_of_the_predicted_one_warns_once_where_it_departs():
    """A cosine run whose LR was cut at 60% (decayed linearly to zero by 70%): the prediction of the cosine holds no
    longer, and the watch says so where the LR leaves it, once (its key is the onset's, at every check)."""
    steps = np.arange(10, STEPS + 1, 10)
    cut = np.where(steps <= 1200, cosine(steps), cosine(1200) * np.clip((1400 - steps) / 200, 0, 1))
    rules = AlertRules()
    alerts = R.lr_departed(*with_lr(steps, cut), rules)
    assert len(alerts) == 1 and alerts[0].rule == "lr" and alerts[0].level == "warning"
    onset = alerts[0].step  # 5% of the peak under the cosine's LR at 1,300 (the prediction's row after 1,200)
    assert cut[steps == onset] < cosine(1300) - rules.lr_tol * 1e-3 <= cut[steps == onset - 10] and 1200 < onset < 1300
    assert f"at step {onset:,}" in alerts[0].message and "declare its new schedule" in alerts[0].message
    assert R.lr_departed(*with_lr(steps[steps <= 1500], cut[steps <= 1500]), rules)[0].key == alerts[0].key
    # two values off in a row are not yet three, and an LR twice the peak in warmup is warmup's
    assert R.lr_departed(*with_lr(steps[steps <= onset + 10], cut[steps <= onset + 10]), rules) == []
    early = np.where(steps < 90, 2 * cosine(steps), cosine(steps))
    assert R.lr_departed(*with_lr(steps, early), rules) == []
    assert evaluate(*with_lr(steps, cut), rules, now=0.0) == alerts


def test_the_terminal_shows_a_few_alerts_of_each_rule_and_level_a_check_raises_and_counts_the_rest(tmp_path):
    import io

    from rich.console import Console

    from ladder.watch import TerminalSink
    from ladder.watch.sinks import SHOWN_ALERTS

    many = [R.Alert("deviation", "warning", 100 * i, f"off at {i}") for i in range(1, SHOWN_ALERTS + 4)]
    one = [R.Alert("deviation", "alarm", 5000, "far off")]
    shown = io.StringIO()
    TerminalSink(Console(file=shown, width=200)).send(many + one, "alarm", "")
    lines = shown.getvalue().splitlines()
    assert [ln.split(": ", 1)[1] for ln in lines if "] step " in ln] == [a.message for a in many[-SHOWN_ALERTS:] + one]
    assert "[deviation] 3 earlier at steps 100 and on, each above as its eval's verdict; the alerts file holds every " \
           "one" in lines[0]  # the latest shown: where the run is now
    late = io.StringIO()
    TerminalSink(Console(file=late, width=200)).send(many, "alarm", "", late=True)  # no verdicts above: not said
    assert "3 earlier at steps 100 and on; the alerts file" in late.getvalue()
    logged = tmp_path / "alerts.jsonl"
    JsonlSink(logged).send(many + one, "alarm", "")
    assert len([ln for ln in logged.read_text().splitlines() if '"kind": "alert"' in ln]) == len(many) + 1

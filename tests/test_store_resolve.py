"""What real runs contain, settled before it is stored: repeats, rewinds, renames, tokens, fractions,
and the coordinates that place a run on the ladder."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from ladder.data.resolve import MetricSettings, ResolveReport, resolve
from ladder.data.sources.coords import CoordinateOverrides, Coordinates, resolve_coordinates
from ladder.data.sources.table import raw_frame
from ladder.errors import LadderError

C = Coordinates(stop_after_steps=200, tokens_per_step=8, planned_tokens=1600)
S = MetricSettings()


def log(*rows):
    """Rows in log order: (step, metric, value[, tokens])."""
    return raw_frame([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                     [r[3] if len(r) > 3 else math.nan for r in rows])


def pairs(h):
    return {(str(m), int(s)): float(v) for m, s, v in zip(h["metric"], h["step"], h["value"])}


def test_rewind_drops_the_abandoned_branch_even_where_it_is_not_logged_again():
    rows = log(
        (100, "train/loss", 1.0), (100, "eval/loss", 2.0),
        (110, "train/loss", 1.1), (150, "train/loss", 1.5), (150, "eval/loss", 2.5),
        (101, "train/loss", 9.1),  # restarted from the checkpoint at 100; died before 150
    )
    h, report = resolve(rows, C, S)
    assert pairs(h) == {("train/loss", 100): 1.0, ("eval/loss", 100): 2.0, ("train/loss", 101): 9.1}
    assert report.rewinds == ((150, 101),) and report.dropped_by_rewind == 3 and report.relogged == 0


def test_repeats_keep_the_last_value_and_count_only_changes():
    rows = log((1, "m", 1.0), (2, "m", 2.0), (2, "m", 2.0), (2, "m", 2.5), (3, "m", float("nan")), (3, "m", float("nan")))
    h, report = resolve(rows, C, S)
    assert pairs(h)[("m", 2)] == 2.5 and len(h) == 3
    assert report.relogged == 2  # 2.0 twice before 2.5; the repeated NaN is no change
    assert report.messages()[0] == ("2 values logged again at steps already logged with another value (a resumed "
                                    "run); the later value kept (the first: m at step 2, 2 then 2.5)")
    assert ResolveReport.from_json(json.loads(json.dumps(report.to_json()))).messages() == report.messages()


def test_eval_logged_separately_at_the_same_step_is_not_a_rewind():
    rows = log((10, "train/loss", 1.0, 80), (10, "eval/loss", 2.0), (11, "train/loss", 0.9, 88))
    h, report = resolve(rows, C, S)
    assert report.rewinds == () and len(h) == 3
    assert dict(zip(h["step"], h["tokens"])) == {10: 80, 11: 88}


def test_logged_tokens_win_and_fill_their_step():
    rows = log((10, "train/loss", 1.0, 123), (10, "eval/loss", 2.0), (20, "train/loss", 0.5))
    h, _ = resolve(rows, C, S)
    tokens = {(str(m), int(s)): int(t) for m, s, t in zip(h["metric"], h["step"], h["tokens"])}
    assert tokens == {("train/loss", 10): 123, ("eval/loss", 10): 123, ("train/loss", 20): 160}


def test_rename_wins_over_the_native_key_and_is_counted():
    settings = MetricSettings(renames={"eval/paloma/macro_loss": "eval/loss"})
    rows = log((10, "eval/loss", 9.0), (10, "eval/paloma/macro_loss", 3.0), (20, "eval/paloma/macro_loss", 2.9))
    h, report = resolve(rows, C, settings)
    assert pairs(h) == {("eval/loss", 10): 3.0, ("eval/loss", 20): 2.9}
    assert report.renamed == (("eval/paloma/macro_loss", "eval/loss", 2),) and report.rename_conflicts == 1
    assert report.relogged == 0


def test_renames_must_not_chain():
    with pytest.raises(LadderError, match="renames do not chain"):
        MetricSettings(renames={"a": "b", "b": "c"})


def test_new_rows_resolve_against_the_stored_history():
    stored, _ = resolve(log(*[(s, "m", float(s)) for s in range(1, 11)]), C, S)
    h, report = resolve(log((8, "m", 80.0), (9, "m", 90.0)), C, S, stored=stored)  # restarted at 7, died at 9
    assert pairs(h) == {**{("m", s): float(s) for s in range(1, 8)}, ("m", 8): 80.0, ("m", 9): 90.0}
    assert report.relogged == 1 and report.dropped_by_rewind == 2 and report.rewinds == ((10, 8),)  # 9, 10 past 8
    merged = report.plus(ResolveReport(relogged=5, rewinds=((3, 1),)))
    assert merged.relogged == 6 and merged.rewinds == ((3, 1), (10, 8))


def test_fraction_is_of_the_started_plan_and_the_edited_one_is_beside_it():
    cut = Coordinates(stop_after_steps=80, tokens_per_step=1, planned_tokens=80, horizons=((50, 80),), initial_steps=100)
    steps = np.array([10, 50, 51, 80])
    np.testing.assert_array_equal(cut.fraction(steps), [0.1, 0.5, 0.51, 0.8])
    np.testing.assert_array_equal(cut.fraction_edited(steps), [0.1, 0.5, 51 / 80, 1.0])
    h, report = resolve(log((80, "m", 1.0), (90, "m", 1.0)), cut, S)
    assert list(h["fraction"]) == [0.8, 0.9]  # past the edited plan, not past the started one
    assert report.past_plan == 1 and "past the planned steps" in " ".join(report.messages())


def test_steps_past_the_plan_name_a_logged_step_that_stays_within_it():
    """wandb's own _step counts every log call: a run that logs evals apart runs past its plan on it, while the
    optimizer step it logs as a metric ends at the plan."""
    plan = Coordinates(stop_after_steps=100, tokens_per_step=1, planned_tokens=100)
    rows = [(2 * s + k, key, float(v)) for s in range(1, 101, 11)
            for k, (key, v) in enumerate((("trainer/global_step", s), ("eval/loss", 3.0)))]
    _, report = resolve(log(*rows), plan, S)
    assert report.past_plan > 0 and report.step_like == "trainer/global_step"
    said = " ".join(report.messages())
    assert ("past the planned steps: check stop_after_steps, or whether the optimizer step is the logged "
            "'trainer/global_step', whose values stay within the plan (read the step from it: --step-key") in said
    _, plain = resolve(log((150, "eval/loss", 3.0), (120, "lr_step", 7.0), (150, "lr_step", 900.0)), plan, S)
    assert plain.past_plan == 2 and plain.step_like == ""  # a key named so, past the plan itself: no such hint
    assert " ".join(plain.messages()).count("check stop_after_steps") == 1 and "--step-key" not in " ".join(plain.messages())


def test_missing_fit_metric_is_reported_once_the_first_eval_is_due():
    from ladder.data.resolve import first_eval_share

    planned = C.planned_steps_at(np.array([1]))[0]
    _, report = resolve(log((int(0.1 * planned) + 1, "train/loss", 1.0)), C, S)
    assert report.missing_fit_metric == "eval/loss"
    assert "--rename KEY=eval/loss (an import names its column with --metric eval/loss=COLUMN)" in report.messages()[-1]
    # up to 10% of the plan (the first eval may not be due, or not logged yet at its step): nothing said
    _, report = resolve(log((int(0.1 * planned), "train/loss", 1.0)), C, S)
    assert report.missing_fit_metric == "" and not any("--rename" in m for m in report.messages())
    # a run whose config evaluates every 12.5% is not told before its first eval is due
    share = first_eval_share({"eval": {"every_fraction": 0.125}})
    assert share == 0.125 and first_eval_share({"eval": "every 10%"}) == first_eval_share({}) == 0.0
    _, report = resolve(log((int(0.12 * planned), "train/loss", 1.0)), C, S, evals_by=share)
    assert report.missing_fit_metric == ""
    _, report = resolve(log((int(0.13 * planned), "train/loss", 1.0)), C, S, evals_by=share)
    assert report.missing_fit_metric == "eval/loss"
    # a run that evaluates at its end alone is told once it has ended without the metric, not before
    _, report = resolve(log((int(planned) - 1, "train/loss", 1.0)), C, S, evals_by=1.0)
    assert report.missing_fit_metric == ""
    _, report = resolve(log((int(planned), "train/loss", 1.0)), C, S, evals_by=1.0)
    assert report.missing_fit_metric == "eval/loss"


# ---- coordinates ------------------------------------------------------------------------------------
FULL = {"stop_after_steps": 100, "tokens_per_step": 4, "active_params": 10, "total_params": 40, "fit_flops_per_token": 60.0}


def test_coordinates_from_wandb_config_and_derived_tokens():
    config = {k: {"value": v} for k, v in FULL.items() if k != "tokens_per_step"} | {"planned_tokens": 400}
    coords, _ = resolve_coordinates("r", "r", "r", config, {}, CoordinateOverrides())
    assert coords.tokens_per_step == 4 and coords.planned_tokens == 400 and coords.fit_flops_per_token == 60.0


def test_overrides_beat_config_which_beats_what_was_stored(tmp_path):
    file = tmp_path / "coords.yaml"
    file.write_text("rung-1: {active_params: 11}\nr2: {active_params: 12}\n")
    overrides = CoordinateOverrides.parse(["total_params=99", "role=rung"], file)
    c1, labels = resolve_coordinates("rung-1", "r1", "rung-1", FULL, {"total_params": 1}, overrides)
    c2, _ = resolve_coordinates("rung-2", "r2", "rung-2", {**FULL, "total_params": None}, {}, overrides)
    c3, _ = resolve_coordinates("x", "x", "x", {k: v for k, v in FULL.items() if k != "total_params"}, {"total_params": 70}, CoordinateOverrides())
    assert (c1.active_params, c1.total_params, labels["role"]) == (11, 99, "rung")
    assert (c2.active_params, c3.total_params) == (12, 70)


@pytest.mark.parametrize(
    ("config", "given", "message"),
    [
        ({k: v for k, v in FULL.items() if k != "active_params"}, [],
         r"run rung-1 \(r1\): its config lacks 'active_params'; supply it with --coord active_params=VALUE .*\{rung-1: \{active_params: VALUE\}\}"),
        ({k: v for k, v in FULL.items() if k not in ("active_params", "stop_after_steps", "tokens_per_step", "planned_tokens")}, [],
         r"lacks 'active_params' and two of 'stop_after_steps', 'tokens_per_step', 'planned_tokens' \(the third follows\); "
         r"supply them with --coord active_params=VALUE .*\{rung-1: \{active_params: VALUE, stop_after_steps: VALUE, "
         r"tokens_per_step: VALUE\}\}\)$"),
        (FULL, ["stop_after_steps=unknown"], "'stop_after_steps' cannot be unknown"),
        (FULL, ["active_params=lots"], "'active_params' = 'lots' is not a number"),
        (FULL, ["active_params=1,000,000"], r"is not a number in range \(write it without thousands separators\)"),
        (FULL, ["tokens_per_step=2.5"], "must be a whole number"),
        (FULL, ["active_params=190.354176"], r"must be a whole number \(a count: 1.9e8, not 190.35 in millions\)$"),
        (FULL, ["stop_after_steps=72.5"], r"'stop_after_steps' = '72.5' must be a whole number$"),  # steps: no units
        (FULL, ["role=boss"], "role 'boss' is not one of rung, hero, single"),
    ],
)
def test_coordinate_errors_name_the_run_and_the_field(config, given, message):
    with pytest.raises(LadderError, match=message):
        resolve_coordinates("rung-1 (r1)", "r1", "rung-1", config, {}, CoordinateOverrides.parse(given))


def test_unknown_parameters_are_stored_missing():
    coords, _ = resolve_coordinates("r", "r", "r", FULL, {}, CoordinateOverrides.parse(["fit_flops_per_token=unknown"]))
    assert coords.fit_flops_per_token is None and coords.active_params == 10


def test_a_role_that_is_none_is_refused_where_it_is_given_even_where_a_file_gives_another(tmp_path):
    file = tmp_path / "coords.yaml"
    file.write_text("r1: {role: rung}\n")
    with pytest.raises(LadderError, match=r"^--coord role=boss: role 'boss' is not one of rung, hero, single"):
        CoordinateOverrides.parse(["role=boss"], file)  # the file's role would have hidden it
    file.write_text("r1: {role: rungs}\n")
    with pytest.raises(LadderError, match=rf"^{re.escape(str(file))}: r1: role 'rungs' is not one of rung, hero"):
        CoordinateOverrides.parse([], file)

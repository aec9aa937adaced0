"""`ladder compare GROUP_A GROUP_B` on two synthetic ladders in a temporary store: the table, the JSON
numbers against the known multiplier, the files it writes, and one-line errors (exit 2) for bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from ladder.cli import app
from ladder.config.plan import override, plan
from ladder.config.recipe import load_recipe
from ladder.data.sources.pull import pull
from ladder.data.sources.table import RunRef, SourceRun, raw_frame
from ladder.data.store import Store

runner = CliRunner()
E, A, ALPHA, M = 1.9, 60.0, 0.12, 2.0
TOKENS_PER_STEP = 1000
FLOPS_PER_TOKEN = [1.8e5, 3.6e5, 7.2e5, 1.44e6, 2.88e6]  # 6·N with N whole
STEPS = [100, 200, 400, 800, 1600]


def law(compute: float, m: float = 1.0) -> float:
    """Final loss at fit compute; m > 1: the recipe needs m× the compute for the same loss."""
    return E + A * (compute / m) ** -ALPHA


class LadderSource:
    """Runs in memory: {run_id: (name, group, fit FLOPs per token, steps, final loss, state)}."""

    key = "memory:compare"

    def __init__(self, runs):
        self.data = runs

    def runs(self):
        return [RunRef(rid, self.key, label=rid, name=name, config=_coords(group, fpt, steps))
                for rid, (name, group, fpt, steps, _, _) in self.data.items()]

    def read(self, ref, cursor=None):
        _, group, _, steps, final, state = self.data[ref.run_id]
        at = [steps // 4, steps // 2, LAST_EVAL.get(group, lambda s: s)(steps)]
        values = [final + 0.4, final + 0.1, final]
        if state != "finished":
            at, values = at[:2], values[:2]
        frame = raw_frame(at, ["eval/loss"] * len(at), values)
        return SourceRun(ref.run_id, self.key, frame, {"n": len(at)}, state, config=ref.config,
                         name=ref.config and self.data[ref.run_id][0], replace=cursor is None)


NO_ROLE = "no-role"
N_ONLY, N_ONLY_REF = "n-only", "n-only-ref"
"""Groups whose coordinates give N (exactly fit FLOPs per token ÷ 6) but no fit FLOPs."""
FROM_ZERO, ENDS_EARLY = "from-zero", "ends-early"
LAST_EVAL = {FROM_ZERO: lambda steps: steps - 1, ENDS_EARLY: lambda steps: 3 * steps // 4}
"""Groups whose finished rungs log their last eval at the plan's last step − 1 (trainers that count steps from 0:
complete), or at three quarters of it (not complete); every other group's is at the plan's last step."""


def _coords(group: str, fpt: float, steps: int) -> dict:
    out = {"group": group, "role": "rung", "fit_flops_per_token": fpt, "stop_after_steps": steps,
           "tokens_per_step": TOKENS_PER_STEP, "active_params": int(fpt / 6), "total_params": int(fpt / 2)}
    if group in (N_ONLY, N_ONLY_REF):
        del out["fit_flops_per_token"]
    if group == NO_ROLE:  # imported without a role for its runs
        del out["role"]
    return out


def rungs(group: str, m: float, sizes=range(5), crashed=()):
    out = {}
    for i in sizes:
        c = FLOPS_PER_TOKEN[i] * TOKENS_PER_STEP * STEPS[i]
        state = "crashed" if i in crashed else "finished"
        out[f"{group}/r{i}"] = (f"r{i}", group, FLOPS_PER_TOKEN[i], STEPS[i], law(c, m), state)
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare") / "store"
    runs = {**rungs("zloss-on", 1.0), **rungs("zloss-off", M), **rungs("four", 1.0, range(4)),
            **rungs("broken", 1.0, range(4), crashed=(1, 2)), **rungs("same", 1.0),
            **rungs("partial", M), "partial/r9": ("r9", "partial", FLOPS_PER_TOKEN[4], STEPS[4], 3.0, "running"),
            **rungs(N_ONLY, M), **rungs(N_ONLY_REF, 1.0), **rungs(FROM_ZERO, M), **rungs(ENDS_EARLY, M),
            **rungs("one-crashed", M, crashed=(2,)), **rungs(NO_ROLE, M),
            **rungs("nan-last", M), "nan-last/r9": ("r9", "nan-last", FLOPS_PER_TOKEN[4], STEPS[4], math.nan, "finished"),
            **rungs("zero-final", M), "zero-final/r9": ("r9", "zero-final", FLOPS_PER_TOKEN[4], STEPS[4], 0.0,
                                                        "finished")}
    pull(Store(root), LadderSource(runs))
    return root


def run(*args):
    return runner.invoke(app, ["compare", *[str(a) for a in args]])


def one_error_line(res, *fragments: str) -> None:
    assert res.exit_code == 2, res.output
    text = res.output.strip()
    assert text.startswith("error:") and "Traceback" not in text and len(text.splitlines()) == 1, text
    for f in fragments:
        assert f in text, text


def test_json_numbers_recover_the_known_multiplier(store, tmp_path):
    res = run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--format", "json",
              "--hero-compute", "1e16", "--bootstrap", "200")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data == json.loads((tmp_path / "compare.json").read_text())
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["groups"]["a"]["group"] == "zloss-on" and data["groups"]["b"]["group"] == "zloss-off"
    assert data["units"]["compute"].startswith("fit FLOPs")
    assert [r["rung_a"] for r in data["multiplier"]["rungs"]] == [f"r{i}" for i in range(5)]
    computes = [f * TOKENS_PER_STEP * s for f, s in zip(FLOPS_PER_TOKEN, STEPS)]
    assert [r["compute"] for r in data["multiplier"]["rungs"]] == pytest.approx(computes)
    assert [r["loss"] for r in data["groups"]["b"]["rungs"]] == pytest.approx([law(c, M) for c in computes])
    for row in [*data["multiplier"]["rungs"], data["multiplier"]["target"]]:
        assert row["multiplier"] == pytest.approx(M, rel=1e-3)
        assert row["lo90"] <= row["lo50"] <= row["median"] <= row["hi50"] <= row["hi90"]
    target = data["multiplier"]["target"]
    assert target["compute"] == 1e16 and target["source"] == "--hero-compute"
    loss = data["loss_at_target"]
    assert loss["a"] == pytest.approx(law(1e16), abs=1e-4) and loss["b"] == pytest.approx(law(1e16, M), abs=1e-4)
    assert loss["difference"] == pytest.approx(law(1e16, M) - law(1e16), abs=1e-4)
    assert data["E"]["mode"] == "shared" and data["E"]["value"] == pytest.approx(E, abs=1e-3)
    assert data["bootstrap"]["n"] == 200 and "paired" in data["pairing"] + data["bootstrap"]["method"]


def test_rungs_that_give_only_n_count_6nd_and_say_so(store, tmp_path):
    """Rungs whose coordinates give N and no fit FLOPs are on the 6·N·D axis, as in every other command; here
    6·N is exactly the other group's FLOPs per token, so the multiplier is the known one."""
    res = run("zloss-on", N_ONLY, "--store", store, "--out", tmp_path, "--format", "json", "--bootstrap", "0")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    computes = [f * TOKENS_PER_STEP * s for f, s in zip(FLOPS_PER_TOKEN, STEPS)]
    assert [r["compute"] for r in data["groups"]["b"]["rungs"]] == pytest.approx(computes)
    assert data["multiplier"]["target"]["multiplier"] == pytest.approx(M, rel=1e-3)
    [note] = [w for w in data["warnings"] if "6·N·D" in w]
    assert all(f"r{i}" in note for i in range(5)) and "both ladders are compared on 6·N·D" in note


class AttentionSource(LadderSource):
    """The same rungs, the group "attn" counting fit FLOPs 1.8× its 6·N (attention), its losses on the law at 6·N·D."""

    def runs(self):
        refs = super().runs()
        for ref in refs:
            if ref.config["group"] == "attn":
                ref.config["fit_flops_per_token"] *= 1.8
        return refs


def test_a_ladder_that_counts_fit_flops_beside_one_that_gives_only_n_is_put_on_6nd_too(tmp_path):
    """Before: the two ladders' computes were on two axes (fit FLOPs for one, 6·N·D for the other), and the multiplier
    came out off the known one by the 1.8× apart the axes are."""
    root = tmp_path / "store"
    pull(Store(root), AttentionSource({**rungs("attn", 1.0), **rungs(N_ONLY, M)}))
    res = run("attn", N_ONLY, "--store", root, "--out", tmp_path, "--format", "json", "--bootstrap", "0",
              "--hero-compute", "1e16")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    computes = [f * TOKENS_PER_STEP * s for f, s in zip(FLOPS_PER_TOKEN, STEPS)]  # 6·N·D of both
    assert [r["compute"] for r in data["groups"]["a"]["rungs"]] == pytest.approx(computes)
    assert data["multiplier"]["target"]["multiplier"] == pytest.approx(M, rel=1e-3)
    assert sum("both ladders are compared on 6·N·D" in w for w in data["warnings"]) == 1
    assert data["units"]["compute"].startswith("6·N·D (6 × active parameters × tokens) for every rung and the target")
    assert not any("only N is known" in w for w in data["warnings"])  # said once, the one way


def test_a_trainers_own_config_as_the_hero_is_told_to_be_a_target_file(store, tmp_path):
    own = tmp_path / "hero.json"
    own.write_text(json.dumps({"model": {"n_params": 3e9}, "optim": {"peak_lr": 3e-4}, "steps": 20000}))
    one_error_line(run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--hero", own),
                   "neither a target file (it gives no active_params or fit_flops_per_token) nor a planned run config",
                   "its keys: model, optim, steps", "name, active_params, stop_after_steps, tokens_per_step")


def test_a_recipe_or_a_prediction_given_as_the_hero_keeps_its_own_words(store, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("name: mine\narch: {d_model: 64}\n")
    one_error_line(run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--hero", recipe),
                   "a recipe (it has arch), not a run config")
    made = tmp_path / "prediction.json"
    made.write_text(json.dumps({"run_name": "h", "table": [], "final": {}}))
    one_error_line(run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--hero", made),
                   "a prediction (`ladder predict` writes it), not a run config")


def test_a_rung_whose_counts_cannot_be_counts_is_refused_by_name(tmp_path):
    root = tmp_path / "store"
    odd = rungs("odd", M)
    odd["odd/r0"] = ("r0", "odd", 6.0, 400, *odd["odd/r0"][4:])  # N of 1 (in millions?): 4e5 tokens per parameter
    pull(Store(root), LadderSource({**rungs("ref", 1.0), **odd}))
    one_error_line(run("ref", "odd", "--store", root, "--out", tmp_path), "rung 'r0' of 'odd': it plans",
                   "tokens per active parameter", "in other units")


def test_table_says_the_default_target_and_the_E_choice(store, tmp_path):
    res = run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path / "figs", "--bootstrap", "100")
    assert res.exit_code == 0, res.output
    for text in ("zloss-off", "zloss-on", "E shared", "target", "10× the largest rung", "B − A", "compare.png"):
        assert text in res.output, res.output
    said = " ".join(res.output.replace("│", " ").split())  # whose compute the one C column is
    assert "C of A (FLOPs)" in said and "each rung's final loss at its own compute" in said
    data = json.loads((tmp_path / "figs" / "compare.json").read_text())
    assert data["multiplier"]["target"]["compute"] == pytest.approx(10 * FLOPS_PER_TOKEN[-1] * TOKENS_PER_STEP * STEPS[-1])


def test_two_groups_with_the_same_losses_have_multiplier_one(store, tmp_path):
    res = run("zloss-on", "same", "--store", store, "--out", tmp_path, "--format", "json", "--bootstrap", "50")
    assert res.exit_code == 0, res.output
    target = json.loads(res.stdout)["multiplier"]["target"]
    assert target["multiplier"] == pytest.approx(1.0) and target["lo90"] <= 1.0 <= target["hi90"]


def test_without_resamples_there_are_no_bands(store, tmp_path):
    res = run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--bootstrap", "0")
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "compare.json").read_text())
    assert data["bootstrap"]["n"] == 0
    for row in [*data["multiplier"]["rungs"], data["multiplier"]["target"], data["loss_at_target"]]:
        assert [row[k] for k in ("lo50", "hi50", "lo90", "hi90")] == [None] * 4
    assert data["multiplier"]["target"]["multiplier"] == pytest.approx(M, rel=1e-3)
    target_row = next(x for x in res.output.splitlines() if x.strip("│ ").startswith("target"))
    assert target_row.count("–") == 2 and ".." not in target_row and "never" not in target_row, target_row
    assert "90% band" not in next(x for x in res.output.splitlines() if x.startswith("Loss at the target"))


@pytest.mark.parametrize("E, mode", [("separate", "separate"), ("1.5", "pinned")])
def test_E_separate_or_pinned_is_in_the_output(store, tmp_path, E, mode):
    res = run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--format", "json", "--E", E,
              "--bootstrap", "50")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["E"]["mode"] == mode
    assert data["multiplier"]["rungs"][2]["multiplier"] == pytest.approx(M, rel=0.05)


def test_the_table_names_the_rungs_left_out(store, tmp_path):
    res = run("zloss-on", "partial", "--store", store, "--out", tmp_path, "--bootstrap", "20")
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.output.splitlines() if x.startswith("Left out")]
    assert line == "Left out: B (partial) r9: state running"
    data = json.loads((tmp_path / "compare.json").read_text())
    assert data["groups"]["b"]["left_out"] == ["r9: state running"] and data["groups"]["a"]["left_out"] == []
    assert "Left out" not in run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--bootstrap", "20").output


def test_hero_config_gives_the_target(store, tmp_path):
    hero = plan(override(load_recipe("micro-cpu"))).hero
    path = hero.save(tmp_path / "hero.yaml")
    res = run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--format", "json", "--hero", path,
              "--bootstrap", "20")
    assert res.exit_code == 0, res.output
    target = json.loads(res.stdout)["multiplier"]["target"]
    assert target["compute"] == pytest.approx(hero.fit_flops_per_token * hero.tokens_per_step * hero.schedule.total_steps)
    assert "hero config" in target["source"]
    assert f"the hero config {path} is of group 'micro-cpu', the ladders compared of 'zloss-on' and 'zloss-off': is " \
        "it their hero?" in json.loads(res.stdout)["warnings"]
    ours = hero.replace(group="zloss-on").save(tmp_path / "ours.yaml")  # the baseline's own hero: nothing to say
    res = run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--format", "json", "--hero", ours,
              "--bootstrap", "0")
    assert res.exit_code == 0 and not [w for w in json.loads(res.stdout)["warnings"] if "is of group" in w]
    # Rungs whose compute is 6·N·D put the hero there too
    res = run(N_ONLY_REF, N_ONLY, "--store", store, "--out", tmp_path, "--format", "json", "--hero", path, "--bootstrap", "0")
    assert res.exit_code == 0, res.output
    target = json.loads(res.stdout)["multiplier"]["target"]
    assert target["compute"] == pytest.approx(6 * hero.spec.active_params() * hero.tokens_per_step * hero.schedule.total_steps)
    assert "6·N·D as the rungs'" in target["source"] and target["multiplier"] == pytest.approx(M, rel=1e-3)


@pytest.mark.parametrize(
    "args, fragments",
    [
        (("zloss-on", "nope"), ("no group 'nope'", "zloss-off")),
        (("zloss-on", "zloss-on"), ("both groups are 'zloss-on'", "two different ladders")),
        (("zloss-on", "broken"), ("group 'broken' has 2 finished rungs", "at least 3", "state crashed")),
        (("zloss-on", NO_ROLE), (f"group '{NO_ROLE}' has 0 finished rungs", f"the runs of group '{NO_ROLE}' have role none",
                                 "--coord role=rung")),
        (("zloss-on", "zloss-off", "--hero-compute", "1e16", "--hero", "x.yaml"), ("not both",)),
        (("zloss-on", "zloss-off", "--hero-compute", "-3"), ("--hero-compute",)),
        (("zloss-on", "zloss-off", "--hero-compute", "1e300"), ("--hero-compute", "too large", "1e+40")),
        (("zloss-on", ENDS_EARLY), (f"group '{ENDS_EARLY}' has 0 finished rungs", "last 'eval/loss' at step 75 of 100")),
        (("zloss-on", "zloss-off", "--hero", "missing.yaml"), ("--hero missing.yaml", "no such file")),
        (("zloss-on", "zloss-off", "--E", "free"), ("--E 'free'",)),
        (("zloss-on", "zloss-off", "--E", "5"), ("pinned E = 5 (--E) must be in [0, the smallest loss",)),
        (("zloss-on", "zloss-off", "--bootstrap", "-1"), ("--bootstrap",)),
        (("zloss-on", "zloss-off", "--metric", "nope"), ("--metric nope: no rung of group 'zloss-on' logs it (they log "
                                                         "eval/loss); name one they log",)),
        (("zloss-on", "zloss-off", "--bootstrap", "1"), ("--bootstrap 1: give 0 (none) or 2 to 10,000 refits",)),
    ],
)
def test_bad_input_is_one_red_line_and_exit_2(store, tmp_path, args, fragments):
    one_error_line(run(*args, "--store", store, "--out", tmp_path), *fragments)


def test_missing_store_is_a_usage_error(tmp_path):
    one_error_line(run("a", "b", "--store", tmp_path / "none", "--out", tmp_path), "no store")


def test_a_folder_in_the_way_of_an_output_is_refused_before_anything_is_written(store, tmp_path):
    (tmp_path / "out" / "compare.json").mkdir(parents=True)
    one_error_line(run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path / "out", "--bootstrap", "0"),
                   "compare.json there is a folder")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["compare.json"]  # no compare.png beside it


def test_a_file_of_yours_under_an_outputs_name_is_refused_and_an_earlier_comparison_replaced(store, tmp_path):
    args = ("zloss-on", "zloss-off", "--store", store, "--bootstrap", "0", "--out")
    for name, mine in (("compare.json", '{"my": "notes"}'), ("compare.png", "a figure of mine")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / name).write_text(mine)
        one_error_line(run(*args, folder), f"{name} there is not an output of `ladder compare`")
        assert [(p.name, p.read_text()) for p in folder.iterdir()] == [(name, mine)]
    ours = tmp_path / "ours"
    assert run(*args, ours).exit_code == 0
    (ours / "compare.json").write_text((ours / "compare.json").read_text().replace('"seed"', '"seed_was"'))
    (ours / "compare.png").write_bytes(b"\x89PNG drawn before figures carried a tag")
    res = run(*args, ours)  # an earlier comparison: replaced, and so is the figure beside its JSON
    assert res.exit_code == 0 and '"seed"' in (ours / "compare.json").read_text(), res.output
    assert b"drawn before" not in (ours / "compare.png").read_bytes()


def test_a_file_that_cannot_be_replaced_is_named_not_its_temporary_copy(tmp_path):
    from ladder.files import write_text_atomic

    (tmp_path / "x.json").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        write_text_atomic(tmp_path / "x.json", "{}")
    assert info.value.filename == str(tmp_path / "x.json") and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_rungs_that_log_their_last_eval_at_plan_minus_one_are_finished(store, tmp_path):
    res = run("zloss-on", FROM_ZERO, "--store", store, "--out", tmp_path, "--format", "json", "--bootstrap", "0")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [r["name"] for r in data["groups"]["b"]["rungs"]] == [f"r{i}" for i in range(5)]
    assert data["groups"]["b"]["left_out"] == []
    assert data["multiplier"]["rungs"][2]["multiplier"] == pytest.approx(M, rel=1e-3)


def test_a_target_below_the_smallest_rung_is_refused_as_check_refuses_it(store, tmp_path):
    smallest = FLOPS_PER_TOKEN[0] * TOKENS_PER_STEP * STEPS[0]
    one_error_line(run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--hero-compute", "1e10"),
                   "the hero's compute (1e+10 FLOPs, from --hero-compute) is below the smallest rung's "
                   f"(r0 of 'zloss-on': {smallest:.3g}); is it in other units?")
    assert not (tmp_path / "compare.json").exists()


def test_a_target_no_larger_than_the_rungs_is_warned_of(store, tmp_path):
    res = run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--format", "json", "--bootstrap", "0",
              "--hero-compute", "1e12")  # between the smallest rung's compute (1.8e10) and the largest's (4.6e12)
    assert res.exit_code == 0, res.output
    [w] = [w for w in json.loads(res.stdout)["warnings"] if "not above the largest rung's" in w]
    assert w.startswith("the hero's compute (1e+12 FLOPs, from --hero-compute)") and "r4 of 'zloss-" in w
    res = run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path, "--format", "json", "--bootstrap", "0")
    assert not [w for w in json.loads(res.stdout)["warnings"] if "not above" in w]  # the default reach: 10× the largest


def test_a_rung_whose_last_eval_is_not_finite_or_whose_final_loss_is_not_positive_is_left_out_by_name(store, tmp_path):
    """A NaN at the last eval is said as such (not as a run that stopped at its eval before), and a final loss of 0
    leaves its rung out by name, not the whole comparison with an error on "loss_b at position 4"."""
    nan = run("zloss-on", "nan-last", "--store", store, "--out", tmp_path / "a", "--bootstrap", "20")
    assert nan.exit_code == 0, nan.output
    assert json.loads((tmp_path / "a" / "compare.json").read_text())["groups"]["b"]["left_out"] == [
        f"r9: its last 'eval/loss', at step {STEPS[4]:,}, is not finite (nan)"]
    zero = run("zloss-on", "zero-final", "--store", store, "--out", tmp_path / "b", "--bootstrap", "20")
    assert zero.exit_code == 0, zero.output
    assert json.loads((tmp_path / "b" / "compare.json").read_text())["groups"]["b"]["left_out"] == [
        "r9: its final 'eval/loss' is 0, not a positive loss"]


def test_two_ladders_of_one_group_name_in_two_stores_are_compared_with_store_b(store, tmp_path):
    """Two ladders planned from one recipe have the same run ids, so the second cannot join the first's store (its
    pull refuses, rightly); a comparison across two stores was impossible. An exact law's resamples also ended within
    rounding of the full fit and warned that it lay outside them."""
    other = tmp_path / "other"
    pull(Store(other), LadderSource(rungs("zloss-on", M)))  # the same ids as the store's zloss-on
    res = run("zloss-on", "zloss-on", "--store", store, "--store-b", other, "--out", tmp_path / "o", "--format", "json",
              "--bootstrap", "50")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    a, b = data["groups"]["a"], data["groups"]["b"]
    assert (a["store"], b["store"]) == (str(store), str(other)) and b["label"] == f"zloss-on (in {other})"
    assert data["multiplier"]["target"]["multiplier"] == pytest.approx(M, rel=1e-3)
    assert not [w for w in data["warnings"] if "outside the resamples" in w], data["warnings"]
    said = " ".join(run("zloss-on", "zloss-on", "--store", store, "--store-b", other, "--out", tmp_path / "t",
                        "--bootstrap", "0").output.split())
    assert f"zloss-on (in {other}) (B) against zloss-on (in {store}) (A)" in said
    one_error_line(run("zloss-on", "zloss-on", "--store", store, "--store-b", store, "--out", tmp_path / "s"),
                   "both groups are 'zloss-on'", "--store-b")
    one_error_line(run("zloss-on", "zloss-on", "--store", store, "--store-b", tmp_path / "none", "--out", tmp_path / "n"),
                   "or give --store-b")


class DenseSource(LadderSource):
    """Rungs that log a per-step train/loss, its noise ±0.05 alternating, its last value on the high side."""

    key = "memory:dense"

    def read(self, ref, cursor=None):
        _, group, _, steps, final, state = self.data[ref.run_id]
        every = list(range(1, steps + 1))
        noise = [0.05 * (-1) ** (steps - s) for s in every]  # +0.05 at the last step
        train = [final + 0.3 * (steps / s - 1) / steps + e for s, e in zip(every, noise)]
        rows = sorted([(s, "train/loss", y) for s, y in zip(every, train)]
                      + [(s, "eval/loss", y) for s, y in ((steps // 4, final + 0.4), (steps // 2, final + 0.1),
                                                          (steps, final))])  # as logged: by step
        frame = raw_frame(*(list(column) for column in zip(*rows)))
        return SourceRun(ref.run_id, self.key, frame, {"n": 3}, state, config=ref.config,
                         name=ref.config and self.data[ref.run_id][0], replace=cursor is None)


def test_a_per_step_train_loss_is_compared_as_the_fits_read_it_not_by_its_last_noisy_value(tmp_path):
    root = tmp_path / "dense"
    pull(Store(root), DenseSource({**rungs("a", 1.0), **rungs("b", M)}))
    res = run("a", "b", "--store", root, "--metric", "train/loss", "--out", tmp_path / "o", "--format", "json",
              "--bootstrap", "0")
    assert res.exit_code == 0, res.output
    finals = [r["loss"] for r in json.loads(res.stdout)["groups"]["a"]["rungs"]]
    computes = [f * TOKENS_PER_STEP * s for f, s in zip(FLOPS_PER_TOKEN, STEPS)]
    assert finals == pytest.approx([law(c) for c in computes], abs=0.01)  # the last raw value is 0.05 above


def test_the_figure_keeps_a_target_among_the_rungs_in_place_and_a_multiplier_of_one_readable(tmp_path, monkeypatch):
    """A target among the rungs came last in the bands' x values (a polygon folding back across the panel), A's fit
    line ended at the target or B's largest rung, and a multiplier of 1 everywhere gave a log axis whose ticks all
    read "1"."""
    import matplotlib.pyplot as plt

    figures, root = [], tmp_path / "store"
    pull(Store(root), LadderSource({**rungs("larger", 1.0, range(1, 5)), **rungs("smaller", 1.0, range(4))}))
    monkeypatch.setattr(plt, "close", figures.append)
    res = run("larger", "smaller", "--store", root, "--out", tmp_path / "a", "--bootstrap", "20", "--hero-compute",
              "1e12")  # A's rungs reach 4.6e12, B's 5.8e11
    assert res.exit_code == 0, res.output
    (fig,) = figures
    fits, multiplier = fig.axes
    low, high = multiplier.get_ylim()
    assert high / low >= 1.5 - 1e-9
    for band in multiplier.collections[:2]:  # the 90% and the 50% band
        x = band.get_paths()[0].vertices[:, 0]
        forth = x[1:len(x) // 2]
        assert (np.diff(forth) >= 0).all(), x
    largest = max(f * TOKENS_PER_STEP * s for f, s in zip(FLOPS_PER_TOKEN, STEPS))
    drawn = [np.asarray(line.get_xdata()) for line in fits.lines if len(line.get_xdata()) > 2]  # each ladder's fit
    assert len(drawn) == 2 and all(x.max() >= largest for x in drawn)
    labels = [t.get_text() for t in multiplier.get_yticklabels() if t.get_text()]
    assert labels == ["0.9", "1", "1.1", "1.2"]
    assert not [t for t in multiplier.get_yticklabels(minor=True) if t.get_text()]


@pytest.mark.parametrize(("low", "high"), [(0.39, 32.6), (0.816, 1.22), (1.2, 2.4), (0.5, 100.0), (0.01, 1e3), (0.2, 0.9)])
def test_the_multipliers_axis_is_labelled_at_a_few_round_ratios_none_beside_another(low, high):
    """compare.png labelled every minor tick of its log axis: over 0.39–32.6, "0.9" sat on "1"."""
    from ladder.compare import ratio_ticks

    ticks = np.log(ratio_ticks(low, high))
    span = np.log(high / low)
    assert 3 <= len(ticks) <= 7 and np.all(np.diff(ticks) >= span / 15)
    assert np.all((ticks >= np.log(low) - 1e-12) & (ticks <= np.log(high) + 1e-12))


def test_a_plan_folder_given_as_the_hero_names_the_hero_s_config_in_it(store, tmp_path):
    """`--hero plan/` (the folder `ladder plan --out` wrote) said "no such file"."""
    hero = plan(override(load_recipe("micro-cpu"))).hero
    hero.save(tmp_path / "plan" / f"{hero.name}.yaml")
    said = f"--hero {tmp_path / 'plan'}: a folder; give the hero's run config in it (here: " \
           f"{tmp_path / 'plan' / hero.name}.yaml), or its target file"
    one_error_line(run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path / "o", "--hero", tmp_path / "plan"),
                   said)
    one_error_line(runner.invoke(app, ["check", "--store", str(store), "--hero", str(tmp_path / "plan")]), said)
    table = tmp_path / "ladder_runs.csv"  # "expected a YAML mapping of fields, got str", naming neither --hero nor
    table.write_text("run,step,loss\nr0,10,3.0\n")  # what it takes
    said = f"--hero {table}: a table of runs, not the hero's run config; give the hero's run config (YAML from"
    one_error_line(run("zloss-on", "zloss-off", "--store", store, "--out", tmp_path / "o", "--hero", table), said)
    one_error_line(runner.invoke(app, ["check", "--store", str(store), "--hero", str(table)]), said)


def test_a_crashed_rung_leaves_out_its_partner_and_ladders_of_other_sizes_are_refused(store, tmp_path):
    """One crashed rung of either ladder refused the whole comparison ("rungs are paired by size, so both need the
    same sizes"), with nothing to leave its partner out by."""
    res = run("zloss-on", "one-crashed", "--store", store, "--out", tmp_path / "a", "--format", "json", "--bootstrap",
              "20")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [(r["rung_a"], r["rung_b"]) for r in data["multiplier"]["rungs"]] == [("r0", "r0"), ("r1", "r1"),
                                                                                ("r3", "r3"), ("r4", "r4")]
    assert data["groups"]["a"]["left_out"] == ["r2: no rung of 'one-crashed' of its size to pair with"]
    assert data["groups"]["b"]["left_out"] == ["r2: state crashed"]
    assert data["multiplier"]["target"]["multiplier"] == pytest.approx(M, rel=1e-3)
    res = run("four", "zloss-off", "--store", store, "--out", tmp_path / "b", "--format", "json", "--bootstrap", "0")
    assert res.exit_code == 0 and json.loads(res.stdout)["groups"]["b"]["left_out"] == [
        "r4: no rung of 'four' of its size to pair with"], res.output
    between = tmp_path / "between"  # four sizes, each twice a size of the other ladder's compute: no pairs
    pull(Store(between), LadderSource({**rungs("zloss-on", 1.0), **{
        f"half/r{i}": (f"r{i}", "half", 2 * FLOPS_PER_TOKEN[i], STEPS[i], law(2 * FLOPS_PER_TOKEN[i] * TOKENS_PER_STEP
                                                                             * STEPS[i]), "finished") for i in range(4)}}))
    one_error_line(run("zloss-on", "half", "--store", between, "--out", tmp_path / "c"),
                   "group 'zloss-on' has 5 usable rungs and 'half' has 4, and not every rung of 'half' has one of "
                   f"'zloss-on' within 1.5× its compute to pair with ('r0', at C = "
                   f"{2 * FLOPS_PER_TOKEN[0] * TOKENS_PER_STEP * STEPS[0]:.3g}, has none); rungs are paired by size")


class WithHero(LadderSource):
    """`LadderSource`, with runs named "hero" stored in the role of their group's hero."""

    def runs(self):
        refs = super().runs()
        for ref in refs:
            if ref.name == "hero":
                ref.config["role"] = "hero"
        return refs


def test_a_rung_off_its_ladders_law_a_second_rung_of_a_size_and_the_stored_hero_are_said(tmp_path):
    """A rung 3% off its ladder's trend went unsaid beside a multiplier of 1.00 at it; a seed's rerun was left out as
    "no rung of its size to pair with"; and without --hero the target was 10× the largest rung, where `ladder check`
    took the group's hero in the store."""
    c0 = FLOPS_PER_TOKEN[0] * TOKENS_PER_STEP * STEPS[0]
    off = rungs("off", 1.0)
    name, group, fpt, steps, final, state = off["off/r3"]
    off["off/r3"] = (name, group, fpt, steps, final * 1.03, state)
    hero_fpt, hero_steps = 4 * FLOPS_PER_TOKEN[-1], 4 * STEPS[-1]
    root = tmp_path / "store"
    pull(Store(root), WithHero({**rungs("zloss-on", 1.0), **off, **rungs("dup", 1.0),
                                "dup/r0b": ("r0-rerun", "dup", FLOPS_PER_TOKEN[0], STEPS[0], law(c0) + 1e-3, "finished"),
                                "zloss-on/hero": ("hero", "zloss-on", hero_fpt, hero_steps, 2.0, "running")}))
    res = run("zloss-on", "off", "--store", root, "--out", tmp_path / "a", "--format", "json", "--bootstrap", "0")
    data = json.loads(res.stdout)
    (miss,) = [w for w in data["warnings"] if "law misses its rung" in w]
    assert res.exit_code == 0 and miss.startswith(f"ladder B's law misses its rung at C = "
                                                  f"{FLOPS_PER_TOKEN[3] * TOKENS_PER_STEP * STEPS[3]:.3g} by -")
    assert data["multiplier"]["target"]["compute"] == pytest.approx(hero_fpt * TOKENS_PER_STEP * hero_steps)
    assert data["multiplier"]["target"]["source"] == "the hero run 'hero' in the store"
    res = run("zloss-on", "dup", "--store", root, "--out", tmp_path / "b", "--format", "json", "--bootstrap", "0")
    data = json.loads(res.stdout)
    assert data["groups"]["b"]["left_out"] == ["r0-rerun: a second rung of its size (r0 is the one paired; a "
                                               "comparison takes one rung a size)"]
    assert not any("law misses" in w for w in data["warnings"])  # clean ladders: no rung off its law
    res = run("zloss-on", "off", "--store", root, "--out", tmp_path / "c", "--format", "json", "--bootstrap", "0",
              "--hero-compute", "1e15")
    assert json.loads(res.stdout)["multiplier"]["target"]["source"] == "--hero-compute"


class AttentionWithHero(AttentionSource, WithHero):
    """Both: the "attn" group counts fit FLOPs 1.8× its 6·N, and its run named "hero" is its hero."""


class HeroWithoutN(AttentionWithHero):
    """As `AttentionWithHero`, its hero giving fit FLOPs but no N."""

    def runs(self):
        refs = super().runs()
        for ref in refs:
            if ref.name == "hero":
                ref.config["active_params"] = ref.config["total_params"] = "unknown"
        return refs


@pytest.mark.parametrize("source, factor, said", [
    (AttentionWithHero, 1.0, "the hero run 'hero' in the store, 6·N·D as the rungs'"),  # 6·N·D, not its fit FLOPs
    (HeroWithoutN, 1.8, "the hero run 'hero' in the store, its fit FLOPs: it gives no N, and the rungs' computes are "
                        "6·N·D, which leave attention out (give its active_params, or --hero-compute)"),
])
def test_the_stored_hero_and_a_hero_compute_go_on_the_axis_the_ladders_are_put_on(tmp_path, source, factor, said):
    hero_fpt, hero_steps = 4 * FLOPS_PER_TOKEN[-1], 4 * STEPS[-1]
    root = tmp_path / "store"
    pull(Store(root), source({**rungs("attn", 1.0), **rungs(N_ONLY, M),
                              "attn/hero": ("hero", "attn", hero_fpt, hero_steps, 2.0, "running")}))
    res = run("attn", N_ONLY, "--store", root, "--out", tmp_path, "--format", "json", "--bootstrap", "0")
    assert res.exit_code == 0, res.output
    target = json.loads(res.stdout)["multiplier"]["target"]
    assert target["compute"] == pytest.approx(factor * hero_fpt * TOKENS_PER_STEP * hero_steps)
    assert target["source"] == said
    res = run("attn", N_ONLY, "--store", root, "--out", tmp_path, "--format", "json", "--bootstrap", "0",
              "--hero-compute", "1e15")
    assert json.loads(res.stdout)["multiplier"]["target"]["source"] == ("--hero-compute, read as 6·N·D as the "
                                                                        "rungs' computes are")

"""`ladder plan` and `ladder spec` from the command line: outputs, overrides and user errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ladder import RunConfig, load_recipe
from ladder.cli import app
from ladder.plan import plan

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_plan_json_has_the_documented_fields():
    res = run("plan", "marin-moe-hero", "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["preset"] == "marin-moe-hero" and data["tpp"] == 791
    fields = {"name", "d_model", "n_layers", "active_params", "total_params", "tokens", "steps",
              "batch_size", "seq_len", "peak_lr", "fit_flops", "flops_with_head", "flops_6nd"}
    for rung in data["rungs"] + [data["hero"]]:
        assert fields <= set(rung)
    assert data["hero"]["total_params"] == 535_305_388_032
    assert data["hero"]["active_params"] == 22_762_487_808
    assert data["ladder_compute_fraction"] < 0.01
    # the published plan keeps the largest rung's batch for the hero, 0.081x the rungs' batch law at its size
    assert len(data["notes"]) == 1 and "is 0.081× the power law in size through the rungs' batches" in data["notes"][0]
    micro = json.loads(run("plan", "micro-cpu", "--format", "json").stdout)
    assert micro["notes"] == []  # one batch for every run
    table = run("plan", "marin-moe-hero")
    assert "note: the hero's batch (46,137,344 tokens per step) is 0.081×" in " ".join(table.output.split())


def test_plan_table_names_the_runs_and_the_share():
    res = run("plan")
    assert res.exit_code == 0
    for name in ("1.6B-A61M", "4.0B-A162M", "11.5B-A481M", "27.7B-A1.2B", "535.3B-A22.8B"):
        assert name in res.stdout
    assert "of the hero's" in res.stdout


def test_plan_writes_configs_that_load_back(tmp_path):
    res = run("plan", "micro-cpu", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    expected = plan(load_recipe("micro-cpu"))
    for cfg in expected.runs():
        loaded = RunConfig.load(tmp_path / f"{cfg.name}.yaml")
        assert loaded == cfg
        assert loaded.coordinates()["stop_after_steps"] == cfg.stop_after_steps
    assert (tmp_path / "launch.sh").read_text().count("python -m trainer_jax") == 5
    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0  # the same plan again: rewritten
    # another plan into the folder would leave these rungs for `ladder train --ladder` to train: refused
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    res = run("plan", "micro-cpu", "--widths", "32,48", "--depths", "2,2", "--out", str(tmp_path))
    assert res.exit_code == 2 and "holds run configs this plan does not have" in res.output
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_overrides_from_the_command_line():
    res = run("plan", "marin-moe-hero", "--tpp", "20", "--widths", "768,1024", "--depths", "8,12",
              "--racks", "1,1", "--set", "arch.n_experts=64", "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["tpp"] == 20 and [r["d_model"] for r in data["rungs"]] == [768, 1024]
    rung = data["rungs"][0]
    assert rung["tokens"] == pytest.approx(20 * rung["active_params"], rel=0.01)
    base = json.loads(run("plan", "--format", "json").stdout)["rungs"][0]
    assert rung["total_params"] < base["total_params"]  # 64 experts instead of 384


def test_spec_prints_the_breakdown(tmp_path):
    run("plan", "marin-moe-hero", "--out", str(tmp_path))
    res = run("spec", str(tmp_path / "hero-535.3B-A22.8B.yaml"), "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["total_params"] == 535_305_388_032
    assert data["total_params_exact"] == sum(data["params"]["total_exact"].values())
    assert data["flops_with_head"] == pytest.approx(2.7e24, rel=0.01)
    table = run("spec", str(tmp_path / "1.6B-A61M.yaml"))
    assert "attention_kv" in table.stdout and "fit compute per token" in table.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["plan", "marin-moe-heroo"], "unknown preset 'marin-moe-heroo': did you mean 'marin-moe-hero'?"),
        (["plan", "--tpp", "-5"], "tpp=-5.0 must be positive"),
        (["plan", "--tpp", "0"], "tpp=0.0 must be positive"),
        (["plan", "--set", "arch.top_k=500"], "top_k=500 must be between 1 and n_experts=384"),
        (["plan", "--widths", "1000", "--depths", "8"], "width 1000 is not divisible by the head size 128"),
        (["plan", "--set", "arch.n_expert=8"], "unknown field 'arch.n_expert' (did you mean 'n_experts'?)"),
        (["plan", "--widths", "768,1024", "--depths", "8"], "one depth per width"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(args, message):
    res = run(*args)
    assert res.exit_code == 2
    assert message in " ".join(res.stderr.split())
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: x\narch: {vocab_size: 10\n", "malformed YAML"),
        ("- just\n- a list\n", "expected a YAML mapping"),
    ],
)
def test_malformed_recipe_files(tmp_path, text, message):
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    res = run("plan", str(path))
    assert res.exit_code == 2 and message in res.stderr


def test_misspelt_field_in_a_recipe_file(tmp_path):
    text = (tmp_path / "r.yaml")
    base = (load_recipe.__globals__["resources"].files("ladder.presets") / "micro-cpu.yaml").read_text()
    text.write_text(base.replace("tpp:", "ttp:"))
    res = run("plan", str(text))
    assert res.exit_code == 2
    assert "unknown field 'ttp' (did you mean 'tpp'?)" in res.stderr

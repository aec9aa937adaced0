"""`ladder plan` and `ladder spec` from the command line: outputs, overrides and user errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ladder import RunConfig, load_recipe
from ladder.cli import app
from ladder.config.plan import override, plan
from ladder.config.yamlio import load_yaml
from ladder.errors import LadderError

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
    assert "shortened at step" not in res.stdout  # a hero planned whole: no note under the table
    hero = plan(load_recipe("micro-cpu")).hero  # its steps and tokens are those of its cut plan: the note says so
    said = " ".join(run("plan", "micro-cpu").stdout.split())
    assert f"{hero.name}: {hero.schedule.describe()}" in said and "shortened at step" in said


def test_the_plan_table_at_80_columns_prints_every_value_whole(monkeypatch):
    """At 80 columns every column was cut: peak LR "0.0…", steps "1,1…", the hero "her…"."""
    from ladder.cli.app import console

    monkeypatch.setattr(console, "width", 80)
    res = run("plan", "micro-cpu")
    assert res.exit_code == 0 and "…" not in res.stdout, res.stdout
    for cfg in plan(load_recipe("micro-cpu")).runs():
        (row,) = [x for x in res.stdout.splitlines() if f"│ {cfg.name} " in x]
        cells = [c.strip() for c in row.split("│")[1:-1]]
        assert cells[6] == f"{cfg.stop_after_steps:,}" and cells[8] == f"{cfg.schedule.peak_lr:.3g}", row


def test_plan_writes_configs_that_load_back(tmp_path):
    res = run("plan", "micro-cpu", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    expected = plan(load_recipe("micro-cpu"))
    for cfg in expected.runs():
        loaded = RunConfig.load(tmp_path / f"{cfg.name}.yaml")
        assert loaded == cfg
        assert loaded.coordinates()["stop_after_steps"] == cfg.stop_after_steps
    assert (tmp_path / "launch.sh").read_text().count('"$PYTHON" -m trainer_jax') == 5
    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0  # the same plan again: rewritten
    # another plan into the folder would leave these rungs for `ladder train --ladder` to train: refused
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    res = run("plan", "micro-cpu", "--widths", "32,48", "--depths", "2,2", "--out", str(tmp_path))
    assert res.exit_code == 2 and "holds run configs this plan does not have" in res.output
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before
    twice = json.loads(run("plan", "micro-cpu", "--widths", "32", "--widths", "48,64", "--depths", "2,2",
                           "--depths", "2", "--format", "json").stdout)  # each option once per rung, or in one
    once = json.loads(run("plan", "micro-cpu", "--widths", "32,48,64", "--depths", "2,2,2", "--format", "json").stdout)
    assert twice == once and len(once["rungs"]) == 3


@pytest.mark.skipif(shutil.which("bash") is None, reason="launch.sh is a bash script")
def test_launch_script_resumes_every_run_and_stops_at_the_first_failure(tmp_path, monkeypatch):
    # A stand-in for the planning interpreter that logs its arguments and fails as the trainer does for the
    # second rung.
    names = [f"{c.name}.yaml" for c in plan(load_recipe("micro-cpu")).runs()]
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {tmp_path}/calls\n[ "$3" != {names[1]!r} ]\n')
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    out = tmp_path / "ladder"
    assert run("plan", "micro-cpu", "--out", str(out)).exit_code == 0
    env = dict(os.environ)
    proc = subprocess.run(["bash", str(out / "launch.sh")], cwd=tmp_path, env=env)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert proc.returncode != 0
    assert calls == [f"-m trainer_jax {n} --resume" for n in names[:2]]  # the hero was never started
    (tmp_path / "calls").unlink()
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {tmp_path}/calls\n')
    assert subprocess.run(["bash", str(out / "launch.sh")], cwd=tmp_path, env=env).returncode == 0
    assert (tmp_path / "calls").read_text().splitlines() == [f"-m trainer_jax {n} --resume" for n in names]


@pytest.mark.skipif(shutil.which("bash") is None, reason="launch.sh is a bash script")
def test_launch_script_runs_the_planning_interpreter_without_python_on_path(tmp_path, monkeypatch):
    def stand_in(path, says):
        path.parent.mkdir(exist_ok=True)
        path.write_text(f'#!/bin/sh\necho "{says} $*" >> "{tmp_path}/calls"\n')
        path.chmod(0o755)

    planner = tmp_path / "my env" / "python"  # a space: the path is shell-quoted
    stand_in(planner, "planner")
    monkeypatch.setattr(sys, "executable", str(planner))
    out = tmp_path / "ladder"
    assert run("plan", "micro-cpu", "--out", str(out)).exit_code == 0
    names = [f"{c.name}.yaml" for c in plan(load_recipe("micro-cpu")).runs()]
    bash = shutil.which("bash")
    assert subprocess.run([bash, str(out / "launch.sh")], env={"PATH": "/usr/bin:/bin"}).returncode == 0
    assert (tmp_path / "calls").read_text().splitlines() == [f"planner -m trainer_jax {n} --resume" for n in names]
    # on a machine without that interpreter: python3 on PATH
    (tmp_path / "calls").unlink()
    planner.unlink()
    stand_in(tmp_path / "bin" / "python3", "python3")
    assert subprocess.run([bash, str(out / "launch.sh")], env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}).returncode == 0
    assert (tmp_path / "calls").read_text().splitlines() == [f"python3 -m trainer_jax {n} --resume" for n in names]


@pytest.mark.parametrize("trace", ["metrics.jsonl", "checkpoints/100/state"])
def test_plan_refuses_to_change_the_config_of_a_trained_run(tmp_path, trace):
    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0
    rung = plan(load_recipe("micro-cpu")).rungs[0]
    left = tmp_path / "runs" / rung.name / trace
    left.parent.mkdir(parents=True)
    left.write_text("{}\n")
    before = {p.name: p.read_text() for p in tmp_path.glob("*.yaml")}
    res = run("plan", "micro-cpu", "--tpp", "6", "--out", str(tmp_path))
    assert res.exit_code == 2, res.output
    assert res.output.strip() == (f"error: {tmp_path / rung.name}.yaml would change, but the run {rung.name} was trained "
                                  f"from it ({tmp_path / 'runs' / rung.name} holds its checkpoints or metrics): give "
                                  f"--out another folder, or remove {tmp_path / 'runs' / rung.name} (nothing was written)")
    assert {p.name: p.read_text() for p in tmp_path.glob("*.yaml")} == before
    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0  # the same plan again: nothing changes
    shutil.rmtree(tmp_path / "runs" / rung.name)
    assert run("plan", "micro-cpu", "--tpp", "6", "--out", str(tmp_path)).exit_code == 0
    assert RunConfig.load(tmp_path / f"{rung.name}.yaml") != rung


def test_a_hero_not_above_the_largest_rung_is_warned_about():
    small = run("plan", "micro-cpu", "--set", "hero={d_model: 32, n_layers: 2}", "--format", "json")
    assert small.exit_code == 0, small.output
    data = json.loads(small.stdout)
    assert data["hero"]["fit_flops"] < max(r["fit_flops"] for r in data["rungs"])
    (line,) = [x for x in small.stderr.splitlines() if x]
    assert line.startswith("warning: the hero hero-40K-A15K") and "is not above the largest rung 169K-A81K" in line
    assert data["warnings"] == [line.removeprefix("warning: ")]
    normal = run("plan", "micro-cpu")
    assert normal.exit_code == 0 and "warning" not in normal.stderr


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


def test_spec_fit_compute_follows_the_sequence_length(tmp_path):
    assert run("plan", "micro-cpu", "--set", "schedule.seq_phases=[{start_fraction: 0.5, seq_len: 64}]",
               "--out", str(tmp_path)).exit_code == 0
    hero = next(tmp_path.glob("hero-*.yaml"))
    cfg = RunConfig.load(hero)
    own = json.loads(run("spec", str(hero), "--format", "json").stdout)
    assert own["fit_flops"] == pytest.approx(cfg.fit_flops) and own["tokens"] == cfg.tokens
    assert own["fit_flops"] == pytest.approx(own["fit_flops_per_token"] * own["tokens"])
    assert own["fit_flops_per_token"] < 3 * cfg.spec.forward_flops_per_token(cfg.seq_len)  # half the run at 64
    assert own["seq_phases"] == [{"start_fraction": 0.0, "seq_len": cfg.seq_len}, {"start_fraction": 0.5, "seq_len": 64}]
    for seq in (64, 512):
        at = json.loads(run("spec", str(hero), "--seq-len", str(seq), "--format", "json").stdout)
        assert at["fit_flops_per_token"] == pytest.approx(3 * cfg.spec.forward_flops_per_token(seq))
        assert at["fit_flops"] == pytest.approx(at["fit_flops_per_token"] * cfg.tokens)
        assert at["flops_with_head"] == pytest.approx(3 * cfg.spec.forward_flops_per_token(seq, True) * cfg.tokens)
    table = run("spec", str(hero), "--seq-len", "512")
    assert f"fit compute C at seq len 512 = {at['fit_flops']:.4g} FLOPs" in table.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["plan", "marin-moe-heroo"], "unknown preset 'marin-moe-heroo': did you mean 'marin-moe-hero'?"),
        (["plan", "--tpp", "-5"], "tpp=-5 must be positive"),
        (["plan", "--tpp", "0"], "tpp=0 must be positive"),
        (["plan", "--set", "arch.top_k=500"], "top_k=500 must be between 1 and n_experts=384"),
        (["plan", "--widths", "1000", "--depths", "8"], "(d_model 1000, n_layers 8): width 1000 is not divisible by the "
                                                          "head size 128"),
        (["plan", "--set", "arch.n_expert=8"], "unknown field 'arch.n_expert' (did you mean 'n_experts'?)"),
        (["plan", "--widths", "768,1024", "--depths", "8"], "one depth per width"),
        (["plan", "--widths", "768", "--depths", "8,8"], "--widths gives 1 rung but --depths gives 2"),
        (["plan", "--racks", "1"], "--racks gives 1 value for 4 rungs"),
        (["plan", "micro-cpu", "--widths", "32,48"],
         "--widths gives 2 rungs but the recipe has 4 depths: give one depth per width (--depths)"),
        (["plan", "micro-cpu", "--depths", "2,2"],
         "the recipe has 4 rungs but --depths gives 2: give one depth per width (--widths)"),
        (["plan", "micro-cpu", "--widths", "-32", "--depths", "2"], "--widths -32: -32 is not positive"),
        (["plan", "micro-cpu", "--cpus-per-run", "-1"], "--cpus-per-run -1: give 0 to 65,536 CPU cores"),
        (["plan", "micro-cpu", "--gpus-per-run", "nan"], "--gpus-per-run nan: give 0 to 65,536 GPUs"),
        (["plan", "micro-cpu", "--hero-hosts", "0"], "--hero-hosts 0: give 1 or more hosts"),
        (["plan", "--set", "arch.n_experts=abc"], "error: --set arch.n_experts: expected an integer, got 'abc'"),
        (["plan", "--set", "data.source=5"], "error: --set data.source: 5 is not one of"),
        (["plan", "--set", "hero={d_model: x}"], "error: --set hero.d_model: expected an integer, got 'x'"),
        (["plan", "micro-cpu", "--set", "step_multiple=1000000"],
         "rounded to a multiple of step_multiple=1,000,000 that is 0: lower step_multiple"),
        (["plan", "micro-cpu", "--set", "arch.vocab_size=10"],
         "spec.vocab_size=10: data.source=stdlib_text is bytes and needs vocab_size >= 256: raise arch.vocab_size"),
        (["plan", "micro-cpu", "--set", "seed=4294967296"],  # a JAX key keeps 32 bits: it would train seed 0's run
         "--set seed=4,294,967,296 is out of range: must be in [0, 4,294,967,295] (JAX's random keys keep only 32 bits"),
        (["plan", "micro-cpu", "--set", "data.seed=-1"], "--set data.seed=-1 is out of range: must be in [0, 4,294,967,295]"),
        (["plan", "micro-cpu", "--hero-hosts", "99999999999999999999"],
         "--hero-hosts 99999999999999999999: at most 100,000 hosts; give the hosts the hero trains on"),
        (["plan", "micro-cpu", "--widths", "30,45,60,75", "--set", "arch.head_dim=15"],
         "--set arch.head_dim=15 must be even for rotary embeddings"),
        (["plan", "micro-cpu", "--set", "hero_edits=[{kind: shorten, at_fraction: 0.5, to_fraction: 0.8}, "
                                        "{kind: cooldown, at_fraction: 0.6, to_fraction: 0.9}]"],
         "--set hero_edits[1]: a cooldown to to_fraction=0.9 ends past 0.8 of the plan, where the edits before it "
         "end the run; an edit only cuts the run: give to_fraction at most 0.8"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(args, message):
    res = run(*args)
    assert res.exit_code == 2
    assert message in " ".join(res.stderr.split())
    assert len(res.stderr.strip().splitlines()) == 1
    assert "--set" not in args or "(line" not in res.stderr  # a one-line value has no lines to name
    assert "Traceback" not in res.output


def test_a_vocabulary_too_small_for_the_data_is_refused_in_any_order_of_sets(tmp_path):
    small = ["plan", "micro-cpu", "--set", "arch.vocab_size=10", "--out", str(tmp_path / "plan")]
    assert run(*small).exit_code == 2 and not (tmp_path / "plan").exists()  # nothing written
    res = run(*small, "--set", "data.source=markov")  # the markov chain has any vocabulary: set after, still fine
    assert res.exit_code == 0, res.output
    path = next((tmp_path / "plan").glob("hero-*.yaml"))
    assert RunConfig.load(path).spec.vocab_size == 10
    path.write_text(path.read_text().replace("source: markov", "source: stdlib_text"))
    with pytest.raises(LadderError, match=r"spec.vocab_size=10: data.source=stdlib_text is bytes"):
        RunConfig.load(path)  # the trainer's loader: the same rule


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: x\narch: {vocab_size: 10\n", "malformed YAML"),
        ("- just\n- a list\n", "expected a YAML mapping"),
        ("#!/usr/bin/env bash\nset -e\nladder train a.yaml &\nwait\n",  # the plan's launch.sh given for its YAML
         "a script (#!/usr/bin/env bash), not a YAML file; give a YAML file, or run the script itself"),
        ("\ufeff#!/bin/sh\nset -e\nladder train a.yaml\n", "a script (#!/bin/sh), not a YAML file"),  # saved with a BOM
        ("name: x\ntpp: 20\narch: {d_model: 8}\ntpp: 30\n",
         "line 4, column 1: the key 'tpp' is given twice (first at line 2): keep one"),
        ("name: x\narch:\n  d_model: 8\n  n_layers: 2\n  d_model: 16\n",
         "line 5, column 3: the key 'd_model' is given twice (first at line 3)"),
    ],
)
def test_malformed_recipe_files(tmp_path, text, message):
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    res = run("plan", str(path))
    assert res.exit_code == 2 and message in res.stderr


def test_a_bad_value_in_a_recipe_file_names_the_file_then_the_field(tmp_path):
    path = tmp_path / "r.yaml"
    base = (load_recipe.__globals__["resources"].files("ladder.config.presets") / "micro-cpu.yaml").read_text()
    path.write_text(base.replace("tpp: ", "tpp: abc #"))
    res = run("plan", str(path))
    assert res.exit_code == 2 and f"{path}: tpp: expected a number, got 'abc' (line " in res.stderr
    (tmp_path / "dir.yaml").mkdir()
    res = run("plan", str(tmp_path / "dir.yaml"))
    assert res.exit_code == 2 and f"{tmp_path / 'dir.yaml'}: is a folder, not a file" in res.stderr
    path.write_text(base)  # shapes that do not divide, found as the plan is made: the file named too
    res = run("plan", str(path), "--widths", "33,48,64,96")
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {path}: recipe 'micro-cpu', rungs[0] (d_model 33, ")
    res = run("plan", "micro-cpu", "--widths", "33,48,64,96")  # a preset: no file of the user's to name
    assert res.exit_code == 2 and res.stderr.startswith("error: recipe 'micro-cpu', rungs[0] (d_model 33, ")
    path.write_text("#!ladder plan: a comment on the first line\n" + base)  # a YAML file all the same
    assert run("plan", str(path)).exit_code == 0
    path.write_text(base.replace("name: micro-cpu", 'name: " "'))  # no group: its runs would read as of none
    res = run("plan", str(path))
    assert res.exit_code == 2 and f"{path}: name: empty; the recipe's name is its runs' group: give one" in res.stderr


def test_a_merge_may_give_its_keys_again(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("base: &b {a: 1, b: 2}\nother:\n  <<: *b\n  a: 3\n")
    assert load_yaml(path) == {"base": {"a": 1, "b": 2}, "other": {"a": 3, "b": 2}}


def test_misspelt_field_in_a_recipe_file(tmp_path):
    text = (tmp_path / "r.yaml")
    base = (load_recipe.__globals__["resources"].files("ladder.config.presets") / "micro-cpu.yaml").read_text()
    text.write_text(base.replace("tpp:", "ttp:"))
    res = run("plan", str(text))
    assert res.exit_code == 2
    assert "unknown field 'ttp' (did you mean 'tpp'?)" in res.stderr


def test_rounding_steps_far_off_the_token_ratio_is_a_warning():
    res = run("plan", "micro-cpu", "--set", "step_multiple=200", "--format", "json")
    assert res.exit_code == 0, res.output
    [warning] = [w for w in json.loads(res.stdout)["warnings"] if "step_multiple" in w]
    assert warning.startswith("rounding steps to step_multiple=200 moves") and "off tpp=12" in warning
    assert not [w for w in json.loads(run("plan", "micro-cpu", "--format", "json").stdout)["warnings"]
                if "step_multiple" in w]  # the hero's cut horizon is an edit, not a rounding


def test_set_overrides_are_checked_together_whatever_their_order():
    for sets in (["arch.n_experts=1", "arch.top_k=1"], ["arch.top_k=1", "arch.n_experts=1"]):
        res = run("plan", "micro-cpu", *[x for s in sets for x in ("--set", s)], "--format", "json")
        assert res.exit_code == 0, res.output
    res = run("plan", "micro-cpu", "--set", "arch.n_experts=1", "--format", "json")
    assert res.exit_code == 2 and "top_k" in res.output


def test_a_records_check_points_at_the_line_of_the_field_it_names(tmp_path):
    text = (Path(__file__).parents[1] / "ladder" / "config" / "presets" / "micro-cpu.yaml").read_text()
    assert "  top_k: 2\n" in text and "  n_experts: 8\n" in text
    path = tmp_path / "r.yaml"
    path.write_text(text.replace("  top_k: 2\n", "  top_k: 0\n"))
    line = text.splitlines().index("  top_k: 2") + 1
    res = run("plan", str(path))
    assert res.exit_code == 2 and "r.yaml: arch.top_k=0 must be between 1 and n_experts=8" in res.output
    assert f"(line {line})" in res.output and "arch: arch." not in res.output


def _written(tmp_path: Path) -> Path:
    """The small plan's first rung, written by `ladder plan` into tmp_path/q."""
    res = run("plan", "micro-cpu", "--widths", "32", "--depths", "2", "--seq-len", "32", "--set", "tpp=0.5",
              "--set", "batch_sequences=8", "--out", str(tmp_path / "q"))
    assert res.exit_code == 0, res.output
    return tmp_path / "q" / "40K-A15K.yaml"


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("\nseed: 0\n", "\nseed: 4294967296\n", "seed=4,294,967,296 is out of range: must be in [0, 4,294,967,295]"),
        ("\n  seed: 0\n", "\n  seed: -1\n", "data.seed=-1 is out of range: must be in [0, 4,294,967,295]"),
        ("\n  hosts: 1\n", "\n  hosts: 1000000\n", "resources.hosts=1000000 is too large: at most 100,000 hosts"),
    ],
)
def test_a_run_config_refuses_what_the_trainer_cannot_use_naming_the_line(tmp_path, old, new, message):
    path = _written(tmp_path)
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    line = path.read_text().splitlines().index(new.strip("\n")) + 1
    with pytest.raises(LadderError, match=re.escape(f"{path}: {message}") + rf".* \(line {line}\)$"):
        RunConfig.load(path)
    res = run("spec", str(path))
    assert res.exit_code == 2 and message in " ".join(res.stderr.split())
    assert RunConfig.load(_written(tmp_path / "again")).replace(seed=2**32 - 1).seed == 2**32 - 1  # the top of the range


def test_a_folder_where_the_plan_writes_a_file_is_refused_before_any_file_is_written(tmp_path):
    for blocked in (f"{plan(load_recipe('micro-cpu')).rungs[1].name}.yaml", "launch.sh"):
        out = tmp_path / blocked.replace(".", "-")
        (out / blocked).mkdir(parents=True)
        res = run("plan", "micro-cpu", "--out", str(out))
        assert res.exit_code == 2, res.output
        assert res.stderr.strip() == (f"error: --out {out}: {blocked} there is a folder, where this writes a file; move "
                                      "it, or give another folder")
        assert [p.name for p in out.iterdir()] == [blocked]  # nothing written


def test_the_launch_script_is_executable(tmp_path):
    for umask, mode in ((0o022, 0o755), (0o077, 0o700)):
        before = os.umask(umask)
        try:
            assert run("plan", "micro-cpu", "--out", str(tmp_path / oct(umask))).exit_code == 0
        finally:
            os.umask(before)
        assert stat.S_IMODE((tmp_path / oct(umask) / "launch.sh").stat().st_mode) == mode
        assert stat.S_IMODE(next((tmp_path / oct(umask)).glob("*.yaml")).stat().st_mode) == 0o666 & ~umask


def test_a_launch_script_of_the_users_own_is_not_written_over(tmp_path):
    (tmp_path / "launch.sh").write_text("#!/bin/sh\nmy-own-trainer --all\n")
    res = run("plan", "micro-cpu", "--out", str(tmp_path))
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == (f"error: {tmp_path / 'launch.sh'}: a launch script `ladder plan` did not write (it "
                                  "does not start with the plan's header); writing the plan would replace it: move it "
                                  "away, or give --out another folder (nothing was written)")
    assert [p.name for p in tmp_path.iterdir()] == ["launch.sh"]
    assert (tmp_path / "launch.sh").read_text() == "#!/bin/sh\nmy-own-trainer --all\n"
    (tmp_path / "launch.sh").unlink()
    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0
    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0  # its own: written again


def test_planning_again_keeps_a_hand_edit_of_the_plan(tmp_path):
    """A config or launch.sh edited since `ladder plan` wrote it is not replaced by planning again there (a peak LR
    set by hand, a line of the user's in launch.sh); a plan written again over its own files, another plan's
    included, replaces them."""
    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0
    assert run("plan", "micro-cpu", "--set", "tpp=8", "--out", str(tmp_path)).exit_code == 0  # its own: replaced
    rung = sorted(tmp_path.glob("*.yaml"))[0]
    for path in (rung, tmp_path / "launch.sh"):
        edited = path.read_text() + "# mine\n"
        path.write_text(edited)
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        res = run("plan", "micro-cpu", "--out", str(tmp_path))
        assert res.exit_code == 2 and res.stderr.strip() == (
            f"error: {tmp_path}: {path.name} was edited since `ladder plan` wrote it; planning again would replace "
            "the edit: give --out another folder, or move the edited files away (nothing was written)"), res.output
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
        path.unlink()
    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0


def test_a_config_of_the_users_at_a_plans_name_is_not_written_over_without_the_plans_record(tmp_path):
    """A YAML at the name of one of the plan's configs that no plan wrote there (a hand-edited plan copied without its
    hidden record, a file of the user's) is refused, nothing written; a copy that is the plan's, byte for byte, is
    its own."""
    planned = tmp_path / "plan"
    assert run("plan", "micro-cpu", "--out", str(planned)).exit_code == 0
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in planned.glob("*.yaml"):
        (copy / path.name).write_bytes(path.read_bytes())
    assert run("plan", "micro-cpu", "--out", str(copy)).exit_code == 0  # the same configs: written again
    (copy / ".ladder-plan.json").unlink()
    rung = sorted(copy.glob("*.yaml"))[0]
    rung.write_text(rung.read_text().replace("peak_lr:", "peak_lr: 0.01 #", 1))
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    res = run("plan", "micro-cpu", "--out", str(copy))
    assert res.exit_code == 2 and " ".join(res.stderr.split()) == (
        f"error: {copy}: {rung.name}: no record that `ladder plan` wrote it there (.ladder-plan.json is missing or "
        "does not list it: configs copied without it, or a folder planned by an earlier version), and it differs from "
        "what this plan writes; planning would replace it: give --out another folder, or move it away (nothing was "
        "written)"), res.output
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before


def test_spec_of_a_run_config_without_its_spec_says_the_spec_is_missing(tmp_path):
    path = _written(tmp_path)
    data = yaml.safe_load(path.read_text())
    del data["spec"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    for command in ("spec", "train"):
        res = run(command, str(path))
        assert res.exit_code == 2 and res.stderr.strip() == f"error: {path}: missing required field 'spec' (line 1)"


def test_an_edited_coordinates_block_is_warned_of_not_ignored(tmp_path):
    import warnings

    from ladder.errors import LadderWarning

    path = _written(tmp_path)
    text = path.read_text()
    cfg = RunConfig.load(path)
    steps = f"  stop_after_steps: {cfg.stop_after_steps}\n"
    assert text.count(steps) == 1
    path.write_text(text.replace(steps, "  stop_after_steps: 5000\n"))
    line = path.read_text().splitlines().index("  stop_after_steps: 5000") + 1
    said = (f"{path}: coordinates.stop_after_steps: 5000 is not what the config gives ({cfg.stop_after_steps}); the "
            "coordinates block is computed from the config's fields and never read (change a run through them: "
            f"schedule.total_steps, batch_size, seq_len, spec, ...); it is written again with the run (line {line})")
    with pytest.warns(LadderWarning) as caught:
        assert RunConfig.load(path) == cfg  # read as the fields say: a config whose fields were edited is one to train
    assert [str(w.message) for w in caught] == [said]
    res = run("spec", str(path))
    assert res.exit_code == 0 and " ".join(res.stderr.split()) == " ".join(f"warning: {said}".split())
    data = yaml.safe_load(path.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error", LadderWarning)
        assert RunConfig.from_dict(data) == cfg  # a store's copy of a logged config: the block is dropped, as before
    data["coordinates"] |= {"stop_after_steps": cfg.stop_after_steps, "steps": 5000}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.warns(LadderWarning, match=r"coordinates.steps: not a coordinate \(they are name, group, role, "):
        RunConfig.load(path)
    # numbers written rounded (or as YAML 1.1 text) within the tolerance, and the schedule's prose, are the same
    del data["coordinates"]["steps"]
    coords = data["coordinates"]
    coords |= {"fit_flops_per_token": coords["fit_flops_per_token"] * (1 + 1e-9), "peak_lr": f"{coords['peak_lr']:.12e}",
               "planned_tokens": float(coords["planned_tokens"]), "schedule": "linear decay"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LadderWarning)
        assert RunConfig.load(path) == cfg
        del data["coordinates"]
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        assert RunConfig.load(path) == cfg


@pytest.mark.parametrize("recipe", ["micro-cpu", "marin-moe-hero"])
@pytest.mark.parametrize("sets", [[], ["schedule.seq_phases=[{start_fraction: 0.5, seq_len: 64}]"],
                                  ["schedule.decay=wsd", "schedule.cooldown_fraction=0.2"],
                                  ["hero_edits=[{kind: shorten, at_fraction: 0.5, to_fraction: 0.8}, "
                                   "{kind: cooldown, at_fraction: 0.6, to_fraction: 0.8, shape: cosine}]"]],
                         ids=["as-is", "seq-phases", "wsd", "two-hero-edits"])
def test_every_planned_config_reads_back_with_its_coordinates(tmp_path, recipe, sets):
    import warnings

    from ladder.errors import LadderWarning

    args = [x for s in sets for x in ("--set", s)]
    res = run("plan", recipe, *args, "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    expected = plan(override(load_recipe(recipe), sets=sets))
    for cfg in expected.runs():
        with warnings.catch_warnings():
            warnings.simplefilter("error", LadderWarning)  # read back without a word
            assert RunConfig.load(tmp_path / f"{cfg.name}.yaml") == cfg
        assert "coordinates" in load_yaml(tmp_path / f"{cfg.name}.yaml")
        assert run("spec", str(tmp_path / f"{cfg.name}.yaml"), "--format", "json").exit_code == 0


def test_a_plan_whose_write_fails_leaves_the_plan_before_and_names_the_file(tmp_path, monkeypatch):
    """A full disk as the third config is written: the folder keeps the earlier plan whole (not the new rungs beside
    its old hero, which `ladder train --ladder` would train as one ladder), the error names the file, and the same
    plan is written once there is room."""
    import errno

    assert run("plan", "micro-cpu", "--out", str(tmp_path)).exit_code == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real, calls = Path.write_text, []

    def full_disk(self, text, *args, **kwargs):
        calls.append(self)
        if len(calls) == 3:
            real(self, text[: len(text) // 2], *args, **kwargs)  # half of it on disk, then no room
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    res = run("plan", "micro-cpu", "--set", "tpp=8", "--out", str(tmp_path))
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {tmp_path}/") and res.stderr.strip().endswith(
        ".yaml: No space left on device"), res.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing staged left behind either
    monkeypatch.setattr(Path, "write_text", real)
    assert run("plan", "micro-cpu", "--set", "tpp=8", "--out", str(tmp_path)).exit_code == 0
    assert {p.name for p in tmp_path.iterdir()} == set(before)
    assert all(load_yaml(p)["tpp"] == 8 for p in tmp_path.glob("*.yaml"))
    # stopped between the renames (Ctrl-C): half the folder is the new plan, and its record is the old one's; the
    # plan's own files are no edit of a user's, so the same plan is written again
    import ladder.files

    renames, rename = [], ladder.files.os.replace

    def stopped(a, b):
        renames.extend([b] if Path(b).parent == tmp_path else [])  # into the folder (not each file into the stage)
        if len(renames) == 3:
            raise KeyboardInterrupt
        return rename(a, b)

    monkeypatch.setattr(ladder.files.os, "replace", stopped)
    assert run("plan", "micro-cpu", "--set", "tpp=9", "--out", str(tmp_path)).exit_code != 0
    monkeypatch.setattr(ladder.files.os, "replace", rename)
    assert sorted({load_yaml(p)["tpp"] for p in tmp_path.glob("*.yaml")}) == [8, 9]  # a mixed folder
    res = run("plan", "micro-cpu", "--set", "tpp=9", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert all(load_yaml(p)["tpp"] == 9 for p in tmp_path.glob("*.yaml"))


def test_too_few_rungs_and_rungs_too_short_for_the_heros_schedule_shape_are_warned_about():
    """A rung of a few dozen steps, whose one step of warmup and decay moves its LR shape off the hero's: the
    per-fraction law leaves it out, which `ladder predict` said only after the ladder was trained."""
    res = run("plan", "micro-cpu", "--tpp", "3", "--seq-len", "32", "--set", "batch_sequences=8", "--set",
              "step_multiple=1", "--widths", "16,32,32", "--depths", "1,1,2", "--set", "hero.d_model=48",
              "--set", "hero.n_layers=2", "--set", "hero_edits=[]", "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    steps = {r["name"]: r["steps"] for r in data["rungs"]}
    short = [w for w in data["warnings"] if w.startswith("the LR schedule of rung")]
    assert len(short) == 1 and f"12K-A2.2K ({steps['12K-A2.2K']} steps: " in short[0]
    assert "will leave it out; give the short rungs more steps" in short[0]
    assert not any(name in short[0] for name in steps if name != "12K-A2.2K")
    assert any(w.startswith("3 rungs: predict chooses its law by holding out the largest") for w in data["warnings"])
    normal = json.loads(run("plan", "micro-cpu", "--format", "json").stdout)
    assert len(normal["rungs"]) == 4 and normal["warnings"] == []

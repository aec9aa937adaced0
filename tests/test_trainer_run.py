"""Whole training runs of tiny configs: the run directory (run.yaml, metrics.jsonl, status.json,
checkpoints, wandb's own offline files), both data sources, and configs the trainer refuses."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from ladder import RunConfig, load_recipe, runfiles
from ladder import metrics as keys
from ladder.cli import app
from ladder.config.plan import override, plan
from ladder.config.schedule import SeqPhase
from ladder.errors import LadderError
from trainer_jax import train
from trainer_jax.checkpoint import check_compatible, checkpoint_meta
from trainer_jax.data import markov_chain
from trainer_jax.sinks import WandbSink, check_wandb_login, truncate_metrics, wandb_mode, wandb_run_id

ROOT = Path(__file__).resolve().parents[1]


def tiny(tmp_path: Path, *sets: str, tpp: float = 0.5) -> RunConfig:
    """The micro-cpu recipe's smallest rung made tiny: width 32, 2 layers, 8 × 32 tokens per step."""
    recipe = override(load_recipe("micro-cpu"), widths=[32], depths=[2], seq_len=32, sets=[
        f"tpp={tpp}", "batch_sequences=8", "step_multiple=1", "data.eval_sequences=12", "logging.wandb=disabled",
        "logging.peak_flops=1e11", "checkpoint.every_steps=10", "eval_every_fraction=0.1", *sets,
    ])
    return plan(recipe).rungs[0].replace(run_dir=str(tmp_path / "run"))


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / runfiles.METRICS_FILE).read_text().splitlines()]


def steps_with(records: list[dict], key: str) -> list[int]:
    return [r["step"] for r in records if key in r]


def wandb_records(path: Path) -> list:
    """The protobuf records of a wandb run file (a LevelDB-style log of 32 KiB blocks)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, records, pending = 7, 32768, [], b""
    while pos + 7 <= len(data):
        room = block - pos % block
        if room < 7:  # a block's tail too short for a header is padding
            pos += room
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def test_a_run_leaves_the_documented_run_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    cfg = tiny(tmp_path, "logging.wandb=auto")  # auto without a key: offline
    T = cfg.stop_after_steps
    result = train(cfg, progress=False)
    run_dir = Path(cfg.run_dir)

    assert RunConfig.load(run_dir / runfiles.CONFIG_FILE) == cfg
    status = json.loads((run_dir / runfiles.STATUS_FILE).read_text())
    assert status["state"] == "finished" and status["step"] == T
    records = read_metrics(run_dir)
    assert steps_with(records, keys.TRAIN_LOSS) == list(range(1, T + 1))
    assert steps_with(records, keys.EVAL_LOSS) == cfg.eval_steps()
    assert steps_with(records, keys.EVAL_DROPLESS_LOSS) == cfg.eval_steps()
    for r in records:
        assert r["tokens"] == r["step"] * cfg.tokens_per_step
    train_lines = [r for r in records if keys.TRAIN_LOSS in r]
    for key in (keys.TRAIN_CE, keys.GRAD_NORM, keys.DROP_FRACTION, keys.LOAD_BALANCING_LOSS,
                keys.ROUTER_Z_LOSS, keys.TOKENS_PER_SECOND, keys.MFU, keys.TOKENS_SEEN,
                "moe/load_max_over_mean", "moe/router_entropy", "throughput/model_flops_per_second"):
        assert all(math.isfinite(r[key]) for r in train_lines), key
    lrs = np.array([r[keys.LEARNING_RATE] for r in train_lines])
    np.testing.assert_allclose(lrs, cfg.schedule.lrs(), rtol=1e-6)
    mfu = train_lines[-1]
    assert mfu[keys.MFU] == pytest.approx(mfu["throughput/model_flops_per_second"] / 1e11)
    # it learns: from about ln(256) = 5.55 nats to well below it
    assert train_lines[0][keys.TRAIN_CE] > 5.0
    assert result.eval_loss == records[-1][keys.EVAL_LOSS] < 4.0
    saved = sorted(int(p.name) for p in (run_dir / runfiles.CHECKPOINT_DIR).iterdir() if p.name.isdigit())
    assert saved == [20, T]  # every 10 steps and at the end, the newest `keep` = 2 kept
    manifest = json.loads((run_dir / "data_manifest.json").read_text())
    assert manifest["digest"] and len(manifest["files"]) > 100

    # wandb's own offline run file: the stable id, the coordinates, the full config, the history
    files = list((run_dir / runfiles.WANDB_DIR).glob(f"offline-run-*/run-{wandb_run_id(cfg)}.wandb"))
    assert len(files) == 1
    recs = wandb_records(files[0])
    run = next(r.run for r in recs if r.WhichOneof("record_type") == "run")
    assert (run.run_id, run.run_group, run.display_name, run.project) == (
        wandb_run_id(cfg), "micro-cpu", cfg.name, "micro-cpu")
    config = {i.key: json.loads(i.value_json) for i in run.config.update}
    assert config["stop_after_steps"] == T and config["fit_flops_per_token"] == cfg.fit_flops_per_token
    assert config["run_config"]["spec"]["d_model"] == 32
    history = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
               for r in recs if r.WhichOneof("record_type") == "history"]
    assert [h["_step"] for h in history] == list(range(1, T + 1))  # train and eval merged per step
    evals = {h["_step"]: h["eval/loss"] for h in history if "eval/loss" in h}
    assert evals == {r["step"]: pytest.approx(r[keys.EVAL_LOSS]) for r in records if keys.EVAL_LOSS in r}


def test_markov_run_stays_above_its_entropy_floor(tmp_path):
    cfg = tiny(tmp_path, "data.source=markov", "data.markov_concentration=0.05")
    floor = markov_chain(cfg.spec.vocab_size, 0.05, cfg.data.seed)[2]
    result = train(cfg, progress=False)
    records = read_metrics(Path(cfg.run_dir))
    evals = [r for r in records if keys.EVAL_LOSS in r]
    assert all(r["data/entropy_floor"] == floor for r in evals)
    assert floor < result.eval_loss < evals[0][keys.EVAL_LOSS] - 0.3


def test_refused_configs_fail_before_any_compute(tmp_path):
    cfg = tiny(tmp_path)
    phases = cfg.replace(schedule=dataclasses.replace(cfg.schedule, seq_phases=(SeqPhase(0.5, 64),)))
    with pytest.raises(LadderError, match="sequence-length phases are not supported"):
        train(phases, progress=False)
    with pytest.raises(LadderError, match="stdlib_text is bytes and needs vocab_size >= 256"):
        train(tiny(tmp_path, "arch.vocab_size=128"), progress=False)
    assert not Path(cfg.run_dir).exists()  # nothing was written


def test_a_checkpoint_only_resumes_its_own_config(tmp_path):
    cfg = tiny(tmp_path, tpp=0.3)
    train(cfg, progress=False)
    with pytest.raises(LadderError, match="trained to its last step .*: it is finished; to train it again, choose"):
        train(cfg, progress=False)
    with pytest.raises(LadderError, match=r"different run config: seed differ"):
        train(cfg.replace(seed=1), resume=True, progress=False)
    # another run in the same run_dir, not resumed: said to be another run's, not "this run ... finished"
    with pytest.raises(LadderError, match=rf"step {cfg.stop_after_steps}\) was written by a different run config: seed"):
        train(cfg.replace(seed=1, name="other"), progress=False)
    with pytest.raises(LadderError, match="spec"):
        train(tiny(tmp_path, "arch.top_k=1", tpp=0.3), resume=True, progress=False)
    again = train(cfg, resume=True, progress=False)  # finished already: nothing to do
    assert again.resumed_from == cfg.stop_after_steps and again.train_losses == ()
    with open(Path(cfg.run_dir) / "metrics.jsonl", "a") as f:
        f.write('{"step": 34')  # a torn last line (a kill mid-write, a disk that filled)
    torn = train(cfg, resume=True, progress=False)
    assert torn.resumed_from == cfg.stop_after_steps and torn.eval_loss == again.eval_loss is not None

    # A schedule edited after the checkpoint's step may continue it; one edited before may not.
    meta = checkpoint_meta(cfg, {}, 1)
    later = checkpoint_meta(cfg.replace(schedule=cfg.schedule.shorten(10, 14)), {}, 1)
    check_compatible(meta, later, 11, tmp_path)  # the edit keeps step 10's LR; step 11 is the first changed
    with pytest.raises(LadderError, match="schedule"):
        check_compatible(meta, later, 12, tmp_path)


def test_a_run_folder_without_checkpoints_is_never_trained_over(tmp_path):
    """Checkpoints removed once a run finished (to free the disk): the run is finished, not trained again from
    step 0 over its metrics; an unfinished run that lost them is refused; one stopped before its first checkpoint
    starts over only with --resume, as its stop said."""
    import shutil

    cfg = tiny(tmp_path, tpp=0.3)
    T, run_dir = cfg.stop_after_steps, Path(cfg.run_dir)
    assert min(train_module().checkpoint_steps(cfg)) == 10 < T
    first = train(cfg, progress=False)
    shutil.rmtree(run_dir / runfiles.CHECKPOINT_DIR)
    metrics = (run_dir / runfiles.METRICS_FILE).read_bytes()
    with pytest.raises(LadderError, match=rf"trained to its last step \({T}\): it is finished"):
        train(cfg, progress=False)  # as with its last checkpoint there
    again = train(cfg, resume=True, progress=False)
    assert (again.resumed_from, again.train_losses, again.eval_loss) == (T, (), first.eval_loss)
    assert json.loads((run_dir / runfiles.STATUS_FILE).read_text())["state"] == "finished"

    lost = rf"holds metrics up to step {T}, its status says (crashed|finished) at step (10|{T}), but its checkpoints are gone"
    runfiles.write_status(run_dir, "crashed", 10)  # past its first checkpoint: it had one
    for resume in (False, True):
        with pytest.raises(LadderError, match=lost + ".*Use a fresh run_dir to keep them, or remove"):
            train(cfg, resume=resume, progress=False)
    runfiles.write_status(run_dir, "finished", T)
    with pytest.raises(LadderError, match=lost):  # finished, but with another config
        train(cfg.replace(seed=1), resume=True, progress=False)
    assert (run_dir / runfiles.METRICS_FILE).read_bytes() == metrics  # nothing above touched them

    runfiles.write_status(run_dir, "crashed", 5)  # stopped before its first checkpoint
    with pytest.raises(LadderError, match=rf"holds metrics up to step {T} but no checkpoint to continue from: .*"
                       "pass --resume"):
        train(cfg, progress=False)
    assert (run_dir / runfiles.METRICS_FILE).read_bytes() == metrics
    restarted = train(cfg, resume=True, progress=False)
    assert restarted.resumed_from is None and len(restarted.train_losses) == T
    assert steps_with(read_metrics(run_dir), keys.TRAIN_LOSS) == list(range(1, T + 1))


def train_module():
    import importlib

    return importlib.import_module("trainer_jax.train")  # the module (the package exports its function `train`)


def test_user_errors_are_one_line_from_both_entry_points(tmp_path):
    data = tiny(tmp_path).to_dict()
    data["optimizer"]["betta1"] = 0.9
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "trainer_jax", str(bad)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "betta1" in text)
    assert proc.stderr.strip().splitlines() == [
        f"error: {bad}: optimizer: unknown field 'betta1' (did you mean 'beta1'?) (line {line})"]
    res = CliRunner().invoke(app, ["train", str(bad)])
    assert res.exit_code == 2 and "unknown field 'betta1'" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["train"])
    assert res.exit_code == 2 and "either one RUN.yaml or --ladder DIR" in res.output


@pytest.mark.slow
def test_ladder_command_trains_a_planned_folder_and_skips_finished_runs(tmp_path):
    runner = CliRunner()
    out = tmp_path / "plan"
    res = runner.invoke(app, ["plan", "micro-cpu", "--out", str(out), "--widths", "32,48", "--depths", "2,2",
                              "--seq-len", "32", "--set", "tpp=0.3", "--set", "batch_sequences=8", "--set", "step_multiple=1",
                              "--set", "logging.wandb=disabled", "--set", "data.eval_sequences=8"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["train", "--ladder", str(out), "--rungs-only", "--no-progress"])
    assert res.exit_code == 0, res.output
    rungs = [RunConfig.load(p) for p in sorted(out.glob("*.yaml")) if not p.name.startswith("hero")]
    assert len(rungs) == 2
    losses = []
    for cfg in rungs:
        run_dir = out / cfg.run_dir  # relative run_dir: relative to the config's folder
        assert json.loads((run_dir / runfiles.STATUS_FILE).read_text())["state"] == "finished"
        losses.append(read_metrics(run_dir)[-1][keys.EVAL_LOSS])
    hero_dir = out / next(RunConfig.load(p) for p in out.glob("hero-*.yaml")).run_dir
    assert not hero_dir.exists()
    before = [(out / c.run_dir / runfiles.METRICS_FILE).stat().st_mtime_ns for c in rungs]
    res = runner.invoke(app, ["train", "--ladder", str(out), "--rungs-only"])
    assert res.exit_code == 0 and res.output.count("finished already") == 3  # each run, and the summary
    assert f"Trained 0 runs of {out} (2 finished already):" in " ".join(res.output.split())
    assert [(out / c.run_dir / runfiles.METRICS_FILE).stat().st_mtime_ns for c in rungs] == before
    assert all(f"{loss:.4f}" in res.output for loss in losses)
    # a finished run's config edited where its training is not (how often it checkpoints): its trainer finds it
    # finished, and nothing is counted as trained
    import dataclasses

    path = next(p for p in sorted(out.glob("*.yaml")) if not p.name.startswith("hero"))
    cfg = RunConfig.load(path)
    dataclasses.replace(cfg, checkpoint=dataclasses.replace(cfg.checkpoint, every_steps=cfg.checkpoint.every_steps + 1)
                        ).save(path)
    res = runner.invoke(app, ["train", "--ladder", str(out), "--rungs-only", "--no-progress"])
    assert res.exit_code == 0, res.output  # (the trainer, a process of its own, says "already finished")
    assert f"Trained 0 runs of {out} (2 finished already):" in " ".join(res.output.split())


@pytest.mark.parametrize("setting, env, expected", [
    ("auto", {}, "offline"),
    ("auto", {"WANDB_API_KEY": "x"}, "online"),
    ("offline", {"WANDB_API_KEY": "x"}, "offline"),
    ("online", {"WANDB_MODE": "offline"}, "offline"),
    ("disabled", {"WANDB_MODE": "dryrun"}, "offline"),
    ("offline", {"WANDB_MODE": "disabled"}, "disabled"),
])
def test_wandb_mode_follows_the_config_the_key_and_wandb_mode(monkeypatch, setting, env, expected):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert wandb_mode(setting) == expected


def test_a_bad_wandb_mode_is_a_user_error(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "sometimes")
    with pytest.raises(LadderError, match="WANDB_MODE='sometimes' is not one of online, offline, disabled"):
        wandb_mode("auto")


def test_wandb_online_without_a_key_is_a_user_error_before_the_run_folder_is_made(tmp_path):
    cfg = tiny(tmp_path, "data.source=markov", "logging.wandb=online")
    path = cfg.save(tmp_path / "run.yaml")
    # No key anywhere wandb looks (environment, ~/.netrc, its settings), so no network either.
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env |= {"HOME": str(tmp_path / "home"), "NETRC": str(tmp_path / "home" / ".netrc")}
    proc = subprocess.run([sys.executable, "-m", "trainer_jax", str(path), "--no-progress"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: logging.wandb=online needs a wandb API key and none is configured: set WANDB_API_KEY or run "
        "`wandb login`, or use logging.wandb=offline (upload later with `wandb sync`)"]
    assert not Path(cfg.run_dir).exists()


def test_wandb_online_by_wandb_mode_without_a_key_says_to_set_wandb_mode_not_the_config(tmp_path, monkeypatch):
    """WANDB_MODE wins over logging.wandb: the config's setting changes nothing there."""
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setattr("trainer_jax.sinks._wandb_credentials_found", lambda: False)
    with pytest.raises(LadderError, match=r"^WANDB_MODE=online needs a wandb API key and none is configured: set "
                                          r"WANDB_API_KEY or run `wandb login`, or set WANDB_MODE=offline \(it wins "
                                          r"over the config's logging.wandb\) \(upload later"):
        check_wandb_login("offline", wandb_mode("offline"))


def test_wandb_online_with_a_key_passes_and_a_refused_login_is_a_user_error(tmp_path, monkeypatch):
    import wandb

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    check_wandb_login("online", "online")  # found: wandb is never asked, nothing raised
    monkeypatch.delenv("WANDB_API_KEY")
    check_wandb_login("offline", "offline")

    def refuse(**kwargs):
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.setattr(wandb, "init", refuse)
    with pytest.raises(LadderError, match=r"^wandb online could not start: No API key configured\. Use `wandb login` "
                       r"to log in \(or set WANDB_API_KEY, or use logging\.wandb=offline\)$"):
        WandbSink(tiny(tmp_path), tmp_path / "run", "online", {})


@pytest.mark.parametrize("given, where, message", [
    ("--run-dir", "afile", "is a file, not a folder; give a folder (new or holding this run)"),
    ("--run-dir", "afile/sub", "cannot create or write it (Not a directory); give a folder you can write to"),
    ("run_dir", "afile/sub", "cannot create or write it (Not a directory); give a folder you can write to"),
])
def test_a_run_dir_that_cannot_be_a_folder_is_a_user_error(tmp_path, capsys, given, where, message):
    from trainer_jax.__main__ import main

    (tmp_path / "afile").write_text("")
    cfg = tiny(tmp_path, "data.source=markov")
    if given == "run_dir":  # relative: taken from the config's folder
        path = cfg.replace(run_dir=where).save(tmp_path / "run.yaml")
        args = [str(path)]
    else:
        path = cfg.save(tmp_path / "run.yaml")
        args = [str(path), "--run-dir", str(tmp_path / where)]
    assert main([*args, "--no-progress"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: run_dir {tmp_path / where}: {message}"]
    assert (tmp_path / "afile").read_text() == ""


def test_the_trainer_says_an_edited_coordinates_block_as_ladder_does(tmp_path, capsys):
    from trainer_jax.__main__ import main

    (tmp_path / "afile").write_text("")
    cfg = tiny(tmp_path, "data.source=markov").replace(run_dir="afile")  # refused after the config is read
    path = cfg.save(tmp_path / "run.yaml")
    steps = f"  stop_after_steps: {cfg.stop_after_steps}\n"
    path.write_text(path.read_text().replace(steps, "  stop_after_steps: 5\n"))
    assert main([str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith(f"warning: {path}: coordinates.stop_after_steps: 5 is not what the "
                                               f"config gives ({cfg.stop_after_steps})")
    assert err[1].startswith("error: run_dir ")


ORBAX_ENOSPC = ('RESOURCE_EXHAUSTED: Error writing "params.wq/0.0" in OCDBT database at local file "/x/10.orbax-checkpoint'
                '-tmp/": Failed to write 208515 bytes to file 23: No space left on device [os_error_code=\'28\']')
"""What orbax raises (a ValueError from tensorstore) when the disk fills while it saves."""


@pytest.mark.parametrize("in_place", [True, False])
def test_a_disk_that_fills_while_training_is_one_line_and_the_run_reads_as_stopped(tmp_path, capfd, monkeypatch,
                                                                                  in_place):
    """The disk fills at the first checkpoint: after orbax's own reports, the trainer says in one line which run
    folder is full and what to do (exit 2, no "this is a bug"), and the run is marked crashed, in place where the
    atomic write has no room for its temporary file; where even that fails, it says so."""
    import errno

    import orbax.checkpoint as ocp

    from trainer_jax.__main__ import main

    full = []

    def save(self, step, *args, **kwargs):
        os.write(2, b"Traceback (most recent call last):\n  orbax's thread\nValueError: RESOURCE_EXHAUSTED\n")
        full.append(step)
        raise ValueError(ORBAX_ENOSPC)

    write_status = runfiles.write_status

    def status_unless_full(*args):
        if full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # no room for the atomic write's temporary file
        write_status(*args)

    def refused(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(ocp.CheckpointManager, "save", save)
    monkeypatch.setattr(runfiles, "write_status", status_unless_full)
    if not in_place:
        monkeypatch.setattr(runfiles, "_overwrite_in_place", refused)
    monkeypatch.delenv(runfiles.RESUME_HINT_ENV, raising=False)
    cfg = tiny(tmp_path, "data.source=markov")
    path = cfg.save(tmp_path / "run.yaml")
    run_dir = Path(cfg.run_dir)
    assert main([str(path), "--no-progress"]) == 2
    status = json.loads((run_dir / runfiles.STATUS_FILE).read_text())
    said = ("the run is marked crashed" if in_place else
            f"even its {runfiles.STATUS_FILE} could not be written, so the run still reads as running, though no "
            "trainer trains it")
    err = capfd.readouterr().err
    assert err.splitlines()[-1] == (
        f"error: run_dir {run_dir}: the disk is full (No space left on device: {run_dir / runfiles.CHECKPOINT_DIR}"
        f"/10); {said}; free space there, then continue it with --resume")
    assert "this is a bug" not in err and err.count("error:") == 1
    assert full == [10]
    assert status == {"state": "crashed" if in_place else "running", "step": 9 if in_place else status["step"],
                      "updated": status["updated"]}


def test_a_checkpoint_save_the_disk_refuses_is_an_os_error_naming_its_folder(tmp_path, monkeypatch, caplog):
    import errno
    import logging
    import sys

    import orbax.checkpoint as ocp

    from trainer_jax.checkpoint import Checkpointer, disk_error

    raised: list[Exception] = []

    class Callback:  # a writer's callback into a closed event loop: an error no one can raise
        def __del__(self):
            raise RuntimeError(f"Event loop is closed ({len(raised)})")

    def save(self, step, *args, **kwargs):
        logging.getLogger("absl").error("writer thread %d: %s", step, raised[0] if raised else "a note")
        Callback()
        if raised:
            raise raised[0]

    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda report: unraisable.append(str(report.exc_value)))

    monkeypatch.setattr(ocp.CheckpointManager, "save", save)
    ckpt = Checkpointer(tmp_path, keep=1)
    with caplog.at_level(logging.ERROR, logger="absl"):
        ckpt.save(1, {}, {})
        raised.append(ValueError("a tree orbax cannot save"))
        with pytest.raises(ValueError, match="cannot save"):  # a failure that is no disk's: as it was
            ckpt.save(2, {}, {})
        raised[0] = KeyboardInterrupt()  # a stop during the save: what was held goes on too
        with pytest.raises(KeyboardInterrupt):
            ckpt.save(3, {}, {})
        raised[0] = ValueError(ORBAX_ENOSPC)
        with pytest.raises(OSError) as refused:
            ckpt.save(4, {}, {})
    assert (refused.value.errno, refused.value.filename) == (errno.ENOSPC, str(tmp_path / "4"))
    # what orbax's writers log goes on, but for a refused write: said in one line, not once per writer thread
    assert [r.getMessage() for r in caplog.records] == ["writer thread 1: a note", "writer thread 2: a tree orbax cannot save",
                                                       "writer thread 3: "]
    assert unraisable == ["Event loop is closed (0)", "Event loop is closed (1)", "Event loop is closed (1)"]
    ckpt.close()
    quota = OSError(errno.EDQUOT, "Disk quota exceeded", "/x")
    assert disk_error(quota, tmp_path) is quota and disk_error(ValueError("no code"), tmp_path) is None


def test_resume_truncates_the_metrics_file_to_the_checkpoint(tmp_path):
    path = tmp_path / runfiles.METRICS_FILE
    lines = [{"step": s, "tokens": s, "time": 0.0, "train/loss": 1.0 / s} for s in range(1, 8)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"step": 8, "tok')  # torn last line
    assert truncate_metrics(path, 5) == 5
    *kept, marker = [json.loads(x) for x in path.read_text().splitlines()]
    assert kept == lines[:5]  # the metrics rows; readers skip the marker, which is no row
    assert marker == {"step": 5, runfiles.RESUME_KEY: 5, "time": marker["time"]}
    assert truncate_metrics(path, 3) == 3  # resumed again, from an earlier checkpoint
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x for x in rows if runfiles.RESUME_KEY not in x] == lines[:3]
    assert [x["step"] for x in rows if runfiles.RESUME_KEY in x] == [3]
    assert truncate_metrics(tmp_path / "missing.jsonl", 5) == 0


def test_a_sigterm_sent_twice_at_once_is_one_stop_and_a_second_stop_later_is_at_once(monkeypatch):
    """`ladder` killed outright: the parent-death SIGTERM may come twice within milliseconds, and the checkpoint the
    first one asked for must still be written; a second stop a while later, or Ctrl-C after SIGTERM, stops at once."""
    import importlib
    import signal

    import trainer_jax.__main__ as entry

    train = importlib.import_module("trainer_jax.train")  # the module (the package exports its function `train`)
    clock = [100.0]
    monkeypatch.setattr(entry, "_clock", lambda: clock[0])
    monkeypatch.setattr(entry, "_RECEIVED", [])
    train.STOP.clear()
    try:
        entry._interrupt(signal.SIGTERM, None)
        assert train.STOP.is_set()
        clock[0] += 0.019
        entry._interrupt(signal.SIGTERM, None)  # the same stop, sent again: no KeyboardInterrupt
        clock[0] += 0.9
        entry._interrupt(signal.SIGTERM, None)
        clock[0] += 0.9  # within a second of the one before, not of the first: a second stop
        with pytest.raises(KeyboardInterrupt):
            entry._interrupt(signal.SIGTERM, None)
        entry._RECEIVED.clear()
        train.STOP.clear()  # another run
        entry._interrupt(signal.SIGTERM, None)
        with pytest.raises(KeyboardInterrupt):
            entry._interrupt(signal.SIGINT, None)  # Ctrl-C after it, however soon
        train.SAVING.set()  # ... but for a checkpoint being written: the stop under way ends once it is saved
        monkeypatch.setattr(entry, "_WAITED", [])
        entry._interrupt(signal.SIGINT, None)
        with pytest.raises(KeyboardInterrupt):  # once: a save that hangs ends at the next stop
            entry._interrupt(signal.SIGINT, None)
        train.SAVING.clear()
        with pytest.raises(KeyboardInterrupt):
            entry._interrupt(signal.SIGINT, None)
    finally:
        train.STOP.clear()
        train.SAVING.clear()


def test_a_parent_death_sigterm_sent_twice_during_a_save_waits_for_it(monkeypatch):
    """Ctrl-C asked for the stop, then `ladder` is killed while the stop's checkpoint is written: its parent-death
    SIGTERM, sent twice, is one second stop, which waits for the save (the echo is of that SIGTERM, not of the
    Ctrl-C two seconds before); a stop after it ends the process."""
    import importlib
    import signal

    import trainer_jax.__main__ as entry

    train = importlib.import_module("trainer_jax.train")
    clock = [100.0]
    monkeypatch.setattr(entry, "_clock", lambda: clock[0])
    monkeypatch.setattr(entry, "_RECEIVED", [])
    monkeypatch.setattr(entry, "_WAITED", [])
    train.STOP.clear()
    try:
        entry._interrupt(signal.SIGINT, None)
        assert train.STOP.is_set()
        train.SAVING.set()
        clock[0] += 2.0
        entry._interrupt(signal.SIGTERM, None)  # waits for the save
        clock[0] += 0.019
        entry._interrupt(signal.SIGTERM, None)  # the same, sent again: no KeyboardInterrupt mid-save
        assert entry._WAITED == [signal.SIGTERM]
        clock[0] += 1.5
        with pytest.raises(KeyboardInterrupt):  # a third stop: at once, as a save that hangs must still end
            entry._interrupt(signal.SIGTERM, None)
    finally:
        train.STOP.clear()
        train.SAVING.clear()


def test_a_second_stop_before_the_trainer_has_loaded_ends_the_process(monkeypatch):
    """The first stop's KeyboardInterrupt may land in a callback that swallows it while JAX loads; a second stop then
    ends the process (nothing is trained yet), which must not train on with no parent."""
    import signal
    import sys
    import types

    import trainer_jax.__main__ as entry

    monkeypatch.setitem(sys.modules, "trainer_jax.train", types.ModuleType("trainer_jax.train"))  # half imported
    monkeypatch.setattr(entry, "_RECEIVED", [])
    def exit_now(code):
        raise SystemExit(code)

    monkeypatch.setattr(entry.os, "_exit", exit_now)
    with pytest.raises(KeyboardInterrupt):
        entry._interrupt(signal.SIGINT, None)
    with pytest.raises(SystemExit) as ended:
        entry._interrupt(signal.SIGTERM, None)  # the parent's death signal, after the swallowed Ctrl-C
    assert ended.value.code == 128 + signal.SIGTERM


def test_an_error_that_leaves_a_watched_training_stops_its_trainer(tmp_path):
    """Not only a Ctrl-C: any error while a trainer runs under `trainer_stops_with` (a bad --poll in the demo's loop,
    a full disk) stops it, as SIGTERM (its checkpoint saved), before the error goes on."""
    import signal
    import subprocess
    import sys

    from ladder.launch import trainer_stops_with

    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda s, f: (open(sys.argv[1], 'w').write(str(s)), sys.exit(143)))\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "got")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    with pytest.raises(ValueError, match="sleep length"), trainer_stops_with(proc):
        raise ValueError("sleep length must be non-negative")
    assert proc.returncode == 143 and (tmp_path / "got").read_text() == str(int(signal.SIGTERM))


def test_the_header_gives_exact_counts_and_the_published_one_apart():
    """14,848 is the micro rung's active count by the published convention; 15,008 the exact one: the header said
    the first as exact."""
    import importlib
    import types

    module = importlib.import_module("trainer_jax.train")
    cfg = plan(load_recipe("micro-cpu")).rungs[0]
    spec = cfg.spec
    source = types.SimpleNamespace(info={}, name="stdlib_text")
    mesh = types.SimpleNamespace(shape={"data": 1, "expert": 1})
    text = module._header(cfg, spec.total_params_exact(), mesh, source, 0)
    assert spec.active_params() != spec.active_params_exact()
    assert (f"{spec.total_params_exact():,} parameters, {spec.active_params_exact():,} active per token (exact counts; "
            f"{spec.active_params():,} active by the published count)") in text


def test_a_stop_swallowed_while_the_trainer_loads_stops_the_run_before_its_first_step(tmp_path, monkeypatch, capfd):
    """The first stop's KeyboardInterrupt, raised while JAX loads, can land in a callback that swallows it: the stop
    is kept all the same, and the run stops before its first step rather than training to its end."""
    import signal
    import types

    import trainer_jax.__main__ as entry
    import trainer_jax.mesh

    cfg = tiny(tmp_path)
    path = cfg.save(tmp_path / "run.yaml")
    real = sys.modules["trainer_jax.train"]

    class Collected:  # a callback Python calls and whose exception it swallows, as JAX's gc callback
        def __del__(self):
            entry._interrupt(signal.SIGTERM, None)

    def loading_and_swallowed(*args):  # the stop comes while the trainer is half imported
        monkeypatch.setitem(sys.modules, "trainer_jax.train", types.ModuleType("trainer_jax.train"))
        Collected()  # (collected at once: its KeyboardInterrupt goes to sys.unraisablehook)
        monkeypatch.setitem(sys.modules, "trainer_jax.train", real)

    monkeypatch.setattr(trainer_jax.mesh, "init_distributed", loading_and_swallowed)
    assert entry.main([str(path), "--no-progress"]) == 128 + signal.SIGTERM
    said = capfd.readouterr().err
    assert f"{cfg.name}: interrupted:" in said and "starts again from step 0" in said, said
    assert "Exception ignored" not in said and "Traceback" not in said  # the swallowed stop is no error to print
    assert not (Path(cfg.run_dir) / runfiles.METRICS_FILE).exists()  # not a step trained


def test_resume_into_a_folder_of_metrics_no_run_of_the_trainers_wrote_keeps_them(tmp_path):
    """Metrics in the run folder with no status and no checkpoint (a file of the user's): --resume (which `--ladder`
    and launch.sh always pass) refuses to train over them rather than start "from scratch" and drop them."""
    cfg = tiny(tmp_path)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True)
    mine = '{"step": 1, "my/own": 5}\n{"step": 2, "my/own": 6}\n'
    (run_dir / runfiles.METRICS_FILE).write_text(mine)
    with pytest.raises(LadderError, match=r"holds metrics up to step 2 but no status of a run \(status\.json\) and no "
                                          r"checkpoint: they are not a run this trainer stopped"):
        train(cfg, resume=True, progress=False)
    assert (run_dir / runfiles.METRICS_FILE).read_text() == mine and not (run_dir / runfiles.STATUS_FILE).exists()

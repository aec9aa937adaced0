"""A run killed with SIGKILL, resumed, stopped with SIGTERM and resumed again from its last checkpoint
ends exactly where an uninterrupted run ends, and its metrics file has every step once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ladder import load_recipe, runfiles
from ladder import metrics as keys
from ladder.config.plan import override, plan
from ladder.launch import trainer_env

ROOT = Path(__file__).resolve().parents[1]


def trainer(config: Path, env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trainer_jax", str(config), "--no-progress", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    return out


def lines(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / runfiles.METRICS_FILE).read_text().splitlines()]


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    recipe = override(load_recipe("micro-cpu"), widths=[32], depths=[2], seq_len=32, sets=[
        "tpp=2", "batch_sequences=8", "step_multiple=1", "data.eval_sequences=12", "logging.wandb=offline",
        "logging.peak_flops=1e11", "checkpoint.every_steps=10"])
    cfg = plan(recipe).rungs[0]
    T = cfg.stop_after_steps
    assert T >= 100
    # Identical programs in the three processes: compile once, share through the persistent cache.
    env = {**trainer_env(), "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "xla-cache"),
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    whole, killed = tmp_path / "whole.yaml", tmp_path / "killed.yaml"
    cfg.replace(run_dir="whole").save(whole)
    cfg.replace(run_dir="killed").save(killed)
    finish(trainer(whole, env))

    proc = trainer(killed, env)
    checkpoint = tmp_path / "killed" / runfiles.CHECKPOINT_DIR / "30"
    deadline = time.time() + 240
    while not checkpoint.is_dir() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    status = json.loads((tmp_path / "killed" / runfiles.STATUS_FILE).read_text())
    assert status["state"] == "running"  # killed mid-run: it could not say so
    reported = max(s for s in {*cfg.eval_steps(), 10, 20} if s < 30)  # every eval and checkpoint before step 30
    assert status["step"] >= reported, (status, sorted(cfg.eval_steps()))

    # A stop while the resumed run starts (loading, compiling): it ends at once, marked crashed, no crash of its own
    proc = trainer(killed, env, "--resume")
    head = ""
    while "resuming at step" not in head and proc.poll() is None:  # the header: loaded, about to compile its step
        head += proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM and "marked crashed" in out and "Traceback" not in out, head + out
    assert json.loads((tmp_path / "killed" / runfiles.STATUS_FILE).read_text())["state"] == "crashed"

    # A scheduler's stop (SIGTERM) on the resumed run: marked crashed, one line, no traceback.
    proc = trainer(killed, env, "--resume")
    checkpoint = tmp_path / "killed" / runfiles.CHECKPOINT_DIR / "40"
    while not checkpoint.is_dir() and proc.poll() is None and time.time() < deadline + 240:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and "interrupted: the run is marked crashed" in out and "Traceback" not in out, out
    saved = runfiles.last_checkpoint(tmp_path / "killed")
    assert saved >= 40 and f"continue it with --resume from its checkpoint at step {saved:,}" in out, out
    status = json.loads((tmp_path / "killed" / runfiles.STATUS_FILE).read_text())
    assert status["state"] == "crashed" and status["step"] == saved  # the stop saved where it stopped: nothing lost
    out = finish(trainer(killed, env, "--resume"))
    resumed_at = int(out.split("resuming at step ")[1].split()[0])
    assert 40 <= resumed_at < T
    assert f"finished {T} steps (resumed at {resumed_at}: {T - resumed_at} in " in out, out  # this call's steps told apart

    a, b = lines(tmp_path / "whole"), lines(tmp_path / "killed")
    for key in (keys.TRAIN_LOSS, keys.EVAL_LOSS, keys.EVAL_DROPLESS_LOSS):
        steps = [r["step"] for r in b if key in r]
        assert steps == [r["step"] for r in a if key in r]  # none missing, none twice
        assert len(set(steps)) == len(steps)
    assert [r["step"] for r in b if keys.TRAIN_LOSS in r] == list(range(1, T + 1))
    final_a = [r[keys.EVAL_LOSS] for r in a if keys.EVAL_LOSS in r]
    final_b = [r[keys.EVAL_LOSS] for r in b if keys.EVAL_LOSS in r]
    assert abs(final_a[-1] - final_b[-1]) < 1e-5
    assert max(abs(x - y) for x, y in zip(final_a, final_b)) < 1e-5  # every eval, before and after
    assert json.loads((tmp_path / "killed" / runfiles.STATUS_FILE).read_text())["state"] == "finished"
    # wandb continued the same run id in an offline run folder per attempt (four)
    runs = sorted((tmp_path / "killed" / runfiles.WANDB_DIR).glob("offline-run-*"))
    assert len(runs) == 4 and len({p.name.split("-", 3)[-1] for p in runs}) == 1


def test_a_second_trainer_on_a_run_folder_in_training_is_refused_and_touches_nothing(tmp_path):
    from ladder.files import held
    from trainer_jax.train import TRAINER_LOCK

    recipe = override(load_recipe("micro-cpu"), widths=[32], depths=[2], seq_len=32, sets=["tpp=2"])
    config = tmp_path / "run.yaml"
    plan(recipe).rungs[0].replace(run_dir="run").save(config)
    run_dir = tmp_path / "run"
    (run_dir / runfiles.STATUS_FILE).parent.mkdir()
    (run_dir / runfiles.STATUS_FILE).write_text('{"state": "running", "step": 7}')
    with held(run_dir / TRAINER_LOCK, "held by this test"):  # the first trainer, still training
        proc = trainer(config, trainer_env(), "--resume")
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2, out
    assert f"{run_dir}: another trainer is training this run" in out and "Traceback" not in out
    assert json.loads((run_dir / runfiles.STATUS_FILE).read_text()) == {"state": "running", "step": 7}
    assert sorted(p.name for p in run_dir.iterdir()) == sorted([TRAINER_LOCK, runfiles.STATUS_FILE])


def trainers_of(config: Path) -> list[int]:
    """Process ids of trainers training `config` (read from /proc)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"trainer_jax" in a for a in args) and str(config).encode() in args:  # -m, or run by `with_parent`
            pids.append(int(cmdline.parent.name))
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc to find the trainer")
def test_ladder_train_passes_a_stop_on_to_its_trainer_once_and_leaves_none_behind(tmp_path):
    recipe = override(load_recipe("micro-cpu"), widths=[32], depths=[2], seq_len=32, sets=[
        "tpp=50", "batch_sequences=8", "step_multiple=1", "data.eval_sequences=12", "checkpoint.every_steps=10"])
    config = tmp_path / "run.yaml"
    plan(recipe).rungs[0].replace(run_dir="run").save(config)
    metrics, status = tmp_path / "run" / runfiles.METRICS_FILE, tmp_path / "run" / runfiles.STATUS_FILE

    def ladder_train(*args: str) -> subprocess.Popen:  # its own session, as a terminal's job is its own group
        proc = subprocess.Popen([sys.executable, "-m", "ladder.entry", "train", str(config), "--no-progress", *args],
                                cwd=ROOT, env=trainer_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        deadline, before = time.time() + 240, metrics.read_text().count("\n") if metrics.exists() else 0
        while not (metrics.exists() and metrics.read_text().count("\n") >= before + 2) and proc.poll() is None:
            assert time.time() < deadline, "the trainer never started stepping"
            time.sleep(0.05)
        assert proc.poll() is None
        return proc

    # Ctrl-C in a terminal signals the job's whole group: the trainer hears it once, through `ladder`
    proc = ladder_train()
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out
    assert out.count("interrupted: the run is marked crashed") == 1 and "Traceback" not in out, out
    assert "add --resume to the command to continue it" in out, out  # a single config resumes with --resume
    assert f"{plan(recipe).rungs[0].name}: interrupted: the run is marked crashed" in out, out  # the run named
    saved = runfiles.last_checkpoint(tmp_path / "run")  # where it resumes from is said: a checkpoint, or step 0
    assert (f"from its checkpoint at step {saved:,}" if saved is not None else
            "(no checkpoint was saved yet, so it starts again from step 0)") in out, out
    assert json.loads(status.read_text())["state"] == "crashed" and trainers_of(config) == []
    # a scheduler's SIGTERM to `ladder` alone: passed on, the run marked crashed, no trainer left training
    proc = ladder_train("--resume")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "interrupted: the run is marked crashed; run the same command again to continue it" in out, out
    assert "Traceback" not in out, out
    assert json.loads(status.read_text())["state"] == "crashed" and trainers_of(config) == []
    # `ladder` killed with SIGKILL cannot pass anything on: its trainer stops as for SIGTERM, and leaves no lock
    proc = ladder_train("--resume")
    assert len(trainers_of(config)) == 1
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    deadline = time.time() + 180
    while trainers_of(config) and time.time() < deadline:
        time.sleep(0.1)
    assert trainers_of(config) == [] and json.loads(status.read_text())["state"] == "crashed"
    proc = ladder_train("--resume")  # not refused: no trainer holds the run
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 128 + signal.SIGTERM and "resuming at step" in out, out


def test_a_checkpoint_a_killed_trainer_was_writing_is_removed_before_the_run_resumes(tmp_path):
    from trainer_jax.checkpoint import TORN, Checkpointer

    torn = tmp_path / f"600{TORN}-1733300000"
    torn.mkdir(parents=True)
    (torn / "state").write_text("half")
    kept = tmp_path / "notes"  # anything else in the folder is left alone
    kept.mkdir()
    ckpt = Checkpointer(tmp_path, keep=2)
    assert not torn.exists() and kept.is_dir() and ckpt.latest_step() is None
    ckpt.close()

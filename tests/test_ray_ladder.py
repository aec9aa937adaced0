"""`ladder train --ladder plan/ --ray` on a local Ray instance with 2 CPUs, as a user runs it: two
rungs train at once into the same run folders and to the same losses as `ladder train` without Ray;
a run whose Ray worker is killed is retried from its checkpoint; Ctrl-C leaves both runs resumable;
the hero over two processes (one per placement-group bundle) gives the one-process losses."""

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
from ladder.config.runconfig import ResourcesConfig, RunConfig
from ladder.launch import trainer_env

LADDER = Path(sys.executable).parent / "ladder"
SMALL, LARGE = "28K-A7.4K", "51K-A16K"
RAY = ["--ray", "--ray-cpus", "2"]

pytest.importorskip("ray")


def write_plan(folder: Path) -> dict[str, RunConfig]:
    recipe = override(load_recipe("micro-cpu"), widths=[32, 48], depths=[1, 1], seq_len=32, sets=[
        "tpp=3", "batch_sequences=8", "step_multiple=1", "data.eval_sequences=8", "logging.wandb=disabled",
        "logging.peak_flops=1e11", "checkpoint.every_steps=10", "eval_every_fraction=0.25"])
    p = plan(recipe)
    for cfg in p.rungs:
        cfg.save(folder / f"{cfg.name}.yaml")
    return {cfg.name: cfg for cfg in p.rungs}


def ladder(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(LADDER), "train", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, code: int = 0) -> tuple[str, str]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == code, (out[-3000:], err[-3000:])
    return out, err


def records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / runfiles.METRICS_FILE).read_text().splitlines()]


def values(run_dir: Path, key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in records(run_dir) if key in r]


def launched(run_dir: Path) -> float:
    """When the run's first attempt was launched, from its log's header line (whole seconds: the latest
    time it can have been)."""
    header = next(line for line in (run_dir / "train.log").read_text().splitlines() if line.startswith("--- "))
    return time.mktime(time.strptime(header.rsplit(" at ", 1)[1], "%Y-%m-%d %H:%M:%S")) + 1.0


def trainers(marker: str) -> list[tuple[int, int]]:
    """(pid, parent pid) of every trainer process whose command line holds `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if any(b"trainer_jax" in c for c in cmd) and any(marker.encode() in c for c in cmd):
            found.append((int(proc.name), ppid))
    return found


def interrupt_pending(pid: int) -> bool:
    """A SIGINT waits for the (stopped) process `pid`."""
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return bool(pending & (1 << (signal.SIGINT - 1)))


def checkpointed(run_dir: Path, step: int) -> bool:
    """The run has a checkpoint at `step` or later (older ones are deleted as newer ones land)."""
    folder = run_dir / runfiles.CHECKPOINT_DIR
    return folder.is_dir() and any(p.name.isdigit() and int(p.name) >= step for p in folder.iterdir())


def wait_for(condition, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    # Identical programs in every trainer process: compile once, share through the persistent cache.
    cache = tmp_path_factory.mktemp("xla-cache")
    return {**trainer_env(), "JAX_COMPILATION_CACHE_DIR": str(cache), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "COLUMNS": "200"}


@pytest.fixture(scope="module")
def sequential(tmp_path_factory, env) -> tuple[Path, dict[str, RunConfig]]:
    folder = tmp_path_factory.mktemp("sequential")
    cfgs = write_plan(folder)
    finish(ladder(env, "--ladder", str(folder), "--no-progress"))
    return folder, cfgs


@pytest.fixture(scope="module")
def on_ray(tmp_path_factory, env, sequential) -> tuple[Path, str, str, float]:
    """The ladder on Ray; the worker training the larger rung is killed after its checkpoint at step 30."""
    folder = tmp_path_factory.mktemp("ray")
    write_plan(folder)
    proc = ladder(env, "--ladder", str(folder), *RAY, "--retries", "1", "--format", "json")
    wait_for(lambda: checkpointed(folder / "runs" / LARGE, 30), proc)
    [(trainer_pid, worker_pid)] = trainers(str(folder / f"{LARGE}.yaml"))
    killed_at = time.time()
    os.kill(worker_pid, signal.SIGKILL)
    out, err = finish(proc)
    return folder, out, err, killed_at


@pytest.mark.slow
def test_rungs_train_concurrently_into_the_same_folders_with_the_same_losses(sequential, on_ray, env):
    reference, cfgs = sequential
    folder, out, err, _ = on_ray
    starts, ends = {}, {}
    for name, cfg in cfgs.items():
        a, b = reference / "runs" / name, folder / "runs" / name
        for path in (runfiles.CONFIG_FILE, runfiles.METRICS_FILE, runfiles.STATUS_FILE, "train.log"):
            assert (b / path).is_file(), path
        assert json.loads((b / runfiles.STATUS_FILE).read_text())["state"] == "finished"
        final_a, final_b = values(a, keys.EVAL_LOSS)[-1], values(b, keys.EVAL_LOSS)[-1]
        assert final_a[0] == final_b[0] == cfg.stop_after_steps
        assert abs(final_a[1] - final_b[1]) < 1e-5
        starts[name] = launched(b)
        ends[name] = max(r["time"] for r in records(b) if keys.TRAIN_LOSS in r)
    # Both ran at once: each trainer was launched before the other logged its last step (launch times, not
    # first steps: a busy machine can compile one rung for longer than the other takes to train).
    assert starts[SMALL] < ends[LARGE] and starts[LARGE] < ends[SMALL]
    # The untouched rung is bit for bit the sequential one.
    assert values(reference / "runs" / SMALL, keys.TRAIN_LOSS) == values(folder / "runs" / SMALL, keys.TRAIN_LOSS)
    # Every trainer line reached the terminal prefixed by its run's name.
    assert f"{SMALL} | {SMALL}: finished" in err and f"{LARGE} | {LARGE}: finished" in err
    # Again, every run finished: none is trained, and the summary counts none as trained.
    out, _ = finish(ladder(env, "--ladder", str(folder), *RAY))
    assert f"Trained 0 runs of {folder} ({len(cfgs)} finished already):" in " ".join(out.split()), out[-2000:]


@pytest.mark.slow
def test_a_killed_worker_is_retried_from_its_checkpoint(sequential, on_ray):
    reference, cfgs = sequential
    folder, out, _, killed_at = on_ray
    run_dir, T = folder / "runs" / LARGE, cfgs[LARGE].stop_after_steps
    log = (run_dir / "train.log").read_text()
    # The retry says why the attempt before ended: its worker was killed, so its own log could not.
    assert (f"{LARGE}: attempt 2 (attempt 1: its trainer was lost with its Ray worker or node (out of memory, or the "
            "node went away); resuming from its last checkpoint)") in log
    resumed_at = int(log.split("resuming at step ")[1].split(",")[0].split()[0])
    assert 30 <= resumed_at < T
    train = values(run_dir, keys.TRAIN_LOSS)
    assert [s for s, _ in train] == list(range(1, T + 1))  # none missing, none twice
    final = values(run_dir, keys.EVAL_LOSS)[-1][1]
    assert abs(final - values(reference / "runs" / LARGE, keys.EVAL_LOSS)[-1][1]) < 1e-5
    assert not trainers(str(folder))  # nothing left running
    # The JSON lines: a row per change, the killed run seen again on its second attempt, both finished.
    rows = [json.loads(line) for line in out.splitlines()]
    assert set(rows[0]) == {"run", "state", "step", "steps", "train_loss", "tokens_per_second", "eta_seconds", "attempt"}
    last = {r["run"]: r for r in rows}
    assert last[LARGE] | {"state": "finished", "attempt": 2, "step": T} == last[LARGE]
    assert last[SMALL]["state"] == "finished" and last[SMALL]["attempt"] == 1
    assert any(r["run"] == LARGE and r["state"] == "running" and r["eta_seconds"] is not None for r in rows)


@pytest.mark.slow
def test_ctrl_c_cancels_every_run_and_leaves_them_resumable(tmp_path, env, sequential):
    reference, cfgs = sequential
    write_plan(tmp_path)
    proc = ladder(env, "--ladder", str(tmp_path), *RAY)
    # Hold each trainer once it has a checkpoint, so that neither finishes before the other has one.
    held = {}

    def hold() -> bool:
        for name in set(cfgs) - set(held):
            if checkpointed(tmp_path / "runs" / name, 10):
                [(held[name], _)] = trainers(str(tmp_path / f"{name}.yaml"))
                os.kill(held[name], signal.SIGSTOP)
        return len(held) == len(cfgs)

    wait_for(hold, proc)
    proc.send_signal(signal.SIGINT)  # Ctrl-C: the launcher passes it on to every trainer
    wait_for(lambda: all(interrupt_pending(pid) for pid in held.values()), proc, timeout=30)
    for pid in held.values():
        os.kill(pid, signal.SIGCONT)
    out, err = finish(proc, 130)
    assert "run the same command again to resume" in err
    for name in cfgs:  # each trainer says the same, its run named
        assert f"{name} | {name}: interrupted: the run is marked crashed; run the same command again to continue" in out
    assert not trainers(str(tmp_path))
    for name in cfgs:
        status = json.loads((tmp_path / "runs" / name / runfiles.STATUS_FILE).read_text())
        assert status["state"] == "crashed" and status["step"] < cfgs[name].stop_after_steps
    out, _ = finish(ladder(env, "--ladder", str(tmp_path), *RAY))  # the same command resumes both
    for name, cfg in cfgs.items():
        run_dir = tmp_path / "runs" / name
        assert "resuming at step" in out.split(f"{name} | {name}: ", 1)[1].split("\n")[0]
        assert [s for s, _ in values(run_dir, keys.TRAIN_LOSS)] == list(range(1, cfg.stop_after_steps + 1))
        final = values(run_dir, keys.EVAL_LOSS)[-1][1]
        assert abs(final - values(reference / "runs" / name, keys.EVAL_LOSS)[-1][1]) < 1e-5


@pytest.mark.slow
def test_hero_over_two_processes_matches_one_process(tmp_path, env, sequential):
    reference, cfgs = sequential
    cfg = cfgs[SMALL].replace(resources=ResourcesConfig(cpus=1, hosts=2), run_dir="two")
    cfg.save(tmp_path / "two.yaml")
    # The same two-device mesh in one process, trained meanwhile.
    one = subprocess.Popen([sys.executable, "-m", "trainer_jax", str(tmp_path / "two.yaml"), "--no-progress",
                            "--run-dir", str(tmp_path / "one")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env={**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    out, _ = finish(ladder(env, str(tmp_path / "two.yaml"), *RAY))
    finish(one)
    run_dir = tmp_path / "two"
    assert "finished" in out
    assert "'expert': 2" in (run_dir / "train.log").read_text()  # one mesh over both processes
    assert (run_dir / "train.process1.log").is_file()
    for key in (keys.TRAIN_LOSS, keys.EVAL_LOSS, keys.EVAL_DROPLESS_LOSS):
        a, b = values(tmp_path / "one", key), values(run_dir, key)
        assert [s for s, _ in b] == [s for s, _ in a]  # written once, by process 0
        assert max(abs(x - y) for (_, x), (_, y) in zip(a, b)) < 1e-6
        # and the one-device run of the same config, up to the order of a two-way sum
        c = values(reference / "runs" / SMALL, key)
        assert max(abs(x - y) for (_, x), (_, y) in zip(c, b)) < 1e-5

"""The quick parts of training on Ray: the planner's resources block, the `--ray` flag's checks and
its message without Ray installed, and the live table read from run folders."""

from __future__ import annotations

import json
import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ladder import load_recipe, runfiles
from ladder import metrics as keys
from ladder.cli import app
from ladder.cluster import Board
from ladder.config.plan import plan
from ladder.config.runconfig import ResourcesConfig, RunConfig
from ladder.errors import LadderError

runner = CliRunner()


def test_plan_writes_the_resources_each_run_asks_for(tmp_path):
    res = runner.invoke(app, ["plan", "micro-cpu", "--out", str(tmp_path), "--gpus-per-run", "1",
                              "--cpus-per-run", "4", "--resource-per-run", "TPU=4", "--hero-hosts", "2"])
    assert res.exit_code == 0, res.output
    runs = [RunConfig.load(p) for p in sorted(tmp_path.glob("*.yaml"))]
    for cfg in runs:
        hosts = 2 if cfg.role == "hero" else 1
        assert cfg.resources == ResourcesConfig(cpus=4, gpus=1, custom={"TPU": 4.0}, hosts=hosts)
    bad = runner.invoke(app, ["plan", "micro-cpu", "--resource-per-run", "TPU"])
    assert bad.exit_code == 2 and "--resource-per-run 'TPU': expected NAME=AMOUNT" in bad.output


def test_a_plan_without_resources_asks_for_one_cpu_per_run():
    for cfg in plan(load_recipe("micro-cpu")).runs():
        assert cfg.resources == ResourcesConfig(cpus=1.0, gpus=0.0, custom={}, hosts=1)


@pytest.mark.parametrize("block, message", [
    ({"gpus": -1}, "resources.gpus=-1.0 must be a finite number >= 0"),
    ({"cpus": float("nan")}, "resources.cpus: nan is not a finite number"),
    ({"hosts": 0}, "resources.hosts=0 must be at least 1"),
    ({"custom": {"TPU": -2}}, "resources.custom.TPU=-2.0 must be a finite number >= 0"),
    ({"custom": {"CPU": 1}}, "resources.custom.CPU: CPUs and GPUs are asked for by resources.cpus"),
    ({"custom": {"GPU": 1}}, "resources.custom.GPU: CPUs and GPUs are asked for by resources.gpus"),
])
def test_bad_resources_are_refused_with_the_field_named(block, message):
    data = plan(load_recipe("micro-cpu")).rungs[0].to_dict() | {"resources": block}
    with pytest.raises(LadderError, match=message.replace(".", r"\.")):
        RunConfig.from_dict(data)


@pytest.fixture()
def ladder_folder(tmp_path):
    plan(load_recipe("micro-cpu")).write(tmp_path)
    return tmp_path


def test_without_ray_installed_the_flag_says_how_to_install_it(ladder_folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray"])
    assert res.exit_code == 2
    assert res.output.strip() == "error: --ray needs Ray, which is not installed: pip install 'scaling-ladder[ray]'"


@pytest.mark.parametrize("args, message", [
    (["--ray", "not an address"], "--ray 'not an address': expected nothing (start a local Ray instance)"),
    (["--ray", "auto", "--ray-cpus", "2"], "--ray-cpus 2: give a positive count, and only with a local Ray instance"),
    (["--ray", "--retries", "-1"], "--retries -1 must be >= 0"),
])
def test_bad_ray_options_are_one_line_and_exit_2(ladder_folder, args, message):
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), *args])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"error: {message}")
    assert len(res.output.strip().splitlines()) <= 2  # one line, wrapped at most once


@pytest.mark.parametrize("args, message", [
    (["--ray-cpus", "0"], "--ray-cpus needs --ray"),
    (["--retries", "3"], "--retries needs --ray"),
    (["--format", "json"], "--format needs --ray"),
    (["--rungs-only", "RUN"], "--rungs-only needs --ladder DIR"),
])
def test_options_of_another_mode_are_refused(ladder_folder, args, message):
    one = str(next(ladder_folder.glob("*.yaml")))
    args = [one if a == "RUN" else a for a in args]
    res = runner.invoke(app, ["train", *args] if one in args else ["train", "--ladder", str(ladder_folder), *args])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"error: {message}") and len(res.output.strip().splitlines()) <= 2
    assert not (ladder_folder / "runs").exists()  # nothing was trained


def test_the_table_reads_each_run_folder_and_prefixes_its_log_lines(tmp_path, capsys):
    run_dir = tmp_path / "runs" / "a"
    run_dir.mkdir(parents=True)
    (run_dir / "train.log").write_text("an earlier attempt\n")
    # Ten steps of 256 tokens in 1.25 s of wall time: 2,048 tokens/s, though the trainer measured
    # 9,000 on the step itself (its evaluations and checkpoints left out).
    lines = [
        {"step": 10, "time": 100.0, "train/loss": 3.0, keys.TOKENS_PER_SECOND: 9000.0},
        {"step": 20, "time": 101.25, "train/loss": 2.5, keys.TOKENS_PER_SECOND: 9000.0},
        {"step": 20, "time": 101.5, "eval/loss": 2.6},
    ]
    (run_dir / runfiles.METRICS_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    err = Console(file=sys.stderr, width=200)
    board = Board([("a", run_dir, 100, 256, 1), ("b", tmp_path / "runs" / "b", 50, 256, 1)], "json",
                  Console(width=200), err, json_every=0.0)
    with board:
        board.update({"a": ("queued", 1), "b": ("queued", 1)})
        with open(run_dir / "train.log", "a") as f:
            f.write("a: resuming at step 20\n")
        board.update({"a": ("queued", 1), "b": ("queued", 1)})
    out, log = capsys.readouterr()
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[0] == {"run": "a", "state": "queued", "step": 20, "steps": 100, "train_loss": 2.5,
                       "tokens_per_second": 2048.0, "eta_seconds": None, "attempt": 1}
    assert rows[1]["run"] == "b" and rows[1]["train_loss"] is None and rows[1]["step"] == 0
    # Its log grew: it is running, and the ETA is the remaining 80 steps × 256 tokens at 2,048 tokens/s.
    assert rows[2] | {"state": "running", "eta_seconds": 10.0} == rows[2]
    assert len(rows) == 3  # b did not change
    assert log.strip() == "a | a: resuming at step 20"  # the earlier attempt's lines are not replayed


def test_a_run_bigger_than_the_local_instance_is_refused_before_it_waits_forever(tmp_path):
    from ladder.cluster.ray_runs import Job, check_fits

    hero = plan(load_recipe("micro-cpu")).hero.replace(resources=ResourcesConfig(cpus=1, hosts=3))
    with pytest.raises(LadderError, match=r"asks for 3 × 1 CPU but the local Ray instance has 2: lower"):
        check_fits([Job(tmp_path / "hero.yaml", hero)], {"CPU": 2.0})
    check_fits([Job(tmp_path / "hero.yaml", hero.replace(resources=ResourcesConfig(hosts=2)))], {"CPU": 2.0})


def test_a_folder_given_as_the_run_config_points_to_ladder(ladder_folder):
    res = runner.invoke(app, ["train", str(ladder_folder)])
    assert res.exit_code == 2 and f"--ladder {ladder_folder} to train the ladder planned there" in " ".join(res.output.split())
    assert not (ladder_folder / "runs").exists()


def test_rays_advice_on_a_cluster_it_cannot_reach_is_in_the_one_line_error(recwarn):
    import warnings

    from ladder.cluster.ray_runs import connect
    from ladder.errors import LadderError

    class Unreachable:
        @staticmethod
        def init(**kwargs):
            warnings.warn("Ray Client connection timed out. Ensure that the Ray Client port is reachable.", UserWarning,
                          stacklevel=2)
            raise ConnectionError("ray client connection timeout")

    with pytest.raises(LadderError) as err:
        connect(Unreachable, "ray://10.0.0.1:10001", None)
    assert str(err.value) == ("could not start or reach the Ray cluster at ray://10.0.0.1:10001: ray client connection "
                              "timeout (Ray Client connection timed out. Ensure that the Ray Client port is reachable.)")
    assert not [w for w in recwarn if "Ray Client" in str(w.message)]  # not printed besides, as a raw warning


@pytest.mark.parametrize("codes, exit_code", [([[2], [2]], 2), ([[2], [3]], 1), ([[2], [None]], 1),
                                               ([[-9], [-9]], 137), ([[2, None], [0, 2]], 2)])
def test_failed_runs_on_ray_exit_with_the_trainers_code_and_are_not_counted_as_trained(ladder_folder, monkeypatch,
                                                                                       codes, exit_code):
    """Both runs refused by their trainers (exit 2, bad input) exit 2, as the same ladder without --ray does, also
    where a multi-host run's other processes were cancelled after it (lost); killed by a signal, 128 + its number;
    codes that differ, or a lost task, exit 1. The summary counts neither as trained."""
    import ladder.cluster as cluster
    from ladder.cluster import Job
    from ladder.config.runconfig import RunConfig

    paths = sorted(ladder_folder.glob("*.yaml"))[:2]
    jobs = {p.stem: Job(p, RunConfig.load(p), state="failed", attempts=1, codes=c) for p, c in zip(paths, codes)}
    monkeypatch.setattr(cluster, "train_on_ray", lambda runs, **kw: jobs)
    rest = sorted(ladder_folder.glob("*.yaml"))[2:]
    for p in rest:
        p.unlink()
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray"])
    assert res.exit_code == exit_code, res.output
    said = " ".join(res.stdout.split())
    assert f"Trained 0 runs of {ladder_folder} (2 not finished):" in said


def test_plan_refuses_cpus_given_as_another_resource_which_ray_would_refuse_at_train_time(tmp_path):
    res = runner.invoke(app, ["plan", "micro-cpu", "--resource-per-run", "CPU=1", "--out", str(tmp_path / "p")])
    assert res.exit_code == 2 and "--cpus-per-run N" in " ".join(res.output.split()), res.output
    assert not (tmp_path / "p").exists()


def test_a_head_node_address_where_nothing_listens_is_refused_at_once(ladder_folder):
    import socket

    with socket.socket() as s:  # a port free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray", f"127.0.0.1:{port}"])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and f"could not start or reach the Ray cluster at 127.0.0.1:{port}: nothing answers" in said
    assert not (ladder_folder / "runs").exists()


def test_ctrl_c_while_ray_starts_says_nothing_was_trained(ladder_folder, monkeypatch):
    import ladder.cluster.ray_runs as ray_runs

    class Starting:  # Ctrl-C while a local Ray instance starts
        down = False

        @staticmethod
        def init(**kwargs):
            raise KeyboardInterrupt

        @classmethod
        def shutdown(cls):
            cls.down = True

    monkeypatch.setattr(ray_runs, "import_ray", lambda: Starting)
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray"])
    said = " ".join(res.output.split())
    assert res.exit_code == 130, res.output
    assert "interrupted before any run started: nothing was trained; run the same command again to start" in said
    assert "last checkpoint" not in said and Starting.down

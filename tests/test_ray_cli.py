"""The quick parts of training on Ray: the planner's resources block, the `--ray` flag's checks and
its message without Ray installed, and the live table read from run folders."""

from __future__ import annotations

import json
import signal
import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ladder import load_recipe, runfiles
from ladder import metrics as keys
from ladder.cli import app
from ladder.cluster import Board, Job
from ladder.config.plan import plan
from ladder.config.runconfig import ResourcesConfig, RunConfig
from ladder.errors import LadderError
from ladder.launch import Stopped, run_state

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
    (["--ray", "auto", "--ray-cpus", "2"], "--ray-cpus 2: only with a local Ray instance (--ray alone); a cluster "
                                           "offers the CPUs its nodes have (--ray auto)"),
    (["--ray", "--ray-cpus", "0"], "--ray-cpus 0: give a positive count of CPUs"),
    (["--ray", "--retries", "-1"], "--retries -1 must be >= 0"),
])
def test_bad_ray_options_are_one_line_and_exit_2(ladder_folder, args, message):
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), *args])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"error: {message}")
    assert len(res.output.strip().splitlines()) <= 2  # one line, wrapped at most once


def test_a_ladder_folder_after_ray_is_the_run_given_not_an_address(ladder_folder, monkeypatch):
    """`ladder train --ray FOLDER` read the folder as --ray's address and said to give a RUN.yaml or --ladder, never
    why; the folder is the run given, and the error names it and the --ladder that trains it."""
    monkeypatch.chdir(ladder_folder.parent)
    res = runner.invoke(app, ["train", "--ray", ladder_folder.name])
    assert res.exit_code == 2 and f"{ladder_folder.name}: is a folder; give one RUN.yaml, or --ladder " \
        f"{ladder_folder.name} to train the ladder planned there" in " ".join(res.output.split()), res.output


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
    from ladder.cluster.ray_runs import check_fits

    hero = plan(load_recipe("micro-cpu")).hero.replace(resources=ResourcesConfig(cpus=1, hosts=3))
    with pytest.raises(LadderError, match=r"asks for 3 × 1 CPU but the local Ray instance has 2: lower.*--ray-cpus"):
        check_fits([Job(tmp_path / "hero.yaml", hero)], {"CPU": 2.0})
    gpu = hero.replace(resources=ResourcesConfig(cpus=1, gpus=1))  # more CPUs would not give it one
    with pytest.raises(LadderError, match=r"asks for 1 × 1 GPU but the local Ray instance has 0: lower .* or train on "
                                          r"a Ray cluster that has them \(--ray ADDRESS\)"):
        check_fits([Job(tmp_path / "hero.yaml", gpu)], {"CPU": 2.0})
    check_fits([Job(tmp_path / "hero.yaml", hero.replace(resources=ResourcesConfig(hosts=2)))], {"CPU": 2.0})


def test_a_folder_given_as_the_run_config_points_to_ladder(ladder_folder):
    res = runner.invoke(app, ["train", str(ladder_folder)])
    assert res.exit_code == 2 and f"--ladder {ladder_folder} to train the ladder planned there" in " ".join(res.output.split())
    assert not (ladder_folder / "runs").exists()


def test_a_yaml_in_the_ladder_folder_that_is_no_run_config_says_ladder_reads_every_yaml(ladder_folder):
    (ladder_folder / "my-notes.yaml").write_text("user: notes\n")
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder)])
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2 and said.startswith(f"error: {ladder_folder / 'my-notes.yaml'}: unknown field 'user'"), said
    assert said.endswith(f"--ladder trains every YAML in {ladder_folder} (a YAML that is no run config, notes say, goes "
                         "in another folder)")
    assert not (ladder_folder / "runs").exists()


def test_a_typo_in_a_run_config_of_the_ladder_is_named_without_the_hint_for_notes(ladder_folder):
    config = sorted(ladder_folder.glob("*.yaml"))[0]
    config.write_text(config.read_text().replace("seed:", "sead:", 1))
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder)])
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2 and said.startswith(f"error: {config}:") and "'sead'" in said, said
    assert "trains every YAML" not in said
    assert not (ladder_folder / "runs").exists()


def test_a_hero_of_several_hosts_trained_without_ray_is_said_to_train_as_one_process(tmp_path, monkeypatch):
    import ladder.cli.train as cli_train
    from ladder.config.plan import with_resources

    planned = plan(load_recipe("micro-cpu"))
    with_resources(planned, ResourcesConfig(cpus=1), 3).write(tmp_path)
    started = []
    monkeypatch.setattr(cli_train, "_run", lambda path, cfg, *args, **kwargs: started.append(cfg.name))
    hero = tmp_path / f"{planned.hero.name}.yaml"
    res = runner.invoke(app, ["train", str(hero)])
    assert res.exit_code == 0 and started == [planned.hero.name], res.output
    assert f"warning: {hero}: asks for 3 hosts (resources.hosts); without --ray it trains as one process on this " \
        "machine" in " ".join(res.stderr.split())
    res = runner.invoke(app, ["train", str(tmp_path / f"{planned.rungs[0].name}.yaml")])
    assert res.exit_code == 0 and "hosts" not in res.stderr  # a rung of one host


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
    from ladder.config.runconfig import RunConfig

    paths = sorted(ladder_folder.glob("*.yaml"))[:2]
    jobs = {p.stem: Job(p, RunConfig.load(p), state="failed", attempts=1, codes=c) for p, c in zip(paths, codes)}
    monkeypatch.setattr(cluster, "train_on_ray", lambda runs, **kw: jobs)
    rest = sorted(ladder_folder.glob("*.yaml"))[2:]
    for p in rest:
        p.unlink()
    from ladder.launch import run_dir_of

    # the first finished once, and its config was edited since: its folder still says finished (its trainer refused)
    done = run_dir_of(paths[0], RunConfig.load(paths[0]))
    done.mkdir(parents=True)
    (done / "status.json").write_text('{"state": "finished", "step": 340}')
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray"])
    assert res.exit_code == exit_code, res.output
    said = " ".join(res.stdout.split())
    assert f"Trained 0 runs of {ladder_folder} (2 not finished):" in said
    assert f"{paths[0].stem} failed" in said


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


@pytest.mark.parametrize("stop, code, said_first", [
    (KeyboardInterrupt(), 130, "interrupted"),  # Ctrl-C
    (Stopped(signal.SIGHUP), 129, "stopped (SIGHUP)"),  # the terminal closed
])
def test_ctrl_c_while_ray_starts_says_nothing_was_trained(ladder_folder, monkeypatch, stop, code, said_first):
    import ladder.cluster.ray_runs as ray_runs

    class Starting:  # a stop while a local Ray instance starts
        down = False

        @staticmethod
        def init(**kwargs):
            raise stop

        @classmethod
        def shutdown(cls):
            cls.down = True

    monkeypatch.setattr(ray_runs, "import_ray", lambda: Starting)
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray"])
    said = " ".join(res.output.split())
    assert res.exit_code == code, res.output
    assert f"{said_first} before any run started: nothing was trained; run the same command again to start" in said
    assert "last checkpoint" not in said and Starting.down


def test_a_sigterm_after_ray_started_is_ladder_s_to_take_not_ray_s(ladder_folder, monkeypatch):
    """`ray.init` installs a SIGTERM handler of its own that calls sys.exit: the stop then skipped the cancel, said
    nothing and exited 15. The handler `ladder` had is given back once Ray has started."""
    import os

    import ladder.cluster.ray_runs as ray_runs

    class Started:
        @staticmethod
        def init(**kwargs):
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(signal.SIGTERM))  # as Ray's driver does

        @staticmethod
        def cluster_resources():
            os.kill(os.getpid(), signal.SIGTERM)  # a scheduler's stop, once Ray has started
            return {"CPU": 2.0}

        down = False

        @classmethod
        def shutdown(cls):
            cls.down = True

    monkeypatch.setattr(ray_runs, "import_ray", lambda: Started)
    before = signal.getsignal(signal.SIGTERM)
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray"])
    said = " ".join(res.output.split())
    assert res.exit_code == 143 and "stopped (SIGTERM) before any run started: nothing was trained" in said, said
    assert signal.getsignal(signal.SIGTERM) == before and Started.down


def test_a_sigterm_ray_re_raises_as_a_plain_interrupt_is_still_said_and_exits_as_a_sigterm(ladder_folder, monkeypatch):
    """`ray.wait` catches the stop our handler raises and raises a plain KeyboardInterrupt in its place: the stop read
    as a Ctrl-C ("interrupted", 130) where a scheduler's SIGTERM should say so and exit 143. A local instance is a new
    one (address "local"), never the cluster RAY_ADDRESS names."""
    import os

    import ladder.cluster.ray_runs as ray_runs

    class Started:
        asked: dict = {}

        @classmethod
        def init(cls, **kwargs):
            cls.asked = kwargs

        @staticmethod
        def cluster_resources():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except KeyboardInterrupt:
                raise KeyboardInterrupt() from None  # as ray.wait does
            return {"CPU": 2.0}

        @staticmethod
        def shutdown():
            pass

    monkeypatch.setattr(ray_runs, "import_ray", lambda: Started)
    monkeypatch.setenv("RAY_ADDRESS", "192.0.2.2:6399")
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray"])
    said = " ".join(res.output.split())
    assert res.exit_code == 143 and "stopped (SIGTERM) before any run started" in said, said
    assert Started.asked["address"] == "local"
    interrupted = KeyboardInterrupt()  # a Ctrl-C in a later command: its block starts with no stop received
    from ladder.launch import stop_signal, stops_as_interrupts

    with stops_as_interrupts():
        assert stop_signal(interrupted) == signal.SIGINT


@pytest.mark.parametrize("args, message", [
    (["--cpus-per-run", "0", "--hero-hosts", "2"], "--cpus-per-run 0 --hero-hosts 2: the hero's processes would ask "
                                                   "for no resource"),
    (["--cpus-per-run", "1e308"], "--cpus-per-run 1e+308: give 0 to 65,536 CPU cores"),
    (["--gpus-per-run", "1e6"], "--gpus-per-run 1e+06: give 0 to 65,536 GPUs"),
])
def test_plan_refuses_resources_no_cluster_could_place(tmp_path, args, message):
    """A hero of several hosts asking for nothing per process is no placement group Ray can make; an amount past
    any host is a typo. Both are one line, and nothing is written."""
    res = runner.invoke(app, ["plan", "micro-cpu", "--out", str(tmp_path / "p"), *args])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"error: {message}") and len(res.output.strip().splitlines()) <= 2
    assert not (tmp_path / "p").exists()
    with pytest.raises(LadderError, match=r"^resources\.cpus=1e\+308 is too large: at most 65,536 per process"):
        ResourcesConfig(cpus=1e308)


def test_a_hero_asking_for_nothing_per_process_may_still_train_on_one_host_or_with_a_gpu(tmp_path):
    for args in (["--cpus-per-run", "0"], ["--cpus-per-run", "0", "--gpus-per-run", "1", "--hero-hosts", "2"]):
        res = runner.invoke(app, ["plan", "micro-cpu", "--out", str(tmp_path / args[-1]), *args])
        assert res.exit_code == 0, res.output


def test_a_hand_written_config_of_several_hosts_asking_for_nothing_is_refused_before_ray_starts(tmp_path, monkeypatch):
    import ladder.cluster.ray_runs as ray_runs

    def no_ray_start(**kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(ray_runs, "import_ray", lambda: type("Ray", (), {"init": staticmethod(no_ray_start)}))
    hero = plan(load_recipe("micro-cpu")).hero.replace(resources=ResourcesConfig(cpus=0, hosts=2))
    path = hero.save(tmp_path / "hero.yaml")
    res = runner.invoke(app, ["train", str(path), "--ray"])
    said = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert said.startswith(f"error: {path}: its 2 processes ask for no resource (resources.cpus, gpus and custom are "
                           "all 0)") and "set resources.cpus: 1 in it" in said
    assert len(res.output.strip().splitlines()) <= 3


@pytest.mark.parametrize("address", ["localhost:99999", "ray://10.0.0.1:0"])
def test_a_ray_address_whose_port_cannot_exist_is_one_line(ladder_folder, address):
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray", address])
    said = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert said.startswith(f"error: --ray '{address}': port {address.rsplit(':', 1)[1]} does not exist (ports run "
                           "from 1 to 65535)") and "ray start --head --port" not in said
    assert len(res.output.strip().splitlines()) <= 2


@pytest.mark.parametrize("address", ["localhost:" + "9" * 5000, "localhost:\u0661\u0662\u0663"])
def test_a_ray_port_of_many_digits_or_of_other_scripts_is_one_line(ladder_folder, address):
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray", address])
    assert res.exit_code == 2 and "this is a bug" not in res.output, res.output
    assert res.output.startswith("error: --ray ")


RUNNING = "running"
"""A fake task's outcome: it has not ended."""


class Ref:
    def __init__(self, run: str, code: int | str) -> None:
        self.run, self.code = run, code

    @property
    def done(self) -> bool:
        return self.code != RUNNING


class FakeRay:
    """Ray as the launcher uses it, on one host: each trainer task ends at once with the next of the exit codes
    `outcomes` gives its run (or keeps running); `headers` holds each attempt's log header by run."""

    class exceptions:  # as Ray names it
        RayError = RuntimeError

    def __init__(self, outcomes: dict[str, list[int | str]]) -> None:
        self.outcomes, self.headers, self.cancelled = outcomes, {}, []

    def init(self, **kwargs) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0}

    def remote(self, fn):
        ray = self

        class Task:
            @staticmethod
            def options(name: str, **kwargs):
                class Call:
                    @staticmethod
                    def remote(args, log, header, again):
                        ray.headers.setdefault(name, []).append(header)
                        return Ref(name, ray.outcomes[name].pop(0))
                return Call
        return Task

    def wait(self, refs, num_returns, timeout, fetch_local):
        return [r for r in refs if r.done], [r for r in refs if not r.done]

    def get(self, ref, timeout=None) -> int:
        return ref.code

    def cancel(self, ref, force: bool) -> None:
        """A trainer that does not stop within its grace period: only a forced cancel ends it (its task lost)."""
        self.cancelled.append(ref.run)
        ref.code = None if force else ref.code


def running(ladder_folder, names: list[str], step: int = 36) -> dict[str, RunConfig]:
    """The runs `names` of the ladder, each with a status that says it runs (as a trainer killed at once leaves it)."""
    cfgs = {p.stem: RunConfig.load(p) for p in ladder_folder.glob("*.yaml")}
    for name in names:
        runfiles.write_status(ladder_folder / cfgs[name].run_dir, "running", step)
    return cfgs


def test_a_run_killed_on_ray_with_no_retry_left_is_marked_crashed_and_its_signal_named(ladder_folder, monkeypatch):
    """As without Ray: the trainer could not mark its run stopped, so the launcher does, and says how it ended in the
    words of the retry header (not as a negative exit code)."""
    pytest.importorskip("ray")
    import ladder.cluster.ray_runs as ray_runs

    rung = sorted(ladder_folder.glob("*.yaml"))[0]
    for p in ladder_folder.glob("*.yaml"):
        if p != rung:
            p.unlink()
    cfgs = running(ladder_folder, [rung.stem])
    monkeypatch.setattr(ray_runs, "import_ray", lambda: FakeRay({rung.stem: [-9]}))
    res = runner.invoke(app, ["train", "--ladder", str(ladder_folder), "--ray", "--retries", "0"])
    said = " ".join(res.output.split())
    assert res.exit_code == 137, res.output
    assert (f"{rung.stem}: failed after 1 attempt(s): its trainer was killed by signal 9 (SIGKILL: perhaps out of "
            "memory); its log:") in said and "exit -9" not in said
    status = json.loads((ladder_folder / cfgs[rung.stem].run_dir / runfiles.STATUS_FILE).read_text())
    assert (status["state"], status["step"]) == ("crashed", 36)
    assert f"{rung.stem} crashed" in said  # the summary reads the run's status


class Quiet:
    def update(self, states) -> None:
        pass


@pytest.mark.parametrize("checkpoint, said", [(None, "from scratch: no checkpoint yet"),
                                              (30, "resuming from its last checkpoint")])
def test_a_retry_says_whether_it_resumes_from_a_checkpoint(ladder_folder, checkpoint, said):
    pytest.importorskip("ray")
    from ladder.cluster.ray_runs import RayLauncher

    path = sorted(ladder_folder.glob("*.yaml"))[0]
    job = Job(path, RunConfig.load(path))
    if checkpoint is not None:
        (job.run_dir / runfiles.CHECKPOINT_DIR / str(checkpoint)).mkdir(parents=True)
    ray = FakeRay({job.name: [-9, 0]})
    RayLauncher(ray, [job], retries=1, resume_first=True).run(Quiet(), tick=0)
    assert job.state == "finished" and job.attempts == 2
    assert ray.headers[job.name][1] == (f"{job.name}: attempt 2 (attempt 1: its trainer was killed by signal 9 "
                                        f"(SIGKILL: perhaps out of memory); {said})")


def test_ctrl_c_on_ray_settles_the_trainers_that_had_ended_before_cancelling_the_rest(ladder_folder):
    """A run whose trainer finished just before the stop reads as finished, one that failed is not tried again, and
    only the one still training is cancelled (its run marked crashed, had its trainer to be killed)."""
    pytest.importorskip("ray")
    from ladder.cluster.ray_runs import RayLauncher

    done, failed, training, closing = names = [p.stem for p in sorted(ladder_folder.glob("*.yaml"))[:4]]
    cfgs = running(ladder_folder, [failed, training])
    # its trainer wrote its run finished and was shutting down when the stop came: finished, not cancelled
    cfgs[closing].save(ladder_folder / cfgs[closing].run_dir / runfiles.CONFIG_FILE)
    runfiles.write_status(ladder_folder / cfgs[closing].run_dir, "finished", cfgs[closing].stop_after_steps)
    jobs = [Job(ladder_folder / f"{n}.yaml", cfgs[n]) for n in names]
    ray = FakeRay({done: [0], failed: [-9], training: [RUNNING], closing: [RUNNING]})
    launcher = RayLauncher(ray, jobs, retries=2, resume_first=True)
    for job in jobs:
        launcher.submit(job)
    launcher.cancel()
    assert launcher.states() == {done: ("finished", 1), failed: ("failed", 1), training: ("cancelled", 1),
                                 closing: ("finished", 1)}
    assert sorted(ray.cancelled) == sorted([training, training, closing, closing])  # asked to stop, then killed
    for name in (failed, training):  # neither trainer said so itself: killed outright, or not within its grace
        assert run_state(ladder_folder / cfgs[name].run_dir) == "crashed"

"""`ladder train` when its trainer process dies without a word (a SIGKILL, as the out-of-memory killer
sends): one line that says so and how to resume, the run marked crashed, the summary, exit 128 + 9.
The trainer is a stand-in process, so no training happens here."""

from __future__ import annotations

import json
import sys

from typer.testing import CliRunner

from ladder import launch, load_recipe, runfiles
from ladder.cli import app
from ladder.config.plan import plan
from ladder.config.runconfig import RunConfig

runner = CliRunner()

# Marks its run as running at step 100 (the trainer's own first write), then dies as an OOM kill leaves it.
KILLED = ("import json, os, signal, sys; from pathlib import Path; d = Path(sys.argv[1]); d.mkdir(parents=True, "
          "exist_ok=True); (d / 'status.json').write_text(json.dumps({'state': 'running', 'step': 100})); "
          "(d / 'metrics.jsonl').write_text('{\"step\": 120}\\n{\"step\": 130}\\n{\"step\": 14'); "
          "os.kill(os.getpid(), signal.SIGKILL)")  # its status written at step 100's eval, its log to 130, torn there
FINISHES = ("import json, sys; from pathlib import Path; d = Path(sys.argv[1]); d.mkdir(parents=True, exist_ok=True); "
            "(d / 'status.json').write_text(json.dumps({'state': 'finished', 'step': 200}))")


def stand_in(monkeypatch, script: str, calls: list) -> None:
    def trainer_command(config, resume, progress):
        calls.append((config.name, resume))
        cfg = RunConfig.load(config)
        return [sys.executable, "-c", script, str(cfg.resolved_run_dir(base=config.parent))]

    monkeypatch.setattr(launch, "trainer_command", trainer_command)


def test_a_killed_trainer_is_named_marked_crashed_and_resumed_by_the_same_command(tmp_path, monkeypatch):
    out = tmp_path / "plan"
    plan(load_recipe("micro-cpu")).write(out)
    first = min(plan(load_recipe("micro-cpu")).rungs, key=lambda c: c.fit_flops)
    run_dir = out / "runs" / first.name
    calls: list = []
    stand_in(monkeypatch, KILLED, calls)
    (run_dir / runfiles.CHECKPOINT_DIR / "50").mkdir(parents=True)  # a checkpoint before the kill
    res = runner.invoke(app, ["train", "--ladder", str(out), "--no-progress"])
    assert res.exit_code == 128 + 9, res.output
    assert calls == [(f"{first.name}.yaml", True)]  # the ladder stops at the killed run
    assert (f"{first.name}: its trainer was killed by signal 9 (SIGKILL: perhaps out of memory); run the same command "
            f"again to resume it from its last checkpoint (step 50; it had logged to step 130) ({run_dir})"
            ) in res.stderr.splitlines()
    # the killed run and the four not started are not counted as trained
    assert "Traceback" not in res.output and f"Trained 0 runs of {out} (5 not finished):" in " ".join(res.stdout.split())
    assert f"{first.name:<22} crashed" in res.stdout
    status = json.loads((run_dir / runfiles.STATUS_FILE).read_text())
    assert status["state"] == "crashed" and status["step"] == 130  # where it stopped, not its last status write
    stand_in(monkeypatch, FINISHES, calls)
    assert runner.invoke(app, ["train", "--ladder", str(out), "--no-progress"]).exit_code == 0
    assert calls[1] == (f"{first.name}.yaml", True)  # resumed
    assert json.loads((run_dir / runfiles.STATUS_FILE).read_text())["state"] == "finished"
    # every run finished but the hero, killed: the four skipped are not counted as trained by this command
    for path in out.glob("*.yaml"):
        cfg = RunConfig.load(path)
        folder = out / "runs" / cfg.name
        folder.mkdir(parents=True, exist_ok=True)
        cfg.save(folder / runfiles.CONFIG_FILE)  # trained with this very config
        hero = cfg.name.startswith("hero")
        runfiles.write_status(folder, "crashed" if hero else "finished", 10 if hero else cfg.stop_after_steps)
    stand_in(monkeypatch, KILLED, calls)
    res = runner.invoke(app, ["train", "--ladder", str(out), "--no-progress"])
    assert res.exit_code == 128 + 9 and f"Trained 0 runs of {out} (4 finished already, 1 not finished):" in \
        " ".join(res.stdout.split()), res.output


def test_one_killed_run_says_to_add_resume(tmp_path, monkeypatch):
    cfg = plan(load_recipe("micro-cpu")).rungs[0]
    path = cfg.save(tmp_path / f"{cfg.name}.yaml")
    stand_in(monkeypatch, KILLED, [])
    res = runner.invoke(app, ["train", str(path)])
    assert res.exit_code == 137, res.output
    assert res.stderr.strip().splitlines() == [
        f"{cfg.name}: its trainer was killed by signal 9 (SIGKILL: perhaps out of memory); add --resume to the command "
        f"to restart it from step 0 (it had saved no checkpoint yet; it had logged to step 130) "
        f"({tmp_path / 'runs' / cfg.name})"]


def test_a_recipe_given_where_a_run_config_goes_says_how_to_plan_it(tmp_path):
    from pathlib import Path

    import ladder.config.presets as presets

    recipe = Path(presets.__file__).parent / "micro-cpu.yaml"
    res = CliRunner().invoke(app, ["train", str(recipe)])
    assert res.exit_code == 2 and "a recipe (it has rungs), not a run config" in res.output, res.output
    assert f"ladder plan {recipe} --out DIR" in " ".join(res.output.split())


def test_a_file_given_to_ladder_says_what_it_is_and_what_to_give(tmp_path):
    import ladder.config.presets as presets

    out = tmp_path / "plan"
    p = plan(load_recipe("micro-cpu"))
    p.write(out)
    run = out / f"{p.rungs[0].name}.yaml"
    res = runner.invoke(app, ["train", "--ladder", str(run)])
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert f"is one run config, not a ladder folder: train it alone with `ladder train {run}`" in said, said
    assert f"its whole ladder with --ladder {out}" in said
    recipe = presets.__path__[0] + "/micro-cpu.yaml"
    res = runner.invoke(app, ["train", "--ladder", recipe])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "is a file, not a ladder folder" in said and "a recipe (it has rungs)" in said, said
    assert "no such folder" not in said


def test_a_run_is_marked_crashed_in_place_when_the_disk_has_no_room_for_an_atomic_write(tmp_path, monkeypatch):
    """A full disk refuses the temporary file of an atomic write: the small status file is overwritten in place, so
    a killed run does not go on reading as running; where even that fails, the caller is told."""
    import errno
    import os

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    runfiles.write_status(tmp_path, "running", 100)
    monkeypatch.setattr(runfiles, "write_status", full)
    assert launch.mark_crashed(tmp_path)
    status = json.loads((tmp_path / runfiles.STATUS_FILE).read_text())
    assert (status["state"], status["step"]) == ("crashed", 100)
    monkeypatch.setattr(runfiles, "_overwrite_in_place", full)
    assert not runfiles.write_status_anyway(tmp_path, "running", 5)
    assert json.loads((tmp_path / runfiles.STATUS_FILE).read_text()) == status

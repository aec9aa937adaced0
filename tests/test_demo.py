"""`ladder demo --quick` end to end, as a user runs it (the console script, in a fresh process), then
again to check that it reuses every finished run, then notebook 03 on what it left behind; and, without
training, what the demo does with the folders it finds and the hero's copy in its store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient

from ladder.demo import PRESET, QUICK, demo_plan, write_plan
from ladder.errors import LadderError

LADDER = Path(sys.executable).parent / "ladder"
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "03_predict_and_watch_the_demo_hero.ipynb"


def run_demo(out: Path) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    res = subprocess.run([str(LADDER), "demo", "--quick", "--out", str(out), "--poll", "1"],
                         capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res, time.perf_counter() - t0


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "quick"
    first, first_s = run_demo(out)
    mtimes = {p: p.stat().st_mtime_ns for p in (out / "plan" / "runs").glob("*/metrics.jsonl")}
    second, second_s = run_demo(out)
    return out, first, first_s, second, second_s, mtimes


@pytest.mark.slow
def test_quick_demo_trains_predicts_watches_and_scores(demo):
    out, first, *_ = demo
    p = demo_plan(quick=True)
    results = json.loads((out / "results.json").read_text())
    # What it prints is what it wrote.
    assert f"relative error {results['final_error']:+.2%}" in first.stdout
    assert f"mean error {results['curve_mean_error']:.2%}" in first.stdout
    assert "checks the loop, not the accuracy" in first.stdout.replace("\n", " ") and "seed noise" not in first.stdout
    for path in ("report.html", "figures/hero_curve.png", "figures/ladder_fit.png", "prediction/prediction.json"):
        assert (out / path).is_file(), path
        assert str(out / path.split("/")[0]) in first.stdout.replace("\n", "")
    # Every run trained to its planned step and wrote wandb offline files.
    for cfg in p.runs():
        status = json.loads((out / "plan" / "runs" / cfg.name / "status.json").read_text())
        assert status == status | {"state": "finished", "step": cfg.stop_after_steps}
        assert list((out / "plan" / "runs" / cfg.name / "wandb").glob("offline-run-*/run-*.wandb"))
    # The score is the hero's logged final eval against the saved prediction at that step.
    metrics = [json.loads(x) for x in (out / "plan" / "runs" / p.hero.name / "metrics.jsonl").read_text().splitlines()]
    evals = [m for m in metrics if "eval/loss" in m]
    assert evals[-1]["step"] == p.hero.stop_after_steps
    assert results["final_actual"] == pytest.approx(evals[-1]["eval/loss"], rel=1e-6)
    table = pd.read_parquet(out / "prediction" / "prediction.parquet").set_index("step")
    assert results["final_predicted"] == pytest.approx(table.loc[p.hero.stop_after_steps, "median"], rel=1e-9)
    assert results["final_error"] == pytest.approx(results["final_predicted"] / results["final_actual"] - 1)
    assert 0 <= results["curve_mean_error"] <= results["curve_worst_error"]
    # The watcher checked the hero live: a verdict line at its evals, and a state file with them.
    verdicts = re.findall(r"step\s+([\d,]+)", first.stdout.split("4. train the hero")[1].split("5. predicted")[0])
    assert len({int(v.replace(",", "")) for v in verdicts}) >= 3
    state = json.loads((out / "prediction" / "watch-state.json").read_text())
    assert state["verdicts"]
    # The report says where the run stands as the tables do: of the plan it started with
    from ladder.predict.prediction import Prediction

    last = evals[-1]["step"]
    started = Prediction.load(out / "prediction").started_with
    assert f"at step {last:,} ({last / started:.0%} of the plan" in (out / "report.html").read_text()


@pytest.mark.slow
def test_second_run_reuses_every_finished_run(demo):
    out, first, first_s, second, second_s, mtimes = demo
    p = demo_plan(quick=True)
    for cfg in p.runs():
        assert f"{cfg.name}: finished already" in second.stdout
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes  # nothing was trained again
    assert json.loads((out / "results.json").read_text())["final_actual"] > 0
    assert second_s < first_s
    # the demo's time is the one that trained; this run's own is said beside it
    results = json.loads((out / "results.json").read_text())
    assert results["seconds"] > results["seconds_this_run"] and results["seconds_this_run"] < second_s
    assert f"the demo that trained its runs took {results['seconds']:.0f} s" in " ".join(second.stdout.split())


@pytest.mark.slow
def test_a_copy_of_the_demo_folder_demos_again_and_the_other_size_is_refused_there(demo, tmp_path):
    """A copied demo (a backup, a copied clone) reads its runs from the copy, though the store names the original's
    folders; the full demo run into the quick one's folder is refused before it deletes anything."""
    import shutil

    out = demo[0]
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, symlinks=True)
    mtimes = {p: p.stat().st_mtime_ns for p in (copy / "plan" / "runs").glob("*/metrics.jsonl")}
    again, _ = run_demo(copy)
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes  # nothing trained again
    from ladder.data.store import Store

    runs = Store(copy / "store").runs()
    assert all(str(s).startswith(f"local:{copy.resolve()}/") for s in runs["source"]), list(runs["source"])
    full = subprocess.run([str(LADDER), "demo", "--out", str(copy), "--poll", "1"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "200"})
    said = " ".join(full.stderr.split())
    assert full.returncode == 2 and f"{copy} holds the other size's demo" in said, full.stdout + full.stderr
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes and all(p.exists() for p in mtimes)
    bad = subprocess.run([str(LADDER), "demo", "--quick", "--out", str(copy), "--poll", "-1"], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 2 and "--poll -1.0: must be positive seconds" in bad.stderr, bad.stderr


@pytest.mark.slow
def test_notebook_predicts_and_watches_the_demo_hero(demo):
    out = demo[0]
    nb = nbformat.read(NOTEBOOK, as_version=4)
    os.environ["LADDER_DEMO_DIR"] = str(out)
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    finally:
        del os.environ["LADDER_DEMO_DIR"]
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    from tests.test_notebooks import figures_missing

    assert not figures_missing(nb)  # the hero against its band shows in the notebook, not only in a file


def _files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _users_ladder(folder: Path):
    """`ladder plan micro-cpu --tpp 3 --out FOLDER`, its first rung trained: the demo's run names, not its runs."""
    from ladder.config.plan import override, plan
    from ladder.config.recipe import load_recipe
    from tests.synthetic_ladder import write_run

    user = plan(override(load_recipe(PRESET), sets=["tpp=3"]))
    for cfg in user.runs():
        cfg.save(folder / f"{cfg.name}.yaml")
    write_run(folder / "runs", user.rungs[0])
    assert {c.name for c in user.runs()} == {c.name for c in demo_plan(quick=True).runs()}
    return user


def test_a_users_ladder_of_the_same_preset_is_refused_and_left_whole(tmp_path):
    """The demo clears only run folders it wrote; a user's run of the same name (and the user's configs) are refused,
    before anything is written, and the command says so in one line with exit code 2."""
    from typer.testing import CliRunner

    from ladder.cli import app

    folder = tmp_path / "plan"
    user = _users_ladder(folder)
    before, said = _files(folder), []
    with pytest.raises(LadderError, match=f"{folder / 'runs' / user.rungs[0].name}: a run folder the demo did not "
                       "write"):
        write_plan(demo_plan(quick=True), folder, other=demo_plan(quick=False), say=said.append)
    assert _files(folder) == before and not said
    res = CliRunner().invoke(app, ["demo", "--quick", "--out", str(tmp_path)], env={"COLUMNS": "400"})
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert _files(folder) == before and sorted(p.name for p in tmp_path.iterdir()) == ["plan"]
    # its configs alone are the user's too: not overwritten
    import shutil

    shutil.rmtree(folder / "runs")
    before = _files(folder)
    with pytest.raises(LadderError, match=f"{folder / user.rungs[0].name}.yaml: a run config the demo did not write"):
        write_plan(demo_plan(quick=True), folder, other=demo_plan(quick=False))
    assert _files(folder) == before


def test_the_runs_and_configs_of_an_earlier_demo_are_replaced(tmp_path):
    """What the demo wrote into its folder (listed in DEMO_CONFIGS) is its own: an earlier version's plan is replaced,
    its runs cleared; a run folder holding nothing a trainer wrote is left to the trainer."""
    from ladder.config.plan import override, plan
    from ladder.config.recipe import load_recipe
    from ladder.demo import DEMO_CONFIGS
    from tests.synthetic_ladder import write_run

    folder = tmp_path / "plan"
    earlier = plan(override(load_recipe(PRESET), sets=[*QUICK, "seed=1"]))
    write_plan(earlier, folder)
    old_run = write_run(folder / "runs", earlier.rungs[0])
    empty = folder / "runs" / earlier.rungs[1].name
    empty.mkdir()
    (empty / ".trainer.lock").touch()
    said = []
    now = demo_plan(quick=True)
    runs = write_plan(now, folder, other=demo_plan(quick=False), say=said.append)
    assert not old_run.exists() and said == [f"{old_run}: a run of an earlier config of the demo; cleared to train anew"]
    assert (empty / ".trainer.lock").exists()
    from ladder.config.runconfig import RunConfig

    assert [(RunConfig.load(path, check_coordinates=False), cfg) for path, cfg in runs] == \
        [(cfg, cfg) for cfg in now.runs()]
    assert len(json.loads((folder / DEMO_CONFIGS).read_text())) == 2 * len(now.runs())
    assert write_plan(now, folder, say=said.append) == runs and len(said) == 1  # again: nothing to do


def test_out_must_name_a_folder():
    from typer.testing import CliRunner

    from ladder.cli import app

    for out in ("", "  "):
        res = CliRunner().invoke(app, ["demo", "--quick", "--out", out])
        assert res.exit_code == 2 and f"--out {out!r}: an empty path" in res.output, res.output


def _hero_in(folder: Path, upto: int):
    """The quick demo's hero in `folder`/plan, running at step `upto`: its config and its run folder."""
    from tests.synthetic_ladder import write_run

    hero = demo_plan(quick=True).hero
    path = hero.save(folder / "plan" / f"{hero.name}.yaml")
    return hero, path, write_run(folder / "plan" / "runs", hero, upto=upto, state="running")


def _watcher(folder: Path, store, hero, path):
    import io

    from rich.console import Console

    from ladder.demo import _hero_watcher
    from tests.test_dynamics import hero_prediction

    return _hero_watcher(store, path, hero, hero_prediction(hero), folder / "prediction", Console(file=io.StringIO()))


def test_a_copy_of_the_demo_follows_the_hero_it_trains_itself(tmp_path):
    """A copy whose hero folder was removed (step 3 then keeps the original's hero in the store): the hero trained in
    the copy is followed there, not refused as a copy of the original's run."""
    from ladder.data.sources import LocalSource
    from ladder.data.sources.pull import pull
    from ladder.data.store import Store

    original, copy = tmp_path / "original", tmp_path / "copy"
    hero, _, _ = _hero_in(original, upto=demo_plan(quick=True).hero.eval_steps()[3])
    store = Store(copy / "store")
    pull(store, LocalSource(original / "plan" / "runs"))
    _, path, _ = _hero_in(copy, upto=hero.eval_steps()[1])
    _watcher(copy, store, hero, path).check()
    assert str(store.run(hero.name)["source"]).startswith(f"local:{copy.resolve()}/")


FAKE_TRAINER = """
import json, pathlib, signal, sys, time
def stop(*_):
    pathlib.Path(sys.argv[1], "status.json").write_text(json.dumps({"state": "crashed", "step": int(sys.argv[2])}))
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
pathlib.Path(sys.argv[1], "ready").touch()
time.sleep(60)
"""
"""A trainer that marks its run crashed when it is stopped, as the real one does."""


def test_a_hero_stopped_mid_run_reads_crashed_in_the_demo_s_store_too(tmp_path, monkeypatch):
    import ladder.demo
    from ladder.data.store import Store

    hero = demo_plan(quick=True).hero
    step = hero.eval_steps()[1]
    hero, path, run_dir = _hero_in(tmp_path, upto=step)
    monkeypatch.setattr(ladder.demo, "start", lambda *_, **__: subprocess.Popen(
        [sys.executable, "-c", FAKE_TRAINER, str(run_dir), str(step)], process_group=0))
    store = Store(tmp_path / "store")
    watcher = _watcher(tmp_path, store, hero, path)
    check = watcher.check

    def check_then_stop():
        check()
        deadline = time.monotonic() + 60
        while not (run_dir / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        raise KeyboardInterrupt  # Ctrl-C while the hero trains

    watcher.check = check_then_stop
    with pytest.raises(KeyboardInterrupt):
        ladder.demo._train_watched(path, watcher, poll_seconds=0.01)
    assert json.loads((run_dir / "status.json").read_text())["state"] == "crashed"
    assert store.run(hero.name)["state"] == "crashed"


def test_a_demo_that_trained_nothing_keeps_the_seconds_of_the_one_that_did(tmp_path):
    from ladder.demo import _seconds_trained

    results = tmp_path / "results.json"
    assert _seconds_trained(results, quick=False, this_run=6.0) == 6.0  # no earlier demo: this one's
    results.write_text(json.dumps({"seconds": 648.0, "quick": False}))
    assert _seconds_trained(results, quick=False, this_run=6.0) == 648.0
    assert _seconds_trained(results, quick=True, this_run=6.0) == 6.0  # the other size's
    results.write_text("{")
    assert _seconds_trained(results, quick=False, this_run=6.0) == 6.0


def test_a_folder_of_the_users_own_outputs_is_refused_and_an_earlier_demo_s_is_not(tmp_path):
    """The demo replaces its store's runs, its prediction and its report: a folder holding what it did not write is
    refused before anything is written; one an earlier demo wrote (its plan, even without the list) goes on."""
    from ladder.demo import DEMO_CONFIGS, check_demo_folder

    mine = tmp_path / "mine"
    (mine / "store").mkdir(parents=True)
    (mine / "prediction").mkdir()
    (mine / "prediction" / "alerts.jsonl").write_text("{}\n")
    before = _files(mine)
    with pytest.raises(LadderError, match=f"--out {mine}: holds files the demo did not write \\(prediction, store\\)"):
        check_demo_folder(mine)
    assert _files(mine) == before
    check_demo_folder(tmp_path / "new")  # absent or empty: the demo's to fill
    (tmp_path / "empty").mkdir()
    check_demo_folder(tmp_path / "empty")
    # an earlier demo's folder, stopped before its end and written before the list existed: its plan is the demo's
    old = tmp_path / "old" / "plan"
    old.mkdir(parents=True)
    plan = demo_plan(quick=True)
    plan.rungs[0].save(old / f"{plan.rungs[0].name}.yaml")
    check_demo_folder(old.parent)
    write_plan(plan, old, other=demo_plan(quick=False))
    listed = json.loads((old / DEMO_CONFIGS).read_text())
    assert len(listed) == len(plan.runs())  # every config of the plan, the one already there too

"""`ladder demo --quick` end to end, as a user runs it (the console script, in a fresh process), then
again to check that it reuses every finished run, then notebook 03 on what it left behind."""

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

from ladder.demo import demo_plan

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

"""`ladder train`: train one run config, or every run of a planned ladder folder.

Each run trains in its own ``python -m trainer_jax`` process (the way a cluster launcher runs it),
so `ladder` never imports the trainer. A relative ``run_dir`` is taken relative to the config
file's folder, as the planner's ``launch.sh`` does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer

from ladder import runfiles
from ladder.cli.app import command, console
from ladder.errors import LadderError
from ladder.runconfig import RunConfig


@command("train")
def train_command(
    config: Path | None = typer.Argument(None, help="A RunConfig YAML (from `ladder plan --out`)."),
    ladder: Path | None = typer.Option(
        None, "--ladder",
        help="Train every run config in this folder: rungs from the smallest, then the hero. Finished runs "
        "are skipped and unfinished ones resume from their last checkpoint.",
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue the run from its last checkpoint (if any)."),
    rungs_only: bool = typer.Option(False, "--rungs-only", help="With --ladder: train the rungs, not the hero."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
) -> None:
    """Train a run config with the JAX trainer; `--ladder DIR` trains a whole planned ladder."""
    if (config is None) == (ladder is None):
        raise LadderError("give either one RUN.yaml or --ladder DIR (a folder written by `ladder plan --out`)")
    if config is not None:
        RunConfig.load(config)  # a bad config fails here, with the field named, before a process starts
        _launch(config, resume, progress)
        return
    runs = ladder_runs(ladder, rungs_only)
    for path, cfg in runs:
        run_dir = cfg.resolved_run_dir(base=path.parent)
        if run_state(run_dir) == "finished" and _same_config(run_dir, cfg):
            console.print(f"[dim]{cfg.name}: finished already ({run_dir}), skipped[/]")
            continue
        _launch(path, True, progress)  # a run from another config is refused by the trainer, clearly
    console.print(f"Trained {len(runs)} runs of {ladder}:")
    for path, cfg in runs:
        run_dir = cfg.resolved_run_dir(base=path.parent)
        loss = final_eval_loss(run_dir)
        shown = f"{loss:.4f}" if loss is not None else "-"
        console.print(f"  {cfg.name:<22} {run_state(run_dir) or 'missing':<9} eval/loss {shown}  {run_dir}")


def ladder_runs(folder: Path, rungs_only: bool) -> list[tuple[Path, RunConfig]]:
    """Every RunConfig YAML in `folder`: rungs by fit compute, then the hero. All are checked first."""
    if not folder.is_dir():
        raise LadderError(f"--ladder {folder}: no such folder (write one with `ladder plan PRESET --out {folder}`)")
    runs = [(p, RunConfig.load(p)) for p in sorted(folder.glob("*.yaml"))]
    if not runs:
        raise LadderError(f"--ladder {folder}: no run config (*.yaml) in it")
    runs.sort(key=lambda pc: (pc[1].role == "hero", pc[1].fit_flops, pc[1].name))
    return [(p, c) for p, c in runs if not (rungs_only and c.role == "hero")]


def run_state(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / runfiles.STATUS_FILE).read_text()).get("state")
    except (OSError, ValueError, AttributeError):
        return None


def _same_config(run_dir: Path, cfg: RunConfig) -> bool:
    try:
        return RunConfig.load(run_dir / runfiles.CONFIG_FILE) == cfg
    except LadderError:
        return False


def final_eval_loss(run_dir: Path) -> float | None:
    loss = None
    try:
        lines = (run_dir / runfiles.METRICS_FILE).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            loss = json.loads(line).get(runfiles.EVAL_LOSS, loss)
        except (ValueError, AttributeError):
            continue
    return loss


def _launch(config: Path, resume: bool, progress: bool) -> None:
    cmd = [sys.executable, "-m", "trainer_jax", str(config)]
    cmd += ["--resume"] if resume else []
    cmd += [] if progress else ["--no-progress"]
    try:
        code = subprocess.call(cmd)
    except KeyboardInterrupt:  # the trainer got the same signal and has said how to resume
        raise typer.Exit(130) from None
    if code:
        # The trainer has printed its own message (one line for a user error, exit code 2).
        raise typer.Exit(code)

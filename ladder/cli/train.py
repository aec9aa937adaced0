"""`ladder train`: train one run config, or every run of a planned ladder folder (see `ladder.launch`)."""

from __future__ import annotations

from pathlib import Path

import typer

from ladder.cli.app import command, console
from ladder.errors import LadderError
from ladder.launch import final_eval_loss, is_done, ladder_runs, run_dir_of, run_state, train
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
        _run(config, resume, progress)
        return
    runs = ladder_runs(ladder, rungs_only)
    for path, cfg in runs:
        if is_done(path, cfg):
            console.print(f"[dim]{cfg.name}: finished already ({run_dir_of(path, cfg)}), skipped[/]")
            continue
        _run(path, True, progress)  # a run from another config is refused by the trainer, clearly
    console.print(f"Trained {len(runs)} runs of {ladder}:")
    for path, cfg in runs:
        run_dir = run_dir_of(path, cfg)
        loss = final_eval_loss(run_dir)
        shown = f"{loss:.4f}" if loss is not None else "-"
        console.print(f"  {cfg.name:<22} {run_state(run_dir) or 'missing':<9} eval/loss {shown}  {run_dir}")


def _run(config: Path, resume: bool, progress: bool) -> None:
    try:
        code = train(config, resume, progress)
    except KeyboardInterrupt:  # the trainer got the same signal and has said how to resume
        raise typer.Exit(130) from None
    if code:  # the trainer has printed its own message (one line for a user error, exit code 2)
        raise typer.Exit(code)

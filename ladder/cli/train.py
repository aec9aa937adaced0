"""`ladder train`: train one run config, or every run of a planned ladder folder, one after another
on this machine (see `ladder.launch`) or all at once on Ray (see `ladder.cluster`)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import typer
from rich.markup import escape
from typer.core import TyperCommand

from ladder import runfiles
from ladder.cli.app import Format, command, console, err_console, given, warn
from ladder.config.runconfig import RunConfig
from ladder.errors import LadderError
from ladder.launch import (
    final_eval_loss,
    how_it_ended,
    is_done,
    ladder_runs,
    mark_crashed,
    run_dir_of,
    run_state,
    stop_said,
    stop_signal,
    train,
)

LOCAL = "local"


class _RayFlag(TyperCommand):
    """Lets ``--ray`` stand alone (a local Ray instance) as well as take an address."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = list(args)
        for i, arg in enumerate(args):
            if arg == "--ray":
                following = args[i + 1] if i + 1 < len(args) else None
                path = following is not None and os.path.exists(following) and ":" not in following
                if following is None or following.startswith("-") or following.endswith((".yaml", ".yml")) or (
                        path and following != "auto"):  # a folder or file here is the run, not an address
                    args.insert(i + 1, LOCAL)
                break
        return super().parse_args(ctx, args)


@command("train", cls=_RayFlag)
def train_command(
    ctx: typer.Context,
    config: Path | None = typer.Argument(None, help="A RunConfig YAML (from `ladder plan --out`)."),
    ladder: Path | None = typer.Option(
        None, "--ladder",
        help="Train every run config in this folder: rungs from the smallest, then the hero. Finished runs "
        "are skipped and unfinished ones resume from their last checkpoint.",
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue the run from its last checkpoint (if any)."),
    rungs_only: bool = typer.Option(False, "--rungs-only", help="With --ladder: train the rungs, not the hero."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
    ray: str | None = typer.Option(
        None, "--ray", metavar="[ADDRESS]",
        help="Train on Ray, every run at once as resources allow (each asks for its config's `resources`). "
        "Alone: start a local Ray instance; `auto`: join this machine's cluster; `ray://HOST:PORT`: a "
        "remote cluster. Needs Ray (the package's `ray` extra).",
    ),
    retries: int = typer.Option(2, "--retries", help="With --ray: start a failed run again from its checkpoint up to this many times."),
    ray_cpus: int | None = typer.Option(None, "--ray-cpus", help="With a local Ray instance: the CPUs it offers (default: all)."),
    fmt: Format = typer.Option(Format.table, "--format", help="With --ray: the live table, or one JSON line per change of a run."),
) -> None:
    """Train a run config with the JAX trainer; `--ladder DIR` trains a whole planned ladder.

    A stop (Ctrl-C, SIGTERM from a scheduler, SIGHUP from a closed terminal) is passed on to the trainer, which
    stops at its next step and marks its run crashed and says how to resume it: `--ladder DIR` again, or a single
    RUN.yaml with --resume. A trainer already training the same run folder is refused.

    Exit codes: 0 done; 2 bad input; 130 interrupted (Ctrl-C), 143 stopped (SIGTERM), 129 (SIGHUP); 128+N when a
    trainer was killed by signal N (137: SIGKILL, often out of memory; the run is marked crashed, and resumed as
    above); any other non-zero code is the failed trainer's.
    """
    if (config is None) == (ladder is None):
        raise LadderError("give either one RUN.yaml or --ladder DIR (a folder written by `ladder plan --out`)")
    if rungs_only and ladder is None:
        raise LadderError("--rungs-only needs --ladder DIR: a single RUN.yaml is one run; leave --rungs-only out")
    extra = [] if ray is not None else given(ctx, retries="--retries", ray_cpus="--ray-cpus", fmt="--format")
    if extra:
        raise LadderError(f"{extra[0]} needs --ray: without it the runs train one after another here; "
                          f"add --ray or leave {extra[0]} out")
    if config is not None and config.is_dir():
        raise LadderError(f"{config}: is a folder; give one RUN.yaml, or --ladder {config} to train the ladder planned "
                          "there")
    if config is not None:
        runs = [(config, RunConfig.load(config, check_coordinates=False))]  # a bad config fails here (the trainer warns)
    else:
        runs = ladder_runs(ladder, rungs_only)
    skipped, edited = 0, _finished_but_edited(runs)
    if ray is None:  # its hosts are Ray's to start: here the run trains as one process
        for path, cfg in runs:
            if cfg.resources.hosts > 1:
                warn(f"{path}: asks for {cfg.resources.hosts} hosts (resources.hosts); without --ray it trains as one "
                     "process on this machine (`ladder train --ladder DIR --ray ADDRESS` starts one on each host)")
    if ray is not None:
        skipped = _train_on_ray(runs, ray, retries, resume or ladder is not None, ray_cpus, fmt) + _found_done(edited)
    elif config is not None:
        _run(config, runs[0][1], resume, progress)
        return
    if ray is None:
        for path, cfg in runs:
            if is_done(path, cfg):
                console.print(f"[dim]{escape(cfg.name)}: finished already ({escape(str(run_dir_of(path, cfg)))}), skipped[/]",
                              markup=True)
                skipped += 1
                continue
            # a run from another config is refused by the trainer, clearly; a killed one still shows the ladder
            _run(path, cfg, True, progress, lambda done=skipped: _summary(runs, ladder, done))
        skipped += _found_done(edited)
    if fmt is Format.table:
        _summary(runs, ladder or config, skipped)


def _finished_but_edited(runs: list[tuple[Path, RunConfig]]) -> dict[Path, int | None]:
    """The runs whose status says finished though their config was edited since (`is_done` says no), each run folder
    with its last checkpoint: their trainers are started, and may find nothing to train (`_found_done`)."""
    dirs = [(run_dir_of(path, cfg), path, cfg) for path, cfg in runs]
    return {d: runfiles.last_checkpoint(d) for d, path, cfg in dirs
            if run_state(d) == "finished" and not is_done(path, cfg)}


def _found_done(edited: dict[Path, int | None]) -> int:
    """How many of the `edited` runs their trainers found finished: their last checkpoint is where it was."""
    return sum(run_state(d) == "finished" and runfiles.last_checkpoint(d) == step for d, step in edited.items())


def _summary(runs: list[tuple[Path, RunConfig]], where: Path, skipped: int = 0,
             ended: dict[str, str] | None = None) -> None:
    """Each run's state and last eval; a run counts as trained once finished (a crashed or failed one does not);
    `ended`: the runs Ray failed or cancelled, by name, each said so where its folder reads finished (a finished run
    whose edited config its trainer refused)."""
    dirs = [run_dir_of(path, cfg) for path, cfg in runs]
    states = [run_state(d) or "missing" for d in dirs]
    states = [(ended or {}).get(cfg.name, s) if s == "finished" else s for s, (_, cfg) in zip(states, runs)]
    trained, unfinished = states.count("finished") - skipped, len(states) - states.count("finished")
    more = [f"{skipped} finished already"] * bool(skipped) + [f"{unfinished} not finished"] * bool(unfinished)
    already = f" ({', '.join(more)})" if more else ""
    console.print(f"Trained {trained} run{'' if trained == 1 else 's'} of {where}{already}:")
    for (_, cfg), run_dir, state in zip(runs, dirs, states):
        loss = final_eval_loss(run_dir)
        shown = f"{loss:.4f}" if loss is not None else "-"
        console.print(f"  {cfg.name:<22} {state:<9} eval/loss {shown}  {run_dir}")


AGAIN, AGAIN_RESUME = "run the same command again", "add --resume to the command"
"""How a stopped run is resumed: a ladder, or a config trained with --resume; a config trained without."""


def _run(config: Path, cfg: RunConfig, resume: bool, progress: bool, summary: Callable[[], None] | None = None) -> None:
    """Train one run; where it is one of a ladder, a killed trainer still prints the ladder's `summary`."""
    again = AGAIN if resume else AGAIN_RESUME
    try:
        code = train(config, resume, progress, again)
    except KeyboardInterrupt as exc:  # the trainer got the same signal and has said how to resume
        raise typer.Exit(128 + stop_signal(exc)) from None
    if code < 0:  # killed by a signal (SIGKILL: the out-of-memory killer, say): the trainer could say nothing
        _killed(config, cfg, -code, again=again)
        if summary is not None:
            summary()
        raise typer.Exit(128 - code)
    if code:  # the trainer has printed its own message (one line for a user error, exit code 2)
        raise typer.Exit(code)


def _killed(config: Path, cfg: RunConfig, signum: int, again: str) -> None:
    run_dir = run_dir_of(config, cfg)
    mark_crashed(run_dir)  # the trainer had no chance to: the run reads as stopped, not running
    saved, logged = runfiles.last_checkpoint(run_dir), runfiles.last_logged_step(run_dir)
    upto = "" if logged is None else f"; it had logged to step {logged:,}"
    where = (f"resume it from its last checkpoint (step {saved:,}{upto})" if saved is not None
             else f"restart it from step 0 (it had saved no checkpoint yet{upto})")
    err_console.print(f"{cfg.name}: its trainer {how_it_ended(-signum)}; {again} to {where} ({run_dir})",
                      highlight=False, soft_wrap=True)


def _train_on_ray(runs: list[tuple[Path, RunConfig]], address: str, retries: int, resume: bool,
                  ray_cpus: int | None, fmt: Format) -> int:
    """Train `runs` on Ray; the count of those skipped (finished before)."""
    from ladder.cluster import Board, Interrupted, attempt_ended, train_on_ray

    if ray_cpus is not None and address != LOCAL:
        raise LadderError(f"--ray-cpus {ray_cpus}: only with a local Ray instance (--ray alone); a cluster offers the "
                          f"CPUs its nodes have (--ray {address})")
    if ray_cpus is not None and ray_cpus < 1:
        raise LadderError(f"--ray-cpus {ray_cpus}: give a positive count of CPUs")

    stdout = sys.stdout
    again = AGAIN if resume else AGAIN_RESUME

    def board(rows: list[Any]) -> Board:
        return Board(rows, fmt.value, console, err_console, json_out=stdout)

    try:
        # Ray prints its own notices on standard output; with --format json that holds JSON only.
        with contextlib.redirect_stdout(sys.stderr) if fmt is Format.json else contextlib.nullcontext():
            jobs = train_on_ray(runs, address=address, retries=retries, resume=resume, board_factory=board,
                                local_cpus=ray_cpus, again=again)
    except Interrupted as exc:
        said = stop_said(exc.signum)
        if exc.started:
            err_console.print(f"{said}: every run was stopped at or after its last checkpoint; {again} to "
                              "resume them", highlight=False)
        else:
            err_console.print(f"{said} before any run started: nothing was trained; run the same command again "
                              "to start", highlight=False)
        raise typer.Exit(128 + exc.signum) from None
    bad = [j for j in jobs.values() if j.state in ("failed", "cancelled")]
    for job in bad:
        err_console.print(f"{job.name}: {job.state} after {job.attempts} attempt(s): {attempt_ended(job.codes)}; its "
                          f"log: {job.run_dir / 'train.log'}", highlight=False)
    skipped = sum(j.state == "skipped" for j in jobs.values())
    if bad:
        if fmt is Format.table:
            _summary(runs, runs[0][0].parent, skipped, {j.name: j.state for j in bad})
        # each run's first failed process (the others are cancelled after it, as lost); the trainers' own code where
        # they agree (2: bad input), as a shell gives it (128 + N: killed by signal N)
        first = {next((c for c in j.codes if c != 0), None) for j in bad}
        codes = {None if c is None else 128 - c if c < 0 else c for c in first}
        raise typer.Exit(codes.pop() if len(codes) == 1 and None not in codes else 1)
    return skipped

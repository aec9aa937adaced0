"""`ladder demo`: the whole loop on a laptop, end to end (see `ladder.demo`)."""

from __future__ import annotations

from pathlib import Path

import typer

from ladder.cli.app import command, console


@command("demo")
def demo_command(
    quick: bool = typer.Option(False, "--quick", help="The same loop at a much smaller size (2–4 minutes on 2 cores)."),
    out: Path | None = typer.Option(None, "--out", help="Folder for everything the demo writes (default demo/, or demo-quick/)."),
    poll: float = typer.Option(3.0, "--poll", help="Seconds between the watcher's checks while the hero trains."),
    n_boot: int = typer.Option(200, "--n-boot", help="Bootstrap refits over rungs for the prediction's bands (20 to 10,000)."),
) -> None:
    """Plan the micro-cpu ladder, train its rungs, predict the hero's whole curve, train the hero while
    `ladder watch` follows it, then print predicted against actual and write figures and a report.

    Runs on a laptop CPU with no network and no wandb account (wandb logs offline). Finished runs
    are reused, so a second run takes seconds.
    """
    from ladder.config.limits import poll_seconds, resamples
    from ladder.demo import run_demo  # jax, scipy and matplotlib: only when the demo runs

    resamples("--n-boot", n_boot, least=20, none_ok=False)
    poll_seconds(poll)

    run_demo(out or Path("demo-quick" if quick else "demo"), quick, console, poll_seconds=poll, n_boot=n_boot)

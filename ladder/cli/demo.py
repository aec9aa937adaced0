"""`ladder demo`: the whole loop on a laptop, end to end (see `ladder.demo`)."""

from __future__ import annotations

from pathlib import Path

import typer

from ladder.cli.app import command, console
from ladder.errors import LadderError
from ladder.outpaths import out_dir


@command("demo")
def demo_command(
    quick: bool = typer.Option(False, "--quick", help="The same loop at a much smaller size (2–4 minutes on 2 cores)."),
    out: str | None = typer.Option(None, "--out", metavar="<path>", help="Folder for everything the demo writes (default demo/, or demo-quick/)."),
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
    if out is not None and not out.strip():  # taken as a path, it would be the working folder
        raise LadderError(f"--out {out!r}: an empty path; give the folder for the demo's files (by default --quick "
                          "writes demo-quick/ and the full demo demo/)")
    folder = out_dir(Path(out) if out is not None else Path("demo-quick" if quick else "demo"))

    run_demo(folder, quick, console, poll_seconds=poll, n_boot=n_boot)

"""`ladder check`: a pre-flight verdict on a finished ladder before the hero starts (`ladder.check`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from ladder.cli.app import Format, command, console, print_json, warn
from ladder.config.limits import hero_flops
from ladder.data.store import DEFAULT_ROOT, Store
from ladder.errors import LadderError

# `ladder.check` loads `fits` (scipy) and is imported inside the command, so `ladder --help` stays light.

CHECK_NAMES = ("grad-norm", "spikes", "drops", "off-trend", "crashed", "lr-rule")
_STYLE = {"ok": "green", "warning": "yellow", "alarm": "bold red", "not checked": "magenta", "skipped": "dim"}


@command("check")
def check_command(
    store: Path = typer.Option(Path(DEFAULT_ROOT), "--store", help="Store folder holding the rungs."),
    group: str | None = typer.Option(None, "--group", help="The ladder's group (default: the store's only group)."),
    hero: Path | None = typer.Option(None, "--hero", help="The hero's run config (YAML from `ladder plan`) or target file (as `ladder predict --target` takes it): its fit compute over the steps of the plan it starts with, before any planned cut of its horizon (as `ladder predict` counts it; `plan` and `spec` show the compute after the cut)."),
    hero_compute: float | None = typer.Option(None, "--hero-compute", help="The hero's fit compute in FLOPs (3 × forward without the head × the tokens of the plan it starts with; `ladder plan` prints the compute of the run its schedule's edits leave)."),
    recipe: str | None = typer.Option(None, "--recipe", help="The recipe the ladder was planned with (preset or YAML), for the LR rule (default: the preset named like the group)."),
    grad_limit: float = typer.Option(4.0, "--grad-limit", help="Alarm when the hero's projected grad-norm peak exceeds this."),
    spike_limit: float = typer.Option(1.0, "--spike-limit", help="Train-loss spikes per 1,000 steps the hero may be projected to have."),
    spike_z: float = typer.Option(6.0, "--spike-z", help="Robust SDs above the rolling median that make a spike."),
    skip_fraction: float = typer.Option(0.05, "--skip-fraction", help="Leading fraction of each run ignored for peaks, spikes and drops."),
    outlier_level: float = typer.Option(0.95, "--outlier-level", help="Off-trend check: a clean ladder flags a rung with probability about 1 − this."),
    outlier_floor: float = typer.Option(0.002, "--outlier-floor", help="Off-trend check: least relative scatter of final losses assumed."),
    lr_tolerance: float = typer.Option(0.10, "--lr-tolerance", help="Allowed relative difference of a rung's peak LR from the recipe's rule."),
    metric: str = typer.Option("eval/loss", "--metric", help="Eval metric whose final values the off-trend check fits."),
    skip: list[str] = typer.Option([], "--skip", help=f"Leave a check out (repeatable): {', '.join(CHECK_NAMES)}."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, or json (one object on stdout)."),
) -> None:
    """Check a finished ladder before the hero starts: grad-norm peaks and loss spikes growing with
    size, the MoE drop fraction trending up, a rung off the others' loss trend, crashed rungs, and
    the rungs' peak LRs against the recipe's rule. Trends are projected to the hero's compute with
    a 90% band (from --hero, --hero-compute, or the hero run in the store).

    Exit codes: 0 nothing raised; 3 cannot judge (a check lacked its data: too few rungs, a series
    not logged, no hero compute); 4 warning (a finding's, or a warning that doubts the hero given: another
    group's, or a compute not above the largest rung's); 5 alarm. 2 is a usage error (a hero compute below the
    smallest rung's among them) and 1 a bug.
    """
    from ladder.check import CheckSettings, check_ladder, hero_file

    if hero is not None and hero_compute is not None:
        raise LadderError("give --hero CONFIG.yaml or --hero-compute FLOPS, not both")
    if hero_compute is not None:
        hero_flops("--hero-compute", hero_compute)
    if hero is not None:
        hero = hero_file(hero)
    settings = CheckSettings(grad_limit=grad_limit, spike_limit=spike_limit, spike_z=spike_z,
                             skip_fraction=skip_fraction, outlier_level=outlier_level, outlier_floor=outlier_floor,
                             lr_tolerance=lr_tolerance, metric=metric)
    hero_at = None
    if hero_compute is not None:
        from ladder.check import HeroCompute

        hero_at = HeroCompute(hero_compute, "--hero-compute")
    report = check_ladder(Store(store), group=group, hero=hero_at, recipe=recipe, settings=settings,
                          skip=tuple(skip), hero_config=hero)
    if fmt is Format.json:
        print_json(report.to_json())
    else:
        _show(report)
    raise typer.Exit(report.exit_code)


def _show(report) -> None:
    hero = "no hero compute" if report.hero is None else f"hero C = {report.hero.flops:.3g} FLOPs ({report.hero.source})"
    table = Table(title=f"Ladder check: {report.group}, {len(report.rungs)} rung{'' if len(report.rungs) == 1 else 's'}, {hero}", show_lines=True)
    for col, kw in (("check", {"no_wrap": True}), ("status", {"no_wrap": True}), ("evidence", {"ratio": 3}),
                    ("hero (projected)", {"ratio": 1}), ("remedy", {"ratio": 2})):
        table.add_column(col, **kw)
    for f in report.findings:
        style = _STYLE[f.status]
        table.add_row(f.name, Text(f.status, style=style), Text(f.evidence), Text(f.hero), Text(f.remedy))
    console.print(table)
    for w in report.warnings:
        warn(w)
    style = _STYLE[report.status]
    verdict = {"ok": "nothing raised", "not checked": "cannot judge every check", "warning": "warning",
               "alarm": "alarm"}[report.status]
    console.print(f"[{style}]{verdict}[/] (exit {report.exit_code})", markup=True)

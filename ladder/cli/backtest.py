"""`ladder backtest`: fit a form without the largest runs, predict them, and score the predictions and
their bands."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from ladder.cli import fitshared as shared
from ladder.cli.app import Format, command, console, parse_int_list, print_json
from ladder.cli.fitendpoint import endpoint_points
from ladder.config.limits import resamples
from ladder.data.store import Store
from ladder.errors import LadderError


class Form(StrEnum):
    endpoint = "endpoint"
    surface = "surface"
    curve = "curve"


@command("backtest")
def backtest_command(
    ctx: typer.Context,
    form: Form = typer.Option(Form.endpoint, "--form", help="endpoint, surface, or curve (per-fraction law)."),
    holdout: list[str] = typer.Option(["1"], "--holdout", help="Hold out the k largest runs, for each k listed, e.g. 1,2: by compute for the endpoint and per-fraction laws "
                                "(on a ladder of one token ratio, the k largest sizes), by model size for the surface "
                                "(by budget for an isoFLOP sweep's surface, where the CSV gives budgets)."),
    csv: Path | None = shared.CSV,
    store: Path = shared.STORE,
    metric: str | None = shared.METRIC,
    group: str | None = shared.GROUP,
    role: str = shared.ROLE,
    run_col: str | None = shared.RUN_COL,
    loss_col: str = shared.LOSS_COL,
    step_col: str = shared.STEP_COL,
    drop_col: str | None = shared.DROP,
    where: list[str] = shared.WHERE,
    compute_col: str = typer.Option("compute", "--compute-col", help="CSV: fit compute column (endpoint, curve)."),
    params_col: str = typer.Option("params", "--params-col", help="CSV: parameter count column (surface; for the "
                                   "endpoint law, an isoFLOP sweep's sizes: each budget's least loss is fitted)."),
    tokens_col: str = typer.Option(
        "tokens", "--tokens-col",
        help="CSV: tokens column (surface; endpoint: where the computes scatter around a sweep's budgets, the runs "
             "are grouped by the budgets their tokens trace)."),
    budget_col: str = typer.Option("budget", "--budget-col", help="CSV: compute budget column, read where the CSV has "
                                   "it (surface: an isoFLOP sweep's k largest budgets are held out, as `fit surface` "
                                   "chooses its form)."),
    total_steps_col: str | None = typer.Option(None, "--total-steps-col", help="CSV: planned steps column (curve: with "
                                               "--step-col, each row's fraction; endpoint and surface: a run whose last "
                                               "step falls short is left out; default: a column named total_steps or "
                                               "stop_after_steps; '' reads none)."),
    fraction_col: str | None = typer.Option(None, "--fraction-col", help="CSV: fraction column (curve)."),
    every: float = typer.Option(0.05, "--every", help="curve: fractions fitted (every this fraction)."),
    compute: shared.ComputeAxis = shared.COMPUTE,
    E: float | None = shared.E_OPT,
    bootstrap: int = typer.Option(0, "--bootstrap", help="Bands from N bootstrap refits (0: Student-t bands; else 2 to 10,000)."),
    seed: int = shared.SEED,
    level: float = typer.Option(0.9, "--level", help="Level of the band each held-out run is scored against, with or "
                                "without --bootstrap: the coverage counts the runs inside it, and should sit near it."),
    fmt: Format = shared.FMT,
) -> None:
    """Backtest a form: fit without the largest runs, predict them, and score the predictions.

    Reports each held-out run's relative error against the compute extrapolation ratio (and, for
    curves, the mean and worst error over 10–100% of the run), and how often the band `ladder fit`
    gives for such a target held it: the law's own band widened to at least 1% (one sd) per e-fold of
    extrapolation (for the surface, the form a backtest on the fitted runs chooses, with its band).
    The JSON keeps the law's own band beside it (own_lo, own_hi). A band of no finite width (as many
    parameters as runs) is shown and left out of the coverage; a held-out curve that stopped early is
    scored at its last eval.
    """
    import fits
    from ladder.data import fitdata
    shared.check_level(level)
    _only_for_its_form(ctx, form)
    shared.one_source(ctx, csv, where, drop_col, store, metric, group, role, compute, by_size=form is Form.surface)
    resamples("--bootstrap", bootstrap)
    ks = list(dict.fromkeys(parse_int_list(holdout, "--holdout", "1,2") or []))  # each k once
    if not ks or min(ks) < 1:
        raise LadderError(f"--holdout {','.join(holdout)!r}: give how many of the largest runs to hold out, e.g. 1 or 1,2")
    s = Store(store)
    if form is Form.curve:
        g = shared.fractions_every(every)
        if csv is not None:
            cols = shared.csv_columns(csv, run_col, loss_col, step_col, drop_col, where, compute=compute_col,
                         fraction=fraction_col, total_steps=total_steps_col)
            data = fitdata.curves_from_csv(csv, cols, g)
        else:
            data = fitdata.curves_from_store(s, shared.store_metric(s, metric), g, group, role or None, compute.value)
        data = data.from_first_evals()
        bt = fits.backtest_per_fraction(data.compute, data.fractions, data.losses, data.names, ks, E=E,
                                        level=level, n_boot=bootstrap, seed=seed)
        notes = data.notes
    else:
        endpoint = form is Form.endpoint
        named, optional = shared.named_columns(ctx, ("params", "tokens") if endpoint else ("budget",))
        need = ("compute", *named) if endpoint else ("params", "tokens", *named)
        if csv is not None:
            cols = shared.csv_columns(csv, run_col, loss_col, step_col, drop_col, where, compute=compute_col, params=params_col,
                         tokens=tokens_col, budget=budget_col, total_steps=total_steps_col)
            data = fitdata.finals_from_csv(csv, cols, need, optional)
        else:
            data = fitdata.finals_from_store(s, shared.store_metric(s, metric), group, role or None, compute.value)
        notes = data.notes
        with shared.saying_left_out(data):
            if endpoint:
                C, L, minima, notes = endpoint_points(data, params_col if csv is not None else None)
                names = [f"budget {m.compute:.3g}" for m in minima] if minima else data.names
                bt = fits.backtest_endpoint(C, L, names, ks, E=E, level=level, n_boot=bootstrap, seed=seed)
            else:
                bt = fits.backtest_surface(data.params, data.tokens, data.loss, data.names, ks, E=E, level=level,
                                           n_boot=bootstrap, seed=seed, budget=data.budget)
    if fmt is Format.json:
        print_json({"form": bt.form, "level": level, "coverage": bt.coverage,
                    "mean_abs_error": bt.mean_abs_error, "rows": bt.records(), "notes": [*notes, *bt.notes]})
        return
    console.print(bt.summary(), highlight=False)
    for n in notes:
        console.print(f"note: {n}", highlight=False)


def _only_for_its_form(ctx: typer.Context, form: Form) -> None:
    """Refuse the options of another form, which it would ignore."""
    shared.only_for(ctx, "curve:", form is Form.curve, "--form curve")
    shared.only_for(ctx, {"fraction_col": "--fraction-col"}, form is Form.curve, "--form curve")
    shared.only_for(ctx, {"compute_col": "--compute-col", "compute": "--compute"}, form is not Form.surface,
                    "--form endpoint or curve (the surface reads each run's N and D: --params-col and --tokens-col)")
    shared.only_for(ctx, {"params_col": "--params-col", "tokens_col": "--tokens-col"}, form is not Form.curve,
                    "--form endpoint or surface")
    shared.only_for(ctx, {"budget_col": "--budget-col"}, form is Form.surface, "--form surface")

"""`ladder fit endpoint|surface|curve` and `ladder backtest`: scaling-law fits from a CSV or the store.

Each command reads its data (`ladder.data.fitdata`), calls one function of `fits`, and prints a table
or, with `--format json`, one JSON object: the fitted parameters, the objective (mean Huber on log
residuals), the warnings, and with `--bootstrap N` their intervals over runs.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer
from rich.table import Table

from ladder.cli.app import Format, app, command, console, given, given_for, parse_int_list, print_json, warn
from ladder.config.limits import MAX_COMPUTE, positive, resamples
from ladder.data import endpointcsv
from ladder.data.store import DEFAULT_ROOT, Store
from ladder.errors import LadderError

# `fits` (scipy) loads inside the commands that fit, so `ladder --help` and the other commands skip it.
if TYPE_CHECKING:
    import fits
    from ladder.data import fitdata

fit_app = typer.Typer(
    help=(
        "Fit scaling laws to the rungs' losses, from the local store (default .ladder/) or a CSV "
        "(--csv FILE with column options). Every fit minimises the mean Huber loss (δ = 1e-3) on log "
        "residuals; --bootstrap N adds intervals from N refits over resampled runs."
    ),
    no_args_is_help=True,
)
app.add_typer(fit_app, name="fit")


class Form(StrEnum):
    endpoint = "endpoint"
    surface = "surface"
    curve = "curve"


class SurfaceForm(StrEnum):
    auto = "auto"
    free = "free"
    shared = "shared"
    kaplan = "kaplan"


class ComputeAxis(StrEnum):
    auto = "auto"
    fit = "fit"
    six_nd = "6nd"


class Law(StrEnum):
    perfraction = "perfraction"
    multipower = "multipower"
    momentum = "momentum"


# ---- shared options -------------------------------------------------------------------------------
CSV = typer.Option(None, "--csv", help="Read this CSV instead of the store (one row per run or per checkpoint).")
STORE = typer.Option(Path(DEFAULT_ROOT), "--store", help="Store folder (from `ladder pull`).")
METRIC = typer.Option(None, "--metric", help="Store: the metric to fit (default: the store's fit metric, eval/loss).")
GROUP = typer.Option(None, "--group", help="Store: only runs of this group.")
ROLE = typer.Option("rung", "--role", help="Store: only runs of this role (rung, hero, single; '' for all).")
RUN_COL = typer.Option(
    None, "--run-col", show_default=False,
    help="CSV: column naming each row's run ('' if every row is a run; default: run_id, or every row a "
         "run when the file has neither run_id nor a step column).",
)
LOSS_COL = typer.Option("loss", "--loss-col", help="CSV: column of the loss (nats per token).")
STEP_COL = typer.Option("step", "--step-col", help="CSV: column of the step; each run's last step gives its final loss.")
E_OPT = typer.Option(None, "--E", help="Pin the irreducible loss E instead of fitting it.")
BOOT = typer.Option(0, "--bootstrap", help="Refits over runs resampled with replacement, for intervals (0: none; at most 10,000).")
SEED = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="Seed of the bootstrap resampling (0 to 2³² − 1).")
LEVEL = typer.Option(0.9, "--level", help="Level of the parameters' bootstrap intervals (with --bootstrap N); every prediction gives its median with 50% and 90% bands.")
FMT = typer.Option(Format.table, "--format", help="table, or json (one object on stdout).")
COMPUTE = typer.Option(
    ComputeAxis.auto, "--compute",
    help="Store: the law's compute axis: 6nd (6·N·D, by parameters), fit (fit FLOPs, which count attention), or "
         "auto (6nd when every run gives N, as `ladder predict` counts it; else fit). --at is on this axis.",
)
DROP = typer.Option(None, "--drop-col", help="CSV: leave out rows whose value in this column is set: true, 1, yes or any "
                    "text (a quality flag, a reason), but not empty, false, 0 or no; the output says how many.")
WHERE = typer.Option([], "--where", help="CSV: only the rows whose COLUMN holds VALUE, as COLUMN=VALUE (repeatable; "
                     "e.g. --where dataset=c4 for one corpus of a table of several; the --predict-csv targets too, "
                     "where they have that column; a target whose cell there is blank is kept).")


def _cols(csv: Path, run_col: str | None, loss_col: str, step_col: str, drop: str | None, where: list[str],
          **more: str | None) -> fitdata.Columns:
    """The CSV's columns as the options name them; no --run-col: `endpointcsv.run_column` tells a table of one
    row per run from one of checkpoints."""
    from ladder.data import fitdata
    run = endpointcsv.run_column(csv, run_col, step_col)
    return fitdata.Columns(run=run or None, loss=loss_col, step=step_col or None, drop=drop, where=tuple(where),
                           **more)


def _one_source(ctx: typer.Context, csv: Path | None, where: list[str], drop_col: str | None, store: Path,
                metric: str | None, group: str | None, role: str, compute: ComputeAxis = ComputeAxis.auto) -> None:
    """Refuse options of the source not read: the CSV's row filters without --csv, the store's with it."""
    if csv is None and (where or drop_col):
        flag = "--where" if where else "--drop-col"
        raise LadderError(f"{flag} filters the rows of a CSV (--csv FILE); the store's runs are chosen with --group "
                          "and --role")
    columns = given_for(ctx, "CSV:")
    if csv is None and columns:
        raise LadderError(f"{columns[0]} names a column of a CSV (--csv FILE), and the fit reads the store {store}, whose "
                          "runs have their own coordinates; drop it, or give the CSV with --csv")
    given = [flag for flag, value, default in (("--store", store, Path(DEFAULT_ROOT)), ("--metric", metric, None),
                                               ("--group", group, None), ("--role", role, "rung"),
                                               ("--compute", compute, ComputeAxis.auto)) if value != default]
    if csv is not None and given:
        raise LadderError(f"{' and '.join(given)} only mean{'s' if len(given) == 1 else ''} something for the store's "
                          f"runs (which runs, and how their compute is counted), and --csv {csv} reads the CSV instead; "
                          f"drop {'it' if len(given) == 1 else 'them'}, pick the CSV's rows with --where COLUMN=VALUE, "
                          "and give its compute as a column (--compute-col)")


def _budget_columns(ctx: typer.Context) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The surface's budget column as `fitdata.finals_from_csv` takes it, (needed, optional): needed where
    --budget-col names it, else read where the CSV has the default."""
    return (("budget",), ()) if "--budget-col" in given_for(ctx, "CSV:") else ((), ("budget",))


def _only_for(ctx: typer.Context, prefix: str, applies: bool, what: str) -> None:
    """Refuse an option (one whose help starts with `prefix`) that the chosen law or form does not use."""
    extra = given_for(ctx, prefix)
    if extra and not applies:
        raise LadderError(f"{extra[0]} is only for {what}; drop it")


def _metric(store: Store, metric: str | None) -> str:
    return metric or (store.settings().fit_metric if store.exists() else "eval/loss")


def _floats(text: str | None, option: str, example: str = "1e21,1e22") -> list[float]:
    """Positive finite numbers separated by commas (compute, parameters, tokens)."""
    if text is None:
        return []
    items = text.replace(" ", "").split(",")
    if not all(items):
        raise LadderError(f"{option} {text!r}: an empty value; give numbers separated by commas, e.g. {example}")
    try:
        values = [float(x) for x in items]
    except ValueError:
        raise LadderError(f"{option} {text!r}: expected numbers separated by commas, e.g. {example}") from None
    for v in values:
        _positive(v, option, text)
    return values


def _positive(value: float, option: str, text: str | None = None) -> float:
    if not 0 < value < float("inf"):
        raise LadderError(f"{option} {text or value!r}: {value:g} is not a positive number; compute, parameters and "
                          "tokens are above 0")
    return value


def _check_level(level: float, ctx: typer.Context | None = None, bootstrap: int = 0) -> None:
    """A level between 0 and 1; with `ctx` (a fit's command), given only with --bootstrap: the level of the
    parameters' bootstrap intervals, the one thing it sets there."""
    if not 0 < level < 1:
        raise LadderError(f"--level {level}: must be between 0 and 1, e.g. 0.9")
    if ctx is not None and not bootstrap and given(ctx, level="--level"):
        raise LadderError(f"--level {level}: sets the level of the parameters' bootstrap intervals; add --bootstrap N, or "
                          "drop --level (every prediction gives its median with 50% and 90% bands)")


def _boot(fit, n: int, seed: int, level: float) -> tuple[fits.Ensemble | None, dict]:
    import fits
    resamples("--bootstrap", n)
    if not n:
        return None, {}
    runs, params = fit.n_runs, fits.uncertainty.resampled_params(fit)
    if runs <= params:  # every resample must keep every run: each refit is the fit itself
        raise LadderError(f"--bootstrap {n}: {runs} runs for {params} parameters, so every resample keeps every run "
                          "and the refits cannot vary; the fit has no finite band (add runs, or leave out --bootstrap)")
    ens = fits.bootstrap(fit, n, seed)
    return ens, {
        "n": ens.n,
        "failed": ens.failed,
        "seed": seed,
        "level": level,
        "intervals": {k: list(v) for k, v in ens.param_intervals(level).items()},
        "warnings": list(ens.warnings),
    }


def _base(fit, form: str, notes=()) -> dict:
    return {
        "form": form,
        "n_runs": fit.n_runs,
        "params": fit.params,
        "objective": fit.objective,
        "converged": fit.converged,
        "warnings": list(fit.warnings),
        "notes": list(notes),
    }


def _print_params(fit, boot: dict, level: float, notes=()) -> None:
    console.print(fit.summary(), highlight=False)
    for n in notes:
        console.print(f"note: {n}", highlight=False)
    if boot:
        console.print(f"bootstrap over runs: {boot['n']} refits, {level:.0%} intervals", highlight=False)
        for k, (lo, hi) in boot["intervals"].items():
            console.print(f"  {k:<6} {fit.params[k]:.6g}  [{lo:.6g}, {hi:.6g}]", highlight=False)
        for w in boot["warnings"]:
            console.print(f"  warning: {w}", highlight=False)


# ---- commands -------------------------------------------------------------------------------------
@command("endpoint", parent=fit_app)
def fit_endpoint_command(
    ctx: typer.Context,
    csv: Path | None = CSV,
    store: Path = STORE,
    metric: str | None = METRIC,
    group: str | None = GROUP,
    role: str = ROLE,
    run_col: str | None = RUN_COL,
    loss_col: str = LOSS_COL,
    step_col: str = STEP_COL,
    drop_col: str | None = DROP,
    where: list[str] = WHERE,
    compute_col: str = typer.Option("compute", "--compute-col", help="CSV: column of each run's fit compute (FLOPs)."),
    params_col: str = typer.Option(
        "params", "--params-col",
        help="CSV: column of each run's parameter count N, where it has one. Where three model sizes or more share "
             "a compute budget (an isoFLOP sweep), the law is fitted to each budget's least loss (the vertex of a "
             "parabola in log N through the budget's lowest run and its neighbours), not to every run."),
    tokens_col: str = typer.Option(
        "tokens", "--tokens-col",
        help="CSV: column of each run's tokens D, where it has one: with N, a sweep whose computes do not fall into "
             "budgets (FLOPs counted otherwise than its budgets were) is grouped by the budgets its tokens trace."),
    compute: ComputeAxis = COMPUTE,
    E: float | None = E_OPT,
    at: str | None = typer.Option(None, "--at", help="Predict the final loss at these computes (FLOPs on the law's axis: "
                                  "the CSV's column, or --compute's), comma-separated."),
    bootstrap: int = BOOT,
    seed: int = SEED,
    level: float = LEVEL,
    fmt: Format = FMT,
) -> None:
    """Fit the endpoint law L(C) = E + A·C^-α to the runs' final losses.

    Final loss: each run's last logged value. C: from a CSV, its compute column; from the store,
    6·N·D when every run gives N (as `ladder predict` counts it), else fit compute (FLOPs, 3 ×
    forward without the output head); --compute chooses. Predictions carry a Student-t band
    (n − p dof), or the bootstrap's with --bootstrap N, widened in quadrature to at least 1% (one sd)
    per e-fold of extrapolation, as every prediction's band is: half the e-folds in compute beyond
    the largest run (at one token ratio a model's size grows as the square root of its compute).
    An isoFLOP sweep (several model sizes per compute budget, with N in the CSV's params column or
    the store) is fitted on each budget's least loss (Hoffmann et al.'s approach 2), so the law
    predicts the least loss a larger budget reaches, and the model size there (a power law in
    compute through the budgets' vertices).
    """
    import fits
    from ladder.data import fitdata
    _check_level(level, ctx, bootstrap)
    _one_source(ctx, csv, where, drop_col, store, metric, group, role, compute)
    if csv is not None:
        cols = _cols(csv, run_col, loss_col, step_col, drop_col, where, compute=compute_col, params=params_col,
                     tokens=tokens_col)
        data = fitdata.finals_from_csv(csv, cols, ("compute",), optional=("params", "tokens"))
    else:
        s = Store(store)
        data = fitdata.finals_from_store(s, _metric(s, metric), group, role or None, compute.value)
    C, L, minima, notes = _endpoint_points(data, params_col if csv is not None else None)
    fit = fits.fit_endpoint(C, L, E=E)
    ens, boot = _boot(fit, bootstrap, seed, level)
    from fits.isoflop import optimal_size
    size = optimal_size(minima) if minima else None
    from fits.predictor import UNTESTED_ERROR, compute_efolds, floor_sd
    from fits.uncertainty import fit_band
    preds, targets = [], _floats(at, "--at")
    for c in targets:
        positive("--at", c, MAX_COMPUTE, "a run's compute in FLOPs")
    low = [c for c in targets if c < C.min()]
    if low:
        from fits.checks import and_more
        notes = (*notes, f"the target at C = {low[0]:.3g}{and_more(low)} lies below the fitted runs (the smallest "
                         f"{C.min():.3g}): the law is fitted above it; is it in the runs' units (FLOPs)?")
    for c in targets:
        far = float(compute_efolds(c, C))
        band = fit_band(fit, c, ensemble=ens, extra_sd=floor_sd(fit.predict(c), 0.0, far))
        preds.append({"compute": c} | _band_records(band, 1)[0]
                     | {"band": ("the wider of the bootstrap's and the " if ens else "") + f"student-t, {fit.dof} dof, "
                                f"widened by {UNTESTED_ERROR:.0%} (one sd) per e-fold of extrapolation",
                        "extrapolation": c / float(C.max()), "efolds_out": far}
                     | ({"params_at_optimum": float(size.predict(c))} if size else {}))
    if fmt is Format.json:
        out = _base(fit, "endpoint", notes) | {"bootstrap": boot or None, "predictions": preds}
        if minima:
            out["budgets"] = [m.record() for m in minima]
            out["optimal_size"] = ({"exponent": size.exponent, "budgets": size.budgets} if size else None)
        print_json(out)
        return
    _print_params(fit, boot, level, notes)
    for m in minima:
        console.print(f"  budget {m.compute:.3g} FLOPs: {m.runs} run{'s' if m.runs > 1 else ''}, least loss "
                      f"{m.loss:.4f} at N = {m.n_params:.3g} ({_HOW[m.how]})", highlight=False)
    if size:
        console.print(f"  N at the least loss ∝ C^{size.exponent:.3f} (a power law through the {size.budgets} "
                      "budgets' vertices)", highlight=False)
    for p in preds:
        console.print(
            f"at C = {p['compute']:.3g} FLOPs (x{p['extrapolation']:.3g}): L = {_bands_text(p)} ({p['band']}; "
            f"{p['efolds_out']:.2f} e-folds out)"
            + (f", at N = {p['params_at_optimum']:.3g}" if "params_at_optimum" in p else ""), highlight=False,
        )


_HOW = {"vertex": "a parabola's vertex", "edge": "its lowest run, at the edge of its sizes: an upper bound",
        "run": "its lowest run", "flat": "its lowest run: the parabola through it does not open upwards"}


def _endpoint_points(data, params_col: str | None) -> tuple[np.ndarray, np.ndarray, list, tuple[str, ...]]:
    """The (compute, loss) points the endpoint law fits, the budgets' minima where the runs are an isoFLOP sweep
    (`fits.isoflop`), and the notes to show."""
    from fits import isoflop
    notes = tuple(data.notes)
    if data.params is None:
        label = isoflop.budgets(data.compute)
        crowded = np.bincount(label)
        if crowded.max() >= isoflop.SWEEP_SIZES:
            notes += (f"{int(crowded[crowded >= isoflop.SWEEP_SIZES].sum())} runs share a compute budget with two or "
                      f"more others; if they are an isoFLOP sweep, give their parameter counts (column "
                      f"{params_col!r}, or --params-col) and the law fits each budget's least loss",)
        return data.compute, data.loss, [], notes
    compute, traced = data.compute, None
    if data.tokens is not None and isoflop.swept_share(compute, data.params) < isoflop.ON_VALLEYS:
        traced = isoflop.inferred_budgets(data.params, data.tokens)
    if traced is not None:
        label = isoflop.budgets(traced)  # each budget at its runs' median compute, in the compute column's units
        compute = np.array([np.median(data.compute[label == b]) for b in range(label.max() + 1)])[label]
        notes += (f"the computes do not fall into budgets, but the runs' tokens trace {label.max() + 1} of them (at "
                  "each, D falls as N grows; one size's token counts in the ratios of another's): each budget's "
                  "runs stand at their median compute",)
    elif not isoflop.is_sweep(compute, data.params):
        return data.compute, data.loss, [], notes
    minima = isoflop.budget_minima(compute, data.params, data.loss)
    if len(minima) < 3:
        raise LadderError(f"an isoFLOP sweep at {len(minima)} budget{'s' if len(minima) > 1 else ''}: the endpoint law "
                          "fits one least loss per budget and needs 3 budgets or more; add a budget")
    notes += (f"an isoFLOP sweep ({data.loss.size} runs at {len(minima)} budgets): the law fits each budget's least "
              "loss, one point per budget (the count of runs above counts them), the vertex of a parabola in log N "
              "through the best run of each size, the lowest run's and up to two on each side; "
              "it predicts the least loss a budget reaches (`ladder fit surface` on the same table, given its "
              "budgets, fits every run, and --optimum-at gives the compute-optimal run with its band)",)
    few = [m for m in minima if m.how == "run"]
    if few:
        notes += (f"{len(few)} of {len(minima)} budgets hold fewer than {isoflop.SWEEP_SIZES} model sizes: each one's "
                  "lowest run stands for its least loss, which holds only where that run is compute-optimal (a "
                  "ladder's rung); where a table's computes only approximate its budgets (more than 1% apart, as "
                  "when read off a figure), round the compute column to the budgets",)
    edge = [m for m in minima if m.how == "edge"]
    if edge:
        notes += (f"at {len(edge)} budget{'s' if len(edge) > 1 else ''} ({', '.join(f'{m.compute:.3g}' for m in edge)} "
                  "FLOPs) the lowest run is the smallest or the largest model: the sweep does not bracket the "
                  "optimum, so its lowest loss stands, an upper bound; add sizes beyond it",)
    return (np.array([m.compute for m in minima]), np.array([m.loss for m in minima]), minima, notes)


@command("surface", parent=fit_app)
def fit_surface_command(
    ctx: typer.Context,
    csv: Path | None = CSV,
    store: Path = STORE,
    metric: str | None = METRIC,
    group: str | None = GROUP,
    role: str = ROLE,
    run_col: str | None = RUN_COL,
    loss_col: str = LOSS_COL,
    step_col: str = STEP_COL,
    drop_col: str | None = DROP,
    where: list[str] = WHERE,
    params_col: str = typer.Option("params", "--params-col", help="CSV: column of the parameter count N."),
    tokens_col: str = typer.Option("tokens", "--tokens-col", help="CSV: column of the tokens D trained on."),
    budget_col: str = typer.Option(
        "budget", "--budget-col",
        help="CSV: column of each run's compute budget (FLOPs), read where the CSV has it: where three budgets or "
             "more hold three model sizes or more, the runs are an isoFLOP sweep, the form is chosen by predicting "
             "the largest budget from the smaller ones, and kaplan joins the forms it chooses from. Without it, "
             "the budgets the runs' tokens trace, where they trace a sweep.",
    ),
    E: float | None = E_OPT,
    form: SurfaceForm = typer.Option(
        SurfaceForm.auto, "--form",
        help="free: α and β apart; shared: one exponent for N and D (α = β); kaplan: E + (A/N^α + B/D^β)^γ, whose "
             "budgets' valleys are not tied to how fast their least loss falls (a candidate of an isoFLOP sweep); "
             "auto: the one with the lower error predicting the largest size (of a sweep: budget) from the smaller "
             "ones (a backtest on these runs; free with under 3 sizes).",
    ),
    shared_exponent: bool = typer.Option(False, "--shared-exponent", help="Same as --form shared."),
    at: list[str] = typer.Option([], "--at", help="Predict at N,D (parameters,tokens); repeatable."),
    optimum_at: str | None = typer.Option(
        None, "--optimum-at",
        help="The compute-optimal run at each compute C (FLOPs, comma-separated, e.g. 1e21,1e22): the size N* "
             "that reaches the surface's least loss at C = 6·N·D, its tokens C/(6·N*), and the loss there with its "
             "band.",
    ),
    predict_csv: Path | None = typer.Option(
        None, "--predict-csv",
        help="Predict every row of this CSV (columns params,tokens, or the --params-col/--tokens-col names; "
             "its other columns, a name for instance, come back beside each prediction): median with 50% and "
             "90% bands, each the wider of the Student-t observation band of the fit (n − p dof) and, with "
             "--bootstrap N, the bootstrap-over-runs band; and how many e-folds each target lies beyond the "
             "fitted runs (efolds_out: how far the nearest would have to grow in N and D alike to be as large, "
             "the distance the bands' extrapolation error grows with).",
    ),
    bootstrap: int = BOOT,
    seed: int = SEED,
    level: float = LEVEL,
    fmt: Format = FMT,
) -> None:
    """Fit the Chinchilla surface L(N, D) = E + A/N^α + B/D^β to runs that vary size and tokens.

    Solved by variable projection: every (α, β) of a grid gets its non-negative least-squares
    (E, A, B) at once, and the best start a Huber refinement. The form (α and β free, or one
    exponent) is chosen by predicting the largest size from the smaller ones (--form auto), and
    every band is widened by that backtest's error carried to the target and so that its 90% band
    holds the other form's prediction (where the forms disagree, the runs do not say which is
    right) and the prediction scaled to the least loss that a power law through the runs' lower
    envelope (the lowest losses for their compute 6·N·D) gives at the target's compute: on an
    isoFLOP sweep the surface's own least loss can part from it. From the store, N is active
    parameters and D the tokens at each run's last step. A CSV of one row per run needs only the
    columns params, tokens, loss (ladder fit surface --csv runs.csv).

    An isoFLOP sweep whose CSV gives each run's compute budget (a column named budget, or
    --budget-col; three budgets or more of three sizes or more) is backtested by budget: the
    largest budget (and, with five or more, the two largest) is predicted from the smaller ones,
    and a third form joins the two, Kaplan et al.'s composition with an irreducible loss,
    E + (A/N^α + B/D^β)^γ, in which how sharply a budget's loss rises off its best size is not
    tied to how fast the budgets' least losses fall. A table without budgets is taken for a sweep
    where its tokens trace one (at each budget D falls as N grows, one size's token counts in the
    same ratios as another's), and its budgets are named by their runs' median 6·N·D.
    """
    from ladder.data import fitdata
    _check_level(level, ctx, bootstrap)
    _one_source(ctx, csv, where, drop_col, store, metric, group, role)
    if at and predict_csv is not None:
        raise LadderError("--at and --predict-csv: give the targets one way (put the --at points in the CSV)")
    if csv is not None:
        cols = _cols(csv, run_col, loss_col, step_col, drop_col, where, params=params_col, tokens=tokens_col,
                     budget=budget_col)
        need, optional = _budget_columns(ctx)
        data = fitdata.finals_from_csv(csv, cols, ("params", "tokens", *need), optional)
    else:
        s = Store(store)
        data = fitdata.finals_from_store(s, _metric(s, metric), group, role or None)
    if shared_exponent:
        if form is not SurfaceForm.auto and form is not SurfaceForm.shared:
            raise LadderError(f"--shared-exponent and --form {form.value} contradict each other; give one")
        form = SurfaceForm.shared
    targets = endpointcsv.read_targets(predict_csv, params_col, tokens_col, tuple(where)) if predict_csv is not None else None
    from fits.surfacechoice import choose_surface
    choice = choose_surface(data.params, data.tokens, data.loss, E=E, form=form.value, budget=data.budget)
    fit = choice.fit
    ens, boot = _boot(fit, bootstrap, seed, level)
    if targets is None:
        points = [_point(item) for item in at]
        targets = (np.array([n for n, _ in points], dtype=np.float64), np.array([d for _, d in points], dtype=np.float64),
                   [{} for _ in points])
    preds = _surface_bands(choice, ens, *targets)
    optimal = _optima(fit, optimum_at)
    optima = _surface_bands(choice, ens, np.array([n for _, n, _ in optimal], dtype=np.float64),
                            np.array([d for _, _, d in optimal], dtype=np.float64), [{"compute": c} for c, _, _ in optimal])
    below = (_below_fitted(preds + optima, data.params, data.tokens) + _budget_axis(optima, data)
             + _not_counts(data.params, data.tokens))
    if fmt is Format.json:
        out = _base(fit, "surface", data.notes) | {"shared_exponent": choice.form == "shared", "bootstrap": boot or None,
                                       "form_choice": {"form": choice.form, "why": choice.why,
                                                       "backtest": choice.table(), "budgets": choice.budget_record(),
                                                       "envelope": choice.envelope_record(),
                                                       "warnings": list(choice.warnings)},
                                       "predictions": preds, "optima": optima, "band": _band_text(fit, ens)}
        out["warnings"] += below
        print_json(out)
        return
    _print_params(fit, boot, level, data.notes)
    console.print(choice.summary(), highlight=False)
    for w in list(choice.warnings) + below:
        warn(w)
    for p in optima:
        console.print(
            f"optimum at C = {p['compute']:.3g} FLOPs: N* = {p['params']:.3g}, D* = {p['tokens']:.3g} "
            f"({p['tokens'] / p['params']:.3g} tokens per parameter): L = {_bands_text(p)} ({p['efolds_out']:.2f} "
            "e-folds outside the fitted runs)", highlight=False,
        )
    if preds:
        _print_bands(preds, _band_text(fit, ens))


def _below_fitted(preds: list[dict], n_params, tokens) -> list[str]:
    """A warning for the targets whose N or D lies below every fitted run's: the law is fitted above them, and a
    target far below is often one in other units (billions of parameters written as 70)."""
    n_min, d_min = float(np.min(n_params)), float(np.min(tokens))
    low = [p for p in preds if p["params"] < n_min or p["tokens"] < d_min]
    if not low:
        return []
    from fits.checks import and_more

    p = low[0]
    return [f"the target at N = {p['params']:.3g}, D = {p['tokens']:.3g}{and_more(low)} lies below the fitted runs (the smallest "
            f"N {n_min:.3g}, D {d_min:.3g}): the law is fitted above it; are its parameters and tokens in the runs' "
            "units (counts, not millions or billions)?"]


LEAST_COUNT = 1e3
"""Below this, a parameter or token count is in other units (millions, billions): the smallest published
language models have tens of thousands of parameters, and a run sees more tokens than that."""


def _not_counts(n_params, tokens) -> list[str]:
    """A warning where the runs' N or D are below `LEAST_COUNT`: counts written in millions or billions, whose
    fit says nothing wrong until a prediction in counts lands digits off."""
    low = [f"{name} as small as {float(np.min(x)):.3g}" for name, x in (("N", n_params), ("D", tokens))
           if float(np.min(x)) < LEAST_COUNT]
    if not low:
        return []
    return [f"the runs give {' and '.join(low)}: parameters and tokens are counts (7e9, not 7); in millions or "
            "billions, give them as counts, or every prediction and optimum is in those units too"]


BUDGET_AXIS_TOL = 0.2
"""How far (relative) a table's budgets may sit from 6·N·D before --optimum-at says it reads compute as 6·N·D."""


def _budget_axis(optima: list[dict], data) -> list[str]:
    """A warning where --optimum-at is asked of a table whose budget column counts compute otherwise than 6·N·D
    (attention, the head, another convention): the optima sit on the 6·N·D axis, not the table's."""
    if not optima or data.budget is None:
        return []
    ratio = float(np.nanmedian(np.asarray(data.budget, dtype=np.float64) / (6 * data.params * data.tokens)))
    if not np.isfinite(ratio) or abs(ratio - 1) <= BUDGET_AXIS_TOL:
        return []
    return [f"the table's budgets are {ratio:.3g}× 6·N·D (median over its runs), and --optimum-at reads compute as "
            f"6·N·D: its optimum at C stands at the table's budget {ratio:.3g}·C; for a budget B of the table's, "
            f"give --optimum-at B/{ratio:.3g}"]


def _optima(fit, text: str | None) -> list[tuple[float, float, float]]:
    """(C, N*, D*) for each compute of `--optimum-at`: the size at the surface's least loss along C = 6·N·D."""
    from fits.frontier import optimum

    out = []
    for c in _floats(text, "--optimum-at", "1e21,1e22"):
        positive("--optimum-at", c, MAX_COMPUTE, "a run's compute in FLOPs")
        n = float(optimum(c, **fit.params)[1])
        if not np.isfinite(n) or n < 1 or c / (6 * n) < 1:
            shown = ", ".join(f"{k} = {v:.4g}" for k, v in fit.params.items())
            raise LadderError(f"--optimum-at {c:g}: the fitted surface has no least loss at a sensible size (N* = "
                              f"{n:.3g}): a term vanished or an exponent sits near 0 ({shown}), so more tokens or more "
                              "parameters always help on it; check the loss and size columns")
        out.append((c, n, c / (6 * n)))
    return out


def _point(item: str) -> tuple[float, float]:
    """One --at N,D."""
    nd = _floats(item, "--at", "7e10,1.4e12 (N,D)")
    if len(nd) != 2:
        raise LadderError(f"--at {item!r}: expected N,D, e.g. 7e10,1.4e12")
    return nd[0], nd[1]


def _surface_bands(choice, ens, n_params: np.ndarray, tokens: np.ndarray, labels: list[dict]) -> list[dict]:
    """One dict per target (--at, --predict-csv, --optimum-at alike): its labels (a CSV's other columns, a name,
    ...; a column of numbers as numbers; an optimum's compute), then N, D, the band and its distance."""
    if not n_params.size:
        return []
    bands = _band_records(choice.band(n_params, tokens, ens), n_params.size)
    out = choice.distance(n_params, tokens)
    return [{k: v for k, v in labels[i].items() if k not in BAND_KEYS} | {"params": float(n), "tokens": float(d)}
            | bands[i] | {"efolds_out": float(out[i])} for i, (n, d) in enumerate(zip(n_params, tokens))]


BANDS = ("median", "lo50", "hi50", "lo90", "hi90")
"""A prediction's keys in every JSON `ladder fit` prints (and `ladder predict`'s table): the median and the
edges of its 50% and 90% bands."""
BAND_KEYS = ("params", "tokens", *BANDS, "efolds_out")
"""The keys of a surface's prediction; a target's own column of one of these names is not carried. efolds_out:
how far the target lies outside the fitted runs (`fits.surfacechoice.distance`), the e-folds the band's
extrapolation error grows with."""


def _band_records(band, n: int) -> list[dict]:
    """The band's `BANDS` at each of its `n` points; an unbounded edge (no spare runs) as None."""
    cols = {k: np.broadcast_to(np.asarray(getattr(band, k), dtype=np.float64), (n,)) for k in BANDS}
    return [{k: _finite(c[i]) for k, c in cols.items()} for i in range(n)]


def _bands_text(p: dict) -> str:
    """A prediction's median with its 50% and 90% bands, as printed."""
    def edge(x: float | None) -> str:
        return "inf" if x is None else f"{x:.4f}"
    return (f"{edge(p['median'])}  50% [{edge(p['lo50'])}, {edge(p['hi50'])}]  90% [{edge(p['lo90'])}, "
            f"{edge(p['hi90'])}]")





def _finite(x) -> float | None:
    """JSON has no infinity: an unbounded band edge (no spare runs) is null."""
    x = float(x)
    return x if np.isfinite(x) else None


def _band_text(fit, ens) -> str:
    from fits.predictor import UNTESTED_ERROR
    t = f"Student-t observation band ({fit.dof} dof)" if fit.dof > 0 else ""
    widened = ("; widened in quadrature by the form backtest's error per e-fold of extrapolation carried to "
               f"each target, and to at least {UNTESTED_ERROR:.0%} (one sd) per e-fold")
    if ens is None:
        return (t + widened) if t else "none: no spare runs for a Student-t band; add --bootstrap N"
    b = f"bootstrap over runs ({ens.n} refits)"
    return (f"the wider of the {b} and the {t}" if t else b) + widened


def _print_bands(preds: list[dict], band: str) -> None:
    table = Table(title="predicted loss (nats/token)",
                  caption=f"e-folds out: how far each target lies outside the fitted runs (0 where a fitted run "
                          f"is as large in N and in D); bands: {band}")
    labels = [k for k in preds[0] if k not in BAND_KEYS] if preds else []
    for name in labels:
        table.add_column(name, justify="left")
    for name in ("N (params)", "D (tokens)", "e-folds out", "median", "50% band", "90% band"):
        table.add_column(name, justify="right")

    def edge(x: float | None) -> str:
        return "inf" if x is None else f"{x:.4f}"

    for p in preds:
        table.add_row(*("" if p[k] is None else str(p[k]) for k in labels), f"{p['params']:.4g}", f"{p['tokens']:.4g}",
                      f"{p['efolds_out']:.2f}", edge(p["median"]),
                      f"{edge(p['lo50'])} .. {edge(p['hi50'])}", f"{edge(p['lo90'])} .. {edge(p['hi90'])}")
    console.print(table)


def _fractions(every: float) -> np.ndarray:
    if not 0 < every <= 0.5:
        raise LadderError(f"--every {every}: must be in (0, 0.5], e.g. 0.05")
    n = int(round(1.0 / every))
    if abs(n * every - 1.0) > 1e-6:
        raise LadderError(f"--every {every:g}: the fractions must end at the run's end (1), so give 1/n, e.g. "
                          f"{1 / max(n, 2):.4g} or {1 / (n + 1):.4g}")
    return np.round(np.arange(1, n + 1) / n, 12)


@command("curve", parent=fit_app)
def fit_curve_command(
    ctx: typer.Context,
    csv: Path | None = CSV,
    store: Path = STORE,
    metric: str | None = METRIC,
    group: str | None = GROUP,
    role: str = ROLE,
    run_col: str = typer.Option("run_id", "--run-col", help="CSV: column naming each row's run."),
    loss_col: str = LOSS_COL,
    step_col: str = typer.Option("step", "--step-col", help="CSV: column of the step (with --total-steps-col)."),
    total_steps_col: str | None = typer.Option(None, "--total-steps-col", help="CSV: column of each run's planned steps."),
    drop_col: str | None = DROP,
    where: list[str] = WHERE,
    fraction_col: str | None = typer.Option(None, "--fraction-col", help="CSV: column of the fraction of planned steps (instead of step / total)."),
    compute_col: str = typer.Option("compute", "--compute-col", help="CSV: column of the fit compute spent by the row (FLOPs)."),
    every: float = typer.Option(0.05, "--every", help="Fit the law at every this fraction of the runs (0.05: 5%, 10%, … 100%)."),
    compute: ComputeAxis = COMPUTE,
    E: float | None = E_OPT,
    at: float | None = typer.Option(None, "--at", help="Predict the whole curve of a run of this total compute (FLOPs on "
                                    "the law's axis: the CSV's column, or --compute's)."),
    law: Law = typer.Option(Law.perfraction, "--law", help="perfraction, or a schedule-aware law (multipower, momentum; store only)."),
    shape: str | None = typer.Option(None, "--shape", help="Schedule-aware laws: hold shape parameters, e.g. C=2,beta=0.6,gamma=0.6."),
    scale: str = typer.Option("fit_flops_per_token", "--scale", help="Schedule-aware laws: the runs-table column their power laws use (fit_flops_per_token, active_params)."),
    bootstrap: int = BOOT,
    seed: int = SEED,
    level: float = LEVEL,
    fmt: Format = FMT,
) -> None:
    """Fit a whole-curve law to the rungs' curves.

    perfraction (default): L(g) = E + A_g·(C·g)^-α_g for a fixed-ratio ladder. Each run is sampled
    at common fractions g of its planned steps (linear interpolation between its checkpoints; the
    fractions before the runs' first evals are left out, with a note); one
    power law per fraction, one E for all. From the store, C is 6·N·D when every run gives N (as
    `ladder predict` counts it), else fit compute; --compute chooses. With --at C, the predicted curve of a run of total
    compute C: its median with 50% and 90% bands, the Student-t band (or with --bootstrap N the wider of it and the
    bootstrap's), widened by 1% (one sd) per e-fold of extrapolation, half the e-folds in compute outside the
    fitted runs.

    multipower / momentum: the schedule-aware laws, fitted on every run's checkpoints with the LR
    of every step rebuilt from the schedule in its config (so from the store only); shape
    parameters shared, L0, A, alpha, B power laws in --scale.
    """
    import fits
    from ladder.data import fitdata
    _check_level(level, ctx, bootstrap)
    _one_source(ctx, csv, where, drop_col, store, metric, group, role, compute)
    _only_for(ctx, "Schedule-aware laws:", law is not Law.perfraction, "the schedule-aware laws (--law multipower or momentum)")
    if law is not Law.perfraction:
        _fit_curve_law(law, csv, store, metric, group, role, E, at, shape, scale, bootstrap, seed, level, fmt)
        return
    g = _fractions(every)
    if csv is not None:
        if not run_col:
            raise LadderError("--run-col: whole curves need a column naming each row's run")
        cols = _cols(csv, run_col, loss_col, step_col, drop_col, where, compute=compute_col, fraction=fraction_col,
                     total_steps=total_steps_col)
        data = fitdata.curves_from_csv(csv, cols, g)
    else:
        s = Store(store)
        data = fitdata.curves_from_store(s, _metric(s, metric), g, group, role or None, compute.value)
    data = data.from_first_evals()
    g = data.fractions
    if at is not None:
        _positive(at, "--at")
    fit = fits.fit_per_fraction(data.compute, data.fractions, data.losses, E=E)
    ens, boot = _boot(fit, bootstrap, seed, level)
    from fits.predictor import UNTESTED_ERROR, compute_efolds, floor_sd
    from fits.uncertainty import fit_band
    curve, far = None, 0.0
    if at is not None:
        far = float(compute_efolds(at, data.compute))
        b = fit_band(fit, at, ensemble=ens, extra_sd=floor_sd(fit.predict(at), 0.0, far))
        curve = {"fraction": g} | {k: np.asarray(getattr(b, k), dtype=np.float64) for k in BANDS}
    band = (("the wider of the bootstrap's and the " if ens else "") + f"student-t, {fit.dof} dof, widened by "
            f"{UNTESTED_ERROR:.0%} (one sd) per e-fold of extrapolation; {far:.2f} e-folds out")
    if fmt is Format.json:
        out = _base(fit, "per-fraction", data.notes) | {
            "fractions": g.tolist(), "A_by_fraction": fit.A.tolist(), "alpha_by_fraction": fit.alpha.tolist(),
            "bootstrap": boot or None,
            "prediction": None if curve is None else {"compute": at, "efolds_out": far, "band": band}
            | {k: [_finite(x) for x in np.asarray(v)] for k, v in curve.items()},
        }
        print_json(out)
        return
    _print_params(fit, boot, level, data.notes)
    if curve is not None:
        console.print(f"predicted curve at C = {at:.3g} FLOPs (x{at / data.compute.max():.3g} the largest run; {band}):",
                      highlight=False)
        for i, frac in enumerate(g):
            row = "  ".join(f"{k} {float(np.asarray(v)[i]):.4f}" for k, v in curve.items() if k != "fraction")
            console.print(f"  g = {frac:.3f}: {row}", highlight=False)


def _shape(text: str | None) -> dict[str, float]:
    out = {}
    for item in (text or "").replace(" ", "").split(","):
        if not item:
            continue
        name, sep, value = item.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise LadderError(f"--shape {text!r}: expected NAME=VALUE pairs, e.g. C=2,beta=0.6,gamma=0.6")
    return out


def _fit_curve_law(law, csv, store, metric, group, role, E, at, shape, scale, bootstrap, seed, level, fmt) -> None:
    import fits
    from ladder.data import fitdata
    if csv is not None:
        raise LadderError(
            f"--law {law.value} needs the LR of every step, which a CSV of checkpoints does not hold; "
            "it reads each run's schedule from the store (--store DIR)"
        )
    if at is not None:
        raise LadderError("--at predicts with the per-fraction law; a schedule-aware law needs the target's LR schedule")
    held = _shape(shape) or None
    s = Store(store)
    curves = fitdata.lr_curves_from_store(s, _metric(s, metric), group, role or None, scale=scale)
    fn = fits.fit_multipower if law is Law.multipower else fits.fit_momentum
    fit = fn(curves, E=E, shape=held)
    _, boot = _boot(fit, bootstrap, seed, level)
    floor = None
    if E is None and fit.has_slopes:  # what the runs say about the floor under L0 (as `ladder predict` uses it)
        prof = fits.profile_floor(fit)
        floor = {"median": prof.quantile(0.5), "lo90": prof.quantile(0.05), "hi90": prof.quantile(0.95)}
    if fmt is Format.json:
        print_json({
            "form": law.value, "n_runs": fit.n_runs, "params": fit.params, "objective": fit.objective,
            "converged": fit.converged, "warnings": list(fit.warnings), "scale": scale,
            "errors": [{"run": n, "mean": m, "worst": w} for n, m, w in fit.errors()], "bootstrap": boot or None,
            "floor_posterior": floor,
        })
        return
    _print_params(fit, boot, level)
    if floor is not None:
        console.print(f"floor under L0 (fitted at 0 here; --E pins it): posterior median {floor['median']:.4g}, 90% "
                      f"[{floor['lo90']:.4g}, {floor['hi90']:.4g}] under a flat prior below the smallest loss; "
                      "`ladder predict` uses the median", highlight=False)


@command("backtest")
def backtest_command(
    ctx: typer.Context,
    form: Form = typer.Option(Form.endpoint, "--form", help="endpoint, surface, or curve (per-fraction law)."),
    holdout: str = typer.Option("1", "--holdout", help="Hold out the k largest runs, for each k listed, e.g. 1,2: by compute for the endpoint and per-fraction laws "
                                "(on a ladder of one token ratio, the k largest sizes), by model size for the surface "
                                "(by budget for an isoFLOP sweep's surface, where the CSV gives budgets)."),
    csv: Path | None = CSV,
    store: Path = STORE,
    metric: str | None = METRIC,
    group: str | None = GROUP,
    role: str = ROLE,
    run_col: str | None = RUN_COL,
    loss_col: str = LOSS_COL,
    step_col: str = STEP_COL,
    drop_col: str | None = DROP,
    where: list[str] = WHERE,
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
    total_steps_col: str | None = typer.Option(None, "--total-steps-col", help="CSV: planned steps column (curve)."),
    fraction_col: str | None = typer.Option(None, "--fraction-col", help="CSV: fraction column (curve)."),
    every: float = typer.Option(0.05, "--every", help="curve: fractions fitted (every this fraction)."),
    compute: ComputeAxis = COMPUTE,
    E: float | None = E_OPT,
    bootstrap: int = typer.Option(0, "--bootstrap", help="Bands from N bootstrap refits (0: Student-t bands; at most 10,000)."),
    seed: int = SEED,
    level: float = LEVEL,
    fmt: Format = FMT,
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
    _check_level(level)
    _one_source(ctx, csv, where, drop_col, store, metric, group, role, compute)
    _only_for(ctx, "curve:", form is Form.curve, "--form curve")
    resamples("--bootstrap", bootstrap)
    ks = list(dict.fromkeys(parse_int_list(holdout, "--holdout", "1,2") or []))  # each k once
    if not ks or min(ks) < 1:
        raise LadderError(f"--holdout {holdout!r}: give how many of the largest runs to hold out, e.g. 1 or 1,2")
    s = Store(store)
    if form is Form.curve:
        g = _fractions(every)
        if csv is not None:
            cols = _cols(csv, run_col, loss_col, step_col, drop_col, where, compute=compute_col,
                         fraction=fraction_col, total_steps=total_steps_col)
            data = fitdata.curves_from_csv(csv, cols, g)
        else:
            data = fitdata.curves_from_store(s, _metric(s, metric), g, group, role or None, compute.value)
        data = data.from_first_evals()
        bt = fits.backtest_per_fraction(data.compute, data.fractions, data.losses, data.names, ks, E=E,
                                        level=level, n_boot=bootstrap, seed=seed)
        notes = data.notes
    else:
        endpoint = form is Form.endpoint
        budget_need, budget_optional = _budget_columns(ctx)
        need = ("compute",) if endpoint else ("params", "tokens", *budget_need)
        if csv is not None:
            cols = _cols(csv, run_col, loss_col, step_col, drop_col, where, compute=compute_col, params=params_col,
                         tokens=tokens_col, budget=budget_col)
            data = fitdata.finals_from_csv(csv, cols, need, optional=("params", "tokens") if endpoint else budget_optional)
        else:
            data = fitdata.finals_from_store(s, _metric(s, metric), group, role or None, compute.value)
        notes = data.notes
        if endpoint:
            C, L, minima, notes = _endpoint_points(data, params_col if csv is not None else None)
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

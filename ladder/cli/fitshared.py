"""What the `ladder fit` commands and `ladder backtest` share: the `fit` group, the options of their data
sources, the checks of their values, and the records and lines they print.

Each command reads its data (`ladder.data.fitdata`), calls one function of `fits`, and prints a table
or, with `--format json`, one JSON object: the fitted parameters, the objective (mean Huber on log
residuals), the warnings, and with `--bootstrap N` their intervals over runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer

from ladder.cli.app import Format, app, console, given, given_for, warn
from ladder.config.limits import resamples
from ladder.data import csvfile, endpointcsv
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


class ComputeAxis(StrEnum):
    auto = "auto"
    fit = "fit"
    six_nd = "6nd"


# ---- shared options -------------------------------------------------------------------------------
CSV = typer.Option(None, "--csv", help="Read this CSV instead of the store (one row per run or per checkpoint; "
                   "the laws of final losses leave out a run its `state` column marks crashed or running).")
STORE = typer.Option(Path(DEFAULT_ROOT), "--store", help="Store folder (from `ladder pull`).")
METRIC = typer.Option(None, "--metric", help="Store: the metric to fit (default: the store's fit metric, eval/loss).")
GROUP = typer.Option(None, "--group", help="Store: only runs of this group (needed where the store holds several; '' for runs of none).")
ROLE = typer.Option("rung", "--role", help="Store: only runs of this role (rung, hero, single; '' for all).")
RUN_COL = typer.Option(
    None, "--run-col", show_default=False,
    help="CSV: column naming each row's run ('' if every row is a run; default: run_id, or every row a "
         "run when the file has neither run_id nor a step column).",
)
LOSS_COL = typer.Option("loss", "--loss-col", help="CSV: column of the loss (nats per token).")
DEFAULT_STEP_COL = "step"
STEP_COL = typer.Option(DEFAULT_STEP_COL, "--step-col", help="CSV: column of the step; each run's last step gives its final loss.")
PLANNED_COL = typer.Option(None, "--total-steps-col", help="CSV: column of each run's planned steps: a run whose last "
                           "step falls short of them (crashed, still running) has no final loss and is left out, "
                           "but for a last eval one interval short where its `state` column says finished "
                           "(default: a column named total_steps or stop_after_steps, where the CSV has one; '' "
                           "reads none).")
E_OPT = typer.Option(None, "--E", help="Pin the irreducible loss E instead of fitting it.")
BOOT = typer.Option(0, "--bootstrap", help="Refits over runs resampled with replacement, for intervals (0: none; else 2 to 10,000).")
SEED = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="Seed of the bootstrap resampling (with --bootstrap N; 0 to 2³² − 1).")
LEVEL = typer.Option(0.9, "--level", help="Level of the parameters' bootstrap intervals (with --bootstrap N); every prediction gives its median with 50% and 90% bands.")
FMT = typer.Option(Format.table, "--format", help="table, or json (one object on stdout).")
COMPUTE = typer.Option(
    ComputeAxis.auto, "--compute",
    help="Store: the law's compute axis: 6nd (6·N·D, by parameters), fit (fit FLOPs, which count attention), or "
         "auto (6nd when every run gives N, as `ladder predict` counts it; else fit). --at is on this axis.",
)
DROP = typer.Option(None, "--drop-col", help="CSV: leave out rows whose value in this column is set: true, 1, yes or any "
                    "text (a quality flag, a reason), but not empty, false, 0 or no; the output says how many.")
_WHERE_HELP = ("CSV: only the rows whose COLUMN holds VALUE, as COLUMN=VALUE (repeatable; e.g. --where dataset=c4 for "
               "one corpus of a table of several{}")
WHERE = typer.Option([], "--where", help=_WHERE_HELP.format(")."))
WHERE_AND_TARGETS = typer.Option([], "--where", help=_WHERE_HELP.format(
    "; the --predict-csv targets too, where they have that column; a target whose cell there is blank is kept)."))


def csv_columns(csv: Path, run_col: str | None, loss_col: str, step_col: str, drop: str | None, where: list[str],
          **more: str | None) -> fitdata.Columns:
    """The CSV's columns as the options name them; no --run-col: `endpointcsv.run_column` tells a table of one
    row per run from one of checkpoints."""
    from ladder.data import fitdata
    header = endpointcsv.column_names(csv)  # names stripped of spaces, as options name them
    run_col, loss_col, step_col, drop = (c.strip() if c else c for c in (run_col, loss_col, step_col, drop))
    more = {k: v.strip() if v else v for k, v in more.items()}
    if step_col and step_col != DEFAULT_STEP_COL and header is not None and step_col not in header:
        raise csvfile.no_column(csv, step_col, "--step-col", header)  # a typo would read the rows in file order
    run = endpointcsv.run_column(header, run_col, step_col)
    named = {"--loss-col": loss_col, **{f"--{k.replace('_', '-')}-col": v for k, v in more.items() if v}}
    # a table's tokens, or a sweep's budget, may be its compute axis
    shared = {frozenset(("--compute-col", "--tokens-col")), frozenset(("--compute-col", "--budget-col"))}
    for option, column in named.items():  # one column read as two quantities
        twice = [o for o, c in named.items() if c == column and o != option and frozenset((o, option)) not in shared]
        if twice:
            raise LadderError(f"{option} and {twice[0]} both name column {column!r}; give each its own column")
    return fitdata.Columns(run=run or None, loss=loss_col, step=step_col or None, drop=drop, where=tuple(where),
                           **more)


def one_source(ctx: typer.Context, csv: Path | None, where: list[str], drop_col: str | None, store: Path,
                metric: str | None, group: str | None, role: str, compute: ComputeAxis = ComputeAxis.auto,
                by_size: bool = False) -> None:
    """Refuse options of the source not read: the CSV's row filters without --csv, the store's with it (`by_size`:
    the law reads each run's N and D, not its compute)."""
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
        what, columns = (("which runs", "its parameter counts and tokens as columns (--params-col, --tokens-col)")
                         if by_size else ("which runs, and how their compute is counted",
                                          "its compute as a column (--compute-col)"))
        raise LadderError(f"{' and '.join(given)} only mean{'s' if len(given) == 1 else ''} something for the store's "
                          f"runs ({what}), and --csv {csv} reads the CSV instead; drop {'it' if len(given) == 1 else 'them'}, "
                          f"pick the CSV's rows with --where COLUMN=VALUE, and give {columns}")


def named_columns(ctx: typer.Context, optional: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The `optional` columns (budget, params, ...) as `fitdata.finals_from_csv` takes them, (needed, optional):
    needed where the user names one (--budget-col NAME), so a name the file lacks is refused rather than passed
    over; else read where the CSV has the default."""
    named = set(given(ctx, **{f"{k}_col": f"--{k}-col" for k in optional}))
    return (tuple(k for k in optional if f"--{k}-col" in named), tuple(k for k in optional if f"--{k}-col" not in named))


def only_for(ctx: typer.Context, options: str | dict[str, str], applies: bool, what: str) -> None:
    """Refuse an option that the chosen law or form does not use: one whose help starts with `options` (a prefix),
    or one of `options` (parameter name = flag), set on the command line."""
    extra = given_for(ctx, options) if isinstance(options, str) else given(ctx, **options)
    if extra and not applies:
        raise LadderError(f"{extra[0]} is only for {what}; drop it")


def store_metric(store: Store, metric: str | None) -> str:
    return metric or (store.settings().fit_metric if store.exists() else "eval/loss")


def floats(text: str | list[str] | None, option: str, example: str = "1e21,1e22") -> list[float]:
    """Positive finite numbers separated by commas (compute, parameters, tokens); of an option given several times,
    those of each in turn."""
    if text is None:
        return []
    if isinstance(text, list):
        return [v for item in text for v in floats(item, option, example)]
    items = text.replace(" ", "").split(",")
    if not all(items):
        raise LadderError(f"{option} {text!r}: an empty value; give numbers separated by commas, e.g. {example}")
    try:
        values = [float(x) for x in items]
    except ValueError:
        raise LadderError(f"{option} {text!r}: expected numbers separated by commas, e.g. {example}") from None
    for v in values:
        positive_number(v, option, text)
    return values


def positive_number(value: float, option: str, text: str | None = None) -> float:
    if not 0 < value < float("inf"):
        raise LadderError(f"{option} {text or value!r}: {value:g} is not a positive number; compute, parameters and "
                          "tokens are above 0")
    return value


def check_level(level: float, ctx: typer.Context | None = None, bootstrap: int = 0) -> None:
    """A level between 0 and 1; with `ctx` (a fit's command), given only with --bootstrap: the level of the
    parameters' bootstrap intervals, the one thing it sets there; --seed likewise, which seeds only the bootstrap."""
    if not 0 < level < 1:
        raise LadderError(f"--level {level}: must be between 0 and 1, e.g. 0.9")
    if ctx is not None and not bootstrap and given(ctx, level="--level"):
        raise LadderError(f"--level {level}: sets the level of the parameters' bootstrap intervals; add --bootstrap N, or "
                          "drop --level (every prediction gives its median with 50% and 90% bands)")
    if ctx is not None and not bootstrap and given(ctx, seed="--seed"):
        raise LadderError(f"--seed {ctx.params.get('seed')}: seeds the bootstrap's resampling, and no bootstrap is asked "
                          "for; add --bootstrap N, or drop --seed (the fit itself draws nothing at random)")


def bootstrap_record(fit, n: int, seed: int, level: float) -> tuple[fits.Ensemble | None, dict]:
    import fits
    resamples("--bootstrap", n)
    if not n:
        return None, {}
    runs, params = fit.n_runs, fits.uncertainty.resampled_params(fit)
    if runs <= params:  # every resample must keep every run: each refit is the fit itself
        raise LadderError(f"--bootstrap {n}: {runs} runs for {params} parameters, so only a resample that holds every run "
                          "can be refitted, and each such refit is the fit itself; the fit has no finite band (add runs, "
                          "or leave out --bootstrap)")
    ens = fits.bootstrap(fit, n, seed)
    return ens, {
        "n": ens.n,
        "failed": ens.failed,
        "seed": seed,
        "level": level,
        "intervals": {k: list(v) for k, v in ens.param_intervals(level).items()},
        "warnings": list(ens.warnings),
    }


def base_record(fit, form: str, notes=()) -> dict:
    return {
        "form": form,
        "n_runs": fit.n_runs,
        "params": fit.params,
        "objective": fit.objective,
        "converged": fit.converged,
        "warnings": list(fit.warnings),
        "notes": list(notes),
    }


WARNING_LINE = "  warning: "
"""How a fit's summary (`fits`) writes each of its warnings: a line of its own, which the CLI says on stderr."""


def print_params(fit, boot: dict, level: float, notes=()) -> None:
    """The fit's summary on stdout and its warnings on stderr, as every warning of every command is said."""
    lines = fit.summary().splitlines()
    console.print("\n".join(line for line in lines if not line.startswith(WARNING_LINE)), highlight=False)
    for line in lines:
        if line.startswith(WARNING_LINE):
            warn(line[len(WARNING_LINE):])
    for n in notes:
        console.print(f"note: {n}", highlight=False)
    if boot:
        console.print(f"bootstrap over {getattr(fit, 'points', 'runs')}: {boot['n']} refits, {level * 100:.4g}% "
                      "intervals", highlight=False)
        for k, (lo, hi) in boot["intervals"].items():
            console.print(f"  {k:<6} {fit.params[k]:.6g}  [{lo:.6g}, {hi:.6g}]", highlight=False)
        for w in boot["warnings"]:
            warn(w)


FAR_EFOLDS = 7.0
"""A target more e-folds than this beyond the fitted runs (over 1,000× in compute) is warned: a law is rarely
trusted that far, and a target in other units (billions as counts) lands there."""


def far_targets(preds: list[dict], what, where=None) -> list[str]:
    """A warning for the targets more than `FAR_EFOLDS` e-folds outside the fitted runs (`efolds_out`): the first,
    `where(p)` saying how it lies outside them ("" or no `where`: above them in size), and how many more do (each
    its own way: one far in size, another off the token ratios)."""
    far = [p for p in preds if p.get("efolds_out", 0.0) > FAR_EFOLDS]
    if not far:
        return []
    p = far[0]
    how = (where(p) if where else "") or (f"in size beyond the fitted runs ({np.exp(p['efolds_out']):.3g}× their "
                                          f"size, {np.exp(2 * p['efolds_out']):.3g}× their compute)")
    more = len(far) - 1
    others = (f" ({more} more target{'s lie' if more > 1 else ' lies'} more than {FAR_EFOLDS:g} e-folds outside the "
              "runs, each in its efolds_out)" if more else "")
    return [f"the target at {what(p)} lies {p['efolds_out']:.1f} e-folds {how}{others}: its band grows with the "
            "distance, but no ladder tests a law that far; are its numbers in the runs' units?"]


def compute_target_warnings(targets: list[float], fitted: np.ndarray, efolds: list[float]) -> list[str]:
    """Warnings of targets given as compute (FLOPs) outside the `fitted` runs' computes: below the smallest, or
    farther beyond the largest than `FAR_EFOLDS` (`efolds`: each target's e-folds out, in size), as `fit surface`
    warns of its targets."""
    from fits.checks import and_more

    low = [c for c in targets if c < fitted.min()]
    notes = [f"the target at C = {low[0]:.3g}{and_more(low)} lies below the fitted runs (the smallest "
             f"{fitted.min():.3g}): the law is fitted above it; is it in the runs' units (FLOPs)?"] if low else []
    return notes + far_targets([{"compute": c, "efolds_out": e} for c, e in zip(targets, efolds) if c > fitted.max()],
                               lambda p: f"C = {p['compute']:.3g}")


BANDS = ("median", "lo50", "hi50", "lo90", "hi90")
"""A prediction's keys in every JSON `ladder fit` prints (and `ladder predict`'s table): the median and the
edges of its 50% and 90% bands."""


def band_records(band, n: int) -> list[dict]:
    """The band's `BANDS` at each of its `n` points; a band with an unbounded edge (no spare runs) has neither edge
    (None: the lower one, held at a loss of 0, would read as a bound)."""
    cols = {k: np.broadcast_to(np.asarray(getattr(band, k), dtype=np.float64), (n,)) for k in BANDS}
    out = [{k: finite(c[i]) for k, c in cols.items()} for i in range(n)]
    for rec in out:
        for level in ("50", "90"):
            if rec[f"lo{level}"] is None or rec[f"hi{level}"] is None:
                rec[f"lo{level}"] = rec[f"hi{level}"] = None
    return out


def edge(x: float | None) -> str:
    """A band edge as printed: 4 decimals, or 4 digits where it is huge (a loss typo's band); "–" where there is
    none (null in the JSON)."""
    return "–" if x is None else f"{x:.4f}" if abs(x) < 1e6 else f"{x:.4g}"


def band_text(p: dict, level: str, sep: str = ", ", brackets: bool = True) -> str:
    """One band of a prediction as printed: its edges, or "unbounded" where it has none (no spare runs)."""
    lo, hi = p[f"lo{level}"], p[f"hi{level}"]
    if lo is None or hi is None:
        return "unbounded"
    return f"[{edge(lo)}{sep}{edge(hi)}]" if brackets else f"{edge(lo)}{sep}{edge(hi)}"


def bands_text(p: dict) -> str:
    """A prediction's median with its 50% and 90% bands, as printed."""
    return f"{edge(p['median'])}  50% {band_text(p, '50')}  90% {band_text(p, '90')}"


def finite(x) -> float | None:
    """JSON has no infinity: an unbounded band edge (no spare runs) is null."""
    x = float(x)
    return x if np.isfinite(x) else None


MIN_EVERY = 0.005
"""The finest --every: 200 fractions."""


EVERY_ROUNDING = 1.5e-3
"""How far n × --every may miss 1 for --every to be read as 1/n: 1/n written to 3 significant digits or more."""


def fractions_every(every: float) -> np.ndarray:
    """The fractions of the runs --every gives (0.05: 5%, 10%, … 100%), ending at the run's end."""
    if not MIN_EVERY <= every <= 0.5:  # the fit's time and memory grow with the square of the fractions' number
        raise LadderError(f"--every {every:g}: must be in [{MIN_EVERY:g}, 0.5] (at most {1 / MIN_EVERY:.0f} fractions), "
                          "e.g. 0.05")
    n = int(round(1.0 / every))
    if abs(n * every - 1.0) > EVERY_ROUNDING:  # 1/3 given as 0.3333 (or 0.333) is 1/3
        raise LadderError(f"--every {every:g}: the fractions must end at the run's end (1), so give 1/n, e.g. "
                          f"{1 / max(n, 2):.4g} or {1 / (n + 1):.4g}")
    return np.round(np.arange(1, n + 1) / n, 12)


@contextlib.contextmanager
def saying_left_out(data: fitdata.Finals) -> Iterator[None]:
    """A fit's refusal (too few runs, say) with the runs the selection left out for not having finished beside it."""
    import fits

    try:
        yield
    except fits.FitError as exc:
        if not data.left_out:
            raise
        raise fits.FitError(f"{exc} ({data.left_out})") from None

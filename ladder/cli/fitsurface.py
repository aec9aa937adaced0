"""`ladder fit surface`: the Chinchilla surface L(N, D) on runs that vary size and tokens, its form chosen by
backtest, and its predictions at targets and compute-optimal runs."""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path

import numpy as np
import typer
from rich.table import Table

from ladder.cli import fitshared as shared
from ladder.cli.app import Format, command, console, print_json, warn
from ladder.config.limits import MAX_COMPUTE, MAX_PARAMS, MAX_TOKENS, positive
from ladder.data import endpointcsv
from ladder.data.csvfile import is_number
from ladder.data.store import Store
from ladder.errors import LadderError


class SurfaceForm(StrEnum):
    auto = "auto"
    free = "free"
    shared = "shared"
    kaplan = "kaplan"


@command("surface", parent=shared.fit_app)
def fit_surface_command(
    ctx: typer.Context,
    csv: Path | None = shared.CSV,
    store: Path = shared.STORE,
    metric: str | None = shared.METRIC,
    group: str | None = shared.GROUP,
    role: str = shared.ROLE,
    run_col: str | None = shared.RUN_COL,
    loss_col: str = shared.LOSS_COL,
    step_col: str = shared.STEP_COL,
    total_steps_col: str | None = shared.PLANNED_COL,
    drop_col: str | None = shared.DROP,
    where: list[str] = shared.WHERE_AND_TARGETS,
    params_col: str = typer.Option("params", "--params-col", help="CSV: column of the parameter count N."),
    tokens_col: str = typer.Option("tokens", "--tokens-col", help="CSV: column of the tokens D trained on."),
    budget_col: str = typer.Option(
        "budget", "--budget-col",
        help="CSV: column of each run's compute budget (FLOPs), read where the CSV has it: where three budgets or "
             "more hold three model sizes or more, the runs are an isoFLOP sweep, the form is chosen by predicting "
             "the largest budget from the smaller ones, and kaplan joins the forms it chooses from. Without it, "
             "the budgets the runs' tokens trace, where they trace a sweep.",
    ),
    E: float | None = shared.E_OPT,
    form: SurfaceForm = typer.Option(
        SurfaceForm.auto, "--form",
        help="free: α and β apart; shared: one exponent for N and D (α = β); kaplan: E + (A/N^α + B/D^β)^γ, whose "
             "budgets' valleys are not tied to how fast their least loss falls (a candidate of an isoFLOP sweep); "
             "auto: the one with the lower error predicting the largest size (of a sweep: budget) from the smaller "
             "ones (a backtest on these runs; free with under 3 sizes).",
    ),
    shared_exponent: bool = typer.Option(False, "--shared-exponent", help="Same as --form shared."),
    at: list[str] = typer.Option([], "--at", help="Predict at N,D (parameters,tokens); repeatable."),
    optimum_at: list[str] = typer.Option(
        [], "--optimum-at",
        help="The compute-optimal run at each compute C (FLOPs, comma-separated, e.g. 1e21,1e22; repeatable): the size N* "
             "that reaches the surface's least loss at C = 6·N·D, its tokens C/(6·N*), and the loss there with its "
             "band.",
    ),
    predict_csv: Path | None = typer.Option(
        None, "--predict-csv",
        help="Predict every row of this CSV (columns params,tokens, or the --params-col/--tokens-col names; "
             "its other columns, a name for instance, come back beside each prediction): median with 50% and "
             "90% bands, each the wider of the Student-t observation band of the fit (n − p dof) and, with "
             "--bootstrap N, the bootstrap-over-runs band; and how many e-folds each target lies outside the "
             "fitted runs (efolds_out: above them, how far the nearest would have to grow in N and D alike to be "
             "as large; below them, how far its N or D lies under the smallest; or off their token ratios: the "
             "distance the bands' extrapolation error grows with).",
    ),
    bootstrap: int = shared.BOOT,
    seed: int = shared.SEED,
    level: float = shared.LEVEL,
    fmt: Format = shared.FMT,
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
    shared.check_level(level, ctx, bootstrap)
    shared.one_source(ctx, csv, where, drop_col, store, metric, group, role, by_size=True)
    if at and predict_csv is not None:
        raise LadderError("--at and --predict-csv: give the targets one way (put the --at points in the CSV)")
    if csv is not None:
        cols = shared.csv_columns(csv, run_col, loss_col, step_col, drop_col, where, params=params_col, tokens=tokens_col,
                     budget=budget_col, total_steps=total_steps_col)
        need, optional = shared.named_columns(ctx, ("budget",))
        data = fitdata.finals_from_csv(csv, cols, ("params", "tokens", *need), optional)
    else:
        s = Store(store)
        data = fitdata.finals_from_store(s, shared.store_metric(s, metric), group, role or None)
    if shared_exponent:
        if form is not SurfaceForm.auto and form is not SurfaceForm.shared:
            raise LadderError(f"--shared-exponent and --form {form.value} contradict each other; give one")
        form = SurfaceForm.shared
    targets, untargeted = None, ""
    if predict_csv is not None:
        *targets, untargeted = endpointcsv.read_targets(predict_csv, params_col, tokens_col, tuple(where))
    if targets is None:
        points = [_point(item) for item in at]
        targets = (np.array([n for n, _ in points], dtype=np.float64), np.array([d for _, d in points], dtype=np.float64),
                   [{} for _ in points])
    _units_apart(data.params, data.tokens, targets[0], targets[1])
    from fits.surfacechoice import choose_surface
    with shared.saying_left_out(data):
        choice = choose_surface(data.params, data.tokens, data.loss, E=E, form=form.value, budget=data.budget,
                                names=data.names)
    fit = choice.fit
    ens, boot = shared.bootstrap_record(fit, bootstrap, seed, level)
    preds = _surface_bands(choice, ens, *targets)
    optimal = _optima(fit, optimum_at)
    optima = _surface_bands(choice, ens, np.array([n for _, n, _ in optimal], dtype=np.float64),
                            np.array([d for _, _, d in optimal], dtype=np.float64), [{"compute": c} for c, _, _ in optimal])
    below = (_below_fitted(preds + optima, data.params, data.tokens) + _budget_axis(optima, data)
             + _optima_off_ratios(optima, data.params, data.tokens)
             + _not_counts(data.params, data.tokens) + _unread_actual(preds, (loss_col,)) + ([untargeted] if untargeted else [])
             + _not_carried(targets[2], predict_csv, actual_column(preds, (loss_col,)) is not None)
             + shared.far_targets(preds + optima, lambda p: f"N = {p['params']:.3g}, D = {p['tokens']:.3g}",
                                  lambda p: _outside(p, data.params, data.tokens)))
    if fmt is Format.json:
        out = shared.base_record(fit, "surface", data.notes) | {"shared_exponent": choice.form == "shared", "bootstrap": boot or None,
                                       "form_choice": {"form": choice.form, "why": choice.why,
                                                       "backtest": choice.table(), "budgets": choice.budget_record(),
                                                       "envelope": choice.envelope_record(),
                                                       "warnings": list(choice.warnings)},
                                       "predictions": with_errors(preds, (loss_col,)), "optima": optima,
                                       "band": _band_text(fit, ens, choice.tested)}
        # every warning at the top, the choice's also under form_choice, beside the choice they qualify
        out["warnings"] = list(dict.fromkeys([*out["warnings"], *choice.warnings, *below]))
        print_json(out)
        return
    shared.print_params(fit, boot, level, data.notes)
    console.print(choice.summary(), highlight=False)
    for w in [w for w in choice.warnings if w not in fit.warnings] + below:  # the fit's own are in its summary
        warn(w)
    for p in optima:
        console.print(
            f"optimum at C = {p['compute']:.3g} FLOPs: N* = {p['params']:.3g}, D* = {p['tokens']:.3g} "
            f"({p['tokens'] / p['params']:.3g} tokens per parameter): L = {shared.bands_text(p)} ({p['efolds_out']:.2f} "
            "e-folds outside the fitted runs)", highlight=False,
        )
    if preds:
        _print_bands(preds, _band_text(fit, ens, choice.tested), (loss_col,))


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


def _outside(p: dict, n_params, tokens) -> str:
    """How a target lies outside the fitted runs, for `shared.far_targets`: below them, off their token
    ratios, or "" where it lies above them in size (`fits.surfacechoice.distance` takes the farthest of the three)."""
    n_min, d_min = float(np.min(n_params)), float(np.min(tokens))
    ratios = np.asarray(tokens, dtype=np.float64) / np.asarray(n_params, dtype=np.float64)
    r = p["tokens"] / p["params"]
    off = abs(np.log(r / np.clip(r, ratios.min(), ratios.max())))
    below = max(np.log(n_min / p["params"]), np.log(d_min / p["tokens"]))
    if below >= p["efolds_out"] - 1e-9:
        return f"below the fitted runs ({np.exp(below):.3g}× smaller than the smallest N or D)"
    if off >= p["efolds_out"] - 1e-9:
        return (f"off the fitted runs' token ratios ({r:.3g} tokens per parameter; theirs span "
                f"{ratios.min():.3g} .. {ratios.max():.3g})")
    return ""


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


def _units_apart(n_params, tokens, target_n, target_d) -> None:
    """Refuse targets given as counts where the runs' N or D are not (below `LEAST_COUNT`: millions or billions), and
    the targets lie more than `FAR_EFOLDS` e-folds above them on that axis: every prediction would be digits off."""
    for name, runs, theirs in (("N", n_params, target_n), ("D", tokens, target_d)):
        runs, theirs = np.asarray(runs, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
        if not theirs.size or float(runs.min()) >= LEAST_COUNT:
            continue
        far = float(theirs.max()) / float(runs.max())
        if np.log(far) > shared.FAR_EFOLDS:
            raise LadderError(f"the runs give {name} as small as {runs.min():.3g} (at most {runs.max():.3g}) and the "
                              f"targets {name} up to {theirs.max():.3g}, {far:.3g}× larger: the runs' counts look written in "
                              "millions or billions and the targets' as counts; give both as counts (7e9, not 7)")


BUDGET_AXIS_TOL = 0.2
"""How far (relative) a table's budgets may sit from 6·N·D before --optimum-at says it reads compute as 6·N·D."""


OFF_RATIOS = 1.5
"""An optimum whose tokens per parameter lie beyond the runs' by more than this factor is warned of."""


def _optima_off_ratios(optima: list[dict], n_params, tokens) -> list[str]:
    """A warning for each --optimum-at allocation whose tokens per parameter lie beyond the fitted runs' by more than
    `OFF_RATIOS`: the law places the optimum where no run was trained, which a prediction at such a ratio warns of."""
    ratios = np.asarray(tokens, dtype=np.float64) / np.asarray(n_params, dtype=np.float64)
    lo, hi = float(ratios.min()), float(ratios.max())
    out = []
    for p in optima:
        r = p["tokens"] / p["params"]
        if r < lo / OFF_RATIOS or r > hi * OFF_RATIOS:
            out.append(f"the optimum at C = {p['compute']:.3g} FLOPs puts {r:.3g} tokens per parameter (N* = "
                       f"{p['params']:.3g}, D* = {p['tokens']:.3g}), where the fitted runs span {lo:.3g} .. {hi:.3g}: "
                       "the law's optimum lies where no run was trained; trust it as far as its trend in token ratio "
                       "carries, or train runs near that ratio")
    return out


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


SANE_EXPONENT = 0.02
"""Exponents of N and D above this: a surface whose optimum moves with compute (a vanished term sits near 0)."""


def _optima(fit, text: list[str]) -> list[tuple[float, float, float]]:
    """(C, N*, D*) for each compute of `--optimum-at`: the size at the surface's least loss along C = 6·N·D."""
    from fits.frontier import optimum

    out = []
    for c in shared.floats(text, "--optimum-at", "1e21,1e22"):
        positive("--optimum-at", c, MAX_COMPUTE, "a run's compute in FLOPs")
        n = float(optimum(c, **fit.params)[1])
        exponents = [fit.params[k] for k in ("alpha", "beta") if k in fit.params]
        senseless = not np.isfinite(n) or n < 1 or c / (6 * n) < 1
        if senseless and np.isfinite(n) and exponents and min(exponents) > SANE_EXPONENT:  # the compute, not the fit
            raise LadderError(f"--optimum-at {c:g}: too little compute for any model (the surface's best size there is "
                              f"N* = {n:.3g} parameters on {c / (6 * max(n, 1e-300)):.3g} tokens); give the compute in "
                              "FLOPs, e.g. 1e23")
        if senseless:
            shown = ", ".join(f"{k} = {v:.4g}" for k, v in fit.params.items())
            raise LadderError(f"--optimum-at {c:g}: the fitted surface has no least loss at a sensible size (N* = "
                              f"{n:.3g}): a term vanished or an exponent sits near 0 ({shown}), so more tokens or more "
                              "parameters always help on it; check the loss and size columns")
        out.append((c, n, c / (6 * n)))
    return out


def _point(item: str) -> tuple[float, float]:
    """One --at N,D."""
    nd = shared.floats(item, "--at", "7e10,1.4e12 (N,D)")
    if len(nd) != 2:
        raise LadderError(f"--at {item!r}: expected N,D, e.g. 7e10,1.4e12")
    for what, x, most in (("N", nd[0], MAX_PARAMS), ("D", nd[1], MAX_TOKENS)):
        if not 1 <= x <= most:
            raise LadderError(f"--at {item!r}: {what} = {x:g} is out of range: parameters and tokens are counts "
                              f"from 1 to {most:g}, e.g. 7e10,1.4e12")
    return nd[0], nd[1]


def _surface_bands(choice, ens, n_params: np.ndarray, tokens: np.ndarray, labels: list[dict]) -> list[dict]:
    """One dict per target (--at, --predict-csv, --optimum-at alike): its labels (a CSV's other columns, a name,
    ...; a column of numbers as numbers; an optimum's compute), then N, D, the band and its distance."""
    if not n_params.size:
        return []
    bands = shared.band_records(choice.band(n_params, tokens, ens), n_params.size)
    out = choice.distance(n_params, tokens)
    return [{k: v for k, v in labels[i].items() if k not in BAND_KEYS} | {"params": float(n), "tokens": float(d)}
            | bands[i] | {"efolds_out": float(out[i])} for i, (n, d) in enumerate(zip(n_params, tokens))]


BAND_KEYS = ("params", "tokens", *shared.BANDS, "efolds_out")
"""The keys of a surface's prediction; a target's own column of one of these names is not carried. efolds_out:
how far the target lies outside the fitted runs (`fits.surfacechoice.distance`), the e-folds the band's
extrapolation error grows with."""


def _not_carried(labels: list[dict], path: Path | None, with_error: bool) -> list[str]:
    """A warning naming the targets' own columns that share a name with a key of the prediction (`BAND_KEYS`, and
    the error beside an actual loss `with_error`): they are not carried into the output, where the prediction's
    value stands."""
    clash = [k for k in (labels[0] if labels else {}) if k in BAND_KEYS or (with_error and k == ERROR_KEY)]
    if not clash:
        return []
    names = ", ".join(repr(k) for k in clash)
    return [f"{path}: the targets' column{'s' if len(clash) > 1 else ''} {names} share{'' if len(clash) > 1 else 's'} "
            "a name with the prediction's own and "
            f"{'are' if len(clash) > 1 else 'is'} not carried into the output; rename {'them' if len(clash) > 1 else 'it'} "
            "to keep the values beside each prediction"]


def _band_text(fit, ens, tested: bool = True) -> str:
    """What the bands are: the Student-t and/or bootstrap band, widened by the form backtest's error where a backtest
    scored the form (`SurfaceChoice.tested`), else by the floor alone (a form no backtest tries: kaplan)."""
    from fits.predictor import UNTESTED_ERROR
    t = f"Student-t observation band ({fit.dof} dof)" if fit.dof > 0 else ""
    widened = ("; widened in quadrature by the form backtest's error per e-fold of extrapolation carried to "
               f"each target, and to at least {UNTESTED_ERROR:.0%} (one sd) per e-fold" if tested else
               f"; widened in quadrature by {UNTESTED_ERROR:.0%} (one sd) per e-fold of extrapolation (no backtest "
               "scored this form)")
    if ens is None:
        return (t + widened) if t else "none: no spare runs for a Student-t band; add --bootstrap N"
    b = f"bootstrap over runs ({ens.n} refits)"
    return (f"the wider of the {b} and the {t}" if t else b) + widened


def _print_bands(preds: list[dict], band: str, names: tuple[str, ...] = ()) -> None:
    table = Table(title="predicted loss (nats/token)",
                  caption=f"e-folds out: how far each target lies outside the fitted runs (above them, below them, "
                          f"or off their token ratios; 0 inside); bands: {band}")
    every = [k for k in preds[0] if k not in BAND_KEYS] if preds else []
    actual = actual_column(preds, names)
    labels = [k for k in every if k != actual][:SHOWN_LABELS]
    left = len(every) - len(labels) - (actual is not None)
    if left:
        table.caption += f"; the targets' other {left} column{'s' if left > 1 else ''} are in --format json"
    for name in labels:
        table.add_column(name, justify="left", overflow="fold")
    for name in ("N (params)", "D (tokens)", "e-folds out", "median", "50% band", "90% band"):
        table.add_column(name, justify="right")
    if actual is not None:
        table.add_column("actual" if actual.strip().lower() == "actual" else f"actual ({actual})", justify="right")
        table.add_column("error", justify="right")
    for p in with_errors(preds, names):
        known = p.get(ERROR_KEY) is not None
        beside = ([shared.edge(p[actual]), f"{p[ERROR_KEY]:+.2%}"] if known else
                  ["", ""] if actual is not None else [])
        table.add_row(*("" if p[k] is None else str(p[k]) for k in labels), f"{p['params']:.4g}", f"{p['tokens']:.4g}",
                      f"{p['efolds_out']:.2f}", shared.edge(p["median"]),
                      shared.band_text(p, "50", " .. ", brackets=False), shared.band_text(p, "90", " .. ", brackets=False),
                      *beside)
    console.print(table)


SHOWN_LABELS = 2
"""The targets' own columns (a name, a size) the terminal's table shows beside each prediction; --format json
carries them all."""
def actual_column(preds: list[dict], names: tuple[str, ...] = ()) -> str | None:
    """The targets' column that holds their actual loss (the first of `actual_columns`), or None."""
    return next(iter(actual_columns(preds, names)), None)


def actual_columns(preds: list[dict], names: tuple[str, ...] = ()) -> list[str]:
    """The targets' columns that may hold their actual loss: named so (`names`, the runs' --loss-col first, then
    `ACTUAL_NAMES`), positive numbers; in that order."""
    names = _actual_names(names)
    every = [k for k in preds[0] if k not in BAND_KEYS] if preds else []
    found = [k for k in every if k.strip().lower() in names and any(p[k] is not None for p in preds)
             and all(p[k] is None or (isinstance(p[k], (int, float)) and 0 < p[k] < math.inf) for p in preds)]
    return sorted(found, key=lambda k: names.index(k.strip().lower()))


def _actual_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The column names an actual loss goes by: `names` (the runs' --loss-col) before `ACTUAL_NAMES`, lower case."""
    return tuple(dict.fromkeys([*(n.strip().lower() for n in names), *ACTUAL_NAMES]))


def with_errors(preds: list[dict], names: tuple[str, ...] = ()) -> list[dict]:
    """The predictions with their error (predicted ÷ actual − 1) where the targets give their actual loss."""
    actual = actual_column(preds, names)
    if actual is None:
        return preds
    return [p | {ERROR_KEY: p["median"] / p[actual] - 1 if p[actual] is not None and p["median"] is not None else None}
            for p in preds]


ERROR_KEY = "predicted_error"
"""The key of a target's error beside its actual loss (not "error": a targets' table may have a column of that name)."""


ACTUAL_NAMES = ("loss", "actual", "actual_loss", "final_loss", "eval_loss", "val_loss", "loss_final")
"""A targets' column of these names (lower case), all positive numbers, is their actual loss: the terminal's table
shows it with the prediction's error (predicted ÷ actual − 1)."""


def _unread_actual(preds: list[dict], names: tuple[str, ...] = ()) -> list[str]:
    """A warning for a targets' column named as an actual loss (`ACTUAL_NAMES`) that is not read as one, since a cell
    is no loss (a typo, a note, a 0 or a negative number): no error is shown beside the predictions; and one where
    two such columns are losses, naming the one read."""
    from fits.checks import and_more

    out = []
    named = list(dict.fromkeys(k for p in preds for k in p if k.strip().lower() in _actual_names(names)))
    losses = actual_columns(preds, names)
    read = next(iter(losses), None)
    for key in named:
        cells = [p[key] for p in preds if p.get(key) is not None and str(p[key]).strip()]
        bad = [str(c).strip() for c in cells if not is_number(str(c)) or not 0 < float(c) < math.inf]
        if bad:
            shown = "" if read is not None else ", so no error is shown"
            out.append(f"the targets' column {key!r} holds {bad[0]!r}{and_more(bad)}, which is no loss (a positive "
                       f"number): it is not read as their actual loss{shown}; leave a cell blank where the loss is "
                       "unknown")
    others = [k for k in losses if k != read]
    if read is not None and others:
        out.append(f"the targets' columns {read!r} and {others[0]!r} both hold losses: {read!r} is read as their actual "
                   f"loss (the error beside each prediction), {others[0]!r} is shown as it is")
    apart = [(p[read], p["median"]) for p in preds if read is not None and p.get(read) is not None
             and p.get("median") and not 1 / ACTUAL_APART <= p[read] / p["median"] <= ACTUAL_APART]
    if apart:
        (a, m), more = apart[0], len(apart) - 1
        out.append(f"the targets' actual {read!r} {a:.4g} is {a / m:.3g}× the prediction {m:.4g}"
                   + (f" (and {more} more as far apart)" if more else "") + ": no law misses by that much; is it a "
                   "perplexity (give its log), another metric, or another unit than the runs' loss?")
    return out


ACTUAL_APART = 2.0
"""A target's actual loss more than this factor from its prediction is likely no loss in the runs' units."""



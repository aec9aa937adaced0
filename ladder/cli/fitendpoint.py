"""`ladder fit endpoint`: the endpoint law L(C) = E + A·C^-α on the runs' final losses, or on an isoFLOP
sweep's least loss per budget."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np
import typer

from ladder.cli import fitshared as shared
from ladder.cli.app import Format, command, console, print_json, warn
from ladder.config.limits import MAX_COMPUTE, positive
from ladder.data.store import Store
from ladder.errors import LadderError


@command("endpoint", parent=shared.fit_app)
def fit_endpoint_command(
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
    where: list[str] = shared.WHERE,
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
    compute: shared.ComputeAxis = shared.COMPUTE,
    E: float | None = shared.E_OPT,
    at: list[str] = typer.Option([], "--at", help="Predict the final loss at these computes (FLOPs on the law's axis: "
                                 "the CSV's column, or --compute's), comma-separated; repeatable."),
    bootstrap: int = shared.BOOT,
    seed: int = shared.SEED,
    level: float = shared.LEVEL,
    fmt: Format = shared.FMT,
) -> None:
    """Fit the endpoint law L(C) = E + A·C^-α to the runs' final losses.

    Final loss: each run's last logged value. C: from a CSV, its compute column; from the store,
    6·N·D when every run gives N (as `ladder predict` counts it), else fit compute (FLOPs, 3 ×
    forward without the output head); --compute chooses. Predictions carry a Student-t band
    (n − p dof), or with --bootstrap N the wider of it and the bootstrap's (the median stays the fit's own),
    widened in quadrature to at least 1% (one sd)
    per e-fold of extrapolation, as every prediction's band is: half the e-folds in compute beyond
    the largest run (at one token ratio a model's size grows as the square root of its compute).
    An isoFLOP sweep (several model sizes per compute budget, with N in the CSV's params column or
    the store) is fitted on each budget's least loss (Hoffmann et al.'s approach 2), so the law
    predicts the least loss a larger budget reaches, and the model size there (a power law in
    compute through the budgets' vertices).
    """
    import fits
    from ladder.data import fitdata
    shared.check_level(level, ctx, bootstrap)
    shared.one_source(ctx, csv, where, drop_col, store, metric, group, role, compute)
    if csv is not None:
        cols = shared.csv_columns(csv, run_col, loss_col, step_col, drop_col, where, compute=compute_col, params=params_col,
                     tokens=tokens_col, total_steps=total_steps_col)
        named, optional = shared.named_columns(ctx, ("params", "tokens"))
        data = fitdata.finals_from_csv(csv, cols, ("compute", *named), optional)
    else:
        s = Store(store)
        data = fitdata.finals_from_store(s, shared.store_metric(s, metric), group, role or None, compute.value)
    C, L, minima, notes = endpoint_points(data, params_col if csv is not None else None)
    with shared.saying_left_out(data):
        fit = fits.fit_endpoint(C, L, E=E, counted=csv is None,  # the store's computes are counted, not given
                                names=None if minima else data.names)  # (a sweep fits one point per budget)
    if minima:  # each point a budget's least loss
        fit = dataclasses.replace(fit, points=f"budgets' least losses (of {data.loss.size} runs)")
    ens, boot = shared.bootstrap_record(fit, bootstrap, seed, level)
    from fits.isoflop import optimal_size
    size = optimal_size(minima) if minima else None
    from fits.predictor import UNTESTED_ERROR, compute_efolds, floor_sd
    from fits.uncertainty import fit_band
    preds, targets = [], shared.floats(at, "--at")
    for c in targets:
        positive("--at", c, MAX_COMPUTE, "a run's compute in FLOPs")
    for c in targets:
        far = float(compute_efolds(c, C))
        band = fit_band(fit, c, ensemble=ens, extra_sd=floor_sd(fit.predict(c), 0.0, far))
        preds.append({"compute": c} | shared.band_records(band, 1)[0]
                     | {"band": ("the wider of the bootstrap's and the " if ens else "") + f"student-t, {fit.dof} dof, "
                                f"widened by {UNTESTED_ERROR:.0%} (one sd) per e-fold of extrapolation",
                        "extrapolation": c / float(C.max()), "efolds_out": far}
                     | ({"params_at_optimum": float(size.predict(c))} if size else {}))
    outside = shared.compute_target_warnings(targets, C, [p["efolds_out"] for p in preds])
    if fmt is Format.json:
        out = shared.base_record(fit, "endpoint", notes) | {"bootstrap": boot or None, "predictions": preds}
        out["warnings"] += outside
        if minima:
            out["n_runs"], out["n_budgets"] = int(data.loss.size), len(minima)
            out["budgets"] = [m.record() for m in minima]
            out["optimal_size"] = ({"exponent": size.exponent, "budgets": size.budgets} if size else None)
        print_json(out)
        return
    shared.print_params(fit, boot, level, notes)
    for w in outside:
        warn(w)
    if len(minima) > SHOWN_BUDGETS:
        how = Counter(m.how for m in minima)
        console.print(f"  {len(minima)} budgets, {minima[0].compute:.3g} .. {minima[-1].compute:.3g} FLOPs; the least loss "
                      "is " + "; ".join(f"{_COUNTED[k]} at {n}" for k, n in how.most_common())
                      + " (--format json gives each budget)", highlight=False)
    for m in minima if len(minima) <= SHOWN_BUDGETS else ():
        console.print(f"  budget {m.compute:.3g} FLOPs: {m.runs} run{'s' if m.runs > 1 else ''}, least loss "
                      f"{m.loss:.4f} at N = {m.n_params:.3g} ({_HOW[m.how]})", highlight=False)
    if size:
        console.print(f"  N at the least loss ∝ C^{size.exponent:.3f} (a power law through the {size.budgets} "
                      "budgets' vertices)", highlight=False)
    for p in preds:
        console.print(
            f"at C = {p['compute']:.3g} FLOPs ({p['extrapolation']:.3g}× the largest run's): L = {shared.bands_text(p)} "
            f"({p['band']}; "
            f"{p['efolds_out']:.2f} e-folds out" + (", in model size: half those in compute" if p["efolds_out"] else "") + ")"
            + (f", at N = {p['params_at_optimum']:.3g}" if "params_at_optimum" in p else ""), highlight=False,
        )


_COUNTED = {"vertex": "a parabola's vertex", "edge": "the lowest run, at the edge of the sizes (an upper bound)",
            "run": "the lowest run", "flat": "the lowest run, where the parabola does not open upwards"}

SHOWN_BUDGETS = 20
"""A sweep of more budgets than this prints a line of counts instead of a line per budget (the JSON gives each)."""

_HOW = {"vertex": "a parabola's vertex", "edge": "its lowest run, at the edge of its sizes: an upper bound",
        "run": "its lowest run", "flat": "its lowest run: the parabola through it does not open upwards"}


def endpoint_points(data, params_col: str | None) -> tuple[np.ndarray, np.ndarray, list, tuple[str, ...]]:
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
        if data.tokens is not None:
            from ladder.data.fitdata import ONE_RATIO_GROUP, ratios_note
            pick = "--where COLUMN=VALUE picks the rows of one" if params_col is not None else ONE_RATIO_GROUP
            notes += ratios_note(data.params, data.tokens, "the endpoint law", f"{pick}; `ladder fit surface` fits N and "
                                 "D apart")
        return data.compute, data.loss, [], notes
    minima = isoflop.budget_minima(compute, data.params, data.loss)
    if len(minima) < 3:
        raise LadderError(f"an isoFLOP sweep at {len(minima)} budget{'s' if len(minima) > 1 else ''}: the endpoint law "
                          "fits one least loss per budget and needs 3 budgets or more; add a budget")
    notes += (f"an isoFLOP sweep ({data.loss.size} runs at {len(minima)} budgets): the law fits each budget's least "
              "loss, one point per budget, the vertex of a parabola in log N "
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


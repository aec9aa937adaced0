"""`ladder fit curve`: a whole-curve law on the rungs' curves (the per-fraction law from a CSV or the store;
the schedule-aware laws from the store)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import numpy as np
import typer

from ladder.cli import fitshared as shared
from ladder.cli.app import Format, command, console, print_json, warn
from ladder.data.store import Store
from ladder.errors import LadderError


class Law(StrEnum):
    perfraction = "perfraction"
    multipower = "multipower"
    momentum = "momentum"


@command("curve", parent=shared.fit_app)
def fit_curve_command(
    ctx: typer.Context,
    csv: Path | None = shared.CSV,
    store: Path = shared.STORE,
    metric: str | None = shared.METRIC,
    group: str | None = shared.GROUP,
    role: str = shared.ROLE,
    run_col: str = typer.Option("run_id", "--run-col", help="CSV: column naming each row's run."),
    loss_col: str = shared.LOSS_COL,
    step_col: str = typer.Option(shared.DEFAULT_STEP_COL, "--step-col", help="CSV: column of the step (with --total-steps-col)."),
    total_steps_col: str | None = typer.Option(None, "--total-steps-col", help="CSV: column of each run's planned steps."),
    drop_col: str | None = shared.DROP,
    where: list[str] = shared.WHERE,
    fraction_col: str | None = typer.Option(None, "--fraction-col", help="CSV: column of the fraction of planned steps (instead of step / total)."),
    compute_col: str = typer.Option("compute", "--compute-col", help="CSV: column of the fit compute spent by the row (FLOPs), or of each run's whole compute on every row of it."),
    every: float = typer.Option(0.05, "--every", help="Fit the law at every this fraction of the runs (0.05: 5%, 10%, … 100%); one E for all of them."),
    compute: shared.ComputeAxis = shared.COMPUTE,
    E: float | None = shared.E_OPT,
    ats: list[float] = typer.Option([], "--at", help="Predict the whole curve of a run of this total compute (FLOPs on "
                                    "the law's axis: the CSV's column, or --compute's); one run a fit."),
    law: Law = typer.Option(Law.perfraction, "--law", help="perfraction, or a schedule-aware law (multipower, momentum; store only)."),
    shape: str | None = typer.Option(None, "--shape", help="Schedule-aware laws: hold shape parameters, e.g. C=2,beta=0.6,gamma=0.6."),
    scale: str = typer.Option("fit_flops_per_token", "--scale", help="Schedule-aware laws: the runs-table column their power laws use (fit_flops_per_token, active_params)."),
    bootstrap: int = shared.BOOT,
    seed: int = shared.SEED,
    level: float = shared.LEVEL,
    fmt: Format = shared.FMT,
) -> None:
    """Fit a whole-curve law to the rungs' curves.

    perfraction (default): L(g) = E + A_g·(C·g)^-α_g for a fixed-ratio ladder. Each run is sampled
    at common fractions g of its planned steps (linear interpolation between its checkpoints; the
    fractions before the runs' first evals are left out, with a note); one
    power law per fraction, one E for all. From the store, C is 6·N·D when every run gives N (as
    `ladder predict` counts it), else fit compute; --compute chooses. With --at C, the predicted curve of a run of total
    compute C: its median with 50% and 90% bands, the Student-t band (or with --bootstrap N the wider of it and the
    bootstrap's), widened by 1% (one sd) per e-fold of extrapolation, half the e-folds in compute outside the
    fitted runs. E is shared by every sampled fraction, so --every moves the fit a little, the end's
    prediction included. From a CSV: one row per checkpoint, with columns run_id, step, loss and compute,
    and the run's planned steps (--total-steps-col NAME) or each row's fraction of them (--fraction-col NAME).

    multipower / momentum: the schedule-aware laws, fitted on every run's checkpoints with the LR
    of every step rebuilt from the schedule in its config (so from the store only); shape
    parameters shared, L0, A, alpha, B power laws in --scale.
    """
    import fits
    from ladder.data import fitdata
    shared.check_level(level, ctx, bootstrap)
    if len(ats) > 1:  # (a single option given twice keeps its last value, unsaid)
        raise LadderError(f"--at given {len(ats)} times ({', '.join(f'{c:g}' for c in ats)}): a fit predicts one run's "
                          "curve; give one --at, and fit again for each other")
    at = ats[0] if ats else None
    shared.one_source(ctx, csv, where, drop_col, store, metric, group, role, compute)
    shared.only_for(ctx, "Schedule-aware laws:", law is not Law.perfraction, "the schedule-aware laws (--law multipower or momentum)")
    shared.only_for(ctx, {"every": "--every", "compute": "--compute"}, law is Law.perfraction, "--law perfraction "
                    "(a schedule-aware law fits every checkpoint, its power laws in --scale)")
    if law is not Law.perfraction:
        _fit_curve_law(law, csv, store, metric, group, role, E, at, shape, scale, bootstrap, seed, level, fmt)
        return
    g = shared.fractions_every(every)
    if csv is not None:
        if not run_col:
            raise LadderError(f"--run-col '': {fitdata.ONE_ROW_PER_RUN}")
        cols = shared.csv_columns(csv, run_col, loss_col, step_col, drop_col, where, compute=compute_col, fraction=fraction_col,
                     total_steps=total_steps_col)
        data = fitdata.curves_from_csv(csv, cols, g)
    else:
        s = Store(store)
        data = fitdata.curves_from_store(s, shared.store_metric(s, metric), g, group, role or None, compute.value)
    data = data.from_first_evals().with_short_runs_noted()
    g = data.fractions
    if at is not None:
        shared.positive_number(at, "--at")
    fit = fits.fit_per_fraction(data.compute, data.fractions, data.losses, E=E)
    ens, boot = shared.bootstrap_record(fit, bootstrap, seed, level)
    from fits.predictor import UNTESTED_ERROR, compute_efolds, floor_sd
    from fits.uncertainty import fit_band
    curve, far, dofs = None, np.zeros(g.size), np.full(g.size, fit.dof)
    if at is not None:  # each fraction from the runs that reach it: fewer, and the largest of them smaller, past a short run
        dofs = fit.dof_at(at, g)
        reach = np.isfinite(data.losses)
        far = np.array([float(compute_efolds(at, data.compute[reach[:, i]])) for i in range(g.size)])
        b = fit_band(fit, at, ensemble=ens, extra_sd=floor_sd(fit.predict(at), 0.0, far))
        curve = shared.band_records(b, g.size)
    band = (("the wider of the bootstrap's and the " if ens else "") + f"student-t, {_spread(dofs, g, 'dof', 'd')}, "
            f"widened by {UNTESTED_ERROR:.0%} (one sd) per e-fold of extrapolation; "
            f"{_spread(far, g, 'e-folds out', '.2f')}")
    notes = (*data.notes, *(_rises(g, np.array([p["median"] for p in curve])) if curve is not None else ()))
    outside = shared.compute_target_warnings([at], data.compute, [float(far.min())]) if at is not None else []
    if fmt is Format.json:
        out = shared.base_record(fit, "per-fraction", notes) | {
            "fractions": g.tolist(), "A_by_fraction": fit.A.tolist(), "alpha_by_fraction": fit.alpha.tolist(),
            "bootstrap": boot or None,
            "prediction": None if curve is None else {
                "compute": at, "efolds_out": float(far.max()), "efolds_out_by_fraction": far.tolist(),
                "dof_by_fraction": [int(d) for d in dofs], "band": band, "fraction": g.tolist()}
            | {k: [p[k] for p in curve] for k in shared.BANDS},
        }
        out["warnings"] += outside
        print_json(out)
        return
    shared.print_params(fit, boot, level, notes)
    for w in outside:
        warn(w)
    if curve is not None:
        console.print(f"predicted curve at C = {at:.3g} FLOPs (x{at / data.compute.max():.3g} the largest run; {band}):",
                      highlight=False)
        for frac, p in zip(g, curve):
            console.print(f"  g = {frac:.3f}: {shared.bands_text(p)}", highlight=False)


def _spread(values: np.ndarray, fractions: np.ndarray, what: str, spec: str) -> str:
    """"2 dof", or where it changes along the run (runs that stop short): "2 dof to g = 0.5, 1 from 0.75"."""
    values = np.asarray(values)
    if values.size == 0 or np.all(values == values[0]):
        return f"{format(values[0] if values.size else 0, spec)} {what}"
    parts, start = [], 0
    for i in range(1, values.size + 1):
        if i == values.size or values[i] != values[start]:
            parts.append((format(values[start], spec), fractions[start], fractions[i - 1]))
            start = i
    head, *rest = parts
    return (f"{head[0]} {what} to g = {head[2]:.3g}, " + ", ".join(f"{v} from {a:.3g}" for v, a, _ in rest)
            + " (fewer runs reach the later fractions)")


def _rises(fractions: np.ndarray, median: np.ndarray) -> tuple[str, ...]:
    """A note where the predicted median goes up from one fraction to the next (a loss under a decaying LR does not):
    each fraction is fitted on its own, and the runs' noise at one shows."""
    up = np.flatnonzero(np.diff(median) > 1e-4 * median[:-1])  # a rise of 0.01% or more
    if not up.size:
        return ()
    i = int(up[0])
    more = f" (and at {up.size - 1} more fraction{'s' if up.size > 2 else ''})" if up.size > 1 else ""
    return (f"the predicted median rises from g = {fractions[i]:.3g} to {fractions[i + 1]:.3g} ({median[i]:.4f} → "
            f"{median[i + 1]:.4f}){more}: the law is fitted at each fraction on its own, so the runs' noise at one "
            "fraction shows; `ladder predict` also tries a law smooth in the fraction, and chooses by backtest",)


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
    curves = fitdata.lr_curves_from_store(s, shared.store_metric(s, metric), group, role or None, scale=scale)
    fn = fits.fit_multipower if law is Law.multipower else fits.fit_momentum
    fit = fn(curves, E=E, shape=held)
    _, boot = shared.bootstrap_record(fit, bootstrap, seed, level)
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
    shared.print_params(fit, boot, level)
    if floor is not None:
        console.print(f"floor under L0 (fitted at 0 here; --E pins it): posterior median {floor['median']:.4g}, 90% "
                      f"[{floor['lo90']:.4g}, {floor['hi90']:.4g}] under a flat prior below the smallest loss; "
                      "`ladder predict` uses the median", highlight=False)


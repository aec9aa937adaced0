"""Every figure of a ladder and its hero, drawn from the store and a prediction (`ladder plot`, `ladder report`)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pandas as pd

import fits
from ladder import metrics as keys
from ladder.data import fitdata
from ladder.data.runview import named
from ladder.data.store import Store
from ladder.errors import LadderError, LadderWarning
from ladder.files import staged_folder
from ladder.outpaths import not_ours, out_dir
from ladder.output import plots
from ladder.predict.dynamics import project_dynamics, target_and_rungs
from ladder.predict.prediction import Prediction
from ladder.predict.scoring import failed_steps

FIGURES = ("ladder_fit", "hero_curve", "collapse", "residuals", "diagnostics", "dynamics")
FIGURE_FILES = tuple(f"{name}.{kind}" for name in FIGURES for kind in ("png", "svg"))


def figures_dir(path: str | os.PathLike, option: str = "--out") -> Path:
    """`path` as the folder to draw the figures into (`outpaths.out_dir`), where no figure's name is a folder."""
    return out_dir(path, option, FIGURE_FILES)


def curves(store: Store, run_ids: list[str], metric: str, runs: pd.DataFrame,
           started_with: dict[str, float] | None = None, per_token: dict[str, float] | None = None) -> list[plots.Curve]:
    """Each run's metric against its fraction; `started_with` gives a run's original planned steps where
    its plan was edited (fractions are of the plan a run was started with, as in the prediction's table);
    `per_token` a run's compute per token (default: its fit FLOPs)."""
    hist = store.history(run_ids, [metric]) if run_ids else pd.DataFrame(columns=["run_id"])
    out = []
    for rid in run_ids:
        h = hist[hist["run_id"] == rid].sort_values("step")
        row = runs[runs["run_id"] == rid].iloc[0]
        compute = (per_token or {}).get(rid, float(row["fit_flops_per_token"])) * float(row["planned_tokens"])
        T0 = (started_with or {}).get(rid)
        frac = h["step"].to_numpy(float) / T0 if T0 else h["fraction"].to_numpy(float)
        out.append(plots.Curve(str(row["name"]), frac, h["value"].to_numpy(float), compute, h["tokens"].to_numpy(float)))
    return out


def _started_with(pred: Prediction) -> float:
    """The target's originally planned steps, from its prediction table (step ÷ fraction)."""
    last = pred.table.iloc[-1]
    return float(last["step"]) / float(last["fraction"]) if float(last["fraction"]) > 0 else float(last["step"])


def hero_actual(store: Store, pred: Prediction, nonfinite: bool = False) -> pd.Series:
    """The target's logged metric by step (empty when it is not in the store yet); its NaN and inf values too
    with `nonfinite` (a run that diverged logs them)."""
    run = store.find(pred.run_name)
    if run is None:
        return pd.Series(dtype=float)
    h = store.history([str(run["run_id"])], [pred.metric], include_nonfinite=nonfinite)
    return pd.Series(h["value"].to_numpy(float), index=h["step"].to_numpy(int)).sort_index()



def _axis(rungs: pd.DataFrame, target: pd.DataFrame, pred: Prediction) -> tuple[dict[str, float], str, float]:
    """The ladder figure's compute axis, `ladder predict`'s: 6·N·D when the rungs and the target (in the
    store, or its N as the prediction recorded it) give N, else fit FLOPs. Returns each run's compute per
    token, the axis label and the target's compute at its last planned step."""
    rows = pd.concat([rungs, target]) if len(target) else rungs
    axis = fitdata.axis_of(rows) if len(target) or pred.target_params else "fit"
    per_token, _ = fitdata.compute_per_token(rows, axis, asked=False)  # chosen here: 6·N·D where a run lacks FLOPs
    by_run = dict(zip(rows["run_id"].astype(str), per_token))
    last = pred.table.iloc[-1]
    if axis == "fit":
        return by_run, "fit compute C (FLOPs, 3 × forward without head × tokens)", float(last["compute"])
    target_per_token = by_run[str(target["run_id"].iloc[0])] if len(target) else 6.0 * float(pred.target_params)
    return (by_run, "compute C = 6·N·D (N: active parameters, as `ladder predict` counts it)",
            target_per_token * float(last["tokens"]))


def draw_all(store: Store, pred: Prediction, out_dir: str | os.PathLike, group: str | None = None,
             predicted_as: str | None = None) -> list[Path]:
    """Draw every figure into `out_dir` (PNG and SVG); return the paths. `predicted_as`: the run the prediction was
    made for, where `pred` follows another (`ladder plot --target-run`), as the figures' titles say. The figures are
    drawn aside and moved in together, so an interrupted run leaves the folder as it was; a figure of `FIGURES` an
    earlier draw left there and this one does not draw (its ladder had no grad norms, say) is removed with them, and
    a file of the same name that no draw wrote (`plots.drawn_here`) is left alone: where this draw has a figure of
    that name, nothing is written, and the error names the file."""
    with staged_folder(out_dir) as stage:
        drawn = _draw(store, pred, stage, group, predicted_as)
        names = {p.name for p in drawn}
        yours = not_ours(Path(out_dir), sorted(names), plots.drawn_here)
        if yours:
            raise LadderError(f"{Path(out_dir) / yours[0]}: not a figure `ladder plot` drew, where this draws one; move "
                              "it, or give another folder (writing over it would destroy it)")
        for stale in FIGURE_FILES:  # an earlier ladder's: not this one's
            if stale not in names and plots.drawn_here(Path(out_dir) / stale):
                (Path(out_dir) / stale).unlink(missing_ok=True)
    return [Path(out_dir) / p.name for p in drawn]


def _upto(curve: plots.Curve, end: float) -> plots.Curve:
    """`curve` up to the fraction `end` (the last of a prediction's table)."""
    keep = np.asarray(curve.fraction) <= end * (1 + 1e-9)
    tokens = None if curve.tokens is None else np.asarray(curve.tokens)[keep]
    return dataclasses.replace(curve, fraction=np.asarray(curve.fraction)[keep], value=np.asarray(curve.value)[keep],
                               tokens=tokens)


def _draw(store: Store, pred: Prediction, out_dir: Path, group: str | None, predicted_as: str | None) -> list[Path]:
    runs, target, rungs = target_and_rungs(store, pred, group, "to draw")
    rung_ids = list(rungs["run_id"])
    hero_ids = [str(target["run_id"].iloc[0])] if len(target) else []
    per_token, axis, compute_hero = _axis(rungs, target, pred)
    rung_curves = curves(store, rung_ids, pred.metric, runs, per_token=per_token)
    started = {h: _started_with(pred) for h in hero_ids}
    hero = curves(store, hero_ids, pred.metric, runs, started, per_token)[0] if hero_ids else None
    done_ids = set(rungs["run_id"][rungs["state"] == "finished"].astype(str)) if "state" in rungs else set(rung_ids)
    finished = [c for c, rid in zip(rung_curves, rung_ids)
                if str(rid) in done_ids and fitdata.reached_end(c.fraction, finished=True)]
    out = Path(out_dir)
    paths: list[Path] = []
    # the endpoint law through the rungs' final losses, and the curves collapsed by it, need 3 finished rungs
    endpoint = (fits.fit_endpoint(np.array([c.compute for c in finished]), np.array([c.final for c in finished]))
                if len(finished) >= 3 else None)
    if endpoint is None and rung_curves:
        import warnings

        warnings.warn(f"the ladder fit and the collapsed curves are not drawn: they need 3 rungs that finished their "
                      f"plans, and {len(finished)} of the {len(rung_curves)} rungs in the store did (the others still "
                      "train, or stopped short)" + (f"; the store holds {len(rung_curves)} rungs of the prediction's "
                                                     f"{len(pred.rungs)}" if len(rung_curves) < len(pred.rungs) else ""),
                      LadderWarning, stacklevel=2)
    # the hero's final: its last eval where no later one was due before the prediction's last step (step 71,936 of
    # 72,000 for evals every 128), as `ladder score` counts it
    # of a run that trained on past the prediction's last step (another run followed, a longer plan), the eval at
    # that step: `ladder score` scores none after it
    hero_finished = str(target["state"].iloc[0]) == "finished" if len(target) and "state" in target else None
    end = float(pred.table["fraction"].iloc[-1])
    judged = _upto(hero, end) if hero is not None else None
    went_on = judged is not None and len(judged.fraction) < len(hero.fraction)
    done = judged is not None and len(judged.fraction) > 0 and fitdata.reached_end(
        np.asarray(judged.fraction) / end, True if went_on else hero_finished)
    if endpoint is not None:
        unfinished = [c.label for c in rung_curves if not any(c is f for f in finished)]
        paths += plots.save(plots.ladder_fit(finished, endpoint.predict, pred, compute_hero,
                                             judged.final if done else None, pred.metric, axis, named(unfinished),
                                             predicted_as),
                            out, "ladder_fit")
    failed = failed_steps(hero_actual(store, pred, nonfinite=True)) / _started_with(pred)
    paths += plots.save(plots.hero_curve(pred, hero, rung_curves, failed, predicted_as), out, "hero_curve")
    if endpoint is not None:
        E = float(pred.forms[0].parameters.get("E", endpoint.E)) if pred.forms else endpoint.E
        predicted_final = None if done else float(pred.table["median"].iloc[-1])
        # a running hero is collapsed by its predicted final, where there is one (the rungs' evals may end before it)
        shown = None if predicted_final is not None and not np.isfinite(predicted_final) else hero
        paths += plots.save(plots.collapse(finished, E, shown, predicted_final), out, "collapse")
    if hero is not None and len(hero.fraction):
        paths += plots.save(plots.residuals(pred, hero, predicted_as), out, "residuals")
    grad = curves(store, rung_ids + hero_ids, keys.GRAD_NORM, runs, started)
    drop = curves(store, rung_ids + hero_ids, keys.DROP_FRACTION, runs, started)
    if any(len(c.value) for c in grad):
        paths += plots.save(plots.diagnostics(grad, drop, hero_last=bool(hero_ids)), out, "diagnostics")
    dyn = project_dynamics(store, pred, group)
    if dyn.series or dyn.spikes is not None:
        paths += plots.save(plots.dynamics(dyn), out, "dynamics")
    return paths

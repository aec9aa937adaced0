"""How a prediction did against the run's actual evals: error (predicted / actual − 1) and band coverage."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ladder.errors import LadderError
from ladder.predict.prediction import Prediction, percent
from ladder.predict.stale import stale_warning

if TYPE_CHECKING:
    from ladder.data.store import Store


@dataclass(frozen=True)
class Score:
    last_step: int
    """The last eval scored (the run's final eval once it has finished)."""
    last_fraction: float
    """Of the plan the run started with."""
    last_predicted: float
    last_actual: float
    last_error: float
    """Predicted / actual − 1 at `last_step`."""
    curve_mean_error: float
    """Mean |predicted / actual − 1| over the evals scored."""
    curve_worst_error: float
    inside_50: float
    inside_90: float
    """Share of the evals scored inside the 90% band."""
    n: int
    """Evals scored: from `start` of the plan on, where the prediction has a value."""
    not_finite: int = 0
    """Of those, evals that are NaN or infinite: left out of the errors, counted outside both bands."""
    last_not_finite: int | None = None
    """The step of the last of those."""
    last_where: str = ""
    """`last_step` as a share of the plan, and of the edited plan where the plan was edited by then ("80% of the plan,
    100% of the edited plan"); "" where not given (`last_fraction` then)."""
    read_from: int = 0
    """For a metric logged far more often than the prediction's steps (a per-step train loss): the logged values
    whose means, one per step of the prediction, are scored (as the watch judges them); 0: evals as logged."""

    def to_json(self) -> dict:
        return asdict(self)

    def rows(self) -> list[tuple[str, str]]:
        scored = (("evals scored", f"{self.n}") if not self.read_from else
                  ("points scored", f"{self.n}: means of {self.read_from:,} logged values, one a step of the "
                                    "prediction, as the watch judges them"))
        return [
            scored,
            (f"last {'finite ' if self._after_last() else ''}eval (step {self.last_step:,}, "
             f"{self.last_where or percent(self.last_fraction)})",
             f"predicted {self.last_predicted:.4f}, actual {self.last_actual:.4f}: {self.last_error:+.2%}"),
            ("mean |error| along the curve", f"{self.curve_mean_error:.2%}"),
            ("worst |error|", f"{self.curve_worst_error:.2%}"),
            ("inside the 50% band", f"{self.inside_50:.0%}"),
            ("inside the 90% band", f"{self.inside_90:.0%}"),
        ] + ([("evals not finite (NaN or inf)", f"{self.not_finite}: outside both bands, out of the errors"
                + (f"; the latest, at step {self.last_not_finite:,}, is one" if self._after_last() else ""))]
             if self.not_finite else [])

    def _after_last(self) -> bool:
        """Whether the run's latest eval scored is NaN or inf (after the last finite one)."""
        return self.last_not_finite is not None and self.last_not_finite > self.last_step


def failed_steps(logged: pd.Series) -> np.ndarray:
    """The steps of `logged` (a run's values by step) whose value is NaN or inf."""
    return logged.index.to_numpy()[~np.isfinite(logged.to_numpy(float))]


MARK_SLACK = 5e-4
"""An eval within this share of the plan below `--from` is scored from it: an eval every T // 20 steps is at 9.96% of
a plan of 763 steps, not 10%, where the report's table shows it as the 10% mark (one at 9.9% is not)."""


def score_prediction(pred: Prediction, actual: pd.Series, start: float = 0.1, run: str | None = None) -> Score:
    """`actual`: the values of `run` (default: the prediction's target) indexed by step, in any order (chunks of a
    run joined as they came). Evals before `start` of the plan are left out."""
    run = run or pred.run_name
    actual = actual.sort_index(kind="stable")  # the last eval is the one of the largest step, not the last row
    finite = np.isfinite(actual.to_numpy(float))
    odd = actual.index.to_numpy()[~finite]
    odd = odd[(odd / max(pred.started_with, 1.0) >= start - MARK_SLACK) & np.isfinite(pred.at(odd)["median"].to_numpy())] \
        if odd.size else odd
    actual = actual[finite]
    if actual.empty:
        raise LadderError(f"{run}: no values of {pred.metric} to score the prediction against")
    steps, at, y, counts = judged_points(actual, pred)
    if not len(steps):  # a metric logged densely, all of it before the prediction's first step
        raise LadderError(f"{run}: none of its {len(actual)} values of {pred.metric} falls in the prediction's steps "
                          f"(from {int(pred.table['step'].min()):,}): nothing to score yet")
    median = at["median"].to_numpy(float)
    use = (steps / max(pred.started_with, 1.0) >= start - MARK_SLACK) & np.isfinite(median)
    if not use.any():
        plan = max(pred.started_with, 1.0)
        last, valued = float(steps.max()) / plan, steps[np.isfinite(median)] / plan
        has = pred.table.loc[np.isfinite(pred.table["median"].to_numpy(float)), "step"]
        span = f"steps {int(has.min()):,}–{int(has.max()):,}" if len(has) else "no step"
        why = f"{span}: it has none before the rungs' first shared eval, nor past their last"
        if last < start - MARK_SLACK:
            ends = (f"{run}: its {len(y)} evals end at {percent(last)} of the prediction's plan "
                    f"({pred.started_with:,.0f} steps)")
            if valued.size:  # an earlier --from that scores the first eval the prediction has a value at
                raise LadderError(f"{ends}, before --from {start:g}; score from an earlier fraction "
                                  f"(--from {math.floor(valued.min() * 100) / 100:.2f})")
            raise LadderError(f"{ends}, before --from {start:g} and before the prediction has a value ({why}); is it "
                              "the run that was predicted?")
        raise LadderError(f"{run}: none of its {len(y)} evals from {percent(start)} of the plan on falls where "
                          f"the prediction has a value ({why})")
    err = median[use] / y[use] - 1
    band = {k: at[k].to_numpy()[use] for k in ("lo50", "hi50", "lo90", "hi90")}
    last = int(np.flatnonzero(use)[-1])
    return Score(
        last_step=int(steps[last]), last_fraction=float(steps[last] / max(pred.started_with, 1.0)),
        last_where=pred.fraction_label(int(steps[last])),
        last_predicted=float(median[last]), last_actual=float(y[last]), last_error=float(median[last] / y[last] - 1),
        curve_mean_error=float(np.mean(np.abs(err))), curve_worst_error=float(np.max(np.abs(err))),
        inside_50=float(np.sum((band["lo50"] <= y[use]) & (y[use] <= band["hi50"])) / (use.sum() + odd.size)),
        inside_90=float(np.sum((band["lo90"] <= y[use]) & (y[use] <= band["hi90"])) / (use.sum() + odd.size)),
        n=int(use.sum()) + int(odd.size), not_finite=int(odd.size),
        last_not_finite=int(odd.max()) if odd.size else None, read_from=int(counts[use].sum()) if counts is not None else 0,
    )


def judged_points(actual: pd.Series, pred: Prediction) -> tuple[np.ndarray, pd.DataFrame, np.ndarray, np.ndarray | None]:
    """The points a run's finite values are scored at, the prediction there, their values, and how many logged
    values each is the mean of (None: as logged). A metric logged far more often than the prediction's steps (a per-step
    train loss) is scored as the watch judges it (`ladder.watch.judged.compared`): the mean of its values since
    the prediction's step before, against the prediction's mean over the same steps."""
    from ladder.watch.judged import BAND_COLUMNS, compared

    if not logged_per_step(pred, actual):
        steps = actual.index.to_numpy()
        return steps, pred.at(steps), actual.to_numpy(float), None
    points = compared(actual, pred.table["step"].to_numpy(np.int64), pred)
    return (points.index.to_numpy(), points[BAND_COLUMNS].reset_index(drop=True), points["value"].to_numpy(float),
            points["n"].to_numpy(np.int64))


def logged_per_step(pred: Prediction, actual: pd.Series) -> bool:
    """Whether `actual` is logged far more often than the prediction's steps (a per-step train loss), so that it is
    read as means between them (`judged_points`)."""
    from ladder.data.dense import is_dense

    return is_dense(actual.dropna().index.to_numpy(np.int64), pred.table["step"].to_numpy(np.int64))


def score_warnings(store: Store, row: pd.Series, name: str, pred: Prediction, steps: np.ndarray,
                   start: float = 0.1) -> list[str]:
    """What to say with the score of run `name` (its runs-table `row`, its evals at `steps`) against `pred` from
    `start` of the plan on: that its rungs changed in the store since it was made (`stale_warning`), that it is one of the prediction's rungs, plans other steps or is of another group than
    the rungs (is it the run that was predicted?), how many of its evals from `start` on lie before where the
    prediction starts or past where it ends (not scored), and that a run of the prediction's plan that ended
    (finished or crashed) before the prediction's last step is scored only as far as it got."""
    other_plan = _other_plan(row, name, pred)
    warnings = _without_edit(store, row, name, pred, np.asarray(steps)) + other_plan + _other_group(store, row, name,
                                                                                                     pred)
    if name != pred.run_name and (name in pred.rungs or str(row["name"]) in pred.rungs):
        warnings.insert(0, f"{name!r} is one of the rungs the prediction was made from, not its target "
                           f"{pred.run_name!r}: its evals are held to the target's prediction")
    stale = stale_warning(store, pred)
    if stale:  # first: every number scored is of a prediction fitted on other data
        warnings.insert(0, stale)
    valued = pred.table.loc[np.isfinite(pred.table["median"].to_numpy(float)), "step"]
    steps = np.asarray(steps)
    early = int(((steps / max(pred.started_with, 1.0) >= start - MARK_SLACK) & (steps < valued.min())).sum()) \
        if len(valued) else 0
    if early:
        warnings.append(f"{early} eval{'' if early == 1 else 's'} of {name!r} before step {int(valued.min()):,}, where "
                        f"the prediction starts, {'is' if early == 1 else 'are'} not scored (the laws predict no step "
                        "before the rungs' first shared eval)")
    end = int(pred.table["step"].iloc[-1])
    last = end if pred.last_predicted is None else int(pred.last_predicted["step"])
    past = int((np.asarray(steps) > last).sum())
    if past:
        why = ("a prediction of a shorter plan?" if last == end else
               "the rungs' evals end there, and the laws predict no step past them")
        warnings.append(f"{past} eval{'' if past == 1 else 's'} of {name!r} after step {last:,}, where the prediction "
                        f"ends, {'is' if past == 1 else 'are'} not scored ({why})")
    from fits.runs import reached_end  # here: the command line loads this module, and fits loads scipy

    state = str(row.get("state") or "")
    if state in ("finished", "crashed") and steps.size and not past and not other_plan and not reached_end(
            np.sort(steps.astype(float)) / last, finished=True):
        ends = int(steps.max())
        warnings.append(f"{name!r} is {state} and its evals end at step {ends:,} ({percent(ends / last)} of the "
                        f"prediction's last step, {last:,}): its score stops there and says nothing of its final")
    return warnings


def _without_edit(store: Store, row: pd.Series, name: str, pred: Prediction, steps: np.ndarray) -> list[str]:
    """A warning when the scored run passed a schedule edit of the prediction's (a cut, an early cooldown) that its
    config lacks, as the watch finds it (`edits.missed_edit`): its evals past there are held to a curve it did not
    follow. Nothing where the run's config gives no schedule (its edits cannot be read)."""
    from ladder.predict.edits import as_edits, missed_edit, schedule_of

    sched = schedule_of(store.config(str(row["run_id"])))
    if not sched or not steps.size:
        return []
    at = missed_edit(as_edits(sched.get("edits")), as_edits(pred.schedule.get("edits")), int(steps.max()))
    if at is None:
        return []
    return [f"{name!r} passed step {at:,} without the schedule edit the prediction holds there (its config has no "
            f"edit at that step): it is not the run that was predicted, and its evals past step {at:,} are held to a "
            f"curve it did not follow; predict it from its own schedule (`ladder predict --target-run {name}`)"]


def _other_plan(row: pd.Series, name: str, pred: Prediction) -> list[str]:
    """A warning when the scored run plans another number of steps than the prediction's target (another size
    or length: its evals are held to the prediction at the same step all the same)."""
    planned = row.get("stop_after_steps")
    if not pred.planned_steps or pd.isna(planned) or plans_alike(planned, pred):
        return []
    return [f"{name!r} plans {int(planned):,} steps and the prediction's target {pred.run_name!r} "
            f"{pred.planned_steps:,}: is it the run that was predicted? (its evals are scored at their own steps)"]


def plans_alike(steps: float, pred: Prediction) -> bool:
    """Whether a run that plans `steps` plans as the prediction's target does (within 1%): its steps as edited, or
    those it planned before any of its schedule edits, or with an edit a `ladder replan` replaced, since a run that
    has not yet reached the replan's edit still plans those (as the watch's `edits.plan_holds` takes it)."""
    return any(abs(steps / h - 1) <= 0.01 for h in _horizons(pred))


def _horizons(pred: Prediction) -> list[float]:
    """The steps the prediction's target plans, and those it planned before each of its schedule edits, or with
    each edit a replan replaced."""
    out = [float(pred.planned_steps), pred.started_with, float(pred.schedule.get("total_steps") or 0)]
    out += [float(e.horizon) for e in pred.schedule_edits(replaced=True)]
    return [h for h in out if h > 0]


def _other_group(store: Store, row: pd.Series, name: str, pred: Prediction) -> list[str]:
    """A warning when the scored run is of another group than the rungs the prediction was made from."""
    runs = store.runs()
    groups = set(runs.loc[runs["name"].isin(pred.rungs), "group"].astype(str))
    group = str(row.get("group") or "")
    if not groups or group in groups:
        return []
    return [f"{name!r} is of group {group!r} and the prediction's rungs of {', '.join(map(repr, sorted(groups)))}: is it "
            "the run that was predicted?"]

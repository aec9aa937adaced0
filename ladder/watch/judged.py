"""The points at which a run's eval metric is judged, and the prediction beside each.

A metric logged at the prediction's steps, or a few times as often, is judged at every step it is logged.
One logged far more often (a per-step train loss, or evals every few steps against a prediction made at
the planned evals: most intervals between the prediction's steps hold `dense.READ_PER` or more, as the
laws read a rung's metric) is judged once per step of the prediction: the mean of the values logged
since the prediction's step before, against the prediction's mean over the same steps. Per-step noise
then neither passes for a deviation nor floods the terminal with a verdict a step. Evals twice as
dense as the prediction's steps are judged each on its own: were they averaged, the judged points would
move as the run went on past a prediction made at its own evals so far (every eval to there, 1% of its
plan after), and evals judged before would be judged again at other steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ladder.data.dense import interval, interval_end, is_dense

if TYPE_CHECKING:
    from ladder.predict.prediction import Prediction

BAND_COLUMNS = ["median", "lo50", "hi50", "lo90", "hi90"]


def point_of(steps: np.ndarray, grid: np.ndarray | None) -> np.ndarray:
    """The judged point each logged step belongs to, by the point's step.

    Sparse: every step is its own point. Dense: the last step of its interval of `grid` (the first step
    of the grid at or after it; beyond the grid's ends, intervals of its first and last spacings)."""
    return _points(np.asarray(steps, np.int64), grid)[1]


def _points(steps: np.ndarray, grid: np.ndarray | None) -> tuple[bool, np.ndarray]:
    """Whether `steps` are dense against `grid`, and each one's point (`point_of`)."""
    if not is_dense(steps, grid):
        return False, steps
    g = np.asarray(grid, np.int64)
    return True, interval_end(interval(steps, g), g)


def _judged(steps: np.ndarray, dense: bool, points: np.ndarray) -> np.ndarray:
    """The points judged so far: every logged step, or a dense metric's points it has been logged at or past."""
    done = np.unique(points)
    return done[(done > 0) & (done <= steps.max())] if dense else done


def judged_steps(y: pd.Series, grid: np.ndarray | None) -> np.ndarray:
    """The steps of the points judged so far: a dense metric's point once it has been logged at or past it."""
    if y.empty:
        return np.array([], np.int64)
    steps = y.index.to_numpy(np.int64)
    return _judged(steps, *_points(steps, grid))


def compared(y: pd.Series, grid: np.ndarray | None, pred: Prediction) -> pd.DataFrame:
    """The judged points of `y` (index: step) with their value, how many logged values make it (`n`), the
    first of their steps (`first_step`), how many of those the prediction's steps span (`covered`), and
    the prediction's median, bands and `in_assumptions` there.

    A point's value is NaN when any value in it is not finite (the non-finite rule names it). Its bands are
    the prediction's means over the same steps, NaN unless the prediction spans them all: a point the
    prediction reaches only in part cannot be judged (one noisy value is not a mean)."""
    cols = ["value", "n", "first_step", "covered", *BAND_COLUMNS, "in_assumptions"]
    if y.empty:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="step"))
    steps = y.index.to_numpy(np.int64)
    at = pred.at(steps)
    table = pred.table["step"].to_numpy(np.int64)
    covered = (steps >= table.min()) & (steps <= table.max())
    dense, points = _points(steps, grid)
    if not dense:
        frame = at.drop(columns="step").assign(value=y.to_numpy(float), n=1, first_step=steps,
                                               covered=covered.astype(int))
        return frame.set_index(pd.Index(steps, name="step"))[cols]
    frame = at.drop(columns="step").assign(value=y.to_numpy(float), point=points, step=steps, covered=covered)
    rows = {}
    for point, group in frame[frame["point"].isin(_judged(steps, dense, points))].groupby("point", sort=True):
        values = group["value"].to_numpy(float)
        whole = bool(group["covered"].all())
        row = {c: float(group[c].to_numpy(float).mean()) if whole else float("nan") for c in BAND_COLUMNS}
        row |= {"value": float(values.mean()) if np.isfinite(values).all() else float("nan"), "n": len(group),
                "first_step": int(group["step"].min()), "covered": int(group["covered"].sum()),
                "in_assumptions": bool(group["in_assumptions"].all())}
        rows[int(point)] = row
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols).rename_axis("step")


def averaged(n: int, first: int, step: int) -> str:
    """How a judged point's value was made, when it is a mean of several logged values."""
    return "" if n <= 1 else f" (mean of {n} values logged at steps {first:,}–{step:,})"

"""A metric logged far more often than a run's evals (a per-step train loss), read at the evals.

Steps are grouped by the intervals of a grid (a run's planned evals, or a prediction's steps):
(grid[i-1], grid[i]], with intervals of the grid's first and last spacings running on beyond its
ends. A metric is dense against the grid when most of the intervals it was logged in hold `per` or
more of its steps. The laws read a dense metric at the grid's steps, each value a local linear fit
(in log step) over the logged values between the two neighbouring grid steps: per-step noise is
averaged out, and a curve that falls across the window is not pulled to its middle, as a plain mean
would be. Pure numpy: the watcher uses it too.
"""

from __future__ import annotations

import numpy as np

READ_PER = 5
"""A rung's metric is read at its evals when logged at least this often per interval between them: a
per-step train loss, not an eval curve logged at a few steps more than planned."""
MIN_POINTS = 3
"""Logged values a local fit needs around a grid step."""


def interval(steps: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Which interval of the grid each step falls in: i for (grid[i-1], grid[i]], and beyond the grid's
    ends intervals of its first and last spacings, numbered on (0 and below before its first step)."""
    steps = np.asarray(steps, np.int64)
    i = np.searchsorted(grid, steps, side="left")
    before, past = steps <= grid[0], steps > grid[-1]
    i[before] = -((grid[0] - steps[before]) // (grid[1] - grid[0]))
    i[past] = len(grid) + (steps[past] - grid[-1] - 1) // (grid[-1] - grid[-2])
    return i


def interval_end(i: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The last step of each interval `i` (`interval`)."""
    inside = np.clip(i, 0, len(grid) - 1)
    return np.where(i <= 0, grid[0] + i * (grid[1] - grid[0]),
                    np.where(i >= len(grid), grid[-1] + (i - len(grid) + 1) * (grid[-1] - grid[-2]), grid[inside]))


def is_dense(steps: np.ndarray, grid: np.ndarray | None, per: int = READ_PER) -> bool:
    """Whether most of the grid's intervals that `steps` fall in hold `per` or more of them (step 0, an
    eval before training, left out). An eval logged at the grid's steps, now and then one between, is not."""
    if grid is None or len(grid) < 2:
        return False
    steps = np.asarray(steps, np.int64)
    steps = steps[steps > 0]
    if len(steps) < 2:
        return False
    _, counts = np.unique(interval(steps, np.asarray(grid, np.int64)), return_counts=True)
    return float(np.median(counts)) >= per


def read_at(steps: np.ndarray, values: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The curve at each step of `grid` the run has reached, by a local linear fit in log step over its
    values logged strictly between the grid's neighbouring steps (the step itself included), weighted by a
    triangle that peaks there; grid steps with fewer than `MIN_POINTS` values around them are left out.
    Returns the steps, the values and each value's standard error (from the fit's residuals)."""
    steps = np.asarray(steps, np.int64)
    values = np.asarray(values, float)
    g = np.asarray(grid, np.int64)
    g = g[(g > 0) & (g <= steps.max())]
    if len(g) < 2:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    x = np.log(np.maximum(steps, 1))
    lo = np.concatenate([[max(2 * g[0] - g[1], 0)], g[:-1]])
    hi = np.concatenate([g[1:], [g[-1] + 1 if g[-1] == steps.max() else 2 * g[-1] - g[-2]]])
    kept, out, errors = [], [], []
    for s, a, b in zip(g, lo, hi):
        m = (steps > a) & (steps < b)
        if m.sum() < MIN_POINTS:
            continue
        xs, ys, x0 = x[m], values[m], np.log(s)
        half = np.where(xs <= x0, x0 - np.log(max(a, 1)), np.log(b) - x0)
        w = np.clip(1.0 - np.abs(xs - x0) / np.maximum(half, 1e-12), 0.0, None) + 1e-9
        X = np.column_stack([np.ones_like(xs), xs - x0])
        coef = np.linalg.lstsq(X * np.sqrt(w)[:, None], ys * np.sqrt(w), rcond=None)[0]
        resid = ys - X @ coef
        sigma2 = float(np.sum(w * resid**2) / np.sum(w) * len(xs) / (len(xs) - 2)) if len(xs) > 2 else 0.0
        inv = np.linalg.pinv(X.T @ (w[:, None] * X))  # the intercept's variance under weights w, equal noise
        kept.append(int(s))
        out.append(float(coef[0]))
        errors.append(float(np.sqrt(max(sigma2 * (inv @ (X.T @ (w[:, None] ** 2 * X)) @ inv)[0, 0], 0.0))))
    return np.array(kept, np.int64), np.array(out), np.array(errors)

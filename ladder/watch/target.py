"""Whether the run a watch follows is the run its prediction was made for.

A prediction records its target's coordinates (active parameters; FLOPs per token and tokens per step in its
table) and its schedule before any edit (peak LR, planned steps, warmup, decay). A run whose own differ is another run: judging it against
that prediction, or predicting again from its schedule as if it were an edit, would answer a question nobody
asked. A schedule edit (a cut horizon, an early cooldown) keeps all of these and changes only the edits.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ladder.config.limits import positive_or_none
from ladder.predict.prediction import Prediction

SCHEDULE_KEYS = ("peak_lr", "total_steps", "warmup_steps", "decay", "min_lr_ratio", "cooldown_steps", "cooldown_shape")
"""What sets a run's LR sequence before any edit: a run whose config differs here is another run than predicted."""
SIZE_AGREE = 0.10
"""Parameters and FLOPs per token of the same run may differ this much (relative): a target file gives "7e9" for a
model of 6.74B, or counts FLOPs another way; the sizes of a ladder's runs differ by far more."""
PLAN_AGREE = 0.01
"""Tokens per step, steps and schedule numbers of the same run agree to this (relative)."""


def other_run(pred: Prediction, run: pd.Series, schedule: dict) -> str:
    """How the stored `run` (a row of `Store.runs`, with `schedule` from its config) differs from the target
    `pred` was made for, e.g. ``active_params 236,544 (predicted with 3,169,537,280)``; "" where it does not (or where
    neither says). Schedule edits are not compared: they are the run's to make."""
    table = pred.table[pd.to_numeric(pred.table["step"], errors="coerce") > 0]
    plan = pred.schedule
    out = [_differ("active_params", run.get("active_params"), pred.target_params, SIZE_AGREE),
           _differ("fit_flops_per_token", *_fit_flops(pred, table, run), SIZE_AGREE),
           _differ("tokens_per_step", run.get("tokens_per_step"), _ratio(table, "tokens", "step"), PLAN_AGREE)]
    out += [_differ(key, schedule[key], plan[key], PLAN_AGREE) for key in SCHEDULE_KEYS if key in schedule and key in plan]
    return ", ".join(x for x in out if x)


def _differ(key: str, a, b, tol: float) -> str:
    """``key a (predicted with b)`` where both are given and differ beyond `tol` (numbers) or at all; else ""."""
    a, b = (x.item() if isinstance(x, np.generic) else x for x in (a, b))  # a stored row's numbers are numpy's
    if any(x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)) for x in (a, b)):
        return ""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if (math.isclose(a, b, rel_tol=tol, abs_tol=1e-12)) if numbers else a == b:
        return ""
    return f"{key} {_value(a)} (predicted with {_value(b)})"


def _ratio(table: pd.DataFrame, top: str, bottom: str) -> float | None:
    """`top` ÷ `bottom` in the table's first row where both are positive numbers (constant along a prediction)."""
    for a, b in zip(table[top], table[bottom]):
        a, b = positive_or_none(a), positive_or_none(b)
        if a is not None and b is not None:
            return a / b
    return None


def _fit_flops(pred: Prediction, table: pd.DataFrame, run: pd.Series) -> tuple[float | None, float | None]:
    """The run's fit FLOPs per token and the prediction's target's, where the parameters cannot be compared and
    both are fit FLOPs of a prediction `ladder predict` made (it records its settings); else (None, None): 6·N and a
    fit count of one model differ by more than `SIZE_AGREE`, and a table written by hand may hold any compute."""
    n = positive_or_none(run.get("active_params"))
    theirs = _ratio(table, "compute", "tokens")
    if not pred.settings or theirs is None or (pred.target_params is not None and n is not None):
        return None, None
    if pred.target_params is not None and math.isclose(theirs, 6.0 * pred.target_params, rel_tol=1e-6):
        return None, None  # the target's 6·N
    return positive_or_none(run.get("fit_flops_per_token")), theirs


def _value(x) -> str:
    """A value as a message shows it: counts whole, rates to 3 digits."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        x = int(x)
    return f"{x:,}" if isinstance(x, int) and not isinstance(x, bool) else f"{x:.3g}" if isinstance(x, float) else str(x)


def schedule_of(config: dict) -> dict:
    """The schedule from a run's config, wherever the source put it."""
    for candidate in (config.get("run_config"), config):
        if isinstance(candidate, dict) and isinstance(candidate.get("schedule"), dict):
            return candidate["schedule"]
        if isinstance(candidate, str):
            try:
                parsed = json.loads(candidate)
            except ValueError:
                continue
            if isinstance(parsed, dict) and isinstance(parsed.get("schedule"), dict):
                return parsed["schedule"]
    return {}

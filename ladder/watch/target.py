"""Whether the run a watch follows is the run its prediction was made for.

A prediction records its target's coordinates (active parameters; FLOPs per token and tokens per step in its
table) and its schedule before any edit (peak LR, planned steps, warmup, decay). A run whose own differ is another
run: judging it against that prediction, or predicting again from its schedule as if it were an edit, would answer a
question nobody asked. Sizes count as another run's only when far apart, as rungs are: the same run's parameters are
counted with or without embeddings, total or active, by its trainer and by a target file. A schedule edit (a cut
horizon, an early cooldown) keeps all of these and changes only the edits.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ladder.config.limits import positive_or_none
from ladder.predict.prediction import Prediction

SCHEDULE_KEYS = ("peak_lr", "total_steps", "warmup_steps", "decay", "min_lr_ratio", "cooldown_steps", "cooldown_shape")
"""What sets a run's LR sequence before any edit: a run whose config differs here is another run than predicted."""
SIZE_AGREE = 0.10
"""Parameters and FLOPs per token of the same run agree to this (relative) when counted alike: a target file gives
"7e9" for a model of 6.74B."""
SIZE_APART = 1.5
"""Sizes this many times apart are of two runs (the rungs of a ladder are 2–3× apart). Between `SIZE_AGREE` and this,
they may be one run counted another way (with embeddings, or total rather than active parameters): said, not refused."""
PLAN_AGREE = 0.01
"""Tokens per step, steps and schedule numbers of the same run agree to this (relative)."""


def other_run(pred: Prediction, run: pd.Series, schedule: dict) -> str:
    """How the stored `run` (a row of `Store.runs`, with `schedule` from its config) differs from the target
    `pred` was made for, e.g. ``active_params 236,544 (predicted with 3,169,537,280)``; "" where it does not (or where
    neither says). Sizes differ only beyond `SIZE_APART` (`counted_apart` says less); schedule edits are not
    compared: they are the run's to make."""
    table = _table(pred)
    apart = 1 - 1 / SIZE_APART  # as a relative tolerance: |a − b| ≤ it × the larger ⇔ larger ≤ SIZE_APART × smaller
    out = [_differ(key, ours, theirs, apart) for key, ours, theirs in _sizes(pred, table, run)]
    out.append(_differ("tokens_per_step", run.get("tokens_per_step"), _ratio(table, "tokens", "step"), PLAN_AGREE))
    plan = pred.schedule
    out += [_differ(key, schedule[key], plan[key], PLAN_AGREE) for key in SCHEDULE_KEYS if key in schedule and key in plan]
    return ", ".join(x for x in out if x)


def counted_apart(pred: Prediction, run: pd.Series) -> str:
    """The sizes of the stored `run` that differ from those of `pred`'s target by more than `SIZE_AGREE` (by less than
    `SIZE_APART` where `other_run` finds nothing: the same run, counted another way?), each with where its numbers
    come from; "" where none does."""
    out = [f"{key} {_value(_plain(ours))} by the run's stored coordinates, {_value(_plain(theirs))} by the "
           "prediction's target" for key, ours, theirs in _sizes(pred, _table(pred), run)
           if _differ(key, ours, theirs, SIZE_AGREE)]
    return "; ".join(out)


def _table(pred: Prediction) -> pd.DataFrame:
    """The prediction's rows past step 0 (where its tokens and compute per step can be read)."""
    return pred.table[pd.to_numeric(pred.table["step"], errors="coerce") > 0]


def _sizes(pred: Prediction, table: pd.DataFrame, run: pd.Series) -> list[tuple[str, object, object]]:
    """(key, the run's, the prediction's target's) for each size both can be compared by."""
    return [("active_params", run.get("active_params"), pred.target_params),
            ("fit_flops_per_token", *_fit_flops(pred, table, run))]


def _differ(key: str, a, b, tol: float) -> str:
    """``key a (predicted with b)`` where both are given and differ beyond `tol` (numbers, or text that reads as
    one: YAML reads ``3e-4`` as text) or at all; else ""."""
    a, b = _plain(a), _plain(b)
    if any(x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)) for x in (a, b)):
        return ""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if (math.isclose(a, b, rel_tol=tol, abs_tol=1e-12)) if numbers else a == b:
        return ""
    return f"{key} {_value(a)} (predicted with {_value(b)})"


def _plain(x):
    """`x` as Python's number where it is numpy's (a stored row's) or text of one ("3e-4"); else as it is."""
    if isinstance(x, np.generic):
        return x.item()
    if not isinstance(x, str):
        return x
    try:
        return float(x)
    except ValueError:
        return x


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
    fit count of one model may differ by more than `SIZE_APART`, and a table written by hand may hold any compute."""
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

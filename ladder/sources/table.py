"""The one table format every metric source produces, and what a source says about a run.

Rows are long: one logged value per row, in the order the run logged them:

- ``seq`` (int64): log order within one read (rows from later in the log have higher numbers);
- ``step`` (int64): optimizer steps completed when the value was logged;
- ``metric`` (str): the key as logged (nested dicts joined with ``.``, as wandb shows them);
- ``value`` (float64): NaN and ±inf kept as logged;
- ``tokens`` (float64): tokens seen at that step when the source logs them, else NaN.

A source never decides which of two values at a step is right, or what a rewind means: it passes
rows on in log order and `ladder.resolve` settles them, once, for every source.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

RAW_COLUMNS = ("seq", "step", "metric", "value", "tokens")
STATES = ("finished", "crashed", "running")


@dataclass(frozen=True)
class RunRef:
    """A run a source can read, as listed before reading its history."""

    run_id: str
    source: str
    """Where it comes from, e.g. ``wandb:entity/project``, ``offline:/abs/dir``, ``local:/abs/dir``."""
    label: str = ""
    """How messages name it (its name, or a path)."""
    name: str | None = None
    """Its name when the listing knows it."""
    config: dict[str, Any] | None = None
    """Its config when the listing already holds it (wandb cloud), else None until read."""
    handle: Any = None
    """Whatever the source needs to read it (files, an API object)."""


@dataclass(frozen=True)
class SourceRun:
    """What one read of one run returned: rows new since the cursor, and where to continue."""

    run_id: str
    source: str
    rows: pd.DataFrame
    """New rows in the format above."""
    cursor: dict[str, Any]
    """JSON-able; hand it back to the next read of this run to get only what is new."""
    state: str
    """finished, crashed or running."""
    config: dict[str, Any] = field(default_factory=dict)
    """Top-level config keys read since the cursor (all of them on a first read)."""
    name: str | None = None
    group: str | None = None
    warnings: tuple[str, ...] = ()
    replace: bool = False
    """The earlier rows of this run are no longer valid (the file was rewritten): start over."""


class RowBuilder:
    """Collects rows one value at a time (the fast path of the file readers) into a raw table."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.metrics: list[str] = []
        self.values: list[float] = []
        self.tokens: list[float] = []

    def add(self, step: int, metric: str, value: float, tokens: float = math.nan) -> None:
        self.steps.append(step)
        self.metrics.append(metric)
        self.values.append(value)
        self.tokens.append(tokens)

    def __len__(self) -> int:
        return len(self.steps)

    def frame(self) -> pd.DataFrame:
        return raw_frame(self.steps, self.metrics, self.values, self.tokens)


def raw_frame(
    steps: Iterable[int],
    metrics: Iterable[str],
    values: Iterable[float],
    tokens: Iterable[float] | None = None,
) -> pd.DataFrame:
    """A raw table from columns in log order."""
    step = np.asarray(steps if isinstance(steps, np.ndarray) else list(steps), dtype=np.int64)
    value = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.float64)
    if tokens is None:
        tok = np.full(len(step), np.nan)
    else:
        tok = np.asarray(tokens if isinstance(tokens, np.ndarray) else list(tokens), dtype=np.float64)
    return pd.DataFrame(
        {
            "seq": np.arange(len(step), dtype=np.int64),
            "step": step,
            "metric": pd.Categorical(metrics if isinstance(metrics, list) else list(metrics)),
            "value": value,
            "tokens": tok,
        }
    )


def empty_rows() -> pd.DataFrame:
    return raw_frame([], [], [])


def concat_rows(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Raw tables read one after the other, renumbered so ``seq`` keeps their order."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_rows()
    if len(frames) == 1:
        return frames[0]
    out = pd.concat([f.assign(metric=f["metric"].astype(str)) for f in frames], ignore_index=True)
    out["seq"] = np.arange(len(out), dtype=np.int64)
    out["metric"] = pd.Categorical(out["metric"])
    return out


def as_number(value: Any) -> float | None:
    """A logged value as a float, or None when it is not a number (text, a table, an image)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, np.generic) and np.issubdtype(type(value), np.number):
        return float(value)
    return None


def json_number(text: str) -> float | None:
    """A JSON value (as wandb stores it) as a float, or None when it is not a number."""
    try:
        return float(text)  # fast path: plain numbers, and wandb's NaN / Infinity / -Infinity
    except ValueError:
        pass
    try:
        return as_number(json.loads(text))
    except (ValueError, RecursionError):
        return None


def map_state(text: str) -> str:
    """A run state as wandb and the trainer spell it, mapped to finished / crashed / running."""
    state = (text or "").strip().lower()
    if state == "finished":
        return "finished"
    if state in ("running", "pending", "preempting"):
        return "running"
    return "crashed"  # crashed, failed, killed, preempted: the run stopped before its end

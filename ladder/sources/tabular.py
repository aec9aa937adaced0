"""CSV and parquet tables (published datasets, other tools' exports) as runs, by a column mapping.

A table holds one row per (run, step) with metric columns side by side, or one row per run when it
only gives final values (no step column: each row sits at the end of its run, fraction 1). Columns
that hold one value per run become that run's config, and coordinate columns are mapped explicitly
(``active_params=params_nonembed``). An empty cell is a value the run did not log. Parquet is read
with pyarrow (no pickled objects); a re-import replaces the runs it holds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder.errors import LadderError
from ladder.sources.coords import FIELDS, LABELS
from ladder.sources.table import RunRef, SourceRun, raw_frame


@dataclass(frozen=True)
class ColumnMap:
    """Which table columns mean what."""

    metrics: dict[str, str]
    """Stored metric key -> column, e.g. {"eval/loss": "loss_c4_en"}."""
    run: str | None = None
    """Column of run ids; None: the whole table is one run, named after the file."""
    step: str | None = None
    """Column of optimizer steps; None: each row is its run's final value."""
    tokens: str | None = None
    """Column of tokens seen at that step."""
    coords: dict[str, str] = field(default_factory=dict)
    """Coordinate field (active_params, stop_after_steps, ..., name, group, role) -> column."""

    def __post_init__(self) -> None:
        if not self.metrics:
            raise LadderError("map at least one metric column, e.g. --metric eval/loss=loss")
        for f in self.coords:
            if f not in FIELDS and f not in LABELS:
                raise LadderError(f"--coord-column {f}: unknown coordinate (known: {', '.join(FIELDS + LABELS)})")

    @staticmethod
    def parse_pairs(items: list[str], option: str) -> dict[str, str]:
        """``NAME=COLUMN`` (or just ``COLUMN``, stored under its own name) strings as a mapping."""
        out = {}
        for item in items:
            name, sep, column = item.partition("=")
            name, column = name.strip(), (column if sep else name).strip()
            if not name or not column:
                raise LadderError(f"{option} {item!r}: expected NAME=COLUMN")
            out[name] = column
        return out


class TableSource:
    """A CSV or parquet file read through a `ColumnMap`."""

    def __init__(self, path: str | os.PathLike, columns: ColumnMap):
        self.path = Path(path).expanduser().resolve()
        self.columns = columns
        self._table: pd.DataFrame | None = None

    @property
    def key(self) -> str:
        return f"csv:{self.path}"

    def runs(self) -> list[RunRef]:
        table = self._load()
        c = self.columns
        ids = table[c.run].astype(str) if c.run is not None else pd.Series(self.path.stem, index=table.index)
        per_run = _per_run_constants(table, ids, exclude={c.run, c.step, c.tokens, *c.metrics.values()})
        refs = []
        for run_id, rows in table.groupby(ids, sort=True):
            run_id = str(run_id)
            if c.step is None and len(rows) > 1:
                raise LadderError(
                    f"{self.path}: run {run_id!r} has {len(rows)} rows but no step column is mapped; "
                    "map it with --step COLUMN (or --run COLUMN if each row is its own run)"
                )
            config = dict(per_run.get(run_id, {}))
            for f, column in c.coords.items():
                value = rows[column].iloc[0]
                config[f] = None if pd.isna(value) else _plain(value)
            if c.step is None:
                config.setdefault("stop_after_steps", 1)
                if c.tokens is not None and "tokens_per_step" not in c.coords:
                    config.setdefault("tokens_per_step", _plain(rows[c.tokens].iloc[0]))
            elif c.tokens is not None and "tokens_per_step" not in config:
                per_step = _constant_ratio(rows[c.tokens], rows[c.step])
                if per_step is not None:
                    config["tokens_per_step"] = per_step
            refs.append(RunRef(run_id, self.key, label=f"{run_id} ({self.path.name})", name=str(config.get("name") or run_id), config=config, handle=rows))
        return refs

    def read(self, ref: RunRef, cursor: dict[str, Any] | None = None) -> SourceRun:
        rows: pd.DataFrame = ref.handle
        c = self.columns
        if c.step is None:
            step = np.full(len(rows), int(ref.config.get("stop_after_steps") or 1), dtype=np.int64)
        else:
            step = rows[c.step].to_numpy(np.float64)
            if np.isnan(step).any() or (step != np.round(step)).any():
                bad = rows[c.step][np.isnan(step) | (step != np.round(step))].iloc[0]
                raise LadderError(f"{self.path}: run {ref.run_id!r}: step {bad!r} in column '{c.step}' is not a whole number")
            step = step.astype(np.int64)
        tokens = rows[c.tokens].to_numpy(np.float64) if c.tokens else np.full(len(rows), np.nan)
        order = np.argsort(step, kind="stable")  # a table has no log order: read it in step order
        steps, metrics, values, toks = [], [], [], []
        for name, column in c.metrics.items():
            value = pd.to_numeric(rows[column], errors="coerce").to_numpy(np.float64)[order]
            present = ~pd.isna(rows[column]).to_numpy()[order]
            steps.append(step[order][present])
            values.append(value[present])
            toks.append(tokens[order][present])
            metrics += [name] * int(present.sum())
        frame = raw_frame(np.concatenate(steps), metrics, np.concatenate(values), np.concatenate(toks))
        frame = frame.sort_values("step", kind="stable")
        frame = raw_frame(frame["step"].to_numpy(), frame["metric"].astype(str).tolist(), frame["value"].to_numpy(), frame["tokens"].to_numpy())
        return SourceRun(
            run_id=ref.run_id,
            source=self.key,
            rows=frame,
            cursor={},
            state="finished",
            config=ref.config or {},
            name=ref.name,
            group=str(ref.config.get("group")) if ref.config.get("group") else None,
            replace=True,
        )

    def _load(self) -> pd.DataFrame:
        if self._table is not None:
            return self._table
        if not self.path.is_file():
            raise LadderError(f"{self.path}: no such file")
        try:
            if self.path.suffix.lower() in (".parquet", ".pq"):
                table = pd.read_parquet(self.path, engine="pyarrow")
            else:
                table = pd.read_csv(self.path)
        except (ValueError, OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise LadderError(f"{self.path}: cannot read it as a table ({first})") from None
        c = self.columns
        wanted = {"--run": c.run, "--step": c.step, "--tokens": c.tokens}
        wanted |= {f"--metric {k}": v for k, v in c.metrics.items()}
        wanted |= {f"--coord-column {k}": v for k, v in c.coords.items()}
        for option, column in wanted.items():
            if column is not None and column not in table.columns:
                shown = ", ".join(map(str, table.columns[:12])) + (", ..." if len(table.columns) > 12 else "")
                raise LadderError(f"{self.path}: no column '{column}' (mapped by {option}); its columns are: {shown}")
        self._table = table
        return table


def _per_run_constants(table: pd.DataFrame, ids: pd.Series, exclude: set[str | None]) -> dict[str, dict[str, Any]]:
    """Per run, the columns that hold one value in all its rows (empty cells aside): its config."""
    columns = [c for c in table.columns if c not in exclude]
    if not columns:
        return {}
    grouped = table[columns].groupby(ids, sort=False)
    constant = grouped.nunique(dropna=True) == 1
    first = grouped.first()
    return {
        str(run): {str(col): _plain(first.at[run, col]) for col in columns if constant.at[run, col]}
        for run in first.index
    }


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _constant_ratio(tokens: pd.Series, steps: pd.Series) -> int | None:
    """Tokens per step when every row agrees on it (fixed batch), else None."""
    t = pd.to_numeric(tokens, errors="coerce").to_numpy(np.float64)
    s = pd.to_numeric(steps, errors="coerce").to_numpy(np.float64)
    ok = (s > 0) & np.isfinite(t)
    if not ok.any():
        return None
    ratio = t[ok] / s[ok]
    first = round(float(ratio[0]))
    return first if first > 0 and np.allclose(ratio, first, rtol=1e-9, atol=0) else None

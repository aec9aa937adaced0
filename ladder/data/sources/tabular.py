"""CSV and parquet tables (published datasets, other tools' exports) as runs, by a column mapping.

A table holds one row per (run, step) with metric columns side by side, or one row per run when it
only gives final values (no step column: each row sits at the end of its run, fraction 1). Columns
that hold one value per run become that run's config, and coordinate columns are mapped explicitly
(``active_params=params_nonembed``). In a metric column, an empty cell (or ``NA``, ``null``, a parquet
null) is a value the run did not log, while ``nan``, ``inf`` and ``-inf`` are values it logged: kept
as logged, counted and left out of fits, as from every other source. Parquet is read with pyarrow
(no pickled objects); a re-import replaces the runs it holds.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from ladder.config.yamlio import load_yaml
from ladder.data import csvfile
from ladder.data.sources.coords import FIELDS, LABELS, ONE_ROW, config_key_hint, overridden, same_given
from ladder.data.sources.table import (
    PARQUET,
    STATES,
    TABLE,
    RunRef,
    SourceRun,
    check_run_id,
    raw_frame,
    table_state,
    whole_count,
)
from ladder.errors import LadderError, LadderWarning

_NOT_LOGGED = frozenset({"", "NA", "N/A", "n/a", "NULL", "null", "None", "#N/A", "#N/A N/A", "#NA", "<NA>"})
"""Metric cells that mark a value the run did not log: pandas' missing-value markers, less the
spellings of NaN (`_NAN_TEXT`), which are values the run logged."""
FLOAT_NOISE = 1e-6
"""The relative part a token count may stray from a whole number and be read as that number (a float's rounding)."""
DERIVED_STEP = "\x00step from tokens"
"""The column a run's steps read from its tokens go in (a name no table's column has)."""
_NAN_TEXT = frozenset({"nan", "1.#ind", "1.#qnan"})
"""NaN as writers print it (compared in lower case, without a sign)."""
_INF_TEXT = frozenset({"inf", "infinity", "1.#inf"})
"""Infinity as writers print it (compared in lower case, without a sign)."""


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
    """Coordinate field (active_params, stop_after_steps, ..., name, group, role, and `STATE`) -> column."""

    def __post_init__(self) -> None:
        if not self.metrics:
            raise LadderError("map at least one metric column, e.g. --metric eval/loss=loss")
        for f in self.coords:
            if f not in FIELDS and f not in LABELS and f != STATE:
                raise LadderError(f"--coord-column {f}: unknown coordinate (known: {', '.join(FIELDS + LABELS)}, "
                                  f"and {STATE} for a run's state)")

    @staticmethod
    def parse_pairs(items: list[str], option: str) -> dict[str, str]:
        """``NAME=COLUMN`` (or just ``COLUMN``, stored under its own name) strings as a mapping."""
        out = {}
        for item in items:
            name, sep, column = item.partition("=")
            name, column = name.strip(), (column if sep else name).strip()
            if not name or not column:
                raise LadderError(f"{option} {item!r}: expected NAME=COLUMN")
            if out.get(name, column) != column:  # the last one silently won: a slip imported the wrong column
                raise LadderError(f"{option} {name} given twice ({name}={out[name]} and {name}={column}): keep one")
            out[name] = column
        return out


STATE = "state"
"""The column of a run's state (running, finished, crashed) by default; --coord-column state=COLUMN names another."""

COORD_COLUMNS = {
    "active_params": ("params", *csvfile.ALIASES["params"]),
    "stop_after_steps": ("total_steps", "planned_steps", "max_steps", "train_steps", "num_steps"),
    "tokens_per_step": ("batch_size_tokens", "batch_tokens", "tokens_per_batch", "global_batch_tokens"),
    "planned_tokens": ("total_tokens", "train_tokens", "planned_tokens_total"),
    "fit_flops_per_token": ("flops_per_token",),
}
"""Column names (lower case) a table of runs from elsewhere gives a coordinate under, first one per field
suggested with its --coord-column."""


CONFIG_BESIDE = (".json", ".yaml", ".yml")
"""The names (the table's, with these suffixes) under which a config beside a table is read as its runs' config."""
OFF_STEP = 0.01
"""Tokens that put a row further than this (in steps) from a whole step count other units or another batch: said."""


class TableSource:
    """A CSV or parquet file read through a `ColumnMap`."""

    all_or_nothing = True
    """A run of it that cannot be stored refuses the whole file: a table is imported whole, or not at all."""

    def __init__(self, path: str | os.PathLike, columns: ColumnMap, given: Any = None):
        self.path = Path(path).expanduser().resolve()
        self.columns = columns
        self.given = given
        """The coordinates the user gives (`CoordinateOverrides`): a table of tokens without steps takes its runs'
        tokens per step from them."""
        self._table: pd.DataFrame | None = None
        self._values: dict[str, np.ndarray] = {}
        """Per metric column, its values by row of the table, as float64."""
        self._logged: dict[str, np.ndarray] = {}
        """Per metric column, which rows of the table hold a value the run logged (NaN and inf included)."""
        self._rounded = False
        """Steps read from tokens that were no whole steps were said (once a table)."""
        self._beside: tuple[Path | None, dict[str, Any]] | None = None
        self.beside_problem = ""
        """Why a file beside the table, named as its config would be, is not read as one ("" where none is)."""
        self._unended = 0
        """The line of a live run's row still being written, left unread (`_whole_rows`); 0: none."""

    @property
    def key(self) -> str:
        return f"{TABLE}{self.path}"

    @property
    def options(self) -> dict[str, Any]:
        """What changes the rows read (part of a pull's flags): the mapping, and the file as it is now (its size
        and time of change), so that an interrupted import of a file edited since is not taken over."""
        c = self.columns
        try:
            st = self.path.stat()
            version = [st.st_size, st.st_mtime_ns]
        except OSError:
            version = None
        try:  # the config beside it, edited, is read again too
            config = [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in _configs_beside(self.path)] or None
        except OSError:
            config = None
        return {"metrics": c.metrics, "run": c.run, "step": c.step, "tokens": c.tokens, "coords": c.coords,
                "file": version, **({"config": config} if config is not None else {})}

    def beside(self) -> tuple[Path | None, dict[str, Any]]:
        """The config a trainer wrote beside the table, named as it is with .json, .yaml or .yml (run.csv and
        run.json), and what it holds, the run's config where the table's columns give none; (None, {}) where there
        is none, or none that is a mapping (said: `beside_problem`; so is one beside a table of several runs, which
        `runs` does not read). Its coordinate fields are read as such, and --coord-key reads a key it names its own
        way. The --coords file is no run's config."""
        if self._beside is None:
            given = getattr(self.given, "file", "") or ""
            found = [p for p in _configs_beside(self.path) if not given or p.resolve() != Path(given).resolve()]
            if len(found) > 1:
                raise LadderError(f"{self.path}: {' and '.join(p.name for p in found)} beside it: which is its runs' "
                                  "config? keep one")
            self._beside = (None, {})
            config = _read_config(found[0]) if found else None  # one that does not parse: an error, as any input's
            if isinstance(config, dict):
                self._beside = (found[0], config)
            elif found:  # a file of that name that is no mapping (a list of results, say): not read, and said
                self.beside_problem = (f"{found[0].name} beside {self.path.name} is not read as its runs' config: it "
                                       f"holds a {type(config).__name__}, not a mapping of config keys")
        return self._beside

    def coordinate_hint(self, fields: tuple[str, ...]) -> str:
        """How to read the coordinates `fields` from columns of this table: the --coord-column of each field a
        column seems to hold (`COORD_COLUMNS`), or the option's form."""
        # A field the user mapped a column to is missing because that column is empty: say so, not the option again.
        empty = self._empty_columns([f for f in fields if f in self.columns.coords])
        fields = tuple(f for f in fields if f not in self.columns.coords)
        if not fields:
            return empty
        names = {str(c).strip().lower(): str(c) for c in self._load().columns}
        columns = {f: next((names[c] for c in COORD_COLUMNS.get(f, ()) if c in names), None) for f in fields}
        found = [f"--coord-column {f}={c}" for f, c in columns.items() if c is not None]
        path, config = self.beside()
        keys = config_key_hint(config, fields).replace("; its config may give", f"; its config beside it ({path.name}) may "
                                                                                  "give") if path is not None else ""
        keys += f" ({self.beside_problem})" if self.beside_problem else ""
        if found:
            return f"{empty}; or read {'it' if len(found) == 1 else 'them'} from the table's columns: {' '.join(found)}{keys}"
        return (f"{empty}; or read a coordinate from a column of the table: --coord-column FIELD=COLUMN{keys}"
                + ("" if path is not None or self.columns.run is not None or self.beside_problem else
                   f" (or write the run's config beside the table: {self.path.stem}.json)"))

    def _empty_columns(self, fields: list[str]) -> str:
        """For the coordinates `fields` read from a mapped column, which runs that column is empty for (every
        one of their rows): why a mapped coordinate is missing, and that the column needs filling ("" if none)."""
        table = self._load()
        c = self.columns
        ids = self._run_ids(table)
        said = []
        for f in fields:
            column = c.coords[f]
            runs = [str(r) for r, n in table[column].groupby(ids, sort=True).count().items() if n == 0]
            if runs:
                shown = ", ".join(map(repr, runs[:3])) + (f" and {len(runs) - 3:,} more" if len(runs) > 3 else "")
                said.append(f"column {column!r} (--coord-column {f}={column}) is empty in every row of run"
                            f"{'s' if len(runs) > 1 else ''} {shown}")
        return "".join(f"; {line}: fill it in, or give the value as above" for line in said)

    def runs(self) -> list[RunRef]:
        table = self._load()
        c = self.columns
        ids = self._run_ids(table)
        per_run = _per_run_constants(table, ids, exclude={c.run, c.step, c.tokens, *c.metrics.values()})
        refs = []
        beside_path, beside = self.beside()
        if beside_path is not None and ids.nunique() > 1:  # one run's config: not every run's of a table of several
            self.beside_problem = (f"{beside_path.name} beside {self.path.name} is not read as its runs' config: the "
                                   f"table holds {ids.nunique()} runs, and a config beside a table is one run's (give "
                                   "several runs' coordinates with --coords FILE.yaml)")
            self._beside, beside_path, beside = (None, {}), None, {}
        for run_id, rows in table.groupby(ids, sort=True):
            run_id = str(run_id)
            config = {**beside, **per_run.get(run_id, {})}  # the table's own columns beat the config beside it
            for f in FIELDS:  # a coordinate column that varies within the run is no coordinate of it
                if f in rows.columns and f not in config and f not in c.coords:
                    self._run_value(run_id, rows, f, f)
            for f, column in c.coords.items():
                config[f] = self._run_value(run_id, rows, column, f)
            if c.step is None and len(rows) > 1:
                rows = self._steps_from_tokens(run_id, rows, config)
            elif c.step is None:  # its one row is its last, at the step its coordinates give (`ONE_ROW`)
                config[ONE_ROW] = True
                if c.tokens is not None and "planned_tokens" not in c.coords:
                    if pd.isna(rows[c.tokens].iloc[0]):
                        raise LadderError(f"{self._where(int(rows.index[0]))}: run {run_id!r} has no tokens (column "
                                          f"'{c.tokens}' is empty); give the tokens it trained on")
                    config[ONE_ROW] = _plain(rows[c.tokens].iloc[0])
            elif c.tokens is not None and "tokens_per_step" not in config:
                per_step = _constant_ratio(rows[c.tokens], rows[c.step])
                if per_step is not None:
                    config["tokens_per_step"] = per_step
            if config.get("state") is not None:
                told = beside_path is not None and "state" not in per_run.get(run_id, {}) and "state" not in c.coords
                config["state"] = table_state(config["state"], f"{beside_path if told else self._where(int(rows.index[0]))}"
                                                               f": run {run_id!r}")
            refs.append(RunRef(run_id, self.key, label=f"{run_id} ({self.path.name})", name=str(config.get("name") or run_id), config=config, handle=rows))
        return refs

    def _run_value(self, run_id: str, rows: pd.DataFrame, column: str, f: str) -> Any:
        """The one value `column` holds in a run's `rows`, empty cells aside (None where all are empty): a run has
        one coordinate or label `f`, so a column that holds several is a `LadderError` naming the line where the
        second value appears, rather than a guess at which row is right."""
        cells = rows[column].dropna()
        values = cells.unique()
        if len(values) > 1:
            second = int(cells.index[(cells != values[0]).to_numpy()][0])
            shown = ", ".join(map(str, values[:3]))
            raise LadderError(f"{self._where(second)}: run {run_id!r}: column {column!r} holds several values in its "
                              f"rows ({shown}); a run has one {f}: fix the column, or give it with --coord {f}=VALUE")
        return _plain(values[0]) if len(values) else None

    def _steps_from_tokens(self, run_id: str, rows: pd.DataFrame, config: dict[str, Any]) -> pd.DataFrame:
        """A run of several rows without a step column: its steps from its tokens, over the tokens per step a
        column or the user gives (`DERIVED_STEP`); else a `LadderError` that says what to map or give."""
        c = self.columns
        given = self.given.for_run(run_id, str(config.get("name") or run_id)) if self.given is not None else {}
        per_step = config.get("tokens_per_step") or given.get("tokens_per_step")
        refused = f"{self.path}: run {run_id!r} has {len(rows)} rows but no step column is mapped"
        if c.tokens is None:
            raise LadderError(f"{refused}; map it with --step COLUMN (or --run COLUMN if each row is its own run)")
        try:
            per_step = float(per_step)
        except (TypeError, ValueError):
            per_step = float("nan")
        if not (np.isfinite(per_step) and per_step >= 1):
            raise LadderError(f"{refused}; map it with --step COLUMN, or give the tokens per step "
                              "(--coord tokens_per_step=N) and its steps are read from its tokens (--tokens "
                              f"{c.tokens}): the LR schedule and the plan count steps")
        tokens = rows[c.tokens].to_numpy(np.float64)
        if np.isnan(tokens).any():
            line = int(rows.index[np.isnan(tokens)][0])
            raise LadderError(f"{self._where(line)}: run {run_id!r} has no tokens (column '{c.tokens}' is empty), and "
                              "its steps are read from its tokens; give them, or map --step COLUMN")
        exact = tokens / per_step
        steps = np.rint(exact).astype(np.int64)
        off = np.abs(exact - steps) > OFF_STEP
        if off.any() and not self._rounded:  # said once a table: every run of it is counted alike
            self._rounded = True
            i = int(np.argmax(off))
            warnings.warn(f"{self._where(int(rows.index[i]))}: run {run_id!r}: {tokens[i]:,.0f} tokens are "
                          f"{exact[i]:,.2f} steps of {per_step:,.0f} tokens, not a whole step ({int(off.sum()):,} of "
                          f"its {len(rows):,} rows): steps are rounded to the nearest; check tokens_per_step, or map "
                          "--step COLUMN", LadderWarning, stacklevel=2)
        order = np.argsort(steps, kind="stable")
        same = np.flatnonzero(np.diff(steps[order]) == 0)
        if len(same):
            a, b = (int(rows.index[order[i]]) for i in (same[0], same[0] + 1))
            raise LadderError(f"{self._where(a)} and {self._where(b).rpartition(': ')[2]}: run {run_id!r}: their "
                              f"tokens fall on the same step (step {int(steps[order[same[0]]]):,}, at {per_step:,.0f} "
                              "tokens per step); check tokens_per_step, or map --step COLUMN")
        return rows.assign(**{DERIVED_STEP: steps})

    def notes(self, overrides: Any = None) -> list[str]:
        """A line naming the columns read as coordinates because they are named for one (`FIELDS`), where no
        --coord-column or --coord gave that coordinate: a column in other units would pass unseen."""
        table = self._load()
        lines = self._shadowed_columns(table, getattr(overrides, "per_run", {}) or {}, getattr(overrides, "file", ""))
        self.beside()
        lines += [self.beside_problem] if self.beside_problem else []
        if self._unended:
            lines.append(f"{self.path.name}: line {self._unended:,} has no newline yet, and the row before it says its "
                         "run is running: a row still being written, left unread (the next import reads it whole)")
        given = set(self.columns.coords) | set(getattr(overrides, "all_runs", {}) or {})
        given |= {f for entry in (getattr(overrides, "per_run", {}) or {}).values() for f in entry}
        implied = [f for f in (*FIELDS, "tpp") if f in table.columns and f not in given]
        if not implied:
            return lines
        cols = ", ".join(repr(f) for f in implied)
        return lines + [f"{self.path.name}: column{'s' if len(implied) > 1 else ''} {cols} read as each run's "
                        "coordinate of that name; check the units (parameters and tokens as counts), or map another "
                        "column with --coord-column FIELD=COLUMN"]

    def _shadowed_columns(self, table: pd.DataFrame, per_run: dict[str, dict[str, Any]], file: str) -> list[str]:
        """A line for each --coord-column FIELD=COLUMN whose value the coordinates file's entry for a run replaces."""
        if not per_run:
            return []
        first = table.groupby(self._run_ids(table), sort=True).first()
        lines = []
        named = {f: f for f in FIELDS if f in table.columns and f not in self.columns.coords}  # read by their name
        for f, column in {**self.columns.coords, **named}.items():
            runs = [f"{run} ({per_run[run][f]} for {_plain(first.at[run, column])})" for run in first.index
                    if f in per_run.get(run, {}) and not same_given(per_run[run][f], _plain(first.at[run, column]))]
            if runs:
                lines.append(overridden(f"--coord-column {f}={column}" if f not in named else f"column {column!r}",
                                        f, runs, file, "a column"))
        return lines

    def read(self, ref: RunRef, cursor: dict[str, Any] | None = None) -> SourceRun:
        rows: pd.DataFrame = ref.handle
        c = self.columns
        if c.step is None and DERIVED_STEP in rows:
            step = rows[DERIVED_STEP].to_numpy(np.int64)
        elif c.step is None:
            planned = ref.config.get("stop_after_steps") or 1
            step = np.full(len(rows), whole_count(planned, "stop_after_steps", f"{self.path}: run {ref.run_id!r}"), dtype=np.int64)
        else:
            step = rows[c.step].to_numpy(np.int64)  # checked when the table was loaded
        tokens = rows[c.tokens].to_numpy(np.float64) if c.tokens else np.full(len(rows), np.nan)
        order = np.argsort(step, kind="stable")  # a table has no log order: read it in step order
        at = rows.index.to_numpy()[order]  # the table's index is its row numbers
        steps, metrics, values, toks = [], [], [], []
        blank = np.ones(len(at), dtype=bool)
        for name, column in c.metrics.items():
            blank &= ~self._logged[column][at]
            value, present = self._values[column][at], self._logged[column][at]
            steps.append(step[order][present])
            values.append(value[present])
            toks.append(tokens[order][present])
            metrics += [name] * int(present.sum())
        # rows of another metric's (a train loss between evals, in a column not imported) are not empty cells
        read = {c.run, c.step, c.tokens, DERIVED_STEP, *c.metrics.values(), *c.coords.values()}
        varying = [x for x in rows.columns if x not in read and rows[x].nunique(dropna=True) > 1]
        if varying:
            blank &= rows.loc[at, varying].isna().all(axis=1).to_numpy()
        frame = raw_frame(np.concatenate(steps), metrics, np.concatenate(values), np.concatenate(toks))
        frame = frame.sort_values("step", kind="stable")
        frame = raw_frame(frame["step"].to_numpy(), frame["metric"].astype(str).tolist(), frame["value"].to_numpy(), frame["tokens"].to_numpy())
        return SourceRun(
            run_id=ref.run_id,
            source=self.key,
            rows=frame,
            cursor={},
            state=(ref.config or {}).get("state") or "finished",
            config=ref.config or {},
            name=ref.name,
            group=str(ref.config.get("group")) if ref.config.get("group") else None,
            replace=True,
            whole=True,
            warnings=(f"{_rows(int(blank.sum()))} with no value of {' or '.join(c.metrics)} (empty cells): read as "
                      "not logged",) if blank.any() and (c.step is not None or DERIVED_STEP in rows) else (),
        )

    def where_step(self, ref: RunRef, step: int) -> str:
        """The file and line of `ref`'s row at `step`, for a message."""
        rows: pd.DataFrame = ref.handle
        column = self.columns.step if self.columns.step is not None else DERIVED_STEP
        at = rows.index[rows[column] == step] if column in rows else rows.index
        return self._where(int(at[0])) if len(at) else str(self.path)

    def _run_ids(self, table: pd.DataFrame) -> pd.Series:
        """The run each row of `table` belongs to: its --run column, or the file's name for a file of one run."""
        c = self.columns
        return table[c.run].astype(str) if c.run is not None else pd.Series(self.path.stem, index=table.index)

    def _whole_rows(self, text: str) -> str:
        """`text` without its last line where that line has no newline yet and is a row of a running run still
        being written: the row before it says its run is running, and the last one is cut short (fewer fields) or
        is the same run's, not saying it ended. The log of a live run caught while its trainer writes a row (a
        value cut short, a field not written yet) is read to its last whole row, and the next import reads the
        rest. Another run's last row, or one that says its run finished or crashed, is read as it is (a file saved
        without a final newline)."""
        lines = text.splitlines(keepends=True)
        if len(lines) < 3 or lines[-1].endswith(("\n", "\r")) or not lines[-1].strip():
            return text
        # the header with each of the last two lines: the file is not read whole twice more
        before, last = self._last_row(lines[0] + lines[-2]), self._last_row(lines[0] + lines[-1])
        column = self.columns.coords.get(STATE, STATE)
        if before is None or _state_of(before, column) != "running":
            return text
        run = self.columns.run
        if last is not None and (_state_of(last, column) in ("finished", "crashed")
                                 or (run is not None and last.get(run) != before.get(run))):
            return text
        self._unended = len(lines)
        return "".join(lines[:-1])

    def _last_row(self, text: str) -> dict[str, str] | None:
        """The last row of the CSV `text` (a header and a line), every cell as written (None where it is no whole
        table)."""
        try:
            _, body = csvfile.records(self.path, text)
            rows = csvfile.frame(self.path, body, dtype=str, keep_default_na=False).rename(columns=str.strip)
        except (LadderError, ValueError, pd.errors.ParserError):
            return None
        return {str(k): str(v) for k, v in rows.iloc[-1].items()} if len(rows) else None

    def _load(self) -> pd.DataFrame:
        if self._table is not None:
            return self._table
        csvfile.need_file(self.path, _how_to_give(self.path))
        self._lines: list[int] | None = None
        c = self.columns
        try:
            if self.path.suffix.lower() in PARQUET:
                table = _nested_as_text(pd.read_parquet(self.path, engine="pyarrow").reset_index(drop=True))
                cells = _parquet_cells(self.path, [m for m in dict.fromkeys(c.metrics.values()) if m in table])
            else:
                text = self._whole_rows(csvfile.text(self.path))
                self._lines, text = csvfile.records(self.path, text)
                table = csvfile.frame(self.path, text)
                table.columns = [str(x).strip() for x in table.columns]
                # Cells as written: run id "007" is not "7", "NA" is an id (and a group, a name or a role: a data
                # mix called NA), and a metric's "nan" is not empty.
                labels = [c.coords.get(k, k) for k in (*LABELS, STATE)]
                as_written = [x for x in dict.fromkeys([c.run, *c.metrics.values(), *labels])
                              if x is not None and x in table]
                cells = csvfile.frame(self.path, text, usecols=lambda x: x.strip() in as_written, dtype=str,
                                      keep_default_na=False) if as_written else pd.DataFrame(index=table.index)
                cells.columns = [str(x).strip() for x in cells.columns]
                if c.run is not None and c.run in table:
                    table[c.run] = cells[c.run].to_numpy()
                for label in (x for x in dict.fromkeys(labels) if x in table and x != c.run):
                    written = cells[label]  # an empty cell is no label
                    table[label] = written.where(written.str.strip() != "").to_numpy()
        except LadderError:
            raise
        except (ValueError, OSError, pd.errors.ParserError, UnicodeDecodeError, RecursionError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise LadderError(f"{self.path}: cannot read it as a table ({first})") from None
        if self._lines is not None and len(self._lines) != len(table):
            self._lines = None  # quoting the two readers see differently: name rows by number instead
        duplicated = [str(c) for c in table.columns[table.columns.duplicated()]]
        if duplicated:
            raise LadderError(f"{self.path}: column {duplicated[0]!r} appears twice; rename one of them")
        if not len(table):
            raise LadderError(f"{self.path}: the table has no rows (only a header)")
        wanted = {"--run": c.run, "--step": c.step, "--tokens": c.tokens}
        wanted |= {f"--metric {k}": v for k, v in c.metrics.items()}
        wanted |= {f"--coord-column {k}": v for k, v in c.coords.items()}
        for option, column in wanted.items():
            if column is not None and column not in table.columns:
                raise csvfile.no_column(self.path, column, option, table.columns, role="mapped by")
        self._table = self._checked(table, cells)
        return self._table

    def _where(self, row: int) -> str:
        return f"{self.path}: line {self._lines[row]}" if self._lines is not None else f"{self.path}: row {row + 1}"

    def _checked(self, table: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
        """The table with its run, step, tokens and metric columns checked, and steps as int64; `cells`
        holds each metric's cells as written (NaN for a parquet null)."""
        c = self.columns
        table = table.copy()
        if c.run is not None:
            ids = table[c.run]
            for i in np.flatnonzero((ids.isna() | (ids.astype(str).str.strip() == "")).to_numpy()):
                raise LadderError(f"{self._where(int(i))}: empty run id in column '{c.run}'")
            ids = ids.astype(str).str.strip()  # "r1, 10" or " r1 ": the spaces around a cell are no part of a name
            for i in ids.drop_duplicates().index:
                check_run_id(ids[i], f"{self._where(table.index.get_loc(i))}: column '{c.run}'")
            table[c.run] = ids
        if c.step is not None:
            table[c.step] = self._counts(table[c.step], f"step (column '{c.step}')", empty_ok=False).astype(np.int64)
        if c.tokens is not None:
            table[c.tokens] = self._counts(table[c.tokens], f"tokens (column '{c.tokens}')", empty_ok=True, whole=False)
        for column in dict.fromkeys(c.metrics.values()):
            self._values[column], self._logged[column] = self._metric(table[column], cells[column], f"value (column '{column}')")
        if c.step is not None:
            self._one_row_per_step(table)
        return table

    def _one_row_per_step(self, table: pd.DataFrame) -> None:
        """A long table (one row per run, step and metric, the metric named in a column) is a `LadderError` that says
        how to give it one column per metric: read as it is, the rows of a step would be taken for a resumed run's
        and merged, each metric's value overwriting the one before. Told from a resumed run's steps logged again by
        a column (`_names_series`) that tells apart the rows whose values clash at a step, and whose values each run
        all through the run (a metric's name); a resumed run's attempt, commit or time runs over a part of it."""
        c = self.columns
        key = [c.step] if c.run is None else [c.run, c.step]
        metrics = list(dict.fromkeys(c.metrics.values()))
        logged = pd.DataFrame({m: np.where(self._logged[m], self._values[m], np.nan) for m in metrics}, index=table.index)
        clash = (logged.groupby([table[k] for k in key], sort=False).transform("nunique") > 1).any(axis=1).to_numpy()
        if not clash.any():  # a step's train and eval rows, each filling its own cells: merged cell by cell
            return
        clashing = table[clash]
        read = {c.run, c.step, c.tokens, *metrics, *c.coords.values()}
        for column in table.columns:
            if column in read or not _names_series(table, clashing, column, key):
                continue
            first = clashing.index[0]
            at = clashing[(clashing[key] == clashing.loc[first, key]).all(axis=1)]
            names = ", ".join(repr(str(v)) for v in at[column].drop_duplicates()[:4])
            run = f"run {table.at[first, c.run]!r} " if c.run is not None else ""
            named = [c.run, c.step, c.tokens, *c.coords.values(), *(f for f in (*FIELDS, *LABELS, STATE) if f in table)]
            index = "[" + ", ".join(repr(k) for k in dict.fromkeys(named) if k not in (None, column)) + "]"
            raise LadderError(
                f"{self._where(int(first))}: {run}has {len(at)} rows at step {table.at[first, c.step]:,} whose values "
                f"differ, told apart by column {column!r} ({names}): the table holds one row per {column} (a long "
                f"table); give it one column per metric, e.g. in pandas df.pivot(index={index}, columns={column!r}, "
                f"values={metrics[0]!r}).reset_index(), and map the loss's column: --metric eval/loss=NAME"
                + (f"; or, where each {column} is a run of its own, map it with --run {column}" if c.run is None else "")
                + f"; or, where they are a run's steps logged again (a restart), drop column {column!r} from the table")

    def _metric(self, column: pd.Series, written: pd.Series, what: str) -> tuple[np.ndarray, np.ndarray]:
        """A metric's values and which of them the run logged: an empty cell (`_NOT_LOGGED`) was not
        logged; ``nan``, ``inf`` and numbers were; any other cell is a `LadderError` with its line."""
        values = pd.to_numeric(column, errors="coerce").to_numpy(np.float64, copy=True)
        text = written.astype(str).str.strip()
        logged = ~(written.isna() | text.isin(_NOT_LOGGED)).to_numpy()
        nan = text.str.lower().str.lstrip("+-").isin(_NAN_TEXT).to_numpy()
        bad = logged & ((np.isnan(values) & ~nan) | _booleans(column))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise LadderError(f"{self._where(i)}: {what} {written.iloc[i]!r} is not a number "
                              "(leave the cell empty for a value not logged)")
        spelt_inf = text.str.lower().str.lstrip("+-").isin(_INF_TEXT).to_numpy()
        overflow = logged & np.isinf(values) & ~spelt_inf
        if overflow.any():  # 1e400: a number no float holds, not a value the run logged as inf
            i = int(np.flatnonzero(overflow)[0])
            raise LadderError(f"{self._where(i)}: {what} {written.iloc[i]!r} is too large for a float "
                              "(write inf where the run logged inf)")
        values[logged & nan] = np.nan  # a number the writer spelt as NaN, whatever the parser made of it
        return values, logged

    def _numbers(self, column: pd.Series, what: str) -> np.ndarray:
        """Floats (NaN where empty); a cell that is not a number is a `LadderError` with its line."""
        values = pd.to_numeric(column, errors="coerce").to_numpy(np.float64)
        bad = (np.isnan(values) & ~column.isna().to_numpy()) | _booleans(column)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise LadderError(f"{self._where(i)}: {what} {_plain(column.iloc[i])!r} is not a number")
        return values

    def _counts(self, column: pd.Series, what: str, empty_ok: bool, whole: bool = True) -> np.ndarray:
        """Counts in 0..2^63-1 as floats (NaN where empty, when allowed). Unless `whole`, a count a writer kept as
        a float (1.048576e8 printed with its rounding) is rounded; a true fraction (0.105: tokens in billions?)
        is still refused."""
        values = self._numbers(column, what)
        if not whole:
            near = np.abs(values - np.round(values)) <= FLOAT_NOISE * np.abs(values)
            values = np.where(near, np.round(values), values)
        present = ~np.isnan(values)
        if not empty_ok and not present.all():
            raise LadderError(f"{self._where(int(np.flatnonzero(~present)[0]))}: empty {what}")
        ok = ~present | (np.isfinite(values) & (values >= 0) & (values < 2.0**63) & (values == np.round(values)))
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            if not whole and np.isfinite(values[i]) and values[i] >= 0 and values[i] != np.round(values[i]):
                raise LadderError(f"{self._where(i)}: {what} {_plain(column.iloc[i])!r} is not a whole number: tokens are "
                                  "counts (in millions or billions? multiply the column by 1e6 or 1e9)")
            whole_count(values[i] if not whole else column.iloc[i], what, self._where(i))  # raises with the reason
            raise LadderError(f"{self._where(i)}: {what} {column.iloc[i]!r} is out of range (0 to 2^63-1)")
        if whole and isinstance(column.dtype, np.dtype) and column.dtype.kind in "iu":
            return column.to_numpy()  # exact: an int64 above 2^53 does not survive a float
        return values


def _configs_beside(path: Path) -> list[Path]:
    """The files beside the table `path` named as it is with a suffix of `CONFIG_BESIDE` (in any case)."""
    try:
        return sorted(p for p in path.parent.iterdir()
                      if p.stem == path.stem and p.suffix.lower() in CONFIG_BESIDE and p.is_file())
    except OSError:
        return []


def _read_config(path: Path) -> Any:
    """What a run config file beside a table holds: JSON (``.json``) or YAML (safe loader); a `LadderError` naming the
    file where it does not parse."""
    if path.suffix.lower() != ".json":
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise LadderError(f"{path}: the config beside the table does not read as YAML ({str(exc).splitlines()[0]}); "
                              "fix it, or rename it") from None
        return dict(load_yaml(path)) if isinstance(data, dict) else data  # load_yaml keeps each key's line
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LadderError(f"{path}: the config beside the table does not read as JSON ({exc}); fix it, or rename "
                          "it") from None


def _names_series(table: pd.DataFrame, clashing: pd.DataFrame, column: str, key: list[str]) -> bool:
    """Whether `column` names the series a long table's rows belong to: not a float or a time; it tells apart the
    rows of most steps whose values clash (`clashing`, grouped by `key`); in the run with the most such rows, its
    values are few (a third of its rows at most) and two of them span at least half of the run's steps together (each a
    metric logged all through the run, not a resumed run's attempt, commit, time or counter), or the run has one
    step (a table of final values, one row per metric)."""
    cells = table[column]
    if pd.api.types.is_float_dtype(cells) or pd.api.types.is_datetime64_any_dtype(cells):
        return False
    by_step = clashing.groupby([clashing[k] for k in key], sort=False)[column]
    if (by_step.nunique(dropna=False) == by_step.size()).mean() < 0.5:
        return False
    run = table if len(key) == 1 else table[table[key[0]] == clashing[key[0]].value_counts().index[0]]
    steps, names = run[key[-1]], run[column]
    if steps.nunique() == 1:
        return names.nunique(dropna=False) >= 2
    spans = steps.groupby(names, sort=False, dropna=False).agg(["min", "max", "size"])
    spans = spans[spans["size"] >= 2].sort_values("size", ascending=False)
    if len(spans) < 2 or names.nunique(dropna=False) > len(run) / 3:
        return False
    (lo_a, hi_a), (lo_b, hi_b) = spans[["min", "max"]].to_numpy()[:2]
    return (min(hi_a, hi_b) - max(lo_a, lo_b)) >= 0.5 * float(steps.max() - steps.min())


def _booleans(column: pd.Series) -> np.ndarray:
    """Where a cell holds true or false (a parquet boolean column): a flag, which pandas would read as 1.0 or 0.0,
    is no number here, as "true" in a CSV is none."""
    if pd.api.types.is_bool_dtype(column):
        return np.ones(len(column), dtype=bool)
    kind = pd.api.types.infer_dtype(column, skipna=True) if column.dtype == object else ""
    if kind == "boolean" or kind.startswith("mixed"):  # a CSV's text cells ("string") are checked as text
        return column.map(lambda cell: isinstance(cell, (bool, np.bool_))).to_numpy(dtype=bool)
    return np.zeros(len(column), dtype=bool)


def _parquet_cells(path: Path, columns: list[str]) -> pd.DataFrame:
    """The columns with parquet nulls as NaN and NaN values as written ("nan"): pandas reads both as NaN."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=columns)
    out = {}
    for name in columns:
        array = table[name]
        text = pd.Series(array.to_pandas(), dtype=object).map(str)
        out[name] = text.where(~array.is_null().to_numpy(zero_copy_only=False))
    return pd.DataFrame(out)


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


def _nested_as_text(table: pd.DataFrame) -> pd.DataFrame:
    """A parquet table with its list, struct and map cells (tags, a histogram, a nested config) as JSON text: a
    column no option maps is read as a run's label where it holds one value (`_per_run_constants`), which needs
    cells that compare."""
    import json

    def text(cell: Any) -> Any:
        if not isinstance(cell, (np.ndarray, list, tuple, dict)):
            return cell
        return json.dumps(cell, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v), sort_keys=True)

    for column in table.columns[[dtype == np.dtype(object) for dtype in table.dtypes]]:
        if table[column].map(lambda cell: isinstance(cell, (np.ndarray, list, tuple, dict))).any():
            table[column] = table[column].map(text)
    return table


def _state_of(row: dict[str, str], column: str = STATE) -> str:
    """A row's cell of the state `column` as a run state (`STATES`: running, finished, crashed), or "" where it says
    none."""
    return STATES.get(row.get(column, "").strip().lower(), "")


def _rows(n: int) -> str:
    return f"{n:,} row" + ("" if n == 1 else "s")


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


def _how_to_give(path: Path) -> str:
    """How to name a table's files where `path` is a folder, or a pattern the shell passed on as written."""
    if path.is_dir():
        tables = sorted(p.name for p in path.iterdir() if p.suffix.lower() in (".csv", ".parquet", ".pq"))
        if not tables:
            return "it holds no .csv or .parquet file: give the path of the table"
        more = ", ..." if len(tables) > 3 else ""
        suffix = max(sorted({Path(t).suffix for t in tables}), key=lambda x: sum(t.endswith(x) for t in tables))
        return f"give the files in it, e.g. {path / ('*' + suffix)} (it holds {len(tables)}: {', '.join(tables[:3])}{more})"
    if any(c in path.name for c in "*?["):
        return "no file matches this pattern (the shell passes a pattern on as written when nothing matches it)"
    return ""

"""Glue between tables and `fits`: a CSV file or the local store → the arrays the fits take.

Two shapes of data come out:

- `Finals`: one point per run (its last logged value), for the endpoint law and the surface;
- `Curves`: every run's metric at common fractions of its planned steps, for the per-fraction
  law; and `lr_curves`: each run's checkpoints with the LR of every step (from its schedule),
  for the schedule-aware curve laws.

Every problem with the input (a missing column, a non-positive value, a run without a final
point) is a `LadderError` that names the file, the column or the run, and says what to do.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import fits
from fits.perfraction import SIZES_PER_FRACTION, sizes_present
from fits.runs import ONE_RATIO, reached_end
from ladder.config.limits import MAX_COMPUTE, MAX_PARAMS, MAX_TOKENS
from ladder.data import csvfile
from ladder.data.endpointcsv import DEFAULT_RUN_COL
from ladder.data.sources.table import FAR_PAST_PLAN, table_state
from ladder.errors import LadderError


@dataclass(frozen=True)
class Columns:
    """Column names of a CSV (None: the CSV has no such column)."""

    run: str | None = DEFAULT_RUN_COL
    """Identifies the run of each row; without it every row is one run."""
    loss: str = "loss"
    """The metric to fit (nats per token)."""
    compute: str | None = "compute"
    """Fit compute (FLOPs) of the row: of the whole run for final points, or spent so far."""
    params: str | None = "params"
    """Parameters N of the model (the surface's N; state the convention you use)."""
    tokens: str | None = "tokens"
    """Tokens D trained on at the row."""
    budget: str | None = None
    """The run's compute budget (FLOPs) where the runs are an isoFLOP sweep: several sizes per budget."""
    step: str | None = "step"
    """Optimizer step of the row; the run's last step is its final point."""
    fraction: str | None = None
    """Fraction of the planned steps at the row (else step / total_steps)."""
    total_steps: str | None = None
    """Planned steps of the run (with `step`, gives the fraction)."""
    drop: str | None = None
    """Rows where this column is true (a quality flag, an exclusion mark) are left out."""
    where: tuple[str, ...] = ()
    """COLUMN=VALUE conditions: only the rows that meet every one are read."""


@dataclass(frozen=True)
class Finals:
    """One final point per run."""

    names: list[str]
    loss: np.ndarray
    compute: np.ndarray | None = None
    params: np.ndarray | None = None
    tokens: np.ndarray | None = None
    budget: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    """What the numbers assume (compute as 6·N·D where only N is known)."""
    left_out: str = ""
    """The runs of the selection left out for not having finished (crashed, running), as a note; "" when none."""


@dataclass(frozen=True)
class Curves:
    """Each run's metric at common fractions of its planned steps (NaN where it has none)."""

    names: list[str]
    compute: np.ndarray
    """Fit compute of each whole run (FLOPs at fraction 1)."""
    fractions: np.ndarray
    losses: np.ndarray
    """(runs, fractions)."""
    reached: np.ndarray
    """The last fraction each run logged (its curve may reach past the last of `fractions` it has a value at)."""
    notes: tuple[str, ...] = ()

    def from_first_evals(self) -> Curves:
        """These curves without the leading fractions that fewer sizes reach with an eval than the per-fraction law
        needs there (a ladder evaluated every 10% has nothing at 5%), said in a note; a gap later in the runs is
        left for the fit to refuse."""
        enough = sizes_present(self.compute, np.isfinite(self.losses)) >= SIZES_PER_FRACTION
        first = int(np.argmax(enough)) if enough.any() else 0
        if first == 0:
            return self
        cut = ", ".join(f"{g:g}" for g in self.fractions[:first])
        note = (f"fraction{'s' if first > 1 else ''} {cut} left out: fewer than {SIZES_PER_FRACTION} runs have an eval "
                "that early, a size counted once (give a coarser --every to change the fractions)")
        return dataclasses.replace(self, fractions=self.fractions[first:], losses=self.losses[:, first:],
                                   notes=self.notes + (note,))

    def with_short_runs_noted(self) -> Curves:
        """These curves with a note naming each run that stops short of the last fraction (crashed, still running,
        or cut), which the fit at later fractions goes without."""
        seen = np.isfinite(self.losses)
        short = [f"{name} at {end:.0%}" if row.any() else f"{name} (no value)"
                 for name, row, end in zip(self.names, seen, self.reached) if not row[-1]]
        if not short:
            return self
        note = (f"{len(short)} run{'s' if len(short) > 1 else ''} stop{'' if len(short) > 1 else 's'} short of "
                f"fraction {self.fractions[-1]:g}: {', '.join(short)}; the law at later fractions is fitted on "
                f"{int(seen[:, -1].sum())} of {len(self.names)} runs there")
        return dataclasses.replace(self, notes=self.notes + (note,))


# ---- CSV ------------------------------------------------------------------------------------------
_KEEP = frozenset({"", "false", "0", "0.0", "no", "n", "f", "none", "nan", "na", "null"})
"""Values of a --drop-col flag that keep the row; anything else (true, 1, yes, a reason) drops it."""


def read_csv(path: str | Path, drop: str | None = None, where: tuple[str, ...] = ()) -> pd.DataFrame:
    """The CSV at `path` (cells as written, indexed by line; `ladder.data.csvfile`): the rows that meet every
    COLUMN=VALUE of `where`, without those whose column `drop` is set (`_KEEP` keeps a row). How many rows
    the flag left out is in the frame's ``attrs["notes"]``."""
    p = Path(path)
    df = csvfile.cells(p, "--csv takes a CSV of the runs, one row per run or per checkpoint")
    for i, condition in enumerate(where):
        try:
            df = where_rows(df, str(p), condition)
        except LadderError as exc:
            if not i:
                raise
            raise LadderError(f"{exc} (in the rows left by --where {' --where '.join(where[:i])}: the conditions "
                              "must all hold)") from None
    notes = []
    if drop is not None:
        _need(df, str(p), drop=drop)
        flag = ~df[drop].str.strip().str.lower().isin(_KEEP)
        if flag.any():
            notes.append(f"{int(flag.sum())} of {len(df)} rows left out: their {drop!r} is set "
                         f"(e.g. {df[drop][flag].iloc[0].strip()!r} on line {flag.idxmax()})")
        df = df[~flag]
    if df.empty:
        raise LadderError(f"{p}: the CSV has no rows" + (f" left after dropping {drop}" if drop else ""))
    df.attrs["notes"] = tuple(notes)
    return df


def where_rows(df: pd.DataFrame, where: str, condition: str, also: pd.Series | None = None) -> pd.DataFrame:
    """The rows whose column holds the value of `condition` (COLUMN=VALUE; numbers compare as numbers), and
    those `also` marks."""
    col, sep, value = condition.partition("=")
    col, value = col.strip(), value.strip()
    if not sep or not col:
        raise LadderError(f"--where {condition!r}: give COLUMN=VALUE, e.g. --where dataset=c4")
    if col not in df.columns:
        raise csvfile.no_column(where, col, "--where", df.columns)
    text = df[col].astype(str).str.strip()
    keep = text == value
    try:
        keep |= pd.to_numeric(text, errors="coerce") == float(value)
    except ValueError:
        pass
    if not keep.any():  # a spreadsheet's FALSE or True for false, C4 for c4: the value as written in another case
        keep = text.str.casefold() == value.casefold()
    if also is not None:
        keep |= also
    if not keep.any():
        seen = sorted(set(text))
        shown = ", ".join(seen[:10]) + (f", … ({len(seen)} values)" if len(seen) > 10 else "")
        raise LadderError(f"{where}: no row has {col} = {value!r}; the column holds {shown}")
    return df[keep.to_numpy()]


ONE_ROW_PER_RUN = ("whole curves need a column naming each row's run (--run-col NAME); a table of one row per run (its "
                   "final loss) is fitted by `ladder fit surface` (N and D) or `ladder fit endpoint` (compute)")
"""What `fit curve` says of a table without the run column it needs."""


def _need(df: pd.DataFrame, where: str, **columns: str | None) -> None:
    for option, col in columns.items():
        flag = f"--{option.replace('_', '-')}-col"
        if col is None:
            also = " or, where each row gives its fraction of them, --fraction-col NAME" if option == "total_steps" else ""
            raise LadderError(f"{where}: name the {option.replace('_', ' ')} column ({flag} NAME{also})")
        if col not in df.columns:
            error = csvfile.no_column(where, col, flag, df.columns)
            if option == "run":  # a table of checkpoints was assumed from its step column
                error = LadderError(f"{error}; give --run-col '' where each row is its own run")
            raise error


MOST = {"params": MAX_PARAMS, "tokens": MAX_TOKENS, "compute": MAX_COMPUTE, "budget": MAX_COMPUTE}
"""The largest value a run's column of each kind may hold (`ladder.config.limits`)."""


def _numbers(df: pd.DataFrame, col: str, where: str, positive: bool = True, most: float = math.inf) -> np.ndarray:
    return csvfile.numbers(df, col, where, positive, most).to_numpy(dtype=np.float64)


def _with_run_ids(df: pd.DataFrame, run: str, where: str) -> pd.DataFrame:
    """`df` with its run ids stripped of spaces; a row without one is a `LadderError` naming its line."""
    _need(df, where, run=run)
    ids = df[run].str.strip()
    if (ids == "").any():
        raise LadderError(f"{where}: line {(ids == '').idxmax()}: empty run id in column {run!r}; give every row its run")
    return df.assign(**{run: ids})


def _last_rows(df: pd.DataFrame, cols: Columns, where: str) -> pd.DataFrame:
    """One row per run: its last by step (a CSV without a run column is one row per run). A run id left
    empty, or a run with several rows and no step column to order them, is a `LadderError`."""
    if cols.run is None:
        return df
    df = _with_run_ids(df, cols.run, where)
    ids = df[cols.run]
    if cols.step is not None and cols.step in df.columns:
        steps = _numbers(df, cols.step, where, positive=False)
        if cols.loss in df.columns:
            _one_loss_per_step(df[cols.run], steps, _numbers(df, cols.loss, where), cols.step, where)
        df = df.assign(_step=steps).sort_values([cols.run, "_step"], kind="stable").drop(columns="_step")
    else:
        counts = ids.value_counts()
        if counts.iloc[0] > 1:
            run = counts.index[0]
            lines = ", ".join(map(str, df.index[ids == run][:3])) + (", ..." if counts.iloc[0] > 3 else "")
            raise LadderError(
                f"{where}: run {run!r} has {counts.iloc[0]} rows (lines {lines}) and the CSV has no step column "
                f"{cols.step!r} to tell its last; name it with --step-col, give --run-col '' if each row is its own run, "
                "or delete the rows repeated by mistake"
            )
    return df.groupby(cols.run, sort=False).tail(1)


def _one_loss_per_step(runs: pd.Series, at: np.ndarray, loss: np.ndarray, what: str, where: str) -> None:
    """Two rows of one run at one step (or fraction) with different losses: a `LadderError` naming both lines
    (which one is the run's is not something a fit can tell; a repeat of the same loss is harmless)."""
    clash = _first_clash(runs, loss, at)
    if clash:
        run, step, (a, b), (va, vb) = clash
        raise LadderError(f"{where}: lines {a} and {b}: run {run!r} has two losses at {what} {step:g} ({va:g}, {vb:g}); "
                          "keep the one the run logged and remove the other")


def _first_clash(runs: pd.Series, values: np.ndarray, at: np.ndarray | None = None):
    """The first run (at one `at` where given) whose rows hold two different `values`: (run, at, the two rows'
    lines, their values); None where none does."""
    key = pd.DataFrame({"run": runs.to_numpy(), "at": 0.0 if at is None else at, "value": values}, index=runs.index)
    clash = key.groupby(["run", "at"])["value"].transform("nunique") > 1
    if not clash.any():
        return None
    first = key[clash].iloc[0]
    rows = key[clash & (key["run"] == first["run"]) & (key["at"] == first["at"])].drop_duplicates("value")[:2]
    return first["run"], first["at"], tuple(rows.index), tuple(rows["value"])


PAST_THE_END = 1.01
"""A checkpoint's largest fraction of its run's planned steps: past it, the step or the plan is wrong (a run's
compute is its last checkpoint's ÷ that checkpoint's fraction)."""


def _within_the_plan(runs: pd.Series, frac: np.ndarray, at: np.ndarray, what: str, where: str,
                     most: float = PAST_THE_END, also: str = "") -> None:
    """Refuse the first row past `most` × its run's planned steps, naming its line (`also`: another way out)."""
    past = frac > most
    if past.any():
        i = int(np.argmax(past))
        if what == "fraction":
            percent = 1 < frac.max() <= 100 * PAST_THE_END
            raise LadderError(f"{where}: line {runs.index[i]}: run {runs.iloc[i]!r} at fraction {at[i]:g} of its planned "
                              "steps, past 1; " + ("the column looks like percent: give fractions (0.5 for half way)"
                                                   if percent else "fix the fraction, or drop the row"))
        shown = f"{at[i]:,.0f}" if what == "step" else f"{at[i]:g}"
        raise LadderError(f"{where}: line {runs.index[i]}: run {runs.iloc[i]!r} at {what} {shown}, {frac[i]:.3g}× its "
                          f"planned steps; fix the step or the run's planned steps, or drop the row{also}")


def _one_value_per_run(runs: pd.Series, values: np.ndarray, column: str, where: str) -> None:
    """A run's planned steps are one number: rows of one run that disagree are a `LadderError` naming both lines."""
    clash = _first_clash(runs, values)
    if clash:
        run, _, (a, b), (va, vb) = clash
        raise LadderError(f"{where}: lines {a} and {b}: run {run!r} has {column!r} {va:g} and {vb:g}; a run has one "
                          "number of planned steps")


def _no_repeats(df: pd.DataFrame, where: str) -> None:
    """Rows of a table of one row per run that agree on every column are one run written twice: a `LadderError`."""
    again = df.duplicated(keep="first")
    if again.any():
        line = again.idxmax()
        first = df.index[(df == df.loc[line]).all(axis=1)][0]
        raise LadderError(f"{where}: lines {first} and {line} are the same run written twice (every column equal); "
                          "remove the repeat, or add a run_id column if they are different runs")


def finals_from_csv(path: str | Path, cols: Columns, need: tuple[str, ...], optional: tuple[str, ...] = ()) -> Finals:
    """One point per run (its last row by step); `need` names the columns the fit uses, `optional` those it
    reads where the CSV has them."""
    where = str(path)
    df = read_csv(path, cols.drop, cols.where)
    notes = df.attrs.get("notes", ())
    if "compute" in need and cols.compute and cols.compute not in df.columns and {"params", "tokens"} <= set(df.columns):
        raise LadderError(f"{csvfile.no_column(where, cols.compute, '--compute-col', df.columns)}; with params and "
                          "tokens, `ladder fit surface` fits L(N, D), or add a compute column (6·N·D, say) for the "
                          "law in compute")
    _need(df, where, loss=cols.loss, **{k: getattr(cols, k) for k in need})
    last, left_out = _finished(_last_rows(df, cols, where), cols, where)
    last, short = _ran_their_plans(df, last, cols, where)
    left_out = "; ".join(x for x in (left_out, short) if x)
    names = last[cols.run].tolist() if cols.run else [f"line {x}" for x in last.index]
    arrays = {k: _numbers(last, getattr(cols, k), where, most=MOST.get(k, math.inf)) for k in need}
    arrays |= {k: _numbers(last, getattr(cols, k), where, most=MOST.get(k, math.inf))
               for k in optional if getattr(cols, k) in df.columns}
    loss = _numbers(last, cols.loss, where)
    extra = ()
    if cols.run is None:
        _no_repeats(last, where)
        extra = _checkpoints(last, cols)
    coords = [getattr(cols, k) for k in need]
    mixed = None if extra else _mixed_ladders(last, coords, {cols.run, cols.loss, cols.step})
    copies = _copies(last, coords, cols.loss, names) if cols.run else None
    said = tuple(x for x in (mixed, copies, left_out) if x)
    return Finals(names, loss, **arrays, notes=tuple(notes) + extra + said, left_out=left_out)


def _copies(last: pd.DataFrame, coords: list[str], loss: str, names: list[str]) -> str | None:
    """A note when runs repeat another run's coordinates and final loss exactly: one run given twice under two
    names, which the fit would count as two draws (a narrower band than the runs hold). None otherwise."""
    key = last[[*coords, loss]].astype(str).apply(lambda c: c.str.strip())
    again = key.duplicated(keep="first").to_numpy()
    if not again.any():
        return None
    i = int(np.flatnonzero(again)[0])
    first = int(np.flatnonzero((key == key.iloc[i]).all(axis=1).to_numpy())[0])
    more = int(again.sum()) - 1
    return (f"run {names[i]!r} repeats run {names[first]!r} exactly ({', '.join(coords)} and final {loss})"
            + (f", and {more} more run{'s' if more > 1 else ''} another" if more else "")
            + ": one run given twice? The fit counts each copy as another run, which narrows the band; leave one out")


STATE_COLUMN = "state"
"""The column of a table that holds each run's state, as `ladder import csv` reads it."""


def _finished(last: pd.DataFrame, cols: Columns, where: str) -> tuple[pd.DataFrame, str]:
    """The last rows of the runs a `STATE_COLUMN` does not mark crashed or running (a run stopped early has no final
    loss), and a note naming those it leaves out ("" when none, or when the table has no such column)."""
    if not _reads_state(last, cols):
        return last, ""
    states = [table_state(text, f"{where}: line {line}") if str(text).strip() else "finished"  # as the import reads it
              for line, text in last[STATE_COLUMN].items()]
    done = np.array([s == "finished" for s in states])
    if done.all():
        return last, ""
    names = last[cols.run] if cols.run else pd.Series([f"line {x}" for x in last.index], index=last.index)
    left_out = ("left out, not finished (the law fits final losses): "
                + ", ".join(f"{n} ({s})" for n, s, d in zip(names, states, done) if not d))
    if not done.any():
        raise LadderError(f"{where}: no run's {STATE_COLUMN!r} is finished, and the law fits final losses ({left_out})")
    return last[done], left_out


def _reads_state(df: pd.DataFrame, cols: Columns) -> bool:
    """Whether the table gives each run's state in a `STATE_COLUMN` of its own (not one the fit reads otherwise)."""
    return STATE_COLUMN in df.columns and STATE_COLUMN not in {cols.run, cols.loss, cols.step}


PLANNED_COLUMNS = ("total_steps", "stop_after_steps")
"""Columns of a table that hold each run's planned steps, as `ladder import csv` and the public ladders name them
(--total-steps-col names another)."""


def _ran_their_plans(df: pd.DataFrame, last: pd.DataFrame, cols: Columns, where: str) -> tuple[pd.DataFrame, str]:
    """The last rows of the runs that reached the end of their plans, where the table gives each run's planned steps
    beside its steps (a run that stopped short, crashed or still running, has no final loss: its last checkpoint is
    not one), and a note naming those it leaves out ("" when none, or when the table cannot tell)."""
    if cols.total_steps == "":  # --total-steps-col '': no column read
        return last, ""
    if cols.total_steps:  # named: it must be there, with the steps it divides and the runs' rows to read them by
        if cols.run is None:
            raise LadderError(f"--total-steps-col {cols.total_steps}: {where} is read as one row per run (no run "
                              "column), so no run's steps can be followed to its plan; name the run column with "
                              "--run-col, or leave --total-steps-col out")
        _need(df, where, total_steps=cols.total_steps, step=cols.step)
    planned = _planned_column(df, cols)
    if cols.run is None or not cols.step or cols.step not in df.columns or planned not in df.columns:
        return last, ""
    if cols.total_steps:
        total = _numbers(df, planned, where)
    else:  # found by its name: a run without a number there is not known to have stopped short
        total = pd.to_numeric(df[planned], errors="coerce").to_numpy(dtype=np.float64, copy=True)
        total[~(total > 0)] = np.nan
    _one_value_per_run(df[cols.run], total, planned, where)
    steps = pd.Series(_numbers(df, cols.step, where, positive=False), index=df.index)
    # a final only a little past its plan is kept (a checkpoint at step 256 of 250); far past, the plan is wrong
    _within_the_plan(df[cols.run], steps.to_numpy() / total, steps.to_numpy(), "step", where,
                     most=FAR_PAST_PLAN * (1 - 1e-9), also=" (or read no planned steps: --total-steps-col '')")
    frac = (steps / total).groupby(df[cols.run], sort=False)
    known = {run: np.sort(f.dropna().to_numpy()) for run, f in frac}
    # where the table gives states, the runs left here are finished by them (`_finished`): a last eval one interval
    # before the plan's end is their end, as a store's state makes it
    said = True if _reads_state(last, cols) else None
    done = {run: not f.size or reached_end(f, said) for run, f in known.items()}
    keep = last[cols.run].map(done).to_numpy(dtype=bool)
    if keep.all():
        return last, ""
    ends, totals = steps.groupby(df[cols.run], sort=False).max(), pd.Series(total, index=df.index).groupby(
        df[cols.run], sort=False).max()
    note = (f"left out, stopped short of its plan ({planned!r}; the law fits final losses): "
            + ", ".join(f"{run} (at step {ends[run]:,.0f} of {totals[run]:,.0f})" for run in last[cols.run][~keep]))
    if not keep.any():
        raise LadderError(f"{where}: no run reaches the end of its plan, and the law fits final losses ({note}); "
                          "where they did finish (a trainer that evaluates at step k, 2k, ... may end its evals an "
                          f"interval before its plan), say so in a {STATE_COLUMN!r} column (finished), read no "
                          "planned steps (--total-steps-col ''), or import them into a store as finished")
    return last[keep], note


def _planned_column(df: pd.DataFrame, cols: Columns) -> str | None:
    """The column of each run's planned steps: the one named (--total-steps-col), else the first of `PLANNED_COLUMNS`
    the table has; None where it has none."""
    return cols.total_steps or next((c for c in PLANNED_COLUMNS if c in df.columns), None)


CHECKPOINT_ROWS = 30
"""Rows of one size in a table of one row per run past which they look like a run's checkpoints: the sweeps of
public ladders train a size at a dozen budgets or fewer."""


def _checkpoints(df: pd.DataFrame, cols: Columns) -> tuple[str, ...]:
    """A note where a table read as one row per run holds `CHECKPOINT_ROWS` rows or more of one size: likely the
    checkpoints of runs, each of which the fit would take for a finished run."""
    if DEFAULT_RUN_COL in df.columns:  # every row a run by --run-col '', where the default run column repeats
        ids = df[DEFAULT_RUN_COL].astype(str).str.strip()
        if ids.nunique() < len(ids):
            return (f"column {DEFAULT_RUN_COL!r} names {ids.nunique()} runs over {len(ids)} rows, and each row is fitted as a "
                    "finished run (--run-col ''): if the rows are checkpoints, drop --run-col '' and each run's last "
                    "row by step is its final loss",)
    if cols.params is None or cols.params not in df.columns:
        return ()
    counts = df[cols.params].astype(str).str.strip().value_counts()
    if counts.iloc[0] < CHECKPOINT_ROWS:
        return ()
    return (f"{counts.iloc[0]} rows have {cols.params} = {counts.index[0]}, and the table has no run column, so each "
            "row is fitted as a finished run: if they are checkpoints of runs, give the run and step columns "
            "(--run-col, --step-col) and each run's last row is its final loss",)


MIXED_MAX_VALUES = 20
"""A text column with at most this many values can name the ladders (corpora, recipes) of one table."""


def _mixed_ladders(df: pd.DataFrame, coords: list[str], skip: set) -> str | None:
    """A note when runs repeat each other's coordinates and a text column tells the repeats apart: the table
    likely holds several ladders (corpora, recipes), which one fit would treat as one. None otherwise (a
    repeat no column explains is a seed)."""
    repeats = df.duplicated(subset=coords, keep=False)
    if not repeats.any():
        return None
    for col in df.columns:
        if col in skip or col in coords:
            continue
        values = df[col].dropna().astype(str).str.strip().unique()
        if not 2 <= values.size <= min(MIXED_MAX_VALUES, len(df) - 1):
            continue
        numbers = pd.to_numeric(pd.Series(values), errors="coerce")
        whole = numbers.notna().all() and bool(np.all(np.isclose(numbers, np.round(numbers))))
        if whole or df[repeats].groupby(coords)[col].nunique().max() <= 1:
            continue  # whole numbers (a seed, a replica) tell draws of one point apart
        shown = ", ".join(sorted(values, key=lambda v: (pd.to_numeric(v, errors="coerce"), v))[:5]) \
            + (", ..." if values.size > 5 else "")
        head = (f"{int(repeats.sum())} runs share their {', '.join(coords)} with another run and column {col!r} "
                f"tells them apart ({values.size} values: {shown})")
        if numbers.notna().all():  # a setting swept at each point: the fit takes every value's loss as a draw
            return (f"{head}: a sweep of {col}, whose every value one fit takes as a draw of its point (a mean over "
                    f"the sweep, not its best); keep each point's best run, or give --where {col}=VALUE to fit one")
        return f"{head}: one fit treats them as one ladder; give --where {col}=VALUE to fit one"
    return None


def curves_from_csv(path: str | Path, cols: Columns, fractions: np.ndarray) -> Curves:
    """Every run's loss at `fractions`, by interpolating between its rows.

    The fraction of a row comes from `cols.fraction`, or from `cols.step` / `cols.total_steps`; a
    run's compute is the largest `cols.compute` it reaches divided by its largest fraction, or, where the
    column holds one value for every row of each run (a table of runs' planned computes), that value."""
    where = str(path)
    df = read_csv(path, cols.drop, cols.where)
    notes = df.attrs.get("notes", ())
    if cols.run not in df.columns:
        raise LadderError(f"{csvfile.no_column(where, cols.run, '--run-col', df.columns)}; {ONE_ROW_PER_RUN}")
    _need(df, where, run=cols.run, loss=cols.loss, compute=cols.compute)
    df = _with_run_ids(df, cols.run, where)
    if cols.fraction is not None:
        _need(df, where, fraction=cols.fraction)
        frac = at = _numbers(df, cols.fraction, where, positive=False)
        what = "fraction"
    else:
        planned = _planned_column(df, cols)  # as the fits of finals read it
        _need(df, where, step=cols.step, total_steps=planned)
        at, total = _numbers(df, cols.step, where, positive=False), _numbers(df, planned, where)
        _one_value_per_run(df[cols.run], total, planned, where)
        frac, what = at / total, "step"
    # a checkpoint a little past its plan is read (step 256 of 250), as the finals' reader and an import read it;
    # far past, the plan is wrong. A fraction column past 1 is refused: percent, or a typo
    _within_the_plan(df[cols.run], frac, at, what, where, most=PAST_THE_END if what == "fraction" else
                     FAR_PAST_PLAN * (1 - 1e-9))
    past = np.flatnonzero(frac > PAST_THE_END)
    if past.size:  # read, and said, as an import says it
        worst = int(past[np.argmax(frac[past])])
        whose = "their runs'" if past.size > 1 else "its run's"
        notes = (*notes, f"{past.size} row{'s' if past.size > 1 else ''} past {whose} planned steps, up to "
                         f"{frac[worst]:.3g}× (run {df[cols.run].iloc[worst]!r}, line "
                         f"{df.index[worst]}): read as logged; check the planned steps if that is more than a last "
                         "checkpoint's rounding")
    loss = _numbers(df, cols.loss, where)
    _one_loss_per_step(df[cols.run], at, loss, what, where)
    again = pd.DataFrame({"run": df[cols.run].to_numpy(), "at": at}, index=df.index).duplicated()
    if again.any():  # harmless (one loss at the step), but said: a file joined twice, or a checkpoint logged twice
        line = again.idxmax()
        notes = (*notes, f"{int(again.sum())} row{'s' if again.sum() > 1 else ''} repeat a run's {what} with the same "
                         f"loss (first at line {line}, run {df.loc[line, cols.run]!r}): read once")
    comp = _numbers(df, cols.compute, where, positive=False, most=MAX_COMPUTE)
    names, totals, rows, flat, grows, reached = [], [], [], [], [], []
    for run, idx in df.groupby(cols.run, sort=False).indices.items():
        f, y, c = frac[idx], loss[idx], comp[idx]
        end = int(np.argmax(f))
        if f[end] <= 0:
            raise LadderError(f"{where}: run {run!r} has no row past fraction 0")
        if np.unique(f).size > 1:  # a run of one row cannot tell its spent compute from its planned
            (flat if c.max() == c.min() else grows).append(str(run))
        names.append(str(run))
        reached.append(float(f[end]))
        totals.append(c[end] / f[end])
        rows.append(fits.sample_curve(at_end(f), y, 1.0, fractions, ROUNDING))
    if flat and grows:
        raise LadderError(f"{where}: column {cols.compute!r} is the same at every row of run {flat[0]!r} but grows "
                          f"with the {what} in run {grows[0]!r}; give every run the compute spent by each row, or "
                          "every run its whole compute")
    if flat:  # each run's planned compute, on every row
        totals = [float(comp[idx].max()) for idx in df.groupby(cols.run, sort=False).indices.values()]
        notes = (*notes, f"column {cols.compute!r} holds one value per run: read as each run's whole (planned) compute")
    return Curves(names, np.asarray(totals), np.asarray(fractions, dtype=np.float64), np.vstack(rows),
                  np.asarray(reached), notes)


# ---- store ----------------------------------------------------------------------------------------
def _store_runs(store, group: str | None, role: str | None, finished: bool) -> pd.DataFrame:
    runs = _selection(store, group, role)
    if finished:
        runs = runs[runs["state"] == "finished"]
    return _some(store, runs, group, role, finished)


def _selection(store, group: str | None, role: str | None) -> pd.DataFrame:
    """The store's runs of `group` and `role` (None: any)."""
    store.must_exist("run `ladder pull` first or pass --csv FILE")
    runs = store.runs()
    if role is not None:
        runs = runs[runs["role"] == role]
    of = runs["group"].fillna("").astype(str)  # '' for the runs of no group
    if group is not None:
        return runs[of == group]
    groups = sorted(set(of))
    if len(groups) > 1:  # a law fits one ladder; pooling two recipes fits neither
        names = ", ".join(repr(g) if g else "(no group)" for g in groups)
        raise LadderError(f"{store.root} holds runs of {len(groups)} groups ({names}), and a law fits one ladder: "
                          "pick one with --group NAME" + (" (--group '' for the runs of none)" if "" in groups else ""))
    return runs


def _some(store, runs: pd.DataFrame, group: str | None, role: str | None, finished: bool) -> pd.DataFrame:
    """`runs`, or a `LadderError` naming the selection where it holds none."""
    if runs.empty:
        named = f"group {group!r}" if group else "no group (--group '')" if group == "" else ""
        what = ", ".join(x for x in (named, f"role {role!r}" if role else "",
                                      "finished" if finished else "") if x)
        from ladder.data.runview import role_hint

        hint = role_hint(store.runs(), role or "")
        raise LadderError(f"{store.root}: no runs match ({what or 'any'}){hint}; see `ladder pull` and the runs table")
    return runs


COMPUTE_AXES = ("auto", "fit", "6nd")
"""How the fits from the store count a run's compute: fit FLOPs ("fit"; 6·N per token where only N is
known), 6·N·D ("6nd"; every run needs N), or "auto": 6·N·D when every run gives N, else fit FLOPs, the
rule `ladder predict` follows (`fits.runs.law_compute`)."""


def axis_of(runs: pd.DataFrame, compute: str = "auto") -> str:
    """"6nd" or "fit": the axis `compute` (`COMPUTE_AXES`) means for these runs."""
    from ladder.data.runview import active_params

    if compute not in COMPUTE_AXES:
        raise LadderError(f"--compute {compute!r}: choose {', '.join(COMPUTE_AXES)}")
    if compute != "auto":
        return compute
    return "6nd" if all(active_params(row) for _, row in runs.iterrows()) else "fit"


def compute_per_token(runs: pd.DataFrame, compute: str = "auto", asked: bool = True) -> tuple[np.ndarray, tuple[str, ...]]:
    """Each run's compute per token on the `compute` axis (`COMPUTE_AXES`), and the note that says which; "fit"
    `asked` for by the user (--compute fit) refuses runs without fit FLOPs, one chosen by the caller counts them
    6·N·D."""
    from ladder.data.runview import SIX_N, active_params, flops_per_token, six_n_note

    if axis_of(runs, compute) == "6nd":
        n = [active_params(row) for _, row in runs.iterrows()]
        missing = [str(name) for name, x in zip(runs["name"], n) if not x]
        if missing:
            raise LadderError(f"--compute 6nd: no parameter count (active_params) for {', '.join(missing)}; "
                              "pull them with N, or use --compute fit")
        why = ("every run gives N, so" if compute == "auto" else "as asked,")
        note = (f"compute is 6·N·D: {why} the law counts compute by parameters as `ladder predict` does "
                "(fit FLOPs per token count attention, which weighs most at small sizes); --compute fit for fit FLOPs")
        return 6.0 * np.array(n, dtype=np.float64), (note,)
    got = [flops_per_token(str(row["name"]), row) for _, row in runs.iterrows()]
    six = [str(name) for name, (_, source) in zip(runs["name"], got) if source == SIX_N]
    if six and compute == "fit" and asked:  # asked for by name: not quietly the other axis (--at values are read on it)
        raise LadderError(f"--compute fit: no fit FLOPs per token (fit_flops_per_token) for {', '.join(six[:5])}"
                          f"{', ...' if len(six) > 5 else ''}; pull them with their FLOPs, or use --compute 6nd "
                          "(or auto, which counts 6·N·D for them)")
    return np.array([f for f, _ in got], dtype=np.float64), tuple(six_n_note(six))


def _store_history(store, runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The runs' values of `metric` as the laws read them: a metric logged far more often than a run's evals (a
    per-step train loss) read at its evals, as `ladder predict` reads it (`runview.at_evals`)."""
    from ladder.data.runview import at_evals, eval_grid

    hist = store.fitted_history(list(runs["run_id"]), metric)
    if hist.empty:
        raise LadderError(f"{store.root}: no values of {metric!r} for these runs; pick another --metric")
    _no_copies(store, runs, hist, metric)
    stops = runs.set_index("run_id")["stop_after_steps"]
    parts = []
    for run_id, h in hist.groupby("run_id", observed=True, sort=False):
        steps = h["step"].to_numpy(np.int64)
        read = at_evals(steps, h["value"].to_numpy(float), eval_grid(store, str(run_id), int(stops[run_id]),
                                                                  store.run_config(str(run_id))))
        if not read.read_from:
            parts.append(h)
            continue
        parts.append(pd.DataFrame({
            "run_id": run_id, "step": read.steps, "value": read.values, "metric": h["metric"].iloc[0],
            "tokens": np.rint(np.interp(read.steps, steps, h["tokens"].to_numpy(float))),
            "fraction": np.interp(read.steps, steps, h["fraction"].to_numpy(float)),
        })[h.columns])
    return pd.concat(parts, ignore_index=True).astype(hist.dtypes.to_dict())


ROUNDING = 1e-3
"""A run's first or last eval within this fraction of the run of a fitted fraction counts as at it (evals planned
every 5% and rounded to whole steps land at 0.05002, say)."""


def at_end(fractions: np.ndarray, finished: bool | None = None) -> np.ndarray:
    """A run's eval fractions with its last eval counted at fraction 1 where it `reached_end` (no later eval
    was due, as at step 11,419 of 11,420), so the curve has a value at the end."""
    f = np.array(fractions, dtype=np.float64)
    if f.size and reached_end(np.sort(f), finished):
        f[int(np.argmax(f))] = max(1.0, float(f.max()))
    return f


def _no_copies(store, runs: pd.DataFrame, hist: pd.DataFrame, metric: str) -> None:
    """Refuse runs of one size and plan that log the very same `metric` at the very same steps: one run pulled from
    two sources (its folder and its wandb files) or imported twice, which a law would count as two draws (a band
    far too narrow). Two sizes that end on one rounded loss are two runs."""
    from fits.checks import and_more

    by_id = runs.set_index("run_id")
    names = by_id["name"].astype(str)
    plan = by_id[["active_params", "fit_flops_per_token", "stop_after_steps", "planned_tokens"]].astype("float64")
    seen: dict[tuple, str] = {}
    pairs = []
    for run_id, h in hist.groupby("run_id", observed=True, sort=False):
        size = tuple(np.nan_to_num(plan.loc[run_id].to_numpy(), nan=-1.0))  # one size and plan: a copy, not a rung
        key = (size, h["step"].to_numpy(np.int64).tobytes(), h["value"].to_numpy(np.float64).tobytes())
        if key in seen:
            pairs.append((seen[key], str(run_id)))
        else:
            seen[key] = str(run_id)
    if not pairs:
        return
    a, b = pairs[0]
    raise LadderError(f"runs {a!r} ({names[a]}) and {b!r} ({names[b]}){and_more(pairs, 'pairs')} log the very same "
                      f"{metric} at the very same steps: one run pulled from two sources or imported twice, which a law "
                      f"would count twice (a band far too narrow); remove one with `ladder runs --remove {b} --store "
                      f"{store.root}`")


def _short_message(store, run: pd.Series, metric: str, usable: int) -> str:
    """Why a finished run gives no final loss: it ends short of its plan, or its values there are no loss (NaN,
    inf, 0 or below), which the laws leave out."""
    every = store.history([str(run["run_id"])], [metric], include_nonfinite=True)
    planned = float(run["stop_after_steps"])
    if len(every) and reached_end(np.sort(every["step"].unique()) / planned, finished=True):
        bad = every[every["step"] > usable]
        return (f"run {run['name']!r} reached its planned last step, but its {metric} there is no loss (NaN, inf, 0 or "
                f"below: {bad['value'].iloc[-1]:g} at step {int(bad['step'].iloc[-1]):,}); its last usable value is at "
                f"step {usable:,}: {_fix_or_remove(store, run)}")
    return (f"run {run['name']!r} ends before its planned last step; its last value is not a final loss: finish it, "
            "or where it stopped for good, say so (a table imported with a state column, or --coord-column "
            f"state=COLUMN, of crashed: the laws leave it out), or take it out with `ladder runs --remove "
            f"{run['run_id']} --store {store.root}`")


def _fix_or_remove(store, run: pd.Series) -> str:
    """What to do about one run of `store` whose values no law can fit (--group / --role pick groups, not one run)."""
    return (f"fix the run's values, or take it out of the store with `ladder runs --remove {run['run_id']} --store "
            f"{store.root}` (or out of the fit with --group / --role, where it is in a group or role of its own)")


def finals_from_store(store, metric: str, group: str | None = None, role: str | None = "rung",
                      compute: str = "auto") -> Finals:
    """Each finished run's last value of `metric`; compute = compute per token (on the `compute` axis,
    `COMPUTE_AXES`) × tokens there."""
    selected = _selection(store, group, role)
    done = (selected["state"] == "finished").to_numpy()
    runs, left = _some(store, selected[done], group, role, finished=True), selected[~done]
    hist = _store_history(store, runs, metric).sort_values(["run_id", "step"])
    last = hist.groupby("run_id").tail(1).set_index("run_id")
    none = ~runs["run_id"].isin(last.index)
    if none.any():
        first = runs[none.to_numpy()].iloc[0]
        raise LadderError(f"run {first['name']!r} has no positive, finite {metric} (the laws fit losses; 0 or below, "
                          f"NaN and inf are none): {_fix_or_remove(store, first)}")
    planned = runs.set_index("run_id")["stop_after_steps"].astype("float64")
    ended = hist.groupby("run_id")["step"].apply(  # finished runs: the store says so
        lambda s: reached_end(s.to_numpy(float) / planned[s.name], finished=True))
    short = ~ended.loc[runs["run_id"]]
    if short.any():
        first = runs[short.to_numpy()].iloc[0]
        raise LadderError(_short_message(store, first, metric, int(last.loc[first["run_id"], "step"])))
    tokens = last.loc[runs["run_id"], "tokens"].to_numpy(dtype=np.float64)
    loss = last.loc[runs["run_id"], "value"].to_numpy(dtype=np.float64)
    flops, notes = compute_per_token(runs, compute)
    left_out = ("left out, not finished (the law fits final losses): "
                + ", ".join(f"{n} ({s})" for n, s in zip(left["name"], left["state"])) if len(left) else "")
    return Finals(
        names=runs["name"].tolist(),
        loss=loss,
        compute=flops * tokens,
        params=runs["active_params"].to_numpy(dtype=np.float64),
        tokens=tokens,
        notes=(*notes, left_out) if left_out else notes,
        left_out=left_out,
    )


def curves_from_store(store, metric: str, fractions: np.ndarray, group: str | None = None,
                      role: str | None = "rung", compute: str = "auto") -> Curves:
    """Every run's `metric` at `fractions` of its planned steps, every edit of its plan applied (running runs
    included); compute on the `compute` axis (`COMPUTE_AXES`)."""
    runs = _store_runs(store, group, role, finished=False)
    hist = _store_history(store, runs, metric)
    flops, notes = compute_per_token(runs, compute)
    notes += _ratios_note(runs)
    names, totals, rows, reached = [], [], [], []
    for (_, run), f in zip(runs.iterrows(), flops):
        h = hist[hist["run_id"] == run["run_id"]]
        if h.empty:
            continue
        names.append(run["name"])
        totals.append(f * float(run["planned_tokens"]))
        done = h["step"].to_numpy(float) / float(run["stop_after_steps"])  # of the plan it ran, edits applied
        reached.append(float(done.max()))
        rows.append(fits.sample_curve(at_end(done, run["state"] == "finished"), h["value"].to_numpy(), 1.0, fractions,
                                      ROUNDING))
    return Curves(names, np.asarray(totals), np.asarray(fractions, dtype=np.float64), np.vstack(rows),
                  np.asarray(reached), notes)


def _ratios_note(runs: pd.DataFrame) -> tuple[str, ...]:
    """A note when the runs train at several token ratios: the per-fraction law holds for one."""
    n, d = (pd.to_numeric(runs[c], errors="coerce").astype("float64").to_numpy() for c in ("active_params", "planned_tokens"))
    return ratios_note(n, d, "the per-fraction law", f"`ladder predict` fits the runs at its target's ratio; {ONE_RATIO_GROUP}")


ONE_RATIO_GROUP = ("a store's runs of one ratio are fitted alone where they are a group of their own: --group NAME, "
                   "with the group given at import or pull (--coord group=NAME, or group: in --coords)")
"""How a fit of a store's runs keeps to one token ratio (a store has no --where)."""


def ratios_note(n_params: np.ndarray, tokens: np.ndarray, law: str, how: str) -> tuple[str, ...]:
    """A note when the runs train at several token ratios (tokens per parameter more than 10% apart): `law`
    holds for one, and `how` says how to fit one."""
    ratio = np.asarray(tokens, dtype=np.float64) / np.asarray(n_params, dtype=np.float64)
    ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
    if ratio.size < 2 or ratio.max() <= ONE_RATIO * ratio.min():
        return ()
    kinds = np.unique(np.round(np.log(ratio) / np.log(ONE_RATIO)))
    return (f"the runs train at {kinds.size} token ratios ({ratio.min():.3g}–{ratio.max():.3g} tokens per parameter), "
            f"and {law} holds for one: its fit mixes them ({how})",)


def lr_curves_from_store(store, metric: str, group: str | None = None, role: str | None = "rung",
                         scale: str = "fit_flops_per_token") -> list[fits.Curve]:
    """Each run's `metric` with the LR of every step, rebuilt from the schedule in its config (edits included), or
    where it declares none from the LR it logged, as `ladder predict` reads it; `scale` names the runs-table column
    the curve laws' power laws use."""
    from ladder import metrics as keys
    from ladder.data.runview import logged_lr
    from ladder.data.sources.coords import coordinates_from_config

    runs = _store_runs(store, group, role, finished=False)
    if scale not in runs.columns or runs[scale].isna().any():
        raise LadderError(f"--scale {scale!r}: not a column of the runs table, or missing for some runs")
    hist = _store_history(store, runs, metric)
    out = []
    for _, run in runs.iterrows():
        h = hist[(hist["run_id"] == run["run_id"]) & (hist["step"] > 0)]
        if h.empty:
            continue
        _, _, schedule = coordinates_from_config(json.loads(run["config_json"] or "{}"))
        steps = h["step"].to_numpy(dtype=np.int64)
        if schedule is not None:
            lrs = schedule.lrs(0, max(int(steps.max()), schedule.horizon))
        else:
            lrs, _ = logged_lr(store, str(run["run_id"]), max(int(run["stop_after_steps"]), int(steps.max())))
            if lrs is None:
                raise LadderError(f"run {run['name']!r}: no LR schedule in its config and no {keys.LEARNING_RATE} "
                                  "logged; the curve laws need one: log the LR, or declare the schedule (schedule: "
                                  "{peak_lr, total_steps, warmup_steps, decay, min_lr_ratio} in a --coords file)")
        out.append(fits.Curve(steps, h["value"].to_numpy(), lrs, float(run[scale]), str(run["name"])))
    return out

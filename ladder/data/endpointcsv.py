"""Plain endpoint CSVs for `ladder fit surface`: telling a table of one row per run from one of
checkpoints, and reading the targets (`params,tokens`) to predict.

`ladder.data.fitdata` reads the data itself; this module only decides its run column and reads the
targets, with errors that name the file, the column and the value (`LadderError`).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.config.limits import MAX_PARAMS, MAX_TOKENS
from ladder.data import csvfile
from ladder.errors import LadderError

DEFAULT_RUN_COL = "run_id"


def run_column(header: list[str] | None, run: str | None, step: str | None) -> str:
    """The run column to read a CSV with `header` (its `column_names`) by: `run` when the user named one ('' for
    none); else `run_id`, unless the file has neither `run_id` nor the `step` column, which makes it a table of
    one row per run ('')."""
    if run is not None:
        return run
    if header is None:
        return DEFAULT_RUN_COL  # unreadable: the data reader says why
    checkpoints = DEFAULT_RUN_COL in header or (step and step in header)
    return DEFAULT_RUN_COL if checkpoints else ""


def column_names(path: str | Path) -> list[str] | None:
    """The CSV's column names as its header gives them; None where it cannot be read (the data reader says why)."""
    try:
        p = Path(path)
        _, content = csvfile.records(p, csvfile.text(p))  # as the data reader reads it: a semicolon file too
        return [str(c).strip() for c in pd.read_csv(io.StringIO(content), nrows=0).columns]
    except (LadderError, OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None


def read_targets(path: str | Path, params: str = "params", tokens: str = "tokens",
                 where: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray, list[dict[str, str]], str]:
    """Parameter counts N and tokens D of the targets in the CSV at `path` (one row per target), each row's other
    columns as written (a name, a note), to carry into the output beside its prediction, and a note naming the
    targets `where` left out ("" where none).

    `where` (the fit's --where COLUMN=VALUE) keeps the targets of the ladder fitted: each condition whose
    column the targets have picks their rows too; a condition on a column they lack leaves them all, and a
    target whose cell in that column is blank is kept (it names no other ladder)."""
    p = Path(path)
    df = csvfile.cells(p, f"--predict-csv takes a CSV of the targets, one row per target with columns {params},{tokens}")
    given, left, by = len(df), [], []
    for condition in where:
        col = condition.partition("=")[0].strip()
        if col in df.columns:
            kept = _targets_where(df, f"{p} (targets)", condition)
            gone = [f"line {i} ({col} {str(v).strip()!r})" for i, v in df[col].drop(kept.index).items()]
            left += gone
            by += [f"--where {condition}"] if gone else []
            df = kept
    notes = [f"{p}: {len(left)} of {given} targets left out by {', '.join(by)}: {', '.join(left)}"] if left else []
    notes += _repeated(df, p)
    # --params-col / --tokens-col name the fitted runs' columns; targets that keep the plain names are read by them
    params, tokens = (c if c in df.columns or plain not in df.columns else plain
                      for c, plain in ((params, "params"), (tokens, "tokens")))
    for col, plain, what in ((params, "params", "parameter counts N"), (tokens, "tokens", "token counts D")):
        if col not in df.columns:  # the options name the runs' columns: a targets' column is renamed, not named
            names = [str(c) for c in df.columns]
            other = csvfile.similar_column(plain, names)
            raise LadderError(f"{p}: the targets have no column {plain!r}" + (f" or {col!r}" if col != plain else "")
                              + f" for their {what}; the file has {csvfile.shown_columns(names)}; "
                              + (f"rename its column {other!r} to {plain!r}" if other else f"name that column {plain!r}"))
    where = f"{p} (targets)"
    labels = df.drop(columns=[params, tokens]).apply(_numbers_if_all).to_dict("records")
    return (csvfile.numbers(df, params, where, most=MAX_PARAMS, least=1.0).to_numpy(np.float64),
            csvfile.numbers(df, tokens, where, most=MAX_TOKENS, least=1.0).to_numpy(np.float64), labels, "; ".join(notes))


def _repeated(df: pd.DataFrame, path: Path) -> list[str]:
    """A note naming the lines of targets that are the same in every column (each predicted, as given: a row written
    twice?)."""
    lines: dict[tuple, list[int]] = {}
    for i, row in df.apply(lambda c: c.astype(str).str.strip()).iterrows():
        lines.setdefault(tuple(row), []).append(int(i))
    same = [f"lines {', '.join(map(str, at[:-1]))} and {at[-1]}" for at in lines.values() if len(at) > 1]
    if not same:
        return []
    return [f"{path}: {'; '.join(same[:3])}{' ...' if len(same) > 3 else ''} give the same target in every column: "
            "each line is predicted, as given (a row written twice?)"]


def _numbers_if_all(column: pd.Series) -> pd.Series:
    """A column of the targets as numbers where every filled cell is one (an actual loss to compare with, say:
    a number in JSON, not text); else as written, and so is a column of codes with leading zeros ("007": a
    number would come back as 7). Blank and NaN cells of a number column are None."""
    text = column.str.strip()
    filled = (text != "") & (text.str.lower() != "nan")  # NaN is how pandas and numpy write a missing number
    values = pd.to_numeric(column.where(filled), errors="coerce")
    if not filled.any() or values[filled].isna().any() or text.str.match(r"[+-]?0\d").any():
        return column
    return values.astype(object).where(filled, None)


def _targets_where(df: pd.DataFrame, where: str, condition: str) -> pd.DataFrame:
    """The targets whose column holds the value of `condition`, and those whose cell there is blank."""
    from ladder.data.fitdata import where_rows  # it imports fits (scipy): not at the CLI's start

    col = condition.partition("=")[0].strip()
    return where_rows(df, where, condition, also=df[col].isna() | (df[col].astype(str).str.strip() == ""))

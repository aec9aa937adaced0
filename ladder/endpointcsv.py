"""Plain endpoint CSVs for `ladder fit surface`: telling a table of one row per run from one of
checkpoints, and reading the targets (`params,tokens`) to predict.

`ladder.fitdata` reads the data itself; this module only decides its run column and reads the
targets, with errors that name the file, the column and the value (`LadderError`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ladder.errors import LadderError

DEFAULT_RUN_COL = "run_id"


def run_column(path: str | Path, run: str | None, step: str | None) -> str:
    """The run column to read `path` with: `run` when the user named one ('' for none); else
    `run_id`, unless the file has neither `run_id` nor the `step` column, which makes it a table
    of one row per run ('')."""
    if run is not None:
        return run
    try:
        header = pd.read_csv(path, nrows=0).columns
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return DEFAULT_RUN_COL  # unreadable: the data reader says why
    checkpoints = DEFAULT_RUN_COL in header or (step and step in header)
    return DEFAULT_RUN_COL if checkpoints else ""


def read_targets(path: str | Path, params: str = "params", tokens: str = "tokens") -> tuple[np.ndarray, np.ndarray]:
    """Parameter counts N and tokens D of the targets in the CSV at `path` (one row per target)."""
    p = Path(path)
    what = f"give one row per target with columns {params},{tokens}"
    if not p.is_file():
        raise LadderError(f"{p}: no such file; pass the targets with --predict-csv FILE ({what})")
    try:
        df = pd.read_csv(p)
    except pd.errors.EmptyDataError:
        df = pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise LadderError(f"{p}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    if df.empty:
        raise LadderError(f"{p}: no targets in the file; {what}")
    return _positive(df, params, p), _positive(df, tokens, p)


def _positive(df: pd.DataFrame, col: str, path: Path) -> np.ndarray:
    if col not in df.columns:
        raise LadderError(f"{path}: no column {col!r} in the targets; the file has {', '.join(map(str, df.columns))}")
    values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) | (values <= 0)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise LadderError(
            f"{path}: column {col!r} has {df[col].iloc[i]!r} in line {i + 2}; targets need positive numbers"
        )
    return values

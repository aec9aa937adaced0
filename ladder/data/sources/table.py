"""The one table format every metric source produces, and what a source says about a run.

Rows are long: one logged value per row, in the order the run logged them:

- ``seq`` (int64): log order within one read (rows from later in the log have higher numbers);
- ``step`` (int64): optimizer steps completed when the value was logged;
- ``metric`` (str): the key as logged (nested dicts joined with ``.``, as wandb shows them);
- ``value`` (float64): NaN and ±inf kept as logged;
- ``tokens`` (float64): tokens seen at that step when the source logs them, else NaN.

A source never decides which of two values at a step is right, or what a rewind means: it passes
rows on in log order and `ladder.data.resolve` settles them, once, for every source.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder import runfiles
from ladder.errors import LadderError

RAW_COLUMNS = ("seq", "step", "metric", "value", "tokens")
STATES = ("finished", "crashed", "running")
MAX_INT = 2**63 - 1
"""The largest step, token count or parameter count the store holds (int64)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class RunRef:
    """A run a source can read, as listed before reading its history."""

    run_id: str
    source: str
    """Where it comes from, e.g. ``wandb:entity/project``, ``offline:/abs/runs/NAME``, ``local:/abs/runs/NAME``:
    the run's own place (a local run's folder), the same whichever folder above it a pull was given."""
    label: str = ""
    """How messages name it (its name, or a path)."""
    name: str | None = None
    """Its name when the listing knows it."""
    config: dict[str, Any] | None = None
    """Its config when the listing already holds it (wandb cloud), else None until read."""
    handle: Any = None
    """Whatever the source needs to read it (files, an API object)."""
    problem: str = ""
    """Why it cannot be read at all (a damaged config), so that a pull skips it by name and reads the rest."""


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
    whole: bool = False
    """The rows are all the source holds of the run (a table read again): what the store has beyond them was
    taken out of the source, not left behind by a restart."""
    last_write: float | None = None
    """Unix seconds of the run's newest write the source can see (its files' change time, the wandb run's last
    heartbeat), for how long a running run has been silent; None where the source keeps no such clock."""


def same_step_key(cursor: dict[str, Any], step_key: str) -> None:
    """Refuse to read a run on with another step key than its stored rows were read with: its new rows would land
    at other steps beside the old ones (a cursor from before the key was kept is taken as read with `_step`)."""
    was = cursor.get("step_key", "_step")
    if was != step_key:
        raise LadderError(f"it was pulled with --step-key {was!r}, and this read gives {step_key!r}: give --step-key "
                          f"{was} again (or pull it with --full to read it anew with {step_key!r})")


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


class Skipped:
    """What a read of a wandb run left out: rows without the step key (and the keys they log), and keys whose values
    are not numbers; the offline reader and the cloud reader say it in the same words."""

    def __init__(self, step_key: str) -> None:
        self.step_key = step_key
        self.without_step = 0
        self.keys_without_step: set[str] = set()
        self.text: Counter[str] = Counter()

    def row_without_step(self, keys: Iterable[str]) -> None:
        self.without_step += 1
        if len(self.keys_without_step) < 50:
            self.keys_without_step.update(k for k in keys if not k.startswith("_"))

    def nothing_stored(self) -> LadderError:
        """The refusal of a run none of whose rows has the step key (nothing of it can be stored)."""
        return LadderError(f"none of its {self.without_step:,} history rows has the step key '{self.step_key}' "
                           f"(--step-key), so nothing of it was stored; its rows log {self._logged()}: give --step-key "
                           "the key of the optimizer step, or leave it out for wandb's own step (_step)")

    def warnings(self) -> list[str]:
        out = []
        if self.without_step:
            out.append(f"{self.without_step:,} history rows have no '{self.step_key}' (--step-key) and were skipped; "
                       f"they log {self._logged()}")
        if self.text:
            keys = ", ".join(sorted(self.text)[:5]) + (", ..." if len(self.text) > 5 else "")
            out.append(f"values that are not numbers (true/false, tables, media, text) were skipped for: {keys}")
        return out

    def _logged(self) -> str:
        named = sorted(self.keys_without_step, key=lambda k: ("step" not in k.lower(), k))  # a step's key first
        return ", ".join(repr(k) for k in named[:8]) + (", ..." if len(named) > 8 else "") or "no keys"


def as_number(value: Any) -> float | None:
    """A logged value as a float, or None when it is not a number (true/false, text, a table, an image)."""
    if isinstance(value, bool):
        return None  # a flag: `import csv` refuses "true" as a value, and no source stores it as 1.0
    if isinstance(value, (int, float)):
        return finite_or_nan(value, "value", "a logged value")
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


SHORT_OF_PLAN = 0.98
"""A run marked finished whose last logged step is below this share of its planned steps stopped short of its plan."""

FAR_PAST_PLAN = 1.5
"""A table's run whose steps reach this many times its plan is refused (steps counted in tokens, or another
run's plan); a last eval a little past the plan (a checkpoint at step 256 of 250) is kept, with a warning."""

FAR_SHORT_OF_PLAN = 0.5
"""A finished wandb run read with wandb's own step (``_step``) whose last step is below this share of its plan most
likely counts log calls, not optimizer steps."""


def step_key_hint(rows: pd.DataFrame, last_step: int, planned: int) -> str:
    """What to say of a finished run read with wandb's own step that ends far short of its `planned` steps: ``_step``
    counts the run's log calls, so a trainer that logs every few steps without ``step=`` ends there. The keys of
    `rows` (a raw table) whose values are whole numbers ending past `last_step` are named where they look like the
    optimizer step: their name says step, or they end near the plan."""
    value = rows["value"].to_numpy(np.float64)
    per_key = pd.DataFrame({"whole": np.isfinite(value) & (value == np.round(value)), "last": value}).groupby(
        rows["metric"].astype(str).to_numpy()).agg(whole=("whole", "all"), last=("last", "max"))
    named = per_key.index.str.lower().str.contains("step")
    near = (per_key["last"] >= planned / 2) & (per_key["last"] <= planned * 2)
    looks = per_key[per_key["whole"] & (per_key["last"] > last_step) & (named | near)]
    ranked = sorted(looks.index, key=lambda k: ("step" not in k.lower(), abs(looks.at[k, "last"] - planned)))
    shown = ", ".join(f"{k!r} (last {looks.at[k, 'last']:,.0f})" for k in ranked[:3])
    return (f"finished at step {last_step:,}, {last_step / planned:.1%} of its {planned:,} planned steps: wandb's own "
            "step (_step) counts log calls, not optimizer steps; if the run logs its optimizer step under a key, pull "
            "again with --full --step-key KEY " + (f"(keys that look like it: {shown})" if shown else
                                                   "(`ladder history RUN --metric all` lists the keys it logs)"))


STATES = {"finished": "finished", "running": "running", "pending": "running", "preempting": "running",
          "crashed": "crashed", "failed": "crashed", "killed": "crashed", "preempted": "crashed"}
"""Run states as wandb and the trainer spell them (lower case), and what each means here."""


def map_state(text: str) -> str:
    """A run state as wandb and the trainer spell it, mapped to finished / crashed / running."""
    return STATES.get((text or "").strip().lower(), "crashed")  # a state wandb adds later: the run stopped


def table_state(text: Any, where: str) -> str:
    """A state a user wrote in a table, mapped as `map_state` does; one it does not know is a `LadderError`
    (a user's word for a finished run, such as ``done``, must not read as a crash)."""
    state = str(text).strip().lower()
    if state not in STATES:
        raise LadderError(f"{where}: state {text!r} is not one of {', '.join(STATES)}; write finished for a run "
                          "that ran its plan, running for one still training, crashed for one that stopped early")
    return STATES[state]


def whole_count(value: Any, field: str, where: str) -> int:
    """A step or token count as an int in 0..2^63-1; anything else is a `LadderError` naming `where`.

    Floats are accepted when whole (1000.0), since JSON writers and tables often hold counts as floats.
    """
    if isinstance(value, np.generic):
        value = value.item()
    number = value
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise LadderError(f"{where}: {field} {value!r} is not a number")
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or value != math.floor(value):
            raise LadderError(f"{where}: {field} {value!r} is not a whole number")
        if abs(value) >= 2.0**63:
            raise LadderError(f"{where}: {field} {value!r} is out of range (0 to 2^63-1)")
        number = int(value)
    number = int(number)
    if number < 0 or number > MAX_INT:
        raise LadderError(f"{where}: {field} {_short(value)} is out of range (0 to 2^63-1)")
    return number


def finite_or_nan(value: Any, field: str, where: str) -> float:
    """A logged value as a float; an integer too large for a float is a `LadderError` naming `where`."""
    try:
        return float(value)
    except OverflowError:
        raise too_large(field, value, where) from None


def overflowed(text: str) -> bool:
    """Whether a number as written (``1e400``) reads as an inf no run logged: a typo or a unit slip. An inf the
    writer spelt (``Infinity``, ``-inf``) is a value, and so is any text that is no number."""
    try:
        return math.isinf(float(text)) and text.strip().lstrip("+-").lower() not in ("infinity", "inf")
    except ValueError:
        return False


def too_large(field: str, value: Any, where: str) -> LadderError:
    """The error for a number no float holds (``1e400``, an integer of 400 digits): a typo or a unit slip, never an
    inf the run logged (JSON writers spell that ``Infinity``)."""
    return LadderError(f"{where}: {field} {_short(value)} is too large for a float (write Infinity where the run "
                       "logged inf)")


def check_run_id(run_id: str, where: str) -> str:
    """A run id is data (kept as given) but also names files: refuse what no file name should carry."""
    if not run_id or not run_id.strip():
        raise LadderError(f"{where}: empty run id")
    if _CONTROL.search(run_id):
        raise LadderError(f"{where}: run id {run_id!r} holds a control character (NUL, newline, ...); rename the run")
    parts = run_id.replace("\\", "/").split("/")
    if run_id.startswith("/") or any(p in (".", "..") for p in parts):
        raise LadderError(f"{where}: run id {run_id!r} looks like a file path ('..', '.' or a leading '/'); rename the run")
    if len(run_id) > 512:
        raise LadderError(f"{where}: run id of {len(run_id)} characters (at most 512)")
    return run_id


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else f"{text[:12]}...({len(text)} digits)"


TABLE = "csv:"
"""The prefix of a table's source key in the store, parquet files' included (kept: stores hold it)."""
PARQUET = (".parquet", ".pq")


TABLE_FILES = (".csv", ".tsv", *PARQUET)
"""What a table `ladder import csv` reads is named."""


def tables_instead(path: Path, option: str = "") -> str:
    """Where `path`, given a run-folder source (by `option`), is a table or a folder of tables and holds no trainer run:
    how a run written as a table is imported ("" where it is not one)."""
    try:
        if path.is_file():
            tables = [path.name] if path.suffix.lower() in TABLE_FILES else []
        elif path.is_dir() and not any(path.rglob(runfiles.METRICS_FILE)) and not any(path.rglob(runfiles.CONFIG_FILE)):
            tables = sorted(p.name for p in path.iterdir() if p.suffix.lower() in TABLE_FILES)
        else:
            tables = []
    except OSError:
        return ""
    if not tables:
        return ""
    shown = ", ".join(tables[:3]) + (f", ... ({len(tables)} tables)" if len(tables) > 3 else "")
    files = path if path.is_file() else path / f"*{Path(tables[0]).suffix}"
    return (f"{f'{option} ' if option else ''}{path}: {'a table' if path.is_file() else f'holds tables ({shown})'}, not a trainer's run folder; "
            f"import a run written as a table with `ladder import csv {files} --store STORE ...`")


def shown_source(key: str) -> str:
    """A run's source as a user reads it: a parquet table's key says parquet, where the store's key says csv."""
    if key.startswith(TABLE) and key.lower().endswith(PARQUET):
        return "parquet:" + key[len(TABLE):]
    return key

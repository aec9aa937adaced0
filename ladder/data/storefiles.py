"""The store's files and the steps every writer and reader of them shares (`ladder.data.store` has the layout).

The runs table's columns (`RUNS_COLUMNS`) and the history files' schema, the one-rename commit of a new
manifest and the removal of files nothing names, opening and checking history files, runs-table rows and
pending journals. Nothing here holds the lock: `Store` and `StoreWriter` call these under it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ladder.data.resolve import HISTORY_COLUMNS
from ladder.errors import LadderError
from ladder.files import write_text_atomic

FORMAT = 1

RUNS_COLUMNS = {
    "run_id": "str",
    "name": "str",
    "group": "str",
    "role": "str",
    "active_params": "Int64",
    "total_params": "Int64",
    "fit_flops_per_token": "float64",
    "stop_after_steps": "Int64",
    "tokens_per_step": "Int64",
    "planned_tokens": "Int64",
    "state": "str",
    "source": "str",
    "last_step": "Int64",
    "last_fraction": "float64",
    "rows": "int64",
    "pulled_at": "float64",
    "config_json": "str",
    "report_json": "str",
}
"""Columns of `Store.runs`: parameters active / total as DESIGN.md counts them, FLOPs per token for
fits (3 × forward, no output head), planned steps and tokens, the state, where the run came from
(``wandb:ENTITY/PROJECT``, ``offline:DIR``, ``local:RUN_DIR``, ``csv:FILE``: `RunRef.source`),
the last step stored and its fraction (of the plan the run started with), history rows, the pull time
(Unix seconds), the run's full config and the resolve report (JSON). Missing coordinates (declared
unknown) are <NA>."""
INTERNAL = ("cursor_json",)
ROW_KEY = b"ladder.run"
"""Parquet metadata key of a history file holding its run's row (JSON), for `Store.repair`."""
SETTINGS_KEY = b"ladder.settings"
"""Parquet metadata key of a runs table holding the store's metric settings (JSON), for `Store.repair` of a store
whose manifest is lost."""
REPAIR = "`ladder runs --repair --store {root}`"
HISTORY_SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("tokens", pa.int64()),
        ("fraction", pa.float64()),
        ("metric", pa.dictionary(pa.int32(), pa.string())),
        ("value", pa.float64()),
    ]
)


def commit(
    root: Path, manifest: dict[str, Any], rows: list[dict[str, Any]], history: dict[str, str], settings: Any
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Replace `manifest` by one naming a new runs table of `rows`, the `history` files and `settings`; returns
    it and the table. The new runs table is written first under a new name, and the manifest is replaced in one
    rename: a crash before it leaves the store as it was, after it the new store, beside files nothing names
    (the caller, then the next commit, removes them with `collect_garbage`)."""
    table = typed_runs(rows)
    generation = int(manifest.get("generation", 0)) + 1
    runs_name = f"runs-{generation}-{uuid.uuid4().hex[:8]}.parquet"
    tmp = root / (runs_name + ".tmp")  # left by a crash: the next writer removes it (`remove_temporary`)
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), SETTINGS_KEY: json.dumps(settings).encode()})
    pq.write_table(arrow, tmp)
    os.replace(tmp, root / runs_name)
    new = {"format": FORMAT, "generation": generation, "runs": runs_name, "history": history,
           "settings": settings, "committed_at": time.time()}
    write_text_atomic(root / "manifest.json", json.dumps(new, indent=1) + "\n")
    return new, table


def collect_garbage(root: Path, manifest: dict[str, Any]) -> None:
    """Remove files no manifest or pending pull names (readers retry if one vanishes under them)."""
    keep = {manifest["runs"], *manifest["history"].values()}
    for pending in (root / "pending").glob("*.jsonl"):
        keep |= {str(e["history"]) for e in read_journal(pending) if isinstance(e, dict) and "history" in e}
    candidates = [*root.glob("runs-*.parquet*"), *(root / "history").glob("*.parquet*")]
    for path in candidates:
        if str(path.relative_to(root)) not in keep:
            with contextlib.suppress(OSError):  # the commit is done: what cannot go (a folder) just stays
                path.unlink()


class DamagedHistory(Exception):
    """A committed history file that cannot be read as one (`Store.history` says what to do)."""

    def __init__(self, run_id: str, path: Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.run_id, self.path, self.problem = run_id, path, problem


def open_history(path: Path, run_id: str) -> pa.Table:
    """One run's history file as a table of exactly `HISTORY_SCHEMA`; a missing file is a
    `FileNotFoundError` (a commit may have removed it meanwhile), any other problem `DamagedHistory`."""
    if path.is_dir():
        raise DamagedHistory(run_id, path, "a folder, not a file")
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:  # pyarrow's errors are OSError or ValueError subclasses
        problem = first_line(exc).replace(f"Could not open Parquet input source '{path}': ", "")
        raise DamagedHistory(run_id, path, problem) from None
    problem = schema_problem(table.schema)
    if problem:
        raise DamagedHistory(run_id, path, problem)
    # The same columns, types and order in every file, so histories concatenate without surprises.
    return pa.Table.from_arrays([table[c] for c in HISTORY_COLUMNS], schema=HISTORY_SCHEMA)


def schema_problem(schema: pa.Schema) -> str:
    """What keeps a history file's columns from being `HISTORY_SCHEMA`, or "" when nothing does."""
    for want in HISTORY_SCHEMA:
        if want.name not in schema.names:
            return f"no column {want.name!r}"
        got = schema.field(want.name).type
        if got != want.type:
            return f"column {want.name!r} holds {got}, not {want.type}"
    return ""


def typed_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=[*RUNS_COLUMNS, *INTERNAL])
    for column, dtype in RUNS_COLUMNS.items():
        table[column] = table[column].astype(dtype) if len(table) else pd.Series([], dtype=dtype)
    table["cursor_json"] = table["cursor_json"].astype("str")
    return table.sort_values(["group", "name", "run_id"], kind="stable").reset_index(drop=True)


def read_journal(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue  # cut short by a crash: the run it named was not staged
    return entries


def committed_history(root: Path) -> list[Path]:
    """The history files no pending pull stages: what a committed store holds, whatever its manifest says."""
    pending = set()
    for journal in (root / "pending").glob("*.jsonl"):
        pending |= {str(e.get("history")) for e in read_journal(journal) if isinstance(e, dict)}
    return [p for p in sorted((root / "history").glob("*.parquet")) if str(p.relative_to(root)) not in pending]


def ever_committed(root: Path) -> bool:
    """Whether `root` holds what only a commit writes, a runs table (one of a first commit cut before its
    manifest, whose runs a pending pull still stages, aside): a store whose manifest is lost, if it has none."""
    tables = [p.name for p in root.glob("runs-*.parquet")]
    return any(not name.startswith("runs-1-") for name in tables) or bool(tables and committed_history(root))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def store_name(name: Any) -> bool:
    """A file name a manifest may hold: a relative path inside the store, no way out of it."""
    return isinstance(name, str) and bool(name) and not name.startswith("/") and ".." not in name.split("/")


def check_row(row: Any) -> None:
    """A runs-table row (JSON values) whose every value fits its column (`RUNS_COLUMNS`)."""
    if not isinstance(row, dict) or not isinstance(row.get("run_id"), str):
        raise LadderError("a run row without a run id")
    for column, dtype in RUNS_COLUMNS.items():
        value = row.get(column)
        if value is None:
            ok = column not in ("run_id", "rows")
        elif dtype in ("Int64", "int64"):
            ok = isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
        elif dtype == "float64":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise LadderError(f"run {row['run_id']!r}: {column} = {str(value)[:40]!r} does not fit the runs table")


def remove_temporary(root: Path) -> None:
    """Temporary files a killed writer left (the caller holds the lock, so none is being written)."""
    for path in [*root.glob(".*.tmp"), *root.glob("*.tmp"), *(root / "history").glob("*.tmp")]:
        with contextlib.suppress(OSError):
            path.unlink()

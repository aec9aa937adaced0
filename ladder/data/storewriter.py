"""The one writer of a store: stages the runs of one pull and commits them together (`Store.writer`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ladder.data.resolve import HISTORY_COLUMNS, MetricSettings, ResolveReport
from ladder.data.storefiles import (
    HISTORY_SCHEMA,
    REPAIR,
    ROW_KEY,
    DamagedHistory,
    check_row,
    collect_garbage,
    commit,
    open_history,
    read_journal,
    store_name,
)
from ladder.errors import LadderError

if TYPE_CHECKING:
    from ladder.data.store import Store


class StoreWriter:
    """Stages runs of one pull and commits them together."""

    def __init__(self, store: Store, key: str, flags: dict[str, Any] | None = None):
        self.store = store
        self.key = key
        self.root = store.root
        self._manifest = store._manifest()
        self._runs = store._runs_table(self._manifest).set_index("run_id", drop=False)
        self._pending_path = self.root / "pending" / f"{_slug(key)[:40]}-{_digest(key)}.jsonl"
        self.flags = _digest(json.dumps(flags or {}, sort_keys=True, default=str))
        self.staged: dict[str, dict[str, Any]] = {}
        self.settings_update: dict[str, Any] | None = None
        self.notes: list[str] = []
        """What happened to runs an interrupted pull had staged (discarded, and why)."""
        _drop_torn_line(self._pending_path)
        self._resume(read_journal(self._pending_path))

    def _resume(self, entries: list[dict[str, Any]]) -> None:
        """Take over the runs an interrupted run of this pull staged, when they are still good."""
        entries = [e for e in entries if isinstance(e, dict) and e.get("key") == self.key]
        staged = [e for e in entries if "run_id" in e]
        flags = [e["flags"] for e in entries if "flags" in e]
        if flags and flags[0] != self.flags:
            self._drop_pending()
            if staged:
                self.notes.append(
                    f"{_n_runs(len(staged))} staged by an interrupted pull discarded (its flags differ from these, "
                    "or its source changed since: a file edited); read again now"
                )
            return
        bad = 0
        for entry in entries:
            if "settings" in entry:
                try:
                    MetricSettings(**entry["settings"])
                    self.settings_update = entry["settings"]
                except (TypeError, LadderError):
                    bad += 1
            if "run_id" not in entry:
                continue
            if not _entry_usable(self.root, entry):
                bad += 1
            elif entry.get("base") == self._history_file(entry["run_id"]):
                # Staged against the history committed now; another pull that committed this run
                # since makes the staged copy stale, so it is read again instead.
                self.staged[entry["run_id"]] = entry
        if bad:
            self.notes.append(f"{bad} damaged line(s) in {self._pending_path} ignored; their runs are read again")

    def settings(self) -> MetricSettings:
        if self.settings_update is not None:
            return MetricSettings(**self.settings_update)
        return self.store.settings()

    def set_settings(self, settings: MetricSettings) -> None:
        self.settings_update = {"fit_metric": settings.fit_metric, "renames": dict(settings.renames)}
        self._journal({"key": self.key, "settings": self.settings_update})

    def stored(self, run_id: str) -> dict[str, Any] | None:
        """The committed runs-table row of `run_id` (with its cursor), or None."""
        if run_id not in self._runs.index:
            return None
        return self._runs.loc[run_id].to_dict()

    def _history_file(self, run_id: str) -> str | None:
        return self._manifest.get("history", {}).get(run_id)

    def stored_history(self, run_id: str) -> pd.DataFrame | None:
        """The committed history of `run_id`, to extend; a `LadderError` when its file is damaged (the pull
        then skips that run and leaves its file as it is)."""
        name = self._history_file(run_id)
        if not name:
            return None
        try:
            return open_history(self.root / name, run_id).to_pandas()
        except DamagedHistory as exc:
            raise LadderError(
                f"{exc.path}: damaged history file ({exc.problem}); read the run anew (`ladder pull` with --full, "
                f"`ladder import` with --replace), or {REPAIR.format(root=self.root)} drops it so that the next pull "
                "reads it again"
            ) from None

    def stored_report(self, run_id: str) -> ResolveReport | None:
        row = self.stored(run_id)
        return ResolveReport.from_json(json.loads(row["report_json"])) if row and row["report_json"] else None

    def stage(self, row: dict[str, Any], history: pd.DataFrame) -> None:
        """Write one run's full resolved history and remember it for the commit."""
        run_id = row["run_id"]
        row = _jsonable(row)
        check_row(row)  # before anything is written: a row the runs table cannot hold never gets staged
        name = f"history/{_slug(run_id)[:40]}-{uuid.uuid4().hex[:12]}.parquet"
        table = pa.Table.from_pandas(history.loc[:, list(HISTORY_COLUMNS)], schema=HISTORY_SCHEMA, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), ROW_KEY: json.dumps(row).encode()})
        tmp = self.root / (name + ".tmp")
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, self.root / name)
        entry = {"key": self.key, "run_id": run_id, "row": row, "history": name, "base": self._history_file(run_id)}
        self._journal(entry)
        self.staged[run_id] = entry

    def commit(self) -> int:
        """Make every staged run visible at once; returns the new generation."""
        if not self.staged and self.settings_update is None:
            self._drop_pending()
            return int(self._manifest.get("generation", 0))
        rows = self._runs.to_dict("index")
        history = dict(self._manifest.get("history", {}))
        for run_id, entry in self.staged.items():
            rows[run_id] = entry["row"]
            history[run_id] = entry["history"]
        settings = self.settings_update if self.settings_update is not None else self._manifest.get("settings")
        manifest, table = commit(self.root, self._manifest, list(rows.values()), history, settings)
        generation = manifest["generation"]
        self._manifest = manifest
        self._runs = table.set_index("run_id", drop=False)
        self.staged = {}
        self.settings_update = None
        self._drop_pending()
        collect_garbage(self.root, self._manifest)
        return generation

    def _journal(self, entry: dict[str, Any]) -> None:
        """Append one line; a line cut short by a crash is ignored when the pull resumes."""
        self._pending_path.parent.mkdir(exist_ok=True)
        fresh = not self._pending_path.exists() or not self._pending_path.stat().st_size
        with open(self._pending_path, "a", encoding="utf-8") as f:
            if fresh:
                f.write(json.dumps({"key": self.key, "flags": self.flags}) + "\n")
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def discard(self) -> None:
        """Forget what this pull staged: nothing of it is committed, and a later pull does not take it over."""
        self.staged.clear()
        self._drop_pending()

    def _drop_pending(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._pending_path.unlink()


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in row.items():
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            out[k] = None
        elif isinstance(v, np.generic):
            out[k] = v.item()
        else:
            out[k] = v
    return out


def _drop_torn_line(path: Path) -> None:
    """Cut a journal back to its last whole line, so new lines do not follow a torn one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    whole = data.rfind(b"\n") + 1
    if whole < len(data):
        with open(path, "r+b") as f:
            f.truncate(whole)


def _slug(text: str) -> str:
    """A file-name part from any text: letters, digits, ``_.-`` only, never starting with a dot."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "run"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _n_runs(n: int) -> str:
    return f"{n:,} run" + ("" if n == 1 else "s")


def _entry_usable(root: Path, entry: dict[str, Any]) -> bool:
    """A staged journal line that can be committed: its history file is there and its row is valid."""
    try:
        if not isinstance(entry.get("row"), dict) or not store_name(entry.get("history")):
            return False
        if not (root / entry["history"]).is_file() or entry["row"].get("run_id") != entry["run_id"]:
            return False
        check_row(entry["row"])
        return True
    except (LadderError, TypeError, OSError):
        return False

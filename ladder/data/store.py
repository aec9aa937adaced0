"""The local store: the ``runs`` and ``history`` tables of DESIGN.md, as parquet under one folder.

Layout (default ``.ladder/``)::

    manifest.json           what is committed: the runs file, one history file per run, the settings
    runs-<id>.parquet       one row per run (`RUNS_COLUMNS`)
    history/<run>-<id>.parquet   one run's resolved history: step, tokens, fraction, metric, value
    pending/<pull>.jsonl    runs a pull has staged but not committed yet (one line each)

Files are never changed once written. A pull stages each run it has read (a new history file and a
line in its pending file) and commits them all by replacing ``manifest.json`` in one rename, so a
pull interrupted at any point leaves the store as it was, and the same pull run again picks up the
runs it had staged instead of fetching them twice, when it runs with the same flags (the pending file
starts with their digest; other flags discard what was staged). Readers take the manifest and the
files it names; one writer at a time holds ``.lock`` and removes temporary files a killed writer left.
`Store.remove` takes runs out with the same one-rename commit; their history files go after it.

Readers trust no file: a damaged manifest, runs table or history file is a `LadderError` naming the
file and the way out. Each history file also carries its run's row (parquet metadata), so
`Store.repair` can rebuild the manifest and the runs table, and drops only the runs whose own file is
damaged (to be pulled again).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ladder.config.runconfig import RunConfig
from ladder.data.resolve import HISTORY_COLUMNS, MetricSettings, ResolveReport
from ladder.errors import LadderError
from ladder.files import held, write_text_atomic

FORMAT = 1
DEFAULT_ROOT = ".ladder"

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
_INTERNAL = ("cursor_json",)
GIVEN_KEY = "ladder_given"
"""Key of a stored run's config that keeps the coordinates the user gave for it (--coord, --coords), so that
a later pull without them does not replace them with the run's own config; `Store.config` leaves it out."""
_ROW_KEY = b"ladder.run"
"""Parquet metadata key of a history file holding its run's row (JSON), for `Store.repair`."""
_REPAIR = "`ladder runs --repair --store {root}`"
_HISTORY_SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("tokens", pa.int64()),
        ("fraction", pa.float64()),
        ("metric", pa.dictionary(pa.int32(), pa.string())),
        ("value", pa.float64()),
    ]
)

PULL_FIRST = "pull the runs first (`ladder pull local runs/`, or `ladder import csv FILE` for a table), or give --store"
"""What `Store.must_exist` tells a command that reads runs to do where the store is missing."""


class Store:
    """Runs and their metric histories, read and written atomically."""

    def __init__(self, root: str | os.PathLike = DEFAULT_ROOT):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    # ---- read side ------------------------------------------------------------------------------
    def exists(self) -> bool:
        self._check_root()
        return (self.root / "manifest.json").is_file()

    def must_exist(self, how: str) -> Store:
        """This store; where it does not exist yet, a `LadderError`: "no store here", then `how` to make one, or
        that a first pull into it stopped before it committed (its staged runs wait in pending/)."""
        if self.exists():
            return self
        staged = (self.root / "pending").is_dir() and any((self.root / "pending").glob("*.jsonl"))
        if staged:
            raise LadderError(f"{self.root}: no store here yet: a first pull or import into it stopped before "
                              "committing; run that command again to go on from the runs it staged")
        raise LadderError(f"{self.root}: no store here; {how}")

    def settings(self) -> MetricSettings:
        data = self._manifest().get("settings") or {}
        return MetricSettings(**data) if data else MetricSettings()

    def damaged(self) -> list[tuple[str, str]]:
        """(run id, problem) for each committed history file that cannot be opened (a cheap check of
        each file's footer; `repair` reads them whole)."""
        out = []
        for run_id, name in self._manifest().get("history", {}).items():
            try:
                problem = _schema_problem(pq.read_schema(self.root / name))
            except (OSError, ValueError) as exc:
                problem = _first_line(exc)
            if problem:
                out.append((run_id, f"{self.root / name}: {problem}"))
        return out

    def runs(self) -> pd.DataFrame:
        """One row per run, sorted by group and name (`RUNS_COLUMNS`)."""
        table = self._runs_table()
        return table.drop(columns=[c for c in _INTERNAL if c in table]).reset_index(drop=True)

    def run(self, id_or_name: str) -> pd.Series:
        """One run by its id or its name; a `LadderError` when unknown or when the name is ambiguous."""
        table = self.runs()
        return table.loc[self._index_of(id_or_name, table)]

    def config(self, id_or_name: str) -> dict[str, Any]:
        """The run's full config as its source gave it (the wandb config, or run.yaml)."""
        config = json.loads(self.run(id_or_name)["config_json"] or "{}")
        config.pop(GIVEN_KEY, None)
        return config

    def run_config(self, id_or_name: str) -> RunConfig | None:
        """The `RunConfig` the run trained with, when its config holds one (this tool's trainer), else None.

        wandb runs carry it under ``run_config``; a local run's config is run.yaml itself.
        """
        config = self.config(id_or_name)
        data = config.get("run_config") if isinstance(config.get("run_config"), dict) else config
        if not {"spec", "schedule", "seq_len", "batch_size"} <= set(data):
            return None
        return RunConfig.from_dict(data, where=f"run {id_or_name} in {self.root}")

    def history(
        self,
        run_ids: list[str] | str | None = None,
        metrics: list[str] | str | None = None,
        *,
        include_nonfinite: bool = False,
    ) -> pd.DataFrame:
        """Long table ``run_id, step, tokens, fraction, metric, value``, by run, metric and step.

        `run_ids` takes ids or names (default: every run). NaN and ±inf values are left out unless
        `include_nonfinite` (the runs table's report counts them).
        """
        for _ in range(3):  # a commit may remove files between reading the manifest and the files
            manifest = self._manifest()
            files = manifest.get("history", {})
            ids = list(files) if run_ids is None else self._resolve_ids(_as_list(run_ids), manifest)
            try:
                return _read_histories(self.root, [(i, files[i]) for i in ids], _as_list(metrics), include_nonfinite)
            except _DamagedHistory as exc:
                raise LadderError(self._damaged_message(exc, manifest)) from None
            except FileNotFoundError as exc:
                if self._manifest().get("generation") == manifest.get("generation"):
                    gone = exc.filename or next((self.root / files[i] for i in ids if not (self.root / files[i]).exists()),
                                                self.root / "history")
                    raise LadderError(
                        f"{gone}: a history file the store names is missing; "
                        f"{_REPAIR.format(root=self.root)} drops its run so it can be pulled again"
                    ) from None
        raise LadderError(f"{self.root}: the store kept changing while being read; try again")

    def repair(self) -> RepairReport:
        """Rebuild what is damaged: the manifest and the runs table from the history files (each holds
        its run's row), dropping the runs whose history file is damaged or missing."""
        with self._locked():
            return _repair(self)

    def remove(self, runs: list[str] | str) -> pd.DataFrame:
        """Take runs (ids or names, as `run` finds them) out of the store, their history files included, in
        one commit; returns their rows (`RUNS_COLUMNS`). Pulling a run again from its source restores it."""
        self.must_exist("nothing to remove")  # before the lock, which would make the folder
        with self._locked():
            manifest = self._manifest()
            table = self._runs_table(manifest)
            gone = table.loc[sorted({self._index_of(r, table) for r in _as_list(runs)})]
            ids = set(gone["run_id"])
            kept = table[~table["run_id"].isin(ids)]
            history = {r: n for r, n in manifest.get("history", {}).items() if r not in ids}
            new, _ = _commit(self.root, manifest, kept.to_dict("records"), history, manifest.get("settings"))
            _collect_garbage(self.root, new)
        return gone.drop(columns=[c for c in _INTERNAL if c in gone]).reset_index(drop=True)

    # ---- write side -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def writer(self, key: str, flags: dict[str, Any] | None = None) -> Iterator[StoreWriter]:
        """The one writer, for the pull named `key` (its source) with `flags` (what changes its result);
        runs staged by an interrupted pull with the same key and flags survive into this one."""
        with self._locked():
            yield StoreWriter(self, key, flags)

    def discard_if_unused(self, keep_folder: bool) -> None:
        """Remove what a failed first pull made of a store here (the folder too, unless `keep_folder`), when it
        holds no run, committed or staged; nothing while another pull holds the lock."""
        try:
            lock = open(self.root / ".lock", "a+")
        except OSError:
            return  # the pull failed before making the folder
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # another pull is writing to it now
            history = self.root / "history"
            if (self.root / "manifest.json").exists() or (history.is_dir() and any(history.iterdir())):
                return
            for journal in (self.root / "pending").glob("*.jsonl"):  # flags only: staged runs are in history/
                journal.unlink(missing_ok=True)
            for path in (self.root / "pending", history):
                with contextlib.suppress(OSError):
                    path.rmdir()
            (self.root / ".lock").unlink(missing_ok=True)
            if not keep_folder:
                with contextlib.suppress(OSError):  # something else is in it: leave the folder
                    self.root.rmdir()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._check_root()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / "history").mkdir(exist_ok=True)
        except OSError as exc:
            raise LadderError(f"{self.root}: cannot write the store there ({exc.strerror})") from None
        with held(self.root / ".lock", f"{self.root}: another pull is writing to this store; wait for it to finish"):
            _remove_temporary(self.root)
            yield

    # ---- internals ------------------------------------------------------------------------------
    def _damaged_message(self, exc: _DamagedHistory, manifest: dict[str, Any]) -> str:
        """What to do about one run's damaged history file: the run, by name when the runs table still
        knows it, and where it was pulled from, so it can be pulled again."""
        run, source = repr(exc.run_id), ""
        with contextlib.suppress(LadderError, KeyError):  # the runs table damaged too, or without the run
            row = self._runs_table(manifest).set_index("run_id").loc[exc.run_id]
            run, source = f"{row['name']!r} (id {exc.run_id})", f" from {row['source']}"
        return (f"{exc.path}: damaged history of run {run} ({exc.problem}); "
                f"{_REPAIR.format(root=self.root)} drops that run from the store, then pull it again{source}")

    def _check_root(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise LadderError(f"{self.root}: not a store folder (it is a file); give --store a folder")
        for name in ("manifest.json", "history"):
            path = self.root / name
            if path.exists() and path.is_dir() == (name == "manifest.json"):
                raise LadderError(f"{path}: expected a {'file' if name == 'manifest.json' else 'folder'}; "
                                  f"{_REPAIR.format(root=self.root)} or pull into a new store")

    def _manifest(self) -> dict[str, Any]:
        path = self.root / "manifest.json"
        if not path.is_file():
            return {"format": FORMAT, "generation": 0, "runs": None, "history": {}}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise LadderError(f"{path}: damaged store manifest ({_first_line(exc)}); {_REPAIR.format(root=self.root)} "
                              "rebuilds it from the run files") from None
        if isinstance(data, dict) and "format" in data and data.get("format") != FORMAT:
            raise LadderError(f"{path}: store format {data.get('format')!r} is not {FORMAT}; pull into a new store")
        problem = _manifest_problem(data)
        if problem:
            raise LadderError(f"{path}: damaged store manifest ({problem}); {_REPAIR.format(root=self.root)} "
                              "rebuilds it from the run files")
        return data

    def _runs_table(self, manifest: dict[str, Any] | None = None) -> pd.DataFrame:
        for _ in range(3):
            manifest = manifest or self._manifest()
            if not manifest.get("runs"):
                return _typed_runs([])
            path = self.root / manifest["runs"]
            try:
                table = pq.read_table(path).to_pandas()
            except FileNotFoundError:
                if self._manifest().get("generation") != manifest.get("generation"):
                    manifest = None  # a commit replaced it meanwhile: read the new manifest
                    continue
                raise LadderError(f"{path}: the store's runs table is missing; "
                                  f"{_REPAIR.format(root=self.root)} rebuilds it") from None
            except (OSError, ValueError) as exc:
                raise LadderError(f"{path}: damaged runs table ({_first_line(exc)}); "
                                  f"{_REPAIR.format(root=self.root)} rebuilds it") from None
            missing = [c for c in [*RUNS_COLUMNS, *_INTERNAL] if c not in table]
            if missing:
                raise LadderError(f"{path}: damaged runs table (no column {missing[0]}); "
                                  f"{_REPAIR.format(root=self.root)} rebuilds it")
            return table
        raise LadderError(f"{self.root}: the store kept changing while being read; try again")

    def _resolve_ids(self, wanted: list[str], manifest: dict[str, Any]) -> list[str]:
        known = manifest.get("history", {})
        table = None if all(w in known for w in wanted) else self._runs_table(manifest)
        return [w if w in known else str(table.loc[self._index_of(w, table), "run_id"]) for w in wanted]

    def _index_of(self, id_or_name: str, table: pd.DataFrame | None = None) -> Any:
        table = self._runs_table() if table is None else table
        hit = table.index[table["run_id"] == id_or_name]
        if not len(hit):
            hit = table.index[table["name"] == id_or_name]
        if len(hit) == 1:
            return hit[0]
        if len(hit) > 1:
            ids = ", ".join(table.loc[hit, "run_id"])
            raise LadderError(f"run name {id_or_name!r} is ambiguous in {self.root} (ids {ids}): the run was pulled "
                              "from two sources; name it by its id, or take one copy out (`ladder runs --remove ID`)")
        raise LadderError(f"no run {id_or_name!r} in {self.root}; `ladder runs --store {self.root}` lists them")


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
        self._resume(_read_journal(self._pending_path))

    def _resume(self, entries: list[dict[str, Any]]) -> None:
        """Take over the runs an interrupted run of this pull staged, when they are still good."""
        entries = [e for e in entries if isinstance(e, dict) and e.get("key") == self.key]
        staged = [e for e in entries if "run_id" in e]
        flags = [e["flags"] for e in entries if "flags" in e]
        if flags and flags[0] != self.flags:
            self._drop_pending()
            if staged:
                self.notes.append(
                    f"{_n_runs(len(staged))} staged by an interrupted pull with other flags discarded; read again with these flags"
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
            return _open_history(self.root / name, run_id).to_pandas()
        except _DamagedHistory as exc:
            raise LadderError(
                f"{exc.path}: damaged history file ({exc.problem}); pull again with --full (reads every run "
                f"anew), or {_REPAIR.format(root=self.root)} drops it so that the next pull reads it again"
            ) from None

    def stored_report(self, run_id: str) -> ResolveReport | None:
        row = self.stored(run_id)
        return ResolveReport.from_json(json.loads(row["report_json"])) if row and row["report_json"] else None

    def stage(self, row: dict[str, Any], history: pd.DataFrame) -> None:
        """Write one run's full resolved history and remember it for the commit."""
        run_id = row["run_id"]
        row = _jsonable(row)
        _check_row(row)  # before anything is written: a row the runs table cannot hold never gets staged
        name = f"history/{_slug(run_id)[:40]}-{uuid.uuid4().hex[:12]}.parquet"
        table = pa.Table.from_pandas(history.loc[:, list(HISTORY_COLUMNS)], schema=_HISTORY_SCHEMA, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), _ROW_KEY: json.dumps(row).encode()})
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
        manifest, table = _commit(self.root, self._manifest, list(rows.values()), history, settings)
        generation = manifest["generation"]
        self._manifest = manifest
        self._runs = table.set_index("run_id", drop=False)
        self.staged = {}
        self.settings_update = None
        self._drop_pending()
        self._collect_garbage()
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

    def _drop_pending(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._pending_path.unlink()

    def _collect_garbage(self) -> None:
        _collect_garbage(self.root, self._manifest)


def _commit(
    root: Path, manifest: dict[str, Any], rows: list[dict[str, Any]], history: dict[str, str], settings: Any
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Replace `manifest` by one naming a new runs table of `rows`, the `history` files and `settings`; returns
    it and the table. The new runs table is written first under a new name, and the manifest is replaced in one
    rename: a crash before it leaves the store as it was, after it the new store, beside files nothing names
    (the caller, then the next commit, removes them with `_collect_garbage`)."""
    table = _typed_runs(rows)
    generation = int(manifest.get("generation", 0)) + 1
    runs_name = f"runs-{generation}-{uuid.uuid4().hex[:8]}.parquet"
    tmp = root / (runs_name + ".tmp")  # left by a crash: the next writer removes it (`_remove_temporary`)
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), tmp)
    os.replace(tmp, root / runs_name)
    new = {"format": FORMAT, "generation": generation, "runs": runs_name, "history": history,
           "settings": settings, "committed_at": time.time()}
    write_text_atomic(root / "manifest.json", json.dumps(new, indent=1) + "\n")
    return new, table


def _collect_garbage(root: Path, manifest: dict[str, Any]) -> None:
    """Remove files no manifest or pending pull names (readers retry if one vanishes under them)."""
    keep = {manifest["runs"], *manifest["history"].values()}
    for pending in (root / "pending").glob("*.jsonl"):
        keep |= {str(e["history"]) for e in _read_journal(pending) if isinstance(e, dict) and "history" in e}
    candidates = [*root.glob("runs-*.parquet*"), *(root / "history").glob("*.parquet*")]
    for path in candidates:
        if str(path.relative_to(root)) not in keep:
            with contextlib.suppress(OSError):  # the commit is done: what cannot go (a folder) just stays
                path.unlink()


def _read_histories(
    root: Path, files: list[tuple[str, str]], metrics: list[str] | None, include_nonfinite: bool
) -> pd.DataFrame:
    tables = []
    for run_id, name in files:
        table = _open_history(root / name, run_id)
        mask = None
        if metrics is not None:
            mask = pc.is_in(table["metric"].combine_chunks().dictionary_decode(), pa.array(metrics, pa.string()))
        if not include_nonfinite:
            finite = pc.is_finite(table["value"])
            mask = finite if mask is None else pc.and_(mask, finite)
        if mask is not None:
            table = table.filter(mask)
        run_col = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(len(table), dtype=np.int32)), pa.array([run_id], pa.string())
        )
        tables.append(table.add_column(0, "run_id", run_col))
    if not tables:
        return _empty_history()
    table = pa.concat_tables(tables).unify_dictionaries().combine_chunks()
    return table.to_pandas()


class _DamagedHistory(Exception):
    """A committed history file that cannot be read as one (`Store.history` says what to do)."""

    def __init__(self, run_id: str, path: Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.run_id, self.path, self.problem = run_id, path, problem


def _open_history(path: Path, run_id: str) -> pa.Table:
    """One run's history file as a table of exactly `_HISTORY_SCHEMA`; a missing file is a
    `FileNotFoundError` (a commit may have removed it meanwhile), any other problem `_DamagedHistory`."""
    if path.is_dir():
        raise _DamagedHistory(run_id, path, "a folder, not a file")
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:  # pyarrow's errors are OSError or ValueError subclasses
        problem = _first_line(exc).replace(f"Could not open Parquet input source '{path}': ", "")
        raise _DamagedHistory(run_id, path, problem) from None
    problem = _schema_problem(table.schema)
    if problem:
        raise _DamagedHistory(run_id, path, problem)
    # The same columns, types and order in every file, so histories concatenate without surprises.
    return pa.Table.from_arrays([table[c] for c in HISTORY_COLUMNS], schema=_HISTORY_SCHEMA)


def _schema_problem(schema: pa.Schema) -> str:
    """What keeps a history file's columns from being `_HISTORY_SCHEMA`, or "" when nothing does."""
    for want in _HISTORY_SCHEMA:
        if want.name not in schema.names:
            return f"no column {want.name!r}"
        got = schema.field(want.name).type
        if got != want.type:
            return f"column {want.name!r} holds {got}, not {want.type}"
    return ""


def _empty_history() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": pd.Categorical([]),
            "step": np.zeros(0, np.int64),
            "tokens": np.zeros(0, np.int64),
            "fraction": np.zeros(0),
            "metric": pd.Categorical([]),
            "value": np.zeros(0),
        }
    )


def _typed_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=[*RUNS_COLUMNS, *_INTERNAL])
    for column, dtype in RUNS_COLUMNS.items():
        table[column] = table[column].astype(dtype) if len(table) else pd.Series([], dtype=dtype)
    table["cursor_json"] = table["cursor_json"].astype("str")
    return table.sort_values(["group", "name", "run_id"], kind="stable").reset_index(drop=True)


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


def _as_list(value: list[str] | str | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _read_journal(path: Path) -> list[dict[str, Any]]:
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _n_runs(n: int) -> str:
    return f"{n:,} run" + ("" if n == 1 else "s")


def _manifest_problem(data: Any) -> str:
    """What is wrong with a parsed manifest, or "" when it has the documented shape."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if not isinstance(data.get("generation", 0), int):
        return "generation is not an integer"
    if data.get("runs") is not None and not _store_name(data["runs"]):
        return f"runs file {data['runs']!r} is not a file of this store"
    history = data.get("history", {})
    if not isinstance(history, dict):
        return "history is not an object"
    for run_id, name in history.items():
        if not _store_name(name):
            return f"history file {name!r} of run {run_id!r} is not a file of this store"
    settings = data.get("settings")
    if settings is not None:
        try:
            MetricSettings(**settings)
        except (TypeError, LadderError) as exc:
            return f"settings: {_first_line(exc)}"
    return ""


def _store_name(name: Any) -> bool:
    """A file name a manifest may hold: a relative path inside the store, no way out of it."""
    return isinstance(name, str) and bool(name) and not name.startswith("/") and ".." not in name.split("/")


def _check_row(row: Any) -> None:
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


def _entry_usable(root: Path, entry: dict[str, Any]) -> bool:
    """A staged journal line that can be committed: its history file is there and its row is valid."""
    try:
        if not isinstance(entry.get("row"), dict) or not _store_name(entry.get("history")):
            return False
        if not (root / entry["history"]).is_file() or entry["row"].get("run_id") != entry["run_id"]:
            return False
        _check_row(entry["row"])
        return True
    except (LadderError, TypeError, OSError):
        return False


def _remove_temporary(root: Path) -> None:
    """Temporary files a killed writer left (the caller holds the lock, so none is being written)."""
    for path in [*root.glob(".*.tmp"), *root.glob("*.tmp"), *(root / "history").glob("*.tmp")]:
        with contextlib.suppress(OSError):
            path.unlink()


@dataclass(frozen=True)
class RepairReport:
    """What `Store.repair` did."""

    rebuilt: tuple[str, ...] = ()
    """What was rebuilt (the manifest, the runs table)."""
    dropped: tuple[tuple[str, str], ...] = ()
    """(run id, why) for each run taken out of the store: pull it again."""
    kept: int = 0
    """Runs in the store after the repair."""


def _repair(store: Store) -> RepairReport:
    root = store.root
    rebuilt: list[str] = []
    try:
        manifest = store._manifest()
    except LadderError:
        manifest = _manifest_from_files(root)
        rebuilt.append("manifest (settings reset to the defaults)")
    try:
        table = store._runs_table(manifest)
        rows = {r["run_id"]: r for r in table.to_dict("records")}
    except LadderError:
        rows = {}
        rebuilt.append("runs table")
    history, dropped = {}, []
    for run_id, name in manifest.get("history", {}).items():
        try:
            _open_history(root / name, run_id).to_pandas()
            meta = pq.read_schema(root / name).metadata or {}
        except (OSError, ValueError) as exc:
            dropped.append((run_id, f"history file {name} damaged or missing ({_first_line(exc)})"))
            continue
        except _DamagedHistory as exc:
            dropped.append((run_id, f"history file {name} damaged ({exc.problem})"))
            continue
        if run_id not in rows:
            try:
                row = json.loads(meta[_ROW_KEY]) if _ROW_KEY in meta else None
                _check_row(row)
            except (ValueError, LadderError, TypeError):
                row = None
            if row is None:
                dropped.append((run_id, "its row in the runs table is lost and its history file does not hold it"))
                continue
            rows[run_id] = row
        history[run_id] = name
    runs = [rows[r] for r in history]
    if not rebuilt and not dropped and set(rows) == set(history):
        return RepairReport(kept=len(history))
    new, _ = _commit(root, manifest, runs, history, manifest.get("settings"))
    _collect_garbage(root, new)
    return RepairReport(tuple(rebuilt), tuple(dropped), len(history))


def _manifest_from_files(root: Path) -> dict[str, Any]:
    """A manifest naming, per run, the newest history file that holds its row (pending pulls' files aside)."""
    pending = set()
    for journal in (root / "pending").glob("*.jsonl"):
        pending |= {str(e.get("history")) for e in _read_journal(journal) if isinstance(e, dict)}
    newest: dict[str, tuple[float, str]] = {}
    for path in (root / "history").glob("*.parquet"):
        name = str(path.relative_to(root))
        if name in pending:
            continue
        try:
            meta = pq.read_schema(path).metadata or {}
            run_id = json.loads(meta[_ROW_KEY])["run_id"]
            stamp = path.stat().st_mtime
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if run_id not in newest or stamp > newest[run_id][0]:
            newest[run_id] = (stamp, name)
    return {"format": FORMAT, "generation": 0, "runs": None, "history": {r: n for r, (_, n) in newest.items()}}

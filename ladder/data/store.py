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

`Store` here reads and removes; `ladder.data.storewriter` stages and commits a pull, `ladder.data.storerepair`
rebuilds, and `ladder.data.storefiles` holds the file formats and the steps they share.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ladder.config.runconfig import RunConfig
from ladder.data import storerepair
from ladder.data.resolve import MetricSettings
from ladder.data.storefiles import (
    FORMAT,
    INTERNAL,
    REPAIR,
    RUNS_COLUMNS,
    DamagedHistory,
    collect_garbage,
    commit,
    committed_history,
    ever_committed,
    first_line,
    open_history,
    remove_temporary,
    schema_problem,
    store_name,
    typed_runs,
)
from ladder.data.storewriter import StoreWriter
from ladder.errors import LadderError, meant
from ladder.files import held

__all__ = ["DEFAULT_ROOT", "GIVEN_KEY", "PULL_FIRST", "RUNS_COLUMNS", "Store", "StoreWriter"]

DEFAULT_ROOT = ".ladder"
GIVEN_KEY = "ladder_given"
"""Key of a stored run's config that keeps the coordinates the user gave for it (--coord, --coords), so that
a later pull without them does not replace them with the run's own config; `Store.config` leaves it out."""

PULL_FIRST = "pull the runs first (`ladder pull local runs/`, or `ladder import csv FILE` for a table), or give --store"
"""What `Store.must_exist` tells a command that reads runs to do where the store is missing."""

STORE_WAIT = 30.0
"""Seconds a pull waits for another writing to the same store (a watch's pull of one run takes about one)."""


class Store:
    """Runs and their metric histories, read and written atomically."""

    def __init__(self, root: str | os.PathLike = DEFAULT_ROOT):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    # ---- read side ------------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether a store is here: its manifest, or (the manifest lost) the run files a committed store holds,
        which every read then refuses until `repair` rebuilds the manifest from them."""
        self._check_root()
        return (self.root / "manifest.json").is_file() or ever_committed(self.root)

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
        """(run id, problem) for each committed history file that cannot be opened or holds another run's history (a
        cheap check of each file's footer; `repair` reads them whole), for each run of the runs table the manifest
        names no history file for, and for each run the manifest names whose row the runs table lost."""
        manifest = self._manifest()
        files = manifest.get("history", {})
        out = []
        for run_id, name in files.items():
            try:
                schema = pq.read_schema(self.root / name)
                problem = schema_problem(schema)
            except (OSError, ValueError) as exc:
                problem = first_line(exc)
            owner = None if problem else storerepair.owner_of(schema)
            if owner is not None and owner != run_id:
                problem = f"holds run {owner}'s history"
            if problem:
                out.append((run_id, f"damaged history file ({self.root / name}: {problem})"))
        listed = set(self._runs_table(manifest)["run_id"])
        out += [(r, "the store's manifest names no history file for it") for r in sorted(listed) if r not in files]
        out += [(r, f"its row in the runs table is lost (its history file {files[r]} is kept)") for r in files
                if r not in listed]
        return out

    def runs(self) -> pd.DataFrame:
        """One row per run, sorted by group and name (`RUNS_COLUMNS`)."""
        table = self._runs_table()
        return table.drop(columns=[c for c in INTERNAL if c in table]).reset_index(drop=True)

    def run(self, id_or_name: str) -> pd.Series:
        """One run by its id or its name; a `LadderError` when unknown or when the name is ambiguous."""
        table = self.runs()
        return table.loc[self._index_of(id_or_name, table)]

    def find(self, id_or_name: str) -> pd.Series | None:
        """`run`, or None where the store holds no run of that id or name (a name it holds twice is still a
        `LadderError`: which copy is meant is the user's to say)."""
        table = self.runs()
        if not ((table["run_id"] == id_or_name) | (table["name"] == id_or_name)).any():
            return None
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
            unnamed = [i for i in ids if i not in files]
            if unnamed:
                raise LadderError(f"run {unnamed[0]}: the store's manifest names no history file for it; "
                                  f"{REPAIR.format(root=self.root)} finds it again (or drops the run to be pulled again)")
            try:
                return _read_histories(self.root, [(i, files[i]) for i in ids], _as_list(metrics), include_nonfinite)
            except DamagedHistory as exc:
                raise LadderError(self._damaged_message(exc, manifest)) from None
            except FileNotFoundError as exc:
                if self._manifest().get("generation") == manifest.get("generation"):
                    gone = exc.filename or next((self.root / files[i] for i in ids if not (self.root / files[i]).exists()),
                                                self.root / "history")
                    raise LadderError(
                        f"{gone}: a history file the store names is missing; "
                        f"{REPAIR.format(root=self.root)} drops its run so it can be pulled again"
                    ) from None
        raise LadderError(f"{self.root}: the store kept changing while being read; try again")

    def fitted_history(self, run_ids: list[str] | str | None, metric: str) -> pd.DataFrame:
        """`history` of the fitted `metric` as the laws take it: its positive finite values (a loss of 0 or
        below, like a NaN, is no loss: the pull said so, and it is left out)."""
        hist = self.history(run_ids, [metric])
        return hist[hist["value"].to_numpy() > 0]

    def repair(self) -> storerepair.RepairReport:
        """Rebuild what is damaged: the manifest and the runs table from the history files (each holds
        its run's row), dropping the runs whose history file is damaged or missing."""
        with self._locked():
            return storerepair.repair(self)

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
            new, _ = commit(self.root, manifest, kept.to_dict("records"), history, manifest.get("settings"))
            collect_garbage(self.root, new)
        return gone.drop(columns=[c for c in INTERNAL if c in gone]).reset_index(drop=True)

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
        busy = (f"{self.root}: another pull is writing to this store (waited {STORE_WAIT:.0f} s for it); wait for it "
                "to finish, then run this again")
        with held(self.root / ".lock", busy, wait=STORE_WAIT):
            remove_temporary(self.root)
            yield

    # ---- internals ------------------------------------------------------------------------------
    def _damaged_message(self, exc: DamagedHistory, manifest: dict[str, Any]) -> str:
        """What to do about one run's damaged history file: the run, by name when the runs table still
        knows it, and where it was pulled from, so it can be pulled again."""
        run, source = repr(exc.run_id), ""
        with contextlib.suppress(LadderError, KeyError):  # the runs table damaged too, or without the run
            row = self._runs_table(manifest).set_index("run_id").loc[exc.run_id]
            run, source = f"{row['name']!r} (id {exc.run_id})", f" from {row['source']}"
        return (f"{exc.path}: damaged history of run {run} ({exc.problem}); "
                f"{REPAIR.format(root=self.root)} drops that run from the store, then pull it again{source}")

    def _check_root(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise LadderError(f"{self.root}: not a store folder (it is a file); give --store a folder")
        for name in ("manifest.json", "history"):
            path = self.root / name
            if path.exists() and path.is_dir() == (name == "manifest.json"):  # repair will not delete what is there
                fix = (f"move that folder out of the store (it is not the store's), then {REPAIR.format(root=self.root)} "
                       "rebuilds the manifest from the run files" if name == "manifest.json" else
                       "the store's run files are not there: pull into a new store")
                raise LadderError(f"{path}: expected a {'file' if name == 'manifest.json' else 'folder'}, found a "
                                  f"{'folder' if name == 'manifest.json' else 'file'}; {fix}")

    def _manifest(self) -> dict[str, Any]:
        path = self.root / "manifest.json"
        if not path.is_file():
            if ever_committed(self.root):  # a write would take the store for empty and collect its runs as garbage
                kept = len(committed_history(self.root))
                raise LadderError(f"{path}: missing, though the folder holds a store's files ({kept} run file"
                                  f"{'' if kept == 1 else 's'} in history/); {REPAIR.format(root=self.root)} rebuilds "
                                  "it from them")
            return {"format": FORMAT, "generation": 0, "runs": None, "history": {}}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise LadderError(f"{path}: damaged store manifest ({first_line(exc)}); {REPAIR.format(root=self.root)} "
                              "rebuilds it from the run files") from None
        if isinstance(data, dict) and "format" in data and data.get("format") != FORMAT:
            raise LadderError(f"{path}: store format {data.get('format')!r} is not {FORMAT}; pull into a new store")
        problem = _manifest_problem(data)
        if problem:
            raise LadderError(f"{path}: damaged store manifest ({problem}); {REPAIR.format(root=self.root)} "
                              "rebuilds it from the run files")
        return data

    def _runs_table(self, manifest: dict[str, Any] | None = None) -> pd.DataFrame:
        for _ in range(3):
            manifest = manifest or self._manifest()
            if not manifest.get("runs"):
                return typed_runs([])
            path = self.root / manifest["runs"]
            try:
                table = pq.read_table(path).to_pandas()
            except FileNotFoundError:
                if self._manifest().get("generation") != manifest.get("generation"):
                    manifest = None  # a commit replaced it meanwhile: read the new manifest
                    continue
                raise LadderError(f"{path}: the store's runs table is missing; "
                                  f"{REPAIR.format(root=self.root)} rebuilds it") from None
            except (OSError, ValueError) as exc:
                raise LadderError(f"{path}: damaged runs table ({first_line(exc)}); "
                                  f"{REPAIR.format(root=self.root)} rebuilds it") from None
            missing = [c for c in [*RUNS_COLUMNS, *INTERNAL] if c not in table]
            if missing:
                raise LadderError(f"{path}: damaged runs table (no column {missing[0]}); "
                                  f"{REPAIR.format(root=self.root)} rebuilds it")
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
            groups = table.loc[hit, "group"].astype(str)
            apart = groups.nunique() > 1  # two runs of one name, not one run twice: each named with its group
            ids = ", ".join(f"{i} (group {g!r})" if apart else str(i) for i, g in zip(table.loc[hit, "run_id"], groups))
            raise LadderError(f"run name {id_or_name!r} is ambiguous in {self.root} (ids {ids}): name it by its "
                              "id; where one is a copy of the other (a run pulled from two sources), `ladder runs "
                              "--remove ID` takes it out")
        close = meant(str(id_or_name), [*table["name"].astype(str), *table["run_id"].astype(str)])
        hint = f"did you mean {close!r}? " if close else ""
        raise LadderError(f"no run {id_or_name!r} in {self.root}; {hint}`ladder runs --store {self.root}` lists them")


def _read_histories(
    root: Path, files: list[tuple[str, str]], metrics: list[str] | None, include_nonfinite: bool
) -> pd.DataFrame:
    tables = []
    for run_id, name in files:
        table = open_history(root / name, run_id)
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


def _as_list(value: list[str] | str | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _manifest_problem(data: Any) -> str:
    """What is wrong with a parsed manifest, or "" when it has the documented shape."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if "format" not in data or "history" not in data:  # every commit writes both; "{}" is a manifest wiped
        return f"no {'format' if 'format' not in data else 'history'}"
    if not isinstance(data.get("generation", 0), int):
        return "generation is not an integer"
    if data.get("runs") is not None and not store_name(data["runs"]):
        return f"runs file {data['runs']!r} is not a file of this store"
    history = data.get("history", {})
    if not isinstance(history, dict):
        return "history is not an object"
    for run_id, name in history.items():
        if not store_name(name):
            return f"history file {name!r} of run {run_id!r} is not a file of this store"
    settings = data.get("settings")
    if settings is not None:
        try:
            MetricSettings(**settings)
        except (TypeError, LadderError) as exc:
            return f"settings: {first_line(exc)}"
    return ""

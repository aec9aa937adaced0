"""`Store.repair`: rebuild a damaged manifest or runs table from the history files, which hold their runs' rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from ladder.data.storefiles import (
    FORMAT,
    ROW_KEY,
    SETTINGS_KEY,
    DamagedHistory,
    check_row,
    collect_garbage,
    commit,
    committed_history,
    first_line,
    open_history,
)
from ladder.errors import LadderError

if TYPE_CHECKING:
    from ladder.data.store import Store


@dataclass(frozen=True)
class RepairReport:
    """What `Store.repair` did."""

    rebuilt: tuple[str, ...] = ()
    """What was rebuilt (the manifest, the runs table)."""
    dropped: tuple[tuple[str, str], ...] = ()
    """(run id, why) for each run taken out of the store: pull it again."""
    kept: int = 0
    """Runs in the store after the repair."""


def repair(store: Store) -> RepairReport:
    root = store.root
    rebuilt: list[str] = []
    try:
        manifest = store._manifest()
    except LadderError:
        manifest = manifest_from_files(root)
        settings = manifest.get("settings")
        rebuilt.append("manifest (settings reset to the defaults)" if settings is None else
                       f"manifest (settings read back from the last runs table: {_said(settings)})")
    try:
        table = store._runs_table(manifest)
        rows = {r["run_id"]: r for r in table.to_dict("records")}
    except LadderError:
        rows = {}
        rebuilt.append("runs table")
    whole_table = bool(manifest.get("runs")) and "runs table" not in rebuilt  # read as it is: a row put back is said
    restored = 0
    found: dict[str, str] | None = None

    def files() -> dict[str, str]:
        """Per run, the newest committed history file whose row is the run's (read once, where one is needed)."""
        nonlocal found
        if found is None:
            found = manifest_from_files(root)["history"]
        return found

    entries = dict(manifest.get("history", {}))
    # a run the manifest names no file for: its file, found by its row; with the runs table lost, every run a file
    # holds (the table no longer says which runs the store has)
    lost = [r for r in rows if r not in entries]
    if not whole_table:
        lost += [r for r in files() if r not in entries and r not in lost]
    for run_id in lost:
        name = files().get(run_id)
        if name is not None:
            entries[run_id] = name
            rebuilt.append(f"manifest's entry of run {run_id} (its history file {name})")
    history, dropped = {}, []
    dropped += [(r, "the manifest names no history file for it, and no file holds its history") for r in rows
                if r not in entries]
    for run_id, name in entries.items():
        owner = _owner(root / name)
        if owner is not None and owner != run_id:  # a file of another run's under this run's entry
            right = files().get(run_id)
            if right is None or right == name:
                dropped.append((run_id, f"history file {name} holds run {owner}'s history, and no file holds its own"))
                continue
            rebuilt.append(f"manifest's entry of run {run_id} (it named {name}, run {owner}'s file; now {right})")
            name = right
        try:
            open_history(root / name, run_id).to_pandas()
            meta = pq.read_schema(root / name).metadata or {}
        except (OSError, ValueError) as exc:
            dropped.append((run_id, f"history file {name} damaged or missing ({first_line(exc)})"))
            continue
        except DamagedHistory as exc:
            dropped.append((run_id, f"history file {name} damaged ({exc.problem})"))
            continue
        if run_id not in rows:
            try:
                row = json.loads(meta[ROW_KEY]) if ROW_KEY in meta else None
                check_row(row)
            except (ValueError, LadderError, TypeError):
                row = None
            if row is None:
                dropped.append((run_id, "its row in the runs table is lost and its history file does not hold it"))
                continue
            rows[run_id] = row
            restored += 1
            if whole_table:
                rebuilt.append(f"runs table's row of run {run_id} (from its history file)")
        history[run_id] = name
    runs = [rows[r] for r in history]
    if restored and not rebuilt:  # a manifest that named no runs table, its rows read back from the history files
        rebuilt.append("runs table (its rows read back from the history files)")
    if not rebuilt and not dropped:
        return RepairReport(kept=len(history))
    new, _ = commit(root, manifest, runs, history, manifest.get("settings"))
    collect_garbage(root, new)
    return RepairReport(tuple(rebuilt), tuple(dropped), len(history))


def _owner(path: Path) -> str | None:
    """The run id a history file's own row names (its metadata), or None where it cannot be read."""
    try:
        return owner_of(pq.read_schema(path))
    except (OSError, ValueError):
        return None


def owner_of(schema) -> str | None:
    """The run id a history file's schema (`pq.read_schema`) names in its row, or None where it names none."""
    try:
        return str(json.loads((schema.metadata or {})[ROW_KEY])["run_id"])
    except (ValueError, KeyError, TypeError):
        return None


def manifest_from_files(root: Path) -> dict[str, Any]:
    """A manifest naming, per run, the newest history file that holds its row (pending pulls' files aside)."""
    newest: dict[str, tuple[float, str]] = {}
    for path in committed_history(root):
        name = str(path.relative_to(root))
        run_id = _owner(path)
        try:
            stamp = path.stat().st_mtime
        except OSError:
            continue
        if run_id is None:
            continue
        if run_id not in newest or stamp > newest[run_id][0]:
            newest[run_id] = (stamp, name)
    return {"format": FORMAT, "generation": 0, "runs": None, "history": {r: n for r, (_, n) in newest.items()},
            "settings": _last_settings(root)}


def _last_settings(root: Path) -> dict[str, Any] | None:
    """The metric settings the newest readable runs table holds (`SETTINGS_KEY`), or None."""
    def generation(path: Path) -> int:
        parts = path.name.split("-")
        return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else -1

    for path in sorted(root.glob("runs-*.parquet"), key=generation, reverse=True):
        try:
            meta = pq.read_schema(path).metadata or {}
            settings = json.loads(meta[SETTINGS_KEY]) if SETTINGS_KEY in meta else None
        except (OSError, ValueError, TypeError):
            continue
        if isinstance(settings, dict) or settings is None:
            return settings
    return None


def _said(settings: dict[str, Any]) -> str:
    renames = settings.get("renames") or {}
    shown = ", ".join(f"{old}={new}" for old, new in renames.items()) or "none"
    return f"fit metric {settings.get('fit_metric') or 'eval/loss'}, renames {shown}"

"""Pull runs from any source into the store: read what is new, resolve it, stage it, commit once.

Every source has ``key`` (where runs come from), ``runs()`` (a cheap listing) and
``read(ref, cursor)`` (rows new since the cursor). The pull gives each run the cursor its last pull
stored, so a second pull reads only what is new and tops up running runs. A run staged by a pull
that was cut off is not read again when the same pull runs again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ladder.errors import LadderError
from ladder.resolve import MetricSettings, resolve
from ladder.sources.coords import FIELDS, CoordinateOverrides, resolve_coordinates
from ladder.sources.table import RunRef, SourceRun
from ladder.store import Store, StoreWriter


class Source(Protocol):
    @property
    def key(self) -> str: ...

    def runs(self) -> list[RunRef]: ...

    def read(self, ref: RunRef, cursor: dict[str, Any] | None = None) -> SourceRun: ...


@dataclass(frozen=True)
class RunPulled:
    run_id: str
    name: str
    state: str
    rows_read: int
    """Rows this pull read from the source."""
    rows: int
    """History rows stored for the run now."""
    last_step: int | None
    last_fraction: float | None
    messages: tuple[str, ...]


@dataclass(frozen=True)
class PullResult:
    source: str
    pulled: tuple[RunPulled, ...]
    unchanged: int
    """Runs listed that had nothing new."""
    resumed: int
    """Runs staged by an earlier, interrupted run of this pull and committed now."""

    @property
    def messages(self) -> list[str]:
        return [f"{r.name}: {m}" for r in self.pulled for m in r.messages]


def pull(
    store: Store,
    source: Source,
    *,
    overrides: CoordinateOverrides | None = None,
    settings: MetricSettings | None = None,
    full: bool = False,
) -> PullResult:
    """Read `source` into `store`; `settings` (when given) become the store's; `full` reads every run anew."""
    overrides = overrides or CoordinateOverrides()
    with store.writer(source.key) as writer:
        if settings is not None and settings != writer.settings():
            writer.set_settings(settings)
        settings = writer.settings()
        refs = source.runs()
        resumed = sum(ref.run_id in writer.staged for ref in refs)
        for ref in refs:  # coordinates known from the listing: check them all before reading any history
            if ref.config is not None and ref.run_id not in writer.staged:
                prev = writer.stored(ref.run_id)
                config = {**_config(prev), **ref.config}
                resolve_coordinates(ref.label, ref.run_id, _name(ref, None, config, prev), config, _coords(prev), overrides)
        pulled, unchanged = [], 0
        for ref in refs:
            if ref.run_id in writer.staged:
                continue
            try:
                done = _pull_run(writer, source, ref, overrides, settings, full)
            except LadderError as exc:
                if writer.staged:
                    raise LadderError(
                        f"{exc} ({len(writer.staged)} run(s) read before this one are kept aside, "
                        "not committed; run the same pull again to continue from them)"
                    ) from None
                raise
            if done is None:
                unchanged += 1
            else:
                pulled.append(done)
        writer.commit()
    return PullResult(source.key, tuple(pulled), unchanged, resumed)


def _pull_run(
    writer: StoreWriter,
    source: Source,
    ref: RunRef,
    overrides: CoordinateOverrides,
    settings: MetricSettings,
    full: bool,
) -> RunPulled | None:
    prev = writer.stored(ref.run_id)
    usable = prev is not None and prev["source"] == source.key and not full
    if usable and _coordinates_moved(ref, prev, overrides):
        usable = False  # every stored row's tokens and fraction change: read the run again
    got = source.read(ref, json.loads(prev["cursor_json"]) if usable and prev["cursor_json"] else None)
    fresh = got.replace or not usable
    config = dict(got.config) if fresh else {**_config(prev), **got.config}
    if not fresh and not len(got.rows) and got.state == prev["state"] and config == _config(prev):
        return None
    name = _name(ref, got, config, prev)
    coords, labels = resolve_coordinates(ref.label, ref.run_id, name, config, _coords(prev), overrides)
    earlier = None if fresh else writer.stored_report(ref.run_id)
    history, report = resolve(got.rows, coords, settings, None if fresh else writer.stored_history(ref.run_id))
    total = report.plus(earlier)
    steps = history["step"].to_numpy()
    last_step = int(steps.max()) if len(steps) else None
    last_fraction = float(coords.fraction(np.array([last_step]))[0]) if last_step is not None else None
    given = overrides.for_run(ref.run_id, name)
    row = {
        "run_id": ref.run_id,
        "name": str(given.get("name") or name),
        "group": str(given.get("group") or got.group or labels.get("group") or (prev or {}).get("group") or ""),
        "role": str(labels.get("role") or (prev or {}).get("role") or ""),
        **coords.values(),
        "state": got.state,
        "source": source.key,
        "last_step": last_step,
        "last_fraction": last_fraction,
        "rows": len(history),
        "pulled_at": time.time(),
        "config_json": json.dumps(config, sort_keys=True, default=str),
        "report_json": json.dumps(total.to_json()),
        "cursor_json": json.dumps(got.cursor),
    }
    writer.stage(row, history)
    return RunPulled(
        ref.run_id,
        row["name"],
        got.state,
        len(got.rows),
        len(history),
        last_step,
        last_fraction,
        tuple(got.warnings) + tuple(report.messages(earlier)),
    )


def _name(ref: RunRef, got: SourceRun | None, config: dict[str, Any], prev: dict[str, Any] | None) -> str:
    return str((got.name if got else None) or ref.name or config.get("name") or (prev or {}).get("name") or ref.run_id)


def _coordinates_moved(ref: RunRef, prev: dict[str, Any], overrides: CoordinateOverrides) -> bool:
    """The user gives this run coordinates or labels other than the stored ones."""
    given = overrides.for_run(ref.run_id, prev["name"])
    if not given:
        return False
    config = {**_config(prev), **(ref.config or {})}
    coords, labels = resolve_coordinates(ref.label, ref.run_id, prev["name"], config, _coords(prev), overrides)
    now = {**coords.values(), **labels, "name": given.get("name", prev["name"])}
    before = {**_coords(prev), **{k: prev[k] for k in ("name", "group", "role")}}
    return any(now.get(k, before[k]) != before[k] for k in before)


def _config(prev: dict[str, Any] | None) -> dict[str, Any]:
    return json.loads(prev["config_json"]) if prev and prev.get("config_json") else {}


def _coords(prev: dict[str, Any] | None) -> dict[str, Any]:
    if not prev:
        return {}
    return {f: (None if pd.isna(prev[f]) else prev[f]) for f in FIELDS}

"""The trainer's run directories (`ladder.runfiles`): ``run.yaml``, ``metrics.jsonl``, ``status.json``.

`LocalSource` takes one run directory or a folder of them (``runs/``). ``metrics.jsonl`` is read from
where the previous read stopped; a line still being written (no newline yet) waits for the next
read, and a file that was rewritten (a resumed run truncates it to its checkpoint) is read again from
the start. A line that is not a JSON object with an integer ``step`` is skipped and counted.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from ladder import runfiles
from ladder.configio import load_yaml
from ladder.errors import LadderError
from ladder.sources.growing import still_valid, tail_check
from ladder.sources.table import RowBuilder, RunRef, SourceRun, as_number, map_state

_NOT_METRICS = {"step", "tokens", "time"}


class LocalSource:
    """Trainer run directories at or under `path`, read incrementally."""

    def __init__(self, path: str | os.PathLike, *, running_window_s: float = 120.0, clock: Any = time.time):
        self.path = Path(path).expanduser().resolve()
        self.running_window_s = running_window_s
        """Without status.json, a run counts as running while its metrics file changed this recently."""
        self.clock = clock

    @property
    def key(self) -> str:
        return f"local:{self.path}"

    def runs(self) -> list[RunRef]:
        if not self.path.is_dir():
            raise LadderError(f"{self.path}: no such directory (expected a trainer run directory, e.g. runs/NAME/)")
        if _is_run_dir(self.path):
            dirs = [self.path]
        else:  # run folders at any depth (a planned ladder keeps them under runs/)
            dirs = sorted(m.parent for m in self.path.rglob(runfiles.METRICS_FILE) if runfiles.WANDB_DIR not in m.parts)
        if not dirs:
            raise LadderError(
                f"{self.path}: not a run directory: no {runfiles.METRICS_FILE} in it or in its subfolders "
                "(expected the trainer's run folder, e.g. runs/NAME/)"
            )
        refs = []
        for d in dirs:
            config = _config(d)
            name = str(config.get("name") or d.name)
            group = str(config.get("group") or "")
            run_id = f"{group}/{name}" if group else name
            refs.append(RunRef(run_id, self.key, label=f"{name} ({d})", name=name, config=config, handle=d))
        return refs

    def read(self, ref: RunRef, cursor: dict[str, Any] | None = None) -> SourceRun:
        run_dir: Path = ref.handle
        path = run_dir / runfiles.METRICS_FILE
        offset = int((cursor or {}).get("offset", 0))
        replace = cursor is None or not still_valid(path, offset, (cursor or {}).get("check"))
        if replace:
            offset = 0
        rows, end, bad = _read_lines(path, offset)
        warnings = [f"{path}: {bad} lines that are not a JSON object with an integer step were skipped"] if bad else []
        config = ref.config if ref.config is not None else _config(run_dir)
        return SourceRun(
            run_id=ref.run_id,
            source=self.key,
            rows=rows.frame(),
            cursor={"offset": end, "check": tail_check(path, end)},
            state=self._state(run_dir, path),
            config=config,
            name=str(config.get("name") or run_dir.name),
            group=str(config.get("group") or "") or None,
            warnings=tuple(warnings),
            replace=replace,
        )

    def _state(self, run_dir: Path, metrics: Path) -> str:
        try:
            status = json.loads((run_dir / runfiles.STATUS_FILE).read_text())
            return map_state(str(status.get("state", "")))
        except (OSError, ValueError, AttributeError):
            pass
        if metrics.exists() and self.clock() - metrics.stat().st_mtime < self.running_window_s:
            return "running"
        return "crashed"


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / runfiles.METRICS_FILE).is_file()


def _config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / runfiles.CONFIG_FILE
    return load_yaml(path) if path.is_file() else {}


def _read_lines(path: Path, offset: int) -> tuple[RowBuilder, int, int]:
    rows = RowBuilder()
    if not path.exists():
        return rows, 0, 0
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    cut = data.rfind(b"\n") + 1  # a last line without its newline is still being written
    bad = 0
    add = rows.add
    for line in data[:cut].splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            step = record["step"]
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        if not isinstance(step, int) or isinstance(step, bool):
            bad += 1
            continue
        tokens = as_number(record.get("tokens"))
        tokens = math.nan if tokens is None else tokens
        for key, raw in record.items():
            if key in _NOT_METRICS:
                continue
            value = as_number(raw)
            if value is not None:
                add(step, key, value, tokens)
    return rows, offset + cut, bad

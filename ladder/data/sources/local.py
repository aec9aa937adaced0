"""The trainer's run directories (`ladder.runfiles`): ``run.yaml``, ``metrics.jsonl``, ``status.json``.

`LocalSource` takes one run directory or a folder of them (``runs/``). ``metrics.jsonl`` is read from
where the previous read stopped; a line still being written (no newline yet) waits for the next
read, and a file that was rewritten (a resumed run truncates it to its checkpoint) is read again from
the start. A line that is not a JSON object with an integer ``step`` is skipped and counted (with its
line number). Numbers are checked where they enter: a step or token count outside 0..2^63-1, an
integer too large for a float, or a step that goes back without the trainer's resume marker
(`ladder.runfiles`) refuses the run with the file and line, and nothing of it is read. The resume
marker itself is no data: it only says where steps may go back to.

Each run is identified by its own folder (``local:/abs/runs/NAME``), not by the folder the pull was
given, so the same run pulled through ``runs/`` or directly is one run of the store.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from ladder import runfiles
from ladder.config.yamlio import load_yaml
from ladder.data.sources.growing import still_valid, tail_check
from ladder.data.sources.table import (
    RowBuilder,
    RunRef,
    SourceRun,
    as_number,
    finite_or_nan,
    map_state,
    whole_count,
)
from ladder.errors import LadderError

_NOT_METRICS = {"step", "tokens", "time", runfiles.RESUME_KEY}
_SHOWN_LINES = 5


class LocalSource:
    """Trainer run directories at or under `path`, read incrementally."""

    def __init__(self, path: str | os.PathLike, *, running_window_s: float = 1800.0, clock: Any = time.time):
        self.path = Path(path).expanduser().resolve()
        self.running_window_s = running_window_s
        """A run without a finished or crashed status counts as running while its metrics file or its
        status changed this recently (a killed trainer cannot mark its run): 30 minutes, past the longest
        quiet a live run has between logs (a compile, an eval, a checkpoint of a large model)."""
        self.clock = clock

    @property
    def key(self) -> str:
        return f"local:{self.path}"

    def runs(self) -> list[RunRef]:
        if self.path.exists() and not self.path.is_dir():
            raise LadderError(f"{self.path}: is a file, not a folder; give a trainer run directory, e.g. runs/NAME/")
        if not self.path.is_dir():
            raise LadderError(f"{self.path}: no such directory yet (expected a trainer run directory, e.g. runs/NAME/, "
                              "or the folder a run that has not started will write)")
        if _is_run_dir(self.path):
            dirs = [self.path]
        else:  # run folders at any depth (a planned ladder keeps them under runs/)
            dirs = sorted(m.parent for m in self.path.rglob(runfiles.METRICS_FILE) if runfiles.WANDB_DIR not in m.parts)
        if not dirs:
            started = sorted(c.parent.name for c in self.path.rglob(runfiles.CONFIG_FILE)
                             if runfiles.WANDB_DIR not in c.parts)
            if started:  # a run.yaml but no metrics yet: a run that is starting (loading, compiling)
                shown = ", ".join(started[:5]) + (", ..." if len(started) > 5 else "")
                raise LadderError(f"{self.path}: {len(started)} run folder(s) ({shown}) have logged no "
                                  f"{runfiles.METRICS_FILE} yet: a run that is starting; pull again once it has logged")
            raise LadderError(
                f"{self.path}: not a run directory: no {runfiles.METRICS_FILE} in it or in its subfolders "
                "(expected the trainer's run folder, e.g. runs/NAME/)"
            )
        refs = []
        for d in dirs:
            try:
                config = _config(d)
            except LadderError as exc:
                refs.append(RunRef(d.name, run_source(d), label=f"{d.name} ({d})", handle=d, problem=str(exc)))
                continue
            name = str(config.get("name") or d.name)
            group = str(config.get("group") or "")
            run_id = f"{group}/{name}" if group else name
            refs.append(RunRef(run_id, run_source(d), label=f"{name} ({d})", name=name, config=config, handle=d))
        return refs

    def read(self, ref: RunRef, cursor: dict[str, Any] | None = None) -> SourceRun:
        run_dir: Path = ref.handle
        path = run_dir / runfiles.METRICS_FILE
        cursor = cursor or {}
        offset = int(cursor.get("offset", 0))
        replace = not cursor or not still_valid(path, offset, cursor.get("check"))
        start = _Position() if replace else _Position(int(cursor.get("line", 0)), int(cursor.get("high", -1)))
        warnings: list[str] = []
        written = last_write(run_dir)
        state, status = self._state(run_dir, written, warnings)
        marked = map_state(str(status.get("state", ""))) != "running" if status else False  # by the run, not by time
        rows, end, bad, pos = _read_lines(path, 0 if replace else offset, start, ended=marked)
        if bad:
            shown = ", ".join(map(str, bad[:_SHOWN_LINES])) + (", ..." if len(bad) > _SHOWN_LINES else "")
            lines = "1 line that is" if len(bad) == 1 else f"{len(bad):,} lines that are"
            warnings.append(f"{path}: {lines} not a JSON object with an integer step skipped "
                            f"(line{'' if len(bad) == 1 else 's'} {shown})")
        config = ref.config if ref.config is not None else _config(run_dir)
        frame = rows.frame()
        _check_finished(status, frame, path, warnings)
        return SourceRun(
            run_id=ref.run_id,
            source=ref.source,
            rows=frame,
            cursor={"offset": end, "check": tail_check(path, end), "line": pos.line, "high": pos.high},
            state=state,
            config=config,
            name=str(config.get("name") or run_dir.name),
            group=str(config.get("group") or "") or None,
            warnings=tuple(warnings),
            replace=replace,
            last_write=written,
        )

    def _state(self, run_dir: Path, written: float | None, warnings: list[str]) -> tuple[str, dict]:
        """The run's state, and its status record ({} without one); a status file that cannot be read is said."""
        status_file = run_dir / runfiles.STATUS_FILE
        status: dict = {}
        try:
            status = json.loads(status_file.read_text())
            if not isinstance(status, dict):
                raise ValueError("not a JSON object")
            state = map_state(str(status.get("state", "")))
        except FileNotFoundError:
            state = "running"
        except (OSError, ValueError) as exc:
            status, state = {}, "running"
            warnings.append(f"{status_file}: cannot be read ({type(exc).__name__}: {exc}); the run counts as running "
                            "while its files change, and as stopped after")
        if state != "running":
            return state, status
        # A trainer killed outright (SIGKILL, out of memory) cannot mark its run: running only while
        # its metrics or its status changed this recently, else it stopped (crashed).
        changed = -math.inf if written is None else written
        return ("running" if self.clock() - changed < self.running_window_s else "crashed"), status


def _check_finished(status: dict, rows, path: Path, warnings: list[str]) -> None:
    """A run that says it finished at a step its metrics never reach (a metrics file cut short) is said."""
    if str(status.get("state", "")).strip().lower() != "finished" or rows.empty or "step" not in rows:
        return
    try:
        said = int(status.get("step"))
    except (TypeError, ValueError):
        return
    last = int(rows["step"].max())
    if last < said:
        warnings.append(f"{path}: the run says it finished at step {said:,}, but its metrics end at step {last:,}; "
                        "the file may have been cut short")


def last_write(run_dir: Path) -> float | None:
    """When the run last wrote its metrics or its status (Unix seconds), None before it wrote either."""
    stamps = [f.stat().st_mtime for f in (run_dir / runfiles.METRICS_FILE, run_dir / runfiles.STATUS_FILE)
              if f.exists()]
    return max(stamps, default=None)


def run_source(run_dir: Path) -> str:
    """A local run's source: its own folder, resolved, whichever folder above it a pull was given."""
    return f"local:{run_dir.resolve()}"


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / runfiles.METRICS_FILE).is_file()


def _config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / runfiles.CONFIG_FILE
    return load_yaml(path) if path.is_file() else {}


class _Position:
    """Where a read of a metrics file is: lines read so far, and the highest step since the last resume."""

    def __init__(self, line: int = 0, high: int = -1):
        self.line = line
        self.high = high


def _read_lines(path: Path, offset: int, pos: _Position, ended: bool = False) -> tuple[RowBuilder, int, list[int], _Position]:
    """The rows of the lines from `offset` on. A last line without its newline is still being written, unless the
    run has `ended` (its status marks it finished or crashed): then it is its last line (a writer that ends without
    a newline), or a line cut off, skipped with the others that are not JSON."""
    rows = RowBuilder()
    if not path.exists():
        return rows, 0, [], pos
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    body = data if ended else data[:data.rfind(b"\n") + 1]
    lines = body.split(b"\n")
    if not lines[-1]:  # what follows the last newline: nothing
        lines.pop()
    bad: list[int] = []
    add = rows.add
    for line in lines:
        pos.line += 1
        if not line.strip():
            continue
        where = f"{path}: line {pos.line}"
        try:
            record = json.loads(line)
            step = record["step"]
        except (ValueError, KeyError, TypeError, RecursionError):
            bad.append(pos.line)
            continue
        if not isinstance(step, int) or isinstance(step, bool):
            bad.append(pos.line)
            continue
        step = whole_count(step, "step", where)
        _check_order(record, step, pos, where)
        tokens = _tokens(record.get("tokens"), where)
        for key, raw in record.items():
            if key in _NOT_METRICS:
                continue
            value = as_number(raw) if not isinstance(raw, int) else finite_or_nan(raw, repr(key), where)
            if value is not None:
                add(step, key, value, tokens)
    return rows, offset + len(body), bad, pos


def _check_order(record: dict[str, Any], step: int, pos: _Position, where: str) -> None:
    """Steps only go back right after a resume marker, and not below the step it names."""
    if runfiles.RESUME_KEY in record:
        pos.high = whole_count(record[runfiles.RESUME_KEY], runfiles.RESUME_KEY, where)
    if step < pos.high:
        raise LadderError(
            f"{where}: step {step} goes back from step {pos.high} without a resume marker "
            f'(a line {{"step": {step}, "{runfiles.RESUME_KEY}": {step}}} before it says the run restarted '
            "from that checkpoint); nothing of this run was read: fix the file, then pull again"
        )
    pos.high = step


def _tokens(raw: Any, where: str) -> float:
    """Tokens seen (NaN when not logged); fractional counts are rounded, others must be in range."""
    tokens = as_number(raw) if not isinstance(raw, int) else raw
    if tokens is None:
        return math.nan
    if isinstance(tokens, float) and math.isfinite(tokens):
        tokens = round(tokens)
    return float(whole_count(tokens, "tokens", where))

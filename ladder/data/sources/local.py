"""The trainer's run directories (`ladder.runfiles`): ``run.yaml``, ``metrics.jsonl``, ``status.json``.

`LocalSource` takes one run directory or a folder of them (``runs/``). ``metrics.jsonl`` is read from
where the previous read stopped; a last line without its newline is read only where the run's status
marks it ended and the line is whole (a writer that ends without a newline); else it is being written, or
copied, and the next read starts at its beginning. A file that was rewritten
(a resumed run truncates it to its checkpoint) is read again from the start. A line that is not a JSON
object with an integer ``step`` is skipped and counted (with its line number), and so is a value that is
not a number (true/false, text, a list, null). Numbers are checked where they enter: a step or token
count outside 0..2^63-1, a number too large for a float (``1e400``; a run that logged inf writes
``Infinity``), or a step that goes back without the trainer's resume marker (`ladder.runfiles`) refuses
the run with the file and line, and nothing of it is read. The resume marker itself is no data: it only
says where steps may go back to.

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
    tables_instead,
    too_large,
    whole_count,
)
from ladder.durations import span_text
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
        if tables := tables_instead(self.path):
            raise LadderError(tables)
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
        marked = _marked(status)  # by the run, not by time
        rows, end, skipped, pos = _read_lines(path, 0 if replace else offset, start, ended=marked != "running")
        warnings += skipped.warnings(path, marked, state)
        config = ref.config if ref.config is not None else _config(run_dir)
        frame = rows.frame()
        if marked == "finished":
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
        name = runfiles.STATUS_FILE
        status_file = run_dir / name
        status: dict = {}
        said = f"it has no {name}"
        try:
            status = json.loads(status_file.read_text())
            if not isinstance(status, dict):
                raise ValueError("not a JSON object")
            said = (f"its {name} gives no state" if status.get("state") is None
                    else f"its {name} says {status['state']!r}")
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            status, said = {}, f"its {name} is unreadable"
            warnings.append(f"{status_file}: cannot be read ({type(exc).__name__}: {exc}); the run counts as running "
                            "while its files change, and as stopped after")
        state = _marked(status)
        if state != "running":
            return state, status
        # A trainer killed outright (SIGKILL, out of memory) cannot mark its run: running only while
        # its metrics or its status changed this recently, else it stopped (crashed).
        quiet = self.clock() - (-math.inf if written is None else written)
        if quiet < self.running_window_s:
            return "running", status
        quiet_for = f"for {span_text(quiet)}" if math.isfinite(quiet) else "at all"
        warnings.append(f"{run_dir}: {said}, but it wrote nothing {quiet_for} (a live run writes at least every "
                        f"{span_text(self.running_window_s)}): the trainer was killed or lost; marked crashed")
        return "crashed", status


def _marked(status: dict) -> str:
    """The state the run marked itself with: finished or crashed, or running where its status record gives none
    (no status file, or one without a state), so that the time since its last write decides."""
    state = status.get("state")
    return "running" if state is None else map_state(str(state))


def _check_finished(status: dict, rows, path: Path, warnings: list[str]) -> None:
    """A run that says it finished at a step its metrics never reach (a metrics file cut short) is said."""
    if rows.empty or "step" not in rows:
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


class _Skipped:
    """What a read of a metrics file left out, for its warnings: lines that are not a JSON object with an integer
    step, values that are not numbers, and a last line without its newline (left for the next read)."""

    def __init__(self) -> None:
        self.lines: list[int] = []
        self.values = 0
        self.first_value = ""
        """Where the first value that is not a number is: its line and key."""
        self.unended: int | None = None
        """The line number of a last line without its newline."""

    def value(self, line: int, key: str) -> None:
        self.values += 1
        if self.values == 1:
            self.first_value = f"line {line}, {key!r}"

    def warnings(self, path: Path, marked: str, state: str = "") -> list[str]:
        """What to say of the read; `marked`: the state the run marked itself with (`_marked`); `state`: the one the
        read gives it (a run still marked running that wrote nothing for long is crashed)."""
        out = []
        if self.lines:
            shown = ", ".join(map(str, self.lines[:_SHOWN_LINES])) + (", ..." if len(self.lines) > _SHOWN_LINES else "")
            lines = "1 line that is" if len(self.lines) == 1 else f"{len(self.lines):,} lines that are"
            out.append(f"{path}: {lines} not a JSON object with an integer step skipped "
                       f"(line{'' if len(self.lines) == 1 else 's'} {shown})")
        if self.values:
            values = "1 value that is" if self.values == 1 else f"{self.values:,} values that are"
            out.append(f"{path}: {values} not a number (true/false, text, a list, null) skipped "
                       f"(the first at {self.first_value})")
        ended = marked != "running" or state == "crashed"  # a run still writing has a line under way as a rule
        if ended and self.unended is not None:
            who = f"the run says it {marked}" if marked != "running" else "the run stopped writing (marked crashed)"
            out.append(f"{path}: {who}, but its last line (line {self.unended}) has no newline: left unread (a file "
                       "still being written or copied is read whole by the next pull; a line cut for good stays out)")
        return out


def _read_lines(path: Path, offset: int, pos: _Position, ended: bool = False) -> tuple[RowBuilder, int, _Skipped,
                                                                                     _Position]:
    """The rows of the lines from `offset` on. A last line without its newline is read only where the run has
    `ended` (its status marks it finished or crashed) and the line is a whole JSON object (a writer that ends without
    a newline); else it is a line still being written, or a file still being copied, and the next read starts at it."""
    rows = RowBuilder()
    skipped = _Skipped()
    if not path.exists():
        return rows, 0, skipped, pos
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    body = data[:data.rfind(b"\n") + 1]
    if ended and _whole_line(data[len(body):]):
        body = data
    lines = body.split(b"\n")
    if not lines[-1]:  # what follows the last newline: nothing
        lines.pop()
    add = rows.add
    for line in lines:
        pos.line += 1
        if not line.strip():
            continue
        where = f"{path}: line {pos.line}"
        try:
            record = _JSON.decode(line.decode(json.detect_encoding(line), "surrogatepass"))
            step = record["step"]
        except (ValueError, KeyError, TypeError, RecursionError):
            skipped.lines.append(pos.line)
            continue
        if not isinstance(step, int) or isinstance(step, bool):
            skipped.lines.append(pos.line)
            continue
        step = whole_count(step, "step", where)
        _check_order(record, step, pos, where)
        tokens = _tokens(record.get("tokens"), where)
        for key, raw in record.items():
            if key in _NOT_METRICS:
                continue
            kind = type(raw)  # a bool is an int to isinstance, but no number to a metric
            if kind is float:
                add(step, key, raw, tokens)
            elif kind is int:
                add(step, key, finite_or_nan(raw, repr(key), where), tokens)
            elif kind is _Overflow:
                raise too_large(repr(key), raw, where)
            else:
                skipped.value(pos.line, key)
    if data[len(body):].strip():
        skipped.unended = pos.line + 1
    return rows, offset + len(body), skipped, pos


def _whole_line(tail: bytes) -> bool:
    """Whether the text after a file's last newline is a whole JSON object (a line cut short is no JSON)."""
    try:
        return isinstance(json.loads(tail), dict) if tail.strip() else False
    except (ValueError, RecursionError):
        return False


class _Overflow(str):
    """A JSON number no float holds (``1e400``, a typo or a unit slip), kept as written so that the value, or the
    token count, it stands for is refused by its key; a run that logged inf spells it ``Infinity``."""


def _float(text: str) -> float | _Overflow:
    """json's reading of a number literal (a spelt ``Infinity`` is a constant, not read here): inf only by overflow."""
    value = float(text)
    return _Overflow(text) if math.isinf(value) else value


_JSON = json.JSONDecoder(parse_float=_float)
"""The decoder of a metrics line: `json.loads` with `_float`, built once (`json.loads` builds one per call)."""


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
    if isinstance(raw, _Overflow):
        raise too_large("tokens", raw, where)
    tokens = as_number(raw) if not isinstance(raw, int) else raw
    if tokens is None:
        return math.nan
    if isinstance(tokens, float) and math.isfinite(tokens):
        tokens = round(tokens)
    return float(whole_count(tokens, "tokens", where))

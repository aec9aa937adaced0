"""wandb offline run directories: the ``.wandb`` file is the only record there, so read it directly.

`OfflineSource` finds every ``run-<id>.wandb`` file under a directory (a ``.wandb`` file, one run's
folder, a ``wandb/`` folder, or a folder of trainer run directories). Files with the same run id are
one run: a resumed run writes a new folder with the same id, and its rows continue in the order the
folders started. Records are decoded with wandb's own protobuf classes; only history, config, run and
exit records are parsed, the rest are skipped by their field number.

A read starts where the previous one stopped (the cursor holds each file's offset and the last bytes
before it, so a file that was replaced is noticed and read again from the start). The run is
finished when its newest file holds an exit record with code 0, crashed with another code, and when
there is no exit record it is running while the file keeps changing, else crashed (killed).

Each run is identified by the folder wandb ran in (``offline:/abs/runs/NAME`` for
``runs/NAME/wandb/offline-run-*/``), not by the path the pull was given, so the same run pulled
through a parent folder or directly is one run of the store; a cursor that names other files than
the first ones listed reads the run again from the start.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ladder import metrics as metric_keys
from ladder import runfiles
from ladder.data.sources.coords import with_job_type
from ladder.data.sources.growing import still_valid, tail_check
from ladder.data.sources.leveldb import LogRead, Stop, read_log
from ladder.data.sources.table import (
    RowBuilder,
    RunRef,
    Skipped,
    SourceRun,
    concat_rows,
    json_number,
    overflowed,
    same_step_key,
    too_large,
    whole_count,
)
from ladder.durations import span_text
from ladder.errors import LadderError, NotYetWritten

_FILE = re.compile(r"^run-(?P<id>.+)\.wandb$")
_DIR_STAMP = re.compile(r"(?:offline-)?run-(?P<stamp>\d{8}_\d{6})-")
_MAX_DEPTH = 5

# Record fields (wandb_internal.proto) worth parsing; any other record is skipped unparsed.
_HISTORY, _CONFIG, _RUN, _EXIT = 2, 5, 17, 18
_KEEP = {_HISTORY, _CONFIG, _RUN, _EXIT}


class OfflineSource:
    """wandb run files under `path`, read incrementally."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        step_key: str = "_step",
        tokens_key: str = metric_keys.TOKENS_SEEN,
        running_window_s: float = 120.0,
        clock: Any = time.time,
    ):
        self.path = Path(path).expanduser().resolve()
        self.step_key = step_key
        self.tokens_key = tokens_key
        self.running_window_s = running_window_s
        """A run without an exit record counts as running while its file changed this recently."""
        self.clock = clock

    @property
    def key(self) -> str:
        return f"offline:{self.path}"

    @property
    def options(self) -> dict[str, Any]:
        """What changes the rows read (part of a pull's flags)."""
        return {"step_key": self.step_key, "tokens_key": self.tokens_key}

    def runs(self) -> list[RunRef]:
        files = find_run_files(self.path)
        by_id: dict[str, list[Path]] = defaultdict(list)
        for f in files:
            by_id[_run_id_of(f)].append(f)
        return [
            RunRef(run_id, _run_source(paths), label=f"{run_id} ({paths[0].parent})", handle=sorted(paths, key=_start_key),
                   problem=_in_two_folders(run_id, paths))
            for run_id, paths in sorted(by_id.items())
        ]

    def read(self, ref: RunRef, cursor: dict[str, Any] | None = None) -> SourceRun:
        files: list[Path] = ref.handle
        if cursor is not None:
            same_step_key(cursor, self.step_key)
        seen: dict[str, dict[str, Any]] = dict((cursor or {}).get("files", {}))
        replace = cursor is None or not _cursor_holds(files, seen)
        if replace and (left := [Path(f) for f in seen if Path(f) not in files and Path(f).exists()]):
            raise LadderError(_would_drop(ref.run_id, left, files))
        if replace:
            seen = {}
        decoder = _Decoder(self.step_key, self.tokens_key)
        frames, warnings, records = [], [], 0
        for f in files:
            state = seen.get(str(f), {"offset": 0})
            if state.get("stop") == Stop.END and state["offset"] == f.stat().st_size:
                continue
            log = read_log(f, state["offset"])
            records += len(log.records)
            bad = decoder.decode(log.records, f, log)
            if bad is not None:  # a record whose checksum holds but whose bytes are not a wandb record
                at = log.ends[bad - 1] if bad else log.start
                log = log.cut(bad, f"record {bad + 1} of this read (at byte {at}) is not a wandb record")
            frames.append(decoder.take_rows())
            seen[str(f)] = _file_state(f, log, state, decoder.exit_code)
            decoder.exit_code = None
            if log.stop is Stop.CORRUPT:
                warnings.append(
                    f"{f}: {log.problem}; stopped reading this file there "
                    f"(rows before it kept, nothing after it read)"
                )
        state, note = self._state(files[-1], seen[str(files[-1])])
        started = (replace and not decoder.config and not decoder.skipped.without_step and not warnings  # nor a damaged one
                   and not any(len(f) for f in frames))
        if started and state == "running":
            # wandb writes an offline file in chunks: a run just started has its header and nothing else yet
            raise NotYetWritten("nothing is written in it yet, not even its config (wandb writes its offline file in "
                              "chunks, the first some seconds after the run starts); pull it again in a minute")
        if started and state == "crashed" and not records:  # its coordinates asked for would store an empty run
            raise LadderError(self._never_written(files[-1], seen[str(files[-1])]))
        if replace and decoder.skipped.without_step and not any(len(f) for f in frames) and state != "running":
            raise decoder.skipped.nothing_stored()  # not one row to store, and none to come (a run still young may)
        warnings.extend(decoder.warnings())
        warnings.extend(_left_beside(files, ref.run_id))
        if note:
            warnings.append(note)
        return SourceRun(
            run_id=ref.run_id,
            source=ref.source,
            rows=concat_rows(frames),
            cursor={"files": seen, **self.options},
            state=state,
            config=with_job_type(decoder.config, decoder.job_type),
            name=decoder.name,
            group=decoder.group,
            warnings=tuple(warnings),
            replace=replace,
            last_write=max(f.stat().st_mtime for f in files),
        )

    def _state(self, path: Path, last: dict[str, Any]) -> tuple[str, str]:
        code = last.get("exit_code")
        if code is not None:
            return ("finished", "") if code == 0 else ("crashed", "")
        age = self.clock() - path.stat().st_mtime
        if age < self.running_window_s:
            return "running", ""
        tail = f" ({last['problem']})" if last.get("problem") else ""
        return "crashed", (
            f"{path}: no exit record and no write for {span_text(age)}: the run was killed or lost{tail}; "
            "marked crashed, every whole record before that point kept"
        )

    def _never_written(self, path: Path, last: dict[str, Any]) -> str:
        """Why a file that holds wandb's header alone, and is no longer written, has nothing to pull: the run
        died before wandb's first write (a fresh one is still starting, `read` says)."""
        tail = f"; {last['problem']}" if last.get("problem") else ""
        age = span_text(self.clock() - path.stat().st_mtime)
        return (f"{path} holds no records, only wandb's header (no write for {age}{tail}): the run was killed "
                "before wandb wrote anything, so there is nothing to pull from it")


def find_run_files(path: Path) -> list[Path]:
    """The ``.wandb`` files at or under `path` (links to folders, like ``latest-run``, are not followed, nor such a link
    copied as a folder: the files of a run folder beside it again)."""
    if not path.exists():
        raise LadderError(f"{path}: no such file or directory")
    if path.is_file():
        if path.suffix != ".wandb":
            raise LadderError(f"{path}: not a wandb run (expected a .wandb file or a folder holding one)")
        return [path]
    found = []
    for root, dirs, names in os.walk(path):
        depth = len(Path(root).relative_to(path).parts)
        dirs[:] = [] if depth >= _MAX_DEPTH else sorted(d for d in dirs if not os.path.islink(os.path.join(root, d))
                                                        and not _latest_copied(Path(root), d))
        found += [Path(root) / n for n in sorted(names) if n.endswith(".wandb")]
    if not found:
        raise LadderError(
            f"{path}: not a wandb run: no .wandb file in it or below it "
            "(expected e.g. wandb/offline-run-DATE-ID/run-ID.wandb)"
        )
    return found


def _run_id_of(path: Path) -> str:
    m = _FILE.match(path.name)
    return m.group("id") if m else path.stem


def _run_source(files: list[Path]) -> str:
    """An offline run's source: the folder wandb ran in (the one holding ``wandb/``, e.g. the trainer's
    run folder), the same whichever folder at or above it, or which of its run folders or files, a
    pull was given (`OfflineSource.runs` does not read a run id in two such folders: `_in_two_folders`)."""
    return f"offline:{os.path.commonpath(sorted({str(_home(f)) for f in files}))}"


def _in_two_folders(run_id: str, paths: list[Path]) -> str:
    """Why the files `paths` of one run id are not read, where they sit in more than one folder a run ran in (a copy
    of a run's folder beside it: read as one run restarted, its steps would replace the run's); "" where in one. A run
    resumed writes beside its first files, in the folder it ran in."""
    homes = sorted({str(_home(f)) for f in paths})
    if len(homes) < 2:
        return ""
    both = " and ".join(homes) if len(homes) == 2 else f"{homes[0]}, {homes[1]} and {len(homes) - 2} more"
    return (f"run id {run_id!r} is in {len(homes)} run folders ({both}): a copy of a run's folder beside it, or runs of "
            "two ladders planned alike? A run's files sit in the one folder it ran in, so they are not read as one "
            "run; move the copy away, or pull each folder on its own (into stores of their own where both are kept)")


LATEST = "latest-run"
"""wandb's link, in its ``wandb/`` folder, to the newest run folder there."""


def _latest_copied(root: Path, name: str) -> bool:
    """Whether `name` in `root` is wandb's ``latest-run`` link copied as a folder (a copy that followed links): the
    files of a run folder beside it again."""
    return name == LATEST and root.name == runfiles.WANDB_DIR


def _home(path: Path) -> Path:
    folder = path.parent
    if not (_DIR_STAMP.match(folder.name) or folder.name == LATEST):
        return folder  # a loose .wandb file
    return folder.parent.parent if folder.parent.name == runfiles.WANDB_DIR else folder.parent


def _start_key(path: Path) -> tuple[str, int]:
    m = _DIR_STAMP.match(path.parent.name)
    return (m.group("stamp") if m else "", path.stat().st_mtime_ns)


def _left_beside(files: list[Path], run_id: str) -> list[str]:
    """A warning where folders of the same run sit beside those read (a pull given `wandb/latest-run` of a resumed
    run reads that attempt alone)."""
    read = {f.resolve() for f in files}
    beside = {p.resolve() for f in files for p in f.parent.parent.glob(f"*/run-{run_id}.wandb")} - read
    if not beside:
        return []
    shown = ", ".join(sorted(p.parent.name for p in beside)[:3]) + (", ..." if len(beside) > 3 else "")
    return [f"{len(beside)} other folder(s) of run {run_id} beside the one read ({shown}) were not read: pull the "
            f"folder above ({files[0].parent.parent}) to read the whole run, its attempts in order"]


def _would_drop(run_id: str, left: list[Path], files: list[Path]) -> str:
    """Why a pull that reads fewer of a resumed run's folders than the store holds rows of is refused: its rows
    would replace theirs (a pull of ``wandb/latest-run`` after one of the folder above)."""
    shown = ", ".join(p.parent.name for p in left[:3]) + (", ..." if len(left) > 3 else "")
    return (f"run {run_id} is stored with the rows of {len(left)} folder(s) this pull does not read ({shown}): "
            f"reading {files[0].parent.name} alone would replace the stored run with its rows, dropping theirs; "
            f"pull the folder above ({left[0].parent.parent}), which reads every attempt in order and only what is "
            f"new, or take the run out first (`ladder runs --remove {run_id}`) to keep this folder's rows alone")


def _cursor_holds(files: list[Path], seen: dict[str, dict[str, Any]]) -> bool:
    """The cursor names the first of the files, in order, and each only grew since.

    A pull given one run folder of a resumed run and then the folder above sees more files: when one
    comes before those read, reading only it would put its rows after theirs.
    """
    if list(seen) != [str(f) for f in files[: len(seen)]]:
        return False
    return all(still_valid(f, seen[str(f)]["offset"], seen[str(f)].get("check")) for f in files[: len(seen)])


def _file_state(path: Path, log: LogRead, before: dict[str, Any], exit_code: int | None) -> dict[str, Any]:
    code = exit_code if exit_code is not None else before.get("exit_code")
    return {
        "offset": log.end,
        "check": tail_check(path, log.end),
        "stop": str(log.stop),
        "problem": log.problem,
        "exit_code": code,
    }


def _content_field(payload: bytes, oneof: frozenset[int]) -> int | None:
    """Field number of the record's content (its ``record_type``), read from the tags without parsing.

    wandb writes ``num``, ``control`` and ``_info`` before the content field, so walk the top-level
    tags, stepping over their values, until one belongs to the content. None when the bytes hold
    something unexpected, so the record gets parsed in full.
    """
    i, n = 0, len(payload)
    while i < n:
        tag, i = _varint(payload, i, n)
        if tag is None:
            return None
        field, wire = tag >> 3, tag & 7
        if field in oneof:
            return field
        if wire == 0:
            _, i = _varint(payload, i, n)
        elif wire == 2:
            length, i = _varint(payload, i, n)
            if length is None:
                return None
            i += length
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            return None
    return None


def _varint(buf: bytes, i: int, n: int) -> tuple[int | None, int]:
    shift = result = 0
    while i < n and shift < 64:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
    return None, i


class _Decoder:
    """Turns records into rows and run facts."""

    def __init__(self, step_key: str, tokens_key: str):
        from wandb.proto import wandb_internal_pb2  # imported here: wandb is slow to import

        self._record = wandb_internal_pb2.Record
        oneof = wandb_internal_pb2.Record.DESCRIPTOR.oneofs_by_name["record_type"]
        self._content = frozenset(f.number for f in oneof.fields)
        self.step_key = step_key
        self.tokens_key = tokens_key
        self.rows = RowBuilder()
        self.config: dict[str, Any] = {}
        self.name: str | None = None
        self.group: str | None = None
        self.job_type: str | None = None
        self.exit_code: int | None = None
        self.skipped = Skipped(step_key)
        """Rows without a step (and some keys they log: what --step-key could be), values that are not numbers."""

    def take_rows(self):
        frame = self.rows.frame()
        self.rows = RowBuilder()
        return frame

    def decode(self, records: list[bytes], path: Path | None = None, log: LogRead | None = None) -> int | None:
        """Decode `records`; returns the index of the first one that does not parse (None: all did).

        Rows of the records before it are kept; a step out of range is a `LadderError` naming the record.
        """
        from google.protobuf.message import DecodeError

        record = self._record()
        for i, payload in enumerate(records):
            field = _content_field(payload, self._content)
            if field is not None and field not in _KEEP:
                continue
            try:
                record.ParseFromString(payload)
            except (DecodeError, RecursionError):
                return i
            kind = record.WhichOneof("record_type")
            if kind == "history":
                at = (log.ends[i - 1] if i else log.start) if log is not None and log.ends else 0
                self._history(record.history, f"{path}: history record at byte {at}")
            elif kind == "run":
                self._run(record.run)
            elif kind == "config":
                self._config(record.config)
            elif kind == "exit":
                self.exit_code = record.exit.exit_code
        return None

    def _history(self, history: Any, where: str = "a history record") -> None:
        step = history.step.num if self.step_key == "_step" and history.HasField("step") else None
        pairs = []
        tokens = math.nan
        for item in history.item:
            nested = item.nested_key
            key = item.key or (nested[0] if len(nested) == 1 else ".".join(nested))
            if key == self.step_key:
                value = _item_value(item, key, where)
                if step is None and value is not None:
                    step = whole_count(value, f"step ('{self.step_key}')", where)
                continue
            if not key or key[0] == "_":
                continue  # wandb's own (_runtime, _timestamp, ...)
            value = _item_value(item, key, where)
            if value is None:
                self.skipped.text[key] += 1
                continue
            if key == self.tokens_key and math.isfinite(value):
                tokens = float(whole_count(round(value), f"tokens ('{key}')", where))
            pairs.append((key, value))
        if step is None:
            self.skipped.row_without_step(k for k, _ in pairs)
            return
        step = whole_count(step, "step", where)
        add = self.rows.add
        for key, value in pairs:
            add(step, key, value, tokens)

    def _run(self, run: Any) -> None:
        self.name = run.display_name or self.name
        self.group = run.run_group or self.group
        self.job_type = run.job_type or self.job_type
        self._config(run.config)

    def _config(self, config: Any) -> None:
        for item in config.update:
            path = [item.key] if item.key else list(item.nested_key)
            if not path or path[0] == "_wandb":
                continue
            try:
                value = json.loads(item.value_json)
            except ValueError:
                continue
            _set_path(self.config, path, value)
        for item in config.remove:
            path = [item.key] if item.key else list(item.nested_key)
            if path:
                self.config.pop(path[0], None)

    def warnings(self) -> list[str]:
        return self.skipped.warnings()


def _item_value(item: Any, key: str, where: str) -> float | None:
    """A history item's value as a float, or None when it is not a number; a number no float holds (``1e400``, a
    typo or a unit slip) is a `LadderError` naming `key` and `where` (wandb spells a logged inf ``Infinity``)."""
    text = item.value_json  # the common case: a plain number as JSON
    if not text:
        which = item.WhichOneof("value")
        if which == "number":
            return item.number
        if which == "integer":
            return float(item.integer)
        if which != "json":
            return None  # none, text, boolean (a flag: no number, as "true" is none in a CSV)
        text = item.json
    value = json_number(text)
    if value is not None and math.isinf(value) and overflowed(text):
        raise too_large(repr(key), text, where)
    return value


def _set_path(config: dict[str, Any], path: list[str], value: Any) -> None:
    node = config
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            return
    node[path[-1]] = value

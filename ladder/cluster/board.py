"""The live view of a ladder training on a cluster: one row per run (state, step, train loss, tokens/s,
ETA) read from the run folders, and the trainers' log lines, each prefixed by its run's name.

A row's numbers come from the run's own files (``metrics.jsonl``, read incrementally); its state
comes from the launcher. Rows render as a rich table (live on a terminal, once at the end
otherwise) or as JSON lines on stdout, one per run whenever its row changes.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ladder import metrics as keys
from ladder import runfiles

LOG_FILE = "train.log"
"""The trainer's output in its run folder (process 0's, for a multi-host run)."""


def log_file(run_dir: Path, process: int = 0) -> Path:
    return run_dir / (LOG_FILE if process == 0 else f"train.process{process}.log")


@dataclass(frozen=True)
class Row:
    """One run as the table shows it; units: steps (updates), nats per token, tokens per second."""

    run: str
    state: str
    """queued, running, retrying (waiting to start again), finished, skipped (finished before this
    call), failed or cancelled."""
    step: int
    steps: int
    train_loss: float | None
    """The last logged train/loss (the run's eval loss is in its metrics, and in the summary at the end)."""
    tokens_per_second: float | None
    """Tokens trained per second of wall time since this attempt's first logged step, evaluations and
    checkpoints included (the trainer's own `tokens_per_second` metric leaves them out)."""
    eta_seconds: float | None
    """Remaining steps at that rate."""
    attempt: int
    """Attempts started so far (1 + retries)."""


class _Tail:
    """New complete lines of a file that grows (and may be truncated, as a resume does)."""

    def __init__(self, path: Path, from_end: bool):
        self.path = path
        self._offset = path.stat().st_size if from_end and path.exists() else 0
        self._partial = b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                if size < self._offset:  # truncated: read it again from the start
                    self._offset, self._partial = 0, b""
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return []
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        return [line.decode("utf-8", "replace") for line in complete]


class _RunView:
    def __init__(self, name: str, run_dir: Path, steps: int, tokens_per_step: int, processes: int):
        self.name, self.steps, self.tokens_per_step = name, steps, tokens_per_step
        self._metrics = _Tail(run_dir / runfiles.METRICS_FILE, from_end=False)
        self._logs = [(_Tail(log_file(run_dir, i), from_end=True), name if i == 0 else f"{name}/{i}")
                      for i in range(processes)]
        self.step, self.loss, self.tps = 0, None, None
        self._first: tuple[float, int] | None = None
        """(time, step) of this attempt's first logged train step: the rate is measured from it."""
        self._state = ""
        self._grown = False
        """The log grew since the launcher last changed this run's state: a queued attempt has started."""

    def read_metrics(self) -> None:
        for line in self._metrics.lines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if runfiles.RESUME_KEY in record or record.get("step", self.step) < self.step:
                self.loss = self.tps = self._first = None  # a restart: older numbers no longer describe it
            self.step = int(record.get("step", self.step))
            if keys.TRAIN_LOSS in record:
                self.loss = record[keys.TRAIN_LOSS]
                self._measure(record.get("time"))

    def _measure(self, now: float | None) -> None:
        """The wall-clock rate from the attempt's first logged step to this one (a step's instant
        throughput, without its evaluations, can be many times the rate the run finishes at)."""
        if now is None:
            return
        if self._first is None:
            self._first = (now, self.step)
        elif now > self._first[0] and self.step > self._first[1]:
            self.tps = (self.step - self._first[1]) * self.tokens_per_step / (now - self._first[0])

    def set_state(self, state: str) -> None:
        if state != self._state:
            self._state, self._grown = state, False

    def read_logs(self) -> list[tuple[str, str]]:
        out = [(prefix, line) for tail, prefix in self._logs for line in tail.lines()]
        self._grown = self._grown or bool(out)
        return out

    def row(self, attempt: int) -> Row:
        state = self._state
        if state in ("queued", "retrying") and self._grown:
            state = "running"
        eta = None
        if state == "running" and self.tps:
            eta = (self.steps - self.step) * self.tokens_per_step / self.tps
        return Row(self.name, state, self.step, self.steps, self.loss, self.tps, eta, attempt)


class Board:
    """Rows and prefixed log lines of the runs being trained; `update` once a second or so."""

    def __init__(self, runs: list[tuple[str, Path, int, int, int]], fmt: str, console: Console,
                 err_console: Console, json_every: float = 2.0, json_out: TextIO | None = None):
        """`runs`: (name, run folder, planned steps, tokens per step, processes) of each run; JSON
        lines go to `json_out` (default: standard output)."""
        self._views = {name: _RunView(name, d, steps, tps, n) for name, d, steps, tps, n in runs}
        self._fmt, self._console, self._err = fmt, console, err_console
        self._json_every = json_every
        self._json_out = json_out or sys.stdout
        self._last_json: dict[str, tuple[Row, float]] = {}
        self._live: Live | None = None
        self.rows: dict[str, Row] = {}

    def __enter__(self) -> Board:
        if self._fmt == "table" and self._console.is_terminal:
            self._live = Live(console=self._console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self.table(), refresh=True)
            self._live.__exit__(*exc)
        elif self._fmt == "table" and self.rows:
            self._console.print(self.table())
        elif self._fmt == "json":
            self._print_json(every=0.0)  # the last change of every run, however recent the one before

    def update(self, states: dict[str, tuple[str, int]]) -> None:
        """Read what each run wrote since the last call; `states`: the launcher's (state, attempt)."""
        for name, view in self._views.items():
            state, attempt = states[name]
            view.set_state(state)
            for prefix, line in view.read_logs():
                self._log(prefix, line)
            view.read_metrics()
            self.rows[name] = view.row(attempt)
        if self._live is not None:
            self._live.update(self.table())
        if self._fmt == "json":
            self._print_json()

    def _log(self, prefix: str, line: str) -> None:
        target = self._err if self._fmt == "json" else (self._live.console if self._live else self._console)
        target.print(Text.assemble((prefix, "bold cyan"), " | ", line), soft_wrap=True)

    def _print_json(self, every: float | None = None) -> None:
        now, every = time.monotonic(), self._json_every if every is None else every
        for name, row in self.rows.items():
            last = self._last_json.get(name)
            changed = last is None or last[0] != row
            due = last is None or row.state != last[0].state or now - last[1] >= every
            if changed and due:
                print(json.dumps(asdict(row)), file=self._json_out, flush=True)
                self._last_json[name] = (row, now)

    def table(self) -> Table:
        t = Table(title="Ladder training")
        for col in ("run", "state", "step", "train/loss", "tokens/s", "ETA", "attempt"):
            t.add_column(col, justify="left" if col in ("run", "state") else "right")
        for r in self.rows.values():
            t.add_row(
                r.run, r.state, f"{r.step:,}/{r.steps:,}",
                "-" if r.train_loss is None else f"{r.train_loss:.4f}",
                "-" if r.tokens_per_second is None else f"{r.tokens_per_second:,.0f}",
                "-" if r.eta_seconds is None else _duration(r.eta_seconds),
                str(r.attempt),
            )
        return t


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"

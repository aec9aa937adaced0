"""The watcher's memory between checks: the last step seen and which alerts each sink has had.

Saved atomically after every check, so a watcher killed at any point and started again neither
repeats an alert nor misses one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ladder.errors import LadderError
from ladder.files import held, write_text_atomic


@dataclass
class WatchState:
    run: str = ""
    last_step: int = 0
    sent: dict[str, list[str]] = field(default_factory=dict)
    """Alert keys delivered, per sink name."""
    verdicts: list[dict] = field(default_factory=list)
    """History of verdicts (step, verdict, time) for the report."""
    advanced_at: float | None = None
    """When the watcher last saw the run's step advance (Unix seconds)."""
    deadline: dict | None = None
    """The --deadline given in hours and the time it was first counted to ({"given": "72h", "at": Unix
    seconds}): the same hours given again, as a cron job does, keep that time instead of moving it on."""

    def delivered(self, sink: str) -> set[str]:
        return set(self.sent.get(sink, []))

    def delivered_to_any(self, sinks) -> set[str]:
        """The alerts one of `sinks` (names) has had."""
        return set().union(*(self.delivered(name) for name in sinks))

    def mark(self, sink: str, keys: list[str]) -> None:
        self.sent[sink] = sorted(self.delivered(sink) | set(keys))

    def save(self, path: str | os.PathLike) -> None:
        data = {"run": self.run, "last_step": self.last_step, "sent": self.sent,
                "verdicts": self.verdicts, "advanced_at": self.advanced_at, "deadline": self.deadline, "updated": time.time()}
        write_text_atomic(path, json.dumps(data, indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike, run: str, same: Collection[str] = ()) -> WatchState:
        state = cls.read(path)
        if state is None:
            return cls(run=run)
        return state.must_be_of(run, path, same)

    def must_be_of(self, run: str, path: str | os.PathLike, same: Collection[str] = ()) -> WatchState:
        """This state, where it followed `run` (or the same run by another of `same`, its name or id: now as `run`) or
        never judged nor sent anything (a watch started before its run was found, under another name: `run` takes it
        over, its deadline kept); an error that names the run it followed otherwise."""
        if self.run != run and self.run in same:
            return dataclasses.replace(self, run=run)
        if self.run != run and not self.verdicts and not any(self.sent.values()):
            return WatchState(run=run, deadline=self.deadline)
        if self.run != run:
            raise LadderError(f"{path}: this state belongs to run '{self.run}', not '{run}'; give --target-run "
                              f"{self.run} to show that run, or watch '{run}' with another --state file")
        return self

    @classmethod
    def read(cls, path: str | os.PathLike) -> WatchState | None:
        """The state saved at `path`, of whichever run it followed; None where there is no file."""
        p = Path(path)
        if not p.exists():
            return None
        try:
            data = json.loads(p.read_text())
            return cls(run=data["run"], last_step=int(data["last_step"]),
                       sent={k: list(v) for k, v in data["sent"].items()}, verdicts=_verdicts(data.get("verdicts", [])),
                       advanced_at=data.get("advanced_at"), deadline=_deadline(data.get("deadline")))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise LadderError(f"{p}: not a watch state file; delete it to start over") from None


@contextlib.contextmanager
def only_watcher(state_path: str | os.PathLike, alerts_path: str | os.PathLike | None = None) -> Iterator[None]:
    """Hold ``<state>.lock`` (and ``<alerts>.lock``) while a watch runs: a second watcher of the same state would
    send every alert again (each keeps its own memory of what was sent), and one with its own state but the same
    alerts file would write each alert there twice. Refused at once where another holds either."""
    lock = Path(f"{state_path}.lock")
    with contextlib.ExitStack() as stack:
        stack.enter_context(held(lock, f"another `ladder watch` is following this run with {state_path} (it holds "
                                       f"{lock}); stop it first, or give this one its own --state and --jsonl"))
        if alerts_path is not None:
            other = Path(f"{alerts_path}.lock")
            stack.enter_context(held(other, f"another `ladder watch` appends its alerts to {alerts_path} (it holds "
                                            f"{other}); give this one its own --jsonl"))
        yield


def _verdicts(saved) -> list[dict]:
    """The saved verdicts, each a {"step": whole number, "verdict": str, ...} (the watch sorts and compares them by
    step, and the report shows the last); a ValueError where one is not (a hand-edited or foreign file)."""
    if not isinstance(saved, list):
        raise ValueError("verdicts: not a list")
    for v in saved:
        step = v.get("step") if isinstance(v, dict) else None
        whole = (isinstance(step, int) and not isinstance(step, bool)) or (isinstance(step, float) and step.is_integer())
        if not whole or not isinstance(v.get("verdict"), str):
            raise ValueError(f"verdicts: {v!r} is no verdict")
    return list(saved)


def _deadline(saved) -> dict | None:
    """A saved deadline as {"given", "at"}; None where there is none or it is not one (a hand-edited file: the
    deadline is then counted afresh)."""
    if not isinstance(saved, dict) or not isinstance(saved.get("given"), str):
        return None
    at = saved.get("at")
    return {"given": saved["given"], "at": float(at)} if isinstance(at, int | float) else None

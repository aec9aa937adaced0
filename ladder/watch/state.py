"""The watcher's memory between checks: the last step seen and which alerts each sink has had.

Saved atomically after every check, so a watcher killed at any point and started again neither
repeats an alert nor misses one.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ladder.errors import LadderError
from ladder.files import write_text_atomic


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

    def delivered(self, sink: str) -> set[str]:
        return set(self.sent.get(sink, []))

    def mark(self, sink: str, keys: list[str]) -> None:
        self.sent[sink] = sorted(self.delivered(sink) | set(keys))

    def save(self, path: str | os.PathLike) -> None:
        data = {"run": self.run, "last_step": self.last_step, "sent": self.sent,
                "verdicts": self.verdicts, "advanced_at": self.advanced_at, "updated": time.time()}
        write_text_atomic(path, json.dumps(data, indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike, run: str) -> WatchState:
        p = Path(path)
        if not p.exists():
            return cls(run=run)
        try:
            data = json.loads(p.read_text())
            state = cls(run=data["run"], last_step=int(data["last_step"]),
                        sent={k: list(v) for k, v in data["sent"].items()}, verdicts=list(data.get("verdicts", [])),
                        advanced_at=data.get("advanced_at"))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise LadderError(f"{p}: not a watch state file; delete it to start over") from None
        if state.run != run:
            raise LadderError(f"{p}: this state belongs to run '{state.run}', not '{run}'; use another --state file")
        return state

"""The progress bar: steps, tokens/s, the latest train loss and the time left (rich).

Tokens/s is rich's own estimate of steps per second of wall time over its recent updates, evaluations
and checkpoints included: the rate the ETA uses, not one step's instant throughput."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class ProgressBar:
    def __init__(self, name: str, total_steps: int, start_step: int, tokens_per_step: int,
                 clock: Callable[[], float] | None = None):
        self._tokens_per_step = tokens_per_step
        self._progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False),  # a run's name is text: "run[lr=3e-4]"
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[tps]} tok/s"),
            TextColumn("loss {task.fields[loss]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
            get_time=clock,
        )
        self._task = self._progress.add_task(name, total=total_steps, completed=start_step, tps="-", loss="-")
        self._progress.start()

    def update(self, step: int, loss: float | None = None) -> None:
        self._progress.update(self._task, completed=step, **({} if loss is None else {"loss": f"{loss:.4f}"}))
        speed = self._progress.tasks[0].speed  # steps per second; None before two updates
        if speed is not None:
            self._progress.update(self._task, tps=f"{speed * self._tokens_per_step:,.0f}")

    def close(self) -> None:
        self._progress.stop()


class NullProgress:
    def update(self, step: int, loss: float | None = None) -> None:
        pass

    def close(self) -> None:
        pass

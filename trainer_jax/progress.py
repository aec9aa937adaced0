"""The progress bar: steps, tokens/s, the latest train loss and the time left (rich)."""

from __future__ import annotations

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
    def __init__(self, name: str, total_steps: int, start_step: int):
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
        )
        self._task = self._progress.add_task(name, total=total_steps, completed=start_step, tps="-", loss="-")
        self._progress.start()

    def update(self, step: int, tokens_per_second: float | None = None, loss: float | None = None) -> None:
        fields = {}
        if tokens_per_second is not None:
            fields["tps"] = f"{tokens_per_second:,.0f}"
        if loss is not None:
            fields["loss"] = f"{loss:.4f}"
        self._progress.update(self._task, completed=step, **fields)

    def close(self) -> None:
        self._progress.stop()


class NullProgress:
    def update(self, step: int, tokens_per_second: float | None = None, loss: float | None = None) -> None:
        pass

    def close(self) -> None:
        pass

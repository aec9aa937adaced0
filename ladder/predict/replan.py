"""What-if re-planning of a run that lost time: which horizon fits a deadline, and the edited schedules.

The edits themselves are `Schedule.shorten` and `Schedule.early_cooldown`; this module decides
where they go and says so in words.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from ladder.config.runconfig import RunConfig
from ladder.config.schedule import Schedule
from ladder.errors import LadderError

if TYPE_CHECKING:  # the prediction's run view loads fits (scipy); a what-if only edits its schedule
    from ladder.data.runview import LadderRun

Target = Union[RunConfig, "LadderRun"]

MAX_CUT = 0.25
"""A horizon is shortened by at most this share of the planned tokens."""


@dataclass(frozen=True)
class HorizonFit:
    """Where a run gets by a deadline at a measured throughput."""

    step: int
    planned_steps: int
    reachable_steps: int
    tokens_per_step: int
    tokens_per_second: float
    seconds_left: float

    @property
    def fits(self) -> bool:
        return self.reachable_steps >= self.planned_steps

    @property
    def fraction_of_plan(self) -> float:
        return min(1.0, self.reachable_steps / self.planned_steps)

    def message(self) -> str:
        hours = self.seconds_left / 3600
        if self.step >= self.planned_steps:
            return (f"the run is at step {self.step:,}, the last of its {self.planned_steps:,} planned: it is done, and "
                    "no deadline asks anything of it")
        if hours <= 0 and not self.fits:  # a deadline kept across watches (`ladder watch --deadline 72h`) passes
            return (f"the deadline passed {-hours:,.1f} h ago with the run at step {self.step:,} "
                    f"({self.step / self.planned_steps:.1%} of the {self.planned_steps:,} planned); give a new "
                    "--deadline, or end the run with an early cooldown (`ladder replan --cooldown-steps K --at STEP`)")
        if self.fits:  # "reaches step 11,276,231 (100.0% of the 4,432 planned)" reads as if the run went on
            need = max(0, self.planned_steps - self.step) * self.tokens_per_step / self.tokens_per_second / 3600
            return (f"at {self.tokens_per_second:,.0f} tokens/s the run finishes its {self.planned_steps:,} planned "
                    f"steps in {need:,.1f} h, before the deadline ({hours:,.1f} h left): the plan fits")
        head = (
            f"at {self.tokens_per_second:,.0f} tokens/s the run reaches step {self.reachable_steps:,} "
            f"({self.fraction_of_plan:.1%} of the {self.planned_steps:,} planned) in the {hours:,.1f} h left"
        )
        if self.fraction_of_plan >= 1 - MAX_CUT:
            return head + (
                f"; shorten the horizon to {self.reachable_steps:,} steps and re-aim the decay "
                f"(`ladder replan --shorten-to {self.reachable_steps}`)"
            )
        return head + (
            f"; even a {MAX_CUT:.0%} cut does not fit: branch an early cooldown "
            f"(`ladder replan --cooldown-steps K --at STEP`) or move the deadline"
        )


def horizon_that_fits(
    step: int, planned_steps: int, tokens_per_step: int, tokens_per_second: float, seconds_left: float
) -> HorizonFit:
    if not (math.isfinite(tokens_per_second) and tokens_per_second > 0):
        raise LadderError(f"throughput {tokens_per_second} tokens/s: must be a positive finite number")
    more = min(max(0.0, seconds_left) * tokens_per_second / tokens_per_step, float(planned_steps))  # past the plan: done
    return HorizonFit(step, planned_steps, step + int(math.floor(more)), tokens_per_step,
                      tokens_per_second, seconds_left)


def shortened(run: Target, at_step: int, new_total_steps: int) -> Target:
    """The run with its horizon cut to `new_total_steps` at `at_step` (at most a 25% cut)."""
    planned = run.stop_after_steps
    if new_total_steps >= planned:
        raise LadderError(f"--shorten-to {new_total_steps} must be below the planned {planned} steps")
    if new_total_steps < (1 - MAX_CUT) * planned:
        raise LadderError(
            f"--shorten-to {new_total_steps} cuts {1 - new_total_steps / planned:.0%} of the run; "
            f"at most {MAX_CUT:.0%} is supported (use an early cooldown for more)"
        )
    return _with_schedule(run, _schedule(run).shorten(at_step, new_total_steps))


def with_cooldown(run: Target, at_step: int, length: int) -> Target:
    """The run branching into an early cooldown of `length` steps at `at_step`."""
    return _with_schedule(run, _schedule(run).early_cooldown(at_step, length))


def _schedule(run: Target) -> Schedule:
    if run.schedule is None:
        raise LadderError(f"{run.name}: no LR schedule is known for it; a what-if needs one (give `schedule:` "
                          "in its target file: peak_lr, total_steps, warmup_steps, decay, min_lr_ratio)")
    return run.schedule


def _with_schedule(run: Target, schedule: Schedule) -> Target:
    if isinstance(run, RunConfig):
        return run.replace(schedule=schedule)
    # A planned run predicts at its config's evals: the config takes the edit too, or they run to the old end.
    config = run.config.replace(schedule=schedule) if run.config is not None else None
    return dataclasses.replace(run, schedule=schedule, stop_after_steps=schedule.horizon, config=config)

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
from ladder.config.schedule import Schedule, ScheduleEdit
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
        h = _hours
        if self.step >= self.planned_steps:
            return (f"the run is at step {self.step:,}, the last of its {self.planned_steps:,} planned: it is done, and "
                    "no deadline asks anything of it")
        if hours <= 0 and not self.fits:  # a deadline kept across watches (`ladder watch --deadline 72h`) passes
            return (f"the deadline passed {h(-hours)} ago with the run at step {self.step:,} "
                    f"({self.step / self.planned_steps:.1%} of the {self.planned_steps:,} planned); give a new "
                    "--deadline, or end the run with an early cooldown (`ladder replan` of the run's target with `--cooldown-steps K --at STEP`)")
        if self.fits:  # "reaches step 11,276,231 (100.0% of the 4,432 planned)" reads as if the run went on
            need = max(0, self.planned_steps - self.step) * self.tokens_per_step / self.tokens_per_second / 3600
            return (f"at {self.tokens_per_second:,.0f} tokens/s the run finishes its {self.planned_steps:,} planned "
                    f"steps in {h(need)}, before the deadline ({h(hours)} left): the plan fits")
        if self.reachable_steps <= self.step:  # "shorten the horizon to 554 steps" at step 554 is no edit
            return (f"at {self.tokens_per_second:,.0f} tokens/s the run gets no step past step {self.step:,} by the "
                    f"deadline, {h(hours)} from now: no edit ends by then; stop the run where it is (its last "
                    "checkpoint), or move the deadline")
        head = (
            f"at {self.tokens_per_second:,.0f} tokens/s the run reaches step {self.reachable_steps:,} "
            f"({self.fraction_of_plan:.1%} of the {self.planned_steps:,} planned) by the deadline, {h(hours)} from now"
        )
        if self.fraction_of_plan >= 1 - MAX_CUT:
            return head + (
                f"; shorten the horizon to {self.reachable_steps:,} steps and re-aim the decay "
                f"(`ladder replan` of the run's target with `--shorten-to {self.reachable_steps}`)"
            )
        return head + (
            f"; even a {MAX_CUT:.0%} cut does not fit: branch an early cooldown "
            f"(`ladder replan` of the run's target with `--cooldown-steps K --at STEP`) or move the deadline"
        )

    def edit_ends(self, end: int, edit: str) -> tuple[bool, str]:
        """Whether an edit (`edit`, as given: "--shorten-to 350,000") that ends the run at step `end` ends by the
        deadline, and that said."""
        allowed = self.step + int(math.floor(max(0.0, self.seconds_left) * self.tokens_per_second / self.tokens_per_step))
        if end <= allowed:  # (not capped at the plan's end: an edit may replace a planned cut with a later end)
            return True, f"{edit} ends the run at step {end:,}, by the deadline"
        late = (end - allowed) * self.tokens_per_step / self.tokens_per_second / 3600
        return False, (f"{edit} ends the run at step {end:,}, {end - allowed:,} steps ({_hours(late)}) after the "
                       f"deadline, by which it reaches step {allowed:,}")


def _hours(hours: float) -> str:
    """A span of time as hours, or minutes below one hour ("0.0 h" says nothing)."""
    if round(hours, 1) >= 1:
        return f"{hours:,.1f} h"
    return f"{hours * 60:,.0f} min" if hours >= 1 / 60 else "under a minute"


def horizon_that_fits(
    step: int, planned_steps: int, tokens_per_step: int, tokens_per_second: float, seconds_left: float
) -> HorizonFit:
    if not (math.isfinite(tokens_per_second) and tokens_per_second > 0):
        raise LadderError(f"throughput {tokens_per_second} tokens/s: must be a positive finite number")
    more = min(max(0.0, seconds_left) * tokens_per_second / tokens_per_step, float(max(0, planned_steps - step)))  # done
    return HorizonFit(step, planned_steps, step + int(math.floor(more)), tokens_per_step,
                      tokens_per_second, seconds_left)


def shortened(run: Target, at_step: int, new_total_steps: int) -> Target:
    """The run with its horizon cut to `new_total_steps` at `at_step` (at most a 25% cut of the horizon it has
    without the planned edits this one replaces)."""
    base = _schedule(run, at_step)
    planned = _at(run, at_step, base)
    replaced = _replaced_said(run, at_step)
    if new_total_steps >= planned:
        raise LadderError(f"--shorten-to {new_total_steps} must be below the planned {planned} steps{replaced}; a "
                          "replan cuts a plan short, never longer: no rung trained past its plan, so no fit covers a "
                          "longer run (plan it with the longer horizon: another run, predicted anew)")
    if new_total_steps < (1 - MAX_CUT) * planned:
        least = math.ceil((1 - MAX_CUT) * planned)
        raise LadderError(
            f"--shorten-to {new_total_steps:,} cuts {1 - new_total_steps / planned:.2%} of the run's {planned:,} "
            f"steps{replaced}; at most {MAX_CUT:.0%} is supported: give {least:,} or more (use an early cooldown for "
            "more)"
        )
    if new_total_steps <= at_step:
        raise LadderError(f"--shorten-to {new_total_steps} is not past --at {at_step}: the run is there already; "
                          "give a horizon past the step of the edit")
    return _with_schedule(run, base.shorten(at_step, new_total_steps))


def with_cooldown(run: Target, at_step: int, length: int) -> Target:
    """The run branching into an early cooldown of `length` steps at `at_step`, ending by its horizon."""
    base = _schedule(run, at_step)
    horizon = _at(run, at_step, base)
    if at_step + length > horizon:
        raise LadderError(f"--cooldown-steps {length:,} from step {at_step:,} ends at step {at_step + length:,}, past "
                          f"the run's horizon of {horizon:,} steps; an early cooldown ends sooner: give "
                          f"at most {horizon - at_step:,} steps")
    return _with_schedule(run, base.early_cooldown(at_step, length))


def superseded(run: Target, at_step: int) -> tuple[ScheduleEdit, ...]:
    """The run's planned edits that an edit at `at_step` replaces: those at `at_step` or later, not reached yet."""
    return tuple(e for e in run.schedule.edits if e.at_step >= at_step) if run.schedule is not None else ()


def _replaced_said(run: Target, at_step: int) -> str:
    """Where an edit at `at_step` replaces planned edits: the horizon a new cut is measured against is the one
    without them, which the plan in force does not show ("" where it replaces none)."""
    gone = superseded(run, at_step)
    if not gone:
        return ""
    return (f" (its horizon without the planned {'; '.join(e.describe() for e in gone)}, which this edit replaces; "
            f"the plan in force ends at step {run.stop_after_steps:,})")


def _at(run: Target, at_step: int, base: Schedule) -> int:
    """The run's planned steps without the planned edits an edit at `at_step` replaces (`base`: its schedule
    without them); an edit outside its warmup .. that horizon is refused."""
    horizon = base.horizon if superseded(run, at_step) else run.stop_after_steps
    if not base.warmup_steps <= at_step < horizon:
        raise LadderError(f"--at {at_step:,}: an edit goes after the warmup ({base.warmup_steps:,} steps) and before "
                          f"the run's horizon ({horizon:,} steps); give a step in between")
    return horizon


def _schedule(run: Target, at_step: int) -> Schedule:
    """The run's schedule without the planned edits an edit at `at_step` replaces (`superseded`)."""
    if run.schedule is None:
        raise LadderError(f"{run.name}: no LR schedule is declared for it (a logged LR is no schedule to edit); a "
                          "what-if needs one: give `schedule:` (peak_lr, total_steps, warmup_steps, decay, min_lr_ratio) "
                          "in a target file (--target FILE), or in the run's entry of a --coords file and import it "
                          "again")
    return dataclasses.replace(run.schedule, edits=tuple(e for e in run.schedule.edits if e.at_step < at_step))


def _with_schedule(run: Target, schedule: Schedule) -> Target:
    if isinstance(run, RunConfig):
        return run.replace(schedule=schedule)
    # A planned run predicts at its config's evals: the config takes the edit too, or they run to the old end.
    config = run.config.replace(schedule=schedule) if run.config is not None else None
    return dataclasses.replace(run, schedule=schedule, stop_after_steps=schedule.horizon, config=config)

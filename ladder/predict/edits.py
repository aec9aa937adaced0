"""Which of a prediction's schedule edits a run made: the run's config's edits (`schedule_of`) against the
prediction's, each as data (`as_edits`), for the watch (predict again where they part) and the score (is it the run
that was predicted?)."""

from __future__ import annotations

import dataclasses
import json


def schedule_of(config: dict) -> dict:
    """The schedule from a run's config, wherever the source put it."""
    for candidate in (config.get("run_config"), config):
        if isinstance(candidate, dict) and isinstance(candidate.get("schedule"), dict):
            return candidate["schedule"]
        if isinstance(candidate, str):
            try:
                parsed = json.loads(candidate)
            except ValueError:
                continue
            if isinstance(parsed, dict) and isinstance(parsed.get("schedule"), dict):
                return parsed["schedule"]
    return {}


def as_edits(items: object) -> list:
    """Schedule edits as data, each with the fields it leaves out at their defaults (`ScheduleEdit`) and whole numbers
    as integers: a cut written by hand (no `length`, no `shape`) is the same edit as the one a replan wrote."""
    from ladder.config.schedule import ScheduleEdit

    defaults = {f.name: f.default for f in dataclasses.fields(ScheduleEdit) if f.default is not dataclasses.MISSING}

    def plain(v: object) -> object:
        return int(v) if isinstance(v, float) and v.is_integer() else v

    return [{k: plain(v) for k, v in {**defaults, **e}.items()} if isinstance(e, dict) else e
            for e in (items if isinstance(items, list) else [])]


def missed_edit(done: list, planned: list, reached: int) -> int | None:
    """The step of the first edit of the prediction's (`planned`) that the run has passed (step `reached`) with no
    edit of its own there (`done`, its config's); None where it has passed none (an edit made otherwise at that step
    is an edit of the run's)."""
    own = {int(e.get("at_step", 0)) for e in done if isinstance(e, dict)}
    missed = [at for at in lacked(done, planned) if at < reached and at not in own]
    return min(missed) if missed else None


def lacked(done: list, planned: list) -> list[int]:
    """The steps of the prediction's edits (`planned`) that the run's config (`done`) lacks."""
    return [int(e.get("at_step", 0)) for e in planned if isinstance(e, dict) and e not in done]


def plan_holds(done: list, planned: list, replaced: list, reached: int) -> bool:
    """Whether a prediction's schedule edits (`planned`) hold those of the run's config (`done`): the run's are the
    prediction's first ones, save for the edits a `ladder replan` ahead of the run `replaced` (recorded in the
    prediction) while the run has reached neither them nor passed the replan's own first edit (step `reached`):
    past that, a run whose config still lacks the replan's edit is not following it."""
    ahead = lacked(done, planned)
    if ahead and reached > min(ahead):
        return False  # past an edit of the prediction's that the run's config lacks: the run did not make it
    if ahead:  # at the replan's first edit (where `ladder replan` puts it), not past it
        done = [e for e in done if not (e in replaced and reached < int(e.get("at_step", 0)))]
    return done == planned[:len(done)]

"""A run as the laws see it, whatever describes it: a planner config, a run in the store, a target file.

Rungs and targets are their coordinates and their schedule: FLOPs per token for fits (6·N, said so,
when only N is known), tokens per step, the plan's steps, and the LR of every step: from a declared
schedule (a planner config, or ``schedule:`` in a coordinates or target file) or else from the logged
LR series (``optim/learning_rate``). No model spec is needed; where one exists (a run this tool
planned) its FLOPs must agree with the FLOPs the store holds for the run, within 1%.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from fits.runs import Run, lrs_from_logged
from ladder import metrics as keys
from ladder.config.limits import MAX_PREDICTED_POINTS, positive_or_none
from ladder.config.runconfig import RunConfig, refuse_prediction
from ladder.config.schedule import Schedule, logged_disagrees
from ladder.config.yamlio import at_line, load_yaml
from ladder.data import dense
from ladder.data.sources.coords import (
    PLAN_FIELDS,
    check_counts,
    coordinate_number,
    coordinates_from_config,
    derive_tokens,
    schedule_from,
)
from ladder.data.store import Store
from ladder.errors import LadderError
from ladder.outpaths import name_problem

FLOPS_AGREE = 0.01
"""A planned run's spec and the FLOPs per token stored for it may differ by this much (relative)."""
SIX_N = "6·N"
TARGET_FIELDS = ("name", "group", "role", "active_params", "total_params", "fit_flops_per_token", "stop_after_steps",
                 "tokens_per_step", "planned_tokens", "schedule", "eval_every", "tpp")
"""The fields of a target file: the coordinates format's (its `role` and `total_params` are read and ignored: a
target is the run predicted, whatever role an entry copied from a coordinates file says, and no law reads its total
parameters), and `eval_every`."""


def ran_its_plan(state: str, last_step: int | None, planned: int | None) -> bool:
    """Whether a run finished its plan: its state is finished and its last step is within 0.5% (at least one
    step) of the plan; trainers that count steps from 0 log the last one at plan − 1 (levanter, Marin)."""
    if state != "finished" or last_step is None or planned is None:
        return False
    return last_step >= planned - max(1, planned // 200)


@dataclass(frozen=True)
class LadderRun:
    """A rung or a target: coordinates, schedule (or logged LRs) and evals."""

    name: str
    flops_per_token: float
    """Fit FLOPs per token (3 × forward without the head), or 6·N when only N is known (`flops_from`)."""
    tokens_per_step: int
    stop_after_steps: int
    """Steps the run trains, every schedule edit applied."""
    planned_steps: int
    """Steps of the plan it started with (fractions are of this)."""
    group: str = ""
    active_params: float | None = None
    tpp: float | None = None
    """The token ratio the plan declared (None: planned tokens ÷ N)."""
    schedule: Schedule | None = None
    logged_lrs: np.ndarray | None = None
    """The LR of every step, from a logged series (used when no schedule is declared)."""
    lr_logged_to: int = 0
    """The last step of that series: its last value is held from there on (0: no logged LR), unless
    `lr_shape_from` says whose schedule shape it follows."""
    lr_shape_from: str = ""
    """The rung whose schedule shape the LR past `lr_logged_to` follows (`fits.runs.lrs_carried_in_shape`: a target
    whose LR was logged in the ladder's shape so far); "": none."""
    lr_shape_told: bool = True
    """Its logged LR could tell the rungs' shape it was carried on in from a constant LR (`fits.runs.Carried.told`)."""
    lr_not_carried: str = ""
    """Why a target's LR logged to part of its plan was not carried on in the rungs' shape (its last value held)."""
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    state: str = "finished"
    config: RunConfig | None = None
    flops_from: str = "fit_flops_per_token"
    """Where `flops_per_token` came from: the run's fit FLOPs, or "6·N"."""
    eval_every: int = 0
    """Steps between predicted points of a target that was not planned (0: 1% of its plan)."""
    read_from: int = 0
    """Values of a metric logged far more often than the run's evals that `steps` and `values` were read
    from (`ladder.data.dense`); 0: the values as logged."""
    noise: float = 0.0
    """The relative standard error of a value read so (the median over the run's); 0 as logged."""
    lr_disagrees: str = ""
    """Where the run declares a schedule and logs an LR that departs from it, how (`logged_disagrees`); "" else."""

    @property
    def lr_held(self) -> bool:
        """Its LR comes from a series logged to well short of its plan (by over 1%), its last value held after."""
        return (self.schedule is None and self.logged_lrs is not None and not self.lr_shape_from
                and self.stop_after_steps - self.lr_logged_to > 0.01 * self.stop_after_steps)

    @property
    def fractions(self) -> np.ndarray:
        return self.steps / self.planned_steps

    @property
    def compute(self) -> float:
        """Fit compute of the plan it started with."""
        return self.flops_per_token * self.tokens_per_step * self.planned_steps

    @property
    def six_nd(self) -> float:
        """6·N × the tokens of the plan it started with, as rungs that give only N count compute; NaN without N."""
        n = self.active_params
        return 6.0 * float(n) * self.tokens_per_step * self.planned_steps if n else float("nan")

    @property
    def lr_source(self) -> str:
        return "schedule" if self.schedule is not None else "logged LR" if self.logged_lrs is not None else "none"

    def as_run(self, with_evals: bool = True) -> Run:
        """The prediction core's record of this run: a rung `with_evals`, a target without (its evals are what the
        prediction is scored against); a rung's LR past its last logged value is not known, a target's is held."""
        last = max(self.stop_after_steps, self.planned_steps)
        lrs = ref = None
        if self.schedule is not None:
            lrs = self.schedule.lrs(0, last + 1)
            ref = self.schedule.without_edits().lrs(0, last + 1)
        elif self.logged_lrs is not None:
            lrs = self.logged_lrs
            if with_evals and self.lr_held:
                # a rung's LR past its last logged value is not known (a rung still training, a logger that
                # stopped): its schedule's shape is compared with others' as far as it was logged
                ref = lrs[:self.lr_logged_to + 1]
        steps, values = (self.steps, self.values) if with_evals else (None, None)
        return Run(self.name, self.flops_per_token, self.tokens_per_step, self.planned_steps,
                   np.zeros(0, np.int64) if steps is None else steps, np.zeros(0) if values is None else values,
                   lrs=lrs, reference_lrs=ref, finished=self.state == "finished",
                   n_params=self.active_params, ratio=self.tpp or None, noise=self.noise)

    def prediction_steps(self) -> np.ndarray:
        """Where a prediction of this run is made: its planned evals and checkpoints (a planned run), else
        every `eval_every` steps (default 1% of the plan), its logged evals, and its last step."""
        if self.config is not None:
            cfg = self.config
            steps = set(cfg.eval_steps())
            every = cfg.checkpoint.every_steps
            if every > 0:
                steps |= set(range(every, cfg.stop_after_steps + 1, every))
        else:
            every = self.eval_every or max(1, round(self.planned_steps / 100))
            steps = set(range(every, self.stop_after_steps + 1, every)) | {int(s) for s in self.steps}
            steps = {s for s in steps if 0 < s <= self.stop_after_steps} | {self.stop_after_steps}
        return np.array(sorted(steps), dtype=np.int64)


# ---- from a planner config ----------------------------------------------------------------------------------


def from_config(cfg: RunConfig, steps=None, values=None, state: str = "finished") -> LadderRun:
    return LadderRun(
        cfg.name, float(cfg.fit_flops_per_token), int(cfg.tokens_per_step), int(cfg.stop_after_steps),
        int(cfg.schedule.total_steps), group=cfg.group, active_params=float(cfg.spec.active_params()),
        tpp=cfg.tpp or None, schedule=cfg.schedule,
        steps=np.zeros(0, np.int64) if steps is None else np.asarray(steps, np.int64),
        values=np.zeros(0) if values is None else np.asarray(values, float), state=state, config=cfg,
    )


# ---- from the store -----------------------------------------------------------------------------------------


def from_store(store: Store, row, metric: str, *, need_evals: int = 1) -> LadderRun:
    """A stored run (a row of `Store.runs`) with its `metric` evals (at least `need_evals` of them).

    A rung needs one: a curve law takes a run's evals however few, and the per-fraction law leaves out
    a run with fewer than three."""
    name, run_id = str(row["name"]), str(row["run_id"])
    evals = store.fitted_history([run_id], metric).sort_values("step")
    if len(evals) < need_evals:
        logged = sorted(set(store.history([run_id])["metric"].astype(str)))
        shown = ", ".join(repr(m) for m in logged[:6]) + (", ..." if len(logged) > 6 else "") or "nothing"
        close = difflib.get_close_matches(metric, logged, n=1)  # a typo of a key the run logs
        hint = f"did you mean {close[0]!r}? " if close and not len(evals) else ""
        raise LadderError(f"run {name!r} has {len(evals)} values of {metric!r} (it logs {shown}); {hint}predict another "
                          f"metric with --metric, name the key at import (--metric {metric}=COLUMN) or pull "
                          f"(--rename OLD={metric}), or take the run out of the store (`ladder runs --remove "
                          f"{name}`)")
    steps, values, state = evals["step"].to_numpy(np.int64), evals["value"].to_numpy(float), str(row["state"])
    if steps.size and steps.max() > 1000 * int(row["stop_after_steps"]):
        raise LadderError(f"run {name!r}: its last eval is at step {int(steps.max()):,}, "
                          f"{steps.max() / int(row['stop_after_steps']):,.0f}× its {int(row['stop_after_steps']):,} "
                          "planned steps; are its steps counted in tokens? (import the step column with --step and "
                          "the tokens with --tokens)")
    cfg = store.run_config(run_id)
    read = at_evals(steps, values, eval_grid(store, run_id, int(row["stop_after_steps"]), cfg))
    steps, values = read.steps, read.values
    if cfg is not None:
        _check_flops(name, cfg, row)
        return replace(from_config(cfg, steps, values, state), read_from=read.read_from, noise=read.noise)
    config = store.config(run_id)
    _, _, schedule = coordinates_from_config(config)
    stop = int(row["stop_after_steps"])
    flops, flops_from, n = _flops(name, row)
    lrs, logged_to, disagrees = None, 0, ""
    if schedule is None:  # no declared schedule: the logged LR, if any
        lrs, logged_to = logged_lr(store, run_id, max(stop, int(steps.max()) if steps.size else 0))
    else:
        lr = store.history([run_id], [keys.LEARNING_RATE])
        disagrees = logged_disagrees(schedule, lr["step"].to_numpy(), lr["value"].to_numpy()) if len(lr) else ""
    total = schedule.total_steps if schedule is not None else stop
    tpp = declared_tpp(f"run {name!r}", positive_or_none(config.get("tpp")), n, total * int(row["tokens_per_step"]),
                       "import it again (--replace) without tpp, or with the right one")
    return LadderRun(
        name, flops, int(row["tokens_per_step"]), stop, total,
        group=str(row["group"]), active_params=n, tpp=tpp, schedule=schedule,
        logged_lrs=lrs, lr_logged_to=logged_to, steps=steps, values=values, state=state, flops_from=flops_from,
        read_from=read.read_from,
        noise=read.noise,
        lr_disagrees=disagrees,
    )


def logged_lr(store: Store, run_id: str, end: int) -> tuple[np.ndarray | None, int]:
    """The run's LR at every step to `end`, from the optim/learning_rate it logged (held past its last value), and
    the last step it logged one at; (None, 0) where it logged none."""
    lr = store.history([run_id], [keys.LEARNING_RATE])
    if not len(lr):
        return None, 0
    return (lrs_from_logged(lr["step"].to_numpy(), lr["value"].to_numpy(), end),
            int(lr["step"][np.isfinite(lr["value"])].max()))


def eval_grid(store: Store, run_id: str, stop: int, cfg: RunConfig | None) -> np.ndarray:
    """The steps at which a metric logged far more often than evals is read: a planned run's evals (`cfg`, its
    `Store.run_config`), else the steps at which the run logged its evals (an imported run), else every 1% of its
    `stop` steps."""
    if cfg is not None:
        return np.asarray(cfg.eval_steps(), np.int64)
    logged = np.unique(store.history([run_id], [keys.EVAL_LOSS])["step"].to_numpy(np.int64))
    if logged.size >= 2:
        return logged
    every = max(1, round(stop / 100))
    return np.arange(every, stop + 1, every, dtype=np.int64)


class Read(NamedTuple):
    """A run's metric as the laws read it (`at_evals`)."""

    steps: np.ndarray
    values: np.ndarray
    read_from: int = 0
    """How many logged values it was read from; 0: as logged."""
    noise: float = 0.0
    """The median relative standard error of the values read; 0 as logged."""


def at_evals(steps: np.ndarray, values: np.ndarray, evals) -> Read:
    """A metric logged at least `dense.READ_PER` times per interval of the run's `evals` (a per-step train loss)
    read at those evals (`dense.read_at`), and at its last logged step where that many values came after the
    last eval it reached. Any other metric as logged."""
    grid = np.unique(np.asarray(evals, np.int64))
    if not steps.size or not dense.is_dense(steps, grid, dense.READ_PER):
        return Read(steps, values)
    grid = grid[grid <= steps.max()]
    if (steps > (grid.max() if grid.size else 0)).sum() >= dense.READ_PER:
        grid = np.append(grid, steps.max())
    read_steps, read_values, errors = dense.read_at(steps, values, grid)
    if read_steps.size < 2:  # stopped before a second eval: nothing to read at, its values as logged
        return Read(steps, values)
    return Read(read_steps, read_values, len(steps), float(np.median(errors / read_values)))


def last_as_read(store: Store, run_id: str, stop: int, steps: np.ndarray, values: np.ndarray, logged: float) -> float:
    """A run's last value of a metric (`logged`, its last finite one): one logged far more often than the run's evals
    (a per-step train loss) read at its last step as the laws read it (`at_evals`), not its last, noisy value."""
    try:
        cfg = store.run_config(run_id)
    except LadderError:  # a config that is not a whole run config: the logged evals give the grid
        cfg = None
    keep = np.isfinite(values)
    read = at_evals(np.asarray(steps, np.int64)[keep], np.asarray(values, float)[keep], eval_grid(store, run_id, stop,
                                                                                                cfg))
    return float(read.values[-1]) if read.read_from else float(logged)


def role_hint(runs, role: str, role_option: bool = True, whose: str = "the store's runs") -> str:
    """Where no run of `runs` (`whose`: the store's, or a group's) has `role`: what roles they have, and how to give
    the rungs theirs (and, where the command has --role, how to take every role); "" where some run has it, or
    there is none."""
    roles = sorted(set(runs["role"].astype(str)))
    if not role or role in roles or not len(runs):
        return ""
    give = ("give the rungs theirs when you pull or import them: --coord role=rung (with --replace for runs already "
            "stored, which are read again; the hero's role: hero in a --coords file)")
    return (f"; {whose} have role {', '.join(repr(r) if r else 'none' for r in roles)}: "
            + (f"--role '' takes every role (or {give})" if role_option else give))


def rungs_from_store(store: Store, group: str, metric: str, left_out: list[str] | None = None) -> list[LadderRun]:
    """The ladder: the store's runs with role 'rung' in `group`, by compute. A rung whose every value of `metric` is
    NaN, infinite, 0 or below (it diverged) has nothing to fit: it is left out, and said in `left_out` where it is
    given."""
    runs = store.runs()
    rungs = runs[(runs["role"] == "rung") & (runs["group"] == group)]
    if len(rungs) < 3:
        groups = sorted(set(runs.loc[runs["role"] == "rung", "group"]))
        if not group and len(groups) == 1:  # a target that names no group, beside a store of one ladder
            raise LadderError(f"{store.root}: the target names no group, and the rungs are group {groups[0]!r}: give "
                              f"--group {groups[0]} (or group: {groups[0]} in the target file)")
        raise LadderError(
            f"{store.root}: {len(rungs)} rung(s) of group {group!r} in the store; a prediction needs at least 3 "
            f"(pull the ladder's rungs, or give --group; groups with rungs: {', '.join(map(repr, groups)) or 'none'})"
            + role_hint(runs, "rung", role_option=False)
        )
    every = store.history(rungs["run_id"].astype(str).tolist(), [metric], include_nonfinite=True)
    rungs = _logging(store, rungs, every, metric, group, left_out)
    diverged = _diverged(every)
    if diverged:
        names = [str(n) for n, i in zip(rungs["name"], rungs["run_id"].astype(str)) if i in diverged]
        one = len(names) == 1
        said = (f"rung{'' if one else 's'} {named(names)} logged {metric!r} but no loss in it (every value NaN, "
                f"infinite, 0 or below: {'it' if one else 'they'} diverged), so the laws leave {'it' if one else 'them'} "
                "out")
        if len(rungs) - len(names) < 3:
            raise LadderError(f"{store.root}: {said}, and {len(rungs) - len(names)} rung(s) of group {group!r} are "
                              "left, where a prediction needs at least 3")
        if left_out is not None:
            left_out.append(said)
        rungs = rungs[~rungs["run_id"].astype(str).isin(diverged)]
    return sorted((from_store(store, row, metric) for _, row in rungs.iterrows()), key=lambda r: r.compute)


def _logging(store: Store, rungs, every, metric: str, group: str, left_out: list[str] | None):
    """The `rungs` that logged `metric` (`every`: its values, non-finite ones too), less those that crashed (or still
    run) before logging any: left out, and said in `left_out`. Where no rung logged it, a `LadderError` names the
    metrics they log; a finished rung that lacks it is left for `from_store` to name."""
    ids = rungs["run_id"].astype(str)
    logged = set(every["run_id"].astype(str))
    if not logged:
        keys = sorted(set(store.history(ids.tolist())["metric"].astype(str)))
        close = difflib.get_close_matches(metric, keys, n=1)
        shown = ", ".join(repr(m) for m in keys[:6]) + (", ..." if len(keys) > 6 else "") or "nothing"
        raise LadderError(f"no rung of group {group!r} logs {metric!r} (they log {shown}); "
                          + (f"did you mean {close[0]!r}? " if close else "")
                          + f"predict another metric with --metric, or name the key at import (--metric "
                          f"{metric}=COLUMN) or pull (--rename OLD={metric})")
    stopped = ~ids.isin(logged) & (rungs["state"].astype(str) != "finished")
    if not stopped.any():
        return rungs
    names = rungs.loc[stopped, "name"].astype(str).tolist()
    one = len(names) == 1
    said = (f"rung{'' if one else 's'} {named(names)} logged no {metric!r} ("
            + ", ".join(f"{n}: {st} at step {_int_or_0(last):,}" for n, st, last in
                        zip(names, rungs.loc[stopped, "state"], rungs.loc[stopped, "last_step"]))
            + f"), so the laws leave {'it' if one else 'them'} out")
    if len(rungs) - len(names) < 3:
        raise LadderError(f"{store.root}: {said}, and {len(rungs) - len(names)} rung(s) of group {group!r} are left, "
                          "where a prediction needs at least 3")
    if left_out is not None:
        left_out.append(said)
    return rungs[~stopped]


def _int_or_0(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _diverged(every) -> set[str]:
    """The run ids in `every` (rungs' values of a metric, non-finite ones too) with no loss in it (no positive, finite
    value, as `Store.fitted_history` keeps)."""
    value = every["value"].to_numpy(float)
    loss = every[np.isfinite(value) & (value > 0)]
    return set(every["run_id"].astype(str)) - set(loss["run_id"].astype(str))


def target_from_store(store: Store, name: str, metric: str) -> LadderRun:
    """A run already in the store (e.g. the live hero) as a target, with whatever evals it has."""
    row = store.run(name)
    return from_store(store, row, metric, need_evals=0)


# ---- from a target file -------------------------------------------------------------------------------------


def target_from_file(path: Path) -> LadderRun:
    """A target that was not planned here: one entry of the coordinates format, with its name.

    ``name: hero``, ``active_params``, ``fit_flops_per_token`` (or only ``active_params``: 6·N),
    ``stop_after_steps``, ``tokens_per_step``, ``group``, ``schedule: {peak_lr, total_steps,
    warmup_steps, decay, min_lr_ratio}``, optional ``tpp`` and ``eval_every`` (steps between
    predicted points). ``{NAME: {...}}`` works too; a ``role`` is ignored.
    """
    data = load_yaml(Path(path))
    refuse_prediction(path, data, "a target file")
    lines = getattr(data, "lines", {})  # each key's line, for the messages
    if isinstance(data, dict) and "name" not in data and len(data) == 1:
        (name, body), = data.items()
        lines = getattr(body, "lines", lines)
        data = {**body, "name": name} if isinstance(body, dict) else data
    where = str(path)
    if not isinstance(data, dict) or not data.get("name"):
        missing = "it has no name; " if isinstance(data, dict) else ""
        raise LadderError(f"{where}: {missing}a target is one mapping with a name, e.g. {{name: hero, active_params: "
                          "7e9, stop_after_steps: 100000, tokens_per_step: 4194304, schedule: {...}}")
    unknown = sorted(set(map(str, data)) - set(TARGET_FIELDS))
    if unknown:
        close = difflib.get_close_matches(unknown[0], TARGET_FIELDS, n=1)
        line = f" at line {lines[unknown[0]]}" if unknown[0] in lines else ""
        raise LadderError(f"{where}: unknown field(s) {', '.join(unknown)}{line}"
                          + (f" (did you mean {close[0]!r}?)" if close else "") + f"; known: {', '.join(TARGET_FIELDS)}")
    name = str(data["name"])
    problem = name_problem(name, as_file=False)  # its files are named by `file_part`, as a stored run's are
    if problem:
        raise LadderError(f"{where}: name {name!r} {problem}; give the target a plain name")
    def number(key: str) -> int | float | None:  # a value the file gives, refused with its line
        with at_line(lines.get(key)):
            return coordinate_number(where, key, data[key])

    with at_line(lines.get("schedule")):
        schedule = schedule_from(data["schedule"], where) if data.get("schedule") is not None else None
    num = {k: number(k) for k in ("active_params", "total_params", "fit_flops_per_token", "stop_after_steps",
                                  "tokens_per_step", "planned_tokens", "eval_every") if data.get(k) is not None}
    if "stop_after_steps" not in num and schedule is not None:
        num["stop_after_steps"] = schedule.horizon
    given = [k for k in PLAN_FIELDS if k in num]
    derive_tokens(num)
    if len(given) == len(PLAN_FIELDS) and abs(num["stop_after_steps"] * num["tokens_per_step"] / num["planned_tokens"] - 1) > 0.01:
        raise LadderError(f"{where}: stop_after_steps × tokens_per_step = {num['stop_after_steps'] * num['tokens_per_step']:,} "
                          f"is not planned_tokens {num['planned_tokens']:,}; give two of the three")
    for need in ("stop_after_steps", "tokens_per_step"):
        if need not in num:
            raise LadderError(f"{where}: no '{need}'; give it, or planned_tokens with the other (steps and tokens per "
                              "step place every prediction)")
    stop = int(num["stop_after_steps"])
    if schedule is not None and schedule.horizon != stop:
        raise LadderError(f"{where}: its schedule runs {schedule.horizon:,} steps but stop_after_steps is {stop:,}; "
                          "make them agree")
    flops, flops_from, n = _flops(name, {"fit_flops_per_token": num.get("fit_flops_per_token"),
                                         "active_params": num.get("active_params")}, where)
    # imported runs were checked as they came in; a target's total, which no law reads, only as a count
    check_counts(where, flops if flops_from != SIX_N else None, n, num.get("total_params"))
    tpp = number("tpp") if data.get("tpp") is not None else None
    every = int(num.get("eval_every", 0))
    if every and stop / every > MAX_PREDICTED_POINTS:
        raise LadderError(f"{where}: eval_every {every:,} predicts at {stop // every:,} steps, more than the "
                          f"{MAX_PREDICTED_POINTS:,} a prediction holds; give eval_every {-(-stop // MAX_PREDICTED_POINTS):,} "
                          "or more")
    total = schedule.total_steps if schedule is not None else stop
    tpp = declared_tpp(where, tpp, n, total * num["tokens_per_step"], "drop tpp, or correct it or the counts")
    trainable_ratio(where, n, total * num["tokens_per_step"])
    return LadderRun(name, flops, int(num["tokens_per_step"]), stop, total, group=str(data.get("group") or ""),
                     active_params=n, tpp=tpp, schedule=schedule, flops_from=flops_from, eval_every=every)


def save_target(run: LadderRun, path: Path) -> Path:
    """`run` as a file `ladder predict` reads back: its planner config when it has one, else a target file."""
    if run.config is not None:
        run.config.replace(schedule=run.schedule).save(path)
        return path
    import yaml

    from ladder.config.yamlio import to_dict
    from ladder.files import write_text_atomic

    n = run.active_params
    entry = {"name": run.name, "group": run.group, "active_params": int(n) if n and float(n).is_integer() else n,
             "fit_flops_per_token": run.flops_per_token if run.flops_from != SIX_N else None,
             "stop_after_steps": run.stop_after_steps, "tokens_per_step": run.tokens_per_step, "tpp": run.tpp,
             "eval_every": run.eval_every or None,
             "schedule": to_dict(run.schedule) if run.schedule is not None else None}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, yaml.safe_dump({k: v for k, v in entry.items() if v not in (None, "")},
                                                  sort_keys=False))


# ---- coordinates --------------------------------------------------------------------------------------------


def flops_per_token(name: str, row: Any) -> tuple[float, str]:
    """A stored run's fit FLOPs per token, or 6·N when only N is known, and which it is."""
    flops, source, _ = _flops(name, row)
    return flops, source


def _flops(name: str, row: Any, where: str | None = None) -> tuple[float, str, float | None]:
    flops, n = positive_or_none(row["fit_flops_per_token"]), positive_or_none(row["active_params"])
    if flops is not None:
        return flops, "fit_flops_per_token", n
    if n is not None:
        return 6.0 * n, SIX_N, n
    raise LadderError(f"{where or 'run ' + repr(name)}: neither fit_flops_per_token nor active_params is known; "
                      "give one (fit FLOPs per token, or N for 6·N)")


def _check_flops(name: str, cfg: RunConfig, row) -> None:
    stored = positive_or_none(row["fit_flops_per_token"])
    if stored is not None and abs(stored / cfg.fit_flops_per_token - 1) > FLOPS_AGREE:
        raise LadderError(
            f"run {name!r}: its model spec gives {cfg.fit_flops_per_token:.4g} fit FLOPs per token but its "
            f"coordinates say {stored:.4g} ({stored / cfg.fit_flops_per_token - 1:+.1%}); pull it again with the "
            "right fit_flops_per_token, or fix the spec"
        )


TPP_AGREE = 0.1
"""A declared tpp may sit this far from the tokens per parameter a run's own counts give (a planner rounds steps)."""


def trainable_ratio(where: str, n: float | None, planned_tokens: float) -> None:
    """Refuse a run (a target file, a compared rung) whose planned tokens per active parameter lie where no run trains
    (`RATIO_RANGE`): a law carried there holds nothing (a loss of 95 nats), and a count typed in other units is
    likelier."""
    from fits.predictor import RATIO_RANGE, untrainable

    if not n or not untrainable(planned_tokens / n):
        return
    raise LadderError(f"{where}: it plans {planned_tokens / n:.3g} tokens per active parameter ({planned_tokens:.4g} "
                      f"tokens, active_params {n:.4g}), outside {RATIO_RANGE[0]:g}–{RATIO_RANGE[1]:g}, where runs train: "
                      "is active_params or tokens_per_step in other units (billions, millions)? Give both as counts")


def declared_tpp(where: str, tpp: float | None, n: float | None, planned_tokens: float, fix: str) -> float | None:
    """A run's declared tokens per parameter (`tpp`), checked against its counts (`planned_tokens` ÷ `n`): the
    laws group and compare runs by the declared ratio, so one that disagrees is a `LadderError`; `fix` says how
    to give another."""
    if tpp is None or not n:
        return tpp
    counted = planned_tokens / n
    if abs(tpp / counted - 1) > TPP_AGREE:
        raise LadderError(f"{where}: tpp {tpp:g} is {tpp / counted:.3g}× the {counted:.4g} tokens per parameter its "
                          f"counts give (steps × tokens_per_step ÷ active_params); tpp names the ratio a run was planned "
                          f"at, which the laws compare runs by: {fix}")
    return tpp


def flops_notes(runs: list[LadderRun]) -> list[str]:
    """One line naming the runs whose compute is 6·N·D (only N known)."""
    return six_n_note([r.name for r in runs if r.flops_from == SIX_N])


def six_n_note(names: list[str]) -> list[str]:
    """The line that says which runs' compute is 6·N·D (none when `names` is empty)."""
    if not names:
        return []
    return [f"compute is 6·N·D for {named(names)}: only N is known (fit FLOPs per token count attention, 6·N does not)"]


def named(names: list[str], most: int = 8) -> str:
    """The names, or with more than `most` of them their count, the first three and the last."""
    return ", ".join(names) if len(names) <= most else f"{len(names)} runs ({', '.join(names[:3])}, …, {names[-1]})"


def active_params(row: Any) -> float | None:
    """A stored run's active parameter count N (None when not known)."""
    return positive_or_none(row["active_params"])


"""Predict a target run (the hero) from the rungs in the store: a thin adapter to `fits.predictor`.

The store's rungs and the target's config become `fits.runs.Run` records (coordinates, LR sequence,
evals); the prediction core fits every candidate law, backtests them on the ladder itself (the largest
size held out and predicted from the rest), predicts with the one that did best (or the ensemble, or
the method named in the settings), and widens its band by the backtest's errors carried to the
target's distance. This module turns the result into a `Prediction` table at the target's planned
evals and checkpoints, with the assumptions it holds under and the settings it was made with (the
watcher and `replan` re-predict with exactly those).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import fits
from fits import predictor as core
from fits.candidates import PUBLISHED_SHAPE, Options
from fits.runs import Run
from ladder import runfiles as keys
from ladder.errors import LadderError
from ladder.prediction import FormUsed, Prediction
from ladder.runconfig import RunConfig
from ladder.schedule import Schedule
from ladder.store import Store

FORM_NAMES = {"per-fraction": "per-fraction law", "per-fraction-free": "per-fraction law (free)",
              "multipower": "multi-power law", "momentum": "momentum law", "ensemble": "ensemble"}


@dataclass(frozen=True)
class PredictSettings:
    metric: str = keys.EVAL_LOSS
    """The metric predicted (nats per token)."""
    group: str | None = None
    """Rungs are the store's runs with role 'rung' in this group (default: the target's group)."""
    n_boot: int = 200
    """Bootstrap refits of the per-fraction law."""
    method: str = "auto"
    """"auto": the candidate with the lowest backtest score on the ladder; or one of `fits.predictor.METHODS`."""
    candidates: tuple[str, ...] = core.CANDIDATES
    shape: dict[str, float] | None = field(default_factory=lambda: dict(PUBLISHED_SHAPE))
    """Multi-power annealing shape held fixed (None fits it)."""
    seed: int = 0
    smooth: int | None | str = "auto"
    """Per-fraction law: basis size in log g; None: free; "auto": chosen by leaving out one rung."""
    E: float | None = None
    """Pin the per-fraction law's irreducible loss."""
    ratio_tol: float = 0.01
    """Token ratios within this relative tolerance count as one."""
    backtest: bool = True
    """Choose the law and floor the band by a backtest on the ladder (needs 3 sizes)."""

    def core(self) -> core.Settings:
        options = Options(smooth=self.smooth, E=self.E, shape=self.shape, n_boot=self.n_boot, seed=self.seed,
                          ratio_tol=self.ratio_tol)
        return core.Settings(method=self.method, candidates=tuple(self.candidates), options=options,
                             backtest=self.backtest)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["candidates"] = list(self.candidates)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> PredictSettings:
        known = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in dict(d).items() if k in known}
        if "candidates" in d:
            d["candidates"] = tuple(d["candidates"])
        return cls(**d)


@dataclass(frozen=True)
class Rung:
    name: str
    config: RunConfig
    steps: np.ndarray
    values: np.ndarray
    state: str

    @property
    def fractions(self) -> np.ndarray:
        return self.steps / self.config.schedule.total_steps

    @property
    def compute(self) -> float:
        """Fit compute of the planned (unedited) run."""
        return self.config.fit_flops_per_token * self.config.schedule.total_steps * self.config.tokens_per_step


# ---- reading the rungs ----------------------------------------------------------------------------------


def load_rungs(store: Store, group: str, metric: str) -> list[Rung]:
    runs = store.runs()
    rungs = runs[(runs["role"] == "rung") & (runs["group"] == group)]
    if len(rungs) < 3:
        raise LadderError(
            f"{store.root}: {len(rungs)} rung(s) of group {group!r} in the store; a prediction needs at least 3 "
            "(pull the ladder's rungs, or give --group)"
        )
    hist = store.history(list(rungs["run_id"]), [metric])
    out = []
    for _, row in rungs.iterrows():
        cfg = store.run_config(str(row["run_id"]))
        if cfg is None:
            raise LadderError(f"rung {row['name']!r}: its config holds no run config (schedule, sizes); "
                              "predictions need rungs trained from planner configs")
        h = hist[hist["run_id"] == row["run_id"]].sort_values("step")
        h = h[np.isfinite(h["value"].to_numpy(float))]
        if len(h) < 3:
            raise LadderError(f"rung {row['name']!r} has {len(h)} values of {metric!r}; pull it again or drop it")
        out.append(Rung(str(row["name"]), cfg, h["step"].to_numpy(np.int64), h["value"].to_numpy(float),
                        str(row["state"])))
    return sorted(out, key=lambda r: r.compute)


def as_run(cfg: RunConfig, steps=None, values=None, state: str = "finished") -> Run:
    """A planner config (and its evals) as the prediction core's run record."""
    sched = cfg.schedule
    last = max(int(cfg.stop_after_steps), int(sched.total_steps))
    return Run(cfg.name, cfg.fit_flops_per_token, cfg.tokens_per_step, sched.total_steps,
               np.zeros(0) if steps is None else steps, np.zeros(0) if values is None else values,
               lrs=sched.lrs(0, last + 1), reference_lrs=sched.without_edits().lrs(0, last + 1),
               finished=state == "finished", n_params=float(cfg.spec.active_params()), ratio=cfg.tpp or None)


# ---- the prediction -----------------------------------------------------------------------------------------


def prediction_steps(target: RunConfig) -> np.ndarray:
    """Every planned eval step and checkpoint of the target."""
    steps = set(target.eval_steps())
    every = target.checkpoint.every_steps
    if every > 0:
        steps |= set(range(every, target.stop_after_steps + 1, every))
    return np.array(sorted(steps), dtype=np.int64)


def planned_fraction(schedule: Schedule, steps: np.ndarray) -> np.ndarray:
    """step / the plan in force at that step (the edited plan's fraction, shown beside the original's)."""
    planned = np.full(steps.shape, float(schedule.total_steps))
    for edit in schedule.edits:
        planned = np.where(steps > edit.at_step, float(edit.horizon), planned)
    return steps / planned


def predict(store: Store, target: RunConfig, settings: PredictSettings | None = None) -> Prediction:
    settings = settings or PredictSettings()
    group = settings.group if settings.group is not None else target.group
    rungs = load_rungs(store, group, settings.metric)
    if any(r.name == target.name for r in rungs):
        raise LadderError(f"{target.name!r} is one of the rungs; predict a run that is not part of the ladder")
    if target.stop_after_steps > target.schedule.total_steps:
        raise LadderError(
            f"{target.name}: its schedule runs to step {target.stop_after_steps:,}, past the {target.schedule.total_steps:,} "
            "it was planned for; the rungs never trained past their plan, so no fit covers it. "
            "Plan the run with the longer horizon instead"
        )
    steps = prediction_steps(target)
    runs = [as_run(r.config, r.steps, r.values, r.state) for r in rungs]
    try:
        result = core.predict(runs, as_run(target), steps, settings.core())
    except fits.FitError as exc:
        raise LadderError(f"{target.name}: {exc}") from None
    return to_prediction(result, target, rungs, steps, settings)


def to_prediction(result: core.CorePrediction, target: RunConfig, rungs: list[Rung], steps: np.ndarray,
                  settings: PredictSettings) -> Prediction:
    b = result.band
    warnings = list(result.warnings)
    for r in rungs:
        if r.state != "finished" or r.fractions[-1] < 1 - 1e-9:
            warnings.append(f"rung {r.name} stopped at {r.fractions[-1]:.0%} of its plan; the laws take the evals it "
                            "logged (the per-fraction law fits it where it has data)")
    in_assumptions, assumptions = _assumptions(rungs, target, steps, settings.ratio_tol)
    median = b.median
    if np.isnan(median).any():
        finite = np.isfinite(median)
        in_assumptions &= finite
        if finite.any():
            first = int(steps[finite].min())
            assumptions["early steps"] = f"steps before {first:,} come before the rungs' first shared eval: not predicted"
    table = pd.DataFrame({
        "step": steps,
        "tokens": steps * target.tokens_per_step,
        "fraction": steps / target.schedule.total_steps,
        "fraction_edited": planned_fraction(target.schedule, steps),
        "compute": steps * target.tokens_per_step * target.fit_flops_per_token,
        "median": median, "lo50": b.lo50, "hi50": b.hi50, "lo90": b.lo90, "hi90": b.hi90,
        "in_assumptions": in_assumptions,
    })
    forms = _forms(result)
    return Prediction(
        run_name=target.name, metric=settings.metric, table=table, forms=tuple(forms),
        assumptions=assumptions, schedule=_schedule_dict(target.schedule),
        planned_steps=target.stop_after_steps, warnings=tuple(dict.fromkeys(warnings)),
        method=result.method, why=result.why, backtest=tuple(result.table()), settings=settings.to_dict(),
    )


def _forms(result: core.CorePrediction) -> list[FormUsed]:
    total = sum(result.weights.values()) or 1.0
    names = list(result.weights) if result.method == "ensemble" else [result.method]
    out = []
    for name in names:
        o = result.outcomes[name]
        params = {k: float(v) for k, v in o.params.items() if isinstance(v, (int, float)) and v is not None}
        weight = result.weights[name] / total if result.method == "ensemble" else 1.0
        out.append(FormUsed(FORM_NAMES.get(name, name), o.why, params, weight))
    return out


# ---- assumptions --------------------------------------------------------------------------------------------


def _assumptions(rungs: list[Rung], target: RunConfig, steps: np.ndarray, ratio_tol: float = 0.01):
    ok = np.ones(steps.shape, dtype=bool)
    rung = rungs[-1].config
    same_tpp = all(abs(r.config.tpp / target.tpp - 1) <= ratio_tol for r in rungs) if target.tpp > 0 else False
    out = {
        "schedule": f"rungs: {rung.schedule.without_edits().describe()}; target: {target.schedule.describe()}",
        "token ratio": f"rungs {rung.tpp:g}, target {target.tpp:g} tokens per active parameter"
                       + ("" if same_tpp else " (differs: the per-fraction law does not apply)"),
    }
    rung_phases = [(p.start_fraction, p.seq_len) for p in rung.schedule.seq_phases]
    target_phases = [(p.start_fraction, p.seq_len) for p in target.schedule.seq_phases]
    if target.seq_len != rung.seq_len or target_phases != rung_phases:
        first = min([f for f, _ in target_phases if (f, _) not in rung_phases] or [0.0])
        ok &= steps / target.schedule.total_steps < first
        out["sequence length"] = (f"target {target.seq_len} with switches {target_phases}, rungs {rung.seq_len} with "
                                  f"{rung_phases}: steps from {first:.0%} on are outside the assumptions")
    else:
        out["sequence length"] = f"{target.seq_len} tokens" + (f", switches {target_phases}" if target_phases else "")
    if target.data != rung.data:
        ok[:] = False
        out["data mix"] = f"target {target.data.source} differs from the rungs' {rung.data.source}: not comparable"
    else:
        out["data mix"] = f"{rung.data.source}, as the rungs"
    valid = steps[ok]
    out["valid up to"] = f"step {int(valid.max()):,}" if len(valid) else "nowhere: see above"
    return ok, out


def _schedule_dict(schedule: Schedule) -> dict:
    from ladder.configio import to_dict

    return to_dict(schedule)

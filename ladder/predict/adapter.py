"""Predict a target run (the hero) from the rungs in the store: a thin adapter to `fits.predictor`.

The store's rungs and the target's config become `fits.runs.Run` records (coordinates, LR sequence,
evals); the prediction core fits every candidate law, backtests them on the ladder itself (the largest
size held out and predicted from the rest), predicts with the one that did best (a law or the mean of
the laws that apply) or with the method named in the settings, and widens its band by the backtest's
errors carried to the target's distance. This module turns the result into a `Prediction` table at the target's planned
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
from fits.runs import batch_off_trend, batch_trend, lrs_in_the_ladders_shape
from ladder import metrics as keys
from ladder.config.limits import resamples
from ladder.config.runconfig import RunConfig
from ladder.config.schedule import Schedule, as_logged
from ladder.data.runview import (
    SIX_N,
    LadderRun,
    flops_notes,
    from_config,
    named,
    ran_its_plan,
    rungs_from_store,
)
from ladder.data.sources.coords import planned_fraction
from ladder.data.store import Store
from ladder.errors import LadderError
from ladder.predict.prediction import LR, LR_HI, LR_LO, FormUsed, Prediction
from ladder.predict.stale import rung_data

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
    E_from: str = "fit"
    """Per-fraction law, E not pinned: "fit" (at the target's token ratio) or "ladder" (from every rung's
    final loss, `fits.asymptote`)."""
    ratio_tol: float = 0.01
    """Token ratios within this relative tolerance count as one."""
    backtest: bool = True
    """Choose the law and floor the band by a backtest on the ladder (needs 3 sizes)."""
    floor: str = "profile"
    """The curve laws' floor under L0 (`fits.candidates.Options.floor`): "profile" or "zero"."""

    def __post_init__(self) -> None:
        # as `--n-boot` is checked: under 20 refits the per-fraction law has no band and drops out of the
        # candidates, which changed the prediction without a word
        resamples("PredictSettings.n_boot", self.n_boot, least=20, none_ok=False)

    def core(self) -> core.Settings:
        options = Options(smooth=self.smooth, E=self.E, E_from=self.E_from, shape=self.shape, n_boot=self.n_boot,
                          seed=self.seed, ratio_tol=self.ratio_tol, floor=self.floor)
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
        d.setdefault("floor", "zero")  # recorded before the floor was profiled: re-predict as it was made
        if "candidates" in d:
            d["candidates"] = tuple(d["candidates"])
        return cls(**d)


# ---- the prediction -----------------------------------------------------------------------------------------


def prediction_steps(target: RunConfig | LadderRun) -> np.ndarray:
    """Every planned eval step and checkpoint of the target (a target file: every 1% of its plan)."""
    return (from_config(target) if isinstance(target, RunConfig) else target).prediction_steps()


def predict(store: Store, target: RunConfig | LadderRun, settings: PredictSettings | None = None) -> Prediction:
    """The target's curve from the rungs in the store: a planner config, or any run's coordinates."""
    settings = settings or PredictSettings()
    target = from_config(target) if isinstance(target, RunConfig) else target
    group = settings.group if settings.group is not None else target.group
    left_out: list[str] = []
    rungs = rungs_from_store(store, group, settings.metric, left_out)
    if any(r.name == target.name for r in rungs):
        raise LadderError(f"{target.name!r} is one of the rungs (its role in the store is rung); predict a run that is "
                          "not part of the ladder; where it is the hero, import or pull it again with role hero (--coord "
                          "role=hero, or role: hero in the --coords file)")
    if target.stop_after_steps > target.planned_steps:
        raise LadderError(
            f"{target.name}: its schedule runs to step {target.stop_after_steps:,}, past the {target.planned_steps:,} "
            "it was planned for; the rungs never trained past their plan, so no fit covers it. "
            "Plan the run with the longer horizon instead"
        )
    target = _lr_in_the_ladders_shape(target, rungs, settings.ratio_tol)
    steps = target.prediction_steps()
    try:
        result = core.predict([r.as_run() for r in rungs], target.as_run(with_evals=False), steps, settings.core())
    except fits.FitError as exc:
        raise LadderError(f"{target.name}: {exc}" + (f"; {_held_lr(target)}" if target.lr_held else "")) from None
    pred = to_prediction(result, target, rungs, steps, settings)
    left_out += _axes_differ(target, rungs)
    return dataclasses.replace(pred, warnings=(*left_out, *pred.warnings),
                               rung_data=rung_data(store, group, [r.name for r in rungs], settings.metric))


def _axes_differ(target: LadderRun, rungs: list[LadderRun]) -> list[str]:
    """A warning where the target's compute is 6·N and every rung's its fit FLOPs: the distance the band's floor is
    carried over is measured from one count to the other, short by the attention fit FLOPs count."""
    if target.flops_from != SIX_N or any(r.flops_from == SIX_N for r in rungs):
        return []
    big = max(rungs, key=lambda r: r.flops_per_token)
    share = f" (the largest rung's are {big.flops_per_token / (6 * big.active_params):.3g}× its 6·N)" \
        if big.active_params else ""
    return [f"{target.name}'s compute per token is 6·N (it gives no fit_flops_per_token) and the rungs' is their fit "
            f"FLOPs, which count attention{share}: how far the target lies past the rungs, which the band is widened "
            "by, is measured from one count to the other and comes out short; give the target's fit_flops_per_token "
            "(`ladder spec` counts it) for a band on one count"]


def _lr_in_the_ladders_shape(target: LadderRun, rungs: list[LadderRun], ratio_tol: float) -> LadderRun:
    """A target whose LR is logged to part of its plan with its LR carried on in the rungs' schedule shape where
    its logged LR has kept to it (`fits.runs.lrs_in_the_ladders_shape`); else as it was (its last value held)."""
    if not target.lr_held:
        return target
    found = lrs_in_the_ladders_shape(target.as_run(with_evals=False), target.lr_logged_to, [r.as_run() for r in rungs],
                                     ratio_tol)
    if found.lrs is None:
        return dataclasses.replace(target, lr_not_carried=found.why_not)
    return dataclasses.replace(target, logged_lrs=found.lrs, lr_shape_from=found.like, lr_shape_told=found.told)


def _lr_shape_note(target: LadderRun) -> str:
    """What the LR of a target whose LR was carried on in the rungs' shape is, and how to say otherwise."""
    so_far = ("in the rungs' schedule shape so far" if target.lr_shape_told else
              "too little of it to tell the rungs' schedule shape from a constant LR (it agrees with both so far)")
    return (f"{_logged_to(target)}, {so_far}; past it the laws take the rungs' shape (as {target.lr_shape_from}'s, "
            f"scaled to its logged LR) to step {target.stop_after_steps:,}; declare its schedule {_DECLARE} if it departs "
            "from the rungs'")


_DECLARE = "(schedule: in the --coords file, or a target file with --target)"
"""Where a target's schedule is declared."""


def _logged_to(target: LadderRun) -> str:
    to, stop = target.lr_logged_to, target.stop_after_steps
    return f"its LR is logged to step {to:,} ({to / stop:.0%} of its {stop:,} steps)"


def _held_lr(target: LadderRun) -> str:
    """What a target whose LR is logged to part of its plan is predicted with, and how to give the rest."""
    why = f" ({target.lr_not_carried})" if target.lr_not_carried else ""
    return (f"{_logged_to(target)}, and the laws hold its last value, {target.logged_lrs[target.lr_logged_to]:.3g}, to "
            f"the end, as a run whose LR no longer decays{why}; declare its schedule {_DECLARE} to predict the run as it "
            "will train")


def assumed_lr(target: LadderRun, steps: np.ndarray) -> dict[str, np.ndarray]:
    """The LR the prediction of `target` assumes it logs at each of `steps` (`LR`), and its least and largest over the
    steps since the step before (`LR_LO`, `LR_HI`); NaN where it knows none. A declared schedule's LR at a step is that
    of the update ending there (`as_logged`, as trainers log it); a logged LR's is its own value there, carried on in
    the rungs' shape or held past its last."""
    lrs = target.as_run(with_evals=False).lrs
    steps = np.asarray(steps, dtype=np.int64)
    if lrs is None or not len(lrs) or not len(steps):
        return {c: np.full(len(steps), np.nan) for c in (LR, LR_LO, LR_HI)}
    every = np.arange(int(steps[-1]) + 1)
    logged = as_logged(lrs, every) if target.schedule is not None else lrs[np.clip(every, 0, len(lrs) - 1)]
    # each row's steps: those since the row before (the rows' steps rise); from step 1, as nothing is logged at step 0
    starts = np.r_[min(1, int(steps[0])), steps[:-1] + 1]
    return {LR: logged[steps], LR_LO: np.minimum.reduceat(logged, starts), LR_HI: np.maximum.reduceat(logged, starts)}


def _short_rungs(rungs: list[LadderRun]) -> list[str]:
    """One warning for the rungs whose evals end short of their plans, still training and stopped apart."""
    out = []
    short = [r for r in rungs if not ran_its_plan(r.state, int(r.steps[-1]), r.planned_steps)]
    for running in (True, False):
        these = [r for r in short if (r.state == "running") == running]
        if not these:
            continue
        at = sorted(float(r.fractions[-1]) for r in these)
        where = f"{at[0]:.0%}" if f"{at[0]:.0%}" == f"{at[-1]:.0%}" else f"{at[0]:.0%}–{at[-1]:.0%}"
        one = len(these) == 1
        what = ("still training" if running else "stopped") + f" at {where} of {'its plan' if one else 'their plans'}"
        listed = named([r.name for r in these])
        who = (f"rung {listed}" if one else f"{len(these)} rungs ({listed})" if len(these) <= 8
               else listed.replace("runs", "rungs", 1))
        out.append(f"{who} {what}; the laws take the evals {'it' if one else 'they'} logged (the per-fraction law fits "
                   f"{'it' if one else 'them'} where {'it has' if one else 'they have'} data)")
    return out


def to_prediction(result: core.CorePrediction, target: LadderRun, rungs: list[LadderRun], steps: np.ndarray,
                  settings: PredictSettings) -> Prediction:
    b = result.band
    warnings = flops_notes([*rungs, target]) + list(result.warnings)
    warnings += _short_rungs(rungs)
    warnings += [f"{r.name}: {r.lr_disagrees}" for r in [*rungs, target] if r.lr_disagrees]
    if target.lr_held:
        warnings.append(f"{target.name}: {_held_lr(target)}")
    elif target.lr_shape_from:
        warnings.append(f"{target.name}: {_lr_shape_note(target)}")
    in_assumptions, assumptions = _assumptions(rungs, target, steps, settings.ratio_tol)
    read = [r for r in rungs if r.read_from]
    if read:
        assumptions["values"] = (
            f"{settings.metric} is logged far more often than the rungs' evals: {named([r.name for r in read])} read "
            f"at their evals ({sum(r.read_from for r in read):,} values, {sum(len(r.steps) for r in read):,} points), "
            "each a local linear fit over the values between the evals on either side")
    median = b.median
    if np.isnan(median).any():
        finite = np.isfinite(median)
        in_assumptions &= finite
        if finite.any():
            first, last = int(steps[finite].min()), int(steps[finite].max())
            if not finite[0]:
                assumptions["early steps"] = f"steps before {first:,} come before the rungs' first shared eval: not predicted"
            if not finite[-1]:
                share = f"{last / target.planned_steps:.0%} of the plan"
                assumptions["late steps"] = (f"steps past {last:,} ({share}) come after the evals of the rungs the law "
                                             "fits: not predicted")
                warnings.append(f"the prediction ends at step {last:,} ({share}), where the evals of the rungs the law "
                                "fits end: the loss falls on to the end of a run, faster as its LR decays, and no rung "
                                "shows how far; rungs with evals to the end of their plans predict the final")
        assumptions["valid up to"] = _valid_up_to(steps, in_assumptions)
    if result.carried_from is not None:
        at = result.carried_from
        assumptions["carried steps"] = (f"steps past {at:,} ({at / target.planned_steps:.0%} of the plan) come after "
                                        f"the rungs' evals: the laws that stop there give way to "
                                        f"{core.laws(result.carried_by, possessive=True)} fall from the ensemble's "
                                        "value there, as the LR decays")
    table = pd.DataFrame({
        "step": steps,
        "tokens": steps * target.tokens_per_step,
        "fraction": steps / target.planned_steps,
        "fraction_edited": planned_fraction(target.schedule, steps, target.planned_steps),
        "compute": steps * target.tokens_per_step * target.flops_per_token,
        "median": median, "lo50": b.lo50, "hi50": b.hi50, "lo90": b.lo90, "hi90": b.hi90,
        "in_assumptions": in_assumptions, **assumed_lr(target, steps),
    })
    forms = _forms(result)
    return Prediction(
        run_name=target.name, metric=settings.metric, table=table, forms=tuple(forms),
        assumptions=assumptions, schedule=_schedule_dict(target.schedule),
        planned_steps=target.stop_after_steps, warnings=tuple(dict.fromkeys(warnings)),
        method=result.method, why=result.why, backtest=tuple(result.table()), settings=settings.to_dict(),
        rungs=tuple(r.name for r in rungs), target_params=target.active_params,
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


def _assumptions(rungs: list[LadderRun], target: LadderRun, steps: np.ndarray, ratio_tol: float = 0.01):
    """What the prediction holds under, from what the runs' descriptions say (nothing they do not say)."""
    ok = np.ones(steps.shape, dtype=bool)
    big = rungs[-1]
    ratios = [r.as_run().token_ratio for r in rungs]
    mine = target.as_run(with_evals=False).token_ratio
    same = [abs(x / mine - 1) <= ratio_tol for x in ratios]
    out = {"schedule": f"rungs: {_describe_rungs(rungs)}; target: {_describe(target, edited=True)}"}
    out["token ratio"] = (f"rungs {_span(ratios)}, target {mine:.4g} tokens per parameter"
                          + ("" if all(same) else f" ({sum(same)} of {len(rungs)} rungs within {ratio_tol * 100:g}%)"))
    if core.untrainable(mine):  # no run trains there: a count in other units, not a run
        ok[:] = False
        out["token ratio"] += (f": outside {core.RATIO_RANGE[0]:g}–{core.RATIO_RANGE[1]:g}, where runs train, so outside the "
                               "assumptions (are the target's parameters or tokens in another unit?)")
    six = [r.name for r in [*rungs, target] if r.flops_from == SIX_N]
    out["compute"] = "6·N·D for " + named(six) if six else "fit FLOPs per token × tokens"
    if all(r.active_params for r in [*rungs, target]):
        out["compute"] += "; the per-fraction law's axis is 6·N·D (N known for every run: fit FLOPs count attention)"
    out["batch"] = _batch(rungs, target)
    rung, cfg = big.config, target.config
    # Switches of sequence length come with a planner config or a target file's schedule; the first length
    # only with a planner config (a target file's tokens per step say nothing of it).
    rung_phases, target_phases = _seq_phases(big), _seq_phases(target)
    rung_len, target_len = (None if c is None else c.seq_len for c in (rung, cfg))
    if target_phases != rung_phases or None not in (rung_len, target_len) and rung_len != target_len:
        first = min([f for f, _ in target_phases if (f, _) not in rung_phases] or [0.0])
        ok &= steps / target.planned_steps < first
        out["sequence length"] = (f"target {target_len or 'its first length'} {_switches(target_phases)}, rungs "
                                  f"{rung_len or 'their first length'} {_switches(rung_phases)}: steps from {first:.0%} "
                                  "on are outside the assumptions")
    elif cfg is not None:
        out["sequence length"] = f"{cfg.seq_len} tokens" + (f", {_switches(target_phases)}" if target_phases else "")
    if rung is not None and cfg is not None:
        if cfg.data != rung.data:
            ok[:] = False
            out["data mix"] = f"target {cfg.data.source} differs from the rungs' {rung.data.source}: not comparable"
        else:
            out["data mix"] = f"{rung.data.source}, as the rungs"
    out["valid up to"] = _valid_up_to(steps, ok)
    return ok, out


def _valid_up_to(steps: np.ndarray, ok: np.ndarray) -> str:
    return f"step {int(steps[ok].max()):,}" if ok.any() else "nowhere: see above"


def _switches(phases) -> str:
    """Switches of sequence length as a reader says them: "switching to 8,192 at 50% and 65,536 at 95%"."""
    if not phases:
        return "with no switch"
    return "switching to " + " and ".join(f"{int(n):,} at {f:.0%}" for f, n in phases)


def _seq_phases(run: LadderRun) -> list[tuple[float, int]]:
    """(start fraction, tokens per sequence) of each switch of sequence length the run's schedule declares."""
    return [] if run.schedule is None else [(p.start_fraction, p.seq_len) for p in run.schedule.seq_phases]


def _batch(rungs: list[LadderRun], target: LadderRun) -> str:
    """The rungs' tokens per step, their power law in size, and where the target sits against it."""
    runs = [r.as_run() for r in rungs]
    k, _, size, batch = batch_trend(runs)
    off = batch_off_trend(runs, target.as_run(with_evals=False))
    law = f" (∝ N^{k:.2f})" if size.size > 1 and abs(k) >= 0.005 else ""
    where = "on the rungs' law" if abs(off - 1) < 0.005 else f"{off:.2g}× the rungs' law at its size"
    return f"rungs {_span(list(batch))}{law}, target {_amount(target.tokens_per_step)} tokens per step ({where})"


def _describe(run: LadderRun, edited: bool = False) -> str:
    if run.schedule is not None:
        return (run.schedule if edited else run.schedule.without_edits()).describe()
    if run.lr_held:
        return f"its logged LR to step {run.lr_logged_to:,}, its last value held to step {run.stop_after_steps:,}"
    if run.lr_shape_from:
        return (f"its logged LR to step {run.lr_logged_to:,}, then the rungs' shape ({run.lr_shape_from}'s) to step "
                f"{run.stop_after_steps:,}")
    if run.logged_lrs is not None:
        return f"its logged LR over {run.planned_steps:,} steps"
    return f"{run.planned_steps:,} steps, LR not given"


def _describe_rungs(rungs: list[LadderRun]) -> str:
    """The largest rung's schedule, with the spans of the rungs' peaks and lengths where they differ, or where the
    rungs' LRs come from when no schedule is declared."""
    if rungs[-1].schedule is not None:
        declared = [r for r in rungs if r.schedule is not None]
        peaks, steps = _span([r.schedule.peak_lr for r in declared]), [r.planned_steps for r in declared]
        if "–" not in peaks and min(steps) == max(steps):
            return _describe(rungs[-1])
        lengths = f"{min(steps):,}" + (f"–{max(steps):,}" if max(steps) > min(steps) else "")
        return (f"the largest {_describe(rungs[-1])}; over the {len(declared)} rungs with a schedule, peak {peaks}, "
                f"{lengths} steps")
    logged = sum(r.logged_lrs is not None for r in rungs)
    if logged == len(rungs):
        return f"each rung's logged LR ({keys.LEARNING_RATE})"
    declared = [r.name for r in rungs if r.schedule is not None and r.logged_lrs is None]
    said = f"{logged} of {len(rungs)} rungs with a logged LR"
    if not declared:
        return said + ", no schedule declared"
    neither = len(rungs) - logged - len(declared)
    return said + f", {len(declared)} with a declared schedule ({named(declared)})" + (f", {neither} with neither" if neither else "")


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return _amount(lo) if abs(hi / lo - 1) < 5e-4 else f"{_amount(lo)}–{_amount(hi)}"


def _amount(x: float) -> str:
    """A whole number in full (65,536 tokens per step, not 6.554e+04); any other to 4 digits."""
    return f"{x:,.0f}" if 1 <= x < 1e15 and float(x).is_integer() else f"{x:.4g}"


def _schedule_dict(schedule: Schedule | None) -> dict:
    from ladder.config.yamlio import to_dict

    return {} if schedule is None else to_dict(schedule)

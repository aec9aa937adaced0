"""`ladder check`: a pre-flight verdict on a finished ladder, before its hero run starts.

Reads the rungs of one group from the store and asks six questions, each answered by a `Finding`
(status ok / warning / alarm, or "not checked" with the reason, or "skipped" when deliberately not
asked). Statistics are per rung, trends are across rungs against fit compute C (fit FLOPs per token
× planned tokens, DESIGN.md), and projections are at the hero's C:

- grad-norm: the peak of each rung's grad norm (a rolling median over 2% of the run, past the
  first 5%, where every run peaks trivially while its weights are still random), as a power law
  of C; the hero's peak with its 90% band is held against a limit (4.0).
- spikes: train-loss spikes per 1,000 steps (`fits.trends.count_spikes`, past the first 5%), as a
  Poisson rate trend in C; alarm when the hero's projected rate exceeds the limit and the rate grows.
- drops: the MoE drop fraction (mean past the first 5%) as a line in log C; the hero's projection
  against the watch rules' thresholds.
- off-trend: each rung's final eval loss against the endpoint trend of the others (leave one out).
- crashed: a rung not finished, stopped before its planned steps, or with a non-finite loss.
- lr-rule: each rung's peak LR against the recipe's rule (skipped when no recipe is known).

The math is `fits.trends`; this module only turns the store into arrays and numbers into words.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from fits import trends
from fits.runs import reached_end
from ladder import metrics as keys
from ladder.config.recipe import Recipe, load_recipe, preset_names
from ladder.data.runview import (
    SIX_N,
    active_params,
    flops_per_token,
    last_as_read,
    ran_its_plan,
    role_hint,
    six_n_note,
)
from ladder.data.store import PULL_FIRST, Store
from ladder.errors import LadderError
from ladder.watch.rules import AlertRules

Status = Literal["ok", "warning", "alarm", "not checked", "skipped"]
CHECKS = ("grad-norm", "spikes", "drops", "off-trend", "crashed", "lr-rule")
EXIT = {"ok": 0, "not checked": 3, "warning": 4, "alarm": 5}
_RANK = {"skipped": 0, "ok": 0, "not checked": 1, "warning": 2, "alarm": 3}
_WATCH = AlertRules()


@dataclass(frozen=True)
class CheckSettings:
    """Thresholds of every check. Fractions are of a run's planned steps."""

    grad_limit: float = 4.0
    """The hero's projected grad-norm peak (global L2 norm before clipping) that raises an alarm."""
    skip_fraction: float = trends.SPIKE_SKIP
    """Leading fraction of each run left out of the grad-norm peak, spikes and drop fraction."""
    peak_window: float = 0.02
    """Fraction of a run over which the grad norm's rolling median runs."""
    spike_z: float = trends.SPIKE_Z
    """Robust z-score above the rolling median that makes a train-loss spike (as `ladder watch`)."""
    spike_window: float = trends.SPIKE_WINDOW
    """Fraction of a run (at least 21 steps) of the rolling median the spikes stand out from."""
    spike_limit: float = 1.0
    """Spikes per 1,000 steps the hero may be projected to have."""
    drop_warn: float = _WATCH.drop_warn
    drop_alarm: float = _WATCH.drop_alarm
    drop_margin: float = _WATCH.drop_margin
    """A growing drop fraction warns when the hero's projection passes the largest rung's by this."""
    outlier_level: float = 0.95
    """Leave-one-out: a clean ladder flags some rung with probability about 1 − this."""
    outlier_floor: float = 0.002
    """Leave-one-out: the least relative scatter assumed of final losses (seed-to-seed noise)."""
    lr_tolerance: float = 0.10
    """A rung's peak LR may differ from the recipe's rule by this fraction."""
    level: float = 0.9
    """Central probability of the projected bands."""
    metric: str = keys.EVAL_LOSS
    """The eval metric whose final value the off-trend check fits."""

    def __post_init__(self) -> None:
        for name in ("grad_limit", "spike_z", "spike_limit", "outlier_floor", "lr_tolerance", "peak_window",
                     "spike_window"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise LadderError(f"--{name.replace('_', '-')} {value}: must be a positive number")
        for name in ("skip_fraction",):
            if not 0 <= getattr(self, name) < 1:
                raise LadderError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be in [0, 1)")
        for name in ("outlier_level", "level"):
            if not 0 < getattr(self, name) < 1:
                raise LadderError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be in (0, 1)")


@dataclass(frozen=True)
class HeroCompute:
    flops: float
    """Fit compute of the whole planned hero run (FLOPs, 3 × forward without the head)."""
    source: str
    ratio: float = float("nan")
    """Tokens per active parameter of the plan it starts with, where known: a ladder trained at several lengths is
    checked at the hero's (its off-trend rule, and whether the hero lies past the rungs)."""


@dataclass(frozen=True)
class Finding:
    name: str
    status: Status
    evidence: str
    hero: str = ""
    """The projected hero value with its band, where the check projects one."""
    remedy: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    """The numbers behind `evidence`, for JSON."""


@dataclass(frozen=True)
class CheckReport:
    group: str
    rungs: tuple[str, ...]
    hero: HeroCompute | None
    findings: tuple[Finding, ...]
    warnings: tuple[str, ...] = ()
    doubtful_hero: bool = False
    """A warning doubts the hero given (another group's, or a compute not above the rungs' or far beyond it): the
    verdict is at least a warning, for a script reads only the exit code."""

    @property
    def status(self) -> Status:
        worst = max((f.status for f in self.findings), key=_RANK.__getitem__, default="not checked")
        worst = "ok" if worst == "skipped" else worst
        return "warning" if self.doubtful_hero and _RANK[worst] < _RANK["warning"] else worst

    @property
    def exit_code(self) -> int:
        return EXIT[self.status]

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "rungs": list(self.rungs), "status": self.status, "exit_code": self.exit_code,
                "hero": None if self.hero is None else asdict(self.hero),
                "findings": [asdict(f) for f in self.findings], "warnings": list(self.warnings)}


@dataclass(frozen=True)
class _Rung:
    run_id: str
    name: str
    compute: float
    """Planned fit compute (NaN when a coordinate is missing)."""
    planned_steps: int | None
    complete: bool
    """Finished its planned steps with state 'finished'."""
    series: dict[str, pd.DataFrame]
    """metric → rows (step, fraction, value), finite values only, by step."""
    six_n: bool = False
    """Its compute is 6·N·D: only N is known."""
    ratio: float = float("nan")
    """Planned tokens per active parameter (NaN when either is unknown)."""
    last_logged: dict[str, int] = field(default_factory=dict)
    """metric → the step of its last value, NaN and inf included."""
    size: float = float("nan")
    """Active parameters N, else fit FLOPs per token ÷ 6 (NaN when neither is known)."""


# ---- entry point ----------------------------------------------------------------------------------
def check_ladder(store: Store, *, group: str | None = None, hero: HeroCompute | None = None,
                 recipe: str | None = None, settings: CheckSettings = CheckSettings(),
                 skip: tuple[str, ...] = (), hero_config: Path | None = None) -> CheckReport:
    """Every check on the rungs of `group` (the store's only group when None). The hero's compute is `hero`, or
    that of the run config `hero_config` (on 6·N·D where every rung's compute is), or the stored hero's."""
    unknown = [s for s in skip if s not in CHECKS]
    if unknown:
        raise LadderError(f"--skip {unknown[0]!r}: not a check; the checks are {', '.join(CHECKS)}")
    runs = _group_runs(store, group)
    group = str(runs["group"].iloc[0])
    rung_rows = runs[runs["role"] == "rung"]
    if rung_rows.empty:
        raise LadderError(f"{store.root}: group {group!r} has no runs with role 'rung'; pull the rungs first"
                          + role_hint(runs, "rung", role_option=False, whose=f"the runs of group {group!r}"))
    hist = store.history(list(rung_rows["run_id"]), [keys.GRAD_NORM, keys.TRAIN_LOSS, keys.DROP_FRACTION,
                                                     keys.LEARNING_RATE, settings.metric], include_nonfinite=True)
    if not (hist["metric"].astype(str) == settings.metric).any():
        not_logged(store, rung_rows, group, settings.metric)
    rungs = [_rung(row, hist) for _, row in rung_rows.iterrows()]
    rungs.sort(key=lambda r: (math.isnan(r.compute), 0.0 if math.isnan(r.compute) else r.compute))  # as the checks list them
    six_n = [r.name for r in rungs if r.six_n]
    notes = ()
    if hero_config is not None:
        hero = hero_from_config(hero_config, by_params=len(six_n) == len(rungs))
        notes = other_group(hero_config, (group,), f"the rungs checked of {group!r}")
    hero = hero or stored_hero(store, runs, by_params=len(six_n) == len(rungs))
    checks = {
        "grad-norm": lambda: _grad_norm(rungs, hero, settings),
        "spikes": lambda: _spikes(rungs, hero, settings),
        "drops": lambda: _drops(store, rungs, hero, settings),
        "off-trend": lambda: _off_trend(store, rungs, settings, hero),
        "crashed": lambda: _crashed(rung_rows, hist, settings),
        "lr-rule": lambda: _lr_rule(store, rungs, group, recipe, settings),
    }
    findings = tuple(Finding(name, "skipped", "skipped with --skip") if name in skip else run()
                     for name, run in checks.items())
    doubts = notes + _hero_reach(hero, rungs)
    return CheckReport(group, tuple(r.name for r in rungs), hero, findings, doubts + tuple(six_n_note(six_n)),
                       bool(doubts))


FAR_HERO = 1e4
"""A hero more than this many times the largest rung's compute is named: published ladders reach a few hundred×."""


def _hero_reach(hero: HeroCompute | None, rungs: list[_Rung]) -> tuple[str, ...]:
    """A warning where the hero's compute is not above the largest rung's (the projections then describe a rung),
    or `FAR_HERO` times above it (no trend carries that far: a hero of another ladder?)."""
    known = [r for r in rungs if math.isfinite(r.compute) and r.compute > 0]
    if hero is None or not known:
        return ()
    least = min(known, key=lambda r: r.compute)
    below_smallest(hero, least.name, least.compute)
    at_ratio, _, whose = _one_ratio(known, hero.ratio)  # the rungs of its length, where the ladder trains several
    top = max(at_ratio if whose == HERO_RATIO else known, key=lambda r: r.compute)
    if hero.flops > FAR_HERO * top.compute:
        return (f"the hero's compute ({hero.flops:.3g} FLOPs, from {hero.source}) is {hero.flops / top.compute:.3g}× "
                f"the largest rung's ({top.name}): no trend of these rungs carries that far; is it this ladder's hero?",)
    return not_above(hero, top.name, top.compute)


def other_group(path: Path, groups: tuple[str, ...], whose: str) -> tuple[str, ...]:
    """A warning where the hero config given belongs to none of `groups` (`whose`: the runs of them, said)."""
    run, kind = hero_run(path)
    theirs = run.group
    if not theirs or theirs in groups:
        return ()
    ask = "is it this ladder's hero? (--group picks the rungs)" if len(groups) == 1 else "is it their hero?"
    return (f"the {kind} {path} is of group {theirs!r}, {whose}: {ask}",)


def below_smallest(hero: HeroCompute, name: str, compute: float) -> None:
    """Refuse a hero's compute below that of the smallest rung (`name`, `compute`): every trend would be carried
    backwards, so it is a unit slip (GFLOPs, PFLOP-days), not a hero."""
    if hero.flops < compute:
        raise LadderError(f"the hero's compute ({hero.flops:.3g} FLOPs, from {hero.source}) is below the smallest "
                          f"rung's ({name}: {compute:.3g}); is it in other units? Give the hero's fit "
                          "FLOPs (3 × forward without the head × tokens, e.g. 3.2e24) or its config")


def not_above(hero: HeroCompute, name: str, compute: float) -> tuple[str, ...]:
    """A warning where the hero's compute is not above that of the largest rung (`name`, `compute`)."""
    if hero.flops > compute * (1 + 1e-6):
        return ()
    return (f"the hero's compute ({hero.flops:.3g} FLOPs, from {hero.source}) is not above the largest rung's "
            f"({name}: {compute:.3g}), so every projection describes a rung, not a larger run; is it a rung's "
            "config? Give the hero's (`ladder plan` writes it beside the rungs) or --hero-compute",)


def _group_runs(store: Store, group: str | None) -> pd.DataFrame:
    store.must_exist(PULL_FIRST)
    runs = store.runs()
    groups = sorted(set(runs["group"].astype(str)))
    if group is None:
        if len(groups) != 1:
            raise LadderError(f"{store.root} holds the groups {', '.join(map(repr, groups)) or 'none'}; "
                              "pick one with --group")
        group = groups[0]
    picked = runs[runs["group"] == group]
    if picked.empty:
        raise LadderError(f"--group {group!r}: no such group in {store.root}; it holds {', '.join(map(repr, groups))}")
    return picked


def stored_hero(store: Store, runs: pd.DataFrame, by_params: bool = False) -> HeroCompute | None:
    """The fit compute of the group's hero in the store (of the plan it started with, as predict counts it);
    of the largest where the group holds several, and the source says so. With `by_params`, 6·N·D (the rungs'
    computes are), for a hero that gives its N."""
    from ladder.data.runview import from_store

    found = []
    for _, row in runs[runs["role"] == "hero"].iterrows():
        try:
            run = from_store(store, row, keys.EVAL_LOSS, need_evals=0)
        except LadderError:
            continue
        compute = run.six_nd if by_params and run.active_params else run.compute
        if np.isfinite(compute) and compute > 0:
            found.append((float(compute), str(row["name"]), run))
    if not found:
        return None
    found.sort(key=lambda x: x[:2], reverse=True)
    compute, name, run = found[0]
    edited = _edited_steps(run)
    source = f"the hero run {name!r} in the store" + (f" ({run.planned_steps:,} steps{edited})" if edited else "") + (
        "" if not by_params or run.flops_from == SIX_N else ", 6·N·D as the rungs'" if run.active_params else
        ", its fit FLOPs: it gives no N, and the rungs' computes are 6·N·D, which leave attention out (give its "
        "active_params, or --hero-compute)")
    if len(found) > 1:
        others = ", ".join(repr(n) for _, n, _ in found[1:4])
        source += (f", the largest of the group's {len(found)} heroes (also {others}"
                   f"{', ...' if len(found) > 4 else ''}; --hero CONFIG checks another)")
    return HeroCompute(compute, source, _ratio(run))


def hero_run(path: Path) -> tuple[Any, str]:
    """The hero as a `LadderRun`, from a planner run config or a target file, and which of the two it is."""
    from ladder.config.runconfig import RunConfig, recipe_mark, refuse_prediction, target_mark
    from ladder.config.yamlio import load_yaml
    from ladder.data.runview import from_config, target_from_file

    data = load_yaml(path)
    if target_mark(data):
        return target_from_file(path), "target file"
    refuse_prediction(path, data, "a run config")
    if "spec" not in data and not recipe_mark(data):  # none of the tool's files: a trainer's own config, its own names
        shown = ", ".join(map(str, list(data)[:6])) + (", ..." if len(data) > 6 else "")
        raise LadderError(f"{path}: neither a target file (it gives no active_params or fit_flops_per_token) nor a "
                          f"planned run config (no spec); its keys: {shown}. Write the hero as a target file in these "
                          "names: name, active_params, stop_after_steps, tokens_per_step, schedule (README, "
                          "'Target file'), or give --hero-compute FLOPS")
    return from_config(RunConfig.load(path)), "hero config"


def not_logged(store: Store, rung_rows: pd.DataFrame, group: str, metric: str) -> None:
    """The `LadderError` for rungs none of which logs `metric`: the metrics they do log, or that they logged none."""
    logged = sorted(set(store.history(list(rung_rows["run_id"]))["metric"].astype(str)))
    shown = ", ".join(logged[:8]) + (", ..." if len(logged) > 8 else "") or "nothing"
    if not logged:
        states = ", ".join(sorted(set(rung_rows["state"].astype(str))))
        raise LadderError(f"no rung of group {group!r} has logged anything yet ({len(rung_rows)} rung"
                          f"{'s' if len(rung_rows) != 1 else ''}, {states}): pull them again once they have "
                          "trained, or see why they stopped (ladder runs)")
    raise LadderError(f"--metric {metric}: no rung of group {group!r} logs it (they log {shown}); name one they log")


TABLES = (".csv", ".tsv", ".parquet", ".jsonl")
"""Suffixes of tables of runs, which `--hero` is not."""


def hero_file(path: Path) -> Path:
    """`--hero PATH` as a file; a folder (the plan's, say) or a missing path is refused, naming the heroes' run
    configs in the folder where it has some."""
    path = Path(path)
    if path.is_file() and path.suffix.lower() in TABLES:
        raise LadderError(f"--hero {path}: a table of runs, not the hero's run config; give the hero's run config "
                          "(YAML from `ladder plan`) or its target file (as `ladder predict --target` takes it), or "
                          "--hero-compute FLOPS")
    if path.is_file():
        return path
    if not path.is_dir():
        raise LadderError(f"--hero {path}: no such file; give the hero's run config from `ladder plan`, or its target "
                          "file")
    heroes = sorted(p.name for p in path.glob("hero*.y*ml"))
    inside = f" (here: {', '.join(str(path / h) for h in heroes[:3])})" if heroes else ""
    raise LadderError(f"--hero {path}: a folder; give the hero's run config in it{inside}, or its target file")


def hero_from_config(path, by_params: bool = False) -> HeroCompute:
    """The hero's fit compute from a planner run config or a target file (`ladder predict --target`): fit FLOPs
    per token × tokens of the plan it starts with; with `by_params`, 6·N × those tokens (for rungs whose compute
    is 6·N·D)."""
    run, kind = hero_run(path)
    where = f"{kind} {path} ({run.planned_steps:,} steps{_edited_steps(run)}"
    if not by_params:
        return HeroCompute(run.compute, where + ")", _ratio(run))
    if not run.active_params:
        raise LadderError(f"{path}: no active_params, and the rungs' compute is 6·N·D (they give no fit FLOPs per "
                          "token); add the hero's active_params, or give --hero-compute")
    return HeroCompute(run.six_nd,
                       where + ", 6·N·D as the rungs')", _ratio(run))


def _ratio(run) -> float:
    """A hero's (`LadderRun`) tokens per active parameter, of the plan it starts with; NaN without its N."""
    n = run.active_params
    return float(run.tokens_per_step * run.planned_steps / n) if n else float("nan")


def _edited_steps(run) -> str:
    """Where the hero's schedule edits change its steps: that its compute counts the plan it started with, as
    `ladder predict` does (`ladder plan` and `spec` count the edited run's): "" where no edit does."""
    if run.stop_after_steps == run.planned_steps:
        return ""
    return f" as planned at its start, {run.stop_after_steps:,} with its schedule's edits"


def _rung(row: pd.Series, hist: pd.DataFrame) -> _Rung:
    planned = None if pd.isna(row["stop_after_steps"]) else int(row["stop_after_steps"])
    last = None if pd.isna(row["last_step"]) else int(row["last_step"])
    try:  # fit FLOPs per token, or 6·N where only N is known (as every command counts a run)
        flops, flops_from = flops_per_token(str(row["name"]), row)
    except LadderError:
        flops, flops_from = float("nan"), ""
    tokens = row["planned_tokens"]
    compute = flops * float(tokens) if not pd.isna(tokens) else float("nan")
    complete = ran_its_plan(str(row["state"]), last, planned)
    own = hist[hist["run_id"] == row["run_id"]]
    last_logged = {str(m): int(g["step"].max()) for m, g in own.groupby("metric", observed=True)}
    h = own[np.isfinite(own["value"].to_numpy(dtype=float))]
    series = {str(m): g.sort_values("step")[["step", "fraction", "value"]].reset_index(drop=True)
              for m, g in h.groupby("metric", observed=True)}
    n = active_params(row)
    ratio = float(tokens) / n if n and not pd.isna(tokens) else float("nan")
    return _Rung(str(row["run_id"]), str(row["name"]), compute, planned, bool(complete), series, flops_from == SIX_N,
                 ratio, last_logged, float(n) if n else flops / 6.0)


def _usable(rungs: list[_Rung], metric: str) -> tuple[list[_Rung], list[str]]:
    """Complete rungs with a known compute that logged `metric`, and why the others are left out."""
    out, left = [], []
    for r in rungs:
        if not r.complete:
            left.append(f"{r.name} (not complete)")
        elif not math.isfinite(r.compute) or r.compute <= 0:
            left.append(f"{r.name} (no fit compute)")
        elif metric not in r.series or r.series[metric].empty:
            left.append(f"{r.name} (no {metric})")
        else:
            out.append(r)
    return sorted(out, key=lambda r: r.compute), left


def _not_checked(name: str, why: str, **values: Any) -> Finding:
    return Finding(name, "not checked", f"not checked: {why}", values=values)


def _left_out(left: list[str]) -> str:
    """The rungs a trend leaves out, and why, for its evidence ("" where it leaves none out)."""
    return f"; left out: {', '.join(left)}" if left else ""


def _too_few(name: str, metric: str, rungs: list[_Rung], usable: list[_Rung], left: list[str],
             need: int = 3) -> Finding | None:
    if len(usable) >= need:
        return None
    if not any(metric in r.series for r in rungs):
        dense = " (a dense model has none: --skip drops)" if metric == keys.DROP_FRACTION else ""
        return _not_checked(name, f"no rung logs {metric}{dense}")
    why = f"needs {need} complete rungs with {metric}, has {len(usable)}"
    return _not_checked(name, why + _left_out(left))


def _band(value: float, lo: float, hi: float, fmt: str, level: float) -> str:
    return f"{value:{fmt}} [{lo:{fmt}}, {hi:{fmt}}] ({level:.0%})"


def _distance(hero: HeroCompute, usable: list[_Rung]) -> str:
    return f"C = {hero.flops:.3g} FLOPs, {hero.flops / usable[-1].compute:.3g}× the largest rung"


_NO_HERO = ("no hero compute: give --hero CONFIG.yaml or --hero-compute FLOPS, or pull the hero run "
            "(role 'hero') into the store")


# ---- 1. grad-norm peak ------------------------------------------------------------------------------
def _grad_norm(rungs: list[_Rung], hero: HeroCompute | None, st: CheckSettings) -> Finding:
    name = "grad-norm"
    usable, left = _usable(rungs, keys.GRAD_NORM)
    if (few := _too_few(name, keys.GRAD_NORM, rungs, usable, left)) is not None:
        return few
    peaks = []
    for r in usable:
        s = r.series[keys.GRAD_NORM]
        peaks.append(trends.smoothed_peak(s["fraction"], s["value"], skip=st.skip_fraction, window=st.peak_window))
    height = np.array([p.height for p in peaks])
    if np.any(height <= 0):
        return _not_checked(name, "a rung's grad norm is 0 after the warmup; nothing to fit")
    compute = np.array([r.compute for r in usable])
    trend = trends.fit_trend(compute, height)
    lo_b, hi_b = trend.slope_interval(st.level)
    per_rung = ", ".join(f"{r.name} {p.height:.3g} at {p.fraction:.0%}" for r, p in zip(usable, peaks))
    evidence = (f"peak (rolling median over {st.peak_window:.0%} of the run, after the first {st.skip_fraction:.0%}): "
                f"{per_rung}; ∝ C^{trend.b:.2f} [{lo_b:.2f}, {hi_b:.2f}]{_left_out(left)}")
    values = {"rungs": [r.name for r in usable], "compute": compute, "peak": height,
              "peak_fraction": [p.fraction for p in peaks], "exponent": trend.b, "exponent_band": [lo_b, hi_b],
              "limit": st.grad_limit}
    remedy = ("add a logit z-loss (moe.logit_z) or a stronger router z-loss, or lower the peak LR; "
              "then rerun the largest rung")
    over = [r.name for r, h in zip(usable, height) if h > st.grad_limit]
    already = f"already above the limit {st.grad_limit:g}: {', '.join(over)}" if over else ""
    if hero is None:
        if over:
            return Finding(name, "alarm", f"{evidence}; {already}", remedy=remedy, values=values)
        return Finding(name, "not checked", f"not checked: {_NO_HERO} ({evidence})", values=values)
    mid = float(trend.predict(hero.flops))
    lo, hi = (float(v) for v in trend.interval(hero.flops, st.level))
    values.update(hero=mid, hero_band=[lo, hi])
    hero_text = f"{_band(mid, lo, hi, '.3g', st.level)} at {_distance(hero, usable)}"
    if mid > st.grad_limit:
        status: Status = "alarm"
        evidence += f"; projected hero peak above the limit {st.grad_limit:g}" + (f"; {already}" if over else "")
    elif over:
        status = "alarm"
        evidence += f"; {already}"
    elif hi > st.grad_limit:
        status = "warning"
        evidence += f"; the {st.level:.0%} band reaches the limit {st.grad_limit:g}"
    else:
        status = "ok"
        evidence += f"; the projection stays below the limit {st.grad_limit:g}"
    return Finding(name, status, evidence, hero_text, remedy if status != "ok" else "", values)


# ---- 2. loss spikes ---------------------------------------------------------------------------------
def _spikes(rungs: list[_Rung], hero: HeroCompute | None, st: CheckSettings) -> Finding:
    name = "spikes"
    usable, left = _usable(rungs, keys.TRAIN_LOSS)
    if (few := _too_few(name, keys.TRAIN_LOSS, rungs, usable, left)) is not None:
        return few
    counts, steps = [], []
    for r in usable:
        s = r.series[keys.TRAIN_LOSS]
        count, covered = trends.spikes_in_run(s["fraction"], s["value"], s["step"], skip=st.skip_fraction,
                                              window=st.spike_window, k=st.spike_z)
        counts.append(count)
        steps.append(max(covered, 1.0))
    counts_a, steps_a = np.array(counts, dtype=float), np.array(steps)
    compute = np.array([r.compute for r in usable])
    rate = 1000.0 * counts_a / steps_a
    per_rung = ", ".join(f"{r.name} {c:.0f} ({x:.2g}/1k steps)" for r, c, x in zip(usable, counts_a, rate))
    evidence = (f"spikes (train loss {st.spike_z:g} robust SDs above its rolling median, after the first "
                f"{st.skip_fraction:.0%}): {per_rung}{_left_out(left)}")
    values = {"rungs": [r.name for r in usable], "compute": compute, "spikes": counts_a, "steps": steps_a,
              "per_1k_steps": rate, "limit_per_1k_steps": st.spike_limit}
    remedy = ("find what the spikes share (data shards, LR at the time, grad norm); lower the peak LR, "
              "tighten grad clipping or add a z-loss before the hero starts")
    if counts_a.sum() == 0:
        return Finding(name, "ok", f"{evidence}; no spikes in any rung", "0 expected" if hero else "", values=values)
    fit = trends.fit_rate_trend(compute, counts_a, steps_a)
    lo_b, hi_b = fit.slope_interval(st.level)
    evidence += f"; rate ∝ C^{fit.b:.2f} [{lo_b:.2f}, {hi_b:.2f}]"
    values.update(exponent=fit.b, exponent_band=[lo_b, hi_b])
    growing = fit.growing(st.level)
    already = rate[-1] > st.spike_limit
    if hero is None:
        status: Status = "warning" if growing or already else "not checked"
        text = evidence if status == "warning" else f"not checked: {_NO_HERO} ({evidence})"
        return Finding(name, status, text, remedy=remedy if status == "warning" else "", values=values)
    mid = 1000.0 * float(fit.predict(hero.flops))
    lo, hi = (1000.0 * float(v) for v in fit.interval(hero.flops, st.level))
    values.update(hero_per_1k_steps=mid, hero_band=[lo, hi])
    hero_text = f"{_band(mid, lo, hi, '.2g', st.level)} per 1k steps at {_distance(hero, usable)}"
    if mid > st.spike_limit and fit.b > 0:
        status = "alarm"
        evidence += f"; the hero is projected above {st.spike_limit:g} per 1k steps"
    elif growing or already:
        status = "warning"
        evidence += ("; the rate grows with size" if growing else
                     f"; the largest rung is already above {st.spike_limit:g} per 1k steps")
    else:
        status = "ok"
    return Finding(name, status, evidence, hero_text, remedy if status != "ok" else "", values)


# ---- 3. drop fraction -------------------------------------------------------------------------------
def _drops(store: Store, rungs: list[_Rung], hero: HeroCompute | None, st: CheckSettings) -> Finding:
    name = "drops"
    usable, left = _usable(rungs, keys.DROP_FRACTION)
    configs = [_run_config(store, r.run_id) for r in rungs]
    if not usable and configs and all(c is not None and c.spec.n_experts == 0 for c in configs):
        return Finding(name, "skipped", "skipped: dense model (no experts, no drop fraction)")
    experts = sorted({c.spec.n_experts for c in configs if c is not None and c.spec.n_experts})
    if experts and not any(keys.DROP_FRACTION in r.series for r in rungs):  # a MoE ladder that did not log it
        return _not_checked(name, f"no rung logs {keys.DROP_FRACTION}, though the rungs' configs have "
                                  f"{'/'.join(map(str, experts))} experts: log it to have the check (or --skip drops)")
    if (few := _too_few(name, keys.DROP_FRACTION, rungs, usable, left)) is not None:
        return few
    means = []
    for r in usable:
        s = r.series[keys.DROP_FRACTION]
        after = s[s["fraction"] >= st.skip_fraction]
        means.append(float((after if len(after) else s)["value"].mean()))
    drop = np.array(means)
    compute = np.array([r.compute for r in usable])
    trend = trends.fit_trend(compute, drop, log_y=False)
    lo_b, hi_b = trend.slope_interval(st.level)
    per_rung = ", ".join(f"{r.name} {d:.1%}" for r, d in zip(usable, drop))
    evidence = (f"mean drop fraction after the first {st.skip_fraction:.0%}: {per_rung}; "
                f"{trend.b * math.log(10):+.2%} per decade of C [{lo_b * math.log(10):+.2%}, {hi_b * math.log(10):+.2%}]"
                f"{_left_out(left)}")
    values = {"rungs": [r.name for r in usable], "compute": compute, "drop_fraction": drop,
              "per_decade": trend.b * math.log(10)}
    remedy = ("raise the capacity factor or the load-balancing loss weight, or check the router "
              "(z-loss, latent width) before the hero starts")
    if hero is None:
        worst = float(drop.max())
        if worst > st.drop_warn:
            status: Status = "alarm" if worst > st.drop_alarm else "warning"
            return Finding(name, status, f"{evidence}; a rung is already above {st.drop_warn:.0%}", remedy=remedy,
                           values=values)
        return Finding(name, "not checked", f"not checked: {_NO_HERO} ({evidence})", values=values)
    mid = float(np.clip(trend.predict(hero.flops), 0, 1))
    lo, hi = (float(np.clip(v, 0, 1)) for v in trend.interval(hero.flops, st.level))
    values.update(hero=mid, hero_band=[lo, hi])
    hero_text = f"{mid:.1%} [{lo:.1%}, {hi:.1%}] ({st.level:.0%}) at {_distance(hero, usable)}"
    if mid > st.drop_alarm:
        status, why = "alarm", f"; the hero is projected above {st.drop_alarm:.0%}"
    elif mid > st.drop_warn:
        status, why = "warning", f"; the hero is projected above {st.drop_warn:.0%}"
    elif trend.growing(st.level) and mid > drop[-1] + st.drop_margin:
        status, why = "warning", f"; it grows with size, the hero {mid - drop[-1]:.1%} above the largest rung"
    else:
        status, why = "ok", ""
    return Finding(name, status, evidence + why, hero_text, remedy if status != "ok" else "", values)


def _run_config(store: Store, run_id: str):
    try:
        return store.run_config(run_id)
    except LadderError:
        return None


# ---- 4. a rung off the others' trend -----------------------------------------------------------------
def _off_trend(store: Store, rungs: list[_Rung], st: CheckSettings, hero: HeroCompute | None = None) -> Finding:
    name = "off-trend"
    usable, left = _usable(rungs, st.metric)
    ended = []  # a rung's final is its last eval, where that is its plan's end (as predict and fit take it) and finite
    for r in usable:
        s = r.series[st.metric]
        last = int(s["step"].iloc[-1])
        if r.last_logged.get(st.metric, last) > last:
            left.append(f"{r.name} (its last {st.metric}, at step {r.last_logged[st.metric]:,}, is not finite)")
        elif not reached_end(s["fraction"].to_numpy(dtype=float), finished=True):
            left.append(f"{r.name} (its last {st.metric} at step {last:,} of {r.planned_steps:,})")
        else:
            ended.append(r)
    usable, left_out = ended, _left_out(left)
    usable, other_ratios, whose = _one_ratio(usable, float("nan") if hero is None else hero.ratio)
    at_other_ratios = [f"{r.name} (at {r.ratio:.3g} tokens per parameter, not {whose} {usable[0].ratio:.3g})"
                       for r in other_ratios]
    left += at_other_ratios
    if (few := _too_few(name, st.metric, rungs, usable, left, need=4)) is not None:
        return few
    final = np.array([last_as_read(store, r.run_id, int(r.planned_steps or s["step"].max()), s["step"].to_numpy(),
                                   s["value"].to_numpy(float), float(s["value"].iloc[-1]))
                      for r, s in ((r, r.series[st.metric]) for r in usable)])
    if np.any(final <= 0):
        bad = ", ".join(f"{r.name} ({v:g})" for r, v in zip(usable, final) if v <= 0)
        return _not_checked(name, f"a final {st.metric} is not positive: {bad}")
    compute = np.array([r.compute for r in usable])
    loo = trends.leave_one_out(compute, final, level=st.outlier_level, floor=st.outlier_floor)
    values = {"rungs": [r.name for r in usable], "compute": compute, "final": final,
              "expected": [h.expected for h in loo.held], "rel_error": [h.rel_error for h in loo.held],
              "score": [h.score for h in loo.held], "limit": next(h.limit for h in loo.held if not h.without),
              "dof": loo.dof, "limits": [h.limit for h in loo.held], "dofs": [h.dof for h in loo.held],
              "judged_without": [[usable[i].name for i in h.without] for h in loo.held]}
    note = left_out + (f"; left out (a trend in compute holds at one ratio): {', '.join(at_other_ratios)}"
                       if other_ratios else "")
    caveat = ("" if loo.dof > 1 else f" ({len(usable)} rungs leave 1 degree of freedom: only a gross outlier shows)") + note
    flagged, w = [loo.held[i] for i in loo.flagged], loo.worst()
    if not flagged and loo.dof <= 1:  # "ok" would pass a rung several percent off: the check cannot tell
        reach = abs(w.rel_error / w.score) * w.limit if w.score else float("nan")
        return Finding(name, "not checked", (
            f"not checked: {len(usable)} rungs leave 1 degree of freedom, so a rung shows off the others' trend only "
            f"about {reach:.0%} off it (score limit ±{w.limit:.1f}); the largest deviation, {usable[w.index].name} "
            f"{w.rel_error:+.2%} (score {w.score:.1f}), is not judged; a fifth rung at {whose} token ratio makes "
            f"this check{note}"),
            values=values)
    if not flagged:
        return Finding(name, "ok", (f"final {st.metric} of each rung against the others' trend: largest deviation "
                                    f"{usable[w.index].name} {w.rel_error:+.2%} (score {w.score:.1f}, limit "
                                    f"±{w.limit:.1f}){caveat}"), values=values)
    parts = [f"{usable[h.index].name} {h.value:.4g} vs {h.expected:.4g} expected ({h.rel_error:+.2%}, "
             f"score {h.score:.1f}, limit ±{h.limit:.1f}{_set_aside(h, usable)})" for h in flagged]
    largest_worse = any(h.index == len(usable) - 1 and h.rel_error > 0 for h in flagged)
    status: Status = "alarm" if largest_worse else "warning"
    evidence = "off the others' endpoint trend: " + "; ".join(parts) + caveat
    if largest_worse:
        evidence += "; the largest rung is worse than the trend: the recipe may stop scaling"
    remedy = ("look for what sets the rung apart (shape: depth for its width, batch, LR, data); rerun it, "
              "or leave it out of the fits and say so")
    return Finding(name, status, evidence, "", remedy, values)


def _set_aside(h: trends.HeldOut, usable: list[_Rung]) -> str:
    """", against the trend without X" for a rung judged after worse ones were set aside (`HeldOut.without`)."""
    return f", against the trend without {', '.join(usable[i].name for i in h.without)}" if h.without else ""


RATIO_TOL = 0.1
"""Token ratios within this (relative) of each other are one ratio, for the off-trend check."""


LADDER_RATIO, HERO_RATIO = "the ladder's", "the hero's"
"""Whose token ratio `_one_ratio` kept the rungs of."""


def _one_ratio(rungs: list[_Rung], hero: float = float("nan")) -> tuple[list[_Rung], list[_Rung], str]:
    """The rungs at the hero's token ratio (`hero`, where known and some rungs train at it), else at the ratio most
    of them share (the ladder's); the others; and whose ratio it is. All of them where a ratio is unknown."""
    if len(rungs) < 2 or not all(math.isfinite(r.ratio) and r.ratio > 0 for r in rungs):
        return rungs, [], LADDER_RATIO

    def near(ratio: float) -> list[_Rung]:
        return [r for r in rungs if abs(math.log(r.ratio / ratio)) <= math.log1p(RATIO_TOL)]

    mine = near(hero) if math.isfinite(hero) and hero > 0 else []
    # a tie: the ratio the largest rung trains at
    main = mine or max((near(c.ratio) for c in rungs), key=lambda g: (len(g), max(r.compute for r in g)))
    return main, [r for r in rungs if all(r is not m for m in main)], HERO_RATIO if mine else LADDER_RATIO


# ---- 5. crashed rungs -------------------------------------------------------------------------------
def _crashed(rows: pd.DataFrame, hist: pd.DataFrame, st: CheckSettings) -> Finding:
    name = "crashed"
    problems, status = [], "ok"
    bad = hist[~np.isfinite(hist["value"].to_numpy(dtype=float))
               & hist["metric"].isin([keys.TRAIN_LOSS, st.metric, keys.GRAD_NORM])]
    for _, row in rows.iterrows():
        planned = None if pd.isna(row["stop_after_steps"]) else int(row["stop_after_steps"])
        last = 0 if pd.isna(row["last_step"]) else int(row["last_step"])
        where = f"step {last:,}" + (f" of {planned:,}" if planned else "")
        state = str(row["state"])
        if state == "running":
            problems.append(f"{row['name']} still running ({where})")
            status = max(status, "warning", key=_RANK.__getitem__)
        elif state != "finished":
            problems.append(f"{row['name']} {state} at {where}")
            status = "alarm"
        elif planned is not None and not ran_its_plan(state, last, planned):
            problems.append(f"{row['name']} stopped at {where} ({last / planned:.0%})")
            status = "alarm"
        nonfinite = bad[bad["run_id"] == row["run_id"]]
        if len(nonfinite):
            first = nonfinite.sort_values("step").iloc[0]
            problems.append(f"{row['name']} logged {first['metric']} = {first['value']} at step {int(first['step']):,}")
            status = "alarm"
    if not problems:
        which = ("the one rung finished its" if len(rows) == 1 else "both rungs finished their" if len(rows) == 2
                 else f"all {len(rows)} rungs finished their")
        return Finding(name, "ok", f"{which} planned steps with finite losses")
    return Finding(name, status, "; ".join(problems), "",
                   "find out why before the hero starts (a rung that diverged predicts a hero that will); "
                   "resume or rerun it, then pull again", {"problems": problems})


# ---- 6. peak LR against the recipe's rule --------------------------------------------------------
def _lr_rule(store: Store, rungs: list[_Rung], group: str, recipe: str | None, st: CheckSettings) -> Finding:
    name = "lr-rule"
    rec, where = _recipe(recipe, group)
    if rec is None:
        return _lr_trend(rungs, f"no recipe known (group {group!r} is not a shipped preset): pass --recipe "
                                "NAME|FILE to check the rungs' LRs against its rule")
    rows, off, missing = [], [], []
    for r in rungs:
        cfg = _run_config(store, r.run_id)
        if cfg is None:
            missing.append(r.name)
            continue
        rule = rec.lr.peak_lr(cfg.tokens, cfg.spec.d_model, cfg.tokens_per_step)
        logged = r.series.get(keys.LEARNING_RATE)
        if r.complete and logged is not None and len(logged):
            peak, how = float(logged["value"].max()), "logged"
        else:
            peak, how = float(cfg.schedule.peak_lr), "config"
        ratio = peak / rule
        rows.append({"rung": r.name, "peak_lr": peak, "from": how, "rule": rule, "ratio": ratio})
        if abs(ratio - 1) > st.lr_tolerance:
            off.append(f"{r.name} {peak:.3g} ({how}) vs rule {rule:.3g} (×{ratio:.2f})")
    values = {"recipe": where, "rungs": rows}
    if not rows:
        return _lr_trend(rungs, f"no rung carries a whole run config (model spec and schedule, as `ladder plan` "
                                f"writes) to compare with {where}", values, fewer="not checked")
    note = f"; no run config for {', '.join(missing)}" if missing else ""
    if off:
        remedy = "retrain the rung with the rule's LR, or fix the recipe so rungs and hero follow one rule"
        if recipe is None:
            remedy += f"; if the plan overrode {where}'s LR rule, pass --recipe with the recipe it used"
        return Finding(name, "warning", f"peak LR off the LR rule of {where} by more than {st.lr_tolerance:.0%}: "
                       + "; ".join(off) + note, "", remedy, values)
    worst = max(rows, key=lambda x: abs(x["ratio"] - 1))
    status: Status = "not checked" if missing else "ok"
    prefix = "not checked for every rung: " if missing else ""
    return Finding(name, status, f"{prefix}every rung's peak LR within {st.lr_tolerance:.0%} of the LR rule of {where} "
                   f"(furthest: {worst['rung']} ×{worst['ratio']:.3f}){note}", values=values)


LR_TREND_RUNGS = 4
"""Rungs with a logged LR that `_lr_trend` needs: each judged against a line through three others or more."""
LR_TREND_TOLERANCE = 0.5
"""How far (relative) a rung's peak LR may lie off the others' power law in size: wider than a rule's own tolerance,
for a rule in width (μP) puts two depths of one width at one LR, which a power law in N misses by up to about 30%;
a rung given 2× or 4× its LR shows."""


def _lr_trend(rungs: list[_Rung], why: str, values: dict | None = None, fewer: Status = "skipped") -> Finding:
    """Without a rule to check against (`why`): each complete rung's logged peak LR against the power law in size
    (log LR a line in log N) through the others. A recipe sets its rungs' LRs by one rule in size, so a rung off the
    others' line by more than `LR_TREND_TOLERANCE` was given another LR. Where several are, one is set aside at a time
    (the one whose absence leaves the rest most in line) and the rest judged again without it while four or more are
    left, so a clean end rung, whose line runs through a bad neighbour, is not blamed for its pull. Fewer than four
    rungs with a logged LR: `fewer` (skipped, or not checked where a recipe's rule was asked for), with `why`. A
    ladder whose every LR is off the rule by one factor passes: only a recipe's rule (--recipe) shows that."""
    name = "lr-rule"
    known = [r for r in rungs if r.complete and len(r.series.get(keys.LEARNING_RATE, ())) and np.isfinite(r.size)
             and r.size > 0]
    if len(known) < LR_TREND_RUNGS:
        return Finding(name, fewer, f"{fewer}: {why}; and fewer than {LR_TREND_RUNGS} finished rungs log "
                       f"{keys.LEARNING_RATE} to hold against each other ({len(known)})", values=values or {})
    x = np.log([r.size for r in known])
    y = np.log([float(r.series[keys.LEARNING_RATE]["value"].max()) for r in known])

    def misses(among: list[int]) -> dict[int, float]:  # each one's LR over the others' line's at its size
        out = {}
        for i in among:
            rest = [j for j in among if j != i]
            line = np.polyfit(x[rest], y[rest], 1) if np.ptp(x[rest]) > 0 else np.array([0.0, y[rest].mean()])
            out[i] = float(np.exp(y[i] - np.polyval(line, x[i])))
        return out

    def spread(among: list[int]) -> float:
        return max(abs(np.log(m)) for m in misses(among).values())

    active, off, first = list(range(len(known))), [], {}
    while len(active) >= LR_TREND_RUNGS:
        miss = misses(active)
        first = first or miss  # every rung against the others' line, before any is set aside
        bad = [i for i in active if abs(miss[i] - 1) > LR_TREND_TOLERANCE]
        if not bad:
            break
        i = min(bad, key=lambda j: spread([k for k in active if k != j]))
        off.append((i, miss[i]))
        active.remove(i)
    rows = [{"rung": r.name, "peak_lr": float(np.exp(v)), "from": "logged", "size": r.size} for r, v in zip(known, y)]
    values = {**(values or {}), "trend": rows, "off": [{"rung": known[i].name, "ratio": m} for i, m in off]}
    said = (f"no rule to hold the rungs' LRs to ({why}), so each finished rung's logged peak LR is held to the power "
            f"law in size through the others' ({len(known)} rungs)")
    if off:
        parts = "; ".join(f"{known[i].name} {float(np.exp(y[i])):.3g} (×{m:.2f} the others' line)" for i, m in off)
        return Finding(name, "warning", f"{said}: off it by more than {LR_TREND_TOLERANCE:.0%}: {parts}", "",
                       "a recipe sets its rungs' LRs by one rule in size: retrain the rung at the LR its size's rule "
                       "gives, or pass --recipe to check every rung against the rule itself", values)
    i = max(first, key=lambda j: abs(np.log(first[j])))
    m = first[i]
    return Finding(name, "ok", f"{said}: every one within {LR_TREND_TOLERANCE:.0%} of it (furthest: {known[i].name} "
                   f"×{m:.3f}); a ladder whose LRs are all off the rule by one factor passes this, --recipe checks "
                   "the rule itself", values=values)


def _recipe(recipe: str | None, group: str) -> tuple[Recipe | None, str]:
    if recipe is not None:
        return load_recipe(recipe), f"recipe {recipe}"
    if group in preset_names():
        return load_recipe(group), f"preset {group!r} (named by the group)"
    return None, ""


__all__ = ["CHECKS", "CheckReport", "CheckSettings", "Finding", "HeroCompute", "check_ladder", "hero_from_config"]

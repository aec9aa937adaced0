"""Alert rules for a live run: each is a pure function of what the run has logged so far.

Because every rule is recomputed from the whole history on each check, a restarted watcher sees
exactly the alerts an uninterrupted one would; the watch state only remembers which were sent.

Levels: ``warning`` and ``alarm``. Each rule's settings live in `AlertRules`, and each alert's text
says which rule fired and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ladder import metrics as keys
from ladder.durations import span_text
from ladder.predict.prediction import LR, LR_HI, LR_LO, Prediction
from ladder.predict.replan import horizon_that_fits
from ladder.watch.judged import averaged, compared, judged_steps

if TYPE_CHECKING:  # scipy stays out of `ladder --help`
    from fits.trends import Projection

Level = Literal["warning", "alarm"]
LEVELS = {"ok": 0, "warning": 1, "alarm": 2}
CANNOT_JUDGE = "cannot-judge"
RANK = {"ok": 0, CANNOT_JUDGE: 1, "unreadable": 1, "warning": 2, "alarm": 3}
"""Which verdict wins when several apply to one eval (or head one message)."""


@dataclass(frozen=True)
class AlertRules:
    """Settings of every rule. Relative deviations are fractions of the predicted loss."""

    metric: str = keys.EVAL_LOSS
    """The eval metric compared with the prediction."""
    warn_rel: float = 0.005
    """Deviation: warn beyond the 50% band or this relative deviation, whichever is wider."""
    alarm_rel: float = 0.01
    """Deviation: alarm beyond the 90% band or this relative deviation, whichever is wider."""
    drift_k: float = 0.5
    """CUSUM allowance in standard deviations per eval (detects shifts of about twice that)."""
    drift_warn: float = 3.0
    """CUSUM sum (in standard deviations) that raises a warning ..."""
    drift_alarm: float = 5.0
    """... and an alarm."""
    drift_noise: float = 0.001
    """Floor of the eval-to-eval noise of the residual, relative to the loss."""
    drift_warn_floor: float = 0.0025
    """A drift warning also needs the residual this far (relative) above its baseline ..."""
    drift_alarm_floor: float = 0.0075
    """... and an alarm this far (between the band rule's warning and alarm floors)."""
    drift_baseline_evals: int = 3
    """The drift rule measures residuals against their mean over this many evals: the first ones watched, or the
    lowest such mean since, where the run came down from an early offset (see `drift`)."""
    spike_smoothing: int = 5
    """EMA span (steps) applied to the train loss before looking for spikes."""
    spike_window: int = 50
    """Steps of history for the rolling median and MAD."""
    spike_warn_z: float = 6.0
    spike_alarm_z: float = 12.0
    grad_window: float = 0.1
    """Fraction of the run over which the grad-norm slope is measured (the comparison with the rungs'
    range, used when too few rungs log the grad norm for a projection)."""
    grad_tolerance: float = 1.0
    """Allowed distance of the slope (d ln grad-norm / d fraction) outside the rungs' range."""
    grad_alarm_bands: float = 2.0
    """Against the projection: alarm when the smoothed grad norm is this many times as far above the
    projected median as the 90% band's upper edge (in ln units), and has stayed above the band."""
    projection_window: float = 0.02
    """Share of the planned run (at least 5 points) of the trailing rolling median that smooths the
    run's grad norm and drop fraction before they are compared with the projection to its size (the
    rungs' series are smoothed over the same share of their runs)."""
    persist_evals: int = 3
    """A projection rule fires at an eval when the smoothed series was above the projection's 90% band
    at this many evals in a row (this one the last); the LR rule, at this many logged LRs in a row off."""
    projection_skip: float = 0.05
    """Leading fraction of the run (warmup) the projection rules, the fixed drop-fraction limits and the drift rule
    leave out, and where a deviation alarms only far past its band (`WARMUP_ALARM`): a router not yet trained drops many tokens (the demo's
    rungs drop up to 39% in their first steps), and the loss falls fastest there, where the prediction is weakest
    (a hero's evals at 0.5–1.5% of its run 3–13% off its prediction made no level to measure a drift from)."""
    lr_tol: float = 0.05
    """LR: warn where the run's logged LR is further than this share of the peak from the LR its prediction assumed
    (its declared schedule, or its logged LR carried on or held) at `persist_evals` logged values in a row past the
    first `projection_skip` of the run."""
    drop_warn: float = 0.25
    """MoE drop fraction (mean of the last 20 logs) that warns whatever the rungs did ..."""
    drop_alarm: float = 0.5
    """... and that alarms."""
    drop_margin: float = 0.05
    """Warn when the drop fraction exceeds the projection's median at the same fraction by this much
    and its 90% band (without a projection: every rung's at the same fraction by this much)."""
    stale_after_s: float = 1800.0
    """Warn when nothing new arrived for this long (alarm at three times)."""
    deadline: float | None = None
    """Unix time by which the planned tokens must be done (for the throughput rule)."""
    throughput_window: int = 50
    """Steps over which throughput is averaged."""


@dataclass(frozen=True)
class Alert:
    rule: str
    level: Level
    step: int
    message: str
    value: float | None = None
    keyed_by: int | None = None
    """The step that identifies the alert where it is not `step`: a throughput or deadline alert is about the plan
    it threatens (one per level and plan, however many checks raise it), and is shown at the run's step."""

    @property
    def key(self) -> str:
        """Identity for de-duplication: one alert per rule, level and step (`keyed_by`, where given)."""
        return f"{self.rule}:{self.level}:{self.step if self.keyed_by is None else self.keyed_by}"

    def to_json(self) -> dict:
        return {"rule": self.rule, "level": self.level, "step": self.step, "message": self.message,
                "value": self.value, "key": self.key}


@dataclass(frozen=True)
class Observed:
    """The watched run so far."""

    series: pd.DataFrame
    """Wide table: index = step (updates completed), one column per metric key."""
    planned_steps: int
    tokens_per_step: int
    last_update: float | None = None
    """Unix time of the newest telemetry, when the source knows it."""
    logged: pd.DataFrame | None = None
    """Which cells of `series` the run logged (a logged NaN is kept); None: every non-NaN cell."""
    grid: np.ndarray | None = None
    """The prediction's steps: an eval metric logged much more often is judged once per step of them
    (`ladder.watch.judged`); None: at every step it is logged."""
    horizons: tuple[tuple[int, int], ...] = ()
    """The run's schedule edits as (step, new horizon), and `started_with` the plan before them: a step's
    fraction is of the plan in force at it (`fractions`), as the prediction's verdicts count it."""
    started_with: int = 0
    """Planned steps before any edit (0: `planned_steps`)."""
    _judged: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    """`judged` by prediction and metric: the rules and the verdicts of one check share it."""

    def column(self, key: str) -> pd.Series:
        """The values the run logged for `key` (NaN and inf included when `logged` says so)."""
        if key not in self.series.columns:
            return pd.Series(dtype=float)
        if self.logged is not None and key in self.logged.columns:
            return self.series[key][self.logged[key].to_numpy(bool)]
        return self.series[key].dropna()

    def judged(self, pred: Prediction, key: str) -> pd.DataFrame:
        """The points at which `key` is judged, with the prediction beside each (`judged.compared`)."""
        memo = (id(pred), key)
        if memo not in self._judged:
            self._judged[memo] = (pred, compared(self.column(key), self.grid, pred))  # pred kept: its id stays its own
        return self._judged[memo][1]

    def judged_steps(self, key: str) -> np.ndarray:
        return judged_steps(self.column(key), self.grid)

    @property
    def last_step(self) -> int:
        return int(self.series.index.max()) if len(self.series) else 0

    def fractions(self, steps) -> np.ndarray:
        """Each step over the plan in force at it (the rungs' curves are read at the same fraction of theirs)."""
        from ladder.data.sources.coords import planned_steps_at

        steps = np.asarray(steps)
        return steps / planned_steps_at(steps.astype(np.int64), self.started_with or self.planned_steps,
                                        self.horizons)


@dataclass(frozen=True)
class RungCurves:
    """One metric of the rungs against fraction of their run, with each rung's fit compute."""

    fractions: list[np.ndarray]
    values: list[np.ndarray]
    compute: np.ndarray
    projection: Projection | None = None
    """The metric projected to the watched run's size, fraction by fraction (`ladder.predict.dynamics`);
    None when too few rungs log it, and the rules fall back to the rungs' range."""

    @property
    def projected(self) -> Projection | None:
        return self.projection if self.projection is not None and self.projection.usable else None


# ---- rules ----------------------------------------------------------------------------------------


def deviation(obs: Observed, pred: Prediction, rules: AlertRules) -> list[Alert]:
    """The eval metric against the prediction at the same step: past the 50% band's edge on its side (or
    `warn_rel`) a warning; above the 90% band's upper edge (or `alarm_rel`) an alarm; below its lower edge a
    warning still, and so is every deviation of a prediction that warned its band is likely too narrow
    (`Prediction.band_too_narrow`: its backtest's held-out size fell outside the law's own band)."""
    out, narrow = [], pred.band_too_narrow
    for row in obs.judged(pred, rules.metric).itertuples():
        step, value = row.Index, row.value
        bands = (row.median, row.lo50, row.hi50, row.lo90, row.hi90)
        if not row.in_assumptions or not np.isfinite(bands).all() or not np.isfinite(value):
            continue  # the watcher reports such an eval as cannot-judge
        rel = row.median / value - 1.0  # predicted / actual − 1, as everywhere
        above = value > row.median  # held to the band's edge on its own side: a band need not be symmetric
        warn = max((row.hi50 - row.median) if above else (row.median - row.lo50), rules.warn_rel * row.median)
        alarm = max((row.hi90 - row.median) if above else (row.median - row.lo90), rules.alarm_rel * row.median)
        gap = abs(value - row.median)
        if gap > warn:
            past90 = gap > alarm
            # Below the prediction the run does better than the ladder said: the prediction, not the run, is off
            # (or the eval is: a leaked eval set reads like this too). Worth a look, not a page in the night.
            early = bool(_in_warmup(obs, step, rules))
            # a band its own prediction calls likely too narrow pages no one: past it, the run warns
            level: Level = ("alarm" if past90 and above and not narrow and (not early or gap > WARMUP_ALARM * alarm)
                            else "warning")
            band = "90%" if past90 else "50%"
            limit = alarm if past90 else warn
            edge = row.median + limit if above else row.median - limit
            out.append(Alert(
                "deviation", level, int(step),
                f"{rules.metric} {value:.4f}{averaged(row.n, row.first_step, step)} is {'above' if above else 'below'} "
                f"the predicted {row.median:.4f}: the prediction's error (predicted / actual − 1) is {rel:+.2%}, past "
                f"{row.median / edge - 1:+.2%}, the error at {edge:.4f}: the {band} band's "
                f"{'upper' if above else 'lower'} edge or {(rules.alarm_rel if past90 else rules.warn_rel):.1%} "
                "from the prediction, whichever is farther"
                + ("" if above or not past90 else "; a run better than its prediction warns, never alarms: remake the "
                   "prediction, or check that the eval set is not in the training data")
                + (f"; in the first {rules.projection_skip:.0%} of the run, where the prediction is weakest, a "
                   f"deviation alarms only past {WARMUP_ALARM:g}× the 90% band's distance"
                   if early and above and past90 else "")
                + ("; the prediction warned that its band is likely too narrow on this ladder: maybe its miss, not the "
                   "run's (so a warning, never an alarm)" if narrow else ""),
                rel,
            ))
    return out


WARMUP_ALARM = 3.0
"""In the run's first `AlertRules.projection_skip`, a deviation alarms only this many times past the 90% band's
distance (or `alarm_rel`): a warmup eval 7% off a prediction made at 10% of the run is the prediction's weakness, a
loss twice the prediction is the run's."""


def _in_warmup(obs: Observed, steps, rules: AlertRules) -> np.ndarray:
    """Whether each step lies in the run's first `projection_skip` of the steps it started with planned (a plan
    extended later does not put steps long past warmup back in it)."""
    return np.asarray(steps) < rules.projection_skip * (obs.started_with or obs.planned_steps)


def drift(obs: Observed, pred: Prediction, rules: AlertRules) -> list[Alert]:
    """Slow drift: one-sided CUSUM of residuals (log actual / predicted) above their baseline: the mean of the first
    `drift_baseline_evals`, or the lowest such mean since where the run has come down from an early offset (not
    below the prediction, or the first mean where that is lower).

    Each residual is standardised by the larger of the prediction's own uncertainty at that step
    (from its 90% band), the eval-to-eval noise measured so far (a robust scale of successive
    differences) and `drift_noise`. A constant offset is the band rule's business and a single noisy
    eval does not accumulate; a steady climb beyond what the prediction allows does."""
    at = obs.judged(pred, rules.metric)
    if at.empty:
        return []
    value = at["value"].to_numpy(float)
    ok = at["in_assumptions"].to_numpy(bool) & np.isfinite(at["median"].to_numpy(float)) & np.isfinite(value)
    ok &= ~_in_warmup(obs, at.index.to_numpy(np.int64), rules)  # in warmup: no level to start from
    steps = at.index.to_numpy()[ok]
    med = at["median"].to_numpy(float)[ok]
    resid = np.log(value[ok] / med)
    spread = (at["hi90"].to_numpy()[ok] - at["lo90"].to_numpy()[ok]) / (2 * 1.645) / med
    n0 = rules.drift_baseline_evals
    if len(resid) <= n0:
        return []
    means = np.convolve(resid, np.ones(n0) / n0, mode="valid")  # means[j]: of the evals j … j + n0 − 1
    floor = min(means[0], 0.0)
    base = means[0]
    out, s = [], 0.0
    for i in range(n0, len(resid)):
        noise = 1.4826 * float(np.median(np.abs(np.diff(resid[: i + 1])))) / np.sqrt(2)
        # An early offset the run has since come down from is no level it keeps (the prediction is weakest early):
        # the baseline follows the lowest level so far, down to the prediction itself (or the first level, if lower),
        # where it is lower beyond the noise of a mean of n0 evals (the lowest of many noisy means sits below the
        # run's level: a steady offset would read as a climb back from it).
        base = max(min(base, means[i - n0] + 2 * max(rules.drift_noise, noise) / np.sqrt(n0)), floor)
        sigma = max(rules.drift_noise, noise, float(spread[i]) if np.isfinite(spread[i]) else 0.0)
        shift = resid[i] - base
        s = max(0.0, s + shift / sigma - rules.drift_k)
        if s > rules.drift_warn and shift > rules.drift_warn_floor:  # one alert per eval while it lasts
            alarm = s > rules.drift_alarm and shift > rules.drift_alarm_floor
            level: Level = "alarm" if alarm else "warning"
            limit = rules.drift_alarm if alarm else rules.drift_warn
            out.append(Alert(
                "drift", level, int(steps[i]),
                f"{rules.metric} is drifting upward against the prediction: {shift:+.2%} over its offset "
                f"before ({base:+.2%}, the first {n0} evals' or the lowest since), CUSUM {s:.1f}σ (σ = {sigma:.2%}; "
                f"limit {limit:g}σ)",
                s,
            ))
    return out


def lr_departed(obs: Observed, pred: Prediction, rules: AlertRules) -> list[Alert]:
    """The LR the run logs against the LR its prediction assumed (`Prediction` columns `LR`, `LR_LO`, `LR_HI`): a
    prediction made for another LR no longer holds (the laws predict the loss from the LR), and the deviation rules judge
    the run against it. One warning, at the first of `persist_evals` logged LRs in a row, past the run's first
    `projection_skip` (its warmup), further than `lr_tol` of the assumed peak outside the least and largest LR the
    prediction assumed between the rows on either side of the step."""
    if not {LR, LR_LO, LR_HI} <= set(pred.table.columns):
        return []
    t = pred.table[["step", LR, LR_LO, LR_HI]].astype(float).dropna()
    lr = obs.column(keys.LEARNING_RATE)
    lr = lr[np.isfinite(lr.to_numpy(float))]
    if t.empty or lr.empty or not (t[LR_HI] > 0).any():
        return []
    grid = t["step"].to_numpy()
    steps = lr.index.to_numpy(np.int64)
    keep = (steps <= grid[-1]) & ~_in_warmup(obs, steps, rules)
    steps, logged = steps[keep], lr.to_numpy(float)[keep]
    row = np.searchsorted(grid, steps, side="left")  # the row whose steps since the row before hold the step
    lo, hi = t[LR_LO].to_numpy()[row], t[LR_HI].to_numpy()[row]
    peak = float(t[LR_HI].max())
    off = (logged < lo - rules.lr_tol * peak) | (logged > hi + rules.lr_tol * peak)
    n = max(int(rules.persist_evals), 1)
    runs = np.convolve(off, np.ones(n, dtype=int), mode="valid") == n if len(off) >= n else np.zeros(0, bool)
    if not runs.any():
        return []
    i = int(np.argmax(runs))
    step, value = int(steps[i]), float(logged[i])
    then = float(np.clip(np.interp(step, grid, t[LR].to_numpy()), lo[i], hi[i]))
    return [Alert(
        "lr", "warning", step,
        f"the run's LR departs from the LR its prediction assumed: {value:.3g} at step {step:,} "
        f"({pred.fraction_label(step)}) against {then:.3g} ({abs(value - then) / peak:.0%} of its peak {peak:.3g}), "
        f"and {n} logged values in a row; the loss is judged against a prediction made for another LR. Predict it "
        "again from the LR it runs: declare its new schedule where one is declared, or, with none declared, `ladder "
        "predict --target-run` takes the LR it has logged so far; a declared schedule it kept to means its trainer "
        "runs another LR than declared",
        value,
    )]


def spikes(obs: Observed, rules: AlertRules) -> list[Alert]:
    """Loss spikes: robust z-score of the smoothed train loss against its recent past (the last `spike_window`
    logged values for its median, and as many again, twice, for its spread: the first z-score comes after about three
    windows of values)."""
    x = obs.column(keys.TRAIN_LOSS)
    x = x[np.isfinite(x.to_numpy())]
    w = rules.spike_window
    if len(x) < 3 * w:  # (the first finite z-score is at the 3w-th value)
        return []
    smooth = x.ewm(span=rules.spike_smoothing, adjust=False).mean()
    base = smooth.shift(1).rolling(w).median()
    resid = smooth - base
    scale = 1.4826 * (resid.shift(1) - resid.shift(1).rolling(w).median()).abs().rolling(w).median()
    z = (resid / scale.replace(0.0, np.nan)).to_numpy()
    out, in_spike = [], False
    for step, zi in zip(x.index.to_numpy(), z):
        if not np.isfinite(zi):
            continue
        if zi > rules.spike_warn_z and not in_spike:
            level: Level = "alarm" if zi > rules.spike_alarm_z else "warning"
            out.append(Alert("spike", level, int(step),
                             f"train loss spiked: robust z-score {zi:.1f} against its last {w} logged values "
                             f"(warn at {rules.spike_warn_z:g}, alarm at {rules.spike_alarm_z:g})", float(zi)))
            in_spike = True
        elif zi < rules.spike_warn_z / 2:
            in_spike = False
    return out


def non_finite(obs: Observed, rules: AlertRules) -> list[Alert]:
    """NaN or inf in the loss, the eval metric or the grad norm: always an alarm."""
    out = []
    for key in dict.fromkeys((keys.TRAIN_LOSS, rules.metric, keys.GRAD_NORM)):
        col = obs.column(key)
        bad = col[~np.isfinite(col.to_numpy(dtype=float))]
        if len(bad):
            step = int(bad.index[0])
            out.append(Alert("non_finite", "alarm", step, f"{key} is {bad.iloc[0]} at step {step}"))
    return out


def grad_norm_shape(obs: Observed, rungs: RungCurves | None, rules: AlertRules) -> list[Alert]:
    """The grad norm against the rungs' grad norm projected to this run's size at the same fraction;
    without a projection, the slope of ln grad-norm over the last window against the rungs' slopes."""
    g = obs.column(keys.GRAD_NORM)
    g = g[np.isfinite(g.to_numpy()) & (g.to_numpy() > 0)]
    if rungs is not None and rungs.projected is not None:
        return _grad_norm_projected(obs, g, rungs.projected, rules)
    if rungs is None or len(g) < 10:
        return []
    frac = obs.fractions(g.index.to_numpy(np.int64))
    f1 = frac[-1]
    f0 = f1 - rules.grad_window
    if f0 < 0.05:
        return []
    hero = _slope(frac, np.log(g.to_numpy()), f0, f1)
    ref = [_slope(f, np.log(np.maximum(v, 1e-30)), f0, f1) for f, v in zip(rungs.fractions, rungs.values)]
    ref = np.array([r for r in ref if np.isfinite(r)])
    if not np.isfinite(hero) or len(ref) == 0:
        return []
    lo, hi = ref.min() - rules.grad_tolerance, ref.max() + rules.grad_tolerance
    if lo <= hero <= hi:
        return []
    level: Level = "alarm" if abs(hero - np.clip(hero, lo, hi)) > 2 * rules.grad_tolerance else "warning"
    return [Alert("grad_norm", level, int(g.index[-1]),
                  f"grad norm changes at {hero:+.2f} ln-units per run over {f0:.0%}–{f1:.0%}; the rungs did "
                  f"{ref.min():+.2f} to {ref.max():+.2f} (tolerance ±{rules.grad_tolerance:g})", float(hero))]


def _grad_norm_projected(obs: Observed, g: pd.Series, proj: Projection, rules: AlertRules) -> list[Alert]:
    out = []
    for hit in _above_projection(obs, g, proj, rules):
        # how far above the median, in units of the band's upper half-width (ln units when log_y)
        far = (_z(hit.value, proj) - _z(hit.median, proj)) / (_z(hit.hi90, proj) - _z(hit.median, proj))
        level: Level = "alarm" if far > rules.grad_alarm_bands else "warning"
        out.append(Alert(
            "grad_norm", level, hit.step,
            f"grad norm {hit.value:.3g} ({_smoothing(rules)}) has been above the rungs' grad norm projected "
            f"to this run's size at every {hit.over} since step {hit.since:,} (at {hit.fraction:.0%}: projected {hit.median:.3g}, "
            f"90% band up to {hit.hi90:.3g}; {_flat_or_trend(proj, hit.fraction)})",
            hit.value / hit.median,
        ))
    return out
def _slope(x: np.ndarray, y: np.ndarray, x0: float, x1: float) -> float:
    m = (x >= x0) & (x <= x1)
    if m.sum() < 3:
        return float("nan")
    return float(np.polyfit(x[m], y[m], 1)[0])


def drop_fraction(obs: Observed, rungs: RungCurves | None, rules: AlertRules) -> list[Alert]:
    """MoE drop fraction above a fixed threshold, or above the rungs' drop fraction projected to this
    run's size at the same fraction (without a projection: above what every rung had there)."""
    d = obs.column(keys.DROP_FRACTION)
    d = d[obs.fractions(d.index.to_numpy(np.int64)) >= rules.projection_skip]  # past warmup (`projection_skip`)
    if d.empty:
        return []
    recent = float(d.iloc[-20:].mean())

    def rolling() -> pd.Series:  # at each log, the mean of the 20 up to it: only for an alert's onset
        return d.rolling(20, min_periods=1).mean()

    if recent > rules.drop_warn:
        level: Level = "alarm" if recent > rules.drop_alarm else "warning"
        limit = rules.drop_alarm if level == "alarm" else rules.drop_warn
        since = _onset(rolling() > limit)
        return [Alert("drop_fraction", level, since,  # keyed by the step it began: one alert while it lasts
                      f"MoE drop fraction {recent:.1%} (mean of the last 20 logs) is above {limit:.0%} "
                      f"(since step {since:,})", recent)]
    if rungs is not None and rungs.projected is not None:
        proj = rungs.projected
        d = d[np.isfinite(d.to_numpy())]
        return [Alert("drop_fraction", "warning", hit.step,
                      f"MoE drop fraction {hit.value:.1%} ({_smoothing(rules)}) has been above the rungs' drop "
                      f"fraction projected to this run's size at every {hit.over} since step {hit.since:,} (at {hit.fraction:.0%}: "
                      f"projected {hit.median:.1%}, 90% band up to {hit.hi90:.1%}; limit the band or "
                      f"{rules.drop_margin:.0%} above the projection, whichever is higher; "
                      f"{_flat_or_trend(proj, hit.fraction)})", hit.value)
                for hit in _above_projection(obs, d, proj, rules, margin=rules.drop_margin)]
    if rungs is None or not rungs.values:
        return []
    def highest(steps: np.ndarray) -> np.ndarray:  # the most any rung had at each fraction: no extrapolation to trust
        f = obs.fractions(steps)
        return np.max([np.interp(f, fr, v) for fr, v in zip(rungs.fractions, rungs.values) if len(fr)], axis=0)

    expected = float(highest(d.index[-1:].to_numpy(np.float64))[0])
    if recent > expected + rules.drop_margin:
        since = _onset(rolling() > pd.Series(highest(d.index.to_numpy(np.float64)) + rules.drop_margin, index=d.index))
        return [Alert("drop_fraction", "warning", since,
                      f"MoE drop fraction {recent:.1%} is above every rung's at this fraction (at most "
                      f"{expected:.1%}) by more than {rules.drop_margin:.0%} (since step {since:,})", recent)]
    return []


def _onset(above: pd.Series) -> int:
    """The step at which the trailing run of True in `above` (indexed by step; its last value True) began: an
    alert for a condition that lasts keeps that step, so it is sent once, not at every check."""
    flags = above.to_numpy(bool)
    start = len(flags) - int(np.argmin(flags[::-1])) if not flags.all() else 0
    return int(above.index[start])


# ---- against a projection to the run's size -------------------------------------------------------


@dataclass(frozen=True)
class _Above:
    step: int
    fraction: float
    value: float
    """The smoothed series at `step`."""
    median: float
    hi90: float
    since: int
    """The first of the evals that were all above."""
    over: str = "eval"
    """What was above since then: every "eval", or every "log" of a run with no eval yet."""


def _above_projection(obs: Observed, series: pd.Series, proj: Projection, rules: AlertRules,
                      margin: float = 0.0) -> list[_Above]:
    """The evals at which the run's smoothed series was above the projection's 90% band (and `margin`
    above its median) at that eval and at each of the `persist_evals` − 1 evals before it.

    The series is smoothed by a trailing rolling median, so each eval is judged on what was logged up
    to it and a restarted watcher raises the same alerts. A run that logs no eval is judged at its
    last step alone."""
    if series.empty or obs.planned_steps <= 0:
        return []
    steps = series.index.to_numpy(np.int64)
    frac = obs.fractions(steps)
    spacing = float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0
    w = max(5, int(round(rules.projection_window * obs.planned_steps / max(spacing, 1.0))))
    smooth = series.rolling(w, min_periods=min(w, 3)).median().to_numpy(float)
    med, _, hi = proj.at(frac, 0.9)
    with np.errstate(invalid="ignore"):  # NaN (no projection there, too few points yet): not above
        above = (smooth > np.maximum(hi, med + margin)) & (frac >= rules.projection_skip)
    evals = obs.judged_steps(rules.metric)
    if not len(evals):  # no eval yet (or none ever): judged at the last step, above over the whole smoothing window
        if len(above) < w or not above[-w:].all():
            return []
        return [_Above(int(steps[-1]), float(frac[-1]), float(smooth[-1]), float(med[-1]), float(hi[-1]),
                       int(steps[-w]), "log")]
    evals = evals[(evals >= steps[0]) & (evals <= steps[-1])]
    # the series' last point at or before each eval
    at = np.searchsorted(steps, evals, side="right") - 1
    k = max(int(rules.persist_evals), 1) if len(evals) > 1 or len(obs.column(rules.metric)) else 1
    out = []
    for i in range(k - 1, len(evals)):
        if not above[at[i - k + 1: i + 1]].all():
            continue
        j = int(at[i])
        out.append(_Above(int(evals[i]), float(frac[j]), float(smooth[j]), float(med[j]), float(hi[j]),
                          int(evals[i - k + 1])))
    return out


def _z(value: float, proj: Projection) -> float:
    return float(np.log(value)) if proj.log_y else float(value)


def _smoothing(rules: AlertRules) -> str:
    return f"rolling median over {rules.projection_window:.0%} of the run"


def _flat_or_trend(proj: Projection, fraction: float) -> str:
    i = int(np.argmin(np.abs(proj.fraction - fraction)))
    runs = int(proj.runs[i])
    if proj.flat[i]:
        return f"projected flat from {runs} rungs: no trend across sizes there"
    unit = "exponent" if proj.log_y else "slope per e-fold of compute"
    return f"from {runs} rungs, {unit} {proj.slope[i]:+.2f} in compute"


def stale(obs: Observed, now: float, rules: AlertRules) -> list[Alert]:
    """Nothing new for too long."""
    if obs.last_update is None:
        return []
    age = now - obs.last_update
    if age <= rules.stale_after_s:
        return []
    level: Level = "alarm" if age > 3 * rules.stale_after_s else "warning"
    return [Alert("stale", level, obs.last_step,
                  f"no new telemetry for {span_text(age)} (last step {obs.last_step:,}; "
                  f"warn after {span_text(rules.stale_after_s)})", age)]


def throughput(obs: Observed, now: float, rules: AlertRules) -> list[Alert]:
    """At the measured tokens/s, will the planned tokens be done by the deadline?"""
    if rules.deadline is None:
        return []
    tps = obs.column(keys.TOKENS_PER_SECOND)
    tps = tps[np.isfinite(tps.to_numpy()) & (tps.to_numpy() > 0)]
    if tps.empty:
        return []
    rate = float(tps.iloc[-rules.throughput_window:].mean())
    fit = horizon_that_fits(obs.last_step, obs.planned_steps, obs.tokens_per_step, rate, rules.deadline - now)
    if fit.fits:
        return []
    # keyed by the plan it threatens: one alert per level for a plan, not one per check (a new plan is a new key)
    if fit.seconds_left <= 0:  # a deadline kept across checks has come with the plan unfinished: said once more
        return [Alert("deadline", "alarm", obs.last_step, fit.message(), rate, keyed_by=obs.planned_steps)]
    level: Level = "alarm" if fit.fraction_of_plan < 0.75 else "warning"
    return [Alert("throughput", level, obs.last_step, fit.message(), rate, keyed_by=obs.planned_steps)]


def evaluate(
    obs: Observed,
    pred: Prediction,
    rules: AlertRules,
    now: float,
    grad_rungs: RungCurves | None = None,
    drop_rungs: RungCurves | None = None,
) -> list[Alert]:
    """Every rule on the run so far, sorted by step."""
    alerts = deviation(obs, pred, rules) + drift(obs, pred, rules) + lr_departed(obs, pred, rules)
    alerts += evaluate_run(obs, rules, now, grad_rungs, drop_rungs)
    return sorted(alerts, key=lambda a: (a.step, -LEVELS[a.level], a.rule))


def evaluate_run(
    obs: Observed,
    rules: AlertRules,
    now: float,
    grad_rungs: RungCurves | None = None,
    drop_rungs: RungCurves | None = None,
) -> list[Alert]:
    """The rules that need no prediction (spikes, NaN, grad norm, drops, staleness, throughput)."""
    alerts = (
        spikes(obs, rules)
        + non_finite(obs, rules)
        + grad_norm_shape(obs, grad_rungs, rules)
        + drop_fraction(obs, drop_rungs, rules)
        + stale(obs, now, rules)
        + throughput(obs, now, rules)
    )
    return sorted(alerts, key=lambda a: (a.step, -LEVELS[a.level], a.rule))

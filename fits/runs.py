"""A run as the prediction core sees it: its coordinates, its LR sequence and its evals, as arrays.

No model spec, config file or store: a ladder trained by any trainer enters with these numbers.

- `flops_per_token`: fit FLOPs per token (3 × forward FLOPs without the output head), or 6·N when
  only N is known. It is also the run's *size*: runs of one model share it, and the curve laws
  follow their parameters as power laws in it.
- `tokens_per_step`, `planned_steps`: the plan the run was started with; fraction = step ÷ planned.
- `lrs`: the LR of every step 0, 1, … (optional: the per-fraction law does not need it; the curve
  laws do).
- `steps`, `values`: the logged evals (for a target: empty, or its actual curve to score against).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from fits.errors import FitError

_EMPTY = np.zeros(0)


@dataclass(frozen=True)
class Run:
    """One run of a ladder (a rung) or the run to predict (a target)."""

    name: str
    flops_per_token: float
    tokens_per_step: float
    planned_steps: int
    steps: np.ndarray = field(default_factory=lambda: _EMPTY.astype(np.int64))
    values: np.ndarray = field(default_factory=lambda: _EMPTY)
    lrs: np.ndarray | None = None
    """LR of every step from 0; for a target, the schedule it will run (edits included)."""
    reference_lrs: np.ndarray | None = None
    """For a target whose schedule was edited: the LRs of the unedited plan (default: `lrs`). For a rung whose LR is
    known only as far as it was logged (still training): those LRs, shorter than `lrs`, so that its schedule's shape
    is compared only where it is known (`same_shape`)."""
    finished: bool = True
    """False for a run that stopped before its plan (crashed): its logged evals count, nothing after."""
    n_params: float | None = None
    """Parameters (active, non-embedding), when known: the token ratio uses them, else 6·tokens/FLOPs."""
    ratio: float | None = None
    """The token ratio the ladder was planned at, when declared (rounding steps moves the realised one)."""
    noise: float = 0.0
    """Relative standard error of each value where the values are estimates (a per-step metric read at the
    run's evals); 0 for evals as logged."""

    def __post_init__(self) -> None:
        for name, label in (("flops_per_token", "FLOPs per token"), ("tokens_per_step", "tokens per step"),
                            ("planned_steps", "planned steps")):
            object.__setattr__(self, name, _positive(self.name, label, getattr(self, name)))
        if self.planned_steps != round(self.planned_steps):
            raise FitError(f"run {self.name!r}: planned steps must be a whole number of optimizer steps, got "
                           f"{self.planned_steps!r}")
        object.__setattr__(self, "planned_steps", int(self.planned_steps))
        for name, label in (("n_params", "n_params (active parameters)"), ("ratio", "ratio (tokens per parameter)")):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, float) and np.isnan(value)):  # NaN: unknown, as None
                object.__setattr__(self, name, _positive(self.name, f"{label}, where known (else None),", value))
            else:
                object.__setattr__(self, name, None)
        if not isinstance(self.finished, (bool, np.bool_)):
            raise FitError(f"run {self.name!r}: finished must be True or False, got {self.finished!r}")
        steps = np.asarray(self.steps, dtype=np.float64).ravel()
        values = np.asarray(self.values, dtype=np.float64).ravel()
        if steps.size != values.size:
            raise FitError(f"run {self.name!r}: {steps.size} steps but {values.size} values")
        if steps.size:
            check_steps(steps, f"run {self.name!r}: steps", self.planned_steps)
        bad = ~np.isfinite(values) | (values <= 0)
        if np.any(bad):
            i = int(np.argmax(bad))
            raise FitError(f"run {self.name!r}: its value at step {int(steps[i]):,} is {values[i]:g}; the laws fit "
                           "positive, finite losses (fix the run's values at their source and pull it again)")
        object.__setattr__(self, "steps", steps.astype(np.int64))
        object.__setattr__(self, "values", values)
        for name in ("lrs", "reference_lrs"):
            lrs = getattr(self, name)
            if lrs is not None:
                lrs = np.asarray(lrs, dtype=np.float64).ravel()
                if not lrs.size:
                    raise FitError(f"run {self.name!r}: {name} is empty; give the LR of every step from 0, or None "
                                   "where it is not known")
                if np.any(~np.isfinite(lrs)) or np.any(lrs < 0):
                    raise FitError(f"run {self.name!r}: {name} must be finite and ≥ 0")
                object.__setattr__(self, name, lrs)
        reach = min(int(steps[-1]), self.planned_steps) if steps.size else 0
        if self.lrs is not None and self.lrs.size < reach:  # one LR per eval, or a schedule cut short
            raise FitError(f"run {self.name!r}: lrs holds {self.lrs.size:,} values, short of its eval at step "
                           f"{reach:,}; give the LR of every step from 0 to its last eval (one value per step, not "
                           "one per eval), or None where it is not known")

    @property
    def planned_tokens(self) -> float:
        return float(self.tokens_per_step) * float(self.planned_steps)

    @property
    def compute(self) -> float:
        """Fit compute of the planned run (FLOPs)."""
        return float(self.flops_per_token) * self.planned_tokens

    @property
    def param_compute(self) -> float:
        """6·N·D of the planned run: compute counted by parameters alone (= `compute` when N is unknown)."""
        return 6.0 * self.params * self.planned_tokens

    @property
    def params(self) -> float:
        """N: the given parameter count, else FLOPs per token ÷ 6."""
        return float(self.n_params) if self.n_params else float(self.flops_per_token) / 6.0

    @property
    def token_ratio(self) -> float:
        """Planned tokens per parameter: the declared ratio, else planned tokens ÷ parameters."""
        return float(self.ratio) if self.ratio else self.planned_tokens / self.params

    @property
    def fractions(self) -> np.ndarray:
        return self.steps / float(self.planned_steps)

    @property
    def plan_lrs(self) -> np.ndarray | None:
        """The LRs of the unedited plan."""
        return self.reference_lrs if self.reference_lrs is not None else self.lrs


def _positive(run: str, label: str, value) -> float:
    """`value` as a positive finite float, else a `FitError` naming the run and what the value is."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, (bool, np.bool_, str)) or not np.isfinite(number) or number <= 0:
        raise FitError(f"run {run!r}: {label} must be a positive number, got {value!r}")
    return number


def check_steps(steps: np.ndarray, where: str, planned: int | None = None) -> None:
    """A `FitError` where `steps` (floats) are not finite, ≥ 0 and strictly increasing, or not whole optimizer steps:
    fractions of the plan, or steps averaged or interpolated."""
    if np.any(~np.isfinite(steps)) or np.any(steps < 0) or np.any(np.diff(steps) <= 0):
        raise FitError(f"{where} must be finite, ≥ 0 and strictly increasing")
    off = np.flatnonzero(steps != np.round(steps))
    if off.size:
        i = int(off[0])
        hint = (f"; fractions of the plan? give step = fraction × {planned:,} planned steps"
                if planned and np.all(steps <= 1.0) else "")
        raise FitError(f"{where} must be whole optimizer steps; got {steps[i]:g} at position {i}{hint}")


MAX_STEPS = 10**8
"""The most steps a run may have (the planner's limit too): the curve laws hold an LR for every step."""


def reached_end(fractions: np.ndarray, finished: bool | None = None) -> bool:
    """Whether a run's evals (fractions of its plan, ascending) reach its planned end: the last is at the end, or no
    later eval was due (the end comes before the next eval at its usual interval, the median one, as when a run
    evaluates every 128 steps of 24,000 and its last eval is at step 23,936). A run that stopped short of that
    (crashed, or still running) has not.

    A last eval a whole interval before the end (evals every 10% ending at 90%) is ambiguous: a run that stopped one
    eval short, or a trainer that evaluates at step 0, k, 2k, … and never at its last step. It counts as the end where
    the source says the run `finished`, or, where the source says nothing (None), where the run evaluated at step 0
    (that trainer's mark); not otherwise."""
    f = np.asarray(fractions, dtype=np.float64)
    if not f.size:
        return False
    if f[-1] >= 1.0 - END_SLACK:
        return True
    gap = float(np.median(np.diff(f))) if f.size >= 2 else 0.0
    left = 1.0 - f[-1]
    if finished or (finished is None and f[0] <= END_SLACK):
        return bool(left <= gap * (1 + END_SLACK))
    return bool(left < gap * (1 - END_SLACK))


END_SLACK = 1e-6
"""Relative slack of `reached_end`: steps ÷ planned steps land a rounding off the end and off the interval."""


def lrs_from_logged(steps: np.ndarray, lrs: np.ndarray, last_step: int) -> np.ndarray:
    """The LR of every step 0 … `last_step` from a logged LR series (e.g. every 50 steps).

    Linear between logged steps; from 0 at step 0 to the first logged value (a linear warmup is
    exact); the last logged value held after it. Steps with a non-finite LR are left out.
    """
    steps = np.asarray(steps, dtype=np.float64).ravel()
    lrs = np.asarray(lrs, dtype=np.float64).ravel()
    ok = np.isfinite(steps) & np.isfinite(lrs)
    steps, lrs = steps[ok], lrs[ok]
    if steps.size == 0:
        raise FitError("no finite logged LR values")
    if np.any(lrs < 0):
        raise FitError(f"logged LR {float(lrs.min())!r} is negative")
    order = np.argsort(steps, kind="stable")
    steps, lrs = steps[order], lrs[order]
    keep = np.r_[True, np.diff(steps) > 0]
    steps, lrs = steps[keep], lrs[keep]
    if steps[0] > 0:
        steps, lrs = np.r_[0.0, steps], np.r_[0.0, lrs]
    if not 0 <= last_step <= MAX_STEPS:
        raise FitError(f"a run of {last_step:,} steps is beyond the {MAX_STEPS:.0e} the laws take an LR for every step "
                       "of; are its steps counted in tokens?")
    return np.interp(np.arange(int(last_step) + 1, dtype=np.float64), steps, lrs)


MIN_SHAPE_KNOWN = 0.2
"""The least part of a plan two LRs must both be known over for their shapes to be compared (`same_shape`)."""


def shape_signature(lrs: np.ndarray, planned_steps: int, n: int = 181, upto: float = 1.0,
                    start: float = 0.10) -> np.ndarray:
    """The LR at `start` (10%) … `upto` of the plan as a fraction of its largest value there (the first 10% left
    out: warmups round differently at different lengths, and an LR logged every few % of the run blurs their end)."""
    at = np.round(np.linspace(start, upto, n) * (planned_steps - 1)).astype(int)
    at = np.minimum(at, len(lrs) - 1)
    sig = lrs[at]
    return sig / (float(np.max(sig)) or 1.0)  # not the warmup's peak: an LR logged every few steps can miss it


SHAPE_TOL = 0.03
"""How far two plans' LRs (each as a fraction of its largest past 10% of the run) may lie apart at the same fraction
of the run and count as one schedule shape."""


def shape_distance(a: Run, b: Run) -> float:
    """How far apart the two plans' LR shapes lie at the same fraction of the run (`shape_signature`), over the part
    both LR sequences cover (a crashed run's logged LR stops where it stopped); 0 when either has no LRs, or they
    share less than `MIN_SHAPE_KNOWN` of it."""
    la, lb = a.plan_lrs, b.plan_lrs
    if la is None or lb is None:
        return 0.0
    upto = min(1.0, len(la) / a.planned_steps, len(lb) / b.planned_steps)
    if upto < MIN_SHAPE_KNOWN:
        return 0.0
    return float(np.max(np.abs(shape_signature(la, a.planned_steps, upto=upto)
                               - shape_signature(lb, b.planned_steps, upto=upto))))


def same_shape(a: Run, b: Run, tol: float = SHAPE_TOL) -> bool:
    """Both plans have the same LR shape in fraction of the run (`shape_distance` within `tol`)."""
    return shape_distance(a, b) <= tol


MIN_CARRY_KNOWN = 0.08
"""The least part of its plan a run's LR must be logged over to be carried on in the rungs' shape: compared from half
of it on (past most warmups), a logged LR shorter than this is mostly warmup (8%: a run evaluated every 1% of its
plan and caught at about a tenth of it has its LR logged to 9%)."""


class Carried(NamedTuple):
    """A target's LR logged to part of its plan, carried on in the ladder's shape (`lrs_in_the_ladders_shape`)."""

    lrs: np.ndarray | None
    """Its LR at every step; None where it could not be carried on."""
    like: str = ""
    """The rung whose schedule shape it follows."""
    why_not: str = ""
    """Why it could not be carried on ("" where it was)."""
    told: bool = True
    """The logged part could tell the rungs' shape from a constant LR (the rungs' LR changes over it by more than
    the tolerance); where not, that shape is assumed for a run that agrees with it so far, as a constant LR would."""


def lrs_carried_in_shape(lrs: np.ndarray, logged_to: int, planned_steps: int, like: Run,
                         tol: float = SHAPE_TOL) -> Carried:
    """A run's LR known to step `logged_to` of `lrs` (its planned steps `planned_steps`) carried on past it in the
    shape of `like`'s plan in fraction of the run, scaled to the known part by least squares (a larger run's peak
    LR is often lower). Not carried (and why) where the known part covers under `MIN_CARRY_KNOWN` of the plan, or
    departs from `like`'s shape by more than `tol` (as `same_shape` compares, from 10% of the plan, or from half the
    known part where that is shorter than 20%): a schedule that is not the ladder's is not guessed at. Where the
    known part cannot tell (`Carried.told`), the ladder's shape is assumed, and said."""
    ref = like.plan_lrs
    upto = logged_to / planned_steps
    if upto < MIN_CARRY_KNOWN:
        return Carried(None, why_not=f"its LR is logged over under {MIN_CARRY_KNOWN:.0%} of its plan, mostly warmup")
    if ref is None or len(ref) < like.planned_steps:
        return Carried(None, why_not=f"{like.name}'s LR does not cover its plan")
    known = np.asarray(lrs[:logged_to + 1], dtype=np.float64)
    start = min(0.10, upto / 2)
    theirs_known = shape_signature(ref, like.planned_steps, upto=upto, start=start)
    off = float(np.max(np.abs(shape_signature(known, planned_steps, upto=upto, start=start) - theirs_known)))
    if off > tol:
        return Carried(None, why_not=f"its logged LR lies {off:.1%} from the rungs' schedule shape ({like.name}'s) at "
                                     f"the same fraction of the run, over the {tol:.0%} that counts as one shape")
    step = np.arange(len(lrs))
    theirs = np.interp(step / planned_steps * like.planned_steps, np.arange(len(ref)), ref)
    fit = (step <= logged_to) & (step >= start * planned_steps)
    scale = float(np.dot(known[fit[:logged_to + 1]], theirs[fit]) / (np.dot(theirs[fit], theirs[fit]) or 1.0))
    return Carried(np.concatenate([known, scale * theirs[logged_to + 1:]]), like.name,
                   told=float(np.ptp(theirs_known)) > tol)


def lrs_in_the_ladders_shape(target: Run, logged_to: int, rungs: list[Run], ratio_tol: float = 0.01) -> Carried:
    """The LR of a `target` logged to step `logged_to` of its plan (a run still training that declares no schedule)
    carried on in the schedule shape of the rungs at its token ratio (of every rung where none is at it), with the
    rung whose shape it takes (the largest whose LR covers its plan): `lrs_carried_in_shape`. Not carried (and why)
    where those rungs do not share one shape (a rung still training compared as far as it logged), or the target's
    logged LR has not kept to it."""
    known = [r for r in rungs if r.lrs is not None]
    peers = [r for r in known if same_ratio(r, target, ratio_tol)] or known
    whole = [r for r in peers if len(r.plan_lrs) >= r.planned_steps]
    if target.lrs is None:
        return Carried(None, why_not="it logs no LR")
    if not whole:
        return Carried(None, why_not="no rung gives its LR over its whole plan")
    if not all(same_shape(whole[0], r) for r in peers):
        return Carried(None, why_not="the rungs at its token ratio do not share one schedule shape")
    return lrs_carried_in_shape(target.lrs, logged_to, target.planned_steps, max(whole, key=lambda r: r.compute))


def law_compute(runs: list[Run]) -> tuple[np.ndarray, str]:
    """The compute axis of a power law in compute across `runs`: 6·N·D when every run knows N, else fit FLOPs.

    Fit FLOPs per token count attention, whose share of a small model's FLOPs is larger (1.67× 6N at
    OLMo's 190M, 1.21× at 3.2B): on that axis the small rungs sit further right than their parameters
    put them, the fitted slope steepens, and larger runs are under-predicted. Counted by parameters, the
    per-fraction law's predictions of held-out larger runs moved toward the truth on every public ladder
    here that gives N (benchmarks/RESULTS.md). Returns (compute per run, what it is)."""
    if runs and all(r.n_params for r in runs):
        return np.array([r.param_compute for r in runs]), "6·N·D (parameters known)"
    return np.array([r.compute for r in runs]), "fit FLOPs (N not known for every run)"


BATCH_OFF_TREND = 1.5
"""A target whose tokens per step is more than this factor off the rungs' trend (either way) is warned about."""


def batch_trend(runs: list[Run]) -> tuple[float, float, np.ndarray, np.ndarray]:
    """The power law log B = c + k·log N through the runs' tokens per step B (one point per size: its median).

    Returns (k, c, parameters per size, tokens per step per size); one size gives a flat law through it.
    A ladder's recipe scales its batch with size, and the laws here take that scaling from the rungs: a
    size whose batch sits off it gets more from each token (a smaller batch: more steps for the same
    tokens) or less (a larger one) than the trend, by how it compares with the critical batch size
    (McCandlish et al. 2018), which none of the laws models."""
    return size_trend(runs, lambda r: r.tokens_per_step)


def size_trend(runs: list[Run], value) -> tuple[float, float, np.ndarray, np.ndarray]:
    """The power law log v = c + k·log N through `value(run)` of the runs (one point per size: its median).
    Returns (k, c, parameters per size, value per size); one size gives a flat law through it."""
    size = distinct([r.params for r in runs], 0.001)
    v = np.array([np.median([value(r) for r in runs if abs(r.params / s - 1) <= 0.001]) for s in size])
    if size.size < 2:
        return 0.0, float(np.log(v[0])), size, v
    k, c = np.polyfit(np.log(size), np.log(v), 1)
    return float(k), float(c), size, v


def batch_off_trend(runs: list[Run], target: Run) -> float:
    """The target's tokens per step over the rungs' batch law at its parameters (1: on the trend)."""
    k, c, _, _ = batch_trend(runs)
    return float(target.tokens_per_step / np.exp(c + k * np.log(target.params)))


def batch_far_off(runs: list[Run], target: Run) -> float | None:
    """`batch_off_trend` where it is more than `BATCH_OFF_TREND`× either way (else None; None with one size)."""
    if distinct([r.params for r in runs], 0.001).size < 2:
        return None
    off = batch_off_trend(runs, target)
    return None if 1 / BATCH_OFF_TREND <= off <= BATCH_OFF_TREND else off


LR_OFF_TREND = 5.0
"""A target whose peak LR is more than this factor off the rungs' peak LRs' trend in size (either way) is warned
about: recipes move the peak a few times over a ladder's sizes (Marin's 535B hero trains at 0.27× its rungs'
trend, by its recipe's rule), a typo or another unit moves it tenfold. One more than `LR_UNITS`× outside the
rungs' range of peaks is taken for another unit."""
LR_UNITS = 10.0


def peak_lr(lrs: np.ndarray | None) -> float | None:
    """The largest LR of a schedule (None without one, or an all-zero one)."""
    if lrs is None or not np.size(lrs):
        return None
    peak = float(np.max(lrs))
    return peak if peak > 0 else None


def lr_off_trend(runs: list[Run], target: Run) -> float | None:
    """The target's peak LR over the power law in size through the rungs' peak LRs (1: on the trend; None where
    the target or every rung has no LR)."""
    with_lr = [r for r in runs if peak_lr(r.plan_lrs) is not None]
    peak = peak_lr(target.plan_lrs)
    if not with_lr or peak is None:
        return None
    k, c, _, _ = size_trend(with_lr, lambda r: peak_lr(r.plan_lrs))
    return float(peak / np.exp(c + k * np.log(target.params)))


def lr_units_off(peaks, target_peak: float) -> float:
    """How many times the target's peak LR lies outside the range of the rungs' `peaks` (1 inside it)."""
    peaks = np.asarray(peaks, dtype=np.float64)
    return float(max(target_peak / peaks.max(), peaks.min() / target_peak, 1.0))


RISE_WARN = 0.02
"""An eval that sits this far (relative) above the run's earlier lowest eval, after `RISE_FROM` of its run, is a
loss spike or a bad eval, not noise: in the public ladders' runs of `../shared/data` (OLMo, Marin, (Mis)Fitting,
MPL) the most is 0.15%, in the micro demo's rungs 1.5%."""
RISE_FROM = 0.1


def rise_limit(run: Run) -> float:
    """How far an eval may rise above the run's earlier lowest before it is a spike or a bad eval: `RISE_WARN`, or
    for values with a standard error (`Run.noise`) the range that n such errors span (2·√(2 ln n) of them, the
    expected range of n normal draws) and two more, where that is wider."""
    n = int((run.fractions >= RISE_FROM - 1e-9).sum())
    if run.noise <= 0 or n < 2:
        return RISE_WARN
    return max(RISE_WARN, (2 * np.sqrt(2 * np.log(n)) + 2) * run.noise)


def rise(run: Run) -> tuple[float, int]:
    """(The largest relative rise of an eval above the run's earlier lowest eval, from `RISE_FROM` of its run on;
    its step). (0, -1) for a run of fewer than two such evals."""
    keep = run.fractions >= RISE_FROM - 1e-9
    v, s = run.values[keep], run.steps[keep]
    if v.size < 2:
        return 0.0, -1
    up = v / np.minimum.accumulate(v) - 1
    i = int(np.argmax(up))
    return float(up[i]), int(s[i])


ONE_RATIO = 1.1
"""Runs whose tokens per parameter lie within this factor of each other train at one token ratio (a table's
runs, where no plan says which ratio each was meant to have)."""


def same_ratio(a: Run, b: Run, tol: float = 0.01) -> bool:
    """Token ratios equal within a relative tolerance (1% by default)."""
    return abs(a.token_ratio / b.token_ratio - 1.0) <= tol


def same_tokens(a: Run, b: Run, tol: float = 0.01) -> bool:
    """Planned tokens equal within a relative tolerance (1% by default): every size on the same data."""
    return abs(a.planned_tokens / b.planned_tokens - 1.0) <= tol


def sizes(runs: list[Run]) -> np.ndarray:
    """The distinct sizes (FLOPs per token), ascending; runs within 0.1% count as one size."""
    return distinct([r.flops_per_token for r in runs], 0.001)


def distinct(values, tol: float) -> np.ndarray:
    """The distinct values, ascending; a value within `tol` (relative) above the last one kept is that one."""
    out: list[float] = []
    for v in np.sort(np.asarray(values, dtype=np.float64)):
        if not out or v > out[-1] * (1 + tol):
            out.append(float(v))
    return np.array(out)


def same_size(run: Run, size: float) -> bool:
    return abs(run.flops_per_token / size - 1.0) <= 1e-3

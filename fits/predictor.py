"""The prediction core: a target's whole curve from a ladder's runs, the law chosen by a backtest on
that ladder, and a band no narrower than what the backtest saw.

No single law wins on every ladder, and the only evidence at prediction time is the ladder itself.
So every candidate (`fits.candidates`) is backtested on it: the largest size is held out and
predicted from the smaller ones (and, with five sizes or more, the two largest from the rest), every
run of the held-out sizes (each length and schedule one more draw) scored at its logged evals from
`score_from` of the run on, each method on the runs every method could predict. A candidate's score
is the mean of its |final error| and its mean |error| along the curve. The ensemble (the mean of the
laws that apply, equal weights) is backtested the same way, as one more candidate: nothing in it is
fitted to the backtest, so its score is as honest as each law's. The candidate with the lowest score predicts (`method="auto"`), or the method
the user names. Equal weights rather than weights from the backtest's scores: one held-out size is one
draw (a size that sits off the ladder's trend moves every law's score), and weights estimated from so
little do worse than the plain mean (the forecast-combination puzzle: Clemen 1989, Smith and Wallis 2009).

The band: the chosen method's own band (its statistics), widened in quadrature by the backtest's
error at each fraction carried to the target's distance (error × log(target size / largest rung
size), or log(smallest rung size / target size) below the rungs, ÷ log(held-out size / largest fitted size), the way an extrapolated slope's error grows), so
it is never narrower than the backtest's errors at that distance; then by the spread across forms,
so that its 90% band holds the median of every other candidate that could predict the target. The
band is never narrower than an assumed error per e-fold of extrapolation (`UNTESTED_ERROR`, one sd):
a short backtest can raise it, not lower it; a law the ladder cannot backtest (fewer than 3 sizes)
gets that alone, and the prediction says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from fits import candidates as cand
from fits.candidates import Z50, Z90, Options
from fits.checks import and_more, rises_with_size
from fits.errors import FitError, GivenValueError
from fits.runs import (
    LR_OFF_TREND,
    Run,
    batch_far_off,
    check_steps,
    distinct,
    lr_off_trend,
    peak_lr,
    rise,
    rise_limit,
    same_size,
    sizes,
)
from fits.uncertainty import Band

CANDIDATES = ("per-fraction", "multipower")
METHODS = CANDIDATES + ("momentum", "per-fraction-free", "ensemble")


@dataclass(frozen=True)
class Settings:
    method: str = "auto"
    """"auto" (lowest backtest score) or one of `METHODS`."""
    candidates: tuple[str, ...] = CANDIDATES
    options: Options = field(default_factory=Options)
    backtest: bool = True
    """Backtest the candidates on the ladder (needs 3 sizes or more); off: no choice, no widening."""

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["candidates"] = list(self.candidates)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> Settings:
        d = dict(d)
        recorded = dict(d.pop("options", {}))
        if recorded:
            recorded.setdefault("floor", "zero")  # recorded before the curve laws profiled their floor
        opts = Options(**recorded)
        return cls(options=opts, candidates=tuple(d.pop("candidates", CANDIDATES)), **d)


@dataclass(frozen=True)
class Score:
    """One method's backtest on one held-out size."""

    method: str
    held_out: tuple[str, ...]
    distance: float
    """log(held-out size / largest fitted size)."""
    fractions: np.ndarray
    errors: np.ndarray
    """predicted / actual − 1 at each scored eval (pooled over held-out runs)."""
    inside90: np.ndarray
    final_errors: np.ndarray
    """One per held-out run."""
    failed: str = ""
    shared: np.ndarray | None = None
    """Which of the pooled evals every method predicted: the evals the score compares (None: all)."""

    @property
    def final_abs(self) -> float:
        return float(np.mean(np.abs(self.final_errors))) if self.final_errors.size else np.nan

    @property
    def mean_abs(self) -> float:
        """Mean |error| over the evals every method predicted (a law that stops where the rungs' evals end is not
        scored beside another on the evals past them)."""
        e = self.errors if self.shared is None or not self.shared.any() else self.errors[self.shared]
        return float(np.mean(np.abs(e))) if e.size else np.nan

    @property
    def coverage90(self) -> float:
        return float(np.mean(self.inside90)) if self.inside90.size else np.nan

    @property
    def score(self) -> float:
        """The mean of |final error| and mean |error|; mean |error| alone where no held-out run's end was
        predicted by every method (the rungs ended early), so that every method is scored alike."""
        if self.failed:
            return np.inf
        return 0.5 * (self.final_abs + self.mean_abs) if self.final_errors.size else self.mean_abs

    def record(self) -> dict:
        return {"method": self.method, "held_out": list(self.held_out), "size_ratio": float(np.exp(self.distance)),
                "final_error": float(np.mean(self.final_errors)) if self.final_errors.size else None,
                "final_abs_error": _num(self.final_abs), "mean_abs_error": _num(self.mean_abs),
                "coverage90": _num(self.coverage90), "evals": int(self.errors.size), "failed": self.failed}


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


@dataclass(frozen=True)
class CorePrediction:
    """What `predict` returns: the chosen law's band at `steps`, why, and what it was chosen from."""

    steps: np.ndarray
    band: Band
    """The chosen method's median, 50% and 90% bands at `steps` (NaN where no law reaches a step)."""
    method: str
    """The chosen law ("per-fraction", "multipower", "ensemble", ...)."""
    why: str
    """Why this law was chosen, and what sets its band."""
    candidates: dict[str, Band]
    """Each law's own band (and the ensemble's), before the backtest's widening."""
    outcomes: dict[str, cand.Outcome]
    """Each law that could predict the target: its band and its reasons."""
    backtest: tuple[Score, ...]
    """The backtest's rows: each method on each held-out size (`table` gives them as dicts)."""
    weights: dict[str, float]
    """The ensemble's weights (equal) over the laws it averages."""
    settings: Settings
    warnings: tuple[str, ...] = ()
    failed: dict[str, str] = field(default_factory=dict)
    """Candidates that could not predict the target, with why."""
    distance: float = 0.0
    """log(target size / largest rung size): how far the backtest's errors are carried."""
    fractions: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """The predicted steps as fractions of the target's plan."""
    carried_from: int | None = None
    """The last step every law of the ensemble predicts, where later ones are carried on by fewer (`carried_on`)."""
    carried_by: tuple[str, ...] = ()
    """The laws that carry the ensemble past `carried_from`."""

    def band_for(self, method: str) -> Band:
        """`method`'s band widened by its own backtest errors carried to the target (as the chosen one's is)."""
        return floored(self.candidates[method], self.backtest, method, self.distance, self.fractions)

    def scores(self) -> dict[str, float]:
        return method_scores(self.backtest)

    def table(self) -> list[dict]:
        """The backtest as rows: one per method and held-out size."""
        return [s.record() for s in self.backtest]

    def parts(self) -> dict[str, float]:
        """What sets the 90% band at the last step the band covers, each as a half-width relative to the median:
        "band" the band itself ("below" and "above": its reach on either side); "own" the method's own statistics;
        "carried" the backtest's error carried to the target; "floor" `UNTESTED_ERROR` per e-fold; "laws" the reach to the farthest other law's median;
        "gap" where no other law predicts the target, how far the laws that could not lay from the method in the
        backtest, carried to the target (`carried_gap`)."""
        ok = np.flatnonzero(np.isfinite(self.band.median) & np.isfinite(self.band.lo90) & np.isfinite(self.band.hi90))
        if not ok.size:
            return {}
        i = int(ok[-1])
        half = lambda b: float((b.hi90[i] - b.lo90[i]) / 2 / b.median[i])  # noqa: E731
        own = self.candidates[self.method]
        others = [b.median[i] for k, b in self.candidates.items() if k != self.method and k in self.settings.candidates]
        b = self.band
        return {"band": half(b), "below": float(1 - b.lo90[i] / b.median[i]), "above": float(b.hi90[i] / b.median[i] - 1),
                "own": half(own),
                "carried": float(carried_error(self.backtest, self.method, self.distance, self.fractions[i:i + 1])[0]),
                "floor": float(UNTESTED_ERROR * max(self.distance, 0.0) * Z90),
                "laws": max((float(abs(o / own.median[i] - 1)) for o in others if np.isfinite(o)), default=0.0),
                "gap": float(carried_gap(self.backtest, self.method, self.absent(), self.distance,
                                         self.fractions[i:i + 1])[0]) if not others else 0.0}

    def absent(self) -> list[str]:
        """The candidate laws that could not predict the target."""
        return _absent(self.settings.candidates, self.outcomes, self.failed)


def method_scores(backtest) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for s in backtest:
        by.setdefault(s.method, []).append(s.score)
    return {m: float(np.mean(v)) for m, v in by.items()}


# ---- predicting with every candidate ---------------------------------------------------------------------


def _predict_all(runs: list[Run], target: Run, steps: np.ndarray, names, options: Options):
    """({name: Outcome}, {name: why it failed}) for one target at `steps`."""
    results = _predict_many(runs, [(target, steps)], names, options)
    outcomes = {n: r[0] for n, r in results.items() if isinstance(r[0], cand.Outcome)}
    return outcomes, {n: r[0] for n, r in results.items() if n not in outcomes}


def _predict_many(runs: list[Run], jobs: list[tuple[Run, np.ndarray]], names, options: Options):
    """{name: [Outcome or error text per (target, steps)]}; each candidate fitted once for all targets."""
    out = {}
    for name in names:
        model = cand.make(name, runs, options)
        res = []
        for target, steps in jobs:
            try:
                res.append(model.predict(target, steps))
            except GivenValueError:
                raise  # the user's value, not a law that does not suit the ladder
            except FitError as exc:
                res.append(str(exc))
        out[name] = res
    return out


def ensemble(bands: dict[str, Band], weights: dict[str, float]) -> Band:
    """Weighted mean of the medians; each bound's distance from it is the weighted mean distance ⊕ the
    spread of the medians. Past the last step every law predicts, the laws that go on carry it (`carried_on`)."""
    return ensemble_carried(bands, weights)[0]


@dataclass(frozen=True)
class Carried:
    """Where an ensemble is carried on by fewer laws than it has (`carried_on`)."""

    at: int
    """Index of the last step every law predicts."""
    by: tuple[str, ...]
    """The laws that go on past it."""
    stopped: tuple[str, ...]
    """The laws that stop there."""


def ensemble_carried(bands: dict[str, Band], weights: dict[str, float]) -> tuple[Band, Carried | None]:
    """`ensemble`, and where it is carried on by fewer laws (None where every law predicts every step it does)."""
    names = [n for n in bands if weights.get(n, 0) > 0]
    if not names:
        raise FitError(f"an ensemble needs a law of positive weight; the weights are {weights}")
    mean = _mean_band(bands, names, weights)
    return carried_on(mean, {n: bands[n] for n in names}, weights)


def carried_on(band: Band, members: dict[str, Band], weights: dict[str, float]) -> tuple[Band, Carried | None]:
    """The ensemble `band` past the last step all its `members` predict (the per-fraction law predicts nothing past
    the fractions its rungs reached; a curve law follows the LR to the end), and where and by which laws it is
    carried (None where nothing is). The members that go on give the shape, scaled to meet the ensemble there: the
    ensemble sets the level where every law has evidence, and a law that models the schedule says how the loss
    falls on as the LR decays. Each bound keeps the ensemble's relative reach at that step, or theirs where wider."""
    ok = np.isfinite(band.median)
    if not ok.any() or ok[-1]:
        return band, None
    i = int(np.flatnonzero(ok)[-1])
    later = [n for n, b in members.items() if np.isfinite(b.median[i + 1:]).any() and np.isfinite(b.median[i])]
    if not later or len(later) == len(members):
        return band, None
    rest = ensemble({n: members[n] for n in later}, weights)
    k = band.median[i] / rest.median[i]
    if not np.isfinite(k) or k <= 0:
        return band, None
    out = {"median": band.median.copy()}
    out["median"][i + 1:] = k * rest.median[i + 1:]
    for attr, wider in (("lo50", np.minimum), ("hi50", np.maximum), ("lo90", np.minimum), ("hi90", np.maximum)):
        here = getattr(band, attr)[i] / band.median[i]
        theirs = getattr(rest, attr)[i + 1:] / rest.median[i + 1:]
        out[attr] = getattr(band, attr).copy()
        out[attr][i + 1:] = out["median"][i + 1:] * wider(here, theirs)
    return Band(**out), Carried(i, tuple(later), tuple(n for n in members if n not in later))


def laws(names, possessive: bool = False) -> str:
    """``the multipower law``, ``the per-fraction and multipower laws``; `possessive`: ``law's``, ``laws'``."""
    names = list(names)
    several = len(names) > 1
    return f"the {' and '.join(names)} law" + (("s'" if several else "'s") if possessive else ("s" if several else ""))


def _mean_band(bands: dict[str, Band], names: list[str], weights: dict[str, float]) -> Band:
    w = np.array([weights[n] for n in names], dtype=float)
    w = w / w.sum()
    M = np.vstack([bands[n].median for n in names])
    m = np.sum(w[:, None] * M, axis=0)
    spread = np.sqrt(np.sum(w[:, None] * (M - m) ** 2, axis=0))

    def side(attr: str) -> np.ndarray:
        return np.sum(w[:, None] * np.abs(np.vstack([getattr(bands[n], attr) for n in names]) - M), axis=0)

    return Band(m, m - np.hypot(side("lo50"), Z50 / Z90 * spread), m + np.hypot(side("hi50"), Z50 / Z90 * spread),
                m - np.hypot(side("lo90"), spread), m + np.hypot(side("hi90"), spread))


def equal_weights(names, scores: dict[str, float] | None = None) -> dict[str, float]:
    """Weight 1 for each law in `names` that did not fail the backtest (no score counts as not failed)."""
    scores = scores or {}
    return {k: 1.0 for k in names if scores.get(k, 0.0) < np.inf}


# ---- the backtest ------------------------------------------------------------------------------------------


def cuts(runs: list[Run]) -> list[tuple[np.ndarray, float]]:
    """(held-out sizes, largest fitted size) per backtest: the largest size; the two largest too with 5+ sizes."""
    s = sizes(runs)
    if s.size < 3:
        return []
    out = [(s[-1:], s[-2])]
    if s.size >= 5:
        out.append((s[-2:], s[-3]))
    return out


def backtest(runs: list[Run], settings: Settings) -> tuple[Score, ...]:
    """Every candidate (and their ensemble) predicting the held-out sizes from the smaller ones.

    Every run of a held-out size is predicted (each of its lengths and schedules is one more draw of how
    the law carries to a larger size), and the methods are scored on the runs every one of them could
    predict, so that their scores compare the same runs."""
    o = settings.options
    rows: list[Score] = []
    for held_sizes, top in cuts(runs):
        fit_runs = [r for r in runs if r.flops_per_token <= top * 1.001]
        held = [_as_target(r, o.score_from) for r in runs if any(same_size(r, s) for s in held_sizes)]
        held = [h for h in held if h.steps.size]
        if not held:
            continue
        distance = float(np.log(max(h.flops_per_token for h in held) / top))
        results = _predict_many(fit_runs, [(h, h.steps) for h in held], settings.candidates, o)
        ok = {n: [isinstance(x, cand.Outcome) for x in res] for n, res in results.items()}
        common = [i for i in range(len(held)) if all(v[i] for v in ok.values() if any(v))]
        joint = [_joint_evals(results, ok, i) for i in range(len(held))]
        for name, res in results.items():
            keep = [i for i in (common or range(len(held))) if ok[name][i]]
            if not keep:
                why = next(x for x in res if isinstance(x, str))
                rows.append(_failed(name, held, distance, why))
                continue
            rows.append(_score(name, [held[i] for i in keep], [res[i].band for i in keep], distance,
                               [joint[i] for i in keep]))
        w = equal_weights([n for n, v in ok.items() if any(v)])
        if len(w) >= 2 and common:
            bands = [ensemble({n: results[n][i].band for n in w}, w) for i in common]
            rows.append(_score("ensemble", [held[i] for i in common], bands, distance, [joint[i] for i in common]))
    return tuple(rows)


def _as_target(r: Run, score_from: float) -> Run:
    """A held-out run as the target of a backtest: its evals from `score_from` on. Where it stopped early and its LR
    is known only as far as it was logged (`Run.reference_lrs` shorter than its LRs), its schedule is compared with
    the rungs' that far, as a rung's is, and scored at the evals it covers; otherwise it has no edits (a finished
    run's LR logged every few steps is held past its last value, and every eval is scored)."""
    keep = r.fractions >= score_from - 1e-9
    known = r.reference_lrs if not r.finished and r.reference_lrs is not None and r.lrs is not None and \
        len(r.reference_lrs) < len(r.lrs) else None
    if known is not None:
        keep &= r.steps < len(known)
    return dataclasses.replace(r, steps=r.steps[keep], values=r.values[keep], reference_lrs=known)


def _failed(name: str, held: list[Run], distance: float, why: str) -> Score:
    empty = np.zeros(0)
    return Score(name, tuple(h.name for h in held), distance, empty, empty, empty.astype(bool), empty, failed=why)


def _joint_evals(results: dict, ok: dict, i: int) -> np.ndarray:
    """Held-out run `i`'s evals that every method that predicted it has a value at (one did: it is scored). Its final
    eval is scored only where it is one of them: a law whose fitted runs end early predicts nothing past their reach,
    and scoring its last predicted eval would set an error at 60% of a run beside another law's at its end."""
    return np.all([np.isfinite(results[name][i].band.median) for name in results if ok[name][i]], axis=0)


def _score(name: str, held: list[Run], bands: list[Band], distance: float, joint: list[np.ndarray]) -> Score:
    """`name`'s errors on the `held` runs, noting which of each run's evals every method predicted (`joint`); its
    final error where that holds of its final eval."""
    g, e, inside, finals, shared = [], [], [], [], []
    for h, b, both in zip(held, bands, joint):
        ok = np.isfinite(b.median)
        if not ok.any():
            continue
        err = b.median[ok] / h.values[ok] - 1
        g.append(h.fractions[ok])
        e.append(err)
        inside.append((b.lo90[ok] <= h.values[ok]) & (h.values[ok] <= b.hi90[ok]))
        shared.append(both[ok])
        if both[-1]:
            finals.append(err[-1])
    if not e:
        return _failed(name, held, distance, "no held-out eval inside the fitted fractions")
    return Score(name, tuple(h.name for h in held), distance, np.concatenate(g), np.concatenate(e),
                 np.concatenate(inside), np.array(finals), shared=np.concatenate(shared))


NATS_MAX = 15.0
"""A loss in nats per token above this is beyond ln(vocabulary) for any vocabulary in use (ln 256k = 12.5): more
likely a perplexity, or a sum over tokens."""


def unit_warning(runs: list[Run]) -> list[str]:
    """A warning when the rungs' evals past 10% of their runs lie above `NATS_MAX` (the laws take a loss; a
    perplexity is its exponential, on which their power laws do not hold)."""
    late = [r.values[r.fractions >= 0.1] for r in runs]
    top = max((float(v.max()) for v in late if v.size), default=0.0)
    if top <= NATS_MAX:
        return []
    return [f"the rungs' evals reach {top:.3g} past 10% of their runs, above {NATS_MAX:g}, more than a loss in nats "
            "per token can be late in a run (ln of a 256k vocabulary is 12.5): if these are perplexities, give their "
            "logarithm (the laws hold for the loss)"]


def rising(band: Band, fractions: np.ndarray, tol: float = 0.01) -> list[str]:
    """A warning when the predicted median rises by more than `tol` past 10% of the run: a loss curve under a
    decaying LR falls; a rise comes from a rung that does not improve."""
    m = np.asarray(band.median, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(m) & (np.asarray(fractions) >= 0.1))
    if ok.size < 2:
        return []
    low = np.minimum.accumulate(m[ok])
    up = m[ok] / low - 1
    if up.max() <= tol:
        return []
    i = ok[int(np.argmax(up))]
    return [f"the predicted curve rises {up.max():.1%} above its earlier lowest by {fractions[i]:.0%} of the run: a "
            "rung whose loss does not fall pulls the law; check the rungs' curves (`ladder plot`)"]


OWN_BAND_HELD = 0.5
"""Below this share of the held-out size's evals inside the chosen law's own 90% band, in the backtest, the
prediction warns that its band may be too narrow."""
TOO_NARROW = "read the band as too narrow"
"""The words of the prediction's warning that its band is likely too narrow (`own_band_missed`), which the watch's
deviation alerts repeat."""
MEASURED_TO = 1e-3
"""A held-out eval the law's own band misses by less than this (relative) counts as held: an eval's own noise is about
that large, and a law fitted to noise-free runs has a band of nothing, which every held-out eval misses by 0.003%."""


def own_band_missed(rows, method: str) -> list[str]:
    """A warning where the backtest's held-out size lay inside `method`'s own 90% band at fewer than `OWN_BAND_HELD` of
    its evals (or within `MEASURED_TO` of it): the prediction's band adds the backtest's errors carried to the target,
    but a law whose own band fails so has missed a larger size by more than that (a ladder of one length per size: the
    OLMo 3.2B's early evals at 0.5×C, 12% inside; benchmarks/one_length_ladder.py)."""
    inside = [s.inside90 | (np.abs(s.errors) <= MEASURED_TO) for s in rows if s.method == method and _usable(s)]
    held = float(np.mean(np.concatenate(inside))) if inside else np.nan
    if not held < OWN_BAND_HELD:
        return []
    n = sum(x.size for x in inside)
    return [f"in the backtest the {method} law's own 90% band held {held:.0%} of the held-out size's {n} evals: its band "
            "here adds the backtest's errors carried to the target, but a law whose own band fails so has missed larger "
            f"sizes by more (a ladder of one length per size does, most early in the run); {TOO_NARROW}, and train a "
            "second length at two sizes or more for the curve laws"]


def carried_error(backtest_rows, method: str, distance: float, fractions: np.ndarray) -> np.ndarray:
    """The backtest's |error| of `method` at each fraction, carried to `distance` (largest over held-out sizes).

    At each fraction: the larger of the error seen nearest it and the held-out curve's RMS error (one
    held-out curve's errors at neighbouring evals are one draw, not a profile to trust point by point)."""
    out = np.zeros(fractions.shape)
    for s in backtest_rows:
        if s.method == method and _usable(s):
            out = np.maximum(out, _carry(s.fractions, np.abs(s.errors), s.distance, distance, fractions))
    return out


def carried_gap(backtest_rows, method: str, absent: list[str], distance: float, fractions: np.ndarray) -> np.ndarray:
    """How far the backtest's predictions of `method` and of the laws `absent` (laws that cannot predict the target)
    lay apart at each fraction, relative, carried to `distance` as `carried_error` carries errors (largest over
    held-out sizes and laws): the disagreement `spread` holds in the band where every law predicts the target."""
    out = np.zeros(fractions.shape)
    rows = {(s.method, s.distance): s for s in backtest_rows if _usable(s)}
    for (name, at), s in rows.items():
        other = rows.get((method, at))
        if name not in absent or other is None:
            continue
        (g, e), (g0, e0) = _mean_errors(s), _mean_errors(other)
        both = np.intersect1d(g, g0)
        if both.size:
            gap = np.abs(e[np.isin(g, both)] - e0[np.isin(g0, both)])  # predicted/actual − 1 apart: the medians apart
            out = np.maximum(out, _carry(both, gap, at, distance, fractions))
    return out


def _absent(candidates, outcomes: dict, failed: dict) -> list[str]:
    """The `candidates` that could not predict the target (in `failed`, not in `outcomes`)."""
    return [k for k in candidates if k not in outcomes and k in failed]


def _usable(s: Score) -> bool:
    return not s.failed and s.errors.size > 0 and s.distance > 0


def _mean_errors(s: Score) -> tuple[np.ndarray, np.ndarray]:
    """A backtest row's errors by fraction (rounded to 1e-6): the fractions, and the mean error at each."""
    g = np.round(s.fractions, 6)
    grid = np.unique(g)
    return grid, np.array([s.errors[g == x].mean() for x in grid])


def _carry(g: np.ndarray, e: np.ndarray, seen_at: float, distance: float, fractions: np.ndarray) -> np.ndarray:
    """|errors| `e` at fractions `g` (of held-out runs `seen_at` e-folds beyond the fitted ones) carried to `distance`
    at `fractions`: at each, the larger of the error seen nearest it and their RMS (one held-out curve's errors at
    neighbouring evals are one draw, not a profile to trust point by point), growing in proportion to distance."""
    order = np.argsort(g, kind="stable")
    g, e = g[order], e[order]
    grid = np.unique(np.round(g, 6))
    worst = np.array([e[np.isclose(np.round(g, 6), x)].max() for x in grid])
    level = np.maximum(np.interp(fractions, grid, worst), float(np.sqrt(np.mean(e * e))))
    return level * max(distance, 0.0) / seen_at


# ---- the prediction ------------------------------------------------------------------------------------------


def _target_steps(steps, target: Run) -> np.ndarray:
    """The steps to predict as whole steps, checked (a `FitError` naming what is wrong), and within the target's LR
    sequence where it has one."""
    given = np.asarray(steps, dtype=np.float64)
    if given.ndim != 1 or not given.size:
        raise FitError(f"steps to predict {target.name!r} at: give a 1-D array of its steps, e.g. its planned evals; "
                       f"got {'a number' if given.ndim == 0 else f'an array of shape {given.shape}'}")
    check_steps(given, f"steps to predict {target.name!r} at", target.planned_steps)
    if target.lrs is not None and target.lrs.size < given[-1]:
        raise FitError(f"target {target.name!r}: lrs holds {target.lrs.size:,} values, short of step "
                       f"{int(given[-1]):,} asked for; give the LR of every step it will run, from 0 to its last "
                       "(its whole schedule)")
    return given.astype(np.int64)


def predict(runs: list[Run], target: Run, steps, settings: Settings | None = None) -> CorePrediction:
    """The target's metric at `steps` from the ladder's `runs`: every candidate law fitted, backtested on the ladder
    and the chosen one's 50% and 90% bands (`CorePrediction.band`), with why it was chosen.

    `runs` are the rungs (`fits.runs.Run`, each with its evals); `target` is the run to predict, its coordinates and,
    for the curve laws, its LR of every step (its evals, if any, are not read: they are what a prediction is scored
    against). `steps` are whole optimizer steps of the target, strictly increasing (its planned evals, say); a step
    no law reaches (before the rungs' first evals) gets NaN. `settings` default to what `ladder predict` does."""
    settings = settings or Settings()
    runs = list(runs) if not isinstance(runs, Run) else [runs]
    if not runs:
        raise FitError("no runs to predict from")
    if bad := next((r for r in [*runs, target] if not isinstance(r, Run)), None):
        raise FitError(f"runs and the target must be fits.runs.Run records; got a {type(bad).__name__}")
    steps = _target_steps(steps, target)
    if settings.method not in ("auto",) + METHODS:
        raise FitError(f"unknown method {settings.method!r}; choose auto or one of {', '.join(METHODS)}")
    if settings.options.E_from not in cand.E_SOURCES:
        raise FitError(f"unknown E source {settings.options.E_from!r}; choose {' or '.join(cand.E_SOURCES)}")
    names = list(dict.fromkeys(list(settings.candidates)
                               + ([settings.method] if settings.method not in ("auto", "ensemble") else [])))
    options = cand.resolve_smooth(runs, target, settings.options)
    outcomes, failed = _predict_all(runs, target, steps, names, options)
    if not outcomes:
        raise FitError("no law could predict the target: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    if settings.backtest:
        # the backtest's bands only score coverage: fewer refits do
        options = dataclasses.replace(options, n_boot=min(options.n_boot, 100))
        fixed = dataclasses.replace(settings, options=options)
        rows = backtest(runs, fixed)
    else:
        rows = ()
    scored = method_scores(rows)
    scores = {k: v for k, v in scored.items() if k in outcomes or k == "ensemble"}
    weights = equal_weights([k for k in outcomes if k in settings.candidates], scores)
    bands = {k: o.band for k, o in outcomes.items()}
    carried = None
    if len(weights) >= 2:
        bands["ensemble"], carried = ensemble_carried({k: bands[k] for k in weights}, weights)
    warnings = _ladder_warnings(runs, target, outcomes)
    method, why, unchecked = _choice(settings, scored, scores, bands, outcomes, failed, runs, rows)
    warnings += unchecked + _unused(settings.options, outcomes, failed)
    distance = float(efolds_outside(target.flops_per_token, sizes(runs)))
    g = steps / float(target.planned_steps)
    band = floored(bands[method], rows, method, distance, g)
    if not tested(rows, method) and distance > 0:
        why += (f"; no backtest of this law on the ladder, so its band is widened by an assumed "
                f"{UNTESTED_ERROR:.0%} per e-fold of extrapolation ({distance:.2f} e-folds outside the rungs' sizes)")
        warnings.append(f"the band of the {method} law is not checked by a backtest on this ladder: it assumes "
                        f"{UNTESTED_ERROR:.0%} error (one sd) per e-fold of extrapolation; another size would test it")
    elif band is not bands[method]:
        why += (f"; band widened by the backtest's errors carried to the target's distance, and to at least "
                f"{UNTESTED_ERROR:.0%} per e-fold of extrapolation")
    warnings += own_band_missed(rows, method)
    others = [k for k in outcomes if k != method and k in settings.candidates]
    if method in outcomes and others:
        band = spread(band, [bands[k] for k in others])
        why += "; and so that its 90% band holds the other laws' medians (" + ", ".join(others) + ")"
    absent = _absent(settings.candidates, outcomes, failed)
    gap = carried_gap(rows, method, absent, distance, g) if method in outcomes and not others and absent else None
    if gap is not None and np.any(gap > 0):  # a law the target gives too little for still says how far laws disagree
        band = cand.widen(band, gap * np.abs(band.median) / Z90)
        why += (f"; and by how far {laws(absent)} lay from it on the backtest's held-out sizes, carried to the target's "
                f"distance ({laws(absent)} could not predict the target, which is no reason for a narrower band)")
    if method == "ensemble":
        why += f" (the mean of {' and '.join(weights)}, equal weights; its 90% band holds each one's median)"
    carried = carried if method == "ensemble" else None
    if carried is not None:
        at, one = carried.at, len(carried.stopped) == 1
        why += (f"; past {g[at]:.0%} of the plan, where the rungs' evals end and {laws(carried.stopped)} "
                f"stop{'s' if one else ''}, {laws(carried.by, possessive=True)} fall from there (as the LR decays) "
                "carries the mean on")
        warnings.append(f"past step {int(steps[at]):,} ({g[at]:.0%} of the plan) the prediction rests on "
                        f"{laws(carried.by)} alone: the rungs' evals end there, and rungs with evals to the end of "
                        "their plans would test it")
    warnings += rising(band, g)
    res = CorePrediction(steps, band, method, why, bands, outcomes, rows, weights, settings,
                         tuple(dict.fromkeys(warnings)), failed, distance, g,
                         None if carried is None else int(steps[carried.at]), () if carried is None else carried.by)
    p = res.parts()
    if p:
        lopsided = abs(p["above"] - p["below"]) > 0.1 * p["band"]  # a band in log space, or held to another law
        reach = f"−{p['below']:.1%} / +{p['above']:.1%} (±{p['band']:.1%} on average)" if lopsided else f"±{p['band']:.1%}"
        parts = [f"the law's own ±{p['own']:.1%}",
                 (f"the larger of the backtest's error carried (±{p['carried']:.1%}) and the floor (±{p['floor']:.1%})"
                  if tested(rows, method) else f"the floor ±{p['floor']:.1%}")]
        spread_added = method in outcomes and others  # `spread`; the ensemble's own band holds each law's median
        parts[0] += (f" (which holds each law's median, the farthest {p['laws']:.1%} away)" if others and not spread_added
                     else "")
        parts += [f"the farthest other law's median, {p['laws']:.1%} away"] if spread_added else []
        parts += [f"how far {laws(absent)} lay from it in the backtest, carried (±{p['gap']:.1%})"] if p["gap"] > 0 else []
        why += (f". At the end the 90% band reaches {reach}: {', '.join(parts[:-1])} and {parts[-1]}, added in "
                "quadrature")
        res = dataclasses.replace(res, why=why)
    return res


UNUSED = (("floor", "floor", "--floor", "the curve laws, and none predicts", tuple(cand.CURVE_LAWS)),
          ("n_boot", "refits", "--n-boot", "the per-fraction law, which does not predict",
           ("per-fraction", "per-fraction-free")))
"""(option, what it counts, its flag, the laws it sets, their names): settings a prediction says it left unused."""


def _unused(options: Options, outcomes: dict, failed: dict) -> list[str]:
    """A warning for each option given other than its default where none of the laws it sets predicts."""
    out = []
    for option, label, flag, laws, names in UNUSED:
        value = getattr(options, option)
        if value == getattr(Options, option) or any(k in outcomes for k in names):
            continue
        why_not = "; ".join(f"{k}: {failed[k]}" for k in names if k in failed)
        out.append(f"{label} {value!r} ({flag}) is a setting of {laws} this target"
                   f"{f' ({why_not})' if why_not else ''}: it changes nothing here")
    return out


def _ladder_warnings(runs: list[Run], target: Run, outcomes: dict) -> list[str]:
    """What the laws and the ladder say is off: each law's own warnings, then the target's batch, LR, token
    ratio and size against the rungs', and the rungs' own curves, sizes, copies and units."""
    warnings = []
    for o in outcomes.values():
        warnings += list(o.warnings)
    warnings += batch_warning(runs, target)
    warnings += lr_warning(runs, target)
    warnings += ratio_warning(runs + [target])
    warnings += rise_warnings(runs)
    warnings += size_order_warnings(runs)
    warnings += copies_warning(runs)
    warnings += target_among_rungs(runs, target)
    warnings += unit_warning(runs)
    few = [r.name for r in runs if r.steps.size < 3]
    if few:
        warnings.append(f"{len(few)} rung{'s' if len(few) > 1 else ''} ({', '.join(few[:4])}{', ...' if len(few) > 4 else ''}) "
                        f"{'have' if len(few) > 1 else 'has'} fewer than 3 evals: every curve law leaves "
                        f"{'them' if len(few) > 1 else 'it'} out, and the backtest counts the sizes of the others")
    ratios = [r.token_ratio for r in runs]
    if not min(ratios) / 2 <= target.token_ratio <= 2 * max(ratios):
        warnings.append(f"the target trains at {target.token_ratio:.3g} tokens per parameter, far outside the rungs' "
                        f"{min(ratios):.3g}–{max(ratios):.3g}: the laws extrapolate in token ratio as well as in size")
    if target.flops_per_token < sizes(runs)[0] / 1.001:
        warnings.append(f"the target is smaller than every rung ({target.flops_per_token / sizes(runs)[0]:.2g}× the "
                        "smallest in FLOPs per token): the laws are fitted above it, and a law through larger runs "
                        "says little about smaller ones")
    return warnings


def _choice(settings: Settings, scored: dict, scores: dict, bands: dict, outcomes: dict, failed: dict,
            runs: list[Run], rows: tuple[Score, ...] = ()) -> tuple[str, str, list[str]]:
    """The method that predicts (the settings' own, or with "auto" the lowest backtest score among the laws
    that apply), why, and a warning where no backtest could choose; `rows`: the backtest."""
    warnings = []
    if settings.method == "auto":
        ranked = sorted((v, k) for k, v in scores.items() if k in bands and np.isfinite(v))
        method = ranked[0][1] if ranked else next(iter(outcomes))
        if ranked:
            better = [k for k, v in scored.items() if k not in bands and v < ranked[0][0]]
            why = (f"lowest backtest score{' of the laws that apply to this target' if better else ''} "
                   f"({ranked[0][0]:.2%}: {_what_scored([r for r in rows if r.method == ranked[0][1]])})")
            alone = "it needs two laws that apply" + "".join(f" ({k}: {v})" for k, v in failed.items())
            why += "".join(f"; {k} scored lower ({scored[k]:.2%}) but cannot predict it: " + failed.get(k, alone)
                           for k in better)
        else:
            curves = [r for r in runs if r.steps.size >= 3]  # a rung of one or two evals is no curve
            n, of = len(sizes(curves)), (" with 3 or more evals" if len(curves) < len(runs) else "")
            short = (f"fewer than 3 sizes{of}" if n < 3 else
                     f"{n} sizes{of}, too few for any law without the largest" if n == 3 else
                     _unscored(curves, rows, settings.options.score_from, n, of))
            why = f"no backtest possible ({short}): the first candidate that applies"
            warnings.append(f"the ladder has {short}, so no backtest chose the law or checked its band")
    else:
        method = settings.method
        if method not in bands:
            raise FitError(f"method {method!r} cannot predict this target: "
                           + failed.get(method, "it needs two candidates with backtest scores"))
        why = "named in the settings"
    return method, why, warnings


def _unscored(curves: list[Run], rows: tuple[Score, ...], score_from: float, n: int, of: str) -> str:
    """Why a ladder of 4 sizes or more gave its backtest no score: the held-out largest size's runs logged no eval
    the backtest scores (a largest rung that crashed early), or no law predicted them."""
    top = sizes(curves)[-1]
    largest = [r for r in curves if same_size(r, top)]
    if not rows:
        names = ", ".join(r.name for r in largest)
        return (f"{n} sizes{of}, but the largest's runs ({names}) logged no eval from {score_from:.0%} of their plan "
                f"on, where the backtest scores the held-out size (stopped early?)")
    return f"{n} sizes{of}, but no law predicted the held-out largest from the smaller ones ({rows[0].failed})"


def _what_scored(rows: list[Score]) -> str:
    """What a method's backtest score is the mean of, as "why this law" says it."""
    held = "predicting the held-out largest size from the smaller ones"
    finals = [bool(r.final_errors.size) for r in rows]
    if all(finals):
        return f"mean of |final error| and mean |error| {held}"
    unscored = ("no held-out run's final is scored, as the smaller rungs' evals end before their plans and not every "
                "law reaches the held-out runs' ends")
    if not any(finals):
        return f"mean |error| {held}; {unscored}"
    return f"mean of |final error| and mean |error| {held}, mean |error| alone where {unscored}"


def batch_warning(runs: list[Run], target: Run) -> list[str]:
    """A warning when the target's batch is far off the rungs' batch law in size (`fits.runs.batch_far_off`)."""
    off = batch_far_off(runs, target)
    if off is None:
        return []
    more, side = ("more", "below") if off < 1 else ("less", "above")
    return [f"the target's batch ({target.tokens_per_step:.3g} tokens per step) is {off:.2g}× the power law in size "
            f"through the rungs' batches: the laws take the recipe's scaling from the rungs, and a batch off it makes "
            f"each token worth {more} than the trend where the batches near the critical batch size (which no law "
            f"here models), so the run may land {side} the prediction"]


def lr_warning(runs: list[Run], target: Run) -> list[str]:
    """A warning when the target's peak LR is far off the rungs' peak LRs' law in size (`fits.runs.LR_OFF_TREND`)."""
    off = lr_off_trend(runs, target)
    if off is None or 1 / LR_OFF_TREND <= off <= LR_OFF_TREND:
        return []
    peaks = [p for p in (peak_lr(r.plan_lrs) for r in runs) if p is not None]
    span = f"{min(peaks):.3g}" + ("" if f"{min(peaks):.3g}" == f"{max(peaks):.3g}" else f"–{max(peaks):.3g}")
    return [f"the target's peak LR ({peak_lr(target.plan_lrs):.3g}) is {off:.2g}× the power law in size through the "
            f"rungs' peak LRs ({span}), further than recipes move it: check the target's "
            "peak_lr (a typo?) and the rungs' logged LR (another unit, such as a schedule multiplier?); the laws take "
            "the recipe from the rungs, and the curve laws count LR × steps as progress"]


RATIO_RANGE = (0.1, 1e5)
"""Tokens per parameter outside this range are more likely parameters or tokens in another unit than a run: the
public ladders train at 1–17,000 (Marin's smallest isoFLOP models), a hero at 20–2,000."""


def untrainable(ratio):
    """Whether tokens per parameter (a number or an array) lie outside `RATIO_RANGE`, where no run trains (NaN:
    not known, so no)."""
    r = np.asarray(ratio, dtype=np.float64)
    return np.isfinite(r) & ((r < RATIO_RANGE[0]) | (r > RATIO_RANGE[1]))


def ratio_warning(runs: list[Run]) -> list[str]:
    """A warning for runs whose tokens per parameter lie outside `RATIO_RANGE` (the first of them named)."""
    odd = [r for r in runs if untrainable(r.token_ratio)]
    if not odd:
        return []
    r = odd[0]
    more = and_more(odd)
    return [f"{r.name!r}{more} trains at {r.token_ratio:.3g} tokens per parameter ({r.params:.3g} parameters, "
            f"{r.planned_tokens:.3g} tokens): no run does; are its parameters or tokens in another unit (millions, "
            "billions, steps)?"]


def rise_warnings(runs: list[Run]) -> list[str]:
    """A warning for each rung whose eval rises well above its earlier lowest (`fits.runs.rise_limit`)."""
    out = []
    for r in runs:
        up, step = rise(r)
        limit = rise_limit(r)
        if up > limit:
            by = f"{up:.1%} above" if up < 10 else f"to {1 + up:.3g}×"
            read = (f", more than its values' standard errors ({r.noise:.1%} each, read from a per-step metric) "
                    f"allow ({limit:.1%})" if r.noise > 0 else "")
            out.append(f"the rung {r.name!r} rises {by} its earlier lowest eval at step {step:,} "
                       f"({step / r.planned_steps:.0%} of its run){read}: a loss spike or a bad eval? The laws fit it as "
                       f"{'read' if r.noise > 0 else 'logged'}, and the band widens with its misfit; leave the run out, "
                       "or fix its evals, if it is a fault")
    return out


def copies_warning(runs: list[Run]) -> list[str]:
    """A warning where two rungs of one size and plan log the very same evals: one run imported twice under two
    names, which the laws would count as two draws (a narrower band than the ladder holds)."""
    seen: dict[tuple, str] = {}
    pairs = []
    for r in runs:
        if not r.steps.size:
            continue
        key = (round(r.flops_per_token, 6), r.planned_steps, r.steps.tobytes(), r.values.tobytes())
        if key in seen:
            pairs.append((seen[key], r.name))
        else:
            seen[key] = r.name
    if not pairs:
        return []
    a, b = pairs[0]
    which = (f"the rung {a!r}{and_more(pairs, 'rungs')} is there twice, with" if a == b  # one run from two sources
             else f"the rungs {a!r} and {b!r}{and_more(pairs, 'pairs')} log")
    return [f"{which} the very same evals at one size and plan: one run imported or pulled twice? The laws count "
            "each copy as another run, which narrows the band; leave one out"]


def target_among_rungs(runs: list[Run], target: Run) -> list[str]:
    """A warning where a rung has the target's size, batch and plan: the target itself under another name (a hero
    imported as a rung), whose own evals the laws then fit, so that the prediction predicts what it was given."""
    same = [r.name for r in runs if same_size(r, target.flops_per_token) and r.planned_steps == target.planned_steps
            and abs(r.tokens_per_step / target.tokens_per_step - 1) <= 1e-3]
    if not same:
        return []
    return [f"the rung {same[0]!r}{and_more(same, 'rungs')} has the target's size, batch and planned steps: is it the "
            f"target {target.name!r} under another name? Its evals are fitted, so the prediction repeats them (give "
            "the target's run role hero, or leave it out of the rungs)"]


def size_order_warnings(runs: list[Run]) -> list[str]:
    """A warning where a finished rung ends above a smaller rung of its token ratio (`fits.checks.RISE_TOL`):
    the larger of one recipe should end lower, so one of the two is likely off its recipe or its eval."""
    ended = [r for r in runs if r.finished and r.steps.size and r.fractions[-1] >= 1 - 1e-3]
    if len(ended) < 2:
        return []
    ratios = distinct([r.token_ratio for r in ended], 0.01)
    group = [int(np.argmin(np.abs(np.log(ratios / r.token_ratio)))) for r in ended]
    found = rises_with_size(group, [r.flops_per_token for r in ended], [r.values[-1] for r in ended])
    if not found:
        return []
    up, i, j = found[0]
    more = and_more(found, "rungs")
    return [f"the rung {ended[i].name!r} ends {up:.1%} above the smaller {ended[j].name!r} at the same token ratio"
            f"{more}: a larger model of one recipe should end lower; check the two runs (another learning rate, "
            "recipe, data or eval?) before trusting a law through them"]


def spread(band: Band, others: list[Band]) -> Band:
    """The band widened in quadrature so its 90% bounds reach every other law's median (the spread across forms:
    where laws that fit the ladder disagree at the target, the data do not say which is right)."""
    return cand.widen(band, spread_sd(band.median, [o.median for o in others]))


def spread_sd(median, others) -> np.ndarray:
    """The standard deviation (absolute) whose 90% interval around `median` reaches each of the `others`
    (medians of other laws or forms; NaN where one has no value)."""
    m = np.asarray(median, dtype=np.float64)
    gap = np.zeros(m.shape)
    for o in others:
        o = np.asarray(o, dtype=np.float64)
        gap = np.maximum(gap, np.abs(np.where(np.isfinite(o), o, m) - m))
    return gap / Z90


UNTESTED_ERROR = 0.01
"""Relative error (one standard deviation) per e-fold of extrapolation in size: the least a band assumes,
and all it has for a law the ladder could not backtest (fewer than 3 sizes, or the law failed on the
smaller ladder). The size of the errors held-out large runs of public ladders show (benchmarks/RESULTS.md:
1–2% at 4–6× the largest rung)."""


def floored(band: Band, rows, method: str, distance: float, fractions: np.ndarray) -> Band:
    """The band with the larger of two errors added in quadrature: the backtest's |errors| of `method`
    carried to `distance` (at the 90% level), and `UNTESTED_ERROR` per e-fold of `distance` (one sd).

    The backtest sees a short distance (the largest size over the next, often under 2×); errors it
    did not see there can still grow further out, so it can raise the band above what public ladders
    show but not lower it."""
    sd = floor_sd(band.median, carried_error(rows, method, distance, fractions), distance)
    if not np.any(sd > 0):
        return band
    return cand.widen(band, sd)


def floor_sd(median, carried90, distance) -> np.ndarray:
    """One standard deviation (absolute) a band gets at `distance` e-folds of extrapolation: the larger
    of the relative error a backtest carried there (`carried90`, read as a 90% bound) and
    `UNTESTED_ERROR` per e-fold."""
    scale = np.abs(np.asarray(median, dtype=np.float64))
    prior = UNTESTED_ERROR * np.maximum(distance, 0.0) * scale
    return np.maximum(np.asarray(carried90) * scale / Z90, prior)


def efolds_outside(x, fitted) -> np.ndarray:
    """e-folds `x` lies outside the range of `fitted` (beyond the largest, or below the smallest), ≥ 0."""
    x = np.asarray(x, dtype=np.float64)
    f = np.asarray(fitted, dtype=np.float64)
    return np.maximum(np.maximum(np.log(x / f.max()), np.log(f.min() / x)), 0.0)


def compute_efolds(compute, fitted) -> np.ndarray:
    """e-folds of extrapolation, in size, of a run of `compute` outside the `fitted` runs' computes: half the
    e-folds in compute (at one token ratio a model's size grows as the square root of its compute)."""
    return 0.5 * efolds_outside(compute, fitted)


def tested(rows, method: str) -> bool:
    """Whether the backtest scored `method` on a held-out size."""
    return any(s.method == method and not s.failed and s.errors.size and s.distance > 0 for s in rows)


__all__ = ["CANDIDATES", "METHODS", "CorePrediction", "Score", "Settings", "backtest", "compute_efolds", "ensemble", "floor_sd", "predict", "spread_sd"]

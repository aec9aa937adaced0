"""Training dynamics projected to the hero's size: grad norm, MoE drop fraction, router losses and the
train-loss spike rate, from the rungs in the store.

Each series is sampled on a common grid of fractions of each rung's planned run (a rolling median
over a small share of the run, `fits.trends.on_grid`) and projected fraction by fraction to the
hero's fit compute (`fits.trends.project_series`: a power law in compute across rungs, or flat where
the rungs show no trend). The spike rate is one number per run (spikes per 1,000 steps past the
first 5%), projected with `fits.trends.project_rate`. `ladder watch` compares the hero's grad norm and
drop fraction with these projections; `ladder plot` draws them.

Compute is fit compute everywhere (3 × forward FLOPs per token without the head × planned tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fits.errors import FitError
from fits.trends import (
    FRACTIONS,
    SPIKE_SKIP,
    SPIKE_WINDOW,
    SPIKE_Z,
    Projection,
    RateProjection,
    on_grid,
    project_rate,
    project_series,
    spikes_in_run,
)
from ladder import metrics as keys
from ladder.data.store import Store
from ladder.errors import LadderError
from ladder.predict.prediction import Prediction
from ladder.watch.monitor import fit_compute

SERIES = (keys.GRAD_NORM, keys.DROP_FRACTION, keys.LOAD_BALANCING_LOSS, keys.ROUTER_Z_LOSS)
"""The series projected, when the rungs log them."""


@dataclass(frozen=True)
class DynamicsSettings:
    window: float = 0.02
    """Share of each run (fraction of its planned steps) in the rolling median that samples a series."""
    min_points: int = 5
    """The rolling median takes at least this many points (short runs, sparse logging)."""
    min_runs: int = 3
    """Rungs needed at a fraction for a projection there; with fewer, none is made."""
    flat_level: float = 0.9
    """Projected flat where the slope's central interval at this level contains 0."""
    spike_skip: float = SPIKE_SKIP
    """Leading fraction of each run (warmup) where spikes are not counted."""
    spike_window: float = SPIKE_WINDOW
    """Share of a run (at least 21 steps) of the rolling median a spike stands out from (as `ladder check`)."""
    spike_z: float = SPIKE_Z
    """Robust z-score above that rolling median that makes a spike."""


@dataclass(frozen=True)
class RunSeries:
    """One run's series against the fraction of its planned run."""

    name: str
    compute: float
    """Planned fit compute of the run (FLOPs)."""
    fraction: np.ndarray
    value: np.ndarray

    @property
    def label(self) -> str:
        return self.name


@dataclass(frozen=True)
class SeriesDynamics:
    metric: str
    rungs: tuple[RunSeries, ...]
    projection: Projection | None
    """None when fewer than `min_runs` rungs log the series (or the hero's compute is unknown)."""
    hero: RunSeries | None = None

    @property
    def note(self) -> str:
        if self.projection is None:
            return f"not projected: {len(self.rungs)} rungs log {self.metric}, a projection needs 3"
        return self.projection.summary()


@dataclass(frozen=True)
class SpikeDynamics:
    """Train-loss spikes per 1,000 steps of each rung, projected to the hero."""

    rungs: tuple[str, ...]
    compute: np.ndarray
    counts: np.ndarray
    steps: np.ndarray
    """Steps examined in each rung (past `spike_skip`)."""
    projection: RateProjection | None
    """Of the rate per step (× 1,000 for per 1,000 steps)."""
    hero_rate: float | None = None
    """The hero's spikes per 1,000 steps so far, when it is in the store."""

    @property
    def per_1k(self) -> np.ndarray:
        return 1000.0 * self.counts / self.steps


@dataclass(frozen=True)
class Dynamics:
    target: str
    compute: float
    """The target's fit compute over the plan it started with (FLOPs)."""
    series: tuple[SeriesDynamics, ...]
    spikes: SpikeDynamics | None

    def get(self, metric: str) -> SeriesDynamics | None:
        return next((s for s in self.series if s.metric == metric), None)


def hero_compute(pred: Prediction) -> float:
    """The target's fit compute over the plan it started with: the table's last compute (the target's
    fit compute at its last planned step) over that row's fraction (of the plan it started with)."""
    if pred.table.empty:
        return float("nan")
    last = pred.table.iloc[-1]
    try:
        compute, fraction = float(last["compute"]), float(last["fraction"])
    except (TypeError, ValueError):
        return float("nan")
    if not (np.isfinite(compute) and compute > 0 and np.isfinite(fraction) and fraction > 0):
        return float("nan")
    return compute / fraction


def project_curves(fractions, values, compute, target_compute: float,
                   settings: DynamicsSettings = DynamicsSettings()) -> Projection | None:
    """Project the rungs' curves (one fraction and one value array per rung, each with its fit compute)
    to `target_compute`; None when fewer than `min_runs` rungs with a known compute have the series."""
    if not (np.isfinite(target_compute) and target_compute > 0):
        return None
    keep = [i for i, (f, c) in enumerate(zip(fractions, compute)) if len(f) and np.isfinite(c) and c > 0]
    if len(keep) < max(settings.min_runs, 3):
        return None
    grid = np.array([on_grid(fractions[i], values[i], FRACTIONS, window=settings.window,
                             min_points=settings.min_points) for i in keep])
    try:
        proj = project_series(np.asarray(compute, dtype=float)[keep], grid, target_compute,
                              flat_level=settings.flat_level, min_runs=settings.min_runs)
    except FitError:
        return None
    return proj if proj.usable else None


def target_and_rungs(store: Store, pred: Prediction, group: str | None, purpose: str
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The store's runs, the prediction's target among them (no rows when it is not there) and its rungs by
    planned fit compute: those it was made from (the rungs of `group` where given; of the target's group for a
    prediction that does not record them). A `LadderError` when there are none, or when the store holds none of
    the rungs the prediction was made from (another ladder's store)."""
    runs = store.runs()
    target = runs[runs["name"] == pred.run_name]
    made_from = runs[runs["name"].isin(pred.rungs)]
    if group is None and pred.rungs and made_from.empty:
        shown = ", ".join(pred.rungs[:3]) + (f" and {len(pred.rungs) - 3} more" if len(pred.rungs) > 3 else "")
        raise LadderError(f"{store.root}: holds none of the rungs the prediction of {pred.run_name!r} was made from "
                          f"({shown}); give the store it was made with (--store)")
    if group is None and len(made_from):  # a hero of its own group, a run of another length followed: these rungs
        rungs = made_from
    else:
        grp = group if group is not None else str(target["group"].iloc[0]) if len(target) else None
        rungs = runs[(runs["role"] == "rung") & ((runs["group"] == grp) if grp is not None else True)]
        if rungs.empty:
            raise LadderError(f"{store.root}: no rungs of group {grp!r} {purpose}")
    return runs, target, rungs.assign(_c=[fit_compute(r) for _, r in rungs.iterrows()]).sort_values("_c")


def project_dynamics(store: Store, pred: Prediction, group: str | None = None,
                     settings: DynamicsSettings = DynamicsSettings()) -> Dynamics:
    """Every series in `SERIES` the rungs log, and their spike rate, projected to the prediction's target."""
    _, target, rungs = target_and_rungs(store, pred, group, "to project the training dynamics from")
    compute = hero_compute(pred)
    hero_id = str(target["run_id"].iloc[0]) if len(target) else None
    ids = list(rungs["run_id"]) + ([hero_id] if hero_id else [])
    hist = store.history(ids, list(SERIES) + [keys.TRAIN_LOSS])
    series = []
    for metric in SERIES:
        mine = [_run_series(hist, r, metric) for _, r in rungs.iterrows()]
        mine = tuple(s for s in mine if len(s.value))
        if not mine:
            continue
        proj = project_curves([s.fraction for s in mine], [s.value for s in mine], [s.compute for s in mine],
                              compute, settings)
        hero = None
        if hero_id:
            hero = _run_series(hist, target.iloc[0], metric, started_with=pred.started_with)
            hero = hero if len(hero.value) else None
        series.append(SeriesDynamics(metric, mine, proj, hero))
    spikes = _spikes(hist, rungs, target.iloc[0] if hero_id else None, compute, settings)
    return Dynamics(pred.run_name, compute, tuple(series), spikes)


def _run_series(hist: pd.DataFrame, run: pd.Series, metric: str, started_with: float | None = None) -> RunSeries:
    h = hist[(hist["run_id"] == run["run_id"]) & (hist["metric"] == metric)].sort_values("step")
    frac = h["step"].to_numpy(float) / started_with if started_with else h["fraction"].to_numpy(float)
    return RunSeries(str(run["name"]), fit_compute(run), frac, h["value"].to_numpy(float))


def spike_count(fraction: np.ndarray, values: np.ndarray, steps: np.ndarray,
                settings: DynamicsSettings = DynamicsSettings()) -> tuple[int, float]:
    """Train-loss spikes past `spike_skip` of a run, and the optimizer steps examined."""
    return spikes_in_run(fraction, values, steps, skip=settings.spike_skip, window=settings.spike_window,
                         k=settings.spike_z)


def _spikes(hist: pd.DataFrame, rungs: pd.DataFrame, hero: pd.Series | None, compute: float,
            settings: DynamicsSettings) -> SpikeDynamics | None:
    names, comp, counts, steps = [], [], [], []
    for _, r in rungs.iterrows():
        h = hist[(hist["run_id"] == r["run_id"]) & (hist["metric"] == keys.TRAIN_LOSS)].sort_values("step")
        count, exposure = spike_count(h["fraction"].to_numpy(float), h["value"].to_numpy(float),
                                      h["step"].to_numpy(float), settings)
        if exposure > 0 and np.isfinite(fit_compute(r)):
            names.append(str(r["name"]))
            comp.append(fit_compute(r))
            counts.append(count)
            steps.append(exposure)
    if not names:
        return None
    proj = None
    if len(names) >= 3 and np.isfinite(compute) and len(set(comp)) > 1:
        try:
            proj = project_rate(comp, counts, steps, compute, flat_level=settings.flat_level)
        except FitError:
            proj = None
    hero_rate = None
    if hero is not None:
        h = hist[(hist["run_id"] == hero["run_id"]) & (hist["metric"] == keys.TRAIN_LOSS)].sort_values("step")
        count, exposure = spike_count(h["fraction"].to_numpy(float), h["value"].to_numpy(float),
                                      h["step"].to_numpy(float), settings)
        hero_rate = 1000.0 * count / exposure if exposure > 0 else None
    return SpikeDynamics(tuple(names), np.array(comp), np.array(counts, dtype=float), np.array(steps), proj, hero_rate)

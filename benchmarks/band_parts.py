"""What sets the width of the default's 90% band on each leaderboard task, and how often each part alone would hold.

    .venv/bin/python benchmarks/band_parts.py [--demo demo]      # about 4 min on 2 cores

For each curve task of `benchmarks/leaderboard.py` (the first table: its first target) the default
prediction's parts, as half-widths of a 90% band relative to the median at the last step:
- own: the chosen method's own band (the law's statistics; for the laws' mean, each law's band and the
  spread of their medians);
- carried: the backtest's error carried to the target's distance (`fits.predictor.carried_error`): the
  least band the prediction may have;
- floor: 1% (one sd) per e-fold of distance in size (`fits.predictor.UNTESTED_ERROR`);
- laws: the spread across forms, the reach from the median to the farthest other law's median;
- band: the default's band (the first two parts and the floor's larger one in quadrature, then widened to
  the other laws' medians);
beside the final error, so that a user can see which part to question.

The second table scores every target's evals from 10% of its run on (as the leaderboard does) against the
default's band and against bands made of one part alone around the same median: the carried backtest error,
the larger of it and the floor, and the floor. It says how far the band could narrow before it held fewer
than 97% of the evals, and which part stops it.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import leaderboard as lb  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Z90, Options  # noqa: E402

ALONE = ("band", "carried", "carried or floor", "floor")
"""The bands the second table scores: the default's, and the half-widths of its parts alone."""


def parts(task: lb.Task) -> tuple[str, dict[str, np.ndarray]]:
    """The first table's row (first target) and, per band of `ALONE`, whether each scored eval is inside."""
    inside: dict[str, list] = {k: [] for k in ALONE}
    row = ""
    for i, target in enumerate(task.targets):
        keep = target.fractions >= lb.SCORE_FROM - 1e-9
        steps, actual = target.steps[keep], target.values[keep]
        blank = replace(target, steps=np.zeros(0, np.int64), values=np.zeros(0))
        res = core.predict(task.runs, blank, steps, core.Settings(options=Options(n_boot=100)))
        m = res.band.median
        carried = core.carried_error(res.backtest, res.method, res.distance, res.fractions)
        floor = np.full(m.shape, core.UNTESTED_ERROR * max(res.distance, 0.0) * Z90)
        off = np.abs(actual / m - 1)
        inside["band"].append((res.band.lo90 <= actual) & (actual <= res.band.hi90))
        for name, half in (("carried", carried), ("carried or floor", np.maximum(carried, floor)), ("floor", floor)):
            inside[name].append(off <= half)
        if i == 0:
            p = res.parts()  # the parts at the last step, as `ladder predict` states them
            row = (f"{task.name:<22} {res.method:<13} {np.exp(res.distance):5.2f}×  {p['own']:>7.2%} {p['carried']:>8.2%} "
                   f"{p['floor']:>7.2%} {p['laws']:>7.2%} {p['band']:>7.2%}  {m[-1] / actual[-1] - 1:>+7.2%}")
    return row, {k: np.concatenate(v) for k, v in inside.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", type=Path, default=Path("demo"), help="a `ladder demo` folder (skipped when missing)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    tasks = lb.olmo_tasks() + lb.marin_tasks() + lb.misfitting_tasks() + lb.mpl_tasks() + lb.demo_tasks(args.demo)
    print(f"{'task':<22} {'method':<13} {'size':>6}  {'own':>7} {'carried':>8} {'floor':>7} {'laws':>7} {'band':>7}  "
          f"{'error':>7}")
    held = {}
    for task in tasks:
        row, held[task.name] = parts(task)
        print(row, flush=True)
    print(f"\nshare of evals inside a 90% band made of:\n{'task':<22} {'evals':>6}" + "".join(f" {k:>17}" for k in ALONE))
    for name, h in held.items():
        print(f"{name:<22} {h['band'].size:>6}" + "".join(f" {h[k].mean():>17.1%}" for k in ALONE))
    pooled = {k: np.concatenate([h[k] for h in held.values()]) for k in ALONE}
    worst = {k: min(h[k].mean() for h in held.values()) for k in ALONE}
    print(f"{'pooled':<22} {pooled['band'].size:>6}" + "".join(f" {pooled[k].mean():>17.1%}" for k in ALONE))
    mean = {k: np.mean([h[k].mean() for h in held.values()]) for k in ALONE}
    print(f"{'mean over tasks':<22} {'':>6}" + "".join(f" {mean[k]:>17.1%}" for k in ALONE))
    print(f"{'worst task':<22} {'':>6}" + "".join(f" {worst[k]:>17.1%}" for k in ALONE))


if __name__ == "__main__":
    main()

"""Rungs still training: the OLMo 3.2B curve predicted from the four smaller sizes whose evals end at 60% or 80%.

    .venv/bin/python benchmarks/rungs_still_training.py [--n-boot 200]

The leaderboard's OLMo tasks (`benchmarks/leaderboard.py`) with every rung's evals cut at a share of its plan,
as a ladder looks while its rungs still train. The per-fraction law predicts nothing past the share the rungs
reached; the multi-power law follows each target's LR to the end. Printed per length: the default (the
backtest's choice; past the rungs' reach the ensemble is carried on by the multi-power law's fall from the
mean's value there), the multi-power law alone, the default's last predicted fraction, and whether the actual
final sits inside the default's 90% band; the same with the rungs whole for reference.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.leaderboard import SCORE_FROM, olmo_tasks  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Options  # noqa: E402


def cut(runs, share: float):
    """The runs as they stood at `share` of their plans: still training, evals to there."""
    out = []
    for r in runs:
        k = r.fractions <= share + 1e-9
        out.append(replace(r, steps=r.steps[k], values=r.values[k], finished=False))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=200)
    args = ap.parse_args()
    settings = core.Settings(candidates=("per-fraction", "multipower"), options=Options(n_boot=args.n_boot))
    print(f"{'rungs to':>8}  {'task':16}  {'method':12}  {'default':>8}  {'multipower':>10}  {'reaches':>7}  "
          f"{'in 90%':>6}  {'s':>3}")
    for share in (0.6, 0.8, 1.0):
        finals = []
        for task in olmo_tasks():
            t0 = time.perf_counter()
            target = task.targets[0]
            keep = target.fractions >= SCORE_FROM - 1e-9
            steps, actual = target.steps[keep], target.values[keep]
            blank = replace(target, steps=np.zeros(0, np.int64), values=np.zeros(0))
            res = core.predict(cut(task.runs, share) if share < 1 else task.runs, blank, steps, settings)
            err = res.band.median[-1] / actual[-1] - 1
            mp = res.candidates["multipower"].median[-1] / actual[-1] - 1
            ok = np.isfinite(res.band.median)
            reach = res.fractions[np.flatnonzero(ok)[-1]] if ok.any() else np.nan
            inside = "yes" if res.band.lo90[-1] <= actual[-1] <= res.band.hi90[-1] else "no"
            finals.append(err)
            print(f"{share:>8.0%}  {task.name:16}  {res.method:12}  {err:>+8.2%}  {mp:>+10.2%}  {reach:>7.0%}  "
                  f"{inside:>6}  {time.perf_counter() - t0:>3.0f}", flush=True)
        print(f"{share:>8.0%}  mean |final| {np.nanmean(np.abs(finals)):.2%}, mean signed {np.nanmean(finals):+.2%}")


if __name__ == "__main__":
    main()

"""What sets the width of the default's 90% band at the end of each leaderboard task.

    .venv/bin/python benchmarks/band_parts.py [--demo demo]      # about 2 min on 2 cores

For each curve task of `benchmarks/leaderboard.py` (its first target) the default prediction's parts, as
half-widths of a 90% band relative to the median at the last step:
- own: the chosen method's own band (the law's statistics; for the laws' mean, each law's band and the
  spread of their medians);
- carried: the backtest's error carried to the target's distance (`fits.predictor.carried_error`);
- floor: 1% (one sd) per e-fold of distance in size (`fits.predictor.UNTESTED_ERROR`);
- laws: the spread across forms, the reach from the median to the farthest other law's median;
- band: the default's band (the first two parts and the floor's larger one in quadrature, then widened to
  the other laws' medians);
beside the final error, so that a user can see which part to question.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import leaderboard as lb  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Z90, Options  # noqa: E402


def parts(task: lb.Task) -> str:
    target = task.targets[0]
    res = core.predict(task.runs, target, target.steps, core.Settings(options=Options(n_boot=100)))
    g = res.fractions[-1:]
    own = res.candidates[res.method]
    m = own.median[-1]
    others = [b.median[-1] for k, b in res.candidates.items() if k != res.method and k in res.settings.candidates]
    laws = max((abs(o - m) / m for o in others if np.isfinite(o)), default=0.0)
    half = lambda b: (b.hi90[-1] - b.lo90[-1]) / 2 / b.median[-1]  # noqa: E731
    carried = core.carried_error(res.backtest, res.method, res.distance, g)[0]
    floor = core.UNTESTED_ERROR * max(res.distance, 0.0) * Z90
    err = res.band.median[-1] / target.values[-1] - 1
    return (f"{task.name:<22} {res.method:<13} {np.exp(res.distance):5.2f}×  {half(own):>7.2%} {carried:>8.2%} "
            f"{floor:>7.2%} {laws:>7.2%} {half(res.band):>7.2%}  {err:>+7.2%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", type=Path, default=Path("demo"), help="a `ladder demo` folder (skipped when missing)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    tasks = lb.olmo_tasks() + lb.marin_tasks() + lb.misfitting_tasks() + lb.mpl_tasks() + lb.demo_tasks(args.demo)
    print(f"{'task':<22} {'method':<13} {'size':>6}  {'own':>7} {'carried':>8} {'floor':>7} {'laws':>7} {'band':>7}  "
          f"{'error':>7}")
    for task in tasks:
        print(parts(task), flush=True)


if __name__ == "__main__":
    main()

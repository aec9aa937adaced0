"""A target that declares no LR schedule: the OLMo 3.2B curves predicted with and without it.

    .venv/bin/python benchmarks/target_without_schedule.py [--n-boot 100]

The leaderboard's OLMo tasks (`benchmarks/leaderboard.py`), the target given once with its declared schedule
(as a target file with `schedule:` gives it) and once without (a target file of its size and plan alone).
Without it the multi-power law cannot predict the target and the per-fraction law predicts alone; its band
keeps how far the multi-power law lay from it on the backtest's held-out size, carried to the target
(`fits.predictor.carried_gap`). Printed per task and per case: the law chosen, the final error, the 90%
band's half-width at the end, and the share of the target's evals (from 10% of its run) inside the 90% band.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.leaderboard import held_out, olmo_tasks  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Options  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=100)
    args = ap.parse_args()
    settings = core.Settings(candidates=("per-fraction", "multipower"), options=Options(n_boot=args.n_boot))
    print(f"{'task':16}  {'target gives':12}  {'method':12}  {'final':>7}  {'90% ±':>6}  {'in 90%':>6}  {'s':>3}")
    for task in olmo_tasks():
        declared = task.targets[0]
        for label, target in (("its schedule", declared), ("no schedule", replace(declared, lrs=None))):
            t0 = time.perf_counter()
            blank, steps, actual = held_out(target)
            res = core.predict(task.runs, blank, steps, settings)
            b = res.band
            ok = np.isfinite(b.median)
            inside = float(np.mean((b.lo90[ok] <= actual[ok]) & (actual[ok] <= b.hi90[ok])))
            half = (b.hi90[-1] - b.lo90[-1]) / 2 / b.median[-1]
            print(f"{task.name:16}  {label:12}  {res.method:12}  {b.median[-1] / actual[-1] - 1:+7.2%}  {half:6.2%}  "
                  f"{inside:6.0%}  {time.perf_counter() - t0:3.0f}", flush=True)


if __name__ == "__main__":
    main()

"""A hero still training that declares no schedule: its LR logged part of the way, the rest held or in the ladder's shape.

    .venv/bin/python benchmarks/target_lr_logged_partway.py [--n-boot 100]

The leaderboard's OLMo tasks (`benchmarks/leaderboard.py`): the 3.2B run's whole curve predicted from the four
smaller sizes, its LR as `ladder import csv` stores it from the run's own logged learning rate, cut where a hero
still training would be (10, 25, 50 and 75% of its plan). Side by side, in one run:

- held: its last logged LR held to the end, as `ladder predict --target-run` read such a hero before;
- ladder's shape: carried on in the shape of the rungs at its token ratio (`fits.runs.lrs_in_the_ladders_shape`),
  what `ladder predict` does now;
- declared: the schedule a target file declares (the leaderboard's protocol), for reference.

Printed per task and case: the law chosen, the final error, the mean |error| along the curve and the share of
the target's evals (from 10% of its run) inside the 90% band.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_datasets as ds  # noqa: E402
from benchmarks.leaderboard import held_out, olmo_tasks  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Options  # noqa: E402
from fits.runs import lrs_from_logged, lrs_in_the_ladders_shape  # noqa: E402

LOGGED_TO = (0.1, 0.25, 0.5, 0.75)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=100)
    args = ap.parse_args()
    settings = core.Settings(candidates=("per-fraction", "multipower"), options=Options(n_boot=args.n_boot))
    lad, _ = ds.olmo_ladder()
    print(f"{'task':16}  {'LR logged to':>12}  {'LR past it':15}  {'method':12}  {'final':>7}  {'mean |e|':>8}  "
          f"{'in 90%':>6}  {'s':>3}")
    for task in olmo_tasks():
        declared = task.targets[0]
        logged = lad[lad["run_id"] == declared.name].sort_values("step")
        for part in LOGGED_TO:
            k = int(round(part * declared.planned_steps))
            upto = logged[logged["step"] <= k]
            held = replace(declared, lrs=lrs_from_logged(upto["step"].to_numpy(), upto["lr"].to_numpy(),
                                                         declared.planned_steps))
            k = int(upto["step"].max())
            found = lrs_in_the_ladders_shape(held, k, task.runs)
            cases = [("held", held), ("ladder's shape", None if found.lrs is None else replace(held, lrs=found.lrs))]
            if part == LOGGED_TO[-1]:
                cases.append(("declared", declared))
            for label, target in cases:
                if target is None:
                    print(f"{task.name:16}  {part:12.0%}  {label:15}  not carried: {found.why_not}")
                    continue
                _row(task.name, part, label, target, task.runs, settings)


def _row(name: str, part: float, label: str, target, rungs, settings: core.Settings) -> None:
    t0 = time.perf_counter()
    blank, steps, actual = held_out(target)
    res = core.predict(rungs, blank, steps, settings)
    b = res.band
    ok = np.isfinite(b.median)
    err = b.median[ok] / actual[ok] - 1
    inside = float(np.mean((b.lo90[ok] <= actual[ok]) & (actual[ok] <= b.hi90[ok])))
    print(f"{name:16}  {part:12.0%}  {label:15}  {res.method:12}  {b.median[-1] / actual[-1] - 1:+7.2%}  "
          f"{np.mean(np.abs(err)):8.2%}  {inside:6.0%}  {time.perf_counter() - t0:3.0f}", flush=True)


if __name__ == "__main__":
    main()

"""An edited schedule on a real ladder: the OLMo 3.2B plan cut short, against the 3.2B run trained at that length.

    .venv/bin/python benchmarks/edited_schedule.py [--n-boot 50]

Every OLMo length has its own cosine from the same warmup, so a 3.2B run planned at one length and cut at the
end of its warmup to a shorter one (`Schedule.shorten`, as `ladder replan --shorten-to` makes it) runs the
schedule of the 3.2B run the ladder trained at that shorter length: its curve is the actual. The rungs are
the four smaller sizes at the plan's length alone (one schedule per size, as most ladders are), and once more
with the shorter length beside it (two per size). The per-fraction law predicts the plan, the multi-power law
adds what the cut changes (`fits.candidates._schedule_difference`). Printed per case: the law chosen, the
final error, the change the cut makes at the cut's end (predicted, and actual: the shorter run's end less the
longer run's loss at that step), the 90% band's half-width at the end, and the share of the evals (from 10%
of the run) inside the 90% band. These cuts (a half and more) are larger than `ladder replan` proposes
(a quarter at most); an early cooldown (`ladder replan --cooldown-steps K --at STEP`) can be as large.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.leaderboard import olmo_runs, olmo_schedule  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Options  # noqa: E402
from fits.runs import Run  # noqa: E402

CUTS = ((1.0, 0.5), (2.0, 1.0), (5.0, 2.0), (10.0, 5.0))
"""(plan's length, cut to) in multiples of the compute-optimal tokens."""


def cut_case(plan_len: float, cut_len: float, both: bool):
    """(rungs, the 3.2B's cut target, its unedited plan, eval steps from 10% of the cut run, actual losses there,
    the longer 3.2B run's loss at the cut's last eval)."""
    R, peaks = olmo_runs()
    lengths = {plan_len, cut_len} if both else {plan_len}
    rungs = [r for (size, m), r in R.items() if size != "3.2B" and m in lengths]
    plan_run, cut_run = R[("3.2B", plan_len)], R[("3.2B", cut_len)]
    peak = peaks[plan_run.name]
    plan = olmo_schedule(peak, plan_run.planned_steps).lrs(0, plan_run.planned_steps + 1)
    cut = olmo_schedule(peak, cut_run.planned_steps).lrs(0, cut_run.planned_steps + 1)
    unedited = Run(plan_run.name, plan_run.flops_per_token, plan_run.tokens_per_step, plan_run.planned_steps,
                   lrs=plan, n_params=plan_run.params)
    target = replace(unedited, name=f"{plan_run.name}-cut", lrs=cut, reference_lrs=plan)
    keep = cut_run.fractions >= 0.1 - 1e-9
    steps, actual = cut_run.steps[keep], cut_run.values[keep]
    longer_there = float(np.interp(steps[-1], plan_run.steps, plan_run.values))
    return rungs, target, unedited, steps, actual, longer_there


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=50)
    args = ap.parse_args()
    settings = core.Settings(candidates=("per-fraction", "multipower"), options=Options(n_boot=args.n_boot))
    print(f"{'3.2B plan → cut':15}  {'rungs':16}  {'method':12}  {'final':>7}  {'change pred':>11}  "
          f"{'actual':>7}  {'90% ±':>6}  {'in 90%':>6}  {'s':>3}")
    for plan_len, cut_len in CUTS:
        for both in (False, True):
            t0 = time.perf_counter()
            rungs, target, unedited, steps, actual, longer = cut_case(plan_len, cut_len, both)
            res = core.predict(rungs, target, steps, settings)
            base = core.predict(rungs, unedited, steps, settings).band.median[-1]
            b = res.band
            inside = (b.lo90 <= actual) & (actual <= b.hi90)
            half = (b.hi90[-1] - b.lo90[-1]) / 2 / b.median[-1]
            label = f"{plan_len:g}×C → {cut_len:g}×C"
            which = f"{plan_len:g}" + (f" and {cut_len:g}×C" if both else "×C only")
            print(f"{label:15}  {which:16}  {res.method:12}  {b.median[-1] / actual[-1] - 1:+7.2%}  "
                  f"{b.median[-1] - base:+11.4f}  {actual[-1] - longer:+7.4f}  {half:6.2%}  {inside.mean():6.0%}  "
                  f"{time.perf_counter() - t0:3.0f}")


if __name__ == "__main__":
    main()

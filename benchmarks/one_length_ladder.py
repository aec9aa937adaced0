"""A ladder of one length per size, as most teams train one: the OLMo 3.2B curve from the four smaller sizes at
the same length only (4 runs, where the leaderboard's OLMo tasks fit all 20), by `ladder predict`'s default.

    .venv/bin/python benchmarks/one_length_ladder.py

One curve per size leaves the curve laws out (they need two schedules at a size to tell the asymptote from
the annealing term), so the per-fraction law predicts alone, on four runs: one degree of freedom for its
three parameters. Prints, for each length, the final error, the mean |error| along the curve from 10% of the
run, and the share of evals inside the 50% and 90% bands, beside the leaderboard's task on every length.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_datasets as ds  # noqa: E402
from benchmarks.leaderboard import held_out, olmo_runs, olmo_schedule  # noqa: E402
from fits import predictor as core  # noqa: E402


def scored(rungs, target, peak: float) -> str:
    declared = olmo_schedule(peak, target.planned_steps).lrs(0, target.planned_steps + 1)
    blank, steps, actual = held_out(replace(target, lrs=declared))
    res = core.predict(rungs, blank, steps)
    b, ok = res.band, np.isfinite(res.band.median)
    err = b.median[ok] / actual[ok] - 1
    in50 = np.mean((b.lo50[ok] <= actual[ok]) & (actual[ok] <= b.hi50[ok]))
    in90 = np.mean((b.lo90[ok] <= actual[ok]) & (actual[ok] <= b.hi90[ok]))
    half = (b.hi90[ok][-1] - b.lo90[ok][-1]) / 2 / b.median[ok][-1]
    return (f"{res.method:<13} {err[-1]:+7.2%} {np.mean(np.abs(err)):7.2%} {in50:6.0%} {in90:6.0%}  ±{half:.2%}")


def main() -> None:
    start = time.time()
    R, peaks = olmo_runs()
    print(f"{'3.2B at':<8} {'rungs':<22} {'method':<13} {'final':>7} {'curve':>7} {'in 50%':>6} {'in 90%':>6}  90% ± at the end")
    for m in ds.OLMO_MULTIPLIERS:
        target = R[("3.2B", m)]
        alone = [v for (s, k), v in R.items() if s != "3.2B" and k == m]
        every = [v for (s, _), v in R.items() if s != "3.2B"]
        for label, rungs in ((f"4 sizes at {m:g}×C only", alone), ("4 sizes × 5 lengths", every)):
            print(f"{m:g}×C{'':<5} {label:<22} {scored(rungs, target, peaks[target.name])}", flush=True)
    print(f"took {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()

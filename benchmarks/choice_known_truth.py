"""Known truth for the default's choice: ladders drawn from one law, what the backtest chooses and what it costs.

    .venv/bin/python benchmarks/choice_known_truth.py [--seeds 4]

Each ladder is the one `tests/test_fits_predictor.py` draws: five sizes at two token ratios, losses from the
per-fraction law or the multi-power law, with 0.2% or 1% noise per eval; the target is 8× the largest size,
noise-free. The default (`fits.predictor.predict`, no options) backtests each law and the mean of the laws
that apply, and predicts with the lowest score. Printed: how often each candidate was chosen, the default's
mean |final error|, each candidate's by name, the share of the target's evals inside the default's 90% band, and
the final error in standard deviations of the default's band and of the chosen law's own band (rms z; 1 when
calibrated): where the law is right, how much of the width the 1% per e-fold floor and the carried backtest
error add to the law's own statistics.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.leaderboard import end_z  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Options  # noqa: E402
from tests.test_fits_predictor import ladder, mp_law, pf_law  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--n-boot", type=int, default=60)
    args = ap.parse_args()
    settings = core.Settings(options=Options(n_boot=args.n_boot))
    t0 = time.time()
    print(f"{'truth':<13} {'noise':>6}  {'chosen':<40} {'default':>8} {'per-fraction':>13} {'multipower':>11} {'ensemble':>9} {'in 90%':>7} {'z band':>7} {'z own':>6}")
    for law, truth in ((pf_law, "per-fraction"), (mp_law, "multipower")):
        for noise in (0.002, 0.01):
            chosen, errs, inside = Counter(), {"default": [], "per-fraction": [], "multipower": [], "ensemble": []}, []
            z_band, z_own = [], []
            for seed in range(args.seeds):
                runs, hero = ladder(law, seed=seed, noise=noise)
                blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
                res = core.predict(runs, blank, hero.steps, settings)
                chosen[res.method] += 1
                errs["default"].append(res.band.median[-1] / hero.values[-1] - 1)
                for k, b in res.candidates.items():
                    errs[k].append(b.median[-1] / hero.values[-1] - 1)
                inside.append(np.mean((res.band.lo90 <= hero.values) & (hero.values <= res.band.hi90)))
                z_band.append(end_z(res.band, hero.values[-1]))
                z_own.append(end_z(res.candidates[res.method], hero.values[-1]))
            cells = [f"{100 * np.mean(np.abs(errs[k])):.2f}%" if errs[k] else "n/a" for k in errs]
            picks = ", ".join(f"{k} {v}" for k, v in chosen.most_common())
            print(f"{truth:<13} {noise:>6.1%}  {picks:<40} {cells[0]:>8} {cells[1]:>13} {cells[2]:>11} {cells[3]:>9} "
                  f"{np.mean(inside):>7.0%} {np.sqrt(np.mean(np.square(z_band))):>7.2f} "
                  f"{np.sqrt(np.mean(np.square(z_own))):>6.2f}", flush=True)
    print(f"took {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Known truth for isoFLOP sweeps: the endpoint law on each budget's least loss, against the law on every run.

    .venv/bin/python benchmarks/isoflop_known_truth.py [--seeds 6] [--noise 0.002]

Each sweep is the one `tests/test_fits_isoflop.py` draws (`fits.synthetic.isoflop_sweep`): Epoch AI's
replication of the Chinchilla surface at five budgets of 1e18–1e20 FLOPs, nine sizes each over 1/8–8× the
optimum. The target is the least loss at 1e21 (10× the largest budget) and the model size there. Printed per
seed: the error of the endpoint law fitted on the budgets' minima (`fits.isoflop`, what `ladder fit endpoint`
does on a sweep) and on every run (what it did before), the exponent of N at the least loss (the surface's
β/(α+β) is 0.513) and the error of N at 1e21.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fits import fit_endpoint  # noqa: E402
from fits.isoflop import budget_minima, optimal_size  # noqa: E402
from fits.synthetic import EPOCH_CHINCHILLA, isoflop_sweep, surface_optimum  # noqa: E402

LAW = EPOCH_CHINCHILLA
BUDGETS = (1e18, 3e18, 1e19, 3e19, 1e20)
TARGET = 1e21


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--noise", type=float, default=0.002)
    args = ap.parse_args()
    t0 = time.time()
    loss, n_opt = surface_optimum(TARGET, **LAW)
    print(f"{len(BUDGETS)} budgets of 9 sizes, noise {args.noise:.1%}; the least loss at {TARGET:.0e}: {loss:.4f} "
          f"at N = {n_opt:.3g}")
    print(f"{'seed':>4} {'minima':>8} {'every run':>10} {'exponent':>9} {'N error':>8}")
    rows = []
    for seed in range(args.seeds):
        C, N, _, y = isoflop_sweep(np.random.default_rng(seed), BUDGETS, LAW, noise=args.noise)
        minima = budget_minima(C, N, y)
        on_minima = float(fit_endpoint([m.compute for m in minima], [m.loss for m in minima]).predict(TARGET)) / loss - 1
        on_all = float(fit_endpoint(C, y).predict(TARGET)) / loss - 1
        size = optimal_size(minima)
        n_err = float(size.predict(TARGET)) / n_opt - 1
        rows.append((on_minima, on_all, size.exponent, n_err))
        print(f"{seed:>4} {on_minima:>+8.2%} {on_all:>+10.2%} {size.exponent:>9.3f} {n_err:>+8.1%}")
    r = np.array(rows)
    print(f"worst |error|: minima {np.abs(r[:, 0]).max():.2%}, every run {np.abs(r[:, 1]).max():.2%} "
          f"(every run {r[:, 1].min():+.2%} to {r[:, 1].max():+.2%}); exponent {r[:, 2].min():.3f}–{r[:, 2].max():.3f}; "
          f"N within {np.abs(r[:, 3]).max():.1%}  [{time.time() - t0:.0f} s]")


if __name__ == "__main__":
    main()

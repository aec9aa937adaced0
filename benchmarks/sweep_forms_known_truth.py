"""Known truth for isoFLOP sweeps: the surface's form chosen by a backtest by size and by budget.

    .venv/bin/python benchmarks/sweep_forms_known_truth.py [--seeds 5] [--noise 0.002]

Sweeps of five budgets (1e18–3e19 FLOPs, nine sizes each around the optimum, `fits.synthetic.isoflop_sweep`)
drawn from two surfaces: Epoch AI's Chinchilla refit, and the same terms composed with γ = 1/2
(E + (A/N^α + B/D^β)^γ, `tests/test_fits_surface_kaplan.py`), whose budgets' valleys are twice as curved for
the same fall of the least loss with compute. The targets are the optima of 1e20 and 3e20, through
`fits.surfacechoice.choose_surface`: held out by size (two forms; what `ladder fit surface` did before it read
budgets from the runs' tokens), given the budgets (the largest budgets held out, three forms), and given none,
the budgets the runs' tokens trace (`fits.isoflop.inferred_budgets`, as `ladder fit surface` does on a table
without them). Printed per truth: the forms chosen,
the mean |error| and signed error at the targets, the share inside the 90% band.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fits.surfacechoice import choose_surface  # noqa: E402
from fits.synthetic import EPOCH_CHINCHILLA, isoflop_sweep, surface_optimum  # noqa: E402

BUDGETS = np.geomspace(1e18, 3e19, 5)
TARGETS = (1e20, 3e20)
GAMMA = 0.5
TRUTHS = {
    "chinchilla": EPOCH_CHINCHILLA,
    "kaplan γ=1/2": dict(E=1.82, A=482.0 ** (1 / GAMMA), B=2085.0 ** (1 / GAMMA), alpha=0.348 / GAMMA,
                         beta=0.366 / GAMMA, gamma=GAMMA),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--noise", type=float, default=0.002)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"{len(BUDGETS)} budgets of 9 sizes, noise {args.noise:.1%}, targets the optima of "
          f"{', '.join(f'{c:.0e}' for c in TARGETS)}; {args.seeds} seeds")
    print(f"{'truth':<14}{'backtest by':<13}{'chosen':<30}{'|error|':>8}{'signed':>9}{'in 90%':>8}")
    for name, law in TRUTHS.items():
        optima = [surface_optimum(c, **law) for c in TARGETS]
        Nt = np.array([n for _, n in optima])
        Dt, yt = np.array(TARGETS) / (6 * Nt), np.array([loss for loss, _ in optima])
        for by in ("size", "budget", "traced"):
            chosen, errors, inside = Counter(), [], []
            for seed in range(args.seeds):
                _, N, D, y = isoflop_sweep(np.random.default_rng(seed), BUDGETS, law, noise=args.noise)
                ch = choose_surface(N, D, y, budget=np.repeat(BUDGETS, 9) if by == "budget" else None,
                                    infer_budgets=by != "size")
                band = ch.band(Nt, Dt)
                chosen[ch.form] += 1
                errors += list(band.median / yt - 1)
                inside += list((band.lo90 <= yt) & (yt <= band.hi90))
            e = np.array(errors)
            forms = ", ".join(f"{f} {k}" for f, k in chosen.most_common())
            print(f"{name:<14}{by:<13}{forms:<30}{np.mean(np.abs(e)):>8.2%}{np.mean(e):>+9.2%}{np.mean(inside):>8.0%}")
    print(f"[{time.perf_counter() - t0:.0f} s]")


if __name__ == "__main__":
    main()

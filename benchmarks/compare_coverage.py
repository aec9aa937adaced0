"""Coverage of the compute-multiplier bands of `ladder compare` on ladders whose multiplier is known.

    .venv/bin/python benchmarks/compare_coverage.py [--seeds 200] [--boots 200] [--reach 10]

Ladder A follows L(C) = E + A·C^-α; ladder B is A's law at C/m (it needs m× the compute for the same
loss), each rung with independent relative noise, rungs 4× apart in compute. For each setting
(m, noise, rungs, E mode) it prints how often the nominal 90% and 50% bands of the paired bootstrap
over sizes hold the true m, at the largest rung and at `reach`× its compute, with the binomial
standard error, the median estimate at the target, and the seconds taken.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fits.compare import compare_ladders  # noqa: E402

E, A, ALPHA = 1.8, 400.0, 0.15
SETTINGS = [  # (m, relative noise, rungs, E mode)
    (1.3, 0.003, 4, "shared"),
    (1.3, 0.003, 5, "shared"),
    (1.3, 0.003, 6, "shared"),
    (1.3, 0.003, 8, "shared"),
    (1.3, 0.001, 6, "shared"),
    (1.3, 0.010, 6, "shared"),
    (1.0, 0.003, 6, "shared"),
    (2.0, 0.003, 5, "shared"),
    (1.3, 0.003, 6, "separate"),
    (1.3, 0.003, 6, E),
]


def ladders(n: int, m: float, noise: float, rng: np.random.Generator):
    c = np.geomspace(1e17, 1e17 * 4 ** (n - 1), n)
    la = E + A * c**-ALPHA
    lb = E + A * (c / m) ** -ALPHA
    return c, la * (1 + noise * rng.standard_normal(n)), c.copy(), lb * (1 + noise * rng.standard_normal(n))


def coverage(m, noise, n, mode, seeds, boots, reach) -> dict:
    hits = np.zeros((2, 2))  # (largest rung, target) × (90%, 50%)
    estimates = []
    for seed in range(seeds):
        ca, ya, cb, yb = ladders(n, m, noise, np.random.default_rng(seed))
        r = compare_ladders(ca, ya, cb, yb, target=ca.max() * reach, E=mode, n_boot=boots, seed=seed)
        b = r.band
        for row, i in enumerate((-2, -1)):
            hits[row, 0] += b.lo90[i] <= m <= b.hi90[i]
            hits[row, 1] += b.lo50[i] <= m <= b.hi50[i]
        estimates.append(r.multiplier_target)
    return {"cov": hits / seeds, "median": float(np.median(estimates))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=200)
    p.add_argument("--boots", type=int, default=200)
    p.add_argument("--reach", type=float, default=10.0)
    args = p.parse_args()
    print(f"{args.seeds} seeds, {args.boots} paired resamples each, target {args.reach:g}× the largest rung")
    print(f"{'m':>4} {'noise':>6} {'rungs':>5} {'E':>8} | {'90% @rung':>10} {'50% @rung':>10} | "
          f"{'90% @target':>11} {'50% @target':>11} | {'median m':>8} {'s':>5}")
    for m, noise, n, mode in SETTINGS:
        t = time.perf_counter()
        out = coverage(m, noise, n, mode, args.seeds, args.boots, args.reach)
        c = out["cov"]

        def cell(x: float, w: int) -> str:
            se = np.sqrt(x * (1 - x) / args.seeds)
            return f"{x:.2f}±{se:.2f}".rjust(w)

        label = mode if isinstance(mode, str) else f"pin {mode:g}"
        print(f"{m:>4.1f} {noise:>6.3f} {n:>5d} {label:>8} | {cell(c[0, 0], 10)} {cell(c[0, 1], 10)} | "
              f"{cell(c[1, 0], 11)} {cell(c[1, 1], 11)} | {out['median']:>8.3f} {time.perf_counter() - t:>5.1f}",
              flush=True)


if __name__ == "__main__":
    main()

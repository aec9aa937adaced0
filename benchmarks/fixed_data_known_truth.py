"""Known truth for fixed-data ladders: every size on the same tokens and schedule (as Pythia's).

    .venv/bin/python benchmarks/fixed_data_known_truth.py [--seeds 5] [--noise 0.002]

Each ladder is the one `tests/test_fits_predictor.py` draws (`fits.synthetic.fixed_data_ladder`): Epoch AI's
replication of the Chinchilla surface, six sizes of 70M–2.8B parameters on 300B tokens with one linear
schedule, an eval every 5%. No two rungs share a token ratio, so the per-fraction law takes the rungs that
share the target's tokens. The targets, 6.9B and 12B on the same tokens, go through `fits.predictor.predict`
(what `ladder predict` runs) with its defaults. Printed per seed and target: the law chosen, the error at the
end and along the curve (10–100%), and the share of evals inside the 90% band.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fits import fit_endpoint, fit_per_fraction  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.synthetic import EPOCH_CHINCHILLA, fixed_data_ladder, surface_losses  # noqa: E402

SIZES = (7e7, 1.6e8, 4.1e8, 1e9, 1.4e9, 2.8e9)
TARGETS = (6.9e9, 1.2e10)
TOKENS, PER_STEP = 3e11, 2.0**21


def linear_lrs(steps: int, peak: float = 3e-4, warmup: float = 0.01, floor: float = 0.1) -> np.ndarray:
    s = np.arange(steps + 1, dtype=np.float64)
    w = max(int(warmup * steps), 1)
    return np.where(s < w, peak * (s + 1) / w, peak * (1 - (1 - floor) * (s - w) / (steps - w)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--noise", type=float, default=0.002)
    args = ap.parse_args()
    t0 = time.perf_counter()
    lrs = linear_lrs(int(TOKENS / PER_STEP))
    print(f"{len(SIZES)} sizes of {SIZES[0]:.2g}–{SIZES[-1]:.2g} on {TOKENS:.0e} tokens, noise {args.noise:.1%}")
    print(f"{'seed':>4} {'target':>7}  {'law':<13}{'final':>8}{'curve':>8}{'in 90%':>8}")
    finals, curves, inside = [], [], []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        rungs = fixed_data_ladder(rng, SIZES, TOKENS, EPOCH_CHINCHILLA, args.noise, PER_STEP, lrs=lrs)
        for hero in fixed_data_ladder(rng, TARGETS, TOKENS, EPOCH_CHINCHILLA, 0.0, PER_STEP, lrs=lrs):
            blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
            res = core.predict(rungs, blank, hero.steps)
            err = res.band.median / hero.values - 1
            scored = hero.fractions >= 0.1
            held = (res.band.lo90 <= hero.values) & (hero.values <= res.band.hi90)
            finals.append(err[-1])
            curves.append(np.mean(np.abs(err[scored])))
            inside.append(np.mean(held[scored]))
            print(f"{seed:>4} {hero.params:>7.2g}  {res.method:<13}{err[-1]:>+8.2%}{curves[-1]:>8.2%}{inside[-1]:>8.0%}")
    print(f"final {min(finals):+.2%} to {max(finals):+.2%}; curve mean |error| at most {max(curves):.2%}; "
          f"{np.mean(inside):.0%} of evals inside the 90% band  [{time.perf_counter() - t0:.0f} s]")
    where_the_bias_is(args.seeds, args.noise)


def where_the_bias_is(seeds: int, noise: float) -> None:
    """The targets' final loss from the per-fraction law over every fraction (one E), over the second half of
    the run only, and from the endpoint law on the finals alone (at one D the surface is E' + A/N^α: its form)."""
    g = np.arange(1, 21) / 20
    late = g > 0.5
    truths = surface_losses(np.random.default_rng(0), np.array(TARGETS), np.full(len(TARGETS), TOKENS),
                            **EPOCH_CHINCHILLA, noise=0.0)
    errors = {"every fraction": [], "fractions > 0.5": [], "finals alone": []}
    for seed in range(seeds):
        rungs = fixed_data_ladder(np.random.default_rng(seed), SIZES, TOKENS, EPOCH_CHINCHILLA, noise, PER_STEP)
        C = np.array([r.flops_per_token * r.planned_steps * r.tokens_per_step for r in rungs])
        Y = np.vstack([r.values for r in rungs])
        laws = {"every fraction": fit_per_fraction(C, g, Y), "fractions > 0.5": fit_per_fraction(C, g[late], Y[:, late]),
                "finals alone": fit_endpoint(C, Y[:, -1])}
        for n, truth in zip(TARGETS, truths):
            for name, law in laws.items():
                errors[name].append(np.ravel(law.predict(6 * n * TOKENS))[-1] / truth - 1)
    print("where the bias is (the law's free fit, every seed and target): final error mean ± sd")
    for name, e in errors.items():
        print(f"  {name:<16}{np.mean(e):+.2%} ± {np.std(e):.2%}")


if __name__ == "__main__":
    main()

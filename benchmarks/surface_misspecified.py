"""Known truth, wrong form: `ladder fit surface`'s default on an over-training ladder whose losses follow
a law that is not the Chinchilla surface, predicting models 3–17× larger than any it fitted.

    .venv/bin/python benchmarks/surface_misspecified.py [--seeds 20] [--noise 0.005]

The ladder: N = 11M, 79M, 154M, 411M, each at 5–640 tokens per parameter (the smaller sizes trained
longest, as over-training ladders are); the targets: 1.4B at 20 and 640 tokens per parameter and 6.9B
at 20. The truths (no parameter of them is fitted to any data in this repository):

- chinchilla: E + A/N^α + B/D^β with Epoch AI's replication of Chinchilla (the form the fit assumes);
- kaplan: ((N_c/N)^(α_N/α_D) + D_c/D)^α_D (Kaplan et al. 2020, eq. 1.5: no floor, N and D interact);
- kaplan+E: the same on top of a floor of 1.5 (its reducible part halved);
- slowing: E + A/N^α(N) + B/D^β with α falling from 0.34 to 0.26 over the sizes (a power law whose
  exponent drifts, so the small sizes overstate the gain of the large).

For each truth and seed: the surface is fitted on the ladder (the form chosen by the backtest, the band
as the CLI gives it without --bootstrap) and each target predicted. Printed per truth: mean signed
and mean |error| of the median, and the share of targets inside the 90% and 50% bands, for the
default and for each form by name.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fits.surfacechoice import choose_surface  # noqa: E402

SIZES = (11e6, 79e6, 154e6, 411e6)
RATIOS = {11e6: (5, 10, 20, 40, 80, 160, 320, 640), 79e6: (5, 10, 20, 40, 80, 160, 320),
          154e6: (5, 10, 20, 40, 80, 160), 411e6: (5, 10, 20, 40, 80)}
TARGETS = ((1.4e9, 20), (1.4e9, 640), (6.9e9, 20))


def chinchilla(N, D):
    return 1.8172 + 482.01 / N**0.3478 + 2085.43 / D**0.3658


def kaplan(N, D, floor=0.0, share=1.0):
    return floor + share * ((8.8e13 / N) ** (0.076 / 0.095) + 5.4e13 / D) ** 0.095


def slowing(N, D):
    t = np.clip((np.log(N) - np.log(11e6)) / (np.log(6.9e9) - np.log(11e6)), 0, 1)
    alpha = 0.34 - 0.08 * t
    return 1.8172 + 482.01 / 11e6**0.3478 * (N / 11e6) ** -alpha + 2085.43 / D**0.3658


TRUTHS = {"chinchilla": chinchilla, "kaplan": kaplan, "kaplan+E": lambda N, D: kaplan(N, D, 1.5, 0.5),
          "slowing": slowing}


def ladder() -> tuple[np.ndarray, np.ndarray]:
    N = np.array([n for n in SIZES for _ in RATIOS[n]], dtype=np.float64)
    D = np.array([n * r for n in SIZES for r in RATIOS[n]], dtype=np.float64)
    return N, D


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--noise", type=float, default=0.005, help="log-normal sd of each run's final loss")
    args = ap.parse_args()
    N, D = ladder()
    Nt = np.array([n for n, _ in TARGETS])
    Dt = np.array([n * r for n, r in TARGETS])
    print(f"{N.size} runs at {len(SIZES)} sizes; targets " + ", ".join(f"{n:.2g} x{r}" for n, r in TARGETS)
          + f"; noise {args.noise:.1%}; {args.seeds} seeds")
    print(f"{'truth':<11} {'method':<8} {'signed':>7} {'|error|':>8} {'in 90%':>7} {'in 50%':>7}  chosen")
    t0 = time.time()
    for name, law in TRUTHS.items():
        truth = law(Nt, Dt)
        acc = {m: {"err": [], "in90": [], "in50": []} for m in ("default", "free", "shared")}
        chosen = []
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            y = law(N, D) * np.exp(rng.normal(0, args.noise, N.size))
            for m, form in (("default", "auto"), ("free", "free"), ("shared", "shared")):
                ch = choose_surface(N, D, y, form=form)
                if m == "default":
                    chosen.append(ch.form)
                b = ch.band(Nt, Dt)
                acc[m]["err"].append(ch.fit.predict(Nt, Dt) / truth - 1)
                acc[m]["in90"].append((b.lo90 <= truth) & (truth <= b.hi90))
                acc[m]["in50"].append((b.lo50 <= truth) & (truth <= b.hi50))
        for m, a in acc.items():
            e = np.concatenate(a["err"])
            note = ", ".join(f"{f} {chosen.count(f)}" for f in sorted(set(chosen))) if m == "default" else ""
            print(f"{name:<11} {m:<8} {np.mean(e):>+7.2%} {np.mean(np.abs(e)):>8.2%} "
                  f"{np.mean(np.concatenate(a['in90'])):>7.0%} {np.mean(np.concatenate(a['in50'])):>7.0%}  {note}")
    print(f"[{time.time() - t0:.0f} s]")


if __name__ == "__main__":
    main()

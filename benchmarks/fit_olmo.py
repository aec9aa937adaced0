"""OLMo model ladder (Bhagia et al. 2024, `olmo_ladder`): the paper's 13B prediction, our predictions
for OLMo 2 7B / 13B with intervals, and the hero-like backtest of the 3.2B model's whole C4 curve.

    .venv/bin/python benchmarks/fit_olmo.py [--boots 1000]

1. The paper's procedure: surface L(N, D) on its 16 runs (190M–1.3B × 1, 2, 5, 10×C; y = mean of
   the last 5 evals), predicting the 13B-5T and 7B-4T targets. Then the same surface on the whole
   ladder (all five sizes and lengths, 25 runs), with bootstrap (over runs) and Student-t bands.
2. Hero-like backtest: at each length multiplier the five sizes form a fixed-ratio ladder; the
   3.2B curve (every 5% of the run) is predicted from the four smaller sizes (5.6× compute):
   - per-fraction law with E from a surface fit on the smaller sizes' final losses (the honest
     reference procedure), with the paper's 16-run surface and with all 20 smaller-size runs;
   - curve laws fitted on every smaller-size run of every length (20 curves), predicting each
     3.2B run from its LR schedule: multi-power law with the published shape (C 2, β 0.6, γ 0.6),
     multi-power law with its shape fitted, and the momentum law.
   Errors: final loss, and mean / worst over 10–100% of the run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_datasets as ds  # noqa: E402
from fits import bootstrap, fit_momentum, fit_multipower, fit_per_fraction, fit_surface  # noqa: E402

FRACTIONS = np.round(np.arange(1, 21) * 0.05, 10)


def targets_table(fit, ens, targets) -> None:
    for name, (N, D, actual) in targets.items():
        pred = float(fit.predict(N, D))
        blo, bhi = ens.interval(N, D)
        tlo, thi = fit.interval(N, D)
        print(f"    {name}: predicted {pred:.4f} vs actual {actual:.4f} ({pred / actual - 1:+.2%}); "
              f"90% bootstrap [{float(blo):.4f}, {float(bhi):.4f}] {'covers' if blo <= actual <= bhi else 'MISSES'}; "
              f"Student-t ({fit.dof} dof) [{float(tlo):.4f}, {float(thi):.4f}] "
              f"{'covers' if tlo <= actual <= thi else 'MISSES'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boots", type=int, default=1000)
    args = ap.parse_args()
    lad, runs = ds.olmo_ladder()
    finals = ds.olmo_finals(lad)
    targets = ds.olmo_targets()

    print("1. OLMo 2 targets from the ladder (surface L(N, D), N non-embedding)")
    for label, sel in (("paper's 16 runs", finals["paper"]), ("whole ladder, 25 runs", np.ones(len(finals), bool))):
        f = finals[sel]
        fit = fit_surface(f["N"], f["D"], f["loss"])
        ens = bootstrap(fit, args.boots, seed=0)
        p = fit.params
        print(f"  {label}: E {p['E']:.4f}  A {p['A']:.2f}  B {p['B']:.2f}  alpha {p['alpha']:.4f}  "
              f"beta {p['beta']:.4f}  (objective {fit.objective:.3e}; fit error on its runs "
              f"{np.mean(np.abs(fit.predict(f['N'], f['D']) / f['loss'] - 1)):.2%})")
        targets_table(fit, ens, targets)

    print("\n2. Hero-like backtest: the 3.2B curve from the four smaller sizes "
          "(errors: final / mean over 10-100% / worst)")
    curves = ds.olmo_curves(lad, runs, FRACTIONS)
    small = finals[finals["size"] != "3.2B"]
    rows: dict[str, list[str]] = {}
    ratios = []
    for label, sel in (("per-fraction, E from the paper's 16-run surface", small["paper"]),
                       ("per-fraction, E from all 20 smaller-size runs", np.ones(len(small), bool))):
        E = fit_surface(small[sel]["N"], small[sel]["D"], small[sel]["loss"]).E
        key = f"{label} (E {E:.3f})"
        rows[key] = []
        for m in ds.OLMO_MULTIPLIERS:
            C = np.array([curves[(s, m)][0] for s in ds.OLMO_SIZES])
            Y = np.array([curves[(s, m)][1] for s in ds.OLMO_SIZES])
            err = fit_per_fraction(C[:4], FRACTIONS, Y[:4], E=E).predict(C[4]) / Y[4] - 1
            rows[key].append((err[-1], np.mean(np.abs(err[1:])), np.max(np.abs(err[1:]))))
            if len(ratios) < len(ds.OLMO_MULTIPLIERS):
                ratios.append(C[4] / C[3])
    lr_curves = ds.olmo_lr_curves(lad, runs)
    fit_set = [c for (s, _), c in lr_curves.items() if s != "3.2B"]
    for label, fn in (
        ("multi-power law, published shape", lambda c: fit_multipower(c, shape=dict(C=2.0, beta=0.6, gamma=0.6))),
        ("multi-power law, shape fitted", fit_multipower),
        ("momentum law", fit_momentum),
    ):
        t0 = time.perf_counter()
        fit = fn(fit_set)
        key = f"{label} ({time.perf_counter() - t0:.0f} s fit)"
        rows[key] = []
        for m in ds.OLMO_MULTIPLIERS:
            target = lr_curves[("3.2B", m)]
            T = int(runs[(runs["size"] == "3.2B") & (runs["length_multiplier_xC"] == m)]["total_steps"].iloc[0])
            pred = fit.predict(np.round(FRACTIONS * T).astype(int), target.lrs, target.scale)
            err = pred / curves[("3.2B", m)][1] - 1
            rows[key].append((err[-1], np.mean(np.abs(err[1:])), np.max(np.abs(err[1:]))))
        if fit.warnings:
            key2 = key + " — " + "; ".join(w.split(":")[0] for w in fit.warnings)
            rows[key2] = rows.pop(key)
    print("  compute extrapolation 3.2B / 1.3B: " + ", ".join(f"{m:g}xC {r:.2f}x" for m, r in zip(ds.OLMO_MULTIPLIERS, ratios)))
    print(f"  {'method':<62}" + "".join(f"{f'{m:g}xC':>22}" for m in ds.OLMO_MULTIPLIERS))
    for key, vals in rows.items():
        print(f"  {key[:62]:<62}" + "".join(f"{e:>+8.2%}/{mu:.2%}/{w:.2%}" for e, mu, w in vals))
        ends = [abs(v[0]) for v in vals]
        means = [v[1] for v in vals]
        print(f"  {'':<62}|final| {min(ends):.2%}..{max(ends):.2%} (avg {np.mean(ends):.2%}); "
              f"curve mean {min(means):.2%}..{max(means):.2%} (avg {np.mean(means):.2%})")
    print("  reference (per-fraction, surface E): final -0.56%..-0.91%, curve mean 0.58%..1.21%")


if __name__ == "__main__":
    main()

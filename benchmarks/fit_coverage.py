"""Known truth: draw synthetic ladders from each form with noise, fit, bootstrap over runs, and
count how often the nominal 90% interval holds the true parameters and the true prediction.

    .venv/bin/python benchmarks/fit_coverage.py [--seeds 300] [--boots 200] [--forms endpoint,surface,...]

Prints one line per form and quantity: the empirical coverage and its binomial standard error.
The tests run the cheap forms with fewer seeds (tests/test_fits_uncertainty.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fits import (  # noqa: E402
    Momentum,
    MultiPower,
    bootstrap,
    fit_endpoint,
    fit_momentum,
    fit_multipower,
    fit_per_fraction,
    fit_surface,
)
from fits.synthetic import (  # noqa: E402
    curve_law_curves,
    endpoint_losses,
    known_law,
    per_fraction_losses,
    surface_losses,
)
from ladder.config.schedule import Schedule  # noqa: E402

LEVEL = 0.9


def _case_endpoint(rng):
    truth = dict(E=1.7, A=2.0e3, alpha=0.2)
    C = np.geomspace(1e18, 1e21, 8)
    fit = fit_endpoint(C, endpoint_losses(rng, C, **truth, noise=0.005))
    target = 1e22
    return fit, truth | {"prediction": truth["E"] + truth["A"] * target ** -truth["alpha"]}, (target,)


def _case_surface(rng):
    truth = dict(E=1.8, A=480.0, B=2100.0, alpha=0.35, beta=0.37)
    N = np.repeat(np.geomspace(5e7, 2e9, 5), 6)
    D = N * np.tile(np.geomspace(5, 200, 6), 5)
    fit = fit_surface(N, D, surface_losses(rng, N, D, **truth, noise=0.01))
    at = (7e9, 1.4e11)
    pred = truth["E"] + truth["A"] / at[0] ** truth["alpha"] + truth["B"] / at[1] ** truth["beta"]
    return fit, {k: truth[k] for k in ("E", "alpha", "beta")} | {"prediction": pred}, at


PF_G = np.array([0.2, 0.4, 0.6, 0.8, 1.0])
PF_A = 900.0 * (1.0 + 0.5 * (1 - PF_G))
PF_ALPHA = 0.16 + 0.04 * PF_G


def _case_per_fraction(rng):
    C = np.geomspace(1e19, 1e21, 6)
    Y = per_fraction_losses(rng, C, PF_G, 2.0, PF_A, PF_ALPHA, noise=0.002, run_noise=0.002)
    fit = fit_per_fraction(C, PF_G, Y)
    target = 1e22
    return fit, {"E": 2.0, "alpha": PF_ALPHA[-1],
                 "prediction": 2.0 + PF_A[-1] * target ** -PF_ALPHA[-1]}, (target, [1.0])


def _lr(kind: str, T: int = 3000) -> np.ndarray:
    base = dict(peak_lr=3e-4, total_steps=T, warmup_steps=100, min_lr_ratio=0.1)
    if kind == "step":
        lr = Schedule(decay="constant", **base).lrs()
        return np.where(np.arange(T) < T // 2, lr, 0.3 * 3e-4)
    if kind == "wsd":
        return Schedule(decay="wsd", cooldown_steps=T // 5, **base).lrs()
    return Schedule(decay=kind, **base).lrs()


def _case_curve(form, fit_fn, shape, params):
    exps = dict(L0=-0.07, A=0.08, alpha=-0.05, B=0.1)
    law = known_law(form, shape, params, exps, scale_ref=1e8)
    sizes, kinds = (2.5e7, 1e8, 4e8), ("cosine", "step")
    combos = [(k, s) for s in sizes for k in kinds]
    steps = np.arange(200, 3001, 100)
    hero_lrs = _lr("wsd", 6000)
    hero_steps = np.array([6000])

    def case(rng):
        curves = curve_law_curves(rng, law, [_lr(k) for k, _ in combos], [steps] * len(combos),
                                  [s for _, s in combos], noise=0.002, run_noise=0.001)
        fit = fit_fn(curves)
        truth = {k: law.shape[k] for k in form.shape_names}
        truth["alpha"] = law.run_params()["alpha"]
        truth["prediction"] = float(law.predict(hero_steps, hero_lrs, 1.6e9)[0])
        return fit, truth, (hero_steps, hero_lrs, 1.6e9)

    return case


CASES = {
    "endpoint": _case_endpoint,
    "surface": _case_surface,
    "per-fraction": _case_per_fraction,
    "momentum": _case_curve(Momentum, fit_momentum, {"lambda": 0.995}, dict(L0=2.6, A=0.6, alpha=0.45, B=0.9)),
    "multipower": _case_curve(MultiPower, fit_multipower, dict(C=2.0, beta=0.6, gamma=0.6),
                              dict(L0=2.6, A=0.6, alpha=0.45, B=450.0)),
}


def coverage(form: str, seeds: int, boots: int, first_seed: int = 0) -> dict[str, float]:
    """Share of seeds whose bootstrap interval at LEVEL holds each true quantity."""
    hits: dict[str, int] = {}
    for seed in range(first_seed, first_seed + seeds):
        rng = np.random.default_rng(seed)
        fit, truth, at = CASES[form](rng)
        ens = bootstrap(fit, boots, seed=seed)
        intervals = ens.param_intervals(LEVEL)
        for k in truth:
            if k != "prediction":
                lo, hi = intervals[k]
                hits[k] = hits.get(k, 0) + int(lo <= truth[k] <= hi)
        plo, phi = ens.interval(*at, level=LEVEL)
        hits["prediction"] = hits.get("prediction", 0) + int(
            np.ravel(plo)[-1] <= truth["prediction"] <= np.ravel(phi)[-1]
        )
    return {k: v / seeds for k, v in hits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=300)
    ap.add_argument("--boots", type=int, default=200)
    ap.add_argument("--forms", default=",".join(CASES))
    args = ap.parse_args()
    for form in args.forms.split(","):
        t0 = time.perf_counter()
        cov = coverage(form, args.seeds, args.boots)
        se = np.sqrt(0.9 * 0.1 / args.seeds)
        parts = "  ".join(f"{k} {v:.1%}" for k, v in cov.items())
        print(f"{form:<13} {args.seeds} seeds x {args.boots} refits: {parts}  "
              f"(binomial s.e. {se:.1%}; {time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()

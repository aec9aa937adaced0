"""Synthetic runs drawn from known laws, for checking that fits recover what generated them.

Noise is multiplicative (log-normal, `noise` = its standard deviation in log space), drawn once
per run (`run_noise`, the seed-to-seed offset every checkpoint of a run shares) and once per
point (`noise`). Used by the tests and benchmarks, and handy for asking how many rungs a ladder
needs before its intervals get narrow enough.
"""

from __future__ import annotations

import numpy as np

from fits.curvelaw import Curve, CurveLawFit
from fits.runs import Run

EPOCH_CHINCHILLA = dict(E=1.82, A=482.0, B=2085.0, alpha=0.348, beta=0.366)
"""Epoch AI's refit of the Chinchilla surface (Besiroglu et al. 2024): the known truth of the synthetic sweeps and
fixed-data ladders."""


def endpoint_losses(rng: np.random.Generator, compute, E: float, A: float, alpha: float, noise: float) -> np.ndarray:
    c = np.asarray(compute, dtype=np.float64)
    return (E + A * c**-alpha) * np.exp(rng.normal(0.0, noise, c.size))


def surface_losses(rng, n_params, tokens, E, A, B, alpha, beta, noise, gamma: float = 1.0) -> np.ndarray:
    """E + (A/N^α + B/D^β)^γ (γ = 1: the Chinchilla surface), each loss × a log-normal noise of sd `noise`."""
    N = np.asarray(n_params, dtype=np.float64)
    D = np.asarray(tokens, dtype=np.float64)
    return (E + (A * N**-alpha + B * D**-beta) ** gamma) * np.exp(rng.normal(0.0, noise, N.size))


def surface_optimum(compute: float, E, A, B, alpha, beta, gamma: float = 1.0) -> tuple[float, float]:
    """(least loss, N there) of the surface E + (A/N^α + B/D^β)^γ along 6·N·D = `compute`
    (`fits.frontier.optimum`)."""
    from fits.frontier import optimum

    loss, n = optimum(compute, E, A, B, alpha, beta, gamma)
    return float(loss), float(n)


def isoflop_sweep(rng, budgets, law: dict, spread=(1 / 8, 8), sizes: int = 9, noise: float = 0.0):
    """An isoFLOP sweep of the surface `law` (E, A, B, alpha, beta, and gamma if not 1): at each budget, `sizes` models log-spaced
    around the optimum over `spread` (each off the grid by up to 10%), computes as logged (within 0.4% of the
    budget), D = C / 6N. Returns (C, N, D, loss)."""
    C, N = [], []
    for c in budgets:
        n = surface_optimum(c, **law)[1] * np.geomspace(*spread, sizes) * np.exp(rng.uniform(-0.1, 0.1, sizes))
        C += [c * (1 + rng.uniform(-0.004, 0.004)) for _ in n]
        N += list(n)
    C, N = np.array(C), np.array(N)
    D = C / (6 * N)
    return C, N, D, surface_losses(rng, N, D, **law, noise=noise)


def fixed_data_ladder(rng, sizes, tokens: float, law: dict, noise: float, tokens_per_step: float = 2**21,
                      evals: int = 20, lrs=None) -> list[Run]:
    """One run of each size in `sizes` (N) on the same `tokens` and schedule (`lrs`, one per step, or none): a
    fixed-data ladder, as Pythia's. Each logs `evals` evals at even fractions, its loss the surface `law` (E, A,
    B, alpha, beta) at N and the tokens seen so far."""
    steps_planned = int(tokens / tokens_per_step)
    steps = np.round(np.arange(1, evals + 1) / evals * steps_planned).astype(np.int64)
    return [Run(f"{n:.3g}", 6 * n, tokens_per_step, steps_planned, steps=steps, lrs=lrs, n_params=n,
                values=surface_losses(rng, np.full(steps.size, n), steps * tokens_per_step, **law, noise=noise))
            for n in sizes]


def per_fraction_losses(rng, compute, fractions, E, A, alpha, noise, run_noise=0.0) -> np.ndarray:
    """Losses (runs, fractions) from L(g) = E + A_g·(C·g)^−α_g; `A`, `alpha` one value per fraction."""
    C = np.asarray(compute, dtype=np.float64)[:, None]
    g = np.asarray(fractions, dtype=np.float64)[None, :]
    clean = E + np.asarray(A)[None, :] * (C * g) ** -np.asarray(alpha)[None, :]
    per_run = rng.normal(0.0, run_noise, (C.shape[0], 1))
    return clean * np.exp(per_run + rng.normal(0.0, noise, clean.shape))


def curve_law_curves(
    rng, law: CurveLawFit, schedules, steps, scales, noise: float, run_noise: float = 0.0
) -> list[Curve]:
    """One curve per (LR sequence, eval steps, scale) from a known law, with noise."""
    out = []
    for i, (lrs, st, s) in enumerate(zip(schedules, steps, scales)):
        clean = law.predict(st, lrs, s)
        loss = clean * np.exp(rng.normal(0.0, run_noise) + rng.normal(0.0, noise, clean.size))
        out.append(Curve(st, loss, lrs, s, f"synthetic {i}"))
    return out


def known_law(form, shape: dict, run_params: dict, exponents: dict | None = None, scale_ref: float = 1.0,
              E: float | None = None) -> CurveLawFit:
    """A curve law with given parameters (run parameters at `scale_ref`, power-law exponents in scale)."""
    exponents = exponents or {}
    level = {k: v - (E or 0.0) if k == "L0" else v for k, v in run_params.items()}
    return CurveLawFit(
        form_name=form.name,
        shape={k: float(shape[k]) for k in form.shape_names},
        level={k: float(level[k]) for k in ("L0", "A", "alpha", "B")},
        slope={k: float(exponents.get(k, 0.0)) for k in ("L0", "A", "alpha", "B")},
        scale_ref=scale_ref,
        E=E,
        curves=(),
        objective=0.0,
        converged=True,
        form=form,
    )

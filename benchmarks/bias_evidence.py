"""The alternatives tried for the leaderboard's low bias and not adopted, with their numbers.

    .venv/bin/python benchmarks/bias_evidence.py      # 2–4 min on 2 cores

1. One irreducible loss E shared by all five OLMo lengths: the per-fraction law's log residuals summed
   over the five lengths (each with the smaller sizes' runs of that length) on a grid of pinned E; the
   3.2B final at each length with the best joint E.
2. The multi-power law's floor: the default, its posterior median under a flat prior on [0, the smallest loss)
   with the profile likelihood of one observation per curve (`fits.curvelaw.profile_floor`), against the
   floor at 0 (`--floor zero`, the default until the profile): (Mis)Fitting 1B, MPL 400M, OLMo 3.2B.
3. The momentum law by name (no backtest) against the truth on the same targets.
4. E from the whole ladder: the Chinchilla surface fitted on the 20 smaller OLMo runs' final losses in
   each form (its E and standard error), and the per-fraction law with E pinned there (and at ±1.645 se)
   predicting the 3.2B at each length.
5. The whole ladder in hindsight: at each length, the endpoint law E + A·C^−α through the five sizes' final
   losses (the 3.2B included, C = 6·N·D): its E and each size's residual (actual / law − 1).
6. The batch: each ladder's tokens per step against the power law in parameters through its rungs' (each
   size's batch over the law; the target's), beside the default's signed final error from the leaderboard's
   output (benchmarks/leaderboard.json); on OLMo also the law through all five sizes, to set beside item 5.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import leaderboard as lb  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import (  # noqa: E402
    CurveLaw,
    Options,
    PerFraction,
    _matrix,
    choose_smooth,
    per_fraction_runs,
    resolve_smooth,
    scale_of,
)
from fits.endpoint import fit_endpoint  # noqa: E402
from fits.perfraction import fit_per_fraction  # noqa: E402
from fits.runs import batch_off_trend, batch_trend, law_compute  # noqa: E402
from fits.surface import fit_surface  # noqa: E402


def joint_E(tasks) -> None:
    Es = np.linspace(0, 2.6, 27)
    total, preds = np.zeros(Es.size), {}
    for t in tasks:
        tg = t.targets[0]
        runs = per_fraction_runs(t.runs, tg, 0.01)
        Cs, _ = law_compute(runs + [tg])
        C, target_C = Cs[:-1], Cs[-1]
        smooth, _ = choose_smooth(runs, Options(), C)
        grid, losses = _matrix(runs)
        ri, ci = np.nonzero(np.isfinite(losses))
        ss, err = [], []
        for E in Es:
            f = fit_per_fraction(C, grid, losses, smooth=smooth, E=float(E))
            P = np.vstack([f.predict(c) for c in C])
            r = np.log(P[ri, ci]) - np.log(losses[ri, ci])
            ss.append(float(np.sum(r * r)))
            err.append(f.predict(target_C, np.array([1.0]))[0] / tg.values[-1] - 1)
        ss = np.array(ss)
        total += ss / ss.min()
        preds[t.name] = np.array(err)
    j = int(np.argmin(total))
    print(f"1. joint E over the five OLMo lengths: {Es[j]:.1f}; 3.2B final at that E: "
          + ", ".join(f"{k} {v[j]:+.2%}" for k, v in preds.items()))


def multipower_floor(tasks) -> None:
    print("2. multi-power floor: 0 (--floor zero) -> its posterior median (the default)")
    for t in tasks:
        zero = CurveLaw("multipower", t.runs, Options(floor="zero")).fit()
        model = CurveLaw("multipower", t.runs, Options())
        law = model.fit()
        prof = model.floor_profile
        e0 = [zero.predict(tg.steps[-1:], tg.lrs, scale_of(tg))[0] / tg.values[-1] - 1 for tg in t.targets]
        e1 = [law.predict(tg.steps[-1:], tg.lrs, scale_of(tg))[0] / tg.values[-1] - 1 for tg in t.targets]
        print(f"   {t.name:<22} floor {law.E:.2f} (90%: {prof.quantile(0.05):.2f}–{prof.quantile(0.95):.2f}): "
              f"final {np.mean(e0):+.2%} -> {np.mean(e1):+.2%}")


def momentum(tasks) -> None:
    print("3. momentum law by name")
    for t in tasks:
        t0, errs = time.perf_counter(), []
        for tg in t.targets:
            keep = tg.fractions >= 0.1
            blank = replace(tg, steps=np.zeros(0, np.int64), values=np.zeros(0))
            res = core.predict(t.runs, blank, tg.steps[keep], core.Settings(
                method="momentum", candidates=("momentum",), backtest=False, options=Options(n_boot=20)))
            errs.append(res.band.median[-1] / tg.values[keep][-1] - 1)
        print(f"   {t.name:<22} final {np.mean(errs):+.2%}  [{time.perf_counter() - t0:.0f} s]")


def surface_E(tasks) -> None:
    print("4. E from the surface of the 20 smaller OLMo runs' final losses")
    runs = tasks[0].runs
    N = np.array([r.params for r in runs])
    D = np.array([r.planned_steps * r.tokens_per_step for r in runs], dtype=np.float64)
    L = np.array([r.values[-1] for r in runs])
    for shared in (False, True):
        fit = fit_surface(N, D, L, shared_exponent=shared)
        se = float(np.sqrt(fit.cov[0, 0]))
        print(f"   {'one exponent' if shared else 'free α, β'}: E = {fit.E:.2f} ± {se:.2f}")
    E, se = fit.E, float(np.sqrt(fit.cov[0, 0]))
    for t in tasks:
        tg = t.targets[0]
        errs = []
        for e in (None, E, E - 1.645 * se, E + 1.645 * se):
            o = cand_options(t.runs, tg, e)
            band = PerFraction(t.runs, o).predict(tg, tg.steps[-1:]).band
            errs.append(float(band.median[-1] / tg.values[-1] - 1))
        print(f"   {t.name:<22} E fitted {errs[0]:+.2%}; E = {E:.2f}: {errs[1]:+.2%} "
              f"(at {E - 1.645 * se:.2f}: {errs[2]:+.2%}, at {E + 1.645 * se:.2f}: {errs[3]:+.2%})")


def hindsight(tasks) -> None:
    print("5. the endpoint law through all five sizes' finals at each length (3.2B included): E, residual by size")
    for t in tasks:
        tg = t.targets[0]
        runs = per_fraction_runs(t.runs, tg, 0.01) + [tg]
        C, _ = law_compute(runs)
        L = np.array([r.values[-1] for r in runs])
        fit = fit_endpoint(C, L)
        res = L / fit.predict(C) - 1
        names = [f"{r.n_params / 1e9:.2g}B" for r in runs]
        print(f"   {t.name:<22} E = {fit.E:.2f}; " + ", ".join(f"{n} {x:+.2%}" for n, x in zip(names, res)))


def batch(tasks) -> None:
    print("6. tokens per step over the power law in parameters through the rungs' (each size; the target), "
          "and the default's final error (one line per ladder)")
    path = Path(__file__).parent / "leaderboard.json"
    if not path.is_file():
        print(f"   skipped: it reads the default's errors from {path.name}, which benchmarks/leaderboard.py writes; "
              "run that first")
        return
    board = json.loads(path.read_text())["curve"]
    lines: dict[str, list[str]] = {}
    for t in tasks:
        tg = t.targets[0]
        text = f"{off_trend(t.runs)}; target {tg.params / 1e9:.2g}B {batch_off_trend(t.runs, tg) - 1:+.0%}"
        lines.setdefault(text, []).append(f"{board[t.name]['default']['final']:+.2%} ({t.name})")
    for text, errs in lines.items():
        print(f"   {text}; default final {', '.join(errs)}")
    olmo = tasks[0]
    print(f"   OLMo, the law through all five sizes: {off_trend(olmo.runs + [olmo.targets[0]])}")


def off_trend(runs) -> str:
    k, c, size, tps = batch_trend(runs)
    off = tps / np.exp(c + k * np.log(size)) - 1
    if np.all(np.abs(off) < 0.005):
        return f"B ~ N^{abs(k):.2f}: {size.size} sizes, each on it"
    return f"B ~ N^{k:.2f}: " + ", ".join(f"{n / 1e9:.2g}B {x:+.0%}" for n, x in zip(size, off))


def cand_options(runs, target, E) -> Options:
    return resolve_smooth(runs, target, Options(E=E, n_boot=20))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", type=int, choices=range(1, 7), help="print one item")
    only = ap.parse_args().only
    warnings.simplefilter("ignore")
    olmo = lb.olmo_tasks()
    if only == 6:
        batch(olmo + lb.marin_tasks() + lb.misfitting_tasks() + lb.mpl_tasks() + lb.demo_tasks(Path("demo")))
        return
    joint_E(olmo)
    curve_tasks = lb.misfitting_tasks() + lb.mpl_tasks() + [olmo[i] for i in (0, 2, 4)]
    multipower_floor(curve_tasks)
    momentum([olmo[1]] + lb.misfitting_tasks() + lb.mpl_tasks())
    surface_E(olmo)
    hindsight(olmo)
    batch(olmo + lb.marin_tasks() + lb.misfitting_tasks() + lb.mpl_tasks() + lb.demo_tasks(Path("demo")))


if __name__ == "__main__":
    main()

"""Many runs, cosine schedules (Li et al. 2025, `misfitting_li2025`, flagged rows left out): hold out
the largest model (1B) and predict it from smaller ones, at growing extrapolation distances.

    .venv/bin/python benchmarks/fit_misfitting.py [--tpp 18] [--cuts 400m,300m,200m,100m,70m]

Per-fraction and endpoint laws: a fixed-ratio ladder, one run per size (total steps with tokens per
parameter closest to --tpp, within 30%; its best peak LR), C = 6·N·D with N the non-embedding
parameters. Curve laws (multi-power with the published shape, momentum with λ fitted): every
best-LR run of every length of the sizes up to the cut, LRs rebuilt from open_lm's cosine; they
predict the 1B runs' whole curves from their LR sequences. Errors: final loss, and mean / worst
over 20–100% of the run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_datasets as ds  # noqa: E402
from fits import Curve, fit_endpoint, fit_momentum, fit_multipower, fit_per_fraction, sample_curve  # noqa: E402

FRACTIONS = np.round(np.arange(2, 11) / 10, 10)
ORDER = ["12m", "17m", "25m", "35m", "50m", "70m", "100m", "200m", "300m", "400m", "1b"]


def best_lr_runs(df):
    """One run per (model, total_steps): the peak LR with the lowest final loss."""
    final = df[df["is_final_checkpoint"]].sort_values("loss")
    best = final.groupby(["model", "total_steps"]).head(1)
    return df[df["run_id"].isin(best["run_id"])]


def ladder(df, tpp: float):
    runs = df[df["is_final_checkpoint"]].copy()
    runs["tpp"] = runs["tokens"] / runs["params"]
    out = []
    for m in ORDER:
        r = runs[runs["model"] == f"misfitting_{m}"]
        if r.empty:
            continue
        r = r.iloc[(np.log(r["tpp"] / tpp)).abs().argsort()]
        if abs(np.log(r["tpp"].iloc[0] / tpp)) <= np.log(1.3):
            out.append((m, r["run_id"].iloc[0]))
    return out


def curve_of(df, run_id):
    g = df[df["run_id"] == run_id].sort_values("step")
    T = int(g["total_steps"].iloc[0])
    n = float(g["params_nonembed"].iloc[0])
    return g, T, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tpp", type=float, default=18.0, help="tokens per parameter (with embeddings, as the data counts)")
    ap.add_argument("--cuts", default="400m,300m,200m,100m,70m")
    args = ap.parse_args()
    df = best_lr_runs(ds.misfitting())
    rungs = ladder(df, args.tpp)
    print(f"fixed-ratio ladder at ~{args.tpp:g} tokens/param: " + ", ".join(
        f"{m} (T={int(df[df.run_id == r]['total_steps'].iloc[0])})" for m, r in rungs))
    C, Y, names = [], [], []
    for m, r in rungs:
        g, T, n = curve_of(df, r)
        C.append(6 * n * float(g["tokens"].max()) / float(g["step"].max()) * T)
        Y.append(sample_curve(g["step"].to_numpy(), g["loss"].to_numpy(), T, FRACTIONS))
        names.append(m)
    C, Y = np.array(C), np.array(Y)
    assert names[-1] == "1b", "the ladder needs the 1B run to hold out"

    print("\nendpoint law and per-fraction law (E fitted across fractions, or E from the endpoint law), predicting 1B:")
    print(f"  {'fit on':<14}{'runs':>5}{'extrap':>9}{'endpoint':>10}  90% t-band (width)     per-fraction end / mean / worst"
          "     same with the endpoint's E")
    for cut in args.cuts.split(","):
        k = names.index(cut) + 1
        ep = fit_endpoint(C[:k], Y[:k, -1])
        lo, hi = ep.interval(C[-1])
        ee = float(ep.predict(C[-1])) / Y[-1, -1] - 1
        cols = []
        for E in (None, ep.E):
            e = fit_per_fraction(C[:k], FRACTIONS, Y[:k], E=E).predict(C[-1]) / Y[-1] - 1
            cols.append(f"{e[-1]:+.2%} / {np.nanmean(np.abs(e)):.2%} / {np.nanmax(np.abs(e)):.2%}")
        band = f"{'holds' if lo <= Y[-1, -1] <= hi else 'MISSES'} ({(hi - lo) / ep.predict(C[-1]):.1%})"
        print(f"  12m..{cut:<9}{k:>5}{C[-1] / C[k - 1]:>8.1f}x{ee:>+10.2%}  {band:<21}  {cols[0]:<29}{cols[1]}"
              + ("  [" + "; ".join(w.split(":")[0] for w in ep.warnings) + "]" if ep.warnings else ""))

    print("\ncurve laws on every best-LR run up to the cut, predicting the 1B runs (T=10000, 20000):")
    curves = {}
    for rid in df["run_id"].unique():
        g, T, n = curve_of(df, rid)
        steps = g["step"].to_numpy()
        keep = steps >= max(2 * ds.MISFIT_WARMUP, 0.1 * T)
        if keep.sum() < 2:
            continue
        m = g["model"].iloc[0].removeprefix("misfitting_")
        curves.setdefault(m, []).append(Curve(steps[keep], g["loss"].to_numpy()[keep],
                                              ds.misfitting_lrs(float(g["peak_lr"].iloc[0]), T, int(steps.max()) + 1),
                                              n, rid))
    targets = curves["1b"]
    for law, fn in (("multi-power (published shape)", lambda c: fit_multipower(c, shape=dict(C=2.0, beta=0.6, gamma=0.6))),
                    ("momentum", fit_momentum)):
        print(f"  {law}:")
        for cut in args.cuts.split(","):
            fit_c = [c for m in ORDER[: ORDER.index(cut) + 1] for c in curves.get(m, [])]
            t0 = time.perf_counter()
            fit = fn(fit_c)
            secs = time.perf_counter() - t0
            parts = []
            for c in targets:
                pred = fit.predict(c.steps, c.lrs, c.scale)
                sel = c.steps >= 0.2 * c.lrs.size
                e = pred / c.loss - 1
                parts.append(f"T={c.lrs.size - 1}: end {e[-1]:+.2%} mean {np.mean(np.abs(e[sel])):.2%} "
                             f"worst {np.max(np.abs(e[sel])):.2%}")
            ratio = targets[0].scale / fit_c[-1].scale
            print(f"    12m..{cut:<6} {len(fit_c):>3} runs, size x{ratio:.1f} ({secs:.0f} s): " + "; ".join(parts))


if __name__ == "__main__":
    main()

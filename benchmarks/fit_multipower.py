"""Curves across schedules (Luo et al. 2025, `multipower_schedules`): fit on the `fit` curves,
predict the `test` curves, per model size; then fit on 25M and 100M only and predict all 400M curves.

    .venv/bin/python benchmarks/fit_multipower.py

Errors are relative, |predicted / actual − 1|, over every logged step: the mean over a curve
averaged over curves ("PredE"), the worst point of any curve, and the worst point of each curve
averaged over curves ("WorstE"). The authors' README reports PredE 0.110% / 0.142% / 0.168% and
WorstE 0.41% / 0.58% / 1.0% (25M / 100M / 400M).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_datasets as ds  # noqa: E402
from fits import MultiPower, fit_momentum, fit_multipower  # noqa: E402
from fits.synthetic import known_law  # noqa: E402
from ladder.predict.adapter import PUBLISHED_SHAPE  # noqa: E402  (the shape the predictor holds when rungs share one schedule)


def score(predict, curves) -> tuple[float, float, float, str]:
    """(mean of per-curve mean, worst point, mean of per-curve worst, worst curve)."""
    per = []
    for c in curves:
        e = np.abs(predict(c) / c.loss - 1)
        per.append((e.mean(), e.max(), c.name))
    worst = max(per, key=lambda x: x[1])
    return float(np.mean([p[0] for p in per])), worst[1], float(np.mean([p[1] for p in per])), worst[2]


def line(label, s) -> str:
    return f"  {label:<44} mean {s[0]:.3%}  worst {s[1]:.2%} ({s[3]})  mean of per-curve worst {s[2]:.2%}"


def main() -> None:
    print("Per size: fit on cosine_24000, constant_24000, wsdcon_9; score on the 6 held-out curves (and all 9)")
    for size in ds.MPL_SIZES:
        fit_c, test_c, all_c = ds.mpl_curves(size=size, split="fit"), ds.mpl_curves(size=size, split="test"), ds.mpl_curves(size=size)
        L0, A, alpha, B, C, beta, gamma = ds.MPL_README[size]
        law = known_law(MultiPower, dict(C=C, beta=beta, gamma=gamma), dict(L0=L0, A=A, alpha=alpha, B=B))
        print(f" {size}:")
        published = lambda c, law=law: law.predict(c.steps, c.lrs, 1.0)  # noqa: E731
        print(line("authors' parameters, held-out", score(published, test_c)))
        print(line("authors' parameters, all 9", score(published, all_c)))
        for name, fn in (("multi-power law", fit_multipower), ("momentum law", fit_momentum),
                         ("multi-power, published shape", lambda c: fit_multipower(c, shape=PUBLISHED_SHAPE))):
            t0 = time.perf_counter()
            fit = fn(fit_c)
            secs = time.perf_counter() - t0
            pred = lambda c, f=fit: f.predict(c.steps, c.lrs, c.scale)  # noqa: E731
            print(line(f"{name} (ours, {secs:.1f} s), held-out", score(pred, test_c)))
            print(line(f"{name} (ours), all 9", score(pred, all_c)))
            if name == "multi-power law":
                print("    fitted: " + "  ".join(f"{k} {v:.4g}" for k, v in fit.run_params().items())
                      + f"  objective {fit.objective:.3e}")

    print("\nAcross sizes: fit on the 25M and 100M curves only (shape shared, L0, A, alpha, B power laws "
          "in size), predict all nine 400M curves (4x the largest fitted size)")
    targets = ds.mpl_curves(size="400M")
    for split in ("fit", None):
        fit_c = ds.mpl_curves(size="25M", split=split) + ds.mpl_curves(size="100M", split=split)
        for name, fn in (("multi-power law", fit_multipower), ("momentum law", fit_momentum),
                         ("multi-power, published shape", lambda c: fit_multipower(c, shape=PUBLISHED_SHAPE))):
            t0 = time.perf_counter()
            fit = fn(fit_c)
            secs = time.perf_counter() - t0
            s = score(lambda c, f=fit: f.predict(c.steps, c.lrs, c.scale), targets)
            label = f"{name}, {len(fit_c)} curves ({secs:.0f} s)"
            print(line(label, s) + f"   L0(400M) {fit.run_params(400e6)['L0']:.3f} (authors' 400M fit: 2.375)")


if __name__ == "__main__":
    main()

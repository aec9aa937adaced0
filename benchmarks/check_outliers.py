"""`ladder check`'s off-trend rule and `ladder compare`'s stretched-band warning on synthetic ladders whose truth is
known.

Off-trend (`fits.trends.leave_one_out`): endpoint losses L = 1.8 + 400·C^−0.15 on 5, 6 or 8 rungs spaced evenly in
log compute from 1e18 to 1e21, with 0.1% relative noise; one rung raised by 3% or 5%, at each position; 40 seeds per
row. A row counts the ladders where the bad rung alone is flagged, where a clean rung is flagged too (and, beside it,
how often each rung judged once against all the others, before a flagged rung is set aside, flags a clean one too),
and where the bad rung is missed; the last rows are clean ladders (60 seeds), where any flag is a false alarm.

Compare (`fits.compare.compare_ladders`): two ladders of 5 sizes, B needing 1.5× A's compute, 0.2% noise, 200
resamples, 30 seeds: how often the full fit's multiplier at 10× the largest rung lies outside the resamples' 50%
range (the warning that the bands were stretched to hold it).

    .venv/bin/python benchmarks/check_outliers.py      # about 1 min on 2 cores
"""

from __future__ import annotations

import numpy as np

from fits.compare import compare_ladders
from fits.trends import _leave_each_out, leave_one_out

SEEDS = 40


def losses(seed: int, n: int, noise: float = 0.001) -> tuple[np.ndarray, np.ndarray]:
    compute = np.geomspace(1e18, 1e21, n)
    loss = 1.8 + 400 * compute**-0.15
    return compute, loss * (1 + noise * np.random.default_rng(seed).standard_normal(n))


def off_trend_rows() -> list[str]:
    rows = [f"{'rungs':>5} {'bad':>4} {'off':>5} {'alone':>6} {'clean too':>10} {'(one pass)':>10} {'missed':>7}"]
    for n in (5, 6, 8):
        for bad in sorted({0, 1, n // 2, n - 2, n - 1}):
            for off in (0.03, 0.05):
                alone = extra = once = missed = 0
                for seed in range(SEEDS):
                    compute, loss = losses(seed, n)
                    loss[bad] *= 1 + off
                    flagged = leave_one_out(compute, loss).flagged
                    alone += flagged == [bad]
                    extra += any(i != bad for i in flagged)
                    missed += bad not in flagged
                    once += any(i != bad for i in _leave_each_out(compute, loss, 0.95, 0.002, True).flagged)
                rows.append(f"{n:>5} {bad:>4} {off:>5.0%} {alone:>3}/{SEEDS} {extra:>7}/{SEEDS} {once:>7}/{SEEDS} "
                            f"{missed:>4}/{SEEDS}")
        clean = sum(bool(leave_one_out(*losses(seed, n)).flagged) for seed in range(60))
        rows.append(f"{n:>5} none    -  false alarms {clean}/60")
    return rows


def compare_row() -> str:
    stretched = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        c = np.geomspace(1e17, 1e17 * 4**4, 5)
        la = (1.8 + 400 * c**-0.15) * (1 + 0.002 * rng.standard_normal(5))
        lb = (1.8 + 400 * (c / 1.5) ** -0.15) * (1 + 0.002 * rng.standard_normal(5))
        r = compare_ladders(c, la, c, lb, target=c.max() * 10, n_boot=200, seed=seed)
        stretched += any("stretched" in w for w in r.warnings)
    return f"compare, 5 sizes, B at 1.5× A's compute: bands stretched to hold the full fit on {stretched} of 30 ladders"


if __name__ == "__main__":
    print("\n".join(off_trend_rows()))
    print(compare_row())

"""Speed against the peer: the `chinchilla` package (PyPI) and `fits.fit_surface` on Epoch's
Chinchilla points, timed side by side in one run, plus 1,000 bootstrap refits.

    python3 -m venv benchmarks/.venv-peer && benchmarks/.venv-peer/bin/pip install chinchilla
    .venv/bin/python benchmarks/fit_speed.py [--grid 5] [--boots 1000]

The peer runs in its own environment (it is not a dependency of this project) with its README's
start grid (`--grid` values per axis: 5 → 3,125 BFGS starts) and its log-Huber loss. Both
solutions are then scored under both objectives: ours (mean Huber, δ = 1e-3, on log residuals)
and the peer's (mean Huber, δ = 1, on log residuals).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import fit_datasets as ds  # noqa: E402
from fits import bootstrap, fit_surface, huber  # noqa: E402

PEER_PYTHON = HERE / ".venv-peer" / "bin" / "python"
EPOCH = dict(E=1.8169, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658)


def objectives(p: dict, N, D, L) -> tuple[float, float]:
    r = np.log(p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"]) - np.log(L)
    return huber(r, 1e-3), huber(r, 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", type=int, default=5, help="peer start values per axis (README: 5)")
    ap.add_argument("--boots", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats of our fit (median reported)")
    args = ap.parse_args()
    df = ds.chinchilla()
    N, D, L = (df[c].to_numpy(dtype=float) for c in ("params", "tokens", "loss"))

    if not PEER_PYTHON.exists():
        sys.exit(f"no peer environment at {PEER_PYTHON}; create it as the module docstring says")
    csv = ds.DATA / "chinchilla_epoch" / "chinchilla_epoch_tidy.csv"
    t0 = time.perf_counter()
    out = subprocess.run([str(PEER_PYTHON), str(HERE / "fit_peer_chinchilla.py"), str(csv), str(args.grid)],
                         capture_output=True, text=True, check=True)
    peer_wall = time.perf_counter() - t0
    peer = json.loads(out.stdout.strip().splitlines()[-1])

    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fit = fit_surface(N, D, L)
        times.append(time.perf_counter() - t0)
    ours = float(np.median(times))

    t0 = time.perf_counter()
    ens = bootstrap(fit, args.boots, seed=0)
    boot_s = time.perf_counter() - t0

    print(f"peer `chinchilla`: {peer['starts']} BFGS starts on {peer['workers']} workers: fit {peer['seconds']:.1f} s "
          f"(process incl. start-up {peer_wall:.1f} s)")
    print(f"fits.fit_surface: median of {args.repeats}: {ours * 1e3:.1f} ms (first {times[0] * 1e3:.1f} ms)")
    print(f"time ratio (peer fit / ours): {peer['seconds'] / ours:,.0f}x")
    print(f"{'':<10}{'E':>8}{'A':>9}{'B':>9}{'alpha':>8}{'beta':>8}{'ours (δ=1e-3)':>16}{'peer (δ=1)':>14}")
    for name, p in (("ours", fit.params), ("peer", peer["params"]), ("Epoch", EPOCH)):
        o, q = objectives(p, N, D, L)
        print(f"{name:<10}{p['E']:>8.4f}{p['A']:>9.1f}{p['B']:>9.1f}{p['alpha']:>8.4f}{p['beta']:>8.4f}{o:>16.6e}{q:>14.6e}")
    iv = ens.param_intervals(0.9)
    print(f"{ens.n} bootstrap refits over runs: {boot_s:.1f} s ({boot_s / ens.n * 1e3:.1f} ms each, {ens.failed} failed)")
    print("90% intervals: " + "  ".join(f"{k} [{lo:.4g}, {hi:.4g}]" for k, (lo, hi) in iv.items()))


if __name__ == "__main__":
    main()

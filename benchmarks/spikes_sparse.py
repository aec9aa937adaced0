"""Loss spikes on sparsely logged runs: false spikes on clean curves, and planted spikes found.

    .venv/bin/python benchmarks/spikes_sparse.py

`fits.trends.spikes_in_run` (what `ladder check` counts per rung) on synthetic train-loss curves, a power law
in steps with 0.5% noise, logged 18 to 250 times a run: 200 seeds per length. Printed per length: the spikes
found on the clean curves (each one false), and the share of curves with one spike planted (+0.5 nats at 30%
or 70% of the run) where exactly that spike is found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fits.trends import spikes_in_run  # noqa: E402

SEEDS = 200


def main() -> None:
    print(f"{'points':>6}  {'false spikes':>12}  {'planted found':>13}")
    total = 0
    for n in (18, 40, 80, 128, 250):
        steps = np.linspace(1, 5000, n)
        f = steps / 5000
        false = found = 0
        for seed in range(SEEDS):
            loss = (2 + 3 * (steps / 50) ** -0.4) * (1 + 0.005 * np.random.default_rng(seed).standard_normal(n))
            false += spikes_in_run(f, loss, steps)[0]
            spiked = loss.copy()
            spiked[int((0.3 if seed % 2 else 0.7) * n)] += 0.5
            found += spikes_in_run(f, spiked, steps)[0] == 1
        total += false
        print(f"{n:6d}  {false:12d}  {found / SEEDS:13.0%}")
    print(f"false spikes over {5 * SEEDS} clean runs: {total}")


if __name__ == "__main__":
    main()

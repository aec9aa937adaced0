"""The watch's drift rule on synthetic runs whose truth is known: how often it alerts on a run with no drift, and
whether it catches a late drift under an early offset that fades.

Twenty evals every 5% of the plan, a prediction with a ±0.25% 90% band (a band narrow enough that a drift matters), evals with Gaussian noise; 300 seeds per row.
Rows without drift: a run on the prediction, and one 1% above it all along (a constant offset is the band rule's,
not the drift rule's). The drift rows: +0.05% per eval from 30% of the plan, alone and under a 3% early offset that
fades by 25% (the prediction is weakest early; the OLMo 3.2B sits 3–4% above it there).

    .venv/bin/python benchmarks/drift_rule.py      # 7–10 s on 2 cores
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ladder import metrics as keys
from ladder.predict.prediction import Prediction
from ladder.watch import AlertRules, Observed
from ladder.watch import rules as R

STEPS = 2000
EVALS = np.arange(100, STEPS + 1, 100)
SEEDS = 300


def prediction(rel90: float = 0.0025) -> Prediction:
    f = EVALS / STEPS
    med = 2.0 + 1.2 * f**-0.25
    table = pd.DataFrame({"step": EVALS, "tokens": EVALS * 1000, "fraction": f, "compute": EVALS * 1e9, "median": med,
                          "lo50": med * (1 - rel90 / 2.5), "hi50": med * (1 + rel90 / 2.5), "lo90": med * (1 - rel90),
                          "hi90": med * (1 + rel90), "in_assumptions": True})
    return Prediction(run_name="hero", metric=keys.EVAL_LOSS, table=table, planned_steps=STEPS)


def shares(pred: Prediction, shape: np.ndarray, noise: float) -> tuple[float, float, float]:
    """Share of runs with a drift warning or alarm, with an alarm, and the median step of the first alert."""
    warned = alarmed = 0
    first = []
    for seed in range(SEEDS):
        y = pred.table["median"].to_numpy() * shape * (1 + noise * np.random.default_rng(seed).standard_normal(len(EVALS)))
        obs = Observed(pd.DataFrame({keys.EVAL_LOSS: pd.Series(y, index=EVALS)}), planned_steps=STEPS, tokens_per_step=1000)
        alerts = R.drift(obs, pred, AlertRules())
        warned += bool(alerts)
        alarmed += any(a.level == "alarm" for a in alerts)
        first += [alerts[0].step] if alerts else []
    return warned / SEEDS, alarmed / SEEDS, float(np.median(first)) if first else float("nan")


def main() -> None:
    pred = prediction()
    f = EVALS / STEPS
    climb = 1 + 0.0005 * np.maximum(0, np.arange(len(EVALS)) - 5)
    fading = 1 + 0.03 * np.clip(1 - f / 0.25, 0, None)
    rows = [("on the prediction", np.ones(len(EVALS))), ("1% above all along", np.full(len(EVALS), 1.01)),
            ("drift from 30%", climb), ("drift from 30%, 3% early offset fading by 25%", climb * fading)]
    print(f"{'run':<48} {'noise':>6} {'alerted':>8} {'alarmed':>8} {'first alert':>12}")
    for name, shape in rows:
        for noise in (0.001, 0.004):
            w, a, step = shares(pred, shape, noise)
            print(f"{name:<48} {noise:>6.1%} {w:>8.0%} {a:>8.0%} {'-' if np.isnan(step) else f'step {step:,.0f}':>12}")


if __name__ == "__main__":
    main()

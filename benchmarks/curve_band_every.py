"""`ladder fit curve`'s band at the end against how finely the run is sampled (--every).

OLMo's 1×C ladder (`../shared/data/olmo_ladder`, reruns left out): the four smaller sizes as a checkpoint CSV
(compute = FLOPs per token × tokens), the per-fraction law fitted at --every 0.05 and 0.1 and read at the 3.2B run's
compute, beside its actual final loss. The band uses the runs' scatter at each fraction; with one variance pooled over
every fraction, the noisy early fractions set its width at the end, and --every moved it 3×.

    .venv/bin/python benchmarks/curve_band_every.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from ladder.cli import app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = ap.parse_args()
    d = args.data / "olmo_ladder"
    evals = pd.read_csv(d / "ladder_tidy.csv")
    runs = pd.read_csv(d / "ladder_runs.csv").set_index("run_id")
    one = evals[(evals["length_multiplier_xC"] == 1) & ~evals["rerun"].astype(bool)]
    target = one[one["size"] == "3.2B"]
    rungs = one[one["size"] != "3.2B"]
    table = pd.DataFrame({"run_id": rungs["run_id"], "step": rungs["step"],
                          "total_steps": rungs["run_id"].map(runs["total_steps"]),
                          "compute": rungs["flops_per_token"].astype(float) * rungs["tokens"].astype(float), "loss": rungs["loss_c4_en"]})
    t_run = target["run_id"].iloc[0]
    at = float(target["flops_per_token"].iloc[0]) * float(runs.loc[t_run, "total_tokens"])
    actual = float(runs.loc[t_run, "final_c4_loss"])
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "olmo1x.csv"
        table.to_csv(csv, index=False)
        print(f"OLMo 1×C: {table['run_id'].nunique()} rungs → {t_run} at C = {at:.4g}, actual final {actual:.4f}")
        for every in (0.05, 0.1):
            res = CliRunner().invoke(app, ["fit", "curve", "--csv", str(csv), "--total-steps-col", "total_steps",
                                           "--every", str(every), "--at", f"{at:.6g}", "--format", "json"])
            if res.exit_code:
                raise SystemExit(res.output)
            p = json.loads(res.stdout)["prediction"]
            med, lo, hi = p["median"][-1], p["lo90"][-1], p["hi90"][-1]
            print(f"--every {every:<5} final {med:.4f} ({med / actual - 1:+.2%}), 90% band [{lo:.4f}, {hi:.4f}] "
                  f"(±{(hi - lo) / 2 / med:.2%}), actual {'inside' if lo <= actual <= hi else 'OUTSIDE'}")


if __name__ == "__main__":
    main()

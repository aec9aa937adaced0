"""Run by benchmarks/fit_speed.py inside the peer's own environment (benchmarks/.venv-peer, which has
the `chinchilla` package from PyPI): fit Epoch's Chinchilla points with the package's README start
grid and print its parameters and wall time as one JSON line. Not imported by anything else."""

import json
import os
import sys
import tempfile
import time

import numpy as np
import pandas as pd
from chinchilla import Chinchilla
from chinchilla._metrics import log_huber


def main() -> None:
    csv, values = sys.argv[1], int(sys.argv[2])
    df = pd.read_csv(csv)
    df = df[~df["excluded_in_epoch_fit"]]
    with tempfile.TemporaryDirectory() as project:
        pd.DataFrame({"C": df["flops"], "N": df["params"], "D": df["tokens"], "loss": df["loss"]}).to_csv(
            os.path.join(project, "df.csv"), index=False
        )
        grid = dict(  # the README's grid (a, b: log A, log B)
            E=np.linspace(1, 2, values),
            a=np.linspace(1, 10, values),
            b=np.linspace(1, 10, values),
            alpha=np.linspace(0.1, 0.7, values),
            beta=np.linspace(0.1, 0.7, values),
        )
        cc = Chinchilla(project, param_grid=grid, loss_fn=log_huber, log_level=40)
        t0 = time.perf_counter()
        cc.fit()
        seconds = time.perf_counter() - t0
    print(json.dumps({"params": cc.params, "seconds": seconds, "starts": values**5, "workers": os.cpu_count()}))


if __name__ == "__main__":
    main()

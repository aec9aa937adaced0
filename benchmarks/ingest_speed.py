"""Ingest speed: a 1,000,000-row history read from a wandb offline run and from the parquet store.

The run is written by wandb itself (``WANDB_MODE=offline``): 200,000 ``wandb.log`` calls of five
metrics each, so 1,000,000 (step, metric, value) rows, the store's unit. It is written once into
``--workdir`` and reused. Timed, each the best of ``--repeat`` tries:

- reading the ``.wandb`` file into raw rows (LevelDB chunks, CRC checks, protobuf decoding);
- a full pull into an empty store (read, resolve, write parquet, commit);
- reading the run's history back from the store (`Store.history`), and with pandas alone;
- a second pull with nothing new, and a top-up that reads only the last 10% of the file.

    .venv/bin/python benchmarks/ingest_speed.py [--steps 200000] [--workdir /tmp/ladder-ingest-bench]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

METRICS = ("train/loss", "grad/norm/total", "optim/learning_rate", "throughput/tokens_per_second", "eval/loss")
COORDS = {"stop_after_steps": 0, "tokens_per_step": 4096, "active_params": 236544, "total_params": 451584,
          "fit_flops_per_token": 1882368.0, "role": "hero", "group": "bench"}


def write_run(workdir: Path, steps: int) -> Path:
    """One offline run written by wandb; reused when it is already there."""
    done = workdir / f"done-{steps}"
    if done.exists():
        return workdir / "wandb"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_SILENT"] = "true"
    import wandb

    start = time.perf_counter()
    run = wandb.init(project="bench", dir=str(workdir), id="bench0001", name="bench", mode="offline",
                     config={**COORDS, "stop_after_steps": steps},
                     settings=wandb.Settings(console="off", x_disable_stats=True, silent=True))
    for s in range(1, steps + 1):
        run.log({"train/loss": 3.0 + 1.0 / s, "grad/norm/total": 0.5 + 1e-6 * s, "optim/learning_rate": 1e-3 * (1 - s / steps),
                 "throughput/tokens_per_second": 1e5, "eval/loss": 2.9 + 1.0 / s}, step=s)
    run.finish()
    print(f"wrote {steps:,} steps with wandb in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    done.touch()
    return workdir / "wandb"


def best(fn, repeat: int) -> tuple[float, object, float]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000, help="wandb.log calls (5 metrics each)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ladder-ingest-bench")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import pandas as pd

    from ladder.data.sources import OfflineSource
    from ladder.data.sources.leveldb import read_log
    from ladder.data.sources.pull import pull
    from ladder.data.store import Store

    wandb_dir = write_run(args.workdir, args.steps)
    (wandb_file,) = [p for p in wandb_dir.rglob("*.wandb") if "latest-run" not in p.parts]
    rows_expected = args.steps * len(METRICS)
    results = []

    source = OfflineSource(wandb_dir)
    (ref,) = source.runs()
    t, got, med = best(lambda: source.read(ref), args.repeat)
    assert len(got.rows) == rows_expected, len(got.rows)
    results.append((".wandb file → raw rows (OfflineSource.read)", rows_expected, t, med))

    def full_pull():
        root = Path(tempfile.mkdtemp(dir=args.workdir, prefix="store-"))
        result = pull(Store(root), OfflineSource(wandb_dir))
        return root, result

    t, (root, result), med = best(full_pull, args.repeat)
    assert result.pulled[0].rows == rows_expected
    results.append((".wandb file → store (read, resolve, parquet, commit)", rows_expected, t, med))

    store = Store(root)
    t, h, med = best(lambda: store.history("bench0001"), args.repeat)
    assert len(h) == rows_expected
    results.append(("store → DataFrame (Store.history)", rows_expected, t, med))
    history_file = next((root / "history").glob("*.parquet"))
    t, h, med = best(lambda: pd.read_parquet(history_file), args.repeat)
    results.append(("parquet file → DataFrame (pandas.read_parquet alone)", len(h), t, med))
    t, again, med = best(lambda: pull(store, OfflineSource(wandb_dir)), args.repeat)
    assert again.unchanged == 1
    results.append(("second pull, nothing new", 0, t, med))

    # Top-up: the file as a live run left it at 90%, then the rest arrives.
    live_dir = args.workdir / "live" / "wandb" / wandb_file.parent.name
    shutil.rmtree(args.workdir / "live", ignore_errors=True)
    live_dir.mkdir(parents=True)
    data = wandb_file.read_bytes()
    live = live_dir / wandb_file.name
    live.write_bytes(data[: int(len(data) * 0.9)])
    live_source = OfflineSource(args.workdir / "live")
    (live_ref,) = live_source.runs()
    first = live_source.read(live_ref)
    live.write_bytes(data)
    t, top, med = best(lambda: live_source.read(live_ref, first.cursor), args.repeat)
    assert len(first.rows) + len(top.rows) == rows_expected and not top.replace
    results.append(("top-up read of the last 10% (cursor)", len(top.rows), t, med))
    t, log, med = best(lambda: read_log(wandb_file), args.repeat)
    results.append((f"LevelDB chunks + CRC only ({len(log.records):,} records, {len(data) / 2**20:.0f} MiB)", rows_expected, t, med))

    print("| what | rows | best s | median s | rows/s (best) |\n|---|---:|---:|---:|---:|")
    for what, rows, t, med in results:
        rate = f"{rows / t:,.0f}" if rows else "-"
        print(f"| {what} | {rows:,} | {t:.3f} | {med:.3f} | {rate} |")
    for p in args.workdir.glob("store-*"):
        shutil.rmtree(p, ignore_errors=True)


if __name__ == "__main__":
    main()

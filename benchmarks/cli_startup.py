"""CLI start-up time: `ladder --help`, and `ladder runs` on the demo's store, each in fresh processes.

Every run is a new interpreter, so the time is what a user waits for: Python's start, the imports the
command needs, and the command itself. Prints the median, the fastest and the slowest of ``--repeat``
runs. `ladder runs` is timed only when the store exists (``ladder demo`` writes demo/store).

    .venv/bin/python benchmarks/cli_startup.py [--repeat 10] [--store demo/store]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ladder_command() -> list[str]:
    """The installed `ladder` script beside this interpreter, else `python -c` on the same entry point."""
    script = Path(sys.executable).with_name("ladder")
    if script.exists():
        return [str(script)]
    found = shutil.which("ladder")
    return [found] if found else [sys.executable, "-c", "from ladder.cli import main; main()"]


def time_runs(args: list[str], repeat: int) -> list[float]:
    """Seconds of each of `repeat` fresh processes; a failing command stops the benchmark."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(args)} exited with {done.returncode}:\n{done.stderr}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="Fresh processes per command.")
    parser.add_argument("--store", type=Path, default=Path("demo/store"), help="Store for `ladder runs`.")
    opts = parser.parse_args()
    ladder = ladder_command()
    cases = [("ladder --help", [*ladder, "--help"])]
    if (ROOT / opts.store).is_dir():
        cases.append((f"ladder runs --store {opts.store}", [*ladder, "runs", "--store", str(opts.store)]))
    else:
        print(f"{opts.store}: no store here (run `ladder demo`); `ladder runs` not timed")
    for name, args in cases:
        t = time_runs(args, opts.repeat)
        print(f"{name:<32} median {statistics.median(t):.3f} s  (min {min(t):.3f}, max {max(t):.3f}, "
              f"{opts.repeat} runs)")


if __name__ == "__main__":
    main()

"""What a training run leaves in its run directory (the metric keys it logs: `ladder.metrics`).

A run directory holds:

- ``run.yaml``: the `RunConfig` the run was started with (its ``coordinates`` block included);
- ``metrics.jsonl``: one JSON object per line, ``{"step": int, "tokens": int, "time": float, KEY: value, ...}``.
  ``step`` counts optimizer updates completed. Several lines may share a step (train and eval
  metrics are written separately); a reader merges them, the later value winning. A resumed run
  truncates the file to its checkpoint first, so a clean file has no step twice per key, and then
  writes a resume marker ``{"step": k, "resumed_from": k}``. Steps never go back except right after
  such a marker (a trainer that appends on resume instead of truncating writes it too): a step that
  goes back without one is refused, since it is more likely a broken file than a restart;
- ``status.json``: ``{"state": "running" | "finished" | "crashed", "step": int, "updated": float}``, written
  as training starts, at each eval and checkpoint, and as it ends (``step``: the last step completed then);
- ``checkpoints/`` and ``wandb/`` (wandb's own offline or online run folders).
"""

CONFIG_FILE = "run.yaml"
METRICS_FILE = "metrics.jsonl"
STATUS_FILE = "status.json"
RESUME_KEY = "resumed_from"
"""The key of the resume marker line in ``metrics.jsonl``: the step the run restarted from."""
RESUME_HINT_ENV = "LADDER_RESUME_HINT"
"""An environment variable a launcher sets for its trainer: how a user resumes the run with it ("run `ladder demo`
again"), said by the trainer when it is stopped; without it the trainer says ``--resume``."""
CHECKPOINT_DIR = "checkpoints"
WANDB_DIR = "wandb"


def last_checkpoint(run_dir) -> int | None:
    """The step of the run's latest complete checkpoint (a folder named by its step), or None when it has none."""
    from pathlib import Path

    folder = Path(run_dir) / CHECKPOINT_DIR
    steps = [int(p.name) for p in folder.iterdir() if p.name.isdigit() and p.is_dir()] if folder.is_dir() else []
    return max(steps, default=None)


def write_status(run_dir, state: str, step: int) -> None:
    """Write ``status.json`` (atomically): the run's `state` and its last completed `step`."""
    import json
    import time
    from pathlib import Path

    from ladder.files import write_text_atomic

    status = {"state": state, "step": int(step), "updated": time.time()}
    write_text_atomic(Path(run_dir) / STATUS_FILE, json.dumps(status) + "\n")


def metric_records(run_dir) -> list[dict]:
    """The JSON objects of the run's ``metrics.jsonl``, in order ([] without one); a line that is no JSON object
    (torn by a kill mid-write, a disk that filled) is passed over, as the store's reader drops a torn line."""
    import json
    from pathlib import Path

    try:
        lines = (Path(run_dir) / METRICS_FILE).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out

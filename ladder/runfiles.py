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
    from pathlib import Path

    from ladder.files import write_text_atomic

    write_text_atomic(Path(run_dir) / STATUS_FILE, _status_text(state, step))


def write_status_anyway(run_dir, state: str, step: int) -> bool:
    """Write the run's status as `write_status` does (atomically); where that fails, overwrite the small file in
    place, since a full disk has no room for the temporary copy an atomic write needs, and a run that stopped must
    not go on reading as running. Whether either write succeeded."""
    from pathlib import Path

    try:
        write_status(run_dir, state, step)
        return True
    except OSError:
        pass
    try:
        _overwrite_in_place(Path(run_dir) / STATUS_FILE, _status_text(state, step).encode())
    except OSError:
        return False
    return True


def _status_text(state: str, step: int) -> str:
    import json
    import time

    return json.dumps({"state": state, "step": int(step), "updated": time.time()}) + "\n"


def _overwrite_in_place(path, data: bytes) -> None:
    """Write `data` over the file's own blocks (a status is a few dozen bytes: within the block the old one holds, so
    a full disk need give no new one)."""
    import os

    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
    try:
        os.write(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def last_logged_step(run_dir) -> int | None:
    """The step of the last whole record of the run's ``metrics.jsonl`` (read from its end), or None without one."""
    import json
    from pathlib import Path

    try:
        with open(Path(run_dir) / METRICS_FILE, "rb") as f:
            f.seek(max(f.seek(0, 2) - (1 << 16), 0))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(tail):  # a line torn by the kill, or cut by the seek, is passed over
        try:
            step = json.loads(line).get("step")
        except (ValueError, AttributeError):
            continue
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    return None


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

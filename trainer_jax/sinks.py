"""Where metrics go: the run directory's ``metrics.jsonl`` (always), wandb (unless disabled), and
the run's ``status.json``. Each sink has ``log(metrics, step)`` and ``close(ok)``; `NullSink` does
nothing, so the train loop never asks whether wandb is on.

File formats are those of `ladder.runfiles`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Protocol

from ladder import runfiles
from ladder.config.runconfig import RunConfig
from ladder.errors import LadderError
from ladder.files import atomic_path

WANDB_MODES = ("online", "offline", "disabled")


class Sink(Protocol):
    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self, ok: bool) -> None: ...


class NullSink:
    def log(self, metrics: dict[str, float], step: int) -> None:
        pass

    def close(self, ok: bool) -> None:
        pass


class FanOut:
    def __init__(self, *sinks: Sink):
        self.sinks = sinks

    def log(self, metrics: dict[str, float], step: int) -> None:
        for sink in self.sinks:
            sink.log(metrics, step)

    def close(self, ok: bool) -> None:
        for sink in self.sinks:
            sink.close(ok)


# ---- metrics.jsonl ------------------------------------------------------------------------------
class JsonlSink:
    """Appends ``{"step", "tokens", "time", KEY: value, ...}`` lines, flushed at once."""

    def __init__(self, path: Path, tokens_per_step: int):
        self.path = path
        self.tokens_per_step = tokens_per_step
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def log(self, metrics: dict[str, float], step: int) -> None:
        line = {"step": step, "tokens": step * self.tokens_per_step, "time": time.time()}
        # NaN and inf are written as JSON's common extension (NaN, Infinity), which json.loads reads.
        line.update({k: float(v) for k, v in metrics.items()})
        try:
            self._file.write(json.dumps(line) + "\n")
            self._file.flush()
        except OSError as exc:  # a full disk: named, as the system does not
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def close(self, ok: bool) -> None:
        """Close the file. A run that failed may hold a line the disk refused (a full disk), which closing would try
        again: dropped then, so that the failure is said rather than this."""
        try:
            self._file.close()
        except OSError:
            if ok:
                raise


def truncate_metrics(path: Path, last_step: int) -> int:
    """Keep only lines with ``step <= last_step`` (a torn last line is dropped) and add the resume
    marker (`ladder.runfiles.RESUME_KEY`); returns lines kept. A run starting from scratch writes nothing."""
    if not path.exists() or last_step == 0 and not path.stat().st_size:
        return 0
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] <= last_step:
            kept.append(line)
    # The resume marker: a reader that saw later steps before the truncation knows they are abandoned.
    marker = json.dumps({"step": last_step, runfiles.RESUME_KEY: last_step, "time": time.time()})
    with atomic_path(path) as tmp:
        tmp.write_text("".join(x + "\n" for x in [*kept, marker]), encoding="utf-8")
    return len(kept)


# ---- wandb ----------------------------------------------------------------------------------------
def wandb_mode(setting: str) -> str:
    """The config's choice, auto resolved by the API key, and WANDB_MODE winning over both."""
    env = os.environ.get("WANDB_MODE", "").strip().lower()
    if env:
        mode = {"dryrun": "offline", "run": "online", "disable": "disabled"}.get(env, env)
        if mode not in WANDB_MODES:
            raise LadderError(f"WANDB_MODE={env!r} is not one of {', '.join(WANDB_MODES)}")
        return mode
    if setting == "auto":
        return "online" if os.environ.get("WANDB_API_KEY") else "offline"
    return setting


def check_wandb_login(setting: str, mode: str) -> None:
    """Refuse the resolved `mode` online without wandb credentials, before anything is compiled or written
    (wandb itself would fail, or wait at a login prompt, only once the run has started)."""
    if mode != "online" or _wandb_credentials_found():
        return
    env = os.environ.get("WANDB_MODE", "").strip()
    chosen = f"WANDB_MODE={env}" if env else f"logging.wandb={setting}"
    raise LadderError(
        f"{chosen} needs a wandb API key and none is configured: set WANDB_API_KEY or run `wandb login`, "
        f"or {_offline_instead()} (upload later with `wandb sync`)"
    )


def _offline_instead() -> str:
    """How to train offline: WANDB_MODE wins over the config where it is set."""
    return ("set WANDB_MODE=offline (it wins over the config's logging.wandb)" if os.environ.get("WANDB_MODE", "").strip()
            else "use logging.wandb=offline")


def _wandb_credentials_found() -> bool:
    """Whether wandb finds an API key (environment, .netrc or its settings), asked without a prompt or the
    network. Where this wandb version cannot be asked, True: `WandbSink` reports a missing key instead."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    try:
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib import wbauth  # private to wandb: guarded below

        host = wandb_setup.singleton().settings.base_url
        found = wbauth.authenticate_session(host=host, source="trainer_jax", prompt=False, update_session=False)
    except Exception:  # noqa: BLE001 - another wandb version (or a malformed key): let wandb.init decide
        return True
    return found is not None


def wandb_run_id(cfg: RunConfig) -> str:
    """Stable across restarts of the same run (group and name), so a resume continues its wandb run."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{cfg.group}-{cfg.name}" if cfg.group else cfg.name).strip("-")
    digest = hashlib.sha256(f"{cfg.group}/{cfg.name}".encode()).hexdigest()[:10]
    return f"{slug[:48]}-{digest}"


class WandbSink:
    """One wandb run in ``run_dir/wandb``: the coordinates at the top of its config, the whole run
    config under ``run_config``."""

    def __init__(self, cfg: RunConfig, run_dir: Path, mode: str, extra_config: dict[str, Any]):
        import wandb

        config = {**cfg.coordinates(), **extra_config, "run_config": cfg.to_dict()}
        settings = wandb.Settings(console="off", x_disable_stats=True, silent=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._run = wandb.init(
                project=cfg.logging.project,
                entity=cfg.logging.entity,
                group=cfg.group or None,
                name=cfg.name,
                id=wandb_run_id(cfg),
                resume="allow",
                dir=str(run_dir),
                mode=mode,
                config=config,
                settings=settings,
            )
        except (wandb.errors.UsageError, wandb.errors.AuthenticationError) as exc:
            first = (str(exc).strip().splitlines() or [""])[0].rstrip(".")
            raise LadderError(
                f"wandb {mode} could not start: {first} (or set WANDB_API_KEY, or {_offline_instead()})"
            ) from None

    def log(self, metrics: dict[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def close(self, ok: bool) -> None:
        """Finish the wandb run. Where the run failed, wandb's own failure to write its files (a full disk) is
        dropped: the run's failure is the one to say."""
        try:
            self._run.finish(exit_code=0 if ok else 1)
        except OSError:
            if ok:
                raise


def make_sinks(cfg: RunConfig, run_dir: Path, mode: str, extra_config: dict[str, Any], is_writer: bool) -> Sink:
    """The sinks of one process: the writer (process 0) logs, every other process gets a `NullSink`.
    `mode` is the resolved wandb mode (`wandb_mode`)."""
    if not is_writer:
        return NullSink()
    local = JsonlSink(run_dir / runfiles.METRICS_FILE, cfg.tokens_per_step)
    if mode == "disabled":
        return local
    return FanOut(local, WandbSink(cfg, run_dir, mode, extra_config))

"""Orbax checkpoints of the train state, and the check that a checkpoint belongs to this run.

Each checkpoint step folder holds two items: ``state`` (params, optimizer state, step) and
``meta`` (JSON: the training-relevant part of the run config, the corpus digest, the parameter
count). Orbax writes a step to a temporary folder and renames it when complete, so a run killed
while saving leaves its previous checkpoint intact.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from ladder.config.runconfig import RunConfig
from ladder.config.schedule import Schedule
from ladder.config.yamlio import build
from ladder.errors import LadderError

TRAINING_FIELDS = ("spec", "seq_len", "batch_size", "schedule", "optimizer", "moe", "data", "seed")
"""Run config fields that decide the trained weights; a checkpoint may only resume under the same ones
(the schedule may differ after the checkpoint's step: an edit made while the run was stopped)."""


def checkpoint_meta(cfg: RunConfig, data_info: dict[str, Any], n_params: int) -> dict[str, Any]:
    full = cfg.to_dict()
    return {
        "training_config": {k: full[k] for k in TRAINING_FIELDS},
        "corpus_sha256": data_info.get("data/corpus_sha256"),
        "n_params": n_params,
        "name": cfg.name,
    }


TORN = ".orbax-checkpoint-tmp"
"""What orbax names a checkpoint folder while it writes it."""


class Checkpointer:
    """Save and restore the train state under ``run_dir/checkpoints``."""

    def __init__(self, directory: Path, keep: int):
        if keep <= 0:
            raise LadderError(f"checkpoint.keep={keep} must be at least 1")
        # A checkpoint a killed trainer was writing never completed: removed here, under the run's lock, rather
        # than by orbax with a warning on the resumed run's screen.
        for torn in directory.glob(f"*{TORN}*"):
            shutil.rmtree(torn, ignore_errors=True)
        self._dir = directory
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False)
        self._mgr = ocp.CheckpointManager(directory.absolute(), options=options, item_names=("state", "meta"))

    def latest_step(self) -> int | None:
        return self._mgr.latest_step()

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        """Save `state` at `step`. A write the disk refused (full, read-only) is an `OSError` naming the step's
        folder (orbax's writer reports it as a `ValueError` with the system's error code in its text)."""
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        held: list = []
        try:
            with _held_reports(ORBAX_LOGGER, held):
                self._mgr.save(step, args=args, force=True)
                self._mgr.wait_until_finished()
        except BaseException as exc:  # a stop (KeyboardInterrupt) too: what was held goes on
            refused = disk_error(exc, self._dir / str(step)) if isinstance(exc, Exception) else None
            if refused is not None:
                raise refused from exc  # said in one line: the writer threads' tracebacks of it are dropped
            _release(held)
            raise
        _release(held)

    def read_meta(self, step: int) -> dict[str, Any]:
        return dict(self._mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"])

    def restore(self, step: int, abstract_state: Any) -> Any:
        """The state saved at `step`, laid out like `abstract_state` (shapes, dtypes, shardings)."""
        args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state))
        return self._mgr.restore(step, args=args)["state"]

    def close(self) -> None:
        self._mgr.close()


ORBAX_LOGGER = "absl"
"""The logger orbax's writer threads report through: a refused write logs a traceback from each of them."""


@contextlib.contextmanager
def _held_reports(logger: str, held: list) -> Iterator[None]:
    """Hold back in `held`, for the block, the records of the logger `logger` and the errors the writer's threads
    cannot raise (`sys.unraisablehook`: tensorstore's callbacks into an event loop orbax has closed); `_release` lets
    them through after."""

    class Hold(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            held.append(record)
            return False

    log, hold, hook = logging.getLogger(logger), Hold(), sys.unraisablehook
    log.addFilter(hold)
    sys.unraisablehook = held.append
    try:
        yield
    finally:
        log.removeFilter(hold)
        sys.unraisablehook = hook


def _release(held: list) -> None:
    for report in held:
        if isinstance(report, logging.LogRecord):
            logging.getLogger(report.name).handle(report)
        else:
            sys.unraisablehook(report)


OS_ERROR_CODE = re.compile(r"\[os_error_code='(\d+)'\]")
"""How tensorstore (orbax's writer) names the system's error in the message of the ValueError it raises."""


def disk_error(exc: BaseException, where: Path) -> OSError | None:
    """`exc` as the `OSError` it is underneath (tensorstore reports ENOSPC as a ValueError, with the error's code
    in its text), naming `where` when it names no file; None for an error that is not the system's."""
    if isinstance(exc, OSError):
        return exc
    found = OS_ERROR_CODE.search(str(exc))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code), str(where))


def check_compatible(saved: dict[str, Any], current: dict[str, Any], step: int, where: Path) -> None:
    """Raise a `LadderError` unless a checkpoint saved at `step` can continue under `current` meta."""
    old, new = saved["training_config"], current["training_config"]
    differ = [k for k in TRAINING_FIELDS if k != "schedule" and old.get(k) != new.get(k)]
    if old.get("schedule") != new.get("schedule") and not _same_lr_until(old["schedule"], new["schedule"], step):
        differ.append("schedule (its learning rates before the checkpoint's step)")
    if differ:
        raise LadderError(
            f"the checkpoint in {where} (step {step}) was written by a different run config: "
            f"{', '.join(differ)} differ. Resume with the original config, or use a fresh run_dir"
        )
    if saved.get("corpus_sha256") != current.get("corpus_sha256"):
        raise LadderError(
            f"the checkpoint in {where} was trained on a different standard-library corpus (another "
            "Python version?): resuming would change the data order. Resume under the original "
            "Python, or use a fresh run_dir"
        )


def _same_lr_until(old: dict[str, Any], new: dict[str, Any], step: int) -> bool:
    a, b = build(Schedule, old), build(Schedule, new)
    if step > b.horizon:
        return False
    return bool(np.array_equal(a.lr(np.arange(step)), b.lr(np.arange(step))))


def abstract_like(tree: Any, shardings: Any) -> Any:
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)

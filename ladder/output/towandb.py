"""A prediction as a wandb run, so wandb's own panels show the predicted curve next to the target's.

`log_prediction` writes one run named ``<target>-predicted`` (job type ``prediction``) in the target's
group. Each row of the prediction's table is logged at the target's step: ``predicted/<metric>`` is
the median and ``predicted/<metric>_lo50`` ... ``_hi90`` its bands, so a panel of ``<metric>`` and
``predicted/<metric>`` shares the x-axis (wandb's step). Non-finite values are left out of their row.
The summary holds the final predicted value and its 90% band.

wandb's mode is its own (``WANDB_MODE``, else ``wandb offline`` / ``wandb online``); an online run
needs an API key (``WANDB_API_KEY`` or ``wandb login``), checked before wandb is started so a missing
key is an error at once rather than a prompt or a network wait. Offline, the call returns once the
run's ``.wandb`` file holds its end (wandb writes it after ``finish`` returns), so the folder it
returns can be read at once.
"""

from __future__ import annotations

import math
import netrc
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ladder.errors import LadderError
from ladder.predict.prediction import Prediction

BANDS = ("lo50", "hi50", "lo90", "hi90")
_NAME = r"[^\s/\\#?%:]+"
_PROJECT = re.compile(rf"^(?:(?P<entity>{_NAME})/)?(?P<project>{_NAME})$")
_MODES = {"online": "online", "run": "online", "shared": "online", "offline": "offline", "dryrun": "offline",
          "disabled": "disabled"}


def check_ready(project: str) -> str:
    """Before any work: `project` is well formed and wandb can log to it (online with a key, or offline);
    its mode. Raises LadderError naming what to set otherwise."""
    parse_project(project)
    import wandb

    return _mode(wandb)


def log_prediction(pred: Prediction, project: str, *, group: str | None = None, root: Path | None = None,
                   coords: dict | None = None) -> str:
    """Log `pred` as a new wandb run in `project` ("ENTITY/PROJECT" or "PROJECT"); return the run's path.

    The path is "entity/project/run_id" online, the offline run folder offline. `group` is the
    target's group; `root` is where wandb writes its files (default: ``WANDB_DIR``, else the current
    folder); `coords` the target's coordinates (active_params, stop_after_steps, ...), kept in the run's
    config with role "prediction" so that `ladder pull` reads the run back into a store, where no fit
    takes it for a rung.
    """
    entity, name = parse_project(project)
    import wandb  # imported here: wandb is slow to import

    from ladder.data.sources.wandb_api import scrub

    try:
        mode = _mode(wandb)
        if root is not None:
            Path(root).mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            entity=entity,
            project=name,
            name=f"{pred.run_name}-predicted",
            job_type="prediction",
            group=group,
            config={"method": pred.method, "settings": pred.settings, "metric": pred.metric, "target": pred.run_name}
            | ({**coords, "role": "prediction"} if coords else {}),
            dir=str(root) if root is not None else None,
            mode=mode,
            reinit="create_new",
            settings=wandb.Settings(console="off", x_disable_stats=True, silent=True),
        )
    except wandb.errors.Error as exc:
        raise LadderError(f"wandb could not start a run in {project!r}: {scrub(str(exc))}") from None
    ok = False
    try:
        for step, values in prediction_rows(pred):
            run.log(values, step=step)
        run.summary.update(final_values(pred))
        path = run.path if mode == "online" else str(run.settings.sync_dir)
        ok = True
    finally:
        run.finish(exit_code=0 if ok else 1)
    if mode == "offline":
        _wait_until_written(Path(path))
    return path


def parse_project(project: str) -> tuple[str | None, str]:
    """(entity or None, project) from "ENTITY/PROJECT" or "PROJECT"."""
    m = _PROJECT.match(project or "")
    if m is None:
        raise LadderError(
            f"wandb project {project!r} is not ENTITY/PROJECT or PROJECT "
            "(each part non-empty, without spaces or any of / \\ # ? % :)"
        )
    return m.group("entity"), m.group("project")


def prediction_rows(pred: Prediction) -> Iterator[tuple[int, dict[str, float]]]:
    """(target step, finite predicted values) per row of the table, in step order; rows with none are skipped."""
    key = f"predicted/{pred.metric}"
    table = pred.table.sort_values("step", kind="stable")
    for row in table.to_dict("records"):
        values = {key: row["median"], **{f"{key}_{b}": row[b] for b in BANDS}}
        values = {k: float(v) for k, v in values.items() if _finite(v)}
        if values:
            yield int(row["step"]), values


def final_values(pred: Prediction) -> dict[str, float]:
    """The summary: the last row's median and 90% band, and its step."""
    key = f"predicted/{pred.metric}"
    final = pred.table.sort_values("step", kind="stable").iloc[-1]
    values = {key: final["median"], f"{key}_lo90": final["lo90"], f"{key}_hi90": final["hi90"]}
    out = {k: float(v) for k, v in values.items() if _finite(v)}
    return {**out, "predicted/final_step": int(final["step"])}


def _wait_until_written(run_dir: Path, timeout_s: float = 30.0) -> None:
    """Wait for the offline run file to hold the run's end: wandb writes it after `finish` returns."""
    from ladder.data.sources.offline import OfflineSource

    source = OfflineSource(run_dir)
    deadline = time.monotonic() + timeout_s
    said = ""
    while True:
        (ref,) = source.runs()
        try:  # a file that holds its header only (wandb has not flushed its first chunk) is not written yet
            if source.read(ref).state == "finished":
                return
        except LadderError as exc:
            said = f" (last read: {exc})"
        if time.monotonic() > deadline:
            raise LadderError(
                f"{run_dir}: wandb had not finished writing the run {timeout_s:.0f} s after it ended{said}; "
                "look at the folder's logs/debug-internal.log"
            )
        time.sleep(0.05)


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


# ---- wandb's mode and credentials ---------------------------------------------------------------------
def _mode(wandb: Any) -> str:
    """wandb's own choice of mode; an online one must have a key before wandb is started."""
    settings = wandb.setup().settings
    mode = _MODES.get(str(settings.mode).strip().lower())
    if mode is None:
        raise LadderError(f"wandb mode {settings.mode!r} is not one of online, offline (set WANDB_MODE)")
    if mode == "disabled":
        raise LadderError("wandb is disabled (WANDB_MODE=disabled): nothing would be logged; set WANDB_MODE=offline or online")
    if mode == "online" and not _has_key(settings):
        raise LadderError(
            "wandb is online but has no API key: set WANDB_API_KEY (or run `wandb login`), "
            "or set WANDB_MODE=offline to write the run locally and `wandb sync` it later"
        )
    return mode


def _has_key(settings: Any) -> bool:
    """Whether wandb has credentials without asking the server: the environment, its settings or ``.netrc``."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE") or settings.api_key:
        return True
    try:
        from wandb.sdk.lib.wbauth import read_netrc_auth
    except ImportError:  # older wandb: read .netrc for the server's host directly
        return _netrc_key(settings.base_url)
    return bool(read_netrc_auth(host=settings.base_url))


def _netrc_key(base_url: str) -> bool:
    path = Path(os.environ.get("NETRC") or "~/.netrc").expanduser()
    try:
        creds = netrc.netrc(path).authenticators(urlsplit(base_url).netloc)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(creds and creds[2])

"""Whether the rungs a prediction was made from changed in the store since it was made.

A table imported again with other values, a rung that trained on, coordinates given anew: the
prediction was fitted on what the store held then. A digest of each rung's stored data (its
coordinates, state and schedule, and its history of the predicted metric and the LR) is kept with
the prediction (`Prediction.rung_data`), and `changed_rungs` compares it with the store's now.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from ladder import metrics as keys
from ladder.data.sources.coords import FIELDS, SCHEDULE

if TYPE_CHECKING:
    from ladder.data.store import Store
    from ladder.predict.prediction import Prediction


def rung_data(store: Store, group: str, names: list[str], metric: str) -> dict[str, Any]:
    """What `Prediction.rung_data` keeps of the rungs `names` of `group`: the group and each rung's digest."""
    return {"group": group, "digests": _digests(store, group, names, metric)}


def changed_rungs(store: Store, pred: Prediction) -> list[str]:
    """The rungs of `pred` whose stored data differ now from what it was made from (a rung no longer stored is left
    to those that need it to say); none for a prediction that kept no digests (an earlier version's)."""
    data = pred.rung_data
    digests = data.get("digests") if isinstance(data, dict) else None
    if not isinstance(digests, dict) or not digests:
        return []
    now = _digests(store, str(data.get("group", "")), [str(n) for n in digests], pred.metric)
    return [name for name, digest in digests.items() if name in now and now[name] != digest]


def stale_warning(store: Store, pred: Prediction) -> str | None:
    """What to say where `changed_rungs` finds any; None where none changed."""
    changed = changed_rungs(store, pred)
    if not changed:
        return None
    from ladder.data.runview import named  # (it loads fits: not for a watch's start)

    listed = named(changed)
    who = f"rung {listed}" if len(changed) == 1 else f"rungs {listed}" if len(changed) <= 8 else listed.replace("runs", "rungs", 1)
    from ladder.predict.prediction import CONFIG_WRITTEN

    written = pred.schedule.get(CONFIG_WRITTEN)
    again = (f"`ladder predict` the edited plan the replan wrote beside it ({written}) again, not the plan it edits"
             if isinstance(written, str) else "`ladder predict` again")
    return (f"the store's data of {who} changed since this prediction was made (values imported or pulled again, or "
            f"coordinates given anew): it was fitted on the old data; {again} to fit the new")


def _digests(store: Store, group: str, names: list[str], metric: str) -> dict[str, str]:
    runs = store.runs()
    rows = runs[(runs["group"] == group) & runs["name"].isin(names)]
    if rows.empty:
        return {}
    ids = rows["run_id"].astype(str).tolist()
    hist = store.history(ids, [metric, keys.LEARNING_RATE], include_nonfinite=True)
    out = {}
    for run_id, (_, row) in zip(ids, rows.iterrows()):
        h = hist[hist["run_id"].astype(str) == run_id].sort_values(["metric", "step"])
        config = json.loads(row.get("config_json") or "{}")
        held = [[_plain(row[c]) for c in FIELDS], str(row["state"]), config.get(SCHEDULE),
                h["metric"].astype(str).tolist(), h["step"].astype(int).tolist(), h["value"].astype(float).tolist()]
        out[str(row["name"])] = hashlib.sha256(json.dumps(held, default=str).encode()).hexdigest()[:16]
    return out


def _plain(value: Any) -> Any:
    """A runs-table value as JSON writes it the same each time (numpy numbers as Python ones; missing as None)."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return None if f != f else f

"""Properties of the parsers where data enters: CSV tables, coordinates, and metrics.jsonl lines.

For any input, a parser either returns values inside the documented ranges or raises a `LadderError`
(one line for the user); nothing else escapes. For valid input, what is stored is exactly what was given.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ladder import runfiles
from ladder.data.sources import CoordinateOverrides, LocalSource, TableSource
from ladder.data.sources.coords import FIELDS, INT_FIELDS, resolve_coordinates
from ladder.data.sources.pull import pull
from ladder.data.sources.tabular import ColumnMap
from ladder.data.store import Store
from ladder.errors import LadderError

COORDS = {"stop_after_steps": 100, "tokens_per_step": 10, "active_params": 1000, "total_params": 5000,
          "fit_flops_per_token": 6000.0}
MAX = 2**63 - 1
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

run_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
steps = st.integers(min_value=0, max_value=10**12)
losses = st.floats(min_value=0.01, max_value=1e6, allow_nan=False, allow_infinity=False)
anything = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**40), max_value=10**40), st.floats(),
    st.text(max_size=20), st.lists(st.integers(), max_size=3),
)


@contextlib.contextmanager
def _temp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ladder-prop-") as d:
        yield Path(d)


# ---- CSV ------------------------------------------------------------------------------------------
def _write_csv(path: Path, rows: list[list]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "step", "loss"])
        w.writerows(rows)
    return path


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(run_ids | st.sampled_from(["0", "00", "null", "NA", "nan", "None"]),
                       st.dictionaries(steps, losses, min_size=1, max_size=6), min_size=1, max_size=4))
def test_csv_import_stores_exactly_the_table(table):
    with _temp() as tmp:
        path = _write_csv(tmp / "t.csv", [[run, step, repr(loss)] for run, series in table.items() for step, loss in series.items()])
        store = Store(tmp / "store")
        overrides = CoordinateOverrides(all_runs={**{k: str(v) for k, v in COORDS.items()}, "stop_after_steps": str(10**12)})
        pull(store, TableSource(path, ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step")),
             overrides=overrides, full=True)
        h = store.history(include_nonfinite=True)
        got = {(str(r), int(s)): float(v) for r, s, v in zip(h["run_id"], h["step"], h["value"])}
        assert got == {(run, step): loss for run, series in table.items() for step, loss in series.items()}


cells = st.one_of(st.text(max_size=8), st.integers(min_value=-(10**25), max_value=10**25).map(str),
                  st.floats().map(repr), st.sampled_from(["", "nan", "inf", "-1", "1e30", "1.5", "\x00", '"', "\n", ","]))


@FAST
@given(st.lists(st.lists(cells, min_size=1, max_size=4), min_size=0, max_size=6))
def test_any_csv_is_read_or_refused_with_one_line(rows):
    with _temp() as tmp:
        path = _write_csv(tmp / "t.csv", rows)
        source = TableSource(path, ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step"))
        try:
            for ref in source.runs():
                got = source.read(ref)
                s = got.rows["step"].to_numpy()
                assert ((s >= 0) & (s <= MAX)).all()
        except LadderError as exc:
            assert "\n" not in str(exc)


@FAST
@given(st.binary(max_size=200))
def test_any_bytes_as_csv_are_read_or_refused(data):
    with _temp() as tmp:
        path = tmp / "t.csv"
        path.write_bytes(data)
        source = TableSource(path, ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step"))
        try:
            for ref in source.runs():
                source.read(ref)
        except LadderError:
            pass


# ---- coordinates --------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), st.one_of(anything, st.sampled_from(["unknown", "1e26", "1_000", " 7 "]))))
def test_coordinates_are_in_range_or_refused(values):
    config = {**COORDS, **values}
    try:
        coords, _ = resolve_coordinates("r", "r", "r", config, {}, CoordinateOverrides())
    except LadderError as exc:
        assert str(exc).startswith("run r:")
        return
    for f in INT_FIELDS:
        v = getattr(coords, f)
        assert v is None or (isinstance(v, int) and 0 < v <= MAX), (f, v)
    assert coords.fit_flops_per_token is None or (math.isfinite(coords.fit_flops_per_token) and coords.fit_flops_per_token > 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=4))
def test_coordinate_flags_parse_or_refuse(items):
    try:
        parsed = CoordinateOverrides.parse(items)
    except LadderError as exc:
        assert "--coord" in str(exc)
        return
    assert all(isinstance(v, str) for v in parsed.all_runs.values())


# ---- metrics.jsonl --------------------------------------------------------------------------------
def _read_lines(lines: list[str]):
    with _temp() as tmp:
        run = tmp / "run"
        run.mkdir()
        (run / runfiles.METRICS_FILE).write_text("".join(x + "\n" for x in lines))
        (run / runfiles.CONFIG_FILE).write_text(json.dumps({"name": "r", "coordinates": COORDS}))
        source = LocalSource(run)
        (ref,) = source.runs()
        return source.read(ref)


records = st.dictionaries(st.sampled_from(["step", "tokens", "train/loss", "eval/loss", runfiles.RESUME_KEY]), anything)


@FAST
@given(st.lists(st.one_of(records.map(json.dumps), st.text(max_size=20)), max_size=12))
def test_any_jsonl_is_read_in_range_or_refused(lines):
    try:
        got = _read_lines(lines)
    except LadderError as exc:
        assert "metrics.jsonl: line " in str(exc)
        return
    s = got.rows["step"].to_numpy()
    assert ((s >= 0) & (s <= MAX)).all()
    t = got.rows["tokens"].to_numpy()
    assert (np.isnan(t) | ((t >= 0) & (t < 2.0**63))).all()


@FAST
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), losses), min_size=1, max_size=20))
def test_steps_in_order_are_read_exactly(pairs):
    pairs = sorted(pairs, key=lambda p: p[0])
    got = _read_lines([json.dumps({"step": s, "train/loss": v}) for s, v in pairs])
    assert list(zip(got.rows["step"].tolist(), got.rows["value"].tolist())) == pairs


@FAST
@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=2, max_size=20))
def test_a_step_going_back_is_a_restart_only_after_a_marker(order):
    lines = [json.dumps({"step": s, "train/loss": 1.0}) for s in order]
    goes_back = any(b < a for a, b in zip(order, order[1:]))
    try:
        _read_lines(lines)
        assert not goes_back
    except LadderError as exc:
        assert goes_back and "without a resume marker" in str(exc)
    marked = []
    for s in order:  # the same steps, each rewind announced by its marker
        marked += [json.dumps({"step": s, runfiles.RESUME_KEY: s}), json.dumps({"step": s, "train/loss": 1.0})]
    assert len(_read_lines(marked).rows) == len(order)

"""A prediction logged as a real offline wandb run, read back with the project's own offline reader;
and the errors raised before wandb starts (a bad project, online without a key)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import pytest

from ladder.data.sources import OfflineSource
from ladder.data.sources.leveldb import read_log
from ladder.errors import LadderError
from ladder.output.towandb import log_prediction, parse_project
from ladder.predict.prediction import Prediction

METRIC = "eval/loss"
KEY = f"predicted/{METRIC}"
STEPS = np.arange(100, 1100, 100)
FIRST_PREDICTED = 400  # rows before it have no median: the fit starts there


def prediction() -> Prediction:
    median = np.where(STEPS >= FIRST_PREDICTED, 2.5 + 7.0 / np.sqrt(STEPS) + 1e-13 * np.pi, np.nan)
    width = 0.01 * np.log(STEPS) / 3.0
    table = pd.DataFrame({
        "step": STEPS, "tokens": STEPS * 4096, "fraction": STEPS / STEPS[-1], "compute": STEPS * 1e12,
        "median": median, "lo50": median - width, "hi50": median + width,
        "lo90": median - 3 * width, "hi90": median + 3 * width, "in_assumptions": True,
    })
    table.loc[table["step"] == 600, "hi50"] = np.inf  # a band that blew up is left out, not logged
    return Prediction("hero-1b", METRIC, table, planned_steps=int(STEPS[-1]), method="per-fraction",
                      settings={"law": "per-fraction", "samples": 200})


@pytest.fixture
def wandb_env(monkeypatch, tmp_path):
    """wandb offline and silent, with no key, settings or .netrc of the machine's user; the settings
    wandb loads once per process are reloaded around each test."""
    import wandb

    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_DIR", "WANDB_BASE_URL", "WANDB_ENTITY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    wandb.teardown()
    yield wandb
    wandb.teardown()


class Started(Exception):
    """wandb.init was reached."""


def refuse_init(monkeypatch, wandb):
    def init(**kwargs):
        raise Started(kwargs.get("mode"))

    monkeypatch.setattr(wandb, "init", init)


def summary_and_job_type(run_file: Path) -> tuple[dict[str, float], str]:
    from wandb.proto import wandb_internal_pb2

    summary, job_type = {}, ""
    for payload in read_log(run_file).records:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            job_type = record.run.job_type or job_type
        elif kind == "summary":
            for item in record.summary.update:
                key = item.key or "/".join(item.nested_key)
                summary[key] = json.loads(item.value_json)
    return summary, job_type


def test_logged_prediction_reads_back_at_the_targets_steps(wandb_env, tmp_path):
    pred = prediction()
    coords = {"active_params": 1.0e9, "stop_after_steps": int(STEPS[-1]), "tokens_per_step": 4096,
              "fit_flops_per_token": 6.6e9}
    path = Path(log_prediction(pred, "team/ladder", group="ladder-1b", root=tmp_path / "wb", coords=coords))
    assert path.parent == tmp_path / "wb" / "wandb" and path.name.startswith("offline-run-")

    source = OfflineSource(path)
    (ref,) = source.runs()
    got = source.read(ref)
    assert (got.name, got.group, got.state) == ("hero-1b-predicted", "ladder-1b", "finished")
    assert got.config == {"method": "per-fraction", "settings": {"law": "per-fraction", "samples": 200},
                          "metric": METRIC, "target": "hero-1b", **coords, "role": "prediction"}
    # pulled into a store with its coordinates, as a prediction: no fit takes it for a rung
    from ladder.data.sources.pull import pull
    from ladder.data.store import Store

    store = Store(tmp_path / "store")
    result = pull(store, OfflineSource(path))
    assert not [m for m in result.messages if "no finite" in m]  # it holds bands, never the metric: nothing to warn of
    (row,) = store.runs().to_dict("records")
    assert (row["name"], row["role"], row["group"], row["active_params"]) == ("hero-1b-predicted", "prediction",
                                                                            "ladder-1b", 1_000_000_000)
    assert store.history("hero-1b-predicted", [KEY])["value"].iloc[-1] == pred.table["median"].iloc[-1]
    back = {(str(m), int(s)): float(v) for m, s, v in zip(got.rows["metric"], got.rows["step"], got.rows["value"])}

    expected = {}
    for row in pred.table.to_dict("records"):
        for suffix, col in (("", "median"), ("_lo50", "lo50"), ("_hi50", "hi50"), ("_lo90", "lo90"), ("_hi90", "hi90")):
            if math.isfinite(row[col]):
                expected[(KEY + suffix, int(row["step"]))] = float(row[col])
    assert back == expected  # every finite value at its own step, bit for bit; nothing else
    assert {s for (k, s) in back if k == KEY} == {int(s) for s in STEPS if s >= FIRST_PREDICTED}
    assert not [k for k in back if k[1] < FIRST_PREDICTED]  # no median, no row: nothing logged as NaN
    assert (KEY + "_hi50", 600) not in back and (KEY + "_lo50", 600) in back

    summary, job_type = summary_and_job_type(next(path.glob("run-*.wandb")))
    final = pred.table.iloc[-1]
    assert job_type == "prediction"
    assert summary[KEY] == final["median"] and summary["predicted/final_step"] == STEPS[-1]
    assert (summary[KEY + "_lo90"], summary[KEY + "_hi90"]) == (final["lo90"], final["hi90"])


@pytest.mark.parametrize("project", ["", "a/b/c", "/ladder", "team/", "my project", "team/lad der", " ladder", "team\\x"])
def test_bad_project_is_refused_before_wandb_starts(wandb_env, monkeypatch, project):
    refuse_init(monkeypatch, wandb_env)
    with pytest.raises(LadderError, match="is not ENTITY/PROJECT or PROJECT") as err:
        log_prediction(prediction(), project)
    assert repr(project) in str(err.value) and "\n" not in str(err.value)


def test_project_forms():
    assert parse_project("ladder") == (None, "ladder")
    assert parse_project("team-a/ladder_1") == ("team-a", "ladder_1")


@pytest.mark.parametrize("mode", [None, "online"])
def test_online_without_a_key_is_refused_before_wandb_starts(wandb_env, monkeypatch, mode):
    if mode is None:
        monkeypatch.delenv("WANDB_MODE")
    else:
        monkeypatch.setenv("WANDB_MODE", mode)
    refuse_init(monkeypatch, wandb_env)
    with pytest.raises(LadderError, match="no API key: set WANDB_API_KEY .*WANDB_MODE=offline"):
        log_prediction(prediction(), "team/ladder")


def test_a_key_from_the_environment_or_wandb_login_goes_online(wandb_env, monkeypatch, tmp_path):
    """The key is found without asking the server (wandb.init is stopped before it could)."""
    monkeypatch.delenv("WANDB_MODE")
    refuse_init(monkeypatch, wandb_env)
    key = "0123456789abcdef" * 2 + "01234567"  # 40 characters, the form of a wandb API key
    host = urlsplit(wandb_env.setup().settings.base_url).netloc
    (tmp_path / "netrc").write_text(f"machine {host}\n  login user\n  password {key}\n")
    with pytest.raises(Started, match="online"):
        log_prediction(prediction(), "ladder")
    (tmp_path / "netrc").unlink()
    monkeypatch.setenv("WANDB_API_KEY", key)
    wandb_env.teardown()
    with pytest.raises(Started, match="online"):
        log_prediction(prediction(), "ladder")


def test_disabled_wandb_is_an_error(wandb_env, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    refuse_init(monkeypatch, wandb_env)
    with pytest.raises(LadderError, match="WANDB_MODE=disabled"):
        log_prediction(prediction(), "ladder")


def test_importing_the_module_does_not_import_wandb():
    code = "import sys, ladder.output.towandb; sys.exit('wandb' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_predict_says_a_missing_key_before_it_fits_or_writes_anything(wandb_env, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from ladder.cli import app
    from tests.synthetic_ladder import micro_plan

    monkeypatch.setenv("WANDB_MODE", "online")
    refuse_init(monkeypatch, wandb_env)
    cfg = micro_plan().hero.save(tmp_path / "hero.yaml")
    out = tmp_path / "pred"
    # The store does not exist either: the key is checked first, before the work it would come after.
    res = CliRunner().invoke(app, ["predict", str(cfg), "--store", str(tmp_path / "nowhere"), "--out", str(out),
                                   "--to-wandb", "team/ladder"])
    assert res.exit_code == 2 and "no API key: set WANDB_API_KEY" in res.stderr, res.output
    assert not out.exists()


def test_waiting_for_wandb_to_write_takes_a_file_with_its_header_only_for_not_written_yet(wandb_env, tmp_path,
                                                                                          monkeypatch):
    """wandb writes its offline file in chunks after `finish` returns: a read that finds the header only (a
    `LadderError`, "nothing is written in it yet") is waited past, as a run not finished is."""
    real, calls = OfflineSource.read, []

    def read(self, ref, cursor=None):
        calls.append(1)
        if len(calls) == 1:
            raise LadderError("nothing is written in it yet, not even its config")
        return real(self, ref, cursor)

    monkeypatch.setattr(OfflineSource, "read", read)
    path = Path(log_prediction(prediction(), "team/ladder", root=tmp_path / "wb"))
    assert len(calls) >= 2 and path.name.startswith("offline-run-")


def test_a_prediction_read_back_from_wandb_has_the_prediction_s_fractions(wandb_env, tmp_path):
    """The hero's horizon is cut at half way: its prediction's fractions are of the plan it started with, and the
    run read back from wandb carries that plan (its schedule), not only the edited plan's steps."""
    import io

    from typer.testing import CliRunner

    from ladder.cli import app
    from ladder.data.sources import LocalSource
    from ladder.data.sources.pull import pull
    from ladder.data.store import Store
    from tests.synthetic_ladder import micro_plan, pf_truth, write_run

    plan = micro_plan()
    hero = plan.hero
    assert hero.schedule.edits  # the cut the fractions must not be taken from
    for i, rung in enumerate(plan.rungs):
        write_run(tmp_path / "runs", rung, seed=i, law=pf_truth)
    pull(Store(tmp_path / "rungs"), LocalSource(tmp_path / "runs"))
    cfg = hero.save(tmp_path / "hero.yaml")
    runner = CliRunner()
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(tmp_path / "rungs"), "--out", str(tmp_path / "pred"),
                              "--n-boot", "20", "--to-wandb", "team/ladder"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["pull", "offline", str(tmp_path / "pred" / "wandb"), "--store", str(tmp_path / "rungs")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["history", f"{hero.name}-predicted", "--store", str(tmp_path / "rungs"),
                              "--metric", KEY, "--format", "csv"])
    assert res.exit_code == 0, res.output
    back = pd.read_csv(io.StringIO(res.stdout))
    table = Prediction.load(tmp_path / "pred").table
    both = back.merge(table[["step", "fraction"]], on="step", suffixes=("", "_predicted"))
    assert len(both) == len(back) > 10
    np.testing.assert_allclose(both["fraction"], both["fraction_predicted"], rtol=1e-9)
    # a report of the prediction's own run read back says it is no trained run
    res = runner.invoke(app, ["report", "--prediction", str(tmp_path / "pred"), "--store", str(tmp_path / "rungs"),
                              "--target-run", f"{hero.name}-predicted", "--out", str(tmp_path / "r.html")])
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "is a prediction read back from wandb (role: prediction), not a run that trains" \
        in said, res.output
    # predicted and logged again into the same folder: the earlier run's files move aside with that prediction, and
    # the folder's wandb/ reads back one run of the name, not two the name cannot tell apart
    first = next((tmp_path / "pred" / "wandb").glob("offline-run-*")).name
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(tmp_path / "rungs"), "--out", str(tmp_path / "pred"),
                              "--n-boot", "20", "--to-wandb", "team/ladder"])
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "The wandb files of the prediction this one replaces (its logged run) moved to " \
        in said, res.output
    (kept,) = (tmp_path / "pred").glob(f"earlier-*/wandb/{first}")
    assert (kept.parent.parent / "prediction.json").is_file()
    assert [p.name for p in (tmp_path / "pred" / "wandb").glob("offline-run-*")] != [first]
    assert len(list((tmp_path / "pred" / "wandb").glob("offline-run-*"))) == 1
    again = Store(tmp_path / "again")
    res = runner.invoke(app, ["pull", "offline", str(tmp_path / "pred" / "wandb"), "--store", str(again.root)])
    assert res.exit_code == 0 and list(again.runs()["name"]) == [f"{hero.name}-predicted"], res.output

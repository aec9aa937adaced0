"""The wandb cloud path, against objects shaped like `wandb.Api` (no network): runs with `config`,
`summary`, `state` and `scan_history`, errors shaped like the ones wandb raises (`CommError` around
a `requests.HTTPError`, or around wandb-core's `WandbApiFailedError`)."""

from __future__ import annotations

import json

import pytest
import requests
import wandb
from typer.testing import CliRunner
from wandb.proto import wandb_api_pb2

from ladder.cli import app
from ladder.data.sources import RetryPolicy, WandbSource
from ladder.data.sources.pull import pull
from ladder.data.sources.wandb_api import classify, scrub
from ladder.data.store import Store
from ladder.errors import LadderError

COORDS = {"stop_after_steps": 100, "tokens_per_step": 64, "active_params": 1000, "total_params": 3000,
          "fit_flops_per_token": 9000.0}


def http_error(status: int, headers: dict | None = None) -> Exception:
    """What `wandb.apis.normalize_exceptions` raises for an HTTP error from requests."""
    response = requests.Response()
    response.status_code = status
    response.headers.update(headers or {})
    response._content = b"{}"
    return wandb.errors.CommError(f"HTTP {status}", requests.HTTPError(f"{status} error", response=response))


def core_error(status: int) -> Exception:
    """What it raises when wandb-core answers with an API error."""
    from wandb.sdk.lib.service.service_connection import WandbApiFailedError

    answer = wandb_api_pb2.ApiErrorResponse(message=f"status {status}", http_status=status)
    return wandb.errors.CommError(f"status {status}", WandbApiFailedError(f"status {status}", answer))


class FakeRun:
    def __init__(self, run_id, name, *, state="finished", group="ladder", steps=100, config=None, eval_every=10,
                 job_type=None):
        self.id, self.name, self.group, self.state, self.job_type = run_id, name, group, state, job_type
        self.config = {k: {"value": v, "desc": None} for k, v in (config or {**COORDS, "role": "rung"}).items()}
        self.rows = []
        self.scans: list[tuple[list[str] | None, int]] = []
        self.failures: list[tuple[int, BaseException]] = []
        self.grow(range(0, steps + 1), eval_every)

    def grow(self, steps, eval_every=10):
        for s in steps:
            row = {"_step": s, "_runtime": 0.1 * s, "train/loss": 5.0 + 1.0 / (s + 1)}
            if s % eval_every == 0:
                row["eval/loss"] = 4.0 + 1.0 / (s + 1)
            self.rows.append(row)

    @property
    def summary(self):
        return {"_step": self.rows[-1]["_step"]} if self.rows else {}

    def scan_history(self, keys=None, page_size=1000, min_step=0, max_step=None):
        self.scans.append((keys, min_step))
        rows = [r for r in self.rows if r["_step"] >= min_step]
        if keys is not None:  # like wandb: only rows holding every requested key
            rows = [{k: r[k] for k in keys} for r in rows if all(k in r for k in keys)]
        failure = self.failures.pop(0) if self.failures else None
        return self._iterate(rows, failure)

    @staticmethod
    def _iterate(rows, failure):
        for i, row in enumerate(rows):
            if failure is not None and i == failure[0]:
                raise failure[1]
            yield dict(row)

    def expected(self):
        return {(k, r["_step"]): v for r in self.rows for k, v in r.items() if not k.startswith("_")}


class Listing:
    """`Runs` indexes pages lazily; a page fetch may fail."""

    def __init__(self, runs, failures=()):
        self.runs, self.failures = runs, list(failures)

    def __getitem__(self, i):
        if self.failures:
            raise self.failures.pop(0)
        return self.runs[i]


class FakeApi:
    def __init__(self, projects, listing_failures=()):
        self.projects, self.calls, self.listing_failures = projects, [], list(listing_failures)

    def runs(self, path, filters=None, order="+created_at", per_page=50, include_sweeps=False, lazy=True):
        self.calls.append({"path": path, "filters": filters, "lazy": lazy})
        if path not in self.projects:
            return Missing(path)
        runs = [r for r in self.projects[path] if _matches(filters or {}, r)]
        return Listing(runs, self.listing_failures)


class Missing:
    def __init__(self, path):
        self.path = path

    def __getitem__(self, i):
        raise ValueError(f"Could not find project {self.path.split('/')[1]}")


def _matches(query, run):
    if "$and" in query:
        return all(_matches(q, run) for q in query["$and"])
    return all(getattr(run, k) == v for k, v in query.items())


def _pairs(h):
    return {(str(m), int(s)): float(v) for m, s, v in zip(h["metric"], h["step"], h["value"])}


def _source(api, sleeps=None, **kw):
    return WandbSource("team/ladder", api=api, sleep=(sleeps.append if sleeps is not None else lambda s: None), **kw)


# ---- reading -------------------------------------------------------------------------------------
def test_pull_lists_with_full_data_and_reads_every_row(tmp_path):
    rung, hero = FakeRun("r1", "rung-1"), FakeRun("h1", "hero", state="running", steps=40,
                                                   config={**COORDS, "role": "hero"})
    api = FakeApi({"team/ladder": [rung, hero]})
    store = Store(tmp_path)
    result = pull(store, _source(api, group="ladder"))
    assert api.calls == [{"path": "team/ladder", "filters": {"group": "ladder"}, "lazy": False}]
    assert {(r.name, r.state) for r in result.pulled} == {("rung-1", "finished"), ("hero", "running")}
    runs = store.runs().set_index("run_id")
    assert runs.loc["h1", "role"] == "hero" and runs.loc["r1", "stop_after_steps"] == 100
    assert runs.loc["r1", "source"] == "wandb:team/ladder"
    assert _pairs(store.history("r1")) == rung.expected()
    assert _pairs(store.history("hero")) == hero.expected()
    assert len(store.history()) == len(rung.expected()) + len(hero.expected())
    assert [s[0] for s in rung.scans] == [None]  # one scan of every key


def test_a_runs_job_type_is_its_role_where_its_config_gives_none(tmp_path):
    runs = [FakeRun("r1", "rung-1", config=COORDS, job_type="rung"), FakeRun("h1", "hero", config=COORDS, job_type="hero"),
            FakeRun("r2", "rung-2", job_type="hero"),  # its config says rung: the config wins
            FakeRun("t1", "tuning", config=COORDS, job_type="train")]  # a job type that is no role: none
    store = Store(tmp_path)
    pull(store, _source(FakeApi({"team/ladder": runs})))
    assert dict(zip(store.runs()["name"], store.runs()["role"])) == {"rung-1": "rung", "hero": "hero",
                                                                    "rung-2": "rung", "tuning": ""}


def test_coordinates_are_read_from_the_config_keys_a_team_names_its_own_way(tmp_path):
    from ladder.data.sources import CoordinateOverrides

    own = {"model": {"n_params": 1000, "flops": 9000.0}, "train": {"total_steps": 100, "batch_tokens": 64},
           "job": "rung", "train.total_params": 3000}  # a flat key with a dot in it, as some loggers write
    keys = ["active_params=model.n_params", "fit_flops_per_token=model.flops", "stop_after_steps=train.total_steps",
            "tokens_per_step=train.batch_tokens", "role=job", "total_params=train.total_params"]
    store = Store(tmp_path / "s")
    pull(store, _source(FakeApi({"team/ladder": [FakeRun("r1", "rung-1", config=own)]})),
         overrides=CoordinateOverrides.parse(None, None, keys))
    row = store.runs().iloc[0]
    assert (row["active_params"], row["fit_flops_per_token"], row["stop_after_steps"], row["tokens_per_step"],
            row["total_params"], row["role"]) == (1000, 9000.0, 100, 64, 3000, "rung")
    given = CoordinateOverrides.parse(["active_params=2000"], None, keys)  # --coord beats it
    pull(store, _source(FakeApi({"team/ladder": [FakeRun("r1", "rung-1", config=own)]})), overrides=given, replace=True)
    assert store.runs().iloc[0]["active_params"] == 2000
    moved = {**own, "job": "hero"}  # read again, with the --coord the last pull gave kept: the keys still read
    pull(store, _source(FakeApi({"team/ladder": [FakeRun("r1", "rung-1", config=moved)]})),
         overrides=CoordinateOverrides.parse(None, None, keys), full=True, replace=True)
    assert tuple(store.runs().iloc[0][["active_params", "role"]]) == (2000, "hero")
    other = FakeRun("r2", "rung-2", config={"model": {"params": 1000}, "train": {"total_steps": 100, "batch_tokens": 64}})
    with pytest.raises(LadderError) as caught:  # a run whose config lacks the key: named, with the option
        pull(Store(tmp_path / "t"), _source(FakeApi({"team/ladder": [other]})),
             overrides=CoordinateOverrides.parse(None, None, keys))
    assert str(caught.value).endswith("its config lacks 'active_params'; supply it with --coord active_params=VALUE "
                                      "(every run of this pull) or --coords FILE.yaml ({rung-2: {active_params: VALUE}}"
                                      "); its config gives no value under 'model.n_params' (--coord-key active_params=model.n_params)"
                                      "; its config may give it: --coord-key active_params=model.params (1000 there)")
    for wrong, said in (({"role": "jb"}, "'jb' (--coord-key role=jb)"),  # a label or an optional field: not dropped
                        ({"fit_flops_per_token": "model"}, "'model' (--coord-key fit_flops_per_token=model: a mapping "
                                                           "there, of n_params, flops; name one of its keys, e.g. model.n_params)")):
        typo = [k for k in keys if k.partition("=")[0] not in wrong] + [f"{f}={k}" for f, k in wrong.items()]
        got = pull(Store(tmp_path / f"u-{next(iter(wrong))}"),
                   _source(FakeApi({"team/ladder": [FakeRun("r1", "rung-1", config=own)]})),
                   overrides=CoordinateOverrides.parse(None, None, typo))
        [warned] = [w for p in got.pulled for w in p.messages if "gives no value under" in w]
        assert warned.startswith(f"its config gives no value under {said}, and nothing else gave it: stored without")
    others = [k for k in keys if not k.startswith("role=")] + ["role=jb"]  # the role given another way: nothing to say
    got = pull(Store(tmp_path / "j"), _source(FakeApi({"team/ladder": [FakeRun("r1", "rung-1", config={
        **own, "role": "rung"})]})), overrides=CoordinateOverrides.parse(None, None, others))
    assert not [w for p in got.pulled for w in p.messages if "gives no value under" in w]
    with pytest.raises(LadderError, match="--coord-key name=meta.label: a run's name is its source's"):
        CoordinateOverrides.parse(None, None, ["name=meta.label"])
    plain = FakeRun("r2", "rung-2", config={"active_params": 2000, "fit_flops_per_token": 9000.0, "role": "rung",
                                            "train": {"total_steps": 100, "batch_tokens": 64}, "train.total_params": 3000})
    pull(Store(tmp_path / "w"), _source(FakeApi({"team/ladder": [FakeRun("r1", "rung-1", config=own), plain]})),
         overrides=CoordinateOverrides.parse(None, None, keys))  # r2 names its fields the tool's way: no key needed
    assert sorted(Store(tmp_path / "w").runs()["active_params"]) == [1000, 2000]
    unset = {**own, "model": {"n_params": float("nan"), "flops": 9000.0}}
    with pytest.raises(LadderError, match=r"no value under 'model.n_params' \(--coord-key active_params=model.n_params: "
                                          r"NaN there\)"):
        pull(Store(tmp_path / "v"), _source(FakeApi({"team/ladder": [FakeRun("r1", "rung-1", config=unset)]})),
             overrides=CoordinateOverrides.parse(None, None, keys))
    with pytest.raises(LadderError, match=r"--coord active_params=model.n_params: 'active_params' = 'model.n_params' "
                                          r"is not a number in range.*give --coord-key active_params=model.n_params"):
        CoordinateOverrides.parse(["active_params=model.n_params"], None, [])
    with pytest.raises(LadderError, match=r"give --coord-key active_params=n_params, or from the table's column "
                                          r"'n_params', --coord-column active_params=n_params$"):  # import csv: both
        CoordinateOverrides.parse(["active_params=n_params"], None, [], table=True)
    for written in ("190M", "1.3e9x", "-2B"):  # a count written otherwise is no key
        with pytest.raises(LadderError, match="is not a number in range") as caught:
            CoordinateOverrides.parse([f"active_params={written}"], None, [])
        assert "--coord-key" not in str(caught.value) and "--coord-column" not in str(caught.value)
    with pytest.raises(LadderError, match="--coord-key 'active_params': expected FIELD=KEY"):
        CoordinateOverrides.parse(None, None, ["active_params"])
    with pytest.raises(LadderError, match="unknown coordinate 'params'"):
        CoordinateOverrides.parse(None, None, ["params=model.n_params"])


def test_a_pull_says_when_each_run_last_sent_a_heartbeat(tmp_path):
    """wandb's `Run` gives ``heartbeatAt`` (UTC, no zone) as ``run.heartbeat_at``; a listing without it is unknown."""
    import datetime

    from wandb.apis.public import Run

    from ladder.data.sources.wandb_api import heartbeat

    real = Run(None, "team", "ladder", "h1", attrs={"id": "h1", "name": "h1", "state": "running", "config": {},
                                                     "summaryMetrics": {}, "heartbeatAt": "2026-12-06T02:30:00"})
    want = datetime.datetime(2026, 12, 6, 2, 30, tzinfo=datetime.UTC).timestamp()
    assert heartbeat(real) == want
    hero = FakeRun("h1", "hero", state="running", steps=40, config={**COORDS, "role": "hero"})
    hero.heartbeat_at = "2026-12-06T02:30:00Z"
    rung = FakeRun("r1", "rung-1")  # no heartbeat in its listing
    assert heartbeat(rung) is None
    result = pull(Store(tmp_path), _source(FakeApi({"team/ladder": [rung, hero]})))
    assert result.written == {"h1": want}


def test_tag_and_filter_are_combined():
    source = WandbSource("team/ladder", group="g", tag="t", filters={"config.role": "rung"}, api=object())
    assert source.query() == {"$and": [{"config.role": "rung"}, {"group": "g"}, {"tags": {"$in": ["t"]}}]}


def test_keys_are_read_in_separate_scans(tmp_path):
    rung = FakeRun("r1", "rung-1")
    pull(Store(tmp_path), _source(FakeApi({"team/ladder": [rung]}), keys=["train/loss", "eval/loss"]))
    assert [s[0] for s in rung.scans] == [["train/loss", "_step"], ["eval/loss", "_step"]]
    assert _pairs(Store(tmp_path).history()) == rung.expected()  # a joint scan would keep only eval steps


def test_a_key_the_run_never_logged_is_a_warning(tmp_path):
    rung = FakeRun("r1", "rung-1")
    result = pull(Store(tmp_path), _source(FakeApi({"team/ladder": [rung]}), keys=["train/loss", "eval/bpb"]))
    assert any("no values logged for 'eval/bpb'" in m for m in result.messages)


# ---- failures --------------------------------------------------------------------------------------
def test_rate_limited_twice_then_succeeds(tmp_path):
    rung = FakeRun("r1", "rung-1")
    rung.failures = [(0, http_error(429, {"RateLimit-Remaining": "0", "RateLimit-Reset": "7"})), (3, core_error(429))]
    api = FakeApi({"team/ladder": [rung]}, listing_failures=[http_error(429, {"Retry-After": "3"})])
    sleeps = []
    pull(Store(tmp_path), _source(api, sleeps))
    assert sleeps == [3.0, 7.0, 4.0]  # the listing's Retry-After, the scan's reset, then back-off (2 s × 2)
    assert rung.scans == [(None, 0), (None, 0), (None, 3)]  # the cut scan continued after its last row
    h = Store(tmp_path).history()
    assert _pairs(h) == rung.expected() and len(h) == len(rung.expected())


def test_server_errors_back_off_and_give_up(tmp_path):
    rung = FakeRun("r1", "rung-1")
    rung.failures = [(0, http_error(503))] * 10
    sleeps, said = [], []
    with pytest.raises(LadderError, match="gave up after 4 tries .*HTTP 503.*pull again"):
        pull(Store(tmp_path), _source(FakeApi({"team/ladder": [rung]}), sleeps, retry=RetryPolicy(attempts=4),
                                      say=said.append))
    assert sleeps == [2.0, 4.0, 8.0]
    # each wait is said as it starts: a pull waiting on a server that is down is not silent for minutes
    assert said == [f"wandb team/ladder: reading the history of rung-1 (r1) failed (HTTP 503); trying again in {w} s "
                    f"(try {k} of 4)" for w, k in ((2, 2), (4, 3), (8, 4))]
    assert not Store(tmp_path).exists()


def test_pull_cut_off_half_way_changes_nothing_and_resumes_without_duplicates(tmp_path):
    store = Store(tmp_path)
    other = FakeRun("o1", "other", group="older")
    pull(store, _source(FakeApi({"team/ladder": [other]})))
    before_runs, before_history = store.runs(), store.history()
    manifest = (tmp_path / "manifest.json").read_text()

    runs = [FakeRun("r1", "rung-1"), FakeRun("r2", "rung-2"), FakeRun("r3", "rung-3")]
    runs[1].failures = [(50, KeyboardInterrupt())]  # the pull is killed half way through rung-2
    with pytest.raises(KeyboardInterrupt):
        pull(store, _source(FakeApi({"team/ladder": [other, *runs]})))
    assert (tmp_path / "manifest.json").read_text() == manifest
    assert store.runs().equals(before_runs) and store.history().equals(before_history)

    result = pull(store, _source(FakeApi({"team/ladder": [other, *runs]})))
    assert result.resumed == 1 and result.unchanged == 1
    assert [len(r.scans) for r in runs] == [1, 2, 1]  # rung-1 was staged: not read again
    assert runs[1].scans[1] == (None, 0)
    h = store.history()
    for run in [other, *runs]:
        assert _pairs(h[h["run_id"] == run.id]) == run.expected()
    assert len(h) == sum(len(r.expected()) for r in [other, *runs])
    assert not h.duplicated(["run_id", "metric", "step"]).any()
    assert not list((tmp_path / "pending").glob("*.jsonl"))


def test_a_failed_pull_says_how_to_continue(tmp_path):
    runs = [FakeRun("r1", "rung-1"), FakeRun("r2", "rung-2")]
    runs[1].failures = [(0, http_error(403))]
    with pytest.raises(LadderError, match="rejected the API key.*1 run\\(s\\) read before this one are kept aside"):
        pull(Store(tmp_path), _source(FakeApi({"team/ladder": runs})))


# ---- incremental --------------------------------------------------------------------------------
def test_second_pull_fetches_only_what_is_new(tmp_path):
    rung = FakeRun("r1", "rung-1")
    hero = FakeRun("h1", "hero", state="running", steps=40, config={**COORDS, "role": "hero"})
    api = FakeApi({"team/ladder": [rung, hero]})
    store = Store(tmp_path)
    pull(store, _source(api))
    hero.grow(range(41, 101))
    hero.state = "finished"
    result = pull(store, _source(api))
    assert len(rung.scans) == 1  # finished and unchanged: not scanned again
    assert hero.scans[-1] == (None, 40)  # from the last step read (its row may have gained keys)
    (topped,) = result.pulled
    assert topped.state == "finished" and topped.rows_read == len([k for k in hero.expected() if k[1] >= 40])
    h = store.history("hero")
    assert _pairs(h) == hero.expected() and len(h) == len(hero.expected())
    assert json.loads(store.run("hero")["report_json"])["relogged"] == 0
    assert pull(store, _source(api)).unchanged == 2


def test_missing_coordinate_is_found_before_any_history_is_read(tmp_path):
    good = FakeRun("r1", "rung-1")
    bare = FakeRun("r2", "rung-2", config={"stop_after_steps": 100, "tokens_per_step": 64})
    with pytest.raises(LadderError, match=r"run rung-2 \(r2\): its config lacks 'active_params'; supply it with --coord"):
        pull(Store(tmp_path), _source(FakeApi({"team/ladder": [good, bare]})))
    assert good.scans == [] and bare.scans == []


# ---- errors on the command line ------------------------------------------------------------------
def _cli(monkeypatch, make_api, *args):
    monkeypatch.setattr(wandb, "Api", make_api)
    return CliRunner().invoke(app, ["pull", "wandb", *args])


def test_project_that_does_not_exist(monkeypatch, tmp_path):
    res = _cli(monkeypatch, lambda **kw: FakeApi({}), "team/nope", "--store", str(tmp_path))
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1
    assert "wandb team/nope" in res.output and "not found" in res.output and "Could not find project nope" in res.output


def test_bad_project_path_and_filter(monkeypatch, tmp_path):
    res = _cli(monkeypatch, lambda **kw: FakeApi({}), "just-a-project", "--store", str(tmp_path))
    assert res.exit_code == 2 and "expected ENTITY/PROJECT" in res.output
    res = _cli(monkeypatch, lambda **kw: FakeApi({}), "team/p", "--filter", "{nope", "--store", str(tmp_path))
    assert res.exit_code == 2 and "--filter" in res.output and "not valid JSON" in res.output
    # options that name nothing are refused, not read as their defaults (every key; the store's fit metric)
    res = _cli(monkeypatch, lambda **kw: FakeApi({}), "team/p", "--keys", " , ", "--store", str(tmp_path))
    assert res.exit_code == 2 and "--keys ' , ': names no key" in res.output
    res = _cli(monkeypatch, lambda **kw: FakeApi({}), "team/p", "--fit-metric", "", "--store", str(tmp_path))
    assert res.exit_code == 2 and "--fit-metric '': give the key fits read" in res.output
    assert not tmp_path.joinpath("manifest.json").exists()


def test_a_folder_of_offline_runs_given_as_a_project_is_pointed_to_pull_offline(monkeypatch, tmp_path):
    """`pull wandb ./wandb` read "." as the entity and asked for an API key; a folder of offline run files is pulled
    with `pull offline`. A project whose ENTITY/PROJECT names a folder here without any is still a project."""
    runs = tmp_path / "runs" / "wandb" / "offline-run-20260101_000000-abc"
    runs.mkdir(parents=True)
    (runs / "run-abc.wandb").write_bytes(b"")
    monkeypatch.chdir(tmp_path / "runs")
    for given in ("./wandb", "wandb", str(tmp_path / "runs" / "wandb")):
        res = _cli(monkeypatch, lambda **kw: FakeApi({}), given, "--store", str(tmp_path / "store"))
        said = " ".join(res.output.split())
        assert res.exit_code == 2 and f"a folder of wandb's offline run files here; `ladder pull offline {given}` reads" \
            in said, res.output
    res = _cli(monkeypatch, lambda **kw: FakeApi({}), str(runs / "run-abc.wandb"), "--store", str(tmp_path / "store"))
    assert res.exit_code == 2 and "a wandb run file here" in res.output
    (tmp_path / "runs" / "team" / "p").mkdir(parents=True)  # no run files: the project team/p
    res = _cli(monkeypatch, lambda **kw: FakeApi({}), "team/p", "--store", str(tmp_path / "store"))
    assert "offline" not in res.output


def test_no_api_key(monkeypatch, tmp_path):
    import os

    def make(**kw):
        if os.environ.get("WANDB_MODE") == "":  # as wandb's settings do: "" is no mode it allows
            raise ValueError("1 validation error for Settings\nmode: Input should be 'online', 'offline', ...")
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.delenv("WANDB_MODE", raising=False)
    res = _cli(monkeypatch, make, "team/p", "--store", str(tmp_path))
    assert res.exit_code == 2 and "no wandb API key: set WANDB_API_KEY" in res.output and "offline" not in res.output
    monkeypatch.setenv("WANDB_MODE", "")  # `export WANDB_MODE=`: unset, not a mode wandb refuses as a bug
    res = _cli(monkeypatch, make, "team/p", "--store", str(tmp_path))
    assert res.exit_code == 2 and "no wandb API key: set WANDB_API_KEY" in res.output and "offline" not in res.output
    monkeypatch.setenv("WANDB_MODE", "offline")  # a team that logs offline, pulling as if from the server
    res = _cli(monkeypatch, make, "team/p", "--store", str(tmp_path))
    assert res.exit_code == 2 and "WANDB_MODE=offline is set: runs logged offline are read from their folder with " \
        "`ladder pull offline WANDB_DIR`" in " ".join(res.output.split())


def test_rejected_key_and_base_url_are_never_printed(monkeypatch, tmp_path):
    secret, url = "s3cr3t-key-0123456789abcdef", "https://bob:hunter2@wandb.internal.example"
    monkeypatch.setenv("WANDB_API_KEY", secret)
    monkeypatch.setenv("WANDB_BASE_URL", url)
    seen = {}

    def make(**kw):
        seen.update(kw)
        raise wandb.errors.AuthenticationError(f"Failed to verify credentials with {url} using key {secret}: HTTP 401")

    res = _cli(monkeypatch, make, "team/p", "--store", str(tmp_path))
    assert seen["api_key"] == secret  # handed to wandb, from the environment
    assert res.exit_code == 2 and "rejected the API key" in res.output
    assert secret not in res.output and "hunter2" not in res.output and "wandb.internal.example" not in res.output
    assert "<WANDB_API_KEY>" in scrub(f"key {secret}") and "hunter2" not in scrub("https://u:hunter2@host/x")


def test_unreachable_server_retries_then_says_so(monkeypatch, tmp_path):
    calls = []

    def make(**kw):
        calls.append(kw)
        raise wandb.errors.AuthenticationError(
            "Failed to verify credentials with http://127.0.0.1:9: Failed to execute API request: "
            "the service process is busy and did not respond in time."
        )

    monkeypatch.setattr("ladder.data.sources.wandb_api.time.sleep", lambda s: None)
    res = _cli(monkeypatch, make, "team/p", "--store", str(tmp_path))
    assert res.exit_code == 2 and len(calls) == 3
    assert "gave up after 3 tries" in res.output and "WANDB_BASE_URL" in res.output


@pytest.mark.parametrize(
    ("exc", "kind", "wait"),
    [
        (http_error(429, {"RateLimit-Reset": "12"}), "retry", 12.0),
        (core_error(429), "retry", None),
        (http_error(502), "retry", None),
        (wandb.errors.CommError("timed out", requests.Timeout("read timed out")), "retry", None),
        (http_error(401), "auth", None),
        (core_error(404), "missing", None),
        (ValueError("Could not find project x"), "missing", None),
        (wandb.errors.CommError("bad query: field 'x' unknown"), "fatal", None),
        (AttributeError("a bug"), "bug", None),
    ],
)
def test_classify_failures(exc, kind, wait):
    got_kind, got_wait, _ = classify(exc)
    assert (got_kind, got_wait) == (kind, wait)


def test_a_run_is_read_on_only_with_the_step_key_it_was_pulled_with(tmp_path):
    hero = FakeRun("h1", "hero", state="running", steps=40, config={**COORDS, "role": "hero"})
    api = FakeApi({"team/ladder": [hero]})
    store = Store(tmp_path)
    pull(store, _source(api))
    hero.grow(range(41, 101))
    with pytest.raises(LadderError, match="pulled with --step-key '_step', and this read gives 'trainer/step': give "
                                          "--step-key _step again"):
        pull(store, _source(api, step_key="trainer/step"))
    assert _pairs(store.history("hero")) == {k: v for k, v in hero.expected().items() if k[1] <= 40}  # nothing mixed in


def test_a_run_of_its_own_step_key_is_read_on_from_wandb_s_own_step(tmp_path):
    """wandb's `min_step` counts `_step`, whatever --step-key is: a later pull reads on from the `_step` of the last
    row read. Read on from the step key's value instead, it skipped the evals logged since (a run that logs every 10
    steps of its own), or read the whole run again at every pull (a key ahead of `_step`)."""
    run = FakeRun("r1", "rung-1", state="running", steps=-1)
    run.rows = []

    def log(*trainer_steps):
        for s in trainer_steps:
            run.rows.append({"_step": len(run.rows), "trainer/step": s, "eval/loss": 4.0 + 1.0 / (s + 1)})

    log(*range(0, 101, 10))  # `_step` 0–10
    store, api = Store(tmp_path), FakeApi({"team/ladder": [run]})
    pull(store, _source(api, step_key="trainer/step"))
    log(*range(110, 201, 10))  # `_step` 11–20, then rows of other keys
    for _ in range(30):
        run.rows.append({"_step": len(run.rows), "media/x": 1.0})
    pull(store, _source(api, step_key="trainer/step"))
    log(210)
    pull(store, _source(api, step_key="trainer/step"))
    assert run.scans == [(None, 0), (None, 10), (None, 50)], run.scans  # each pull reads on from the last row read (`_step`)
    assert _pairs(store.history("rung-1")) == {("eval/loss", s): 4.0 + 1.0 / (s + 1) for s in range(0, 211, 10)}


def _own_step_key(run: FakeRun) -> FakeRun:
    """The optimizer step logged as 'trainer/step' on the train rows; each eval logged in a row of its own without it,
    and one train row with a note in text."""
    rows = []
    for r in run.rows:
        rows.append({"_step": len(rows), "trainer/step": r["_step"], "train/loss": r["train/loss"]})
        if "eval/loss" in r:
            rows.append({"_step": len(rows), "eval/loss": r["eval/loss"]})
    rows[2]["note"] = "warming up"
    run.rows = rows
    return run


def test_rows_without_the_step_key_are_said_and_a_key_no_row_logs_is_refused(tmp_path):
    from ladder.data.sources.pull import PullSkipped

    run = _own_step_key(FakeRun("r1", "rung-1", steps=20))  # 21 train rows, 3 eval rows
    (got,) = pull(Store(tmp_path / "a"), _source(FakeApi({"team/ladder": [run]}), step_key="trainer/step")).pulled
    assert got.rows_read == 21
    assert "3 history rows have no 'trainer/step' (--step-key) and were skipped; they log 'eval/loss'" in got.messages
    assert "values that are not numbers (true/false, tables, media, text) were skipped for: note" in got.messages
    typo = FakeRun("r2", "rung-2", steps=20)
    with pytest.raises(PullSkipped) as err:
        pull(Store(tmp_path / "b"), _source(FakeApi({"team/ladder": [typo]}), step_key="trainer/stp"))
    ((name, why),) = err.value.result.skipped
    assert why == ("none of its 21 history rows has the step key 'trainer/stp' (--step-key), so nothing of it was "
                   "stored; its rows log 'eval/loss', 'train/loss': give --step-key the key of the optimizer step, or "
                   "leave it out for wandb's own step (_step)")
    assert Store(tmp_path / "b").runs().empty
    young = FakeRun("r3", "rung-3", steps=20, state="running")  # still running: its keyed rows may yet come
    (got,) = pull(Store(tmp_path / "c"), _source(FakeApi({"team/ladder": [young]}), step_key="trainer/stp")).pulled
    assert got.rows == 0 and any(m.startswith("21 history rows have no 'trainer/stp'") for m in got.messages)


def test_a_cursor_of_the_version_before_reads_a_finished_run_no_more_and_a_running_one_anew():
    """A --step-key cursor written before the `_step` of the last row read was kept: a finished run it read to its
    end is not read again (an upgrade does not download every such run anew); one still running is read whole."""
    from ladder.data.sources.wandb_api import _ALL

    done = _own_step_key(FakeRun("r1", "rung-1", steps=20))
    live = _own_step_key(FakeRun("r2", "rung-2", steps=20, state="running"))
    source = _source(FakeApi({"team/ladder": [done, live]}), step_key="trainer/step")
    refs = {ref.run_id: ref for ref in source.runs()}
    for run in (done, live):
        old = {"steps": {_ALL: 20}, "state": run.state, "last": run.summary["_step"], "step_key": "trainer/step"}
        got = source.read(refs[run.id], old)
        assert (run.scans, got.replace) == (([], False) if run is done else ([(None, 0)], True))
        assert len(got.rows) == (0 if run is done else 21)  # every train row (its evals log no step key)

"""One check of a live run, and the polling loop around it.

A check pulls what is new from the run's source into the store (the same incremental, atomic pull
as `ladder pull`), evaluates every rule on the run's whole history, sends each sink the alerts it
has not had yet, prints a verdict for every new eval, and saves the state.

It fails closed: an eval the prediction cannot be compared with (a NaN or missing value at that
step, a step outside the prediction, a row outside its assumptions, a run that never logs the
predicted metric) is ``cannot-judge``, never ``ok``. A check's verdict is the worst among the evals it
judged (with no new eval, the last eval's), so a cron job's check sees a warning at any of them. Exit
codes of a check (`EXIT`): 0 on track, 3 cannot judge (or cannot read the run), 4 warning, 5 alarm; 1
and 2 stay the CLI's codes for a bug and a usage error.
"""

from __future__ import annotations

import dataclasses
import difflib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ladder import metrics as keys
from ladder.config.yamlio import to_dict
from ladder.data.sources.coords import CoordinateOverrides, coordinates_from_config, schedule_plan
from ladder.data.sources.pull import PullSkipped, Source, pull
from ladder.data.sources.table import SHORT_OF_PLAN
from ladder.data.store import Store
from ladder.durations import span_text
from ladder.errors import LadderError, NoCredentials, SourceUnavailable
from ladder.predict.edits import as_edits, missed_edit, plan_holds, schedule_of
from ladder.predict.prediction import WATCH_ASIDE, WATCH_FILES, Prediction, keep_prediction
from ladder.predict.stale import stale_warning
from ladder.watch.judged import BAND_COLUMNS, averaged
from ladder.watch.rules import (
    CANNOT_JUDGE,
    LEVELS,
    RANK,
    Alert,
    AlertRules,
    Observed,
    RungCurves,
    evaluate,
    evaluate_run,
)
from ladder.watch.sinks import Sink, read_alerts
from ladder.watch.state import WatchState
from ladder.watch.target import SIZE_AGREE, SIZE_APART, counted_apart, other_run

EXIT = {"ok": 0, CANNOT_JUDGE: 3, "unreadable": 3, "warning": 4, "alarm": 5}
"""Exit code of each verdict; 1 (a bug) and 2 (a usage error) belong to the CLI."""

Repredict = Callable[[Prediction, dict, str], Prediction]
"""Predicts the run again from its config's schedule: (the prediction, the run's config, why: "" for an edit the
run's config holds and the prediction lacks, else the prediction's edit the run passed without making it)."""


@dataclass(frozen=True)
class CheckResult:
    verdict: str
    """ok, cannot-judge, warning, alarm or unreadable: the worst of the evals this check judged."""
    new_alerts: tuple[Alert, ...] = ()
    lines: tuple[str, ...] = ()
    """One verdict line per new eval."""
    finished: bool = False
    """The run is not running (finished, or crashed)."""
    prediction: Prediction | None = None
    summary: str = ""
    """What the sinks were given: the verdict lines, or with no new eval one line on where the run stands."""
    crashed: bool = False
    """The run is marked crashed (by itself, or by its source after no write for a while): it may be resumed."""
    earlier: str = "ok"
    """A follow's last check: the worst warning or alarm its earlier checks gave ("ok" where none did)."""

    @property
    def own_exit_code(self) -> int:
        """The verdict's code, or a new alert's where it is worse (an alert raised on an earlier eval by a rule
        that now judges it otherwise is new, and a cron job reads the exit code; one a failed delivery left for this
        check is not)."""
        return max(EXIT[self.verdict], EXIT[_worst(list(self.new_alerts))])

    @property
    def raised(self) -> str:
        """The worst warning or alarm of this check (its verdict or a new alert), "ok" where it raised neither."""
        level = _worse(self.verdict, _worst(list(self.new_alerts)))
        return level if level in ("warning", "alarm") else "ok"

    @property
    def exit_code(self) -> int:
        """This check's code, or where a follow's earlier check warned or alarmed and this one is better, that one's:
        a follow that ends with the run says whether it went off track at all."""
        return max(self.own_exit_code, EXIT[self.earlier])


@dataclass
class Watcher:
    store: Store
    source: Source | None
    """Where new evals come from; None: the store as it is (runs kept fresh by `ladder pull` / `import`)."""
    prediction: Prediction
    rules: AlertRules
    sinks: dict[str, Sink]
    state_path: Path
    repredict: Repredict | None = None
    prediction_dir: Path | None = None
    """Where a re-made prediction is saved (next to the original)."""
    clock: Callable[[], float] = time.time
    overrides: CoordinateOverrides | None = None
    """Coordinates for the run the source does not give (`--coord`, `--coords`)."""
    replace: bool = False
    """Let the pull replace a stored run of the same id from another source (`ladder pull wandb|offline|local --replace`)."""
    warn: Callable[[str], None] | None = None
    """Where what a pull says about the run goes (lines of its metrics file skipped, a finish short of its plan)."""
    deadline: dict | None = None
    """A --deadline given in hours, kept in the state so that the same hours given again keep its time."""
    note: Callable[[str], None] | None = None
    """Where the watch says what it did beside its verdicts (the folder a replaced prediction is kept in)."""
    _state: WatchState | None = field(default=None, repr=False)
    _kept_sent: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _kept_verdicts: list[dict] = field(default_factory=list, repr=False)
    """The verdicts of the evals a replaced prediction judged as the new one does (`_standing`): not judged again."""
    """The alerts of the rules that need no prediction sent before the prediction was replaced (`_reload_if_replaced`):
    sent once, not again because the state moved aside with the old prediction."""
    _unreadable: str | None = field(default=None, repr=False)
    """What the last check said when it could not read the run (None: it could)."""
    _stamp: tuple | None = field(default=None, repr=False)
    """The prediction file's size and change time when it was read (`prediction_dir`)."""
    _written: dict[str, float] = field(default_factory=dict, repr=False)
    """When the source last saw each run it read write (`PullResult.written`), as of the last pull."""
    _apart: str = field(default="", repr=False)
    """The sizes last said to differ from the prediction's target's (`counted_apart`): said once while they do."""
    _rate_unlogged: bool = field(default=False, repr=False)
    """Whether the watch has said that the run logs no throughput for its deadline (`_say_unmeasured`)."""
    told: set[str] = field(default_factory=set, repr=False)
    """The sinks the last check sent something (a sink with nothing new is not sent to)."""

    def check(self) -> CheckResult:
        now = self.clock()
        self.told = set()
        replaced = self._reload_if_replaced()
        if self._state is None and not Path(self.state_path).exists():  # a new watch beside a replacing prediction
            self._kept_sent = self._kept_sent or self._sent_beside_the_replaced() or self._sent_in_the_log()
        state = self._state or WatchState.load(self.state_path, run=self.prediction.run_name, same=self._same_run())
        for sink, sent in self._kept_sent.items():
            state.mark(sink, self._held_in_its_file(sink, sent))
        if self._kept_verdicts and not state.verdicts:
            state.verdicts = list(self._kept_verdicts)
        self._state, self._kept_sent, self._kept_verdicts = state, {}, []
        if self.deadline is not None:
            state.deadline = self.deadline
        try:
            if self.source is not None:
                self._pull()
            pulled = getattr(self.source, "run_id", None)  # the copy this watch pulls, where the store holds two
            run = self.store.run(pulled if pulled is not None else self.prediction.run_name)
        except Refused:
            raise
        except LadderError as exc:
            summary = f"cannot read {self.prediction.run_name}: {exc}"
            if self.source is None:  # the store as it is: a run not pulled yet, or a typo of --target-run
                summary += not_stored(self.store, self.prediction.run_name)
            # said once while it lasts: a watch started before its run would say it at every poll
            self._deliver(state, [], "unreadable", summary, quiet=summary == self._unreadable)
            self._unreadable = summary
            state.save(self.state_path)
            return CheckResult("unreadable", lines=(summary,))
        self._unreadable = None
        config = self.store.config(str(run["run_id"]))
        self._must_be_predicted(run, config)
        hist = self.store.history(run_ids=[str(run["run_id"])], include_nonfinite=True)  # read once a check
        self._maybe_repredict(config, _reached(run), run, hist)
        obs = self._observed(run, config, state, now, hist)
        self._say_unmeasured(obs)
        finished = str(run["state"]) != "running"
        flaw = unusable(self.prediction)
        if flaw is not None:  # the rules that need no prediction still run: a NaN loss is still an alarm
            alerts = evaluate_run(obs, self.rules, now, *self._rung_refs(run)) + stopped(run, obs)
            verdict = _worse(CANNOT_JUDGE, _worst(alerts))
            summary = (f"cannot judge {self.prediction.run_name}: the prediction is unusable ({flaw}); "
                       f"make it again with `ladder predict`: {verdict.upper()}")
            fresh = self._deliver(state, alerts, verdict, summary)
            state.last_step = obs.last_step
            state.save(self.state_path)
            return CheckResult(verdict, tuple(fresh), (summary,), finished, self.prediction,
                               crashed=str(run["state"]) == "crashed")
        alerts = evaluate(obs, self.prediction, self.rules, now, *self._rung_refs(run)) + stopped(run, obs)
        alerts += self._stale_prediction(obs)
        lines, verdict = self._verdicts(obs, alerts, state, finished)
        if replaced:
            lines.insert(0, replaced)
        summary = "\n".join(lines) if lines else self._status_line(obs, verdict, state, str(run["state"]))
        fresh = self._deliver(state, alerts, verdict, summary, quiet=not lines)
        state.last_step = obs.last_step
        state.save(self.state_path)
        return CheckResult(verdict, tuple(fresh), tuple(lines), finished, self.prediction, summary,
                           crashed=str(run["state"]) == "crashed")

    def run(self, poll_seconds: float, max_checks: int | None = None,
            after_first: Callable[[CheckResult], None] | None = None) -> CheckResult:
        """Check every `poll_seconds` until the run finishes (or `max_checks`); `after_first` is given the first
        check's result. A run marked crashed is watched on for three times the stale window (a run resumed from its
        checkpoint, or one only silent for a while, comes back), and the watch ends if it does not. The result is
        the last check's, with the worst warning or alarm of the checks before it (`CheckResult.earlier`)."""
        n, crashed_at, earlier = 0, None, "ok"
        while True:
            result = dataclasses.replace(self.check(), earlier=earlier)
            n += 1
            if result.crashed:
                crashed_at = self._crashed(crashed_at)
            elif result.verdict != "unreadable":  # running again (a check that could not read the run says nothing)
                crashed_at = None
            if n == 1 and after_first is not None:
                after_first(result)
            if (max_checks is not None and n >= max_checks or result.finished and not result.crashed
                    or crashed_at is not None and self.clock() - crashed_at > self.grace_s):
                self._say_undelivered()
                return result
            earlier = _worse(earlier, result.raised)
            time.sleep(poll_seconds)

    def _say_undelivered(self) -> None:
        """As a follow ends: the alerts a sink lacks that another sink has (its deliveries failed), which no next
        check of this watch will retry; the next watch of this prediction delivers them."""
        state = self._state
        if state is None or self.warn is None:
            return
        known = state.delivered_to_any(self.sinks)
        for name in self.sinks:
            lacking = len(known - state.delivered(name))
            if lacking:
                self.warn(f"{lacking} alert{'s' if lacking > 1 else ''} not delivered to the {name} sink as the watch "
                          "ends: the next watch of this prediction with that sink (`ladder watch ... --once`) "
                          "delivers them")

    @property
    def grace_s(self) -> float:
        """How long a live watch waits on a run marked crashed for it to write again."""
        return 3 * self.rules.stale_after_s

    def _crashed(self, since: float | None) -> float:
        """When the run was first seen crashed in this stretch; said once as it starts."""
        if since is not None:
            return since
        if self.warn is not None:
            self.warn(f"{self.prediction.run_name} is marked crashed: watching on for {span_text(self.grace_s)} in case "
                      "it is resumed or writes again (Ctrl-C to stop)")
        return self.clock()

    # ---- pieces -------------------------------------------------------------------------------------
    def _pull(self) -> None:
        """Pull what is new. What the pull refuses after listing the run and before reading it (a run of that id
        stored from another source, without `replace`) is `Refused`: the user's to settle, not an unreadable run."""
        try:
            result = pull(self.store, self.source, overrides=self.overrides, replace=self.replace)
        except NoCredentials as exc:  # not a run that cannot be read now: nothing is read until the user acts
            raise Refused(str(exc)) from None
        except (Refused, SourceUnavailable, PullSkipped):
            raise
        except LadderError as exc:
            if getattr(self.source, "listed", False):
                raise Refused(str(exc)) from None
            raise
        self._written = result.written
        for message in result.messages if self.warn is not None else ():
            self.warn(message)

    def _observed(self, run: pd.Series, config: dict, state: WatchState, now: float, hist: pd.DataFrame) -> Observed:
        """What the run has logged (`hist`: its history, NaN and inf included), as the rules read it."""
        # The last value logged at each step, NaN included (a pivot table's "last" would skip a NaN
        # and the NaN rule would never see it).
        hist = hist.assign(metric=hist["metric"].astype(str)).drop_duplicates(["step", "metric"], keep="last")
        series = hist.pivot(index="step", columns="metric", values="value").sort_index()
        logged = hist.assign(value=1.0).pivot(index="step", columns="metric", values="value").notna().sort_index()
        last = int(series.index.max()) if len(series) else 0
        # Staleness is measured from when the watcher saw the step move (sources differ in which clock, if any,
        # they log; a run resumed from a checkpoint moves back, and is alive), and at first sight from when the run
        # last wrote: a watch started on a run long silent says so at once.
        if state.advanced_at is None:
            state.advanced_at = self._last_write(run, now)
        elif last != state.last_step:
            state.advanced_at = now
        ended = str(run["state"]) != "running"  # an ended run is not stale, however long ago it stopped
        started_with, horizons = schedule_plan(coordinates_from_config(config)[2])
        return Observed(series, int(run["stop_after_steps"]), int(run["tokens_per_step"]),
                        last_update=None if ended else state.advanced_at, logged=logged,
                        grid=None if unusable(self.prediction) else self.prediction.table["step"].to_numpy(np.int64),
                        horizons=horizons, started_with=started_with)

    def _last_write(self, run: pd.Series, now: float) -> float:
        """When the run last wrote, as its source says (a file's change time, a wandb heartbeat), or watching the
        store as it is, when a pull last brought it something new; `now` where neither is known."""
        written = self._written.get(str(run["run_id"]))
        if written is None and self.source is None:
            written = run["pulled_at"]
        return now if written is None or pd.isna(written) else min(now, float(written))

    def _rung_refs(self, run: pd.Series) -> tuple[RungCurves | None, RungCurves | None]:
        """The rungs' grad norm and drop fraction against fraction of their run, each with its projection
        to the watched run's size (`ladder.predict.dynamics`) where 3 or more rungs log it."""
        runs = self.store.runs()
        rungs = runs[(runs["role"] == "rung") & (runs["group"] == run["group"])]
        if rungs.empty:
            return None, None
        from ladder.predict.dynamics import (  # scipy: not for --help
            DynamicsSettings,
            hero_compute,
            project_curves,
        )

        hist = self.store.history(run_ids=list(rungs["run_id"]), metrics=[keys.GRAD_NORM, keys.DROP_FRACTION])
        target = hero_compute(self.prediction)
        settings = DynamicsSettings(window=self.rules.projection_window)
        out = []
        for metric in (keys.GRAD_NORM, keys.DROP_FRACTION):
            h = hist[hist["metric"] == metric]
            fr, vals, comp = [], [], []
            for _, r in rungs.iterrows():
                one = h[h["run_id"] == r["run_id"]].sort_values("step")
                if len(one):
                    fr.append(one["fraction"].to_numpy(float))
                    vals.append(one["value"].to_numpy(float))
                    comp.append(fit_compute(r))
            proj = project_curves(fr, vals, comp, target, settings) if fr else None
            out.append(RungCurves(fr, vals, np.array(comp), proj) if fr else None)
        return out[0], out[1]

    def _stale_prediction(self, obs: Observed) -> list[Alert]:
        """A warning, sent once for the prediction followed, while the rungs it was made from differ in the store from
        what it was fitted on (`ladder.predict.stale`); none for a prediction that kept no digest of them."""
        said = stale_warning(self.store, self.prediction)
        return [] if said is None else [Alert(STALE_PREDICTION, "warning", obs.last_step, said, keyed_by=0)]

    def _same_run(self) -> set[str]:
        """The stored run's name and id, where the store holds one run of the name (or id) followed: a state saved by a
        watch of its id (--target-run) follows it by its name too, and the other way round."""
        try:
            row = self.store.find(self.prediction.run_name) if self.store.exists() else None
        except LadderError:  # a name the store holds twice: which is meant is the user's to say
            return set()
        return set() if row is None else {str(row["name"]), str(row["run_id"])}

    def _sent_beside_the_replaced(self) -> dict[str, list[str]]:
        """The alerts of the rules that need no prediction that the watch of the prediction this one replaced sent (its
        state, moved into the newest ``earlier-watch-*/`` beside it by `retire_watch`), where it followed this run."""
        if self.prediction_dir is None or Path(self.state_path).parent != Path(self.prediction_dir):
            return {}
        earlier = sorted(Path(self.prediction_dir).glob(f"{WATCH_ASIDE}-*/{WATCH_FILES[0]}"))
        old = WatchState.read(earlier[-1]) if earlier else None
        if old is None or old.run != self.prediction.run_name:
            return {}
        try:
            judged_by = Prediction.load(earlier[-1].parent, checked=False)
        except LadderError:  # its copy lost or damaged: nothing it judged is known to stand
            judged_by = None
        sent, self._kept_verdicts = _standing(old, judged_by, self.prediction)
        return sent

    def _held_in_its_file(self, sink: str, keys: list[str]) -> list[str]:
        """`keys`, sent before a prediction was replaced, less those a JSON-lines sink's file lacks: the file moved
        aside with the watch it replaced (`retire_watch`), it is begun afresh beside the new prediction, where the
        report reads its alerts, and gets them again (marked ``redelivered``); a terminal, chat or webhook does not."""
        path = getattr(self.sinks.get(sink), "path", None)
        try:
            held = None if path is None else {a.get("key") for a in read_alerts(path, self.prediction.run_name)}
        except LadderError:  # not a watcher's alerts file: the sink's own business
            held = None
        return keys if held is None else [k for k in keys if k in held]

    def _sent_in_the_log(self) -> dict[str, list[str]]:
        """Where the state is missing but the alerts file beside it holds alerts of this run (the state deleted, or
        lost with a disk): those alerts, as sent to every sink, and said. Whether a webhook got them is not known;
        sending them all again would break the promise that no alert is sent twice."""
        path = getattr(self.sinks.get("jsonl"), "path", None)
        try:
            logged = [] if path is None else read_alerts(path, self.prediction.run_name)
        except LadderError:  # not a watcher's alerts file: nothing in it was sent
            return {}
        keys = {a["key"] for a in logged if isinstance(a.get("key"), str)}
        if keys and self.warn is not None:
            self.warn(f"no watch state at {self.state_path}, but {path} holds {len(keys)} alert"
                      f"{'s' if len(keys) > 1 else ''} of {self.prediction.run_name}: taken as sent, not sent again")
        return {name: sorted(keys) for name in self.sinks} if keys else {}

    def _prediction_file(self) -> Path | None:
        return None if self.prediction_dir is None else Path(self.prediction_dir) / "prediction.json"

    def _reload_if_replaced(self) -> str:
        """Where the prediction file changed since it was read (`ladder predict --out` or `ladder replan --out` into
        the watched folder, which moves the watch's state aside): read it and the state again, and say so."""
        path = self._prediction_file()
        if path is None or not path.is_file():
            return ""
        stamp = _stamp(path)
        if self._stamp is None or stamp == self._stamp:
            self._stamp = stamp
            return ""
        new = Prediction.load(path, checked=False)  # judged as the first one was
        old = self.prediction
        self.prediction = dataclasses.replace(new, run_name=old.run_name)  # the run followed stays
        if self._state is not None:  # a crash, a spike, a NaN, and what the new one judges as the old one did
            self._kept_sent, self._kept_verdicts = _standing(self._state, old, self.prediction)
        self._state, self._stamp = None, stamp
        return (f"the prediction in {self.prediction_dir} was replaced: the run is judged against the new one from "
                "here: NOTE")

    def _must_be_predicted(self, run: pd.Series, config: dict) -> None:
        """Refuse a run of other coordinates or another schedule than the prediction's target (`other_run`): it is
        another run, not one whose schedule was edited, and only the user can say which prediction it wants. A size
        that differs less (`counted_apart`) is said once, and the run judged."""
        other = other_run(self.prediction, run, schedule_of(config))
        name = self.prediction.run_name
        where = "" if self.prediction_dir is None else f" in {self.prediction_dir}"
        if not other:
            apart = counted_apart(self.prediction, run)
            if apart and apart != self._apart and self.warn is not None:
                self.warn(f"{name}'s size differs by more than {SIZE_AGREE:.0%} from that of the target the "
                          f"prediction{where} was made for ({apart}): counted another way (with embeddings, or total "
                          f"rather than active parameters)? It is judged as that run all the same (sizes "
                          f"{SIZE_APART:g}× apart would be another run's)")
            self._apart = apart
            return
        raise WrongRun(f"{name} is not the run the prediction{where} was made for ({other}); predict it with "
                       f"`ladder predict --target-run {name} --store {self.store.root} --out NEW_FOLDER` and watch it "
                       "against that prediction")

    def _say_unmeasured(self, obs: Observed) -> None:
        """Warn, once a watch, of a deadline the run's telemetry cannot check (no throughput logged): a check that
        lacks its data must not pass for one that found nothing."""
        if self.rules.deadline is None or self._rate_unlogged or self.warn is None or not obs.last_step:
            return  # (a run that has logged nothing yet may log its throughput with its first steps)
        if not (np.isfinite(obs.column(keys.TOKENS_PER_SECOND).to_numpy(float))).any():
            self._rate_unlogged = True
            self.warn(f"--deadline is not checked: the run logs no {keys.TOKENS_PER_SECOND}, the throughput it is "
                      f"judged by; log it, or ask `ladder replan --deadline ... --tokens-per-second N` what fits")

    def _maybe_repredict(self, config: dict, reached: int, run: pd.Series | None = None,
                         hist: pd.DataFrame | None = None) -> None:
        """A schedule edit the prediction did not know about: predict again from the realised schedule (the old
        prediction kept in ``earlier-prediction-<time>/``, and said). A prediction that holds the run's edits and more (a
        `ladder replan` ahead of the run) is the plan, and stays (`plan_holds`). The run is the predicted one
        (`_must_be_predicted`): only its edits may differ. A run whose config declares no schedule (its LR logged
        alone) is held to its planned steps and its logged LR (`_planned_by`; `hist`: its history)."""
        sched = schedule_of(config)
        plan = self.prediction.schedule
        if not sched and plan and run is not None and hist is not None:
            sched = _planned_by(plan, run.get("stop_after_steps"), lambda: _logged_lr(hist))
            config = {**config, "schedule": sched}  # the schedule the run is predicted again from
        if not sched or not plan or self.repredict is None:
            return
        done, planned = as_edits(sched.get("edits")), as_edits(plan.get("edits"))
        if plan_holds(done, planned, as_edits(plan.get("replaced")), reached):
            return
        missed = missed_edit(done, planned, reached)
        why = "" if missed is None else f"the run passed step {missed:,} without the edit the prediction holds there"
        old = self.prediction
        self.prediction = self.repredict(old, config, why)
        if self.prediction is old:  # nothing to predict again from (a run whose config gives no schedule)
            return
        for w in self.prediction.new_warnings(old) if self.warn is not None else ():  # (an edit nothing tests)
            self.warn(f"the new prediction: {w}")
        if self.warn is not None and stale_warning(self.store, old) is not None:  # its own evals judged anew: why
            self.warn("the rungs changed in the store since the prediction this one replaces was made: the new one is "
                      "fitted on them as they are stored now, so the evals it judges may move")
        if self.prediction_dir is not None:
            kept = keep_prediction(self.prediction_dir, "earlier-prediction")
            beside = self.prediction.beside_replan_config(self.prediction_dir)
            self.prediction.save(self.prediction_dir)
            if self.note is not None:
                self.note(f"the prediction it replaces is kept in {kept}/")
            if beside and self.warn is not None:
                self.warn(beside)
            self._stamp = _stamp(Path(self.prediction_dir) / "prediction.json")

    def _verdicts(self, obs: Observed, alerts: list[Alert], state: WatchState,
                  finished: bool = False) -> tuple[list[str], str]:
        points = obs.judged(self.prediction, self.rules.metric)
        evals = points["value"]
        # The last eval judged, not the last step seen: a step's train row can arrive before its eval.
        judged = max((int(v["step"]) for v in state.verdicts), default=0)
        # An eval logged again with another value (a run resumed from a checkpoint) is judged again.
        changed = relogged(state.verdicts, evals)
        if changed:  # from the first of them on, every eval is judged again (once each)
            state.verdicts = [v for v in state.verdicts if int(v["step"]) < min(changed)]
            judged = max((int(v["step"]) for v in state.verdicts), default=0)
        new_evals = [int(s) for s in evals.index if s > judged]
        lines, verdict, worst = [], "ok", "ok"
        prev = max([int(s) for s in evals.index if s <= judged], default=0)
        for step in new_evals:
            window = [a for a in alerts if prev < a.step <= step
                      and a.rule not in ("stale", "throughput", "deadline", STALE_PREDICTION)]
            verdict = _worst(window)
            # kept without the rules on the run's state now (a "short" finish the run's next import says is running):
            # a later check with no new eval adds them as they are then, not as they were
            own = _worst([a for a in window if a.rule not in LIVE_RULES])
            row = points.loc[step]
            value = float(row["value"])
            mean = averaged(int(row["n"]), int(row["first_step"]), step)
            frac = self.prediction.fraction_label(step, obs.planned_steps)
            why_not = self._not_comparable(row, step)
            if not np.isfinite(value):  # the NaN rule alerts once; every such eval is an alarm
                cmp = f"{value}{mean} (not a finite loss)"
                verdict = own = "alarm"
            elif why_not is None:
                cmp = (f"{value:.4f}{mean} vs predicted {row['median']:.4f} "
                       f"(50% band {row['lo50']:.4f}–{row['hi50']:.4f}; the prediction's error {row['median'] / value - 1:+.2%})")
            else:
                cmp = f"{value:.4f}{mean} ({why_not}: not compared)"
                verdict, own = _worse(verdict, CANNOT_JUDGE), _worse(own, CANNOT_JUDGE)
            again = " (logged again with another value: a resume, or a table imported again)" if step in changed else ""
            # where this eval's own deviation does not give the verdict, the alerts that do (their text follows)
            by = [a for a in window if a.level == verdict]
            by = [] if any(a.rule == "deviation" and a.step == step for a in by) else by
            named = f" (set by the {', '.join(f'{a.rule} {a.level} at step {a.step:,}' for a in by[:2])})" if by else ""
            lines.append(f"step {step:,} ({frac}): {self.rules.metric} {cmp}{again}{named}: {verdict.upper()}")
            state.verdicts.append({"step": step, "verdict": own, "time": self.clock(),
                                   "value": value if np.isfinite(value) else None})
            worst = _worse(worst, verdict)
            prev = step
        # Alerts past the last eval (a NaN loss, a spike, a crash) count now, not at the next eval
        live = [a for a in alerts if a.rule in LIVE_RULES or a.step > max(prev, judged)]
        state.verdicts.sort(key=lambda v: int(v["step"]))
        if new_evals:  # the check's verdict is the worst of the evals it judged: a cron job sees every warning
            verdict = worst
        elif state.verdicts:
            verdict = state.verdicts[-1]["verdict"]
        elif not new_evals and obs.column(self.rules.metric).empty and self._metric_missing(obs, finished):
            verdict = CANNOT_JUDGE
            others = ", ".join(c for c in obs.series.columns if str(c).startswith("eval")) or "no eval metric"
            lines.append(f"step {obs.last_step:,} ({self.prediction.fraction_label(obs.last_step, obs.planned_steps)}): the run "
                         f"logs no {self.rules.metric}, the metric predicted (it logs {others}): "
                         f"{CANNOT_JUDGE.upper()}")
        elif finished and not obs.column(self.rules.metric).empty:  # over, and not one eval where the prediction is
            verdict = CANNOT_JUDGE
            logged, steps = obs.column(self.rules.metric).index, self.prediction.table["step"]
            lines.append(f"the run ended at step {obs.last_step:,} and none of its {len(logged)} {self.rules.metric} "
                         f"evals (steps {int(logged.min()):,}–{int(logged.max()):,}) falls in the prediction's steps "
                         f"{int(steps.min()):,}–{int(steps.max()):,} (is it the run predicted?): {CANNOT_JUDGE.upper()}")
        return lines, _worse(verdict, _worst(live))

    def _not_comparable(self, row: pd.Series, step: int) -> str | None:
        """Why the prediction cannot judge the eval at `step`, or None when it can."""
        table = self.prediction.table
        # the steps with a value, in both messages: rows without one at either end count not
        valued = table["step"][np.isfinite(table["median"].to_numpy(np.float64))]
        steps = valued if valued.size else table["step"]
        if not steps.min() <= step <= steps.max():
            return f"outside the prediction's steps {int(steps.min()):,}–{int(steps.max()):,}"
        if row["covered"] < row["n"]:
            return (f"the prediction begins at step {int(steps.min()):,}, and spans {int(row['covered'])} of the "
                    f"{int(row['n'])} steps averaged here")
        bad = [c for c in BAND_COLUMNS if not np.isfinite(row[c])]
        if bad:
            return f"the prediction has no value for {', '.join(bad)} here"
        if not row["in_assumptions"]:
            return "outside the prediction's assumptions"
        return None

    def _metric_missing(self, obs: Observed, finished: bool) -> bool:
        """The predicted metric should have been logged by now: the first predicted eval has passed
        (a later step arrived) or the run is over."""
        first = int(self.prediction.table["step"].min())
        return obs.last_step > first or (finished and obs.last_step > 0)

    def _status_line(self, obs: Observed, verdict: str, state: WatchState, run_state: str) -> str:
        head = f"step {obs.last_step:,} ({self.prediction.fraction_label(obs.last_step, obs.planned_steps)})"
        quiet = None if obs.last_update is None else self.clock() - obs.last_update
        if run_state == "running" and quiet is not None and quiet >= QUIET_SAID:  # said before the stale rule warns
            head += (f", nothing new for {span_text(quiet)} (stale: a warning past "
                     f"{span_text(self.rules.stale_after_s)}, an alarm past {span_text(3 * self.rules.stale_after_s)})")
        if run_state != "running":  # the watch ends here: said, not left to an exit code alone
            short = "is marked finished, short of its plan," if _short(run_state, obs) else run_state
            head = f"the run {short} at {head}"
        if not state.verdicts:
            return f"{head}: no eval yet: {verdict.upper()}"
        last = state.verdicts[-1]
        since = f"{head}: no new eval since step {int(last['step']):,}; last verdict"
        if int(last["step"]) > obs.last_step:  # a run resumed from an earlier checkpoint: the evals past it are gone
            since = (f"{head}: the run went back from step {int(last['step']):,} (resumed from an earlier checkpoint); "
                     "an eval it logs again with another value is judged again; last verdict")
        if last["verdict"] != verdict:  # a live rule (stale telemetry, throughput) made it worse since
            since += f" {str(last['verdict']).upper()}, now"
        return f"{since}: {verdict.upper()}"

    def _deliver(self, state: WatchState, alerts: list[Alert], verdict: str, summary: str,
                 quiet: bool = False) -> list[Alert]:
        """Send each sink its new alerts; with `quiet` (no new eval) a sink with nothing new is skipped. An alert
        another sink had before this check (this sink's delivery of it failed then, or the sink was added since) is
        not new: it is sent apart, as late, after the check's own call, and does not count toward the check's exit
        code. Returns the alerts new to every sink."""
        known = state.delivered_to_any(self.sinks)
        new_any: dict[str, Alert] = {}
        for name, sink in self.sinks.items():
            done = state.delivered(name)
            fresh = [a for a in alerts if a.key not in done]
            # a sink that takes changes only (a chat) hears a deviation once, not again at every eval it persists
            heard = _repeats(fresh, done, state) if getattr(sink, "changes_only", False) else set()
            told = [a for a in fresh if a.key not in heard]
            if (quiet or heard) and not told:
                state.mark(name, list(heard))
                continue
            self.told.add(name)
            late = [a for a in told if a.key in known]
            new = [a for a in told if a.key not in known]
            # the check itself, once, before any earlier alerts (those a chat has posted apart, a file marks)
            sent = sink.send(new, verdict, summary)
            if sent:
                state.mark(name, [a.key for a in fresh if a not in late])
            if late and sink.send(late, verdict, summary, late=True):
                state.mark(name, [a.key for a in late])
            new_any.update({a.key: a for a in fresh if a.key not in known})
        return list(new_any.values())


QUIET_SAID = 120.0
"""A running run that has written nothing for this many seconds has it said in the watch's status line, long before
the stale rule warns (a pull takes a wandb offline run silent for 2 minutes for crashed)."""


STALE_PREDICTION = "prediction"
"""The rule of a prediction whose rungs changed in the store since it was made: said once for that prediction."""
LIVE_RULES = ("stale", "throughput", "deadline", "crashed", "short", STALE_PREDICTION)
"""Rules on the run's state at the check (silent for a while, too slow, marked crashed, marked finished short of its
plan), not on an eval: each check's verdict has them as they are then; an eval's kept verdict has them not."""
REPEATING = ("deviation", "drift")
"""Rules judged at every eval, whose alert at an eval repeats the one at the eval before while the run stays off."""
JUDGED_BY_PREDICTION = ("deviation", "drift", "lr")
"""The rules that judge the run against its prediction: a new prediction judges it anew."""


def not_stored(store: Store, name: str) -> str:
    """Where `store` holds no run of that name or id: that it may not be pulled yet or be a typo, with up to three
    stored names closest to it; "" where it holds one (it cannot be read for another reason)."""
    try:
        runs = store.runs()
    except LadderError:  # no store yet, or a damaged one: its own error says so
        return ""
    names = sorted({str(n) for n in runs["name"]})
    if name in names or name in set(runs["run_id"].astype(str)):
        return ""
    close = difflib.get_close_matches(name, names, n=3)
    return " (not pulled yet, or a typo?" + (f" the stored names closest to it: {', '.join(close)}" if close else "") + ")"


def _standing(state: WatchState, old: Prediction | None, new: Prediction) -> tuple[dict[str, list[str]], list[dict]]:
    """What of `state` stands where `new` replaces the prediction `old` it was judged against: the keys of the alerts
    it sent, per sink, of the rules that need no prediction (not `JUDGED_BY_PREDICTION`) and of the others at steps
    through which `new` is `old` (`Prediction.same_until`: a `ladder replan` changes no row before its edit, and its
    watch sends no alert of the steps before it again), and its verdicts of the evals there (not judged again)."""
    through = 0 if old is None else new.same_until(old)

    def stands(key: str) -> bool:
        rule, at = key.split(":")[0], key.rsplit(":", 1)[-1]  # "rule:level:step"
        if rule == STALE_PREDICTION:  # of the prediction replaced: the new one is said of anew
            return False
        return rule not in JUDGED_BY_PREDICTION or (at.isdigit() and int(at) <= through)

    return ({sink: [k for k in sent if stands(k)] for sink, sent in state.sent.items()},
            [v for v in state.verdicts if int(v["step"]) <= through])


def _repeats(alerts: list[Alert], done: set[str], state: WatchState) -> set[str]:
    """The keys of `alerts` of a `REPEATING` rule whose rule and level were raised at the eval judged just before:
    delivered by an earlier check, or among `alerts` themselves (a check that judges several evals at once, as a
    cron job or a watch started late does, tells the first of a run of them, as a watch that saw each would)."""
    steps = sorted({int(v["step"]) for v in state.verdicts})
    raised = done | {a.key for a in alerts}
    out = set()
    for a in alerts:
        before = [s for s in steps if s < a.step]
        if a.rule in REPEATING and before and f"{a.rule}:{a.level}:{before[-1]}" in raised:
            out.add(a.key)
    return out


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def relogged(verdicts: list[dict], evals: pd.Series) -> set[int]:
    """The judged steps whose eval now holds another value than the one judged (a run resumed from a checkpoint
    logs them again), or that the run no longer has (cut back and not yet logged again) with a later eval."""
    out = set()
    last = int(evals.index.max()) if len(evals) else 0
    for v in verdicts:
        step = int(v["step"])
        if "value" not in v:  # judged before values were kept
            continue
        if step not in evals.index:
            if step < last:
                out.add(step)
            continue
        now, then = float(evals.loc[step]), v["value"]
        same = (then is None and not np.isfinite(now)) or (then is not None and np.isfinite(now)
                                                           and abs(now - float(then)) <= 1e-9 * max(abs(now), 1.0))
        if not same:
            out.add(step)
    return out


def stopped(run: pd.Series, obs: Observed) -> list[Alert]:
    """An alarm when the run's source marks it crashed: it stopped before its plan's end (its trainer exited
    with an error, or was killed and wrote nothing for a while). A warning when it is marked finished short of its
    plan: its predicted end will not come, or its source calls a live run finished (a table imported without a
    state column)."""
    state, planned = str(run["state"]), max(obs.planned_steps, 1)
    first = obs.started_with or planned
    share = (f"{obs.last_step / first:.0%} of its plan, {obs.last_step / planned:.0%} of the edited plan"
             if first != planned else f"{obs.last_step / planned:.0%} of its plan")  # as the verdicts give it
    if state == "crashed":
        return [Alert("crashed", "alarm", obs.last_step,
                      f"the run stopped at step {obs.last_step:,} ({share}): its source marks it crashed (an error, or "
                      "no write for three times --stale-minutes); resume it from its last checkpoint, and watch on")]
    if _short(state, obs):
        return [Alert("short", "warning", obs.last_step,
                      f"the run is marked finished at step {obs.last_step:,} ({share} of {planned:,} steps): the "
                      "predicted end was not reached; if it is still training, its source calls it finished (a table "
                      "imported without a state column counts as finished: give it a column state of running, "
                      "import it again and watch on)")]
    return []


def _short(state: str, obs: Observed) -> bool:
    """Marked finished before `SHORT_OF_PLAN` of its planned steps."""
    return state == "finished" and obs.planned_steps > 0 and obs.last_step < SHORT_OF_PLAN * obs.planned_steps


class _OnlyRun:
    """A source narrowed to the one run being watched (the others are not read on every check)."""

    narrowed = True
    """It lists one run of its source: the others are not gone."""

    def __init__(self, source: Source, name: str, given: bool = False, store: Store | None = None) -> None:
        self.source = source
        self.name = name
        self.given = given
        """The name is --target-run's (else the prediction's)."""
        self.store = store
        """Where a run of that name was stored before: its id is the run's too (a wandb offline file is named only
        once read)."""
        self.listed = False
        """The last listing found the run, and no read of it has begun since."""
        self.run_id: str | None = None
        """The id of the run the last listing found: the store's copy from this source, where it holds two."""

    @property
    def key(self) -> str:
        return self.source.key

    def runs(self):
        self.listed = False
        refs = self.source.runs()
        ids = self._stored_ids()
        mine = [r for r in refs if self.name in (r.name, (r.config or {}).get("name"), r.run_id) or r.run_id in ids]
        unnamed = [r for r in refs if not (r.name or (r.config or {}).get("name"))]
        if not mine and len(unnamed) == 1 and len(refs) == 1:
            mine = unnamed  # its name is known once read (a wandb offline file): `read` checks it
        if refs and not mine:
            held = sorted({str(r.name or r.run_id) for r in refs})
            others = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
            if len(refs) > 1 and not unnamed:  # a folder of runs or a project: the run may not have started
                raise LadderError(f"no run {self.name!r} in {self.source.key} yet (it holds {others}"
                                  f"): a run that has not started is looked for "
                                  "again at each check; give --target-run where the run has another name")
            if unnamed:
                hint = ("; the names of runs there are known only once read: point the source at the watched run's "
                        "own folder, or give its id with --target-run")
                raise self._wrong(others, "", hint)
            raise self._wrong(others, refs[0].name or refs[0].run_id)  # here one run, of another name
        self.listed = bool(mine)
        self.run_id = mine[0].run_id if len(mine) == 1 else None
        return mine

    def _stored_ids(self) -> set[str]:
        """The ids of the runs the store holds under the name followed (none without a store)."""
        if self.store is None or not self.store.exists():
            return set()
        runs = self.store.runs()
        return set(runs.loc[runs["name"] == self.name, "run_id"].astype(str))

    def read(self, ref, cursor=None):
        self.listed = False
        run = self.source.read(ref, cursor)
        named = {str(n) for n in (run.name, ref.name, (ref.config or {}).get("name"), (run.config or {}).get("name")) if n}
        if self.name in named or self.name == ref.run_id or ref.run_id in self._stored_ids():
            return run
        if not named and cursor is not None:  # a read from where the last stopped (a wandb file's new records) need not
            return run                        # name the run again: the store holds it from this source already
        raise self._wrong(repr(", ".join(sorted(named)) or ref.run_id), sorted(named)[0] if named else ref.run_id)

    def _wrong(self, held: str, other: str, hint: str = "") -> WrongRun:
        """The source holds `held`, not the run named: by --target-run (a typo, or another run's name), or by the
        prediction (another run than predicted, or the predicted one under another name, `other`)."""
        if self.given:
            hint = hint or f"; give the name or id of the run to follow there (--target-run {other}?)"
            return WrongRun(f"--target-run {self.name!r}: {self.source.key} holds {held}{hint}")
        hint = hint or f", or give --target-run {other} where it is that run under another name"
        return WrongRun(f"the prediction is for {self.name!r}, but {self.source.key} holds {held}: watch the run the "
                        f"prediction was made for{hint}")


class Refused(LadderError):
    """A check that cannot be made until the user acts (a usage error, exit 2), as opposed to a run that cannot
    be read now (exit 3) and may be at the next check."""


class WrongRun(Refused):
    """The run followed is not the one the prediction was made for (another name, or other coordinates or
    schedule)."""


def fit_compute(run: pd.Series) -> float:
    """A stored run's planned fit compute: fit FLOPs per token × planned tokens (6·N when only N is
    known); NaN when neither is known."""
    flops = run.get("fit_flops_per_token")
    if flops is None or pd.isna(flops):
        active = run.get("active_params")
        if active is None or pd.isna(active):
            return float("nan")
        flops = 6.0 * float(active)
    tokens = run.get("planned_tokens")
    return float("nan") if tokens is None or pd.isna(tokens) else float(flops) * float(tokens)


def only_run(source: Source, name: str, given: bool = False, store: Store | None = None) -> Source:
    """`source` narrowed to the run `name` (`given`: by --target-run, which its errors then name; `store`: where the
    run may be stored under that name, with its id)."""
    return _OnlyRun(source, name, given, store)


def _worst(alerts: list[Alert]) -> str:
    level = max((LEVELS[a.level] for a in alerts), default=0)
    return {0: "ok", 1: "warning", 2: "alarm"}[level]


def _worse(a: str, b: str) -> str:
    return a if RANK.get(a, RANK[CANNOT_JUDGE]) >= RANK.get(b, RANK[CANNOT_JUDGE]) else b


def unusable(pred: Prediction) -> str | None:
    """Why no eval could be judged against `pred` (no rows, values that are not numbers, steps out of
    order, no finite row inside its assumptions), or None when some can."""
    t = pred.table
    if t.empty:
        return "it has no rows"
    try:
        steps = t["step"].to_numpy(dtype=float)
        values = t[BAND_COLUMNS].to_numpy(dtype=float)
        inside = t["in_assumptions"].to_numpy(dtype=bool)
    except (TypeError, ValueError):
        return "its table holds values that are not numbers"
    if not np.isfinite(steps).all() or (steps <= 0).any() or (np.diff(steps) <= 0).any():
        return "its steps are not positive and increasing"
    if not (np.isfinite(values).all(axis=1) & inside).any():
        return "no row has a finite median and bands inside its assumptions"
    return None


def _reached(run: pd.Series) -> int:
    """The last step the store holds of the run (-1 before its first row)."""
    last = run.get("last_step")
    return -1 if last is None or pd.isna(last) else int(last)


def _planned_by(plan: dict, steps: object, logged: Callable[[], tuple[np.ndarray, np.ndarray]]) -> dict:
    """For a run whose config declares no schedule, the schedule of the prediction (`plan`) it runs where its planned
    `steps` (its stored coordinates) differ from the prediction's: that plan without the prediction's last edit (a
    replan's) and with the edits that edit replaced, or with none, whichever plans those steps, unless its `logged`
    LR past that edit follows the prediction's edit more closely; {} where the run is the prediction's, where no plan
    of the two is its, and where it logs an LR but none past that edit yet (the LR will tell)."""
    from ladder.config.schedule import Schedule, as_logged
    from ladder.config.yamlio import build

    known = {f.name for f in dataclasses.fields(Schedule)}
    base = {k: v for k, v in plan.items() if k in known}
    edits, replaced = as_edits(base.get("edits")), as_edits(plan.get("replaced"))
    if not edits or steps is None or pd.isna(steps) or not all(_placed(e) for e in (*edits, *replaced)):
        return {}
    before = sorted([*edits[:-1], *replaced], key=lambda e: e["at_step"])
    try:
        predicted, *others = (build(Schedule, c) for c in (base, {**base, "edits": before}, {**base, "edits": []}))
    except (LadderError, TypeError, ValueError):
        return {}
    if predicted.horizon == int(steps):
        return {}
    run = next((o for o in others if o.horizon == int(steps)), None)
    if run is None:
        return {}
    at, lr = logged()
    past = (at > edits[-1]["at_step"]) & np.isfinite(lr) & (lr > 0)
    if past.any():  # its LR says which plan it runs (the LR logged at step s is that of step s - 1)
        miss = [np.abs(np.log(lr[past] / np.maximum(as_logged(s.lrs(0, int(at[past].max())), at[past]), 1e-300))).mean()
                for s in (predicted, run)]
        if miss[0] <= miss[1]:
            return {}
    elif np.isfinite(lr).any():  # an LR logged, none past the edit yet: the plan holds until the LR can tell
        return {}
    return to_dict(run)


def _logged_lr(hist: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The LR a run's history (`hist`) logs: its steps and values."""
    h = hist[hist["metric"].astype(str) == keys.LEARNING_RATE]
    return h["step"].to_numpy(np.int64), h["value"].to_numpy(np.float64)


def _placed(edit: object) -> bool:
    """An edit (`as_edits`) with its step as a whole number (a prediction.json edited by hand may have none)."""
    return isinstance(edit, dict) and isinstance(edit.get("at_step"), int) and not isinstance(edit["at_step"], bool)

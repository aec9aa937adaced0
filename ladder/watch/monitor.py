"""One check of a live run, and the polling loop around it.

A check pulls what is new from the run's source into the store (the same incremental, atomic pull
as `ladder pull`), evaluates every rule on the run's whole history, sends each sink the alerts it
has not had yet, prints a verdict for every new eval, and saves the state. Exit codes of a check:
0 on track, 1 warning, 2 alarm, 3 cannot read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ladder import runfiles as keys
from ladder.errors import LadderError
from ladder.prediction import Prediction
from ladder.sources.pull import Source, pull
from ladder.store import Store
from ladder.watch.rules import LEVELS, Alert, AlertRules, Observed, RungCurves, evaluate
from ladder.watch.sinks import Sink
from ladder.watch.state import WatchState

EXIT = {"ok": 0, "warning": 1, "alarm": 2, "unreadable": 3}

Repredict = Callable[[Prediction, dict], Prediction]
"""Given the stale prediction and the run's config (with its schedule edits), a new prediction."""


@dataclass(frozen=True)
class CheckResult:
    verdict: str
    """ok, warning, alarm or unreadable."""
    new_alerts: tuple[Alert, ...] = ()
    lines: tuple[str, ...] = ()
    """One verdict line per new eval."""
    finished: bool = False
    prediction: Prediction | None = None

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]


@dataclass
class Watcher:
    store: Store
    source: Source
    prediction: Prediction
    rules: AlertRules
    sinks: dict[str, Sink]
    state_path: Path
    repredict: Repredict | None = None
    prediction_dir: Path | None = None
    """Where a re-made prediction is saved (next to the original)."""
    clock: Callable[[], float] = time.time
    _state: WatchState | None = field(default=None, repr=False)

    def check(self) -> CheckResult:
        now = self.clock()
        state = self._state or WatchState.load(self.state_path, run=self.prediction.run_name)
        self._state = state
        try:
            pull(self.store, self.source)
            run = self.store.run(self.prediction.run_name)
        except WrongRun:
            raise
        except LadderError as exc:
            summary = f"cannot read {self.prediction.run_name}: {exc}"
            self._deliver(state, [], "unreadable", summary)
            state.save(self.state_path)
            return CheckResult("unreadable", lines=(summary,))
        config = self.store.config(str(run["run_id"]))
        self._maybe_repredict(config)
        obs = self._observed(run, state, now)
        alerts = evaluate(obs, self.prediction, self.rules, now, *self._rung_refs(run))
        lines, verdict = self._verdicts(obs, alerts, state)
        summary = "\n".join(lines) if lines else self._status_line(obs, verdict)
        fresh = self._deliver(state, alerts, verdict, summary, quiet=not lines)
        state.last_step = max(state.last_step, obs.last_step)
        state.save(self.state_path)
        return CheckResult(verdict, tuple(fresh), tuple(lines), str(run["state"]) != "running", self.prediction)

    def run(self, poll_seconds: float, max_checks: int | None = None) -> CheckResult:
        """Check every `poll_seconds` until the run finishes (or `max_checks`)."""
        n = 0
        while True:
            result = self.check()
            n += 1
            if result.finished or (max_checks is not None and n >= max_checks):
                return result
            time.sleep(poll_seconds)

    # ---- pieces -------------------------------------------------------------------------------------
    def _observed(self, run: pd.Series, state: WatchState, now: float) -> Observed:
        hist = self.store.history(run_ids=[str(run["run_id"])], include_nonfinite=True)
        series = hist.pivot_table(index="step", columns="metric", values="value", aggfunc="last", observed=True)
        last = int(series.index.max()) if len(series) else 0
        # Staleness is measured from when the watcher saw the step advance: sources differ in
        # which clock, if any, they log.
        if last > state.last_step or state.advanced_at is None:
            state.advanced_at = now
        return Observed(series.sort_index(), int(run["stop_after_steps"]), int(run["tokens_per_step"]),
                        last_update=state.advanced_at)

    def _rung_refs(self, run: pd.Series) -> tuple[RungCurves | None, RungCurves | None]:
        runs = self.store.runs()
        rungs = runs[(runs["role"] == "rung") & (runs["group"] == run["group"])]
        if rungs.empty:
            return None, None
        hist = self.store.history(run_ids=list(rungs["run_id"]), metrics=[keys.GRAD_NORM, keys.DROP_FRACTION])
        out = []
        for metric in (keys.GRAD_NORM, keys.DROP_FRACTION):
            h = hist[hist["metric"] == metric]
            fr, vals, comp = [], [], []
            for _, r in rungs.iterrows():
                one = h[h["run_id"] == r["run_id"]].sort_values("step")
                if len(one):
                    fr.append(one["fraction"].to_numpy(float))
                    vals.append(one["value"].to_numpy(float))
                    comp.append(float(r["fit_flops_per_token"]) * float(r["planned_tokens"]))
            out.append(RungCurves(fr, vals, np.array(comp)) if fr else None)
        return out[0], out[1]

    def _maybe_repredict(self, config: dict) -> None:
        """A schedule edit the prediction did not know about: predict again from the realised schedule."""
        sched = _schedule_of(config)
        if self.repredict is None or not sched or not self.prediction.schedule:
            return
        if sched.get("edits", []) == self.prediction.schedule.get("edits", []):
            return
        self.prediction = self.repredict(self.prediction, config)
        if self.prediction_dir is not None:
            self.prediction.save(self.prediction_dir)

    def _verdicts(self, obs: Observed, alerts: list[Alert], state: WatchState) -> tuple[list[str], str]:
        evals = obs.column(self.rules.metric)
        # The last eval judged, not the last step seen: a step's train row can arrive before its eval.
        judged = max((int(v["step"]) for v in state.verdicts), default=0)
        new_evals = [int(s) for s in evals.index if s > judged]
        lines, verdict = [], "ok"
        prev = max([int(s) for s in evals.index if s <= judged], default=0)
        at = self.prediction.at(np.array(new_evals)) if new_evals else None
        for i, step in enumerate(new_evals):
            window = [a for a in alerts if prev < a.step <= step and a.rule not in ("stale", "throughput")]
            verdict = _worst(window)
            row = at.iloc[i]
            value = float(evals.loc[step])
            frac = step / obs.planned_steps
            if np.isfinite(row["median"]) and row["in_assumptions"]:
                cmp = (f"{value:.4f} vs predicted {row['median']:.4f} "
                       f"[{row['lo50']:.4f}, {row['hi50']:.4f}] ({value / row['median'] - 1:+.2%})")
            else:
                cmp = f"{value:.4f} (outside the prediction's assumptions: not compared)"
            lines.append(f"step {step:,} ({frac:.0%}): {self.rules.metric} {cmp}: {verdict.upper()}")
            state.verdicts.append({"step": step, "verdict": verdict, "time": self.clock()})
            prev = step
        live = [a for a in alerts if a.rule in ("stale", "throughput")]
        if not new_evals and state.verdicts:
            verdict = state.verdicts[-1]["verdict"]
        worst = _worst(live)
        if LEVELS[worst] > LEVELS[verdict]:
            verdict = worst
        return lines, verdict

    def _status_line(self, obs: Observed, verdict: str) -> str:
        return f"step {obs.last_step:,} ({obs.last_step / max(obs.planned_steps, 1):.0%}): no new eval; {verdict.upper()}"

    def _deliver(self, state: WatchState, alerts: list[Alert], verdict: str, summary: str,
                 quiet: bool = False) -> list[Alert]:
        """Send each sink its new alerts; with `quiet` (no new eval) a sink with nothing new is skipped."""
        fresh_any: dict[str, Alert] = {}
        for name, sink in self.sinks.items():
            done = state.delivered(name)
            fresh = [a for a in alerts if a.key not in done]
            if quiet and not fresh:
                continue
            if sink.send(fresh, verdict, summary):
                state.mark(name, [a.key for a in fresh])
            fresh_any.update({a.key: a for a in fresh})
        return list(fresh_any.values())


class _OnlyRun:
    """A source narrowed to the one run being watched (the others are not read on every check)."""

    def __init__(self, source: Source, name: str) -> None:
        self.source = source
        self.name = name

    @property
    def key(self) -> str:
        return self.source.key

    def runs(self):
        refs = self.source.runs()
        mine = [r for r in refs if self.name in (r.name, (r.config or {}).get("name"), r.run_id)]
        if refs and not mine:
            others = ", ".join(sorted({str(r.name or r.run_id) for r in refs})[:5])
            raise WrongRun(f"the prediction is for {self.name!r}, but {self.source.key} holds {others}: "
                           "watch the run the prediction was made for")
        return mine

    def read(self, ref, cursor=None):
        return self.source.read(ref, cursor)


class WrongRun(LadderError):
    """The source holds runs, none of them the predicted one."""


def only_run(source: Source, name: str) -> Source:
    return _OnlyRun(source, name)


def _worst(alerts: list[Alert]) -> str:
    level = max((LEVELS[a.level] for a in alerts), default=0)
    return {0: "ok", 1: "warning", 2: "alarm"}[level]


def _schedule_of(config: dict) -> dict:
    """The schedule from a run's config, wherever the source put it."""
    for candidate in (config.get("run_config"), config):
        if isinstance(candidate, dict) and isinstance(candidate.get("schedule"), dict):
            return candidate["schedule"]
        if isinstance(candidate, str):
            try:
                parsed = json.loads(candidate)
            except ValueError:
                continue
            if isinstance(parsed, dict) and isinstance(parsed.get("schedule"), dict):
                return parsed["schedule"]
    return {}

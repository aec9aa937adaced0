"""Live monitoring of a run against its prediction: rules, sinks, state and the watch loop."""

from ladder.watch.rules import Alert, AlertRules, Observed, RungCurves, evaluate
from ladder.watch.sinks import JsonlSink, NullSink, TerminalSink, WebhookSink
from ladder.watch.state import WatchState

__all__ = [
    "Alert",
    "AlertRules",
    "JsonlSink",
    "NullSink",
    "Observed",
    "RungCurves",
    "TerminalSink",
    "WatchState",
    "WebhookSink",
    "evaluate",
]

"""Where alerts go: the terminal, a JSON-lines file, a webhook, or nowhere.

Every sink has `send(alerts, verdict)`; `send` returns False when delivery failed so the watcher
retries those alerts on its next check. The webhook URL comes from the environment and is never
printed or written anywhere.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from rich.console import Console

from ladder.errors import LadderError
from ladder.watch.rules import Alert

WEBHOOK_ENV = "LADDER_WEBHOOK_URL"
STYLE = {"ok": "green", "warning": "yellow", "alarm": "bold red", "unreadable": "magenta"}


class Sink(Protocol):
    def send(self, alerts: Sequence[Alert], verdict: str, summary: str) -> bool: ...


class NullSink:
    def send(self, alerts: Sequence[Alert], verdict: str, summary: str) -> bool:
        return True


class TerminalSink:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()

    def send(self, alerts: Sequence[Alert], verdict: str, summary: str) -> bool:
        for line in summary.splitlines():  # one line per eval, each ending with its own verdict
            own = line.rsplit(": ", 1)[-1].strip().lower()
            label = own if own in STYLE else verdict
            self.console.print(f"[{STYLE.get(label, 'white')}]{label.upper():>8}[/] {line}", highlight=False)
        for a in alerts:
            self.console.print(f"         [{STYLE[a.level]}]{a.level}[/] [{a.rule}] step {a.step}: {a.message}",
                               highlight=False)
        return True


class JsonlSink:
    """One JSON object per alert (and one per verdict), appended."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def send(self, alerts: Sequence[Alert], verdict: str, summary: str) -> bool:
        now = time.time()
        lines = [json.dumps({"time": now, "kind": "alert", **a.to_json()}) for a in alerts]
        lines.append(json.dumps({"time": now, "kind": "verdict", "verdict": verdict, "summary": summary}))
        with self.path.open("a") as f:
            f.write("\n".join(lines) + "\n")
        return True


class WebhookSink:
    """HTTP POST of JSON to an incoming-webhook URL (chat tools read ``text`` or ``content``).

    Only new alerts are posted; a plain on-track verdict is not.
    """

    def __init__(self, url: str, timeout: float = 10.0, retries: int = 3, console: Console | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise LadderError(f"${WEBHOOK_ENV} must be an http(s) URL")
        self._url = url
        self.timeout = timeout
        self.retries = retries
        self.console = console or Console(stderr=True)

    @classmethod
    def from_env(cls, var: str = WEBHOOK_ENV) -> WebhookSink:
        url = os.environ.get(var, "")
        if not url:
            raise LadderError(f"--webhook needs the webhook URL in the environment variable {var}")
        return cls(url)

    def send(self, alerts: Sequence[Alert], verdict: str, summary: str) -> bool:
        if not alerts:
            return True
        text = f"[{verdict.upper()}] {summary}\n" + "\n".join(
            f"• {a.level} [{a.rule}] step {a.step}: {a.message}" for a in alerts
        )
        body = json.dumps({"text": text, "content": text[:2000], "verdict": verdict,
                           "alerts": [a.to_json() for a in alerts]}).encode()
        request = urllib.request.Request(self._url, data=body, headers={"Content-Type": "application/json"})
        for attempt in range(self.retries):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    if 200 <= response.status < 300:
                        return True
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                reason = getattr(exc, "code", None) or type(exc).__name__
                if attempt == self.retries - 1:
                    self.console.print(f"[yellow]webhook delivery failed ({reason}); will retry on the next check[/]")
            time.sleep(min(2.0**attempt * 0.5, 5.0))
        return False

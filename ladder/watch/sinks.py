"""Where alerts go: the terminal, a JSON-lines file, a webhook, or nowhere.

Every sink has `send(alerts, verdict, summary)`; `send` returns False when delivery failed so the watcher
retries those alerts on its next check, sent apart with `late=True` (earlier alerts, not that check's news),
after the check's own `send`: the webhook posts them as a re-delivery, the alerts file marks them
(``"redelivered": true``), and neither the file nor the terminal gives the check's verdict twice.
The webhook URL comes from the environment and is never printed or written anywhere.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.markup import escape

from ladder.errors import LadderError
from ladder.watch.rules import RANK, Alert

WEBHOOK_ENV = "LADDER_WEBHOOK_URL"
STYLE = {"ok": "green", "warning": "yellow", "alarm": "bold red", "unreadable": "magenta", "cannot-judge": "magenta",
         "note": "cyan"}
"""Each verdict's colour on the terminal, and a note's (a line that is no verdict, such as a prediction replaced)."""


SHOWN_ALERTS = 5
"""The terminal shows the latest this many alerts of one rule and level a check raises (a watch started late judges
every eval so far at once); the earlier ones are counted, and every sink else gets each one."""


class Sink(Protocol):
    def send(self, alerts: Sequence[Alert], verdict: str, summary: str, late: bool = False) -> bool:
        """Deliver `alerts` with the check's `verdict` and `summary`; `late`: the alerts are earlier ones a failed
        delivery left (or a sink added since never had), not the check's news, sent after the check's own call,
        which gave its verdict and summary. False where delivery failed."""
        ...


class NullSink:
    def send(self, alerts: Sequence[Alert], verdict: str, summary: str, late: bool = False) -> bool:
        return True


class TerminalSink:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()

    def send(self, alerts: Sequence[Alert], verdict: str, summary: str, late: bool = False) -> bool:
        whole = not self.console.is_terminal  # in a file or a pipe, one line a verdict or alert: a log greps by line
        for line in () if late else summary.splitlines():  # one line per eval, each ending with its verdict, in front
            head, _, own = line.rpartition(": ")
            own = own.strip().lower()
            label = own if own in STYLE else verdict
            if head and own in STYLE and not head.endswith(("verdict", "now")):  # "last verdict: OK" keeps it
                line = head
            self.console.print(f"[{STYLE.get(label, 'white')}]{label.upper():>8}[/] {escape(line)}", highlight=False, markup=True,
                               soft_wrap=whole)
        earlier = " (an earlier alert, not shown when raised)" if late else ""
        many = Counter((a.rule, a.level) for a in alerts)
        seen: Counter[tuple[str, str]] = Counter()
        for a in alerts:  # rule names and messages are text, not markup: "[non_finite]" must show
            seen[a.rule, a.level] += 1
            hidden = many[a.rule, a.level] - SHOWN_ALERTS  # the latest are shown: where the run is now
            if seen[a.rule, a.level] <= hidden:
                if seen[a.rule, a.level] == 1:
                    self.console.print(f"         [{STYLE[a.level]}]{a.level}[/] " + escape(
                        f"[{a.rule}] {hidden} earlier at steps {a.step:,} and on" + (
                            "" if late else ", each above as its eval's verdict") + "; the alerts file holds every one"),
                        highlight=False, markup=True, soft_wrap=whole)
                continue
            self.console.print(f"         [{STYLE[a.level]}]{a.level}[/] "
                               + escape(f"[{a.rule}] step {a.step:,}: {a.message}{earlier}"), highlight=False, markup=True,
                               soft_wrap=whole)
        return True


class JsonlSink:
    """One JSON object per alert (and one per check's verdict), appended; each names the watched `run` where one is
    given, so that a report of another run against the same prediction leaves them out. Earlier alerts sent late
    are marked ``"redelivered": true``, with no verdict of their own."""

    def __init__(self, path: str | os.PathLike, run: str | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tag = {} if run is None else {"run": run}

    def send(self, alerts: Sequence[Alert], verdict: str, summary: str, late: bool = False) -> bool:
        now = time.time()
        mark = {"redelivered": True} if late else {}
        lines = [json.dumps({"time": now, "kind": "alert", **self.tag, **a.to_json(), **mark}) for a in alerts]
        if not late:  # the check's own call gave it
            lines.append(json.dumps({"time": now, "kind": "verdict", **self.tag, "verdict": verdict,
                                     "summary": summary}))
        _append_lines(self.path, ("\n".join(lines) + "\n").encode())
        return True

    def end_cut_line(self) -> None:
        """Give a last line cut short (a watch stopped mid-write) the newline it lacks, so that the file is whole
        again before anything is sent (a check with nothing new sends nothing). The caller holds its lock."""
        if self.path.exists():
            _append_lines(self.path, b"")


def read_alerts(path: str | os.PathLike, run: str | None = None) -> list[dict]:
    """The alerts a watcher appended to its JSON-lines file (verdict lines and torn lines skipped); with `run`,
    less those that name another run (a line written before alerts named their run is kept)."""
    p = Path(path)
    if not p.exists():
        return []
    rows, lines, read = [], 0, 0
    for line in p.read_text(errors="replace").splitlines():
        lines += bool(line.strip())
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        read += isinstance(rec, dict) and "kind" in rec
        if isinstance(rec, dict) and rec.get("kind") == "alert":
            rows.append(rec)
    if lines and not read:
        raise LadderError(f"{p}: not a watcher's alerts file (no line of it is an alert or a verdict)")
    return rows if run is None else of_run(rows, run)


def of_run(alerts: Sequence[dict], run: str) -> list[dict]:
    """The `alerts` of `run` (a line written before alerts named their run is kept)."""
    return [a for a in alerts if a.get("run", run) == run]


def _append_lines(path: Path, data: bytes) -> None:
    """Append `data` (whole lines) to `path` in one write. A file left ending in a cut line (a watch killed
    mid-write, a full disk) first gets the newline it lacks, so the cut line stays a line of its own that readers
    skip instead of spoiling the first new one; a write that fails takes back what it wrote, so a full disk leaves
    no half batch behind. The caller holds the file's lock (`only_watcher`): nobody else appends meanwhile."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        try:
            _write_all(fd, b"\n" + data if _ends_in_a_cut_line(fd, size) else data)
        except OSError:
            os.ftruncate(fd, size)  # only the bytes this call wrote, after the file's last line
            raise
    finally:
        os.close(fd)


def _ends_in_a_cut_line(fd: int, size: int) -> bool:
    """Whether the file open at `fd`, `size` bytes long, ends in a line without its newline."""
    if not size:
        return False
    os.lseek(fd, size - 1, os.SEEK_SET)  # O_APPEND writes go to the end all the same
    return os.read(fd, 1) != b"\n"


def _write_all(fd: int, data: bytes) -> None:
    """Write `data` to `fd`: in one call, as a rule; again with the rest where the system took only part of it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect: urllib would follow a 302 as a GET without the body, to another address."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        return None  # urllib then raises HTTPError with the 3xx code


def _without_credentials(parts: urllib.parse.SplitResult) -> tuple[str, dict[str, str]]:
    """The URL without a user:password@ part, and the Basic authorization header that carries it (urllib
    sends no credentials written into a URL, and would read "user:password@host" as the host)."""
    if parts.username is None and parts.password is None:
        return parts.geturl(), {}
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    user = urllib.parse.unquote(parts.username or "") + ":" + urllib.parse.unquote(parts.password or "")
    return (parts._replace(netloc=netloc).geturl(),
            {"Authorization": "Basic " + base64.b64encode(user.encode()).decode()})


class WebhookSink:
    """HTTP POST of JSON to an incoming-webhook URL (chat tools read ``text`` or ``content``).

    Only new alerts are posted; a plain on-track verdict is not, nor a deviation or drift alert of the level
    posted at the eval before (`changes_only`): a run that stays off hears it when it starts and when it
    worsens. Delivery counts only on a 2xx answer: a redirect is not followed (the alert would arrive
    nowhere, or as an empty GET) but is a failed delivery, retried and then reported, and the watcher sends it
    again on its next check.
    """

    changes_only = True

    def __init__(self, url: str, timeout: float = 10.0, retries: int = 3, console: Console | None = None,
                 backoff: float = 0.5) -> None:
        url = url.strip()  # a newline a shell's $(cat FILE) or a copy left at either end
        if not url.startswith(("http://", "https://")):
            raise LadderError(f"${WEBHOOK_ENV} must be an http(s) URL")
        inner = next((i for i, c in enumerate(url) if c.isspace() or not c.isprintable()), None)
        if inner is not None:  # the client refuses it at every post: the user's to fix now, not a retry at each check
            raise LadderError(f"${WEBHOOK_ENV} holds a space or control character (character {inner + 1} of "
                              f"{len(url)}); copy the webhook URL again (a space inside one is written %20)")
        try:  # a URL the client cannot even parse is the user's to fix now, not an error at the first alert
            parts = urllib.parse.urlsplit(url)
            _ = parts.port
        except ValueError:
            raise LadderError(f"${WEBHOOK_ENV} is not a well-formed URL (its host or port cannot be read); "
                              "copy the webhook URL again") from None
        if not parts.hostname:
            raise LadderError(f"${WEBHOOK_ENV} has no host; copy the webhook URL again")
        self._url, self._headers = _without_credentials(parts)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        """Seconds before the first retry, doubled for each next one (at most 5)."""
        self.console = console or Console(stderr=True)
        self._opener = urllib.request.build_opener(_NoRedirect)

    @classmethod
    def from_env(cls, var: str = WEBHOOK_ENV, console: Console | None = None) -> WebhookSink:
        url = os.environ.get(var, "")
        if not url:
            raise LadderError(f"--webhook needs the webhook URL in the environment variable {var}")
        return cls(url, console=console)

    def send(self, alerts: Sequence[Alert], verdict: str, summary: str, late: bool = False) -> bool:
        if not alerts:
            return True
        lines = summary.split("\n")
        if not late:  # an alert on an eval judged before (a rule that judges it otherwise now) may be worse than the verdict
            verdict = max([verdict, *(a.level for a in alerts)], key=lambda v: RANK.get(v, 1))
        # a check that judged many evals has a line each: the one of the verdict heads the post, the alerts follow it,
        # and the other lines come last (a chat shows the start of a long post)
        worst = [i for i, line in enumerate(lines) if line.rstrip().upper().endswith(verdict.upper())]
        first = lines.pop(worst[-1] if worst else 0)
        head = (f"[RE-DELIVERED] {_earlier(alerts)}, not delivered when raised; this check: {first}" if late
                else f"[{verdict.upper()}] {first}")  # a re-delivery headed as what it is, not as this check's verdict
        text = head + "\n" + "\n".join(f"• {a.level} [{a.rule}] step {a.step}: {a.message}" for a in alerts)
        if lines:
            text += "\n\n" + "\n".join(lines)
        body = json.dumps({"text": text, "content": text[:2000], "verdict": verdict, "redelivered": late,
                           "alerts": [a.to_json() for a in alerts]}).encode()
        if not self._post(body):
            return False
        if late:
            self.console.print(f"webhook: {escape(_earlier(alerts))} delivered now ("
                               + escape("; ".join(f"{a.level} [{a.rule}] step {a.step}" for a in alerts))
                               + "); the verdict and exit code are this check's", highlight=False, markup=True,
                               soft_wrap=True)
        return True

    def _post(self, body: bytes) -> bool:
        """POST `body`, retried; False (and said) where no try got a 2xx answer."""
        request = urllib.request.Request(self._url, data=body, headers={"Content-Type": "application/json",
                                                                        **self._headers}, method="POST")
        reason = ""
        for attempt in range(self.retries):
            if attempt:
                time.sleep(min(2.0 ** (attempt - 1) * self.backoff, 5.0))
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    if 200 <= response.status < 300:
                        return True
                    reason = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                reason = f"HTTP {exc.code}" + (" (a redirect: give the final URL)" if 300 <= exc.code < 400 else "")
            except (urllib.error.URLError, TimeoutError, OSError, ValueError, http.client.HTTPException) as exc:
                # HTTPException: an answer that is not HTTP (an http:// URL at an https port, say)
                reason = type(getattr(exc, "reason", None) or exc).__name__
        self.console.print(f"[yellow]webhook delivery failed after {self.retries} tries ({escape(reason)}); "
                           "will retry on the next check[/]", highlight=False, markup=True, soft_wrap=True)
        return False


def _earlier(alerts: Sequence[Alert]) -> str:
    return "the earlier alert" if len(alerts) == 1 else f"{len(alerts)} earlier alerts"

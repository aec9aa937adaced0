"""wandb cloud projects, through wandb's public API (`wandb.Api`).

Runs are listed with ``api.runs(path, filters=..., lazy=False)`` (config and summary in the listing),
and histories are read with ``run.scan_history``, never ``run.history`` (a 500-point sample that can
miss the last points). ``scan_history`` only returns rows that hold every requested key, so with
``keys`` each key gets its own scan; without, one scan returns every row.

Reads are incremental: the cursor keeps the last step each scan returned, and the next read starts
there (the last row is read again, since a step's row can gain keys after it was first read). A
finished run whose last step has not moved is not scanned at all.

Failures: HTTP 429 waits for the server's ``RateLimit-Reset`` (or ``Retry-After``) and tries again;
5xx, timeouts and dropped connections back off exponentially; a scan cut off half way continues
after the last row it returned. A rejected key, a missing project or an unreachable server ends the
pull with one sentence. ``WANDB_API_KEY`` and ``WANDB_BASE_URL`` come from the environment and are
never printed: messages from wandb are scrubbed of both.
"""

from __future__ import annotations

import datetime
import email.utils
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ladder import metrics as metric_keys
from ladder.data.sources.coords import with_job_type
from ladder.data.sources.table import (
    RowBuilder,
    RunRef,
    Skipped,
    SourceRun,
    as_number,
    map_state,
    raw_frame,
    same_step_key,
    whole_count,
)
from ladder.errors import LadderError, NoCredentials, SourceUnavailable

_PATH = re.compile(r"^[^/\s]+/[^/\s]+$")
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_ALL = "*"


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    """Tries per request, the first included."""
    base_s: float = 2.0
    """First back-off wait; doubles each try."""
    max_wait_s: float = 120.0
    """Longest single wait, also for a server's reset header."""


class WandbSource:
    """The runs of one wandb project (``ENTITY/PROJECT``), optionally filtered."""

    def __init__(
        self,
        path: str,
        *,
        group: str | None = None,
        tag: str | None = None,
        filters: dict[str, Any] | None = None,
        keys: list[str] | None = None,
        step_key: str = "_step",
        tokens_key: str = metric_keys.TOKENS_SEEN,
        api: Any = None,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] | None = None,
        page_size: int = 1000,
        timeout_s: int = 60,
        say: Callable[[str], None] | None = None,
    ):
        local = _on_disk(path or "")
        if local:
            raise LadderError(f"wandb project {path!r}: {local}; `ladder pull offline {path}` reads it (`ladder watch "
                              f"--offline {path}` follows a run there): `pull wandb` and `watch --wandb` read a project "
                              "on the wandb server")
        if not _PATH.match(path or ""):
            raise LadderError(f"wandb project {path!r}: expected ENTITY/PROJECT, e.g. my-team/my-ladder")
        self.path = path
        self.group, self.tag, self.filters = group, tag, dict(filters or {})
        self.keys = list(keys) if keys else None
        self.step_key, self.tokens_key = step_key, tokens_key
        self.retry = retry
        self.sleep = sleep or (lambda seconds: time.sleep(seconds))
        self.page_size, self.timeout_s = page_size, timeout_s
        self.say = say or (lambda message: None)
        """Where each try that failed and will be tried again is said (a pull waits minutes on a server down)."""
        self._api_obj = api

    @property
    def key(self) -> str:
        return f"wandb:{self.path}"

    @property
    def options(self) -> dict[str, Any]:
        """What changes the runs and rows read (part of a pull's flags)."""
        return {"query": self.query(), "keys": self.keys, "step_key": self.step_key, "tokens_key": self.tokens_key}

    def query(self) -> dict[str, Any]:
        """The MongoDB-style filter sent to the API."""
        parts = [self.filters] if self.filters else []
        if self.group:
            parts.append({"group": self.group})
        if self.tag:
            parts.append({"tags": {"$in": [self.tag]}})
        return parts[0] if len(parts) == 1 else ({"$and": parts} if parts else {})

    # ---- listing --------------------------------------------------------------------------------
    def runs(self) -> list[RunRef]:
        api = self._api()
        listing = self._call(lambda: api.runs(self.path, filters=self.query(), lazy=False), "listing runs")
        refs, i = [], 0
        while True:
            try:
                # By index, not by iterating: a page fetch that fails leaves the listing where it was.
                run = self._call(lambda i=i: listing[i], "listing runs")
            except IndexError:
                return refs
            refs.append(
                RunRef(str(run.id), self.key, label=f"{run.name or run.id} ({run.id})", name=run.name or None,
                       config=_plain(run.config), handle=run)
            )
            i += 1

    # ---- one run --------------------------------------------------------------------------------
    def read(self, ref: RunRef, cursor: dict[str, Any] | None = None) -> SourceRun:
        run = ref.handle
        state = map_state(str(run.state))
        last = _last_step(run)
        cursor = dict(cursor or {})
        if cursor:
            same_step_key(cursor, self.step_key)
        done: dict[str, int] = dict(cursor.get("steps", {}))  # per key group: the last step read, on the step key
        # per key group: the `_step` of the last row read, where the next read starts (wandb's `min_step` counts its
        # own step, whatever --step-key is; that row may have gained keys since); a cursor written before it was kept
        # holds the last step read there, on `_step` alike
        after: dict[str, int] = dict(cursor.get("from", done if self.step_key == "_step" else {}))
        replace = not cursor
        if after and last is not None and max(after.values()) > last:
            replace = True  # the run was rewound on the server (resume_from): read it again
        unchanged = not replace and state == "finished" == cursor.get("state") and last == cursor.get("last")
        if not unchanged and done and not after:  # a --step-key run's cursor that gives no `_step`: read it again
            replace = True
        if replace:
            done, after = {}, {}
        groups = [_ALL] if self.keys is None else self.keys
        rows, warnings, skipped = RowBuilder(), [], Skipped(self.step_key)
        if not unchanged:
            for group in groups:
                got = self._scan(run, ref.label, None if group == _ALL else group, after.get(group, 0), rows, skipped)
                if got is not None:
                    after[group], step = got
                    if step is not None:
                        done[group] = step
                elif group != _ALL and group not in done:
                    also = f" in rows that log '{self.step_key}' (--step-key)" if self.step_key != "_step" else ""
                    warnings.append(f"no values logged for '{group}'{also}")
        frame = rows.frame()
        if replace and skipped.without_step and not len(frame) and state != "running":  # not one row, ever
            raise skipped.nothing_stored()
        warnings += skipped.warnings()
        if len(groups) > 1 and len(frame):
            # Separate scans each run in step order; merged, the rows keep step order.
            frame = frame.sort_values("step", kind="stable")
            frame = raw_frame(frame["step"].to_numpy(), frame["metric"].astype(str).tolist(),
                              frame["value"].to_numpy(), frame["tokens"].to_numpy())
        return SourceRun(
            run_id=ref.run_id,
            source=self.key,
            rows=frame,
            cursor={"steps": done, "from": after, "state": state, "last": last, "step_key": self.step_key},
            state=state,
            config=with_job_type(ref.config or {}, getattr(run, "job_type", None)),
            name=run.name or None,
            group=getattr(run, "group", None) or None,
            warnings=tuple(warnings),
            replace=replace,
            last_write=heartbeat(run),
        )

    def _scan(self, run: Any, label: str, key: str | None, start: int, rows: RowBuilder,
              skipped: Skipped) -> tuple[int, int | None] | None:
        """Append rows from wandb's own step `start` on, counting in `skipped` what is left out; returns the `_step`
        of the last row read and the last step read on the step key (None: no row of it read this time), or None
        where no row was read, ever."""
        keys = None if key is None else list(dict.fromkeys([key, self.step_key, "_step"]))
        seen, last, attempt = start, None, 0  # `seen`: the `_step` of the last row read
        next_step = start
        while True:
            try:
                for row in run.scan_history(keys=keys, page_size=self.page_size, min_step=next_step):
                    raw, own = row.get(self.step_key), _int(row.get("_step"))
                    if as_number(raw) is None:
                        skipped.row_without_step(row)
                        seen = own if own is not None else seen
                    else:
                        last = whole_count(raw, f"step ('{self.step_key}')", f"wandb run {label}")
                        self._add(row, last, rows, label, skipped)
                        seen = own if own is not None else last
                    next_step = seen + 1  # a read that fails goes on after the rows it read
                return (seen, last) if last is not None or start else None
            except LadderError:
                raise
            except Exception as exc:  # noqa: BLE001 - sorted into retry / user error / bug below
                attempt += 1
                self._wait_or_raise(exc, attempt, f"reading the history of {label}")

    def _add(self, row: dict[str, Any], step: int, rows: RowBuilder, label: str, skipped: Skipped) -> None:
        flat = _flatten(row)
        tokens = as_number(flat.get(self.tokens_key))
        if tokens is None or tokens != tokens or abs(tokens) == float("inf"):
            tokens = float("nan")
        else:
            tokens = float(whole_count(round(tokens), f"tokens ('{self.tokens_key}')", f"wandb run {label}, step {step}"))
        for key, raw in flat.items():
            if key.startswith("_") or key == self.step_key:
                continue
            value = as_number(raw)
            if value is not None:
                rows.add(step, key, value, tokens)
            elif raw is not None:
                skipped.text[key] += 1

    # ---- the API and its failures ---------------------------------------------------------------
    def _api(self) -> Any:
        if self._api_obj is None:
            import wandb

            key = os.environ.get("WANDB_API_KEY") or None
            if "WANDB_MODE" in os.environ and not os.environ["WANDB_MODE"].strip():
                del os.environ["WANDB_MODE"]  # `export WANDB_MODE=` unsets it; wandb takes "" for a bad mode
            self._api_obj = self._call(lambda: wandb.Api(api_key=key, timeout=self.timeout_s), "connecting", 3)
        return self._api_obj

    def _call(self, fn: Callable[[], Any], what: str, attempts: int | None = None) -> Any:
        attempt = 0
        while True:
            try:
                return fn()
            except IndexError:
                raise
            except Exception as exc:  # noqa: BLE001 - sorted into retry / user error / bug below
                attempt += 1
                self._wait_or_raise(exc, attempt, what, attempts)

    def _wait_or_raise(self, exc: Exception, attempt: int, what: str, attempts: int | None = None) -> None:
        kind, hint, reason = classify(exc)
        where = f"wandb {self.path}: {what}"
        if kind == "bug":
            raise exc
        if kind == "no key":
            offline = os.environ.get("WANDB_MODE", "").strip().lower() in ("offline", "dryrun", "disabled")
            raise NoCredentials("no wandb API key: set WANDB_API_KEY or run `wandb login`" + (
                f"; WANDB_MODE={os.environ['WANDB_MODE'].strip()} is set: runs logged offline are read from their "
                "folder with `ladder pull offline WANDB_DIR`" if offline else "")) from None
        if kind == "auth":
            raise NoCredentials(f"{where}: wandb rejected the API key ({reason}); check WANDB_API_KEY or run `wandb login`") from None
        if kind == "missing":
            raise LadderError(
                f"{where}: not found ({reason}); check ENTITY/PROJECT and that your API key can see it"
            ) from None
        if kind == "fatal":
            raise LadderError(f"{where}: {reason}") from None
        if attempt >= (attempts or self.retry.attempts):
            raise SourceUnavailable(
                f"{where}: gave up after {attempt} tries ({reason}); "
                "check the server set by WANDB_BASE_URL and your network, then pull again (it resumes)"
            ) from None
        wait = min(max(hint if hint is not None else self.retry.base_s * 2 ** (attempt - 1), 0.0), self.retry.max_wait_s)
        self.say(f"wandb {self.path}: {what} failed ({reason}); trying again in {wait:.0f} s "
                 f"(try {attempt + 1} of {attempts or self.retry.attempts})")
        self.sleep(wait)


def _on_disk(path: str) -> str | None:
    """What `path`, given as a wandb project, is on this machine where it names a local file or folder of wandb's
    offline runs, or any that cannot be a project (a project's ENTITY/PROJECT may name a folder here by chance)."""
    from ladder.data.sources.offline import find_run_files

    local = Path(path).expanduser()
    if not path or not local.exists():
        return None
    try:
        find_run_files(local)
    except LadderError:
        return None if _PATH.match(path) else "a path on this machine, not ENTITY/PROJECT"
    return "a folder of wandb's offline run files here" if local.is_dir() else "a wandb run file here"


def classify(exc: BaseException) -> tuple[str, float | None, str]:
    """(kind, seconds to wait if the server said, reason).

    kind: retry, no key, auth (key rejected), missing (project or run), fatal (any other wandb error)
    or bug (not from wandb or the network: re-raised as is).
    """
    status, headers = _http_status(exc)
    reason = scrub(str(exc)) or type(exc).__name__
    if status == 429:
        return "retry", _reset_seconds(headers), "rate limited, HTTP 429"
    if status in _RETRY_STATUS:
        return "retry", None, f"HTTP {status}"
    if status in (401, 403):
        return "auth", None, f"HTTP {status}"
    if status == 404:
        return "missing", None, f"HTTP {status}"
    text = reason.lower()
    if "no api key" in text:
        return "no key", None, reason
    if "could not find" in text or "not found" in text:
        return "missing", None, reason
    if _is_network(exc) or any(w in text for w in ("timed out", "timeout", "did not respond in time", "connection")):
        return "retry", None, reason
    if _from_wandb(exc):
        return "fatal", None, reason
    return "bug", None, reason


def scrub(text: str) -> str:
    """`text` without the API key, the base URL or credentials inside any URL."""
    for name in ("WANDB_API_KEY", "WANDB_BASE_URL"):
        value = os.environ.get(name, "")
        if len(value) >= 4:
            text = text.replace(value, f"<{name}>")
            text = text.replace(value.rstrip("/"), f"<{name}>")
    return re.sub(r"://[^/@\s]+@", "://***@", text)


def _chain(exc: BaseException) -> list[BaseException]:
    seen, todo = [], [exc]
    while todo and len(seen) < 8:
        e = todo.pop(0)
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [getattr(e, "exc", None), e.__cause__, e.__context__]
    return seen


def _http_status(exc: BaseException) -> tuple[int | None, dict[str, str]]:
    for e in _chain(exc):
        response = getattr(e, "response", None)
        for holder in (response, e):
            for attr in ("status_code", "http_status"):
                status = getattr(holder, attr, None)
                if isinstance(status, int) and status > 0:
                    headers = getattr(response, "headers", None) or {}
                    return status, {str(k).lower(): str(v) for k, v in dict(headers).items()}
    match = re.search(r"\bHTTP (\d{3})\b", str(exc))
    return (int(match.group(1)), {}) if match else (None, {})


def _reset_seconds(headers: dict[str, str]) -> float | None:
    for name in ("ratelimit-reset", "retry-after"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value) if value else None
            if when is not None:
                return max(0.0, when.timestamp() - time.time())
    return None


def _is_network(exc: BaseException) -> bool:
    try:
        import requests

        network: tuple[type[BaseException], ...] = (requests.Timeout, requests.ConnectionError, TimeoutError, ConnectionError)
    except ImportError:  # pragma: no cover - wandb depends on requests
        network = (TimeoutError, ConnectionError)
    return any(isinstance(e, network) for e in _chain(exc))


def _from_wandb(exc: BaseException) -> bool:
    import wandb

    return any(isinstance(e, wandb.errors.Error) for e in _chain(exc))


def _plain(config: Any) -> dict[str, Any]:
    """The run config as plain values, without wandb's own keys."""
    out = {}
    for k, v in dict(config or {}).items():
        if str(k).startswith("_wandb"):
            continue
        if isinstance(v, dict) and "value" in v and set(v) <= {"value", "desc"}:
            v = v["value"]
        out[str(k)] = v
    return out


def heartbeat(run: Any) -> float | None:
    """The run's last heartbeat (Unix seconds): wandb's ``heartbeatAt``, an ISO time in UTC; None without one."""
    try:
        stamp = datetime.datetime.fromisoformat(str(run.heartbeat_at).replace("Z", "+00:00"))
    except Exception:  # noqa: BLE001 - a listing without it (or an odd one) just means "unknown"
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.UTC)).timestamp()


def _last_step(run: Any) -> int | None:
    try:
        return _int(run.summary.get("_step"))
    except Exception:  # noqa: BLE001 - a summary without _step just means "unknown"
        return None


def _int(value: Any) -> int | None:
    number = as_number(value)
    return int(number) if number is not None and number == number and abs(number) != float("inf") else None


def _flatten(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and "_type" not in v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out

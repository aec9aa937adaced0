"""The typer application and the `command` decorator every CLI module registers with.

A command parses its options, calls one library function and prints. User errors
(`LadderError`, `FitError`), files that cannot be read or written, and the parser's own usage errors (an
unknown option, a value that does not parse) become one red line on stderr and exit code 2 (or the
error's own `exit_code`: 75 for a run not written yet, `ladder.errors.NotYetWritten`). Anything
else is a bug: one line that says so, exit code 1, and the traceback only
with `ladder --debug ...` or ``LADDER_DEBUG=1``. Secrets from the environment never appear in a
message.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import math
import os
import select
import sys
import time
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from datetime import datetime
from enum import StrEnum
from typing import Any

import click
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ladder.errors import DEBUG_ENV, LadderError, debug_env, route_warnings
from ladder.launch import stop_said, stop_signal, stops_as_interrupts


def _close_options_only(exc: Exception) -> None:
    """An unknown option's suggestions, kept only where the names agree past their dashes: click compares them
    with the dashes, so every long option looks close (`--bogus` was offered `--out`)."""
    possible = getattr(exc, "possibilities", None)
    if type(exc).__name__ == "NoSuchOption" and possible:
        bare = {o.lstrip("-"): o for o in possible}
        close = difflib.get_close_matches(str(getattr(exc, "option_name", "")).lstrip("-"), list(bare), n=3)
        exc.possibilities = [bare[o] for o in close]


class _OneLineErrors(typer.core.TyperGroup):
    """The top-level group: click's own usage errors (an unknown option, a missing value) end as every other user
    error does, one line on stderr and exit code 2, not typer's boxed panel."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            argv = list(sys.argv[1:] if args is None else args)
            self._no_empty_paths(argv)
            self._no_option_twice(argv)
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _TYPER_CLICK["UsageError"] as exc:
            if type(exc).__name__ != "NoArgsIsHelpError":  # `ladder fit` alone: its help is already printed
                ctx = getattr(exc, "ctx", None)
                path = ctx.command_path if ctx is not None else self._path(sys.argv[1:] if args is None else args)
                _close_options_only(exc)
                # typer words a value not among an option's choices as pydantic does ("Value error, 'x' is not ...")
                message = _named_value(exc.format_message().replace(": Value error, ", ": "), exc, argv)
                elsewhere = self._elsewhere(exc) or self._as_option(exc)
                message = message.rstrip(".") + elsewhere if elsewhere else message
                _say_error(redact(message) + f" (see `{path} --help`)")
            sys.exit(exc.exit_code)
        except _TYPER_CLICK["ClickException"] as exc:
            _say_error(redact(exc.format_message()))
            sys.exit(exc.exit_code)
        except typer.Abort:
            err_console.print("aborted", highlight=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def _no_empty_paths(self, args: list[str]) -> None:
        """Refuse an option that takes a path given an empty value (`--out ""`, a script's variable left empty):
        click reads it as the current folder, where the command would then write."""
        _, cmd = self._command(args)
        paths = {o for p in getattr(cmd, "params", ()) if getattr(p, "param_type_name", "") == "option"
                 and _takes_a_path(p) for o in getattr(p, "opts", ())}
        for i, a in enumerate(args):
            name, eq, value = a.partition("=")
            given = value if eq else (args[i + 1] if i + 1 < len(args) else None)
            if name in paths and given is not None and not given.strip():
                raise _TYPER_CLICK["UsageError"](f"{name} {given!r}: an empty path; give a file or folder (an empty "
                                                 "value would be read as the current folder)")

    def _no_option_twice(self, args: list[str]) -> None:
        """Refuse an option of one value given twice with two values (`--csv a.csv --csv b.csv`): click keeps the
        last and drops the first without a word. Options that take several (`--at 1e24 --at 1e25`) are not such."""
        _, cmd = self._command(args)
        single = {o: p for p in getattr(cmd, "params", ()) if getattr(p, "param_type_name", "") == "option"
                  and not p.multiple and not p.is_flag and p.nargs == 1 for o in (*p.opts, *p.secondary_opts)}
        seen: dict[str, tuple[str, str]] = {}
        i = 0
        while i < len(args) and args[i] != "--":
            name, eq, value = args[i].partition("=")
            param = single.get(name if name.startswith("--") else args[i])
            if param is None:
                i += 1
                continue
            if not eq and i + 1 >= len(args):
                return  # its value missing: click says so
            given = value if eq else args[i + 1]
            i += 1 if eq else 2
            first = seen.setdefault(param.name, (name, given))
            if first[1] != given:
                raise _TYPER_CLICK["UsageError"](f"{name} given twice ({first[0]} {first[1]} and {name} {given}): "
                                                 "it takes one value; give one")

    def _path(self, args: list[str]) -> str:
        """The command the arguments name (`ladder predict`), for an error raised before click made its context."""
        return " ".join(self._command(args)[0])

    def _command(self, args: list[str]) -> tuple[list[str], Any]:
        """The names of the command the arguments name (["ladder", "fit", "surface"]) and the command itself."""
        names, cmd = ["ladder"], self
        for a in args:
            if a.startswith("-"):  # a group's option (`ladder --debug plan ...`): the command comes after it
                continue
            sub = getattr(cmd, "commands", {}).get(a)
            if sub is None:
                break
            names.append(a)
            cmd = sub
        return names, cmd

    def _as_option(self, exc: Exception) -> str:
        """For a file given bare to a command that takes it by an option (`ladder fit surface runs.csv`): which."""
        ctx = getattr(exc, "ctx", None)
        message = exc.format_message()
        if ctx is None or not message.startswith("Got unexpected extra argument"):
            return ""
        options = {o for p in ctx.command.params for o in getattr(p, "opts", ())}
        extra = message.partition("(")[2].rpartition(")")[0].split()
        if "--csv" in options and any(a.lower().endswith((".csv", ".tsv", ".txt")) for a in extra):
            return "; give a CSV with --csv FILE"
        return ""

    def _elsewhere(self, exc: Exception) -> str:
        """For an unknown command that another group has (`ladder pull csv`): where it is."""
        ctx = getattr(exc, "ctx", None)
        message = exc.format_message()
        name = message.split("'")[1] if message.startswith("No such command '") else ""
        if not name or ctx is None:
            return ""
        found = [f"ladder {group} {name}" for group, cmd in self.commands.items()
                 if name in getattr(cmd, "commands", {}) and f"ladder {group}" != ctx.command_path]
        return f"; `{found[0]}` has it" if found else ""


_NOT_A = {"Input should be a valid number, unable to parse string as a number": "is not a number",
          "Input should be a valid integer, unable to parse string as an integer": "is not a whole number",
          "Input should be a valid integer, got a number with a fractional part": "is not a whole number"}
"""How typer's parser words a value of the wrong kind, and what the error says of the value instead."""


def _named_value(message: str, exc: Exception, argv: list[str]) -> str:
    """An option's value of the wrong kind, named in its error ("--hero-compute 'abc' is not a number"); typer's
    words ("Input should be a valid number, ...") leave out which value was given."""
    opts = getattr(getattr(exc, "param", None), "opts", None) or ()
    given = None
    for i, a in enumerate(argv):  # the last one given counts, as click takes it
        name, eq, value = a.partition("=")
        if name in opts:
            given = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    if given is None:
        return message
    for words, instead in _NOT_A.items():
        if words in message:
            return message.replace(words, f"{given!r} {instead}")
    return message


def _takes_a_path(param: Any) -> bool:
    """Whether a command's option takes a path (its annotation is `Path`, or a union or list of it)."""
    import pathlib
    import typing

    seen = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    stack = [seen]
    while stack:
        t = stack.pop()
        if isinstance(t, type) and issubclass(t, pathlib.PurePath):
            return True
        stack += list(typing.get_args(t))
    return False


_TYPER_CLICK = {c.__name__: c for c in typer.BadParameter.__mro__}
"""The usage-error classes of the click typer parses with (its own copy)."""


app = typer.Typer(
    name="ladder",
    cls=_OneLineErrors,
    help=(
        "Plan a scaling ladder, train its rungs, pull their metrics, fit scaling laws, predict the "
        "hero run's loss curve and watch it live.\n\n"
        "Pipeline: plan → train → pull → fit → predict → watch / report."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="rich",
)

READER_GONE = 128 + 13
"""Exit code when the reader of stdout closed the pipe (`ladder ... | head`): 128 + SIGPIPE, what the shell
reports for `cat` there; not 1, which says the program has a bug."""


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise _reader_gone()

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Print, a table whole: where the console is narrower than a table's columns need (its numbers unbroken,
        its words whole), at the table's own width, for the terminal to wrap, not cut to "0.0…" or to no column."""
        tables = [_widths(self, o) for o in objects if isinstance(o, Table)]
        need = max((most for least, most in tables if least > self.width), default=0)
        if need <= self.width:
            return super().print(*objects, **kwargs)
        kept, self._width = self._width, need
        try:
            return super().print(*objects, **kwargs)
        finally:
            self._width = kept


def _widths(console: Console, table: Table) -> tuple[int, int]:
    """The least width a table's columns need (their longest words) and its own (no cell wrapped)."""
    from rich.measure import Measurement

    return tuple(Measurement.get(console, console.options.update_width(1 << 16), table))


# Wide enough for the plan table when output goes to a file or a pipe (rich assumes 80 columns).
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 150
# Markup is off: run names, paths and messages print as they are ("run[lr=3e-4]" keeps its brackets); a line
# that styles a word asks for markup and escapes what it interpolates.
console = _Console(width=_WIDTH, markup=False)
err_console = _Console(stderr=True, width=_WIDTH, markup=False)


def warn(message: str) -> None:
    """One warning on stderr, "warning:" in yellow; the message printed as it is (no markup read in it)."""
    from rich.markup import escape

    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True, markup=True)


class Format(StrEnum):
    """--format of every command that prints a result: a rich table, or one JSON object on stdout."""

    table = "table"
    json = "json"


SECRET_ENVS = ("WANDB_API_KEY", "LADDER_WEBHOOK_URL")
"""Environment variables whose values are never printed, even inside an error message."""
USAGE_ERROR = 2
BUG = 1


_debug_flag: ContextVar[bool] = ContextVar("ladder_debug", default=False)
"""`--debug` as given to this invocation (set by the callback before every command)."""
# Exits and usage errors pass through the guard untouched: `_OneLineErrors` prints them.
_PASS_THROUGH = tuple({typer.Exit, typer.Abort, click.exceptions.Exit, click.exceptions.Abort, click.ClickException,
                       _TYPER_CLICK["ClickException"]})


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help=f"Show the traceback of an unexpected error (or set {DEBUG_ENV}=1)."),
) -> None:
    _debug_flag.set(debug)


def fail(message: str, code: int = USAGE_ERROR) -> typer.Exit:
    """Print a user error and return the exit to raise (code 2 unless the error says another)."""
    _say_error(redact(message))
    return typer.Exit(code)


def _say_error(text: str) -> None:
    """One line on stderr; the text is printed as is (a value like ``[/x]`` is not markup)."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", text), highlight=False, soft_wrap=True)


def redact(text: str) -> str:
    """`text` with the value of every secret environment variable replaced."""
    for var in SECRET_ENVS:
        secret = os.environ.get(var, "")
        if len(secret) >= 4:
            text = text.replace(secret, f"${var}")
    return text


def _debugging() -> bool:
    return _debug_flag.get() or debug_env()


def _bug(exc: BaseException) -> typer.Exit:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    _say_error(f"{type(exc).__name__}: {redact(first)}; this is a bug: rerun with `--debug` "
               f"(`ladder --debug COMMAND ...` or {DEBUG_ENV}=1) for the traceback")
    return typer.Exit(BUG)


def command(name: str | None = None, *, parent: typer.Typer | None = None, **kwargs: Any) -> Callable:
    """Register a CLI command whose user errors exit with code 2 (or the error's own `exit_code`) and one clear
    line, and whose unexpected errors exit with code 1 and one line saying it is a bug."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            try:
                with warnings.catch_warnings(), stops_as_interrupts():
                    if not _debugging():  # numerical warnings (an overflow on the way to a checked result) are noise
                        warnings.simplefilter("ignore", RuntimeWarning)
                    route_warnings(warn)
                    return fn(*args, **kw)
            except _user_errors() as exc:
                raise fail(str(exc), getattr(exc, "exit_code", USAGE_ERROR)) from None
            except _PASS_THROUGH:
                raise
            except BrokenPipeError:  # the reader of stdout left (`| head`): stop quietly, as `cat` would
                raise _reader_gone() from None
            except KeyboardInterrupt as exc:
                if _debugging():
                    raise
                signum = stop_signal(exc)  # a SIGTERM or SIGHUP (`Stopped`), else a Ctrl-C
                with contextlib.suppress(OSError):  # a terminal closed (SIGHUP) takes no more lines
                    err_console.print(f"{stop_said(signum)}; run the same command again to finish it (pulls, imports "
                                      "and training go on from where they stopped)", highlight=False, soft_wrap=True)
                raise typer.Exit(128 + signum) from None
            except OSError as exc:  # the disk or the network said no: not a bug in the program
                if _debugging():
                    raise
                raise fail(_os_message(exc)) from None
            except Exception as exc:
                if _debugging():
                    raise
                raise _bug(exc) from None

        if fn.__doc__ and "help" not in kwargs:
            kwargs["help"] = reflow(fn.__doc__)
        (parent or app).command(name, **kwargs)(wrapper)
        return fn

    return decorate


def reflow(doc: str) -> str:
    """A docstring as `--help` shows it: each paragraph one line (the terminal wraps it), list items and
    indented lines kept on their own."""
    import inspect

    paragraphs = []
    for block in inspect.cleandoc(doc).split("\n\n"):
        lines = block.splitlines()
        out: list[str] = []
        for line in lines:
            keep = line.startswith(("  ", "- ", "* ")) or line[:3].rstrip(".").isdigit()
            if out and not keep:
                out[-1] += " " + line.strip()
            else:
                out.append(line)
        paragraphs.append("\n".join(out))
    return "\n\n".join(paragraphs)


def _user_errors() -> tuple[type[Exception], ...]:
    """`LadderError`, and `FitError` once `fits` is loaded: a command that never imported `fits` cannot
    raise it, and importing it here would load scipy into every command (and `--help`)."""
    fit_errors = sys.modules.get("fits.errors")
    return (LadderError,) if fit_errors is None else (LadderError, fit_errors.FitError)


def _reader_gone() -> typer.Exit:
    """Point stdout at /dev/null (so the final flush cannot fail again) and return the exit `READER_GONE`."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return typer.Exit(READER_GONE)


def _os_message(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{where}: {reason}" if where else reason


def print_json(data: Any) -> None:
    """JSON on stdout, nothing else (for `--format json`); NaN and infinities are null (JSON has no such numbers)."""
    echo(json_text(data) + "\n")


def echo(text: str) -> None:
    """`text` on stdout as it is (CSV, JSON), whole, or the `BrokenPipeError` of a reader that left (`| head`), which
    the command ends on quietly with `READER_GONE`. A write larger than the pipe holds, cut short by a reader that
    left, returns the bytes it wrote without an error, so the rest is written on until it is all out or the pipe
    says it is closed; a non-blocking stdout that takes nothing now (a slow reader) is waited for."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # a stream of text alone (a test's capture)
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    _flush(sys.stdout, out)
    rest = memoryview(text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))
    while rest:
        try:
            written = out.write(rest)
        except BlockingIOError as exc:  # a buffered non-blocking stdout, full: it kept what it says it did
            written = getattr(exc, "characters_written", 0)  # unset where it kept nothing
        if not written:  # a raw non-blocking stdout that would block returns None
            _wait_writable(out)
            continue
        rest = rest[written:]
    _flush(out, out)


def _flush(stream: Any, out: Any) -> None:
    """`stream.flush()`, waiting for room where `out`, the bytes under it, is a non-blocking stdout that is full."""
    while True:
        try:
            return stream.flush()
        except BlockingIOError:
            _wait_writable(out)


def _wait_writable(out: Any) -> None:
    """Until the reader of a non-blocking stdout makes room (a second at most, then the write is tried again)."""
    try:
        select.select([], [out.fileno()], [], 1.0)
    except (AttributeError, OSError, ValueError):  # no file descriptor select can wait on (Windows, a test's fake)
        time.sleep(0.01)


def json_text(data: Any, indent: int = 2) -> str:
    """`data` as JSON: numpy values as numbers (floats to the last digit), NaN and infinities as null."""
    text = json.dumps(data, default=_json_default)
    plain = json.loads(text, parse_constant=lambda _: None)
    return json.dumps(plain, indent=indent, allow_nan=False)


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars alike
        return value.tolist()
    return str(value)


def given(ctx: typer.Context, **flags: str) -> list[str]:
    """The flags (parameter name = flag) set on the command line rather than left at their defaults."""
    return [flag for name, flag in flags.items() if getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"]


def given_for(ctx: typer.Context, prefix: str) -> list[str]:
    """The command's options set on the command line whose help starts with `prefix` ("CSV:": the options that
    only mean something with a CSV)."""
    return given(ctx, **{p.name: p.opts[0] for p in ctx.command.params
                         if p.name and p.opts and (getattr(p, "help", None) or "").startswith(prefix)})


MAX_DEADLINE_S = 100 * 365 * 86400
"""The farthest deadline --deadline takes."""


def seconds_until(deadline: str) -> float:
    """Seconds from now to --deadline, given as an ISO time (2026-12-24T00:00) or a time from now (72h, 90m, 2d,
    600s); a deadline that has passed, or is more than 100 years away (a mistyped year or unit), is refused."""
    text = deadline.strip()
    usage = f"--deadline {deadline!r}: give an ISO time (2026-12-24T00:00) or a time from now (72h, 90m, 2d)"
    left = relative_seconds(text)
    if left is None:
        try:
            left = datetime.fromisoformat(text).timestamp() - time.time()
        except ValueError:
            raise LadderError(usage) from None
        if left <= 0:
            raise LadderError(f"--deadline {deadline!r} has passed; give a time to come")
    elif left <= 0:
        raise LadderError(f"--deadline {deadline!r}: give a positive time from now (72h, 90m, 2d) or a time to come")
    if not math.isfinite(left):
        raise LadderError(usage)
    if left > MAX_DEADLINE_S:
        raise LadderError(f"--deadline {deadline!r} is more than 100 years away; check its year or unit")
    return left


TIME_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
"""A --deadline from now: a number and one of these (seconds, minutes, hours, days)."""


def relative_seconds(text: str) -> float | None:
    """A time from now ("72h", "90m", "2d", "600s") in seconds; None where `text` is none (an ISO time, say)."""
    text = text.strip()
    if len(text) < 2 or text[-1] not in TIME_UNITS:
        return None
    try:
        return float(text[:-1]) * TIME_UNITS[text[-1]]
    except ValueError:
        return None


def parse_int_list(text: str | list[str] | None, option: str, example: str = "768,1024") -> list[int] | None:
    """Integers separated by commas, in the order given; of an option given several times, those of each in turn
    (None where it was not given)."""
    if isinstance(text, list):
        text = ",".join(text) if text else None
    if text is None:
        return None
    items = text.replace(" ", "").split(",")
    if items[-1] == "":
        items.pop()  # "768,1024,": a trailing comma names no item
    try:
        values = [int(x) for x in items]  # "32,,48": an empty item is a typo, not a skip
    except ValueError:
        raise LadderError(f"{option} {text!r}: expected integers separated by commas, e.g. {example}") from None
    return values

"""The one exception type the product raises for bad user input.

A `LadderError` carries a message written for the user: what was wrong, with which value, and
what to do. The CLI prints it as one line and exits with code 2; anything else is a bug.
"""


import difflib
import os

DEBUG_ENV = "LADDER_DEBUG"
"""Set (to anything but 0, false or no) to see the traceback of an unexpected error, as `ladder --debug` does."""


def debug_env() -> bool:
    """Whether `DEBUG_ENV` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def meant(name: str, names) -> str | None:
    """The one of `names` that a mistyped `name` most likely meant, for a "did you mean" hint: the same in another case,
    else the closest spelling; None where none is close."""
    names = list(names)
    return next((n for n in names if n.lower() == name.lower()), None) or next(
        iter(difflib.get_close_matches(name, names, n=1)), None)


class LadderError(ValueError):
    """Bad input from the user (a config, a flag, a file); the message says what to do."""


class SourceUnavailable(LadderError):
    """The source as a whole cannot be read (no credentials, a server that does not answer), as opposed to
    one run of it: a pull stops there instead of skipping the run."""


class NoCredentials(SourceUnavailable):
    """The source refuses for want of credentials (no API key, a key it rejects): the user's to fix, and no
    later attempt reads more until they do."""


class NotYetWritten(LadderError):
    """A run its source has not written anything of yet (wandb's offline file in its first seconds): nothing is wrong,
    and the same command a minute later reads it. The CLI exits with `exit_code` (EX_TEMPFAIL of sysexits.h), so a
    script or cron job can tell "try again" from a usage error."""

    exit_code = 75


class LadderWarning(UserWarning):
    """Something the user should read that does not stop the work (a config whose computed block was edited, say),
    raised with `warnings.warn` where no console is at hand; the CLI prints it as one "warning:" line."""


def route_warnings(say) -> None:
    """Send every `LadderWarning` to `say(message)` and the others to where they went: call inside
    `warnings.catch_warnings()`, which puts the old hook back."""
    import warnings

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, LadderWarning):
            say(str(message))
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show

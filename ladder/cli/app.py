"""The typer application and the `command` decorator every CLI module registers with.

A command parses its options, calls one library function and prints. User errors
(`LadderError`, `FitError`) become one red line on stderr and exit code 2.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from fits.errors import FitError
from ladder.errors import LadderError

app = typer.Typer(
    name="ladder",
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

# Wide enough for the plan table when output goes to a file or a pipe (rich assumes 80 columns).
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 150
console = Console(width=_WIDTH)
err_console = Console(stderr=True, width=_WIDTH)


def fail(message: str) -> typer.Exit:
    """Print a user error and return the exit to raise (code 2)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def command(name: str | None = None, *, parent: typer.Typer | None = None, **kwargs: Any) -> Callable:
    """Register a CLI command whose user errors exit with code 2 and one clear line."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            try:
                return fn(*args, **kw)
            except (LadderError, FitError) as exc:
                raise fail(str(exc)) from None

        (parent or app).command(name, **kwargs)(wrapper)
        return fn

    return decorate


def print_json(data: Any) -> None:
    """JSON on stdout, nothing else (for `--format json`)."""
    typer.echo(json.dumps(data, indent=2, default=_json_default))


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars alike
        return value.tolist()
    return str(value)


def parse_int_list(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise LadderError(f"{option} {text!r}: expected integers separated by commas, e.g. 768,1024") from None

"""The `ladder` command line: one module per command group, all on one typer app."""

from ladder.cli import plan as _plan  # noqa: F401  (modules register their commands)
from ladder.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]

"""The `ladder` command line: one module per command group, all on one typer app."""

# Each module registers its commands on `app` when imported.
from ladder.cli import check as _check  # noqa: F401
from ladder.cli import compare as _compare  # noqa: F401
from ladder.cli import demo as _demo  # noqa: F401
from ladder.cli import fit as _fit  # noqa: F401
from ladder.cli import plan as _plan  # noqa: F401
from ladder.cli import predict as _predict  # noqa: F401
from ladder.cli import pull as _pull  # noqa: F401
from ladder.cli import train as _train  # noqa: F401
from ladder.cli import watch as _watch  # noqa: F401
from ladder.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]

"""The `ladder` command line: one module per command group, all on one typer app."""

from importlib import import_module

from ladder.cli.app import app

# Each module registers its commands on `app` when imported, and `ladder --help` lists them in this order:
# the pipeline's (plan → train → pull → fit → predict → watch / report), then the checks and the demo.
MODULES = ("plan", "train", "pull", "fitendpoint", "fitsurface", "fitcurve", "backtest", "predict", "watch", "check",
           "compare", "demo")
for _name in MODULES:
    import_module(f"ladder.cli.{_name}")


def main() -> None:
    app()


__all__ = ["app", "main"]

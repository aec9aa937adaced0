"""The CLI reference (docs/cli.md), generated from every command's --help so it cannot drift."""

from __future__ import annotations

import sys

import typer
from typer.testing import CliRunner

from ladder.cli import app

HEADER = """# `ladder` command reference

Generated from `--help` by `python -m ladder.cli.reference > docs/cli.md`; do not edit by hand.
"""


def _commands(group, path: list[str]) -> list[list[str]]:
    out = [path]
    if hasattr(group, "list_commands"):  # a group of commands
        ctx = group.context_class(group) if hasattr(group, "context_class") else None
        for name in group.list_commands(ctx):
            out += _commands(group.get_command(ctx, name), path + [name])
    return out


def reference() -> str:
    runner = CliRunner()
    env = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}
    parts = [HEADER]
    for path in _commands(typer.main.get_command(app), []):
        res = runner.invoke(app, path + ["--help"], env=env, terminal_width=100)
        title = " ".join(["ladder", *path])
        text = "\n".join(line.rstrip() for line in res.output.strip("\n").splitlines())
        parts.append(f"## `{title}`\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(reference())

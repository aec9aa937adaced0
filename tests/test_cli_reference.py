"""docs/cli.md is exactly what every command's --help says today, and every command has help text."""

from __future__ import annotations

from pathlib import Path

from ladder.cli.reference import reference

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def test_cli_reference_is_up_to_date():
    assert DOC.read_text() == reference(), "regenerate it: python -m ladder.cli.reference > docs/cli.md"


def test_every_command_explains_itself():
    sections = reference().split("\n## ")[1:]
    assert len(sections) >= 20
    for section in sections:
        title, body = section.split("\n", 1)
        assert "Usage:" in body, title
        usage_and_text = body.split("╭")[0]
        assert len(usage_and_text.split("Usage:")[1].strip().splitlines()) >= 2, f"{title} has no description"

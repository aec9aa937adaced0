"""`ladder --help` and a command's --help load none of the heavy libraries: the CLI imports them
inside the commands that use them, so asking for help stays fast."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("scipy", "matplotlib", "jax", "wandb")

# A fresh interpreter: in the test process other tests have already imported everything.
SCRIPT = f"""
import json, sys
from typer.testing import CliRunner
from ladder.cli import app
for args in (["--help"], ["fit", "endpoint", "--help"], ["predict", "--help"], ["watch", "--help"], ["demo", "--help"]):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (args, result.output)
print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
"""


def test_help_imports_no_heavy_library():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []

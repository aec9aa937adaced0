"""The `ladder` command's entry point. It loads the command line inside a guard, so that a Ctrl-C while Python
is still importing it (the first second of every command) ends with exit code 130 and one line, as a Ctrl-C
later does, not with a traceback."""

from __future__ import annotations

import sys

INTERRUPTED = 128 + 2  # SIGINT, as every command exits on Ctrl-C (ladder.cli.app)


def main() -> None:
    try:
        from ladder.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted before the command started; nothing was done\n")
        raise SystemExit(INTERRUPTED) from None
    run()


if __name__ == "__main__":
    main()

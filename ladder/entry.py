"""The `ladder` command's entry point. It loads the command line inside a guard, so that a Ctrl-C while Python
is still importing it (the first second of every command) ends with exit code 130 and one line, as a Ctrl-C
later does, not with a traceback; and a command line that cannot load at all (a damaged install) says so in one
line, exit code 1, as any other bug."""

from __future__ import annotations

import sys

from ladder.errors import DEBUG_ENV, debug_env

INTERRUPTED = 128 + 2  # SIGINT, as every command exits on Ctrl-C (ladder.cli.app)


def main() -> None:
    try:
        from ladder.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted before the command started; nothing was done\n")
        raise SystemExit(INTERRUPTED) from None
    except Exception as exc:  # a broken install or a damaged module: one line, as every other bug, not a traceback
        if "--debug" in sys.argv[1:2] or debug_env():
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        sys.stderr.write(f"error: {type(exc).__name__}: {first}; the command line could not load, nothing was done: "
                         f"this is a bug or a damaged install (rerun with {DEBUG_ENV}=1 for the traceback)\n")
        raise SystemExit(1) from None
    run()


if __name__ == "__main__":
    main()

"""`python -m trainer_jax RUN.yaml [--resume]`: train one planner run config.

A relative ``run_dir`` in the config is taken relative to the config file's folder (where the
planner's ``launch.sh`` runs). User errors, and files the system refuses (a full disk), print one line
and exit with code 2; an unexpected error prints one line saying it is a bug and exits with code 1
(`--debug` or ``LADDER_DEBUG=1`` shows the traceback). Ctrl-C or SIGTERM (a timeout, a scheduler's
preemption) stops the run before its next step, marks it crashed and exits with code 128 + the signal's
number, as a shell reports a process the signal ended: 130 for Ctrl-C, 143 for SIGTERM (a second one stops
at once, but for a checkpoint being written, which it waits for; a SIGTERM repeated within a second is the same
stop); `--resume` continues it from its last checkpoint.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

from ladder import runfiles
from ladder.errors import LadderError, debug_env, route_warnings

_RECEIVED: list[tuple[int, float, bool]] = []
"""The stop signals received, in order, with when and whether each was an echo (the exit code names the last)."""
ECHO_S = 1.0
"""A SIGTERM this soon after the last stop that acted, itself a SIGTERM, is that stop sent again, not another one:
when `ladder` dies, the parent-death signal can come once for each of its threads that exits (after a first stop
or not)."""
_clock = time.monotonic
_WAITED: list[int] = []
"""A stop that came while a checkpoint was written, and waited for it (one does; the next ends the process)."""


def _interrupt(signum, frame) -> None:
    """SIGTERM or Ctrl-C: stop before the next training step (a checkpoint being written, or a compile under way,
    is finished first: interrupted inside JAX or an asyncio loop the process can crash); a second one, or one
    before the trainer is loaded, stops at once, but for a checkpoint being written, which it waits for (cut half
    way, the run would resume from the one before); a third stops at once all the same."""
    now = _clock()
    acted = [got for got in _RECEIVED if not got[2]]
    last = acted[-1] if acted else None  # the stop that acted last (asked for the stop, waited, or ended it)
    echo = last is not None and signum == last[0] == signal.SIGTERM and now - last[1] < ECHO_S
    _RECEIVED.append((signum, now, echo))
    train = sys.modules.get("trainer_jax.train")
    stop = getattr(train, "STOP", None)  # None until the trainer has loaded (its module may be half imported)
    if echo:
        return  # the stop under way (its checkpoint being written, or the exit it raised) goes on
    if stop is None and len(_RECEIVED) > 1:
        # the first stop's KeyboardInterrupt can land in a callback that swallows it (JAX's, as it loads): nothing
        # is trained yet, so a second stop ends the process, which must not go on training alone
        os._exit(128 + signum)
    saving = getattr(train, "SAVING", None)
    if stop is not None and stop.is_set() and saving is not None and saving.is_set() and not _WAITED:
        _WAITED.append(signum)  # once: a save that hangs still ends at the next stop
        os.write(2, b"a checkpoint is being written: the run stops as soon as it is saved (stop again to end it "
                    b"now, losing that checkpoint)\n")
        return
    if stop is None or stop.is_set():
        raise KeyboardInterrupt
    stop.set()


def _mark_crashed(run_dir: Path | None) -> str:
    """Where an interrupt came before the training loop could mark the run, mark a run that says it runs; what the
    run's status says now, in words."""
    from ladder.launch import mark_crashed, run_state

    if run_dir is None or run_state(run_dir) is None:  # stopped before the run wrote its status: nothing to mark
        return "it had not started"
    mark_crashed(run_dir)
    if run_state(run_dir) == "running":  # not even an overwrite in place could be written: a full disk
        return f"the run could not be marked crashed ({run_dir / runfiles.STATUS_FILE} still says running)"
    return "the run is marked crashed"


def main(argv: list[str] | None = None, as_program: bool = False) -> int:
    """Train the run the arguments name; the exit code. `as_program`: this process is the trainer's own
    (``python -m trainer_jax``), whose logging and standard error are its to quiet (`_quiet_logging`)."""
    parser = argparse.ArgumentParser(prog="python -m trainer_jax", description="Train one RunConfig YAML.")
    parser.add_argument("config", type=Path, help="RunConfig YAML written by `ladder plan --out`.")
    parser.add_argument("--resume", action="store_true", help="Continue from the run directory's last checkpoint (if any).")
    parser.add_argument("--run-dir", type=Path, default=None, help="Override the config's run_dir.")
    parser.add_argument("--expert-parallel", type=int, default=None, help="Devices on the mesh's expert axis.")
    parser.add_argument("--no-progress", action="store_true", help="No progress bar.")
    parser.add_argument("--coordinator", default=None, help="host:port of process 0, for multi-process runs.")
    parser.add_argument("--num-processes", type=int, default=0, help="Processes in a multi-process run.")
    parser.add_argument("--process-id", type=int, default=-1, help="This process's index in a multi-process run.")
    parser.add_argument("--debug", action="store_true", help="Show the traceback of an unexpected error.")
    args = parser.parse_args(argv)
    debug = args.debug or debug_env()
    before = {}
    _RECEIVED.clear()
    if threading.current_thread() is threading.main_thread():
        # A scheduler's stop (SIGTERM: timeout, preemption, Ray) ends the run as Ctrl-C does: marked crashed.
        before = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    hook = sys.unraisablehook
    sys.unraisablehook = lambda raised: None if isinstance(raised.exc_value, KeyboardInterrupt) else hook(raised)
    try:  # (a stop's KeyboardInterrupt a callback swallowed is no error to print: the stop is kept, `_run` takes it)
        with warnings.catch_warnings():
            route_warnings(lambda said: print(f"warning: {said}", file=sys.stderr, flush=True))  # as `ladder` says one
            return _run(args, debug, quiet=as_program and not debug)
    finally:
        sys.unraisablehook = hook
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace, debug: bool, quiet: bool = False) -> int:
    run_dir, name = None, ""
    if quiet:
        _quiet_logging()
    try:
        # Both must come before anything touches the devices.
        from trainer_jax.host import reuse_freed_memory

        reuse_freed_memory()
        from ladder.config.runconfig import (
            RunConfig,  # no JAX: the run's folder is known before the slow start
        )

        cfg = RunConfig.load(args.config)
        name = f"{cfg.name}: "
        run_dir = args.run_dir or cfg.resolved_run_dir(base=args.config.parent)
        from trainer_jax.mesh import init_distributed

        init_distributed(args.coordinator, args.num_processes, args.process_id)
        from trainer_jax.train import train

        if any(not echo for _, _, echo in _RECEIVED):  # a stop while it loaded, its KeyboardInterrupt swallowed
            raise KeyboardInterrupt  # (by a callback of JAX's, as it loads): taken here, before a step is trained
        train(cfg, run_dir, resume=args.resume, expert_parallel=args.expert_parallel,
              progress=not args.no_progress)
    except LadderError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        if quiet and isinstance(exc.__cause__, OSError):  # the system refused the run's folder: a full disk
            _silence_stderr()
        return 2
    except KeyboardInterrupt:
        from ladder.launch import how_to_continue

        marked = _mark_crashed(run_dir)
        saved = runfiles.last_checkpoint(run_dir) if run_dir is not None else None
        where = (f" from its checkpoint at step {saved:,}" if saved is not None else
                 " (no checkpoint was saved yet, so it starts again from step 0)")
        print(f"{name}interrupted: {marked}; {how_to_continue()}{where}", file=sys.stderr, flush=True)
        return 128 + (_RECEIVED[-1][0] if _RECEIVED else signal.SIGINT)
    except OSError as exc:  # the system refused a file (the trainer says its run's own in one line): no bug
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {name}{where}{exc.strerror or exc}", file=sys.stderr, flush=True)
        return 2
    except Exception as exc:
        if debug:
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"error: {type(exc).__name__}: {first}; this is a bug: rerun with --debug for the traceback",
              file=sys.stderr, flush=True)
        return 1
    return 0


def _quiet_logging() -> None:
    """A log handler that cannot write (wandb's log file, on a full disk) fails silently, as Python's logging
    recommends in production, rather than printing a traceback for each line it drops."""
    import logging

    logging.raiseExceptions = False


def _silence_stderr() -> None:
    """Send what this process still writes on standard error to the null device. After the system refused the run's
    folder (a full disk), which the error has said in one line, the libraries that were writing into it report the
    same failure again as the process ends (orbax's unfinished tasks, as they are collected), a page of tracebacks."""
    sys.stderr.flush()
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(as_program=True))

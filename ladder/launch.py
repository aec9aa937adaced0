"""Launching the trainer and reading what a run folder says about itself.

Each run trains in its own ``python -m trainer_jax`` process (the way a cluster launcher runs it),
so `ladder` never imports the trainer. A relative ``run_dir`` is taken relative to the config
file's folder, as the planner's ``launch.sh`` does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from ladder import metrics as keys
from ladder import runfiles
from ladder.config.runconfig import RunConfig
from ladder.config.yamlio import load_yaml
from ladder.errors import LadderError


def ladder_runs(folder: Path, rungs_only: bool = False) -> list[tuple[Path, RunConfig]]:
    """Every RunConfig YAML in `folder`: rungs by fit compute, then the hero. All are checked first."""
    if folder.is_file():
        try:
            RunConfig.load(folder, check_coordinates=False)
        except LadderError as exc:  # a recipe or a target file: named as such, with what to do with it
            raise LadderError(f"--ladder {folder}: is a file, not a ladder folder: {exc}") from None
        raise LadderError(f"--ladder {folder}: is one run config, not a ladder folder: train it alone with `ladder train "
                          f"{folder}`, or its whole ladder with --ladder {folder.parent}")
    if not folder.is_dir():
        raise LadderError(f"--ladder {folder}: no such folder (write one with `ladder plan PRESET --out {folder}`)")
    runs = [(p, _ladder_config(p)) for p in sorted(folder.glob("*.yaml"))]
    if not runs:
        raise LadderError(f"--ladder {folder}: no run config (*.yaml) in it")
    runs.sort(key=lambda pc: (pc[1].role == "hero", pc[1].fit_flops, pc[1].name))
    return [(p, c) for p, c in runs if not (rungs_only and c.role == "hero")]


def _ladder_config(path: Path) -> RunConfig:
    """One YAML of a ladder folder as a run config; one that is none (no ``spec``) says that --ladder reads every
    YAML there, where a run config's own error (a typo in a field) is left as it is."""
    try:
        return RunConfig.load(path, check_coordinates=False)
    except LadderError as exc:
        try:
            is_run_config = "spec" in load_yaml(path)
        except LadderError:
            is_run_config = False
        if is_run_config:
            raise
        raise LadderError(f"{exc}; --ladder trains every YAML in {path.parent} (a YAML that is no run config, notes "
                          "say, goes in another folder)") from None


def run_dir_of(path: Path, cfg: RunConfig) -> Path:
    return cfg.resolved_run_dir(base=path.parent)


def _status(run_dir: Path) -> dict:
    """The run's ``status.json`` ({} where it is missing or unreadable)."""
    try:
        status = json.loads((run_dir / runfiles.STATUS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def run_state(run_dir: Path) -> str | None:
    return _status(run_dir).get("state")


def run_step(run_dir: Path) -> int:
    """The last completed step the run's status reports (0 where it has no readable status)."""
    return _step_of(_status(run_dir))


def _step_of(status: dict) -> int:
    step = status.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else 0


def mark_crashed(run_dir: Path) -> bool:
    """Mark a run whose status says it runs as crashed (its trainer was killed and could not say so);
    whether it was marked. The trainer writes this file itself whenever it can (`runfiles`)."""
    status = _status(run_dir)
    if status.get("state") != "running":
        return False
    # its last status was written at an eval; it logged on past it until killed
    step = max(_step_of(status), runfiles.last_logged_step(run_dir) or 0)
    return runfiles.write_status_anyway(run_dir, "crashed", step)


def same_config(run_dir: Path, cfg: RunConfig) -> bool:
    try:
        return RunConfig.load(run_dir / runfiles.CONFIG_FILE, check_coordinates=False) == cfg
    except LadderError:
        return False


def is_done(path: Path, cfg: RunConfig) -> bool:
    """The run finished, with this very config."""
    return finished_in(run_dir_of(path, cfg), cfg)


def finished_in(run_dir: Path, cfg: RunConfig) -> bool:
    """The run in `run_dir` finished, with this very config (its status and its ``run.yaml`` say so)."""
    return run_state(run_dir) == "finished" and same_config(run_dir, cfg)


def final_eval_loss(run_dir: Path) -> float | None:
    loss = None
    for record in runfiles.metric_records(run_dir):
        loss = record.get(keys.EVAL_LOSS, loss)
    return loss


# Started in the child before the trainer: on Linux the child gets a signal when the process that started it
# dies (`ladder train` or a Ray worker killed with SIGKILL cannot stop its children itself), and Ctrl-C
# reaches the trainer again (a Ray worker blocks SIGINT, and the mask is inherited across exec).
_DIE_WITH_PARENT = """\
import ctypes, os, runpy, signal, sys
parent, death = int(sys.argv.pop(1)), int(sys.argv.pop(1))
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
try:
    ctypes.CDLL(None).prctl(1, death)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    sys.exit(137)
sys.argv[0] = "trainer_jax"
runpy.run_module("trainer_jax", run_name="__main__", alter_sys=True)
"""


def with_parent(args: list[str], death: signal.Signals = signal.SIGKILL) -> list[str]:
    """``python -m trainer_jax ARGS`` in a process that gets `death` when this one dies (SIGTERM: it stops at a
    step and marks its run crashed, as for any stop; SIGKILL: at once)."""
    return [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), str(int(death)), *args]


def trainer_command(config: Path, resume: bool, progress: bool) -> list[str]:
    """The trainer of one run; it stops (at a step, its run marked crashed) when `ladder` dies, even by SIGKILL."""
    args = [str(config)] + (["--resume"] if resume else []) + ([] if progress else ["--no-progress"])
    return with_parent(args, signal.SIGTERM)


def how_it_ended(code: int | None) -> str:
    """A trainer's end in words, from its exit code (negative: killed by that signal; None: its Ray task
    was lost, with its worker or node)."""
    if code is None:
        return "was lost with its Ray worker or node (out of memory, or the node went away)"
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"was killed by signal {-code}"
    why = f"{name}: perhaps out of memory" if -code == signal.SIGKILL else name
    return f"was killed by signal {-code} ({why})"


def trainer_env(again: str | None = None) -> dict[str, str]:
    """This process's environment without its wandb service: a trainer starts its own, so a run
    killed earlier (whose id a shared service would still hold) can be resumed. `again`: how the user
    resumes the run, which a stopped trainer says."""
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}
    return env | ({runfiles.RESUME_HINT_ENV: again} if again else {})


def how_to_continue() -> str:
    """How the user continues a stopped run, said by its trainer: in the words of the launcher that started it
    (`trainer_env`'s `again`), or ``--resume``."""
    again = os.environ.get(runfiles.RESUME_HINT_ENV)
    return f"{again} to continue it" if again else "continue it with --resume"


INTERRUPT_GRACE_S = 120.0
"""How long a stop waits for the trainer to stop at a step and mark its run crashed (it may be compiling)."""
SECOND_GRACE_S = 30.0
"""How long a second stop waits for the trainer to mark its run crashed (it stops at once, or once the checkpoint
being written is saved) before killing it."""
PASSED_ON = (signal.SIGTERM, signal.SIGHUP)
"""Stop signals `ladder` passes on to its trainer (besides Ctrl-C): a scheduler's stop, a closed terminal."""


class Stopped(KeyboardInterrupt):
    """A stop signal (`PASSED_ON`) received while a trainer runs: handled as Ctrl-C is, passed on as itself."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_RECEIVED: list[int] = []
"""The stop signals `_stopped` took while a `stops_as_interrupts` block runs (emptied as one starts)."""


def _stopped(signum, frame) -> None:
    _RECEIVED.append(signum)
    raise Stopped(signum)


def stop_signal(exc: KeyboardInterrupt) -> int:
    """The signal that stopped the work: a `Stopped`'s (or `Interrupted`'s) own; for a plain KeyboardInterrupt another
    library raised in the place of ours (Ray re-raises one from `ray.wait`), the last stop signal received in the
    block; else Ctrl-C's."""
    own = getattr(exc, "signum", None)
    return own if own is not None else _RECEIVED[-1] if _RECEIVED else signal.SIGINT


def stop_said(signum: int) -> str:
    """How a stop is said to the user: "interrupted" (Ctrl-C), "stopped (SIGTERM)" and so on."""
    return "interrupted" if signum == signal.SIGINT else f"stopped ({signal.Signals(signum).name})"


def train(config: Path, resume: bool, progress: bool, again: str | None = None) -> int:
    """Train one run to the end in its own process; its exit code (the trainer prints its own errors).

    A stop (Ctrl-C, SIGTERM, SIGHUP) is passed on to the trainer (`trainer_stops_with`); then the KeyboardInterrupt
    goes on (a `Stopped` with its signal's number for the signals other than Ctrl-C). `again`: how the user resumes
    the run, said by a trainer that is stopped."""
    proc = start(config, resume, progress, again)
    with trainer_stops_with(proc):
        return proc.wait()


def start(config: Path, resume: bool, progress: bool, again: str | None = None) -> subprocess.Popen:
    """Start training one run in the background. In its own process group: a terminal's Ctrl-C reaches it only
    through `trainer_stops_with`, once (a second, passed on too, stops it at once but for a checkpoint being
    written, which it waits for)."""
    return subprocess.Popen(trainer_command(config, resume, progress), env=trainer_env(again), process_group=0)


@contextlib.contextmanager
def trainer_stops_with(proc: subprocess.Popen) -> Iterator[None]:
    """While the block runs, a Ctrl-C, SIGTERM or SIGHUP to this process is passed on to the trainer `proc` and
    waited for, so it stops at a step, marks its run crashed and says how to resume; a second stop is passed on too
    (the trainer stops at once), and past the grace times it is killed. Then the KeyboardInterrupt goes on. Any
    other error that leaves the block stops the trainer the same way (as SIGTERM), so none is left training alone."""
    with stops_as_interrupts():
        try:
            yield
        except BaseException as exc:
            signum = getattr(exc, "signum", signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM)
            for grace in (INTERRUPT_GRACE_S, SECOND_GRACE_S):
                try:
                    if proc.poll() is None:  # the trainer takes SIGTERM for every stop but Ctrl-C
                        proc.send_signal(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)
                    proc.wait(timeout=grace)
                    break
                except (subprocess.TimeoutExpired, KeyboardInterrupt):
                    continue
            else:
                proc.kill()
                proc.wait()
            raise


@contextlib.contextmanager
def stops_as_interrupts() -> Iterator[None]:
    """While the block runs, a SIGTERM or SIGHUP (`PASSED_ON`) raises `Stopped` where the default would end the
    process on the spot: the work stops as at a Ctrl-C, with its files left whole and its locks let go, and the
    command can say how to go on. A signal the process ignores stays ignored (`nohup ladder ...` goes on when its
    terminal closes), and one another handler takes stays with it. Only the main thread can take signals; elsewhere
    this does nothing."""
    main = threading.current_thread() is threading.main_thread()
    before = {sig: signal.signal(sig, _stopped) for sig in PASSED_ON
              if main and signal.getsignal(sig) in (signal.SIG_DFL, _stopped)}
    _RECEIVED.clear()
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)

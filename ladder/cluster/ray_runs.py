"""Training the runs of a ladder on a Ray cluster (or a local Ray instance): one Ray task per
trainer process, with the resources its config asks for, as many at once as the cluster holds.

A run on one host is one task. A run over several hosts (``resources.hosts > 1``, the hero) gets a
placement group with one bundle per host and one task per bundle; the launcher picks a free port
on bundle 0's node and hands every process the ``jax.distributed`` coordinator address, the process
count and its index. Finished runs are skipped; the others resume from their last checkpoint; a run
that fails is started again from its checkpoint up to `retries` times (a trainer that a SIGTERM
stopped, a node's preemption, exits 143 and is one), and then marked crashed; an interrupt cancels
every task (each trainer exits 130) and leaves each run resumable. Run folders must be at the same
path on every node (a shared filesystem): that is where checkpoints, metrics and logs go, and what
the live table reads.
"""

from __future__ import annotations

import contextlib
import logging
import re
import signal
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ladder import runfiles
from ladder.cluster.board import Board, log_file
from ladder.cluster.worker import GRACE_SECONDS, INTERRUPTED, coordinator_address, run_trainer, trainer_args
from ladder.config.runconfig import ResourcesConfig, RunConfig
from ladder.errors import LadderError
from ladder.launch import how_it_ended, is_done, mark_crashed, run_dir_of, stop_signal

INSTALL = "pip install 'scaling-ladder[ray]'"
USER_ERROR = 2
"""Exit code of a trainer that refused its config: trying again cannot help."""
_ADDRESS = re.compile(r"^(auto|local|ray://[^\s/:]+:[0-9]+|[^\s/:]+:[0-9]+)$")
_PORTS = range(1, 65536)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise LadderError(f"--ray needs Ray, which is not installed: {INSTALL}") from None
    return ray


def check_address(address: str) -> str:
    if not _ADDRESS.match(address):
        raise LadderError(
            f"--ray {address!r}: expected nothing (start a local Ray instance), auto (the cluster this "
            "machine belongs to), ray://HOST:PORT (a remote cluster) or HOST:PORT (its head node)"
        )
    port = address.rpartition(":")[2]
    if port.isascii() and port.isdigit() and (len(port) > 5 or int(port) not in _PORTS):
        raise LadderError(f"--ray {address!r}: port {port} does not exist (ports run from 1 to 65535); give the port "
                          "the cluster's head node listens on, which `ray start --head` printed")
    return address


def connect(ray: Any, address: str, local_cpus: int | None) -> bool:
    """Start a local Ray instance (address ``local``) or join a cluster; True when started here."""
    local = address == "local"
    if not local and address != "auto" and not address.startswith("ray://"):
        _head_answers(address)
    main = threading.current_thread() is threading.main_thread()
    term = signal.getsignal(signal.SIGTERM) if main else None  # Ray takes SIGTERM for a sys.exit: a handler of
    kept = callable(term)  # ladder's (a stop: cancelled runs, one line, 143) or the caller's is given back below
    with warnings.catch_warnings(record=True) as said:  # Ray's own advice comes as warnings: it goes in the error
        try:
            if local:
                # address "local": a new instance, never the cluster RAY_ADDRESS or the last `ray start` names
                ray.init(address="local", num_cpus=local_cpus, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            where = "a local Ray instance" if local else f"the Ray cluster at {address}"
            advice = "".join(f" ({w.message})" for w in said[:1])
            raise LadderError(f"could not start or reach {where}: {first}{advice}") from None
        finally:
            if kept:
                signal.signal(signal.SIGTERM, term)
    for w in said:  # a warning of a connection that worked: shown as it would have been
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return local


def _head_answers(address: str, timeout_s: float = 10.0) -> None:
    """Refuse a head node (HOST:PORT) where nothing listens: Ray would wait for it without end."""
    import socket

    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise LadderError(f"could not start or reach the Ray cluster at {address}: nothing answers there "
                          f"({exc.strerror or type(exc).__name__}); start its head node (`ray start --head --port "
                          f"{port}`), or give the address `ray start` printed") from None


class Interrupted(KeyboardInterrupt):
    """A stop (Ctrl-C, or a SIGTERM or SIGHUP: `signum`) of `train_on_ray`, after cancelling what ran; `started`: the
    runs handed to Ray by then."""

    def __init__(self, started: int, signum: int = signal.SIGINT) -> None:
        super().__init__(started)
        self.started, self.signum = started, signum


@dataclass
class Job:
    """One run under the launcher: its attempts, its tasks and (for several hosts) its placement group."""

    config: Path
    cfg: RunConfig
    state: str = "queued"
    attempts: int = 0
    codes: list[int | None] = field(default_factory=list)
    """Exit codes of the last attempt's processes (None: the task itself was lost)."""
    before: list[int | None] = field(default_factory=list)
    """The exit codes of the attempt before this one (empty for the first)."""
    refs: list[Any] = field(default_factory=list)
    pg: Any = None
    pg_ready: Any = None

    @property
    def name(self) -> str:
        return self.cfg.name

    @property
    def run_dir(self) -> Path:
        return run_dir_of(self.config, self.cfg)

    @property
    def hosts(self) -> int:
        return self.cfg.resources.hosts

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running", "retrying")

    def waiting_on(self) -> list[Any]:
        return [self.pg_ready] if self.pg_ready is not None else list(self.refs)


def task_options(r: ResourcesConfig) -> dict[str, Any]:
    return {"num_cpus": r.cpus, "num_gpus": r.gpus, "resources": dict(r.custom), "max_retries": 0}


def bundle(r: ResourcesConfig) -> dict[str, float]:
    return {k: v for k, v in {"CPU": r.cpus, "GPU": r.gpus, **r.custom}.items() if v > 0}


def check_placeable(jobs: list[Job]) -> None:
    """Refuse a run of several hosts whose processes ask for nothing: Ray cannot make a placement group of them."""
    for job in jobs:
        if job.hosts > 1 and job.cfg.resources.asks_nothing:
            raise LadderError(
                f"{job.config}: its {job.hosts} processes ask for no resource (resources.cpus, gpus and custom are all "
                "0), and Ray places one on each host by what it asks for; set resources.cpus: 1 in it (or plan it "
                "again with `ladder plan --cpus-per-run 1`)"
            )


def check_fits(jobs: list[Job], available: dict[str, float]) -> None:
    """Refuse a run that asks for more than the whole (local) instance holds."""
    for job in jobs:
        for name, per_process in bundle(job.cfg.resources).items():
            need, have = per_process * job.hosts, available.get(name, 0.0)
            if need > have:
                more = ("or give Ray more (--ray-cpus)" if name == "CPU" else
                        f"or train on a Ray cluster that has them (--ray ADDRESS): a local instance offers the {name} "
                        "this machine has")
                raise LadderError(
                    f"{job.name} asks for {job.hosts} × {per_process:g} {name} but the local Ray instance has "
                    f"{have:g}: lower its resources block (ladder plan --cpus-per-run/--gpus-per-run/--hero-hosts) "
                    f"{more}"
                )


class RayLauncher:
    """Submits, watches, retries and cancels the jobs of one `ladder train --ray` call."""

    def __init__(self, ray: Any, jobs: list[Job], retries: int, resume_first: bool, again: str | None = None):
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.ray, self.jobs, self.retries, self.resume_first, self.again = ray, jobs, retries, resume_first, again
        self._pg, self._remove_pg, self._in_bundle = placement_group, remove_placement_group, PlacementGroupSchedulingStrategy
        self._train = ray.remote(run_trainer)
        self._address = ray.remote(coordinator_address)
        self.stopping = False  # set by `cancel`: a failed attempt is not tried again

    # ---- starting ----------------------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        job.attempts += 1
        job.before = job.codes
        job.codes = []
        if job.hosts == 1:
            job.refs = [self._start_process(job, None, {})]
        else:
            job.pg = self._pg([bundle(job.cfg.resources)] * job.hosts, strategy="SPREAD")
            job.pg_ready = job.pg.ready()

    def _start_process(self, job: Job, distributed: tuple[str, int, int] | None, placement: dict) -> Any:
        resume = self.resume_first or job.attempts > 1
        process = distributed[2] if distributed else 0
        header = f"{job.name}: attempt {job.attempts}" + (f", process {process}" if distributed else "")
        if job.before:  # a retry: say why the attempt before ended, which its own log may not (a SIGKILL)
            start = ("resuming from its last checkpoint" if runfiles.last_checkpoint(job.run_dir) is not None
                     else "from scratch: no checkpoint yet")
            header += f" (attempt {job.attempts - 1}: {attempt_ended(job.before)}; {start})"
        name = job.name if not distributed else f"{job.name}/{process}"
        options = task_options(job.cfg.resources) | placement | {"name": name}
        args = trainer_args(job.config.absolute(), resume, distributed)
        return self._train.options(**options).remote(args, str(log_file(job.run_dir, process).absolute()), header,
                                                     self.again)

    def _start_hosts(self, job: Job) -> None:
        """The placement group is ready: one trainer process per bundle, process 0's node coordinating."""
        job.pg_ready = None
        first = self._in_bundle(placement_group=job.pg, placement_group_bundle_index=0)
        try:
            address = self.ray.get(self._address.options(num_cpus=0, scheduling_strategy=first).remote(), timeout=120)
        except self.ray.exceptions.RayError:  # bundle 0's node went away: try again, like any failure
            job.codes = [None]
            self._finish_attempt(job)
            return
        job.refs = [
            self._start_process(job, (address, job.hosts, i), {
                "scheduling_strategy": self._in_bundle(placement_group=job.pg, placement_group_bundle_index=i)})
            for i in range(job.hosts)
        ]

    # ---- watching ----------------------------------------------------------------------------------
    def run(self, board: Board, tick: float = 1.0) -> None:
        """Until every job is finished or has failed for good."""
        for job in self.jobs:
            if job.state == "queued":
                self.submit(job)
        while any(job.active for job in self.jobs):
            refs = [ref for job in self.jobs if job.active for ref in job.waiting_on()]
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=tick, fetch_local=False)
            for ref in ready:
                self._settle(ref)
            board.update(self.states())

    def states(self) -> dict[str, tuple[str, int]]:
        return {job.name: (job.state, job.attempts) for job in self.jobs}

    def _settle(self, ref: Any) -> None:
        job = next((j for j in self.jobs if j.active and any(r == ref for r in j.waiting_on())), None)
        if job is None:
            return
        if job.pg_ready is not None and ref == job.pg_ready:
            self._start_hosts(job)
            return
        job.refs = [r for r in job.refs if r != ref]
        code = self._exit_code(ref)
        job.codes.append(code)
        if code != 0 and job.refs:  # the other processes of a multi-host run would wait for it forever
            for other in job.refs:
                self.ray.cancel(other, force=True)
            job.codes += [None] * len(job.refs)
            job.refs = []
        if not job.refs:
            self._finish_attempt(job)

    def _exit_code(self, ref: Any) -> int | None:
        try:
            return int(self.ray.get(ref))
        except self.ray.exceptions.RayError:  # the worker died, its node was lost, the task was cancelled
            return None

    def _finish_attempt(self, job: Job) -> None:
        self._release(job)
        failed = [c for c in job.codes if c != 0]
        if not failed:
            job.state = "finished"
        elif USER_ERROR in failed:  # its trainer refused the run (another trainer may hold it): its status is not ours
            job.state = "failed"
        elif INTERRUPTED in failed:
            self._end(job, "cancelled")
        elif job.attempts <= self.retries and not self.stopping:
            job.state = "retrying"
            self.submit(job)
        else:
            self._end(job, "failed")

    @staticmethod
    def _end(job: Job, state: str) -> None:
        """No attempt follows: a trainer that was killed could not mark its run stopped, so it is marked crashed here
        (resumable from its last checkpoint), as `ladder train` does without Ray."""
        job.state = state
        mark_crashed(job.run_dir)

    def _release(self, job: Job) -> None:
        if job.pg is not None:
            self._remove_pg(job.pg)
            job.pg = job.pg_ready = None

    # ---- stopping ----------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop every task: each trainer gets SIGINT and marks its run resumable; what does not end
        within the grace period is killed (a killed run resumes from its last checkpoint too). A trainer that
        ended before the stop is settled first, and one whose run's folder says finished (its trainer was shutting
        down) counts as finished: a finished run reads as finished, not cancelled."""
        self.stopping = True
        refs = [ref for job in self.jobs if job.active for ref in job.refs]
        ended, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False) if refs else ([], refs)
        for ref in ended:
            self._settle(ref)
        refs = [ref for job in self.jobs if job.active for ref in job.refs]
        for ref in refs:
            self.ray.cancel(ref, force=False)
        left = refs
        if refs:
            _, left = self.ray.wait(refs, num_returns=len(refs), timeout=GRACE_SECONDS + 5, fetch_local=False)
        for ref in left:  # only what did not stop: force-cancelling a task that has ended can crash Ray's driver
            self.ray.cancel(ref, force=True)
        for job in self.jobs:
            if job.active:  # a trainer that finished its run and was shutting down when the stop came: finished
                self._end(job, "finished" if is_done(job.config, job.cfg) else "cancelled")
            self._release(job)


def attempt_ended(codes: list[int | None]) -> str:
    """How an attempt ended, by its first failed process (the others are cancelled after it)."""
    failed = [c for c in codes if c != 0]
    return "its trainer " + how_it_ended(failed[0]) if failed else "finished"


def train_on_ray(
    runs: list[tuple[Path, RunConfig]],
    *,
    address: str,
    retries: int,
    resume: bool,
    board_factory: Any,
    local_cpus: int | None = None,
    again: str | None = None,
) -> dict[str, Job]:
    """Train `runs` on Ray at `address` (``local``: start an instance here) and return each run's
    job by name. Runs finished with the same config are skipped. Raises `Interrupted` after
    cancelling everything when interrupted."""
    if retries < 0:
        raise LadderError(f"--retries {retries} must be >= 0")
    check_address(address)
    ray = import_ray()
    jobs = [Job(path, cfg) for path, cfg in runs]
    for job in jobs:
        if is_done(job.config, job.cfg):
            job.state = "skipped"
    check_placeable([j for j in jobs if j.state != "skipped"])
    try:
        started_here = connect(ray, address, local_cpus)
    except KeyboardInterrupt as exc:  # while Ray starts or connects: no run was handed to it
        with contextlib.suppress(Exception):
            ray.shutdown()
        raise Interrupted(0, stop_signal(exc)) from None
    try:
        if started_here:  # nothing joins a local instance later: a run that cannot fit would wait forever
            check_fits([j for j in jobs if j.state != "skipped"], ray.cluster_resources())
    except LadderError:
        ray.shutdown()
        raise
    except KeyboardInterrupt as exc:  # before any run was handed to Ray
        ray.shutdown()
        raise Interrupted(0, stop_signal(exc)) from None
    launcher = RayLauncher(ray, jobs, retries, resume, again)
    board = board_factory([(j.name, j.run_dir, j.cfg.stop_after_steps, j.cfg.tokens_per_step, j.hosts) for j in jobs])
    try:
        with board:
            try:
                launcher.run(board)
            except KeyboardInterrupt as exc:
                launcher.cancel()
                board.update(launcher.states())
                raise Interrupted(sum(j.attempts > 0 for j in jobs), stop_signal(exc)) from None
    finally:
        if started_here:
            ray.shutdown()
    return {job.name: job for job in jobs}

"""What runs on a cluster node for one trainer process: ``python -m trainer_jax`` as a child process
whose output goes to a log file in its run folder, and which dies with the Ray worker that started it.

These are plain module-level functions (Ray ships them by reference, and they work under any process
start method); `ladder.cluster.ray_runs` wraps them as Ray tasks. Ray is imported only to ask a
node for its address.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

from ladder.launch import trainer_env, with_parent

INTERRUPTED = 130
"""Exit code of a trainer stopped by Ctrl-C (it marks its run crashed and resumable)."""
GRACE_SECONDS = 20.0
"""How long a trainer gets to mark its run and exit after SIGINT before it is killed."""

def trainer_args(config: Path, resume: bool, distributed: tuple[str, int, int] | None = None) -> list[str]:
    """Arguments of ``python -m trainer_jax`` for one process; `distributed` is (coordinator
    host:port, process count, this process's id)."""
    args = [str(config), "--no-progress"] + (["--resume"] if resume else [])
    if distributed is not None:
        coordinator, n, pid = distributed
        args += ["--coordinator", coordinator, "--num-processes", str(n), "--process-id", str(pid)]
    return args


def run_trainer(args: list[str], log: str, header: str, again: str | None = None) -> int:
    """Run the trainer with `args` to its end, appending its output to the file `log` after a
    `header` line; its exit code. Interrupted (Ray cancels the task with KeyboardInterrupt), it
    passes SIGINT on, waits for the trainer to mark its run resumable, and returns 130. `again`:
    how the user resumes the run, which a stopped trainer says."""
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    cmd = with_parent(args)
    with open(log, "a", buffering=1) as out:
        out.write(f"--- {header} on {socket.gethostname()} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=trainer_env(again),
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            while proc.poll() is None:
                time.sleep(0.2)
        except KeyboardInterrupt:
            _stop(proc)
            return INTERRUPTED
        return proc.returncode


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def coordinator_address() -> str:
    """host:port for process 0 of a multi-host run, on the node this runs on (a free port)."""
    host = _node_ip()
    with socket.socket() as s:
        s.bind(("", 0))
        return f"{host}:{s.getsockname()[1]}"


def _node_ip() -> str:
    try:
        import ray  # present wherever this runs as a Ray task

        return ray.util.get_node_ip_address()
    except ImportError:  # pragma: no cover - only without Ray
        return socket.gethostbyname(socket.gethostname())

"""Training a ladder on a cluster through Ray: one task per run with the resources its config asks
for, a multi-host run as a placement group with one trainer process per host, and a live table of
every run. Ray is an optional dependency, imported only when a command asks for it."""

from ladder.cluster.board import Board, Row
from ladder.cluster.ray_runs import INSTALL, Interrupted, Job, attempt_ended, check_address, train_on_ray

__all__ = ["INSTALL", "Board", "Interrupted", "Job", "Row", "attempt_ended", "check_address", "train_on_ray"]

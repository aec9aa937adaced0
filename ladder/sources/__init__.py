"""Metric sources: wandb cloud, wandb offline files, the trainer's run directories and tables.

Each source lists runs and reads each one incrementally into the one raw table format
(`ladder.sources.table`); `ladder.sources.pull.pull` resolves what it read (`ladder.resolve`) and
commits it to the store (`ladder.store`). The live monitor calls the same ``read`` with the cursor of
its last call. (`pull` is imported from its module: `ladder.resolve` builds on this package.)
"""

from ladder.sources.coords import CoordinateOverrides, Coordinates
from ladder.sources.local import LocalSource
from ladder.sources.offline import OfflineSource
from ladder.sources.table import RAW_COLUMNS, RunRef, SourceRun
from ladder.sources.tabular import ColumnMap, TableSource
from ladder.sources.wandb_api import RetryPolicy, WandbSource

__all__ = [
    "RAW_COLUMNS",
    "ColumnMap",
    "CoordinateOverrides",
    "Coordinates",
    "LocalSource",
    "OfflineSource",
    "RetryPolicy",
    "RunRef",
    "SourceRun",
    "TableSource",
    "WandbSource",
]

"""Metric sources: wandb cloud, wandb offline files, the trainer's run directories and tables.

Each source lists runs and reads each one incrementally into the one raw table format
(`ladder.data.sources.table`); `ladder.data.sources.pull.pull` resolves what it read (`ladder.data.resolve`) and
commits it to the store (`ladder.data.store`). The live monitor calls the same ``read`` with the cursor of
its last call. (`pull` is imported from its module: `ladder.data.resolve` builds on this package.)
"""

from ladder.data.sources.coords import CoordinateOverrides, Coordinates
from ladder.data.sources.local import LocalSource
from ladder.data.sources.offline import OfflineSource
from ladder.data.sources.table import RAW_COLUMNS, RunRef, SourceRun
from ladder.data.sources.tabular import ColumnMap, TableSource
from ladder.data.sources.wandb_api import RetryPolicy, WandbSource

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

"""Pure math for scaling laws: functional forms, robust fits, curve models, uncertainty, backtests.

Takes numpy arrays and small records; knows nothing of files, wandb or plots.
"""

from fits.errors import FitError

__all__ = ["FitError"]

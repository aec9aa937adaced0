"""The exception fits raise when the data cannot support the requested fit."""


class FitError(ValueError):
    """The data cannot support this fit (too few runs, non-finite values, ...); the message says why."""

"""The exception fits raise when the data cannot support the requested fit."""


class FitError(ValueError):
    """The data cannot support this fit (too few runs, non-finite values, ...); the message says why."""


class GivenValueError(FitError):
    """A value the user gave (a pinned asymptote, say) that no law can take: refused whichever law is asked, not
    passed over as one law failing among others."""

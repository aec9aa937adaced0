"""Spans of time as a reader takes them in at a glance, for messages.

"no write for 796524115 s" says nothing until one divides it out; "9,219 days" says the file is years old.
Seconds stay under two minutes, where they are what one would count.
"""

from __future__ import annotations

import math

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0


def span_text(seconds: float) -> str:
    """`seconds` (0 or more) in the largest unit that reads well: "45 s" under two minutes, "17 min" under two
    hours, "3 h 12 min" under two days, then "9,219 days"; not finite is written as given."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    if seconds < 2 * MINUTE:
        return f"{seconds:.0f} s"
    if seconds < 2 * HOUR:
        return f"{seconds / MINUTE:.0f} min"
    if seconds < 2 * DAY:
        hours, minutes = divmod(round(seconds / MINUTE), 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{seconds / DAY:,.0f} days"

"""Today's date, as every dated check reads it: price ages, plan dates, the newest rate a refresh may write."""

from __future__ import annotations

import datetime as dt
import os

from gpuopt.errors import InputError


def today() -> dt.date:
    """Today, or GPUOPT_TODAY (YYYY-MM-DD) for reproducible price-age warnings in reports and tests; a value that
    is no date is refused (one reader, so the pricing layer's checks and the commands agree on the day)."""
    forced = os.environ.get("GPUOPT_TODAY")
    if forced:
        try:
            return dt.date.fromisoformat(forced)
        except ValueError:
            raise InputError(f"GPUOPT_TODAY: '{forced}' is not a date YYYY-MM-DD") from None
    return dt.date.today()

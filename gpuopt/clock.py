"""Today's date, as every dated check reads it: price ages, plan dates, the newest rate a refresh may write."""

from __future__ import annotations

import datetime as dt
import os

from gpuopt.errors import InputError


def iso_date(text: str) -> bool:
    """Whether `text` is a calendar day written YYYY-MM-DD (what `today().isoformat()` writes). Python's
    fromisoformat alone would also take `20261203` or `2026-W49-4`; plan dates, FX and price dates and profile
    dates are compared and printed as this text."""
    try:
        day = dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        return False
    return day.isoformat() == text


def today() -> dt.date:
    """Today in UTC, or GPUOPT_TODAY (YYYY-MM-DD) for reproducible price-age warnings in reports and tests; a
    value that is no date is refused (one reader, so the pricing layer's checks and the commands agree on the
    day). UTC, not the local day: a plan made at the same instant in Kiritimati and in London dated itself a day
    apart and aged its prices differently (QA); price dates and ECB rates are UTC days too."""
    forced = os.environ.get("GPUOPT_TODAY")
    if forced:
        if not iso_date(forced):
            raise InputError(f"GPUOPT_TODAY: '{forced}' is not a date YYYY-MM-DD")
        return dt.date.fromisoformat(forced)
    return dt.datetime.now(dt.UTC).date()


def latest_day() -> dt.date:
    """The latest calendar day anywhere on Earth now (UTC+14), or GPUOPT_TODAY: what a date written today may be
    at most. A quote dated by a local business day east of UTC is a day after the UTC day for hours (review:
    Beijing's morning dated an overlay row "after today"); a date after this one is no quote of today."""
    if os.environ.get("GPUOPT_TODAY"):
        return today()
    return dt.datetime.now(dt.timezone(dt.timedelta(hours=14))).date()

"""How old the prices a plan chose are: warnings, --max-price-age errors, the date a plan header shows.

A plan is as current as its OLDEST chosen price, not as the catalog's newest row: a China plan can pick
Tencent list prices from 2021 while the catalog holds 2026 RunPod prices. Commitments are held to a stricter
rule: a 1- or 3-year reservation bought on a price read more than a year ago may not be on offer any more.
Overlay prices (the user's own quotes) are held to the same rules: a quote from 2019 is as stale as a catalog
row from 2019, and a plan header showing it beside a passed --max-price-age gate would contradict itself.
The overlay's `as_of` column dates a quote; without one it is of unknown date, as an undated catalog row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from gpuopt.pricing.catalog import Offering
from gpuopt.pricing.fx import FxTable

STALE_AFTER_DAYS = 120
COMMITMENT_STALE_AFTER_DAYS = 365


def _label(o: Offering) -> str:
    return f"{o.provider} {o.sku} {o.region} {o.price_kind}" + (" (overlay)" if o.origin == "overlay" else "")


def staleness(offerings: Iterable[Offering], today: dt.date, max_age_days: int | None) -> tuple[list[str], list[str]]:
    """(warnings, errors) for chosen rows older than STALE_AFTER_DAYS, or than --max-price-age (then errors)."""
    warnings: list[str] = []
    errors: list[str] = []
    for o in sorted(set(offerings), key=lambda o: o.key):
        date = o.as_of_date
        age = (today - date).days if date else None
        if age is not None and age < -1:  # QA: an overlay dated 2099 passed --max-price-age 30 as "-26,000 days"
            # (a day ahead is a quote dated by a local business day east of UTC: clock.latest_day)
            future = (f"price of {_label(o)} is dated {o.as_of}, after today ({today.isoformat()}): a price is dated "
                      "when it was quoted")
            (errors if max_age_days is not None else warnings).append(
                future + (f"; --max-price-age {max_age_days} cannot vouch for it" if max_age_days is not None
                          else ""))
        elif max_age_days is not None and (age is None or age > max_age_days):
            errors.append(f"price of {_label(o)} is {'of unknown date' if age is None else f'{age} days old'} "
                          f"(as_of {o.as_of or '?'}), older than --max-price-age {max_age_days}")
        elif age is None:
            warnings.append(f"price of {_label(o)} has no date (as_of '{o.as_of}')"
                            + ("; give the quote's date in the overlay's as_of column" if o.origin == "overlay"
                               else ""))
        elif age > STALE_AFTER_DAYS:
            warnings.append(f"price of {_label(o)} is {age} days old (as_of {o.as_of}); refresh or overlay it")
    return warnings, errors


def oldest_price_date(offerings: Iterable[Offering]) -> str:
    """The oldest as_of among chosen priced rows, "unknown" if one is undated, "" if none is chosen."""
    chosen = [o for o in offerings if o.price_per_hour is not None]
    if not chosen:
        return ""
    dated = sorted((o.as_of_date, o.as_of[:10]) for o in chosen if o.as_of_date is not None)
    return "unknown" if len(dated) < len(chosen) else dated[0][1]


def stale_commitments(committed: Iterable[Offering], today: dt.date) -> list[tuple[Offering, str]]:
    """(offering, warning) for commitments priced from a source older than a year (or undated)."""
    out = []
    for o in sorted(set(committed), key=lambda o: o.key):
        date = o.as_of_date
        age = (today - date).days if date else None
        if age is None or age > COMMITMENT_STALE_AFTER_DAYS:
            when = "an undated source" if age is None else f"a source {age} days old (as_of {o.as_of})"
            out.append((o, f"commitment {_label(o)} is priced from {when}: re-quote it before committing"))
    return out


def fx_staleness(fx: FxTable, offerings: Iterable[Offering], currency: str, today: dt.date,
                 max_age_days: int | None) -> tuple[list[str], list[str]]:
    """(warnings, errors) for the FX rates a plan converted its chosen prices with: a converted price is as old
    as its rate, so the rate is held to the prices' rules (QA: a CNY plan on USD quotes from the day before
    passed --max-price-age 10 on a rate 35 days old). A rate the user gave (--fx-rate) has no date to age."""
    warnings: list[str] = []
    errors: list[str] = []
    pairs = sorted({(o.currency, currency) for o in offerings if o.currency and o.currency != currency})
    for source, target in pairs:
        rate = fx.dated_rate(source, target)
        if rate is None:
            continue
        age = (today - dt.date.fromisoformat(rate.as_of)).days
        what = (f"FX rate 1 {rate.base} = {rate.rate} {rate.quote}, which converts the chosen {source} prices to "
                f"{target}, is {age} days old (as_of {rate.as_of})")
        if max_age_days is not None and age > max_age_days:
            errors.append(f"{what}, older than --max-price-age {max_age_days}; `gpuopt catalog refresh fx` or "
                          "--fx-rate gives a current one")
        elif age > STALE_AFTER_DAYS:
            warnings.append(f"{what}; `gpuopt catalog refresh fx` or --fx-rate gives a current one")
    return warnings, errors

"""ECB euro foreign exchange reference rates (public, no key) -> the dated USD/CNY rate in the cache.

The ECB publishes one XML file a working day (https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml):
a gesmes:Envelope whose Cube holds <Cube time="YYYY-MM-DD"> with one <Cube currency="USD" rate="1.1172"/> per
currency, each rate being units of that currency per 1 EUR. The catalog needs USD/CNY: the cross rate
rate(CNY) / rate(USD), dated by the Cube's `time` (the ECB's own date, not the fetch). The shipped
gpuopt/pricing/data/fx.csv was built the same way from the ECB history file.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

from gpuopt.clock import iso_date, today
from gpuopt.pricing.cache import cache_dir
from gpuopt.pricing.catalog import parse_price, read_text_file
from gpuopt.pricing.fx import FxRate
from gpuopt.pricing.refresh import RefreshError, write_atomic

ECB_DAILY = "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml"


def parse_ecb(text: str, label: str) -> FxRate:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise RefreshError(f"{label}: not valid XML ({exc}; truncated?)") from None
    dated = [c for c in root.iter() if c.tag.endswith("Cube") and c.get("time")]
    if not dated:
        raise RefreshError(f"{label}: no <Cube time=...> element (not the ECB reference-rate file?)")
    # the day dates the rate and decides whether it replaces the shipped one: a calendar date or nothing (QA:
    # time='zzz' was written, and won every later comparison with the shipped 2026-10-30)
    bad = [t for c in dated if not iso_date(t := c.get("time", ""))]
    if bad:
        raise RefreshError(f"{label}: Cube time={bad[0]!r} is not a date YYYY-MM-DD")
    now = today()
    future = [t for t in (c.get("time", "") for c in dated) if dt.date.fromisoformat(t) > now]
    if future:  # a rate dated after today would win every later, real one (review)
        raise RefreshError(f"{label}: Cube time={future[0]} is after today ({now.isoformat()}): not a published "
                           "rate")
    day = max(dated, key=lambda c: c.get("time", ""))
    time = day.get("time", "")
    rates: dict[str, float] = {}
    for cube in day:
        currency, raw = cube.get("currency"), cube.get("rate")
        if currency in ("USD", "CNY"):
            value = parse_price(raw or "")  # ASCII decimals only: float() read '7_4326' as 74326
            if value is None:
                raise RefreshError(f"{label}: Cube time={time} currency={currency}: rate {raw!r} is not a finite "
                                   "positive number")
            rates[currency] = value
    missing = [c for c in ("USD", "CNY") if c not in rates]
    if missing:
        raise RefreshError(f"{label}: Cube time={time} has no rate for {', '.join(missing)}")
    cross = rates["CNY"] / rates["USD"]
    source = (f"ECB euro foreign exchange reference rates ({label}): EUR/CNY {rates['CNY']} and EUR/USD "
              f"{rates['USD']} on {time}; USD/CNY is their cross rate")
    return FxRate("USD", "CNY", round(cross, 6), source, time)


def fetch(timeout: float = 30.0) -> FxRate:
    try:
        with urllib.request.urlopen(ECB_DAILY, timeout=timeout) as resp:
            text = resp.read().decode("utf-8")
    except (urllib.error.URLError, TimeoutError) as exc:
        raise RefreshError(f"cannot download {ECB_DAILY} ({exc}); the cache is unchanged") from None
    return parse_ecb(text, ECB_DAILY)


def replay(path: Path) -> FxRate:
    return parse_ecb(read_text_file(path), str(path))


def write_fx(rate: FxRate, folder: Path | None = None) -> Path:
    """<cache>/fx.csv, atomically (temp file + rename), in the shipped fx.csv's columns."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["base", "quote", "rate", "source", "as_of"])
    writer.writerow([rate.base, rate.quote, f"{rate.rate:.10g}", rate.source, rate.as_of])
    return write_atomic((folder or cache_dir()) / "fx.csv", out.getvalue())

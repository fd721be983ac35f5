"""Dated FX rates (gpuopt/pricing/data/fx.csv), overridable by the user, for showing every cost in one currency.

Prices stay in the provider's own currency in the catalog; conversion happens when a plan or listing asks
for a currency, and the rate and its date go into the output.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuopt.clock import iso_date
from gpuopt.datafiles import csv_rows, data_text
from gpuopt.decimals import parse_decimal
from gpuopt.errors import InputError
from gpuopt.pricing.cache import cache_dir
from gpuopt.pricing.columns import CURRENCIES


@dataclass(frozen=True)
class FxRate:
    base: str
    quote: str
    rate: float  # 1 base = rate quote
    source: str
    as_of: str


@dataclass(frozen=True)
class FxTable:
    rates: tuple[FxRate, ...]
    overrides: dict[tuple[str, str], float] = field(default_factory=dict)

    def rate(self, from_currency: str, to_currency: str) -> float:
        """Multiply an amount in from_currency by this to get to_currency."""
        if from_currency == to_currency:
            return 1.0
        for (base, quote), value in self.overrides.items():
            if (base, quote) == (from_currency, to_currency):
                return value
            if (base, quote) == (to_currency, from_currency):
                return 1.0 / value
        r = self.dated_rate(from_currency, to_currency)
        if r is None:
            raise InputError(f"no FX rate between {from_currency} and {to_currency}")
        return r.rate if (r.base, r.quote) == (from_currency, to_currency) else 1.0 / r.rate

    def dated_rate(self, a: str, b: str) -> FxRate | None:
        """The table's dated rate that converts between `a` and `b` either way, None where an override (a rate the
        user gave, which has no date) replaces it or the table has none: what `rate` converts with, and what
        staleness.fx_staleness ages."""
        if any({base, quote} == {a, b} for base, quote in self.overrides):
            return None
        return next((r for r in self.rates if {r.base, r.quote} == {a, b}), None)

    def convert(self, amount: float, from_currency: str, to_currency: str) -> float:
        return amount * self.rate(from_currency, to_currency)

    @property
    def as_of(self) -> str:
        if self.overrides:
            return "user override"
        return max((r.as_of for r in self.rates), default="")

    def describe(self) -> str:
        parts = [f"1 {b} = {v} {q} (user override)" for (b, q), v in sorted(self.overrides.items())]
        # an override replaces its pair both ways (rate() inverts it): the shipped rate of the pair is not used,
        # and printing it beside the override said a rate no figure was converted at
        parts += [f"1 {r.base} = {r.rate} {r.quote} ({r.as_of})" for r in self.rates
                  if (r.base, r.quote) not in self.overrides and (r.quote, r.base) not in self.overrides]
        return "; ".join(parts)


def _rates(text: str) -> dict[tuple[str, str], FxRate]:
    """The rates of an fx.csv; a row whose rate is no positive ASCII decimal or whose as_of is no date
    YYYY-MM-DD (rates are dated so, and compared as text) makes the file unreadable."""
    out = {}
    for r in csv_rows(text):
        rate = parse_decimal(r["rate"])
        if (rate is None or rate <= 0 or r["base"] not in CURRENCIES or r["quote"] not in CURRENCIES
                or not iso_date(r["as_of"])):
            raise ValueError(f"bad rate row {r}")
        out[(r["base"], r["quote"])] = FxRate(r["base"], r["quote"], rate, r["source"], r["as_of"])
    return out


def load_fx(overrides: dict[tuple[str, str], float] | None = None, use_cache: bool = True) -> FxTable:
    """The shipped dated rates, replaced pair by pair by a newer `gpuopt catalog refresh fx` in the cache."""
    rates = _rates(data_text("fx.csv", package="gpuopt.pricing"))
    cached = cache_dir() / "fx.csv"
    if use_cache and cached.is_file():
        try:
            fresh = _rates(cached.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, KeyError, ValueError):
            fresh = {}  # a damaged cache never breaks a solve; the shipped rate stays
        for pair, rate in fresh.items():
            if pair not in rates or rate.as_of > rates[pair].as_of:
                rates[pair] = rate
    return FxTable(tuple(rates[p] for p in sorted(rates)), dict(overrides or {}))


def parse_fx_override(text: str) -> tuple[tuple[str, str], float]:
    """`USD:CNY=7.1` -> (("USD", "CNY"), 7.1): one USD is 7.1 CNY."""
    try:
        pair, value = text.split("=", 1)
        base, quote = (p.strip().upper() for p in pair.split(":", 1))
        parsed = parse_decimal(value)  # ASCII decimals: float() read 7_1 as 71 (review)
        rate = math.nan if parsed is None else parsed  # said below, with the value given
    except ValueError:
        raise InputError(f"--fx-rate '{text}': expected BASE:QUOTE=RATE, e.g. USD:CNY=7.1") from None
    if base not in CURRENCIES or quote not in CURRENCIES:
        raise InputError(f"--fx-rate '{text}': currencies must be among {', '.join(CURRENCIES)}")
    if base == quote:  # 1 USD = 2 USD would be printed as the plan's FX and convert nothing
        raise InputError(f"--fx-rate '{text}': base and quote must be two currencies")
    if not (math.isfinite(rate) and rate > 0):
        raise InputError(f"--fx-rate '{text}': the rate must be a finite positive number (got {value.strip()})")
    return (base, quote), rate


def parse_fx_overrides(texts: Iterable[str]) -> dict[tuple[str, str], float]:
    """Every --fx-rate, one rate per pair of currencies: the same pair given twice with two values, or both
    directions of it (`USD:CNY=7` and `CNY:USD=0.15`, where 1 / 0.15 is 6.667), is a contradiction. Accepted,
    the plan was priced at one, recorded both, and `diff` converted at the other (-353.31 USD/month between two
    identical plans)."""
    rates: dict[tuple[str, str], float] = {}
    given: dict[frozenset[str], str] = {}
    problems = []
    for text in texts:
        pair, rate = parse_fx_override(text)
        first = given.setdefault(frozenset(pair), text)
        if first != text and (pair not in rates or rates[pair] != rate):
            problems.append(f"--fx-rate '{first}' and --fx-rate '{text}': two rates for one pair of currencies; "
                            "give one")
            continue
        rates[pair] = rate
    if problems:
        raise InputError(*problems)
    return rates

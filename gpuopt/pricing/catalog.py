"""The price catalog: shipped snapshot + refreshed cache + user overlays, filtered by residency and policy.

Order of precedence for one offering (provider, service, sku, region, price_kind):
  1. a user overlay row (negotiated price, private offer) -- never discounted again;
  2. a refreshed row from the user's cache folder (`gpuopt catalog refresh`), newer than the snapshot;
  3. the shipped snapshot (gpuopt/pricing/data/catalog.csv), with per-provider `discounts` applied.
The shipped files are never modified. Every Offering keeps its source and as_of so any cost line traces back.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from gpuopt import clock
from gpuopt.datafiles import data_text
from gpuopt.decimals import parse_decimal
from gpuopt.errors import InputError
from gpuopt.files_read import NotText, read_text_bytes
from gpuopt.hardware import gpu_table
from gpuopt.pricing.cache import cache_dir
from gpuopt.pricing.columns import (
    CATALOG_COLUMNS,
    CURRENCIES,
    OFFERING_KEY,
    OVERLAY_MIN_COLUMNS,
    PRICE_KINDS,
    PROVIDERS,
    offering_key,
)
from gpuopt.pricing.fx import FxTable, load_fx
from gpuopt.pricing.identifiers import formula_problems
from gpuopt.pricing.regions import Residency, countries, region_info, regions, split_countries
from gpuopt.vocabulary import LINK_KINDS

_DATE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?")


@dataclass(frozen=True)
class Offering:
    """One purchasable thing: an instance (or serverless GPU bundle) of a provider, in a region, at a price kind."""

    provider: str
    service: str
    sku: str
    region: str
    gpu: str
    gpu_count: int | None
    gpu_mem_gib: float | None
    vcpus: int | None
    ram_gib: float | None
    interconnect: str
    price_per_hour: float | None
    currency: str
    price_kind: str
    source: str
    as_of: str
    term_months: int | None
    billing: str
    notes: str
    list_price_per_hour: float | None = None
    origin: str = "shipped"  # shipped | cache | overlay
    interconnect_basis: str = ""
    countries: str = ""  # data-centre countries of a global / unstated-region row, "US;CA"

    # cached: the optimizer groups 10^4-10^5 candidates by these
    @cached_property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.provider, self.service, self.sku, self.region, self.price_kind)

    @cached_property
    def offering_id(self) -> str:
        return "/".join(self.key)

    @property
    def unusable_reason(self) -> str | None:
        """Why the optimizer may not choose this row (None when it may)."""
        if self.price_per_hour is None:
            return "no known price (spec-only row)"
        if not self.gpu:
            return "GPU model not identified in the source"
        if self.gpu not in gpu_table():
            return f"GPU '{self.gpu}' is not in the GPU table (add its datasheet row to gpuopt/data/gpus.csv)"
        if not self.gpu_count:
            return "GPU count not stated"
        return None

    @property
    def as_of_date(self) -> dt.date | None:
        return _calendar_date(self.as_of)



@dataclass(frozen=True)
class Catalog:
    offerings: tuple[Offering, ...]
    fx: FxTable
    notes: tuple[str, ...] = ()

    def select(self, residency: Residency | None = None, providers: Sequence[str] = (), gpus: Sequence[str] = (),
               price_kinds: Sequence[str] = ()) -> list[Offering]:
        gpu_set = {g.lower() for g in gpus}
        out = []
        for o in self.offerings:
            if residency is not None and not residency.allows(o.region, o.countries, o.provider):
                continue
            if providers and o.provider not in providers:
                continue
            if gpu_set and o.gpu.lower() not in gpu_set:
                continue
            if price_kinds and o.price_kind not in price_kinds:
                continue
            out.append(o)
        return out

    def price_in(self, offering: Offering, currency: str) -> float | None:
        if offering.price_per_hour is None:
            return None
        return self.fx.convert(offering.price_per_hour, offering.currency, currency)

    def on_demand_twin(self, offering: Offering) -> Offering | None:
        """The priced on-demand offering of the same provider, service, SKU and region (None if the catalog
        has none): what usage a commitment covers would cost without it."""
        key = (offering.provider, offering.service, offering.sku, offering.region)
        return next((x for x in self.offerings if (x.provider, x.service, x.sku, x.region) == key
                     and x.price_kind == "on-demand" and x.price_per_hour is not None), None)

    def on_demand_prices(self, offering: Offering, currency: str) -> tuple[float, float] | None:
        """(contracted, list) per hour of the offering's on-demand twin in `currency`: contracted after
        --discount and overlays, list the catalog's published price (contracted when an overlay added the
        row). FOCUS prices usage a commitment covers at these (ListUnitPrice, ContractedUnitPrice)."""
        twin = self.on_demand_twin(offering)
        contracted = None if twin is None else self.price_in(twin, currency)
        if twin is None or contracted is None:
            return None
        listed = contracted if twin.list_price_per_hour is None or not twin.currency else \
            self.fx.convert(twin.list_price_per_hour, twin.currency, currency)
        return contracted, listed

    @property
    def as_of(self) -> str:
        """Newest as_of date among the priced rows (the catalog's date)."""
        dates = [o.as_of_date for o in self.offerings if o.price_per_hour is not None]
        return max(d for d in dates if d is not None).isoformat()


# ---- reading and validating rows ------------------------------------------------------------------


@dataclass(frozen=True)
class RawRow:
    line: int
    values: dict[str, str]
    short: bool = False  # fewer fields than the header (a truncated line)
    extra: bool = False  # more fields than the header


def read_csv_rows(text: str, path: str = "<csv>") -> tuple[list[str], list[RawRow]]:
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = list(reader.fieldnames or [])
        rows = []
        for r in reader:
            values = {k: (v or "").strip() for k, v in r.items() if k is not None}
            rows.append(RawRow(line=reader.line_num, values=values, short=any(v is None for v in r.values()),
                               extra=None in r))
    except csv.Error as exc:
        raise InputError(f"{path}: line {reader.line_num}: not a valid CSV file ({exc})") from None
    return header, rows


def _float(value: str) -> float | None:
    return float(value) if value else None


def _int(value: str) -> int | None:
    return int(float(value)) if value else None


def parse_price(raw: str) -> float | None:
    """A finite positive price, or None (decimals.parse_decimal, and not 0)."""
    value = parse_decimal(raw)
    return value if value is not None and value > 0 else None


MAX_COUNTS = {"gpu_count": 1024, "vcpus": 65_536, "term_months": 120}
"""The largest counts a catalog row may state: an NVL72 rack is 72 GPUs and clouds sell at most a few hundred
vCPUs an instance and 5-year terms; anything past these is a typo or a hostile file."""


def row_problems(v: dict[str, str], where: str, *, overlay: bool = False, provider_answer: bool = False) -> list[str]:
    """Problems of one price row (catalog, cache, overlay or refresher output), each naming `where` and the column.

    Every entry point validates through here, so a row that reaches the solver has a finite positive price in a
    known currency, provider and price kind. `provider_answer`: the row is a provider's own (a refresh, the cache
    it wrote, a catalog diff): a GPU the GPU table does not know is kept, unplannable, and a region id regions.csv
    does not know is kept, of unknown country (a live Alibaba price file listing a region gpuopt lacks, Dubai's
    me-east-1, failed the whole refresh); both are named in the refresh's summary. A user's overlay must name
    known ones (a typo there is refused)."""
    problems: list[str] = []
    if v.get("provider") not in PROVIDERS:
        problems.append(f"{where}: column 'provider': unknown provider '{v.get('provider')}' "
                        f"(known: {', '.join(PROVIDERS)})")
    if v.get("price_kind") not in PRICE_KINDS:
        problems.append(f"{where}: column 'price_kind': unknown price kind '{v.get('price_kind')}' "
                        f"(known: {', '.join(PRICE_KINDS)})")
    price = v.get("price_per_hour", "")
    if price:
        if parse_price(price) is None:
            problems.append(f"{where}: column 'price_per_hour': expected a finite positive number (got '{price}')")
    elif overlay:
        problems.append(f"{where}: column 'price_per_hour': an overlay row needs a price")
    if (price or v.get("currency")) and v.get("currency") not in CURRENCIES:
        problems.append(f"{where}: column 'currency': unknown currency '{v.get('currency')}' "
                        f"(known: {', '.join(CURRENCIES)})")
    gpu = v.get("gpu", "")
    if gpu and gpu not in gpu_table() and not provider_answer:
        problems.append(f"{where}: column 'gpu': unknown GPU '{gpu}'")
    for col in ("gpu_count", "vcpus", "term_months"):
        raw = v.get(col, "")
        if raw:
            number = parse_decimal(raw)  # ASCII decimals (float() read `1_92` and `٨`); `8.0` is whole too
            if number is None or number <= 0 or number != int(number):
                problems.append(f"{where}: column '{col}': expected a positive whole number ('{raw}')")
                continue
            if number > MAX_COUNTS[col]:  # 10^20 GPUs passed here and ended the solve in an IndexError
                problems.append(f"{where}: column '{col}': {raw} is more than any offering has (at most "
                                f"{MAX_COUNTS[col]:,})")
    for col in ("gpu_mem_gib", "ram_gib"):
        raw = v.get(col, "")
        if raw and parse_price(raw) is None:
            problems.append(f"{where}: column '{col}': expected a finite positive number ('{raw}')")
    if v.get("interconnect") and v["interconnect"] not in LINK_KINDS:
        problems.append(f"{where}: column 'interconnect': unknown link '{v['interconnect']}' "
                        f"(known: {', '.join(LINK_KINDS)})")
    if not v.get("region") or (v.get("region") not in regions() and not provider_answer):
        problems.append(f"{where}: column 'region': unknown region '{v.get('region')}'")
    unknown_countries = [c for c in split_countries(v.get("countries", "")) if c not in countries()]
    if unknown_countries:
        problems.append(f"{where}: column 'countries': unknown country code(s) {', '.join(unknown_countries)} "
                        f"(known: {', '.join(sorted(countries()))})")
    as_of = v.get("as_of", "")
    day = _calendar_date(as_of) if as_of and not as_of.startswith("unknown") else None
    if as_of and not (as_of.startswith("unknown") or day):
        problems.append(f"{where}: column 'as_of': expected a date YYYY-MM-DD ('{as_of}')")
    elif overlay and day is not None and day > clock.latest_day():
        # a quote is dated when it was given, as `catalog refresh --as-of` requires (QA: an overlay dated 2099
        # passed validate and solve, "oldest chosen price 2099-01-01")
        problems.append(f"{where}: column 'as_of': {as_of} is after today ({clock.today().isoformat()}); a price is "
                        "dated when it was quoted")
    return problems


def _calendar_date(text: str) -> dt.date | None:
    """The date `text` starts with (YYYY-MM-DD, or YYYY-MM for the 1st), None when it names no day of the
    calendar: 2026-13-45 or 2026-02-30 matched the pattern and then failed in every plan that chose the row."""
    m = _DATE.match(text)
    if not m:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3) or 1))
    except ValueError:
        return None


def validate_rows(path: str, header: list[str], rows: list[RawRow], *, overlay: bool,
                  provider_answer: bool = False) -> list[str]:
    """Every problem, one line each, naming file, row and column."""
    problems: list[str] = []
    required = OVERLAY_MIN_COLUMNS if overlay else CATALOG_COLUMNS[:15]
    missing = [c for c in required if c not in header]
    if missing:
        return [f"{path}: missing column(s) {', '.join(missing)} (required: {', '.join(required)})"]
    unknown_cols = [c for c in header if c not in CATALOG_COLUMNS and c != "superseded_by_as_of"]
    for col in unknown_cols:
        problems.append(f"{path}: unknown column '{col}' (known: {', '.join(CATALOG_COLUMNS)})")
    # a column named twice: a CSV reader keeps the last value, silently (QA: a quote for us-east-1 was planned
    # in the second `region` column's eu-west-1)
    problems += [f"{path}: column '{col}' appears {header.count(col)} times in the header"
                 for col in dict.fromkeys(header) if header.count(col) > 1]
    seen: dict[tuple[str, ...], int] = {}
    for row in rows:
        if row.short or row.extra:
            problems.append(f"{path}: row {row.line}: {'too many' if row.extra else 'too few'} fields "
                            f"(expected {len(header)}; a truncated or misquoted line?)")
            continue
        problems.extend(row_problems(row.values, f"{path}: row {row.line}", overlay=overlay,
                                     provider_answer=provider_answer))
        key = offering_key(row.values)
        if key in seen:
            problems.append(f"{path}: row {row.line}: duplicate of row {seen[key]} (same {', '.join(OFFERING_KEY)})")
        else:
            seen[key] = row.line
    if overlay:  # the shipped catalog and refreshers write vetted identifiers; an overlay is typed by hand
        problems += formula_problems(path, ((r.line, r.values) for r in rows))
    return problems


def _offering(v: dict[str, str], origin: str) -> Offering:
    price = _float(v.get("price_per_hour", ""))
    return Offering(
        provider=v["provider"], service=v.get("service", ""), sku=v["sku"], region=v["region"],
        gpu=v.get("gpu", ""), gpu_count=_int(v.get("gpu_count", "")), gpu_mem_gib=_float(v.get("gpu_mem_gib", "")),
        vcpus=_int(v.get("vcpus", "")), ram_gib=_float(v.get("ram_gib", "")), interconnect=v.get("interconnect", ""),
        price_per_hour=price, currency=v.get("currency", ""), price_kind=v["price_kind"],
        source=v.get("source", ""), as_of=v.get("as_of", ""), term_months=_int(v.get("term_months", "")),
        billing=v.get("billing", "") or "per-hour", notes=v.get("notes", ""),
        list_price_per_hour=price if origin != "overlay" else None, origin=origin,
        interconnect_basis=v.get("interconnect_basis", ""), countries=v.get("countries", ""))


def shipped_text() -> str:
    return data_text("catalog.csv", package="gpuopt.pricing")


def read_text_file(path: Path) -> str:
    """A UTF-8 text file (with or without a byte-order mark), or one InputError line saying why not (missing, a
    directory, unreadable, binary)."""
    try:
        text = read_text_bytes(path).decode("utf-8")
    except NotText as exc:
        raise InputError(f"{path}: {exc}, not a text file") from None
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None
    except PermissionError:
        raise InputError(f"{path}: not readable (permission denied)") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file (binary?)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if "\x00" in text:
        raise InputError(f"{path}: not a text file (contains NUL bytes)")
    # Excel's "CSV UTF-8" starts the file with a byte-order mark, which made the first column '\ufeffprovider'
    return text.removeprefix("\ufeff")


_read_file = read_text_file


def load_catalog(overlays: Iterable[Path] = (), discounts: dict[str, float] | None = None,
                 fx_overrides: dict[tuple[str, str], float] | None = None, use_cache: bool = True) -> Catalog:
    _, rows = read_csv_rows(shipped_text())
    by_key: dict[tuple[str, ...], Offering] = {}
    for row in rows:
        o = _offering(row.values, "shipped")
        by_key[o.key] = o
    notes: list[str] = []
    if use_cache and cache_dir().is_dir():
        for path in sorted(cache_dir().glob("catalog-*.csv")):
            try:
                header, cached = read_csv_rows(path.read_text(encoding="utf-8"), str(path))
            except (InputError, OSError, UnicodeDecodeError) as exc:
                notes.append(f"ignored refreshed prices in {path}: {exc}")
                continue
            problems = validate_rows(str(path), header, cached, overlay=False, provider_answer=True)
            if problems:
                notes.append(f"ignored refreshed prices in {path}: {problems[0]}")
                continue
            replaced = added = kept = 0
            for row in cached:
                o = _offering(row.values, "cache")
                old = by_key.get(o.key)
                if old is not None and newer_price(old, o):
                    kept += 1
                    continue
                by_key[o.key] = o
                if old is None:
                    added += 1
                else:
                    replaced += 1
            # the newest calendar date ("unknown" sorted after every ISO date and was named instead)
            dates = sorted(d for r in cached if _calendar_date(d := r.values.get("as_of", "")))
            parts = [f"{replaced} replace the shipped snapshot"] + ([f"{added} add offerings it lacks"] if added
                                                                    else [])
            notes.append(f"refreshed rows from {path} (newest as of {dates[-1] if dates else '?'}): "
                         + "; ".join(parts) + (f"; {kept} older or undated ones do not" if kept else ""))
    notes += _uniform_prices(by_key)
    for provider, fraction in sorted((discounts or {}).items()):
        if provider not in PROVIDERS:
            raise InputError(f"discounts: unknown provider '{provider}' (known: {', '.join(PROVIDERS)})")
        if not 0 <= fraction < 1:
            raise InputError(f"discounts: {provider} discount must be a fraction in [0, 1) (got {fraction})")
        for key, o in list(by_key.items()):
            if o.provider == provider and o.price_per_hour is not None:
                by_key[key] = replace(o, price_per_hour=o.price_per_hour * (1 - fraction))
        if fraction:
            notes.append(f"{provider} prices carry a {fraction:.1%} discount")
    overlay_problems: list[str] = []
    for path in overlays:
        header, over = read_csv_rows(read_text_file(path), str(path))
        found = validate_rows(str(path), header, over, overlay=True)
        if found:
            overlay_problems.extend(found)
            continue
        for row in over:
            overlay_problems.extend(_apply_overlay(by_key, row, str(path)))
    if overlay_problems:
        raise InputError(*overlay_problems)
    offerings = tuple(sorted(by_key.values(), key=lambda o: o.key))
    return Catalog(offerings=offerings, fx=load_fx(fx_overrides), notes=tuple(notes))


UNIFORM_PRICING = ("digitalocean",)
"""Providers that price a size the same in every region (skus.csv: "DigitalOcean prices a size the same in every
region"): the newest dated price of a size is its price wherever it is sold."""


def _uniform_prices(by_key: dict[tuple[str, ...], Offering]) -> list[str]:
    """Re-price, for UNIFORM_PRICING providers, a size's rows whose price is older than the newest of that size in
    another region (QA: a 2025-08 /v2/sizes answer replayed added gpu-h100x8-640gb in nyc1 at 23.92 beside the
    2026-10 35.28 of nyc2 and tor1, and a `--region us` plan chose the stale one, 32 % cheaper). A note per size."""
    groups: dict[tuple[str, str, str, str], list[Offering]] = {}
    for o in by_key.values():
        if o.provider in UNIFORM_PRICING and o.price_per_hour is not None:
            groups.setdefault((o.provider, o.service, o.sku, o.price_kind), []).append(o)
    notes = []
    for (provider, _, sku, kind), rows in sorted(groups.items()):
        newest = max(rows, key=lambda o: (o.as_of_date is not None, o.as_of_date or dt.date.min))
        stale = [o for o in rows if newer_price(newest, o) and o.price_per_hour != newest.price_per_hour]
        for o in stale:
            by_key[o.key] = replace(o, price_per_hour=newest.price_per_hour, currency=newest.currency,
                                    list_price_per_hour=newest.list_price_per_hour,  # FOCUS ListCost, not stale
                                    as_of=newest.as_of, source=newest.source,
                                    notes=f"{provider} prices a size the same in every region: {newest.region}'s "
                                          f"{newest.as_of} price replaces this region's {o.as_of} one "
                                          f"({o.price_per_hour} {o.currency})")
        if stale:
            notes.append(f"{provider} {sku} {kind}: {', '.join(sorted(o.region for o in stale))} priced at "
                         f"{newest.region}'s newer {newest.price_per_hour} {newest.currency} ({newest.as_of}), as "
                         f"{provider} prices a size the same in every region")
    return notes


def newer_price(a: Offering, b: Offering) -> bool:
    """Whether a's price is strictly newer than b's (twins are resolved by date): an undated row never beats a
    dated one, and a priced row always beats an unpriced one."""
    if (a.price_per_hour is None) != (b.price_per_hour is None):
        return b.price_per_hour is None
    da, db = a.as_of_date, b.as_of_date
    if da is None:
        return False
    return db is None or da > db


def _apply_overlay(by_key: dict[tuple[str, ...], Offering], row: RawRow, path: str) -> list[str]:
    v = row.values
    matches = [o for o in by_key.values()
               if (o.provider, o.sku, o.region, o.price_kind) == (v["provider"], v["sku"], v["region"], v["price_kind"])
               and (not v.get("service") or o.service == v["service"])]
    source = v.get("source") or f"overlay {path} row {row.line}"
    price = parse_price(v["price_per_hour"])
    if price is None:  # validate_rows reports it; never reached for a validated row
        return [f"{path}: row {row.line}: column 'price_per_hour': expected a finite positive number"]
    if matches:
        # the overlay's quote is dated by the overlay alone: an undated one is of unknown date (docs/catalog.md),
        # not the replaced row's -- which had let it pass --max-price-age with the catalog's date in the header
        for o in matches:
            by_key[o.key] = replace(o, price_per_hour=price, currency=v["currency"], source=source,
                                    as_of=v.get("as_of") or "", origin="overlay",
                                    notes=f"overlay price; list price {o.list_price_per_hour} {o.currency}")
        return []
    template = next((o for o in by_key.values() if (o.provider, o.sku) == (v["provider"], v["sku"])), None)
    if template is None and not (v.get("gpu") and v.get("gpu_count")):
        return [f"{path}: row {row.line}: no catalog offering {v['provider']} {v['sku']}: give columns gpu and "
                "gpu_count to add it"]
    base = {c: "" for c in CATALOG_COLUMNS}
    if template is not None:
        base.update(service=template.service, gpu=template.gpu, gpu_count=str(template.gpu_count or ""),
                    gpu_mem_gib=str(template.gpu_mem_gib or ""), vcpus=str(template.vcpus or ""),
                    ram_gib=str(template.ram_gib or ""), interconnect=template.interconnect)
    base.update({k: val for k, val in v.items() if val})
    base["source"] = source
    o = _offering(base, "overlay")
    by_key[o.key] = o
    return []


def offering_record(o: Offering, catalog: Catalog, currency: str | None) -> dict[str, object]:
    """A row for JSON/CSV listings: catalog columns + the region's country and jurisdiction (+ conversion)."""
    info = region_info(o.region, o.provider)
    rec: dict[str, object] = {
        "provider": o.provider, "service": o.service, "sku": o.sku, "region": o.region,
        "country": info.country, "jurisdiction": info.jurisdiction, "gpu": o.gpu, "gpu_count": o.gpu_count,
        "gpu_mem_gib": o.gpu_mem_gib, "vcpus": o.vcpus, "ram_gib": o.ram_gib, "interconnect": o.interconnect,
        "price_per_hour": None if o.price_per_hour is None else round(float(o.price_per_hour), 6),
        "currency": o.currency, "price_kind": o.price_kind, "term_months": o.term_months, "billing": o.billing,
        "source": o.source, "as_of": o.as_of, "notes": o.notes,
        "interconnect_basis": o.interconnect_basis, "countries": o.countries,
    }
    if currency:
        converted = catalog.price_in(o, currency) if o.currency else None
        rec["converted_price_per_hour"] = None if converted is None else round(float(converted), 6)
        rec["converted_currency"] = currency
    return rec

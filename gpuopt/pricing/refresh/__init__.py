"""Refreshers: fetch current prices and write catalog rows (the pinned columns) to the user's cache folder.

One module per provider (aws, alibaba, tencent, runpod, digitalocean) turns the provider's own answer (its SDK
or public API, or a saved copy of that answer replayed with --file) into catalog rows. This module holds what
they share, so every refresher keeps the same promises:
- `as_of` is the source's own date (a price file's publicationDate, an API term's effectiveDate); only a live
  API answer without a date is dated by the fetch, and its `source` says so;
- every row is validated (`check_rows`) before anything is written, and a bad entry names the file and entry;
- a GPU the GPU table does not know is kept, under the provider's own name, and named in the summary: the
  loader marks it unplannable until its datasheet row is added to gpuopt/data/gpus.csv;
- the cache file is replaced atomically (`write_cache`: temp file in the same folder, fsync, rename), so a
  failed or interrupted refresh leaves the previous file byte for byte.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuopt.errors import GpuoptError
from gpuopt.hardware import gpu_table
from gpuopt.pricing.cache import cache_dir
from gpuopt.pricing.catalog import parse_price, read_csv_rows, read_text_file, row_problems
from gpuopt.pricing.columns import CATALOG_COLUMNS, offering_key

Row = dict[str, str]


class RefreshError(GpuoptError):
    """Refreshing failed (bad response, credentials, network, API); the previous cache is untouched."""


@dataclass
class Refreshed:
    """What one refresher produced: rows for the cache, and what the summary should say about them."""

    provider: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)


def load_json(path: Path, what: str) -> Any:
    """A saved API answer (--file): JSON, or one error line naming the file."""
    text = read_text_file(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RefreshError(f"{path}: {what} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}; "
                           "truncated?)") from None
    except RecursionError:  # found by QA: 100,000 nested brackets
        raise RefreshError(f"{path}: {what} is not an answer of the API (nested deeper than a JSON reader "
                           "goes)") from None


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (None is `null`, not NoneType)."""
    if value is None:
        return "nothing (the key is missing or null)"
    kinds = ((bool, "a boolean"), (int | float, "a number"), (str, "a string"), (list, "a list"), (dict, "an object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def expect_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RefreshError(f"{where}: expected an object, got {_json_kind(value)}")
    return value


def expect_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise RefreshError(f"{where}: expected a list, got {_json_kind(value)}")
    return value


def expect_text(value: Any, where: str) -> str:
    """An identifier a response names something by: a non-empty string (QA: a `slug: null` became a priced row
    with an empty SKU, `displayName: NaN` the SKU `1x nan`)."""
    if not isinstance(value, str) or not value.strip():
        raise RefreshError(f"{where}: expected a non-empty string, got {_json_kind(value)} {value!r}"[:300])
    return value


def optional_count(value: Any, where: str) -> str:
    """A size a response may leave out (memory, vCPUs): "" when absent, else a finite positive number's text;
    a value of another type is a bad answer, not a missing one."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise RefreshError(f"{where}: expected a positive number, got {_json_kind(value)} {value!r}"[:300])
    return f"{value:.10g}"


def price_text(value: Any, where: str) -> str:
    """A price read from a response as the catalog's text, or one error naming the entry (nan, inf, negative,
    non-numeric and booleans are not prices)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RefreshError(f"{where}: price {value!r} is not a number")
    number = parse_price(str(value))
    if number is None:
        raise RefreshError(f"{where}: price {value!r} is not a finite positive number")
    return f"{number:.10g}"


def base_row(**values: str) -> Row:
    row = {c: "" for c in CATALOG_COLUMNS}
    row.update(billing="per-hour")
    row.update(values)
    return row


def check_rows(label: str, rows: Sequence[Row]) -> list[str]:
    """Every problem of the rows a refresher produced, naming `label` (the file or API) and the entry."""
    problems: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for row in rows:
        where = f"{label}: entry {row.get('sku', '?')} {row.get('region', '?')} {row.get('price_kind', '?')}"
        problems.extend(row_problems(row, where, provider_answer=True))
        key = offering_key(row)
        if key in seen:
            problems.append(f"{where}: appears twice")
        seen.add(key)
    return problems


def unknown_gpus(rows: Iterable[Row]) -> list[str]:
    table = gpu_table()
    return sorted({r["gpu"] for r in rows if r.get("gpu") and r["gpu"] not in table})


def foreign_regions(rows: Iterable[Row]) -> list[str]:
    """The region ids of `rows` that regions.csv places for other providers only (Alibaba's ap-southeast-3 is
    Kuala Lumpur, AWS's Jakarta): their rows are of unknown country (regions.region_info)."""
    from gpuopt.pricing.regions import region_info, regions

    known = regions()
    return sorted({r["region"] for r in rows if r.get("region") in known
                   and region_info(r["region"], r.get("provider", "")).geo == "unknown"
                   and known[r["region"]].geo != "unknown"})


def unknown_regions(rows: Iterable[Row]) -> list[str]:
    """The region ids of `rows` regions.csv does not know: kept, of unknown country, until a row is added."""
    from gpuopt.pricing.regions import regions

    known = regions()
    return sorted({r["region"] for r in rows if r.get("region") and r["region"] not in known})


def cache_path(provider: str, folder: Path | None = None) -> Path:
    return (folder or cache_dir()) / f"catalog-{provider}.csv"


def rows_text(rows: Iterable[Row]) -> str:
    ordered = sorted(rows, key=lambda r: tuple(r.get(c, "") for c in ("service", "sku", "region", "price_kind")))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CATALOG_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(ordered)
    return out.getvalue()


def write_cache(provider: str, rows: Iterable[Row], folder: Path | None = None) -> Path:
    """Write rows atomically to <cache>/catalog-<provider>.csv (never into the package): the text goes to a temp
    file in the same folder, is flushed to disk, then renamed over the target, so readers see the old file or
    the new one, never half of either."""
    return write_atomic(cache_path(provider, folder), rows_text(rows))


def write_atomic(target: Path, text: str) -> Path:
    """Write `text` to `target` atomically, for every file a refresh writes into the cache (catalog rows, FX
    rates): a temp file in the same folder, flushed to disk, then renamed over the target; on any failure
    the temp file is removed and the target is left exactly as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=target.suffix, dir=target.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read_rows(path: Path) -> list[Row]:
    """Rows of a catalog CSV (a cache file or the shipped catalog), for the change summary and `catalog diff`."""
    _, rows = read_csv_rows(read_text_file(path), str(path))
    return [r.values for r in rows]


@dataclass(frozen=True)
class Change:
    kind: str  # new | removed | changed | kept (left the cache, still shipped)
    key: tuple[str, ...]
    old: str = ""
    new: str = ""
    percent: float | None = None

    def line(self) -> str:
        name = "/".join(self.key)
        if self.kind == "changed":
            pct = "" if self.percent is None else f" ({self.percent:+.1f} %)"
            return f"changed {name}: {self.old} -> {self.new}{pct}"
        return f"{self.kind} {name}: {self.new or self.old}"


def updated(previous: Sequence[Row], fresh: Sequence[Row]) -> list[Row]:
    """`previous` with the offerings `fresh` prices replaced by its rows: what an answer that prices a few
    offerings (a Tencent inquiry: one SKU, zone and charge) makes of a cache that holds more."""
    priced = {offering_key(r) for r in fresh}
    return [r for r in previous if offering_key(r) not in priced] + list(fresh)


def _price_label(row: Row) -> str:
    if not row.get("price_per_hour"):
        return "unpriced"
    return f"{row['price_per_hour']} {row.get('currency', '')}".strip()


def _gpus(row: Row) -> int | None:
    text = (row.get("gpu_count") or "").strip()
    return int(text) if text.isdigit() else None


def compare(old: Sequence[Row], new: Sequence[Row]) -> list[Change]:
    """New, removed and changed offerings (by provider, service, sku, region, price kind), in key order; a
    change is of the price or of the GPUs the instance has (then the percent is per GPU)."""
    before = {offering_key(r): r for r in old}
    after = {offering_key(r): r for r in new}
    changes: list[Change] = []
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if a is None and b is not None:
            changes.append(Change("new", key, new=_price_label(b)))
        elif b is None and a is not None:
            changes.append(Change("removed", key, old=_price_label(a)))
        elif a is not None and b is not None:
            # the GPUs an instance has count too: the same price for twice the GPUs halves the price per GPU
            gpus = (_gpus(a), _gpus(b))
            recount = gpus[0] != gpus[1]
            if _price_label(a) == _price_label(b) and not recount:
                continue
            pa, pb = parse_price(a.get("price_per_hour", "")), parse_price(b.get("price_per_hour", ""))
            same_currency = a.get("currency") == b.get("currency")
            pct = (pb / (gpus[1] or 1)) / (pa / (gpus[0] or 1)) * 100 - 100 if pa and pb and same_currency else None
            old_label, new_label = _price_label(a), _price_label(b)
            if recount:
                old_label = f"{old_label} for {gpus[0] or '?'} GPUs"
                new_label = f"{new_label} for {gpus[1] or '?'} GPUs"
            changes.append(Change("changed", key, old=old_label, new=new_label, percent=pct))
    return changes


def summary_lines(provider: str, old: Sequence[Row], new: Sequence[Row], against: str,
                  shipped: Sequence[Row] = ()) -> list[str]:
    """What a refresh changed against `against` (the previous cache file, or the shipped snapshot on the first
    refresh). A row the answer does not mention leaves the cache, but the catalog still lists it wherever the
    shipped snapshot has it (the cache replaces shipped rows key by key): that one is `kept` at its shipped
    price, not `removed` -- 72 RunPod rows were said removed and went on being planned."""
    in_shipped = {offering_key(r) for r in shipped}
    changes = [replace(c, kind="kept") if c.kind == "removed" and c.key in in_shipped else c
               for c in compare(old, new)]
    counts = {k: sum(1 for c in changes if c.kind == k) for k in ("new", "kept", "removed", "changed")}
    kept = f"{counts['kept']} kept (not in the answer: their shipped price stays), " if counts["kept"] else ""
    head = (f"{provider}: {len(new)} rows against {against}: {counts['new']} new, {kept}{counts['removed']} "
            f"removed, {counts['changed']} changed, {len(new) - counts['new'] - counts['changed']} unchanged")
    return [head, *(f"  {c.line()}" for c in changes)]

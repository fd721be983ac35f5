"""Import researched prices from ../shared/data into the shipped price catalog (gpuopt/pricing/data/catalog.csv,
catalog_history.csv, regions.csv). Run from the repository root:

    python -m tools.import_catalog            # report what would be added, changed and kept
    python -m tools.import_catalog --write    # merge

The package files are the source of truth; the import is merged in by key (tools/merge.py): offerings by
(provider, service, sku, region, price kind), history rows by all their columns, regions by id. A row only in
the package (added by hand, or by `gpuopt catalog refresh` into the package) is kept; an offering whose
package price is newer (as_of) than the imported one keeps the package's row; an offering whose price the
import updates moves its old row to the history, superseded by the new as_of.

Every row keeps its source and as_of. What this script decides (and the notes column says so):
- region strings are normalised to ids ("cn-* (mainland)" -> cn-mainland, an unspecified mainland region;
  "ap-guangzhou-3 (intl site)" -> ap-guangzhou-3, the zone the international site prices; no region -> unknown);
- commitment kinds are folded into the catalog's price kinds: Standard RIs without upfront become
  reserved-1y / reserved-3y, compute savings plans without upfront savings-plan (1 y) / savings-plan-3y;
  the other payment options and convertible RIs go to the history file;
- RunPod and Modal bill per GPU and scale linearly (catalog_notes.md s1d; Modal: "metered per GPU", up to 8):
  2-, 4- and 8-GPU rows are derived from the 1-GPU price and marked DERIVED;
- where one offering has several dated prices, the newest is the price and the others are history;
- an offering the package retired (its rows are in the history and none is in the catalog, e.g. an undated
  twin of a dated offering) is not added back;
- a researched row without a region (`unknown`) is not imported when the package moved that offering
  (provider, service, SKU, price kind) to a stated region and keeps no `unknown` row of it: the package learned
  the region later (e.g. from a /v2/sizes answer), and an `unknown` twin would be a second row of one offering;
- GPU names not in the GPU table (ambiguous "H100-80GB", P4/P40) are left blank, with the original in notes.
Rows that are rules rather than prices (discount ladders, savings-plan discounts, unspecified commitments)
and marketplace offers from providers outside the seven are not shipped.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from gpuopt.pricing.columns import CATALOG_COLUMNS, HISTORY_COLUMNS, OFFERING_KEY
from gpuopt.vocabulary import PROVIDERS
from tools.cli import arguments, finish
from tools.merge import Merge, Row, merge_rows, read_csv

PACKAGE_DERIVED = ("interconnect_basis", "countries")
"""Catalog columns the package works out (docs/catalog.md, "Interconnect" and regions); an import keeps them and
fills the basis of an offering it adds, whose interconnect is the one its source states ("source")."""
REGION_COLUMNS = ["region", "country", "jurisdiction", "geo", "providers", "source"]
HISTORY_ORDER = ("provider", "service", "sku", "region", "price_kind", "as_of")


def norm_region(region: str, country: str) -> tuple[str, str, str]:
    """(region id, country, note) for a raw region string."""
    raw = region.strip()
    if raw.startswith("cn-* (unverified)"):
        return "cn-mainland", "CN", "region: mainland China, specific regions not verified"
    if raw.startswith(("cn-mainland", "cn-*", "cn (unspecified)", "cn (region not stated")):
        return "cn-mainland", "CN", f"region: mainland China, not specified ({raw})"
    if raw.startswith("ap-guangzhou-3"):
        return "ap-guangzhou-3", "CN", "region: Guangzhou zone 3, international-site price book"
    if raw == "" or raw.startswith("(") or raw.startswith("unverified"):
        return "unknown", "", f"region: not stated ({raw or 'blank'})"
    if raw in ("cn-north-1", "cn-northwest-1"):
        return raw, "CN", ""
    if raw.startswith(("us-",)) and not country:
        return raw, "US", ""
    return raw, country.strip(), ""


def norm_gpu(name: str, gpus: set[str]) -> tuple[str, str]:
    name = name.strip()
    if name in gpus or name == "":
        return name, ""
    return "", f"gpu: source names '{name}', which is not a distinct GPU in the GPU table"


COMMIT_KINDS = {
    "reserved-1y-no-upfront": ("reserved-1y", 12),
    "reserved-3y-no-upfront": ("reserved-3y", 36),
    "savings-plan-1y-no-upfront": ("savings-plan", 12),
    "savings-plan-3y-no-upfront": ("savings-plan-3y", 36),
    "capacity-block": ("capacity-block", None),
    "on-demand": ("on-demand", None),
    "subscription-monthly": ("subscription-monthly", 1),
}
HISTORY_ONLY = re.compile(r"^(reserved|reserved-conv|savings-plan)-\d+y-(partial|all)-upfront$|^reserved-conv-")
NOT_SHIPPED = {"discount-ladder", "savings-plan-discount", "commit-unspecified", "commit-multi-month",
               "marketplace-per-gpu", "serverless-active", "serverless-flex"}


def empty_row() -> dict[str, str]:
    return {c: "" for c in HISTORY_COLUMNS}


def load_specs(shared: Path) -> dict[tuple[str, str], dict[str, str]]:
    specs: dict[tuple[str, str], dict[str, str]] = {}
    with open(shared / "skus.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            specs.setdefault((r["provider"], r["sku"]), r)
    return specs


def do_regions(shared: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    with open(shared / "skus.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["provider"] == "digitalocean" and r["region"].strip():
                out[r["sku"]].append(r["region"].strip())
    return out


def rows_from(shared: Path, path: str, order: int, gpus: set[str]) -> list[dict[str, str]]:
    specs = load_specs(shared)
    dor = do_regions(shared)
    out = []
    with open(shared / path, encoding="utf-8") as fh:
        for line, r in enumerate(csv.DictReader(fh), start=2):
            provider = r["provider"].strip()
            kind = r["price_kind"].strip()
            if provider not in PROVIDERS or kind in NOT_SHIPPED:
                continue
            notes = [r.get("notes", "").strip()]
            term = r.get("term_months", "").strip()
            price = (r.get("price_per_hour") or r.get("effective_price_per_hour") or "").strip()
            history_only = False
            if path == "commit_prices.csv":
                if kind in COMMIT_KINDS:
                    kind, months = COMMIT_KINDS[kind]
                    term = term or (str(months) if months else "")
                else:
                    if not HISTORY_ONLY.match(kind):
                        raise SystemExit(f"{path}:{line}: unexpected price kind {kind}")
                    notes.append(f"payment option {r['price_kind']} (not the catalog's default option)")
                    history_only = True
                if r.get("upfront", "").strip():
                    notes.append(f"upfront {r['upfront']} {r['currency']}")
            if kind == "subscription-monthly":
                term = term or "1"
            service = {"cvm-gpu": "cvm", "ec2-capacity-block": "ec2"}.get(r["service"].strip(), r["service"].strip())
            if service == "pod-community" and kind == "on-demand":
                kind = "community"
            spec = specs.get((provider, r["sku"].strip()), {})
            regions = [r["region"]]
            if provider == "digitalocean" and not r["region"].strip().startswith(("nyc", "tor", "sfo", "ams", "atl")):
                regions = dor.get(r["sku"].strip(), [r["region"]])
                if regions != [r["region"]]:
                    notes.append("region: DigitalOcean prices a size the same in every region; regions from skus.csv")
            for raw_region in regions:
                own_country = r.get("country", "") if raw_region == r["region"] else ""
                region, country, rnote = norm_region(raw_region, own_country or "")
                gpu, gnote = norm_gpu(r.get("gpu_model", "") or spec.get("gpu_model", ""), gpus)
                row = empty_row()
                row.update(
                    provider=provider, service=service, sku=r["sku"].strip(), region=region, gpu=gpu,
                    gpu_count=(r.get("gpu_count") or spec.get("gpu_count") or "").strip(),
                    gpu_mem_gib=(r.get("gpu_mem_gib_each") or spec.get("gpu_mem_gib_each") or "").strip(),
                    vcpus=(r.get("vcpus") or spec.get("vcpus") or "").strip(),
                    ram_gib=(r.get("ram_gib") or spec.get("ram_gib") or "").strip(),
                    interconnect=(r.get("interconnect") or spec.get("interconnect") or "").strip(),
                    price_per_hour=price, currency=r["currency"].strip() if price else r["currency"].strip(),
                    price_kind=kind, term_months=term,
                    billing=(r.get("billing_granularity") or ("per-second" if provider in ("replicate", "modal")
                                                              else "per-hour")).strip(),
                    source=r["source"].strip(), as_of=r["as_of"].strip() or "unknown",
                    notes="; ".join(n for n in [*notes, rnote, gnote] if n),
                )
                if row["gpu_count"] and float(row["gpu_count"]) < 1:
                    row["notes"] = "; ".join(n for n in (row["notes"], f"fractional vGPU share "
                                                        f"{row['gpu_count']} of a GPU: vLLM cannot use it") if n)
                    row["gpu_count"] = ""
                if not re.match(r"^\d{4}-\d{2}", row["as_of"]) and not row["as_of"].startswith("unknown"):
                    row["as_of"] = f"unknown ({row['as_of']})"
                if row["interconnect"] not in ("nvlink", "pcie"):
                    row["interconnect"] = ""
                row["_order"] = str(order * 100000 + line)
                row["_history_only"] = "1" if history_only else ""
                row["_country"] = country
                out.append(row)
    return out


def derive_per_gpu(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """RunPod and Modal multi-GPU rows from their per-GPU price."""
    derived = []
    for r in rows:
        if r["provider"] not in ("runpod", "modal") or r["gpu_count"] != "1" or not r["price_per_hour"]:
            continue
        for n in (2, 4, 8):
            d = dict(r)
            sku = r["sku"]
            d["sku"] = re.sub(r"^1x", f"{n}x", sku) if sku.startswith("1x") else f"{sku} x{n}"
            if any(x["provider"] == r["provider"] and x["service"] == r["service"] and x["sku"] == d["sku"]
                   for x in rows):
                continue
            d["gpu_count"] = str(n)
            d["price_per_hour"] = f"{float(r['price_per_hour']) * n:.6g}"
            if r["vcpus"]:
                d["vcpus"] = ""
                d["ram_gib"] = ""
            d["notes"] = (f"DERIVED: {n} x the 1-GPU price {r['price_per_hour']} ({r['provider']} bills per GPU and "
                          "scales linearly, catalog_notes.md s1d / Modal pricing 'metered per GPU'); "
                          "interconnect between the GPUs not stated")
            d["interconnect"] = ""
            derived.append(d)
    return derived


def date_key(as_of: str) -> str:
    m = re.match(r"(\d{4}-\d{2}(-\d{2})?)", as_of)
    return m.group(1) if m else "0000"


# Where each country sits for residency selectors: jurisdiction (EU members share "EU"; mainland China is
# "CN", Hong Kong its own) and geo (the `apac`, `us`, `eu` style selectors).
JURISDICTION = {"DE": "EU", "SE": "EU", "IT": "EU", "ES": "EU", "IE": "EU", "FR": "EU"}
GEO = {"US": "americas", "CA": "americas", "DE": "europe", "SE": "europe", "IT": "europe", "ES": "europe",
       "IE": "europe", "FR": "europe", "GB": "europe", "CN": "apac", "HK": "apac", "JP": "apac", "KR": "apac",
       "SG": "apac", "IN": "apac", "AU": "apac", "ID": "apac", "AE": "middle-east", "BH": "middle-east"}


def shared_tables(shared: Path, gpus: set[str]) -> tuple[list[Row], list[Row], list[Row]]:
    """(catalog, history, regions) rows built from the shared data alone, as the package files shape them."""
    rows = rows_from(shared, "skus.csv", 1, gpus) + rows_from(shared, "cn_prices.csv", 2, gpus)
    rows += rows_from(shared, "serverless_prices.csv", 3, gpus) + rows_from(shared, "commit_prices.csv", 4, gpus)
    rows += derive_per_gpu(rows)
    groups: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    history: list[dict[str, str]] = []
    for r in rows:
        if r["_history_only"]:
            history.append(r)
            continue
        groups[(r["provider"], r["service"], r["sku"], r["region"], r["price_kind"])].append(r)
    catalog = []
    for members in groups.values():
        members.sort(key=lambda r: (date_key(r["as_of"]), 1 if r["price_per_hour"] else 0, -int(r["_order"])),
                     reverse=True)
        best = dict(members[0])
        # specs the newest row lacks may come from an older row of the same offering
        for other in members[1:]:
            for col in ("gpu", "gpu_count", "gpu_mem_gib", "vcpus", "ram_gib", "interconnect"):
                if not best[col] and other[col]:
                    best[col] = other[col]
        catalog.append(best)
        for other in members[1:]:
            if other["price_per_hour"]:
                h = dict(other)
                h["superseded_by_as_of"] = best["as_of"]
                history.append(h)
    regions: dict[str, set[str]] = defaultdict(set)
    owners: dict[str, set[str]] = defaultdict(set)  # whose region id it is: providers reuse ids for other places
    for r in catalog + history:
        owners[r["region"]].add(r["provider"])
        if r["_country"]:
            regions[r["region"]].add(r["_country"])
        else:
            regions.setdefault(r["region"], set())
    conflicts = {k: v for k, v in regions.items() if len(v) > 1}
    if conflicts:
        raise SystemExit(f"regions with several countries: {conflicts}")
    region_rows = []
    for region in sorted(regions):
        country = next(iter(regions[region]), "")
        # placeholders (anywhere, unstated, unspecified mainland region) are any provider's
        providers = "" if region in ("global", "unknown", "cn-mainland") else ";".join(sorted(owners[region]))
        if region == "global":
            row = [region, "", "", "global", providers, "serverless platforms place work in any of their regions "
                   "(serverless_prices.csv notes: no region choice, no mainland-China region)"]
        elif not country:
            row = [region, "", "", "unknown", providers, "the source row states no region"]
        else:
            row = [region, country, JURISDICTION.get(country, country), GEO[country], providers,
                   "country column of the catalog rows in ../shared/data (skus.csv, cn_prices.csv)"]
        region_rows.append(dict(zip(REGION_COLUMNS, row, strict=True)))
    return ([{c: r[c] for c in CATALOG_COLUMNS} for r in catalog],
            [{c: r[c] for c in HISTORY_COLUMNS} for r in history], region_rows)


def without_resolved_regions(imported: list[Row], package: list[Row]) -> list[Row]:
    """The imported rows less those of region `unknown` that the package moved to a stated region (it sells the
    offering in a stated region and has no `unknown` row of it left)."""
    def offering(r: Row) -> tuple[str, str, str, str]:
        return r["provider"], r["service"], r["sku"], r["price_kind"]

    placed = {offering(r) for r in package if r.get("region") not in ("", "unknown")} - \
        {offering(r) for r in package if r.get("region") == "unknown"}
    return [r for r in imported
            if r["region"] != "unknown" or offering(r) not in placed]


def without_retired(imported: list[Row], package: list[Row], history: list[Row]) -> list[Row]:
    """The imported rows less the offerings the package retired: in its history, not in its catalog."""
    def key(r: Row) -> tuple[str, ...]:
        return tuple(r.get(c, "") for c in OFFERING_KEY)

    retired = {key(r) for r in history} - {key(r) for r in package}
    return [r for r in imported if key(r) not in retired]


def _package_is_newer(package: Row, imported: Row) -> bool:
    """An offering's package price dated after the imported one (a hand edit or a refresh) is kept."""
    return date_key(package.get("as_of", "")) > date_key(imported.get("as_of", ""))


def merge_catalog(package: Path, shared: Path) -> list[Merge]:
    """The three merges (catalog, history, regions), not written. Offerings whose price the import changes
    move their old row to the history (superseded by the new row's as_of), so no price is lost."""
    data = package / "pricing" / "data"
    _, gpu_rows = read_csv(package / "data" / "gpus.csv")
    catalog, history, regions = shared_tables(shared, {r["gpu"] for r in gpu_rows})
    history_columns, history_rows = read_csv(data / "catalog_history.csv")
    columns, rows = read_csv(data / "catalog.csv")
    catalog = without_retired(without_resolved_regions(catalog, rows), rows, history_rows)
    offerings = merge_rows("gpuopt/pricing/data/catalog.csv", columns or CATALOG_COLUMNS, rows, catalog, OFFERING_KEY,
                           keep_package=_package_is_newer)
    for r in offerings.rows:  # an added offering's interconnect is the one its source states
        if r["interconnect"] and not r.get("interconnect_basis"):
            r["interconnect_basis"] = "source"
    by_key = {tuple(r[c] for c in OFFERING_KEY): r for r in offerings.rows}
    for old in offerings.replaced:
        new = by_key[tuple(old[c] for c in OFFERING_KEY)]
        if (old["price_per_hour"], old["currency"], old["as_of"]) != (new["price_per_hour"], new["currency"],
                                                                      new["as_of"]) and old["price_per_hour"]:
            history.append({**old, "superseded_by_as_of": new["as_of"]})
    history_columns = history_columns or list(HISTORY_COLUMNS)
    # one past price is one row: what superseded it (which the import works out again from the current prices)
    # and the package's derived columns (why the interconnect is what it is, data-centre countries) are not part
    # of what identifies it, and the copy that has the derived columns is kept
    identity = [c for c in history_columns if c not in (*PACKAGE_DERIVED, "superseded_by_as_of")]
    unique: dict[tuple[str, ...], Row] = {}
    for r in sorted(history, key=lambda r: sum(bool(r.get(c)) for c in PACKAGE_DERIVED)):
        unique[tuple(r.get(c, "") for c in identity)] = r
    past = merge_rows("gpuopt/pricing/data/catalog_history.csv", history_columns, history_rows, list(unique.values()),
                      identity)
    columns, rows = read_csv(data / "regions.csv")
    places = merge_rows("gpuopt/pricing/data/regions.csv", columns or REGION_COLUMNS, rows, regions, ("region",))
    offerings.rows.sort(key=lambda r: tuple(r[c] for c in OFFERING_KEY))
    past.rows.sort(key=lambda r: tuple(r[c] for c in HISTORY_ORDER))
    places.rows.sort(key=lambda r: r["region"])
    return [offerings, past, places]


def main(argv: Sequence[str] | None = None) -> list[Merge]:
    args = arguments(__doc__, argv)
    merges = merge_catalog(args.package, args.shared)
    finish(merges, args)
    return merges


if __name__ == "__main__":
    main()

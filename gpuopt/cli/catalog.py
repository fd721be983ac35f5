"""`gpuopt catalog list|show|validate|refresh`: the price catalog."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuopt.cli.options import GIVEN, F, SafePath
from gpuopt.cli.terminal import say
from gpuopt.decimals import parse_decimal
from gpuopt.errors import InputError
from gpuopt.pricing.catalog import (
    Catalog,
    Offering,
    load_catalog,
    offering_record,
    read_csv_rows,
    read_text_file,
    validate_rows,
)
from gpuopt.pricing.columns import CURRENCIES, PRICE_KINDS, PROVIDERS
from gpuopt.pricing.fx import parse_fx_overrides
from gpuopt.pricing.regions import Residency

if TYPE_CHECKING:
    from rich.console import Console


def catalog_options(func: F) -> F:
    """Options every command that reads prices shares."""
    func = click.option("--catalog", "overlays", multiple=True, type=SafePath(path_type=Path), metavar="CSV",
                        help="Overlay CSV of negotiated prices (repeatable).")(func)
    func = click.option("--discount", "discounts", multiple=True, metavar="PROVIDER=FRACTION",
                        help="Per-provider discount on list prices, e.g. aws=0.1 (repeatable).")(func)
    func = click.option("--fx-rate", "fx_rates", multiple=True, metavar="BASE:QUOTE=RATE",
                        help="Override an FX rate, e.g. USD:CNY=7.1.")(func)
    return func


def parse_discounts(items: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    problems = []
    for item in items:
        try:
            provider, value = item.split("=", 1)
            fraction = parse_decimal(value)  # ASCII decimals, as every price (float() read `.0_5` and `٠.٥`)
            if fraction is None:
                raise ValueError(value)
        except ValueError:
            problems.append(f"--discount '{item}': expected PROVIDER=FRACTION, a fraction in [0, 1) such as aws=0.1")
            continue
        name = provider.strip()
        if name in out:  # as --fx-rate refuses two rates for one pair (QA: the last one won silently)
            problems.append(f"--discount {name}: given twice ({out[name]:g} and {fraction:g}); give one")
        out[name] = fraction
    if problems:
        raise InputError(*problems)
    return out


def currency_flag(currency: str | None) -> str | None:
    """`catalog list/show --currency`: upper-cased, None when left out; an empty value is refused (it was read as
    no flag at all)."""
    if currency is not None and not currency.strip():
        raise InputError(f"--currency: empty (known: {', '.join(CURRENCIES)}; leave the flag out for none)")
    return currency.upper() if currency else None


def open_catalog(overlays: tuple[Path, ...], discounts: tuple[str, ...], fx_rates: tuple[str, ...],
                 extra_discounts: dict[str, float] | None = None) -> Catalog:
    fx = parse_fx_overrides(fx_rates)
    merged = {**(extra_discounts or {}), **parse_discounts(discounts)}
    catalog = load_catalog(overlays=overlays, discounts=merged, fx_overrides=fx)
    for note in catalog.notes:
        say("note", note)
    return catalog


def check_names(providers: tuple[str, ...], gpus: tuple[str, ...], currency: str | None) -> None:
    from gpuopt.errors import UnknownNameError
    from gpuopt.hardware import get_gpu

    problems: list[str] = []
    for p in providers:
        if p not in PROVIDERS:
            problems.extend(UnknownNameError("provider", p, PROVIDERS).problems)
    for g in gpus:
        try:
            get_gpu(g)
        except InputError as exc:
            problems.extend(exc.problems)
    if currency and currency not in CURRENCIES:
        problems.append(f"unknown currency '{currency}' (known: {', '.join(CURRENCIES)})")
    if problems:
        raise InputError(*problems)


@click.group()
def catalog() -> None:
    """The price catalog: shipped snapshot, refreshed cache, your overlays."""


@catalog.command("list")
@click.option("--region", "region", type=GIVEN, default="global", show_default=True, metavar="SEL",
              help="Residency selector: cn, global, us, eu, apac, a region id, or a comma list.")
@click.option("--provider", "providers", multiple=True, metavar="P", help="Only these providers (repeatable).")
@click.option("--gpu", "gpus", multiple=True, metavar="G", help="Only these GPUs (repeatable).")
@click.option("--price-kind", type=click.Choice(PRICE_KINDS), help="Only this price kind.")
@click.option("--currency", type=str, help="Also show prices converted to USD or CNY.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@catalog_options
def list_catalog(region: str, providers: tuple[str, ...], gpus: tuple[str, ...], price_kind: str | None,
                 currency: str | None, fmt: str, overlays: tuple[Path, ...], discounts: tuple[str, ...],
                 fx_rates: tuple[str, ...]) -> None:
    """Offerings allowed by the filters, in a stable order."""
    currency = currency_flag(currency)
    check_names(providers, gpus, currency)
    residency = Residency(region)
    cat = open_catalog(overlays, discounts, fx_rates)
    from gpuopt.hardware import get_gpu

    gpu_names = tuple(get_gpu(g).gpu for g in gpus)
    rows = cat.select(residency, providers, gpu_names, (price_kind,) if price_kind else ())
    records = [offering_record(o, cat, currency) for o in rows]
    if fmt == "json":
        click.echo(json.dumps(records, indent=2, ensure_ascii=False))
    elif fmt == "csv":
        import pandas as pd

        from gpuopt.reports.formatting import csv_cell

        # an overlay's free-text cells (source, notes) reach a spreadsheet: neutralised like every export
        frame = pd.DataFrame.from_records([{k: csv_cell(v) for k, v in r.items()} for r in records])
        click.echo(frame.to_csv(index=False, lineterminator="\n"), nl=False)
    else:
        _print_table(rows, cat, currency)
    click.echo(f"{len(rows)} offerings ({sum(1 for o in rows if o.price_per_hour is not None)} priced); "
               f"FX {cat.fx.describe()}", err=True)


def _print_table(rows: list[Offering], cat: Catalog, currency: str | None) -> None:
    """A plain aligned table. Written by hand rather than with rich.Table: rich measured every cell of the
    ~1,500 rows twice and took about 6 s; this takes milliseconds (benchmarks/catalog_speed.py)."""
    header = ("provider", "service", "sku", "region", "gpu", "n", "price/h", "kind", "as_of")
    right = {5, 6}
    lines: list[tuple[str, ...]] = []
    for o in rows:
        if o.price_per_hour is None:
            price = "-"
        elif currency:
            price = f"{cat.price_in(o, currency):,.4f} {currency}"
        else:
            price = f"{o.price_per_hour:,.4f} {o.currency}"
        lines.append((o.provider, o.service, o.sku, o.region, o.gpu or "?", str(o.gpu_count or "?"), price,
                      o.price_kind, o.as_of))
    widths = [max([len(header[i]), *(len(line[i]) for line in lines)]) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                                 strict=True))).rstrip()

    out = [fmt(header), "  ".join("-" * w for w in widths), *(fmt(line) for line in lines)]
    click.echo("\n".join(out))


@catalog.command("show")
@click.argument("sku")
@click.option("--currency", type=str)
@catalog_options
def show(sku: str, currency: str | None, overlays: tuple[Path, ...], discounts: tuple[str, ...],
         fx_rates: tuple[str, ...]) -> None:
    """Every row of one SKU (all regions and price kinds), as JSON."""
    currency = currency_flag(currency)
    check_names((), (), currency)
    cat = open_catalog(overlays, discounts, fx_rates)
    rows = [o for o in cat.offerings if o.sku.lower() == sku.lower()]
    if not rows:
        from gpuopt.errors import UnknownNameError

        raise UnknownNameError("SKU", sku, sorted({o.sku for o in cat.offerings}))
    click.echo(json.dumps([offering_record(o, cat, currency) for o in rows], indent=2, ensure_ascii=False))


@catalog.command("validate")
@click.argument("file", type=SafePath(path_type=Path))
@click.option("--overlay", is_flag=True, help="Validate as an overlay (a subset of the columns is enough).")
def validate(file: Path, overlay: bool) -> None:
    """Check a catalog or overlay CSV: schema, duplicates, positive prices, known GPUs and regions."""
    header, rows = read_csv_rows(read_text_file(file), str(file))
    problems = validate_rows(str(file), header, rows, overlay=overlay)
    if overlay and not problems:
        # what only applying it shows (a new SKU without gpu and gpu_count): `solve --catalog` refused a file
        # `validate --overlay` had called valid (QA)
        from gpuopt.pricing.catalog import load_catalog

        try:
            load_catalog(overlays=[file])  # with the refreshed cache, as solve reads overlays
        except InputError as exc:
            problems = list(exc.problems)
    if problems:
        raise InputError(*problems)
    click.echo(f"{file}: {len(rows)} rows, valid")


REFRESHABLE = ("aws", "alibaba", "pai-eas", "tencent", "ti-one", "runpod", "digitalocean")
# a refresh target that is one service of a provider: its own cache file, so refreshing it never drops the
# provider's other rows (catalog-pai-eas.csv next to catalog-alibaba.csv)
SERVICE_TARGETS = {"pai-eas": ("alibaba", "pai-eas"), "ti-one": ("tencent", "ti-one")}
NO_PRICE_API = {
    "modal": "Modal publishes no price API or versioned price document (modal.com/pricing is a web page)",
    "replicate": "Replicate publishes no price API or versioned price document (replicate.com/pricing is a web page)",
}


@catalog.command("refresh")
@click.argument("targets", nargs=-1, required=True, metavar="all|fx|PROVIDER...")
@click.option("--file", "file", type=SafePath(path_type=Path),
              help="Replay a saved answer instead of asking the provider (one provider at a time).")
@click.option("--url", help="alibaba: URL of the price file (default: found on the price page).")
@click.option("--region", "regions", multiple=True, metavar="R",
              help="aws/tencent/ti-one/pai-eas: region to price (repeatable); for a replayed spot history, "
                   "TI-ONE price or PAI-EAS discount answer, its region.")
@click.option("--as-of", "as_of", metavar="YYYY-MM-DD",
              help="Date of a replayed answer that carries none (RunPod, DigitalOcean, Tencent, TI-ONE).")
@click.option("--service", type=click.Choice(["ec2", "sagemaker"]), default="ec2", show_default=True,
              help="aws --file: which service the saved get_products page is from.")
@click.option("--sku", help="tencent --file: the instance type an InquiryPriceRunInstances answer prices.")
@click.option("--zone", help="tencent --file: the zone an InquiryPriceRunInstances answer prices.")
@click.option("--charge", type=click.Choice(["POSTPAID_BY_HOUR", "PREPAID"]), default="POSTPAID_BY_HOUR",
              show_default=True, help="tencent --file: charge type of an InquiryPriceRunInstances answer.")
@click.option("--currency", type=click.Choice(["CNY", "USD"]), default=None,
              help="tencent: CNY (China site, default) or USD (international site).")
def refresh(targets: tuple[str, ...], file: Path | None, url: str | None, regions: tuple[str, ...],
            as_of: str | None, service: str, sku: str | None, zone: str | None, charge: str,
            currency: str | None) -> None:
    """Fetch current prices into your cache folder ($GPUOPT_CACHE_DIR; the shipped snapshot is never modified).

    Each provider's rows are validated before its cache file is replaced (atomically); a summary of new,
    removed and changed offerings goes to stdout."""
    from gpuopt.clock import iso_date, latest_day, today
    from gpuopt.pricing.refresh import RefreshError

    wanted = _refresh_targets(targets)
    from gpuopt.pricing.regions import regions as region_table

    unknown_regions = [r for r in regions if r not in region_table()]
    if unknown_regions:
        from gpuopt.errors import UnknownNameError

        raise InputError(*(p for r in unknown_regions
                           for p in UnknownNameError("--region", r, sorted(region_table())).problems))
    if file is not None and len(wanted) != 1:
        raise InputError(f"--file replays one answer: name exactly one provider (got {', '.join(wanted)})")
    if as_of is not None and not iso_date(as_of):
        raise InputError(f"--as-of '{as_of}': expected a date YYYY-MM-DD")
    if as_of is not None and as_of > latest_day().isoformat():
        raise InputError(f"--as-of {as_of}: after today ({today().isoformat()}); a price is dated when it was quoted")
    failures: list[str] = []
    for target in wanted:
        if target in NO_PRICE_API:
            message = f"{target}: {NO_PRICE_API[target]}; overlay its prices with --catalog (docs/catalog.md)"
            if "all" in targets:
                say("note", message)
                continue
            raise InputError(message)
        try:
            if target == "fx":
                _refresh_fx(file)
            else:
                _refresh_provider(target, file=file, url=url, regions=regions, as_of=as_of, service=service,
                                  sku=sku, zone=zone, charge=charge, currency=currency)
        except RefreshError as exc:
            # one line per problem; that a failed refresh writes nothing is the rule (docs/catalog.md), not a
            # problem of its own (it was a second `error:` line after a bad row's)
            failures.extend(f"refresh {target}: {p}" for p in exc.problems)
    if failures:
        raise InputError(*failures)



def _refresh_targets(targets: tuple[str, ...]) -> list[str]:
    known = ("all", "fx", *REFRESHABLE, *NO_PRICE_API)
    unknown = [t for t in targets if t not in known]
    if unknown:
        from gpuopt.errors import UnknownNameError

        raise InputError(*(p for t in unknown for p in UnknownNameError("refresh target", t, known).problems))
    if "all" in targets:
        return [*REFRESHABLE, *NO_PRICE_API, "fx"]
    return list(dict.fromkeys(targets))


def _shipped_rows() -> list[dict[str, str]]:
    from gpuopt.pricing.catalog import shipped_text

    return [r.values for r in read_csv_rows(shipped_text())[1]]


def _refresh_provider(provider: str, *, file: Path | None, url: str | None, regions: tuple[str, ...],
                      as_of: str | None, service: str, sku: str | None, zone: str | None, charge: str,
                      currency: str | None) -> None:
    from gpuopt.pricing.refresh import (
        Refreshed,
        RefreshError,
        cache_path,
        check_rows,
        foreign_regions,
        read_rows,
        summary_lines,
        unknown_gpus,
        unknown_regions,
        updated,
        write_cache,
    )

    shipped = _shipped_rows()
    owner, service_scope = SERVICE_TARGETS.get(provider, (provider, None))
    specs = {r["sku"]: r for r in shipped if r["provider"] == provider}
    result: Refreshed
    if provider == "aws":
        from gpuopt.pricing.refresh import aws

        if file is not None:
            result = aws.replay(file, specs, service, regions[0] if regions else None)
        else:
            result = Refreshed("aws", aws.fetch(regions or aws.DEFAULT_REGIONS, specs))
    elif provider == "alibaba":
        from gpuopt.pricing.refresh import alibaba

        data, label = alibaba.load_price_file(file, url)
        result = alibaba.parse(data, specs, label)
        if file is None:
            result.rows += _alibaba_spot(result.rows, specs, result.notes)
    elif provider == "pai-eas":
        from gpuopt.pricing.refresh import pai_eas

        especs, bases = pai_eas.specs_by_name(shipped), pai_eas.base_prices(shipped)
        if file is not None:
            result = pai_eas.replay(file, regions[0] if regions else None, especs, bases)
        else:
            result = pai_eas.fetch(especs, bases, list(regions or pai_eas.REGIONS))
    elif provider == "tencent":
        from gpuopt.pricing.refresh import tencent

        tspecs = tencent.specs_by_sku(shipped)
        if file is not None:
            result = tencent.replay(file, tspecs, currency or "CNY", as_of, sku, zone, charge)
        else:
            result = tencent.fetch(tspecs, list(regions) or _tencent_regions(shipped),
                                   international=currency == "USD")
    elif provider == "ti-one":
        from gpuopt.pricing.refresh import tione

        if currency == "USD":
            raise RefreshError("TI-ONE prices are read in fen (CNY) as the SDK documents them; the international "
                               "site's unit is not documented, so --currency USD is not offered for ti-one")
        tispecs = tione.specs_by_name(shipped)
        if file is not None:
            result = tione.replay(file, regions[0] if regions else None, tispecs, as_of)
        else:
            result = tione.fetch(tispecs, list(regions) or _tencent_regions(shipped))
    elif provider == "runpod":
        from gpuopt.pricing.refresh import runpod

        names = runpod.gpu_names(shipped)
        sizes = runpod.pod_sizes(shipped)
        result = runpod.replay(file, names, as_of, sizes) if file is not None else runpod.fetch(names, sizes)
    else:
        from gpuopt.pricing.refresh import digitalocean

        slugs = digitalocean.gpu_by_slug(shipped)
        result = digitalocean.replay(file, slugs, as_of) if file is not None else digitalocean.fetch(slugs)
    label = str(file) if file is not None else f"{provider} API"
    problems = check_rows(label, result.rows)
    if problems:
        raise RefreshError(*problems)
    if not result.rows:
        raise RefreshError(f"{label}: no GPU offering in the answer; nothing written")
    target = cache_path(provider)
    if target.is_file():
        previous, against = read_rows(target), f"the previous cache {target.name}"
    else:
        others = {svc for o, svc in SERVICE_TARGETS.values() if o == owner}
        previous = [r for r in shipped if r["provider"] == owner and (
            r["service"] == service_scope if service_scope else r["service"] not in others)]
        against = "the shipped snapshot"
    rows = result.rows
    if provider in ("tencent", "aws") and file is not None and target.is_file():
        # an InquiryPriceRunInstances answer prices one SKU, zone and charge, a saved get_products page one page,
        # a spot history one region: each updates those rows of the cache and keeps the others, so replays build
        # a cache up instead of each dropping the last one's rows (a spot replay after an on-demand page had put
        # the shipped on-demand prices back, "kept")
        rows = updated(previous, rows)
    elif provider == "aws" and target.is_file():
        # a live answer is whole for the regions it asked: the cache keeps the regions it did not ask
        asked = set(regions or aws.DEFAULT_REGIONS)  # `aws` imported above, for this provider's fetch
        rows = [r for r in previous if r.get("region") not in asked] + list(rows)
    path = write_cache(provider, rows)
    shipped_rows = [r for r in shipped if r["provider"] == owner]
    for line in summary_lines(provider, previous, rows, against, shipped_rows):
        click.echo(line)
    strange = unknown_gpus(result.rows)
    if strange:
        click.echo(f"  unplannable (GPU not in the GPU table; add its datasheet row): {', '.join(strange)}")
    strangers = unknown_regions(result.rows)
    if strangers:
        click.echo(f"  of unknown country (regions.csv has no row for these ids; add one to place them): "
                   f"{', '.join(strangers)}")
    elsewhere = foreign_regions(result.rows)
    if elsewhere:
        click.echo(f"  of unknown country (regions.csv places these ids for other providers; --region us, eu, apac "
                   f"and cn will not admit them until {provider}'s row is added): {', '.join(elsewhere)}")
    for note in result.notes:
        say("note", f"{provider}: {note}")
    click.echo(f"wrote {len(rows)} {provider} rows to {path}", err=True)


def _tencent_regions(shipped: list[dict[str, str]]) -> list[str]:
    """The Tencent regions the shipped rows price (ap-guangzhou, ap-singapore, ...; not zones)."""
    return sorted({r["region"] for r in shipped if r["provider"] == "tencent"
                   and r["region"].startswith("ap-") and r["region"].count("-") == 1})


def _alibaba_spot(rows: list[dict[str, str]], specs: dict[str, dict[str, str]], notes: list[str]
                  ) -> list[dict[str, str]]:
    """Spot prices of the priced GPU types through DescribeSpotPriceHistory, when Alibaba credentials exist."""
    from gpuopt.pricing.refresh import RefreshError, alibaba

    if not alibaba.credentials_configured():
        notes.append("no Alibaba Cloud credentials configured: spot prices (DescribeSpotPriceHistory) skipped")
        return []
    out: list[dict[str, str]] = []
    for region in sorted({r["region"] for r in rows}):
        client = alibaba.sdk_client_for(region)
        for sku in sorted({r["sku"] for r in rows if r["region"] == region and r["gpu"]}):
            try:
                body = alibaba.spot_history(client, region, sku)
            except RefreshError:
                raise
            except Exception as exc:  # the SDK's TeaException and transport errors
                raise RefreshError(f"DescribeSpotPriceHistory {region} {sku} failed ({type(exc).__name__})") from None
            out += alibaba.parse_spot_history(body, f"DescribeSpotPriceHistory {region} {sku}", region, specs)
    return out


def _refresh_fx(file: Path | None) -> None:
    from gpuopt.pricing.fx import load_fx
    from gpuopt.pricing.refresh import fx as fx_refresh

    before = load_fx()
    rate = fx_refresh.replay(file) if file is not None else fx_refresh.fetch()
    old = next((r for r in before.rates if (r.base, r.quote) == ("USD", "CNY")), None)
    if old is not None and rate.as_of < old.as_of:
        # an older ECB file would replace a newer refreshed rate in the cache (the loader then keeps the newer
        # of the cache and the shipped rate, so the newer refresh was lost while the message read as in use)
        click.echo(f"fx: 1 USD = {old.rate:.10g} CNY as of {old.as_of} kept: the answer's rate ({rate.rate:.10g} "
                   f"as of {rate.as_of}) is older; nothing written")
        return
    path = fx_refresh.write_fx(rate)
    was = f" (was {old.rate} as of {old.as_of})" if old else ""
    click.echo(f"fx: 1 USD = {rate.rate:.10g} CNY as of {rate.as_of}{was}")
    click.echo(f"wrote the ECB rate to {path}", err=True)


@catalog.command("diff")
@click.argument("old", type=SafePath(path_type=Path))
@click.argument("new", type=SafePath(path_type=Path))
def diff_catalogs(old: Path, new: Path) -> None:
    """Compare two catalog CSVs (a cache file, the shipped catalog, an export): new, removed, changed offerings
    with the % change of each price."""
    from gpuopt.pricing.refresh import compare

    problems: list[str] = []
    tables = []
    for path in (old, new):
        header, rows = read_csv_rows(read_text_file(path), str(path))
        problems += validate_rows(str(path), header, rows, overlay=False, provider_answer=True)
        tables.append([r.values for r in rows])
    if problems:
        raise InputError(*problems)
    changes = compare(tables[0], tables[1])
    for change in changes:
        click.echo(change.line())
    counts = {k: sum(1 for c in changes if c.kind == k) for k in ("new", "removed", "changed")}
    click.echo(f"{old} -> {new}: {counts['new']} new, {counts['removed']} removed, {counts['changed']} changed",
               err=True)


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr)

"""`gpuopt catalog list|show|validate|refresh`: the price catalog."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuopt.cli.options import F
from gpuopt.errors import InputError
from gpuopt.pricing.catalog import (
    Catalog,
    Offering,
    load_catalog,
    offering_record,
    read_csv_rows,
    validate_rows,
)
from gpuopt.pricing.columns import CURRENCIES, PRICE_KINDS, PROVIDERS
from gpuopt.pricing.fx import parse_fx_override
from gpuopt.pricing.regions import Residency

if TYPE_CHECKING:
    from rich.console import Console


def catalog_options(func: F) -> F:
    """Options every command that reads prices shares."""
    func = click.option("--catalog", "overlays", multiple=True, type=click.Path(path_type=Path), metavar="CSV",
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
            out[provider.strip()] = float(value)
        except ValueError:
            problems.append(f"--discount '{item}': expected PROVIDER=FRACTION, e.g. aws=0.1")
    if problems:
        raise InputError(*problems)
    return out


def open_catalog(overlays: tuple[Path, ...], discounts: tuple[str, ...], fx_rates: tuple[str, ...],
                 extra_discounts: dict[str, float] | None = None) -> Catalog:
    fx = dict(parse_fx_override(f) for f in fx_rates)
    merged = {**(extra_discounts or {}), **parse_discounts(discounts)}
    catalog = load_catalog(overlays=overlays, discounts=merged, fx_overrides=fx)
    for note in catalog.notes:
        click.echo(f"note: {note}", err=True)
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
@click.option("--region", "region", default="global", show_default=True, metavar="SEL",
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
    currency = currency.upper() if currency else None
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

        frame = pd.DataFrame.from_records(records)
        click.echo(frame.to_csv(index=False, lineterminator="\n"), nl=False)
    else:
        _print_table(rows, cat, currency)
    click.echo(f"{len(rows)} offerings ({sum(1 for o in rows if o.price_per_hour is not None)} priced); "
               f"FX {cat.fx.describe()}", err=True)


def _print_table(rows: list[Offering], cat: Catalog, currency: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for col in ("provider", "service", "sku", "region", "gpu", "n", "price/h", "kind", "as_of"):
        table.add_column(col, justify="right" if col in ("n", "price/h") else "left")
    for o in rows:
        if o.price_per_hour is None:
            price = "-"
        elif currency:
            price = f"{cat.price_in(o, currency):,.4f} {currency}"
        else:
            price = f"{o.price_per_hour:,.4f} {o.currency}"
        table.add_row(o.provider, o.service, o.sku, o.region, o.gpu or "?", str(o.gpu_count or "?"), price,
                      o.price_kind, o.as_of)
    Console(width=160).print(table)


@catalog.command("show")
@click.argument("sku")
@click.option("--currency", type=str)
@catalog_options
def show(sku: str, currency: str | None, overlays: tuple[Path, ...], discounts: tuple[str, ...],
         fx_rates: tuple[str, ...]) -> None:
    """Every row of one SKU (all regions and price kinds), as JSON."""
    currency = currency.upper() if currency else None
    check_names((), (), currency)
    cat = open_catalog(overlays, discounts, fx_rates)
    rows = [o for o in cat.offerings if o.sku.lower() == sku.lower()]
    if not rows:
        from gpuopt.errors import UnknownNameError

        raise UnknownNameError("SKU", sku, sorted({o.sku for o in cat.offerings}))
    click.echo(json.dumps([offering_record(o, cat, currency) for o in rows], indent=2, ensure_ascii=False))


@catalog.command("validate")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--overlay", is_flag=True, help="Validate as an overlay (a subset of the columns is enough).")
def validate(file: Path, overlay: bool) -> None:
    """Check a catalog or overlay CSV: schema, duplicates, positive prices, known GPUs and regions."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{file}: file not found") from None
    header, rows = read_csv_rows(text)
    problems = validate_rows(str(file), header, rows, overlay=overlay)
    if problems:
        raise InputError(*problems)
    click.echo(f"{file}: {len(rows)} rows, valid")


@catalog.group("refresh")
def refresh() -> None:
    """Fetch current prices into your cache folder (the shipped snapshot is never modified)."""


def _specs(provider: str) -> dict[str, Offering]:
    cat = load_catalog(use_cache=False)
    return {o.sku: o for o in cat.offerings if o.provider == provider and o.gpu}


@refresh.command("aws")
@click.option("--region", "regions", multiple=True, default=("us-east-1",), show_default=True,
              help="AWS region code to price (repeatable).")
def refresh_aws(regions: tuple[str, ...]) -> None:
    """AWS Price List API (boto3, your credentials): EC2 GPU on-demand and reserved prices."""
    from rich.progress import Progress

    from gpuopt.pricing.refresh import aws as aws_refresh
    from gpuopt.pricing.refresh import write_cache

    with Progress(transient=True, console=_stderr_console()) as progress:
        task = progress.add_task("AWS Price List", total=None)

        def on_page(region: str, pages: int) -> None:
            progress.update(task, description=f"AWS Price List {region}: page {pages}", advance=1)

        rows = aws_refresh.fetch(regions, _specs("aws"), on_page=on_page)
    path = write_cache("aws", rows)
    click.echo(f"wrote {len(rows)} AWS rows to {path}")


@refresh.command("alibaba")
@click.option("--file", "file", type=click.Path(path_type=Path), help="A downloaded instancePrice.json.")
@click.option("--url", help="URL of the current instancePrice.json (its version path changes).")
def refresh_alibaba(file: Path | None, url: str | None) -> None:
    """Alibaba Cloud's public ECS price file (no credentials): GPU instance on-demand prices."""
    from gpuopt.pricing.refresh import alibaba, write_cache

    data = alibaba.load_price_file(file, url)
    rows = alibaba.parse(data, _specs("alibaba"))
    path = write_cache("alibaba", rows)
    click.echo(f"wrote {len(rows)} Alibaba rows to {path}")


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr)

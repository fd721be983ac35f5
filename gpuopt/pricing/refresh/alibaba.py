"""Alibaba Cloud ECS prices -> catalog rows: the public price file, and DescribePrice through the official SDK.

The price file behind aliyun.com's price page (g.alicdn.com/aliyun/ecs-price-info/<ver>/price/download/
instancePrice.json, catalog_notes.md s6) has top-level keys currency, version, publicationDate and pricingInfo;
pricingInfo keys are RegionId::InstanceType::NetworkType::OSType::IoOptimized and values
{"hours": [{"price": "9.5326", "period": "1"}], ...}, prices as strings, CNY on the China site. Its version
changes, so `locate_price_file` reads the current base URL out of the price page
(https://www.aliyun.com/price/ecs/ecs-pricing/zh embeds it; cloudpilot-ai/priceserver finds it the same way).
Rows are dated by the file's publicationDate; a file in a currency the catalog does not price in is refused
(never written for the loader to ignore).

With credentials (the alibabacloud credentials chain: ALIBABA_CLOUD_ACCESS_KEY_ID/SECRET, profile, RAM role),
`describe_price` asks ECS DescribePrice for one type in one region (TradePrice, PriceUnit Hour). Not done
here: DescribeSpotPriceHistory and the PAI-EAS spot-discount endpoint (no response copy exists to test
against; catalog_notes.md says they were not exercised).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gpuopt.pricing.columns import CURRENCIES
from gpuopt.pricing.refresh import (
    Refreshed,
    RefreshError,
    Row,
    base_row,
    expect_list,
    expect_object,
    load_json,
    price_text,
)

SOURCE = "aliyun.com ECS price file instancePrice.json"
GPU_PREFIXES = ("ecs.gn", "ecs.ebmgn", "ecs.sgn", "ecs.vgn")
PRICE_PAGE = "https://www.aliyun.com/price/ecs/ecs-pricing/zh"
_BASE = re.compile(r"(?:https?:)?//g\.alicdn\.com/aliyun/ecs-price-info/([0-9][0-9A-Za-z._-]*)")


def price_file_url(page_html: str) -> str:
    """The current instancePrice.json URL, from the base URL the price page embeds."""
    versions = _BASE.findall(page_html)
    if not versions:
        raise RefreshError(f"{PRICE_PAGE}: no g.alicdn.com/aliyun/ecs-price-info/<version> link in the page "
                           "(the page changed?); pass --url or --file")
    return f"https://g.alicdn.com/aliyun/ecs-price-info/{versions[0]}/price/download/instancePrice.json"


def _download(url: str, timeout: float) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return str(resp.read().decode("utf-8"))
    except (urllib.error.URLError, TimeoutError) as exc:
        raise RefreshError(f"cannot download {url} ({exc}); the cache is unchanged") from None


def load_price_file(path: Path | None, url: str | None, timeout: float = 30.0) -> tuple[dict[str, Any], str]:
    """(the price file, a label naming where it came from). Without --file or --url the price page is read
    to find the current file."""
    if path is not None:
        data, label = load_json(path, "Alibaba price file"), str(path)
    else:
        url = url or price_file_url(_download(PRICE_PAGE, timeout))
        try:
            data, label = json.loads(_download(url, timeout)), url
        except json.JSONDecodeError as exc:
            raise RefreshError(f"{url}: the Alibaba price file is not JSON (line {exc.lineno}: {exc.msg})") from None
    data = expect_object(data, label)
    expect_object(data.get("pricingInfo"), f"{label}: pricingInfo")
    return data, label


def _spec_fields(spec: Row | None) -> dict[str, str]:
    if not spec:
        return {}
    return {k: spec.get(k, "") for k in ("gpu", "gpu_count", "gpu_mem_gib", "vcpus", "ram_gib", "interconnect",
                                         "interconnect_basis")}


def parse(data: dict[str, Any], specs: dict[str, Row], label: str = "instancePrice.json") -> Refreshed:
    """Linux VPC hourly prices of GPU instance types; specs (GPU, count, link) from the shipped rows."""
    currency = str(data.get("currency") or "")
    if currency not in CURRENCIES:
        raise RefreshError(f"{label}: currency '{currency}' is not one the catalog prices in "
                           f"({', '.join(CURRENCIES)}); nothing written")
    published = str(data.get("publicationDate") or "")
    if not re.match(r"^\d{4}-\d{2}-\d{2}", published):
        raise RefreshError(f"{label}: publicationDate {published!r} is not a date; the prices cannot be dated")
    as_of = published[:10]
    rows: list[Row] = []
    unknown: set[str] = set()
    for key, value in sorted(expect_object(data.get("pricingInfo"), f"{label}: pricingInfo").items()):
        where = f"{label}: pricingInfo[{key!r}]"
        parts = str(key).split("::")
        if len(parts) < 4:
            raise RefreshError(f"{where}: expected RegionId::InstanceType::NetworkType::OSType[::IoOptimized]")
        region, instance, network, os_type = parts[0], parts[1], parts[2], parts[3]
        if not instance.startswith(GPU_PREFIXES) or os_type != "linux" or network != "vpc":
            continue
        hours = expect_list(expect_object(value, where).get("hours") or [], f"{where}.hours")
        if not hours:
            continue
        price = price_text(expect_object(hours[0], f"{where}.hours[0]").get("price"), f"{where}.hours[0].price")
        spec = specs.get(instance)
        if spec is None:
            unknown.add(instance)
        rows.append(base_row(
            provider="alibaba", service="ecs", sku=instance, region=region, **_spec_fields(spec),
            price_per_hour=price, currency=currency, price_kind="on-demand",
            source=f"{SOURCE} version {data.get('version', '?')} ({label})", as_of=as_of,
            notes=(f"publicationDate {published}" if spec else
                   f"publicationDate {published}; instance type not in the shipped catalog: GPU model unknown")))
    notes = [f"{len(unknown)} GPU instance type(s) not in the shipped catalog (no GPU model): "
             f"{', '.join(sorted(unknown)[:10])}{' ...' if len(unknown) > 10 else ''}"] if unknown else []
    return Refreshed("alibaba", rows, notes)


def parse_describe_price(body: Any, label: str, sku: str, region: str, spec: Row | None, as_of: str,
                         source: str) -> Row:
    """One DescribePrice answer (PriceUnit Hour) -> an on-demand row at Price.OriginalPrice (the list price)."""
    price = expect_object(expect_object(expect_object(body, label).get("PriceInfo"), f"{label}: PriceInfo")
                          .get("Price"), f"{label}: PriceInfo.Price")
    currency = str(price.get("Currency") or "")
    if currency not in CURRENCIES:
        raise RefreshError(f"{label}: PriceInfo.Price.Currency '{currency}' is not one the catalog prices in "
                           f"({', '.join(CURRENCIES)})")
    value = price_text(price.get("OriginalPrice"), f"{label}: PriceInfo.Price.OriginalPrice")
    return base_row(provider="alibaba", service="ecs", sku=sku, region=region, **_spec_fields(spec),
                    price_per_hour=value, currency=currency, price_kind="on-demand", source=source, as_of=as_of,
                    notes=f"DescribePrice OriginalPrice (list); TradePrice {price.get('TradePrice')} after discounts")


def describe_price(client: Any, sku: str, region: str, spec: Row | None, now: dt.datetime | None = None) -> Row:
    """ECS DescribePrice through the official SDK (alibabacloud_ecs20140526) for one hour of one type."""
    from alibabacloud_ecs20140526 import models

    request = models.DescribePriceRequest(region_id=region, resource_type="instance", instance_type=sku,
                                          price_unit="Hour", period=1)
    answer = client.describe_price(request)
    stamp = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    source = f"Alibaba ECS DescribePrice, live answer fetched {stamp.isoformat()} (the API gives no price date)"
    return parse_describe_price(answer.body.to_map(), f"DescribePrice {region} {sku}", sku, region, spec,
                                stamp.date().isoformat(), source)

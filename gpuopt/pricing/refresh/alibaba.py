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
`describe_price` asks ECS DescribePrice for one type in one region (TradePrice, PriceUnit Hour) and
`spot_history` DescribeSpotPriceHistory. The PAI-EAS spot discounts are refresh/pai_eas.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
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
    if "pricingInfo" not in data and "PriceInfo" in data:  # an ECS DescribePrice answer: one instance, one price
        raise RefreshError(f"{label}: this is a DescribePrice answer (PriceInfo); `catalog refresh alibaba --file` "
                           "reads the public price list instancePrice.json (pricingInfo)")
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


def parse_spot_history(body: Any, label: str, region: str, specs: dict[str, Row]) -> list[Row]:
    """DescribeSpotPriceHistory -> one spot row per instance type: the lowest of the latest zone prices, dated by
    that price's Timestamp (the API's own date)."""
    body = expect_object(body, label)
    currency = str(body.get("Currency") or "")
    if currency not in CURRENCIES:
        raise RefreshError(f"{label}: Currency '{currency}' is not one the catalog prices in ({', '.join(CURRENCIES)})")
    entries = expect_list(expect_object(body.get("SpotPrices") or {}, f"{label}: SpotPrices").get("SpotPriceType")
                          or [], f"{label}: SpotPrices.SpotPriceType")
    latest: dict[tuple[str, str], tuple[str, str, Any]] = {}
    for i, raw in enumerate(entries):
        entry = expect_object(raw, f"{label}: SpotPriceType[{i}]")
        key = (str(entry.get("InstanceType") or ""), str(entry.get("ZoneId") or ""))
        stamp = str(entry.get("Timestamp") or "")
        if not re.match(r"^\d{4}-\d{2}-\d{2}", stamp):
            raise RefreshError(f"{label}: SpotPriceType[{i}].Timestamp {stamp!r} is not a date")
        price = price_text(entry.get("SpotPrice"), f"{label}: SpotPriceType[{i}].SpotPrice")
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, price, entry.get("OriginPrice"))
    best: dict[str, tuple[float, str, str, str, Any]] = {}
    for (instance, zone), (stamp, price, origin) in latest.items():
        if instance not in best or float(price) < best[instance][0]:
            best[instance] = (float(price), price, stamp, zone, origin)
    return [base_row(provider="alibaba", service="ecs", sku=instance, region=region,
                     **_spec_fields(specs.get(instance)), price_per_hour=price, currency=currency,
                     price_kind="spot", as_of=stamp[:10],
                     source="Alibaba ECS DescribeSpotPriceHistory (official SDK), latest price per zone",
                     notes=f"lowest zone price ({zone}) at {stamp}; pay-as-you-go OriginPrice {origin}; interruptible")
            for instance, (_, price, stamp, zone, origin) in sorted(best.items())]


def spot_history(client: Any, region: str, instance_type: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """One DescribeSpotPriceHistory call (Linux, VPC, the last day) through the SDK client, as the API's JSON."""
    from alibabacloud_ecs20140526 import models

    start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(days=1)
    request = models.DescribeSpotPriceHistoryRequest(region_id=region, instance_type=instance_type,
                                                     network_type="vpc", ostype="linux",
                                                     start_time=start.strftime("%Y-%m-%dT%H:%M:%SZ"))
    answer: dict[str, Any] = client.describe_spot_price_history(request).body.to_map()
    return answer


CREDENTIAL_HINTS = ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_CREDENTIALS_FILE", "ALIBABA_CLOUD_ECS_METADATA",
                    "ALIBABA_CLOUD_ROLE_ARN", "ALIBABA_CLOUD_PROFILE")


def credentials_configured() -> bool:
    """Whether the alibabacloud chain has something to read. Checked before the chain runs because its last step
    asks the ECS metadata service, which off Alibaba Cloud means a network call and logged tracebacks."""
    home = Path.home()
    return any(os.environ.get(k) for k in CREDENTIAL_HINTS) or (home / ".alibabacloud" / "credentials.ini").is_file() \
        or (home / ".aliyun" / "config.json").is_file()


def credential_chain(purpose: str) -> Any:
    """The alibabacloud credentials chain (env, profile, RAM role), checked to hold something; RefreshError naming
    `purpose` if not. Shared by the ECS and PAI-EAS clients; the credentials are never printed."""
    if not credentials_configured():
        raise RefreshError("Alibaba Cloud credentials not configured (ALIBABA_CLOUD_ACCESS_KEY_ID/SECRET or a "
                           f"profile): {purpose}")
    try:
        from alibabacloud_credentials.client import Client as Credentials
    except ImportError:
        raise RefreshError("the Alibaba Cloud SDK is not installed: pip install 'gpuopt[alibaba]'") from None
    try:
        credentials = Credentials()
        credentials.get_credential()
    except Exception:  # the chain raises its own CredentialException, or OSError/ValueError from a provider
        raise RefreshError("Alibaba Cloud credentials not found (ALIBABA_CLOUD_ACCESS_KEY_ID/SECRET, a profile or "
                           "a RAM role)") from None
    return credentials


def sdk_client_for(region: str) -> Any:
    """An ECS client with credentials from the alibabacloud chain; RefreshError if there are none."""
    credentials = credential_chain("spot prices need DescribeSpotPriceHistory")
    try:
        from alibabacloud_ecs20140526.client import Client
        from alibabacloud_tea_openapi import models as openapi
    except ImportError:
        raise RefreshError("the Alibaba Cloud SDK is not installed: pip install 'gpuopt[alibaba]'") from None
    return Client(openapi.Config(credential=credentials, region_id=region, endpoint=f"ecs.{region}.aliyuncs.com"))

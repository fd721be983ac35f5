"""Alibaba Cloud PAI-EAS spot discounts through alibabacloud_eas20210701 -> catalog rows.

The API, as the SDK defines it (alibabacloud_eas20210701 7.0.0): `DescribeSpotDiscountHistory`, GET
/api/v2/public/spot_discount (ROA, signed with an AccessKey), takes `InstanceType` (required) and `IsProtect`.
It answers `RequestId` and `SpotDiscounts[]` of {InstanceType, ZoneId, SpotDiscount, Timestamp}. The SDK
documents SpotDiscount as "0.1 represents a 90% discount" (a string in the model) and Timestamp as UTC.

A discount is not a price. A spot row is priced only when the catalog has a priced PAI-EAS pay-as-you-go row
for the same spec and region: discount x that price, with the basis in notes. Otherwise the row is written
unpriced ("overlay it"), with the discount and its date in notes. PAI-EAS public-resource prices are not ECS
prices (catalog_notes.md), so an ECS price is never used as the base. Per spec and region, the row takes the
latest discount of each zone, then the lowest of those zones (as the ECS spot history does), and is dated by
that discount's Timestamp (the source's own date).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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

SERVICE = "pai-eas"
# the mainland regions of the SDK's own endpoint map (alibabacloud_eas20210701 7.0.0 Client._endpoint_map)
REGIONS = ("cn-beijing", "cn-chengdu", "cn-hangzhou", "cn-shanghai", "cn-shenzhen", "cn-zhangjiakou")
HARDWARE = ("gpu", "gpu_count", "gpu_mem_gib", "vcpus", "ram_gib", "interconnect", "interconnect_basis")
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}")


def specs_by_name(shipped: list[Row]) -> dict[str, Row]:
    """PAI-EAS instance type -> a shipped PAI-EAS row of it (hardware is the same in every region)."""
    return {r["sku"]: r for r in shipped if r.get("provider") == "alibaba" and r.get("service") == SERVICE}


def base_prices(rows: list[Row]) -> dict[tuple[str, str], Row]:
    """(instance type, region) -> the priced PAI-EAS pay-as-you-go row a discount applies to."""
    return {(r["sku"], r["region"]): r for r in rows if r.get("provider") == "alibaba"
            and r.get("service") == SERVICE and r.get("price_kind") == "on-demand" and r.get("price_per_hour")}


def parse(data: Any, label: str, region: str, specs: dict[str, Row], bases: dict[tuple[str, str], Row]) -> Refreshed:
    """One DescribeSpotDiscountHistory answer (one region) -> one spot row per instance type."""
    body = expect_object(data, label)
    body = expect_object(body.get("body", body), f"{label}: body")  # the SDK's response map, or its body
    entries = expect_list(body.get("SpotDiscounts"), f"{label}: SpotDiscounts")
    latest: dict[tuple[str, str], tuple[str, float, str]] = {}
    elsewhere: set[str] = set()
    for i, raw in enumerate(entries):
        where = f"{label}: SpotDiscounts[{i}]"
        entry = expect_object(raw, where)
        instance, zone = entry.get("InstanceType"), entry.get("ZoneId")
        if not isinstance(instance, str) or not instance:
            raise RefreshError(f"{where}.InstanceType: expected an instance type, got {instance!r}")
        if not isinstance(zone, str) or not zone:
            raise RefreshError(f"{where}.ZoneId: expected a zone, got {zone!r}")
        if not zone.startswith(f"{region}-"):
            elsewhere.add(zone)
            continue
        stamp = entry.get("Timestamp")
        if not isinstance(stamp, str) or not _STAMP.match(stamp):
            raise RefreshError(f"{where}.Timestamp: {stamp!r} is not a date")
        text = price_text(entry.get("SpotDiscount"), f"{where}.SpotDiscount")
        discount = float(text)
        if discount > 1:
            raise RefreshError(f"{where}.SpotDiscount: {entry['SpotDiscount']!r} is not a fraction of the price "
                               "(0 < discount <= 1; 0.1 means 90 % off)")
        key = (instance, zone)
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, discount, text)
    best: dict[str, tuple[float, str, str, str]] = {}
    for (instance, zone), (stamp, discount, text) in latest.items():
        if instance not in best or discount < best[instance][0]:
            best[instance] = (discount, text, stamp, zone)
    rows: list[Row] = []
    for instance, (discount, text, stamp, zone) in sorted(best.items()):
        spec = specs.get(instance, {})
        base = bases.get((instance, region))
        told = f"SpotDiscount {text} (x{text} of the pay-as-you-go price) in zone {zone} at {stamp}; interruptible"
        if base is not None:
            price = f"{float(base['price_per_hour']) * discount:.10g}"
            currency, note = base["currency"], (f"{told}; DERIVED: {text} x the PAI-EAS pay-as-you-go price "
                                                 f"{base['price_per_hour']} {base['currency']} ({base['as_of']})")
        else:
            price, currency = "", "CNY" if region.startswith("cn-") else ""
            note = f"unpriced: {told}; no PAI-EAS pay-as-you-go price for this spec and region - overlay it"
        rows.append(base_row(
            provider="alibaba", service=SERVICE, sku=instance, region=region,
            **{c: spec.get(c, "") for c in HARDWARE}, price_per_hour=price, currency=currency, price_kind="spot",
            source="Alibaba PAI-EAS DescribeSpotDiscountHistory (official SDK), latest discount per zone",
            as_of=stamp[:10], notes=note + ("" if spec else "; instance type not in the shipped catalog")))
    notes = [f"{region}: zones of other regions skipped: {', '.join(sorted(elsewhere))}"] if elsewhere else []
    return Refreshed("pai-eas", rows, notes)


def replay(path: Path, region: str | None, specs: dict[str, Row], bases: dict[tuple[str, str], Row]) -> Refreshed:
    data = load_json(path, "PAI-EAS DescribeSpotDiscountHistory answer")
    if not region:
        raise RefreshError(f"{path}: a DescribeSpotDiscountHistory answer names zones, not its region: "
                           "give --region R")
    return parse(data, str(path), region, specs, bases)


def sdk_client_for(region: str) -> Any:
    """An EAS client with credentials from the alibabacloud chain; RefreshError if there are none."""
    from gpuopt.pricing.refresh.alibaba import credential_chain

    credentials = credential_chain("PAI-EAS spot discounts need DescribeSpotDiscountHistory")
    try:
        from alibabacloud_eas20210701.client import Client
        from alibabacloud_tea_openapi import models as openapi
    except ImportError:
        raise RefreshError("the PAI-EAS SDK is not installed: pip install 'gpuopt[alibaba]'") from None
    return Client(openapi.Config(credential=credentials, region_id=region))


def discount_history(client: Any, instance_type: str) -> dict[str, Any]:
    """One DescribeSpotDiscountHistory call through the SDK client, as the API's JSON body."""
    from alibabacloud_eas20210701 import models

    answer: dict[str, Any] = client.describe_spot_discount_history(
        models.DescribeSpotDiscountHistoryRequest(instance_type=instance_type)).body.to_map()
    return answer


def fetch(specs: dict[str, Row], bases: dict[tuple[str, str], Row], regions: list[str],
          client_for: Any = None) -> Refreshed:
    """The discount of every PAI-EAS spec the catalog knows, in every region asked for."""
    client_for = client_for or sdk_client_for
    result = Refreshed("pai-eas", [])
    for region in regions:
        client = client_for(region)
        for instance in sorted(specs):
            label = f"DescribeSpotDiscountHistory {region} {instance}"
            try:
                body = discount_history(client, instance)
            except RefreshError:
                raise
            except Exception as exc:  # the SDK's TeaException and transport errors
                raise RefreshError(f"{label} failed ({type(exc).__name__})") from None
            part = parse(body, label, region, specs, bases)
            result.rows += part.rows
            result.notes += part.notes
    return result

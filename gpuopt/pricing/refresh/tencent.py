"""Tencent Cloud CVM prices through tencentcloud-sdk-python -> catalog rows.

- `InquiryPriceRunInstances` (catalog_notes.md s4; fixtures tencent_inquiry_price_run_instances*.json): one
  instance type in one zone. POSTPAID_BY_HOUR gives InstancePrice.UnitPrice per ChargeUnit HOUR (the list
  price; UnitPriceDiscount is the account's discounted price and goes to notes). PREPAID for one month gives
  OriginalPrice for the month: written as subscription-monthly at OriginalPrice / 730 (DERIVED).
- `DescribeZoneInstanceConfigInfos`: every type in stock in a zone with Price.UnitPrice; GPU types (GpuCount > 0)
  become on-demand rows. This is the bulk call the live refresher uses.
The answers state no currency and no date: the China-site endpoint prices in CNY, the international one in USD
(--currency for replays), and rows are dated by the fetch (live) or --as-of / file time (replay).
TI-ONE's online-service prices (DescribeBillingSpecsPrice) are refresh/tione.py, a target of its own.
"""

from __future__ import annotations

import datetime as dt
import json
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

HOURS_PER_MONTH = 730


def _account(price: dict[str, object], field: str, label: str) -> str:
    """The account's own price the answer gives beside the list price, for the row's notes: a price or "not
    given" -- checked like a price (QA: `DiscountPrice: -5` and `nan` went into the notes)."""
    value = price.get(field)
    return "not given" if value in (None, 0) else price_text(value, f"{label}: Response.Price.InstancePrice.{field}")


def specs_by_sku(shipped: list[Row]) -> dict[str, Row]:
    return {r["sku"]: r for r in shipped if r.get("provider") == "tencent" and r.get("service") == "cvm"}


def region_of(zone: str) -> str:
    """ap-guangzhou-3 -> ap-guangzhou (catalog rows are per region; the zone goes to notes)."""
    head, _, tail = zone.rpartition("-")
    return head if tail.isdigit() and head else zone


def _row(spec: Row | None, sku: str, region: str, price: str, kind: str, currency: str, as_of: str, source: str,
         notes: str, term: str = "") -> Row:
    spec = spec or {}
    return base_row(provider="tencent", service="cvm", sku=sku, region=region, gpu=spec.get("gpu", ""),
                    gpu_count=spec.get("gpu_count", ""), gpu_mem_gib=spec.get("gpu_mem_gib", ""),
                    vcpus=spec.get("vcpus", ""), ram_gib=spec.get("ram_gib", ""),
                    interconnect=spec.get("interconnect", ""), interconnect_basis=spec.get("interconnect_basis", ""),
                    price_per_hour=price, currency=currency, price_kind=kind, source=source, as_of=as_of,
                    term_months=term, notes=notes if spec else f"{notes}; instance type not in the shipped catalog")


def parse_inquiry(data: Any, label: str, sku: str, zone: str, charge: str, currency: str, as_of: str, source: str,
                  specs: dict[str, Row]) -> Refreshed:
    response = expect_object(expect_object(data, label).get("Response", data), f"{label}: Response")
    if "Error" in response:
        raise RefreshError(f"{label}: Tencent Cloud answered with an error: {response['Error'].get('Code', '?')}")
    price = expect_object(expect_object(response.get("Price"), f"{label}: Response.Price").get("InstancePrice"),
                          f"{label}: Response.Price.InstancePrice")
    where = f"{label}: Response.Price.InstancePrice"
    region = region_of(zone)
    if charge == "POSTPAID_BY_HOUR":
        if price.get("ChargeUnit") != "HOUR":
            raise RefreshError(f"{where}.ChargeUnit: expected HOUR, got {price.get('ChargeUnit')!r}")
        value = price_text(price.get("UnitPrice"), f"{where}.UnitPrice")
        note = (f"zone {zone}; UnitPrice (list); account price UnitPriceDiscount "
                f"{_account(price, 'UnitPriceDiscount', label)}")
        return Refreshed("tencent", [_row(specs.get(sku), sku, region, value, "on-demand", currency, as_of, source,
                                          note)])
    if charge == "PREPAID":
        month = float(price_text(price.get("OriginalPrice"), f"{where}.OriginalPrice"))
        note = (f"zone {zone}; DERIVED: OriginalPrice {month:g} for 1 month / {HOURS_PER_MONTH} h; account price "
                f"DiscountPrice {_account(price, 'DiscountPrice', label)}")
        return Refreshed("tencent", [_row(specs.get(sku), sku, region, f"{month / HOURS_PER_MONTH:.10g}",
                                          "subscription-monthly", currency, as_of, source, note, term="1")])
    raise RefreshError(f"{label}: charge type {charge!r} is not priced here (known: POSTPAID_BY_HOUR, PREPAID)")


def parse_zone_configs(data: Any, label: str, currency: str, as_of: str, source: str,
                       specs: dict[str, Row]) -> Refreshed:
    response = expect_object(expect_object(data, label).get("Response", data), f"{label}: Response")
    items = expect_list(response.get("InstanceTypeQuotaSet"), f"{label}: Response.InstanceTypeQuotaSet")
    rows: list[Row] = []
    for i, raw in enumerate(items):
        item = expect_object(raw, f"{label}: InstanceTypeQuotaSet[{i}]")
        sku, zone = str(item.get("InstanceType") or ""), str(item.get("Zone") or "")
        where = f"{label}: InstanceTypeQuotaSet[{i}] ({sku or '?'} {zone or '?'})"
        if not (item.get("GpuCount") or item.get("Gpu")) or item.get("InstanceChargeType") not in (
                None, "POSTPAID_BY_HOUR"):
            continue
        price = expect_object(item.get("Price"), f"{where}.Price")
        if price.get("ChargeUnit") not in (None, "HOUR"):
            raise RefreshError(f"{where}.Price.ChargeUnit: expected HOUR, got {price.get('ChargeUnit')!r}")
        value = price_text(price.get("UnitPrice"), f"{where}.Price.UnitPrice")
        spec = specs.get(sku) or {"gpu_count": str(item.get("GpuCount") or ""), "vcpus": str(item.get("Cpu") or ""),
                                  "ram_gib": str(item.get("Memory") or "")}
        rows.append(_row(spec, sku, region_of(zone), value, "on-demand", currency, as_of, source,
                         f"zone {zone}; Price.UnitPrice (list)"))
    # one row per (sku, region): the lowest list price among the region's zones
    best: dict[tuple[str, str], Row] = {}
    for r in rows:
        key = (r["sku"], r["region"])
        if key not in best or float(r["price_per_hour"]) < float(best[key]["price_per_hour"]):
            best[key] = r
    return Refreshed("tencent", list(best.values()))


def replay(path: Path, specs: dict[str, Row], currency: str, as_of: str | None, sku: str | None,
           zone: str | None, charge: str) -> Refreshed:
    data = load_json(path, "Tencent Cloud answer")
    how = f"dated {as_of} by --as-of" if as_of else "undated: dated by the file's modification time"
    as_of = as_of or dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
    response = data.get("Response", data) if isinstance(data, dict) else data
    if isinstance(response, dict) and "InstanceTypeQuotaSet" in response:
        source = f"Tencent Cloud CVM DescribeZoneInstanceConfigInfos answer saved in {path.name} ({how})"
        return parse_zone_configs(data, str(path), currency, as_of, source, specs)
    if not sku or not zone:
        raise RefreshError(f"{path}: an InquiryPriceRunInstances answer does not name its instance type and zone: "
                           "give --sku TYPE and --zone ZONE")
    source = f"Tencent Cloud CVM InquiryPriceRunInstances ({charge}) answer saved in {path.name} ({how})"
    return parse_inquiry(data, str(path), sku, zone, charge, currency, as_of, source, specs)


def inquire(client: Any, sku: str, zone: str, charge: str) -> dict[str, Any]:
    """One InquiryPriceRunInstances call through the SDK client; the answer as the API's JSON object."""
    from tencentcloud.cvm.v20170312 import models

    request = models.InquiryPriceRunInstancesRequest()
    params: dict[str, Any] = {"Placement": {"Zone": zone}, "InstanceType": sku, "InstanceChargeType": charge}
    if charge == "PREPAID":
        params["InstanceChargePrepaid"] = {"Period": 1}
    request.from_json_string(json.dumps(params))
    answer = client.InquiryPriceRunInstances(request)
    return {"Response": json.loads(answer.to_json_string())}


def credentials() -> Any:
    """Tencent Cloud's default credential chain (TENCENTCLOUD_SECRET_ID/KEY, profile file, CVM/TKE role), for
    every Tencent refresher; the values are never echoed. Call it after the SDK imported."""
    from tencentcloud.common import credential

    try:
        return credential.DefaultCredentialProvider().get_credentials()
    except Exception:  # the chain raises TencentCloudSDKException, or OSError from its last (TKE) provider
        raise RefreshError("Tencent Cloud credentials not found (TENCENTCLOUD_SECRET_ID/KEY or a profile); "
                           "replay a saved answer with --file") from None


def fetch(specs: dict[str, Row], regions: list[str], international: bool = False, client_for: Any = None,
          now: dt.datetime | None = None) -> Refreshed:
    """DescribeZoneInstanceConfigInfos (pay-as-you-go) per region, credentials from the SDK's default chain
    (TENCENTCLOUD_SECRET_ID/KEY, profile file, CVM role)."""
    try:
        from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
        from tencentcloud.common.profile.client_profile import ClientProfile
        from tencentcloud.common.profile.http_profile import HttpProfile
        from tencentcloud.cvm.v20170312 import cvm_client, models
    except ImportError:
        raise RefreshError("tencentcloud-sdk-python is not installed: pip install 'gpuopt[tencent]'") from None
    if client_for is None:
        cred = credentials()
        http = HttpProfile(endpoint="cvm.intl.tencentcloudapi.com" if international else "cvm.tencentcloudapi.com")

        def client_for(region: str) -> Any:
            return cvm_client.CvmClient(cred, region, ClientProfile(httpProfile=http))

    stamp = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    currency = "USD" if international else "CNY"
    source = (f"Tencent Cloud CVM DescribeZoneInstanceConfigInfos ({'intl' if international else 'China'} site), "
              f"live answer fetched {stamp.isoformat()} (the API gives no price date)")
    rows: list[Row] = []
    for region in regions:
        request = models.DescribeZoneInstanceConfigInfosRequest()
        request.from_json_string(json.dumps({"Filters": [{"Name": "instance-charge-type",
                                                          "Values": ["POSTPAID_BY_HOUR"]}]}))
        try:
            answer = client_for(region).DescribeZoneInstanceConfigInfos(request)
        except TencentCloudSDKException as exc:
            raise RefreshError(f"Tencent Cloud refused DescribeZoneInstanceConfigInfos in {region} "
                               f"({exc.get_code()})") from None
        data = {"Response": json.loads(answer.to_json_string())}
        rows += parse_zone_configs(data, f"DescribeZoneInstanceConfigInfos {region}", currency,
                                   stamp.date().isoformat(), source, specs).rows
    return Refreshed("tencent", rows)

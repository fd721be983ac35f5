"""Tencent Cloud TI-ONE online-service prices through tencentcloud-sdk-python-tione -> catalog rows.

The API, as the SDK defines it (tencentcloud-sdk-python-tione 3.1.191, `tione/v20211111`; the same text is in
tccli's api.json):
- `DescribeBillingSpecs` (ChargeType, TaskType, ResourceType) -> `Specs[]` with `SpecName` (the spec id a
  service is deployed on, e.g. TI.GN7.2XLARGE32.POST), `SpecAlias`, `GpuType`, `Available`;
- `DescribeBillingSpecsPrice` (`SpecsParam[]` of {SpecName, SpecCount}) -> `SpecsPrice[]` with `SpecName`,
  `SpecCount`, `TotalCost` and `RealTotalCost`.
Units, from the SDK's field documentation: TotalCost is the list price (原价) in fen (单位：分, 0.01 CNY), and 0
when it exceeds 4.2 billion. RealTotalCost is the price after the account's discounts (优惠后的价格). The
action prices pay-as-you-go specs (用于查询按量计费计费项价格). The same SDK documents 按量计费 as the
ChargeType POSTPAID_BY_HOUR. So a row's price is TotalCost / SpecCount / 100 CNY per hour of one spec. That
reading is inferred from those two documented facts, and each row's notes say so. Only the China site is
priced, because fen is a CNY unit and the SDK gives no unit for the international site.
Rows take their hardware from the shipped TI-ONE row of the same spec (any region). A spec the catalog does
not know keeps the GpuType the spec list gives (unplannable until the GPU table knows it). The answers carry
no date: a live answer is dated by the fetch, a replay by --as-of or the file's modification time, and the
row's `source` says which.
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
from gpuopt.pricing.refresh.tencent import credentials

SERVICE = "ti-one"
FEN_PER_CNY = 100
SPEC_QUERY = {"ChargeType": "POSTPAID_BY_HOUR", "TaskType": "INFERENCE", "ResourceType": "GPU"}
HARDWARE = ("gpu", "gpu_count", "gpu_mem_gib", "vcpus", "ram_gib", "interconnect", "interconnect_basis")


def specs_by_name(shipped: list[Row]) -> dict[str, Row]:
    """Spec name -> a shipped TI-ONE row of it (the hardware columns are the same in every region)."""
    return {r["sku"]: r for r in shipped if r.get("provider") == "tencent" and r.get("service") == SERVICE}


def _response(data: Any, label: str) -> dict[str, Any]:
    response = expect_object(expect_object(data, label).get("Response", data), f"{label}: Response")
    if "Error" in response:
        error = response["Error"]
        code = error.get("Code", "?") if isinstance(error, dict) else "?"
        raise RefreshError(f"{label}: Tencent Cloud answered with an error: {code}")
    return response


def parse_spec_list(data: Any, label: str) -> dict[str, str]:
    """DescribeBillingSpecs -> spec name -> GpuType ("" when the answer gives none)."""
    specs = expect_list(_response(data, label).get("Specs"), f"{label}: Response.Specs")
    out: dict[str, str] = {}
    for i, raw in enumerate(specs):
        spec = expect_object(raw, f"{label}: Response.Specs[{i}]")
        name = spec.get("SpecName")
        if not isinstance(name, str) or not name:
            raise RefreshError(f"{label}: Response.Specs[{i}].SpecName: expected a spec name, got {name!r}")
        gpu = spec.get("GpuType")
        out[name] = gpu if isinstance(gpu, str) else ""
    return out


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise RefreshError(f"{where}: expected a positive whole number, got {value!r}")
    return value


def parse_specs_price(data: Any, label: str, region: str, as_of: str, source: str, specs: dict[str, Row],
                      gpu_types: dict[str, str] | None = None) -> Refreshed:
    """DescribeBillingSpecsPrice for one region -> one on-demand row per priced spec."""
    prices = expect_list(_response(data, label).get("SpecsPrice"), f"{label}: Response.SpecsPrice")
    rows: list[Row] = []
    notes: list[str] = []
    for i, raw in enumerate(prices):
        entry = expect_object(raw, f"{label}: Response.SpecsPrice[{i}]")
        raw_name = entry.get("SpecName")
        name = raw_name if isinstance(raw_name, str) else ""
        where = f"{label}: Response.SpecsPrice[{i}] ({name or '?'})"
        if not name:
            raise RefreshError(f"{where}.SpecName: expected a spec name, got {raw_name!r}")
        count = _count(entry.get("SpecCount"), f"{where}.SpecCount")
        if entry.get("TotalCost") == 0 and not isinstance(entry.get("TotalCost"), bool):
            notes.append(f"{name} in {region}: TotalCost 0 (the SDK: over the maximum, or not priced); not written")
            continue
        total = float(price_text(entry.get("TotalCost"), f"{where}.TotalCost"))
        real = entry.get("RealTotalCost")
        real_text = price_text(real, f"{where}.RealTotalCost") if real not in (None, 0) else "not given"
        spec = specs.get(name)
        hardware = {c: spec.get(c, "") for c in HARDWARE} if spec else {"gpu": (gpu_types or {}).get(name, "")}
        per_hour = total / count / FEN_PER_CNY
        rows.append(base_row(
            provider="tencent", service=SERVICE, sku=name, region=region, **hardware,
            price_per_hour=f"{per_hour:.10g}", currency="CNY", price_kind="on-demand", source=source, as_of=as_of,
            notes=(f"DescribeBillingSpecsPrice TotalCost {entry['TotalCost']} fen for SpecCount {count} (list price; "
                   f"account price RealTotalCost {real_text} fen); per hour because the action prices 按量计费 "
                   "(POSTPAID_BY_HOUR) specs" + ("" if spec else "; spec not in the shipped catalog"))))
    return Refreshed("ti-one", rows, notes)


def replay(path: Path, region: str | None, specs: dict[str, Row], as_of: str | None) -> Refreshed:
    data = load_json(path, "TI-ONE DescribeBillingSpecsPrice answer")
    if not region:
        raise RefreshError(f"{path}: a DescribeBillingSpecsPrice answer does not name its region: give --region R")
    how = f"dated {as_of} by --as-of" if as_of else "undated: dated by the file's modification time"
    as_of = as_of or dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
    source = f"Tencent Cloud TI-ONE DescribeBillingSpecsPrice answer saved in {path.name} ({how})"
    return parse_specs_price(data, str(path), region, as_of, source, specs)


class Refused(RefreshError):
    """Tencent Cloud refused one action in one region (an API error code, never the credentials' values)."""


def _call(client: Any, action: str, params: dict[str, Any], region: str) -> dict[str, Any]:
    """One TI-ONE action through the SDK client, its answer as the API's JSON object."""
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
    from tencentcloud.tione.v20211111 import models

    request = getattr(models, f"{action}Request")()
    request.from_json_string(json.dumps(params))
    try:
        answer = getattr(client, action)(request)
    except TencentCloudSDKException as exc:
        raise Refused(f"Tencent Cloud refused TI-ONE {action} in {region} ({exc.get_code()})") from None
    return {"Response": json.loads(answer.to_json_string())}


def fetch(specs: dict[str, Row], regions: list[str], client_for: Any = None,
          now: dt.datetime | None = None) -> Refreshed:
    """Per region: the GPU specs of online services (DescribeBillingSpecs), then their prices in one
    DescribeBillingSpecsPrice call. Credentials come from the SDK's default chain (TENCENTCLOUD_SECRET_ID/KEY,
    profile file, role) and are never echoed."""
    try:
        from tencentcloud.tione.v20211111 import tione_client
    except ImportError:
        raise RefreshError("the TI-ONE SDK is not installed: pip install 'gpuopt[tencent]'") from None
    if client_for is None:
        cred = credentials()

        def client_for(region: str) -> Any:
            return tione_client.TioneClient(cred, region)

    stamp = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    source = (f"Tencent Cloud TI-ONE DescribeBillingSpecsPrice (China site), live answer fetched {stamp.isoformat()} "
              "(the API gives no price date)")
    result = Refreshed("ti-one", [])
    refused: list[str] = []
    for region in regions:
        client = client_for(region)
        try:
            gpu_types = parse_spec_list(_call(client, "DescribeBillingSpecs", SPEC_QUERY, region),
                                        f"TI-ONE DescribeBillingSpecs {region}")
            if not gpu_types:
                result.notes.append(f"{region}: no GPU spec for online services")
                continue
            query = {"SpecsParam": [{"SpecName": name, "SpecCount": 1} for name in sorted(gpu_types)]}
            answer = _call(client, "DescribeBillingSpecsPrice", query, region)
        except Refused as exc:  # TI-ONE is not sold in every region the catalog knows: the others still count
            refused.append(str(exc))
            continue
        part = parse_specs_price(answer, f"TI-ONE DescribeBillingSpecsPrice {region}", region,
                                 stamp.date().isoformat(), source, specs, gpu_types)
        result.rows += part.rows
        result.notes += part.notes
    if refused and not result.rows:
        raise RefreshError(*refused)
    result.notes += [f"{r}; that region is skipped" for r in refused]
    return result

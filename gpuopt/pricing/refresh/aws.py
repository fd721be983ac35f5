"""AWS prices through boto3 -> catalog rows: EC2 on-demand and reserved (Price List), EC2 spot, SageMaker hosting.

- Price List `get_products` (the `pricing` client, us-east-1 endpoint) with Karpenter's filters: Linux, shared
  tenancy, no pre-installed software, capacity status Used, product family Compute Instance. Each PriceList
  element is a JSON string: product.attributes (instanceType, regionCode, gpu, ...) and terms.OnDemand /
  terms.Reserved with priceDimensions[].pricePerUnit.{USD|CNY}. Standard no-upfront reservations become
  reserved-1y / reserved-3y. A row is dated by its term's effectiveDate (else the element's publicationDate).
- EC2 `describe_spot_price_history` (latest price per AZ): the lowest AZ price per type and region becomes the
  spot row, dated by that price's Timestamp.
- SageMaker: the same get_products with ServiceCode AmazonSageMaker; hosting instances are recognised by a
  usage type containing "Host:ml." (catalog_notes.md: the attribute names were not verified against a real
  element, and no real SageMaker element exists to test against).
Instance specs (GPU model, memory, interconnect) come from the shipped row of the same SKU: the Price List names
GPUs inconsistently. Credentials come from boto3's standard chain and are never printed.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
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

__all__ = ["DEFAULT_REGIONS", "RefreshError", "fetch", "filters_for", "parse_product", "parse_spot", "replay",
           "spot_currency"]

FILTER_FIELDS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "productFamily": "Compute Instance",
}
GPU_FAMILY_PREFIXES = ("g4dn.", "g5.", "g6.", "g6e.", "gr6.", "g7.", "g7e.", "p3.", "p3dn.", "p4d.", "p4de.",
                       "p5.", "p5e.", "p5en.", "p6-b200.", "p6-b300.")
SOURCE = "AWS Price List API (pricing.get_products, {service})"
DEFAULT_REGIONS = ("us-east-1",)  # the regions a live refresh asks without --region (and the cache keeps the rest)


def filters_for(region: str) -> list[dict[str, str]]:
    fields = {"regionCode": region, **FILTER_FIELDS}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def _price(dimensions: Any, unit: str, where: str) -> tuple[str, str] | None:
    for name, dim in expect_object(dimensions, f"{where}.priceDimensions").items():
        dim = expect_object(dim, f"{where}.priceDimensions[{name}]")
        if dim.get("unit") == unit:
            per_unit = expect_object(dim.get("pricePerUnit", {}), f"{where}.priceDimensions[{name}].pricePerUnit")
            for currency in ("USD", "CNY"):
                if currency in per_unit:
                    if per_unit[currency] in ("0", "0.0000000000"):
                        return None
                    return price_text(per_unit[currency], f"{where}.pricePerUnit.{currency}"), currency
            raise RefreshError(f"{where}: pricePerUnit in {', '.join(per_unit) or 'no currency'}, "
                               "not USD or CNY")
    return None


def _date(term: dict[str, Any], item: dict[str, Any]) -> str:
    for value in (term.get("effectiveDate"), item.get("publicationDate")):
        if isinstance(value, str) and len(value) >= 10 and value[:4].isdigit():
            return value[:10]
    return ""


def _spec_fields(spec: Row | None) -> dict[str, str]:
    if not spec:
        return {}
    return {k: spec.get(k, "") for k in ("gpu", "gpu_mem_gib", "interconnect", "interconnect_basis")}


def parse_product(item: Any, specs: dict[str, Row], where: str = "PriceList element",
                  service: str = "ec2") -> list[Row]:
    """Catalog rows (on-demand, reserved-1y, reserved-3y) for one PriceList element; [] if not a GPU type."""
    item = expect_object(item, where)
    attrs = expect_object(expect_object(item.get("product", {}), f"{where}.product").get("attributes", {}),
                          f"{where}.product.attributes")
    if service == "sagemaker":
        usage = str(attrs.get("usagetype", ""))
        if "Host:ml." not in usage:
            return []
        instance = "ml." + usage.split("Host:ml.", 1)[1]
        spec = specs.get(instance) or specs.get(instance[3:])
    else:
        instance = str(attrs.get("instanceType", ""))
        spec = specs.get(instance)
    gpus = str(attrs.get("gpu", ""))
    bare = instance[3:] if instance.startswith("ml.") else instance
    if not bare.startswith(GPU_FAMILY_PREFIXES) and not (gpus and gpus != "0"):
        return []
    where = f"{where} ({instance})"
    region = str(attrs.get("regionCode", ""))
    base = base_row(
        provider="aws", service=service, sku=instance, region=region, **_spec_fields(spec),
        gpu_count=(spec or {}).get("gpu_count") or gpus, vcpus=str(attrs.get("vcpu", "")),
        ram_gib=str(attrs.get("memory", "")).replace(" GiB", "").replace(",", ""),
        source=(f"{SOURCE.format(service='AmazonSageMaker' if service == 'sagemaker' else 'AmazonEC2')} sku "
                f"{item.get('product', {}).get('sku', '')} publicationDate {item.get('publicationDate', '')}"),
        notes="" if spec else "GPU model not in the shipped catalog for this instance type",
    )
    rows = []
    terms = expect_object(item.get("terms", {}), f"{where}.terms")
    for code, term in expect_object(terms.get("OnDemand", {}), f"{where}.terms.OnDemand").items():
        term = expect_object(term, f"{where}.terms.OnDemand[{code}]")
        found = _price(term.get("priceDimensions", {}), "Hrs", f"{where}.terms.OnDemand[{code}]")
        if found:
            rows.append({**base, "price_per_hour": found[0], "currency": found[1], "price_kind": "on-demand",
                         "as_of": _date(term, item)})
    for code, term in expect_object(terms.get("Reserved", {}), f"{where}.terms.Reserved").items():
        term = expect_object(term, f"{where}.terms.Reserved[{code}]")
        ta = term.get("termAttributes", {})
        if ta.get("OfferingClass") != "standard" or ta.get("PurchaseOption") != "No Upfront":
            continue
        kind, months = {"1yr": ("reserved-1y", "12"), "3yr": ("reserved-3y", "36")}.get(
            ta.get("LeaseContractLength", ""), ("", ""))
        found = _price(term.get("priceDimensions", {}), "Hrs", f"{where}.terms.Reserved[{code}]")
        if kind and found:
            rows.append({**base, "price_per_hour": found[0], "currency": found[1], "price_kind": kind,
                         "term_months": months, "as_of": _date(term, item)})
    return rows


def parse_page(page: Any, label: str, specs: dict[str, Row], service: str = "ec2") -> list[Row]:
    rows: list[Row] = []
    for i, raw in enumerate(expect_list(expect_object(page, label).get("PriceList", []), f"{label}: PriceList")):
        where = f"{label}: PriceList[{i}]"
        try:
            item = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise RefreshError(f"{where}: not a JSON string ({exc.msg})") from None
        rows.extend(parse_product(item, specs, where, service))
    return rows


def spot_currency(region: str) -> str:
    """The currency of a region's spot prices: the history's SpotPrice carries none, and AWS China (Beijing
    cn-north-1, Ningxia cn-northwest-1, a separate partition billed by Sinnet and NWCD) prices in CNY, as the Price
    List's pricePerUnit.CNY shows for the same types; every other region in USD. A China spot price read as USD
    was 6.65 x its value (2.10 CNY for a g4dn.xlarge became 13.97 CNY, 2.7 x its on-demand price)."""
    return "CNY" if region.startswith("cn-") else "USD"


def parse_spot(history: Any, label: str, specs: dict[str, Row], region: str) -> list[Row]:
    """describe_spot_price_history -> one spot row per instance type: the lowest of the latest AZ prices."""
    latest: dict[tuple[str, str], tuple[str, str]] = {}  # (type, az) -> (timestamp, price)
    for i, raw in enumerate(expect_list(expect_object(history, label).get("SpotPriceHistory", []),
                                        f"{label}: SpotPriceHistory")):
        entry = expect_object(raw, f"{label}: SpotPriceHistory[{i}]")
        key = (str(entry.get("InstanceType", "")), str(entry.get("AvailabilityZone", "")))
        stamp = entry.get("Timestamp")
        stamp = stamp.isoformat() if isinstance(stamp, dt.datetime) else str(stamp or "")
        price = price_text(entry.get("SpotPrice"), f"{label}: SpotPriceHistory[{i}].SpotPrice")
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, price)
    best: dict[str, tuple[float, str, str, str]] = {}
    for (instance, az), (stamp, price) in latest.items():
        if instance not in best or float(price) < best[instance][0]:
            best[instance] = (float(price), price, stamp, az)
    rows = []
    for instance, (_, price, stamp, az) in sorted(best.items()):
        spec = specs.get(instance)
        if not instance.startswith(GPU_FAMILY_PREFIXES) and not (spec or {}).get("gpu"):
            continue  # the live path asks for GPU types only; a saved history may hold any (m5.large)
        rows.append(base_row(provider="aws", service="ec2", sku=instance, region=region, **_spec_fields(spec),
                             gpu_count=(spec or {}).get("gpu_count", ""), vcpus=(spec or {}).get("vcpus", ""),
                             ram_gib=(spec or {}).get("ram_gib", ""), price_per_hour=price,
                             currency=spot_currency(region),
                             price_kind="spot", as_of=stamp[:10],
                             source="AWS EC2 describe_spot_price_history (Linux/UNIX), latest price per AZ",
                             notes=f"lowest AZ price ({az}) at {stamp}; interruptible and volatile"))
    return rows


def replay(path: Path, specs: dict[str, Row], service: str, region: str | None) -> Refreshed:
    """A saved get_products page ({"PriceList": [...]}) or describe_spot_price_history answer."""
    data = load_json(path, "AWS answer")
    if isinstance(data, dict) and "SpotPriceHistory" in data:
        if not region:
            raise RefreshError(f"{path}: a spot price history names zones, not its region: give --region")
        return Refreshed("aws", parse_spot(data, str(path), specs, region))
    return Refreshed("aws", parse_page(data, str(path), specs, service))


def fetch(regions: Iterable[str], specs: dict[str, Row], client: Any = None, ec2_client_for: Any = None,
          on_page: Callable[[str, int], None] | None = None, spot: bool = True,
          sagemaker: bool = True) -> list[Row]:
    """Page through get_products (EC2, SageMaker) and the spot history for each region; one error line on any
    failure."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    except ImportError:
        raise RefreshError("boto3 is not installed: pip install 'gpuopt[aws]'") from None
    regions = list(regions)
    try:
        client = client or boto3.client("pricing", region_name="us-east-1")
        paginator = client.get_paginator("get_products")
        rows: list[Row] = []
        for service, code in (("ec2", "AmazonEC2"), ("sagemaker", "AmazonSageMaker")):
            if service == "sagemaker" and not sagemaker:
                continue
            for region in regions:
                filters = filters_for(region) if service == "ec2" else [
                    {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}]
                for number, page in enumerate(paginator.paginate(ServiceCode=code, Filters=filters), start=1):
                    rows.extend(parse_page(page, f"get_products {code} {region} page {number}", specs, service))
                    if on_page:
                        on_page(region, number)
        if spot:
            gpu_types = sorted({r["sku"] for r in rows if r["service"] == "ec2"} or
                               {s for s in specs if s.startswith(GPU_FAMILY_PREFIXES)})
            for region in regions:
                ec2 = ec2_client_for(region) if ec2_client_for else boto3.client("ec2", region_name=region)
                history: list[Any] = []
                pages = ec2.get_paginator("describe_spot_price_history").paginate(
                    InstanceTypes=gpu_types, ProductDescriptions=["Linux/UNIX"],
                    StartTime=dt.datetime.now(dt.UTC))
                for page in pages:
                    history.extend(page.get("SpotPriceHistory", []))
                rows.extend(parse_spot({"SpotPriceHistory": history}, f"describe_spot_price_history {region}",
                                       specs, region))
        return rows
    except NoCredentialsError:
        raise RefreshError("AWS credentials not found (configure them with `aws configure` or AWS_* variables); "
                           "the cache is unchanged") from None
    except ClientError as exc:
        raise RefreshError(f"AWS API refused the request: {exc.response.get('Error', {}).get('Code', '?')}"
                           ) from None
    except BotoCoreError as exc:
        raise RefreshError(f"AWS API unreachable ({type(exc).__name__}); the cache is unchanged") from None

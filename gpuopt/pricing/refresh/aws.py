"""AWS Price List API -> catalog rows (EC2 GPU instances: on-demand and Standard no-upfront reservations).

Uses boto3's `pricing` client (`get_products` through its paginator) with the filters Karpenter uses:
Linux, shared tenancy, no pre-installed software, capacity status Used, product family Compute Instance.
Each PriceList element is a JSON string: product.attributes (instanceType, regionCode, gpu, ...) and
terms.OnDemand / terms.Reserved with priceDimensions[].pricePerUnit.{USD|CNY}.
Instance specs (GPU model, memory, interconnect) come from the shipped catalog's row for the same SKU:
the Price List names GPUs inconsistently.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from typing import Any

from gpuopt.errors import GpuoptError
from gpuopt.pricing.catalog import Offering


class RefreshError(GpuoptError):
    """Refreshing failed (credentials, network, API); the shipped catalog still works."""


FILTER_FIELDS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "productFamily": "Compute Instance",
}
GPU_FAMILY_PREFIXES = ("g4dn.", "g5.", "g6.", "g6e.", "gr6.", "g7.", "g7e.", "p3.", "p3dn.", "p4d.", "p4de.",
                       "p5.", "p5e.", "p5en.", "p6-b200.", "p6-b300.")
SOURCE = "AWS Price List API (pricing.get_products, AmazonEC2)"


def filters_for(region: str) -> list[dict[str, str]]:
    fields = {"regionCode": region, **FILTER_FIELDS}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def _price(dimensions: dict[str, Any], unit: str) -> tuple[float, str] | None:
    for dim in dimensions.values():
        if dim.get("unit") == unit:
            for currency in ("USD", "CNY"):
                value = dim.get("pricePerUnit", {}).get(currency)
                if value is not None:
                    return float(value), currency
    return None


def parse_product(item: dict[str, Any], specs: dict[str, Offering], today: dt.date) -> list[dict[str, str]]:
    """Catalog rows (on-demand, reserved-1y, reserved-3y) for one PriceList element; [] if not a GPU type."""
    attrs = item.get("product", {}).get("attributes", {})
    instance = attrs.get("instanceType", "")
    gpus = attrs.get("gpu", "")
    if not instance.startswith(GPU_FAMILY_PREFIXES) and not (gpus and gpus != "0"):
        return []
    region = attrs.get("regionCode", "")
    spec = specs.get(instance)
    base = {
        "provider": "aws", "service": "ec2", "sku": instance, "region": region,
        "gpu": spec.gpu if spec else "", "gpu_count": str(spec.gpu_count if spec and spec.gpu_count else gpus),
        "gpu_mem_gib": str(spec.gpu_mem_gib or "") if spec else "",
        "vcpus": attrs.get("vcpu", ""), "ram_gib": attrs.get("memory", "").replace(" GiB", "").replace(",", ""),
        "interconnect": spec.interconnect if spec else "", "billing": "per-hour",
        "source": f"{SOURCE} sku {item.get('product', {}).get('sku', '')} publicationDate "
                  f"{item.get('publicationDate', '')}",
        "as_of": today.isoformat(),
        "notes": "" if spec else "GPU model not in the shipped catalog for this instance type",
    }
    rows = []
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        found = _price(term.get("priceDimensions", {}), "Hrs")
        if found and found[0] > 0:
            rows.append({**base, "price_per_hour": f"{found[0]:.6g}", "currency": found[1], "price_kind": "on-demand"})
    for term in item.get("terms", {}).get("Reserved", {}).values():
        ta = term.get("termAttributes", {})
        if ta.get("OfferingClass") != "standard" or ta.get("PurchaseOption") != "No Upfront":
            continue
        length = ta.get("LeaseContractLength", "")
        kind, months = {"1yr": ("reserved-1y", "12"), "3yr": ("reserved-3y", "36")}.get(length, ("", ""))
        found = _price(term.get("priceDimensions", {}), "Hrs")
        if kind and found and found[0] > 0:
            rows.append({**base, "price_per_hour": f"{found[0]:.6g}", "currency": found[1], "price_kind": kind,
                         "term_months": months})
    return rows


def fetch(regions: Iterable[str], specs: dict[str, Offering], client: Any = None,
          on_page: Callable[[str, int], None] | None = None, today: dt.date | None = None) -> list[dict[str, str]]:
    """Page through get_products for each region; raise RefreshError with one line on any failure."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    except ImportError:
        raise RefreshError("boto3 is not installed: pip install 'gpuopt[aws]'") from None
    today = today or dt.date.today()
    try:
        client = client or boto3.client("pricing", region_name="us-east-1")
        paginator = client.get_paginator("get_products")
        rows: list[dict[str, str]] = []
        for region in regions:
            pages = paginator.paginate(ServiceCode="AmazonEC2", Filters=filters_for(region))
            for number, page in enumerate(pages, start=1):
                for raw in page.get("PriceList", []):
                    item = json.loads(raw) if isinstance(raw, str) else raw
                    rows.extend(parse_product(item, specs, today))
                if on_page:
                    on_page(region, number)
        return rows
    except NoCredentialsError:
        raise RefreshError("AWS credentials not found (configure them with `aws configure` or AWS_* variables); "
                           "the shipped catalog is unchanged") from None
    except ClientError as exc:
        raise RefreshError(f"AWS Pricing API refused the request: {exc.response.get('Error', {}).get('Message', exc)}"
                           ) from None
    except BotoCoreError as exc:
        raise RefreshError(f"AWS Pricing API unreachable ({type(exc).__name__}); the shipped catalog is unchanged"
                           ) from None

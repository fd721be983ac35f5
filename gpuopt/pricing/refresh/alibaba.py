"""Alibaba Cloud's public ECS price file (no credentials) -> catalog rows for GPU instance types.

The file behind aliyun.com's price page (g.alicdn.com/aliyun/ecs-price-info/<ver>/price/download/
instancePrice.json, catalog_notes.md s6) has top-level keys currency, version, publicationDate and
pricingInfo; pricingInfo keys are RegionId::InstanceType::NetworkType::OSType::IoOptimized and values
{"hours": [{"price": "9.5326", "period": "1"}], ...} with prices as strings, CNY on the China site.
The version path changes, so the user passes --url or a downloaded --file.
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gpuopt.pricing.catalog import Offering
from gpuopt.pricing.refresh.aws import RefreshError

SOURCE = "aliyun.com ECS price file instancePrice.json"
GPU_PREFIXES = ("ecs.gn", "ecs.ebmgn", "ecs.sgn", "ecs.vgn")


def load_price_file(path: Path | None, url: str | None, timeout: float = 30.0) -> dict[str, Any]:
    try:
        if path is not None:
            text = path.read_text(encoding="utf-8")
        elif url is not None:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                text = resp.read().decode("utf-8")
        else:
            raise RefreshError("give --file PATH (a downloaded instancePrice.json) or --url URL")
        data = json.loads(text)
    except FileNotFoundError:
        raise RefreshError(f"{path}: file not found") from None
    except (urllib.error.URLError, TimeoutError) as exc:
        raise RefreshError(f"cannot download the Alibaba price file ({exc}); "
                           "the shipped catalog is unchanged") from None
    except json.JSONDecodeError as exc:
        raise RefreshError(f"the Alibaba price file is not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("pricingInfo"), dict):
        raise RefreshError("the Alibaba price file has no 'pricingInfo' object")
    return data


def parse(data: dict[str, Any], specs: dict[str, Offering], today: dt.date | None = None) -> list[dict[str, str]]:
    """Linux VPC hourly prices of GPU instance types; specs (GPU, count) from the shipped catalog's rows."""
    today = today or dt.date.today()
    currency = str(data.get("currency") or "CNY")
    published = str(data.get("publicationDate") or "")
    rows = []
    for key, value in sorted(data["pricingInfo"].items()):
        parts = key.split("::")
        if len(parts) < 4:
            continue
        region, instance, network, os_type = parts[0], parts[1], parts[2], parts[3]
        if not instance.startswith(GPU_PREFIXES) or os_type != "linux" or network != "vpc":
            continue
        hours = value.get("hours") or []
        if not hours or not hours[0].get("price"):
            continue
        price = float(hours[0]["price"])
        if price <= 0:
            continue
        spec = specs.get(instance)
        rows.append({
            "provider": "alibaba", "service": "ecs", "sku": instance, "region": region,
            "gpu": spec.gpu if spec else "", "gpu_count": str(spec.gpu_count or "") if spec else "",
            "gpu_mem_gib": str(spec.gpu_mem_gib or "") if spec else "",
            "vcpus": str(spec.vcpus or "") if spec else "", "ram_gib": str(spec.ram_gib or "") if spec else "",
            "interconnect": spec.interconnect if spec else "", "price_per_hour": f"{price:.6g}",
            "currency": currency, "price_kind": "on-demand", "billing": "per-hour",
            "source": f"{SOURCE} version {data.get('version', '?')} publicationDate {published}",
            "as_of": today.isoformat(),
            "notes": "" if spec else "instance type not in the shipped catalog: GPU model unknown",
        })
    return rows

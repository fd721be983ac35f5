"""DigitalOcean `GET /v2/sizes` (pydo `sizes.list`) -> catalog rows for GPU droplets.

Sizes with a `gpu_info` object are GPU droplets (catalog_notes.md s4; fixture digitalocean_sizes.json):
price_hourly is the self-service list price in USD for the whole droplet, `regions` the region slugs that sell
it (a row per region; none listed -> region "unknown"). The GPU is read from the shipped row of the same slug,
else from gpu_info.model through MODELS; an unmapped model is kept under its own name (unplannable until the GPU
table knows it). The answer has no date: live answers are dated by the fetch, replays by --as-of or the file's
modification time, and `source` says which.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from gpuopt.pricing.refresh import (
    Refreshed,
    RefreshError,
    Row,
    base_row,
    expect_list,
    expect_object,
    expect_text,
    load_json,
    optional_count,
    price_text,
)
from gpuopt.pricing.regions import regions

MODELS = {"nvidia_h100": "H100-SXM-80GB", "nvidia_h200": "H200-141GB", "nvidia_l40s": "L40S-48GB",
          "amd_mi300x": "MI300X-192GB", "amd_mi325x": "MI325X-256GB"}
BOARDS = {"H100-SXM-80GB": "SXM5 board (NVLink)", "H200-141GB": "SXM5 board (NVLink)",
          "MI300X-192GB": "OAM board (Infinity Fabric)", "MI325X-256GB": "OAM board (Infinity Fabric)"}


def gpu_by_slug(shipped: list[Row]) -> dict[str, str]:
    return {r["sku"]: r["gpu"] for r in shipped if r.get("provider") == "digitalocean" and r.get("gpu")}


def parse(data: Any, label: str, as_of: str, source: str, slugs: dict[str, str]) -> Refreshed:
    sizes = expect_list(expect_object(data, label).get("sizes"), f"{label}: sizes")
    rows: list[Row] = []
    for i, raw in enumerate(sizes):
        size = expect_object(raw, f"{label}: sizes[{i}]")
        info = size.get("gpu_info")
        if not info:
            continue
        slug = expect_text(size.get("slug"), f"{label}: sizes[{i}].slug")
        where = f"{label}: sizes[{i}] ({slug})"
        info = expect_object(info, f"{where}.gpu_info")
        model = expect_text(info["model"], f"{where}.gpu_info.model") if "model" in info else ""
        gpu = slugs.get(slug) or MODELS.get(model, model)
        count = info.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            raise RefreshError(f"{where}.gpu_info.count: expected a positive whole number, got {count!r}")
        price = price_text(size.get("price_hourly"), f"{where}.price_hourly")
        vram = info.get("vram")
        amount = vram.get("amount") if isinstance(vram, dict) else None
        per_gpu = amount / count if isinstance(amount, (int, float)) and not isinstance(amount, bool) else None
        memory = optional_count(size.get("memory"), f"{where}.memory")
        listed = [expect_text(r, f"{where}.regions[{k}]") for k, r in
                  enumerate(expect_list(size.get("regions", []), f"{where}.regions"))]
        unknown = [r for r in listed if r not in regions()]
        if unknown:
            raise RefreshError(f"{where}.regions: region(s) {', '.join(unknown)} not in gpuopt's region table")
        for region in listed or ["unknown"]:
            rows.append(base_row(
                provider="digitalocean", service="droplet", sku=slug, region=region, gpu=gpu, gpu_count=str(count),
                gpu_mem_gib="" if per_gpu is None else f"{per_gpu:g}",
                vcpus=optional_count(size.get("vcpus"), f"{where}.vcpus"),
                ram_gib="" if not memory else f"{float(memory) / 1024:g}",
                interconnect="nvlink" if count > 1 and gpu in BOARDS else ("pcie" if count > 1 else ""),
                interconnect_basis=("" if count == 1 else f"inferred: {BOARDS[gpu]}" if gpu in BOARDS
                                    else "inferred: PCIe cards (no board the catalog knows as NVLink)"),
                price_per_hour=price, currency="USD", price_kind="on-demand", source=source, as_of=as_of,
                notes=f"/v2/sizes price_hourly (self-service list price); {size.get('description', '')}".strip()))
    return Refreshed("digitalocean", rows)


def replay(path: Path, slugs: dict[str, str], as_of: str | None) -> Refreshed:
    data = load_json(path, "DigitalOcean /v2/sizes answer")
    how = f"dated {as_of} by --as-of" if as_of else "undated: dated by the file's modification time"
    as_of = as_of or dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
    return parse(data, str(path), as_of, f"DigitalOcean /v2/sizes answer saved in {path.name} ({how})", slugs)


def fetch(slugs: dict[str, str], client: Any = None, now: dt.datetime | None = None) -> Refreshed:
    """pydo's sizes.list with the token in DIGITALOCEAN_TOKEN (doctl's DIGITALOCEAN_ACCESS_TOKEN also works)."""
    if client is None:
        try:
            from pydo import Client
        except ImportError:
            raise RefreshError("pydo is not installed: pip install 'gpuopt[digitalocean]'") from None
        token = os.environ.get("DIGITALOCEAN_TOKEN") or os.environ.get("DIGITALOCEAN_ACCESS_TOKEN")
        if not token:
            raise RefreshError("DigitalOcean needs a token: set DIGITALOCEAN_TOKEN (or replay with --file)")
        client = Client(token=token)
    sizes: list[Any] = []
    page = 1
    try:
        while True:
            answer = expect_object(client.sizes.list(per_page=200, page=page), "DigitalOcean /v2/sizes")
            batch = expect_list(answer.get("sizes"), "DigitalOcean /v2/sizes: sizes")
            sizes.extend(batch)
            if not batch or not (answer.get("links") or {}).get("pages", {}).get("next"):
                break
            page += 1
    except RefreshError:
        raise
    except Exception as exc:  # pydo raises azure-core HttpResponseError and friends
        raise RefreshError(f"DigitalOcean API request failed ({type(exc).__name__})") from None
    stamp = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    source = f"DigitalOcean /v2/sizes (pydo), live answer fetched {stamp.isoformat()} (the API gives no price date)"
    return parse({"sizes": sizes}, "DigitalOcean /v2/sizes", stamp.date().isoformat(), source, slugs)

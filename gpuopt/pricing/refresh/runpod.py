"""RunPod's GraphQL `gpuTypes` answer -> catalog rows (per-GPU prices of pods, secure and community clouds).

The public API (POST https://api.runpod.io/graphql, catalog_notes.md s4) returns per GPU type: securePrice,
communityPrice, secureSpotPrice, communitySpotPrice and commitment prices oneWeekPrice, oneMonthPrice,
threeMonthPrice, sixMonthPrice, plus lowestPrice.availableGpuCounts. Prices are USD per GPU-hour and pods
scale linearly, so an N-GPU pod row is N x the 1-GPU price (marked DERIVED, as in the shipped catalog).

What is written:
- securePrice -> pod-secure on-demand; communityPrice -> pod-community community;
  secureSpotPrice / communitySpotPrice -> spot of the same service.
What is not: the commitment prices oneWeekPrice, oneMonthPrice, threeMonthPrice, sixMonthPrice. No source says
their unit (per GPU-hour, or the whole term per GPU): the SDK (runpod 1.12 `api/queries/gpus.py`) and the
third-party clients only name the fields, and RunPod's own two documentation examples disagree (high stock:
oneMonthPrice 200 next to securePrice 0.35, a figure per term; low stock: threeMonthPrice 0.204 next to 0.24,
a figure per hour). A price of an unknown unit is not a price, so they are checked (a value that is not a
finite positive number is an error naming the entry; null means "not offered") and reported, never written.
RunPod's answer carries no date: a live answer is dated by the fetch (and `source` says so); a replayed file
by --as-of, else by the file's modification time (and `source` says so).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import urllib.error
import urllib.request
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

ENDPOINT = "https://api.runpod.io/graphql"
QUERY = ("query { gpuTypes { id displayName memoryInGb securePrice communityPrice secureSpotPrice "
         "communitySpotPrice oneWeekPrice oneMonthPrice threeMonthPrice sixMonthPrice "
         "lowestPrice(input: {gpuCount: 1}) { availableGpuCounts } } }")
COUNTS = (1, 2, 4, 8)
DC_COUNTRIES = "US;CA;NL;SE;NO;IS;CZ;DK;FR;RO;IN;JP;SG;AU"
SXM_LIKE = ("SXM", "H200", "B200", "MI300X")
COMMITMENT_FIELDS = ("oneWeekPrice", "oneMonthPrice", "threeMonthPrice", "sixMonthPrice")


def gpu_names(shipped: list[Row]) -> dict[str, str]:
    """RunPod display name -> GPU table name, read off the shipped rows ("1x H100 SXM" -> H100-SXM-80GB)."""
    out = {}
    for r in shipped:
        if r.get("provider") == "runpod" and r.get("sku", "").startswith("1x ") and r.get("gpu"):
            out[r["sku"][3:]] = r["gpu"]
    return out


def pod_sizes(shipped: list[Row]) -> dict[str, set[int]]:
    """RunPod display name -> the pod sizes (GPUs) the shipped catalog sells of it ("4x H100 SXM" -> 4)."""
    out: dict[str, set[int]] = {}
    for r in shipped:
        count, _, name = r.get("sku", "").partition("x ")
        if r.get("provider") == "runpod" and count.isdigit() and name:
            out.setdefault(name, set()).add(int(count))
    return out


def parse(data: Any, label: str, as_of: str, source: str, names: dict[str, str],
          sizes: dict[str, set[int]] | None = None) -> Refreshed:
    """Rows for every GPU type of the answer: each price kind at every pod size in stock now
    (availableGpuCounts) and every size `sizes` says the catalog sells -- a size out of stock at the moment of
    the answer is still sold at N x the per-GPU price, and leaving its row out kept the superseded rate (a refresh
    to 3.99 per H100 SXM left the 4x and 8x pods at 3.49 per GPU, TP4 and TP8 plans 12.5 % low)."""
    body = expect_object(data, label)
    if body.get("errors"):
        raise RefreshError(f"{label}: the GraphQL answer reports errors: {json.dumps(body['errors'])[:200]}")
    types = expect_list(expect_object(body.get("data"), f"{label}: data").get("gpuTypes"), f"{label}: data.gpuTypes")
    rows: list[Row] = []
    notes: list[str] = []
    for i, raw in enumerate(types):
        entry = expect_object(raw, f"{label}: data.gpuTypes[{i}]")
        if entry.get("displayName") in (None, "") and entry.get("id") in (None, ""):
            raise RefreshError(f"{label}: data.gpuTypes[{i}]: no displayName or id")
        field = "displayName" if entry.get("displayName") not in (None, "") else "id"  # an empty name: the id
        name = expect_text(entry[field], f"{label}: data.gpuTypes[{i}].{field}")
        where = f"{label}: data.gpuTypes[{i}] ({name})"
        gpu = names.get(name, name)
        lowest = entry.get("lowestPrice")
        available = (expect_object(lowest, f"{where}.lowestPrice").get("availableGpuCounts") or [1]) if lowest else [1]
        in_stock = {n for n in COUNTS if n in expect_list(available, f"{where}.lowestPrice.availableGpuCounts")}
        sold = (sizes or {}).get(name, set())
        counts = sorted(in_stock | sold) or [1]
        if sold - in_stock and any(entry.get(f) not in (None, 0) for f in ("securePrice", "communityPrice")):
            notes.append(f"{name}: {', '.join(f'{n}x' for n in sorted(sold - in_stock))} not in stock in this answer; "
                         "priced at that many times the new per-GPU price, as RunPod bills")
        prices: list[tuple[str, str, str, str]] = []  # service, kind, field, value
        for field, service, kind in (("securePrice", "pod-secure", "on-demand"),
                                     ("communityPrice", "pod-community", "community"),
                                     ("secureSpotPrice", "pod-secure", "spot"),
                                     ("communitySpotPrice", "pod-community", "spot")):
            if entry.get(field) not in (None, 0):
                prices.append((service, kind, field, price_text(entry[field], f"{where}.{field}")))
        offered: list[str] = []
        for field in COMMITMENT_FIELDS:
            if entry.get(field) not in (None, 0):
                price_text(entry[field], f"{where}.{field}")  # still validated: a bad value is a bad answer
                offered.append(f"{field} {entry[field]}")
        if offered:
            notes.append(f"{name}: {', '.join(offered)} not written (RunPod documents no unit for its commitment "
                         "prices; docs/catalog.md)")
        board = any(s in gpu for s in SXM_LIKE)
        link, basis = ("nvlink", "inferred: SXM/OAM board (NVLink / Infinity Fabric); RunPod states no interconnect") \
            if board else ("pcie", "inferred: PCIe card; RunPod states no interconnect")
        for service, kind, field, value in prices:
            for n in counts:
                derived = n > 1
                rows.append(base_row(
                    provider="runpod", service=service, sku=f"{n}x {name}", region="global", gpu=gpu,
                    gpu_count=str(n), gpu_mem_gib=optional_count(entry.get("memoryInGb"), f"{where}.memoryInGb"),
                    interconnect=link if derived else "", interconnect_basis=basis if derived else "",
                    price_per_hour=f"{float(value) * n:.10g}", currency="USD", price_kind=kind, source=source,
                    as_of=as_of, countries=DC_COUNTRIES,
                    notes=(f"{field}; per-GPU price" + (f"; DERIVED: {n} x the 1-GPU price {value} (RunPod bills per "
                                                        "GPU and pods scale linearly)" if derived else ""))))
    return Refreshed("runpod", rows, notes)


def replay(path: Path, names: dict[str, str], as_of: str | None,
           sizes: dict[str, set[int]] | None = None) -> Refreshed:
    data = load_json(path, "RunPod gpuTypes answer")
    if as_of is None:
        as_of = dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
        source = f"RunPod GraphQL gpuTypes answer saved in {path.name} (undated: dated by the file's modification time)"
    else:
        source = f"RunPod GraphQL gpuTypes answer saved in {path.name} (dated {as_of} by --as-of)"
    return parse(data, str(path), as_of, source, names, sizes)


def fetch(names: dict[str, str], sizes: dict[str, set[int]] | None = None, now: dt.datetime | None = None,
          timeout: float = 30.0) -> Refreshed:
    """Ask the live API; the key comes from RUNPOD_API_KEY (the RunPod SDK's variable) and is never echoed."""
    key = os.environ.get("RUNPOD_API_KEY")
    if not key:
        raise RefreshError("RunPod needs an API key: set RUNPOD_API_KEY (or replay a saved answer with --file)")
    request = urllib.request.Request(ENDPOINT, data=json.dumps({"query": QUERY}).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            data = json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise RefreshError(f"RunPod API refused the request (HTTP {exc.code})") from None
    except (urllib.error.URLError, TimeoutError) as exc:
        raise RefreshError(f"RunPod API unreachable ({type(exc).__name__})") from None
    except json.JSONDecodeError:
        raise RefreshError("RunPod API answered with something that is not JSON") from None
    stamp = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    source = f"RunPod GraphQL gpuTypes, live answer fetched {stamp.isoformat()} (RunPod gives no price date)"
    return parse(data, ENDPOINT, stamp.date().isoformat(), source, names, sizes)

"""Flat exports of a plan: CSV (one row per deployment, the JSON deployment fields flattened) and a
FOCUS-shaped projected cost file (FinOps Open Cost and Usage Specification column names, one row per
deployment for one 730-hour month)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from gpuopt.planner.plan import HOURS_PER_MONTH, Deployment, Plan
from gpuopt.pricing.regions import region_info
from gpuopt.reports.formatting import csv_cell

FOCUS_COLUMNS = (
    "BillingCurrency", "ChargeCategory", "ChargeDescription", "ChargePeriodStart", "ChargePeriodEnd",
    "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "ListCost",
    "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName", "RegionId", "RegionName",
    "ResourceType", "ServiceCategory", "ServiceName", "SkuId", "Tags",
)
COMMITTED = ("reserved", "savings-plan", "subscription", "capacity-block", "contract")


def _frame(rows: list[dict[str, Any]], columns: list[str] | tuple[str, ...]) -> str:
    """CSV text of the rows; every string cell a spreadsheet would evaluate is neutralised (`csv_cell`),
    numbers are written as numbers."""
    import pandas as pd

    safe = [{k: csv_cell(v) for k, v in row.items()} for row in rows]
    frame = pd.DataFrame.from_records(safe, columns=list(columns))
    return str(frame.to_csv(index=False, lineterminator="\n"))


def render_csv(plan: Plan) -> str:
    import pandas as pd

    records = [d.model_dump(mode="json") for d in plan.deployments]
    economics = {u.workload: u for u in plan.unit_economics}
    for r in records:
        r["tags"] = json.dumps(r["tags"], sort_keys=True)
        u = economics.get(r["workload"])
        for key in UNIT_COLUMNS:
            r[key] = getattr(u, key.removeprefix("workload_"), None) if u else None
    if not records:
        return ",".join(_deployment_columns()) + "\n"
    flat = pd.json_normalize(records, sep="_")
    return _frame([{str(k): v for k, v in row.items()} for row in flat.to_dict(orient="records")],
                  _deployment_columns())


UNIT_COLUMNS = ("workload_cost_per_request", "workload_cost_per_million_output_tokens",
                "workload_cost_per_million_input_tokens")


def _deployment_columns() -> list[str]:
    """The JSON deployment fields flattened, then the unit economics of the deployment's workload."""
    cols: list[str] = []
    for name, field in Deployment.model_fields.items():
        sub = getattr(field.annotation, "model_fields", None)
        if sub:
            cols += [f"{name}_{s}" for s in sub]
        else:
            cols.append(name)
    return cols + list(UNIT_COLUMNS)


def pricing_category(price_kind: str) -> str:
    """FOCUS PricingCategory: Standard (on-demand, community), Dynamic (spot), Committed (commitments)."""
    if price_kind == "spot":
        return "Dynamic"
    if price_kind.startswith(COMMITTED):
        return "Committed"
    return "Standard"


def charge_period(plan: Plan) -> tuple[str, str]:
    """The projected month: from the first day of the month after the plan date, 730 hours long."""
    day = dt.date.fromisoformat(plan.as_of_date)
    start = dt.datetime(day.year + (day.month == 12), day.month % 12 + 1, 1, tzinfo=dt.UTC)
    end = start + dt.timedelta(hours=HOURS_PER_MONTH)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")


def render_focus(plan: Plan) -> str:
    start, end = charge_period(plan)
    economics = {u.workload: u for u in plan.unit_economics}
    rows = []
    for d in plan.deployments:
        u = economics.get(d.workload)
        unit = "" if u is None else (f"; workload {u.cost_per_million_output_tokens:,.2f} {plan.currency} per 1M "
                                     f"output tokens, {u.cost_per_request:,.6f} per request")
        hours = round(d.instances * HOURS_PER_MONTH, 4)
        contracted_unit = d.instance_price_per_hour
        list_unit = d.list_price_per_hour if d.list_price_per_hour is not None else contracted_unit
        info = region_info(d.region)
        rows.append({
            "BillingCurrency": plan.currency,
            "ChargeCategory": "Usage",
            "ChargeDescription": f"projected: {d.replicas} x {d.workload} ({d.gpu}, TP={d.tensor_parallel}, "
                                 f"{d.weight_precision}){unit}",
            "ChargePeriodStart": start,
            "ChargePeriodEnd": end,
            "ConsumedQuantity": hours,
            "ConsumedUnit": "Hours",
            "ContractedCost": round(contracted_unit * hours, 4),
            "ContractedUnitPrice": contracted_unit,
            "EffectiveCost": round(d.cost_per_hour * HOURS_PER_MONTH, 4),
            "ListCost": round(list_unit * hours, 4),
            "ListUnitPrice": list_unit,
            "PricingCategory": pricing_category(d.price_kind),
            "PricingQuantity": hours,
            "PricingUnit": "Hours",
            "ProviderName": d.provider,
            "RegionId": d.region,
            "RegionName": f"{d.region} ({info.country})" if info.country else d.region,
            "ResourceType": f"GPU instance ({d.gpu} x{d.gpus_per_instance})",
            "ServiceCategory": "Compute",
            "ServiceName": d.service,
            "SkuId": d.sku,
            "Tags": json.dumps({"gpuopt-workload": d.workload, **d.tags}, sort_keys=True),
        })
    return _frame(rows, FOCUS_COLUMNS)

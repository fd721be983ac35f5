"""Flat exports of a plan: CSV (one row per deployment, the JSON deployment fields flattened) and FOCUS 1.0
projected cost rows for the calendar month after the plan date (reports/focus.py says what the rows mean)."""

from __future__ import annotations

import datetime as dt
import json
import typing
from dataclasses import replace
from typing import Any

from gpuopt.inputs.capacity import RENEWABLE, TERM_MONTHS
from gpuopt.planner.plan import Deployment, Plan
from gpuopt.pricing.regions import region_info
from gpuopt.reports.focus import FOCUS_COLUMNS, Charge, add_months, is_commitment, pricing_category, rows
from gpuopt.reports.formatting import csv_cell

__all__ = ["FOCUS_COLUMNS", "pricing_category", "render_csv", "render_focus"]



def _frame(rows: list[dict[str, Any]], columns: list[str] | tuple[str, ...], integers: tuple[str, ...] = ()) -> str:
    """CSV text of the rows; every string cell a spreadsheet would evaluate is neutralised (`csv_cell`),
    numbers are written as numbers. `integers` stay integers with empty cells beside them (pandas makes such a
    column float: a term of 12 months was written 12.0)."""
    import pandas as pd

    safe = [{k: csv_cell(v) for k, v in row.items()} for row in rows]
    frame = pd.DataFrame.from_records(safe, columns=list(columns))
    for column in integers:
        frame[column] = frame[column].astype("Int64")
    return str(frame.to_csv(index=False, lineterminator="\n"))


def budget_columns(plan: Plan) -> dict[str, Any]:
    """The plan's budget verdict as flat columns (the same on every row; empty without a budget)."""
    b = plan.budget
    return {"budget_max_monthly": None if b is None else b.max_monthly_in_plan_currency,
            "budget_margin": None if b is None else b.margin,
            "budget_over": None if b is None else b.over}


def render_csv(plan: Plan) -> str:
    import pandas as pd

    records = [d.model_dump(mode="json") for d in plan.deployments]
    economics = {u.workload: u for u in plan.unit_economics}
    for r in records:
        r["tags"] = json.dumps(r["tags"], sort_keys=True)
        r["pinned_countries"] = ";".join(r.get("pinned_countries") or ()) or None  # the catalog's own form
        for name in _optional_nested():  # flattened here: json_normalize leaves a None one as one empty cell
            value = r[name]
            r[name] = None if value is None else json.dumps(value, sort_keys=True)
            for key in _optional_nested()[name]:
                r[f"{name}_{key}"] = None if value is None else value[key]
        u = economics.get(r["workload"])
        for key in UNIT_COLUMNS:
            r[key] = getattr(u, key.removeprefix("workload_"), None) if u else None
    if not records:
        return ",".join(_deployment_columns()) + "\n"
    flat = pd.json_normalize(records, sep="_")
    return _frame([{**{str(k): v for k, v in row.items()}, **budget_columns(plan), **plan_columns(plan)}
                   for row in flat.to_dict(orient="records")], _deployment_columns())


def plan_columns(plan: Plan) -> dict[str, str]:
    """What every money figure of the row is in and priced at (the same on every row): a CSV opened on its own
    said neither its currency nor its FX."""
    return {"currency": plan.currency, "fx": plan.fx, "fx_as_of": plan.fx_as_of,
            "catalog_as_of": plan.catalog_as_of, "oldest_price_as_of": plan.oldest_price_as_of}


BUDGET_COLUMNS = ("budget_max_monthly", "budget_margin", "budget_over")  # in the plan currency, per month
UNIT_COLUMNS = ("workload_cost_per_request", "workload_cost_per_million_output_tokens",
                "workload_cost_per_million_input_tokens")


# Deployment fields added after the CSV's column order was first published: they go after every older column,
# so a reader that takes columns by position keeps reading the same ones.
ADDED_COLUMNS = ("memory_lora_gib",)
PLAN_COLUMNS = ("currency", "fx", "fx_as_of", "catalog_as_of", "oldest_price_as_of")  # plan_columns, then
# the optional nested fields flattened, then these deployment fields (a commitment's on-demand twin prices, the
# countries a global offering must be pinned to: "US;CA", empty when none)
LATE_COLUMNS = ("on_demand_price_per_hour", "on_demand_list_price_per_hour", "pinned_countries")


def _optional_nested() -> dict[str, list[str]]:
    """Deployment fields that are an optional nested model (at_planned_load, capacity) -> their sub-fields.
    Their own columns were published empty (never flattened); they now hold the object as JSON and the
    flattened `name_sub` columns go at the end."""
    out: dict[str, list[str]] = {}
    for name, field in Deployment.model_fields.items():
        models = [a for a in typing.get_args(field.annotation) if hasattr(a, "model_fields")]
        if models:
            out[name] = list(models[0].model_fields)
    return out


def _deployment_columns() -> list[str]:
    """The JSON deployment fields flattened, then the unit economics of the deployment's workload, then the
    columns added since: ADDED_COLUMNS, the plan's currency, FX and price dates (PLAN_COLUMNS), the optional
    nested fields flattened, LATE_COLUMNS."""
    cols: list[str] = []
    for name, field in Deployment.model_fields.items():
        sub = getattr(field.annotation, "model_fields", None)
        if sub:
            cols += [f"{name}_{s}" for s in sub]
        else:
            cols.append(name)
    cols = [c for c in cols if c not in ADDED_COLUMNS and c not in LATE_COLUMNS]
    nested = [f"{name}_{s}" for name, subs in _optional_nested().items() for s in subs]
    return (cols + list(UNIT_COLUMNS) + list(BUDGET_COLUMNS) + list(ADDED_COLUMNS) + list(PLAN_COLUMNS) + nested
            + list(LATE_COLUMNS))


def charge_month(plan: Plan) -> dt.date:
    """The projected month: the calendar month after the plan date."""
    return add_months(dt.date.fromisoformat(plan.as_of_date), 1)


def render_focus(plan: Plan) -> str:
    """FOCUS rows of the projected month (see reports/focus.py): per deployment a Usage row, and for a
    commitment its monthly Purchase row too."""
    month = charge_month(plan)
    economics = {u.workload: u for u in plan.unit_economics}
    out: list[dict[str, Any]] = []
    for d in plan.deployments:
        u = economics.get(d.workload)
        unit = "" if u is None else (f"; workload {u.cost_per_million_output_tokens:,.2f} {plan.currency} per 1M "
                                     f"output tokens, {u.cost_per_request:,.6f} per request")
        info = region_info(d.region, d.provider)
        committed = is_commitment(d.price_kind)
        charge = Charge(
            month=month, currency=plan.currency, provider=d.provider, service=d.service, sku=d.sku, region=d.region,
            region_name=f"{d.region} ({info.country})" if info.country else d.region,
            price_kind=d.price_kind,
            instances=d.instances, unit_price=d.instance_price_per_hour,
            list_unit_price=d.list_price_per_hour if d.list_price_per_hour is not None else d.instance_price_per_hour,
            description=f"projected: {d.replicas} x {d.workload} ({d.gpu}, TP={d.tensor_parallel}, "
                        f"{d.weight_precision}){unit}",
            tags={**d.tags, "gpuopt-workload": d.workload},  # gpuopt's own key last: a user tag cannot overwrite it
            commitment_id=f"gpuopt:{d.provider}:{d.sku}:{d.region}:{d.price_kind}" if committed else None,
            commitment_name=f"{d.price_kind} {d.sku} ({d.region})" if committed else None,
            monthly_fee=d.price_kind in RENEWABLE, month_charge=d.cost_per_month,
            covered_prices=None if d.on_demand_price_per_hour is None else (
                d.on_demand_price_per_hour, d.on_demand_list_price_per_hour or d.on_demand_price_per_hour))
        # the rest of a term commitment's obligation: its Purchase rows, one per month after the projected one
        # (QA: a 3-year reservation exported one month of 36); a monthly subscription renews month by month.
        # Every month of a term says which it is, the projected first one too (QA: "month 2 of 12" came first)
        term = 1 if d.price_kind in RENEWABLE else TERM_MONTHS.get(d.price_kind, 1) if committed else 1
        base = charge.description
        for m in range(term):
            if term > 1:
                charge = replace(charge, month=add_months(month, m), usage=m == 0,
                                 description=f"{base}; month {m + 1} of {term} of the term")
            out += rows(charge)
    if plan.budget is not None:  # FOCUS custom columns (x_ prefix): the budget the projection was checked against
        extra = {"x_BudgetMonthly": plan.budget.max_monthly_in_plan_currency, "x_BudgetMargin": plan.budget.margin}
        return _frame([{**row, **extra} for row in out], (*FOCUS_COLUMNS, *extra))
    return _frame(out, FOCUS_COLUMNS)

"""Renderers of a CapacityPlan (the purchase schedule of `gpuopt plan`)."""

from __future__ import annotations

import datetime as dt
import io
import json

from gpuopt.planner.capacity import CapacityPlan
from gpuopt.reports.formatting import money
from gpuopt.reports.tabular import _frame, pricing_category


def render_capacity_markdown(plan: CapacityPlan) -> str:
    c = plan.currency
    out = ["# gpuopt capacity plan", ""]
    if plan.status != "optimal":
        return "\n".join(out + ["**Infeasible**", "", *[f"- {e}" for e in plan.explanation], ""])
    out += ["## Summary", "", "| | |", "|---|---|",
            f"| horizon | {plan.horizon} |",
            f"| total cost | {money(plan.total_cost, c)} |",
            f"| all on-demand | {money(plan.all_on_demand_cost, c)} |",
            f"| savings | {money(plan.savings, c)} |",
            f"| commitments charged after the horizon | {money(plan.committed_after_horizon, c)} |",
            f"| commitment charge | {plan.charge} (full-term: every commitment is paid for its whole term) |",
            f"| headroom | {plan.headroom:g} |",
            f"| oldest chosen price | {plan.oldest_price_as_of or '?'} |",
            f"| FX | {plan.fx or '?'} |", "",
            "## Schedule", "",
            "| period | demand | capacity | cost | buy or rent |", "|---|---|---|---|---|"]
    for p in plan.periods:
        buys = "; ".join(f"{x.count} x {x.provider} {x.sku} ({x.region}) {x.price_kind}"
                         + (f", break-even {x.break_even_utilisation:.0%}" if x.break_even_utilisation else "")
                         for x in p.purchases) or "-"
        demand = ", ".join(f"{w} {v:g}" for w, v in p.demand.items())
        cap = ", ".join(f"{w} {v:.2f}" for w, v in p.capacity.items())
        out.append(f"| {p.period} | {demand} | {cap} | {p.cost:,.2f} | {buys} |")
    out += ["", "Capacity is the sustainable load of the planned replicas before headroom. Break-even: the share of "
            "its term a commitment must be used to beat on-demand for the same SKU and region.", ""]
    if plan.scenarios:
        out += ["## Scenarios", "", "| scenario | demand x | total cost | shortfall (per period) | idle (per period) |",
                "|---|---|---|---|---|"]
        for s in plan.scenarios:
            short = "; ".join(f"{w}: {', '.join(f'{v:g}' for v in vals)}" for w, vals in s.shortfall.items())
            idle = "; ".join(f"{w}: {', '.join(f'{v:g}' for v in vals)}" for w, vals in s.idle.items())
            out.append(f"| {s.name} | {s.multiplier:g} | {money(s.total_cost, c)} | {short} | {idle} |")
        out += ["", "Scenario cost: the schedule's commitments kept, the rest re-planned for that demand. Shortfall "
                "and idle capacity: of the base plan's replicas (with headroom).", ""]
    if plan.sensitivity is not None:
        sens = plan.sensitivity
        out += ["## Sensitivity", "",
                f"The planned replicas carry {sens.traffic_multiplier_limit:g} x the demand in every period within "
                f"the targets; the next schedule, for more, costs {money(sens.next_plan_cost, c)}.", "",
                "| TPOT targets x | status | total cost |", "|---|---|---|"]
        out += [f"| {x.tpot_factor:g} | {x.status} | {money(x.cost, c)} |" for x in sens.tpot_sweep]
        out.append("")
    if plan.warnings:
        out += ["## Warnings", "", *[f"- {w}" for w in plan.warnings], ""]
    return "\n".join(out)


def render_capacity_table(plan: CapacityPlan) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, width=160, color_system=None, markup=False)
    c = plan.currency
    if plan.status != "optimal":
        con.print("INFEASIBLE: " + "; ".join(plan.explanation))
        return buf.getvalue()
    con.print(f"Capacity plan over {plan.horizon}: {money(plan.total_cost, c)} (all on-demand "
              f"{money(plan.all_on_demand_cost, c)}, savings {money(plan.savings, c)}); commitments "
              f"charged {plan.charge}; oldest chosen price {plan.oldest_price_as_of or '?'}; FX {plan.fx or '?'}")
    table = Table(title="Schedule", title_justify="left")
    for col in ("period", "demand", "cost", "count", "offering", "kind", "break-even", "line cost"):
        table.add_column(col, overflow="fold")
    for p in plan.periods:
        demand = ", ".join(f"{w} {v:g}" for w, v in p.demand.items())
        for i, x in enumerate(p.purchases or [None]):
            table.add_row(p.period if i == 0 else "", demand if i == 0 else "", f"{p.cost:,.2f}" if i == 0 else "",
                          str(x.count) if x else "-", f"{x.provider} {x.sku} ({x.region})" if x else "",
                          x.price_kind if x else "",
                          f"{x.break_even_utilisation:.0%}" if x and x.break_even_utilisation else "",
                          f"{x.cost:,.2f}" if x else "")
    con.print(table)
    if plan.sensitivity is not None:
        sv = plan.sensitivity
        sweep = ", ".join(f"x{x.tpot_factor:g}: {money(x.cost, c)}" for x in sv.tpot_sweep)
        con.print(f"Sensitivity: carries {sv.traffic_multiplier_limit:g} x the demand; next schedule "
                  f"{money(sv.next_plan_cost, c)}; cost vs TPOT targets: {sweep}")
    for s in plan.scenarios:
        short = sorted({plan.periods[t].period for v in s.shortfall.values() for t, x in enumerate(v) if x > 0})
        con.print(f"scenario {s.name} (demand x{s.multiplier:g}): {money(s.total_cost, c)}"
                  + (f"; the base plan's replicas fall short in {', '.join(short)}" if short else ""))
    return buf.getvalue()


def render_capacity_csv(plan: CapacityPlan) -> str:
    rows = []
    for p in plan.periods:
        for x in p.purchases:
            rows.append({"period": p.period, **{k: v for k, v in x.model_dump().items() if k != "workloads"},
                         "workloads": ";".join(x.workloads), "period_cost": p.cost})
    columns = ["period", "provider", "service", "sku", "region", "gpu", "gpus_per_instance", "price_kind", "count",
               "committed", "term_months", "price_per_hour", "hours", "cost", "break_even_utilisation", "workloads",
               "period_cost"]
    return _frame(rows, columns)


def _add_months(day: dt.date, months: int) -> dt.date:
    total = day.month - 1 + months
    return dt.date(day.year + total // 12, total % 12 + 1, 1)


def _period_bounds(label: str, index: int, months: int, as_of: str) -> tuple[str, str]:
    """Start and end timestamps of a period: from its label (2027Q1, 2027-01), else counted from the first
    day of the month after the plan date."""
    if len(label) == 6 and label[4] == "Q":
        start = dt.date(int(label[:4]), 3 * (int(label[5]) - 1) + 1, 1)
    elif len(label) == 7 and label[4] == "-":
        start = dt.date(int(label[:4]), int(label[5:]), 1)
    else:
        start = _add_months(dt.date.fromisoformat(as_of), 1 + index * months)
    end = _add_months(start, months)
    return f"{start.isoformat()}T00:00:00Z", f"{end.isoformat()}T00:00:00Z"


def render_capacity_focus(plan: CapacityPlan) -> str:
    """One FOCUS row per purchase: rented instances for their period, commitments for their whole charge."""
    from gpuopt.pricing.regions import region_info
    from gpuopt.reports.tabular import FOCUS_COLUMNS

    rows = []
    months = plan.months_per_period
    for index, p in enumerate(plan.periods):
        start, end = _period_bounds(p.period, index, months, plan.as_of_date)
        for x in p.purchases:
            hours = x.hours
            info = region_info(x.region)
            rows.append({
                "BillingCurrency": plan.currency, "ChargeCategory": "Purchase" if x.committed else "Usage",
                "ChargeDescription": f"{p.period}: {x.count} x {x.sku} {x.price_kind}",
                "ChargePeriodStart": start, "ChargePeriodEnd": end,
                "ConsumedQuantity": hours, "ConsumedUnit": "Hours", "ContractedCost": x.cost,
                "ContractedUnitPrice": x.price_per_hour, "EffectiveCost": x.cost, "ListCost": x.cost,
                "ListUnitPrice": x.price_per_hour, "PricingCategory": pricing_category(x.price_kind),
                "PricingQuantity": hours, "PricingUnit": "Hours", "ProviderName": x.provider, "RegionId": x.region,
                "RegionName": f"{x.region} ({info.country})" if info.country else x.region,
                "ResourceType": f"GPU instance ({x.gpu} x{x.gpus_per_instance})", "ServiceCategory": "Compute",
                "ServiceName": x.service, "SkuId": x.sku,
                "Tags": json.dumps({"gpuopt-workloads": ",".join(x.workloads)}, sort_keys=True)})
    return _frame(rows, FOCUS_COLUMNS)


def render_capacity_json(plan: CapacityPlan) -> str:
    return plan.model_dump_json(indent=2) + "\n"  # as the solve plan (reports/plan_json.py)


def render_capacity_html(plan: CapacityPlan) -> str:
    import markdown

    body = markdown.markdown(render_capacity_markdown(plan), extensions=["tables"])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpuopt capacity plan</title>"
            "<style>table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style></head>"
            f"<body>{body}</body></html>\n")


def render_capacity(plan: CapacityPlan, fmt: str) -> str:
    """Kept for callers: the formats of a capacity plan are listed once, in reports/registry.py."""
    from gpuopt.reports.registry import render_capacity_plan

    return render_capacity_plan(plan, fmt)

"""Renderers of a CapacityPlan (the purchase schedule of `gpuopt plan`)."""

from __future__ import annotations

import datetime as dt
import io

from gpuopt.planner.capacity import CapacityPlan
from gpuopt.reports.focus import FOCUS_COLUMNS, Charge, add_months, is_commitment, rows
from gpuopt.reports.formatting import money
from gpuopt.reports.tabular import _frame

FORMATS = ("table", "json", "markdown", "html", "csv", "focus")


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
            f"| headroom | {plan.headroom:g} |", "",
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
              f"charged {plan.charge}")
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


def months_per_period(plan: CapacityPlan) -> int:
    """From the typed field; plans saved before it existed say it in their horizon text."""
    if plan.months_per_period is not None:
        return plan.months_per_period
    return 3 if "quarter" in plan.horizon else 1


def first_month(plan: CapacityPlan) -> dt.date:
    """The first calendar month of the horizon: from the first period's label (2027Q1, 2027-01), else the
    month after the plan date."""
    label = plan.periods[0].period if plan.periods else ""
    if len(label) == 6 and label[4] == "Q":
        return dt.date(int(label[:4]), 3 * (int(label[5]) - 1) + 1, 1)
    if len(label) == 7 and label[4] == "-":
        return dt.date(int(label[:4]), int(label[5:]), 1)
    return add_months(dt.date.fromisoformat(plan.as_of_date), 1)


def render_capacity_focus(plan: CapacityPlan) -> str:
    """FOCUS rows per calendar month (reports/focus.py): rented instances as Usage in their period's months;
    each commitment as a monthly Purchase row over its whole term (after the horizon too) and, inside the
    horizon, a Usage row with its amortised cost. EffectiveCost per period sums to the period's cost."""
    from gpuopt.planner.commitments import term_months
    from gpuopt.pricing.regions import region_info

    mpp = months_per_period(plan)
    start = first_month(plan)
    horizon_months = len(plan.periods) * mpp
    out: list[dict[str, object]] = []
    for index, p in enumerate(plan.periods):
        for x in p.purchases:
            info = region_info(x.region)
            region_name = f"{x.region} ({info.country})" if info.country else x.region
            committed = is_commitment(x.price_kind) and x.committed
            months = range(term_months(x.price_kind, mpp)) if committed else range(mpp)
            for m in months:
                k = index * mpp + m
                out += rows(Charge(
                    month=add_months(start, k), currency=plan.currency, provider=x.provider, service=x.service,
                    sku=x.sku, region=x.region, region_name=region_name,
                    resource_type=f"GPU instance ({x.gpu} x{x.gpus_per_instance})", price_kind=x.price_kind,
                    instances=x.count, unit_price=x.price_per_hour, list_unit_price=x.price_per_hour,
                    description=f"{p.period}: {x.count} x {x.sku} {x.price_kind}"
                                + (f", month {m + 1} of {len(months)}" if committed else ""),
                    tags={"gpuopt-workloads": ",".join(x.workloads), "gpuopt-period": p.period},
                    commitment_id=f"gpuopt:{x.provider}:{x.sku}:{x.region}:{x.price_kind}:{p.period}"
                    if committed else None,
                    commitment_name=f"{x.count} x {x.price_kind} {x.sku} ({x.region}) from {p.period}"
                    if committed else None,
                    usage=k < horizon_months))
    out.sort(key=lambda r: (str(r["ChargePeriodStart"]), str(r["ChargeCategory"]), str(r["SkuPriceId"])))
    return _frame(out, FOCUS_COLUMNS)


def render_capacity(plan: CapacityPlan, fmt: str) -> str:
    if fmt == "json":
        return plan.model_dump_json(indent=2) + "\n"  # as the solve plan (reports/plan_json.py)
    if fmt == "markdown":
        return render_capacity_markdown(plan)
    if fmt == "html":
        import markdown

        body = markdown.markdown(render_capacity_markdown(plan), extensions=["tables"])
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpuopt capacity plan</title>"
                "<style>table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style></head>"
                f"<body>{body}</body></html>\n")
    if fmt == "csv":
        return render_capacity_csv(plan)
    if fmt == "focus":
        return render_capacity_focus(plan)
    return render_capacity_table(plan)

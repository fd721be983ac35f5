"""Renderers of a CapacityPlan (the purchase schedule of `gpuopt plan`): what a reviewer signs.

Per period: demand and capacity with their units, the cost and its split by price kind, what is bought and
which commitments are already running, and what runs on them (model, GPU, TP, precision, `vllm serve`).
In total: the cost, the obligation that runs past the horizon whatever the charge mode, and the savings
against renting on demand on both bases (planner/commitments.py). Every user string is escaped (`md`).
"""

from __future__ import annotations

import datetime as dt
import io
import json

from gpuopt.inputs.capacity import RENEWABLE
from gpuopt.planner.capacity import CapacityPlan, PeriodLine, PurchaseLine
from gpuopt.planner.capacity_detail import active_commitments, commitment_use
from gpuopt.planner.commitments import CHARGE_MODES, CommitmentSpan
from gpuopt.reports.focus import FOCUS_COLUMNS, Charge, add_months, is_commitment, rows
from gpuopt.reports.formatting import console, md, md_code_fence, money, terminal_width
from gpuopt.reports.tabular import _frame

WIDE_TABLE = 140  # below this terminal width the schedule is listed one block per period
UNITS = {"requests_per_second": "req/s", "concurrency": "concurrent requests"}


def _unit(plan: CapacityPlan, workload: str) -> str:
    return UNITS.get(plan.demand_units.get(workload, ""), plan.demand_units.get(workload, "") or "load")


def _load(plan: CapacityPlan, values: dict[str, float], digits: int) -> str:
    return ", ".join(f"{w} {v:,.{digits}f} {_unit(plan, w)}" for w, v in values.items())


def _span(c: CommitmentSpan) -> str:
    return f"{c.count} x {c.provider} {c.sku} ({c.region}) {c.price_kind} from {c.bought}"


def _charge_text(plan: CapacityPlan) -> str:
    return CHARGE_MODES.get(plan.charge, plan.charge)


def _active(plan: CapacityPlan, index: int) -> list[CommitmentSpan]:
    """Commitments bought before this period and still running in it."""
    mpp = months_per_period(plan)
    return [c for c in active_commitments(plan.commitments, index, mpp) if c.start_month < index * mpp]


def _bought(p: PeriodLine) -> str:
    return "; ".join(f"{x.count} x {x.provider} {x.sku} ({x.region}) {x.price_kind}"
                     + (f", break-even {x.break_even_utilisation:.0%}" if x.break_even_utilisation else "")
                     for x in p.purchases) or "-"


def _summary_rows(plan: CapacityPlan) -> list[tuple[str, str]]:
    c = plan.currency
    s = plan.commitment_summary
    out = [("horizon", plan.horizon),
           (f"total cost (charge: {plan.charge})", money(plan.total_cost, c)),
           ("all on-demand, same demand", money(plan.all_on_demand_cost, c) if plan.all_on_demand_cost is not None
            else plan.all_on_demand_note or "-")]
    if plan.all_on_demand_cost is not None and plan.all_on_demand_note.startswith("a reference figure"):
        out.append(("all on-demand reference", plan.all_on_demand_note))
    if s is not None:
        out += [("cost inside the horizon (commitments amortised)", money(s.cost_inside_horizon, c)),
                ("commitments owed after the horizon (any charge mode)", money(s.obligation_after_horizon, c)),
                ("savings, amortised basis (like for like)", money(s.savings_amortised, c)),
                ("savings, cash basis (with the obligation after the horizon)", money(s.savings_cash, c))]
    else:
        out += [("savings", money(plan.savings, c)),
                ("commitments charged after the horizon", money(plan.committed_after_horizon, c))]
    out += [("commitment charge", f"{plan.charge}: {_charge_text(plan)}"),
            ("headroom", f"{plan.headroom:g}"), ("currency", c), ("plan date", plan.as_of_date),
            ("calibration profile", plan.profile or "none (shipped calibration)"),
            ("oldest chosen price", plan.oldest_price_as_of or "-"),
            ("catalog date (newest price)", plan.catalog_as_of or "-"), ("FX", plan.fx or "-")]
    return out


def render_capacity_markdown(plan: CapacityPlan) -> str:
    c = md(plan.currency)
    out = ["# gpuopt capacity plan", ""]
    if plan.status != "optimal":
        return "\n".join(out + ["**Infeasible**", "", *[f"- {md(e)}" for e in plan.explanation], ""]
                         + _warnings_section(plan.warnings))
    out += ["## Summary", "", "| | |", "|---|---|", *[f"| {md(k)} | {md(v)} |" for k, v in _summary_rows(plan)], ""]
    if plan.commitment_summary is not None:
        out += [f"Savings bases: {md(plan.commitment_summary.basis)}.", ""]
    out += ["## Schedule", "",
            f"| period | demand | capacity (before headroom) | cost ({c}) | cost by price kind | bought | "
            "commitments already running |", "|---|---|---|---|---|---|---|"]
    for index, p in enumerate(plan.periods):
        split = ", ".join(f"{k} {v:,.2f}" for k, v in p.cost_by_price_kind.items()) or "-"
        running = "; ".join(_span(x) for x in _active(plan, index)) or "-"
        out.append(f"| {md(p.period)} | {md(_load(plan, p.demand, 2))} | {md(_load(plan, p.capacity, 2))} | "
                   f"{p.cost:,.2f} | {md(split)} | {md(_bought(p))} | {md(running)} |")
    out += ["", "Capacity is the sustainable load of the planned replicas before headroom. Break-even: the share of "
            "its term a commitment must be used to beat on-demand for the same SKU and region.", ""]
    if any(p.running for p in plan.periods):
        out += ["## What runs", "", "| period | workload | model | replicas | offering | price kind | GPU x per "
                "instance | TP | PP | weights | KV cache | capacity |", "|---" * 12 + "|"]
        for p in plan.periods:
            for r in p.running:
                out.append(f"| {md(p.period)} | {md(r.workload)} | {md(r.model)} | {r.replicas} | {md(r.provider)} "
                           f"{md(r.sku)} ({md(r.region)}) | {md(r.price_kind)} | {md(r.gpu)} x{r.gpus_per_instance} | "
                           f"{r.tensor_parallel} | {r.pipeline_parallel} | {md(r.weight_precision)} | "
                           f"{md(r.kv_cache_dtype)} | {r.capacity:,.2f} {md(_unit(plan, r.workload))} |")
        out += ["", "### `vllm serve` per shape", ""]
        seen: dict[str, list[str]] = {}
        for p in plan.periods:
            for r in p.running:
                seen.setdefault(r.vllm_command, []).append(f"{r.workload} on {r.sku}")
        for command, users in seen.items():
            out += [md(", ".join(sorted(set(users)))), "", *md_code_fence(command, "bash"), ""]
    if plan.commitments:
        out += ["## Commitments", "",
                f"| bought | commitment | term (months) | months inside / after the horizon | cost inside ({c}) | "
                f"owed after the horizon ({c}) | workloads |", "|---|---|---|---|---|---|---|"]
        for x in plan.commitments:
            out.append(f"| {md(x.bought)} | {md(_span(x))} | {x.term_months} | {x.months_inside} / {x.months_after} "
                       f"| {x.cost_inside_horizon:,.2f} | {x.obligation_after_horizon:,.2f} | "
                       f"{md(', '.join(x.workloads))} |")
        out.append("")
        out += [f"- {md(_span(x))}: {md(x.note)}" for x in plan.commitments if x.note]
        out += [""] if any(x.note for x in plan.commitments) else []
    if plan.scenarios:
        out += ["## Scenarios", "", "| scenario | demand x | total cost | shortfall (per period) | idle (per period) |",
                "|---|---|---|---|---|"]
        for sc in plan.scenarios:
            short = "; ".join(f"{w}: {', '.join(f'{v:g}' for v in vals)}" for w, vals in sc.shortfall.items())
            idle = "; ".join(f"{w}: {', '.join(f'{v:g}' for v in vals)}" for w, vals in sc.idle.items())
            out.append(f"| {md(sc.name)} | {sc.multiplier:g} | {money(sc.total_cost, c)} | {md(short)} | {md(idle)} |")
        out += ["", "Scenario cost: the schedule's commitments kept (monthly subscriptions are not renewed when not "
                "needed), the rest re-planned for that demand. Shortfall and idle capacity: of the base plan's "
                "replicas (with headroom), in each workload's demand unit.", ""]
    if plan.sensitivity is not None:
        sens = plan.sensitivity
        out += ["## Sensitivity", "",
                f"The planned replicas carry {sens.traffic_multiplier_limit:g} x the demand in every period within "
                f"the targets; the next schedule, for more, costs {money(sens.next_plan_cost, c)}.", "",
                "| TPOT targets x | status | total cost |", "|---|---|---|"]
        out += [f"| {x.tpot_factor:g} | {x.status} | {money(x.cost, c)} |" for x in sens.tpot_sweep]
        out.append("")
    return "\n".join(out + _warnings_section(plan.warnings))


def _warnings_section(warnings: list[str]) -> list[str]:
    """The document's Warnings (cli/solve.deliver leaves them off stderr when the document is on stdout)."""
    return ["## Warnings", "", *[f"- {md(w)}" for w in warnings], ""] if warnings else []


def render_capacity_table(plan: CapacityPlan, width: int | None = None) -> str:
    from rich.table import Table

    buf = io.StringIO()
    con = console(buf, width)
    c = plan.currency
    if plan.status != "optimal":
        con.print("INFEASIBLE: " + "; ".join(plan.explanation))
        return buf.getvalue()
    for key, value in _summary_rows(plan):
        con.print(f"{key}: {value}")
    if terminal_width(width) < WIDE_TABLE:  # one block per period: a seven-column table folds unreadably
        con.print("Schedule")
        for index, p in enumerate(plan.periods):
            con.print(f"{p.period}: {p.cost:,.2f} {c} ("
                      + ", ".join(f"{k} {v:,.2f}" for k, v in p.cost_by_price_kind.items()) + ")")
            con.print(f"  demand: {_load(plan, p.demand, 2)}")
            con.print(f"  capacity: {_load(plan, p.capacity, 2)}")
            con.print(f"  bought: {_bought(p)}")
            con.print(f"  already running: {'; '.join(_span(x) for x in _active(plan, index)) or '-'}")
    else:
        table = Table(title="Schedule", title_justify="left")
        for col in ("period", "demand", "capacity", f"cost {c}", "by price kind", "bought", "already running"):
            table.add_column(col, overflow="fold", justify="right" if col.startswith("cost") else "left")
        for index, p in enumerate(plan.periods):
            table.add_row(p.period, _load(plan, p.demand, 2), _load(plan, p.capacity, 2), f"{p.cost:,.2f}",
                          ", ".join(f"{k} {v:,.2f}" for k, v in p.cost_by_price_kind.items()), _bought(p),
                          "; ".join(_span(x) for x in _active(plan, index)) or "-")
        con.print(table)
    runs = Table(title="What runs", title_justify="left")
    for col in ("period", "workload", "model", "replicas", "offering", "kind", "TP", "formats"):
        runs.add_column(col, overflow="fold")
    for p in plan.periods:
        for r in p.running:
            tp = str(r.tensor_parallel) + (f"xPP{r.pipeline_parallel}" if r.pipeline_parallel > 1 else "")
            runs.add_row(p.period, r.workload, r.model, f"{r.replicas} x {r.gpu}", f"{r.provider} {r.sku} ({r.region})",
                         r.price_kind, tp, f"{r.weight_precision}/KV {r.kv_cache_dtype}")
    if any(p.running for p in plan.periods):
        con.print(runs)
        commands = sorted({(r.workload, r.sku, r.vllm_command) for p in plan.periods for r in p.running})
        for workload, sku, command in commands:
            con.print(f"[{workload} on {sku}] {command}", soft_wrap=True)
    if plan.commitments:  # the ledger Markdown and HTML have (docs/capacity.md, Formats)
        ledger = Table(title="Commitments", title_justify="left")
        for col in ("bought", "commitment", "term (months)", "months inside / after", f"cost inside {c}",
                    f"owed after {c}", "workloads"):
            ledger.add_column(col, overflow="fold", justify="right" if col.startswith(("cost", "owed")) else "left")
        for x in plan.commitments:
            ledger.add_row(x.bought, _span(x), str(x.term_months), f"{x.months_inside} / {x.months_after}",
                           f"{x.cost_inside_horizon:,.2f}", f"{x.obligation_after_horizon:,.2f}",
                           ", ".join(x.workloads))
        con.print(ledger)
    for x in plan.commitments:
        if x.note:
            con.print(f"commitment {_span(x)}: {x.note}", soft_wrap=True)
    if plan.sensitivity is not None:
        sv = plan.sensitivity
        sweep = ", ".join(f"x{x.tpot_factor:g}: {money(x.cost, c)}" for x in sv.tpot_sweep)
        con.print(f"Sensitivity: carries {sv.traffic_multiplier_limit:g} x the demand; next schedule "
                  f"{money(sv.next_plan_cost, c)}; cost vs TPOT targets: {sweep}")
    for sc in plan.scenarios:
        short = sorted({plan.periods[t].period for v in sc.shortfall.values() for t, x in enumerate(v) if x > 0})
        con.print(f"scenario {sc.name} (demand x{sc.multiplier:g}): {money(sc.total_cost, c)}"
                  + (f"; the base plan's replicas fall short in {', '.join(short)}" if short else ""))
    return buf.getvalue()  # the warnings go to stderr (cli/solve.deliver), as solve's table leaves them


def render_capacity_html(plan: CapacityPlan) -> str:
    """The Markdown report as one self-contained page in the solve report's style, with two inline SVG charts:
    cost per period stacked by price kind, capacity against demand per workload."""
    from gpuopt.reports import charts
    from gpuopt.reports.formatting import html_text, markdown_to_html
    from gpuopt.reports.html import STYLE

    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>gpuopt capacity plan: {html_text(plan.status)}</title>", f"<style>{STYLE}</style>", "</head>",
             "<body>"]
    if plan.status == "optimal" and plan.total_cost is not None:
        c = html_text(plan.currency)
        parts.append(f'<p class="total" id="total-cost">Total: {plan.total_cost:,.2f} {c} over '
                     f"{html_text(plan.horizon)}</p>")
        parts.append('<section class="charts">')
        for chart_id, title, svg in (("chart-cost", "Cost per period by price kind", charts.capacity_cost(plan)),
                                     ("chart-capacity", "Capacity against demand", charts.capacity_vs_demand(plan))):
            parts.append(f'<figure class="chart" id="{chart_id}" aria-label="{html_text(title)}">{svg}</figure>')
        parts.append("</section>")
    parts += [markdown_to_html(render_capacity_markdown(plan)), "</body>", "</html>", ""]
    return "\n".join(parts)


def render_capacity_csv(plan: CapacityPlan) -> str:
    """One row per purchase; every row names the plan's currency, FX and price dates (a CSV opened on its own
    said neither what its figures are in nor how old their prices are)."""
    plan_columns = {"currency": plan.currency, "fx": plan.fx, "fx_as_of": plan.fx_as_of,
                    "catalog_as_of": plan.catalog_as_of, "oldest_price_as_of": plan.oldest_price_as_of}
    rows = []
    for p in plan.periods:
        for x in p.purchases:
            rows.append({"period": p.period, **{k: v for k, v in x.model_dump().items() if k != "workloads"},
                         "workloads": ";".join(x.workloads), "period_cost": p.cost, **plan_columns,
                         "tags": json.dumps(x.tags, sort_keys=True)})
    columns = ["period", "provider", "service", "sku", "region", "gpu", "gpus_per_instance", "price_kind", "count",
               "committed", "term_months", "price_per_hour", "hours", "cost", "break_even_utilisation", "workloads",
               "period_cost",
               # added since the first release, after every older column (readers by position read the same)
               "list_price_per_hour", *plan_columns, "tags"]
    return _frame(rows, columns, integers=("gpus_per_instance", "count", "term_months"))


def months_per_period(plan: CapacityPlan) -> int:
    """From the plan's typed period (quarter: 3, month: 1)."""
    return plan.months_per_period


def first_month(plan: CapacityPlan) -> dt.date:
    """The first calendar month of the horizon: from the first period's label (2027Q1, 2027-01), else the
    month after the plan date."""
    label = plan.periods[0].period if plan.periods else ""
    if len(label) == 6 and label[4] == "Q":
        return dt.date(int(label[:4]), 3 * (int(label[5]) - 1) + 1, 1)
    if len(label) == 7 and label[4] == "-":
        return dt.date(int(label[:4]), int(label[5:]), 1)
    return add_months(dt.date.fromisoformat(plan.as_of_date), 1)


def _covered(x: PurchaseLine) -> tuple[float, float] | None:
    """The on-demand twin's (contracted, list) prices of a commitment line, for the usage it covers."""
    if x.on_demand_price_per_hour is None:
        return None
    listed = x.on_demand_list_price_per_hour
    return x.on_demand_price_per_hour, x.on_demand_price_per_hour if listed is None else listed


def render_capacity_focus(plan: CapacityPlan) -> str:
    """FOCUS rows per calendar month (reports/focus.py): rented instances as Usage in their period's months;
    each commitment as a monthly Purchase row over its whole term (after the horizon too) and, inside the
    horizon, a Usage row with its amortised cost: Used for the instances that run replicas that month (the
    period's `running` lines, capacity_detail.commitment_use), Unused for the idle rest.
    EffectiveCost per period sums to the period's cost re-priced at the calendar months' real hours
    (reports/focus.py: FOCUS months are not 730-hour planning months)."""
    from gpuopt.planner.commitments import term_months
    from gpuopt.pricing.regions import region_info

    mpp = months_per_period(plan)
    start = first_month(plan)
    horizon_months = len(plan.periods) * mpp
    use = commitment_use(plan.commitments, [p.running for p in plan.periods], mpp)
    ledger = {(c.bought, c.provider, c.service, c.sku, c.region, c.price_kind): j
              for j, c in enumerate(plan.commitments)}
    out: list[dict[str, object]] = []
    for index, p in enumerate(plan.periods):
        for x in p.purchases:
            info = region_info(x.region, x.provider)
            region_name = f"{x.region} ({info.country})" if info.country else x.region
            committed = is_commitment(x.price_kind) and x.committed
            months = range(term_months(x.price_kind, mpp)) if committed else range(mpp)
            j = ledger.get((p.period, x.provider, x.service, x.sku, x.region, x.price_kind))
            for m in months:
                k = index * mpp + m
                used = None if use is None or j is None or not committed else use[j].get(k // mpp)
                out += rows(Charge(
                    month=add_months(start, k), currency=plan.currency, provider=x.provider, service=x.service,
                    sku=x.sku, region=x.region, region_name=region_name,
                    price_kind=x.price_kind,
                    instances=x.count, unit_price=x.price_per_hour,
                    list_unit_price=x.price_per_hour if x.list_price_per_hour is None else x.list_price_per_hour,
                    description=f"{p.period}: {x.count} x {x.sku} {x.price_kind} ({x.gpu} x{x.gpus_per_instance})"
                                + (f", month {m + 1} of {len(months)}" if committed else ""),
                    # the user's tags first: a tag named like gpuopt's own cannot overwrite it
                    tags={**x.tags, "gpuopt-workloads": ",".join(x.workloads), "gpuopt-period": p.period},
                    commitment_id=f"gpuopt:{x.provider}:{x.sku}:{x.region}:{x.price_kind}:{p.period}"
                    if committed else None,
                    commitment_name=f"{x.count} x {x.price_kind} {x.sku} ({x.region}) from {p.period}"
                    if committed else None,
                    usage=k < horizon_months, covered_prices=_covered(x), used_instances=used,
                    monthly_fee=x.price_kind in RENEWABLE))
    out.sort(key=lambda r: (str(r["ChargePeriodStart"]), str(r["ChargeCategory"]), str(r["SkuPriceId"])))
    return _frame(out, FOCUS_COLUMNS)


def render_capacity_json(plan: CapacityPlan) -> str:
    return plan.model_dump_json(indent=2) + "\n"  # as the solve plan (reports/plan_json.py)


def render_capacity(plan: CapacityPlan, fmt: str) -> str:
    """Kept for callers: the formats of a capacity plan are listed once, in reports/registry.py."""
    from gpuopt.reports.registry import render_capacity_plan

    return render_capacity_plan(plan, fmt)

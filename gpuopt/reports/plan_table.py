"""The terminal rendering of a plan (rich tables), laid out for the terminal's width.

Width: `terminal_width` (an explicit width, COLUMNS, the terminal, else 160 for files and pipes). Below
WIDE_TABLE (140) columns the deployments are listed one block each instead of one wide table. Model ids are never
cut; instance counts are whole (the offering's instances, marked shared when several deployments run on
them); the price kind is shown (spot is never invisible); the top rejection reasons close the view.
"""

from __future__ import annotations

import io

from rich.table import Table

from gpuopt.planner.plan import HOURS_PER_MONTH, Deployment, LatencyAt, Plan, Predicted
from gpuopt.reports.formatting import console, money, terminal_width
from gpuopt.reports.markdown import arrivals, budget_line, instance_count, top_rejections

TOP_REJECTIONS = 5
WIDE_TABLE = 140  # the deployments table needs this many columns; below, one block per deployment


def _at_load(d: Deployment) -> LatencyAt | Predicted:
    """Latency at the load the plan sends each replica (plans saved before it existed: at capacity)."""
    return d.at_planned_load or d.predicted


def _latencies(d: Deployment) -> tuple[float, float, str]:
    """TTFT and TPOT (ms) at the planned load as the table shows them, and their mark: at the workload's SLO
    percentile when it has one (` p90`, as the Markdown report names it), since that is what the targets
    bind; the means otherwise (mark "")."""
    at = d.at_planned_load
    if at is not None and at.percentile is not None and at.ttft_percentile_ms is not None \
            and at.tpot_percentile_ms is not None:
        return at.ttft_percentile_ms, at.tpot_percentile_ms, f" p{at.percentile}"
    return _at_load(d).ttft_ms, _at_load(d).tpot_ms, ""


def _tp(d: Deployment) -> str:
    return str(d.tensor_parallel) + (f"xPP{d.pipeline_parallel}" if d.pipeline_parallel > 1 else "")


def _deployments_wide(plan: Plan) -> Table:
    c = plan.currency
    table = Table(title="Deployments", title_justify="left")
    left = ("workload", "offering", "price kind", "GPU x n", "formats")
    for col in ("workload", "offering", "price kind", "GPU x n", "instances", "repl", "TP", "formats", f"{c}/h",
                f"{c}/month", "TTFT ms", "TPOT ms", "KV used"):
        table.add_column(col, justify="left" if col in left else "right", overflow="fold",
                         no_wrap=col in ("price kind", "GPU x n", "instances", f"{c}/month"))
    for d in plan.deployments:
        ttft, tpot, mark = _latencies(d)
        table.add_row(d.workload, f"{d.provider} {d.sku} ({d.region})", d.price_kind,
                      f"{d.gpu} x{d.gpus_per_instance}", instance_count(plan, d), str(d.replicas), _tp(d),
                      f"{d.weight_precision}/KV {d.kv_cache_dtype}", f"{d.cost_per_hour:,.2f}",
                      f"{d.cost_per_month:,.2f}", f"{ttft:,.0f}{mark}", f"{tpot:.1f}{mark}",
                      f"{d.kv_utilisation:.0%}")
    return table


def _arrivals_of(plan: Plan, workload: str) -> str:
    """The workload's arrivals where its file set `burstiness` (Markdown's words), else nothing."""
    return next((arrivals(w.burstiness) for w in plan.workloads if w.name == workload), "")


def _deployment_block(plan: Plan, d: Deployment) -> list[str]:
    c = plan.currency
    ttft, tpot, mark = _latencies(d)
    return [f"{d.workload}: {d.model}{_arrivals_of(plan, d.workload)}",
            f"  {d.provider} {d.sku} ({d.region}), {d.price_kind}",
            f"  {instance_count(plan, d)} instance(s) of {d.gpu} x{d.gpus_per_instance}; {d.replicas} replica(s), "
            f"TP {_tp(d)}, weights {d.weight_precision}, KV {d.kv_cache_dtype}",
            f"  {money(d.cost_per_hour, c)}/h, {money(d.cost_per_month, c)}/month; TTFT "
            f"{ttft:,.0f} ms{mark}, TPOT {tpot:.1f} ms{mark} at the planned load, "
            f"KV {d.kv_utilisation:.0%} used"]


def render_table(plan: Plan, width: int | None = None) -> str:
    buf = io.StringIO()
    con = console(buf, width)
    compact = terminal_width(width) < WIDE_TABLE
    c = plan.currency
    if plan.status != "optimal":
        con.print("INFEASIBLE: no plan meets every constraint")
        for line in plan.explanation:
            con.print(f"  {line}")
        if plan.budget is not None:
            con.print(f"Budget: {budget_line(plan.budget, c)}")
        _rejections(con, plan, compact)
        return buf.getvalue()
    con.print(f"Plan: {money(plan.total_cost_per_hour, c)}/h, {money(plan.total_cost_per_month, c)}/month "
              f"({HOURS_PER_MONTH} h); oldest chosen price {plan.oldest_price_as_of or plan.catalog_as_of}; "
              f"FX {plan.fx}; headroom {plan.headroom:g}; "
              f"vLLM {plan.vllm_version}; solver {plan.solver}"
              + (f"; calibration profile {plan.profile}" if plan.profile else ""))
    if plan.budget is not None:
        con.print(f"Budget: {budget_line(plan.budget, c)}")
    if compact:
        con.print("Deployments")
        for d in plan.deployments:
            for line in _deployment_block(plan, d):
                con.print(line, soft_wrap=False)
    else:
        for w in plan.workloads:
            con.print(f"Model of {w.name}: {w.model}{arrivals(w.burstiness)}", soft_wrap=True)
        con.print(_deployments_wide(plan))
    for d in plan.deployments:
        con.print(f"[{d.workload} on {d.sku}] {d.vllm_command}", soft_wrap=True, markup=False)
    for u in plan.unit_economics:
        con.print(f"Unit economics {u.workload}: {u.cost_per_request:,.6f} {c}/request, "
                  f"{u.cost_per_million_output_tokens:,.2f} {c}/1M output tokens, "
                  f"{u.cost_per_million_input_tokens:,.2f} {c}/1M input tokens, utilisation {u.utilisation:.0%}")
    if plan.alternatives and compact:
        con.print("Alternatives")
        for a in plan.alternatives:
            cost = "-" if a.total_cost_per_hour is None else f"{a.total_cost_per_hour:,.2f} {c}/h"
            delta = "" if a.delta_per_hour is None else f" ({a.delta_per_hour:+,.2f})"
            why = f" ({a.reason})" if a.reason else ""
            con.print(f"  {a.label}: {cost}{delta}: {'; '.join(a.deployments)}{why}")
    elif plan.alternatives:
        alt = Table(title="Alternatives", title_justify="left")
        for col in ("restricted to", f"{c}/h", "delta/h", "plan"):
            alt.add_column(col, overflow="fold")
        for a in plan.alternatives:
            alt.add_row(a.label, f"{a.total_cost_per_hour:,.2f}" if a.total_cost_per_hour is not None else "-",
                        f"{a.delta_per_hour:+,.2f}" if a.delta_per_hour is not None else "-",
                        "; ".join(a.deployments) + (f" ({a.reason})" if a.reason else ""))
        con.print(alt)
    if plan.sensitivity is not None:
        s = plan.sensitivity
        sweep = ", ".join(f"x{p.tpot_factor:g}: {'-' if p.cost is None else f'{p.cost:,.2f}'}" for p in s.tpot_sweep)
        con.print(f"Sensitivity: carries {s.traffic_multiplier_limit:g} x the traffic within the targets; next plan "
                  f"{money(s.next_plan_cost, c)}/h; cost vs TPOT targets ({c}/h): {sweep}")
    rp = plan.residency_premium
    if rp is not None:
        if rp.premium_per_hour is None:
            con.print(f"Residency '{rp.selector}': no plan without the policy to compare with")
        else:
            con.print(f"Residency premium for '{rp.selector}': {money(rp.premium_per_hour, c)}/h "
                      f"({(rp.premium_fraction or 0):.0%}) over the unrestricted "
                      f"{money(rp.cost_per_hour_without_policy, c)}/h"
                      + ("" if rp.cheapest_excluded_offering is None else
                         f"; cheapest excluded offering: {rp.cheapest_excluded_offering}"))
    _rejections(con, plan, compact)
    return buf.getvalue()


def _rejections(con: object, plan: Plan, compact: bool) -> None:
    """The most frequent rejection reasons, with one example each."""
    from rich.console import Console

    assert isinstance(con, Console)
    top = top_rejections(plan, TOP_REJECTIONS)
    if not top:
        return
    if compact:
        con.print("Top rejections")
        for r in top:
            con.print(f"  {r.workload}: {r.reason_kind} x{r.count:,} (e.g. {r.example})")
        return
    table = Table(title="Top rejections", title_justify="left")
    for col in ("workload", "reason", "candidates", "example"):
        table.add_column(col, justify="right" if col == "candidates" else "left", overflow="fold")
    for r in top:
        table.add_row(r.workload, r.reason_kind, f"{r.count:,}", r.example)
    con.print(table)

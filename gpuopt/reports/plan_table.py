"""The terminal rendering of a plan (rich tables)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from gpuopt.planner.plan import Plan
from gpuopt.reports.formatting import money


def render_table(plan: Plan, width: int = 160) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, force_terminal=False, markup=False)
    c = plan.currency
    if plan.status != "optimal":
        con.print("INFEASIBLE: no plan meets every constraint")
        for line in plan.explanation:
            con.print(f"  {line}")
        return buf.getvalue()
    con.print(f"Plan: {money(plan.total_cost_per_hour, c)}/h, {money(plan.total_cost_per_month, c)}/month "
              f"(730 h); prices as of {plan.catalog_as_of}; FX {plan.fx}; headroom {plan.headroom:g}; "
              f"vLLM {plan.vllm_version}; solver {plan.solver}")
    table = Table(title="Deployments", title_justify="left")
    for col in ("workload", "provider", "SKU", "region", "GPU x n", "inst", "repl", "TP", "weights", "KV",
                f"{c}/h", f"{c}/month", "TTFT ms", "TPOT ms", "KV used"):
        table.add_column(col, justify="left" if col in ("workload", "provider", "SKU", "region", "GPU x n",
                                                        "weights", "KV") else "right", overflow="fold")
    for d in plan.deployments:
        table.add_row(d.workload, d.provider, d.sku, d.region, f"{d.gpu} x{d.gpus_per_instance}", f"{d.instances:g}",
                      str(d.replicas), str(d.tensor_parallel) + (f"xPP{d.pipeline_parallel}"
                                                                 if d.pipeline_parallel > 1 else ""),
                      d.weight_precision, d.kv_cache_dtype, f"{d.cost_per_hour:,.2f}", f"{d.cost_per_month:,.0f}",
                      f"{(d.at_planned_load or d.predicted).ttft_ms:,.0f}",  # at the planned load
                      f"{(d.at_planned_load or d.predicted).tpot_ms:.1f}", f"{d.kv_utilisation:.0%}")
    con.print(table)
    for d in plan.deployments:
        con.print(f"[{d.workload} on {d.sku}] {d.vllm_command}", soft_wrap=True, markup=False)
    for u in plan.unit_economics:
        con.print(f"Unit economics {u.workload}: {u.cost_per_request:,.6f} {c}/request, "
                  f"{u.cost_per_million_output_tokens:,.2f} {c}/1M output tokens, "
                  f"{u.cost_per_million_input_tokens:,.2f} {c}/1M input tokens, utilisation {u.utilisation:.0%}")
    if plan.alternatives:
        alt = Table(title="Alternatives", title_justify="left")
        for col in ("restricted to", f"{c}/h", "delta/h", "plan"):
            alt.add_column(col)
        for a in plan.alternatives:
            alt.add_row(a.label, f"{a.total_cost_per_hour:,.2f}" if a.total_cost_per_hour is not None else "-",
                        f"{a.delta_per_hour:+,.2f}" if a.delta_per_hour is not None else "-", "; ".join(a.deployments))
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
                      f"{money(rp.cost_per_hour_without_policy, c)}/h; cheapest excluded offering: "
                      f"{rp.cheapest_excluded_offering}")
    return buf.getvalue()

"""The Markdown report of a plan: what a FinOps reviewer reads (and what the HTML report shows, with charts).

Every string a user controls goes through `md` (or `md_code`, `md_code_fence`): the Markdown is pasted into
pull requests and rendered to HTML, so it must carry no live HTML, link or table break.
"""

from __future__ import annotations

from gpuopt.planner.plan import (
    HOURS_PER_MONTH,
    Budget,
    Deployment,
    Plan,
    Rejections,
    WorkloadSummary,
    list_price_gap_pct,
)
from gpuopt.reports.formatting import md, md_code, md_code_fence, money


def _latency(d: Deployment, w: WorkloadSummary) -> str:
    """TTFT and TPOT at the planned load against the targets: means, and the SLO percentile when set."""
    at = d.at_planned_load
    if at is None:  # a plan saved before at_planned_load existed: its figures were at capacity
        return (f"TTFT ms {_slo(d.predicted.ttft_ms, w.ttft_slo_ms)}; TPOT ms "
                f"{_slo(d.predicted.tpot_ms, w.tpot_slo_ms)}")
    if at.percentile is None:
        return f"TTFT ms {_slo(at.ttft_ms, w.ttft_slo_ms)}; TPOT ms {_slo(at.tpot_ms, w.tpot_slo_ms)}"
    p = f"p{at.percentile}"
    ttft = (f"{p} {_slo(at.ttft_percentile_ms, w.ttft_slo_ms)}" if at.ttft_percentile_ms is not None
            else f"{p} not predicted ({at.source} model)")
    tpot = (f"{p} {_slo(at.tpot_percentile_ms, w.tpot_slo_ms)}" if at.tpot_percentile_ms is not None
            else f"{p} not predicted ({at.source} model)")
    return f"TTFT ms mean {at.ttft_ms:,.1f}, {ttft}; TPOT ms mean {at.tpot_ms:,.1f}, {tpot}"


def arrivals(burstiness: float | None) -> str:
    """How a workload's requests arrive, when the file says (gamma gaps of shape `burstiness`); the table says
    it in the same words."""
    if burstiness is None:
        return ""
    kind = "clumped" if burstiness < 1 else "Poisson" if burstiness == 1 else "more regular than Poisson"
    return f" ({kind}: gamma arrivals of shape {burstiness:g})"


def _at_capacity(d: Deployment) -> str:
    cap = d.capacity
    if cap is None or cap.percentile is None or cap.ttft_percentile_ms is None or cap.tpot_percentile_ms is None:
        return f"TTFT {d.predicted.ttft_ms:,.1f} ms, TPOT {d.predicted.tpot_ms:,.1f} ms"
    p = f"p{cap.percentile}"
    return (f"TTFT mean {cap.ttft_ms:,.1f} ms, {p} {cap.ttft_percentile_ms:,.1f} ms; TPOT mean {cap.tpot_ms:,.1f} ms, "
            f"{p} {cap.tpot_percentile_ms:,.1f} ms ({cap.source})")


def _slo(value: float, target: float | None) -> str:
    if target is None:
        return f"{value:,.1f} (no target)"
    mark = "meets" if value <= target + 1e-9 else "MISSES"
    return f"{value:,.1f} / {target:,.0f} ({mark})"


def top_rejections(plan: Plan, n: int) -> list[Rejections]:
    """The plan's first `n` rejection groups, and each workload's largest where none of its groups is among them
    (a plan lists them by workload, then count, so the first workload's filled the list and left the others'
    unexplained: two-models showed five reasons for `chat` and none for `code`), in the plan's order."""
    top = list(plan.rejections[:n])
    shown = {r.workload for r in top}
    for r in plan.rejections[n:]:  # later in the plan's order than every one already taken
        if r.workload not in shown:
            top.append(r)
            shown.add(r.workload)
    return top


def budget_line(b: Budget, currency: str) -> str:
    """`10,000.00 USD/month (--max-monthly): 1,234.56 USD under (12.3 %)` -- the same words in every format."""
    limit = f"{b.max_monthly:,.2f} {b.currency}/month ({b.source})"
    if b.currency != currency:
        limit += f" = {b.max_monthly_in_plan_currency:,.2f} {currency}/month"
    if b.margin is None:
        return f"{limit}: no plan to compare"
    side = "OVER by" if b.over else "under by"
    share = "" if b.margin_fraction is None else f" ({abs(b.margin_fraction):.1%})"
    return f"{limit}: {side} {abs(b.margin):,.2f} {currency}{share}"


def instance_count(plan: Plan, d: Deployment) -> str:
    """The offering's whole instance count, `2 shared` when other deployments run on the same instances."""
    line = plan.instance_line(d)
    if line is None:
        return f"{d.instances:g}"
    sharing = sum(1 for x in plan.deployments if plan.instance_line(x) is line)
    return f"{line.instances} shared" if sharing > 1 else str(line.instances)


def _memory_table(d: Deployment) -> list[str]:
    m = d.memory
    return [
        "| per GPU (GiB) | weights | activation | non-torch | CUDA graphs | KV cache | outside vLLM's budget | total |",
        "|---|---|---|---|---|---|---|---|",
        f"| {md(d.gpu)} | {m.weights_gib:.2f} | {m.activation_gib:.2f} | {m.non_torch_gib:.2f} | "
        f"{m.cuda_graph_gib:.2f} | {m.kv_cache_gib:.2f} | {m.free_gib:.2f} | {m.total_gib:.2f} |",
    ]


def pricing_basis(plan: Plan) -> str:
    """What the plan's prices are: list prices, or -- with --discount, a workload file's `discounts` or an
    overlay -- how many deployments are priced below (or above) their list price (QA: a 10 % discount read
    "prices are list prices" here)."""
    gaps = [list_price_gap_pct(d.instance_price_per_hour, d.list_price_per_hour) for d in plan.deployments]
    below, above = sum(1 for g in gaps if g is not None and g < 0), sum(1 for g in gaps if g is not None and g > 0)
    if not below and not above:
        return "prices are list prices unless an overlay says otherwise"
    counts = [f"{n} of {len(gaps)} deployments {where} their list price"
              for n, where in ((below, "below"), (above, "above")) if n]
    return "prices are after discounts and overlays: " + ", ".join(counts)


def render_markdown(plan: Plan) -> str:
    c = md(plan.currency)
    out: list[str] = ["# gpuopt plan", ""]
    if plan.status != "optimal":
        out += ["**Infeasible**: no plan meets every constraint.", ""]
        out += [f"- {md(line)}" for line in plan.explanation]
        out.append("")
        if plan.budget is not None:
            out += [f"Budget: {md(budget_line(plan.budget, plan.currency))}", ""]
    else:
        out += [
            "## Summary", "",
            "| | |", "|---|---|",
            f"| total per hour | {money(plan.total_cost_per_hour, c)} |",
            f"| total per month ({HOURS_PER_MONTH} h) | {money(plan.total_cost_per_month, c)} |",
            *([f"| budget | {md(budget_line(plan.budget, plan.currency))} |"] if plan.budget is not None else []),
            f"| currency | {c} |",
            f"| oldest chosen price | {md(plan.oldest_price_as_of or plan.catalog_as_of)} |",
            f"| catalog date (newest price) | {md(plan.catalog_as_of)} |",
            f"| FX | {md(plan.fx)} |",
            f"| plan date | {md(plan.as_of_date)} |",
            f"| calibration profile | {md(plan.profile or 'none (shipped calibration)')} |",
            "",
            "## Instances", "",
            f"| provider | SKU | region | price kind | GPU x per instance | instances | {c}/h each | {c}/h "
            "| workloads |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for line in plan.instances:
            out.append(f"| {md(line.provider)} | {md(line.sku)} | {md(line.region)} | {md(line.price_kind)} | "
                       f"{md(line.gpu)} x{line.gpus_per_instance} | {line.instances} | {line.price_per_hour:,.4f} | "
                       f"{line.cost_per_hour:,.2f} | {md(', '.join(line.workloads))} |")
        out.append("")
        out += ["## Unit economics", "",
                f"| workload | {c}/h | requests/s | {c} per request | {c} per 1M output tokens | "
                f"{c} per 1M input tokens | utilisation |",
                "|---|---|---|---|---|---|---|"]
        for u in plan.unit_economics:
            out.append(f"| {md(u.workload)} | {u.cost_per_hour:,.2f} | {u.requests_per_second:,.3f} | "
                       f"{u.cost_per_request:,.6f} | {u.cost_per_million_output_tokens:,.2f} | "
                       f"{u.cost_per_million_input_tokens:,.2f} | {u.utilisation:.0%} |")
        out += ["", "Each per-token figure charges the workload's whole cost to that token type.", ""]
    for w in plan.workloads:
        tags = ", ".join(f"{k}={v}" for k, v in sorted(w.tags.items()))
        out += [f"## Workload {md_code(w.name)}", "",
                f"{md(w.model)}; {w.demand:g} {md(w.demand_unit.replace('_', ' '))}{arrivals(w.burstiness)}"
                + f"; {w.input_tokens} input / "
                f"{w.output_tokens} output tokens; targets TTFT {w.ttft_slo_ms or '-'} ms, TPOT "
                f"{w.tpot_slo_ms or '-'} ms; at least {w.min_replicas} replica(s)"
                + (f"; tags {md(tags)}" if w.tags else ""), ""]
        for d in (d for d in plan.deployments if d.workload == w.name):
            out += [
                f"### {d.replicas} x {md(d.provider)} {md(d.sku)} ({md(d.region)}"
                + (f", {md(d.country)})" if d.country else ")"), "",
                f"- GPU: {md(d.gpu)} x{d.gpus_per_instance} per instance; {instance_count(plan, d)} instance(s)"
                + (f" (this deployment's share {d.instances:g})" if instance_count(plan, d).endswith(" shared") else "")
                + f"; TP={d.tensor_parallel}, PP={d.pipeline_parallel}; weights {md(d.weight_precision)}, KV "
                f"cache {md(d.kv_cache_dtype)}; max_model_len {d.max_model_len}",
                f"- cost: {money(d.cost_per_hour, c)}/h, {money(d.cost_per_month, c)}/month ({md(d.price_kind)}, "
                f"instance {money(d.instance_price_per_hour, c, 4)}/h; price from {md(d.price_source)}, as of "
                f"{md(d.price_as_of)})",
                f"- predicted at planned load ({d.predicted.planned_requests_per_second_per_replica:,.3f} requests/s "
                f"per replica, {d.utilisation:.0%} of sustainable): {_latency(d, w)}; KV cache "
                f"{d.predicted.kv_cache_tokens:,} tokens, {d.kv_utilisation:.0%} used",
                f"- capacity (the most one replica sustains within the targets, before headroom): "
                f"{d.predicted.replica_requests_per_second:,.3f} requests/s, "
                f"{d.predicted.replica_concurrency:,.1f} concurrent; there {_at_capacity(d)}",
                "", *_memory_table(d), "", *md_code_fence(d.vllm_command, "bash"), ""]
    if plan.alternatives:
        out += ["## Alternatives", "", f"| restricted to | {c}/h | {c}/month | delta/h | plan |",
                "|---|---|---|---|---|"]
        for a in plan.alternatives:
            out.append(f"| {md(a.label)} | {money(a.total_cost_per_hour, '')} | {money(a.total_cost_per_month, '')} | "
                       f"{'-' if a.delta_per_hour is None else f'{a.delta_per_hour:+,.2f}'} | "
                       f"{md('; '.join(a.deployments))}" + (f" ({md(a.reason)})" if a.reason else "") + " |")
        out.append("")
    rp = plan.residency_premium
    if rp is not None:
        out += ["## Residency premium", ""]
        if rp.premium_per_hour is None:
            out.append(f"Residency {md_code(rp.selector)}: no plan to compare with.")
        else:
            out.append(f"Keeping data in {md_code(rp.selector)} costs {money(rp.cost_per_hour_with_policy, c)}/h "
                       f"against {money(rp.cost_per_hour_without_policy, c)}/h without the policy: a premium of "
                       f"{money(rp.premium_per_hour, c)}/h ({(rp.premium_fraction or 0):.0%})."
                       + ("" if rp.cheapest_excluded_offering is None else
                          f" Cheapest excluded offering: {md(rp.cheapest_excluded_offering)}."))
        out.append("")
    if plan.sensitivity is not None:
        s = plan.sensitivity
        out += ["## Sensitivity", "",
                f"The planned replicas carry up to {s.traffic_multiplier_limit:g} x the planned traffic within the "
                f"targets (headroom included in the plan: {plan.headroom:g}); the next plan, for more traffic "
                f"than that, costs {money(s.next_plan_cost, c)}/h.", "",
                f"| TPOT targets x | status | {c}/h |", "|---|---|---|"]
        out += [f"| {p.tpot_factor:g} | {p.status} | {money(p.cost, '')} |" for p in s.tpot_sweep]
        out.append("")
    if plan.rejections:
        out += ["## Top rejections", "", "| workload | reason | candidates | example |", "|---|---|---|---|"]
        for r in top_rejections(plan, 12):
            out.append(f"| {md(r.workload)} | {md(r.reason_kind)} | {r.count:,} | {md(r.example)} |")
        out.append("")
    out += ["## Assumptions", "",
            f"- headroom {plan.headroom:g}: each replica is planned for at most {plan.headroom:.0%} of the load it "
            "sustains within both targets",
            f"- vLLM {md(plan.vllm_version)} defaults (gpu_memory_utilization, scheduler limits, CUDA graphs in the "
            "budget or not); memory and latency calibrations in gpuopt/data (fitted on published vLLM logs "
            "and runs)",
            f"- monthly cost = hourly x {HOURS_PER_MONTH}; {pricing_basis(plan)}",
            f"- solver: {md(plan.solver)}", ""]
    if plan.warnings:
        out += ["## Warnings", "", *[f"- {md(w)}" for w in plan.warnings], ""]
    return "\n".join(out)

"""The Markdown report of a plan: what a FinOps reviewer reads (and what the HTML report shows, with charts)."""

from __future__ import annotations

from gpuopt.planner.plan import HOURS_PER_MONTH, Deployment, Plan, WorkloadSummary
from gpuopt.reports.formatting import money


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


def _memory_table(d: Deployment) -> list[str]:
    m = d.memory
    return [
        "| per GPU (GiB) | weights | activation | non-torch | CUDA graphs | KV cache | outside vLLM's budget | total |",
        "|---|---|---|---|---|---|---|---|",
        f"| {d.gpu} | {m.weights_gib:.2f} | {m.activation_gib:.2f} | {m.non_torch_gib:.2f} | {m.cuda_graph_gib:.2f} | "
        f"{m.kv_cache_gib:.2f} | {m.free_gib:.2f} | {m.total_gib:.2f} |",
    ]


def render_markdown(plan: Plan) -> str:
    c = plan.currency
    out: list[str] = ["# gpuopt plan", ""]
    if plan.status != "optimal":
        out += ["**Infeasible**: no plan meets every constraint.", ""]
        out += [f"- {line}" for line in plan.explanation]
        out.append("")
    else:
        out += [
            "## Summary", "",
            "| | |", "|---|---|",
            f"| total per hour | {money(plan.total_cost_per_hour, c)} |",
            f"| total per month ({HOURS_PER_MONTH} h) | {money(plan.total_cost_per_month, c)} |",
            f"| currency | {c} |",
            f"| catalog date (newest price) | {plan.catalog_as_of} |",
            f"| FX | {plan.fx} |",
            f"| plan date | {plan.as_of_date} |",
            "",
            "## Instances", "",
            f"| provider | SKU | region | price kind | GPU x per instance | instances | {c}/h each | {c}/h "
            "| workloads |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for line in plan.instances:
            out.append(f"| {line.provider} | {line.sku} | {line.region} | {line.price_kind} | {line.gpu} x"
                       f"{line.gpus_per_instance} | {line.instances} | {line.price_per_hour:,.4f} | "
                       f"{line.cost_per_hour:,.2f} | {', '.join(line.workloads)} |")
        out.append("")
        out += ["## Unit economics", "",
                f"| workload | {c}/h | requests/s | {c} per request | {c} per 1M output tokens | "
                f"{c} per 1M input tokens | utilisation |",
                "|---|---|---|---|---|---|---|"]
        for u in plan.unit_economics:
            out.append(f"| {u.workload} | {u.cost_per_hour:,.2f} | {u.requests_per_second:,.3f} | "
                       f"{u.cost_per_request:,.6f} | {u.cost_per_million_output_tokens:,.2f} | "
                       f"{u.cost_per_million_input_tokens:,.2f} | {u.utilisation:.0%} |")
        out += ["", "Each per-token figure charges the workload's whole cost to that token type.", ""]
    for w in plan.workloads:
        out += [f"## Workload `{w.name}`", "",
                f"{w.model}; {w.demand:g} {w.demand_unit.replace('_', ' ')}; {w.input_tokens} input / "
                f"{w.output_tokens} output tokens; targets TTFT {w.ttft_slo_ms or '-'} ms, TPOT "
                f"{w.tpot_slo_ms or '-'} ms; at least {w.min_replicas} replica(s)"
                + (f"; tags {', '.join(f'{k}={v}' for k, v in sorted(w.tags.items()))}" if w.tags else ""), ""]
        for d in (d for d in plan.deployments if d.workload == w.name):
            out += [
                f"### {d.replicas} x {d.provider} {d.sku} ({d.region}, {d.country})", "",
                f"- GPU: {d.gpu} x{d.gpus_per_instance} per instance; {d.instances:g} instance(s) for this workload; "
                f"TP={d.tensor_parallel}, PP={d.pipeline_parallel}; weights {d.weight_precision}, KV cache "
                f"{d.kv_cache_dtype}; max_model_len {d.max_model_len}",
                f"- cost: {money(d.cost_per_hour, c)}/h, {money(d.cost_per_month, c)}/month ({d.price_kind}, instance "
                f"{money(d.instance_price_per_hour, c, 4)}/h; price from {d.price_source}, as of {d.price_as_of})",
                f"- predicted at planned load ({d.predicted.planned_requests_per_second_per_replica:,.3f} requests/s "
                f"per replica, {d.utilisation:.0%} of sustainable): {_latency(d, w)}; KV cache "
                f"{d.predicted.kv_cache_tokens:,} tokens, {d.kv_utilisation:.0%} used",
                f"- capacity (the most one replica sustains within the targets, before headroom): "
                f"{d.predicted.replica_requests_per_second:,.3f} requests/s, "
                f"{d.predicted.replica_concurrency:,.1f} concurrent; there {_at_capacity(d)}",
                "", *_memory_table(d), "", "```bash", d.vllm_command, "```", ""]
    if plan.alternatives:
        out += ["## Alternatives", "", f"| restricted to | {c}/h | {c}/month | delta/h | plan |",
                "|---|---|---|---|---|"]
        for a in plan.alternatives:
            out.append(f"| {a.label} | {money(a.total_cost_per_hour, '')} | {money(a.total_cost_per_month, '')} | "
                       f"{'-' if a.delta_per_hour is None else f'{a.delta_per_hour:+,.2f}'} | "
                       f"{'; '.join(a.deployments)} |")
        out.append("")
    rp = plan.residency_premium
    if rp is not None:
        out += ["## Residency premium", ""]
        if rp.premium_per_hour is None:
            out.append(f"Residency `{rp.selector}`: no plan to compare with.")
        else:
            out.append(f"Keeping data in `{rp.selector}` costs {money(rp.cost_per_hour_with_policy, c)}/h against "
                       f"{money(rp.cost_per_hour_without_policy, c)}/h without the policy: a premium of "
                       f"{money(rp.premium_per_hour, c)}/h ({(rp.premium_fraction or 0):.0%}). Cheapest excluded "
                       f"offering: {rp.cheapest_excluded_offering}.")
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
        for r in plan.rejections[:12]:
            out.append(f"| {r.workload} | {r.reason_kind} | {r.count:,} | {r.example.replace('|', '/')} |")
        out.append("")
    out += ["## Assumptions", "",
            f"- headroom {plan.headroom:g}: each replica is planned for at most {plan.headroom:.0%} of the load it "
            "sustains within both targets",
            f"- vLLM {plan.vllm_version} defaults (gpu_memory_utilization, scheduler limits, CUDA graphs in the "
            "budget or not); memory and latency calibrations in gpuopt/data (fitted on published vLLM logs "
            "and runs)",
            f"- monthly cost = hourly x {HOURS_PER_MONTH}; prices are list prices unless an overlay says otherwise",
            f"- solver: {plan.solver}", ""]
    if plan.warnings:
        out += ["## Warnings", "", *[f"- {w}" for w in plan.warnings], ""]
    return "\n".join(out)

"""`solve`: workload file -> candidates -> integer program -> typed Plan (alternatives, residency premium,
explanations). Nothing here prints or formats; the CLI renders the Plan.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuopt import clock
from gpuopt.errors import FieldError
from gpuopt.hardware import get_gpu
from gpuopt.inputs.capacity import RENEWABLE, TERM_MONTHS, UNCOMMITTED
from gpuopt.inputs.workload import ModelConfigRef, Workload, WorkloadFile, repository_id
from gpuopt.physics.analytic_load import held_cache_tokens
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.latency_factors import borrowed_notes
from gpuopt.physics.resolution import offline_description
from gpuopt.physics.vllm_profile import get_profile
from gpuopt.planner.bench_advice import bench_notes
from gpuopt.planner.candidates import (
    POLICY_REJECTIONS,
    CandidateResult,
    Evaluator,
    Placement,
    Policy,
    WorkloadCandidates,
    enumerate_candidates,
)
from gpuopt.planner.checkpoints import cautions
from gpuopt.planner.load import planned_and_capacity, planned_latency
from gpuopt.planner.plan import (
    HOURS_PER_MONTH,
    PRICE_DIGITS,
    Alternative,
    Candidate,
    Deployment,
    GpuMemory,
    InstanceLine,
    Plan,
    Predicted,
    Rejections,
    ResidencyPremium,
    UnitEconomics,
    WorkloadSummary,
    plain,
    split_exactly,
)
from gpuopt.planner.program import Solution, lower_bound, quota_problems, solve
from gpuopt.planner.serve_command import vllm_command
from gpuopt.planner.simcapacity import with_estimated_capacity, with_simulated_capacity
from gpuopt.pricing.catalog import Catalog, Offering
from gpuopt.pricing.regions import Residency, region_info
from gpuopt.pricing.staleness import fx_staleness, oldest_price_date, staleness
from gpuopt.vocabulary import REJECTION_KINDS, RejectionKind


@dataclass(frozen=True)
class SolveOptions(Placement):
    """The placement, and what only `solve` has. Sensitivity is not here: it runs after solving
    (planner/sensitivity.py)."""

    top: int = 3
    today: dt.date | None = None
    max_price_age: int | None = None
    premium: bool = True  # also solve without the residency policy to price it
    # one record per candidate considered (10^4-10^5): the JSON contract carries them, the other formats
    # do not show them, so the CLI builds them only for --format json
    candidate_records: bool = True


def plan_workloads(wf: WorkloadFile, catalog: Catalog, opts: SolveOptions) -> tuple[Plan, list[str]]:
    """The Plan, and price-age errors (non-empty when --max-price-age rejects a chosen price)."""
    if wf.quotas and (problems := quota_problems(wf.quotas, catalog)):
        raise FieldError(problems)
    policy = opts.policy(wf.residency, wf.providers, wf.currency, wf.price_kinds)
    residency, currency = policy.residency, policy.currency
    evaluators: dict[str, Evaluator] = {}
    per_workload = enumerate_candidates(wf.workloads, catalog, policy, evaluators)
    archs = {wc.workload.name: wc.arch for wc in per_workload}
    # percentile targets and length mixes: the simulator's capacity on the shapes that can enter the plan
    analytic = [c for wc in per_workload for c in wc.results]
    all_candidates = with_simulated_capacity(wf.workloads, analytic, wf.quotas, archs, opts.headroom)
    solution = solve(wf.workloads, all_candidates, opts.headroom, wf.quotas)
    warnings: list[str] = list(catalog.notes)
    warnings += sorted({f"model {arch.hf_id}: {note}" for arch in archs.values()
                        if (note := offline_description(arch)) is not None})
    # a workload's own model the known-checkpoint table marks `avoid` (its avoid-multi-gpu shapes are rejected
    # per candidate instead: Evaluator)
    warnings += cautions((arch.hf_id, 1) for arch in archs.values())
    warnings += unservable_names(wf.workloads)
    if solution.status == "optimal" and not solution.proven_optimal:
        warnings.append(f"the solver stopped at its time limit: the plan is feasible but not proven optimal "
                        f"({solution.variables} variables)")
    age_errors: list[str] = []
    oldest = ""
    today = opts.today or clock.today()
    if solution.status == "optimal":
        chosen = [a.candidate.offering for a in solution.assignments]
        stale, age_errors = staleness(chosen, today, opts.max_price_age)
        warnings += stale
        fx_stale, fx_errors = fx_staleness(catalog.fx, chosen, currency, today, opts.max_price_age)
        warnings += fx_stale
        age_errors += fx_errors
        warnings += borrowed_notes(o.gpu for o in chosen)  # latency from another architecture's calibration
        warnings += pin_notes(chosen, residency)
        warnings += price_kind_notes(solution, currency)
        oldest = oldest_price_date(chosen)
    estimated = with_estimated_capacity(wf.workloads, analytic, all_candidates)
    alternatives = _alternatives(wf, estimated, solution, opts, archs)
    premium = None
    if residency is not None and residency.is_restrictive and opts.premium:
        premium = _residency_premium(wf, catalog, policy, solution, opts, evaluators)
    explanation = [] if solution.status == "optimal" else explain_infeasible(
        [(wc.workload, wc.results) for wc in per_workload], solution.binding)
    profile = get_profile(opts.vllm_version)
    deployments = _deployments(per_workload, solution, catalog, currency, residency)
    # a checkpoint the workload names for the precision a deployment runs, which the table marks avoid: the same
    # warning as for a model given as that checkpoint (QA)
    named: dict[str, dict[str, str]] = {w.name: {str(k): v for k, v in w.checkpoints.items()} for w in wf.workloads}
    warnings += [note for note in cautions((named[d.workload].get(d.weight_precision), d.gpus_per_replica)
                                           for d in deployments) if note not in warnings]
    warnings += routing_notes(deployments)
    warnings += convoy_notes(wf.workloads)
    warnings += bench_notes(solution, archs) if solution.status == "optimal" else []
    warnings += tail_past_context_notes(wf.workloads, archs)
    warnings += unchecked_context_notes(wf.workloads, archs)
    plan = Plan(
        status="optimal" if solution.status == "optimal" else "infeasible",
        currency=currency,
        total_cost_per_hour=None if solution.cost_per_hour is None else plain(solution.cost_per_hour),
        # the sum of the deployments' printed monthly costs (rounding the hourly total x 730 on its own drifted
        # a cent from the lines a reviewer adds up)
        total_cost_per_month=(None if solution.cost_per_hour is None
                              else plain(sum(d.cost_per_month for d in deployments), 2)),
        deployments=deployments,
        instances=_instance_lines(solution),
        alternatives=alternatives,
        candidates=[],  # attached below, unvalidated (see _candidate_records)
        residency_premium=premium,
        catalog_as_of=catalog.as_of,
        oldest_price_as_of=oldest,
        fx=catalog.fx.describe(),
        fx_as_of=catalog.fx.as_of,
        headroom=opts.headroom,
        vllm_version=opts.vllm_version or profile.version,
        workloads=[WorkloadSummary(name=w.name, model=w.model_id, demand=w.demand, demand_unit=w.demand_unit,
                                   input_tokens=w.input_tokens, output_tokens=w.output_tokens,
                                   ttft_slo_ms=w.slo.ttft_ms, tpot_slo_ms=w.slo.tpot_ms,
                                   min_replicas=w.min_replicas, tags=dict(w.tags),
                                   slo_percentile=w.slo.percentile, burstiness=w.burstiness)
                   for w in wf.workloads],
        unit_economics=_unit_economics(wf, deployments),
        rejections=_rejections(all_candidates),
        as_of_date=today.isoformat(),
        explanation=explanation,
        warnings=warnings,
        solver=solution.solver,
    ).model_copy(update={"candidates": _candidate_records(all_candidates) if opts.candidate_records else []})
    return plan, age_errors


# ---- deployments ---------------------------------------------------------------------------------------


def _on_demand_prices(catalog: Catalog, o: Offering, currency: str) -> dict[str, float]:
    """A commitment's on-demand twin prices (8 decimals), for FOCUS rows of the usage it covers."""
    prices = None if o.price_kind in UNCOMMITTED else catalog.on_demand_prices(o, currency)
    if prices is None:
        return {}
    return {"on_demand_price_per_hour": plain(prices[0], PRICE_DIGITS),
            "on_demand_list_price_per_hour": plain(prices[1], PRICE_DIGITS)}


def _deployments(per_workload: list[WorkloadCandidates], solution: Solution, catalog: Catalog,
                 currency: str, residency: Residency | None = None) -> list[Deployment]:
    if solution.status != "optimal":
        return []
    gpu_use: dict[tuple[str, ...], int] = defaultdict(int)
    for a in solution.assignments:
        gpu_use[a.candidate.offering.key] += (a.candidate.gpus_per_replica or 0) * a.replicas
    out = []
    exact: list[float] = []  # each deployment's cost per hour before rounding (_apportioned)
    lens = {wc.workload.name: wc for wc in per_workload}
    total_capacity = solution.carried()
    for a in solution.assignments:
        c = a.candidate
        o = c.offering
        ev = c.evaluation
        mem, point = ev.memory, ev.point
        if mem is None or point is None or c.shape is None:
            continue
        share = (c.gpus_per_replica or 0) * a.replicas / gpu_use[o.key]
        n_inst = solution.instances[o.key]
        cost = (c.instance_price or 0.0) * n_inst * share
        exact.append(cost)
        rank = mem.binding_rank
        # traffic is spread in proportion to capacity, so every deployment of a workload runs equally loaded
        load_share = c.workload.demand / max(total_capacity[c.workload.name], 1e-9)
        at_planned, at_capacity = planned_and_capacity(c, lens[c.workload.name].arch, load_share)
        # a closed loop's share of the clients is not that share of the capacity's rate (latency falls as clients
        # leave, so each serves more): the planned point's own rate, Little's law there (batch-summarisation's
        # 64 of 85 clients send 1.13 requests/s a replica, not 0.75 x 1.18 = 0.88)
        planned_rate = (at_planned.requests_per_second if c.workload.demand_unit == "concurrency"
                        else point.requests_per_second * load_share)
        out.append(Deployment(
            workload=c.workload.name, model=lens[c.workload.name].arch.hf_id, provider=o.provider,
            service=o.service, sku=o.sku, region=o.region, country=region_info(o.region, o.provider).country, gpu=o.gpu,
            gpus_per_instance=o.gpu_count or 0, instances=plain(n_inst * share, PRICE_DIGITS), replicas=a.replicas,
            tensor_parallel=c.shape.tensor_parallel, pipeline_parallel=c.shape.pipeline_parallel,
            gpus_per_replica=c.gpus_per_replica or 0, weight_precision=c.shape.precision,
            # what vLLM runs: a ModelOpt checkpoint's `auto` is its FP8 KV cache (checkpoint_kv_cache_dtype)
            kv_cache_dtype=mem.config.kv_cache_dtype, max_model_len=mem.config.max_model_len,
            max_num_seqs=mem.config.max_num_seqs, gpu_memory_utilization=mem.config.gpu_memory_utilization,
            price_kind=o.price_kind, instance_price_per_hour=plain(c.instance_price or 0.0, PRICE_DIGITS),
            list_price_per_hour=(None if o.list_price_per_hour is None or not o.currency else
                                 plain(catalog.fx.convert(o.list_price_per_hour, o.currency, currency), PRICE_DIGITS)),
            **_on_demand_prices(catalog, o, currency),
            cost_per_hour=plain(cost), cost_per_month=plain(cost * HOURS_PER_MONTH, 2),
            predicted=Predicted(ttft_ms=plain(point.ttft_ms, 2), tpot_ms=plain(point.tpot_ms, 3),
                                replica_requests_per_second=plain(point.requests_per_second),
                                replica_concurrency=plain(point.concurrency, 2),
                                kv_cache_tokens=mem.kv_cache_tokens,
                                planned_requests_per_second_per_replica=plain(planned_rate)),
            memory=GpuMemory(total_gib=plain(rank.total_gib), weights_gib=plain(rank.weights_gib),
                             lora_gib=plain(rank.lora_gib),
                             activation_gib=plain(rank.activation_gib), non_torch_gib=plain(rank.non_torch_gib),
                             cuda_graph_gib=plain(rank.cuda_graph_gib), kv_cache_gib=plain(rank.kv_cache_gib),
                             free_gib=plain(rank.free_after_kv_gib)),
            utilisation=plain(load_share),
            # the requests in a replica at the planned load (Little's law there, not at capacity) x what each
            # holds on average (its prompt, half its output, a hybrid's state pages: analytic_load.held_cache_tokens)
            kv_utilisation=plain(at_planned.concurrency * held_cache_tokens(
                mem.kv_pool, mem.effective_kv_tokens, mem.config.block_size, c.workload.input_tokens,
                c.workload.output_tokens) / max(mem.effective_kv_tokens, 1)),
            vllm_command=vllm_command(lens[c.workload.name].arch, mem.config, gpus_per_node=o.gpu_count or None,
                                      checkpoints=c.workload.checkpoints,
                                      compute_capability=get_gpu(o.gpu).compute_capability),
            price_source=o.source, price_as_of=o.as_of, price_origin=o.origin, tags=dict(c.workload.tags),
            at_planned_load=at_planned, capacity=at_capacity,
            pinned_countries=(residency.pinned_countries(o.region, o.countries, o.provider) or None
                              if residency is not None else None)))
    return sorted(_apportioned(out, exact), key=lambda d: (d.workload, d.provider, d.sku, d.region))


def _apportioned(deployments: list[Deployment], exact: list[float]) -> list[Deployment]:
    """Deployments sharing an offering's machines split its monthly cost so that their figures add up to the
    machines': each its share at full precision, then to the cent by largest remainder (QA: three workloads on
    one 3-GPU machine at 1.36986301/h were 333.33 a month each, 999.99 where the machine bills 1,000.00). The
    hourly figures stay each rounded to 1/10,000 (a share moved by 0.0001/h is 7 cents a month, past what a
    saved plan's month may differ from its hour x 730)."""
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, d in enumerate(deployments):
        groups[(d.provider, d.service, d.sku, d.region, d.price_kind)].append(i)
    out = list(deployments)
    for members in groups.values():
        if len(members) < 2:
            continue
        monthly = split_exactly([exact[i] * HOURS_PER_MONTH for i in members], 2)
        for i, m in zip(members, monthly, strict=True):
            out[i] = out[i].model_copy(update={"cost_per_month": m})
    return out


def _unit_economics(wf: WorkloadFile, deployments: list[Deployment]) -> list[UnitEconomics]:
    out = []
    for w in wf.workloads:
        mine = [d for d in deployments if d.workload == w.name]
        if not mine:
            continue
        cost = sum(d.cost_per_hour for d in mine)
        # the plan sends a rate workload its whole demand; summing the replicas' rounded rates gave 11.9999 for 12
        rps = w.requests_per_second if w.requests_per_second is not None else \
            sum(d.replicas * d.predicted.planned_requests_per_second_per_replica for d in mine)
        per_hour = max(rps * 3600, 1e-12)
        out.append(UnitEconomics(
            workload=w.name, cost_per_hour=plain(cost), requests_per_second=plain(rps),
            cost_per_request=plain(cost / per_hour, 8),
            cost_per_million_output_tokens=plain(cost / (per_hour * w.output_tokens) * 1e6, 4),
            cost_per_million_input_tokens=plain(cost / (per_hour * w.input_tokens) * 1e6, 4),
            utilisation=mine[0].utilisation))
    return out


def _rejections(candidates: Sequence[CandidateResult]) -> list[Rejections]:
    groups: dict[tuple[str, RejectionKind], list[CandidateResult]] = defaultdict(list)
    for c in candidates:
        if c.evaluation.reason_kind is not None:  # every rejected candidate has one (Evaluation checks)
            groups[(c.workload.name, c.evaluation.reason_kind)].append(c)
    out = []
    for (workload, kind), members in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1])):
        first = members[0]
        example = f"{first.offering.provider} {first.offering.sku} ({first.offering.region}): {first.evaluation.reason}"
        out.append(Rejections(workload=workload, reason_kind=kind, count=len(members), example=example))
    return out


def _instance_lines(solution: Solution) -> list[InstanceLine]:
    if solution.status != "optimal":
        return []
    users: dict[tuple[str, ...], set[str]] = defaultdict(set)
    sample: dict[tuple[str, ...], CandidateResult] = {}
    for a in solution.assignments:
        users[a.candidate.offering.key].add(a.candidate.workload.name)
        sample[a.candidate.offering.key] = a.candidate
    lines = []
    for key, count in sorted(solution.instances.items()):
        c = sample[key]
        o = c.offering
        lines.append(InstanceLine(provider=o.provider, service=o.service, sku=o.sku, region=o.region,
                                  price_kind=o.price_kind, gpu=o.gpu, gpus_per_instance=o.gpu_count or 0,
                                  instances=count, price_per_hour=plain(c.instance_price or 0.0, PRICE_DIGITS),
                                  cost_per_hour=plain((c.instance_price or 0.0) * count), workloads=sorted(users[key])))
    return lines


# tensor_parallel .. reason_kind of a Candidate record, less the offering's fields (see _shape_part)
_ShapeFields = tuple[int | None, int | None, str | None, str | None, int | None, float | None, float | None,
                     float | None, float | None, int | None, bool, str | None, RejectionKind | None]


def _candidate_records(candidates: Sequence[CandidateResult]) -> list[Candidate]:
    """Every candidate as a record. The offering part is shared by every workload and the evaluation part
    by every offering of a shape, so each is formatted once. The records are built by typed code (mypy
    checks every key) and validated when a saved plan is read back, not here: a plan holds 10^4-10^5."""
    offering_part: dict[tuple[str, ...], tuple[str, str, str, str, str, str, int | None, str, float | None]] = {}
    shape_part: dict[int, _ShapeFields] = {}  # by id() of the Evaluation: one object per evaluated shape
    rows: list[Candidate] = []
    for c in candidates:
        o, ev = c.offering, c.evaluation
        ident = offering_part.get(o.key)
        if ident is None:
            ident = offering_part[o.key] = (
                o.provider, o.service, o.sku, o.region, region_info(o.region, o.provider).country, o.gpu, o.gpu_count,
                o.price_kind, None if c.instance_price is None else plain(c.instance_price))
        part = shape_part.get(id(ev))
        if part is None:
            part = shape_part[id(ev)] = _shape_part(c)
        provider, service, sku, region, country, gpu, gpus_per_instance, price_kind, price = ident
        tp, pp, precision, kv_dtype, gpus_per_replica, rps, concurrency, ttft, tpot, kv_tokens, ok, reason, kind = part
        row: Candidate = {  # a literal in the contract's key order: the fastest way to build a dict
            "workload": c.workload.name, "provider": provider, "service": service, "sku": sku, "region": region,
            "country": country, "gpu": gpu, "gpus_per_instance": gpus_per_instance, "price_kind": price_kind,
            "tensor_parallel": tp, "pipeline_parallel": pp, "weight_precision": precision,
            "kv_cache_dtype": kv_dtype, "gpus_per_replica": gpus_per_replica, "replica_requests_per_second": rps,
            "replica_concurrency": concurrency, "instance_price_per_hour": price, "ttft_ms": ttft, "tpot_ms": tpot,
            "kv_cache_tokens": kv_tokens, "feasible": ok, "reason": reason, "reason_kind": kind}
        rows.append(row)
    return rows


def _shape_part(c: CandidateResult) -> _ShapeFields:
    """The record fields that depend on the shape and evaluation, not the offering, in the order
    _candidate_records unpacks them."""
    s, ev = c.shape, c.evaluation
    point, mem = ev.point, ev.memory
    kv = mem.config.kv_cache_dtype if mem is not None else s.kv_cache_dtype if s else None  # what vLLM runs
    return (s.tensor_parallel if s else None, s.pipeline_parallel if s else None, s.precision if s else None,
            kv, c.gpus_per_replica,
            plain(point.requests_per_second) if point else None, plain(point.concurrency, 2) if point else None,
            plain(point.ttft_ms, 2) if point else None, plain(point.tpot_ms, 3) if point else None,
            mem.kv_cache_tokens if mem is not None and mem.fits else None, ev.feasible, ev.reason, ev.reason_kind)


# ---- alternatives, premium, explanations -------------------------------------------------------------------


def _describe(solution: Solution) -> list[str]:
    out = []
    for a in solution.assignments:
        s, o = a.candidate.shape, a.candidate.offering
        if s is None:
            continue
        pp = f" PP={s.pipeline_parallel}" if s.pipeline_parallel > 1 else ""
        out.append(f"{a.replicas} x {a.candidate.workload.name} on {o.provider} {o.sku} ({o.region}) "
                   f"TP={s.tensor_parallel}{pp} {s.precision}")
    return out


def _worst_at_planned_load(solution: Solution, archs: dict[str, ModelArchitecture]) -> tuple[float, float] | None:
    """(worst TTFT, worst TPOT) over a solution's deployments at the load it plans for each (not at capacity,
    where every TPOT-bound deployment shows the target itself)."""
    carried = solution.carried()
    points = [planned_latency(a.candidate, archs[a.candidate.workload.name],
                              a.candidate.workload.demand / max(carried[a.candidate.workload.name], 1e-9))
              for a in solution.assignments if a.candidate.evaluation.point is not None]
    if not points:
        return None
    return plain(max(p.ttft_ms for p in points), 2), plain(max(p.tpot_ms for p in points), 2)


def _alternatives(wf: WorkloadFile, candidates: Sequence[CandidateResult], best: Solution,
                  opts: SolveOptions, archs: dict[str, ModelArchitecture]) -> list[Alternative]:
    """The best plan restricted to each other GPU type, and to each other provider (top K each by cost).
    `candidates`: for a workload planned on simulated capacity, the shapes the unrestricted plan did not simulate
    carry an estimate (simcapacity.with_estimated_capacity: the analytic capacity times the workload's median
    simulated/analytic ratio): restricted to the shapes it simulated, a p95 workload's AWS alternative read
    6.88 USD/h where `--provider aws` plans 3.72. Such an alternative is an estimate (`--provider` or a narrower
    workload file simulates it); the subsets' order and early stop use the analytic bounds."""
    if opts.top <= 0 or best.status != "optimal":
        return []
    # not pruned here: a cheaper twin on another provider would empty that provider's subset (twins always
    # share a GPU type; solve prunes inside each subset)
    feasible = [c for c in candidates if c.feasible and c.instance_price is not None]
    chosen_gpus = {a.candidate.offering.gpu for a in best.assignments}
    chosen_providers = {a.candidate.offering.provider for a in best.assignments}
    out: list[Alternative] = []
    for kind, chosen in (("gpu", chosen_gpus), ("provider", chosen_providers)):
        subsets: dict[str, list[CandidateResult]] = defaultdict(list)
        for c in feasible:
            subsets[getattr(c.offering, kind)].append(c)
        if len(chosen) == 1:
            subsets.pop(next(iter(chosen)), None)  # restricted to what the plan already uses: the plan itself
        bounds = {value: lower_bound(wf.workloads, subset, opts.headroom) for value, subset in subsets.items()}
        found: list[Alternative] = []
        # cheapest bound first; stop once K plans are found that no unsolved value's bound can undercut
        for value in sorted(subsets, key=lambda v: (bounds[v], v)):
            if not math.isfinite(bounds[value]):
                break  # some workload has no candidate on this GPU or provider
            costs = sorted(a.total_cost_per_hour or 0.0 for a in found)
            if len(costs) >= opts.top and bounds[value] > costs[opts.top - 1] + 1e-9:
                break
            sol = solve(wf.workloads, subsets[value], opts.headroom, wf.quotas)
            if sol.status != "optimal" or sol.cost_per_hour is None:
                continue
            delta = None if best.cost_per_hour is None else plain(sol.cost_per_hour - best.cost_per_hour)
            worst = _worst_at_planned_load(sol, archs)
            guessed = sum(1 for a in sol.assignments if a.candidate.evaluation.estimated)
            found.append(Alternative(label=f"{kind} {value}", status="optimal",
                                     total_cost_per_hour=plain(sol.cost_per_hour),
                                     total_cost_per_month=plain(sol.cost_per_hour * HOURS_PER_MONTH, 2),
                                     delta_per_hour=delta, deployments=_describe(sol),
                                     max_ttft_ms=worst[0] if worst else None,
                                     max_tpot_ms=worst[1] if worst else None,
                                     reason=None if not guessed else (
                                         f"an estimate: {guessed} of its deployments' shapes were not simulated, "
                                         "their capacity scaled from simulated ones"
                                         + (f"; `--provider {value}` plans it on simulated capacity"
                                            if kind == "provider" else ""))))
        found.sort(key=lambda a: (a.total_cost_per_hour or 0.0, a.label))
        out += found[: opts.top]
    return out


def price_kind_notes(solution: Solution, currency: str) -> list[str]:
    """What a committed price the plan chose obliges the buyer to: a plan's figures are per hour and per
    730-hour month, which reads as a rental, where a 3-year reservation is 36 months owed whether used or not
    (QA: a g6e.xlarge reserved-3y plan said only "586.88 USD/month" of a 21,127.81 USD obligation). Month-to-
    month subscriptions renew monthly (nothing beyond the month shown); a capacity block is paid upfront when
    booked. `gpuopt plan` schedules commitments period by period and shows the obligation past its horizon. Spot
    is said to be reclaimable (QA: an interactive workload was planned on spot without a word)."""
    price = {a.candidate.offering.key: (a.candidate.offering, float(a.candidate.instance_price or 0.0))
             for a in solution.assignments}
    notes = []
    for key, count in sorted(solution.instances.items()):
        if key not in price:
            continue
        o, per_hour = price[key]
        months = TERM_MONTHS.get(o.price_kind)
        if months is not None and o.price_kind not in RENEWABLE:
            hours = months * HOURS_PER_MONTH
            notes.append(f"{o.provider} {o.sku} ({o.region}) {o.price_kind}: a {months}-month commitment, owed "
                         f"whether used or not: {count} instance{'s' if count > 1 else ''} x {per_hour:,.8g} "
                         f"{currency}/h x {hours:,} h = {count * per_hour * hours:,.2f} {currency} over the term "
                         f"(gpuopt plan schedules commitments by period)")
        elif o.price_kind == "spot":
            # solve has no `interruptible` flag as capacity files do (spot there only with interruptible: true)
            notes.append(f"{o.provider} {o.sku} ({o.region}) spot: the provider can reclaim it at short notice; a "
                         "service on it needs capacity to fail over to (or list spot only for interruptible work)")
        elif o.price_kind == "capacity-block":
            notes.append(f"{o.provider} {o.sku} ({o.region}) capacity-block: paid in full upfront when the block "
                         "is booked, for its fixed duration; the hourly and monthly figures are its rate")
    return notes


def pin_notes(chosen: Sequence[Offering], residency: Residency | None) -> list[str]:
    """Offerings sold as `global` that the residency admits only through the data-centre countries their
    source lists: the plan keeps the residency only if each such deployment is pinned there (RunPod: create
    the pods with dataCenterIds in those countries). Said once per offering."""
    if residency is None:
        return []
    notes = []
    for o in dict.fromkeys(chosen):
        where = residency.pinned_countries(o.region, o.countries, o.provider)
        if where:
            notes.append(f"{o.provider} {o.sku} ({o.region}) meets residency '{residency.selector}' only if pinned to "
                         f"a data centre in {', '.join(where)}: choose one there when creating it")
    return notes


def _residency_premium(wf: WorkloadFile, catalog: Catalog, policy: Policy, best: Solution,
                       opts: SolveOptions, evaluators: dict[str, Evaluator]) -> ResidencyPremium:
    free = Policy(residency=None, providers=policy.providers, price_kinds=policy.price_kinds,
                  currency=policy.currency, vllm_version=policy.vllm_version)
    per_workload = enumerate_candidates(wf.workloads, catalog, free, evaluators)
    archs = {wc.workload.name: wc.arch for wc in per_workload}
    sol = solve(wf.workloads, with_simulated_capacity(wf.workloads, [c for wc in per_workload for c in wc.results],
                                                      wf.quotas, archs, opts.headroom), opts.headroom, wf.quotas)
    assert policy.residency is not None  # the caller only asks with a restrictive policy
    excluded = sorted((a.candidate.instance_price or 0.0, a.candidate.offering.offering_id)
                      for a in sol.assignments if not policy.residency.allows(a.candidate.offering.region,
                                                                  a.candidate.offering.countries,
                                                                  a.candidate.offering.provider))
    with_cost, without = best.cost_per_hour, sol.cost_per_hour
    premium = None if with_cost is None or without is None else with_cost - without
    return ResidencyPremium(
        selector=policy.residency.selector,
        cost_per_hour_with_policy=None if with_cost is None else plain(with_cost),
        cost_per_hour_without_policy=None if without is None else plain(without),
        premium_per_hour=None if premium is None else plain(premium),
        premium_fraction=None if premium is None or not without else plain(premium / without),
        cheapest_excluded_offering=excluded[0][1] if excluded else None)


def explain_infeasible(per_workload: Sequence[tuple[Workload, Sequence[CandidateResult]]],
                       binding: str | None = None) -> list[str]:
    """Why no plan: per workload without a feasible candidate, its rejections counted, the binding constraint
    (the last check any candidate reached) and the nearest misses; else the program's own `binding` (capacity
    plans say the same of a workload no period can serve: QA, they blamed the price kinds for a TPOT target)."""
    lines = []
    for w, results in per_workload:
        if any(r.feasible for r in results):
            continue
        kinds = Counter(r.evaluation.reason_kind for r in results)
        considered = [r for r in results if r.evaluation.reason_kind not in POLICY_REJECTIONS]
        lines.append(f"workload {w.name}: no candidate is feasible among {len(results)} "
                     f"({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))})")
        if not considered:
            lines.append(f"workload {w.name}: binding constraint is policy: no priced offering is allowed "
                         "(residency, provider allow-list or price kinds)")
            continue
        # the checks run in REJECTION_KINDS' order, so the last one any candidate reached is what stops the
        # candidates that passed every check before it: the binding constraint. The most frequent reason named a
        # 70B model's TTFT target of 100 ms "fit" (1,247 GPUs too small) although 469 candidates fit and all of
        # them missed the target -- and sent the user after bigger GPUs that could not help.
        checks: list[str] = [k for k in REJECTION_KINDS if k not in POLICY_REJECTIONS and k != "simulation"]
        reached = [k for k in checks if any(r.evaluation.reason_kind == k for r in considered)]
        if reached:
            kind: str = reached[-1]
            before = checks[:checks.index(kind)]
            passed = " and ".join([", ".join(before[:-1]), before[-1]] if len(before) > 1 else before)
        else:  # only shapes the simulated plan left out
            kind, passed = str(Counter(r.evaluation.reason_kind for r in considered).most_common(1)[0][0]), ""
        lines.append(f"workload {w.name}: binding constraint: {kind} "
                     f"(stopped {sum(1 for r in considered if r.evaluation.reason_kind == kind)} of "
                     f"{len(considered)} evaluated candidates"
                     + (f": every one that passed {passed})" if passed else ")"))
        fit_misses = [r for r in considered if r.evaluation.gib_short is not None]
        slo_misses = [r for r in considered if r.evaluation.ms_over is not None]
        if fit_misses:
            r = min(fit_misses, key=lambda r: (r.evaluation.gib_short or 0.0, r.offering.offering_id))
            lines.append(f"workload {w.name}: nearest fit: {_short(r)} is {r.evaluation.gib_short:.2f} GiB short "
                         f"per GPU")
        if slo_misses:
            r = min(slo_misses, key=lambda r: (r.evaluation.ms_over or 0.0, r.offering.offering_id))
            lines.append(f"workload {w.name}: nearest latency: {_short(r)} misses by "
                         f"{r.evaluation.ms_over:,.1f} ms ({r.evaluation.reason})")
    if not lines and binding:
        lines.append(f"no plan satisfies every constraint together: {binding}")
    return lines


def _short(r: CandidateResult) -> str:
    s = r.shape
    shape = f" TP={s.tensor_parallel} PP={s.pipeline_parallel} {s.precision}/KV {s.kv_cache_dtype}" if s else ""
    return f"{r.offering.provider} {r.offering.sku} ({r.offering.gpu} x{r.offering.gpu_count}){shape}"


def unservable_names(workloads: Sequence[Workload]) -> list[str]:
    """A `model: {config, name}` workload's name is what its command serves (`vllm serve NAME`): one that is
    neither a Hugging Face repository id nor a path is planned from the config but gives a command that cannot
    start (QA: a name of shell text was quoted safely and planned, exit 0). Said, not refused: schema 1 files with
    a display name (`name: my-model`) keep planning."""
    from gpuopt.physics.resolution import looks_like_path

    out = []
    for w in workloads:
        if isinstance(w.model, ModelConfigRef) and not looks_like_path(w.model.name):
            try:
                repository_id(w.model.name)
            except ValueError:
                out.append(f"workload {w.name}: model name {w.model.name!r} is neither a Hugging Face repository id "
                           "(organisation/name) nor a local path, so its vllm serve command cannot start as printed; "
                           "name the repository or directory that holds the weights")
    return out


def routing_notes(deployments: Sequence[Deployment]) -> list[str]:
    """A workload served by deployments whose replicas carry unequal loads (another GPU type, precision or TP)
    needs its requests routed by weight: a balancer that deals them evenly (round-robin, a Kubernetes Service)
    sends every replica the same share, and the smaller ones drown (QA: an L40S replica planned for 0.38
    requests/s beside an MI300X one at 5.62 got 3 each: p90 TTFT 422 s). Said once per workload, with each
    deployment's share of the workload's traffic and its replicas' planned load."""
    by_workload: dict[str, list[Deployment]] = {}
    for d in deployments:
        if d.at_planned_load is not None:
            by_workload.setdefault(d.workload, []).append(d)
    notes = []
    for workload, mine in by_workload.items():
        loads = [d.at_planned_load.requests_per_second for d in mine if d.at_planned_load is not None]
        if len(mine) < 2 or min(loads) <= 0 or max(loads) <= 1.1 * min(loads):
            continue
        total = sum(d.replicas * load for d, load in zip(mine, loads, strict=True))
        shares = ", ".join(f"{d.replicas * load / total:.0%} to {d.provider} {d.sku} ({d.replicas} replica(s) at "
                           f"{load:,.3g} requests/s each)" for d, load in zip(mine, loads, strict=True))
        notes.append(f"workload {workload}: its replicas carry unequal loads; route its requests by weight -- "
                     f"{shares} -- not evenly (round-robin or a plain Kubernetes Service would give every replica "
                     "the same share and overload the smaller ones)")
    return notes


def convoy_notes(workloads: Sequence[Workload]) -> list[str]:
    """A `concurrency:` workload of one length is planned as clients whose requests interleave, as real traffic's
    varied lengths make them; `vllm bench serve --max-concurrency N` with one prompt and output length starts
    its clients together, and requests admitted in one step finish in one step, so they stay in lockstep and
    measure a TTFT many times the plan's (QA: 3,301 ms p99 for a plan of 279; docs/simulator.md, "Closed loops
    are not confirmed"). Said, with how to benchmark the plan's traffic, so a check does not read as a miss."""
    return [f"workload {w.name}: planned for {w.concurrency} clients whose requests interleave; benchmark it with "
            f"varied lengths (`vllm bench serve --max-concurrency {w.concurrency} --random-range-ratio 0.2`, or a "
            "--request-rate ramp): with one length the clients run in lockstep and measure a TTFT many times "
            "the plan's" for w in workloads if w.concurrency is not None and one_length(w)]


def one_length(w: Workload) -> bool:
    """Whether every request of the workload has one prompt and one output length: no `lengths:`, or a histogram
    of one kind of request."""
    if w.lengths is None:
        return True
    bins = w.lengths.histogram or []
    return bool(bins) and len({(b.input_tokens, b.output_tokens) for b in bins if b.share > 0}) == 1


def unchecked_context_notes(workloads: Sequence[Workload], archs: Mapping[str, ModelArchitecture]) -> list[str]:
    """A workload whose model's context limit gpuopt does not know (a registry row without it, its config not
    in the cache): its max_model_len cannot be checked, and vLLM refuses to start above the checkpoint's. `fit`
    said so; a plan did not (QA: Qwen3.5-9B planned at `--max-model-len 300000` without a word)."""
    from gpuopt.physics.context_limit import limit_advice, model_max_len

    return [f"workload {w.name}: the context limit of {arch.hf_id} is unknown to gpuopt, so max_model_len "
            f"{'(' + format(w.max_model_len, ',') + ') ' if w.max_model_len else ''}is not checked against it; "
            f"{limit_advice(arch)}"
            for w in workloads if (arch := archs.get(w.name)) is not None and model_max_len(arch) is None]


def tail_past_context_notes(workloads: Sequence[Workload], archs: Mapping[str, ModelArchitecture]) -> list[str]:
    """A ShareGPT-shaped workload whose longest requests (5 x the means) are longer than the model's context:
    its max_model_len stops at the context, vLLM refuses the longer requests, and the plan is sized as if they
    were served. Said with the share of requests past it (10,000 draws of the workload's own length model;
    review: Llama-2-7b at 1,000/250 planned 4,096 against requests of up to 6,250 tokens without a word)."""
    from gpuopt.physics.context_limit import model_max_len
    from gpuopt.physics.traffic import ShareGPTLengths, longest_sharegpt

    notes = []
    for w in workloads:
        arch = archs.get(w.name)
        if arch is None or w.lengths is None or w.lengths.dataset != "sharegpt" or w.max_model_len:
            continue
        limit = model_max_len(arch)
        longest = longest_sharegpt(w.input_tokens, w.output_tokens)
        if limit is None or longest <= limit:
            continue
        share = ShareGPTLengths(float(w.input_tokens), float(w.output_tokens)).share_longer_than(limit)
        notes.append(f"workload {w.name}: dataset sharegpt sends requests of up to {longest:,} tokens, past the "
                     f"{limit:,} of context {arch.hf_id} supports: vLLM refuses about {share:.1%} of them, which the "
                     "plan counts as served; shorten the means or describe the lengths with a histogram")
    return notes

"""Sensitivity of a solved plan: the traffic multiplier at which its replicas stop meeting the SLOs, the cost
of the next plan, and the cost against a sweep of TPOT targets (a small Pareto table)."""

from __future__ import annotations

from dataclasses import replace

from gpuopt.inputs.workload import Slo, WorkloadFile
from gpuopt.planner.plan import Plan, Sensitivity, SweepPoint
from gpuopt.pricing.catalog import Catalog

TPOT_FACTORS = (0.5, 0.75, 1.0, 1.5, 2.0)


def traffic_limit(plan: Plan) -> float:
    """min over workloads of (sustainable load of its planned replicas, no headroom) / demand."""
    limits = []
    for w in plan.workloads:
        mine = [d for d in plan.deployments if d.workload == w.name]
        if w.demand_unit == "concurrency":
            capacity = sum(d.replicas * d.predicted.replica_concurrency for d in mine)
        else:
            capacity = sum(d.replicas * d.predicted.replica_requests_per_second for d in mine)
        limits.append(capacity / w.demand if w.demand else float("inf"))
    return round(min(limits), 4) if limits else 0.0


def scaled_demand(wf: WorkloadFile, factor: float) -> WorkloadFile:
    workloads = []
    for w in wf.workloads:
        if w.requests_per_second is not None:
            workloads.append(w.model_copy(update={"requests_per_second": w.requests_per_second * factor}))
        else:
            workloads.append(w.model_copy(update={"concurrency": max(1, int((w.concurrency or 1) * factor + 0.999))}))
    return wf.model_copy(update={"workloads": workloads})


def scaled_tpot(wf: WorkloadFile, factor: float) -> WorkloadFile:
    workloads = []
    for w in wf.workloads:
        tpot = None if w.slo.tpot_ms is None else w.slo.tpot_ms * factor
        workloads.append(w.model_copy(update={"slo": Slo(ttft_ms=w.slo.ttft_ms, tpot_ms=tpot)}))
    return wf.model_copy(update={"workloads": workloads})


def analyse(wf: WorkloadFile, catalog: Catalog, opts: object, plan: Plan) -> Sensitivity:
    from gpuopt.planner.solve import SolveOptions, plan_workloads

    assert isinstance(opts, SolveOptions)  # typed loosely to avoid an import cycle
    quick = replace(opts, top=0, sensitivity=False, premium=False, candidate_records=False)
    limit = traffic_limit(plan)
    nxt, _ = plan_workloads(scaled_demand(wf, limit * 1.01), catalog, quick)
    sweep = []
    for factor in TPOT_FACTORS:
        if factor == 1.0:
            sweep.append(SweepPoint(tpot_factor=1.0, status=plan.status, cost=plan.total_cost_per_hour))
            continue
        p, _ = plan_workloads(scaled_tpot(wf, factor), catalog, quick)
        sweep.append(SweepPoint(tpot_factor=factor, status=p.status, cost=p.total_cost_per_hour))
    return Sensitivity(traffic_multiplier_limit=limit, next_plan_cost=nxt.total_cost_per_hour, tpot_sweep=sweep)

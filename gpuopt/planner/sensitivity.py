"""Sensitivity of a solved plan or schedule: the traffic multiplier at which its replicas stop meeting the
SLOs, the cost of the next plan, and the cost against a sweep of TPOT targets (a small Pareto table).

It runs after solving and re-solves: this module imports the planners (solve, capacity), they never import
it, and the commands call it when --sensitivity asks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from gpuopt.errors import ConfigError
from gpuopt.inputs.workload import ServingTarget, Slo, WorkloadFile
from gpuopt.planner.capacity import (
    CapacityPlan,
    CapacitySolution,
    Schedule,
    build_problem,
    printed_total,
    solve_capacity,
)
from gpuopt.planner.plan import Plan, PlanStatus, Sensitivity, SweepPoint
from gpuopt.planner.solve import SolveOptions, plan_workloads
from gpuopt.pricing.catalog import Catalog

TPOT_FACTORS = (0.5, 0.75, 1.0, 1.5, 2.0)
NEXT_STEP = 1.01  # the next plan is the cheapest for demand 1 % above the traffic limit

W = TypeVar("W", bound=ServingTarget)


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


def scaled_tpot(workloads: Sequence[W], factor: float) -> list[W]:
    """The workloads with every TPOT target multiplied by `factor` (TTFT targets kept)."""
    return [w.model_copy(update={"slo": Slo(ttft_ms=w.slo.ttft_ms, tpot_ms=None if w.slo.tpot_ms is None
                                            else w.slo.tpot_ms * factor)}) for w in workloads]


def tpot_sweep(status: PlanStatus, cost: float | None,
               solve_at: Callable[[float], tuple[PlanStatus, float | None]]) -> list[SweepPoint]:
    """Cost at each TPOT factor: the plan's own at 1.0, a re-solve (`solve_at(factor)`) at the others."""
    sweep = []
    for factor in TPOT_FACTORS:
        at = (status, cost) if factor == 1.0 else solve_at(factor)
        sweep.append(SweepPoint(tpot_factor=factor, status=at[0], cost=at[1]))
    return sweep


def analyse(wf: WorkloadFile, catalog: Catalog, opts: SolveOptions, plan: Plan) -> Sensitivity:
    """For `solve`: each re-solve without alternatives, residency premium or candidate records."""
    quick = replace(opts, top=0, premium=False, candidate_records=False)
    limit = traffic_limit(plan)
    nxt, _ = plan_workloads(scaled_demand(wf, limit * NEXT_STEP), catalog, quick)

    def solve_at(factor: float) -> tuple[PlanStatus, float | None]:
        p, _ = plan_workloads(wf.model_copy(update={"workloads": scaled_tpot(wf.workloads, factor)}), catalog, quick)
        return p.status, p.total_cost_per_hour

    return Sensitivity(traffic_multiplier_limit=limit, next_plan_cost=nxt.total_cost_per_hour,
                       tpot_sweep=tpot_sweep(plan.status, plan.total_cost_per_hour, solve_at))


def analyse_capacity(solved: Schedule, catalog: Catalog, plan: CapacityPlan) -> Sensitivity:
    """For `plan`: the multiplier the planned replicas carry in every period (from the unrounded
    capacities of the schedule), the next schedule's cost over the horizon, and the TPOT sweep."""
    p, sol, opts = solved.problem, solved.solution, solved.opts
    ratios = [sol.capacity[w][t] / d for w, series in p.demand.items() for t, d in enumerate(series) if d > 0]
    limit = round(min(ratios), 4) if ratios else 0.0
    nxt = solve_capacity(p, opts.headroom, scale=limit * NEXT_STEP)

    def solve_at(factor: float) -> tuple[PlanStatus, float | None]:
        try:
            q = build_problem(p.cf.model_copy(update={"workloads": scaled_tpot(p.cf.workloads, factor)}), catalog,
                              opts)
            run = solve_capacity(q, opts.headroom)
        except ConfigError:  # no offering of some price kind is feasible at this target
            run = CapacitySolution("infeasible", None, [], 0.0, [], {}, {}, 0.0)
        return run.status, printed_total(q, run) if run.status == "optimal" else None

    # costs as a plan prints them: the sum of the purchase lines' cents (capacity.printed_total), so the next
    # schedule's cost is the total its own plan would print, not its unrounded cost rounded once
    return Sensitivity(traffic_multiplier_limit=limit,
                       next_plan_cost=printed_total(p, nxt) if nxt.status == "optimal" else None,
                       tpot_sweep=tpot_sweep(plan.status, plan.total_cost, solve_at))

"""Quarterly (or monthly) capacity planning: what to commit to in which period, what to rent as it comes.

Formulation (PuLP, the same solver as `solve`)

    sets      T periods of H hours (730 x months per period); O offerings with feasible candidates;
              uncommitted offerings U (on-demand, spot, community) and commitments K (reservations, savings
              plans, subscriptions), each with a term of L_o periods; C candidates (workload, offering, shape)
    variables n[o,t] in Z>=0   uncommitted instances of o in period t                       (o in U)
              y[o,t] in Z>=0   commitments of o bought at the start of period t            (o in K)
              x[c,t] in Z>=0   replicas of candidate c in period t
    capacity  cap[o,t] = n[o,t] (o in U);  cap[o,t] = sum over s in (t - L_o, t] of y[o,s]   (o in K)
    minimise  sum_{o in U,t} price_o H n[o,t] + sum_{o in K,t} price_o h_o y[o,t]   (+ tie-breaks)
              h_o = hours of the whole term (charge: full-term, the default: a commitment is paid in full
              whether used or not, also after the horizon) or only its hours inside the horizon
              (charge: inside-horizon, stated in the output)
    subject to
      demand[w,t]   sum_{c in C_w} headroom cap_c x[c,t] >= D[w,t]
      replicas[w,t] sum_{c in C_w} x[c,t] >= min_replicas_w
      pack[o,t]     sum_{c in C_o} g_c x[c,t] <= G_o cap[o,t]

Candidates and their sustainable loads come from the same memory and latency models as `solve`; the
capacity of a replica does not depend on the demand, so they are evaluated once.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuopt.errors import ConfigError
from gpuopt.inputs.capacity import RENEWABLE, TERM_MONTHS, UNCOMMITTED, CapacityFile, CapacityWorkload, demand_series
from gpuopt.inputs.workload import Workload
from gpuopt.planner.candidates import CandidateResult, Policy, enumerate_candidates
from gpuopt.planner.capacity_detail import RunningLine, cost_by_price_kind, running_lines
from gpuopt.planner.commitments import CommitmentSpan, CommitmentSummary, kept_in_scenarios, spans
from gpuopt.planner.commitments import summarise as summarise_commitments
from gpuopt.planner.plan import DEFAULT_HEADROOM, HOURS_PER_MONTH, Sensitivity, SweepPoint
from gpuopt.planner.program import dominant_shapes, make_solver, prune
from gpuopt.pricing.catalog import Catalog
from gpuopt.pricing.regions import Residency

EPS_GPU = 1e-6


@dataclass(frozen=True)
class CapacityOptions:
    region: str | None = None
    providers: tuple[str, ...] = ()
    currency: str | None = None
    headroom: float = DEFAULT_HEADROOM
    vllm_version: str | None = None
    sensitivity: bool = False


@dataclass
class CapacityProblem:
    cf: CapacityFile
    currency: str
    labels: list[str]
    hours_per_period: float
    demand: dict[str, list[float]]  # workload -> per period (base scenario)
    workloads: dict[str, CapacityWorkload]
    candidates: list[CandidateResult]  # feasible, priced, pruned
    all_candidates: list[CandidateResult]
    catalog: Catalog


@dataclass(frozen=True)
class Purchase:
    period: int
    offering: CandidateResult
    count: int
    committed: bool


@dataclass
class CapacitySolution:
    status: str
    total_cost: float | None
    period_costs: list[float]
    beyond_horizon: float
    purchases: list[Purchase]
    replicas: dict[tuple[int, int], int]  # (candidate index, period) -> replicas
    capacity: dict[str, list[float]]  # workload -> sustainable load per period (before headroom)
    seconds: float
    binding: str | None = None
    commitments_fixed: dict[tuple[tuple[str, ...], int], int] = field(default_factory=dict)
    proven_optimal: bool = True  # False when the solver stopped at its time limit with a feasible schedule


def term_periods(kind: str, months_per_period: int) -> int:
    if kind in UNCOMMITTED:
        return 1
    if kind in RENEWABLE:
        return 1  # renewed month by month to fill the period
    return TERM_MONTHS[kind] // months_per_period


def commitment_hours(kind: str, start: int, periods: int, months_per_period: int, charge: str) -> float:
    """Hours a commitment bought at the start of period `start` is paid for."""
    if kind in RENEWABLE:
        return HOURS_PER_MONTH * months_per_period
    term_months = TERM_MONTHS[kind]
    if charge == "inside-horizon":
        inside = min(term_months, (periods - start) * months_per_period)
        return HOURS_PER_MONTH * inside
    return HOURS_PER_MONTH * term_months


def build_problem(cf: CapacityFile, catalog: Catalog, opts: CapacityOptions) -> CapacityProblem:
    selector = opts.region or cf.residency
    residency = Residency(selector) if selector else None
    currency = opts.currency or cf.currency or "USD"
    kinds = tuple(sorted({k for w in cf.workloads for k in w.price_kinds}))
    policy = Policy(residency=residency, providers=tuple(opts.providers or cf.providers or ()), price_kinds=kinds,
                    currency=currency, vllm_version=opts.vllm_version)
    demand = {w.name: demand_series(w, cf.horizon) for w in cf.workloads}
    proxies = []
    for w in cf.workloads:
        peak = max(max(demand[w.name]), 1e-6)
        load = {"requests_per_second": peak} if w.demand.unit == "requests_per_second" else \
            {"concurrency": max(1, math.ceil(peak))}
        fields = {k: v for k, v in w.model_dump().items() if k in Workload.model_fields}
        proxies.append(Workload.model_validate({**fields, **load, "model": w.model}))
    per_workload = enumerate_candidates(proxies, catalog, policy)
    by_name = {w.name: w for w in cf.workloads}
    allowed = [c for wc in per_workload for c in wc.results
               if c.offering.price_kind in by_name[c.workload.name].price_kinds]
    problems = []
    for w in cf.workloads:
        for kind in w.price_kinds:
            if not any(c.workload.name == w.name and c.offering.price_kind == kind and c.offering.price_per_hour
                       is not None and c.evaluation.reason_kind not in ("residency", "provider")
                       for c in allowed):
                problems.append(f"workload {w.name}: price kind {kind}: no priced offering has it within the "
                                f"residency and provider policy")
    if problems:
        raise ConfigError(*problems)
    feasible = dominant_shapes(prune([c for c in allowed if c.feasible and c.instance_price is not None], ()))
    return CapacityProblem(cf=cf, currency=currency, labels=cf.horizon.labels(),
                           hours_per_period=HOURS_PER_MONTH * cf.horizon.months_per_period, demand=demand,
                           workloads=by_name, candidates=feasible, all_candidates=allowed, catalog=catalog)


def solve_capacity(p: CapacityProblem, headroom: float, kinds: tuple[str, ...] | None = None,
                   scale: float = 1.0, fixed_commitments: dict[tuple[tuple[str, ...], int], int] | None = None,
                   time_limit: float = 120.0) -> CapacitySolution:
    """The multi-period program; `kinds` restricts price kinds (all-on-demand baseline), `scale` multiplies
    demand (scenarios), `fixed_commitments` pins y[o,t] (a scenario run of a chosen schedule)."""
    import pulp as lp

    start = time.perf_counter()
    cands = [c for c in p.candidates if kinds is None or c.offering.price_kind in kinds]
    T = len(p.labels)
    mpp = p.cf.horizon.months_per_period
    offerings: dict[tuple[str, ...], CandidateResult] = {}
    for c in cands:
        offerings.setdefault(c.offering.key, c)
    keys = sorted(offerings)
    for w in p.workloads:
        if not any(c.workload.name == w for c in cands):
            return CapacitySolution("infeasible", None, [], 0.0, [], {}, {}, time.perf_counter() - start,
                                    f"workload {w}: no feasible candidate with the allowed price kinds")
    prob = lp.LpProblem("gpuopt_capacity", lp.LpMinimize)
    price = {k: float(offerings[k].instance_price or 0.0) for k in keys}
    gpus = {k: int(offerings[k].offering.gpu_count or 0) for k in keys}
    committed = {k: offerings[k].offering.price_kind not in UNCOMMITTED for k in keys}
    term = {k: term_periods(offerings[k].offering.price_kind, mpp) for k in keys}
    var = {(k, t): prob.add_variable(f"{'y' if committed[k] else 'n'}__{'__'.join(k)}__{t}".replace(" ", "_"),
                                     lowBound=0, cat="Integer") for k in keys for t in range(T)}
    x = {(i, t): prob.add_variable(f"x__{c.workload.name}__{i}__{t}", lowBound=0, cat="Integer")
         for i, c in enumerate(cands) for t in range(T)}
    cost_terms = []
    for rank, k in enumerate(keys):
        for t in range(T):
            if committed[k]:
                hours = commitment_hours(offerings[k].offering.price_kind, t, T, mpp, p.cf.charge)
            else:
                hours = p.hours_per_period
            cost_terms.append((price[k] * hours + EPS_GPU * gpus[k] + 1e-9 * rank) * var[(k, t)])
    prob += lp.lpSum(cost_terms)

    def capacity(k: tuple[str, ...], t: int) -> Any:
        if not committed[k]:
            return var[(k, t)]
        return lp.lpSum(var[(k, s)] for s in range(max(0, t - term[k] + 1), t + 1))

    by_offering: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, c in enumerate(cands):
        by_offering[c.offering.key].append(i)
    for t in range(T):
        for w, series in p.demand.items():
            idx = [i for i, c in enumerate(cands) if c.workload.name == w]
            prob += (lp.lpSum(headroom * cands[i].capacity * x[(i, t)] for i in idx) >= series[t] * scale,
                     f"demand__{w}__{t}")
            prob += (lp.lpSum(x[(i, t)] for i in idx) >= p.workloads[w].min_replicas, f"replicas__{w}__{t}")
        for k in keys:
            prob += (lp.lpSum((cands[i].gpus_per_replica or 0) * x[(i, t)] for i in by_offering[k])
                     <= gpus[k] * capacity(k, t), f"pack__{'__'.join(k)}__{t}".replace(" ", "_"))
    for (k, t), count in (fixed_commitments or {}).items():
        if (k, t) in var:
            prob += (var[(k, t)] == count, f"fixed__{'__'.join(k)}__{t}".replace(" ", "_"))
    solver, _ = make_solver(time_limit)
    prob.solve(solver)
    status = lp.LpStatus[prob.status]
    if status != "Optimal":
        return CapacitySolution("infeasible", None, [], 0.0, [], {}, {}, time.perf_counter() - start,
                                f"solver status {status}")
    counts = {kt: int(round(v.value() or 0)) for kt, v in var.items()}
    replicas = {it: int(round(v.value() or 0)) for it, v in x.items() if round(v.value() or 0) > 0}
    period_costs = [0.0] * T
    beyond = 0.0
    purchases = []
    for (k, t), n in sorted(counts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if n <= 0:
            continue
        o = offerings[k]
        purchases.append(Purchase(period=t, offering=o, count=n, committed=committed[k]))
        if committed[k]:
            hours = commitment_hours(o.offering.price_kind, t, T, mpp, p.cf.charge)
            per_period = price[k] * p.hours_per_period * n
            for s in range(t, min(T, t + term[k])):
                period_costs[s] += per_period
            beyond += price[k] * hours * n - per_period * (min(T, t + term[k]) - t)
        else:
            period_costs[t] += price[k] * p.hours_per_period * n
    capacity_out: dict[str, list[float]] = {w: [0.0] * T for w in p.demand}
    for (i, t), n in replicas.items():
        capacity_out[cands[i].workload.name][t] += cands[i].capacity * n
    fixed = {(k, t): n for (k, t), n in counts.items() if committed[k] and n > 0}
    total = sum(period_costs) + beyond
    return CapacitySolution("optimal", total, period_costs, max(0.0, beyond), purchases,
                            {(p.candidates.index(cands[i]), t): n for (i, t), n in replicas.items()},
                            capacity_out, time.perf_counter() - start, None, fixed,
                            proven_optimal=prob.sol_status == lp.LpSolutionOptimal)


# ---- the typed result -------------------------------------------------------------------------------------



class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PurchaseLine(_Frozen):
    provider: str
    service: str
    sku: str
    region: str
    gpu: str
    gpus_per_instance: int
    price_kind: str
    count: int
    committed: bool
    term_months: int | None
    price_per_hour: float  # 8 decimals: FOCUS rows rebuild the period costs from it to the cent
    hours: float  # instance-hours this line pays for (count x period or term hours)
    cost: float  # what this line costs (a commitment: its whole charge; rented: this period)
    break_even_utilisation: float | None  # commitment price / on-demand price of the same SKU and region
    workloads: list[str]


class PeriodLine(_Frozen):
    period: str
    demand: dict[str, float]
    capacity: dict[str, float]  # sustainable load of the planned replicas (before headroom)
    cost: float  # committed instances amortised over their active periods + rented instances
    purchases: list[PurchaseLine]
    cost_by_price_kind: dict[str, float] = {}  # the cost split: rented kinds + active commitments amortised
    running: list[RunningLine] = []  # replicas of the period: model, GPU, TP, precision, `vllm serve`


class ScenarioLine(_Frozen):
    name: str
    multiplier: float
    total_cost: float | None  # the schedule's commitments kept, the rest re-planned for this demand
    shortfall: dict[str, list[float]]  # demand the base plan's replicas cannot carry, per period
    idle: dict[str, list[float]]  # capacity of the base plan's replicas left unused, per period


class CapacityPlan(_Frozen):
    schema_version: int = 1
    kind: str = "gpuopt-capacity-plan"
    status: str
    currency: str
    horizon: str
    charge: str
    headroom: float
    periods: list[PeriodLine]
    total_cost: float | None
    all_on_demand_cost: float | None
    savings: float | None
    committed_after_horizon: float
    scenarios: list[ScenarioLine]
    sensitivity: Sensitivity | None = None
    explanation: list[str]
    as_of_date: str
    warnings: list[str] = []  # e.g. a schedule the solver stopped on at its time limit
    months_per_period: int | None = None  # 3 (quarters) or 1 (months); None in plans saved before it existed
    commitments: list[CommitmentSpan] = []  # every commitment, with its months and cost inside/after the horizon
    commitment_summary: CommitmentSummary | None = None  # obligation after the horizon and savings on both bases
    demand_units: dict[str, str] = {}  # workload -> requests_per_second | concurrency (demand and capacity)
    catalog_as_of: str = ""  # newest price date of the catalog the plan used
    fx: str = ""  # the FX rates the plan converted with


def _break_even(p: CapacityProblem, c: CandidateResult) -> float | None:
    o = c.offering
    if o.price_kind in UNCOMMITTED or c.instance_price is None:
        return None
    base = next((x for x in p.catalog.offerings if (x.provider, x.service, x.sku, x.region) ==
                 (o.provider, o.service, o.sku, o.region) and x.price_kind == "on-demand"
                 and x.price_per_hour is not None), None)
    if base is None:
        return None
    od = p.catalog.price_in(base, p.currency)
    return None if not od else round(c.instance_price / od, 4)


def plan_capacity(cf: CapacityFile, catalog: Catalog, opts: CapacityOptions, today: str) -> CapacityPlan:
    p = build_problem(cf, catalog, opts)
    sol = solve_capacity(p, opts.headroom)
    od_kinds = tuple(k for k in ("on-demand",))
    baseline = solve_capacity(p, opts.headroom, kinds=od_kinds) if any(
        c.offering.price_kind == "on-demand" for c in p.candidates) else None
    horizon = f"{cf.horizon.periods} {cf.horizon.period}s from {p.labels[0]}"
    if sol.status != "optimal" or sol.total_cost is None:
        return CapacityPlan(status="infeasible", currency=p.currency, horizon=horizon, charge=cf.charge,
                            headroom=opts.headroom, periods=[], total_cost=None,
                            all_on_demand_cost=None, savings=None, committed_after_horizon=0.0, scenarios=[],
                            explanation=[sol.binding or "no plan"], as_of_date=today)
    users: dict[tuple[tuple[str, ...], int], set[str]] = defaultdict(set)
    for (i, t), _n in sol.replicas.items():
        c = p.candidates[i]
        users[(c.offering.key, t)].add(c.workload.name)
        if c.offering.price_kind not in UNCOMMITTED:
            for s in range(t - term_periods(c.offering.price_kind, cf.horizon.months_per_period) + 1, t + 1):
                users[(c.offering.key, s)].add(c.workload.name)
    mpp = cf.horizon.months_per_period
    periods = []
    for t, label in enumerate(p.labels):
        lines = []
        for pu in (x for x in sol.purchases if x.period == t):
            o = pu.offering.offering
            price = float(pu.offering.instance_price or 0.0)
            hours = commitment_hours(o.price_kind, t, len(p.labels), mpp, cf.charge) if pu.committed \
                else p.hours_per_period
            lines.append(PurchaseLine(
                provider=o.provider, service=o.service, sku=o.sku, region=o.region, gpu=o.gpu,
                gpus_per_instance=o.gpu_count or 0, price_kind=o.price_kind, count=pu.count,
                committed=pu.committed, term_months=TERM_MONTHS.get(o.price_kind), price_per_hour=round(price, 8),
                hours=round(hours * pu.count, 2),
                cost=round(price * hours * pu.count, 2), break_even_utilisation=_break_even(p, pu.offering),
                workloads=sorted(users[(o.key, t)])))
        periods.append(PeriodLine(period=label, demand={w: round(v[t], 4) for w, v in p.demand.items()},
                                  capacity={w: round(v[t], 4) for w, v in sol.capacity.items()},
                                  cost=round(sol.period_costs[t], 2), purchases=lines))
    scenarios = []
    for name, factor in sorted(cf.scenarios.items(), key=lambda kv: kv[1]):
        run = solve_capacity(p, opts.headroom, scale=factor, fixed_commitments=kept_in_scenarios(sol.commitments_fixed))
        shortfall = {w: [round(max(0.0, d * factor - sol.capacity[w][t] * opts.headroom), 4)
                         for t, d in enumerate(series)] for w, series in p.demand.items()}
        idle = {w: [round(max(0.0, sol.capacity[w][t] * opts.headroom - d * factor), 4)
                    for t, d in enumerate(series)] for w, series in p.demand.items()}
        scenarios.append(ScenarioLine(name=name, multiplier=factor,
                                      total_cost=None if run.total_cost is None else round(run.total_cost, 2),
                                      shortfall=shortfall, idle=idle))
    od = None if baseline is None or baseline.total_cost is None else round(baseline.total_cost, 2)
    total = round(sol.total_cost, 2)
    sensitivity = _sensitivity(p, sol, cf, catalog, opts, total) if opts.sensitivity else None
    warnings = [f"the solver stopped at its time limit on the {what}: feasible, not proven optimal"
                for what, run in (("plan", sol), ("all-on-demand baseline", baseline))
                if run is not None and run.status == "optimal" and not run.proven_optimal]
    ledger = spans([(x.period, x.purchases) for x in periods], mpp)
    periods = [x.model_copy(update={"cost_by_price_kind": cost_by_price_kind(x.purchases, ledger, t, mpp),
                                    "running": running_lines(p.candidates, sol.replicas, t)})
               for t, x in enumerate(periods)]
    summary = summarise_commitments(cf.charge, [x.cost for x in periods], ledger, od)
    return CapacityPlan(status="optimal", currency=p.currency, horizon=horizon, charge=cf.charge,
                        headroom=opts.headroom, periods=periods, total_cost=total, all_on_demand_cost=od,
                        savings=None if od is None else round(od - total, 2),
                        committed_after_horizon=summary.obligation_after_horizon, scenarios=scenarios,
                        sensitivity=sensitivity, explanation=[], as_of_date=today, warnings=warnings,
                        months_per_period=mpp, commitments=ledger, commitment_summary=summary,
                        demand_units={w.name: w.demand.unit for w in cf.workloads}, catalog_as_of=catalog.as_of,
                        fx=catalog.fx.describe())


def _sensitivity(p: CapacityProblem, sol: CapacitySolution, cf: CapacityFile, catalog: Catalog,
                 opts: CapacityOptions, total: float) -> Sensitivity:
    """Traffic multiplier the planned replicas carry in every period, the next schedule's cost, TPOT sweep."""
    from gpuopt.inputs.workload import Slo
    from gpuopt.planner.sensitivity import TPOT_FACTORS

    ratios = [sol.capacity[w][t] / d for w, series in p.demand.items() for t, d in enumerate(series) if d > 0]
    limit = round(min(ratios), 4) if ratios else 0.0
    nxt = solve_capacity(p, opts.headroom, scale=limit * 1.01)
    sweep = []
    for factor in TPOT_FACTORS:
        if factor == 1.0:
            sweep.append(SweepPoint(tpot_factor=1.0, status="optimal", cost=total))
            continue
        workloads = [w.model_copy(update={"slo": Slo(ttft_ms=w.slo.ttft_ms, tpot_ms=None if w.slo.tpot_ms is None
                                                      else w.slo.tpot_ms * factor)}) for w in cf.workloads]
        try:
            q = build_problem(cf.model_copy(update={"workloads": workloads}), catalog, opts)
            run = solve_capacity(q, opts.headroom)
        except ConfigError:
            run = CapacitySolution("infeasible", None, [], 0.0, [], {}, {}, 0.0)
        sweep.append(SweepPoint(tpot_factor=factor, status="optimal" if run.total_cost is not None else "infeasible",
                                cost=None if run.total_cost is None else round(run.total_cost, 2)))
    return Sensitivity(traffic_multiplier_limit=limit,
                       next_plan_cost=None if nxt.total_cost is None else round(nxt.total_cost, 2), tpot_sweep=sweep)

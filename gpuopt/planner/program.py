"""The integer program of gpuopt, built in one place: which offerings to buy (rent per period, or commit to
for a term) and how many replicas of each candidate to run in each period. `solve` is this program with one
period and only rented offerings; `plan` (planner/capacity.py) adds periods and commitments.

Formulation (PuLP; CBC 2.10 as bundled with PuLP 3 by default, HiGHS when installed: see make_solver)

    sets      W workloads; T periods of H hours (solve: one period, H = 1, so costs are per hour);
              O offerings with at least one feasible candidate: rented ones U (on-demand, spot, community)
              and commitments K (reservations, savings plans, subscriptions) with a term of L_o periods;
              C feasible candidates, each c with workload w(c), offering o(c), GPUs g_c and sustainable
              load cap_c (in w's unit)
    variables n[o,t] in Z>=0   instances of o rented in period t                                (o in U)
              y[o,t] in Z>=0   commitments to o bought at the start of period t                 (o in K)
              x[c,t] in Z>=0   replicas of candidate c in period t
    capacity  cap[o,t] = n[o,t] (o in U);  cap[o,t] = sum over s in (t - L_o, t] of y[o,s]   (o in K)
    minimise  sum_{o,t} (usd_o h[o,t] / H  +  1e-6 G_o  +  1e-9 rank_o) (n|y)[o,t]
              usd_o: o's price per hour in USD (candidates.CANONICAL_CURRENCY, converted from the catalog's
              own price) whatever the plan's currency (see "Ties" below); h[o,t] = H for a rented instance,
              the hours a commitment bought in t is charged for (see capacity.commitment_hours); divided by H
              the objective is a cost per hour of a period, so one period of rented offerings is exactly the
              `solve` program; the G_o (GPUs) and rank_o (offering key order) terms are hints, not a rule
    subject to
      demand[w,t]    sum_{c in C_w} headroom cap_c x[c,t] >= D[w,t]     each workload's traffic, with headroom
      replicas[w,t]  sum_{c in C_w} x[c,t] >= min_replicas_w            availability floor
      pack[o,t]      sum_{c in C_o} g_c x[c,t] <= G_o cap[o,t]          replicas fit in the instances held
                     (replica sizes are powers of two dividing G_o, so the GPU count is the only packing
                      limit; a PP replica of k instances has g_c = k G_o)
      quota[q,t]     sum_{o in q} cap[o,t] <= Q_q                       optional per provider/SKU/region
      budget[t]      sum_o price_o cap[o,t] <= B                        optional, per hour, in the plan's
                                                                        currency (price_o, as B)
      fixed[o,t]     y[o,t] = Y[o,t]                                    optional: a schedule's commitments kept

Residency and provider policy are applied when the candidate set is built, not here. Two reductions keep
the model small without changing its optimum: offerings that can never win (the same price kind, GPUs per
instance and candidates as a cheaper one, no quota on them) are left out, and per offering and replica
size only the shape with the most capacity is kept (prune, dominant_shapes). Both stay in the candidate list.

After solving, replicas the constraints do not need are dropped (see _trim): spare GPUs of a held instance
cost nothing, so the program is free to fill them, and which it fills depends on the solver's path. A
tie-break term in the objective would do the same but made CBC search 20 times as many nodes (50 workloads:
4.0 s instead of 1.0 s).

Ties. Plans of equal cost are common (RunPod sells 1, 2, 4 and 8 GPUs of a type at 1, 2, 4 and 8 times one
price; the replicas on a held instance's GPUs are free). The rule: the program prices every offering in USD,
converted from its own price (CandidateResult.canonical_price: the same bits whatever the plan's currency;
the plan's price converted back is not), and the plan is the solver's optimum of that one model --
deterministic for a solver (one thread, zero relative gap) and the same in USD and CNY; CBC and HiGHS may
choose differently (the goldens pin CBC). The pruning and the choice of shapes to simulate compare USD prices
too. Until 2026-12-03 the objective was in the plan's currency, and CNY, 6.65 times the USD figures, scaled
the costs against the fixed tie terms and the solvers' absolute tolerances: on HiGHS rag-long-context bought a
1x and a 2x H100 NVL pod in USD but three 1x pods in CNY (63.67 CNY/h either way), on CBC cn-chat-70b ran its
4-GPU instance as one TP=4 replica in USD and as two TP=2 replicas in CNY. The 1e-6 G_o and 1e-9 rank_o
terms do not make "fewer GPUs, then offering order" a rule: they are within the solvers' tolerances (HiGHS's
absolute gap is 1e-6; CBC 2.10 buys a 2-GPU instance over a 1-GPU one of the same price). A rule that holds
needs a second solve over the optimal plans (cost held at the optimum, minimise GPUs x (offerings + 1) + rank,
integral): it took the program of benchmarks/solve_scaling.py's 10 workloads from 0.21 to 0.44 s (CBC) and
0.3 to 0.8 s (HiGHS), of its 50 from 2.3 to 10.0 s (CBC) and 6.3 to 25.9 s (HiGHS), so it is not done.
"""

from __future__ import annotations

import difflib
import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuopt.errors import GpuoptError
from gpuopt.inputs.workload import Quota, Workload
from gpuopt.planner.candidates import CandidateResult
from gpuopt.planner.plan import PlanStatus
from gpuopt.pricing.catalog import Catalog

OfferingKey = tuple[str, ...]  # Offering.key: provider, service, SKU, region, price kind


@dataclass(frozen=True)
class Assignment:
    candidate: CandidateResult
    replicas: int


@dataclass(frozen=True)
class Solution:
    status: PlanStatus
    cost_per_hour: float | None
    instances: dict[OfferingKey, int]
    assignments: list[Assignment]
    solver: str
    seconds: float
    variables: int
    constraints: int
    binding: str | None  # for infeasible: which constraint family stopped it
    proven_optimal: bool = True  # False when the solver stopped at its time limit with a feasible plan

    def carried(self) -> dict[str, float]:
        """Each workload's capacity over its planned replicas (in its demand unit, before headroom): traffic is
        spread in proportion to capacity, so a replica's planned load is its capacity x demand / this."""
        out: dict[str, float] = defaultdict(float)
        for a in self.assignments:
            out[a.candidate.workload.name] += a.candidate.capacity * a.replicas
        return out


def _quota_matches(q: Quota, c: CandidateResult) -> bool:
    o = c.offering
    return o.provider == q.provider and (q.sku is None or o.sku == q.sku) and (q.region is None or o.region == q.region)


def quota_problems(quotas: Sequence[Quota], catalog: Catalog) -> list[tuple[tuple[str | int, ...], str]]:
    """A quota that matches no offering of the catalog: a misspelt region or SKU (`us-east1`, `g6.xlarg`) capped
    nothing and the plan used the offering it meant, silently, where a misspelt residency or provider is
    refused. Each with its place in the file and the nearest names the catalog has."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for i, q in enumerate(quotas):
        mine = [o for o in catalog.offerings if o.provider == q.provider]
        if not mine:
            continue  # the provider is checked with the file (WorkloadFile._quota_providers)
        before = len(problems)
        for field, value in (("sku", q.sku), ("region", q.region)):
            if value is None:
                continue
            known = sorted({getattr(o, field) for o in mine})
            if value not in known:
                near = difflib.get_close_matches(value, known, n=3)
                hint = f"; did you mean {', '.join(near)}?" if near else ""
                problems.append((("quotas", i, field), f"{q.provider} has no {field} '{value}' in the catalog, so "
                                 f"the quota would cap nothing{hint}"))
        if len(problems) == before and q.sku is not None and q.region is not None and not any(
                o.sku == q.sku and o.region == q.region for o in mine):
            problems.append((("quotas", i, "region"), f"{q.provider} does not sell {q.sku} in {q.region} (the "
                             "quota would cap nothing)"))
    return problems


def instance_cap(c: CandidateResult, quotas: Sequence[Quota]) -> float:
    """The most instances of `c`'s offering any quota allows (inf when none applies): each quota caps the sum
    over the offerings it matches, so one offering alone can have no more than the smallest."""
    return min((float(q.max_instances) for q in quotas if _quota_matches(q, c)), default=math.inf)


def dominant_shapes(candidates: Sequence[CandidateResult]) -> list[CandidateResult]:
    """Per (workload, offering, GPUs per replica) keep the shape with the most capacity (first on ties): a
    replica of the same size that carries less load can never make a plan cheaper."""
    best: dict[tuple[object, ...], CandidateResult] = {}
    for c in candidates:
        key = (c.workload.name, c.offering.key, c.gpus_per_replica)
        if key not in best or c.capacity > best[key].capacity:
            best[key] = c
    keep = {id(c) for c in best.values()}
    return [c for c in candidates if id(c) in keep]


def prune(candidates: Sequence[CandidateResult], quotas: Sequence[Quota]) -> list[CandidateResult]:
    """Drop offerings that can never win: another offering of the same price kind with as many GPUs per
    instance carries the very same candidates (the same evaluation objects: one GPU type, count and link
    share them) for less (in USD, as the program compares; ties: the smaller id wins). Such twins are
    common: one instance type sold by several providers, regions and services. Offerings under a quota are
    all kept (a cheaper twin may run out). Decided per offering: all its candidates share its price."""
    members: dict[tuple[str, ...], list[CandidateResult]] = defaultdict(list)
    for c in candidates:
        members[c.offering.key].append(c)
    keep: set[tuple[str, ...]] = set()
    cheapest: dict[tuple[object, ...], tuple[float, str, tuple[str, ...]]] = {}  # signature -> (price, id, key)
    for key, cs in members.items():
        first = cs[0]
        if any(_quota_matches(q, first) for q in quotas):
            keep.add(key)
            continue
        # the price kind stays in the key: the capacity program treats commitments and spot differently
        sig = (first.offering.gpu_count, first.offering.price_kind, tuple(id(c.evaluation) for c in cs))
        rank = (first.canonical_price or 0.0, first.offering.offering_id, key)
        if sig not in cheapest or rank < cheapest[sig]:
            cheapest[sig] = rank
    keep |= {key for _, _, key in cheapest.values()}
    return [c for c in candidates if c.offering.key in keep]


def lower_bound(workloads: Sequence[Workload], candidates: Sequence[CandidateResult], headroom: float) -> float:
    """A cost per hour no plan over these candidates can beat, without solving: each workload alone, its
    replicas charged only for their GPUs' share of the instance price, fractional replicas allowed.

    Valid because cost = sum_o price_o n_o >= sum_c (price_o g_c / G_o) x_c (packing), and each workload's
    x_c must cover D_w with headroom and number at least min_replicas. inf when a workload has no candidate.
    """
    per_gpu_cost: dict[str, float] = {}
    per_load_cost: dict[str, float] = {}
    for c in candidates:
        if not c.feasible or c.instance_price is None or c.capacity <= 0:
            continue
        replica_cost = c.instance_price * (c.gpus_per_replica or 0) / (c.offering.gpu_count or 1)
        name = c.workload.name
        per_gpu_cost[name] = min(per_gpu_cost.get(name, math.inf), replica_cost)
        per_load_cost[name] = min(per_load_cost.get(name, math.inf), replica_cost / (headroom * c.capacity))
    total = 0.0
    for w in workloads:
        if w.name not in per_gpu_cost:
            return math.inf
        total += max(w.demand * per_load_cost[w.name], w.min_replicas * per_gpu_cost[w.name])
    return total


def make_solver(time_limit: float | None) -> tuple[object, str]:
    """HiGHS when installed (`pip install gpuopt[highs]`), else CBC 2.10.3, the release PuLP 3 bundles,
    through COIN_CMD; GPUOPT_SOLVER=cbc or highs picks one (equal-cost plans may differ between solvers, so
    the golden tests pin CBC). One thread and a zero gap, so the same model gives the same answer.

    Not cbcbox (the `pulp[cbc]` extra): its development build of CBC (git 146ce89) reported plans 0.10/h
    above the optimum as optimal from 24 workloads up (benchmarks/solve_scaling.py checks the plan against
    every workload solved alone), and took ten times as long."""
    import os

    import pulp as lp
    from pulp.apis.coin_api import pulp_cbc_path

    wanted = os.environ.get("GPUOPT_SOLVER", "").strip().lower()
    if wanted not in ("", "cbc", "highs"):
        raise GpuoptError(f"GPUOPT_SOLVER must be cbc or highs (got '{wanted}')")
    highs = "HiGHS" in lp.listSolvers(onlyAvailable=True)
    if wanted == "highs" and not highs:
        raise GpuoptError("GPUOPT_SOLVER=highs but HiGHS is not installed: pip install 'gpuopt[highs]'")
    if highs and wanted != "cbc":
        return lp.HiGHS(msg=False, gapRel=0.0, timeLimit=time_limit, threads=1), "HiGHS"
    solver = lp.COIN_CMD(path=pulp_cbc_path, msg=False, gapRel=0.0, timeLimit=time_limit, threads=1)
    if not solver.available():
        raise GpuoptError(f"no MILP solver: PuLP's bundled CBC ({pulp_cbc_path}) cannot run here; "
                          "install HiGHS with: pip install 'gpuopt[highs]'")
    return solver, "CBC"


@dataclass(frozen=True)
class Commitment:
    """How a committed offering is held and paid: a purchase at the start of period t holds capacity for
    `periods` periods (t .. t + periods - 1) and is charged `hours[t]` hours (its whole term, or only its
    hours inside the horizon)."""

    periods: int
    hours: tuple[float, ...]


@dataclass(frozen=True)
class Period:
    """What the program holds and runs in one period."""

    bought: dict[OfferingKey, int]  # rented instances, or commitments bought at the period's start (> 0 only)
    assignments: list[Assignment]  # replicas run in the period, only those the constraints need


@dataclass(frozen=True)
class ProgramResult:
    status: PlanStatus
    periods: list[Period]  # empty when infeasible
    solver: str
    seconds: float
    variables: int
    constraints: int
    solver_status: str | None = None  # PuLP's status when the solver found no plan
    unserved: str | None = None  # a workload without any candidate (the program is not built)
    proven_optimal: bool = True  # False when the solver stopped at its time limit with a feasible plan


def optimise(demand: Mapping[str, Sequence[float]], min_replicas: Mapping[str, int],
             candidates: Sequence[CandidateResult], headroom: float, *, hours_per_period: float = 1.0,
             commitments: Mapping[OfferingKey, Commitment] | None = None, quotas: Sequence[Quota] = (),
             budget_per_hour: float | None = None, fixed: Mapping[tuple[OfferingKey, int], int] | None = None,
             time_limit: float | None = 60.0) -> ProgramResult:
    """Build and solve the program above. `demand` gives each workload's demand per period (every series as
    long as the horizon), in the order the constraints are written; `candidates` are feasible and priced
    (reduce them first: prune, dominant_shapes); offerings missing from `commitments` are rented.

    Variable and constraint names carry no period suffix in a one-period program: CBC orders columns by
    name, and the `solve` goldens were written with these names."""
    import pulp as lp

    start = time.perf_counter()
    commitments = commitments or {}
    T = len(next(iter(demand.values()), ()))
    by_workload: dict[str, list[int]] = defaultdict(list)
    by_offering: dict[OfferingKey, list[int]] = defaultdict(list)
    offerings: dict[OfferingKey, CandidateResult] = {}
    for i, c in enumerate(candidates):
        by_workload[c.workload.name].append(i)
        by_offering[c.offering.key].append(i)
        offerings.setdefault(c.offering.key, c)
    for name in demand:
        if not by_workload.get(name):
            return ProgramResult("infeasible", [], "none", time.perf_counter() - start, 0, 0, unserved=name)
    prob = lp.LpProblem("gpuopt_plan", lp.LpMinimize)
    keys = sorted(offerings)

    def suffix(t: int) -> str:
        return "" if T == 1 else f"__{t}"

    var = {(k, t): prob.add_variable(f"{'y' if k in commitments else 'n'}__{'__'.join(k)}{suffix(t)}"
                                     .replace(" ", "_"), lowBound=0, cat="Integer") for k in keys for t in range(T)}
    x = {(i, t): prob.add_variable(f"x__{c.workload.name}__{i}{suffix(t)}", lowBound=0, cat="Integer")
         for i, c in enumerate(candidates) for t in range(T)}
    price = {k: float(offerings[k].instance_price or 0.0) for k in keys}  # the plan's currency: the budget
    canonical = {k: float(offerings[k].canonical_price or 0.0) for k in keys}  # the objective's
    gpus = {k: int(offerings[k].offering.gpu_count or 0) for k in keys}

    def linear(terms: list[tuple[lp.LpVariable, float]]) -> lp.LpAffineExpression:
        return lp.LpAffineExpression(terms)  # built from (variable, coefficient) pairs: no operator overhead

    def held(k: OfferingKey, t: int) -> list[lp.LpVariable]:
        """The variables whose sum is cap[k,t]: the rented instances, or the commitments still in term."""
        if k not in commitments:
            return [var[(k, t)]]
        return [var[(k, s)] for s in range(max(0, t - commitments[k].periods + 1), t + 1)]

    def charged(k: OfferingKey, t: int) -> float:
        """h[k,t] / H: 1 for a rented instance (exactly, so one period costs price per hour)."""
        return 1.0 if k not in commitments else commitments[k].hours[t] / hours_per_period

    rank = {k: r for r, k in enumerate(keys)}
    prob += linear([(var[(k, t)], canonical[k] * charged(k, t) + 1e-6 * gpus[k] + 1e-9 * rank[k])
                    for k in keys for t in range(T)])
    for t in range(T):
        for name, series in demand.items():
            idx = by_workload[name]
            prob += (linear([(x[(i, t)], headroom * candidates[i].capacity) for i in idx]) >= series[t],
                     f"demand__{name}{suffix(t)}")
            prob += (linear([(x[(i, t)], 1.0) for i in idx]) >= min_replicas[name], f"replicas__{name}{suffix(t)}")
        for k in keys:
            prob += (linear([(x[(i, t)], float(candidates[i].gpus_per_replica or 0)) for i in by_offering[k]]
                            + [(v, -float(gpus[k])) for v in held(k, t)]) <= 0,
                     f"pack__{'__'.join(k)}{suffix(t)}".replace(" ", "_"))
        for qi, q in enumerate(quotas):
            members = [k for k in keys if _quota_matches(q, offerings[k])]
            if members:
                prob += (linear([(v, 1.0) for k in members for v in held(k, t)]) <= q.max_instances,
                         f"quota__{qi}{suffix(t)}")
        if budget_per_hour is not None:
            prob += (linear([(v, price[k]) for k in keys for v in held(k, t)]) <= budget_per_hour,
                     f"budget{suffix(t)}")
    for (k, t), count in (fixed or {}).items():
        if (k, t) in var:
            prob += (var[(k, t)] == count, f"fixed__{'__'.join(k)}__{t}".replace(" ", "_"))
    solver, solver_name = make_solver(time_limit)
    prob.solve(solver)
    status = lp.LpStatus[prob.status]
    n_vars, n_cons = len(prob.variables()), len(prob.constraints())
    if status != "Optimal":
        return ProgramResult("infeasible", [], solver_name, time.perf_counter() - start, n_vars, n_cons,
                             solver_status=status)
    periods = []
    for t in range(T):
        bought = {k: int(round(var[(k, t)].value() or 0)) for k in keys if round(var[(k, t)].value() or 0) > 0}
        assignments = _trim([Assignment(candidates[i], int(round(x[(i, t)].value() or 0)))
                             for i in range(len(candidates)) if round(x[(i, t)].value() or 0) > 0],
                            {name: series[t] for name, series in demand.items()}, min_replicas, headroom)
        rented = {k: n for k, n in bought.items() if k not in commitments}
        bought = {k: n for k, n in bought.items() if k in commitments} | instances_needed(assignments, rented)
        periods.append(Period(dict(sorted(bought.items())), assignments))
    return ProgramResult("optimal", periods, solver_name, time.perf_counter() - start, n_vars, n_cons,
                         proven_optimal=prob.sol_status == lp.LpSolutionOptimal)


def solve(workloads: Sequence[Workload], candidates: Sequence[CandidateResult], headroom: float,
          quotas: Sequence[Quota] = (), budget_per_hour: float | None = None,
          time_limit: float | None = 60.0) -> Solution:
    """The static plan: the program with one period of rented offerings, costs per hour."""
    feasible = dominant_shapes(prune([c for c in candidates if c.feasible and c.instance_price is not None], quotas))
    result = optimise({w.name: [w.demand] for w in workloads}, {w.name: w.min_replicas for w in workloads},
                      feasible, headroom, quotas=quotas, budget_per_hour=budget_per_hour, time_limit=time_limit)
    if result.status != "optimal":
        if result.unserved is not None:
            binding = f"workload {result.unserved}: no feasible candidate"
        elif budget_per_hour is not None or quotas:
            binding = "budget or quotas"
        else:
            binding = f"solver status {result.solver_status}"
        return Solution("infeasible", None, {}, [], result.solver, result.seconds, result.variables,
                        result.constraints, binding)
    (period,) = result.periods
    price: dict[OfferingKey, float] = {c.offering.key: float(c.instance_price or 0.0) for c in feasible}
    cost = float(sum(price[k] * n for k, n in period.bought.items()))
    return Solution("optimal", cost, period.bought, period.assignments, result.solver, result.seconds,
                    result.variables, result.constraints, None, result.proven_optimal)


def _trim(assignments: list[Assignment], demand: Mapping[str, float], min_replicas: Mapping[str, int],
          headroom: float) -> list[Assignment]:
    """Drop replicas no constraint needs: largest first (then least capacity, then candidate order), one at a
    time while the workload's demand (with headroom) and min_replicas still hold."""
    out = {id(a.candidate): a.replicas for a in assignments}
    for name, needed in demand.items():
        mine = [a for a in assignments if a.candidate.workload.name == name]
        carried = sum(headroom * a.candidate.capacity * a.replicas for a in mine)
        count = sum(a.replicas for a in mine)
        for a in sorted(mine, key=lambda a: (-(a.candidate.gpus_per_replica or 0), a.candidate.capacity)):
            cap = headroom * a.candidate.capacity
            while out[id(a.candidate)] > 0 and count > min_replicas[name] and carried - cap >= needed - 1e-9:
                out[id(a.candidate)] -= 1
                carried -= cap
                count -= 1
    return [Assignment(a.candidate, out[id(a.candidate)]) for a in assignments if out[id(a.candidate)] > 0]


def instances_needed(assignments: Sequence[Assignment],
                     bought: dict[tuple[str, ...], int]) -> dict[tuple[str, ...], int]:
    """Instances per offering that the replicas need, at most as many as bought: fewer only when the solver
    stopped short of the optimum or _trim emptied some. Replica sizes divide the instance's GPUs or span whole
    instances (PP), so ceil(GPUs used / GPUs per instance) always packs them."""
    used: dict[tuple[str, ...], int] = defaultdict(int)
    per_instance: dict[tuple[str, ...], int] = {}
    for a in assignments:
        used[a.candidate.offering.key] += (a.candidate.gpus_per_replica or 0) * a.replicas
        per_instance[a.candidate.offering.key] = a.candidate.offering.gpu_count or 1
    return {k: min(n, math.ceil(used[k] / per_instance[k])) for k, n in bought.items() if used.get(k)}

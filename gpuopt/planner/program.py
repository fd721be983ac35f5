"""The integer program: which offerings to buy and how many replicas of each candidate to run.

Formulation (PuLP; CBC 2.10 as bundled with PuLP 3 by default, HiGHS when installed: see make_solver)

    sets      W workloads; O offerings with at least one feasible candidate; C feasible candidates,
              each c with workload w(c), offering o(c), GPUs g_c and sustainable load cap_c (in w's unit)
    variables n_o in Z>=0   instances of offering o
              x_c in Z>=0   replicas of candidate c
    minimise  sum_o price_o n_o  +  1e-6 sum_o G_o n_o  +  1e-9 sum_o rank_o n_o
              (cost; then fewer GPUs; then offering id order: deterministic tie-breaks)
    subject to
      demand_w    sum_{c in C_w} headroom cap_c x_c >= D_w          each workload's traffic, with headroom
      replicas_w  sum_{c in C_w} x_c >= min_replicas_w              availability floor
      pack_o      sum_{c in C_o} g_c x_c <= G_o n_o                 replicas fit in the instances bought
                  (replica sizes are powers of two dividing G_o, so the GPU count is the only packing limit;
                   a PP replica of k instances has g_c = k G_o)
      quota_q     sum_{o in q} n_o <= Q_q                           optional per provider/SKU/region
      budget      sum_o price_o n_o <= B                            optional, per hour

Residency and provider policy are applied when the candidate set is built, not here. Two reductions keep
the model small without changing its optimum: offerings that can never win (the same price kind, GPUs per
instance and candidates as a cheaper one, no quota on them) are left out, and per offering and replica
size only the shape with the most capacity is kept. Both stay in the candidate list.

After solving, replicas the constraints do not need are dropped (see _trim): spare GPUs of a bought instance
cost nothing, so the program is free to fill them, and which it fills depends on the solver's path. A
tie-break term in the objective would do the same but made CBC search 20 times as many nodes (50 workloads:
4.0 s instead of 1.0 s).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gpuopt.errors import GpuoptError
from gpuopt.inputs.workload import Quota, Workload
from gpuopt.planner.candidates import CandidateResult


@dataclass(frozen=True)
class Assignment:
    candidate: CandidateResult
    replicas: int


@dataclass(frozen=True)
class Solution:
    status: str  # "optimal" | "infeasible"
    cost_per_hour: float | None
    instances: dict[tuple[str, ...], int]  # offering key -> instances
    assignments: list[Assignment]
    solver: str
    seconds: float
    variables: int
    constraints: int
    binding: str | None  # for infeasible: which constraint family stopped it
    proven_optimal: bool = True  # False when the solver stopped at its time limit with a feasible plan


def _quota_matches(q: Quota, c: CandidateResult) -> bool:
    o = c.offering
    return o.provider == q.provider and (q.sku is None or o.sku == q.sku) and (q.region is None or o.region == q.region)


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
    share them) for less (ties: the smaller id wins). Such twins are common: one instance type sold by
    several providers, regions and services. Offerings under a quota are all kept (a cheaper twin may run
    out). Decided per offering: all its candidates share its price."""
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
        rank = (first.instance_price or 0.0, first.offering.offering_id, key)
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


def solve(workloads: Sequence[Workload], candidates: Sequence[CandidateResult], headroom: float,
          quotas: Sequence[Quota] = (), budget_per_hour: float | None = None,
          time_limit: float | None = 60.0) -> Solution:
    import pulp as lp

    start = time.perf_counter()
    feasible = dominant_shapes(prune([c for c in candidates if c.feasible and c.instance_price is not None], quotas))
    by_workload: dict[str, list[int]] = defaultdict(list)
    by_offering: dict[tuple[str, ...], list[int]] = defaultdict(list)
    offerings: dict[tuple[str, ...], CandidateResult] = {}
    for i, c in enumerate(feasible):
        by_workload[c.workload.name].append(i)
        by_offering[c.offering.key].append(i)
        offerings[c.offering.key] = c
    for w in workloads:
        if not by_workload.get(w.name):
            return Solution("infeasible", None, {}, [], "none", time.perf_counter() - start, 0, 0,
                            f"workload {w.name}: no feasible candidate")
    prob = lp.LpProblem("gpuopt_plan", lp.LpMinimize)
    keys = sorted(offerings)
    rank = {k: i for i, k in enumerate(keys)}
    n = {k: prob.add_variable("n__" + "__".join(k).replace(" ", "_"), lowBound=0, cat="Integer") for k in keys}
    x = {i: prob.add_variable(f"x__{c.workload.name}__{i}", lowBound=0, cat="Integer")
         for i, c in enumerate(feasible)}
    price = {k: float(offerings[k].instance_price or 0.0) for k in keys}
    gpus = {k: int(offerings[k].offering.gpu_count or 0) for k in keys}

    def linear(terms: list[tuple[lp.LpVariable, float]]) -> lp.LpAffineExpression:
        return lp.LpAffineExpression(terms)  # built from (variable, coefficient) pairs: no operator overhead

    prob += linear([(n[k], price[k] + 1e-6 * gpus[k] + 1e-9 * rank[k]) for k in keys])
    for w in workloads:
        idx = by_workload[w.name]
        prob += (linear([(x[i], headroom * feasible[i].capacity) for i in idx]) >= w.demand, f"demand__{w.name}")
        prob += (linear([(x[i], 1.0) for i in idx]) >= w.min_replicas, f"replicas__{w.name}")
    for k in keys:
        prob += (linear([(x[i], float(feasible[i].gpus_per_replica or 0)) for i in by_offering[k]]
                        + [(n[k], -float(gpus[k]))]) <= 0, "pack__" + "__".join(k).replace(" ", "_"))
    for qi, q in enumerate(quotas):
        members = [k for k in keys if _quota_matches(q, offerings[k])]
        if members:
            prob += (linear([(n[k], 1.0) for k in members]) <= q.max_instances, f"quota__{qi}")
    if budget_per_hour is not None:
        prob += (linear([(n[k], price[k]) for k in keys]) <= budget_per_hour, "budget")
    solver, name = make_solver(time_limit)
    prob.solve(solver)
    status = lp.LpStatus[prob.status]
    elapsed = time.perf_counter() - start
    n_vars, n_cons = len(prob.variables()), len(prob.constraints())
    if status != "Optimal":
        binding = "budget or quotas" if (budget_per_hour is not None or quotas) else f"solver status {status}"
        return Solution("infeasible", None, {}, [], name, elapsed, n_vars, n_cons, binding)
    instances: dict[tuple[str, ...], int] = {k: int(round(n[k].value() or 0)) for k in keys
                                             if round(n[k].value() or 0) > 0}
    assignments = _trim([Assignment(feasible[i], int(round(x[i].value() or 0))) for i in sorted(x)
                         if round(x[i].value() or 0) > 0], workloads, headroom)
    instances = instances_needed(assignments, instances)
    cost = float(sum(price[k] * v for k, v in instances.items()))
    proven = prob.sol_status == lp.LpSolutionOptimal
    return Solution("optimal", cost, instances, assignments, name, elapsed, n_vars, n_cons, None, proven)


def _trim(assignments: list[Assignment], workloads: Sequence[Workload], headroom: float) -> list[Assignment]:
    """Drop replicas no constraint needs: largest first (then least capacity, then candidate order), one at a
    time while the workload's demand (with headroom) and min_replicas still hold."""
    out = {id(a.candidate): a.replicas for a in assignments}
    for w in workloads:
        mine = [a for a in assignments if a.candidate.workload.name == w.name]
        carried = sum(headroom * a.candidate.capacity * a.replicas for a in mine)
        count = sum(a.replicas for a in mine)
        for a in sorted(mine, key=lambda a: (-(a.candidate.gpus_per_replica or 0), a.candidate.capacity)):
            cap = headroom * a.candidate.capacity
            while out[id(a.candidate)] > 0 and count > w.min_replicas and carried - cap >= w.demand - 1e-9:
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

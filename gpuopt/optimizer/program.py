"""The integer program: which offerings to buy and how many replicas of each candidate to run.

Formulation (PuLP; CBC from the pulp[cbc] extra by default, HiGHS when installed)

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
the model small without changing its optimum: offerings that can never win (same provider, GPU, GPU
count, link and price kind as a cheaper one, no quota on them) are left out, and per offering and replica
size only the shape with the most capacity is kept. Both stay in the candidate list.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gpuopt.optimizer.candidates import CandidateResult
from gpuopt.workload import Quota, Workload


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
    """Keep, per (provider, GPU, GPU count, link, price kind), only the cheapest offering (ties: by id)."""
    best: dict[tuple[object, ...], tuple[float, str]] = {}
    for c in candidates:
        if any(_quota_matches(q, c) for q in quotas):
            continue
        o = c.offering
        group = (o.provider, o.gpu, o.gpu_count, o.interconnect, o.price_kind)
        rank = (c.instance_price or 0.0, o.offering_id)
        if group not in best or rank < best[group]:
            best[group] = rank
    kept = []
    for c in candidates:
        o = c.offering
        group = (o.provider, o.gpu, o.gpu_count, o.interconnect, o.price_kind)
        if any(_quota_matches(q, c) for q in quotas) or best.get(group, (0.0, ""))[1] == o.offering_id:
            kept.append(c)
    return kept


def make_solver(time_limit: float | None) -> tuple[object, str]:
    """HiGHS when installed, else CBC: cbcbox's binary (the `pulp[cbc]` extra, PuLP 4's way) through COIN_CMD.
    One thread and a zero gap, so the same model gives the same answer."""
    import pulp as lp

    if "HiGHS" in lp.listSolvers(onlyAvailable=True):
        return lp.HiGHS(msg=False, gapRel=0.0, timeLimit=time_limit, threads=1), "HiGHS"
    import cbcbox

    return lp.COIN_CMD(path=cbcbox.cbc_bin_path(), msg=False, gapRel=0.0, timeLimit=time_limit, threads=1), "CBC"


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
    prob += lp.lpSum((price[k] + 1e-6 * gpus[k] + 1e-9 * rank[k]) * n[k] for k in keys)
    for w in workloads:
        idx = by_workload[w.name]
        prob += (lp.lpSum(headroom * feasible[i].capacity * x[i] for i in idx) >= w.demand, f"demand__{w.name}")
        prob += (lp.lpSum(x[i] for i in idx) >= w.min_replicas, f"replicas__{w.name}")
    for k in keys:
        prob += (lp.lpSum((feasible[i].gpus_per_replica or 0) * x[i] for i in by_offering[k]) <= gpus[k] * n[k],
                 "pack__" + "__".join(k).replace(" ", "_"))
    for qi, q in enumerate(quotas):
        members = [k for k in keys if _quota_matches(q, offerings[k])]
        if members:
            prob += (lp.lpSum(n[k] for k in members) <= q.max_instances, f"quota__{qi}")
    if budget_per_hour is not None:
        prob += (lp.lpSum(price[k] * n[k] for k in keys) <= budget_per_hour, "budget")
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
    assignments = [Assignment(feasible[i], int(round(x[i].value() or 0))) for i in sorted(x)
                   if round(x[i].value() or 0) > 0]
    cost = float(sum(price[k] * v for k, v in instances.items()))
    proven = prob.sol_status == lp.LpSolutionOptimal
    return Solution("optimal", cost, instances, assignments, name, elapsed, n_vars, n_cons, None, proven)

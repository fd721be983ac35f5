"""`solve` is the capacity program with one period and no commitments: every shipped workload example, solved
through both entry points, gives the same plan (cost, instances bought, replicas of each shape)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from gpuopt.inputs.capacity import UNCOMMITTED, CapacityFile
from gpuopt.inputs.workload import WorkloadFile, load_workload
from gpuopt.planner.capacity import CapacityOptions, build_problem, plan_capacity, solve_capacity
from gpuopt.planner.plan import HOURS_PER_MONTH
from gpuopt.planner.program import Assignment, solve
from gpuopt.planner.solve import SolveOptions, plan_workloads
from gpuopt.pricing.catalog import Catalog, load_catalog

EXAMPLES = Path(__file__).parent.parent / "examples"
WORKLOAD_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.yaml") if "horizon" not in yaml.safe_load(p.read_text()))


def one_month(wf: WorkloadFile) -> CapacityFile:
    """The workload file as a capacity file: one month of the same demand, the same price kinds (all of them
    rented: the static program has no commitments), residency, providers and currency."""
    assert all(kind in UNCOMMITTED for kind in wf.price_kinds)
    workloads = []
    for w in wf.workloads:
        fields = w.model_dump(exclude={"requests_per_second", "concurrency"}, exclude_none=True)
        unit = w.demand_unit
        workloads.append({**fields, "demand": {unit: [w.demand]}, "price_kinds": list(wf.price_kinds),
                          "interruptible": "spot" in wf.price_kinds})
    return CapacityFile.model_validate({
        "schema_version": 1, "residency": wf.residency, "providers": wf.providers, "currency": wf.currency,
        "horizon": {"periods": 1, "period": "month"}, "workloads": workloads})


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_cache=False)


def test_every_workload_example_is_found():
    assert {p.name for p in WORKLOAD_EXAMPLES} >= {"cn-chat-70b.yaml", "two-models.yaml"}
    assert not any(p.name.startswith("capacity-") for p in WORKLOAD_EXAMPLES)


def _shapes(assignments: list[Assignment]) -> Counter[tuple[object, ...]]:
    return Counter({(a.candidate.workload.name, a.candidate.offering.key, a.candidate.shape): a.replicas
                    for a in assignments})


@pytest.mark.parametrize("path", WORKLOAD_EXAMPLES, ids=lambda p: p.stem)
def test_the_static_program_is_the_capacity_program_with_one_period(path: Path, catalog: Catalog):
    wf = load_workload(path)
    assert not wf.quotas and not wf.discounts  # the capacity file has neither: compare like with like
    cf = one_month(wf)

    # the programs: the same replicas of the same shapes on the same instances, at the same cost
    problem = build_problem(cf, catalog, CapacityOptions())
    periodic = solve_capacity(problem, headroom=0.8)
    static = solve(wf.workloads, problem.all_candidates, headroom=0.8)
    assert static.status == periodic.status == "optimal"
    assert static.cost_per_hour is not None and periodic.total_cost is not None
    assert periodic.total_cost == pytest.approx(static.cost_per_hour * HOURS_PER_MONTH, rel=1e-12)
    assert {(p.offering.offering.key, p.count) for p in periodic.purchases} == set(static.instances.items())
    assert not any(p.committed for p in periodic.purchases)
    assert _shapes([Assignment(problem.candidates[i], n) for (i, _t), n in periodic.replicas.items()]) == \
        _shapes(static.assignments)

    # the plans, from the files, through both commands' entry points
    plan, _ = plan_workloads(wf, catalog, SolveOptions(top=0, premium=False, candidate_records=False))
    schedule = plan_capacity(cf, catalog, CapacityOptions(), today="2026-11-29")
    assert plan.status == schedule.status == "optimal"
    assert schedule.total_cost == plan.total_cost_per_month
    (period,) = schedule.periods
    assert sorted((x.provider, x.sku, x.region, x.price_kind, x.count, tuple(x.workloads))
                  for x in period.purchases) == \
        sorted((x.provider, x.sku, x.region, x.price_kind, x.instances, tuple(x.workloads)) for x in plan.instances)
    for w in plan.workloads:
        mine = [d for d in plan.deployments if d.workload == w.name]
        per_replica = [d.predicted.replica_concurrency if w.demand_unit == "concurrency"
                       else d.predicted.replica_requests_per_second for d in mine]
        # the plan rounds a replica's concurrency to 0.01 and its rate to 1e-4
        replicas = sum(d.replicas for d in mine)
        assert period.capacity[w.name] == pytest.approx(sum(d.replicas * c for d, c in zip(mine, per_replica)),
                                                        abs=0.005 * replicas)

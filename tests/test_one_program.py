"""`solve` is the capacity program with one period and no commitments: every shipped workload example, solved
through both entry points, gives the same plan (cost, instances bought, replicas of each shape)."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.inputs.capacity import UNCOMMITTED, CapacityFile
from gpuopt.inputs.workload import WorkloadFile, load_workload
from gpuopt.planner.capacity import CapacityOptions, CapacityProblem, build_problem, plan_capacity, solve_capacity
from gpuopt.planner.plan import HOURS_PER_MONTH
from gpuopt.planner.program import Assignment, solve
from gpuopt.planner.solve import SolveOptions, plan_workloads
from gpuopt.pricing.catalog import Catalog, load_catalog
from tests.test_program import candidate, offering, workload

EXAMPLES = Path(__file__).parent.parent / "examples"
WORKLOAD_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.yaml") if "horizon" not in yaml.safe_load(p.read_text()))


def one_month(wf: WorkloadFile) -> CapacityFile:
    """The workload file as a capacity file: one month of the same demand, the same price kinds (all of them
    rented: the static program has no commitments), residency, providers and currency."""
    assert all(kind in UNCOMMITTED for kind in wf.price_kinds)
    workloads = []
    for w in wf.workloads:
        # unset stays unset (an unset precisions list means a quantized checkpoint's own format)
        fields = w.model_dump(exclude={"requests_per_second", "concurrency"}, exclude_none=True, exclude_unset=True)
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
        carried = sum(d.replicas * c for d, c in zip(mine, per_replica, strict=True))
        assert period.capacity[w.name] == pytest.approx(carried, abs=0.005 * replicas)


@settings(max_examples=30, deadline=None)
@given(
    demands=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=2),
    offers=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.integers(1, 20)), min_size=1, max_size=3),
    caps=st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.0]), min_size=4, max_size=4),
    tps=st.lists(st.sampled_from([1, 2, 4]), min_size=4, max_size=4),
    headroom=st.sampled_from([0.5, 0.8, 1.0]),
)
def test_one_rented_period_of_the_capacity_program_is_the_static_program(demands, offers, caps, tps, headroom):
    """On small random instances (several workloads sharing offerings, min_replicas, headroom): the same
    instances, replicas and cost per hour through both entry points."""
    workloads = [workload(f"w{i}", d, min_replicas=m) for i, (d, m) in enumerate(demands)]
    offerings = [offering(f"o{j}", g, float(p), provider=f"p{j}") for j, (g, p) in enumerate(offers)]
    cands = [candidate(w, o, min(tps[k % 4], o.gpu_count), caps[k % 4])
             for k, (w, o) in enumerate(itertools.product(workloads, offerings))]
    static = solve(workloads, cands, headroom=headroom)
    cf = CapacityFile.model_validate({
        "schema_version": 1, "horizon": {"periods": 1, "period": "month"},
        "workloads": [{"name": w.name, "model": w.model, "input_tokens": w.input_tokens,
                       "output_tokens": w.output_tokens, "min_replicas": w.min_replicas,
                       "demand": {"requests_per_second": [w.demand]}} for w in workloads]})
    problem = CapacityProblem(cf=cf, currency="USD", labels=["M1"], hours_per_period=HOURS_PER_MONTH,
                              demand={w.name: [w.demand] for w in workloads},
                              workloads={w.name: w for w in cf.workloads}, candidates=cands, all_candidates=cands,
                              catalog=None)  # the catalog is read only to describe a plan
    periodic = solve_capacity(problem, headroom=headroom)
    assert static.status == periodic.status == "optimal"
    assert periodic.total_cost == pytest.approx((static.cost_per_hour or 0.0) * HOURS_PER_MONTH, rel=1e-12)
    assert [(p.offering.offering.key, p.count) for p in periodic.purchases] == list(static.instances.items())
    assert _shapes([Assignment(cands[i], n) for (i, _t), n in periodic.replicas.items()]) == \
        _shapes(static.assignments)

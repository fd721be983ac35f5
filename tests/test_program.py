"""The integer program on hand-solvable instances, against brute force, and heterogeneous packing."""

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.inputs.workload import Quota, Workload
from gpuopt.physics.analytic_load import LoadPoint
from gpuopt.planner.candidates import CandidateResult, Evaluation, Shape
from gpuopt.planner.program import Assignment, instances_needed, lower_bound, prune, solve
from gpuopt.pricing.catalog import Offering


def offering(sku: str, gpus: int, price: float, provider: str = "aws") -> Offering:
    return Offering(provider=provider, service="ec2", sku=sku, region="us-east-1", gpu="H100-SXM-80GB",
                    gpu_count=gpus, gpu_mem_gib=80.0, vcpus=None, ram_gib=None, interconnect="nvlink",
                    price_per_hour=price, currency="USD", price_kind="on-demand", source="test", as_of="2026-11-01",
                    term_months=None, billing="per-hour", notes="")


def workload(name: str, rps: float, min_replicas: int = 1) -> Workload:
    return Workload(name=name, model="meta-llama/Llama-3.1-8B-Instruct", requests_per_second=rps,
                    input_tokens=100, output_tokens=100, min_replicas=min_replicas)


def candidate(w: Workload, o: Offering, tp: int, capacity: float) -> CandidateResult:
    point = LoadPoint(requests_per_second=capacity, concurrency=capacity, running=1, step_ms=1, tpot_ms=1,
                      ttft_ms=1, output_tokens_per_second=capacity * 100, stable=True, limit=None)
    shape = Shape("H100-SXM-80GB", "nvlink", tp, 1, "bf16", "auto")
    return CandidateResult(w, o, shape, Evaluation(True, None, None, point=point), o.price_per_hour, o.price_per_hour)


def test_two_offerings_one_workload_by_hand():
    # demand 3 rps, each TP=1 replica carries 1 rps (headroom 1): three 1-GPU boxes cost 3 x 2.00 = 6.00,
    # one 4-GPU box (room for 4 replicas) costs 5.00 -> buy the 4-GPU box
    w = workload("chat", 3)
    small, big = offering("small", 1, 2.0), offering("big", 4, 5.0)
    sol = solve([w], [candidate(w, small, 1, 1.0), candidate(w, big, 1, 1.0)], headroom=1.0)
    assert sol.status == "optimal"
    assert sol.cost_per_hour == pytest.approx(5.0)
    assert sol.instances == {big.key: 1}
    assert sum(a.replicas for a in sol.assignments) == 3


def test_headroom_and_min_replicas_raise_the_count():
    # 2 rps at headroom 0.5 needs replicas worth 4 rps: 4 x 1-GPU boxes at 1.00; min_replicas 5 forces a fifth
    w = workload("chat", 2, min_replicas=5)
    o = offering("small", 1, 1.0)
    sol = solve([w], [candidate(w, o, 1, 1.0)], headroom=0.5)
    assert sol.cost_per_hour == pytest.approx(5.0)


def test_two_workloads_share_an_eight_gpu_instance_when_cheaper():
    # each workload needs 4 TP=1 replicas; eight 1-GPU boxes cost 8 x 3.00 = 24.00, one 8-GPU box 8.00
    a, b = workload("a", 4), workload("b", 4)
    one, eight = offering("one", 1, 3.0), offering("eight", 8, 8.0)
    cands = [candidate(w, o, 1, 1.0) for w in (a, b) for o in (one, eight)]
    sol = solve([a, b], cands, headroom=1.0)
    assert sol.cost_per_hour == pytest.approx(8.0)
    assert sol.instances == {eight.key: 1}
    assert {x.candidate.workload.name for x in sol.assignments} == {"a", "b"}


def test_tp2_replicas_pack_four_to_an_eight_gpu_instance():
    w = workload("chat", 4)
    eight = offering("eight", 8, 10.0)
    sol = solve([w], [candidate(w, eight, 2, 1.0)], headroom=1.0)
    assert sol.instances == {eight.key: 1}
    assert sol.assignments[0].replicas == 4


def test_no_feasible_candidate_is_infeasible_with_the_workload_named():
    w = workload("chat", 1)
    sol = solve([w], [], headroom=1.0)
    assert sol.status == "infeasible" and "chat" in (sol.binding or "")


def brute_force(workloads, cands, headroom, limit=8):  # 8 = max demand 4 / smallest capacity 0.5
    best = math.inf
    for xs in itertools.product(range(limit + 1), repeat=len(cands)):
        ok = True
        for w in workloads:
            idx = [i for i, c in enumerate(cands) if c.workload.name == w.name]
            if sum(xs[i] for i in idx) < w.min_replicas:
                ok = False
            if sum(headroom * cands[i].capacity * xs[i] for i in idx) < w.demand - 1e-9:
                ok = False
        if not ok:
            continue
        cost = 0.0
        for key in {c.offering.key for c in cands}:
            used = sum(xs[i] * cands[i].gpus_per_replica for i, c in enumerate(cands) if c.offering.key == key)
            o = next(c.offering for c in cands if c.offering.key == key)
            cost += math.ceil(used / o.gpu_count) * o.price_per_hour
        best = min(best, cost)
    return best


@settings(max_examples=40, deadline=None)
@given(
    demands=st.lists(st.integers(1, 4), min_size=1, max_size=2),
    offers=st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.integers(1, 20)), min_size=1, max_size=2),
    caps=st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.0]), min_size=4, max_size=4),
    tps=st.lists(st.sampled_from([1, 2]), min_size=4, max_size=4),
)
def test_solver_matches_brute_force_on_small_instances(demands, offers, caps, tps):
    workloads = [workload(f"w{i}", d) for i, d in enumerate(demands)]
    # every candidate has its own evaluation here, so the pre-solve pruning (which merges offerings sharing
    # evaluations) leaves them all to the program
    offerings = [offering(f"o{j}", g, float(p), provider=f"p{j}") for j, (g, p) in enumerate(offers)]
    cands = []
    k = 0
    for w in workloads:
        for o in offerings:
            tp = min(tps[k % 4], o.gpu_count)
            cands.append(candidate(w, o, tp, caps[k % 4]))
            k += 1
    sol = solve(workloads, cands, headroom=1.0)
    expected = brute_force(workloads, cands, 1.0)
    assert sol.status == "optimal"
    assert sol.cost_per_hour == pytest.approx(expected)


def test_prune_keeps_the_cheapest_of_offerings_sharing_their_evaluations():
    w = workload("chat", 2.0)
    shared = candidate(w, offering("p5", 8, 10.0), 2, 1.5)
    twins = [shared._replace(offering=o, instance_price=o.price_per_hour, canonical_price=o.price_per_hour) for o in
             (offering("p5", 8, 10.0, provider="aws"), offering("h100x8", 8, 9.0, provider="digitalocean"),
              offering("h100x8b", 8, 9.0, provider="runpod"))]
    other = candidate(w, offering("p4", 8, 5.0), 2, 1.0)  # its own evaluation: not a twin, kept
    kept = {c.offering.sku for c in prune([*twins, other], [])}
    assert kept == {"h100x8", "p4"}  # 9.0 beats 10.0; the tie at 9.0 goes to the smaller id
    quota = Quota(provider="aws", max_instances=1)
    assert {c.offering.sku for c in prune([*twins, other], [quota])} == {"p5", "h100x8", "p4"}


def test_spare_gpus_of_a_bought_instance_hold_no_replica_the_demand_does_not_need():
    # one 8-GPU instance must be bought; one TP=1 replica (capacity 2) covers 1 req/s at headroom 0.8, so
    # the other seven GPUs stay idle rather than hold seven more replicas or a TP=4 one
    w = workload("chat", 1.0)
    o = offering("p5", 8, 10.0)
    sol = solve([w], [candidate(w, o, 1, 2.0), candidate(w, o, 4, 6.0)], headroom=0.8)
    assert sol.cost_per_hour == pytest.approx(10.0)
    assert [(a.candidate.gpus_per_replica, a.replicas) for a in sol.assignments] == [(1, 1)]


def test_instances_needed_by_the_replicas_left():
    w = workload("chat", 1.0)
    big, small = offering("p5", 8, 10.0), offering("g6", 1, 1.0)
    replicas = [Assignment(candidate(w, big, 2, 1.0), 5), Assignment(candidate(w, small, 1, 1.0), 1)]
    # 10 GPUs of TP=2 replicas need 2 eight-GPU instances (3 bought); the idle one-GPU offering none
    bought = {big.key: 3, small.key: 1, offering("p4", 8, 5.0).key: 1}
    assert instances_needed(replicas, bought) == {big.key: 2, small.key: 1}


def test_lower_bound_by_hand():
    # 8-GPU offering at 16/h (2/h per GPU); a TP=2 replica carries 1.5 req/s: 4/h per replica.
    # demand 3 req/s at headroom 0.8 needs 2.5 replicas -> 10/h; min_replicas 4 needs 4 replicas -> 16/h
    o = offering("p5", 8, 16.0)
    w = workload("chat", 3.0, min_replicas=1)
    assert lower_bound([w], [candidate(w, o, 2, 1.5)], 0.8) == pytest.approx(10.0)
    w4 = workload("chat", 3.0, min_replicas=4)
    assert lower_bound([w4], [candidate(w4, o, 2, 1.5)], 0.8) == pytest.approx(16.0)
    assert lower_bound([w, workload("other", 1.0)], [candidate(w, o, 2, 1.5)], 0.8) == math.inf


@settings(max_examples=40, deadline=None)
@given(
    demands=st.lists(st.integers(1, 4), min_size=1, max_size=2),
    offers=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.integers(1, 20)), min_size=1, max_size=3),
    caps=st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.0]), min_size=4, max_size=4),
    tps=st.lists(st.sampled_from([1, 2, 4]), min_size=4, max_size=4),
    headroom=st.sampled_from([0.5, 0.8, 1.0]),
)
def test_lower_bound_never_exceeds_the_optimum(demands, offers, caps, tps, headroom):
    """The alternatives search stops on this bound, so it must never cut off a cheaper plan."""
    workloads = [workload(f"w{i}", d, min_replicas=1 + i) for i, d in enumerate(demands)]
    offerings = [offering(f"o{j}", g, float(p), provider=f"p{j}") for j, (g, p) in enumerate(offers)]
    cands = [candidate(w, o, min(tps[k % 4], o.gpu_count), caps[k % 4])
             for k, (w, o) in enumerate(itertools.product(workloads, offerings))]
    sol = solve(workloads, cands, headroom=headroom)
    assert sol.status == "optimal"
    assert lower_bound(workloads, cands, headroom) <= sol.cost_per_hour + 1e-9


def test_quota_forces_the_next_cheapest_offering():
    # cheapest is 'big' (4 GPUs for 5.00), but the quota allows none of it: three 1-GPU boxes at 2.00
    from gpuopt.inputs.workload import Quota

    w = workload("chat", 3)
    small, big = offering("small", 1, 2.0, provider="p1"), offering("big", 4, 5.0, provider="p2")
    sol = solve([w], [candidate(w, small, 1, 1.0), candidate(w, big, 1, 1.0)], headroom=1.0,
                quotas=[Quota(provider="p2", sku="big", max_instances=0)])
    assert sol.cost_per_hour == pytest.approx(6.0)
    assert sol.instances == {small.key: 3}


def test_models_larger_than_one_instance_get_pipeline_stages_across_nvlink_instances():
    from dataclasses import replace

    from gpuopt.planner.candidates import Policy, enumerate_candidates
    from gpuopt.pricing.catalog import load_catalog

    catalog = load_catalog(use_cache=False)
    p5 = [o for o in catalog.offerings if o.key == ("aws", "ec2", "p5.48xlarge", "us-east-1", "on-demand")]
    w = Workload(name="big", model="meta-llama/Llama-3.1-405B-Instruct", requests_per_second=0.5,
                 input_tokens=1000, output_tokens=200, max_model_len=8192, precisions=["bf16"],
                 kv_cache_dtypes=["auto"])
    (wc,) = enumerate_candidates([w], replace(catalog, offerings=tuple(p5)), Policy(None, (), ("on-demand",), "USD"))
    single = [c for c in wc.results if c.shape and c.shape.pipeline_parallel == 1]
    staged = [c for c in wc.results if c.shape and c.shape.pipeline_parallel > 1]
    # 405B x 2 B = 811 GB does not fit in 8 x 79 GiB; two instances (PP=2, TP=8) do
    assert single and not any(c.feasible for c in single)
    assert any(c.feasible and c.shape.pipeline_parallel == 2 and c.gpus_per_replica == 16 for c in staged)
    sol = solve([w], wc.results, headroom=0.8)
    assert sol.status == "optimal"
    assert sol.instances[p5[0].key] % 2 == 0  # whole pipelines of two instances


def test_a_replica_spans_instances_only_on_machines_of_one_network():
    """PP across RunPod pods (or serverless containers, managed endpoints) is a replica no target can start:
    SkyPilot's RunPod cloud launches one node; the same 405B shape on EC2 is kept (test above)."""
    from dataclasses import replace

    from gpuopt.planner.candidates import MULTI_NODE_SERVICES, Policy, enumerate_candidates
    from gpuopt.pricing.catalog import load_catalog

    catalog = load_catalog(use_cache=False)
    pods = [o for o in catalog.offerings if o.provider == "runpod" and o.gpu_count == 8 and o.interconnect == "nvlink"
            and o.gpu.startswith("A100")]
    assert pods and all((o.provider, o.service) not in MULTI_NODE_SERVICES for o in pods)
    w = Workload(name="big", model="meta-llama/Llama-3.1-405B-Instruct", requests_per_second=0.5,
                 input_tokens=1000, output_tokens=200, max_model_len=8192, precisions=["bf16"],
                 kv_cache_dtypes=["auto"])
    (wc,) = enumerate_candidates([w], replace(catalog, offerings=tuple(pods)), Policy(None, (), ("on-demand",), "USD"))
    staged = [c for c in wc.results if c.shape and c.shape.pipeline_parallel > 1]
    assert staged and not any(c.feasible for c in staged)
    assert {c.evaluation.reason_kind for c in staged if c.evaluation.memory and c.evaluation.memory.fits} == {
        "multi-node"}
    # TP 8 on 8-GPU pods: PP stages are instances
    assert all(f"spans {c.shape.pipeline_parallel} instances" in (c.evaluation.reason or "") for c in staged
               if c.evaluation.reason_kind == "multi-node")


def test_the_joint_plan_never_costs_more_than_its_workloads_solved_alone():
    """Sharing instances can only help, so a plan above the sum of its workloads' own optima is not optimal.
    24 real workloads on the shipped catalog: the CBC development build of the pulp[cbc] extra returned
    42.79/h here as optimal, 0.10 above the optimum (see program.make_solver)."""
    from benchmarks.solve_scaling import workloads as benchmark_workloads
    from gpuopt.planner.candidates import Policy, enumerate_candidates
    from gpuopt.pricing.catalog import load_catalog

    wls = benchmark_workloads(24)
    policy = Policy(residency=None, providers=(), price_kinds=("on-demand",), currency="USD")
    cands = [c for wc in enumerate_candidates(wls, load_catalog(use_cache=False), policy) for c in wc.results]
    joint = solve(wls, cands, headroom=0.8)
    alone = sum(solve([w], [c for c in cands if c.workload.name == w.name], headroom=0.8).cost_per_hour or 0.0
                for w in wls)
    assert joint.status == "optimal" and joint.proven_optimal
    assert joint.cost_per_hour <= alone + 1e-6


def test_gpuopt_solver_picks_the_solver_and_rejects_unknown_names(monkeypatch):
    from gpuopt.errors import GpuoptError
    from gpuopt.planner.program import make_solver

    monkeypatch.setenv("GPUOPT_SOLVER", "cbc")
    assert make_solver(1.0)[1] == "CBC"
    monkeypatch.setenv("GPUOPT_SOLVER", "gurobi")
    with pytest.raises(GpuoptError, match="GPUOPT_SOLVER must be cbc or highs"):
        make_solver(1.0)


def test_an_offering_said_to_be_nvlinked_on_a_gpu_without_nvlink_is_planned_over_pcie():
    """An overlay may say `interconnect: nvlink` for two L40S; they have no NVLink, so the candidate is costed
    over PCIe (custom all-reduce off) rather than refused as a shape vLLM would not run."""
    from dataclasses import replace

    from gpuopt.planner.candidates import Policy, _screen
    from gpuopt.pricing.catalog import Catalog
    from gpuopt.pricing.fx import load_fx

    l40s = replace(offering("g6e.12xlarge", 2, 10.0), gpu="L40S-48GB", gpu_mem_gib=48.0)
    h100 = offering("p5", 2, 20.0)
    screened = _screen(Catalog(offerings=(l40s, h100), fx=load_fx(use_cache=False)), Policy(None, (), (), "USD"))
    assert [s.link for s in screened] == ["pcie", "nvlink"]


def test_candidates_carry_the_same_canonical_price_in_every_plan_currency():
    """The program minimises canonical_price (USD, converted from the catalog's own price), so its model -- and
    the plan -- is the same bits whatever the plan's currency; instance_price is the plan's currency."""
    from dataclasses import replace

    from gpuopt.planner.candidates import CANONICAL_CURRENCY, Policy, enumerate_candidates
    from gpuopt.pricing.catalog import Catalog
    from gpuopt.pricing.fx import load_fx

    usd = offering("p5", 1, 3.19)
    cny = replace(offering("gn", 1, 21.2), provider="alibaba", service="ecs", region="cn-beijing", currency="CNY")
    fx = load_fx(use_cache=False)
    rate = fx.rate("USD", "CNY")  # 6.6529 shipped
    w = workload("chat", 1)
    prices = {}
    for currency in ("USD", "CNY"):
        (wc,) = enumerate_candidates([w], Catalog(offerings=(usd, cny), fx=fx),
                                     Policy(None, (), ("on-demand",), currency))
        prices[currency] = {c.offering.sku: (c.instance_price, c.canonical_price) for c in wc.results}
    assert CANONICAL_CURRENCY == "USD"
    assert prices["USD"]["p5"] == (3.19, 3.19)
    assert prices["CNY"]["p5"] == (pytest.approx(3.19 * rate), 3.19)  # 3.19 x 6.6529 / 6.6529 need not be 3.19
    assert prices["USD"]["gn"] == (pytest.approx(21.2 / rate), prices["USD"]["gn"][0])
    assert prices["CNY"]["gn"] == (21.2, prices["USD"]["gn"][0])  # bit for bit the USD plan's price


def test_the_program_minimises_the_canonical_price_and_costs_the_plan_in_its_currency():
    # shown in CNY at 6.6529: a 1-GPU box at 2.00 USD (13.3058 CNY), a 4-GPU box at 5.00 USD (33.2645 CNY);
    # three 1-rps replicas: 3 x 2.00 = 6.00 USD against 5.00 -> the 4-GPU box, 33.2645 CNY/h
    w = workload("chat", 3)
    small, big = offering("small", 1, 2.0), offering("big", 4, 5.0)
    cands = [candidate(w, o, 1, 1.0)._replace(instance_price=o.price_per_hour * 6.6529) for o in (small, big)]
    sol = solve([w], cands, headroom=1.0)
    assert sol.instances == {big.key: 1}
    assert sol.cost_per_hour == pytest.approx(33.2645)
    # the budget is in the plan's currency too: 33.26 CNY/h does not buy the 4-GPU box, and 3 small ones cost 39.92
    assert solve([w], cands, headroom=1.0, budget_per_hour=33.26).status == "infeasible"
    assert solve([w], cands, headroom=1.0, budget_per_hour=33.27).cost_per_hour == pytest.approx(33.2645)

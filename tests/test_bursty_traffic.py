"""Bursty request-rate traffic (`burstiness`, vllm bench serve's gamma inter-arrivals): the workload field, the
analytic screen's clumps and the simulated steady state."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.errors import ConfigError
from gpuopt.hardware import get_gpu
from gpuopt.inputs.capacity import CapacityFile
from gpuopt.inputs.workload import Slo, Workload, load_workload
from gpuopt.physics import analytic_load, latency, queueing, steady_state
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.traffic import FixedLengths, PoissonArrivals, arrival_cv2, make_requests
from gpuopt.planner.simcapacity import needs_simulation, simulated_capacity

HEAD = """schema_version: 1
workloads:
  - name: chat
    model: meta-llama/Llama-3.1-8B-Instruct
    input_tokens: 1000
    output_tokens: 250
    slo: {ttft_ms: 500, tpot_ms: 40}
"""


def _replica(model: str = "meta-llama/Llama-3.1-8B-Instruct", gpu: str = "H100-SXM-80GB") -> latency.Replica:
    arch, spec = get_model(model), get_gpu(gpu)
    mem = estimate(arch, spec, ServingConfig(tensor_parallel=1, precision="bf16", max_model_len=8192))
    return latency.build_replica(arch, spec, mem)


def _load(tmp_path: Path, body: str) -> Workload:
    path = tmp_path / "w.yaml"
    path.write_text(HEAD + body)
    return load_workload(path).workloads[0]


def _problems(tmp_path: Path, body: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, body)
    return list(info.value.problems)


def test_the_field_is_the_gamma_shape_and_poisson_when_left_out(tmp_path):
    bursty = _load(tmp_path, "    requests_per_second: 4\n    burstiness: 0.25\n")
    plain = _load(tmp_path, "    requests_per_second: 4\n")
    assert bursty.burstiness == 0.25 and bursty.arrival_burstiness == 0.25
    assert plain.burstiness is None and plain.arrival_burstiness == 1.0


@pytest.mark.parametrize(("body", "line", "needle"), [
    ("    concurrency: 8\n    burstiness: 0.5\n", 9,
     "workloads.0.burstiness: burstiness shapes the arrivals of requests_per_second traffic"),
    ("    requests_per_second: 4\n    burstiness: 0\n", 9, "workloads.0.burstiness: Input should be greater than or "
                                                           "equal to 0.05"),
    ("    requests_per_second: 4\n    burstiness: 101\n", 9, "workloads.0.burstiness: Input should be less than or "
                                                             "equal to 100"),
])
def test_bad_burstiness_is_one_line_naming_the_field(tmp_path, body, line, needle):
    found = _problems(tmp_path, body)
    assert len(found) == 1, found
    assert f"w.yaml:{line}: " in found[0] and needle in found[0], found[0]


def test_a_capacity_file_refuses_burstiness_on_a_concurrency_demand():
    base = {"schema_version": 1, "horizon": {"periods": 2},
            "workloads": [{"name": "w", "model": "meta-llama/Llama-3.1-8B-Instruct", "input_tokens": 100,
                           "output_tokens": 100, "burstiness": 0.5, "demand": {"concurrency": [4, 8]}}]}
    with pytest.raises(ValueError, match="burstiness shapes the arrivals"):
        CapacityFile.model_validate(base)
    base["workloads"][0]["demand"] = {"requests_per_second": [1, 2]}  # type: ignore[index]
    assert CapacityFile.model_validate(base).workloads[0].arrival_burstiness == 0.5


def test_bursty_targets_are_simulated_and_poisson_ones_are_not():
    def w(**kw: object) -> Workload:
        return Workload(name="w", model="meta-llama/Llama-3.1-8B-Instruct", requests_per_second=2, input_tokens=100,
                        output_tokens=50, **kw)  # type: ignore[arg-type]
    assert needs_simulation(w(burstiness=0.5, slo=Slo(tpot_ms=40)))
    assert not needs_simulation(w(burstiness=1.0, slo=Slo(tpot_ms=40)))  # Poisson, written out
    assert not needs_simulation(w(burstiness=0.5))  # no target: nothing to confirm


def test_clump_sizes_by_hand():
    # geometric clumps of mean m have E[K^2] / E[K] = 2m - 1 = cv2: shape 0.25 -> cv2 4 -> m 2.5
    assert arrival_cv2(0.25) == 4.0 and analytic_load.clump_size(4.0) == 2.5
    assert analytic_load.clump_size(1.0) == 1.0 and analytic_load.clump_size(0.5) == 1.0


def test_a_clump_puts_more_prompt_tokens_into_fewer_steps_by_hand():
    r = _replica()
    poisson, bursty = analytic_load._StepMix(r, 1000, 250), analytic_load._StepMix(r, 1000, 250, 4.0)
    y = 0.5
    # Poisson: k1 = y / (1 - e^-y) prompts in a step that carries any; clumps of 2.5: 2.5 z / (1 - e^-z), z = y / 2.5
    assert poisson.prompt_tokens(y) == pytest.approx(1000 * y / -math.expm1(-y), rel=1e-12)
    z = y / 2.5
    assert bursty.prompt_tokens(y) == pytest.approx(1000 * 2.5 * z / -math.expm1(-z), rel=1e-12)
    # the same prompt tokens per step on average (y L), in fewer steps
    q_p, q_b = poisson.steps(y)[0], bursty.steps(y)[0]
    assert q_p * poisson.prompt_tokens(y) == pytest.approx(q_b * bursty.prompt_tokens(y), rel=1e-12) == 500
    assert q_b < q_p


def test_the_batch_dispersion_by_hand():
    mix = analytic_load._StepMix(_replica(), 1000, 250, 4.0)
    assert mix.dispersion(0.0) == 1.0  # an empty engine: one arrival at a time
    assert mix.dispersion(3.0) == pytest.approx((1 + 4 * 3) / 4)  # 3.25
    assert analytic_load._StepMix(_replica(), 1000, 250).dispersion(100.0) == 1.0  # Poisson
    # prompt stalls a share s of the time: each arrival's Borel(s) progeny, a compound count
    # (s + D_a (1 - s)) / (1 - s)^2 -- 1 / (1 - s)^2 for Poisson arrivals
    poisson = analytic_load._StepMix(_replica(), 1000, 250)
    assert poisson.dispersion(100.0, 0.2) == pytest.approx(1 / 0.8**2)  # 1.5625
    assert mix.dispersion(3.0, 0.2) == pytest.approx((0.2 + 3.25 * 0.8) / 0.8**2)  # 4.375


@settings(max_examples=60, deadline=None)
@given(batch=st.floats(0.0, 500.0), cv2=st.floats(1.0, 8.0), s1=st.floats(0.0, 0.95), s2=st.floats(0.0, 0.95))
def test_the_stalls_only_widen_the_batch(batch, cv2, s1, s2):
    """No stall leaves the arrivals' own dispersion; more of the time stalled, a wider batch."""
    mix = analytic_load._StepMix(_replica(), 1000, 250, cv2)
    assert mix.dispersion(batch, 0.0) == mix.dispersion(batch)
    lo, hi = sorted((s1, s2))
    assert mix.dispersion(batch) <= mix.dispersion(batch, lo) <= mix.dispersion(batch, hi) * (1 + 1e-12)


def test_the_clump_wait_by_hand():
    r = _replica()
    b, context, room = 50.0, 1125.0, 8192.0 - 50
    service = latency.prefill_steps_s(r, b, context, 1000, room)
    # cv2 4 at a rate whose prefill spans many gaps: three others on average, and 4,000 tokens fit one step's
    # room, so the prompt waits for all of them
    expected = latency.prefill_steps_s(r, b, context, 4000, room) - service
    assert analytic_load.clump_wait_s(r, b, context, 1000, room, service, 4.0, 1e4) == pytest.approx(expected,
                                                                                                     rel=1e-6)
    # past the room the clump's first step finishes together, the rest chunk by chunk: 12,000 tokens against a
    # room of 8,142 wait 1/2 + 8,142 / (2 x 12,000) = 0.839 of the others' prefill
    long_service = latency.prefill_steps_s(r, b, context, 3000, room)
    partly = (latency.prefill_steps_s(r, b, context, 12000, room) - long_service) * (0.5 + 8142 / 24000)
    assert analytic_load.clump_wait_s(r, b, context, 3000, room, long_service, 4.0, 1e4) == pytest.approx(
        partly, rel=1e-6)
    # at a trickle the clump is spread over time: the share of it that lands within the prefill, before and after
    rate = 0.5
    share = 2 * queueing.arrivals_excess(0.25, rate, service) / 3
    assert 0 < share < 1
    assert analytic_load.clump_wait_s(r, b, context, 1000, room, service, 4.0, rate) == pytest.approx(
        expected * share, rel=1e-12)
    assert analytic_load.clump_wait_s(r, b, context, 1000, room, service, 1.0, rate) == 0.0  # Poisson: no clumps


@pytest.mark.parametrize("t", [0.05, 0.3, 1.0, 4.0])
def test_the_arrivals_excess_of_erlang_2_gaps_is_its_renewal_function(t):
    # gamma gaps of shape 2, mean 1 (two exponential phases of rate 2): U(t) = t - (1 - e^{-4t}) / 4
    assert queueing.arrivals_excess(2.0, 1.0, t) == pytest.approx(-(1 - math.exp(-4 * t)) / 4, rel=1e-9, abs=1e-12)


def test_the_arrivals_excess_limits():
    assert queueing.arrivals_excess(1.0, 3.0, 2.0) == pytest.approx(0.0, abs=1e-9)  # Poisson: exactly the mean
    # a window of many gaps: the renewal theorem's second term, (cv2 - 1) / 2 = 1.5 for shape 0.25
    assert queueing.arrivals_excess(0.25, 1.0, 400.0) == pytest.approx(1.5, rel=1e-3)
    # far past e^709 the power series alone overflowed (inf x 0: NaN; review)
    assert queueing.arrivals_excess(0.5, 1000.0, 1.5) == pytest.approx(0.5, rel=1e-9)
    assert queueing.arrivals_excess(0.05, 1000.0, 1.0) == pytest.approx(9.5, rel=1e-9)
    # a light load: the k-th follower's chance P(A_k < w) ~ x^(kb) / Gamma(kb + 1), x = rate b w (e^-x ~ 1)
    x = 1e-4 * 0.25
    by_hand = sum(x ** (k / 4) / math.gamma(k / 4 + 1) for k in range(1, 13)) - 1e-4
    assert queueing.arrivals_excess(0.25, 1e-4, 1.0) == pytest.approx(by_hand, rel=1e-4)  # 0.0840: 0.078 the first


def test_poisson_written_out_is_the_default_exactly():
    r = _replica()
    assert analytic_load.at_rate(r, 10.0, 1000, 250, burstiness=1.0) == analytic_load.at_rate(r, 10.0, 1000, 250)
    assert analytic_load.max_rate(r, 1000, 250, 500, 40, burstiness=1.0) == analytic_load.max_rate(r, 1000, 250,
                                                                                                  500, 40)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([(1000, 250, 500.0, 40.0), (3000, 300, 2000.0, 60.0), (200, 800, None, 25.0)]),
       st.floats(0.05, 20.0), st.floats(1.05, 4.0))
def test_burstier_arrivals_never_raise_the_analytic_capacity(shape, shape_b, factor):
    inp, out, ttft, tpot = shape
    r = _replica()
    smooth = analytic_load.max_rate(r, inp, out, ttft, tpot, burstiness=min(shape_b * factor, 100.0))
    bursty = analytic_load.max_rate(r, inp, out, ttft, tpot, burstiness=shape_b)
    assert bursty.requests_per_second <= smooth.requests_per_second * (1 + analytic_load.RATE_TOLERANCE)


def test_the_steady_run_sends_gamma_gaps_at_the_exact_rate():
    lengths = FixedLengths(1000, 250)
    reqs = make_requests(lengths, PoissonArrivals(10.0, 0.25), 4000, 0)
    gaps = np.diff([q.arrival_s for q in reqs], prepend=0.0)
    # gamma of shape 0.25, mean 0.1 s: variance / mean^2 = 4 (4,000 draws: within 15 %)
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.var() / gaps.mean() ** 2 == pytest.approx(4.0, rel=0.15)
    r = _replica()
    res, stable = steady_state.steady_run(r, lengths, 12.0, 500, 40, measured=400, burstiness=0.25)
    sent = np.asarray(res.send_s, dtype=float)
    assert stable and (sent[-1] - sent[0]) == pytest.approx(399 / 12.0, rel=0.02)  # the segment's exact rate


def test_clumped_arrivals_lower_the_simulated_capacity():
    """Llama-3.1-8B on an H100 at 1,000 / 250 within 500 ms / 40 ms (means): 18.95 requests/s of Poisson
    traffic, 17.52 of gamma gaps of shape 0.25 (benchmarks/bursty_traffic.py); the analytic screen's clumps
    put the latter at 17.6."""
    r = _replica()

    def w(b: float) -> Workload:
        return Workload(name="w", model="meta-llama/Llama-3.1-8B-Instruct", requests_per_second=10, input_tokens=1000,
                        output_tokens=250, slo=Slo(ttft_ms=500, tpot_ms=40), burstiness=b)
    poisson, _ = simulated_capacity(r, w(1.0), 19.0)
    bursty, _ = simulated_capacity(r, w(0.25), 17.5)
    assert bursty < poisson * 0.95
    screen = analytic_load.max_rate(r, 1000, 250, 500, 40, burstiness=0.25).requests_per_second
    assert screen == pytest.approx(bursty, rel=0.05)


def test_a_bursty_plan_records_its_arrivals_and_buys_no_less_than_poisson(tmp_path, monkeypatch):
    from tests.conftest import run

    body = HEAD.replace("schema_version: 1\n", "schema_version: 1\nresidency: us\nproviders: [digitalocean]\n")
    bursty, poisson = tmp_path / "bursty.yaml", tmp_path / "poisson.yaml"
    bursty.write_text(body + "    requests_per_second: 20\n    burstiness: 0.25\n")
    poisson.write_text(body + "    requests_per_second: 20\n")
    plans = {}
    for path in (bursty, poisson):
        out = tmp_path / f"{path.stem}.json"
        assert run("solve", path, "--format", "json", "-o", out).exit_code == 0
        plans[path.stem] = json.loads(out.read_text())
    assert plans["bursty"]["workloads"][0]["burstiness"] == 0.25
    assert "burstiness" not in plans["poisson"]["workloads"][0]  # a Poisson plan reads as before
    assert plans["bursty"]["total_cost_per_hour"] >= plans["poisson"]["total_cost_per_hour"]
    # each deployment's capacity is the simulated one under gamma arrivals
    assert {d["capacity"]["source"] for d in plans["bursty"]["deployments"]} == {"simulated"}
    report = run("report", tmp_path / "bursty.json", "--format", "markdown")
    assert "20 requests per second (clumped: gamma arrivals of shape 0.25)" in report.stdout
    # the table says it too, wide and compact; a Poisson plan's table says nothing of arrivals
    for width in ("200", "100"):
        monkeypatch.setenv("COLUMNS", width)
        table = run("report", tmp_path / "bursty.json", "--format", "table").stdout
        assert "Llama-3.1-8B-Instruct (clumped: gamma arrivals of shape 0.25)" in table
        assert ("Model of chat:" in table) == (width == "200")  # the wide layout, then one block per deployment
        assert "gamma arrivals" not in run("report", tmp_path / "poisson.json", "--format", "table").stdout


def test_the_screens_capacity_never_jumps_up_as_arrivals_clump_more():
    """QA: Qwen3-32B FP8 on an H100 at 1,000 / 250 within 300 ms read 1.99 requests/s at shape 0.12, 0.47 at
    0.125 and 0.86 at 0.09: the clump wait halved where a clump outgrew one step's room. Over 60 shapes from
    0.05 to 1 the capacity falls with every more clumped shape."""
    arch, gpu = get_model("Qwen/Qwen3-32B"), get_gpu("H100-SXM-80GB")
    r = latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig(tensor_parallel=1, precision="fp8",
                                                                           max_model_len=8192)))
    shapes = np.geomspace(0.05, 1.0, 60)
    caps = [analytic_load.max_rate(r, 1000, 250, 300, None, burstiness=float(b)).requests_per_second for b in shapes]
    assert all(lo <= hi * (1 + analytic_load.RATE_TOLERANCE) for lo, hi in zip(caps, caps[1:], strict=False))
    assert caps[-1] > 2 * caps[len(caps) // 2] > 0


def test_arrivals_more_regular_than_poisson_are_planned_as_poisson():
    """The simulator finds them never dearer (docs/simulator.md); crediting them while Poisson plans are
    analytic made b = 1.01 dearer than b = 1 (QA). The plan still records the shape the file gave."""
    w = Workload(name="w", model="meta-llama/Llama-3.1-8B-Instruct", requests_per_second=2, input_tokens=100,
                 output_tokens=50, slo=Slo(tpot_ms=40), burstiness=2.0)
    assert w.burstiness == 2.0 and w.arrival_burstiness == 1.0 and not needs_simulation(w)


def test_a_shared_prefix_with_targets_is_simulated_whatever_the_arrivals():
    """The simulator serves a shared prefix from the prefix cache; the analytic screen prefills it every time.
    Planned on the screen, a Poisson workload with a 1,500-token system prompt cost 1,336 USD/month where the
    same traffic in clumps, simulated, cost 796 (QA)."""
    def w(**kw: object) -> Workload:
        return Workload(name="w", model="meta-llama/Llama-3.1-8B-Instruct", requests_per_second=6,
                        input_tokens=2000, output_tokens=200, shared_prefix_tokens=1500, **kw)  # type: ignore[arg-type]
    assert needs_simulation(w(slo=Slo(ttft_ms=800, tpot_ms=50)))
    assert not needs_simulation(w())  # no target: nothing to confirm

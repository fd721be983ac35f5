"""The step-level simulator: hand-countable schedules, vLLM's preemption, laws that must hold, and agreement
with the analytic model in steady state. Expected times are built from the cost model's own step function
(latency.engine_step_s), so they hold for any calibration."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.quantization import read_quantization
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.simulator import SchedulerConfig, simulate, simulate_dp
from gpuopt.physics.steady_state import steady_capacity, steady_run
from gpuopt.physics.traffic import (
    AllAtOnce,
    FixedLengths,
    PoissonArrivals,
    RangeLengths,
    Request,
    make_requests,
)


def replica(model: str = "Qwen/Qwen3-4B", gpu: str = "H100-SXM-80GB", max_len: int = 8192) -> latency.Replica:
    arch, spec = get_model(model), get_gpu(gpu)
    mem = estimate(arch, spec, ServingConfig(max_model_len=max_len, vllm_version="0.11"))
    return latency.build_replica(arch, spec, mem)


R = replica()


def sched(**changes: object) -> SchedulerConfig:
    base = SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=8192, block_size=16, num_gpu_blocks=100_000)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def ingress(r: latency.Replica, prompt_tokens: int) -> float:
    """What a lone request spends before the engine: the serving path and the API server's work on it."""
    return (r.cal.server_overhead_ms * 1e-3 + r.serving.frontend_ms_per_request * 1e-3
            + r.serving.frontend_us_per_prompt_token * 1e-6 * prompt_tokens)


def decode_steps(r: latency.Replica, seqs: int, first_context: int, steps: int) -> float:
    return sum(latency.engine_step_s(r, seqs, first_context + k, 0, 0.0, False) for k in range(steps))


def test_one_request_alone_is_one_prefill_then_decode_steps():
    reqs = [Request(arrival_s=0.0, input_tokens=1000, output_tokens=10)]
    res = simulate(R, reqs, sched=sched())
    prefill = latency.engine_step_s(R, 0, 0.0, 1000, 500.0, False)
    assert res.ttft_s[0] == pytest.approx(ingress(R, 1000) + prefill, rel=1e-9)
    # 9 more tokens, each one decode step; the context of the k-th is 1000 + k + 1 tokens (its new token included)
    assert res.e2el_s[0] == pytest.approx(ingress(R, 1000) + prefill + decode_steps(R, 1, 1001, 9), rel=1e-9)
    assert res.summary()["mean_tpot_ms"] == pytest.approx(decode_steps(R, 1, 1001, 9) / 9 * 1e3, rel=1e-6)


def test_a_long_prompt_is_chunked_at_the_token_budget():
    reqs = [Request(arrival_s=0.0, input_tokens=5000, output_tokens=1)]
    res = simulate(R, reqs, sched=sched(max_num_batched_tokens=2048))
    chunks = [(2048, 1024.0), (2048, 2048 + 1024.0), (904, 4096 + 452.0)]
    expected = sum(latency.engine_step_s(R, 0, 0.0, n, c, False) for n, c in chunks)
    assert res.ttft_s[0] == pytest.approx(ingress(R, 5000) + expected, rel=1e-9)


def test_requests_beyond_max_num_seqs_come_in_countable_waves():
    # 12 equal requests, 4 at a time: three waves; each is one prefill step of 4 prompts then 7 decode steps
    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=8) for _ in range(12)]
    res = simulate(R, reqs, sched=sched(max_num_seqs=4), offline=True)
    finishes = np.unique(np.round(res.e2el_s, 9))
    assert len(finishes) == 3
    wave = latency.engine_step_s(R, 0, 0.0, 400, 50.0, False) + decode_steps(R, 4, 101, 7)
    assert finishes.tolist() == pytest.approx([wave, 2 * wave, 3 * wave], rel=1e-6)
    assert res.summary()["max_concurrent_requests"] == 12  # the client sent them all; 4 ran at a time


def test_a_kv_cache_too_small_preempts_the_last_request():
    # 4 blocks of 16 tokens; two requests of 16 prompt + 33 output tokens each need 3 blocks by the end.
    # Both fit until their 33rd token (2 blocks each); then the first needs a third block: the last running
    # request is preempted (recompute), waits for the first to finish and comes back: one preemption.
    reqs = [Request(arrival_s=0.0, input_tokens=16, output_tokens=33) for _ in range(2)]
    res = simulate(R, reqs, sched=sched(num_gpu_blocks=4, enable_prefix_caching=False), offline=True)
    assert res.preemptions == 1
    assert res.kv_usage_peak == 1.0
    assert res.e2el_s[1] > res.e2el_s[0]  # the preempted one finishes last
    roomy = simulate(R, reqs, sched=sched(num_gpu_blocks=6, enable_prefix_caching=False), offline=True)
    assert roomy.preemptions == 0


def test_prefix_caching_saves_the_recompute_of_a_preempted_request():
    reqs = [Request(arrival_s=0.0, input_tokens=600, output_tokens=200) for _ in range(6)]
    tight = sched(num_gpu_blocks=140)  # 3 admitted (38 blocks each), growing to 50 each: preemption
    cached = simulate(R, reqs, sched=tight, offline=True)
    recompute = simulate(R, reqs, sched=dataclasses.replace(tight, enable_prefix_caching=False), offline=True)
    assert cached.preemptions > 0
    assert cached.duration_s < recompute.duration_s


def test_a_shared_prefix_is_computed_once():
    reqs = make_requests(FixedLengths(1100, 4), PoissonArrivals(2.0), 8, seed=0, shared_prefix_tokens=1000)
    hit = simulate(R, reqs, sched=sched())
    miss = simulate(R, reqs, sched=sched(enable_prefix_caching=False))
    assert hit.summary()["mean_ttft_ms"] < miss.summary()["mean_ttft_ms"]


def test_async_scheduling_hides_the_host_part_of_a_step():
    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=50) for _ in range(64)]
    sync = simulate(R, reqs, sched=sched()).summary()
    overlapped = simulate(R, reqs, sched=sched(async_scheduling=True)).summary()
    assert overlapped["mean_tpot_ms"] < sync["mean_tpot_ms"]


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_an_arrival_joins_the_next_schedule_one_step_later_with_async_scheduling(async_scheduling: bool):
    # A (100 + 20 tokens) runs alone; B reaches the engine halfway through A's third decode step. Without async
    # scheduling the next step is scheduled when that step ends, so B's prompt is in it; with async scheduling
    # it was scheduled when the third step began (vLLM's batch queue of two), so B waits one decode step more.
    def step(decodes: int, context: float, prefill: int = 0) -> float:
        return latency.engine_step_s(R, decodes, context, prefill, prefill / 2, async_scheduling)

    prefill_a = step(0, 0.0, 100)
    d = [step(1, 101 + k) for k in range(4)]
    arrival = prefill_a + d[0] + d[1] + d[2] / 2
    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=20),
            Request(arrival_s=arrival, input_tokens=100, output_tokens=5)]
    res = simulate(R, reqs, sched=sched(async_scheduling=async_scheduling), offline=True)
    if async_scheduling:
        expected = prefill_a + sum(d[:4]) + step(1, 105, 100) - arrival
    else:
        expected = prefill_a + sum(d[:3]) + step(1, 104, 100) - arrival
    assert res.ttft_s[1] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_an_arrival_during_a_chunked_prefill_waits_one_chunk_more_with_async_scheduling(async_scheduling: bool):
    # A's 5,000-token prompt takes three steps at 2,048 tokens; B (100 tokens) reaches the engine halfway through
    # the second. Without async scheduling B shares the third step with A's last 904 tokens; with it the third
    # step was scheduled when the second began, so B comes in beside A's first decode.
    def step(decodes: int, context: float, prefill: int, prefill_context: float) -> float:
        return latency.engine_step_s(R, decodes, context, prefill, prefill_context, async_scheduling)

    c1, c2 = step(0, 0.0, 2048, 1024.0), step(0, 0.0, 2048, 2048 + 1024.0)
    arrival = c1 + c2 / 2
    reqs = [Request(arrival_s=0.0, input_tokens=5000, output_tokens=4),
            Request(arrival_s=arrival, input_tokens=100, output_tokens=4)]
    res = simulate(R, reqs, sched=sched(max_num_batched_tokens=2048, async_scheduling=async_scheduling),
                   offline=True)
    if async_scheduling:
        expected = c1 + c2 + step(0, 0.0, 904, 4096 + 452.0) + step(1, 5001.0, 100, 50.0) - arrival
    else:
        shared = (904 * (4096 + 452.0) + 100 * 50.0) / 1004
        expected = c1 + c2 + step(0, 0.0, 1004, shared) - arrival
    assert res.ttft_s[1] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_a_finished_requests_slot_returns_one_step_later_with_async_scheduling(async_scheduling: bool):
    # max_num_seqs 2: A (3 tokens) and C (20) run, B waits. A ends with the third step. Without async
    # scheduling B's prompt shares the fourth step with C; with it the fourth step was scheduled before A's
    # output was processed (A still held its slot), so C decodes alone once more and B comes in with the fifth.
    def step(decodes: int, context: float, prefill: int = 0) -> float:
        return latency.engine_step_s(R, decodes, context, prefill, 50.0 if prefill else 0.0, async_scheduling)

    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=3),
            Request(arrival_s=0.0, input_tokens=100, output_tokens=20),
            Request(arrival_s=0.0, input_tokens=100, output_tokens=5)]
    res = simulate(R, reqs, sched=sched(max_num_seqs=2, async_scheduling=async_scheduling), offline=True)
    before_b = step(0, 0.0, 200) + step(2, 101) + step(2, 102)
    assert res.e2el_s[0] == pytest.approx(before_b, rel=1e-9)
    expected = before_b + (step(1, 103) + step(1, 104, 100) if async_scheduling else step(1, 103, 100))
    assert res.ttft_s[2] == pytest.approx(expected, rel=1e-9)


def test_an_arrival_at_an_idle_engine_is_scheduled_at_once_even_with_async_scheduling():
    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=2),
            Request(arrival_s=5.0, input_tokens=100, output_tokens=2)]
    res = simulate(R, reqs, sched=sched(async_scheduling=True), offline=True)
    assert res.ttft_s[1] == pytest.approx(latency.engine_step_s(R, 0, 0.0, 100, 50.0, True), rel=1e-9)


def test_offline_has_no_server_overhead():
    reqs = [Request(arrival_s=0.0, input_tokens=1000, output_tokens=2)]
    served = simulate(R, reqs, sched=sched())
    batch = simulate(R, reqs, sched=sched(), offline=True)
    assert served.ttft_s[0] - batch.ttft_s[0] == pytest.approx(ingress(R, 1000), rel=1e-9)


def test_a_burst_queues_in_the_api_server_by_its_prompt_tokens():
    # two requests sent together: the API server handles the 3,000-token one first (send order), so the
    # 10-token one reaches the engine its own frontend time later than the first one's, not at the same time
    sc = R.serving.model_copy(update={"frontend_ms_per_request": 2.0, "frontend_us_per_prompt_token": 10.0})
    r = dataclasses.replace(R, serving=sc)
    reqs = [Request(arrival_s=0.0, input_tokens=3000, output_tokens=1),
            Request(arrival_s=0.0, input_tokens=10, output_tokens=1)]
    alone = simulate(r, reqs[1:], sched=sched())
    both = simulate(r, reqs, sched=sched(enable_prefix_caching=False))
    assert ingress(r, 3000) == pytest.approx(r.cal.server_overhead_ms * 1e-3 + 0.032, rel=1e-12)
    assert both.ttft_s[1] >= alone.ttft_s[0] + 0.032 - 1e-12  # waited for the first one's 2 ms + 30 ms


def test_a_closed_loop_keeps_at_most_its_concurrency_in_flight():
    reqs = make_requests(FixedLengths(200, 20), AllAtOnce(), 40, seed=0)
    res = simulate(R, reqs, sched=sched(), max_concurrency=5)
    starts, ends = res.send_s, res.send_s + res.e2el_s
    for t in np.linspace(0, float(ends.max()), 97):
        assert int(((starts <= t) & (ends > t)).sum()) <= 5


def test_summary_has_vllm_bench_serve_keys_and_plain_numbers():
    res = simulate(R, make_requests(FixedLengths(100, 10), PoissonArrivals(5.0), 30, seed=1), sched=sched())
    summary = res.summary()
    for key in ("completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
                "output_throughput", "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests",
                "preemptions", "kv_usage_peak"):
        assert key in summary
    for stat in ("mean", "median", "p90", "p95", "p99"):
        for metric in ("ttft", "tpot", "itl", "e2el"):
            assert f"{stat}_{metric}_ms" in summary
    assert summary["completed"] == 30 and summary["total_output_tokens"] == 300
    json.dumps(summary)  # no numpy scalars
    assert all(type(v) in (int, float) for v in summary.values())


def test_the_same_seed_gives_byte_identical_json_and_another_seed_does_not():
    def run(seed: int) -> str:
        reqs = make_requests(RangeLengths(300, 50, 0.5), PoissonArrivals(8.0), 60, seed=seed)
        return json.dumps(simulate(R, reqs, sched=sched(), ignore_eos=False, seed=seed).summary(), sort_keys=True)

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_outputs_that_end_at_eos_are_never_longer_than_asked():
    reqs = make_requests(FixedLengths(100, 200), AllAtOnce(), 3000, seed=0)
    res = simulate(R, reqs, sched=sched(), ignore_eos=False, offline=True)
    assert res.output_tokens.max() <= 200
    # geometric with mean 200, capped at 200: expected mean 200 (1 - (1 - 1/200)^200) = 126.6
    assert res.output_tokens.mean() == pytest.approx(126.6, rel=0.03)  # standard error ~1 %


@pytest.mark.parametrize("rate", [0.5, 2.0, 6.0])
def test_a_higher_rate_never_lowers_mean_ttft(rate: float):
    def ttft(r: float) -> float:
        reqs = make_requests(FixedLengths(2000, 100), PoissonArrivals(r), 120, seed=5)
        return float(simulate(R, reqs, sched=sched(max_num_batched_tokens=2048)).summary()["mean_ttft_ms"])

    # same seed: the arrival times at 1.5x the rate are the same draws compressed by 1.5
    assert ttft(rate * 1.5) >= ttft(rate) * 0.99


@given(rate=st.floats(0.2, 12.0), inp=st.integers(50, 3000), out=st.integers(5, 300))
@settings(max_examples=12, deadline=None, derandomize=True)
def test_law_a_higher_rate_never_lowers_mean_ttft(rate: float, inp: int, out: int):
    def ttft(r: float) -> float:
        reqs = make_requests(FixedLengths(inp, out), PoissonArrivals(r), 60, seed=11)
        return float(simulate(R, reqs, sched=sched(max_num_batched_tokens=2048)).summary()["mean_ttft_ms"])

    # 2 %: with 60 arrivals and short prompts, where the arrivals fall against the step boundaries moves the
    # mean by up to ~1 % either way around its rising trend (55/41 tokens: 48.24 ms at 6.49 req/s, 47.82 at
    # 9.74, 48.50 at 11)
    assert ttft(rate * 1.5) >= ttft(rate) * 0.98


def test_more_replicas_are_never_slower_at_the_same_total_rate():
    reqs = make_requests(FixedLengths(1000, 100), PoissonArrivals(20.0), 200, seed=2)
    one = simulate_dp(R, reqs, 1, sched=sched(max_num_seqs=32)).summary()
    two = simulate_dp(R, reqs, 2, sched=sched(max_num_seqs=32)).summary()
    assert float(two["mean_ttft_ms"]) <= float(one["mean_ttft_ms"])
    assert float(two["mean_tpot_ms"]) <= float(one["mean_tpot_ms"])


def test_a_concurrency_cap_below_the_engine_count_keeps_only_that_many_engines_busy():
    """4 clients against 8 data-parallel engines: vLLM's coordinator sends each request to a least-loaded engine,
    so 4 engines work and 4 idle -- exactly the 4-engine run (the caps used to be 1 per engine, 8 in flight)."""
    reqs = make_requests(FixedLengths(500, 50), AllAtOnce(), 40, seed=3)
    eight = simulate_dp(R, reqs, 8, sched=sched(), max_concurrency=4).summary()
    four = simulate_dp(R, reqs, 4, sched=sched(), max_concurrency=4).summary()
    assert eight == four
    # a MoE model's shared expert layers then see the 4 busy engines' tokens, not 8 engines' worth
    arch, spec = get_model("Qwen/Qwen3-30B-A3B"), get_gpu("H100-SXM-80GB")
    mem = estimate(arch, spec, ServingConfig(max_model_len=8192, vllm_version="0.11", data_parallel=8))
    moe = latency.build_replica(arch, spec, mem)
    assert (moe.moe_token_scale, dataclasses.replace(moe, moe_peer_engines=4).moe_token_scale) == (8.0, 4.0)
    assert dataclasses.replace(moe, moe_peer_engines=4).dp_s_per_token == pytest.approx(moe.dp_s_per_token * 3 / 7)
    capped = simulate_dp(moe, reqs, 8, sched=sched(), max_concurrency=4).summary()
    assert capped == simulate_dp(dataclasses.replace(moe, moe_peer_engines=4), reqs, 4, sched=sched(),
                                 max_concurrency=4).summary()


def test_a_wider_range_ratio_never_raises_capacity_at_a_fixed_mean():
    def capacity(ratio: float) -> float:
        lengths = RangeLengths(1000, 200, ratio) if ratio else FixedLengths(1000, 200)
        return steady_capacity(R, lengths, None, 25.0, 90, analytic_load.max_rate(R, 1000, 200).requests_per_second,
                               measured=150)[0]

    narrow, wide = capacity(0.0), capacity(0.9)
    assert narrow > 0
    assert wide <= narrow * 1.05  # 4 % search resolution


@pytest.mark.parametrize("load", [0.3, 0.6])
def test_simulator_and_analytic_model_agree_in_steady_state(load: float):
    """Decode-dominated Poisson traffic (200 in, 500 out) at 30 % and 60 % of the analytic maximum rate: the
    simulated mean TPOT within 15 % of the analytic steady-state step and the mean TTFT within 20 %; the
    throughput within 5 % of the offered rate corrected for the drain of a finite run."""
    rate = analytic_load.max_rate(R, 200, 500).requests_per_second * load
    reqs = make_requests(FixedLengths(200, 500), PoissonArrivals(rate), 800, seed=0)
    res = simulate(R, reqs, sched=SchedulerConfig.from_replica(R)).summary()
    point = analytic_load.at_rate(R, rate, 200, 500)
    assert float(res["mean_tpot_ms"]) == pytest.approx(point.tpot_ms, rel=0.15)
    assert float(res["mean_ttft_ms"]) == pytest.approx(point.ttft_ms, rel=0.20)
    # 800 requests arrive over 800 / rate seconds; the last one then takes one analytic request latency
    finite_run = 800 / (800 / rate + (point.ttft_ms + 499 * point.tpot_ms) / 1e3)
    assert float(res["request_throughput"]) == pytest.approx(finite_run, rel=0.05)


@pytest.mark.parametrize(("model", "inp", "out"), [("Qwen/Qwen3-4B", 3000, 300), ("openai/gpt-oss-20b", 1000, 250)])
def test_prefill_heavy_and_moe_steady_states_agree_with_the_simulator(model: str, inp: int, out: int):
    """The analytic steady state runs each prompt in the step after it arrives (a Poisson share of the steps),
    as the simulator does: at 70 % of the analytic capacity (TPOT 25 ms), the simulated steady state (warm-up
    and tail around 300 measured requests) has the analytic mean TPOT within 10 % and TTFT within 30 %. When
    prompts were spread over every step, the 3,000-token prompts hid under the decode's memory time (TPOT
    40 % optimistic) and every gpt-oss step paid for the experts a prompt touches."""
    r = replica(model)
    rate = analytic_load.max_rate(r, inp, out, None, 25.0).requests_per_second * 0.7
    res, stable = steady_run(r, FixedLengths(inp, out), rate, None, 25.0, measured=300)
    point = analytic_load.at_rate(r, rate, inp, out)
    summary = res.summary()
    assert stable
    assert float(summary["mean_tpot_ms"]) == pytest.approx(point.tpot_ms, rel=0.10)
    assert float(summary["mean_ttft_ms"]) == pytest.approx(point.ttft_ms, rel=0.30)


def test_a_finite_run_that_fits_one_batch_is_not_a_capacity():
    """400 requests of 200 in / 800 out all fit one batch on an H100: a plain finite run at 5x the analytic
    capacity still meets 60 ms TPOT (everything decodes together, then drains; 56 ms with the 2026-12-02
    calibration, whose 120 us of host work per sequence puts 40x, 64 ms, just above). The steady-state run,
    with the engine filled first and kept loaded, does not: its queue grows."""
    r = replica("openai/gpt-oss-20b")
    cap = analytic_load.max_rate(r, 200, 800, None, 60.0).requests_per_second
    finite = simulate(r, make_requests(FixedLengths(200, 800), PoissonArrivals(cap * 5), 400, seed=0)).summary()
    assert float(finite["mean_tpot_ms"]) <= 60.0
    res, stable = steady_run(r, FixedLengths(200, 800), cap * 5, None, 60.0)
    assert not stable or float(res.summary()["mean_tpot_ms"]) > 60.0


def test_moe_step_cost_grows_with_the_experts_a_batch_touches():
    moe = replica("openai/gpt-oss-20b", "H100-SXM-80GB")
    one = latency.engine_step_s(moe, 1, 1000.0, 0, 0.0, False)
    many = latency.engine_step_s(moe, 64, 1000.0, 0, 0.0, False)
    # batch 1 reads 4 of 32 experts; batch 64 touches nearly all of them
    assert many > one * 1.5


def test_a_hybrid_model_pages_attention_in_large_blocks_and_its_state_once_per_request():
    """Qwen3.5-9B: 8 full-attention and 24 Gated DeltaNet layers. vLLM groups them in 8s: one attention group
    and three state groups, all drawing on one pool. A state page holds one layer's state: conv 3 x (2 x 16 x
    128 + 32 x 128) x 2 B = 49,152 B plus the float32 recurrent state 32 x 128 x 128 x 4 B = 2,097,152 B; an
    attention token is 2 x 4 heads x 256 x 2 B = 4,096 B per layer, so attention blocks hold 16 x
    ceil(2,146,304 / 4,096 / 16) = 528 tokens."""
    arch, spec = get_model("Qwen/Qwen3.5-9B"), get_gpu("H100-SXM-80GB")
    mem = estimate(arch, spec, ServingConfig(max_model_len=32768, vllm_version="0.17"))  # the first to serve it
    s = SchedulerConfig.from_memory(mem)
    assert (s.block_size, s.full_groups, s.window_groups, s.state_groups) == (528, 1, 0, 3)
    r = latency.build_replica(arch, spec, mem)
    res = simulate(r, [Request(arrival_s=0.0, input_tokens=1000, output_tokens=10)], sched=s)
    # 1,010 tokens: ceil(1010 / 528) = 2 attention blocks, plus one page in each of the 3 state groups
    assert res.summary()["kv_usage_peak"] == pytest.approx(5 / s.num_gpu_blocks, abs=1e-6)


def test_a_decode_step_reads_and_writes_each_sequences_recurrent_state():
    """24 Gated DeltaNet layers x 2,146,304 B of state per sequence, read and written back every step: ten
    more sequences cost 10 x 2 x 51,511,296 B more memory traffic, whatever their context."""
    arch, spec = get_model("Qwen/Qwen3.5-9B"), get_gpu("H100-SXM-80GB")
    r = latency.build_replica(arch, spec, estimate(arch, spec, ServingConfig(max_model_len=8192)))
    assert r.state_bytes_per_seq_per_gpu == 24 * 2_146_304
    t0 = latency.step_parts_s(r, 0, 0.0)[0]  # context 0: no KV read, only the state
    t10 = latency.step_parts_s(r, 10, 0.0)[0]
    assert t10 - t0 == pytest.approx(10 * 2 * 24 * 2_146_304 / (3.35e12 * r.arch_cal.eff_bw), rel=1e-9)


def test_block_fp8_experts_before_vllm_0_8_take_their_own_kernel_path():
    h200 = get_gpu("H200-141GB")
    assert latency.moe_kernel_path(h200, "fp8", "0.7.4") == "fp8_block_v0"
    assert latency.moe_kernel_path(h200, "fp8", "v0.7") == "fp8_block_v0"
    assert latency.moe_kernel_path(h200, "fp8", "0.11") == "fp8_block"
    assert latency.moe_kernel_path(get_gpu("A100-SXM-80GB"), "fp8", "0.7.4") == "marlin_w8a16"


def test_moe_speed_path_is_the_kernel_vllm_picks_for_the_checkpoint():
    """One rule set (quantization.select_kernel) decides commands, memory and speed: gpt-oss's MXFP4 experts
    run OpenAI's triton_kernels on Hopper and Marlin on Ampere and Ada; 4-bit AWQ runs Marlin (from sm75 in the
    default release, 0.33); 16-bit experts run Triton fused_moe on every GPU, Blackwell included; a served
    8-bit GPTQ checkpoint takes the W8A16 Marlin path, not the plan format's W4A16 one (8-bit AWQ runs in no
    release: quantization.select_kernel)."""
    h100, a100, l40s, t4, b200 = (get_gpu(g) for g in ("H100-SXM-80GB", "A100-SXM-80GB", "L40S-48GB", "T4-16GB",
                                                      "B200-180GB"))
    assert [latency.moe_kernel_path(g, "mxfp4") for g in (h100, a100, l40s)] == [
        "triton_mxfp4", "marlin_w4a16", "marlin_w4a16"]
    assert [latency.moe_kernel_path(g, "int4") for g in (h100, a100, t4)] == ["marlin_w4a16"] * 3
    assert [latency.moe_kernel_path(g, "fp16") for g in (h100, b200)] == ["triton_fused_moe"] * 2
    assert latency.moe_kernel_path(b200, "fp8") == "flashinfer_cutlass"
    gptq8 = read_quantization({"quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": 128,
                                                                  "desc_act": False, "sym": True}})
    assert gptq8 is not None and gptq8.weight_format == "int8"
    assert latency.moe_kernel_path(a100, "int8", checkpoint=gptq8) == "marlin_w8a16"
    assert latency.moe_kernel_path(a100, "int8") == "triton_fused_moe"  # the representative INT8 is W8A8


def test_a_window_summarises_only_its_requests_and_the_backlog_counts_the_waiting():
    """Three requests sent at 0, 0 and 10 s: the window of the second is that request alone (its TTFT, its
    output, its own inter-token gaps), and at 0 s, before any prefill ends, both requests sent so far are
    waiting for their first token, at 10 s only the third is."""
    reqs = [Request(arrival_s=0.0, input_tokens=500, output_tokens=5),
            Request(arrival_s=0.0, input_tokens=800, output_tokens=3),
            Request(arrival_s=10.0, input_tokens=500, output_tokens=5)]
    whole = simulate(R, reqs, sched=sched())
    second = whole.window(1, 2)
    assert second.output_tokens.tolist() == [3]
    assert second.ttft_s.tolist() == [whole.ttft_s[1]]
    assert second.itl_counts.sum() == 2  # 3 tokens, 2 gaps
    assert second.summary()["completed"] == 1
    assert second.duration_s == pytest.approx(whole.e2el_s[1])
    assert whole.backlog(0.0) == 2
    assert whole.backlog(10.0) == 1


def test_the_chat_endpoints_role_chunk_is_a_zero_gap_and_one_more_chunk_in_the_peak():
    # one request of 4 tokens, alone: the completions stream has 4 chunks (3 gaps g1..g3); the chat stream
    # sends a role chunk with the first token, so vllm bench serve records 5 chunks and the gaps 0, g1, g2, g3
    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=4)]
    plain = simulate(R, reqs, sched=sched())
    chat = simulate(R, reqs, sched=sched(), chat=True)
    gaps = plain.request_itls_s()[0]
    assert len(gaps) == 3
    assert chat.request_itls_s()[0] == [0.0, *gaps]
    p, c = plain.summary(), chat.summary()
    assert c["mean_itl_ms"] == pytest.approx(sum(gaps) / 4 * 1e3, rel=1e-6)
    assert p["mean_itl_ms"] == pytest.approx(sum(gaps) / 3 * 1e3, rel=1e-6)
    assert c["median_itl_ms"] == pytest.approx(float(np.median([0.0, *gaps])) * 1e3, rel=1e-6)
    # the four tokens come within a second of each other (a few ms apart): one bucket of 4, or 5 with the role
    assert p["max_output_tokens_per_s"] == 4
    assert c["max_output_tokens_per_s"] == 5
    # what the engine did is the same: TTFT, TPOT (over the usage's completion tokens) and throughput
    for key in ("mean_ttft_ms", "mean_tpot_ms", "output_throughput", "duration"):
        assert c[key] == p[key]


def test_offline_runs_have_no_stream_and_no_role_chunk():
    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=4)]
    assert simulate(R, reqs, sched=sched(), offline=True, chat=True).summary() == \
        simulate(R, reqs, sched=sched(), offline=True).summary()


def _dense_peaks(res) -> tuple[float, int]:
    """vllm bench serve's own way (serve.py calculate_metrics): a dense array of 1-second buckets."""
    t0 = float(res.send_s.min())
    end = res.send_s + res.e2el_s
    n = int(np.ceil(float(end.max()) - t0)) + 1
    tokens = np.zeros(n)
    np.add.at(tokens, (res.token_times_s - t0).astype(np.int64), res.token_counts)
    if res.role_chunk:
        np.add.at(tokens, ((res.send_s + res.ttft_s)[res.output_tokens > 0] - t0).astype(np.int64), 1)
    active = np.zeros(n)
    for s, e in zip((res.send_s - t0).astype(np.int64), (end - t0).astype(np.int64), strict=True):
        active[s:e + 1] += 1
    return float(tokens.max()), int(active.max())


@pytest.mark.parametrize("chat", [False, True])
def test_peaks_over_occupied_seconds_equal_vllms_dense_buckets(chat: bool):
    reqs = make_requests(RangeLengths(300, 120, 0.5), PoissonArrivals(8.0, 0.5), 200, seed=3)
    res = simulate(R, reqs, sched=sched(), chat=chat)
    s = res.summary()
    assert (s["max_output_tokens_per_s"], s["max_concurrent_requests"]) == _dense_peaks(res)


def test_a_trickle_of_requests_is_measured_without_a_bucket_per_empty_second():
    # two requests 10^8 s apart (a dense per-second array would hold 10^8 entries): each alone
    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=4), Request(1e8, 100, 4)]
    s = simulate(R, reqs, sched=sched()).summary()
    assert (s["max_output_tokens_per_s"], s["max_concurrent_requests"]) == (4, 1)
    assert s["mean_ttft_ms"] == pytest.approx(simulate(R, reqs[:1], sched=sched()).summary()["mean_ttft_ms"], rel=1e-6)
    with pytest.raises(InputError, match="beyond the 1e\\+10 s"):
        simulate(R, [Request(arrival_s=2e10, input_tokens=100, output_tokens=4)], sched=sched())


def test_more_data_parallel_engines_than_requests_only_run_the_busy_ones():
    # --dp 10^40 looped over every engine, most with no request; now the engines that get one run
    reqs = [Request(arrival_s=0.0, input_tokens=100, output_tokens=4) for _ in range(3)]
    many = simulate_dp(R, reqs, 10**40, sched=sched())
    three = simulate_dp(R, reqs, 3, sched=sched())
    assert many.summary() == three.summary()

"""The KV-room queue (physics/queueing.py): Erlang's formulas by hand, their laws, and what the analytic steady
state charges for them."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency, queueing, steady_state
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.simulator import SimResult
from gpuopt.physics.traffic import FixedLengths
from tests.conftest import run


def test_erlang_c_by_hand():
    # M/M/1: an arrival waits with the probability the server is busy, rho
    assert queueing.erlang_c(1, 0.5) == pytest.approx(0.5)
    # M/M/2 at 1 Erlang: B = (1/2) / (1 + 1 + 1/2) = 0.2; C = 2 x 0.2 / (2 - 1 x 0.8) = 1/3
    assert queueing.erlang_c(2, 1.0) == pytest.approx(1 / 3)
    # M/M/3 at 2.5 Erlangs: B = (2.5^3 / 6) / (1 + 2.5 + 3.125 + 2.604167) = 0.282167;
    # C = 3 x 0.282167 / (3 - 2.5 x 0.717833) = 0.702247
    assert queueing.erlang_c(3, 2.5) == pytest.approx(0.702247, rel=1e-5)
    # between integers: linear, 1.5 servers at 0.5 Erlangs halfway between 0.5 and 0.1
    # (M/M/2 at 0.5: B = 0.125 / 1.625 = 1/13; C = 2/13 / (2 - 0.5 x 12/13) = 0.1)
    assert queueing.erlang_c(2, 0.5) == pytest.approx(0.1)
    assert queueing.erlang_c(1.5, 0.5) == pytest.approx(0.3)
    assert queueing.erlang_c(4, 4.0) == 1.0  # at or past the servers every arrival waits


def test_the_wait_is_the_erlang_c_share_times_a_holding_over_the_spare_servers():
    # M/M/2 at 1 Erlang holding 3 s waits 1/3 x 3 / (2 - 1) = 1 s; a fixed holding (M/D/2) Cosmetatos'
    # 1/2 (1 + (1 - 0.5) (2 - 1) (sqrt(14) - 2) / (16 x 0.5 x 2)) = 0.527213 of it
    assert queueing.deterministic_share(2, 0.5) == pytest.approx(0.527213, abs=1e-6)
    assert queueing.kv_wait_s(2, 1.0, 3.0) == pytest.approx(0.527213, abs=1e-6)
    # far below the servers (500 of 1,000: 15.8 standard deviations of room) nothing waits
    assert queueing.kv_wait_s(1000, 500, 10.0) == 0.0
    # ... unless the population swings wider: 9x as wide is Poisson traffic of 55.6 Erlangs on 111.1 servers
    assert queueing.kv_wait_s(1000, 500, 10.0, 9.0) == pytest.approx(
        queueing.erlang_c(1000 / 9, 500 / 9) * 10.0 / (500 / 9) * queueing.deterministic_share(1000 / 9, 0.5))
    # critical load is held at MAX_LOAD: finite, large
    at_limit = queueing.kv_wait_s(100, 100, 10.0)
    assert at_limit == pytest.approx(
        queueing.erlang_c(100, 99.9) * 10.0 / 0.1 * queueing.deterministic_share(100, 0.999))
    # a population that grows without bound waits without bound
    assert queueing.kv_wait_s(100, 50, 10.0, math.inf) == math.inf


@given(load=st.floats(0.01, 0.999))
def test_one_fixed_length_server_waits_half_as_long_as_an_exponential_one(load: float) -> None:
    # Pollaczek-Khinchine: M/D/1 waits rho / 2 mu (1 - rho), M/M/1 rho / mu (1 - rho)
    assert queueing.deterministic_share(1, load) == 0.5
    assert queueing.kv_wait_s(1, load, 2.0) == pytest.approx(load * 2.0 / (2 * (1 - load)), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(servers=st.floats(20, 500), load=st.floats(0.05, 0.99), z=st.floats(1.0, 6.0))
def test_a_peaked_population_waits_as_poisson_traffic_on_fewer_servers_and_longer(servers: float, load: float,
                                                                                  z: float) -> None:
    """Hayward: a population z times as wide as Poisson waits as a / z Erlangs on c / z servers, which is never
    shorter than the Poisson wait (Erlang C's wait rises as the servers and the load shrink together). With few
    servers erlang_c's interpolation between whole servers breaks that by up to ~3 % near critical load (2
    servers, 0.97 of them busy, z 1.125: 37.9 s against 38.2; QA: 2.8 % at 3 servers, 0.99 busy, z 1.1), so
    those are left out."""
    wait = queueing.kv_wait_s(servers, load * servers, 5.0, z)
    assert wait == pytest.approx(queueing.kv_wait_s(servers / z, load * servers / z, 5.0), rel=1e-12)
    assert wait >= queueing.kv_wait_s(servers, load * servers, 5.0) - 1e-12


@settings(max_examples=200, deadline=None)
@given(servers=st.floats(1, 3000), load=st.floats(0.01, 0.99), more=st.floats(1.001, 1.2))
def test_erlang_c_is_a_probability_rising_with_the_load_and_falling_with_the_servers(servers, load, more):
    c = queueing.erlang_c(servers, load * servers)
    assert 0.0 <= c <= 1.0
    assert queueing.erlang_c(servers, min(load * more, 0.999) * servers) >= c - 1e-12
    assert queueing.erlang_c(servers * more, load * servers) <= c + 1e-12


@settings(max_examples=100, deadline=None)
@given(servers=st.floats(1, 3000), load=st.floats(0.01, 0.99), holding=st.floats(0.01, 100))
def test_longer_lived_requests_wait_longer_in_proportion(servers, load, holding):
    # the same cache, the same share of it in use: the wait scales with the lifetime
    one = queueing.kv_wait_s(servers, load * servers, holding)
    assert queueing.kv_wait_s(servers, load * servers, 2 * holding) == pytest.approx(2 * one, abs=1e-12)


def _qwen3_30b() -> latency.Replica:
    arch, gpu = get_model("Qwen/Qwen3-30B-A3B"), get_gpu("H100-SXM-80GB")
    mem = estimate(arch, gpu, ServingConfig(tensor_parallel=1, precision="bf16", max_model_len=8192))
    return latency.build_replica(arch, gpu, mem)


def test_open_loop_ttft_adds_the_wait_for_kv_room_and_a_closed_loop_does_not():
    r = _qwen3_30b()
    top = analytic_load.max_rate(r, 1000, 250)  # one place short of the requests the KV cache runs at once
    beyond = analytic_load.at_rate(r, top.requests_per_second * 1.01, 1000, 250)
    assert top.limit is None and "KV" in (beyond.limit or "")
    rate = 0.95 * top.requests_per_second
    open_, closed = analytic_load.at_rate(r, rate, 1000, 250), analytic_load.at_rate(r, rate, 1000, 250, poisson=False)
    places = analytic_load.run_places(r, 1000, 250)
    assert places == analytic_load.kv_places(r, 1000, 250)  # max_num_seqs (1,024) is far above
    # each request holds its place from its admission -- its prefill, chunk by chunk -- to the end of its decode,
    # 250 request steps (the open loop's TPOT), so rate x that many places are busy: more than the mean-field
    # decode batch (the chain's mean, _StepMix.request_step); a waiting prompt needs a whole place
    mix = analytic_load._StepMix(r, 1000, 250)
    y = mix.settle(rate)  # the open loop's steps: the step chain's (at_rate's)
    # decoding: a request's first token comes out of its prefill step (rate x the mean step a step: the chain's
    # y is the Poisson root moved by one Newton step, so rate T is y to ~1e-4, not exactly)
    b = rate * 249 * mix.mean_step(y)
    room = r.config.max_num_batched_tokens - b
    service = latency.prefill_steps_s(r, b, 1125, 1000, room)
    hold = service + 250 * open_.tpot_ms / 1e3
    assert rate * hold > closed.running
    # the queue's servers are the requests the cache holds at its mean fill, more than it runs without ever
    # preempting; the population in it swings wider than Poisson (each arrival stretches the others' lives)
    fill = r.kv_capacity_tokens / analytic_load.replica_held_tokens(r, 1000, 250)
    assert analytic_load.fill_places(r, 1000, 250) == pytest.approx(fill, rel=1e-12) and fill > places
    z = mix.population_peakedness(y)
    assert z > 1.0
    wait = queueing.kv_wait_s(fill, rate * hold, hold, z)
    assert wait > 0.05
    front = analytic_load.frontend_s(r, 1000)  # and at the API server (M/D/1), a fraction of a millisecond here
    busy = rate * front
    # and for the rest of the step in flight, which a random instant finds longer than half a step: E(T^2) /
    # 2 E(T) over the steps that run something (a plain step runs nothing with probability e^-b), split into
    # the plain steps' part and the prompt steps'
    q, plain, prompt = mix.steps(y)
    mean = (1 - q) * plain + q * prompt
    in_plain = (1 - q) * (1 - math.exp(-b)) * plain**2 / (2 * mean)
    in_prompt = q * (prompt**2 + mix.prompt_step_var(y)) / (2 * mean)
    assert mix.busy_residual(y) == pytest.approx((in_plain, in_prompt), rel=1e-12)
    assert in_plain + in_prompt > mix.mean_step(y) / 2
    # and for the prefill work ahead of it (analytic_load.prompt_queue_s: the busier of the step budget and the
    # GPU's time, M/D/1's wait): the prompts queued, rho x that wait, and the rest of the one in service, the
    # rest of it -- unless the prompt step in flight is longer
    p = 1000 * y
    budget = service * (p / room) / (2 * (1 - p / room))
    work = 1000 * mix.step(b, room) / room  # a prompt's work: its share of a full prompt step, decodes in it
    work_wait = work * rate * work / (2 * (1 - rate * work))
    prompts = max(p / room * budget, rate * work * work_wait)
    in_service = max(budget, work_wait) - prompts
    # at_rate takes the parts from the step chain (a long step gathers the prompts of a later one), which
    # spreads the prompt steps wider than the Poisson count above (step_chain, tests/test_step_chain.py)
    residual, chain_plain, chain_prompt = mix.in_flight(y, rate)
    assert residual == pytest.approx(chain_plain + chain_prompt, rel=1e-12)
    assert chain_prompt > in_prompt
    step_wait = chain_plain + max(chain_prompt, in_service) + (1 - math.exp(-b)) * mix.mean_step(y)  # async: +1
    # unless the step it rides in, with the prompts that arrived beside it in the long step it landed in, is
    # longer (_StepMix.ride_step: rate x E[T^2] / E[T] others, Poisson, at most a full room)
    others = rate * 2 * residual
    full = math.ceil(room / 1000) - 1
    pmf = [math.exp(-others) * others**k / math.factorial(k) for k in range(full)]
    ride = sum(p * mix.step(b, (1 + k) * 1000) for k, p in enumerate(pmf)) + (1 - sum(pmf)) * mix.step(b, room)
    assert ride > service + prompts  # an MoE step touches more experts with more prompts
    assert open_.ttft_ms == pytest.approx((r.cal.server_overhead_ms * 1e-3 + front + step_wait + ride
                                           + front * busy / (2 * (1 - busy)) + wait) * 1e3, rel=1e-6)
    # the open loop's steps come from the step chain, a closed loop's from the Poisson count: 0.35 % apart here
    assert closed.step_ms < open_.step_ms < 1.01 * closed.step_ms and open_.running > closed.running
    # the open loop's requests decode in the request step (the batch swings; no decode window at this shape)
    assert open_.tpot_ms == pytest.approx(mix.request_step(y) * 1e3, rel=1e-12)
    # a closed loop's request waits for the other clients' load only, and never for KV room
    assert closed.ttft_ms < open_.ttft_ms - wait * 1e3
    assert closed.tpot_ms < open_.tpot_ms


def test_a_ttft_target_near_the_kv_limit_is_met_further_below_it_under_poisson_traffic():
    """Qwen3-30B-A3B at 1,000 / 250 on one H100 with 0.5 s / 60 ms (mean): the cache runs 112.4 such requests at
    once without preempting (1,133 tokens held on average, one request's swing 250 / sqrt(12) = 72.2:
    n = ((-216.5 + sqrt(216.5^2 + 4 x 1,133 x KV)) / 2,266)^2), which a closed loop reaches at 10.00 requests/s (9.99
    before a request's first token came out of its prefill step, 2026-12-04);
    Poisson swings keep a request waiting for room about as long as a decode (`gpuopt simulate`, 4,000
    requests: 9.3 meets the target at 0.27 s, 9.6 misses it at 0.91 s)."""
    r = _qwen3_30b()
    held = analytic_load.replica_held_tokens(r, 1000, 250)
    assert held == 1133
    k = 3 * 250 / 12**0.5
    assert analytic_load.kv_places(r, 1000, 250) == pytest.approx(
        ((-k + (k * k + 4 * held * r.kv_capacity_tokens) ** 0.5) / (2 * held)) ** 2, rel=1e-12)
    limit = analytic_load.max_rate(r, 1000, 250, 500.0, 60.0, poisson=False)
    poisson = analytic_load.max_rate(r, 1000, 250, 500.0, 60.0)
    assert limit.requests_per_second == pytest.approx(10.00, abs=0.01)
    assert 9.2 < poisson.requests_per_second < 9.8
    assert poisson.ttft_ms <= 500.0


def test_fit_past_the_kv_limit_reports_an_unbounded_queue_not_the_ttft_of_a_cache_that_held_everyone():
    """Qwen2.5-32B FP8 on one A100-40GB holds 15.1 requests of 1,200/300 tokens (14.4 without preempting as their ages
    swing): 1 request/s is past its 0.911 (the KV limit), so TTFT and the requests in flight grow without bound; it
    printed 551 ms and 17.5 before. Within 3 s it sustains 0.785 (`gpuopt simulate`, 3,000 requests: 0.75 gives 1.7
    s mean, 0.84 7.2 s, 0.94 collapses; 0.788 before the prompt stalls widened the decode batch's swing (a request
    lives longer, holds its place longer), 2026-12-05; 0.778 before the population's swing, M/D/c and the cache's
    mean fill entered the wait for KV room, 2026-12-04; 0.774 before a request's first token came out of its prefill
    step and the wait for the step in flight left the idle engine out, 2026-12-04; 0.805 before a place was held
    through the prefill and a waiting prompt needed a whole one, 2026-12-04; 0.842 with the places counted at the
    mean, 0.812 with each place held for O mean steps instead of O request steps, 0.808 before prompts queued for
    the prefill work ahead of them)."""
    result = run("fit", "--model", "Qwen/Qwen2.5-32B-Instruct", "--gpu", "A100-SXM-40GB", "--precision", "fp8",
                 "--kv-cache-dtype", "fp8", "--max-model-len", "16384", "--input-tokens", "1200", "--output-tokens",
                 "300", "--ttft-slo-ms", "3000", "--tpot-slo-ms", "60", "--request-rate", "1", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["overloaded"] == 1.0 and out["ttft_ms"] is None and out["concurrency"] is None
    assert out["requests_per_second"] == pytest.approx(0.911, abs=1e-3)
    assert out["max_requests_per_second_within_slo"] == pytest.approx(0.785, abs=2e-3)


def _small_model(gpu: str) -> latency.Replica:
    arch, spec = get_model("Qwen/Qwen2.5-0.5B-Instruct"), get_gpu(gpu)
    mem = estimate(arch, spec, ServingConfig(tensor_parallel=1, precision="bf16", max_model_len=16384))
    return latency.build_replica(arch, spec, mem)


def test_the_api_server_bounds_the_rate_one_request_at_a_time():
    """Qwen2.5-0.5B on a B200 with 4,000-token prompts: the API server takes 0.9671 ms + 4,000 x 4.2217 us =
    17.854 ms a request, one at a time, so it passes on at most 56.01 requests/s; the analytic model planned
    172 within a 2 s TTFT (`gpuopt simulate`: 60 offered, 55.3 served, TTFT 1.7 s and growing)."""
    r = _small_model("B200-180GB")
    front = analytic_load.frontend_s(r, 4000)
    assert front == pytest.approx(0.9671e-3 + 4000 * 4.2217e-6, rel=1e-3)
    top = analytic_load.max_rate(r, 4000, 100)
    assert top.requests_per_second == pytest.approx(1 / front, rel=1e-6)
    assert "API server" in (analytic_load.at_rate(r, 1.001 / front, 4000, 100).limit or "")
    within = analytic_load.max_rate(r, 4000, 100, 2000.0, None)
    assert within.requests_per_second < 1 / front and within.ttft_ms <= 2000.0
    # Poisson arrivals queue there (M/D/1): at 90 % of its pace a request waits 0.9 / (2 x 0.1) services
    closed, open_ = (analytic_load.at_rate(r, 0.9 / front, 4000, 100, poisson=p) for p in (False, True))
    assert open_.ttft_ms - closed.ttft_ms >= front * 4.5 * 1e3 * (1 - 1e-9)


def test_clients_past_the_api_servers_pace_queue_there_and_nothing_churns():
    """A closed loop of 200 clients of 4,000/100 tokens on one H100: the API server, not the KV cache (6 million
    tokens), bounds the rate, so the extra clients wait and nothing is preempted (it was simulated as a churn
    and read 20 ms TPOT where 3.97 is simulated)."""
    r = _small_model("H100-SXM-80GB")
    assert not steady_state.churns(r, 4000, 100, 200)
    point = analytic_load.at_concurrency(r, 200, 4000, 100)
    assert point.requests_per_second == pytest.approx(1 / analytic_load.frontend_s(r, 4000), rel=1e-6)
    assert "API server" in (point.limit or "")


def test_a_closed_loop_whose_swings_overfill_the_kv_cache_is_simulated():
    """Llama-3.1-8B at 200/800 on an RTX 4090 holds 42,800 KV tokens; a running request holds 608 on average
    (200 + 800 / 2 + 16 / 2). 64 clients hold 38,912 on average, but their ages are independent: 3 standard
    deviations of sqrt(64) x 800 / sqrt(12) = 1,847.5 add 5,542.6 -> 44,454.6 > 42,800, so the loop is simulated
    (it was planned analytically at 2,102 tokens/s, where runs with spread lengths preempt 899 times in 1,500
    requests). 56 clients: 34,048 + 3 x 1,728.3 = 39,233 < 42,800, analytic."""
    arch, spec = get_model("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("RTX4090-24GB")
    r = latency.build_replica(arch, spec, estimate(arch, spec, ServingConfig(precision="bf16", max_model_len=8192)))
    assert r.kv_capacity_tokens == 42_800 and analytic_load.replica_held_tokens(r, 200, 800) == 608
    assert steady_state.overfills(r, 200, 800, 64) and steady_state.churns(r, 200, 800, 64)
    assert not steady_state.overfills(r, 200, 800, 56) and not steady_state.churns(r, 200, 800, 56)
    result = run("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "RTX4090-24GB", "--precision", "bf16",
                 "--max-model-len", "8192", "--input-tokens", "200", "--output-tokens", "800", "--concurrency", "68")
    assert result.exit_code == 0, result.output
    assert "note: 68 clients, close to what the KV cache holds in steady state" in result.stderr


def _rtx4090_llama() -> latency.Replica:
    arch, spec = get_model("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("RTX4090-24GB")
    return latency.build_replica(arch, spec, estimate(arch, spec, ServingConfig(precision="bf16", max_model_len=8192)))


def test_the_overfill_limit_is_the_root_of_the_swing_equation_by_hand():
    """clients x 608 + 3 sqrt(clients) x 800 / sqrt(12) = 42,800: with k = 3 x 230.94 = 692.82 and x = sqrt(clients),
    x = (-692.82 + sqrt(692.82^2 + 4 x 608 x 42,800)) / (2 x 608) = (-692.82 + 10,225.92) / 1,216 = 7.8397, so 61.46
    clients (above the 42,800 / 1,008 = 42.5 whose whole requests fit at once)."""
    r = _rtx4090_llama()
    limit = analytic_load.kv_places(r, 200, 800)
    assert limit == pytest.approx(61.46, abs=0.01)
    assert steady_state.overfills(r, 200, 800, 61.5) and not steady_state.overfills(r, 200, 800, 61.4)


def test_a_few_long_clients_whose_whole_requests_fit_never_overfill():
    """One client of 200/40,000 tokens: the normal swing (3 x 40,000 / sqrt(12) = 34,641 on a mean of 20,208)
    reaches 54,849 > 42,800, but a single request holds at most 40,208 tokens: the cache holds 42,800 / 40,208 =
    1.06 whole requests, so one client never overfills."""
    r = _rtx4090_llama()
    assert analytic_load.kv_places(r, 200, 40_000) == pytest.approx(42_800 / 40_208, rel=1e-9)
    assert not steady_state.overfills(r, 200, 40_000, 1)


@settings(max_examples=25, deadline=None)
@given(st.integers(50, 4000), st.integers(10, 2000))
def test_the_closed_top_never_holds_more_clients_than_the_overfill_limit(input_tokens, output_tokens):
    r = _rtx4090_llama()
    top = steady_state.closed_top(r, input_tokens, output_tokens)
    limit = analytic_load.kv_places(r, input_tokens, output_tokens)
    assert top.concurrency <= limit * (1 + 1e-9)
    analytic = analytic_load.max_rate(r, input_tokens, output_tokens, poisson=False)
    assert top.concurrency == pytest.approx(min(analytic.concurrency, limit),
                                            rel=2 * analytic_load.CONCURRENCY_TOLERANCE)


def test_a_concurrency_workload_is_planned_below_the_clients_whose_kv_swings_overfill(tmp_path):
    """64 clients of 200/800 on Llama-3.1-8B (BF16, BF16 KV, 100 ms TPOT) at headroom 0.95: the analytic loop
    holds 70.6 clients on an RTX 4090 (planned 64 of them, 91 % of its KV), but past 61.5 their KV swings past
    the cache (a staggered closed loop of 68 collapses to 1.5 s TTFT): 0.95 x 61.5 = 58.4 < 64, so one RTX 4090
    no longer serves it and fit's largest rate within the targets stops at the same clients."""
    path = tmp_path / "w.yaml"
    path.write_text("schema_version: 1\nproviders: [runpod]\nworkloads:\n  - name: longgen\n"
                    "    model: meta-llama/Llama-3.1-8B-Instruct\n    concurrency: 64\n    input_tokens: 200\n"
                    "    output_tokens: 800\n    max_model_len: 8192\n    slo: {tpot_ms: 100}\n    precisions: [bf16]\n"
                    "    kv_cache_dtypes: [auto]\n")
    result = run("solve", str(path), "--headroom", "0.95", "--format", "json")
    assert result.exit_code == 0, result.output
    deployments = json.loads(result.stdout)["deployments"]
    assert all(d["gpu"] != "RTX4090-24GB" or d["replicas"] >= 2 for d in deployments)
    for d in deployments:
        assert d["capacity"]["concurrency"] * 0.95 * d["replicas"] >= 64 - 1e-6
    fit = run("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "RTX4090-24GB", "--precision", "bf16",
              "--max-model-len", "8192", "--input-tokens", "200", "--output-tokens", "800", "--concurrency", "30",
              "--tpot-slo-ms", "100", "--json")
    r = _rtx4090_llama()
    expected = analytic_load.at_concurrency(r, analytic_load.kv_places(r, 200, 800), 200, 800).requests_per_second
    assert json.loads(fit.stdout)["max_requests_per_second_within_slo"] == pytest.approx(expected, abs=1e-3)


def test_a_simulated_closed_loop_of_one_size_stops_at_the_overfill_limit():
    """Staggered equal requests keep their ages evenly spread, so the simulated loop holds 66 clients of 200/800
    on the RTX 4090 with 0 preemptions; real clients' ages vary, and the capacity stops at the largest grid
    point (whole clients on 1.04^k) below the 61.46-client limit: 1.04^105 = 61.4 -> 61 clients (1.04^106 =
    63.9 -> 64 overfills)."""
    from gpuopt.physics.traffic import FixedLengths

    r = _rtx4090_llama()
    clients, summary = steady_state.closed_capacity(r, FixedLengths(200, 800), None, 100.0, 95, 70.0)
    assert clients == 61.0 and summary is not None and float(summary["p95_tpot_ms"]) <= 100.0


def test_a_closed_loop_below_the_top_is_found_below_the_top_rate():
    """2,178/10 on an RTX 4090: past the top rate (2.61 req/s, 28.4 clients) a point whose steps overflow the
    budget reported 17.7 clients at 2.96 req/s, and the search that doubled upwards from 1 req/s returned it for
    19.5 clients (found by the hypothesis test above in CI)."""
    r = _rtx4090_llama()
    top = analytic_load.max_rate(r, 2178, 10, poisson=False)
    point = analytic_load.at_concurrency(r, 19.516997120141877, 2178, 10)
    assert point.stable and point.requests_per_second <= top.requests_per_second
    assert point.concurrency == pytest.approx(19.517, rel=2 * analytic_load.CONCURRENCY_TOLERANCE)



def _in_flight_peakedness(window: SimResult) -> tuple[float, float]:
    """The time-weighted mean and variance over mean of the requests in flight (sent, not finished), away from
    the window's edges (every request in flight there is one of the window's)."""
    start, end = window.send_s, window.send_s + window.e2el_s
    lo, hi = float(start[0] + window.e2el_s.max()), float(start[-1])
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(start.size), -np.ones(end.size)])
    order = np.argsort(times, kind="stable")
    times, count = times[order], np.cumsum(steps[order])
    keep = (times[:-1] >= lo) & (times[1:] <= hi)
    weights, count = np.diff(times)[keep], count[:-1][keep]
    mean = float(np.average(count, weights=weights))
    return mean, float(np.average((count - mean) ** 2, weights=weights)) / mean


def test_the_running_population_swings_wider_than_poisson_as_each_arrival_stretches_the_others() -> None:
    """Llama-3.1-8B on an A100 at 3,000 / 300 tokens: each prompt stalls every decode for its step's extra (s,
    the share of the time those stalls take) and each sequence decoding slows the others' steps (c a sequence,
    beta = rate (O - 1) c), so the requests in flight swing 1 / ((1 - s)^2 (1 - beta)) times as wide as a
    Poisson count -- against the simulator with room for everyone (20x the KV cache: nothing waits)."""
    arch, gpu = get_model("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("A100-SXM-80GB")
    r = latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig(max_model_len=8192)))
    mix = analytic_load._StepMix(r, 3000, 300)
    assert mix.population_peakedness(0.0) == 1.0
    rate = 2.0
    y = mix.y_at_rate(rate)
    q, plain, prompt = mix.steps(y)
    mean = (1 - q) * plain + q * prompt
    stall = rate * q / y * (prompt - plain)  # prompt steps a second (a share q of steps y / rate long) x their extra
    # y = rate E(y) to the root's tolerance
    assert stall == pytest.approx(q / mean * (prompt - plain), rel=10 * analytic_load.ROOT_TOLERANCE)
    b = 299 * y
    lo = max(b - math.sqrt(b), 1.0)
    hi = lo + 2 * math.sqrt(b)
    c = (mix.step(hi, 0.0) - mix.step(lo, 0.0)) / (hi - lo)
    beta = rate * 299 * c
    z = mix.population_peakedness(y)
    assert z == pytest.approx(1 / ((1 - stall) ** 2 * (1 - beta)), rel=1e-7)  # y to the root's tolerance
    assert 3.0 < z < 4.0 and stall > 0.3
    # it grows with the load
    assert 1.0 < mix.population_peakedness(mix.y_at_rate(1.0)) < z < mix.population_peakedness(mix.y_at_rate(2.4))
    roomy = replace(r, kv_capacity_tokens=20 * r.kv_capacity_tokens, config=replace(r.config, max_num_seqs=4096))
    window, _ = steady_state.steady_run(roomy, FixedLengths(3000, 300), rate, None, None, measured=3000)
    simulated_mean, simulated_z = _in_flight_peakedness(window)
    assert simulated_z == pytest.approx(z, rel=0.15)  # 3.73 simulated (18.3 in flight), 3.55 here
    assert simulated_mean > 10.0 and simulated_z > 2.0  # far from a Poisson count

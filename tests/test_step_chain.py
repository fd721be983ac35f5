"""The step chain (physics/step_chain.py): the prompt work a step carries when a long step gathers the prompts of
a later one, and what an arrival finds left of the step in flight."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.physics import analytic_load, queueing, step_chain
from tests.test_latency import LLAMA8, QWEN_MOE, replica


def test_two_states_by_hand():
    """One unit a step (most = 1), two states (the last holds one or more pending): from either state the next
    is 1 when any prompt arrives during the step, so pi_1 = (1 - e^-(rate T0)) / (1 - e^-(rate T0) + e^-(rate T1)):
    at 10 prompts/s, T0 = 10 ms and T1 = 50 ms, 0.0951626 / (0.0951626 + 0.6065307) = 0.135619."""
    law = step_chain.stationary(np.array([0.010, 0.050]), 1, 1, 10.0, 0.0)
    assert law == pytest.approx([1 - 0.135619, 0.135619], abs=1e-6)
    # an idle engine (nothing decodes either) waits for the next prompt and schedules it at once: from 0 the
    # next state is 1 for sure, pi_1 = 1 / (1 + e^-0.5) = 0.622459
    idle = step_chain.stationary(np.array([0.010, 0.050]), 1, 1, 10.0, 1.0)
    assert idle == pytest.approx([1 - 0.622459, 0.622459], abs=1e-6)


def test_the_rest_of_the_step_in_flight_by_hand():
    """E[T^2] / 2 E[time]: law (0.8, 0.2) over steps of 10 and 50 ms is 0.8 x 100 + 0.2 x 2,500 = 580 ms^2 over
    2 x 18 ms, split 2.2222 ms in the plain steps and 13.8889 in the prompt steps; an idle engine (the plain
    state idle, 1 / rate = 100 ms a spell) adds 0.8 x 90 ms of time in which nothing is in flight."""
    law, steps = np.array([0.8, 0.2]), np.array([0.010, 0.050])
    plain, prompt = step_chain.rest_of_step(law, steps, 10.0, 0.0)
    assert (plain, prompt) == pytest.approx((0.080e-3 / 0.036, 0.500e-3 / 0.036), rel=1e-12)
    plain, prompt = step_chain.rest_of_step(law, steps, 10.0, 1.0)
    assert (plain, prompt) == pytest.approx((0.0, 0.500e-3 / (2 * (0.018 + 0.8 * 0.090))), rel=1e-12)


def _naive(step_s, most, units, rate, idle):
    """The chain's transition matrix entry by entry and its law by power iteration: the reference."""
    size = len(step_s)
    moves = np.zeros((size, size))
    for k in range(size):
        carry = max(k - most, 0)
        mean = rate * step_s[k]
        for n in range(200):
            p = math.exp(-mean + n * math.log(mean) - math.lgamma(n + 1)) if mean > 0 else float(n == 0)
            moves[k, min(carry + units * n, size - 1)] += p
    moves[0] *= 1 - idle
    moves[0, min(units, size - 1)] += idle
    law = np.full(size, 1.0 / size)
    for _ in range(20000):
        law = law @ moves
    return law


@settings(max_examples=25, deadline=None)
@given(base=st.floats(0.005, 0.05), per_unit=st.floats(0.0, 0.05), most=st.integers(1, 6),
       units=st.integers(1, 4), load=st.floats(0.05, 0.8), idle=st.sampled_from([0.0, 1.0]))
def test_the_law_is_the_chains_stationary_law(base, per_unit, most, units, load, idle):
    size = most + 8 * units + 1
    steps = np.array([base + per_unit * min(k, most) for k in range(size)])
    rate = load * most / (units * steps[-1])  # prompts arrive below what a full step drains
    law = step_chain.stationary(steps, most, units, rate, idle)
    assert law.sum() == pytest.approx(1.0) and (law >= 0).all()
    assert law == pytest.approx(_naive(steps, most, units, rate, idle), abs=1e-6)


def test_long_prompts_spread_their_steps_wider_than_a_poisson_count_at_the_mean():
    """Llama-3.3-70B TP4 at 3,000 / 300 tokens on H100s at 2.2 requests/s: the simulator's steady state (3,000
    requests, `jump` off, 2026-12-04) runs prompt steps of 286 ms mean, sd 106, and an arrival finds 94.5 ms
    left of the step in flight; the Poisson count at y said 261 / 56 ms and 80.2; the chain says 94.7."""
    r = replica("meta-llama/Llama-3.3-70B-Instruct", "H100-SXM-80GB", tp=4, async_scheduling=True)
    mix = analytic_load._StepMix(r, 3000, 300)
    y = mix.y_at_rate(2.2)
    residual, _, _ = mix.in_flight(y, 2.2)
    assert mix.residual_step(y) == pytest.approx(0.0802, abs=0.001)
    assert residual == pytest.approx(0.0945, rel=0.03)


def test_prompts_of_a_few_tokens_keep_the_poisson_count():
    """A chain past MAX_CHAIN_STATES states (10-token prompts, hundreds to a step) is not built: the Poisson
    count at y stands, whose steps differ little with the count."""
    r = replica(LLAMA8, "H100-SXM-80GB")
    mix = analytic_load._StepMix(r, 10, 100)
    y = mix.y_at_rate(50.0)
    assert mix._chain(y, 50.0, 0.0) is None
    plain, prompt = mix.busy_residual(y)
    assert mix.in_flight(y, 50.0) == (mix.residual_step(y), plain, prompt)


def test_one_token_outputs_wait_for_no_decode_step():
    """A one-token output ends in its prefill step: nothing decodes, so no step is scheduled beside the next
    one (no async lag) and an engine with no prompt pending is idle. Llama-3.1-8B at 50 / 1 on an L4 at 20
    requests/s: the simulator's steady state 118.5 ms to the first token (1,500 requests); 164 ms before
    2026-12-04, when every step decoded O y sequences and the engine always lagged a step."""
    r = replica(LLAMA8, "L4-24GB", async_scheduling=True)
    point = analytic_load.at_rate(r, 20.0, 50, 1)
    assert point.ttft_ms == pytest.approx(118.5, rel=0.03)
    mix = analytic_load._StepMix(r, 50, 1)
    assert mix.decodes == 0 and mix.room(1.0) == r.config.max_num_batched_tokens


def test_one_token_outputs_past_any_capacity_are_unstable_not_a_number():
    """With no decode a step stays bounded at any rate, so the steady state's y stays finite where it used to run
    off to infinity: an infinite rate gave 0 x inf decodes (a NaN room, a ValueError in the prompt counts of an MoE
    step), and bursty arrivals at 1e9 requests/s summed 10^5 gamma terms a call (QA, 2026-12-04)."""
    moe = replica(QWEN_MOE, "H100-SXM-80GB")
    for rate in (1e12, float("inf")):
        point = analytic_load.at_rate(moe, rate, 200, 1)
        assert not point.stable and point.ttft_ms == float("inf")
    dense = replica(LLAMA8, "H100-SXM-80GB")
    point = analytic_load.at_rate(dense, 1e9, 50, 1, burstiness=0.5)
    assert not point.stable and math.isfinite(point.ttft_ms)
    assert "max_num_batched_tokens" in (point.limit or "") or "API server" in (point.limit or "")


def test_the_arrivals_excess_past_many_gaps_is_the_renewal_theorems_limit():
    """(1 / b - 1) / 2 once the window holds SETTLED_GAMMA_SCALE gamma units: 0.5 for b = 0.5, 4.5 for 0.1; the
    sum term by term agrees to 1e-12 just below the threshold."""
    assert queueing.arrivals_excess(0.5, 1e9, 0.06) == 0.5
    assert queueing.arrivals_excess(0.1, 1e9, 1.0) == pytest.approx(4.5, abs=1e-15)
    below = queueing.SETTLED_GAMMA_SCALE * 0.999 / 0.25  # rate x b x window just under the threshold
    assert queueing.arrivals_excess(0.25, 1.0, below) == pytest.approx(1.5, abs=1e-10)


def test_the_rest_of_the_step_in_flight_leaves_the_idle_engine_out_on_both_paths():
    """in_flight's rest is the busy part on the chain's path and the Poisson fallback's alike (review: the
    fallback returned the whole residual, idle steps included, so ride_step's others jumped at
    MAX_CHAIN_STATES). Llama-3.1-8B at 1,000 / 2 on an H100 at 5 requests/s: 0.7 decodes a step, half the plain
    steps idle."""
    r = replica(LLAMA8, "H100-SXM-80GB")
    mix = analytic_load._StepMix(r, 1000, 2)
    y = mix.y_at_rate(5.0)
    assert 0.01 < mix.decoding(y) < 1.0
    residual, plain, prompt = mix.in_flight(y, 5.0)
    assert residual == pytest.approx(plain + prompt, rel=1e-12) and residual < mix.residual_step(y)
    tiny = analytic_load._StepMix(r, 10, 2)  # 800 prompts to a step: the fallback
    y = tiny.y_at_rate(200.0)
    assert tiny._chain(y, 200.0, 0.0) is None
    assert tiny.in_flight(y, 200.0)[0] == pytest.approx(sum(tiny.busy_residual(y)), rel=1e-12)


def test_near_capacity_the_chain_follows_more_backlog():
    """At 0.99 of the capacity a backlog of four prompts held 5 % of the law in its last state (review): the
    chain doubles the backlog it follows while the last state holds over CHAIN_TAIL and the states allow."""
    r = replica(LLAMA8, "H100-SXM-80GB")
    top = analytic_load.max_rate(r, 1000, 2).requests_per_second
    mix = analytic_load._StepMix(r, 1000, 2)
    rate = 0.99 * top
    y = mix.y_at_rate(rate)
    chain = mix._chain(y, rate, 0.0)
    assert chain is not None
    law, steps = chain.law, chain.steps
    assert law[-1] <= analytic_load.CHAIN_TAIL or len(steps) * 2 > analytic_load.MAX_CHAIN_STATES
    # a prompt of 1,000 tokens is 5 units of 200, 41 of them a step (_chain_units): the first chain had 41 + 41
    # + 1 states
    units, most = 5, chain.most
    assert most == 41 and chain.unit == 200.0
    assert len(steps) > most + max(analytic_load.CHAIN_BACKLOG_PROMPTS * units, most) + 1


@pytest.mark.parametrize("gpu, prompt, room, expected", [
    ("H100-SXM-80GB", 200, 8000.0, (1, 200.0, 40)),  # over 16 prompts a step: a prompt is a unit
    # a budget of 8,192: 4 units of 250 make 32.8 a step, 5 of 200 make 41.0 (closest); at a room of 8,190, 41
    ("H100-SXM-80GB", 1000, 8190.0, (5, 200.0, 41)),
    # a prompt of a whole budget is 4 units, 4 a step: one step where 2 tokens are left to the next (quarters
    # of the 8,190-token room, 4 of 1,638.4 a step, carried a fifth of every prompt to the next step)
    ("H100-SXM-80GB", 8192, 8190.0, (4, 2048.0, 4)),
    # chunked on a 2,048-token budget (an A100's): 6 units of 500, 4 a step (2,000 of 2,048; 7 or 12 units
    # miss by more), the prompt's rest of 2 units carried to the next step
    ("A100-SXM-80GB", 3000, 2032.0, (6, 500.0, 4)),
    # units are chosen once for the shape, from the budget: at a smaller room only the count a step takes moves
    ("A100-SXM-80GB", 3000, 1500.0, (6, 500.0, 3)),
])
def test_the_chain_counts_prompts_in_units_that_fill_a_step(gpu, prompt, room, expected):
    mix = analytic_load._StepMix(replica(LLAMA8, gpu), prompt, 2)
    units, unit, most = mix._chain_units(room)
    assert (units, most) == expected[::2] and unit == pytest.approx(expected[1], rel=1e-12)


def test_the_chain_is_kept_at_every_rate_where_the_quarter_units_had_one():
    """QA: units chosen at each rate's room flipped between neighbouring rates and some choices outgrew
    MAX_CHAIN_STATES, so the chain fell back to the Poisson count in pockets of 500-640-token prompts on an H100
    and TPOT dropped up to 9 % between neighbouring rates. Chosen once from the budget among the counts that fit,
    the chain is there at every rate up to capacity."""
    r = replica(LLAMA8, "H100-SXM-80GB")
    for prompt in (500, 560, 600, 640):
        top = analytic_load.max_rate(r, prompt, 200).requests_per_second
        mix = analytic_load._StepMix(r, prompt, 200)
        for k in range(1, 11):
            rate = top * k / 10
            assert mix._chain(mix.y_at_rate(rate), rate, 0.0) is not None, (prompt, rate)

"""The decode window after a request's prefill (physics/decode_window.py) and the closed loop's arrival theorem
(analytic_load._closed_loop), against hand-computed values and the simulator."""

from __future__ import annotations

import math

import pytest

from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.decode_window import window_factor
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.simulator import simulate
from gpuopt.physics.traffic import FixedLengths, PoissonArrivals, make_requests

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def h100() -> latency.Replica:
    arch, gpu = get_model(LLAMA), get_gpu("H100-SXM-80GB")
    return latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig()), None)


def test_one_decode_step_is_a_prompt_step_when_a_prompt_waits() -> None:
    """Output 2: one decode step, right after the prefill. With no spare room in the last prefill step and
    async scheduling, it carries a prompt step when one of the Poisson(mu) prompts queued before that step
    waits: E = P + (1 - e^-mu)(Q - P); the chain's stationary step is P / (1 - rate (Q - P)) (one prompt step
    a prompt, flow balance)."""
    rate, plain, prompt, mu = 2.0, 0.008, 0.265, 0.6
    factor = window_factor(rate, 8000, 2, plain, prompt, 8000.0, mu, 8000.0, 0.0, 8000.0, True)
    expected = (plain + (1 - math.exp(-mu)) * (prompt - plain)) / (plain / (1 - rate * (prompt - plain)))
    assert factor == pytest.approx(expected, rel=1e-6)


def test_the_window_washes_out_with_long_outputs() -> None:
    factors = [window_factor(2.0, 8000, o, 0.008, 0.265, 8000.0, 0.6, 8000.0, 0.0, 8000.0, True)
               for o in (4, 16, 64, 256, 4096)]
    assert all(a > b for a, b in zip(factors, factors[1:], strict=False))
    assert factors[0] > 2.0 and factors[-1] < 1.01


def test_no_prompt_behind_no_stretch() -> None:
    assert window_factor(0.0, 8000, 16, 0.008, 0.265, 8000.0, 0.0, 8000.0, 0.0, 8000.0, True) == 1.0
    # short prompts beside a long decode: below the screen, the steady state is kept
    assert window_factor(5.0, 200, 800, 0.010, 0.012, 200.0, 0.05, 200.0, 7000.0, 7200.0, True) == 1.0


def test_a_lone_client_sees_the_idle_engine(h100: latency.Replica) -> None:
    """One client: its decode never shares a step with a prompt (its own is in its TTFT), and it sends to an
    idle engine -- the zero-load point exactly (the mean step of the loop put its own 16,000-token prompt into
    its TPOT: 15.1 ms where a batch-1 step is 8.2)."""
    alone = analytic_load.zero_load(h100, 16000, 32)
    loop = analytic_load.at_concurrency(h100, 1, 16000, 32)
    assert loop.tpot_ms == pytest.approx(alone.tpot_ms, rel=2e-3)
    assert loop.ttft_ms == pytest.approx(alone.ttft_ms, rel=2e-3)
    assert loop.requests_per_second == pytest.approx(alone.requests_per_second, rel=5e-3)


def test_prompt_heavy_poisson_tpot_follows_the_simulator(h100: latency.Replica) -> None:
    """8,192-token prompts and 16 output tokens at 2 requests/s: each prompt is a 265 ms step that the requests
    decoding behind it wait through. The steady state alone said 16.5 ms; the simulator measures about 37."""
    point = analytic_load.at_rate(h100, 2.0, 8192, 16)
    res = simulate(h100, make_requests(FixedLengths(8192, 16), PoissonArrivals(2.0), 1500, seed=0))
    simulated_ms = float(((res.e2el_s - res.ttft_s) / (res.output_tokens - 1)).mean()) * 1e3
    assert point.tpot_ms == pytest.approx(simulated_ms, rel=0.15)
    mix = analytic_load._StepMix(h100, 8192, 16)
    assert point.tpot_ms > 1.8 * mix.request_step(mix.y_at_rate(2.0)) * 1e3

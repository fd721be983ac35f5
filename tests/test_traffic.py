"""Request generation: vllm bench serve's length and arrival shapes, deterministic per seed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.errors import InputError
from gpuopt.physics.traffic import (
    SHAREGPT_CAP,
    AllAtOnce,
    ClosedLoop,
    ConstantArrivals,
    FixedLengths,
    HistogramLengths,
    PoissonArrivals,
    RangeLengths,
    ShareGPTLengths,
    longest_sharegpt,
    make_requests,
)


def test_fixed_lengths_and_all_at_once():
    reqs = make_requests(FixedLengths(100, 20), AllAtOnce(), 5, seed=0)
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in reqs] == [(0.0, 100, 20)] * 5


@given(length=st.integers(1, 5000), ratio=st.floats(0, 0.99))
@settings(max_examples=40, deadline=None)
def test_range_lengths_stay_in_vllm_bounds(length: int, ratio: float):
    ins, outs = RangeLengths(length, length, ratio).sample(np.random.default_rng(1), 200)
    lo, hi = max(1, int(length * (1 - ratio))), max(max(1, int(length * (1 - ratio))), int(length * (1 + ratio)))
    assert ins.min() >= lo and ins.max() <= hi
    assert outs.min() >= lo and outs.max() <= hi


def test_range_lengths_mean_is_the_requested_length():
    ins, _ = RangeLengths(1000, 10, 0.5).sample(np.random.default_rng(0), 20000)
    assert ins.mean() == pytest.approx(1000, rel=0.01)  # uniform on [500, 1500]


def test_sharegpt_lengths_keep_the_mean_and_the_caps():
    ins, outs = ShareGPTLengths(215, 194).sample(np.random.default_rng(0), 5000)
    assert ins.mean() == pytest.approx(215, rel=0.01)
    assert outs.mean() == pytest.approx(194, rel=0.01)
    assert ins.min() >= 4 and ins.max() <= round(SHAREGPT_CAP * 215)  # the mean is restored within the cap
    assert np.median(ins) < 0.8 * 215  # right-skewed: most prompts are shorter than the mean


def test_histogram_samples_its_bins_in_proportion():
    hist = HistogramLengths(((100, 10, 0.25), (1000, 100, 0.75)))
    assert hist.mean_input_tokens == pytest.approx(775)
    ins, outs = hist.sample(np.random.default_rng(0), 8000)
    assert set(ins.tolist()) == {100, 1000}
    assert (ins == 1000).mean() == pytest.approx(0.75, abs=0.02)
    assert ((ins == 1000) == (outs == 100)).all()  # a bin is one (input, output) pair


def test_poisson_gaps_have_mean_one_over_rate_and_burstiness_sets_their_spread():
    times = PoissonArrivals(4.0).times(np.random.default_rng(0), 40000)
    gaps = np.diff(times)
    assert gaps.mean() == pytest.approx(0.25, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)  # exponential: CV 1
    bursty = np.diff(PoissonArrivals(4.0, burstiness=0.25).times(np.random.default_rng(0), 40000))
    assert bursty.mean() == pytest.approx(0.25, rel=0.03)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.05)  # gamma shape b: CV = 1 / sqrt(b)


def test_constant_arrivals_are_evenly_spaced_from_zero():
    assert ConstantArrivals(2.0).times(np.random.default_rng(0), 4).tolist() == [0.0, 0.5, 1.0, 1.5]


def test_closed_loop_sends_everything_at_zero():
    assert ClosedLoop(8).times(np.random.default_rng(0), 3).tolist() == [0.0, 0.0, 0.0]


def test_a_seed_reproduces_the_requests_and_another_does_not():
    args = (RangeLengths(500, 100, 0.5), PoissonArrivals(3.0), 50)
    assert make_requests(*args, seed=7) == make_requests(*args, seed=7)
    assert make_requests(*args, seed=7) != make_requests(*args, seed=8)


def test_shared_prefix_lengthens_shorter_prompts():
    reqs = make_requests(FixedLengths(100, 5), AllAtOnce(), 2, seed=0, shared_prefix_tokens=300)
    assert all(r.input_tokens == 301 and r.shared_prefix_tokens == 300 for r in reqs)


@pytest.mark.parametrize(("make", "field"), [
    (lambda: FixedLengths(0, 10), "input_tokens"),
    (lambda: FixedLengths(10, -1), "output_tokens"),
    (lambda: RangeLengths(10, 10, 1.0), "range_ratio"),
    (lambda: RangeLengths(10, 10, -0.1), "range_ratio"),
    (lambda: ShareGPTLengths(0, 10), "mean_input_tokens"),
    (lambda: HistogramLengths(((10, 10, 0.5), (20, 20, 0.4))), "sum to 1"),
    (lambda: PoissonArrivals(0.0), "request rate"),
    (lambda: PoissonArrivals(math.nan), "request rate"),
    (lambda: PoissonArrivals(-1.0), "request rate"),
    (lambda: PoissonArrivals(1.0, burstiness=0), "burstiness"),
    (lambda: make_requests(FixedLengths(1, 1), AllAtOnce(), 0, seed=0), "num_prompts"),
])
def test_bad_input_names_the_field(make, field):
    with pytest.raises(InputError) as err:
        make()
    assert field in err.value.problems[0]


@settings(max_examples=40, deadline=None)
@given(st.floats(20, 20_000), st.floats(20, 20_000), st.integers(1, 3000), st.integers(0, 10))
def test_no_sharegpt_request_is_longer_than_its_bound(mean_in: float, mean_out: float, n: int, seed: int):
    """The bound a plan's max_model_len is held to (longest_sharegpt) holds for every sample: restoring the
    mean after the cap once stretched the tail to 5.25 x the mean, past the 4,096 a 1,000/250 plan had. (Means
    near the 4-token floor cannot keep their mean: every draw is clipped up to it; workloads that short are not
    ShareGPT-shaped.)"""
    ins, outs = ShareGPTLengths(mean_in, mean_out).sample(np.random.default_rng(seed), n)
    assert int((ins + outs).max()) <= longest_sharegpt(mean_in, mean_out)
    if n >= 1000:
        assert ins.mean() == pytest.approx(mean_in, rel=0.01)

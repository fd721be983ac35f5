"""Requests a benchmark client sends: their lengths and their arrival times, as `vllm bench serve` makes them.

Everything is drawn from one numpy Generator seeded by the caller, so a seed reproduces the same requests
byte for byte. The shapes follow vLLM's client (vllm/benchmarks/datasets.py and serve.py, v0.11):

- random dataset: input and output lengths uniform integers in [L (1 - r), L (1 + r)] (`--random-range-ratio r`);
- request rate R with burstiness b: gamma inter-arrival times of shape b and scale 1 / (R b) (b = 1 is Poisson);
  rate inf sends everything at time 0; `--max-concurrency` is a semaphore on top of either (a closed loop).

ShareGPT-shaped lengths (ShareGPTLengths): the ShareGPT V3 conversations vLLM samples are heavy-tailed, most
prompts and replies short, a few long. We use a log-normal of sigma 1 for both, scaled so its mean is the
requested mean: median 0.61 x mean before the caps. Sigma 1 is an assumption (a right-skewed shape whose
tail drives the drain of an all-at-once run), not a fit to the dataset. vLLM's sampler keeps prompts of
4-1,024 tokens (about 4.8 x the ShareGPT mean of 215) and totals under 2,048: the draws are clipped to
[4, 5 x mean] and rescaled to the requested mean, so a user's other means keep the same shape. Prompt and
reply lengths are drawn independently (an assumption).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from gpuopt.errors import InputError
from gpuopt.vocabulary import MAX_TOKENS

SHAREGPT_SIGMA = 1.0  # log-normal shape of ShareGPT prompt and reply lengths (see the module docstring)
SHAREGPT_MIN_TOKENS = 4  # vLLM's ShareGPT sampler drops conversations with fewer tokens on either side
SHAREGPT_CAP = 5.0  # x the mean: vLLM's sampler drops prompts over 1,024 tokens, ~4.8x ShareGPT's mean of 215


@dataclass(frozen=True)
class Request:
    """One request: when the client sends it and how many tokens go in and come out."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    shared_prefix_tokens: int = 0  # leading prompt tokens common to every request (served from the prefix cache)


class LengthDistribution(Protocol):
    def sample(self, rng: np.random.Generator, n: int) -> tuple[NDArray[Any], NDArray[Any]]:
        """n (input, output) token counts, each an int64 array of positive values."""
        ...

    @property
    def mean_input_tokens(self) -> float: ...

    @property
    def mean_output_tokens(self) -> float: ...


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise InputError(f"{name} must be a positive number (got {value})")


def _length(name: str, value: float) -> None:
    """A positive token count up to MAX_TOKENS (a length of 2^63 failed inside numpy's int64 sampler instead of
    at the context check)."""
    _positive(name, value)
    if value > MAX_TOKENS:
        raise InputError(f"{name} must be at most {MAX_TOKENS:,} tokens (got {value:,})")


@dataclass(frozen=True)
class FixedLengths:
    """Every request has the same lengths (`--random-range-ratio 0`)."""

    input_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        _length("input_tokens", self.input_tokens)
        _length("output_tokens", self.output_tokens)

    @property
    def mean_input_tokens(self) -> float:
        return float(self.input_tokens)

    @property
    def mean_output_tokens(self) -> float:
        return float(self.output_tokens)

    def sample(self, rng: np.random.Generator, n: int) -> tuple[NDArray[Any], NDArray[Any]]:
        return np.full(n, self.input_tokens, dtype=np.int64), np.full(n, self.output_tokens, dtype=np.int64)


@dataclass(frozen=True)
class RangeLengths:
    """`vllm bench serve --dataset-name random --random-range-ratio r`: uniform integers in [L(1-r), L(1+r)]."""

    input_tokens: int
    output_tokens: int
    range_ratio: float

    def __post_init__(self) -> None:
        _length("input_tokens", self.input_tokens)
        _length("output_tokens", self.output_tokens)
        if not (math.isfinite(self.range_ratio) and 0 <= self.range_ratio < 1):
            raise InputError(f"range_ratio must be in [0, 1) (got {self.range_ratio})")

    @property
    def mean_input_tokens(self) -> float:
        return float(self.input_tokens)

    @property
    def mean_output_tokens(self) -> float:
        return float(self.output_tokens)

    def _uniform(self, rng: np.random.Generator, length: int, n: int) -> NDArray[Any]:
        lo = max(1, int(length * (1 - self.range_ratio)))
        hi = max(lo, int(length * (1 + self.range_ratio)))
        return rng.integers(lo, hi + 1, size=n, dtype=np.int64)

    def sample(self, rng: np.random.Generator, n: int) -> tuple[NDArray[Any], NDArray[Any]]:
        return self._uniform(rng, self.input_tokens, n), self._uniform(rng, self.output_tokens, n)


@dataclass(frozen=True)
class ShareGPTLengths:
    """ShareGPT-shaped lengths with the given means: independent log-normals of sigma SHAREGPT_SIGMA."""

    mean_input_tokens: float
    mean_output_tokens: float

    def __post_init__(self) -> None:
        _length("mean_input_tokens", self.mean_input_tokens)
        _length("mean_output_tokens", self.mean_output_tokens)

    @staticmethod
    def _lognormal(rng: np.random.Generator, mean: float, n: int) -> NDArray[Any]:
        mu = math.log(mean) - SHAREGPT_SIGMA**2 / 2  # E[exp(N(mu, s^2))] = exp(mu + s^2 / 2) = mean
        draws = np.clip(rng.lognormal(mu, SHAREGPT_SIGMA, size=n), SHAREGPT_MIN_TOKENS, SHAREGPT_CAP * mean)
        # the cap lowers the mean by a few %: restore it, within the cap, so that the longest request is known
        # (longest_sharegpt), which a plan's max_model_len must hold (restored once, the tail reached 5.25 x the
        # mean, past the 4,096 a plan of 1,000/250 had chosen); a few passes, each scaling what the cap left
        for _ in range(6):
            draws = np.clip(draws * (mean / draws.mean()), SHAREGPT_MIN_TOKENS, SHAREGPT_CAP * mean)
        return np.maximum(np.rint(draws), SHAREGPT_MIN_TOKENS).astype(np.int64)

    def sample(self, rng: np.random.Generator, n: int) -> tuple[NDArray[Any], NDArray[Any]]:
        return self._lognormal(rng, self.mean_input_tokens, n), self._lognormal(rng, self.mean_output_tokens, n)

    def share_longer_than(self, tokens: int, draws: int = 10_000) -> float:
        """The share of requests longer than `tokens` (prompt + output), over `draws` requests of a fixed seed."""
        ins, outs = self.sample(np.random.default_rng(0), draws)
        return float(((ins + outs) > tokens).mean())


def longest_sharegpt(mean_input_tokens: float, mean_output_tokens: float) -> int:
    """The longest request (prompt + output tokens) ShareGPTLengths draws for these means: each side at most
    SHAREGPT_CAP x its mean."""
    return sum(max(int(np.rint(SHAREGPT_CAP * m)), SHAREGPT_MIN_TOKENS)
               for m in (mean_input_tokens, mean_output_tokens))


@dataclass(frozen=True)
class HistogramLengths:
    """A user's length mix: (input_tokens, output_tokens, share) bins whose shares sum to 1."""

    bins: tuple[tuple[int, int, float], ...]

    def __post_init__(self) -> None:
        if not self.bins:
            raise InputError("lengths histogram: needs at least one bin")
        for i, (inp, out, share) in enumerate(self.bins, start=1):
            _length(f"lengths histogram bin {i} input_tokens", inp)
            _length(f"lengths histogram bin {i} output_tokens", out)
            if not (math.isfinite(share) and share >= 0):
                raise InputError(f"lengths histogram bin {i} share must be >= 0 (got {share})")
        total = sum(b[2] for b in self.bins)
        if abs(total - 1.0) > 1e-6:
            raise InputError(f"lengths histogram shares must sum to 1 (got {total:g})")

    @property
    def mean_input_tokens(self) -> float:
        return float(sum(i * s for i, _, s in self.bins))

    @property
    def mean_output_tokens(self) -> float:
        return float(sum(o * s for _, o, s in self.bins))

    def sample(self, rng: np.random.Generator, n: int) -> tuple[NDArray[Any], NDArray[Any]]:
        shares = np.array([b[2] for b in self.bins], dtype=float)
        idx = rng.choice(len(self.bins), size=n, p=shares / shares.sum())
        ins = np.array([b[0] for b in self.bins], dtype=np.int64)
        outs = np.array([b[1] for b in self.bins], dtype=np.int64)
        return ins[idx], outs[idx]


# ---- arrivals ---------------------------------------------------------------------------------------


class ArrivalProcess(Protocol):
    def times(self, rng: np.random.Generator, n: int) -> NDArray[Any]:
        """Send times (seconds from the start) of n requests, non-decreasing."""
        ...


@dataclass(frozen=True)
class AllAtOnce:
    """`--request-rate inf`: every request is sent at time 0."""

    def times(self, rng: np.random.Generator, n: int) -> NDArray[Any]:
        return np.zeros(n)


@dataclass(frozen=True)
class PoissonArrivals:
    """`--request-rate R --burstiness b`: gamma inter-arrivals of shape b, mean 1 / R (b = 1: Poisson).

    vLLM's client draws the delay before every request, the first included."""

    rate: float
    burstiness: float = 1.0

    def __post_init__(self) -> None:
        _positive("request rate", self.rate)
        _positive("burstiness", self.burstiness)

    def times(self, rng: np.random.Generator, n: int) -> NDArray[Any]:
        theta = 1.0 / (self.rate * self.burstiness)
        return np.cumsum(rng.gamma(shape=self.burstiness, scale=theta, size=n))


def arrival_cv2(burstiness: float) -> float:
    """The squared coefficient of variation of gamma inter-arrival times of shape `burstiness` (their variance
    over their mean squared: 1 / shape). 1 is Poisson; `--burstiness 0.25` arrives in clumps, 4x as variable;
    above 1 the arrivals are more regular than Poisson (constant rate at the limit)."""
    _positive("burstiness", burstiness)
    return 1.0 / burstiness


@dataclass(frozen=True)
class ConstantArrivals:
    """One request every 1 / rate seconds, the first at time 0."""

    rate: float

    def __post_init__(self) -> None:
        _positive("request rate", self.rate)

    def times(self, rng: np.random.Generator, n: int) -> NDArray[Any]:
        return np.arange(n, dtype=float) / self.rate


@dataclass(frozen=True)
class ClosedLoop:
    """`--max-concurrency N` with `--request-rate inf`: N clients, each sending its next request when its
    last one ends. The requests are all ready at time 0; the simulator's max_concurrency is the semaphore,
    so pass `concurrency` to simulate(max_concurrency=...)."""

    concurrency: int

    def __post_init__(self) -> None:
        _positive("concurrency", self.concurrency)

    def times(self, rng: np.random.Generator, n: int) -> NDArray[Any]:
        return np.zeros(n)


def make_requests(lengths: LengthDistribution, arrival: ArrivalProcess, num_prompts: int, seed: int,
                  shared_prefix_tokens: int = 0) -> list[Request]:
    """`num_prompts` requests, deterministic for a seed (lengths first, then arrival times, one Generator).

    A shared prefix is part of each prompt: prompts shorter than it are lengthened to prefix + 1 token."""
    if not (isinstance(num_prompts, int) and num_prompts > 0):
        raise InputError(f"num_prompts must be a positive integer (got {num_prompts})")
    if shared_prefix_tokens < 0:
        raise InputError(f"shared_prefix_tokens must be >= 0 (got {shared_prefix_tokens})")
    rng = np.random.default_rng(seed)
    ins, outs = lengths.sample(rng, num_prompts)
    times = arrival.times(rng, num_prompts)
    if shared_prefix_tokens:
        ins = np.maximum(ins, shared_prefix_tokens + 1)
    return [Request(arrival_s=float(t), input_tokens=int(i), output_tokens=int(o),
                    shared_prefix_tokens=int(shared_prefix_tokens))
            for t, i, o in zip(times, ins, outs, strict=True)]

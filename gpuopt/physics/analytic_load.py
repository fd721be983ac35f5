"""One vLLM replica under steady load, in closed form: the mean engine step, TTFT and TPOT at a request rate
(Poisson arrivals, at_rate) or a number of clients (a closed loop, at_concurrency), the largest rate that
meets the targets (max_rate), and what limits it (the step budget, max_num_seqs, the KV cache, the API
server). The cost of one step is latency's; the simulator (simulator.py) runs the same steps one at a time
and is what this model is checked against (benchmarks/surrogate_capacity.py).

Under load vLLM's scheduler mixes decode tokens and prompts in a step (chunked prefill, up to
max_num_batched_tokens per step). In steady state at request rate lambda with mean prompt L and output O
tokens, y = lambda x T prompts arrive per step of mean length T: every step decodes b = (O - 1) y sequences
(a request's first token comes out of its prefill step), and a
Poisson share of the steps also carries the prompts that arrived during the last one (_StepMix), so T is
the fixed point T = E(step); for Poisson arrivals TPOT is the mean batch of the decode phase's birth-death
chain over rate x O (_StepMix.request_step: the batch swings and a request decodes in the steps where more
sequences run), stretched by the prompts queued behind the request when its decode starts (decode_window);
TTFT = server overhead + the steps that prefill one prompt, stretched by queueing as the prefill share of the
step fills up. A closed loop of n clients runs at lambda = n / (TTFT + (O - 1) x TPOT) (Little's law), each
request meeting the other n - 1 clients' load only (_closed_loop).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from gpuopt.errors import SloUnreachableError
from gpuopt.physics import queueing, step_chain
from gpuopt.physics.decode_window import window_factor
from gpuopt.physics.kv_cache import KvPool
from gpuopt.physics.latency import (
    Replica,
    combined_step_s,
    combined_steps_s,
    host_part_s,
    prefill_steps_s,
    prefill_time_s,
    step_parts_s,
    step_piece,
    step_time_s,
)
from gpuopt.physics.traffic import arrival_cv2

CONCURRENCY_TOLERANCE = 1e-3  # closed loops: concurrency is steep in the rate near saturation
RATE_TOLERANCE = 5e-3  # relative precision of the searched request rates (0.5 %, well inside the model error)
# relative width of the bracket around a steady state's y (_crossing): far inside RATE_TOLERANCE, and above the
# ~1e-10 of y at which the rounding of the step sums makes rate E(y) - y noise (1e-10 until 2026-12-05 took 2-3
# evaluations more a root, chasing that noise)
ROOT_TOLERANCE = 1e-8
NO_STEADY_Y = 1e9  # past this many prompts a step there is no steady state (y_at_rate: inf)
SETTLE_MOVE = 0.25  # the largest move of an open loop's y from the Poisson root to the chain's (_StepMix.settle)


@dataclass(frozen=True)
class LoadPoint:
    """Predicted steady state of one replica at one load."""

    requests_per_second: float
    concurrency: float  # requests in the system (Little's law)
    running: float  # sequences in the engine's steps: the decodes and the prompts in their prefill step
    step_ms: float
    tpot_ms: float
    ttft_ms: float
    output_tokens_per_second: float
    stable: bool
    limit: str | None  # what makes it unstable (prefill budget, max_num_seqs, KV cache)


MAX_PREFILL_BUSY = 0.999  # the prefill queue's utilisation is clamped here, as the budget's (queueing.MAX_LOAD)


def clump_size(cv2: float) -> float:
    """The mean clump of prompts that bursty arrivals bring at once: a renewal process whose gaps have a
    squared coefficient of variation cv2 > 1 counts, over long windows, as a compound Poisson process of
    geometric clumps of mean m with the same index of dispersion E[K^2] / E[K] = 2m - 1 = cv2, so m = (1 +
    cv2) / 2 (gamma gaps of shape 0.25: clumps of 2.5). Poisson and smoother arrivals come one at a time."""
    return (1.0 + cv2) / 2 if cv2 > 1.0 else 1.0


CHAIN_UNITS = 4  # fewest units of a prompt in the step chain where few fit a step (_StepMix._chain_units)
CHAIN_FINE_PROMPTS = 16  # past this many prompts to a step's room, a prompt is one unit of the chain
CHAIN_BACKLOG_PROMPTS = 4  # prompts of backlog the chain follows beyond a full step (or a step's worth more)
MAX_CHAIN_STATES = 200  # a larger chain falls back to the Poisson count at y (a linear solve of its size)
CHAIN_TAIL = 1e-3  # the chain follows more backlog while its last state holds more than this share
PMF_TAIL = 1e-6  # prompts_per_step stops once the counts it has leave this share of P(k >= 1) uncounted
UNDERFLOW_CLUMPS = 700.0  # e^-z underflows past ~745 clumps a step (denormal from ~708)


def prompts_per_step(y: float, clump: float, most: int) -> list[float]:
    """P(k prompts arrive in a step), k = 0 .. `most` (the last entry holds every count from `most` up), for y
    prompts a step on average: Poisson(y) when they come one at a time, a compound Poisson count of clumps
    (Poisson(z = y / m) clumps of geometric size with mean m = `clump`, clump_size) otherwise -- the Polya-Aeppli
    law, whose probabilities follow k P_k = (z (1 - t) + 2 (k - 1) t) P_(k-1) - (k - 2) t^2 P_(k-2), t = 1 - 1/m
    (t = 0: Poisson's k P_k = z P_(k-1)). The list ends early where what it leaves of P(k >= 1) = 1 - e^-z is
    below PMF_TAIL of it (relative, so a tiny y still has its k >= 1 counts), and the last entry holds that
    rest."""
    z = y / clump
    if z > UNDERFLOW_CLUMPS:
        # e^-z is no float: the count is within a few % of its mean (sd / mean = sqrt(cv2 / y) < 0.1), and
        # the mean's point mass stands for it
        k = min(round(y), max(most, 1))
        return [0.0] * k + [1.0]
    t = 1.0 - 1.0 / clump  # a clump's size is geometric: P(j) = (1 - t) t^(j - 1)
    some = -math.expm1(-z)  # P(k >= 1), without the rounding of 1 - e^-z
    pmf = [math.exp(-z)]
    counted = 0.0
    for k in range(1, max(most, 1)):
        before = pmf[k - 2] if k >= 2 else 0.0
        g = ((z * (1.0 - t) + 2 * (k - 1) * t) * pmf[k - 1] - (k - 2) * t * t * before) / k
        pmf.append(g)
        counted += g
        if some - counted < PMF_TAIL * some:
            break
    pmf.append(max(some - counted, 0.0))
    return pmf


def _loop_cv2(poisson: bool, burstiness: float) -> float:
    """The arrivals' squared coefficient of variation: the open loop's gamma gaps (traffic.arrival_cv2); a
    closed loop's clients send when their last request ends, which no burstiness clumps."""
    return arrival_cv2(burstiness) if poisson else 1.0


def _visited_batches(b: float, dispersion: float = 1.0) -> tuple[float, float]:
    """The decode batches a steady state at mean batch b swings between, b -+ one sd (sqrt(dispersion x b),
    the batch's variance over its mean `dispersion`) with at least one sequence: where request_step and
    population_peakedness take the secant of the step in the batch (an MoE step is concave in it: the wider
    the swing, the flatter the secant)."""
    sd = math.sqrt(dispersion * b)
    lo = max(b - sd, 1.0)
    return lo, lo + max(2 * sd, 1.0)


def _chain_backlog(units: int, most: int) -> int:
    """The backlog (in units) a step chain first follows past a full step: CHAIN_BACKLOG_PROMPTS prompts, or a
    step's worth; the chain has most + backlog + 1 states, at most MAX_CHAIN_STATES."""
    return max(CHAIN_BACKLOG_PROMPTS * units, most)


@dataclass(frozen=True)
class _ChainLaw:
    """The step chain at one y (step_chain.stationary): the law of the prompt units pending when a step is
    scheduled, the step each state runs, a unit's prompt tokens and the most units a step takes."""

    law: NDArray[np.float64]
    steps: NDArray[np.float64]
    unit: float
    most: int

    def mean(self) -> float:
        return float(self.law @ self.steps)

    def kinds(self) -> tuple[float, float, float]:
        """(the share of steps carrying prompt work, the step without, the mean step with): _StepMix.steps."""
        q = float(self.law[1:].sum())
        prompt = float(self.law[1:] @ self.steps[1:]) / q if q > 0.0 else 0.0
        return q, float(self.steps[0]), prompt

    def prompt_tokens(self) -> float:
        """The mean prompt tokens of a step that carries some: _StepMix.prompt_tokens."""
        q = float(self.law[1:].sum())
        units = np.minimum(np.arange(self.law.size), self.most) * self.unit
        return float(self.law[1:] @ units[1:]) / q if q > 0.0 else 0.0


class _StepMix:
    """The mean engine step in steady state as a function of y, the prompts arriving per step (y = rate x T).

    Prompts arrive at random, so in a steady state most steps carry no prefill at all and some carry a whole
    prompt: vLLM runs a prompt of L tokens in the first step after it arrives, whole when it fits the step's
    budget (chunked at max_num_batched_tokens otherwise). With k ~ Poisson(y) prompts per step, a step carries
    no prompt with probability e^-y, and k1 = y / (1 - e^-y) prompts (x1 = k1 L tokens, at most the budget
    left by the decodes) otherwise; every step also decodes b = (O - 1) y sequences (Little's law on the decode
    phase: a request's first token comes out of its last prefill step, so O - 1 steps decode it; counting O y
    until 2026-12-04 put a decode batch into the steps of one-token outputs, which have none). The mean step is then

        E(y) = (1 - q) step(b, 0) + q Q(y),   q = y L / x1 (the share of steps carrying prompt tokens)

    Q(y) the mean step that carries prompts (prompt_step, below).

    Spreading y L prompt tokens evenly over every step instead (the model before 2026-12) lets each step's
    share of prefill hide under its memory-bound decode (max(memory, compute)) and charges every step of an
    MoE model the experts a prompt touches: mean TPOT was 1.5-3.5x optimistic for long prompts on dense
    models and 3-6x pessimistic for MoE models against the simulator (benchmarks/surrogate_capacity.py).
    The steps carrying prompts are not all alike: they carry k >= 1 prompts (prompts_per_step), and a step's
    cost is not linear in its prompt tokens -- flat while the decodes' weight reads hide the prompt's compute,
    then steep -- so the mean prompt step is E[step(b, min(k L, room)) | k >= 1], not the step of the mean k1
    (Jensen's gap, prompt_step). Llama-3.1-8B at 200 / 100 on an L40S turns compute-bound at 280 prompt tokens
    a step: one prompt rides free, two cost 9.6 ms more; at 25 requests/s the step of the mean (285 tokens)
    is 30.5 ms where the simulator's prompt steps take 35.6 (its mean step 33.2, this 33.2; 30.1 before
    2026-12-04), at 37 requests/s 49.4 for 56.5 (mean step 53.4, this 53.0; 47.4 before).

    Dense models: every part of step_parts_s is affine in the decode batch and the prompt tokens at a fixed
    context, so three evaluations give all steps; MoE models evaluate each step (the experts a step touches
    depend on its own tokens)."""

    def __init__(self, r: Replica, input_tokens: int, output_tokens: int, arrival_cv2: float = 1.0) -> None:
        """`arrival_cv2`: the open loop's inter-arrival variability (traffic.arrival_cv2; 1 for Poisson), which
        widens the decode batch's swings (request_step)."""
        self.r, self.L, self.O = r, input_tokens, output_tokens
        # the steps a request decodes in: its first token comes out of its (last) prefill step
        self.decodes = max(output_tokens - 1, 0)
        self.arrival_cv2 = arrival_cv2
        self.clump = clump_size(arrival_cv2)
        self.context = input_tokens + output_tokens / 2
        self.budget = r.config.max_num_batched_tokens
        self.affine: tuple[tuple[float, float, float], ...] | None = None
        self._last_steps: tuple[float, tuple[float, float, float]] | None = None
        # the step chain's steps and prompt tokens at the y an open loop settled on (settle), and the last chain
        self._chained: tuple[float, tuple[float, float, float], float] | None = None
        self._last_chain: tuple[tuple[float, float, float], _ChainLaw | None] | None = None
        self._units: tuple[int, float] | None = None  # the step chain's units of a prompt and a unit's tokens
        self._root: tuple[float, float] | None = None  # the last (rate, y) of y_at_rate: a search asks near it
        self._aimed: float | None = None  # the last y at a target step (_y_at), where the next is sought first
        if not r.expert_bytes_per_gpu:
            zero = step_parts_s(r, 0.0, self.context, 0.0, input_tokens / 2)
            one_b = step_parts_s(r, 1.0, self.context, 0.0, input_tokens / 2)
            one_x = step_parts_s(r, 0.0, self.context, 1.0, input_tokens / 2)
            self.affine = tuple((zero[i], one_b[i] - zero[i], one_x[i] - zero[i]) for i in range(3))

    def _parts(self, b: float, x: float) -> tuple[float, float, float]:
        """step_parts_s of a step of b decodes and x prompt tokens: a dense model's from its affine parts."""
        if self.affine is None:
            return step_parts_s(self.r, b, self.context, x, self.L / 2)
        (m0, mb, mx), (c0, cb, cx), (r0, rb, rx) = self.affine
        return m0 + mb * b + mx * x, c0 + cb * b + cx * x, r0 + rb * b + rx * x

    def step(self, b: float, x: float) -> float:
        if self.affine is None:
            return combined_step_s(self.r, *self._parts(b, x), b, self.r.async_scheduling)
        # _parts inline: the hottest call of a solve (a million steps for ten workloads)
        (m0, mb, mx), (c0, cb, cx), (r0, rb, rx) = self.affine
        return combined_step_s(self.r, m0 + mb * b + mx * x, c0 + cb * b + cx * x, r0 + rb * b + rx * x, b,
                               self.r.async_scheduling)

    def steps_at(self, b: float, xs: list[float]) -> list[float]:
        """step(b, x) for each x, the host part computed once (combined_steps_s)."""
        return combined_steps_s(self.r, (self._parts(b, x) for x in xs), b, self.r.async_scheduling)

    def _one_line(self, b: float, lo: float, hi: float) -> bool:
        """Whether a dense model's step at batch b is one straight line in its prompt tokens over [lo, hi]: on
        the same piece of combined_step_s at both ends (latency.step_piece; each bend is one crossing of lines
        that rise with the tokens, so the same piece at both ends is the same piece between). An MoE step is
        not affine in its tokens (the experts they touch): never."""
        if self.affine is None:
            return False
        host = host_part_s(self.r, b, self.r.async_scheduling)
        return step_piece(*self._parts(b, lo), host) == step_piece(*self._parts(b, hi), host)

    def room(self, y: float) -> float:
        """The prompt tokens a step has room for beside the (O - 1) y decodes (at least one)."""
        return max(self.budget - self.decoding(y), 1.0)

    def decoding(self, y: float) -> float:
        """b = (O - 1) y, the decodes a step carries: none for one-token outputs, whatever y (0 x inf is no
        number)."""
        return self.decodes * y if self.decodes else 0.0

    def prompt_tokens(self, y: float) -> float:
        """x1: the prompt tokens a step that carries prompts carries (k1 prompts, at most the decodes' room).
        Bursty arrivals come in clumps of `clump` prompts on average (clump_size): y / clump clumps a step,
        Poisson, so fewer steps carry prompts and those carry more."""
        if self._chained is not None and self._chained[0] == y:
            return self._chained[2]
        return self.counted_prompt_tokens(y)

    def counted_prompt_tokens(self, y: float) -> float:
        """prompt_tokens() from the Poisson count at y (counted_steps)."""
        m = self.clump
        z = y / m
        k1 = m * z / -math.expm1(-z) if z > 1e-12 else m
        return min(max(k1 * self.L, self.L * y), self.room(y))

    def steps(self, y: float) -> tuple[float, float, float]:
        """(q, the step without a prompt, the mean step with one): the two kinds of step and the share of the
        second. The last y's answer is kept: at_rate asks for it four times (the mean step, the residual, the
        request step, the decode window)."""
        if self._chained is not None and self._chained[0] == y:
            return self._chained[1]
        return self.counted_steps(y)

    def counted_steps(self, y: float) -> tuple[float, float, float]:
        """steps() from the Poisson count of prompts at y (prompts_per_step), never the step chain's: the decode
        window (_Window) counts the prompts queued behind a request in whole prompts a step, which the chain's
        mean over chunks of a prompt is not."""
        if self._last_steps is not None and self._last_steps[0] == y:
            return self._last_steps[1]
        b = self.decoding(y)
        p = self.L * y
        if p <= 0.0:
            found = (0.0, self.step(b, 0.0), 0.0)
        else:
            found = (min(p / self.counted_prompt_tokens(y), 1.0), self.step(b, 0.0), self.prompt_step(y))
        self._last_steps = (y, found)
        return found

    def _prompt_counts(self, y: float) -> tuple[list[float], list[float]] | None:
        """(weights, prompt tokens) of the steps carrying k = 1, 2, ... prompts at y (prompts_per_step given k >= 1,
        min(k L, room) tokens), or None where every such step is alike: a prompt of a whole room fills every
        prompt step whatever k."""
        room = self.room(y)
        if self.L <= 0 or y <= 0.0:
            return None
        most = math.ceil(room / self.L)
        some = -math.expm1(-y / self.clump)  # P(k >= 1)
        if most <= 1 or some <= 0.0:
            return None
        pmf = prompts_per_step(y, self.clump, most)
        return [p / some for p in pmf[1:]], [min(k * self.L, room) for k in range(1, len(pmf))]

    def prompt_step(self, y: float) -> float:
        """The mean step that carries prompts at y prompts a step (b = (O - 1) y decoding): the step of x1 prompt
        tokens (prompt_tokens) plus Jensen's gap E[step(min(k L, room))] - step(E[min(k L, room)]) over the
        k >= 1 prompts such a step carries (prompts_per_step). The gap is what the step's bend costs (convex
        where compute takes over from the weight reads; an MoE step can be concave, where more tokens touch
        few more experts); x1 keeps the prompt tokens a step carries on average what they are. A dense step
        that is one straight line from one prompt to a full room has no gap (_one_line: prompts past the
        bend, the usual case, cost one step and no count of prompts)."""
        b = self.decoding(y)
        x1 = self.counted_prompt_tokens(y)
        room = self.room(y)
        if self._one_line(b, min(self.L, room), room):
            return self.step(b, x1)
        counts = self._prompt_counts(y)
        if counts is None:
            return self.step(b, x1)
        weights, xs = counts
        mean_x = sum(w * x for w, x in zip(weights, xs, strict=True))
        *ts, at_mean, at_x1 = self.steps_at(b, [*xs, mean_x, x1])
        return at_x1 + sum(w * t for w, t in zip(weights, ts, strict=True)) - at_mean

    def prompt_step_var(self, y: float) -> float:
        """The variance of the steps that carry prompts at y (k prompts a step, prompts_per_step), which
        lengthens the step an arrival lands in (residual_step, busy_residual)."""
        counts = self._prompt_counts(y) if self.L * y > 0.0 else None
        if counts is None:
            return 0.0
        weights, xs = counts
        ts = self.steps_at(self.decoding(y), xs)
        mean_t = sum(w * t for w, t in zip(weights, ts, strict=True))
        return max(sum(w * t * t for w, t in zip(weights, ts, strict=True)) - mean_t * mean_t, 0.0)

    def ride_step(self, batch: float, y: float, others: float) -> float:
        """The step a prompt shorter than a step's room rides in, beside `batch` decodes and the `others`
        prompts (on average) that arrived with it: vLLM schedules every prompt that arrived during a step into
        the next one (whole, room permitting), so it carries K ~ prompts_per_step(others) more:
        E[step(batch, min((1 + K) L, room))], room what the steady state's (O - 1) y decodes leave of the budget.

        An open loop's arrival lands in a long step more often than the steps' share says, and a long step
        gathers more prompts for the next: its others are rate x the length-biased step E[T^2] / E[T] (twice
        the rest of the step in flight, in_flight). This is what the lone prompt's step plus M/D/1's wait for
        the prompt work ahead (prefill_steps_s, prompt_queue_s) missed for short prompts at high rates:
        Llama-3.1-8B at 200 / 100 on
        an L40S at 37 requests/s waited 163 ms that way, 176 this way, the simulator 177 (the lone prompt's
        step 39 ms, the one it rides in 68). A closed loop's clients send when a step ends (their last token),
        and a step ends as many requests whatever its length: its others are the y prompts of a step, less the
        client's own share. at_rate and _closed_loop take the longer of this and the queue, so a backlog past
        one step's room still queues."""
        room = self.room(y)
        if room <= self.L or self.L <= 0:
            return self.step(batch, min(self.L, room))
        most = math.ceil(room / self.L) - 1  # others at which the step is full
        pmf = prompts_per_step(others, self.clump, max(most, 1))
        ts = self.steps_at(batch, [min((1 + k) * self.L, room) for k in range(len(pmf))])
        return sum(p * t for p, t in zip(pmf, ts, strict=True))

    def prompt_work_s(self, y: float) -> float:
        """The time a waiting prompt adds to the queue of prompt work ahead of later ones: L x Q(R) / R, its share
        of a step that carries a full budget of prompt tokens (R = max_num_batched_tokens less the decodes) and
        the decodes that ride in it. A backlog of prompts drains at R tokens a step, and each of those steps
        costs Q(R) -- the decodes' part of it included, which is not free while the backlog waits -- so this
        is the rate at which queued prompts are worked off, whatever the steady state's mean prompt step.

        History (benchmarks/surrogate_capacity.py and the simulator's steady state, physics/steady_state.py):
        - until 2026-12-04 (round 32) a prompt counted its whole prefill alone (prefill_steps_s less the decode
          steps it replaces): an MoE step reads every expert its tokens touch once for all its prompts, so
          gpt-oss-120b's 500-token prompts on an H100 counted 39 ms each, 30 a second kept the prefill "busy"
          117 % and queued them 19.5 s, where the simulator waits 0.1 s;
        - round 32 took the steady state's own prompt step over a plain one, L (Q - P) / x1: that left out the
          decodes' share P of each prompt step, 15 % of a 2,048-token step of Llama-3.1-8B on an L40S, so
          6,000-token prompts looked 0.78 busy at 1.77 requests/s where the GPU spends 0.91 of its time in
          prompt steps, and the TTFT-bound capacity within 1.5 s was 1.77 requests/s where the simulator's
          steady state holds 1.48 (Qwen3-14B at 8,000 / 50 on an L40S within 3 s: 0.59 for 0.49). Now 1.49 and
          0.52; gpt-oss-120b's case above waits 118 ms (simulated 128)."""
        if self.L <= 0 or y <= 0.0:
            return 0.0
        full = self.room(y)
        return self.L * self.step(self.decoding(y), full) / full

    def prompt_step_share_s(self, y: float) -> float:
        """A prompt's share of what a step carrying x1 prompt tokens costs over a step without, L (Q - P) / x1:
        the work a closed loop's prompt queue is charged (_closed_loop). Not what a backlog drains at
        (prompt_work_s, the open loop's), but measured closer to the simulator's closed loops, whose clients
        wait less than M/D/1 on the others' load says (convoys of few, regular clients): over 33 loops of
        2-256 clients the median |log error| of TTFT was 0.043 this way, 0.060 with prompt_work_s and mean
        value analysis of the loop (QA, 2026-12-04; the L40S's 16 clients of 6,000 / 64: 1,340 ms this way,
        1,571 that way, simulated 1,304), and a `concurrency` plan priced that way simulated above its TTFT
        target. A closed loop's prompt queue is not modelled from first principles yet (docs/latency.md)."""
        _, plain, prompt = self.steps(y)
        x1 = self.prompt_tokens(y) if self.L > 0 else 0.0
        if x1 <= 0.0 or prompt <= plain:
            return 0.0  # no prompt tokens, or none at this load (y = 0: no step carries a prompt)
        return self.L * (prompt - plain) / x1

    @staticmethod
    def _mean(q: float, plain: float, prompt: float) -> float:
        """The mean of the two kinds of step, a share q of them carrying prompts."""
        return (1.0 - q) * plain + q * prompt

    def mean_step(self, y: float) -> float:
        return self._mean(*self.steps(y))

    def residual_step(self, y: float) -> float:
        """What is left of the step in progress when a request arrives: E(T^2) / 2 E(T) over the steps (an arrival
        at a random instant lands in a long step more often than the steps' share says: a step carrying a
        3,000-token prompt is 5 to 10 decode steps long). Half the mean step where all steps are alike."""
        return sum(self._residual_parts(y, 1.0))

    def busy_residual(self, y: float) -> tuple[float, float]:
        """What is left of the step in flight when a request arrives, nothing when the engine is idle, as
        (the part in steps without prompts, the part in prompt steps): the residual step less the steps of
        the mean-field stream that run nothing -- no prompt, and none of the decodes (a Poisson count of mean
        (O - 1) y) -- which are idle time, where an arrival is scheduled at once. Where every request ends in
        its prefill step (one output token) only the prompt steps are busy.

        Until 2026-12-04 the wait was the whole residual times P(the engine runs a sequence), the running count
        taken as Poisson at the mean step's y: Qwen3-30B-A3B at 200 / 1 on an H100 at 40 requests/s runs prompt
        steps 83 % of the time, where a Poisson count of 0.48 said 38 %, so TTFT was 58 ms, simulated 64 (now
        64)."""
        return self._residual_parts(y, -math.expm1(-self.decoding(y)))

    def _residual_parts(self, y: float, plain_busy: float) -> tuple[float, float]:
        """E(T^2) / 2 E(T) over the two kinds of step, split into the plain steps' part and the prompt steps',
        the plain steps counted busy a share `plain_busy` of the time (the rest idle: nothing in flight)."""
        q, plain, prompt = self.steps(y)
        mean = self._mean(q, plain, prompt)
        if mean <= 0.0:
            return 0.0, 0.0
        var = self.prompt_step_var(y) if q > 0.0 else 0.0
        return (1.0 - q) * plain_busy * plain**2 / (2 * mean), q * (prompt**2 + var) / (2 * mean)

    def in_flight(self, y: float, rate: float) -> tuple[float, float, float]:
        """What an open-loop arrival at `rate` finds of the step in flight, nothing when the engine is idle:
        (the rest of it; that rest in steps without prompts that run something, and in prompt steps), from the
        step chain (physics/step_chain.py: a long step gathers the prompts of a later one, so the prompt steps
        spread wider than a Poisson count at y says), or from the Poisson count (busy_residual) where the
        chain would need more than MAX_CHAIN_STATES states (over ~100 prompts to a step, whose steps differ
        little with their count, or prompts of over ~12 budgets). The rest is also what the prompts riding
        with the arrival arrived in (ride_step's others: none when it found the engine idle)."""
        # one-token outputs never decode: with no prompt pending the engine idles until the next arrival and
        # schedules it at once; otherwise a step without prompts runs the decodes, none of them with
        # probability e^-(O - 1) y (idle time: nothing in flight)
        idle = 1.0 if self.decodes == 0 else 0.0
        chain = self._chain(y, rate, idle)
        if chain is None:
            in_plain, in_prompt = self.busy_residual(y)
        else:
            in_plain, in_prompt = step_chain.rest_of_step(chain.law, chain.steps, rate, idle)
            in_plain *= -math.expm1(-self.decoding(y))
        return in_plain + in_prompt, in_plain, in_prompt

    def _chain(self, y: float, rate: float, idle: float) -> _ChainLaw | None:
        """The step chain at y and `rate` (_ChainLaw; the last one asked is kept: settle and in_flight ask for
        the same), or None where it would be too large or there is nothing to chain."""
        key = (y, rate, idle)
        if self._last_chain is None or self._last_chain[0] != key:
            self._last_chain = (key, self._solve_chain(y, rate, idle))
        return self._last_chain[1]

    def _solve_chain(self, y: float, rate: float, idle: float) -> _ChainLaw | None:
        """(the stationary law of the prompt units pending at a step, the step each state runs) at y and
        `rate` (step_chain.stationary), or None where the chain would be too large or there is nothing to
        chain. A prompt is _chain_units' units: one where more than CHAIN_FINE_PROMPTS fit a step, else at least
        CHAIN_UNITS, as many as fill the budget closest in whole units (so a prompt chunked at the budget
        carries its rest)."""
        if self.L <= 0 or y <= 0.0 or rate <= 0.0:
            return None
        room = self.room(y)
        units, unit, most = self._chain_units(room)
        backlog = _chain_backlog(units, most)
        if most + backlog + 1 > MAX_CHAIN_STATES:
            return None
        # a state past `most` runs the full step: its prompt tokens are evaluated once
        distinct = np.array(self.steps_at(self.decoding(y), [k * unit for k in range(most + 1)]))
        if not np.isfinite(distinct).all():
            return None
        while True:
            steps = np.concatenate((distinct, np.full(backlog, distinct[-1])))
            try:
                law = step_chain.stationary(steps, most, units, rate, idle, self._arrival_rows)
            except np.linalg.LinAlgError:  # no single stationary law (never met): the Poisson count stands
                return None
            # near capacity the backlog outgrows the states followed (QA: 5 % of the mass in the last one at
            # 0.99 of the capacity with 4 prompts' backlog): follow twice as many while there is room
            if law[-1] <= CHAIN_TAIL or most + 2 * backlog + 1 > MAX_CHAIN_STATES:
                return _ChainLaw(law, steps, unit, most)
            backlog *= 2

    def _chain_units(self, room: float) -> tuple[int, float, int]:
        """(the units of a prompt, a unit's tokens, the units a step takes) of the step chain for a step's `room`
        of prompt tokens. One unit a prompt where more than CHAIN_FINE_PROMPTS fit a step; otherwise at least
        CHAIN_UNITS a prompt (at least that many a step where a prompt is chunked), as many as bring a whole
        number of units closest to the room: a step that takes whole units of L / 4 left up to a unit of its
        budget unused (8,192-token prompts on an 8,190-token room ran 6,554 tokens a step and carried a fifth
        of every prompt to the next, where vLLM carries 2 tokens: TPOT 10.8 % off the simulator at 8,192 /
        256, 2026-12-04)."""
        if room > CHAIN_FINE_PROMPTS * self.L:
            return 1, self.L, max(int(room // self.L), 1)
        if self._units is None:
            self._units = self._units_for_budget()
        units, unit = self._units
        return units, unit, max(round(room / unit), 1)

    def _units_for_budget(self) -> tuple[int, float]:
        """_chain_units' units, chosen once for the shape from the whole budget (QA: chosen at each y's room they
        flipped between neighbouring rates, and a choice whose chain outgrew MAX_CHAIN_STATES fell back to the
        Poisson count there, so TPOT dropped up to 9 % between neighbouring rates and a capacity could sit in
        such a pocket, above rates that miss the target): the closest whole number of units to the budget among
        the counts whose chain fits (the fewest if none does)."""
        room = float(self.budget)
        fewest = max(CHAIN_UNITS, math.ceil(CHAIN_UNITS * self.L / room))
        best: tuple[float, int, float] | None = None
        for units in range(fewest, 2 * fewest + 1):
            unit = self.L / units
            most = max(round(room / unit), 1)
            fits = most + _chain_backlog(units, most) + 1 <= MAX_CHAIN_STATES
            if best is not None and not fits:
                continue
            miss = abs(most * unit - room) / room
            if best is None or miss < best[0] - 1e-12:
                best = (miss, units, unit)
        assert best is not None
        return best[1], best[2]

    def _arrival_rows(self, means: NDArray[np.float64], terms: int) -> NDArray[np.float64]:
        """The step chain's arrival law: Poisson, or the Polya-Aeppli count of bursty clumps
        (prompts_per_step, its last entry holding the tail)."""
        if self.clump == 1.0:
            return step_chain.poisson_rows(means, terms)
        rows = np.zeros((means.size, terms))
        for i, mean in enumerate(means):
            pmf = prompts_per_step(float(mean), self.clump, terms - 1)
            rows[i, :len(pmf)] = pmf
        return rows

    def request_step(self, y: float) -> float:
        """The mean step a Poisson request decodes in (its TPOT): longer than the mean step E(y), because the
        decode batch swings and a request spends more of its decode in the steps where more sequences run --
        and always runs with itself (E(y) at a mean batch below one averages in the empty engine).

        Each sequence gets one token a step and the step grows with the batch, so the decode phase is a
        symmetric queue (processor sharing at a total rate of j / T(j) tokens/s with j sequences), whose
        stationary batch is insensitive to the output lengths:

            pi(j) ~ prod_{i <= j} rate O T(i) / i,    TPOT = E[j] / (rate O)   (Little's law on the decode)

        T(j) is the mean step with j decoding, its share of prompt steps included: T(j) = P(j) / (1 - e (Q(j) -
        P(j))), P and Q the steps without and with x1 prompt tokens (Q with the mean batch's Jensen gap,
        prompt_step: the bend moves little over the batches the chain visits), e the prompt steps a second. Taken as
        a + c j over the batches the chain visits (the secant through the mean-field batch b -+ sqrt(b), j >= 1),
        pi is negative binomial and

            TPOT = (a + c) / (1 - beta),   beta = rate O c

        (T(b) + c / (1 - beta) where T is affine: the mean step plus the swing). The prompt stalls widen that
        swing (a prompt step stalls every decode at once: dispersion, 2026-12-05), so a request meets
        TPOT = (a + c (D_a + (D - D_a) (1 - beta) / (1 - beta_p))) / (1 - beta), the secant over b -+ sqrt(D b)
        (dispersion). Summing the chain itself over T(j) at 24 batches agreed within 0.1 % on dense models and
        was 0-5 % lower on MoE ones, whose step is concave in the batch (the experts touched saturate), but made
        `solve` 4x slower; the secant stays.

        Against 3,000 simulated Poisson requests at the same rate (dense Llama-3.x, Qwen3-32B FP8 on H100 /
        L40S; gpt-oss-20b / -120b, Qwen3-30B-A3B on H100 / A100 / A40) the mean step was 0.1-1.5 % fast on the
        dense models and 0.2 % slow to 66 % fast on the MoE ones (Qwen3-30B-A3B FP8 on an A40 at 0.25
        requests/s: 8.06 ms, simulated 13.37: a lone sequence's step is 12 ms, the empty engine's 4); this was
        0.0-0.8 % fast on the dense ones and 2.5 % slow to 11 % fast on the MoE ones (gpt-oss-120b on an A100
        at 3,000/300: its long prompt steps stall every decode at once, a swing T(j) smears) before the stalls'
        swing; with it (benchmarks/open_loop_latency.py, 41 points) TPOT is within a median 1.3 % (2.8 % before),
        dense models with long prompts 0.1-1.7 % fast, gpt-oss-120b on an A100 0.8-3.2 % slow (8-11 % fast
        before), Qwen3-30B-A3B FP8 on an A40 at 0.25 requests/s 8.2 % slow (4.6 % before)."""
        q, plain, prompt = self.steps(y)
        mean = self._mean(q, plain, prompt)  # mean_step(y), without evaluating the steps again
        if y <= 0.0 or mean <= 0.0:
            return mean
        prompts_per_s = q / mean
        x1 = self.prompt_tokens(y)
        gap = prompt - self.step(self.decoding(y), x1) if q > 0 else 0.0  # Jensen's gap at the mean batch (prompt_step)

        def t(j: float, p_j: float) -> float:  # the mean step with j decoding (p_j without prompts), prompts included
            unstalled = 1.0 - prompts_per_s * (self.step(j, x1) + gap - p_j) if q > 0 else 1.0
            return p_j / unstalled if unstalled > 0 else math.inf

        b = self.decoding(y)
        stall = self._stall_share(q, plain, prompt, mean)
        if stall >= 1.0:
            return math.inf
        # the stalls' swing builds over a request's life: lives of a few steps spend it in the decode window
        # (decode_window, which carries the stalls they meet); ramped in, no cliff in the output length
        dispersion = self.dispersion(b, stall * min(self.decodes / STALL_RAMP_DECODES, 1.0))
        lo, hi = _visited_batches(b, dispersion)
        p_lo, p_hi = self.step(lo, 0.0), self.step(hi, 0.0)
        t_lo, t_hi = t(lo, p_lo), t(hi, p_hi)
        if not math.isfinite(t_hi):
            return math.inf
        c = max((t_hi - t_lo) / (hi - lo), 0.0)
        beta = y / mean * self.decodes * c
        plain_beta = y / mean * self.decodes * max((p_hi - p_lo) / (hi - lo), 0.0)
        if beta >= 1.0:
            return math.inf
        # the batch swings D / (1 - plain_beta) times its mean (dispersion), the chain's own T(j) 1 / (1 - beta):
        # the stalls' excess over the arrivals' own D_a enters at that ratio, so without stalls this is the
        # chain's D_a whatever the two betas (QA: D (1 - beta) / (1 - beta_p) made TPOT fall with the load where
        # a stall-free mean batch sat beside batches whose prompt steps stall, Qwen2.5-0.5B at 3,000 / 300)
        arrivals = self.dispersion(b)
        swing = arrivals + (dispersion - arrivals) * (1.0 - beta) / (1.0 - plain_beta)
        return (t_lo - c * lo + c * swing) / (1.0 - beta)

    def population_peakedness(self, y: float) -> float:
        """The running population's variance over its mean under Poisson arrivals (its peakedness z, the
        traffic's on a cache of unlimited room): above 1, because a request's lifetime grows with the load that
        arrives during it. A prompt arriving while n requests decode stalls all n for its step's extra over a
        plain step (s: the time share of those stalls, prompt steps a second x their extra); in that extra time
        more prompts arrive, each stalling again. The requests in decode are then the arrivals of a window
        that each arrival widens: a branching process whose progeny per Poisson ancestor is Borel(s) (mean
        1 / (1 - s), second moment 1 / (1 - s)^3), so their count's variance over its mean is 1 / (1 - s)^2.
        Each sequence decoding also slows the others' steps (c a sequence: the decode chain of request_step,
        whose batch is negative binomial, variance over mean 1 / (1 - beta), beta = rate (O - 1) c). Together

            z = 1 / ((1 - s)^2 (1 - beta)).

        Against the simulator's running count (time-weighted over 3,000 requests after warm-up, with 20x the
        KV cache and max_num_seqs 4,096 so that nothing waits), at 3,000 / 300 tokens: gemma-3-27b on an H100
        at 0.5 / 0.7 / 0.82 requests/s 1.40 / 1.85 / 2.13 (this 1.44 / 1.69 / 1.88); Llama-3.1-8B on an A100 at
        1 / 2 / 2.4: 1.68 / 3.79 / 5.56 (1.76 / 3.55 / 4.94); gpt-oss-120b on an A100 at 0.6 / 1.0 / 1.3: 1.43 /
        3.58 / 4.57 (1.89 / 3.05 / 4.01); Qwen3.5-35B-A3B on an H100 at 1.4 / 1.6 / 1.8: 1.64 / 1.96 / 2.27
        (1.86 / 2.04 / 2.23), and at 200 / 800 tokens, 0.7 / 0.8 / 0.9: 1.53 / 1.72 / 1.87 (1.78 / 1.94 / 2.10).
        M/M/c's Poisson count (z = 1, until 2026-12-04) found the cache full 10-100x too rarely where prompts
        are long: gemma at 0.82 requests/s spends 1.2 % of the time within a place of its limit, a Poisson
        count at its mean 0.08 % (queueing.kv_wait_s takes z)."""
        if y <= 0.0:
            return 1.0
        q, plain, prompt = self.steps(y)
        mean = self._mean(q, plain, prompt)
        if mean <= 0.0 or not math.isfinite(mean):
            return math.inf
        stall = self._stall_share(q, plain, prompt, mean)
        beta = self.decode_beta(y, mean)
        if stall >= 1.0 or beta >= 1.0:
            return math.inf
        return 1.0 / ((1.0 - stall) ** 2 * (1.0 - beta))

    def decode_beta(self, y: float, mean: float) -> float:
        """beta = rate (O - 1) c: how much each sequence decoding slows the others (c the plain step's slope in the
        batch over the batches visited, the rate y / mean): the decode population's self-slowing, which
        widens its swings (population_peakedness) and slows its return to steady state (relaxation)."""
        b = self.decoding(y)
        if b <= 0.0 or mean <= 0.0:
            return 0.0
        lo, hi = _visited_batches(b)
        c = max((self.step(hi, 0.0) - self.step(lo, 0.0)) / (hi - lo), 0.0)
        return y / mean * self.decodes * c

    @staticmethod
    def _stall_share(q: float, plain: float, prompt: float, mean: float) -> float:
        """s, the share of the time every decode is stalled by a prompt: prompt steps a second (q / mean) x
        their extra over a plain step."""
        return q / mean * max(prompt - plain, 0.0) if mean > 0.0 else 0.0

    def dispersion(self, batch: float, stall: float = 0.0) -> float:
        """D: the decode batch's variance over its mean is D / (1 - beta_p), beta_p = rate (O - 1) x the plain
        step's slope in the batch (each decoding sequence slows the others: decode_beta). A request decodes in
        steps of mean a + c E[j^2] / E[j] = a + c (E[j] + variance / mean), and Little's law closes it. The
        processor-sharing chain of request_step swings D_a / (1 - beta) (beta its own slope's, the prompt
        steps' share in it), so the stalls' excess over the arrivals' D_a enters at (1 - beta) / (1 - beta_p):
        TPOT = (a + c (D_a + (D - D_a) (1 - beta) / (1 - beta_p))) / (1 - beta), the chain's (a + c D_a) /
        (1 - beta) without stalls.

        The arrivals: Poisson ones give 1 (the chain above). Renewal arrivals whose gaps have a squared
        coefficient of variation cv2 (gamma of shape b: 1 / b) give -> cv2 when a request lives many gaps (the
        batch is the arrivals of one lifetime, whose count varies as cv2 x its mean) and -> 1 when the engine
        is mostly empty (a lone arrival at a time, whatever the process); the mean batch weighs the two:
        D_a = (1 + cv2 x batch) / (1 + batch).

        The stalls: a prompt step stalls every decode at once, for its extra over a plain step (`stall`, s,
        the share of the time those extras take), and the arrivals of that time stall them again: each
        arrival brings a Borel(s) progeny of requests whose lives it stretched (population_peakedness: mean
        1 / (1 - s), variance s / (1 - s)^3), so the batch is a compound count with variance over mean

            D = (s + D_a (1 - s)) / (1 - s)^2        (1 / (1 - s)^2 for Poisson arrivals).

        The chain's T(j) has the stalls in its mean but not in its swing: until 2026-12-05 the swing was the
        chain's alone, and TPOT was 1-6 % short of the simulator's on dense models wherever long prompts stall
        the decodes (Llama-3.1-8B on an A100 at 3,000 / 300 and 2 requests/s: 28.18 ms, simulated 29.69; the
        simulator's decode batch swings 3.9x its mean, this chain 1.4x, z 3.5), 9-11 % on gpt-oss-120b on an
        A100 (16.41 for 18.49 at 1.0 requests/s); now 29.28 (simulated 29.47 after the relaxed warm-up,
        steady_state.relaxed_warmup) and 18.85 (18.27). Tried: the whole peakedness as the swing, the stalls'
        amplification of the slope counted twice, overshot gpt-oss-120b 1.09-1.12x; D (1 - beta) / (1 - beta_p)
        for the whole swing was within 2 % but not the chain's D_a without stalls, and TPOT fell with the load
        where a stall-free mean batch sat beside batches whose prompt steps stall (QA: Qwen2.5-0.5B at
        3,000 / 300 on an H100, 33.91 -> 33.48 ms as y rose, three roots for one target)."""
        cv2 = self.arrival_cv2
        arrivals = 1.0 if cv2 == 1.0 else (1.0 + cv2 * batch) / (1.0 + batch)
        if stall <= 0.0:
            return arrivals
        return (stall + arrivals * (1.0 - stall)) / (1.0 - stall) ** 2

    def y_at_request_step(self, target_s: float) -> float:
        """The y whose request step (TPOT under Poisson arrivals) is `target_s`: 0 when even an empty step is
        longer."""
        return self._y_at(self.request_step, target_s)

    def y_at_rate(self, rate: float) -> float:
        """The steady state's y at `rate`: the root of rate E(y) = y (inf when steps outgrow arrivals)."""
        if rate <= 0.0:
            return 0.0
        if not math.isfinite(rate):
            return math.inf

        if self._root is not None and self._root[0] == rate:
            return self._root[1]

        def f(y: float) -> float:  # positive at 0, negative past the root
            return rate * self.mean_step(y) - y

        if self._root is not None and math.isfinite(self._root[1]) and self._root[1] > 0.0:
            # a capacity search asks for rates close together: start from the last root scaled by the rate
            # (y = rate E(y), E moving less than the rate), a bracket a few % wide (QA, 2026-12-05: 9.8
            # evaluations of E a steady state inside max_rate, counting settle's, where there were 12.7)
            lo, hi, f_lo, f_hi = _bracket_near(f, self._root[1] * rate / self._root[0], 0.0, None)
        else:
            lo, f_lo = 0.0, f(0.0)  # rate E(0)
            hi = max(2 * f_lo, 1e-9)
            f_hi = f(hi)
            while f_hi > 0.0 and hi <= NO_STEADY_Y:
                lo, f_lo, hi = hi, f_hi, hi * 4
                f_hi = f(hi)
        y = math.inf if f_hi > 0.0 else _crossing(f, lo, hi, ROOT_TOLERANCE, f_lo, f_hi)[1]
        if y >= NO_STEADY_Y:  # the same edge whichever bracket found it (QA: cold 4e9 and warm 1e9 had differed)
            y = math.inf
        self._root = (rate, y)
        return y

    def settle(self, rate: float) -> float:
        """An open loop's y at `rate`, its steps taken from the step chain (physics/step_chain.py) where there
        is one: the root of rate E(y) = y with E the chain's mean step, and steps() / prompt_tokens() at that y
        the chain's (the share of steps carrying prompts, their mean step, the prompt tokens they carry).

        The Poisson count at y (steps, y_at_rate) puts k1 = y / (1 - e^-y) prompts in a prompt step; but a long
        step gathers the prompts of a later one, so prompts bunch: fewer steps carry them, each carries more,
        and the mean step is longer. Llama-3.1-8B at 1,000 / 250 on an H100 at 15 requests/s: the simulator's
        steps (jumps off, 10,000 after warm-up) carry prompts 25.7 % of the time, 1,219 tokens and 40.6 ms each,
        20.91 ms on average, a decode 21.42 ms weighted by its tokens; the Poisson count says 26.6 %, 1,163
        tokens, 38.8 ms, 20.65 ms; the chain at the same y 25.5 %, 40.6 ms, 20.81 ms. That 2-3 % of TPOT at
        60-70 % of capacity was most of the TPOT-bound capacities' optimism (benchmarks/surrogate_capacity.py).

        The root is the Poisson one moved by one Newton step on the chain's E, with the Poisson E's slope
        (rate x dE/dy), the chain's law kept and its steps moved with the plain step's decodes there: one chain
        a point. Below ~90 % of capacity the step lands within ~1 % of the chain's own root; at the scheduler's
        limit the slope nears 1 and it overshoots (QA: Llama-3.1-8B at 1,000 / 250 on an H100 at its limit,
        y 9 % past the chain's root, capacity 0.4 % and TPOT 0.7 % off, inside the search's tolerance), where
        iterating would take two or three more chains a point. One-token outputs, whose chain idles (nothing
        decodes between prompts), and shapes without a chain keep the Poisson steps; so do closed loops (their
        clients send as steps end)."""
        y = self.y_at_rate(rate)
        if self.decodes == 0 or not math.isfinite(y) or y <= 0.0:
            return y
        first = self._chain(y, rate, 0.0)
        if first is None:
            return y
        h = 1e-4 * y
        slope = (rate * self.mean_step(y + h) - y) / h  # rate E(y) = y at the root (to ROOT_TOLERANCE of y)
        if slope >= 1.0:
            return y
        # the Newton step, at most SETTLE_MOVE of y: near saturation the slope nears 1 and the step grows
        # without bound (QA: gpt-oss-20b at 8,000 / 300 on an A100 at 1.54 requests/s settled at y 0.0021 for a
        # Poisson root of 0.094, steps whose prompt stalls took 95 % of the time, and a TPOT of 977 ms between
        # rates of 77 and 89 ms: a pocket max_rate landed above); clamped, it stays continuous in the rate
        move = (rate * first.mean() - y) / (1.0 - slope)
        settled = y + max(min(move, SETTLE_MOVE * y), -SETTLE_MOVE * y)
        # the law stays the one at y (a step's arrivals move with it by the ~1 % the root moved); its steps
        # carry the decodes of the settled y: each state's step moves as the plain step does
        shift = self.step(self.decoding(settled), 0.0) - float(first.steps[0])
        chain = _ChainLaw(first.law, first.steps + shift, first.unit, first.most)
        self._last_chain = ((settled, rate, 0.0), chain)
        self._chained = (settled, chain.kinds(), chain.prompt_tokens())
        return settled

    def y_at_step(self, target_s: float) -> float:
        """The y whose mean step is `target_s` (E is increasing): 0 when even an empty step is longer."""
        return self._y_at(self.mean_step, target_s)

    def _y_at(self, step: Callable[[float], float], target_s: float) -> float:
        """The y at which `step` (increasing) reaches `target_s`, from near the last such y (a capacity search
        aims at targets close together)."""
        if math.isnan(target_s):
            raise ValueError("a target step must be a number")  # QA: NaN sent the bracket search round for ever
        f_floor = target_s - step(0.0)
        if f_floor <= 0.0:
            return 0.0
        if math.isinf(target_s):
            return math.inf

        def f(y: float) -> float:
            return target_s - step(y)

        if self._aimed is not None:
            lo, hi, f_lo, f_hi = _bracket_near(f, self._aimed, 0.0, f_floor)
        else:  # the first: the chord through y = 0 and 1 extrapolated, or [0, 1] where it holds the crossing
            f_one = f(1.0)
            if f_one < 0.0:
                lo, hi, f_lo, f_hi = 0.0, 1.0, f_floor, f_one
            else:
                guess = min(f_floor / max(f_floor - f_one, 1e-300), NO_STEADY_Y)
                lo, hi, f_lo, f_hi = _bracket_near(f, guess, 1.0, f_one, 0.1)
        if f_hi >= 0.0:
            return math.inf
        y = _crossing(f, lo, hi, ROOT_TOLERANCE, f_lo, f_hi)[0]
        self._aimed = y if y > 0.0 else None
        return y


def _bracket_near(f: Callable[[float], float], guess: float, floor: float, f_floor: float | None,
                  width: float = 0.02) -> tuple[float, float, float, float]:
    """(lo, hi, f(lo), f(hi)) with f(lo) >= 0 > f(hi) around the zero of a decreasing-through-zero f believed
    near `guess`: f at the guess, then steps away from it (the first `width` x guess) that double until f
    changes sign, never below `floor` (whose f, >= 0, is `f_floor`, or evaluated when reached); f(hi) stays >= 0
    where f is positive past NO_STEADY_Y."""
    if not math.isfinite(guess) or guess <= floor:
        guess = floor + 1.0
    f_guess = f(guess)
    step = max(guess * width, 1e-12)
    if f_guess >= 0.0:
        lo, f_lo = guess, f_guess
        while True:
            hi = lo + step
            f_hi = f(hi)
            if f_hi < 0.0 or hi > NO_STEADY_Y:
                return lo, hi, f_lo, f_hi
            lo, f_lo, step = hi, f_hi, step * 2
    hi, f_hi = guess, f_guess
    while True:
        lo = hi - step
        if lo <= floor:
            return floor, hi, f(floor) if f_floor is None else f_floor, f_hi
        f_lo = f(lo)
        if f_lo >= 0.0:
            return lo, hi, f_lo, f_hi
        hi, f_hi, step = lo, f_lo, step * 2


def _crossing(f: Callable[[float], float], lo: float, hi: float, rel_tol: float, f_lo: float | None = None,
              f_hi: float | None = None) -> tuple[float, float]:
    """A bracket [lo, hi] no wider than rel_tol x hi around the one zero of a decreasing-through-zero f, with
    f(lo) >= 0 >= f(hi) kept throughout (the Illinois variant of regula falsi: a few steps where bisection
    takes dozens). Callers choose the safe end; `f_lo`, `f_hi`: f at the ends where the caller has them."""
    # Python floats: an infinite step (a batch past the engine's limit) is an infinite f, never numpy's overflow
    f_lo = float(f(lo) if f_lo is None else f_lo)
    f_hi = float(f(hi) if f_hi is None else f_hi)
    if f_lo <= 0.0:
        return lo, lo
    if f_hi >= 0.0:
        return hi, hi
    side = 0
    for _ in range(200):
        width = rel_tol * abs(hi)
        if hi - lo <= width:
            break
        slope = (f_hi - f_lo) / (hi - lo)
        t = lo - f_lo / slope
        if not (lo < t < hi and math.isfinite(slope)):
            t = (lo + hi) / 2  # rounding pushed the secant point out, or an end is infinite: bisect once
        value = float(f(t))
        if value == 0:
            return t, t
        # where the secant says the zero is within half the tolerance of t, probe that far past it: one
        # evaluation closes the bracket, where Illinois' halving of the stale end takes three or four (a solve
        # asks for ~12,000 such zeros, most of a nearly straight f; 8.3 evaluations each until 2026-12-05). The
        # tolerance is t's own, not the bracket's far end's (QA: from a bracket up to 3e9 a probe at 5e-2 closed
        # a bracket 15 times the root wide)
        near = rel_tol * abs(t)
        probe = t - math.copysign(near / 2, value / slope)
        if math.isfinite(slope) and abs(value / slope) < near / 4 and lo < probe < hi:
            beyond = float(f(probe))
            if (beyond <= 0) == (value > 0):
                return (t, probe) if value > 0 else (probe, t)
            t, value = probe, beyond
            if value == 0:
                return t, t
        if value > 0:
            lo, f_lo = t, value
            if side == -1:
                f_hi /= 2  # halve the stale end so the bracket shrinks from both sides
            side = -1
        else:
            hi, f_hi = t, value
            if side == 1:
                f_lo /= 2
            side = 1
    return lo, hi


def held_kv_tokens(input_tokens: float, output_tokens: float, block_size: int) -> float:
    """KV tokens a running sequence holds on average in steady state. vLLM allocates blocks as a sequence
    grows (KVCacheManager.allocate_slots each step), not for its whole length up front, and the running
    sequences are spread evenly over their decode: a sequence holds its prompt, half its output and half a
    block of rounding. (Before 2026-12-02 the limit charged prompt + whole output: 200/800-token requests of
    Qwen3-30B-A3B on an H100 got 6.1 requests/s where the simulator sustains 10.3.)"""
    return input_tokens + output_tokens / 2 + block_size / 2


def held_cache_tokens(pool: KvPool | None, capacity_tokens: int, block_size: int, input_tokens: float,
                      output_tokens: float) -> float:
    """What a running sequence holds on average, in the units of `capacity_tokens` (the KV tokens of requests
    of max_model_len: MemoryEstimate.effective_kv_tokens): its blocks in every group of `pool`
    (KvPool.blocks_held over held_kv_tokens) as a share of the pool. For a model with one full-attention
    group (or no pool: `block_size` is then its block) this is held_kv_tokens; a hybrid's short request holds
    its state pages besides, a sliding-window model's its tokens in the window groups too."""
    if pool is None or (pool.window_groups == 0 and pool.state_groups == 0):
        return held_kv_tokens(input_tokens, output_tokens, pool.block_size if pool else block_size)
    held = held_kv_tokens(input_tokens, output_tokens, pool.block_size)
    return pool.blocks_held(held) / pool.num_blocks * capacity_tokens


def run_places(r: Replica, input_tokens: float, output_tokens: float) -> float:
    """Requests of this size that run at once: what the KV cache holds without preempting (kv_places), at most
    max_num_seqs."""
    return min(kv_places(r, input_tokens, output_tokens), r.config.max_num_seqs)


def kv_places(r: Replica, input_tokens: float, output_tokens: float) -> float:
    """Requests of this size the KV cache runs at once without one outgrowing it.

    vLLM admits a prompt while its blocks are free and does not reserve the output (a request grows a block at
    a time; when none is free the newest running request is preempted and recomputed). The running requests'
    ages are independent and uniform over the output, so n of them hold n x held on average (held: prompt,
    half the output and half a block, replica_held_tokens) swinging by sqrt(n) x O / sqrt(12); the cache runs
    them without preempting while the mean plus queueing.KV_SWING_SD such deviations fit: n is the positive
    root of n held + k sqrt(n) s = KV (s one request's swing in the pool's units), and never below the
    requests whose whole length fits at once (the normal approximation overstates the swing of a few).

    Counting n at the mean (KV / held, until 2026-12-03) was optimistic where outputs dwarf prompts: 200/800
    requests of Qwen3-30B-A3B on an H100 were 6.48 requests/s within 2 s / 40 ms where 4,000 simulated ones
    hold 6.1 and collapse at 6.3 (now 6.16); 64 clients of Llama-3.1-8B 200/800 were planned on one RTX 4090,
    whose closed loop collapses at 68 clients (393 preemptions, mean TTFT 1.5 s; the places are 61.5)."""
    held = replica_held_tokens(r, input_tokens, output_tokens)
    spread = held / held_kv_tokens(input_tokens, output_tokens, r.config.block_size)  # the pool's units
    k = queueing.KV_SWING_SD * output_tokens / math.sqrt(12) * spread
    kv = float(r.kv_capacity_tokens)
    root = (-k + math.sqrt(k * k + 4 * held * kv)) / (2 * held)
    return max(root * root, kv / replica_held_tokens(r, input_tokens + output_tokens, 0))


def replica_held_tokens(r: Replica, input_tokens: float, output_tokens: float) -> float:
    """held_cache_tokens for a replica's pool."""
    return held_cache_tokens(r.kv_pool, r.kv_capacity_tokens, r.config.block_size, input_tokens, output_tokens)


def at_rate(r: Replica, rate: float, input_tokens: int, output_tokens: int,
            mix: _StepMix | None = None, poisson: bool = True, burstiness: float = 1.0) -> LoadPoint:
    """Steady state at `rate` requests/s. `mix`: the shape's _StepMix when the caller has one (its arrival
    variability is then the one used). `poisson`: the arrivals are an open loop's (Poisson), whose swings make
    requests wait for KV room near the cache's limit (queueing.kv_wait_s, in TTFT); a closed loop's population
    is its clients, which never swings (at_concurrency passes False). `burstiness`: the open loop's gamma shape
    (`vllm bench serve --burstiness`, 1 is Poisson): its queues wait cv2 = 1 / b times as long as Poisson's
    (Kingman's G/G/1 heavy-traffic factor (cv2 + cs2) / 2 over M/D/1's 1 / 2, for the prompt and API-server
    queues of fixed service; Allen-Cunneen's (cv2 + 1) / 2 on the KV places' M/M/c wait), and its decode
    batch swings wider (_StepMix.dispersion)."""
    cfg = r.config
    context = input_tokens + output_tokens / 2
    budget = cfg.max_num_batched_tokens
    # the mean engine step T at `rate`: T = E(y) at the y with y = rate E(y) (_StepMix, built once per replica
    # and request shape by callers that ask for many rates); infinite when the replica cannot keep up
    mix = mix or _StepMix(r, input_tokens, output_tokens, _loop_cv2(poisson, burstiness))
    cv2 = mix.arrival_cv2
    y = mix.settle(rate) if poisson else mix.y_at_rate(rate)
    t = mix.mean_step(y) if math.isfinite(y) else math.inf
    if not math.isfinite(t):
        return LoadPoint(requests_per_second=rate, concurrency=math.inf, running=math.inf, step_ms=math.inf,
                         tpot_ms=math.inf, ttft_ms=math.inf, output_tokens_per_second=rate * output_tokens,
                         stable=False, limit="steps grow without bound: the replica cannot keep up")
    # y = rate T requests reach the engine a step; each runs in O steps -- the (last) prefill step that yields
    # its first token, then O - 1 decodes -- so a step decodes b = (O - 1) y sequences beside the prompts and
    # runs O y in all (Little's law: the places, max_num_seqs and the KV cache count these)
    b = rate * max(output_tokens - 1, 0) * t
    running = rate * max(output_tokens, 1) * t
    p = rate * input_tokens * t
    held = replica_held_tokens(r, input_tokens, output_tokens)
    front = frontend_s(r, input_tokens)
    places = run_places(r, input_tokens, output_tokens)
    limit = None
    if rate * front >= 1.0:
        limit = (f"the API server handles one request at a time, {front * 1e3:.2f} ms each: at most "
                 f"{1 / front:,.1f} requests/s")
    elif b + p > budget:
        limit = f"needs {b + p:,.0f} tokens per step, above max_num_batched_tokens {budget:,}"
    elif running > cfg.max_num_seqs:
        limit = f"needs {running:,.0f} running sequences, above max_num_seqs {cfg.max_num_seqs}"
    elif running * held > r.kv_capacity_tokens:
        limit = f"needs {running * held:,.0f} KV tokens, above the cache's {r.kv_capacity_tokens:,}"
    elif running > places:
        limit = (f"needs {running:,.1f} running sequences, above the {places:,.1f} whose KV the cache holds "
                 f"without preempting as their ages swing ({queueing.KV_SWING_SD:g} standard deviations)")
    elif poisson and places >= 2 * queueing.SPARE_PLACES and running > places - queueing.SPARE_PLACES:
        limit = (f"Poisson arrivals keep {running:,.1f} of the {places:,.1f} requests the KV cache and "
                 f"max_num_seqs run at once busy: less than one place free on average, so a request waits about "
                 f"a decode for room")
    room = max(budget - b, 1.0)
    service = prefill_steps_s(r, b, context, input_tokens, room)
    rho = min(p / room, 0.999)
    window = _Window(r, mix, y, input_tokens, output_tokens, room, service)
    if poisson:
        # an open loop's arrivals land at random instants, so in the long steps that carry prompts more often
        # than their share (the residual E(T^2) / 2 E(T))
        work = mix.prompt_work_s(y)
        ahead = cv2 * prompt_queue_s(rate, work, service, rho, 1.0)
        clump = clump_wait_s(r, b, context, input_tokens, room, service, cv2, rate)
        queue = ahead + clump
        # a Poisson request decodes in more than the mean step (the batch swings: _StepMix.request_step), and
        # first beside the prompts queued behind it (decode_window)
        tpot = mix.request_step(y) * window.factor(rate, queue)
        # its prompt runs in the step after the one it arrives in, beside those that arrived with it
        # (_StepMix.ride_step), or waits for the prompt work ahead when that is longer (a backlog)
        # after the rest of the step in flight (in_flight) -- or, when a prompt is in service, of that
        # prompt's steps, which the prompt queue's wait holds beside the prompts queued behind it
        residual, in_plain, in_prompt = mix.in_flight(y, rate)
        queued = cv2 * prompt_queue_s(rate, work, service, rho, 1.0, queued_only=True)
        ttft = (r.cal.server_overhead_ms * 1e-3 + front + in_plain + max(in_prompt, ahead - queued)
                + async_lag_s(r, b, t) + max(service + queued, mix.ride_step(b, y, rate * 2 * residual)) + clump)
        # Poisson arrivals queue at the API server (one at a time, M/D/1) and for room to run: the cache holds
        # kv_capacity / held such requests, max_num_seqs caps them, each holds its place for its decode (vLLM
        # admits the head of its waiting queue only when its prompt's blocks are free and a sequence slot is)
        busy = min(rate * front, 0.999)
        ttft += cv2 * front * busy / (2 * (1 - busy))
        if math.isfinite(tpot):
            hold = place_held_s(service, output_tokens, tpot)
            servers = fill_places(r, input_tokens, output_tokens)
            ttft += (cv2 + 1) / 2 * queueing.kv_wait_s(servers, rate * hold, hold, mix.population_peakedness(y))
    else:
        ttft, tpot = _closed_loop(r, mix, window, rate, y, b, running, t, context, input_tokens, output_tokens, room,
                                  service, rho, front)
    if not math.isfinite(tpot) and limit is None:
        limit = ("the decode batch's swings grow without bound: each sequence a step adds costs the others more "
                 "than the arrivals leave room for")
    concurrency = rate * (ttft + max(output_tokens - 1, 0) * tpot)
    return LoadPoint(requests_per_second=rate, concurrency=concurrency, running=running, step_ms=t * 1e3,
                     tpot_ms=no_tpot_below_two(tpot * 1e3, output_tokens), ttft_ms=ttft * 1e3,
                     output_tokens_per_second=rate * output_tokens, stable=limit is None, limit=limit)


def relaxation(r: Replica, input_tokens: float, output_tokens: float, rate: float) -> float:
    """How many times slower than its requests' lifetime the decode population returns to its steady state after a
    swing: 1 / (1 - beta) (_StepMix.decode_beta), inf where the decodes' mutual slowing has no steady state.

    The mean-field population N = rate O T(N), T(N) = a + c N, answers a deficit at rate (1 - beta) / (O T):
    each request that leaves lets the others' steps shorten, so the rest leave later. Llama-3.1-8B at 200 / 800
    on an H100 at 17 requests/s: beta 0.87, lifetimes of 34 s, a relaxation of ~250 s (the simulator's TPOT
    over 9,000 requests rose 34 -> 49 ms by sixths of the run, the steady state's 42.8)."""
    if rate <= 0.0:
        return 1.0
    mix = _StepMix(r, max(int(round(input_tokens)), 1), max(int(round(output_tokens)), 1))
    y = mix.y_at_rate(rate)
    if not math.isfinite(y):
        return math.inf
    beta = mix.decode_beta(y, mix.mean_step(y))
    return math.inf if beta >= 1.0 else 1.0 / (1.0 - beta)


def place_held_s(prefill_s: float, output_tokens: int, tpot_s: float) -> float:
    """How long a request holds its place in the KV cache: from its admission -- vLLM admits a prompt when its
    first chunk's blocks are free and allocates the rest chunk by chunk, so a long prompt claims its room
    through its prefill -- to its last token, a decode of O request steps. Counting the decode alone
    (until 2026-12-04) left out seconds where prompts span several budgets on a small cache: Llama-3.1-8B at
    8,000 / 64 on an L4 (1.8 s of prefill beside 7 s of decode, 3 such requests in the cache) was planned at
    0.18 requests/s within a 3.25 s TTFT where the simulator's steady state holds 0.135."""
    return prefill_s + max(output_tokens, 1) * tpot_s


def fill_places(r: Replica, input_tokens: float, output_tokens: float) -> float:
    """The servers of the queue for KV room (queueing.kv_wait_s): the requests of this size the cache holds at
    its mean fill, KV / held, at most max_num_seqs. Not kv_places, the requests it runs without ever preempting
    (the stability limit of at_rate): near the cache's edge vLLM runs more than those and preempts the newest
    when their ages line up, which delays a few decodes but admits the waiting prompts sooner. Counting whole
    kv_places (until 2026-12-04) charged waits the simulator does not see, hidden until then by a Poisson
    population (queueing.kv_wait_s's peakedness): Llama-3.1-8B at 8,000 / 64 on an L4 (3.9 places either
    way) at 0.08 / 0.11 / 0.135 requests/s, simulated mean TTFT 2,539 / 2,818 / 3,192 ms, whole places with the
    population's peakedness 2,624 / 3,266 / 4,425, the mean fill 2,481 / 2,777 / 3,182; Qwen3-32B FP8 on an
    L40S at 1,000 / 500 (20.8 places, a mean fill of 22.4) at 0.47 requests/s, 80 % of its limit: simulated
    757 ms, whole places 1,394 (1,422 before 2026-12-04), the mean fill 628."""
    return min(r.kv_capacity_tokens / replica_held_tokens(r, input_tokens, output_tokens), r.config.max_num_seqs)


def no_tpot_below_two(tpot_ms: float, output_tokens: int) -> float:
    """TPOT as `vllm bench serve` reports it: the time per output token after the first, which a one-token
    output does not have (its metrics count TPOT only where output > 1, and a run of such requests reports 0,
    as the simulator does). A TPOT target then holds trivially (QA: a 1-token output got an 8.4 ms TPOT that a
    10 ms target cut the capacity for, 34.8 -> 10.9 requests/s)."""
    return tpot_ms if output_tokens > 1 else 0.0


class _Window:
    """The decode window of one request shape at one steady state (decode_window.window_factor's inputs): the
    two kinds of step, the prompt tokens a prompt step carries, and the request's own last prefill step (its
    last chunk and the room it leaves to the prompts queued behind)."""

    def __init__(self, r: Replica, mix: _StepMix, y: float, input_tokens: int, output_tokens: int, room: float,
                 service: float) -> None:
        self.r, self.L, self.O, self.service = r, input_tokens, output_tokens, service
        _, self.plain, self.prompt = mix.counted_steps(y)
        self.x1 = mix.counted_prompt_tokens(y) if input_tokens > 0 else 0.0
        chunks = max(math.ceil(input_tokens / room), 1)
        self.last = input_tokens - (chunks - 1) * room
        self.spare = max(room - self.last, 0.0)
        self.room = room

    def factor(self, rate_behind: float, queue_s: float) -> float:
        """The window's mean step over the mean step, prompts arriving behind at `rate_behind` (the others')
        after a wait of `queue_s` for the prompts ahead."""
        if self.x1 <= 0 or self.prompt <= self.plain:
            return 1.0
        last_step = self.plain + (self.prompt - self.plain) * min(self.last / self.x1, 1.0)
        before = rate_behind * max(queue_s + self.service - last_step, 0.0)
        return window_factor(rate_behind, self.L, self.O, self.plain, self.prompt, self.x1, before, self.last,
                             self.spare, self.room, self.r.async_scheduling)


def _closed_loop(r: Replica, mix: _StepMix, window: _Window, rate: float, y: float, b: float, running: float,
                 t: float, context: float, input_tokens: int, output_tokens: int, room: float, service: float,
                 rho: float, front: float) -> tuple[float, float]:
    """TTFT and TPOT (s) of a closed loop at `rate`: each client's request meets the other clients' load
    only (the arrival theorem, Schweitzer's approximation: the n - 1 others, n = rate x (TTFT + (O - 1) TPOT),
    solved with them). Its prompt waits for the others' prompts ahead (prompt_queue_s); it decodes in a batch
    of itself and the others decoding (1 + b (n - 1) / n), beside the others' prompt steps -- never its own,
    which is in its TTFT -- and first beside those queued behind it (decode_window). A lone client's request
    is then the idle engine's: batch-1 steps and a prefill (zero_load), where the mean step of the loop had
    put its own prompt into its TPOT (16,000/32 on an H100: 15.1 ms for 8.2) and the steady state had a wait
    for a step in flight on an engine that is idle when the client sends."""
    q = mix.steps(y)[0]
    prompt_steps_per_s = q / t if t > 0 else 0.0
    work = mix.prompt_step_share_s(y)
    steps = max(output_tokens - 1, 0)
    base = r.cal.server_overhead_ms * 1e-3 + front

    def latencies(others: float, factor: float) -> tuple[float, float, float]:
        """TTFT, TPOT and the prompt's queue (s) with `others` of the load ahead and the window's `factor`."""
        batch = 1.0 + b * others
        plain = mix.step(batch, 0.0)
        extra = mix.step(batch, window.x1) - plain if window.x1 > 0 else 0.0
        stall = 1.0 - prompt_steps_per_s * others * extra
        tpot = plain / stall * factor if stall > 0 else math.inf
        queue = prompt_queue_s(rate, work, service, rho, others)
        prefill = max(service + queue, mix.ride_step(b * others, y, y * others))
        return base + step_wait_s(r, running * others, b * others, t) + prefill, tpot, queue

    def others_of(ttft: float, tpot: float) -> float:
        clients = rate * (ttft + steps * tpot)
        return max(clients - 1.0, 0.0) / clients if clients > 0 and math.isfinite(clients) else 1.0

    def settle(others: float, factor: float) -> tuple[float, tuple[float, float, float]]:
        """The others' share where it solves itself, and the latencies there."""
        for _ in range(100):  # a contraction: each pass moves the population less
            found = latencies(others, factor)
            new = others_of(found[0], found[1])
            if abs(new - others) < 1e-9:
                return new, latencies(new, factor)
            others = new
        return others, latencies(others, factor)

    others, (ttft, tpot, queue) = settle(1.0, 1.0)
    factor = window.factor(rate * others, queue)
    if factor != 1.0:
        others, (ttft, tpot, queue) = settle(others, factor)
    return ttft, tpot


def prompt_queue_s(rate: float, work: float, service: float, budget_share: float, others: float,
                   queued_only: bool = False) -> float:
    """Mean wait of a prompt for the prompts ahead of it (vLLM runs waiting prompts first come, first served,
    `room` tokens a step beside the decodes). Two resources can make it wait, and the busier decides:

    - the step budget: prompt tokens take `budget_share` of it (rho = p / room), so with steps of fixed length
      a prompt waits M/D/1's rho / 2 (1 - rho) of its service -- where the prompt hides under a memory-bound
      decode step;
    - the GPU's time: where a prompt makes its steps compute-bound, the steps stretch with the prompt tokens
      they carry, so a prompt waits for the prefill work ahead of it, `work` = S_m a prompt (its share of a
      full prompt step, the decodes in it included: _StepMix.prompt_work_s); the prefill is busy rho_m =
      rate S_m of the time and, for Poisson arrivals, the wait is M/D/1's rho_m S_m / 2 (1 - rho_m).

    `others` is the share of the load a prompt can find ahead of it: 1 for Poisson arrivals; (n - 1) / n in a
    closed loop of n clients, whose prompt never waits for its own client's (the arrival theorem, with
    Schweitzer's approximation: an arriving client sees the loop of the other n - 1): a lone client never
    waits, and 8 clients of 8,192-token prompts that keep an H100's prefill busy wait about 3 prompts, as the
    simulator does (before 2026-12-04 a closed loop kept the budget term alone, and such a loop's TTFT was half
    the simulator's). A closed loop's `work` is _StepMix.prompt_step_share_s, the open loop's prompt_work_s.

    Against 2,000 simulated Poisson requests at the same rate the budget term alone left mean TTFT 5-22 % low
    wherever 1,000-3,000-token prompts load the GPU (Llama-3.3-70B TP4 on H100s at 3,000/300 and 2.4 requests/s:
    438 ms, simulated 575; the prefill busy 49 % of the time, the budget 5 %); with the busier one it is 558
    (gpt-oss-120b on an A100 at 1.3: 411 -> 478, simulated 470; gemma-3-27b at 0.8: 443 -> 486, simulated 476).

    `queued_only`: the wait for the prompts queued ahead, without the rest of the one in service -- M/D/1's
    wait rho S / 2 (1 - rho) is that rest (rho S / 2) and the queue behind it, rho times the whole -- for a
    caller that counts the step in flight itself (at_rate: _StepMix.in_flight)."""
    share = min(budget_share * others, 0.999)
    budget_wait = service * share / (2 * (1 - share))
    busy = min(rate * others * work, MAX_PREFILL_BUSY)
    work_wait = work * busy / (2 * (1 - busy))
    if queued_only:
        return max(share * budget_wait, busy * work_wait)
    return max(budget_wait, work_wait)


def clump_wait_s(r: Replica, decode_seqs: float, context: float, prompt_tokens: int, room: float, service: float,
                 cv2: float, rate: float) -> float:
    """The extra wait of a prompt for the others of its clump (bursty arrivals, clump_size), at `rate`.

    Where clumps arrive at once against a prefill (heavy load), a prompt arrives with cv2 - 1 others on average
    (E[K(K - 1)] / E[K] for geometric clumps); vLLM schedules them first come, first served in the same steps,
    up to `room` tokens a step. When the clump fits one step's room every prompt in it gets its first token at
    the end of that step, the clump's prefill; otherwise the share of it in the first step finishes there and
    the rest chunk by chunk, half the others' prefill later on average: 1/2 + room / (2 x clump). At lighter
    load a clump is spread over time against one prefill: the others that share a prompt's prefill are those
    arriving within its prefill before and after it, more than Poisson's by twice queueing.arrivals_excess
    over `service` (which reaches cv2 - 1 when the prefill spans many gaps); the whole-clump wait is scaled
    by that share of it.

    Against the simulator (gamma gaps of shape 0.5 and 0.25, 1,600 requests, six replicas and request shapes
    at 5-60 % of the Poisson capacity) mean TTFT is within a median 5.6 %, at most 28 % (Llama-3.1-8B on an H100
    at 1,000 / 250 tokens and 13.4 requests/s, shape 0.25: 178 ms, simulated 179, Poisson 101); the whole clump
    at every load was a median 27 % off (a lone L40S's 3,000-token prompts at 0.1 requests/s: 757 ms,
    simulated 411). Near saturation (85 % of the Poisson capacity) the simulated queue of
    clumps grows faster than either (Qwen3-32B FP8 at 3,000 / 300 and 2.1 requests/s, shape 0.25: 3.4 s
    simulated, 1.0 s here): the screen is optimistic there and the simulator decides."""
    others = cv2 - 1.0
    if others <= 0.0:
        return 0.0
    clump_tokens = prompt_tokens * (1.0 + others)
    # a clump past one step's room: the first step's share of it finishes together, the rest chunk by chunk
    # (half the others' prefill on average), continuous at the room (a factor that jumped from 1 to 1/2 there
    # cut a capacity from 1.99 to 0.47 requests/s between shapes 0.12 and 0.125; QA)
    fits = min(room / clump_tokens, 1.0)
    heavy = max(prefill_steps_s(r, decode_seqs, context, math.ceil(clump_tokens), room) - service, 0.0) \
        * (0.5 + 0.5 * fits)
    share = 2.0 * queueing.arrivals_excess(1.0 / cv2, rate, service) / others
    return heavy * min(max(share, 0.0), 1.0)


def frontend_s(r: Replica, prompt_tokens: float) -> float:
    """Time of one request between the client and the scheduler, besides the fixed serving path: the API
    server's per-request work and the per-token work on its prompt (tokenisation, prefix-cache block hashes).
    It is done one request at a time, so a burst queues there (the simulator); in steady state it adds to
    TTFT once."""
    sc = r.serving
    return sc.frontend_ms_per_request * 1e-3 + sc.frontend_us_per_prompt_token * 1e-6 * prompt_tokens


def step_wait_s(r: Replica, running: float, decoding: float, step_s: float) -> float:
    """Mean wait of a closed loop's request for the engine step it cannot join: half a step while the engine
    runs a sequence (the running count taken as Poisson with mean `running`), and the step async scheduling
    lags (async_lag_s). The open loop's wait is _StepMix.in_flight's plus that lag."""
    return (1.0 - math.exp(-running)) * step_s / 2 + async_lag_s(r, decoding, step_s)


def async_lag_s(r: Replica, decoding: float, step_s: float) -> float:
    """The step an arrival waits for beyond the one in flight under async scheduling: vLLM schedules step n+1
    as soon as step n is launched (EngineCore.step_with_batch_queue), so an arrival during step n joins step
    n+2 -- when a sequence goes on decoding after step n (the count taken as Poisson with mean `decoding`); a
    step whose sequences all end in it leaves nothing to schedule beside it, and the arrival joins the next
    step. The simulator does the same step by step (simulator._Engine._schedule_lags).

    Charging the step whenever the engine was busy (until 2026-12-04) put a whole step into the wait of
    one-token outputs, whose requests all end in their prefill step: Llama-3.1-8B at 50 / 1 on an L4 at 20
    requests/s waited 164 ms for its first token, simulated 119 (now 116)."""
    return -math.expm1(-decoding) * step_s if r.async_scheduling else 0.0


def at_concurrency(r: Replica, clients: float, input_tokens: int, output_tokens: int) -> LoadPoint:
    """Steady state of a closed loop of `clients` (each sends its next request when the last one ends).

    Past the population of its largest stable rate r* (max_rate without targets), clients wait in vLLM's
    queue when max_num_seqs binds there: the loop runs at r* with r*'s decode batch and TPOT, and the extra
    clients' wait is TTFT (Little's law on the whole loop, clients = r* x (TTFT + (output - 1) x TPOT)). When
    the KV cache binds first, vLLM admits more than it can keep and preempts; this point is then optimistic,
    and steady_state.closed_loop_point simulates the churn (steady_state.churns says when: `gpuopt fit` asks)."""
    top = max_rate(r, input_tokens, output_tokens, poisson=False)
    if clients > top.concurrency and top.requests_per_second > 0:
        decode_s = max(output_tokens - 1, 0) * top.tpot_ms * 1e-3
        ttft = max(clients / top.requests_per_second - decode_s, top.ttft_ms * 1e-3)
        queued = clients - top.concurrency
        where = ("at the API server (one request at a time)"
                 if top.requests_per_second * frontend_s(r, input_tokens) >= 1 - 1e-6 else "in vLLM's queue")
        return replace(top, concurrency=clients, ttft_ms=ttft * 1e3, limit=(
            f"{clients:,.0f} clients, {top.concurrency:,.0f} in service at the largest stable rate: {queued:,.0f} "
            f"wait {where}"))
    # the clients are at most the top's (above), so their rate is at most the top's: bisect below it. Past the
    # top the steady state does not hold, and a point there can report fewer clients than one below it (a rate
    # whose steps overflow the budget: 17.7 clients at 2.96 requests/s where 2.61 holds 28.4), which a search
    # doubling upwards from 1 request/s had taken for the answer
    lo, hi = 0.0, top.requests_per_second
    below: LoadPoint | None = None  # the point at `lo` (None while lo is 0)
    # until the rate is within CONCURRENCY_TOLERANCE and so is the population: near the knee the population is
    # steep in the rate (0.1 % of rate was 3 % of clients: 629 for 650 asked), so the second takes longer
    for _ in range(200):
        if hi - lo <= CONCURRENCY_TOLERANCE * hi and below is not None and \
                below.concurrency >= clients * (1 - CONCURRENCY_TOLERANCE):
            break
        mid = (lo + hi) / 2
        point = at_rate(r, mid, input_tokens, output_tokens, poisson=False)
        if point.concurrency < clients:
            lo, below = mid, point
        else:
            hi = mid
    return below if below is not None else at_rate(r, lo, input_tokens, output_tokens, poisson=False)


def zero_load(r: Replica, input_tokens: int, output_tokens: int) -> LoadPoint:
    """One request alone: TTFT = serving path + the API server's work on it + prefill, TPOT = a batch-1 decode
    step."""
    ttft = (r.cal.server_overhead_ms * 1e-3 + frontend_s(r, input_tokens) + prefill_time_s(r, input_tokens)) * 1e3
    tpot = step_time_s(r, 1, input_tokens + output_tokens / 2) * 1e3
    rate = 1.0 / ((ttft + tpot * max(output_tokens - 1, 0)) / 1e3)
    return LoadPoint(requests_per_second=rate, concurrency=1.0, running=1.0, step_ms=tpot,
                     tpot_ms=no_tpot_below_two(tpot, output_tokens), ttft_ms=ttft,
                     output_tokens_per_second=output_tokens * rate, stable=True, limit=None)


def _closed_form_rate(r: Replica, input_tokens: int, output_tokens: int, target_s: float | None,
                      mix: _StepMix, poisson: bool = True) -> float | None:
    """The largest rate that meets the TPOT target and keeps the steady state within the scheduler's limits
    (max_num_batched_tokens, max_num_seqs, the KV cache) and the API server's (one request at a time,
    frontend_s each: without it a 0.5B model on a B200 was planned at 172 requests/s of 4,000-token prompts,
    3x the 56 the server passes on); None when nothing bounds it. TTFT is left to the caller: its queueing
    term is not monotone in the same way.

    Both bounds are bounds on y = rate x T (_StepMix), where the step is known: the limits bound the decode
    running O y and the tokens per step (L + O - 1) y by x = min(budget / (L + O - 1), places / O), places =
    min(max_num_seqs, KV tokens / held) less queueing.SPARE_PLACES for an open loop, so rate <= x / E(x); the
    target bounds the step requests decode in (the mean step for a closed loop, _StepMix.request_step for an
    open one) at y_t, so rate <= y_t / E(y_t)."""
    cfg = r.config
    total = max(input_tokens + output_tokens - 1, 1)  # a step's tokens per request: its prompt, its decodes
    places = run_places(r, input_tokens, output_tokens)  # max_num_seqs included
    if poisson and places >= 2 * queueing.SPARE_PLACES:  # at_rate: an open loop keeps one place free
        places -= queueing.SPARE_PLACES
    x = min(cfg.max_num_batched_tokens / total, places / max(output_tokens, 1))
    bound = x / mix.mean_step(x) if x > 0 else 0.0
    bound = min(bound, 1.0 / frontend_s(r, input_tokens))  # the API server, one request at a time
    if target_s is not None:  # an open loop's requests decode in the request step (at_rate)
        y_t = mix.y_at_request_step(target_s) if poisson else mix.y_at_step(target_s)
        if math.isfinite(y_t):  # inf: no step reaches the target, the limits alone bound the rate
            bound = min(bound, y_t / mix.mean_step(y_t) if y_t > 0 else 0.0)
    # a hair below: y_at_rate's root lies up to ROOT_TOLERANCE past the true one (its unstable side), which at
    # the bound itself would read as a limit crossed
    return None if not math.isfinite(bound) else bound * (1 - 10 * ROOT_TOLERANCE)


def max_rate(r: Replica, input_tokens: int, output_tokens: int, ttft_slo_ms: float | None = None,
             tpot_slo_ms: float | None = None, poisson: bool = True, burstiness: float = 1.0) -> LoadPoint:
    """The largest request rate that is stable and meets both targets; raises SloUnreachableError with the
    binding target and the margin when even a lone request misses it. `poisson`, `burstiness`: as at_rate
    (`poisson` False for the rate of a closed loop)."""
    if output_tokens <= 1:
        tpot_slo_ms = None  # no time per output token after the first (no_tpot_below_two)
    alone = zero_load(r, input_tokens, output_tokens)
    if ttft_slo_ms is not None and alone.ttft_ms > ttft_slo_ms:
        raise SloUnreachableError(
            "ttft", ttft_slo_ms, alone.ttft_ms, f"TTFT target {ttft_slo_ms:g} ms missed by "
            f"{alone.ttft_ms - ttft_slo_ms:,.0f} ms even for a lone request ({alone.ttft_ms:,.0f} ms to prefill "
            f"{input_tokens:,} tokens)")
    if tpot_slo_ms is not None and alone.tpot_ms > tpot_slo_ms:
        raise SloUnreachableError(
            "tpot", tpot_slo_ms, alone.tpot_ms, f"TPOT target {tpot_slo_ms:g} ms missed by "
            f"{alone.tpot_ms - tpot_slo_ms:.1f} ms even at batch 1 ({alone.tpot_ms:.1f} ms per token)")

    def ok(point: LoadPoint) -> bool:
        return (point.stable and (ttft_slo_ms is None or point.ttft_ms <= ttft_slo_ms)
                and (tpot_slo_ms is None or point.tpot_ms <= tpot_slo_ms))

    # one per shape: every rate below reuses its step terms
    mix = _StepMix(r, input_tokens, output_tokens, _loop_cv2(poisson, burstiness))

    def point(rate: float) -> LoadPoint:
        return at_rate(r, rate, input_tokens, output_tokens, mix, poisson)

    lo = 0.0
    hi = max(r.config.max_num_batched_tokens / ((input_tokens + output_tokens) * alone.step_ms * 1e-3),
             alone.requests_per_second)
    bound = _closed_form_rate(r, input_tokens, output_tokens, None if tpot_slo_ms is None else tpot_slo_ms * 1e-3,
                              mix, poisson)
    if bound is not None:
        first = point(bound)
        failed: float | None = None  # the lowest rate the closed form tried that missed a target
        # the closed form knows the steady state's request step, not the decode window's factor on it
        # (decode_window): where the window stretches TPOT past the target, aim the closed form at the target
        # over the factor found, twice
        for _ in range(2):
            if ok(first) or tpot_slo_ms is None or first.tpot_ms <= tpot_slo_ms or not math.isfinite(first.tpot_ms):
                break
            y = mix.y_at_rate(bound)
            steady = mix.request_step(y) * 1e3 if poisson and math.isfinite(y) else first.tpot_ms
            factor = first.tpot_ms / steady if steady > 0 else 1.0
            if factor <= 1.0 + 1e-9:
                break
            # a little inside the target: the factor grows with the rate, so aiming at the target itself lands a
            # hair above it and falls to the bisection (eight more evaluations)
            aimed_s = tpot_slo_ms * 1e-3 / factor * (1 - RATE_TOLERANCE / 2)
            aimed = _closed_form_rate(r, input_tokens, output_tokens, aimed_s, mix, poisson)
            if aimed is None or aimed >= bound:
                break
            failed, bound, first = bound, aimed, point(aimed)
        if ok(first) and failed is None:  # TPOT or a scheduler limit binds: the closed form is the answer
            return _first_crossing(first, point, ok, output_tokens)
        if ok(first) and failed is not None:
            # the closed form aimed inside the target by the factor at the rate that missed -- mostly the open
            # loop's step chain over the Poisson count its closed form knows (settle), a few % and flat in the
            # rate: a rate one tolerance above that misses confirms the answer in one evaluation, where a
            # bisection takes eight
            above = point(bound * (1 + RATE_TOLERANCE))
            if not ok(above):
                return _first_crossing(first, point, ok, output_tokens)
            # the factor grows with the rate (gpt-oss-20b at 2,000/2 on an H100: 1.0 at 15 requests/s, 2.4 at
            # 18), so aiming at the target over the factor at the rate that missed lands well inside it: the
            # answer lies between (QA: 15.2 requests/s for a 30 ms TPOT that 17.2 meets, below the 16.0 found
            # for 20 ms)
            lo, hi = above.requests_per_second, failed
        else:
            hi = bound  # TTFT binds first: search below
    while ok(point(hi)) and hi < 1e6:
        lo, hi = hi, hi * 2
    lo = _bisect(lo, hi, point, ok)
    if lo == 0.0:
        return point(1e-9)
    return _first_crossing(point(lo), point, ok, output_tokens)


def _bisect(lo: float, hi: float, point: Callable[[float], LoadPoint], ok: Callable[[LoadPoint], bool]) -> float:
    """The largest rate found meeting the targets between `lo` (meets them, or 0) and `hi` (misses them), to
    RATE_TOLERANCE."""
    while hi - lo > RATE_TOLERANCE * hi:
        mid = (lo + hi) / 2
        if not lo < mid < hi:  # the bracket is below float resolution (lo = 0, hi underflowing): QA found a hang
            break
        if ok(point(mid)):
            lo = mid
        else:
            hi = mid
    return lo


STALL_RAMP_DECODES = 128
"""The decodes over which the prompt stalls' swing of the decode batch ramps in (_StepMix.request_step): a request
that decodes a few steps lives mostly in its decode window (decode_window: the prompts queued behind it when it
starts), whose factor carries the stalls it meets. Measured (2026-12-05) on benchmarks/prompt_heavy.py and
open_loop_latency.py, the only shapes it touches (the 90 workloads of surrogate_capacity.py decode >= 249
steps): TPOT median |error| over 13 prompt-heavy shapes 1.3 % ramped over 16 decodes, 1.8 % over 64, 1.2 % over
128 (2.4 % before the stalls' swing), where 16 took 8,000 / 16 on an H100 to 16 % high (7.5 % before) and 64
8,000 / 64 to 6.1 % (128: 0.3 %); an MoE model's 300 / 8 at 20 requests/s 1.10 / 1.04 / 1.03 (1.03 before)."""

SHORT_OUTPUT = 16
"""Outputs of at most this many tokens decode mostly in the window after their prefill (decode_window), whose
factor on TPOT can rise and fall again with the rate on MoE models (QA: Qwen3-30B-A3B on an A100 at 2,000/2,
TPOT 268 / 330 / 272 / 242 ms at 3.3 / 3.78 / 4.1 / 4.19 requests/s): the largest rate within a target is then
not the first one that misses it."""
GUARD_POINTS = 8


def _first_crossing(found: LoadPoint, point: Callable[[float], LoadPoint], ok: Callable[[LoadPoint], bool],
                    output_tokens: int) -> LoadPoint:
    """`found`, or for a short output the largest rate below the first one under `found` that misses a target,
    on a grid of GUARD_POINTS rates and then bisected: the capacity is a rate every lower load also meets, so it
    does not depend on which search found it (QA: a TPOT target alone gave 4.195 requests/s, the same target
    with a TTFT target that never binds 3.203)."""
    if output_tokens > SHORT_OUTPUT or found.requests_per_second <= 0:
        return found
    top = found.requests_per_second
    lo = 0.0
    for k in range(1, GUARD_POINTS):
        rate = top * k / GUARD_POINTS
        if not ok(point(rate)):
            lo = _bisect(lo, rate, point, ok)
            return point(lo) if lo > 0 else point(1e-9)
        lo = rate
    return found

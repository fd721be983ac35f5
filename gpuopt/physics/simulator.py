"""A step-level simulator of one vLLM replica: what `vllm bench serve` would measure for a list of requests.

The engine is vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py, v0.11), replayed step by step:

1. running requests first, in admission order: each gets its remaining tokens (1 for a decode, the rest of
   its prompt for a chunked prefill) within the step's token budget (max_num_batched_tokens); KV blocks of
   block_size tokens are allocated as sequences grow; when the pool is empty the LAST running request is
   preempted (its blocks freed, its progress dropped: recompute) and put back at the head of the queue;
2. then, if nothing was preempted in this step, the FCFS waiting queue: a request is admitted while there
   is budget left, fewer than max_num_seqs run and its blocks fit (a shared prefix already computed is a
   prefix-cache hit: its full blocks are neither recomputed nor allocated twice);
3. the step's duration is the cost model of gpuopt.physics.latency (the same one the analytic model uses):
   latency.engine_step_s(decode sequences, their mean context, prefill tokens, their mean attended context);
4. a request whose tokens are all computed samples one token at the end of the step: its first token is
   its TTFT, its last ends it.

Stretches where nothing but decodes can happen (no prefill in flight, nobody admissible, no KV shortage
possible) are advanced in one vectorised jump to the next finish or arrival: same result, 10-100x faster.

The client is `vllm bench serve`: send times from gpuopt.physics.traffic, a semaphore of max_concurrency (a
closed loop). Between a send and the scheduler sit the API server, which handles requests one at a time
(analytic_load.frontend_s each: per request and per prompt token, so a burst of 1,000 queues there), and the fixed
latency of the serving path (server_overhead_ms). Offline (`LLM.generate`) has neither. On the chat endpoint
(`--backend openai-chat`) vLLM streams a role chunk (`delta: {role: assistant, content: ""}`) just before a
request's first token, and vllm bench serve counts every chunk with choices: one more "token" per request in
max_output_tokens_per_s and one ~0 inter-token gap per request in the ITLs (TTFT and TPOT are unchanged: TPOT
divides by the usage's completion tokens). See SimResult.role_chunk.

Not simulated: speculative decoding, the LoRA kernels (their adapter memory is: physics/lora.py),
multimodal encoders, disaggregated prefill, structured output,
the scheduler's priority policy, the hybrid allocator's per-group pools (a hybrid model's KV capacity is
its full-length-request equivalent), prefix-cache eviction.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpuopt.errors import InputError
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.kv_cache import KvPool
from gpuopt.physics.latency import Replica
from gpuopt.physics.memory import MemoryEstimate
from gpuopt.physics.serving_config import ResolvedConfig
from gpuopt.physics.traffic import Request
from gpuopt.physics.vllm_profile import get_profile

MAX_JUMP_STEPS = 4096  # longest vectorised jump (bounds the arrays it builds)


@dataclass(frozen=True)
class SchedulerConfig:
    """The scheduler knobs of one vLLM engine (`vllm serve` flags of the same names)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    num_gpu_blocks: int
    enable_prefix_caching: bool = True  # V1 default
    async_scheduling: bool = False  # the constructors below default it to the release's (on from v0.14)
    chunked_prefill: bool = True  # always on in V1
    # vLLM's hybrid allocator: every request takes blocks in each KV group from one pool; a full-attention
    # group needs ceil(tokens / block_size) blocks, a sliding-window group at most window_blocks, a
    # linear-attention / Mamba group one page for the request's state, whatever its length
    full_groups: int = 1
    window_groups: int = 0
    window_blocks: int = 0
    state_groups: int = 0

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_gpu_blocks"):
            value = getattr(self, name)
            if value <= 0:
                raise InputError(f"--{name.replace('_', '-')} must be positive (got {value})")

    @classmethod
    def from_config(cls, config: ResolvedConfig, kv_capacity_tokens: int, *,
                    enable_prefix_caching: bool | None = None, async_scheduling: bool | None = None,
                    chunked_prefill: bool = True) -> SchedulerConfig:
        """From a resolved `vllm serve` configuration (release defaults already filled in by
        physics.serving_config.resolve from gpuopt/data/vllm_versions.yaml) and the KV tokens the memory model finds;
        `enable_prefix_caching` and `async_scheduling` None: the configuration's (vLLM's default for the model
        and release: prefix caching is off for hybrids before 0.28)."""
        if enable_prefix_caching is None:
            enable_prefix_caching = config.enable_prefix_caching
        if async_scheduling is None:
            async_scheduling = get_profile(config.vllm_version).async_scheduling_default
        return cls(max_num_seqs=config.max_num_seqs, max_num_batched_tokens=config.max_num_batched_tokens,
                   block_size=config.block_size, num_gpu_blocks=max(1, kv_capacity_tokens // config.block_size),
                   enable_prefix_caching=enable_prefix_caching, async_scheduling=async_scheduling,
                   chunked_prefill=chunked_prefill)

    @classmethod
    def from_memory(cls, memory: MemoryEstimate, *, enable_prefix_caching: bool | None = None,
                    async_scheduling: bool | None = None, chunked_prefill: bool = True) -> SchedulerConfig:
        """From the memory model's block pool and KV groups (the binding rank's): exact for hybrid models,
        whose sliding-window layers hold only the window of a request."""
        return cls.from_config(memory.config, memory.effective_kv_tokens, enable_prefix_caching=enable_prefix_caching,
                               async_scheduling=async_scheduling, chunked_prefill=chunked_prefill
                               ).with_pool(memory.kv_pool)

    @classmethod
    def from_replica(cls, replica: Replica, *, enable_prefix_caching: bool | None = None,
                     async_scheduling: bool | None = None, chunked_prefill: bool = True) -> SchedulerConfig:
        """The replica's scheduler, async scheduling as the replica's analytic step has it unless given; its
        block pool when it has one (a hybrid's state pages, a sliding-window model's window groups)."""
        base = cls.from_config(replica.config, replica.kv_capacity_tokens, enable_prefix_caching=enable_prefix_caching,
                               async_scheduling=replica.async_scheduling if async_scheduling is None
                               else async_scheduling, chunked_prefill=chunked_prefill)
        return base if replica.kv_pool is None else base.with_pool(replica.kv_pool)

    @property
    def pool(self) -> KvPool:
        return KvPool(block_size=self.block_size, num_blocks=self.num_gpu_blocks, full_groups=self.full_groups,
                      window_groups=self.window_groups, window_blocks=self.window_blocks,
                      state_groups=self.state_groups)

    def with_pool(self, pool: KvPool) -> SchedulerConfig:
        """These knobs over `pool`'s blocks and groups."""
        return replace(self, block_size=pool.block_size, num_gpu_blocks=pool.num_blocks, full_groups=pool.full_groups,
                       window_groups=pool.window_groups, state_groups=pool.state_groups,
                       window_blocks=pool.window_blocks)


def _weighted_pcts(values: NDArray[Any], weights: NDArray[Any], qs: tuple[float, ...]) -> list[float]:
    """Percentiles `qs` of a sample given as (value, count) pairs (the ITLs of a jump share one value per step),
    numpy's linear method on the expanded sample; sorted once (sorting per percentile was 14 % of a simulated
    capacity search)."""
    if not values.size:
        return [0.0] * len(qs)
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    out = []
    for q in qs:
        rank = q / 100 * (cum[-1] - 1)  # numpy's linear method on the expanded sample
        lo = int(np.searchsorted(cum, math.floor(rank) + 1))
        hi = int(np.searchsorted(cum, math.ceil(rank) + 1))
        frac = rank - math.floor(rank)
        out.append(float(v[min(lo, v.size - 1)] * (1 - frac) + v[min(hi, v.size - 1)] * frac))
    return out


@dataclass(frozen=True)
class SimResult:
    """What one simulated run measured, per request (seconds) and overall."""

    input_tokens: NDArray[Any]
    output_tokens: NDArray[Any]
    send_s: NDArray[Any]  # when the client sent each request
    ttft_s: NDArray[Any]
    e2el_s: NDArray[Any]
    itl_values_s: NDArray[Any]  # inter-token latencies as (value, count) pairs
    itl_counts: NDArray[Any]
    duration_s: float
    preemptions: int
    kv_usage_peak: float  # highest share of the KV blocks in use
    token_times_s: NDArray[Any] = field(repr=False)  # end of each step that emitted tokens, and how many
    token_counts: NDArray[Any] = field(repr=False)
    offline: bool = False
    # per request, when each token came (arrays, joined on demand)
    request_token_parts: tuple[list[NDArray[Any]], ...] = field(default=(), repr=False)
    # the client read the chat endpoint's stream: a role chunk at each request's first token, which vllm bench
    # serve (v0.11 lib/endpoint_request_func.py async_request_openai_chat_completions; serve.py
    # calculate_metrics) counts as a chunk -- a zero gap in `itls` and one more count in the per-second buckets
    role_chunk: bool = False

    def request_itls_s(self) -> list[list[float]]:
        """Per request, the gaps between its stream chunks (vllm bench serve's `itls`): between its tokens,
        after a 0.0 for the role chunk on the chat endpoint."""
        lead = [0.0] if self.role_chunk else []
        return [lead + [float(v) for v in np.diff(np.concatenate(parts))] if parts else []
                for parts in self.request_token_parts]

    def _itl_sample(self) -> tuple[NDArray[Any], NDArray[Any]]:
        """The ITLs as (value, count) pairs, with the chat endpoint's role-chunk gaps (0 s, one per request
        that produced a token)."""
        if not self.role_chunk:
            return self.itl_values_s, self.itl_counts
        n = int(np.count_nonzero(self.output_tokens > 0))
        return (np.concatenate([self.itl_values_s, [0.0]]),
                np.concatenate([self.itl_counts, np.asarray([n], dtype=np.int64)]))

    def window(self, start: int, stop: int) -> SimResult:
        """Requests start..stop-1 (in send order) as if only they had been measured: their latencies and
        inter-token gaps, a duration from the first one's send to the last one's finish. The engine-wide figures
        (preemptions, KV peak, the per-second token series) stay those of the whole run."""
        idx = slice(start, stop)
        parts = self.request_token_parts[idx]
        gaps = [np.diff(np.concatenate(p)) for p in parts if p]
        itl = np.concatenate(gaps) if gaps else np.zeros(0)
        send, end = self.send_s[idx], (self.send_s + self.e2el_s)[idx]
        return replace(self, input_tokens=self.input_tokens[idx], output_tokens=self.output_tokens[idx],
                       send_s=send, ttft_s=self.ttft_s[idx], e2el_s=self.e2el_s[idx], itl_values_s=itl,
                       itl_counts=np.ones(itl.size, dtype=np.int64),
                       duration_s=float(end.max() - send.min()) if send.size else 0.0,
                       request_token_parts=parts)

    def backlog(self, t: float) -> int:
        """Requests sent by time t whose first token had not come yet (queued or in prefill)."""
        return int(np.count_nonzero((self.send_s <= t) & (self.send_s + self.ttft_s > t)))

    @property
    def tpot_s(self) -> NDArray[Any]:
        """Per request: (e2el - ttft) / (output - 1), for outputs of more than one token (as vLLM)."""
        many = self.output_tokens > 1
        return np.asarray((self.e2el_s[many] - self.ttft_s[many]) / (self.output_tokens[many] - 1))

    @property
    def itl_s(self) -> NDArray[Any]:
        return np.repeat(*self._itl_sample())

    def _peaks(self) -> tuple[float, int]:
        """vllm bench serve's max_output_tokens_per_s and max_concurrent_requests: per 1-second bucket from the
        first send, the tokens that arrived in it and the requests active in any part of it (serve.py
        calculate_metrics)."""
        if not self.send_s.size:
            return 0.0, 0
        t0 = float(self.send_s.min())
        end = self.send_s + self.e2el_s
        second = np.floor(self.token_times_s - t0)
        weights = np.asarray(self.token_counts, dtype=float)
        if self.role_chunk:  # each request's role chunk lands in the bucket of its first token
            first_token = np.floor((self.send_s + self.ttft_s)[self.output_tokens > 0] - t0)
            second = np.concatenate([second, first_token])
            weights = np.concatenate([weights, np.ones(first_token.size)])
        # a window of a longer run (SimResult.window) keeps the engine's whole token series: tokens outside
        # its requests' span count in its first or last bucket
        second = np.clip(second, 0.0, np.floor(float(end.max()) - t0))
        # requests active in bucket k: +1 at the bucket of its send, -1 after the bucket of its end
        edges = np.concatenate([np.floor(self.send_s - t0), np.floor(end - t0) + 1])
        steps = np.concatenate([np.ones(self.send_s.size), -np.ones(self.send_s.size)])
        return float(_bucket_sums(second, weights).max()), int(np.cumsum(_bucket_sums(edges, steps)).max())

    def summary(self) -> dict[str, float | int]:
        """The keys of `vllm bench serve --save-result` (milliseconds as vLLM writes them), plus p90/p95 and
        gpuopt's own preemptions and kv_usage_peak. Plain Python numbers only (JSON-safe)."""
        n = int(self.output_tokens.size)
        dur = self.duration_s
        tin, tout = int(self.input_tokens.sum()), int(self.output_tokens.sum())
        max_tok, max_conc = self._peaks()
        out: dict[str, float | int] = {
            "completed": n, "duration": dur, "total_input_tokens": tin, "total_output_tokens": tout,
            "request_throughput": n / dur if dur else 0.0, "output_throughput": tout / dur if dur else 0.0,
            "total_token_throughput": (tin + tout) / dur if dur else 0.0,
            "max_output_tokens_per_s": max_tok, "max_concurrent_requests": max_conc,
        }
        series = {"ttft_ms": self.ttft_s * 1e3, "tpot_ms": self.tpot_s * 1e3, "e2el_ms": self.e2el_s * 1e3}
        for name, values in series.items():
            out[f"mean_{name}"] = float(values.mean()) if values.size else 0.0
            quantiles = np.percentile(values, (50, 90, 95, 99)) if values.size else np.zeros(4)  # one sort
            out[f"median_{name}"] = float(quantiles[0])
            out[f"std_{name}"] = float(values.std()) if values.size else 0.0
            for q, value in zip((50, 90, 95, 99), quantiles, strict=True):
                out[f"p{q}_{name}"] = float(value)
        iv, ic = self._itl_sample()
        iv = iv * 1e3
        total = ic.sum()
        out["mean_itl_ms"] = float((iv * ic).sum() / total) if total else 0.0
        p50, p90, p95, p99 = _weighted_pcts(iv, ic, (50, 90, 95, 99))
        out["median_itl_ms"] = p50
        out["std_itl_ms"] = (float(math.sqrt(max(((iv - out["mean_itl_ms"]) ** 2 * ic).sum() / total, 0.0)))
                             if total else 0.0)
        out.update(p50_itl_ms=p50, p90_itl_ms=p90, p95_itl_ms=p95, p99_itl_ms=p99)
        out["preemptions"] = self.preemptions
        out["kv_usage_peak"] = self.kv_usage_peak
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in out.items()}


def _natural_lengths(requests: list[Request], seed: int) -> list[int]:
    """Outputs that end at EOS: a geometric length with the request's max_tokens as its mean, capped at
    max_tokens (documented assumption: the model's natural reply is as long as asked on average)."""
    rng = np.random.default_rng(seed)
    caps = np.array([r.output_tokens for r in requests], dtype=float)
    draws = rng.geometric(np.minimum(1.0, 1.0 / np.maximum(caps, 1.0)))
    return [int(v) for v in np.minimum(draws, caps).astype(np.int64)]


class _Engine:
    """The state of one simulated engine (numpy arrays indexed by request); run() plays it to the end.

    The running requests are processed as arrays: vLLM's in-order loop over them only matters when the KV
    pool runs short (preemption), and then the loop is replayed one request at a time."""

    def __init__(self, replica: Replica, sched: SchedulerConfig, requests: list[Request], outputs: list[int],
                 max_concurrency: int | None, offline: bool) -> None:
        self.r, self.s = replica, sched
        self.reqs = requests
        n = len(requests)
        self.prompt = np.array([q.input_tokens for q in requests], dtype=np.int64)
        self.out = np.array(outputs, dtype=np.int64)
        self.shared = np.array([q.shared_prefix_tokens > 0 for q in requests], dtype=bool)
        self.computed = np.zeros(n, dtype=np.int64)
        self.generated = np.zeros(n, dtype=np.int64)
        self.held = np.zeros(n, dtype=np.int64)  # KV blocks of each request (outside the shared prefix)
        self.cached_blocks = np.zeros(n, dtype=np.int64)  # full blocks a preempted request left in the cache
        self.evict_horizon = np.zeros(n, dtype=np.int64)  # allocations after which they start being evicted
        self.allocated = 0  # blocks allocated so far (the prefix cache's LRU clock)
        self.first = np.full(n, math.nan)
        self.finish = np.full(n, math.nan)
        self.last_emit = np.zeros(n)
        self.send = np.zeros(n)
        self.prefix_blocks = 0
        pre = requests[0].shared_prefix_tokens if requests and sched.enable_prefix_caching else 0
        self.prefix_hit_tokens = pre // sched.block_size * sched.block_size
        self.prefix_ready = False
        self.free = sched.num_gpu_blocks
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.inbound: deque[tuple[float, int]] = deque()  # (time it reaches the scheduler, id)
        self.pending: deque[int] = deque(sorted(range(n), key=lambda i: (requests[i].arrival_s, i)))
        self.cap = max_concurrency if max_concurrency else n
        self.in_flight = 0
        self.ingress = 0.0 if offline else replica.cal.server_overhead_ms * 1e-3
        self.offline = offline
        self.frontend_free = 0.0  # when the API server has handled every request sent so far
        self.preemptions = 0
        # with async scheduling, the blocks and max_num_seqs slots of the requests that finished in the last
        # step: step n+1 was scheduled before step n's outputs were processed, so they return after it
        self.deferred_blocks = 0
        self.deferred_slots = 0
        self.peak_used = 0
        self.itl_v: list[NDArray[Any]] = []
        self.itl_c: list[NDArray[Any]] = []
        self.emissions: list[tuple[NDArray[Any], NDArray[Any]]] = []  # (step end times, requests emitting at each)
        self.t = 0.0
        self.step_start = 0.0  # when the step that ended at self.t began

    # ---- the client -------------------------------------------------------------------------------
    def _release(self, now: float) -> None:
        """Send pending requests while the semaphore allows (each at its own arrival time or `now`)."""
        while self.pending and self.in_flight < self.cap:
            i = self.pending.popleft()
            sent = max(self.reqs[i].arrival_s, now)
            self.send[i] = sent
            self.in_flight += 1
            # the API server handles requests one at a time (parsing, tokenisation, block hashes): a burst
            # queues there
            work = 0.0 if self.offline else analytic_load.frontend_s(self.r, self.reqs[i].input_tokens)
            self.frontend_free = max(sent, self.frontend_free) + work
            self.inbound.append((self.frontend_free + self.ingress, i))

    @property
    def _schedule_lags(self) -> bool:
        """Whether the step that starts now was scheduled a step ago. With async scheduling, while requests run,
        the engine schedules step n+1 as soon as it launches step n (EngineCore.step_with_batch_queue, a queue
        of two batches), so what step n brings -- an arrival, the room of a request it finished -- reaches the
        schedule of step n+2. An idle engine schedules at once."""
        return self.s.async_scheduling and bool(self.running)

    def _arrive(self) -> None:
        """Move the requests the scheduler can see into the waiting queue: those that reached the engine before
        the next step was scheduled (_schedule_lags)."""
        seen = self.step_start if self._schedule_lags else self.t
        while self.inbound and self.inbound[0][0] <= seen:
            self.waiting.append(self.inbound.popleft()[1])

    # ---- KV blocks --------------------------------------------------------------------------------
    def _blocks(self, idx: NDArray[Any], tokens: NDArray[Any]) -> NDArray[Any]:
        """Blocks requests `idx` hold with `tokens` tokens each (every KV group), outside the shared prefix."""
        s = self.s
        per_group = -(-tokens // s.block_size)
        full = per_group
        if self.prefix_ready and self.prefix_blocks:
            full = np.where(self.shared[idx], np.maximum(per_group - self.prefix_blocks, 0), per_group)
        # the terms of the kinds of group this model has (this runs a few times per engine step: skipping the
        # absent kinds' array operations is a quarter of a replay's time)
        blocks = full * s.full_groups if s.full_groups != 1 else full
        if s.window_groups:
            blocks = blocks + s.window_groups * np.minimum(per_group, s.window_blocks)
        if s.state_groups:
            blocks = blocks + s.state_groups * (tokens > 0)
        return np.asarray(blocks)

    def _blocks_one(self, i: int, tokens: int) -> int:
        """_blocks for one request, in plain integers (the in-order loops call it once per request)."""
        s = self.s
        per_group = -(-tokens // s.block_size)
        full = per_group
        if self.prefix_ready and self.prefix_blocks and self.shared[i]:
            full = max(per_group - self.prefix_blocks, 0)
        return s.full_groups * full + s.window_groups * min(per_group, s.window_blocks) \
            + (s.state_groups if tokens > 0 else 0)

    def _preempt_last(self) -> int:
        """Preempt the last running request (recompute). With prefix caching its full blocks stay in the
        cache, at the tail of the LRU free queue: they survive until the blocks ahead of them are reused."""
        victim = self.running.pop()
        if self.s.enable_prefix_caching:
            self.cached_blocks[victim] = self.computed[victim] // self.s.block_size
            self.evict_horizon[victim] = self.allocated + self.free
        self.free += int(self.held[victim])
        self.held[victim] = 0
        self.computed[victim] = 0
        self.waiting.appendleft(victim)
        self.preemptions += 1
        return victim

    def _schedule_running(self) -> tuple[list[int], list[int], bool]:
        """vLLM's first loop: every running request in order, within the token budget; preempt on a shortage."""
        s = self.s
        if not self.running:
            return [], [], False
        run = np.array(self.running, dtype=np.int64)
        remaining = self.prompt[run] + self.generated[run] - self.computed[run]
        before = s.max_num_batched_tokens - (np.cumsum(remaining) - remaining)  # budget left when each comes up
        m = int(np.count_nonzero(before > 0))
        run, new = run[:m], np.minimum(remaining[:m], before[:m])
        need = self._blocks(run, self.computed[run] + new) - self.held[run]
        grow = np.maximum(need, 0)
        total = int(grow.sum())
        if total <= self.free:  # no shortage: the in-order loop changes nothing
            self.held[run] += grow
            self.free -= total
            self.allocated += total
            return run.tolist(), new.tolist(), False
        ids: list[int] = []
        news: list[int] = []
        preempted = False
        budget = s.max_num_batched_tokens
        idx = 0
        while idx < len(self.running) and budget > 0:
            i = self.running[idx]
            n_new = min(int(self.prompt[i] + self.generated[i] - self.computed[i]), budget)
            want = self._blocks_one(i, int(self.computed[i]) + n_new) - int(self.held[i])
            ok = True
            while want > self.free:
                preempted = True
                if self._preempt_last() == i:
                    ok = False
                    break
            if not ok:
                break
            if want > 0:
                self.free -= want
                self.held[i] += want
                self.allocated += want
            ids.append(i)
            news.append(n_new)
            budget -= n_new
            idx += 1
        return ids, news, preempted

    def _admit(self, budget: int, ids: list[int], news: list[int]) -> None:
        """vLLM's second loop: the FCFS waiting queue while budget, max_num_seqs and free blocks allow."""
        s = self.s
        while self.waiting and budget > 0 and len(self.running) + self.deferred_slots < s.max_num_seqs:
            i = self.waiting[0]
            total = int(self.prompt[i] + self.generated[i])
            start = int(self.computed[i])
            if start == 0 and self.prefix_ready and self.shared[i]:
                start = min(self.prefix_hit_tokens, total - 1)
            if start == 0 and self.cached_blocks[i]:
                left = int(self.cached_blocks[i]) - max(0, self.allocated - int(self.evict_horizon[i]))
                start = min(max(left, 0) * s.block_size, total - 1)
            remaining = total - start
            if not s.chunked_prefill and remaining > budget:
                break
            n_new = min(remaining, budget)
            need = self._blocks_one(i, start + n_new)
            if need > self.free:
                break
            self.waiting.popleft()
            self.cached_blocks[i] = 0
            self.free -= need
            self.allocated += need
            self.held[i] = need
            self.computed[i] = start
            self.running.append(i)
            ids.append(i)
            news.append(n_new)
            budget -= n_new

    # ---- one detailed step -----------------------------------------------------------------------
    def _step(self) -> None:
        s = self.s
        ids, news, preempted = self._schedule_running()
        if not preempted:
            self._admit(s.max_num_batched_tokens - sum(news), ids, news)
        self._release_deferred()  # this step is scheduled: what the previous one freed is back for the next
        if not ids:  # nothing fits (a lone prompt larger than the cache)
            raise InputError("a request does not fit in the KV cache even alone (raise --max-model-len or "
                             "--gpu-memory-utilization, or shorten the prompts)")
        self.peak_used = max(self.peak_used, s.num_gpu_blocks - self.free)
        idx = np.array(ids, dtype=np.int64)
        new = np.array(news, dtype=np.int64)
        comp = self.computed[idx]
        decode = (new == 1) & (comp >= self.prompt[idx])
        dec_n = int(np.count_nonzero(decode))
        dec_ctx = float((comp[decode] + 1).sum()) / dec_n if dec_n else 0.0
        pre_new = new[~decode]
        pre_tok = int(pre_new.sum())
        pre_ctx = float((pre_new * (comp[~decode] + pre_new / 2)).sum()) / pre_tok if pre_tok else 0.0
        self.step_start = self.t
        self.t += latency.engine_step_s(self.r, dec_n, dec_ctx, pre_tok, pre_ctx, s.async_scheduling)
        t = self.t
        self.computed[idx] = comp + new
        if self.prefix_hit_tokens and not self.prefix_ready:
            done_prefix = idx[self.shared[idx] & (self.computed[idx] >= self.prefix_hit_tokens)]
            if done_prefix.size:
                self.prefix_ready = True
                self.prefix_blocks = self.prefix_hit_tokens // s.block_size
                i = int(done_prefix[0])  # its prefix blocks now belong to the cache, shared by all
                self.held[i] = max(int(self.held[i]) - self.prefix_blocks * s.full_groups, 0)
        emit = idx[self.computed[idx] == self.prompt[idx] + self.generated[idx]]
        if emit.size:
            firsts = self.generated[emit] == 0
            self.first[emit[firsts]] = t
            later = emit[~firsts]
            if later.size:
                self.itl_v.append(t - self.last_emit[later])
                self.itl_c.append(np.ones(later.size, dtype=np.int64))
            self.generated[emit] += 1
            self.last_emit[emit] = t
            self.emissions.append((np.array([t]), emit))
            self._finish(emit[self.generated[emit] >= self.out[emit]])

    def _finish(self, done: NDArray[Any]) -> None:
        """End requests at this step's end. Their blocks and slots come back at once, or after the next step is
        scheduled when it was scheduled before this step's outputs were processed (_schedule_lags: vLLM frees
        them in update_from_output of this step)."""
        if not done.size:
            return
        self.finish[done] = self.t
        gone = set(done.tolist())
        self.running = [i for i in self.running if i not in gone]
        freed = int(self.held[done].sum())
        self.held[done] = 0
        self.in_flight -= int(done.size)
        if self._schedule_lags:
            self.deferred_blocks += freed
            self.deferred_slots += int(done.size)
        else:
            self.free += freed
            self._release_deferred()

    def _release_deferred(self) -> None:
        self.free += self.deferred_blocks
        self.deferred_blocks = self.deferred_slots = 0

    # ---- a run of pure decode steps in one jump ------------------------------------------------------
    def _jump_steps(self) -> int:
        """How many pure-decode steps can be taken at once (0: take a detailed step)."""
        s = self.s
        n = len(self.running)
        if n == 0 or n > s.max_num_batched_tokens:
            return 0
        run = np.array(self.running, dtype=np.int64)
        gen = self.generated[run]
        if (gen == 0).any() or (self.computed[run] != self.prompt[run] + gen - 1).any():
            return 0  # a prefill (or a resumed request) is in flight
        if self.deferred_slots and self.waiting:
            return 0  # a detailed step: after it is scheduled the finished requests' room returns to the queue
        if self.waiting and n < s.max_num_seqs:
            head = self.waiting[0]
            room = s.max_num_batched_tokens - n
            total = int(self.prompt[head] + self.generated[head])
            chunk = min(total, room) if s.chunked_prefill else total
            if room > 0 and self._blocks_one(head, chunk) <= self.free:
                return 0  # the head can come in at the next step (free blocks only shrink until a finish)
        k = min(int((self.out[run] - gen).min()), MAX_JUMP_STEPS)
        comp, held = self.computed[run], self.held[run]
        if self.inbound and n < s.max_num_seqs:
            # _jump stops at the first step that starts after the next arrival; steps only lengthen as the
            # context grows, so no more than (arrival - now) / first step + 1 of them start before it. Capping
            # k here changes no result and spares the block search and the step arrays of a long jump that an
            # arrival would cut (a Poisson replay's usual case)
            first = latency.engine_step_s(self.r, n, float((comp + 1).mean()), 0, 0.0, s.async_scheduling)
            if first > 0:
                k = min(k, int((self.inbound[0][0] - self.t) / first) + 2 + int(s.async_scheduling))
        if int(np.maximum(self._blocks(run, comp + k) - held, 0).sum()) <= self.free:
            return k
        lo, hi = 0, k  # the blocks k steps need grow with k: the longest jump without a shortage
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if int(np.maximum(self._blocks(run, comp + mid) - held, 0).sum()) <= self.free:
                lo = mid
            else:
                hi = mid
        return lo

    def _jump(self, k: int) -> None:
        s = self.s
        self._release_deferred()  # the jump's first step is scheduled (decodes only: nobody is admitted)
        run = np.array(self.running, dtype=np.int64)
        n = run.size
        ctx0 = float((self.computed[run] + 1).mean())
        steps = latency.engine_steps_s(self.r, n, ctx0, k, s.async_scheduling)
        ends = self.t + np.cumsum(steps)
        if self.inbound and n < s.max_num_seqs:  # stop at the first step that starts after an arrival
            starts = ends - steps
            k = int(np.searchsorted(starts, self.inbound[0][0], side="left"))
            # with async scheduling the arrival joins the step after the first one that starts after it
            k = min(max(1, k + 1 if s.async_scheduling else k), steps.size)
            steps, ends = steps[:k], ends[:k]
        # every running request emitted at self.t: its next k gaps are the k steps
        self.itl_v.append(steps)
        self.itl_c.append(np.full(k, n, dtype=np.int64))
        self.emissions.append((ends, run))
        self.step_start = float(ends[-1] - steps[-1])
        self.t = float(ends[-1])
        self.computed[run] += k
        self.generated[run] += k
        self.last_emit[run] = self.t
        grow = np.maximum(self._blocks(run, self.computed[run]) - self.held[run], 0)
        self.held[run] += grow
        total = int(grow.sum())
        self.free -= total
        self.allocated += total
        self.peak_used = max(self.peak_used, s.num_gpu_blocks - self.free)
        self._finish(run[self.generated[run] >= self.out[run]])

    # ---- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        self._release(0.0)
        while self.pending or self.inbound or self.waiting or self.running:
            self._arrive()
            if not self.waiting and not self.running:
                if self.inbound:
                    self.t = max(self.t, self.inbound[0][0])
                    continue
                self._release(self.t)
                continue
            k = self._jump_steps()
            if k > 1:
                self._jump(k)
            else:
                self._step()
            self._release(self.t)

    def token_times(self) -> list[NDArray[Any]]:
        """Per request, the times of its tokens in order. Every emission gave each of its members a token at
        each of its times; the (request, time) pairs are grouped by request with a stable sort, so each
        request's times stay in emission (chronological) order."""
        n = self.prompt.size
        if not self.emissions:
            return [np.zeros(0) for _ in range(n)]
        who = np.concatenate([np.repeat(m, t.size) for t, m in self.emissions])
        when = np.concatenate([np.tile(t, m.size) for t, m in self.emissions])
        order = np.argsort(who, kind="stable")
        counts = np.bincount(who, minlength=n)
        return np.split(when[order], np.cumsum(counts)[:-1])


def _bucket_sums(buckets: NDArray[Any], weights: NDArray[Any]) -> NDArray[Any]:
    """Sums of `weights` per whole-second bucket index (non-negative floats), in bucket order, empty buckets
    omitted or zero. Dense like vLLM's array when the span is small next to the events; over the occupied
    buckets only otherwise -- a run at 1e-6 requests/s spans 10^6 empty seconds, which a dense array would
    allocate (and a far slower rate could not)."""
    span = float(buckets.max()) + 1 if buckets.size else 0.0
    if span <= 4 * buckets.size + 1024:
        return np.bincount(buckets.astype(np.int64), weights=weights, minlength=int(span))
    _, where = np.unique(buckets, return_inverse=True)
    return np.bincount(where, weights=weights)


CLOCK_LIMIT_S = 1e10
"""The simulated clock is a float64 in seconds: at 1e10 s (317 years) it still resolves 2 us, far below a step
(the planner's slowest search, 1,000 requests at 6e-7 requests/s, ends near 1.7e9 s); sends later than that (a
rate of 1e-300 requests/s) would round every latency to zero."""


def simulate(replica: Replica, requests: list[Request], *, sched: SchedulerConfig | None = None,
             max_concurrency: int | None = None, offline: bool = False, ignore_eos: bool = True,
             seed: int = 0, chat: bool = False) -> SimResult:
    """Play `requests` through one simulated vLLM engine.

    `max_concurrency` caps the requests in flight (vllm bench serve's semaphore: a closed loop with rate inf).
    `offline` is `LLM.generate`: no server overhead. `ignore_eos=False` lets each output end at EOS
    (see _natural_lengths); `seed` only drives that draw. `chat`: the client reads the chat endpoint's stream
    (SimResult.role_chunk). Deterministic."""
    if not requests:
        raise InputError("--num-prompts must be at least 1")
    if max_concurrency is not None and max_concurrency <= 0:
        raise InputError(f"--max-concurrency must be positive (got {max_concurrency})")
    last = max(q.arrival_s for q in requests)
    if not last <= CLOCK_LIMIT_S:
        raise InputError(f"--request-rate: the last of {len(requests):,} requests is sent after {last:.3g} s, "
                         f"beyond the {CLOCK_LIMIT_S:.0e} s within which the simulated clock resolves latencies; "
                         f"raise the rate")
    sched = sched or SchedulerConfig.from_replica(replica)
    outputs = [q.output_tokens for q in requests] if ignore_eos else _natural_lengths(requests, seed)
    engine = _Engine(replica, sched, requests, outputs, max_concurrency, offline)
    engine.run()
    send = engine.send
    ttft = engine.first - send  # the API server and the serving path lie between the send and the scheduler
    e2el = engine.finish - send
    empty_f = np.zeros(0)
    empty_i = np.zeros(0, dtype=np.int64)
    token_times = np.concatenate([t for t, _ in engine.emissions]) if engine.emissions else empty_f
    token_counts = (np.concatenate([np.full(t.size, m.size, dtype=np.int64) for t, m in engine.emissions])
                    if engine.emissions else empty_i)
    return SimResult(
        input_tokens=engine.prompt.copy(), output_tokens=engine.out.copy(), send_s=send, ttft_s=ttft, e2el_s=e2el,
        itl_values_s=np.concatenate(engine.itl_v) if engine.itl_v else empty_f,
        itl_counts=np.concatenate(engine.itl_c) if engine.itl_c else empty_i,
        duration_s=float(engine.finish.max()) - float(send.min()), preemptions=engine.preemptions,
        kv_usage_peak=engine.peak_used / sched.num_gpu_blocks,
        token_times_s=token_times, token_counts=token_counts, offline=offline,
        request_token_parts=tuple([t] for t in engine.token_times()), role_chunk=chat and not offline)


def simulate_dp(replica: Replica, requests: list[Request], dp: int, *, sched: SchedulerConfig | None = None,
                max_concurrency: int | None = None, offline: bool = False, ignore_eos: bool = True,
                seed: int = 0, chat: bool = False) -> SimResult:
    """`--data-parallel-size dp`: dp engines, requests dealt round-robin (vLLM's DP coordinator balances by
    queue length; with statistically equal requests round-robin is the same), a concurrency cap split evenly.
    A cap below dp keeps only that many engines busy (the coordinator sends each request to a least-loaded
    engine); the others idle, and for a MoE model contribute no tokens to the shared expert layers."""
    if dp < 1:
        raise InputError(f"--dp must be >= 1 (got {dp})")
    # engines that get a request: no more than the requests (--dp 10^40 looped over 10^40 empty engines)
    busy = min(dp if max_concurrency is None else max(1, min(dp, max_concurrency)), len(requests))
    if busy < dp and replica.moe_token_scale > busy:
        replica = replace(replica, moe_peer_engines=busy)
    parts = []
    for d in range(busy):
        share = requests[d::busy]
        if not share:
            continue
        cap = None if max_concurrency is None else max_concurrency // busy + (d < max_concurrency % busy)
        parts.append(simulate(replica, share, sched=sched, max_concurrency=cap, offline=offline,
                              ignore_eos=ignore_eos, seed=seed + d, chat=chat))
    return parts[0] if len(parts) == 1 else merge(parts)


def merge(parts: list[SimResult]) -> SimResult:
    """Several engines measured by one client."""
    cat = np.concatenate
    send = cat([p.send_s for p in parts])
    end = cat([p.send_s + p.e2el_s for p in parts])
    return SimResult(
        input_tokens=cat([p.input_tokens for p in parts]), output_tokens=cat([p.output_tokens for p in parts]),
        send_s=send, ttft_s=cat([p.ttft_s for p in parts]), e2el_s=cat([p.e2el_s for p in parts]),
        itl_values_s=cat([p.itl_values_s for p in parts]), itl_counts=cat([p.itl_counts for p in parts]),
        duration_s=float(end.max() - send.min()), preemptions=sum(p.preemptions for p in parts),
        kv_usage_peak=max(p.kv_usage_peak for p in parts),
        token_times_s=cat([p.token_times_s for p in parts]), token_counts=cat([p.token_counts for p in parts]),
        offline=parts[0].offline,
        request_token_parts=tuple(t for p in parts for t in p.request_token_parts), role_chunk=parts[0].role_chunk)

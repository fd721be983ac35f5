"""How optimistic the steady-state capacity's measured window is against a long run.

    python benchmarks/window_bias.py [--quick] [--long N] [--closed]

`steady_state.steady_capacity` (the capacity the planner plans percentile and length-mix workloads on) searches
the rate on windows of 400 measured requests between a warm-up and a tail. Near saturation a queue relaxes
over more requests than that, and a window can miss a slowly growing backlog or a rare preemption cascade.
For each workload this prints the capacity of that 400-request search alone ("window"), the capacity
`steady_capacity` returns (the search confirmed on longer windows, stepping down until they meet the targets),
and the largest rate of the same grid at which a run of `--long` measured requests (4,000 by default; the
same warm-up, tail and arrival rules, the same seed) still meets the targets and keeps its queue bounded
("long"), the ratios to it (above 1: optimistic), and the CPU seconds of each search. The long search is the
plain grid search on long runs (steady_state.grid_search over steady_run), so it does not change with
steady_capacity's confirmation.

The workloads reuse benchmarks/surrogate_capacity.py's replicas (max_model_len 8,192) and
benchmarks/mix_capacity.py's chat mix (max_model_len 16,384): mean and percentile targets, one length and
mixes, dense and MoE, a hybrid and a sliding-window model, H100, A100 and L40S.

`--closed` measures the same for closed loops (`steady_state.closed_capacity`, the clients the planner plans a
`concurrency:` workload with a percentile target or a length mix on), which are not confirmed on longer
windows: the 400-request search against the same grid search on `--long`-request closed runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass
from typing import Literal

from gpuopt.errors import SloUnreachableError
from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.steady_state import (
    MEASURED,
    VERIFY_FACTOR,
    closed_capacity,
    closed_top,
    grid_search,
    meets,
    steady_capacity,
    steady_run,
)
from gpuopt.physics.traffic import FixedLengths, HistogramLengths, LengthDistribution, ShareGPTLengths

CHAT = HistogramLengths(((300, 80, 0.8), (8500, 1500, 0.2)))  # mix_capacity.py's two-bin chat mix


@dataclass(frozen=True)
class Case:
    model: str
    precision: str
    gpu: str
    tp: int
    lengths: LengthDistribution
    ttft_ms: float | None
    tpot_ms: float | None
    percentile: Literal[50, 90, 95, 99] | None = None
    max_model_len: int = 8192
    quick: bool = False

    def label(self) -> str:
        if isinstance(self.lengths, FixedLengths):
            shape = f"{self.lengths.input_tokens}/{self.lengths.output_tokens}"
        elif isinstance(self.lengths, ShareGPTLengths):
            shape = f"sharegpt {self.lengths.mean_input_tokens:.0f}/{self.lengths.mean_output_tokens:.0f}"
        else:
            shape = "chat mix"
        what = "mean" if self.percentile is None else f"p{self.percentile}"
        slo = f"{self.ttft_ms or '-'!s}/{self.tpot_ms or '-'!s} {what}"
        return f"{self.model.split('/')[-1][:22]:22} {self.gpu[:9]:9} {self.tp} {shape:18} {slo:16}"


CASES = (
    # the known case: the prefill queue near saturation (docs/simulator.md)
    Case("google/gemma-3-27b-it", "bf16", "H100-SXM-80GB", 1, FixedLengths(3000, 300), 500.0, 60.0, quick=True),
    Case("google/gemma-3-27b-it", "bf16", "H100-SXM-80GB", 1, FixedLengths(1000, 250), 2000.0, 40.0, 95),
    Case("Qwen/Qwen3-30B-A3B", "bf16", "H100-SXM-80GB", 1, FixedLengths(1000, 250), 500.0, 60.0, quick=True),
    Case("Qwen/Qwen3-30B-A3B", "bf16", "H100-SXM-80GB", 1, FixedLengths(200, 800), 2000.0, 40.0),
    Case("Qwen/Qwen3.5-35B-A3B", "bf16", "H100-SXM-80GB", 1, FixedLengths(1000, 250), 2000.0, 40.0, quick=True),
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "L40S-48GB", 1, FixedLengths(1000, 250), 2000.0, 40.0, 95,
         quick=True),
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 1, FixedLengths(1000, 200), 2000.0, 40.0, 90),
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 1, ShareGPTLengths(1000, 250), 2000.0, 40.0,
         95),
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "A100-SXM-80GB", 1, FixedLengths(3000, 300), None, 25.0),
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 1, CHAT, 3000.0, 50.0, 90, 16384,
         quick=True),
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "A100-SXM-80GB", 1, CHAT, 3000.0, 50.0, None, 16384),
    Case("Qwen/Qwen3-32B", "fp8", "H100-SXM-80GB", 1, FixedLengths(3000, 300), 2000.0, 40.0, 95),
    Case("meta-llama/Llama-3.3-70B-Instruct", "bf16", "H100-SXM-80GB", 4, FixedLengths(1000, 250), 500.0, 60.0, 90),
    Case("openai/gpt-oss-20b", "mxfp4", "H100-SXM-80GB", 1, FixedLengths(1000, 250), 500.0, 60.0, 99),
    Case("openai/gpt-oss-120b", "mxfp4", "A100-SXM-80GB", 1, FixedLengths(200, 800), 2000.0, 40.0),
    # TPOT only, loose: the replica's saturation decides (the queue's stability and the KV cache's swings)
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 1, FixedLengths(1000, 200), None, 100.0,
         quick=True),
)


CLOSED_CASES = (
    # the KV cache decides: equal requests' ages swing (steady_state.overfills)
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "RTX4090-24GB", 1, FixedLengths(200, 800), 2000.0, 40.0),
    Case("Qwen/Qwen3-30B-A3B", "bf16", "H100-SXM-80GB", 1, FixedLengths(1000, 250), 500.0, 60.0, 95),
    Case("google/gemma-3-27b-it", "bf16", "H100-SXM-80GB", 1, FixedLengths(3000, 300), 2000.0, 60.0, 90),
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "L40S-48GB", 1, FixedLengths(1000, 250), 2000.0, 40.0, 95),
    Case("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 1, CHAT, 3000.0, 50.0, 90, 16384),
    Case("openai/gpt-oss-20b", "mxfp4", "H100-SXM-80GB", 1, FixedLengths(1000, 250), 500.0, 60.0, 99),
)


def closed_loops(long_measured: int) -> None:
    """The closed-loop table (--closed): clients found on 400-request runs against `long_measured`-request ones."""
    print(f"window: closed_capacity on {MEASURED:,}-request closed runs; long: the same grid search on "
          f"{long_measured:,}-request runs. Clients; CPU seconds of each search.")
    print(f"{'model':22} {'GPU':9} tp {'lengths':18} {'TTFT/TPOT ms':16} {'window':>7} {'long':>7} {'w/long':>6} "
          f"{'w s':>5} {'long s':>6}")
    ratios: list[float] = []
    for case in CLOSED_CASES:
        replica = replica_of(case)
        if replica is None:
            continue
        try:
            start = closed_top(replica, round(case.lengths.mean_input_tokens), round(case.lengths.mean_output_tokens),
                               case.ttft_ms, case.tpot_ms).concurrency
        except SloUnreachableError:
            start = 1.0
        found: dict[str, float] = {}
        took: dict[str, float] = {}
        for name, measured in (("window", MEASURED), ("long", long_measured)):
            t0 = time.process_time()
            found[name], _ = closed_capacity(replica, case.lengths, case.ttft_ms, case.tpot_ms, case.percentile,
                                             start, measured=measured)
            took[name] = time.process_time() - t0
        w = found["window"] / found["long"] if found["long"] > 0 else float("inf")
        if found["long"] > 0:
            ratios.append(w)
        print(f"{case.label()} {found['window']:7.0f} {found['long']:7.0f} {w:6.3f} {took['window']:5.1f} "
              f"{took['long']:6.1f}", flush=True)
    if ratios:
        print(f"window / long-run clients over {len(ratios)} closed loops: median {statistics.median(ratios):.3f}, "
              f"max {max(ratios):.3f}, min {min(ratios):.3f}")


def replica_of(case: Case) -> latency.Replica | None:
    arch, gpu = get_model(case.model), get_gpu(case.gpu)
    mem = estimate(arch, gpu, ServingConfig(tensor_parallel=case.tp, precision=case.precision,  # type: ignore[arg-type]
                                            max_model_len=case.max_model_len))
    if not mem.fits:
        print(f"{case.label()} does not fit: {mem.reason}")
        return None
    return latency.build_replica(arch, gpu, mem)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the quick subset (6 workloads)")
    parser.add_argument("--long", type=int, default=4000, help="measured requests of the long runs (4,000)")
    parser.add_argument("--closed", action="store_true", help="closed loops instead (6 workloads)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if args.closed:
        closed_loops(args.long)
        return
    print("window: the 400-request search alone; confirmed: steady_capacity (that search, then confirmed on "
          f"{VERIFY_FACTOR * MEASURED:,}-request windows); long: the grid search on {args.long:,}-request runs. "
          "Requests/s; CPU seconds of each search.")
    print(f"{'model':22} {'GPU':9} tp {'lengths':18} {'TTFT/TPOT ms':16} {'window':>7} {'confirm':>7} {'long':>7} "
          f"{'w/long':>6} {'c/long':>6} {'w s':>5} {'c s':>5} {'long s':>6}")
    window_ratios: list[float] = []
    ratios: list[float] = []
    cpu: dict[str, list[float]] = {"window": [], "confirmed": []}
    for case in CASES:
        if args.quick and not case.quick:
            continue
        replica = replica_of(case)
        if replica is None:
            continue
        try:
            start = analytic_load.max_rate(replica, round(case.lengths.mean_input_tokens),
                                     round(case.lengths.mean_output_tokens), case.ttft_ms,
                                     case.tpot_ms).requests_per_second
        except SloUnreachableError:
            start = 1.0
        found: dict[str, float] = {}
        for name, verify in (("window", MEASURED), ("confirmed", None)):
            t0 = time.process_time()
            found[name], _ = steady_capacity(replica, case.lengths, case.ttft_ms, case.tpot_ms, case.percentile,
                                             start, verify=verify)
            cpu[name].append(time.process_time() - t0)

        def long_run(rate: float, case: Case = case,
                     replica: latency.Replica = replica) -> tuple[bool, dict[str, float | int]]:
            res, stable = steady_run(replica, case.lengths, rate, case.ttft_ms, case.tpot_ms, measured=args.long)
            summary = res.summary()
            return meets(summary, stable, case.ttft_ms, case.tpot_ms, case.percentile), summary

        t0 = time.process_time()
        long, _ = grid_search(long_run, found["window"] if found["window"] > 0 else start, lambda x: x)
        long_took = time.process_time() - t0
        w, c = (found[k] / long if long > 0 else float("inf") for k in ("window", "confirmed"))
        if long > 0:
            window_ratios.append(w)
            ratios.append(c)
        print(f"{case.label()} {found['window']:7.3f} {found['confirmed']:7.3f} {long:7.3f} {w:6.3f} {c:6.3f} "
              f"{cpu['window'][-1]:5.1f} {cpu['confirmed'][-1]:5.1f} {long_took:6.1f}", flush=True)
    for name, rs in (("window", window_ratios), ("confirmed", ratios)):
        if rs:
            print(f"{name:>9} / long-run capacity over {len(rs)} workloads: median {statistics.median(rs):.3f}, "
                  f"max {max(rs):.3f}, min {min(rs):.3f}; CPU {sum(cpu[name]):.1f} s "
                  f"(median {statistics.median(cpu[name]):.2f} s a workload)")


if __name__ == "__main__":
    main()

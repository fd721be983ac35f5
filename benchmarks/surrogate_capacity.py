"""How good a surrogate the analytic capacity is for the simulated one, on mean-target workloads.

    python benchmarks/surrogate_capacity.py

The planner simulates replica capacity for workloads with a percentile target or a length mix
(planner/simcapacity.py); a workload with mean targets and one prompt/output length is planned on the analytic
steady state (physics/latency.py max_rate), which costs microseconds instead of seconds. Issue 13 allows that
only as a surrogate whose error is measured: this script measures it. For a grid of models, GPUs, request
shapes and targets it prints the analytic capacity, the simulated one (planner/simcapacity.py
simulated_capacity: Poisson arrivals, 400 requests, seed 0, the largest rate whose simulated MEAN TTFT and TPOT
meet the targets, bracketed to 4 %), their ratio and which target binds, then the ratio's distribution.

The simulated capacity is the largest rate of a grid 4 % apart (steady_state.SEARCH_TOLERANCE) that meets the
targets: the replica's own lies between it and the next grid rate, so an exact analytic capacity reads 1.00-1.04
against it, about 1.02 on average. The ratio to the middle of that bracket ("a/mid") and the count of analytic
capacities inside it say how far the analytic model is from the simulator itself (2026-12-05: the TPOT-bound
rows' median of 1.020 against the grid rate is 1.000 against the middle, and the analytic TPOT at the same rate
is within 0.1 % of a 3,000-request simulated run on Llama-3.1-8B at 1,000 / 250 on an H100).

What the ratio means for a plan: replicas are bought for capacity x headroom, so analytic / simulated = 1.10
is a plan 10 % short of replicas where the simulator is right.
"""

from __future__ import annotations

import math
import os
import statistics
import time

from gpuopt.errors import SloUnreachableError
from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import Slo, Workload
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.steady_state import SEARCH_TOLERANCE
from gpuopt.planner.simcapacity import simulated_capacity

# (model, precision, GPU, TP): dense and MoE, Hopper, Ampere and Ada, one and several GPUs
REPLICAS = (
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 1),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "A100-SXM-80GB", 1),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "L40S-48GB", 1),
    ("Qwen/Qwen3-32B", "fp8", "H100-SXM-80GB", 1),
    ("meta-llama/Llama-3.3-70B-Instruct", "bf16", "H100-SXM-80GB", 4),
    ("openai/gpt-oss-20b", "mxfp4", "H100-SXM-80GB", 1),
    ("openai/gpt-oss-120b", "mxfp4", "A100-SXM-80GB", 1),
    ("Qwen/Qwen3-30B-A3B", "bf16", "H100-SXM-80GB", 1),
    # a Gated DeltaNet hybrid (state pages) and a sliding-window model (window groups): KvPool's blocks
    ("Qwen/Qwen3.5-35B-A3B", "bf16", "H100-SXM-80GB", 1),
    ("google/gemma-3-27b-it", "bf16", "H100-SXM-80GB", 1),
)
SHAPES = ((1000, 250), (3000, 300), (200, 800))  # input / output tokens
TARGETS = ((2000.0, 40.0), (500.0, 60.0), (None, 25.0))  # mean TTFT ms, mean TPOT ms


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"{'model':34} {'GPU':14} {'tp':>2} {'in/out':>9} {'TTFT/TPOT':>10} {'analytic':>9} {'simulated':>9} "
          f"{'a/s':>6} {'a/mid':>6} {'binds':>6} {'s':>5}")
    ratios: list[float] = []
    to_mid: list[float] = []
    inside = 0
    by_bind: dict[str, list[float]] = {}
    mid_by_bind: dict[str, list[float]] = {}
    started = time.perf_counter()
    for model, precision, gpu_name, tp in REPLICAS:
        arch, gpu = get_model(model), get_gpu(gpu_name)
        mem = estimate(arch, gpu, ServingConfig(tensor_parallel=tp, precision=precision,  # type: ignore[arg-type]
                                                max_model_len=8192))
        if not mem.fits:
            print(f"{model:34} {gpu_name:14} {tp:>2} does not fit: {mem.reason}")
            continue
        r = latency.build_replica(arch, gpu, mem)
        for inp, out in SHAPES:
            for ttft, tpot in TARGETS:
                try:
                    analytic = analytic_load.max_rate(r, inp, out, ttft, tpot)
                except SloUnreachableError:
                    continue
                w = Workload(name="w", model=model, requests_per_second=1, input_tokens=inp, output_tokens=out,
                             slo=Slo(ttft_ms=ttft, tpot_ms=tpot))
                t0 = time.perf_counter()
                sim, summary = simulated_capacity(r, w, analytic.requests_per_second)
                took = time.perf_counter() - t0
                if summary is None or sim <= 0:
                    print(f"{model:34} {gpu_name:14} {tp:>2} {inp:>4}/{out:<4} {ttft or '-'!s:>5}/{tpot:<4g} "
                          f"{analytic.requests_per_second:9.2f} {'none':>9}")
                    continue
                a = analytic.requests_per_second
                binds = ("ttft" if ttft is not None and analytic.ttft_ms >= 0.99 * ttft
                         else "tpot" if analytic.tpot_ms >= 0.99 * tpot else "limit")
                ratio = a / sim
                ratios.append(ratio)
                mid = a / (sim * math.sqrt(1 + SEARCH_TOLERANCE))  # against the middle of the grid's bracket
                to_mid.append(mid)
                inside += sim <= a <= sim * (1 + SEARCH_TOLERANCE)
                by_bind.setdefault(binds, []).append(ratio)
                mid_by_bind.setdefault(binds, []).append(mid)
                print(f"{model:34} {gpu_name:14} {tp:>2} {inp:>4}/{out:<4} {ttft or '-'!s:>5}/{tpot:<4g} {a:9.2f} "
                      f"{sim:9.2f} {ratio:6.2f} {mid:6.2f} {binds:>6} {took:5.1f}")
    if not ratios:
        return
    q = statistics.quantiles(ratios, n=10)
    print(f"\nanalytic / simulated capacity over {len(ratios)} workloads: median {statistics.median(ratios):.3f}, "
          f"p10 {q[0]:.3f}, p90 {q[-1]:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}; "
          f"median |log error| {statistics.median(abs(x - 1) for x in ratios) * 100:.1f} %")
    log_mid = statistics.median(abs(math.log(x)) for x in to_mid) * 100
    print(f"against the middle of the simulator's {SEARCH_TOLERANCE:.0%} bracket: median "
          f"{statistics.median(to_mid):.3f}, median |log error| {log_mid:.1f} %; {inside} of {len(to_mid)} analytic "
          f"capacities inside the bracket")
    for bind, rs in sorted(by_bind.items()):
        print(f"  binding {bind:<8} {len(rs):3} workloads: median {statistics.median(rs):.3f}, "
              f"min {min(rs):.3f}, max {max(rs):.3f}; against the middle {statistics.median(mid_by_bind[bind]):.3f}")
    print(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

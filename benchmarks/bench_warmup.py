"""How much lighter a `vllm bench serve` run from an idle server reads than the steady state, fluid against simulator.

    python benchmarks/bench_warmup.py

A plan's latencies are a replica's steady state at its planned load; `vllm bench serve` measures from an idle
server (its --num-warmups requests run before the timed run, all at once). physics/bench_run.py follows such a
run as a fluid, and `gpuopt solve` says how many prompts a run needs where the default 1,000 read more than 5 %
light (planner/bench_advice.py). This script checks the fluid against the step-level simulator, which replays
`vllm bench serve` from an idle replica: for each replica and shape at 80 % of its analytic capacity (loose
targets, so the KV cache binds, as for a plan with a loose TPOT target), it prints

- fluid 1k / 3k: the fluid's mean TPOT of a 1,000 / 3,000-prompt run over its steady state;
- sim 1k / 3k: the simulator's, mean over seeds 0-2, over its own steady state -- the mean TPOT of the requests
  between the 3,000th and the 3,000th-last of a 20,000-prompt run (seed 0);
- settle: the requests the fluid says the batch takes to settle (within 3 %), and the prompts it recommends
  (the run within 2 % of the steady state);
- sim after: the simulator's mean TPOT of the 3,000-prompt runs' requests after the first `settle` and before the
  last `drain` the fluid gives, over its steady state (what judging only those requests reads);
- TTFT 1k: the simulator's mean TTFT of the 1,000-prompt runs over its steady state's (the fluid has no TTFT).

The plan's note quotes the fluid's shortfall as about the least a run shows: the last line counts the runs where
the fluid's ratio is above the simulator's or within a point of it.
"""

from __future__ import annotations

import os
import statistics
import time

from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import Lengths, Slo, Workload
from gpuopt.physics import latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.bench_run import bench_runs, length_classes, prompts_within
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.simulator import simulate
from gpuopt.physics.steady_state import length_population
from gpuopt.physics.traffic import PoissonArrivals, make_requests
from gpuopt.planner.mix import capacity_point
from gpuopt.planner.simcapacity import length_distribution

LOAD = 0.8  # of the analytic capacity: the plan's default headroom
SEEDS = (0, 1, 2)
LOOSE_TPOT_MS = 1e5  # no binding target: the KV cache binds, as for a plan with a loose TPOT target
WITHIN = 0.01  # the fluid's shortfall is "about the least a run shows" when it is at most a point more than that
LONG = 20_000
TRIM = 3_000
# (model, precision, KV dtype, GPU, input, output tokens, ShareGPT-shaped lengths with those means)
CASES: tuple[tuple[str, str, str, str, int, int, bool], ...] = (
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "auto", "H100-SXM-80GB", 200, 800, False),
    ("openai/gpt-oss-20b", "mxfp4", "auto", "H100-SXM-80GB", 200, 800, False),
    ("Qwen/Qwen3-30B-A3B", "bf16", "auto", "H100-SXM-80GB", 200, 800, False),
    ("Qwen/Qwen3-32B", "fp8", "auto", "H100-SXM-80GB", 500, 1500, False),
    ("meta-llama/Llama-3.1-8B-Instruct", "fp8", "fp8", "RTX4090-24GB", 200, 800, False),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "auto", "L40S-48GB", 1000, 1000, False),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "auto", "H100-SXM-80GB", 300, 600, True),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "auto", "H100-SXM-80GB", 1000, 250, False),
)


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    started = time.perf_counter()
    print(f"{'model':28} {'GPU':14} {'lengths':9} {'req/s':>6} {'fluid 1k':>8} {'sim 1k':>7} {'fluid 3k':>8} "
          f"{'sim 3k':>7} {'settle':>6} {'drain':>6} {'prompts':>7} {'sim after':>9} {'TTFT 1k':>7}")
    gaps: list[float] = []
    floors = 0
    for model, precision, kv, gpu_name, inp, outp, sharegpt in CASES:
        arch, gpu = get_model(model), get_gpu(gpu_name)
        mem = estimate(arch, gpu, ServingConfig(precision=precision, kv_cache_dtype=kv,  # type: ignore[arg-type]
                                                max_model_len=8192))
        r = latency.build_replica(arch, gpu, mem)
        w = Workload(name="w", model=model, requests_per_second=1, input_tokens=inp, output_tokens=outp,
                     lengths=Lengths(dataset="sharegpt") if sharegpt else None, slo=Slo(tpot_ms=LOOSE_TPOT_MS))
        lengths = length_distribution(w)
        label = "sharegpt" if sharegpt else f"{inp}/{outp}"
        rate = LOAD * capacity_point(r, w).requests_per_second  # the mix's own capacity, not its mean request's
        ins, outs, weight = length_population(lengths)
        classes = length_classes(ins, outs, weight)
        runs = bench_runs(r, classes, rate, 1000)
        runs3 = bench_runs(r, classes, rate, 3000)
        if runs is None or runs3 is None:
            print(f"{model[:28]:28} {gpu_name:14} {label:9} {rate:6.2f} no steady state")
            continue
        short, probe = runs
        long_run = simulate(r, make_requests(lengths, PoissonArrivals(rate), LONG, 0))
        steady = float(long_run.tpot_s[TRIM:-TRIM].mean())
        steady_ttft = float(long_run.ttft_s[TRIM:-TRIM].mean())
        sim1, sim3, after, ttft1 = [], [], [], []
        for seed in SEEDS:
            run1 = simulate(r, make_requests(lengths, PoissonArrivals(rate), 1000, seed))
            tp1 = run1.tpot_s
            sim1.append(float(tp1.mean()) / steady)
            ttft1.append(float(run1.ttft_s.mean()) / steady_ttft)
            tp3 = simulate(r, make_requests(lengths, PoissonArrivals(rate), 3000, seed)).tpot_s
            sim3.append(float(tp3.mean()) / steady)
            after.append(float(tp3[probe.settled_after:len(tp3) - probe.light_at_end].mean()) / steady)
        s1, s3 = statistics.mean(sim1), statistics.mean(sim3)
        gaps += [short.ratio - s1, runs3[0].ratio - s3]
        floors += (short.ratio >= s1 - WITHIN) + (runs3[0].ratio >= s3 - WITHIN)
        print(f"{model[:28]:28} {gpu_name:14} {label:9} {rate:6.2f} {short.ratio:8.3f} {s1:7.3f} "
              f"{runs3[0].ratio:8.3f} {s3:7.3f} {probe.settled_after:6d} {probe.light_at_end:6d} "
              f"{prompts_within(probe, 0.02):7d} {statistics.mean(after):9.3f} {statistics.mean(ttft1):7.3f}")
    if gaps:
        print(f"\nfluid - simulated ratio over {len(gaps)} runs: median {statistics.median(gaps):+.3f}, "
              f"min {min(gaps):+.3f}, max {max(gaps):+.3f}; the fluid within {WITHIN:g} of the simulator or above "
              f"it in {floors} of {len(gaps)}")
    print(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

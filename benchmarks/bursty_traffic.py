"""Bursty request-rate traffic: what it costs in capacity, and how well the analytic screen sees it.

    python benchmarks/bursty_traffic.py [--quick]

A workload's `burstiness: b` sends gamma inter-arrival times of shape b (`vllm bench serve --burstiness`;
1 is Poisson). Part 1 (all that --quick runs): mean TTFT at fixed loads (5, 30, 60 and 85 % of the Poisson
analytic capacity, shapes 0.5 and 0.25), the analytic steady state (analytic_load.at_rate(burstiness=b):
clumps, physics/queueing.arrivals_excess) against 1,600 simulated requests in steady state
(steady_state.steady_run), with the median and largest |log error| up to 60 % and at 85 %.

Part 2: for a grid of replicas, request shapes and mean targets, per b, the simulated
capacity (planner/simcapacity.py simulated_capacity: 400 measured requests confirmed on 1,600, the largest
grid rate meeting the targets), the analytic screen's capacity with the arrivals' clumps
(analytic_load.max_rate(burstiness=b)) and the Poisson analytic capacity a planner without the field would
use. Then, per b: the simulated capacity over the Poisson one (what the bursts cost), and the median and
largest |log| error of both analytic figures against the simulated one.

The simulator is the authority for request-rate workloads with targets (they are simulated when bursty, in
`solve` and `plan` alike); the analytic figure is the screen that picks which shapes to simulate.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time

from gpuopt.errors import SloUnreachableError
from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.steady_state import steady_capacity, steady_run
from gpuopt.physics.traffic import FixedLengths
from gpuopt.planner import simcapacity

REPLICAS = (
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 1),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "L40S-48GB", 1),
    ("Qwen/Qwen3-32B", "fp8", "H100-SXM-80GB", 1),
    ("Qwen/Qwen3-30B-A3B", "bf16", "H100-SXM-80GB", 1),
    ("openai/gpt-oss-20b", "mxfp4", "H100-SXM-80GB", 1),
    ("google/gemma-3-27b-it", "bf16", "H100-SXM-80GB", 1),
)
SHAPES = ((1000, 250), (3000, 300), (200, 800))
TARGETS = ((500.0, 40.0), (2000.0, 60.0))  # mean TTFT ms, mean TPOT ms
BURSTINESS = (0.25, 0.5, 2.0)
TTFT_CASES = (  # model, precision, GPU, input, output tokens
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 1000, 250),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "L40S-48GB", 3000, 300),
    ("Qwen/Qwen3-32B", "fp8", "H100-SXM-80GB", 3000, 300),
    ("Qwen/Qwen3-32B", "fp8", "H100-SXM-80GB", 1000, 250),
    ("Qwen/Qwen3-30B-A3B", "bf16", "H100-SXM-80GB", 1000, 250),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100-SXM-80GB", 200, 800),
)
LOADS = (0.05, 0.3, 0.6, 0.85)  # of the Poisson analytic capacity without targets


def _replica(model: str, precision: str, gpu_name: str, tp: int) -> latency.Replica | None:
    arch, gpu = get_model(model), get_gpu(gpu_name)
    mem = estimate(arch, gpu, ServingConfig(tensor_parallel=tp, precision=precision,  # type: ignore[arg-type]
                                            max_model_len=8192))
    return latency.build_replica(arch, gpu, mem) if mem.fits else None


def _simulated(r: latency.Replica, inp: int, out: int, ttft: float, tpot: float, b: float, start: float) -> float:
    """The simulated capacity as the planner searches it (simcapacity's window and seed), at shape `b` itself:
    a workload plans b > 1 as Poisson (Workload.arrival_burstiness), the simulator runs what it is given."""
    return steady_capacity(r, FixedLengths(inp, out), ttft, tpot, None, start, measured=simcapacity.NUM_PROMPTS,
                           seed=simcapacity.SEED, burstiness=b)[0]


def ttft_at_fixed_loads(quick: bool) -> None:
    print(f"{'model':24} {'GPU':14} {'in/out':>9} {'load':>5} {'b':>5} {'sim ms':>8} {'analytic':>8} {'a/s':>6} "
          f"{'Poisson sim':>11}")
    errors: dict[str, list[float]] = {"up to 60 %": [], "85 %": []}
    for model, precision, gpu_name, inp, out in TTFT_CASES[:3] if quick else TTFT_CASES:
        r = _replica(model, precision, gpu_name, 1)
        if r is None:
            continue
        top = analytic_load.max_rate(r, inp, out).requests_per_second
        for load in LOADS:
            rate = top * load
            poisson = steady_run(r, FixedLengths(inp, out), rate, None, None, measured=1600)[0]
            for b in (0.5, 0.25):
                sim = steady_run(r, FixedLengths(inp, out), rate, None, None, measured=1600, burstiness=b)[0]
                simulated = float(sim.summary()["mean_ttft_ms"])
                analytic = analytic_load.at_rate(r, rate, inp, out, burstiness=b).ttft_ms
                errors["85 %" if load > 0.6 else "up to 60 %"].append(abs(math.log(analytic / simulated)))
                print(f"{model.split('/')[1][:24]:24} {gpu_name:14} {inp:>4}/{out:<4} {load:5.0%} {b:>5g} "
                      f"{simulated:8.0f} {analytic:8.0f} {analytic / simulated:6.3f} "
                      f"{float(poisson.summary()['mean_ttft_ms']):11.0f}", flush=True)
    for where, errs in errors.items():
        if errs:
            print(f"mean TTFT at {where} of the Poisson capacity ({len(errs)} cases): |log error| median "
                  f"{statistics.median(errs):.1%}, max {max(errs):.1%}")
    print()


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    started = time.perf_counter()
    ttft_at_fixed_loads(quick)
    if quick:
        print(f"took {time.perf_counter() - started:.0f} s")
        return
    print(f"{'model':24} {'GPU':14} {'in/out':>9} {'TTFT/TPOT':>10} {'b':>5} {'sim':>7} {'sim/poi':>7} "
          f"{'screen':>7} {'s/sim':>6} {'poisson':>7} {'p/sim':>6}")
    drops: dict[float, list[float]] = {b: [] for b in BURSTINESS}
    screen_err: dict[float, list[float]] = {b: [] for b in BURSTINESS}
    poisson_err: dict[float, list[float]] = {b: [] for b in BURSTINESS}
    rejected: dict[float, int] = {b: 0 for b in BURSTINESS}
    for model, precision, gpu_name, tp in REPLICAS:
        r = _replica(model, precision, gpu_name, tp)
        if r is None:
            continue
        for inp, out in SHAPES:
            for ttft, tpot in TARGETS:
                try:
                    poisson = analytic_load.max_rate(r, inp, out, ttft, tpot).requests_per_second
                except SloUnreachableError:
                    continue
                base = _simulated(r, inp, out, ttft, tpot, 1.0, poisson)
                if base <= 0:
                    continue
                for b in BURSTINESS:
                    screen = analytic_load.max_rate(r, inp, out, ttft, tpot, burstiness=b).requests_per_second
                    sim = _simulated(r, inp, out, ttft, tpot, b, max(screen, 0.01))
                    if sim <= 0:
                        continue
                    drops[b].append(sim / base)
                    if screen < 0.01 * sim:  # the screen finds no rate at which the targets hold
                        rejected[b] += 1
                    else:
                        screen_err[b].append(abs(math.log(screen / sim)))
                    poisson_err[b].append(abs(math.log(poisson / sim)))
                    print(f"{model.split('/')[1][:24]:24} {gpu_name:14} {inp:>4}/{out:<4} {ttft:>5g}/{tpot:<4g} "
                          f"{b:>5g} {sim:7.2f} {sim / base:7.3f} {screen:7.2f} {screen / sim:6.3f} {poisson:7.2f} "
                          f"{poisson / sim:6.3f}", flush=True)
    print()
    for b in BURSTINESS:
        if not drops[b]:
            continue
        n = len(drops[b])
        print(f"burstiness {b:g} ({n} cases): simulated capacity x{statistics.median(drops[b]):.3f} of Poisson's "
              f"(min x{min(drops[b]):.3f}); screen |log error| median {statistics.median(screen_err[b]):.1%}, "
              f"max {max(screen_err[b]):.1%}, {rejected[b]} rejected by the screen; Poisson analytic |log error| "
              "median "
              f"{statistics.median(poisson_err[b]):.1%}, max {max(poisson_err[b]):.1%}")
    print(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

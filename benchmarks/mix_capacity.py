"""Capacity of one replica over a length mix: at the mean request, the share-weighted mean of per-bin
capacities, the mix (planner/mix.py, analytic), and the simulator at the mean and at p90/p99.

    python benchmarks/mix_capacity.py

The mixes are inputs, not measurements: a ShareGPT-shaped mix (the simulator's log-normal, sigma 1, 10
quantile bins per side) and a two-bin chat mix (80 % short, 20 % long). The issue's measured motivation
(Melange's Chatbot Arena histogram, Llama-2-7B on A10 and A100: capacity at the mean 1.39-1.41x the
capacity over the mix) is not in ../shared/data, so it cannot be replayed here; the column "mean/mix"
is this model's figure for the same ratio.
"""

from __future__ import annotations

import math
import os
import time
from typing import Literal

from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import LengthBin, Lengths, Slo, Workload
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.traffic import SHAREGPT_SIGMA
from gpuopt.planner.mix import MixModel
from gpuopt.planner.simcapacity import simulated_capacity

BINS = 10


def lognormal_quantile_bins(mean: float) -> list[float]:
    """Mid-quantile values of a log-normal of sigma SHAREGPT_SIGMA with the given mean, one per decile."""
    from statistics import NormalDist

    mu = math.log(mean) - SHAREGPT_SIGMA**2 / 2
    return [math.exp(mu + SHAREGPT_SIGMA * NormalDist().inv_cdf((k + 0.5) / BINS)) for k in range(BINS)]


def workload(bins: list[tuple[int, int, float]], percentile: Literal[50, 90, 95, 99] | None) -> Workload:
    total = sum(s for *_, s in bins)
    bins = [(i, o, s / total) for i, o, s in bins]
    bins[-1] = (bins[-1][0], bins[-1][1], 1 - sum(s for *_, s in bins[:-1]))
    mi, mo = sum(i * s for i, _, s in bins), sum(o * s for _, o, s in bins)
    return Workload(name="w", model="meta-llama/Llama-3.1-8B-Instruct", requests_per_second=1,
                    input_tokens=round(mi), output_tokens=round(mo),
                    slo=Slo(ttft_ms=3000, tpot_ms=50, percentile=percentile),
                    lengths=Lengths(histogram=[LengthBin(input_tokens=i, output_tokens=o, share=s)
                                               for i, o, s in bins]))


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    ins, outs = lognormal_quantile_bins(1000), lognormal_quantile_bins(250)
    mixes = {
        "sharegpt-shaped 1000/250": [(max(4, round(i)), max(4, round(o)), 1.0) for i in ins for o in outs],
        "chat 80% 300/80 + 20% 8500/1500": [(300, 80, 0.8), (8500, 1500, 0.2)],
    }
    print("SLO TTFT 3000 ms, TPOT 50 ms; Llama-3.1-8B-Instruct BF16, max_model_len 16384; requests/s per replica")
    print(f"{'mix':34} {'GPU':16} {'at mean':>8} {'bin avg':>8} {'mix':>8} {'mean/mix':>8} "
          f"{'sim mean':>8} {'sim p90':>8} {'sim p99':>8} {'s':>5}")
    for name, bins in mixes.items():
        for gpu_name in ("A10-24GB", "A100-SXM-80GB", "H100-SXM-80GB"):
            arch, gpu = get_model("meta-llama/Llama-3.1-8B-Instruct"), get_gpu(gpu_name)
            mem = estimate(arch, gpu, ServingConfig(max_model_len=16384))
            if not mem.fits:
                continue
            r = latency.build_replica(arch, gpu, mem)
            w = workload(bins, None)
            at_mean = analytic_load.max_rate(r, w.input_tokens, w.output_tokens, 3000, 50).requests_per_second
            model = MixModel(r, w)
            avg = sum(s * c for (_, _, s), c in zip(model.bins, model.caps, strict=True))
            mix = model.capacity().point.requests_per_second
            start = time.perf_counter()
            percentiles: tuple[Literal[90, 99] | None, ...] = (None, 90, 99)
            sims = [simulated_capacity(r, workload(bins, p), mix)[0] for p in percentiles]
            took = time.perf_counter() - start
            print(f"{name:34} {gpu_name:16} {at_mean:8.2f} {avg:8.2f} {mix:8.2f} {at_mean / mix:8.2f} "
                  f"{sims[0]:8.2f} {sims[1]:8.2f} {sims[2]:8.2f} {took:5.1f}")


if __name__ == "__main__":
    main()

"""Prompt-heavy shapes: the analytic model's mean TPOT against the simulator's, at the same Poisson rate.

A request's decode starts when its prefill ends, with the prompts that arrived meanwhile queued behind it
(physics/decode_window.py); with long prompts and short outputs that stretches TPOT well past the mean step.
This prints, for Llama-3.1-8B on one H100, the steady state without the window, the analytic model now, and
the simulator (1,500 Poisson requests, seeds 0 and 1), and the median |error| of the analytic model.
No target: docs/simulator.md ("Prompt-heavy shapes") quotes the table.
"""

from __future__ import annotations

import statistics
import time

from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.simulator import simulate
from gpuopt.physics.traffic import FixedLengths, PoissonArrivals, make_requests

# (prompt, output, requests/s): the 1,000-8,000 rows at about half the prefill's time, the 8,192 ones at 2 req/s
SHAPES = [(1000, 16, 8.345), (1000, 64, 8.345), (2000, 16, 5.349), (2000, 64, 5.349), (4000, 16, 3.054),
          (4000, 64, 3.054), (8000, 16, 1.578), (8000, 64, 1.578), (8192, 2, 2.0), (8192, 4, 2.0), (8192, 16, 2.0),
          (8192, 64, 2.0), (8192, 256, 2.0)]


def main() -> int:
    started = time.perf_counter()
    arch, gpu = get_model("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H100-SXM-80GB")
    replica = latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig()), None)
    print(f"{'prompt/output':>14} {'req/s':>6} {'steady ms':>10} {'analytic ms':>12} {'simulated ms':>18} {'error':>7}")
    errors = []
    for prompt, output, rate in SHAPES:
        mix = analytic_load._StepMix(replica, prompt, output)
        steady = mix.request_step(mix.settle(rate)) * 1e3
        analytic = analytic_load.at_rate(replica, rate, prompt, output, mix).tpot_ms
        simulated = []
        for seed in (0, 1):
            res = simulate(replica, make_requests(FixedLengths(prompt, output), PoissonArrivals(rate), 1500, seed=seed))
            done = res.output_tokens > 1
            simulated.append(float(((res.e2el_s - res.ttft_s)[done] / (res.output_tokens[done] - 1)).mean()) * 1e3)
        mean = statistics.fmean(simulated)
        errors.append(abs(analytic / mean - 1) * 100)
        print(f"{prompt:>8,}/{output:<5} {rate:>6.3f} {steady:>10.2f} {analytic:>12.2f} "
              f"{simulated[0]:>8.2f}-{simulated[1]:<8.2f} {errors[-1]:>6.1f}%")
    print(f"median |analytic / simulated - 1| {statistics.median(errors):.1f} % over {len(SHAPES)} shapes "
          f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

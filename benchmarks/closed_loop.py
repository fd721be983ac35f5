"""Closed loops (`concurrency:` workloads): the analytic model's mean TTFT, TPOT and rate against the simulator's.

For each shape, `analytic_load.at_concurrency` against `steady_state.closed_run` (the clients started one after
another over a turn of the loop, 2 x clients requests of warm-up, then max(400, 20 x clients) measured), with
lengths uniform within +-30 % of the means (`--range-ratio`, default 0.3: real traffic's lengths vary) -- and
with `--range-ratio 0`, one length, whose loops settle into convoys (docs/simulator.md, "Closed loops are not
confirmed"). Prints each shape and the median |error| of TTFT, TPOT and rate. No target: docs/simulator.md
("Closed loops of a few clients") quotes the figures.
"""

from __future__ import annotations

import argparse
import statistics
import time

from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.steady_state import closed_run
from gpuopt.physics.traffic import FixedLengths, LengthDistribution, RangeLengths

LLAMA, QWEN_MOE = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B"
# (model, GPU, prompt, output, clients): prompt-heavy loops of a few clients first, then chat-like ones
SHAPES = [(LLAMA, "H100-SXM-80GB", p, o, n) for p, o, n in [
    (8192, 16, 2), (8192, 16, 4), (8192, 16, 8), (8192, 16, 16), (8192, 64, 8), (4000, 16, 8), (16000, 32, 4),
    (4000, 64, 16), (2000, 128, 32), (1000, 256, 64), (8192, 256, 32), (500, 500, 128)]] + [
    (QWEN_MOE, "H100-SXM-80GB", 4000, 64, 16), (QWEN_MOE, "H100-SXM-80GB", 1000, 256, 64),
    (LLAMA, "L4-24GB", 2000, 64, 8)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--range-ratio", type=float, default=0.3, help="lengths uniform in [L(1-r), L(1+r)]")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"lengths within +-{args.range_ratio:.0%} of the means; analytic / simulated")
    print(f"{'model':26} {'gpu':14} {'prompt/output':>13} {'clients':>7} | {'TTFT ms':>15} {'error':>7} | "
          f"{'TPOT ms':>13} {'error':>7} | {'req/s':>11} {'error':>6}")
    errors: dict[str, list[float]] = {"TTFT": [], "TPOT": [], "rate": []}
    for model, gpu_name, prompt, output, clients in SHAPES:
        arch, gpu = get_model(model), get_gpu(gpu_name)
        replica = latency.build_replica(arch, gpu, estimate(arch, gpu, ServingConfig()), None)
        point = analytic_load.at_concurrency(replica, clients, prompt, output)
        lengths: LengthDistribution = (RangeLengths(prompt, output, args.range_ratio) if args.range_ratio
                                       else FixedLengths(prompt, output))
        window = closed_run(replica, lengths, clients, measured=max(400, 20 * clients))
        done = window.output_tokens > 1
        ttft = float(window.ttft_s.mean()) * 1e3
        tpot = float(((window.e2el_s - window.ttft_s)[done] / (window.output_tokens[done] - 1)).mean()) * 1e3
        rate = clients / float(window.e2el_s.mean())  # Little's law: every client is always in flight
        row = {"TTFT": point.ttft_ms / ttft - 1, "TPOT": point.tpot_ms / tpot - 1,
               "rate": point.requests_per_second / rate - 1}
        for key, value in row.items():
            errors[key].append(abs(value))
        print(f"{model[-26:]:26} {gpu_name:14} {prompt:>7,}/{output:<5} {clients:>7} | "
              f"{point.ttft_ms:7.0f}/{ttft:<7.0f} {row['TTFT']:+7.1%} | {point.tpot_ms:6.1f}/{tpot:<6.1f} "
              f"{row['TPOT']:+7.1%} | {point.requests_per_second:5.2f}/{rate:<5.2f} {row['rate']:+6.1%}")
    print("median |analytic / simulated - 1|: " + ", ".join(
        f"{key} {statistics.median(values):.1%}" for key, values in errors.items())
        + f" over {len(SHAPES)} loops ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

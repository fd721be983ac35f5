"""The analytic steady state against the simulator's at the same Poisson rate: mean TTFT and TPOT, shape by shape.

    python benchmarks/open_loop_latency.py

benchmarks/surrogate_capacity.py compares the largest rate within targets; this compares the latencies at
fixed rates below capacity, where a plan's "at the planned load" figures come from: one-token outputs
(classification, scoring), short outputs, long prompts, MoE and dense models, light to heavy load. Each
simulated point is `steady_state.steady_run` (3,000 measured requests after its warm-up, seed 0); points past
either model's stability are left out. Prints each point and the median, p90 and largest |error| of TTFT
and TPOT. Takes about a minute on one core.
"""

from __future__ import annotations

import statistics
import time

from gpuopt.hardware import get_gpu
from gpuopt.physics import analytic_load, latency
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.steady_state import steady_run
from gpuopt.physics.traffic import FixedLengths

LLAMA8, LLAMA70 = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct"
QWEN_MOE = "Qwen/Qwen3-30B-A3B"
# (model, precision, GPU, TP, prompt, output, rates)
CASES = (
    (LLAMA8, "bf16", "L4-24GB", 1, 50, 1, (20, 50, 77)),
    (LLAMA8, "bf16", "L40S-48GB", 1, 100, 1, (40, 80, 115)),
    (LLAMA8, "bf16", "H100-SXM-80GB", 1, 100, 1, (70, 140, 210)),
    (LLAMA8, "bf16", "H100-SXM-80GB", 1, 2000, 1, (5, 15)),
    (LLAMA8, "bf16", "L40S-48GB", 1, 4000, 1, (0.5, 1.5, 2.5)),
    (LLAMA8, "bf16", "L4-24GB", 1, 1000, 1, (1, 3)),
    (QWEN_MOE, "bf16", "H100-SXM-80GB", 1, 200, 1, (40, 100)),
    (QWEN_MOE, "bf16", "H100-SXM-80GB", 1, 2000, 1, (5,)),
    (LLAMA8, "bf16", "L40S-48GB", 1, 500, 2, (10, 25)),
    (QWEN_MOE, "bf16", "H100-SXM-80GB", 1, 1000, 2, (10,)),
    (LLAMA8, "bf16", "L40S-48GB", 1, 1000, 3, (3, 8)),
    (LLAMA8, "bf16", "H100-SXM-80GB", 1, 200, 4, (40, 100, 150)),
    (LLAMA8, "bf16", "L40S-48GB", 1, 200, 8, (15, 35, 50)),
    (QWEN_MOE, "bf16", "H100-SXM-80GB", 1, 300, 8, (20, 50, 80)),
    (LLAMA8, "bf16", "H100-SXM-80GB", 1, 1000, 16, (5, 12, 18)),
    (LLAMA8, "bf16", "L40S-48GB", 1, 200, 100, (10, 25, 37)),
    (LLAMA8, "bf16", "H100-SXM-80GB", 1, 3000, 300, (1, 3, 5)),
    (LLAMA8, "bf16", "A100-SXM-80GB", 1, 3000, 300, (1, 2, 2.4)),
    (LLAMA70, "fp8", "H100-SXM-80GB", 2, 1000, 200, (1, 3, 6)),
    (LLAMA70, "bf16", "H100-SXM-80GB", 4, 3000, 300, (1, 1.6, 2, 2.2)),
    ("openai/gpt-oss-120b", "mxfp4", "H100-SXM-80GB", 1, 500, 200, (5, 15)),
    ("openai/gpt-oss-120b", "mxfp4", "A100-SXM-80GB", 1, 3000, 300, (0.6, 1.0, 1.3)),
    ("google/gemma-3-27b-it", "bf16", "H100-SXM-80GB", 1, 3000, 300, (0.5, 0.7, 0.82)),
)
MEASURED = 3000


def main() -> None:
    started = time.perf_counter()
    ttft_errors: list[float] = []
    tpot_errors: list[float] = []
    print(f"{'model':34} {'GPU':14} {'TP':>2} {'shape':>10} {'rate':>6} {'TTFT ms':>9} {'sim':>9} {'ratio':>6} "
          f"{'TPOT ms':>8} {'sim':>7} {'ratio':>6}")
    for model, precision, gpu_name, tp, inp, out, rates in CASES:
        arch, gpu = get_model(model), get_gpu(gpu_name)
        mem = estimate(arch, gpu, ServingConfig(tensor_parallel=tp, precision=precision,  # type: ignore[arg-type]
                                                max_model_len=max(8192, inp + out)))
        r = latency.build_replica(arch, gpu, mem)
        for rate in rates:
            point = analytic_load.at_rate(r, float(rate), inp, out)
            window, bounded = steady_run(r, FixedLengths(inp, out), float(rate), None, None, measured=MEASURED)
            if not (point.stable and bounded):
                print(f"{model:34} {gpu_name:14} {tp:>2} {inp:>5}/{out:<4} {rate:>6} past capacity: left out")
                continue
            s = window.summary()
            ttft, sim_ttft = point.ttft_ms, float(s["mean_ttft_ms"])
            tpot, sim_tpot = point.tpot_ms, float(s["mean_tpot_ms"])
            ttft_errors.append(abs(ttft / sim_ttft - 1))
            tpot_text = "-" if out <= 1 else f"{tpot / sim_tpot:6.3f}"
            if out > 1:
                tpot_errors.append(abs(tpot / sim_tpot - 1))
            print(f"{model:34} {gpu_name:14} {tp:>2} {inp:>5}/{out:<4} {rate:>6} {ttft:9.1f} {sim_ttft:9.1f} "
                  f"{ttft / sim_ttft:6.3f} {tpot:8.2f} {sim_tpot:7.2f} {tpot_text:>6}", flush=True)

    def summary(errors: list[float]) -> str:
        ranked = sorted(errors)
        p90 = ranked[min(len(ranked) - 1, int(0.9 * len(ranked)))]
        return (f"median {100 * statistics.median(ranked):.1f} %, p90 {100 * p90:.1f} %, "
                f"max {100 * ranked[-1]:.1f} % over {len(ranked)} points")

    print(f"\nmean TTFT |error|: {summary(ttft_errors)}")
    print(f"mean TPOT |error|: {summary(tpot_errors)} (outputs of one token have none)")
    print(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

"""Solve time and model size as the catalog and the number of workloads grow.

    python benchmarks/solve_scaling.py [--quick]

Catalog sizes: the shipped one, then x10 and x100 with synthetic offerings (copies of the priced rows under
synthetic provider names, prices scaled by a deterministic factor, so the pre-solve pruning cannot merge
them). Workloads: 1, 10, 50 drawn round-robin from a fixed list of models and loads. Each cell runs the whole
`solve` path (candidates with their memory and latency evaluation, the integer program, alternatives and the
residency premium) on one process, and the integer program alone is timed too.
Target (issue 5): the shipped catalog with 10 workloads in under 2 s on one core.
A status marked * stopped at the solver's 60 s time limit: feasible, not proven optimal.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from dataclasses import replace

from gpuopt.optimizer import program
from gpuopt.optimizer.solve import SolveOptions, plan_workloads
from gpuopt.pricing.catalog import Catalog, load_catalog
from gpuopt.workload import Slo, Workload, WorkloadFile

MODELS = [
    ("meta-llama/Llama-3.1-8B-Instruct", 4.0, 1000, 200, 1000, 40),
    ("meta-llama/Llama-3.1-70B-Instruct", 2.0, 1500, 300, 3000, 80),
    ("Qwen/Qwen2.5-7B-Instruct", 6.0, 800, 200, 800, 30),
    ("Qwen/Qwen2.5-32B-Instruct", 1.5, 2000, 300, 3000, 60),
    ("mistralai/Mistral-7B-Instruct-v0.3", 3.0, 500, 300, 1000, 40),
    ("google/gemma-2-9b-it", 2.0, 1000, 200, 1500, 50),
    ("Qwen/Qwen3-14B", 2.5, 1200, 250, 2000, 50),
    ("microsoft/phi-4", 2.0, 1000, 300, 2000, 50),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 1.0, 1000, 300, 3000, 60),
    ("Qwen/Qwen3-30B-A3B", 3.0, 1000, 300, 2000, 40),
]


def workloads(n: int) -> list[Workload]:
    out = []
    for i in range(n):
        model, rps, inp, outp, ttft, tpot = MODELS[i % len(MODELS)]
        out.append(Workload(name=f"w{i:02d}", model=model, requests_per_second=rps * (1 + i // len(MODELS)),
                            input_tokens=inp, output_tokens=outp, max_model_len=8192,
                            slo=Slo(ttft_ms=ttft, tpot_ms=tpot)))
    return out


def scaled(catalog: Catalog, factor: int) -> Catalog:
    if factor == 1:
        return catalog
    extra = []
    priced = [o for o in catalog.offerings if o.price_per_hour is not None]
    for k in range(1, factor):
        for j, o in enumerate(priced):
            bump = 1 + ((k * 7919 + j * 104729) % 1000) / 2000  # deterministic 1.0-1.5 price factor
            extra.append(replace(o, provider=f"{o.provider}-synth{k}", price_per_hour=o.price_per_hour * bump))
    return replace(catalog, offerings=catalog.offerings + tuple(extra))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="only the shipped catalog with 1 and 10 workloads")
    args = parser.parse_args()
    base = load_catalog(use_cache=False)
    factors = [1] if args.quick else [1, 10, 100]
    counts = [1, 10] if args.quick else [1, 10, 50]
    print(f"{'catalog rows':>12} {'workloads':>9} {'solve s':>8} {'IP s':>7} {'variables':>9} {'constraints':>11} "
          f"{'status':>9} {'cost/h USD':>11}")
    for factor in factors:
        catalog = scaled(base, factor)
        for n in counts:
            if factor == 100 and n == 50:
                continue  # minutes of candidate evaluation; the trend is clear from the other cells
            wf = WorkloadFile(schema_version=1, residency="global", workloads=workloads(n))
            timings: list[float] = []
            sizes: list[tuple[int, int, float]] = []
            original = program.solve

            def timed(*a: object, _original: object = original, _sizes: list[tuple[int, int, float]] = sizes,
                      **k: object) -> program.Solution:
                sol = _original(*a, **k)  # type: ignore[operator]
                _sizes.append((sol.variables, sol.constraints, sol.seconds))
                return sol  # type: ignore[no-any-return]

            program_solve = program.solve
            import gpuopt.optimizer.solve as solve_module

            solve_module.solve = timed  # type: ignore[assignment]
            start = time.perf_counter()
            plan, _ = plan_workloads(wf, catalog, SolveOptions(top=0, today=dt.date(2026, 11, 29)))
            timings.append(time.perf_counter() - start)
            solve_module.solve = program_solve  # type: ignore[assignment]
            main_ip = sizes[0] if sizes else (0, 0, 0.0)
            status = plan.status + ("*" if any("time limit" in w for w in plan.warnings) else "")
            print(f"{len(catalog.offerings):>12} {n:>9} {timings[0]:>8.2f} {main_ip[2]:>7.2f} {main_ip[0]:>9} "
                  f"{main_ip[1]:>11} {status:>9} {plan.total_cost_per_hour or 0:>11.2f}", flush=True)


if __name__ == "__main__":
    main()

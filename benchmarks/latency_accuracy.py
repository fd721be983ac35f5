"""Replay published serving measurements through gpuopt's latency model and print the error.

    python benchmarks/latency_accuracy.py

For every vLLM row of ../shared/data/perf_observed.csv that states its inputs: predicted vs observed, then
median and mean absolute percentage error for TPOT/ITL, TTFT and throughput separately (targets, issue 4:
TPOT median <= 15 %, throughput <= 20 %, TTFT <= 30 %). Fixed-batch end-to-end latencies are printed as
their own class. Rows from other engines (TensorRT-LLM, NIM) are upper bounds, printed apart.
The calibration (gpuopt/data/latency_calibration.yaml) is fitted on these rows by
benchmarks/calibrate_latency.py, which also prints a leave-one-model-out check.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from observed_latency import Scenario, load_scenarios, predict, replica_for  # noqa: E402
from observed_memory import ape, print_skipped  # noqa: E402

TARGETS = {"tpot": 15.0, "throughput": 20.0, "ttft": 30.0}


def _row(s: Scenario, pred: float) -> str:
    load = f"{s.load_kind} {s.load:g}" if s.load_kind != "saturation" else "saturation"
    return (f"{s.line:>4} {s.model[:34]:34} {s.gpu[:14]:14} tp{s.tp} {s.precision:5} {s.input_tokens:>6}/"
            f"{s.output_tokens:<5} {load:16} {s.metric:20} {pred:>11,.2f} {s.observed:>11,.2f} "
            f"{ape(pred, s.observed):6.1f}% {s.assumed}")


def main() -> int:
    scenarios, skipped = load_scenarios()
    errors: dict[str, list[float]] = {}
    print("vLLM rows: predicted vs observed")
    others = []
    for s in scenarios:
        if s.engine != "vLLM":
            others.append(s)
            continue
        pred = predict(s, replica_for(s))
        errors.setdefault(s.metric_class, []).append(ape(pred, s.observed))
        print(_row(s, pred))
    print()
    print(f"{'class':12} {'rows':>4} {'median APE':>10} {'mean APE':>9}  target (median)")
    ok = True
    for cls in ("tpot", "ttft", "throughput", "e2e"):
        values = errors.get(cls, [])
        if not values:
            continue
        median = statistics.median(values)
        target = TARGETS.get(cls)
        verdict = "" if target is None else f"<= {target:.0f} %  " + ("met" if median <= target else "MISSED")
        ok = ok and (target is None or median <= target)
        print(f"{cls:12} {len(values):>4} {median:9.1f}% {statistics.fmean(values):8.1f}%  {verdict}")
    print()
    print("other engines (upper bounds, not targets): predicted vLLM vs their figure")
    for s in others:
        pred = predict(s, replica_for(s))
        print(_row(s, pred) + f"  [{s.engine}]")
    print()
    print_skipped(skipped)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

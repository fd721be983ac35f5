"""Accuracy of the serving simulator on published runs under load.

Replays every replayable row of ../shared/data/perf_load.csv and the vLLM rows of perf_observed.csv through
gpuopt.physics.simulator (benchmarks/load_replay.py says how each row is replayed) and prints the median
absolute percentage error by metric family, by protocol, by dense/MoE and by GPU:

- in sample: with the shipped calibration (gpuopt/data/serving_calibration.yaml);
- leave-one-model-out: for each model, the serving factors refitted without that model's runs
  (benchmarks/calibrate_serving.py), then that model's runs predicted. `--quick` skips it (it refits once
  per model and takes minutes).

Targets (issue 13): throughput <= 15 %, TPOT/ITL <= 15 %, TTFT <= 25 % median on every protocol.
Rows that cannot be replayed are listed at the end with the reason.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_replay import NOT_FITTED, Metric, Run, load_runs, predicted, replay  # noqa: E402

from gpuopt.errors import GpuoptError  # noqa: E402
from gpuopt.physics.architecture import get_model  # noqa: E402

TARGETS = {"throughput": 15.0, "TPOT/ITL": 15.0, "TTFT": 25.0, "E2E": None}
FAMILIES = ("throughput", "TPOT/ITL", "TTFT", "E2E")


def errors(metrics: list[Metric], skipped: list[tuple[int, str, str]],
           serving: object | None = None) -> list[tuple[Metric, float, float]]:
    """(metric, predicted, absolute % error) for every metric whose run replays."""
    from load_replay import replay_with

    summaries: dict[str, dict[str, float | int]] = {}
    out = []
    for m in metrics:
        run = m.run
        if run.key not in summaries:
            try:
                summaries[run.key] = (replay(run) if serving is None else replay_with(run, serving)).summary()
            except GpuoptError as exc:
                skipped.append((m.line, run.model_id, f"replay failed: {'; '.join(exc.problems)}"))
                summaries[run.key] = {}
        summary = summaries[run.key]
        if not summary:
            continue
        pred = predicted(m, summary)
        out.append((m, pred, abs(pred - m.observed) / m.observed * 100))
    return out


def table(rows: list[tuple[Metric, float, float]], group: Callable[[Run], str], title: str) -> None:
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    for m, _, err in rows:
        cells[(group(m.run), m.family)].append(err)
    groups = sorted({g for g, _ in cells})
    print(f"\n{title}: median |error| % (rows)")
    print(f"{'':<22}" + "".join(f"{f:>18}" for f in FAMILIES))
    for g in groups:
        line = f"{g:<22}"
        for f in FAMILIES:
            errs = cells.get((g, f), [])
            line += f"{statistics.median(errs):>12.1f} ({len(errs):>3})" if errs else f"{'-':>18}"
        print(line)


def kind(run: Run) -> str:
    return "MoE" if get_model(run.registry_model).is_moe else "dense"


def report(rows: list[tuple[Metric, float, float]], label: str) -> None:
    print(f"\n==== {label}: {len(rows)} metrics of {len({m.run.key for m, _, _ in rows})} runs ====")
    table(rows, lambda r: "all", "overall")
    table(rows, lambda r: r.protocol, "by protocol")
    table(rows, kind, "dense / MoE")
    table(rows, lambda r: r.gpu, "by GPU")
    table(rows, lambda r: r.registry_model.split("/")[-1], "by model")
    for fam, target in TARGETS.items():
        if target is None:
            continue
        for proto in sorted({m.run.protocol for m, _, _ in rows}):
            errs = [e for m, _, e in rows if m.family == fam and m.run.protocol == proto]
            if errs:
                med = statistics.median(errs)
                print(f"target {fam:<10} {proto:<17} median {med:6.1f} % (target {target:.0f} %): "
                      f"{'met' if med <= target else 'NOT met'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="in-sample only (no leave-one-model-out refits)")
    parser.add_argument("--worst", type=int, default=15, help="print the N largest errors")
    args = parser.parse_args()
    metrics, skipped = load_runs()
    checks = [m for m in metrics if m.run.model_id in NOT_FITTED]
    metrics = [m for m in metrics if m.run.model_id not in NOT_FITTED]
    start = time.perf_counter()
    rows = errors(metrics, skipped)
    elapsed = time.perf_counter() - start
    report(rows, "in sample")
    print(f"\nreplayed {len({m.run.key for m, _, _ in rows})} runs in {elapsed:.1f} s")
    print("\nruns the factors are not fitted on (out of sample):")
    for m, pred, _ in errors(checks, skipped):
        print(f"  {m.run.source} line {m.line}: {m.run.model_id} {m.run.gpu} {m.bench_metric}: observed "
              f"{m.observed:,.1f} predicted {pred:,.1f} ({(pred / m.observed - 1) * 100:+.0f} %)")
    for model, why in NOT_FITTED.items():
        print(f"  {model}: {why}")
    print("\nlargest errors (in sample):")
    for m, pred, err in sorted(rows, key=lambda x: -x[2])[:args.worst]:
        r = m.run
        print(f"  {m.run.source} line {m.line}: {r.model_id} {r.gpu} tp{r.tp} {r.dataset} {r.input_tokens}/"
              f"{r.output_tokens:g} {r.arrival} n={r.num_prompts} c={r.max_concurrency} {m.bench_metric}: "
              f"observed {m.observed:,.1f} predicted {pred:,.1f} ({err:.0f} %)")
    if not args.quick:
        from calibrate_serving import leave_one_model_out

        report(leave_one_model_out(metrics), "leave-one-model-out")
    print(f"\nskipped {len(skipped)} rows:")
    reasons: dict[str, list[int]] = defaultdict(list)
    for line, model, why in skipped:
        reasons[f"{model}: {why}"].append(line)
    for why, lines in sorted(reasons.items()):
        print(f"  {why} (lines {', '.join(map(str, lines[:8]))}{', ...' if len(lines) > 8 else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

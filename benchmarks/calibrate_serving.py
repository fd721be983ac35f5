"""Fit the step cost's factors on the load runs and the light-load rows, jointly.

Writes gpuopt/data/serving_calibration.yaml and the fitted values of gpuopt/data/latency_calibration.yaml.
Both files describe ONE step cost (latency.step_parts_s), used by the analytic model and by the simulator,
so they are fitted together: fitting the serving factors alone after the latency factors (as before)
moved the light-load TPOT of the analytic model from 6 % to 19 % median error.

The latency factors (per GPU architecture): eff_bw (share of HBM bandwidth a decode step reaches),
eff_compute / eff_prefill (share of the tensor peak in decode and prompt tokens), the fixed step and server
overheads and the all-reduce latency per link. The serving factors (see docs/simulator.md):
  cpu_per_seq_us           host work per sequence per engine step (hidden under async scheduling)
  seq_layer_us             GPU work per decoding sequence per attention layer (serial: never hidden)
  frontend_ms_per_request  API-server work per request, serialised (a burst queues there)
  frontend_us_per_prompt_token  the same per prompt token (tokenisation, prefix-cache block hashes)
  gemm_tile_tokens         a step's dense GEMMs cost as if they had this many more rows
  moe_tile_tokens          each touched expert's GEMM costs at least this many rows
  layer_fixed_us           GPU time floor per decoder layer per step
  v0_host_factor           host work of the V0 engine (vLLM < 0.8) over V1's
  <path>.eff_compute       share of the tensor peak reached by each MoE kernel path with rows to fit

Objective: soft-L1 on log(predicted / observed) of every replayed metric (benchmarks/load_replay.py) and of
every analytic-model row of benchmarks/latency_accuracy.py (perf_observed.csv, predicted by the analytic
steady state, which the planner screens with), each (metric family, protocol) cell weighted equally.
Minimiser: Levenberg-Marquardt on forward-difference
Jacobians in log-parameter space (a replay of every run takes ~30 s, so a handful of iterations).

Leave-one-model-out (leave_one_model_out): at the full fit, the Jacobian of every residual is known; for
each model the fit is redone without its rows as one damped Gauss-Newton step on that linearisation, and the
held-out model's runs are then simulated with the refitted factors. (A full refit per model would take hours.)

Usage: python benchmarks/calibrate_serving.py [--iterations N] [--write]   (needs the `bench` extra: scipy)
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_latency import LOWER as LAT_LOWER  # noqa: E402
from calibrate_latency import NAMES as LAT_NAMES  # noqa: E402
from calibrate_latency import UPPER as LAT_UPPER  # noqa: E402
from calibrate_latency import to_calibration as latency_from  # noqa: E402
from load_replay import NOT_FITTED, Metric, kv_cache_dtype_of, load_runs, predicted, replay_with  # noqa: E402
from observed_latency import Scenario, load_scenarios, predict, replica_for  # noqa: E402

from gpuopt.errors import GpuoptError  # noqa: E402
from gpuopt.hardware import get_gpu  # noqa: E402
from gpuopt.physics import (
    latency,  # noqa: E402
    latency_factors,
)
from gpuopt.physics.architecture import get_model  # noqa: E402
from gpuopt.physics.latency_factors import MoePath, ServingCalibration  # noqa: E402

SCALAR = ("cpu_per_seq_us", "seq_layer_us", "frontend_ms_per_request", "frontend_us_per_prompt_token",
          "gemm_tile_tokens", "moe_tile_tokens", "layer_fixed_us", "v0_host_factor", "dsa_token_layer_us",
          "triton_attention_factor")
# factors a kind of replica has only when its rows are in the fit; without them (leave-one-model-out holding
# the last such model out) they go to their floor, the value a replica of that kind with no evidence gets
FLOORED_WHEN_UNINFORMED = ("dsa_token_layer_us", "triton_attention_factor")
BOUNDS = {"cpu_per_seq_us": (0.5, 200.0), "seq_layer_us": (0.01, 10.0), "frontend_ms_per_request": (0.01, 20.0),
          "frontend_us_per_prompt_token": (0.01, 50.0), "gemm_tile_tokens": (1.0, 128.0),
          "moe_tile_tokens": (1.0, 1024.0), "layer_fixed_us": (0.5, 500.0), "v0_host_factor": (1.0, 30.0),
          "dsa_token_layer_us": (0.01, 20.0), "triton_attention_factor": (1.0, 8.0),
          "eff_compute": (0.02, 0.9)}
# latency factors, log-space: a factor bounded below by 0 gets a small positive floor
BOUNDS.update({f"lat.{n}": (max(lo, 0.05), hi) for n, lo, hi in zip(LAT_NAMES, LAT_LOWER, LAT_UPPER, strict=True)})
# Turing has rows in the load data only (T4), so its factors are fitted here, not by calibrate_latency.py
TURING = ("turing_bw", "turing_compute", "turing_prefill")
BOUNDS.update({"lat.turing_bw": (0.45, 0.85), "lat.turing_compute": (0.2, 0.8), "lat.turing_prefill": (0.2, 0.8)})
WORKERS = 2
SOFT_L1_SCALE = 0.3  # residuals (log ratio) beyond ~35 % count linearly, not quadratically


def moe_path_of(m: Metric) -> str | None:
    arch = get_model(m.run.registry_model)
    if not arch.is_moe:
        return None
    return latency.moe_kernel_path(get_gpu(m.run.gpu), m.run.precision, m.run.engine_version or m.run.vllm_version)


def attention_backend_of(m: Metric) -> str:
    return latency.attention_backend(get_gpu(m.run.gpu), get_model(m.run.registry_model), kv_cache_dtype_of(m.run))


def parameter_names(metrics: list[Metric]) -> list[str]:
    paths = sorted({p for m in metrics if (p := moe_path_of(m))})
    turing = any(get_gpu(m.run.gpu).architecture == "Turing" for m in metrics)
    return (list(SCALAR) + [f"{p}.eff_compute" for p in paths] + [f"lat.{n}" for n in LAT_NAMES]
            + ([f"lat.{n}" for n in TURING] if turing else []))


Calibrations = tuple[ServingCalibration, latency_factors.LatencyCalibration]


def _bounds(name: str) -> tuple[float, float]:
    return BOUNDS[name] if name.startswith("lat.") else BOUNDS[name.split(".")[-1]]


def turing_vector(cal: latency_factors.LatencyCalibration) -> list[float]:
    t = cal.architectures.get("Turing") or latency_factors.ArchCalibration(eff_bw=0.7, eff_compute=0.4, eff_prefill=0.4)
    return [t.eff_bw, t.eff_compute, t.eff_prefill]


def latency_vector(cal: latency_factors.LatencyCalibration) -> list[float]:
    """The latency calibration as calibrate_latency.NAMES values."""
    arch = cal.architectures
    return [arch["Hopper"].eff_bw, arch["Hopper"].eff_compute, arch["Hopper"].eff_prefill, arch["Ampere"].eff_bw,
            arch["Ampere"].eff_compute, arch["Ampere"].eff_prefill, arch["H200-141GB"].eff_bw, cal.step_overhead_ms,
            cal.server_overhead_ms, cal.allreduce_latency_us["nvlink"], cal.allreduce_latency_us["pcie"]]


def to_calibration(names: list[str], x: np.ndarray, base: Calibrations) -> Calibrations:
    values = dict(zip(names, np.exp(x), strict=True))
    paths = dict(base[0].moe_paths)
    for name, value in values.items():
        if "." in name and not name.startswith("lat."):
            path = name.split(".")[0]
            paths[path] = MoePath(eff_compute=float(value), eff_bw=paths[path].eff_bw, fitted_on=paths[path].fitted_on)
    scalars = {n: float(values[n]) for n in SCALAR if n in values}
    lat = dict(zip(LAT_NAMES + list(TURING), latency_vector(base[1]) + turing_vector(base[1]), strict=True))
    lat.update({n[4:]: float(v) for n, v in values.items() if n.startswith("lat.")})
    fitted = latency_from(np.array([lat[n] for n in LAT_NAMES]), base[1])
    turing = latency_factors.ArchCalibration(eff_bw=lat["turing_bw"], eff_compute=lat["turing_compute"],
                                     eff_prefill=lat["turing_prefill"])
    fitted = fitted.model_copy(update={"architectures": {**fitted.architectures, "Turing": turing}})
    return base[0].model_copy(update={**scalars, "moe_paths": paths}), fitted


def start_vector(names: list[str], base: Calibrations) -> np.ndarray:
    lat = dict(zip(LAT_NAMES + list(TURING), latency_vector(base[1]) + turing_vector(base[1]), strict=True))
    out = []
    for name in names:
        if name.startswith("lat."):
            value = lat[name[4:]]
        else:
            value = getattr(base[0], name) if "." not in name else base[0].moe_paths[name.split(".")[0]].eff_compute
        lo, hi = _bounds(name)
        out.append(math.log(min(max(value, lo), hi)))
    return np.array(out)


def clip(names: list[str], x: np.ndarray) -> np.ndarray:
    lo = np.log([_bounds(n)[0] for n in names])
    hi = np.log([_bounds(n)[1] for n in names])
    return np.asarray(np.clip(x, lo, hi))


Rows = list[tuple[Scenario, latency.Replica]]


def analytic_rows() -> Rows:
    """The rows benchmarks/latency_accuracy.py predicts with the analytic model."""
    scenarios, _ = load_scenarios()
    return [(s, replica_for(s)) for s in scenarios if s.engine == "vLLM"]


def analytic_log_errors(rows: Rows, cal: Calibrations) -> np.ndarray:
    out = np.full(len(rows), np.nan)
    for k, (s, r) in enumerate(rows):
        try:
            pred = predict(s, replace(r, serving=cal[0], cal=cal[1]))
        except GpuoptError:
            continue
        if pred > 0 and math.isfinite(pred):
            out[k] = math.log(pred / s.observed)
    return out


def log_errors(metrics: list[Metric], cal: Calibrations) -> np.ndarray:
    """log(predicted / observed) per metric (nan where the run cannot be replayed)."""
    cache: dict[str, dict[str, float | int]] = {}
    out = np.full(len(metrics), np.nan)
    for k, m in enumerate(metrics):
        if m.run.key not in cache:
            try:
                cache[m.run.key] = replay_with(m.run, cal[0], latency_cal=cal[1]).summary()
            except GpuoptError:
                cache[m.run.key] = {}
        if cache[m.run.key]:
            pred = predicted(m, cache[m.run.key])
            if pred > 0 and math.isfinite(pred):
                out[k] = math.log(pred / m.observed)
    return out


def replayed_lines(metrics: list[Metric], cal: Calibrations) -> set[int]:
    """perf_observed lines the simulator predicts (a replay that fails -- a request that does not fit the
    KV cache as the replay configures the server -- predicts nothing, and its analytic row still counts)."""
    observed = [m for m in metrics if m.run.source == "perf_observed"]
    return {m.line for m, e in zip(observed, log_errors(observed, cal), strict=True) if math.isfinite(e)}


def weights(metrics: list[Metric], rows: Rows, replayed: set[int]) -> np.ndarray:
    """1 / sqrt(rows in its cell): every (metric family, protocol) cell weighs the same, the analytic rows
    forming cells of their own (metric class, "analytic").

    An observation counts once: an analytic row whose perf_observed line the simulator also predicts
    (`replayed`: replayed_lines) weighs 0, the simulator's replay being the model of its protocol. Counted
    twice, the nine TTFT rows of perf_observed (all replayed) formed an "analytic TTFT" cell that weighed as
    much as the 112 closed-loop TTFT rows and held server_overhead_ms at 39 ms, where every simulated
    protocol wants 25-30 ms (the fit before 2026-12-02). The analytic cells keep the rows the simulator does
    not predict (fixed-batch latency, offline sweeps, replays that fail).

    One exception, the analytic TPOT rows: the analytic steady state is the planner's screen and carries its
    own TPOT target (benchmarks/latency_accuracy.py, 15 % median), and with those rows zeroed a refit moved
    it from 14.6 % to 19.4 % (round 12: GPUStack's light Qwen3-8B loads and Llama-3.3-70B on 4x A100 PCIe at
    4 req/s, where the mean-length steady state and the ShareGPT-shaped replay part). Ten rows in a cell of
    their own do not hold a factor against the hundreds of simulated ones the way the TTFT cell did; they
    keep the screen honest."""
    cells = Counter((m.family, m.run.protocol) for m in metrics)
    zero = {s.line for s, _ in rows if s.line in replayed and s.metric_class != "tpot"}
    lat_cells = Counter(s.metric_class for s, _ in rows if s.line not in zero)
    return np.array([1.0 / math.sqrt(cells[(m.family, m.run.protocol)]) for m in metrics]
                    + [0.0 if s.line in zero else 1.0 / math.sqrt(lat_cells[s.metric_class]) for s, _ in rows])


def robust(r: np.ndarray) -> np.ndarray:
    """Soft-L1 residuals: r' with r'^2 = 2 s^2 (sqrt(1 + (r/s)^2) - 1)."""
    s = SOFT_L1_SCALE
    return np.asarray(np.sign(r) * s * np.sqrt(2 * (np.sqrt(1 + (r / s) ** 2) - 1)))


def residuals(metrics: list[Metric], rows: Rows, names: list[str], x: np.ndarray, base: Calibrations,
              w: np.ndarray) -> np.ndarray:
    cal = to_calibration(names, x, base)
    r = np.concatenate([log_errors(metrics, cal), analytic_log_errors(rows, cal)])
    return np.asarray(np.nan_to_num(robust(r), nan=0.0) * w)


_POOL: dict[str, object] = {}


def _column(args: tuple[list[Metric], Rows, list[str], np.ndarray, Calibrations, np.ndarray]) -> np.ndarray:
    return residuals(*args)


def jacobian(metrics: list[Metric], rows: Rows, names: list[str], x: np.ndarray, base: Calibrations,
             w: np.ndarray, r0: np.ndarray, step: float = 0.15) -> np.ndarray:
    """Forward differences, one column per factor, WORKERS processes at a time (forked after the replay
    cache is warm, so each worker starts with every run prepared)."""
    import multiprocessing

    shifted = []
    for j in range(len(x)):
        xj = x.copy()
        xj[j] += step
        shifted.append((metrics, rows, names, xj, base, w))
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        cols = pool.map(_column, shifted)
    return np.stack([(c - r0) / step for c in cols], axis=1)


def gauss_newton_step(jac: np.ndarray, r: np.ndarray, damping: float) -> np.ndarray:
    jtj = jac.T @ jac
    return np.asarray(-np.linalg.solve(jtj + damping * np.diag(np.diag(jtj) + 1e-9), jac.T @ r))


def subsample(metrics: list[Metric]) -> list[Metric]:
    """The runs the factors are fitted on: every run of a model with few runs, every other run (in file order)
    of a model with many (gpt-oss-120b's 150 InferenceMAX sweeps), so one model does not dominate the fit and
    a fit iteration takes minutes, not an hour."""
    by_model: dict[str, list[str]] = {}
    for m in metrics:
        keys = by_model.setdefault(m.run.registry_model, [])
        if m.run.key not in keys:
            keys.append(m.run.key)
    kept = {k for keys in by_model.values() for k in (keys if len(keys) <= 40 else keys[::2])}
    return [m for m in metrics if m.run.key in kept]


def fit(metrics: list[Metric], rows: Rows, base: Calibrations, iterations: int) -> tuple[list[str], np.ndarray]:
    metrics = subsample(metrics)
    names = parameter_names(metrics)
    w = weights(metrics, rows, replayed_lines(metrics, base))
    x = start_vector(names, base)
    r = residuals(metrics, rows, names, x, base, w)
    cost = float(r @ r)
    damping = 1.0
    print(f"start cost {cost:.3f}", file=sys.stderr)
    for it in range(iterations):
        jac = jacobian(metrics, rows, names, x, base, w, r)
        for _ in range(4):
            trial = clip(names, x + gauss_newton_step(jac, r, damping))
            r_trial = residuals(metrics, rows, names, trial, base, w)
            c_trial = float(r_trial @ r_trial)
            if c_trial < cost:
                x, r, cost = trial, r_trial, c_trial
                damping = max(damping / 3, 1e-3)
                break
            damping *= 4
        print(f"iteration {it + 1}: cost {cost:.3f} " + ", ".join(
            f"{n}={v:.4g}" for n, v in zip(names, np.exp(x), strict=True)), file=sys.stderr)
    return names, x


def leave_one_model_out(metrics: list[Metric]) -> list[tuple[Metric, float, float]]:
    """(metric, predicted, abs % error) for every metric, predicted with factors fitted without its model."""
    base = (latency_factors.serving_calibration(), latency_factors.calibration())
    rows = analytic_rows()
    names = parameter_names(metrics)
    w = weights(metrics, rows, replayed_lines(metrics, base))
    x = start_vector(names, base)
    r = residuals(metrics, rows, names, x, base, w)
    jac = jacobian(metrics, rows, names, x, base, w, r)
    out: list[tuple[Metric, float, float]] = []
    for model in sorted({m.run.registry_model for m in metrics}):
        keep = np.array([m.run.registry_model != model for m in metrics] + [s.model != model for s, _ in rows])
        held = [m for m in metrics if m.run.registry_model == model]
        # one damped Gauss-Newton step from the full fit, on the other models' rows only; a factor only this
        # model informs (a zero column once its rows are gone) stays where it is -- except the factors of
        # FLOORED_WHEN_UNINFORMED (the DSA pipeline cost, Triton attention), which a replica of its kind
        # without rows of its own would not have: they go to their floor
        informed = np.abs(jac[keep]).sum(axis=0) > 1e-9
        xm = x.copy()
        if informed.any():
            sub = jac[keep][:, informed]
            xm[informed] = x[informed] + gauss_newton_step(sub, r[keep], 0.1)
        for j, name in enumerate(names):
            if name in FLOORED_WHEN_UNINFORMED and not informed[j]:
                xm[j] = math.log(BOUNDS[name][0])
        cal = to_calibration(names, clip(names, xm), base)
        errs = log_errors(held, cal)
        for m, e in zip(held, errs, strict=True):
            if not math.isnan(e):
                pred = m.observed * math.exp(e)
                out.append((m, pred, abs(pred - m.observed) / m.observed * 100))
    return out


def fitted_on(metrics: list[Metric], names: list[str]) -> dict[str, str]:
    """The perf_load / perf_observed lines each factor was fitted on."""
    lines: dict[str, list[str]] = {}
    for name in names:
        path = name.split(".")[0] if "." in name and not name.startswith("lat.") else None
        used = [m for m in metrics if path is None or moe_path_of(m) == path]
        lines[name] = _ranges(used)
    return lines


def _ranges(rows: list[Metric]) -> str:
    parts = []
    for source in ("perf_load", "perf_observed"):
        nums = sorted({m.line for m in rows if m.run.source == source})
        if not nums:
            continue
        spans, start, prev = [], nums[0], nums[0]
        for n in nums[1:] + [None]:  # type: ignore[list-item]
            if n is not None and n == prev + 1:
                prev = n
                continue
            spans.append(f"{start}-{prev}" if prev != start else f"{start}")
            if n is not None:
                start = prev = n
        parts.append(f"{source}.csv lines {', '.join(spans)}")
    return "; ".join(parts)


def write(names: list[str], x: np.ndarray, metrics: list[Metric], base: Calibrations) -> None:
    cal, lat = to_calibration(names, x, base)
    write_latency(lat)
    where = fitted_on(metrics, names)
    paths = {}
    for path, mp in cal.moe_paths.items():
        key = f"{path}.eff_compute"
        paths[path] = {"eff_compute": round(mp.eff_compute, 4), "eff_bw": mp.eff_bw,
                       "fitted_on": where.get(key, mp.fitted_on)}
        if mp.borrows:
            paths[path]["borrows"] = mp.borrows
    doc = {
        "source": "fitted by benchmarks/calibrate_serving.py (Levenberg-Marquardt, soft-L1 on log errors, each "
                  "metric family x protocol weighted equally, an observation counted once) on the replayable runs "
                  "of perf_load.csv and the vLLM rows of perf_observed.csv, jointly with the factors of "
                  "latency_calibration.yaml",
        "fitted_on": where[SCALAR[0]],
        **{n: round(float(getattr(cal, n)), 4) for n in SCALAR},
        "dsa_fitted_on": _ranges([m for m in metrics if get_model(m.run.registry_model).index_topk]),
        "triton_attention_fitted_on": _ranges([m for m in metrics if attention_backend_of(m) == "triton"]),
        "moe_paths": paths,
    }
    target = Path(__file__).resolve().parents[1] / "gpuopt" / "data" / "serving_calibration.yaml"
    header = ("# Step-cost factors the load data adds to the latency model (gpuopt/physics/latency.py step_parts_s).\n"
              "# Written by benchmarks/calibrate_serving.py --write; rerun it after adding rows.\n")
    target.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=1000), encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)


def write_latency(lat: latency_factors.LatencyCalibration) -> None:
    """Put the fitted values into latency_calibration.yaml in place (its comments and borrowing table stay)."""
    import re

    target = Path(__file__).resolve().parents[1] / "gpuopt" / "data" / "latency_calibration.yaml"
    text = target.read_text(encoding="utf-8")
    a = lat.architectures

    def arch(name: str) -> str:
        c = a[name]
        return f"{{eff_bw: {c.eff_bw:.4f}, eff_compute: {c.eff_compute:.4f}, eff_prefill: {c.eff_prefill:.4f}}}"

    subs = {
        r"^step_overhead_ms: .*$": f"step_overhead_ms: {lat.step_overhead_ms:.4f}",
        r"^server_overhead_ms: .*$": f"server_overhead_ms: {lat.server_overhead_ms:.4f}",
        r"^allreduce_latency_us: .*$": (f"allreduce_latency_us: {{nvlink: {lat.allreduce_latency_us['nvlink']:.4f}, "
                                        f"pcie: {lat.allreduce_latency_us['pcie']:.4f}}}"),
        r"^  Hopper: .*$": f"  Hopper: {arch('Hopper')}",
        r"^  H200-141GB: .*$": f"  H200-141GB: {arch('H200-141GB')}",
        r"^  Ampere: .*$": f"  Ampere: {arch('Ampere')}",
        r"^  Turing: .*$": f"  Turing: {arch('Turing')}",
    }
    for pattern, line in subs.items():
        text, n = re.subn(pattern, line, text, count=1, flags=re.MULTILINE)
        if n != 1:
            raise SystemExit(f"latency_calibration.yaml: no line matches {pattern}")
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--write", action="store_true", help="write gpuopt/data/serving_calibration.yaml")
    args = parser.parse_args()
    metrics = [m for m in load_runs()[0] if m.run.model_id not in NOT_FITTED]
    base = (latency_factors.serving_calibration(), latency_factors.calibration())
    names, x = fit(metrics, analytic_rows(), base, args.iterations)
    for n, v in zip(names, np.exp(x), strict=True):
        print(f"{n}: {v:.4g}")
    if args.write:
        write(names, x, subsample(metrics), base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

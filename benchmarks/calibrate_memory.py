"""Fit the activation-peak and CUDA-graph calibrations of gpuopt/data/vllm_versions.yaml on vLLM's own logs.

    python benchmarks/calibrate_memory.py

Prints the coefficients per release era with the rows they were fitted on (paste them into the YAML),
and a leave-one-model-out check of the activation fit, so the in-sample accuracy is not mistaken for
predictive accuracy. Each distinct (model, TP, precision, release) configuration counts once.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from observed_memory import ObservedRow, load_rows  # noqa: E402

from gpuopt.hardware import get_gpu  # noqa: E402
from gpuopt.physics import cuda_graphs  # noqa: E402
from gpuopt.physics.architecture import get_model  # noqa: E402
from gpuopt.physics.memory import GIB, graph_plan, on_v2_runner
from gpuopt.physics.serving_config import resolve
from gpuopt.physics.vllm_profile import get_profile  # noqa: E402
from gpuopt.physics.weights import activation_dtype_bytes  # noqa: E402

ERAS = {"0.11": ("0.11", "0.12", "0.13", "0.14", "0.15", "0.16"), "0.17": ("0.17", "0.18", "0.19")}


def features(row: ObservedRow) -> list[float]:
    arch, gpu = get_model(row.model), get_gpu(row.gpu)
    cfg, _ = resolve(arch, gpu, row.config)
    act = activation_dtype_bytes(arch, cfg.precision)
    tokens, rows = cfg.max_num_batched_tokens, min(cfg.max_num_seqs, cfg.max_num_batched_tokens)
    moe = (tokens * (arch.experts_per_token or 1) * (arch.moe_intermediate_size or 0) * 2 * act
           / cfg.tensor_parallel / GIB) if arch.is_moe else 0.0
    return [1.0, rows * arch.vocab * 4 / GIB, tokens * arch.hidden_size * act / GIB, moe]


def distinct(rows: list[ObservedRow]) -> list[ObservedRow]:
    seen: dict[tuple[object, ...], ObservedRow] = {}
    for r in rows:
        key = (r.model, r.gpu, r.config.tensor_parallel, r.config.pipeline_parallel, r.config.precision,
               r.config.vllm_version,
               r.config.max_num_seqs)
        seen.setdefault(key, r)
    return list(seen.values())


def fit(rows: list[ObservedRow], columns: list[int]) -> np.ndarray:
    x = np.array([[features(r)[c] for c in columns] for r in rows])
    y = np.array([r.activation_gib for r in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return coef


def activation_rows(rows: list[ObservedRow]) -> list[ObservedRow]:
    """Rows the activation calibration can use: logged activation, one stage, text-only models."""
    return [r for r in rows if r.activation_gib is not None and r.config.pipeline_parallel == 1
            and not get_model(r.model).multimodal]


def fit_eras(rows: list[ObservedRow]) -> dict[str, dict[int, float]]:
    """Activation coefficients per release era ({column: coefficient}); an era without enough rows is left
    out (the caller keeps the shipped calibration for it)."""
    out: dict[str, dict[int, float]] = {}
    for era, versions in ERAS.items():
        era_rows = distinct([r for r in activation_rows(rows) if r.config.vllm_version in versions])
        columns = [0, 1, 2, 3] if era == "0.17" else [1]
        if len(era_rows) >= len(columns) + 1:
            out[era] = dict(zip(columns, fit(era_rows, columns), strict=True))
    return out


def print_non_torch(rows: list[ObservedRow]) -> None:
    """Logged non-torch memory by what drives it (release, TP, link), the figures vllm_versions.yaml uses."""
    groups: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for r in rows:
        if r.non_torch_gib is None:
            continue
        cfg = r.config
        link = "nvlink" if get_gpu(r.gpu).nvlink_gb_s else "pcie"
        setting = ("tp1" if cfg.tensor_parallel == 1 and cfg.pipeline_parallel == 1
                   else "pp-only" if cfg.tensor_parallel == 1 else f"tp>=2 {link}")
        groups.setdefault((cfg.vllm_version or "?", setting), []).append((r.non_torch_gib, r.line))
    for (version, setting), values in sorted(groups.items()):
        median = float(np.median([v for v, _ in values]))
        lines = ",".join(str(line) for _, line in values)
        print(f"non_torch v{version} {setting}: median {median:.2f} GiB over {len(values)} logs (lines {lines})")


def main() -> None:
    rows, _ = load_rows()
    print_non_torch(rows)
    usable = activation_rows(rows)
    for era, versions in ERAS.items():
        era_rows = distinct([r for r in usable if r.config.vllm_version in versions])
        columns = [0, 1, 2, 3] if era == "0.17" else [1]
        coef = fit(era_rows, columns)
        full = dict(zip(columns, coef, strict=True))
        lines = ",".join(str(r.line) for r in sorted(era_rows, key=lambda r: r.line))
        print(f"activation era {era}: intercept_gib={full.get(0, 0.0):.4f} sampler={full.get(1, 0.0):.4f} "
              f"hidden={full.get(2, 0.0):.4f} moe={full.get(3, 0.0):.4f}")
        print(f"  fitted_on: vllm_memory_observed.csv lines {lines} ({len(era_rows)} distinct configurations)")
        errors = []
        for held in sorted({r.model for r in era_rows}):
            train = [r for r in era_rows if r.model != held]
            if len(train) < len(columns):
                continue
            c = dict(zip(columns, fit(train, columns), strict=True))
            for r in (r for r in era_rows if r.model == held):
                f = features(r)
                pred = sum(c[k] * f[k] for k in columns)
                errors.append(abs(pred - (r.activation_gib or 0.0)))
        if errors:
            print(f"  leave-one-model-out activation error: mean {np.mean(errors):.3f} GiB, "
                  f"max {np.max(errors):.3f} GiB")
    print_graphs(rows)




@cache  # each fit reads a row's features several times; resolving the row once is enough
def graph_features(row: ObservedRow) -> tuple[float, float, str, bool]:
    """(layers x share of the reference graph count, FlashAttention 3 split buffers in GiB, layer kind -- dense,
    moe or mxfp4 experts --, V2 runner) of a logged row."""
    arch, gpu = get_model(row.model), get_gpu(row.gpu)
    cfg, _ = resolve(arch, gpu, row.config)
    plan = graph_plan(arch, gpu, cfg)
    share = plan.graphs / cuda_graphs.REFERENCE_GRAPHS
    # the split buffers, computed (not fitted), in the largest full graph of the row's plan
    acc = cuda_graphs.split_accumulator_bytes(arch, gpu, cfg.tensor_parallel, plan.largest_full, cfg.vllm_version,
                                              cfg.precision, cfg.language_model_only) / GIB
    kind = ("mxfp4" if cfg.precision == "mxfp4" else "moe") if arch.is_moe else "dense"
    v2 = on_v2_runner(get_profile(cfg.vllm_version), arch, gpu, cfg)
    return arch.num_hidden_layers / cfg.pipeline_parallel * share, acc, kind, v2


def fit_graphs(rows: list[ObservedRow]) -> tuple[float, float, dict[str, float]]:
    """base and per layer on the dense rows, then the extra per layer of each kind of expert layer on its rows'
    residuals (no rows: none)."""
    dense = [r for r in rows if graph_features(r)[2] == "dense"]
    x = np.array([[1.0, graph_features(r)[0]] for r in dense])
    y = np.array([(r.cuda_graph_gib or 0.0) - graph_features(r)[1] for r in dense])
    (base, per_layer), *_ = np.linalg.lstsq(x, y, rcond=None)
    extra = {}
    for kind in ("moe", "mxfp4"):
        kind_rows = [(graph_features(r), r.cuda_graph_gib or 0.0) for r in rows if graph_features(r)[2] == kind]
        num = sum(f[0] * (g - base - per_layer * f[0] - f[1]) for f, g in kind_rows)
        den = sum(f[0] ** 2 for f, _ in kind_rows)
        extra[kind] = num / den if den else 0.0
    return float(base), float(per_layer), extra


def print_graphs(rows: list[ObservedRow]) -> None:
    """CUDA-graph calibrations: the V1 runner on the v0.19 start-ups, the V2 runner on the 0.27/0.28 logs that
    run it (LoRA rows fit the LoRA set of graphs), each with its mean and worst error, and the V1 figures on
    the v0.10.1 A100 logs neither fit sees."""
    logged = distinct([r for r in rows if r.cuda_graph_gib is not None and r.config.vllm_version is not None])
    v1 = [r for r in logged if r.config.vllm_version == "0.19"]
    v2 = [r for r in logged if graph_features(r)[3]]
    held_out = [r for r in logged if (r.config.vllm_version or "").startswith("0.10")]
    v1_fit = None
    for name, group in (("v1 (v0.19)", v1), ("v2", v2)):
        plain = [r for r in group if not r.config.max_loras]
        base, per_layer, extra = fit_graphs(plain)
        v1_fit = v1_fit or (base, per_layer, extra)
        lora_rows = [r for r in group if r.config.max_loras]
        lora = (float(np.mean([((r.cuda_graph_gib or 0.0) - base - graph_features(r)[1]) / graph_features(r)[0]
                               - per_layer for r in lora_rows])) if lora_rows else 0.0)
        errors = [abs(_graph_prediction(r, base, per_layer, extra, lora) - (r.cuda_graph_gib or 0.0)) for r in group]
        print(f"cuda_graph {name}: base_gib={base:.4f} per_layer_gib={per_layer:.5f} "
              f"moe_per_layer_gib={extra['moe']:.5f} mxfp4_moe_per_layer_gib={extra['mxfp4']:.5f} "
              f"lora_per_layer_gib={lora:.5f} (mean abs error {np.mean(errors):.3f} GiB, max {np.max(errors):.3f})")
        print(f"  fitted_on: vllm_memory_observed.csv lines {','.join(str(r.line) for r in group)}")
    if v1_fit and held_out:
        errors = [abs(_graph_prediction(r, *v1_fit, 0.0) - (r.cuda_graph_gib or 0.0)) for r in held_out]
        print(f"  v1 figures on the v0.10.1 A100 logs (in neither fit): mean abs error {np.mean(errors):.3f} GiB, "
              f"max {np.max(errors):.3f} (lines {','.join(str(r.line) for r in held_out)})")


def _graph_prediction(row: ObservedRow, base: float, per_layer: float, extra: dict[str, float], lora: float) -> float:
    layers, acc, kind, _ = graph_features(row)
    return base + (per_layer + extra.get(kind, 0.0) + (lora if row.config.max_loras else 0.0)) * layers + acc


if __name__ == "__main__":
    main()

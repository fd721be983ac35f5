"""The sizing table: models x GPUs x precisions at one context and concurrency, from the same memory and
latency models as `solve` — what the sizing guides print as a cheat sheet, with correct numbers.

Per cell: the smallest tensor-parallel size (1, 2, 4, 8 GPUs) at which vLLM's memory accounting fits the
weights AND a KV cache for `concurrency` requests of `context` tokens, or the binding limit when none does;
the KV tokens and the concurrency that fit at that context. With a load (requests per second), the replicas
that carry it within the latency targets (with the plan's headroom) and what they cost on the cheapest
on-demand offering of that GPU in the chosen region: a glance, not a plan — `gpuopt solve` packs instances,
mixes GPUs and explains every rejection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from gpuopt.datafiles import data_yaml
from gpuopt.errors import GpuoptError, InfeasibleError, InputError
from gpuopt.hardware import GpuSpec, get_gpu
from gpuopt.physics import analytic_load, fp8_kv_backend, latency
from gpuopt.physics.architecture import ModelArchitecture, get_model
from gpuopt.physics.context_limit import max_model_len_problem, model_max_len
from gpuopt.physics.memory import MemoryEstimate, estimate
from gpuopt.physics.resolution import expand_user
from gpuopt.physics.resolution import resolve_model as resolve_model_id
from gpuopt.physics.serving_config import ServingConfig, gpu_unsupported
from gpuopt.planner.plan import DEFAULT_HEADROOM, HOURS_PER_MONTH
from gpuopt.pricing.catalog import Catalog, Offering
from gpuopt.pricing.regions import Residency
from gpuopt.vocabulary import KvCacheDtype, WeightFormat

TP_SIZES = (1, 2, 4, 8)
DEFAULT_GPUS = ("L4-24GB", "A10G-24GB", "L40S-48GB", "A100-SXM-80GB", "H100-SXM-80GB", "H200-141GB")
"""The common inference GPUs of the clouds gpuopt prices (override with --gpus)."""


@cache
def model_sizes() -> dict[str, str]:
    data: dict[str, str] = data_yaml("model_sizes.yaml")
    return {str(k).upper(): v for k, v in data.items()}


def resolve_model(name: str) -> tuple[str, ModelArchitecture]:
    """A size such as `70B` (the registry model that stands for it) or anything `--model` accepts (registry
    id, local checkpoint, Hugging Face cache or Hub, a known quantized checkpoint: physics/resolution.py)."""
    size = name.strip().upper()
    if size in model_sizes():
        return name.strip().upper(), get_model(model_sizes()[size])
    arch = resolve_model_id(name)
    return arch.hf_id, arch


def model_precisions(arch: ModelArchitecture, wanted: Sequence[WeightFormat]) -> tuple[WeightFormat, ...]:
    """The precisions a model's rows are sized in: those asked, except that a quantized checkpoint is sized in
    its own format only (vLLM serves it in no other)."""
    return (arch.quantization.weight_format,) if arch.quantization is not None else tuple(wanted)


@dataclass(frozen=True)
class MatrixQuery:
    models: Sequence[str]
    gpus: Sequence[str] = DEFAULT_GPUS
    precisions: Sequence[WeightFormat] = ("bf16", "fp8", "int4")
    context: int = 8192
    concurrency: int = 16
    kv_cache_dtype: KvCacheDtype = "auto"
    requests_per_second: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    headroom: float = DEFAULT_HEADROOM
    vllm_version: str | None = None
    # where the prices apply and in what currency (with a load only; a saved matrix says what its costs mean)
    region: str | None = None
    currency: str | None = None


@dataclass(frozen=True)
class Cell:
    label: str  # what the user asked for (a size or a model id)
    model: str
    gpu: str
    precision: str
    fits: bool
    limit: str | None  # why it does not fit, or what keeps it from the load
    limit_kind: str | None  # context | precision | memory | kv | latency | gpu-data | no-price (None: no limit)
    tensor_parallel: int | None
    weights_gib_per_gpu: float | None
    kv_cache_tokens: int | None
    max_concurrency: float | None  # requests of `context` tokens the KV cache holds at once
    replica_requests_per_second: float | None = None
    replicas: int | None = None
    offering: str | None = None
    cost_per_hour: float | None = None
    cost_per_million_output_tokens: float | None = None
    currency: str | None = None
    model_max_len: int | None = None  # the longest context the model accepts (context_limit.py; None: unknown)
    # a `global` offering the residency admits only through its data-centre countries: where to create it (as a
    # plan's deployments[].pinned_countries; None: no pinning needed)
    pinned_countries: list[str] | None = None

    @property
    def gpus_per_replica(self) -> int | None:
        return self.tensor_parallel


def _fits(arch: ModelArchitecture, gpu: GpuSpec, precision: WeightFormat,
          q: MatrixQuery) -> tuple[list[tuple[int, MemoryEstimate]], MemoryEstimate | None, str | None]:
    """Every TP that holds the weights and `concurrency` x `context` of KV (smallest first), the last
    estimate tried and why the sizes below the first fit (or all of them) do not fit."""
    last: MemoryEstimate | None = None
    why: str | None = None
    fitting: list[tuple[int, MemoryEstimate]] = []
    for tp in TP_SIZES:
        try:
            est = estimate(arch, gpu, ServingConfig(tensor_parallel=tp, precision=precision,
                                                    kv_cache_dtype=q.kv_cache_dtype, max_model_len=q.context,
                                                    vllm_version=q.vllm_version))
        except InputError as exc:  # e.g. heads not divisible by TP: try the next size
            why = why if fitting else exc.problems[0]
            continue
        last = est
        if not est.fits:
            why = why if fitting else f"does not fit at TP {tp}: {est.reason}"
        elif est.max_concurrency < q.concurrency:
            why = why if fitting else (f"KV cache holds {est.max_concurrency:.1f} requests of {q.context:,} "
                                       f"tokens at TP {tp}, needs {q.concurrency}")
        else:
            fitting.append((tp, est))
    return fitting, last, why


def _cell(label: str, arch: ModelArchitecture, gpu: GpuSpec, precision: WeightFormat, q: MatrixQuery,
          catalog: Catalog | None, residency: Residency | None, currency: str) -> Cell:
    base: dict[str, Any] = {"label": label, "model": arch.hf_id, "gpu": gpu.gpu, "precision": precision,
                            "model_max_len": model_max_len(arch)}
    if too_long := max_model_len_problem(arch, q.context, "--context"):  # vLLM would not start at this length
        return Cell(**base, fits=False, limit=too_long, limit_kind="context", tensor_parallel=None,
                    weights_gib_per_gpu=None, kv_cache_tokens=None, max_concurrency=None)
    unsupported = (gpu_unsupported(gpu, precision, arch, q.vllm_version)
                   or fp8_kv_backend.unsupported(arch, gpu, q.kv_cache_dtype, q.vllm_version))
    if unsupported:
        return Cell(**base, fits=False, limit=unsupported, limit_kind="precision", tensor_parallel=None,
                    weights_gib_per_gpu=None, kv_cache_tokens=None, max_concurrency=None)
    fitting, last, why = _fits(arch, gpu, precision, q)
    if not fitting:
        kind = "kv" if why and why.startswith("KV cache holds") else "memory"
        return Cell(**base, fits=False, limit=why, limit_kind=kind, tensor_parallel=None,
                    weights_gib_per_gpu=None if last is None else round(last.binding_rank.weights_gib, 2),
                    kv_cache_tokens=None, max_concurrency=None)
    cells = [Cell(**base, fits=True, limit=None, limit_kind=None, tensor_parallel=tp,
                  weights_gib_per_gpu=round(est.binding_rank.weights_gib, 2), kv_cache_tokens=est.kv_cache_tokens,
                  max_concurrency=round(est.max_concurrency, 2)) for tp, est in fitting]
    if q.requests_per_second is None or q.input_tokens is None or q.output_tokens is None:
        return cells[0]  # without a load: the fewest GPUs that hold the model and the concurrency
    # with a load: the TP that carries it cheapest (or on the fewest GPUs when nothing is priced); a larger
    # TP often wins here, since it leaves more KV and a faster step per replica
    loaded = [_with_load(cell, arch, gpu, est, q, catalog, residency, currency)
              for cell, (_, est) in zip(cells, fitting, strict=True)]
    return min(loaded, key=_load_rank)


def _load_rank(cell: Cell) -> tuple[float, float, int]:
    cost = cell.cost_per_hour if cell.cost_per_hour is not None else math.inf
    gpus = (cell.replicas or 0) * (cell.tensor_parallel or 0) if cell.replicas else math.inf
    return cost, gpus, cell.tensor_parallel or 0


def _with_load(cell: Cell, arch: ModelArchitecture, gpu: GpuSpec, est: MemoryEstimate, q: MatrixQuery,
               catalog: Catalog | None, residency: Residency | None, currency: str) -> Cell:
    assert q.requests_per_second is not None and q.input_tokens is not None and q.output_tokens is not None
    try:
        replica = latency.build_replica(arch, gpu, est)
        point = analytic_load.max_rate(replica, q.input_tokens, q.output_tokens, q.ttft_ms, q.tpot_ms)
    except InfeasibleError as exc:
        return replace(cell, limit=exc.problems[0], limit_kind="latency")
    except InputError as exc:  # the GPU table lacks a figure the latency model needs
        return replace(cell, limit=exc.problems[0], limit_kind="gpu-data")
    if point.requests_per_second <= 1e-6:
        return replace(cell, limit=f"no load meets the targets ({point.limit or 'queueing'})", limit_kind="latency")
    replicas = max(1, math.ceil(q.requests_per_second / (point.requests_per_second * q.headroom) - 1e-9))
    loaded = replace(cell, replica_requests_per_second=round(point.requests_per_second, 4), replicas=replicas)
    if catalog is None:
        return loaded
    best: tuple[float, str, Offering] | None = None
    tp = cell.tensor_parallel or 1
    for o in catalog.select(residency=residency, gpus=[gpu.gpu], price_kinds=["on-demand"]):
        price = catalog.price_in(o, currency)
        if price is None or not o.gpu_count or o.gpu_count < tp or o.unusable_reason is not None:
            continue
        per_instance = o.gpu_count // tp
        cost = math.ceil(replicas / per_instance) * price
        if best is None or (cost, o.offering_id) < best[:2]:
            best = (cost, o.offering_id, o)
    if best is None:
        return replace(loaded, limit="no priced on-demand offering of this GPU in the region", limit_kind="no-price")
    tokens_per_hour = q.requests_per_second * q.output_tokens * 3600
    chosen = best[2]
    pinned = residency.pinned_countries(chosen.region, chosen.countries, chosen.provider) if residency else []
    return replace(loaded, offering=best[1], cost_per_hour=round(best[0], 4), currency=currency,
                   cost_per_million_output_tokens=round(best[0] / tokens_per_hour * 1e6, 4),
                   pinned_countries=pinned or None)


def build_matrix(q: MatrixQuery, catalog: Catalog | None = None, residency: Residency | None = None,
                 currency: str = "USD") -> list[Cell]:
    """Every (model, precision, GPU) cell, in the order asked (models, then precisions, then GPUs)."""
    problems: list[str] = []
    named: dict[str, tuple[str, str, ModelArchitecture]] = {}  # one row per model asked, however often it is
    for name in q.models:
        try:
            label, arch = resolve_model(name)
        except GpuoptError as exc:
            problems.extend(exc.problems)
            continue
        # one row per model, however it is named (a size, its registry id in any case): a local checkpoint by its
        # path, anything else by the architecture it resolves to
        local = expand_user(Path(name.strip()))
        key = str(local.resolve()) if local.exists() else arch.hf_id.lower()
        named.setdefault(key, (name.strip(), label, arch))
    # two checkpoints whose configs give one name (two local folders called `model`) are told apart by the
    # paths given: a grid keyed by the name put one's cells beside the other's (QA)
    labels = [label for _, label, _ in named.values()]
    models = [(given if labels.count(label) > 1 else label, arch) for given, label, arch in named.values()]
    gpus: list[GpuSpec] = []
    for g in q.gpus:
        try:
            spec = get_gpu(g)
        except GpuoptError as exc:
            problems.extend(exc.problems)
            continue
        if spec not in gpus:  # a GPU given twice (or in two spellings) is one column
            gpus.append(spec)
    # a context past a model's limit is that model's cells (the others still show); past every model's, the
    # matrix would hold nothing but refusals: bad input, one line per model (docs/matrix.md)
    too_long = [p for _, arch in models if (p := max_model_len_problem(arch, q.context, "--context"))]
    if models and len(too_long) == len(models):
        problems.extend(dict.fromkeys(too_long))
    if problems:
        raise InputError(*problems)
    return [_cell(label, arch, gpu, precision, q, catalog, residency, currency)
            for label, arch in models for precision in dict.fromkeys(model_precisions(arch, q.precisions))
            for gpu in gpus]


__all__ = ["DEFAULT_GPUS", "HOURS_PER_MONTH", "Cell", "MatrixQuery", "build_matrix", "model_sizes", "resolve_model"]

"""Candidates: every (workload, offering, weight format, KV dtype, TP/PP) a plan could use, and why not.

A candidate is one vLLM replica shape on one priced offering. It is feasible when the offering is allowed
(residency, provider, price kind), priced, its GPU can run the weight format, the model fits in memory at
max_model_len, and at least some load meets both SLOs. Every rejected candidate keeps its first failing
reason. The memory and latency evaluation depends only on the GPU, link, TP/PP and formats, so it is
computed once per such shape and shared by every offering with that GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from gpuopt.errors import FieldError, InputError, NotModelledError, SloUnreachableError
from gpuopt.hardware import GpuSpec, get_gpu, gpu_table
from gpuopt.inputs.workload import ModelConfigRef, Workload
from gpuopt.physics import analytic_load, checkpoint_table, fp8_kv_backend, latency
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.context_limit import limit_basis, max_model_len_problem, model_max_len
from gpuopt.physics.lora import lora_problems
from gpuopt.physics.memory import MemoryEstimate, estimate
from gpuopt.physics.resolution import from_config_beside_its_files
from gpuopt.physics.resolution import resolve_model as resolve_model_id
from gpuopt.physics.serving_config import (
    ServingConfig,
    default_precision,
    gpu_unsupported,
    quantized_checkpoint,
    validate,
)
from gpuopt.physics.traffic import longest_sharegpt
from gpuopt.physics.vllm_support import release_problem
from gpuopt.planner.checkpoints import checkpoint_sharding_problem, named_checkpoint_problems
from gpuopt.planner.mix import capacity_point
from gpuopt.planner.plan import DEFAULT_HEADROOM
from gpuopt.pricing.catalog import Catalog, Offering
from gpuopt.pricing.regions import Residency, region_info, split_countries
from gpuopt.vocabulary import KvCacheDtype, LinkKind, RejectionKind, WeightFormat

TP_SIZES = (1, 2, 4, 8, 16)
# The currency the planner compares prices in, whatever the plan's: the integer program, its pre-solve pruning
# and the choice of shapes to simulate read CandidateResult.canonical_price, so a plan does not depend on the
# currency it is shown in (program.py's docstring).
CANONICAL_CURRENCY = "USD"
PP_SIZES = (2, 4)
MULTI_NODE_SERVICES = frozenset({("aws", "ec2"), ("alibaba", "ecs"), ("tencent", "cvm"), ("digitalocean", "droplet")})
"""Where a replica may span instances (pipeline stages on several machines): services that rent plain machines in
one private network, which vLLM's multi-node start (or a Ray cluster) joins and the deploy targets launch as one
cluster. Not RunPod pods (SkyPilot 0.14.1's RunPod cloud refuses num_nodes > 1: "Multi-node not supported yet, as
the interconnection among nodes are non-trivial on RunPod", sky/clouds/runpod.py; Kubernetes and Compose targets
take no pods), nor serverless functions, SageMaker endpoints or the PAI and TI-ONE platforms, whose replicas are
one container each. QA: a 405B plan over RunPod ran two 8-GPU pods as one pipelined replica, which no target
could deploy. A decision recorded here; a provider's own multi-node product (a cluster offering) would be a row
of its own."""


@dataclass(frozen=True)
class Policy:
    residency: Residency | None
    providers: tuple[str, ...]
    price_kinds: tuple[str, ...]
    currency: str
    vllm_version: str | None = None


@dataclass(frozen=True)
class Placement:
    """Where and how a plan runs, as the command line gives it (each field overrides the input file's):
    region or residency selector, provider allow-list, report currency, headroom, vLLM version. `solve`
    and `plan` take the same placement (SolveOptions adds what only `solve` has)."""

    region: str | None = None
    providers: tuple[str, ...] = ()
    currency: str | None = None
    headroom: float = DEFAULT_HEADROOM
    vllm_version: str | None = None

    def policy(self, residency: str | None, providers: Sequence[str] | None, currency: str | None,
               price_kinds: Sequence[str]) -> Policy:
        """The candidate policy: these options over the file's residency, providers and currency (USD when
        neither names one)."""
        selector = self.region or residency
        return Policy(residency=Residency(selector) if selector else None,
                      providers=tuple(self.providers or providers or ()), price_kinds=tuple(price_kinds),
                      currency=self.currency or currency or "USD", vllm_version=self.vllm_version)


@dataclass(frozen=True)
class Shape:
    """A replica shape on one GPU type: what the memory and latency models are evaluated for."""

    gpu: str
    interconnect: LinkKind  # the link between the replica's GPUs: memory (custom all-reduce) and latency use it
    tensor_parallel: int
    pipeline_parallel: int
    precision: WeightFormat
    kv_cache_dtype: KvCacheDtype


POLICY_REJECTIONS: tuple[RejectionKind, ...] = ("residency", "provider", "price-kind", "no-price", "gpu-data")
"""Rejections decided before any memory or latency evaluation: by the policy or the offering's data."""


@dataclass(frozen=True)
class Evaluation:
    """A candidate shape's verdict. A rejection has a kind, a message for people, and for memory and latency
    misses how far off it is (gib_short, ms_over): the explanation of an infeasible plan reads these fields."""

    feasible: bool
    reason: str | None
    reason_kind: RejectionKind | None
    memory: MemoryEstimate | None = None
    point: analytic_load.LoadPoint | None = None
    gib_short: float | None = None  # for "fit": GiB per GPU missing
    ms_over: float | None = None  # for "ttft" and "tpot": how far a lone request misses the target
    # the capacity is an estimate scaled from simulated shapes (simcapacity.with_estimated_capacity), not simulated
    estimated: bool = False

    def __post_init__(self) -> None:
        if not self.feasible and self.reason_kind is None:
            raise ValueError("a rejected candidate needs a reason kind")


class CandidateResult(NamedTuple):
    """One candidate: a named tuple, because a solve builds 10^4-10^5 of them and a tuple is built four
    times faster than a frozen dataclass (and is just as immutable)."""

    workload: Workload
    offering: Offering
    shape: Shape | None
    evaluation: Evaluation
    instance_price: float | None  # in the plan's currency
    # the same price in CANONICAL_CURRENCY, converted from the catalog's own price (instance_price converted
    # back can differ in the last bit): what the program and its pruning compare
    canonical_price: float | None

    @property
    def feasible(self) -> bool:
        return self.evaluation.feasible

    @property
    def gpus_per_replica(self) -> int | None:
        if self.shape is None:
            return None
        return self.shape.tensor_parallel * self.shape.pipeline_parallel

    @property
    def capacity(self) -> float:
        """Sustainable load of one replica in the workload's demand unit."""
        return capacity_in(self.evaluation, self.workload.demand_unit)


def capacity_in(ev: Evaluation, demand_unit: str) -> float:
    """An evaluation's sustainable load of one replica in a demand unit: clients for a concurrency (a closed
    loop), else requests/s; 0 without a point."""
    if ev.point is None:
        return 0.0
    return ev.point.concurrency if demand_unit == "concurrency" else ev.point.requests_per_second


@dataclass
class WorkloadCandidates:
    workload: Workload
    arch: ModelArchitecture
    max_model_len: int
    results: list[CandidateResult] = field(default_factory=list)

    @property
    def feasible(self) -> list[CandidateResult]:
        return [r for r in self.results if r.feasible]


def resolve_model(w: Workload) -> ModelArchitecture:
    if isinstance(w.model, ModelConfigRef):
        return from_config_beside_its_files(Path(w.model.config), w.model.name)
    return resolve_model_id(w.model)


def checked_models(workloads: Sequence[Workload], vllm_version: str | None) -> list[ModelArchitecture]:
    """Each workload's model, after every check only the model can make of the workload's fields -- all the
    workloads' problems at once, each located at its field (FieldError): the model resolves, vLLM
    `vllm_version` implements its class, max_model_len is within its limit, the checkpoints it names hold its
    weights in their formats, its class takes the LoRA slots."""
    archs: list[ModelArchitecture] = []
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for i, w in enumerate(workloads):
        try:
            arch = resolve_model(w)
        except InputError as exc:
            problems += [(("workloads", i, "model"), f"{p} (workload {w.name})") for p in exc.problems]
            continue
        if missing := arch.missing_fields():
            problems.append((("workloads", i, "model"),
                             f"model {arch.hf_id} lacks {', '.join(missing)} (workload {w.name})"))
            continue
        if (unserved := release_problem(arch, vllm_version)) is not None:
            problems.append((("workloads", i, "model"), f"{unserved} (workload {w.name})"))
        if w.max_model_len is not None and (long := max_model_len_problem(arch, w.max_model_len, "")):
            problems.append((("workloads", i, "max_model_len"), f"{long} (workload {w.name})"))
        elif w.max_model_len is None:
            problems += [(("workloads", i, *where), f"{message} (workload {w.name})")
                         for where, message in _requests_over_limit(w, arch)]
        problems += [(("workloads", i, "checkpoints", precision), f"{message} (workload {w.name})")
                     for precision, message in named_checkpoint_problems(arch, w.checkpoints)]
        if (contradiction := _precisions_leave_out_the_checkpoint(w, arch)) is not None:
            problems.append((("workloads", i, "precisions"), f"{contradiction} (workload {w.name})"))
        if w.lora is not None:
            problems += [(("workloads", i, "lora"), f"{p} (workload {w.name})") for p in
                         lora_problems(arch, w.lora.max_loras, w.lora.max_lora_rank, vllm_version,
                                       fully_sharded=w.lora.fully_sharded)]
        archs.append(arch)
    if problems:
        raise FieldError(problems)
    return archs


def _precisions_leave_out_the_checkpoint(w: Workload, arch: ModelArchitecture) -> str | None:
    """A quantized checkpoint serves only in its own format (vLLM loads no other from it): `precisions` that
    leave that format out contradict the model the file names -- bad input, as `fit --precision` says, not an
    infeasible plan (QA: solve reported "binding constraint: precision", exit 1, where fit exits 2)."""
    q = arch.quantization
    if q is None or "precisions" not in w.model_fields_set or q.weight_format in w.precisions:
        return None
    return (f"{quantized_checkpoint(arch)} and serves only as {q.weight_format}, which precisions "
            f"{', '.join(w.precisions)} leave out: add {q.weight_format}, or name its base model for other "
            "precisions")


def _requests_over_limit(w: Workload, arch: ModelArchitecture) -> list[tuple[tuple[str | int, ...], str]]:
    """Requests longer than the model's context, for a workload without max_model_len: the length the plan
    would pick (default_max_model_len: at least the longest request) would be one vLLM refuses to start with.
    Located at each histogram bin, else at input_tokens."""
    limit = model_max_len(arch)
    if limit is None:
        return []
    return [(where, f"input_tokens + output_tokens = {i + o:,} exceeds the {limit:,} tokens of context "
                    f"{arch.hf_id} supports ({limit_basis(arch)}): vLLM cannot serve such a request; shorten it "
                    f"or serve a model with a longer context")
            for where, i, o in _request_lengths(w) if i + o > limit]


def _request_lengths(w: Workload) -> list[tuple[tuple[str | int, ...], int, int]]:
    """(field, input, output) of each kind of request the workload sends: its histogram's bins, else its mean
    (a histogram's mean is within its bins, so the bins say which requests are longest)."""
    bins = w.lengths.histogram if w.lengths is not None and w.lengths.histogram is not None else []
    return [(("lengths", "histogram", k), b.input_tokens, b.output_tokens) for k, b in enumerate(bins)] \
        or [(("input_tokens",), w.input_tokens, w.output_tokens)]


def default_max_model_len(w: Workload, arch: ModelArchitecture) -> int:
    """Without max_model_len in the workload: twice the mean request, or the longest request its lengths send
    when longer (a ShareGPT shape's tail: 5 x the means; QA found 3.7 % of a 1,000/250 shape's requests past the
    4,096 it had), rounded up to a power of two, capped at the model's own maximum (vLLM's default is the model
    maximum, which wastes KV memory for short chats)."""
    if w.max_model_len:
        return w.max_model_len
    need = 2 * (w.input_tokens + w.output_tokens)
    if w.lengths is not None and w.lengths.dataset == "sharegpt":
        need = max(need, longest_sharegpt(w.input_tokens, w.output_tokens))
    length = 1 << max(10, math.ceil(math.log2(need)))
    cap = model_max_len(arch) or length
    longest = max([i + o for _, i, o in _request_lengths(w)] + [w.input_tokens + w.output_tokens])
    return max(min(length, cap), longest)


def _provider_reason(o: Offering, w: Workload, policy: Policy) -> tuple[RejectionKind, str] | None:
    providers = w.providers or policy.providers
    if providers and o.provider not in providers:
        return "provider", f"provider {o.provider} not in the allow-list ({', '.join(providers)})"
    return None


def _policy_reason(o: Offering, policy: Policy) -> tuple[RejectionKind, str] | None:
    if policy.residency is not None and not policy.residency.allows(o.region, o.countries, o.provider):
        info = region_info(o.region, o.provider)
        # a "global" offering's data-centre countries (Offering.countries) are what residency reads: say so when
        # its source lists none, beside a provider whose global rows do list theirs
        listed = ", ".join(split_countries(o.countries)) or "no data-centre country in its source"
        where = f"{o.region} ({info.country or listed})"
        return "residency", f"region {where} is outside residency '{policy.residency.selector}'"
    if policy.price_kinds and o.price_kind not in policy.price_kinds:
        return "price-kind", f"price kind {o.price_kind} not allowed (allowed: {', '.join(policy.price_kinds)})"
    unusable = o.unusable_reason
    if unusable:
        return "no-price", unusable
    return None


class Evaluator:
    """Memory + latency per shape, cached for one workload."""

    def __init__(self, w: Workload, arch: ModelArchitecture, max_model_len: int, vllm_version: str | None):
        self.w, self.arch, self.max_model_len, self.vllm_version = w, arch, max_model_len, vllm_version
        self.cache: dict[Shape, Evaluation] = {}
        self.shape_lists: dict[tuple[str, int, str], tuple[tuple[Shape, Evaluation], ...]] = {}

    def shapes(self, gpu: GpuSpec, gpus: int, link: LinkKind) -> tuple[tuple[Shape, Evaluation], ...]:
        """All shapes on one kind of instance, computed once: many offerings share a GPU, count and link."""
        key = (gpu.gpu, gpus, link)
        if key not in self.shape_lists:
            self.shape_lists[key] = _shapes(self.w, self.arch, gpu, gpus, link, self)
        return self.shape_lists[key]

    def __call__(self, shape: Shape) -> Evaluation:
        if shape not in self.cache:
            self.cache[shape] = self._evaluate(shape)
        return self.cache[shape]

    def _evaluate(self, shape: Shape) -> Evaluation:
        gpus = shape.tensor_parallel * shape.pipeline_parallel
        # the repository the command serves: the model, or the checkpoint the workload names for this precision
        # (QA: a named avoid-multi-gpu checkpoint got a TP 4 replica where the same repository as `model:` did not)
        named = self.w.checkpoints.get(shape.precision)
        for served in (self.arch.hf_id, named):
            known = checkpoint_table.find(served) if served else None
            if known is not None and known.multi_gpu_bad and gpus > 1:
                # the table's avoid-multi-gpu (e.g. garbled output): the planner does not offer such a replica itself
                return Evaluation(False, known.caution(gpus), "fit")
        gpu = get_gpu(shape.gpu)
        cfg = ServingConfig(tensor_parallel=shape.tensor_parallel, pipeline_parallel=shape.pipeline_parallel,
                            precision=shape.precision, kv_cache_dtype=shape.kv_cache_dtype,
                            max_model_len=self.max_model_len, vllm_version=self.vllm_version,
                            interconnect=shape.interconnect,
                            max_loras=self.w.lora.max_loras if self.w.lora else 0,
                            max_lora_rank=self.w.lora.max_lora_rank if self.w.lora else 16,
                            fully_sharded_loras=self.w.lora.fully_sharded if self.w.lora else False)
        try:
            mem = estimate(self.arch, gpu, cfg)  # validates the shape first (serving_config.resolve)
        except NotModelledError as unmodelled:  # vLLM would run it on its V0 engine
            return Evaluation(False, f"not modelled: {'; '.join(unmodelled.problems)}", "fit")
        except InputError as refused:  # e.g. a fully sharded rank this TP does not divide
            return Evaluation(False, f"vLLM refuses this shape: {'; '.join(refused.problems)}", "fit")
        row = checkpoint_table.find(named) if named else None
        if row is not None and (split := checkpoint_sharding_problem(self.arch, row, mem.config)) is not None:
            # the named checkpoint is what the command serves: its blocks must split over this TP as the model's
            # would (review: GLM-4.5-Air-FP8 named under checkpoints: was planned at TP 8, which vLLM refuses)
            return Evaluation(False, f"vLLM refuses this shape: {split}", "fit", memory=mem)
        if not mem.fits:
            return Evaluation(False, f"does not fit: {mem.reason}", "fit", memory=mem,
                              gib_short=_gib_short(mem))
        replica = latency.build_replica(self.arch, gpu, mem, shape.interconnect)
        try:
            # over the workload's length mix (planner/mix.py); a concurrency is a closed loop's clients
            point = capacity_point(replica, self.w, poisson=self.w.open_loop)
        except SloUnreachableError as miss:
            return Evaluation(False, miss.problems[0], miss.target, memory=mem, ms_over=miss.ms_over)
        if point.requests_per_second <= 1e-6:
            return Evaluation(False, f"no load meets the targets ({point.limit or 'queueing'})", "capacity",
                              memory=mem)
        return Evaluation(True, None, None, memory=mem, point=point)


def _gib_short(mem: MemoryEstimate) -> float:
    rank = mem.binding_rank
    if rank.weights_gib > rank.budget_gib:
        return rank.weights_gib - rank.budget_gib + mem.kv_gib_short
    return mem.kv_gib_short if rank.kv_cache_gib > 0 else -rank.kv_cache_gib + mem.kv_gib_short


@lru_cache(maxsize=4096)
def _tp_options(arch: ModelArchitecture, gpus: int) -> tuple[int, ...]:
    """TP sizes that divide the instance's GPUs and that vLLM accepts for this model's heads."""
    return tuple(tp for tp in TP_SIZES if tp <= gpus and gpus % tp == 0
                 and not validate(arch, ServingConfig(tensor_parallel=tp)))


def enumerate_candidates(workloads: list[Workload], catalog: Catalog, policy: Policy,
                         evaluators: dict[str, Evaluator] | None = None) -> list[WorkloadCandidates]:
    """Candidates per workload. Pass the same `evaluators` dict to a second call (another residency policy)
    to reuse every memory/latency evaluation of the first."""
    out = []
    evaluators = {} if evaluators is None else evaluators
    archs = checked_models(workloads, policy.vllm_version)
    screened = _screen(catalog, policy)
    for w, arch in zip(workloads, archs, strict=True):
        max_len = default_max_model_len(w, arch)
        wc = WorkloadCandidates(workload=w, arch=arch, max_model_len=max_len)
        evaluate = evaluators.setdefault(w.name, Evaluator(w, arch, max_len, policy.vllm_version))
        results = wc.results
        for s in screened:
            o = s.offering
            rejected = _provider_rejection(o, w, policy) or s.rejected
            if rejected is not None:
                results.append(CandidateResult(w, o, None, rejected, s.price, s.canonical_price))
                continue
            assert s.gpu is not None  # screened offerings without a GPU spec are rejected
            price, canonical = s.price, s.canonical_price
            # a shape that fails on its own keeps its reason (fit, latency); one that would serve is refused where
            # the service cannot join its instances
            results += [CandidateResult(w, o, shape, (_single_node_only(o, shape, s.gpus, ev) if ev.feasible else None)
                                        or ev, price, canonical)
                        for shape, ev in evaluate.shapes(s.gpu, s.gpus, s.link)]
        out.append(wc)
    return out


def _single_node_only(o: Offering, shape: Shape, gpus: int, ev: Evaluation) -> Evaluation | None:
    """Why a replica larger than one instance of `o` cannot run there (MULTI_NODE_SERVICES), or None; the shape's
    memory and load point are kept (it fits: the explanation of an infeasible plan says so)."""
    span = -(-shape.tensor_parallel * shape.pipeline_parallel // max(gpus, 1))
    if span <= 1 or (o.provider, o.service) in MULTI_NODE_SERVICES:
        return None
    return Evaluation(False, f"a replica of {shape.tensor_parallel * shape.pipeline_parallel} GPUs spans {span} "
                             f"instances, and {o.provider} {o.service} instances are not joined into one multi-node "
                             "vLLM server (only EC2, ECS, CVM and droplet machines are)", "multi-node",
                      memory=ev.memory, point=ev.point)


class _Screened(NamedTuple):
    """One offering as every workload sees it: price in the plan's currency, the instance it is, or why
    no workload may use it (one shared Evaluation: its record part is then formatted once)."""

    offering: Offering
    price: float | None
    canonical_price: float | None
    rejected: Evaluation | None
    gpu: GpuSpec | None
    gpus: int
    link: LinkKind  # pcie for one GPU (no peer to talk to) and when the offering does not say NVLink


def _screen(catalog: Catalog, policy: Policy) -> list[_Screened]:
    table = gpu_table()
    out = []
    for o in catalog.offerings:
        price = catalog.price_in(o, policy.currency) if o.currency else None
        canonical = catalog.price_in(o, CANONICAL_CURRENCY) if o.currency else None
        rejected = _policy_reason(o, policy)
        if rejected is None and o.gpu not in table:
            rejected = ("gpu-data", f"GPU {o.gpu} not in the GPU table")
        if rejected is None:
            missing_specs = latency.missing_specs(table[o.gpu])
            if missing_specs:
                rejected = ("gpu-data", f"the GPU table has no {', '.join(missing_specs)} for {o.gpu}")
        gpus = o.gpu_count or 0
        # an offering said to be NVLinked (an overlay's word) on a GPU without NVLink, or more of a bridged card
        # than its bridge joins, talks over PCIe
        spec = table.get(o.gpu)
        link: LinkKind = "nvlink" if (o.interconnect == "nvlink" and gpus > 1 and spec is not None
                                      and spec.nvlink_joins(gpus)) else "pcie"
        why = None if rejected is None else Evaluation(False, rejected[1], rejected[0])
        out.append(_Screened(o, price, canonical, why, spec, gpus, link))
    return out


def _provider_rejection(o: Offering, w: Workload, policy: Policy) -> Evaluation | None:
    why = _provider_reason(o, w, policy)
    return None if why is None else Evaluation(False, why[1], why[0])


def planned_precisions(w: Workload, arch: ModelArchitecture) -> list[WeightFormat]:
    """The weight formats to plan: the workload's `precisions`; when it names none and its model is a quantized
    checkpoint, the checkpoint's own format -- vLLM serves a quantized checkpoint only in it, so the default
    [bf16, fp8] would make every candidate infeasible. A model published only quantized (gpt-oss in MXFP4;
    DeepSeek-V3/R1, Kimi-K2, MiniMax-M2 in block FP8) is such a checkpoint too: `vllm serve` of its repository
    loads that format whatever the plan says, so the default would plan BF16 weights the command never loads
    (and `--quantization fp8` on an MXFP4 repository, which vLLM refuses)."""
    if "precisions" not in w.model_fields_set:
        if arch.quantization is not None:
            return [arch.quantization.weight_format]
        if arch.native_quantization is not None:
            return [default_precision(arch)]
    return list(w.precisions)


def _shapes(w: Workload, arch: ModelArchitecture, gpu: GpuSpec, gpus: int, link: LinkKind,
            evaluate: Evaluator) -> tuple[tuple[Shape, Evaluation], ...]:
    """Every replica shape of this workload on an instance of `gpus` x `gpu` joined by `link`, evaluated."""
    results: list[tuple[Shape, Evaluation]] = []
    for wanted in dict.fromkeys(planned_precisions(w, arch)):
        # Volta and Turing have no BF16: vLLM runs such checkpoints in FP16 (same bytes)
        precision: WeightFormat = "fp16" if wanted == "bf16" and not gpu.has_bf16 else wanted
        why = gpu_unsupported(gpu, precision, arch, evaluate.vllm_version)
        if why:
            results.append((Shape(gpu.gpu, link, 1, 1, precision, w.kv_cache_dtypes[0]),
                            Evaluation(False, why, "precision")))
            continue
        for kv in w.kv_cache_dtypes:
            if (no_backend := fp8_kv_backend.unsupported(arch, gpu, kv, evaluate.vllm_version)) is not None:
                results.append((Shape(gpu.gpu, link, 1, 1, precision, kv), Evaluation(False, no_backend, "precision")))
                continue
            # TP=1 talks to no peer: one shape (and one evaluation) whatever links the instance has
            single = [Shape(gpu.gpu, link if tp > 1 else "pcie", tp, 1, precision, kv)
                      for tp in _tp_options(arch, gpus)]
            evaluated = [(s, evaluate(s)) for s in single]
            if not any(e.memory is not None and e.memory.fits for _, e in evaluated) and link == "nvlink":
                # the model is larger than one instance: pipeline stages across instances of this SKU
                evaluated += [(s, evaluate(s)) for s in (Shape(gpu.gpu, link, gpus, pp, precision, kv)
                                                         for pp in PP_SIZES if pp <= arch.num_hidden_layers)
                              if gpus in _tp_options(arch, gpus)]
            results.extend(evaluated)
    return tuple(results)

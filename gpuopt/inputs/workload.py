"""The workload file: the input contract of `gpuopt solve` (strict, versioned pydantic models + loader).

    schema_version: 1
    residency: cn                    # optional; --region overrides
    providers: [alibaba, tencent]    # optional allow-list; --provider overrides
    currency: CNY                    # optional report currency (default USD)
    price_kinds: [on-demand]         # optional: which price kinds a static plan may buy (default on-demand)
    workloads:
      - name: support-chat
        model: meta-llama/Llama-3.1-70B-Instruct      # or {config: path/to/config.json, name: my-model}
        requests_per_second: 4                        # or concurrency: 32
        input_tokens: 2000
        output_tokens: 300
        max_model_len: 32768
        slo: {ttft_ms: 2000, tpot_ms: 50}
        precisions: [bf16, fp8, int4]                 # default [bf16, fp8] (quantized checkpoints: their own)
        kv_cache_dtypes: [auto, fp8]                  # default [auto, fp8]
        min_replicas: 2                               # default 1
        tags: {team: support}
        lengths: {histogram: [{input_tokens: 500, output_tokens: 100, share: 0.7},   # optional length mix
                              {input_tokens: 5000, output_tokens: 800, share: 0.3}]} # or {dataset: sharegpt}
        shared_prefix_tokens: 400                     # optional: a system prompt common to every request
        checkpoints: {int4: Qwen/Qwen3-32B-AWQ}       # optional: the checkpoint to serve per precision
    quotas: [{provider: aws, sku: p5.48xlarge, region: us-east-1, max_instances: 2}]   # optional
    budget: {max_monthly: 50000, currency: USD}   # optional; currency defaults to the file's currency
    discounts: {aws: 0.1}                                                              # optional

Errors are reported one per line with the field path and the YAML line, exit code 2.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpuopt.errors import ConfigError, FieldError, InputError
from gpuopt.inputs.loader import check_input_file, load_yaml
from gpuopt.physics.traffic import SHAREGPT_CAP, longest_sharegpt
from gpuopt.text import one_line_problem
from gpuopt.vocabulary import (
    CURRENCIES,
    MAX_TOKENS,
    PRICE_KINDS,
    PROVIDERS,
    Currency,
    KvCacheDtype,
    WeightFormat,
)

SCHEMA_VERSION = 1
DEFAULT_PRECISIONS: tuple[WeightFormat, ...] = ("bf16", "fp8")
DEFAULT_KV_DTYPES: tuple[KvCacheDtype, ...] = ("auto", "fp8")

# Sanity ceilings, far above any real deployment: past them numbers only overflow the integer program's
# precision (a min_replicas of 5e18 kept the planner trimming replicas one by one for minutes).
MAX_REQUESTS_PER_SECOND = 1e6
MAX_CONCURRENCY = 10_000_000
MAX_REPLICAS = 10_000
# Arrivals from gamma gaps of shape 0.05 (clumps of ~10 requests on average, cv2 = 20) to 100 (almost a
# constant rate): a shape below 0.05 sends nearly all of a window's requests in a few bursts, which is an
# all-at-once load, not a rate a steady state can be planned for; above 100 nothing changes any more.
MIN_BURSTINESS = 0.05
MAX_BURSTINESS = 100.0


def known_providers(value: list[str]) -> list[str]:
    for p in value:
        if p not in PROVIDERS:
            raise ValueError(f"unknown provider '{p}' (known: {', '.join(PROVIDERS)})")
    return value


def known_price_kinds(value: list[str]) -> list[str]:
    for k in value:
        if k not in PRICE_KINDS:
            raise ValueError(f"unknown price kind '{k}' (known: {', '.join(PRICE_KINDS)})")
    return value


def known_residency(value: str | None) -> str | None:
    """A residency selector the catalog reads (pricing/regions.py), checked in the file so the error names it."""
    if value is not None:
        from gpuopt.pricing.regions import Residency

        try:
            Residency(value)
        except InputError as exc:
            raise ValueError(exc.problems[0]) from None
    return value


# Lists every file validates the same way, wherever they appear
ResidencySelector = Annotated[str | None, AfterValidator(known_residency)]
ProviderList = Annotated[list[str], AfterValidator(known_providers)]
PriceKindList = Annotated[list[str], AfterValidator(known_price_kinds)]


def unique_names(workloads: list[Any]) -> list[Any]:
    """The workloads, whose names must be unique (reports, diffs and exports key on them); a repeat is reported
    at its own entry (`N.name: ...`, which format_errors places on that entry's line)."""
    first: dict[str, int] = {}
    for i, w in enumerate(workloads):
        if w.name in first:
            raise ValueError(f"{i}.name: workload name {w.name!r} is already used by workloads.{first[w.name]}; "
                             "names must be unique")
        first[w.name] = i
    return workloads


def one_load_unit(requests_per_second: object, concurrency: object) -> None:
    """A load is stated in exactly one unit, in a workload file and in a capacity file alike."""
    if (requests_per_second is None) == (concurrency is None):
        raise ValueError("give exactly one of requests_per_second or concurrency")


def no_burstiness_in_loop(burstiness: float | None, closed_loop: bool) -> float | None:
    """`burstiness` shapes the arrivals of request-rate traffic; a closed loop's clients send their next request
    when the last one ends, so the field says nothing there (vllm bench serve ignores it with --request-rate
    inf): refused rather than silently dropped."""
    if burstiness is not None and closed_loop:
        raise ValueError("burstiness shapes the arrivals of requests_per_second traffic; a concurrency workload's "
                         "clients send their next request when the last one ends: remove burstiness")
    return burstiness


class Strict(BaseModel):
    """Base of every file model. strict: YAML `true` is not the number 1 and "2" is not 2 (pydantic's lax
    mode would coerce both silently); allow_inf_nan=False: `.inf`/`.nan` never reach the integer programs."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


SLO_PERCENTILES = (50, 90, 95, 99)
HISTOGRAM_SHARE_TOLERANCE = 1e-6  # as the simulator's HistogramLengths: shares sum to 1 up to rounding
MEAN_TOLERANCE = 0.01  # a histogram's mean may differ from input_tokens/output_tokens by 1 % (or 1 token)


class Slo(Strict):
    ttft_ms: float | None = Field(default=None, gt=0, description="Time to first token target, ms")
    tpot_ms: float | None = Field(default=None, gt=0, description="Time per output token target, ms")
    percentile: Literal[50, 90, 95, 99] | None = Field(
        default=None, description="The targets hold at this percentile of requests (absent: the mean)")


class LengthBin(Strict):
    input_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    share: float = Field(ge=0, le=1, description="Fraction of requests with these lengths")


class Lengths(Strict):
    """The length mix of the traffic: a histogram of (input, output) bins, or a dataset shape whose means
    are the workload's input_tokens/output_tokens. A plan at the mean alone under-buys: a mix with long
    requests costs more per request than its mean request does (docs/optimizer.md)."""

    histogram: list[LengthBin] | None = Field(default=None, min_length=1)
    dataset: Literal["sharegpt"] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Lengths:
        if (self.histogram is None) == (self.dataset is None):
            raise ValueError("give exactly one of histogram or dataset")
        if self.histogram is not None:
            total = sum(b.share for b in self.histogram)
            if abs(total - 1.0) > HISTOGRAM_SHARE_TOLERANCE:
                raise ValueError(f"histogram shares must sum to 1 (got {total:g})")
        return self

    def mean_tokens(self) -> tuple[float, float] | None:
        """(mean input, mean output) of the histogram; None for a dataset shape (its means are the workload's)."""
        if self.histogram is None:
            return None
        return (sum(b.share * b.input_tokens for b in self.histogram),
                sum(b.share * b.output_tokens for b in self.histogram))


def repository_id(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", value):
        raise ValueError(f"'{value}' is not a Hugging Face repository id (organisation/name)")
    return value


CheckpointId = Annotated[str, AfterValidator(repository_id)]


class Lora(Strict):
    """Adapters served beside the base model (`vllm serve --enable-lora`): their slots' GPU memory is counted
    (physics/lora.py) and the command carries the flags; the LoRA kernels' step time is not modelled."""

    max_loras: int = Field(default=1, ge=1, le=1024, description="Adapter slots (vLLM --max-loras)")
    max_lora_rank: Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] = Field(
        default=16, description="Largest adapter rank (vLLM --max-lora-rank)")
    fully_sharded: bool = Field(
        default=False, description="vLLM --fully-sharded-loras: each adapter's A (column-parallel layers) and B "
                                   "(row-parallel) split over the tensor-parallel GPUs; the rank must divide by TP")


def one_line(value: str) -> str:
    """A name or tag is one line of text: a control character or line break in it would split the lines of the
    tables, commands and messages it reaches, or run in the terminal that shows them."""
    if (problem := one_line_problem(value)) is not None:
        raise ValueError(problem)
    return value


OneLine = Annotated[str, AfterValidator(one_line)]


RESERVED_TAG_PREFIX = "gpuopt-"  # the tag keys exports add to a user's tags (reports/tabular.py, reports/capacity.py)


def discount(value: float) -> float:
    """A negotiated discount off list price, each checked at its own provider's key (all of them at once)."""
    if not 0 <= value < 1:
        raise ValueError(f"a discount is a fraction in [0, 1) (got {value:g})")
    return value


def named_model(value: str) -> str:
    """A model is named: an empty or blank id would resolve as a local path -- the current directory."""
    if not value.strip():
        raise ValueError("must name a model: a registry or Hugging Face id, or a local checkpoint path")
    return not_an_option(value)


def not_an_option(value: str) -> str:
    """A model name is the positional argument of the printed `vllm serve` command: one starting with '-' is
    read there as an option whatever the quoting (QA: name `--download-dir=/tmp/evil` served vLLM's default
    model with the injected flag). No Hugging Face id starts so; a local directory can be written ./-name."""
    if value.startswith("-"):
        raise ValueError(f"'{value}' starts with '-', which `vllm serve` would read as an option: name a model "
                         "id, or write a local directory as ./" + value)
    return value


class ModelConfigRef(Strict):
    config: Annotated[Path, Field(strict=False)] = Field(
        description="A local Hugging Face config.json (relative to the workload file)")
    name: Annotated[OneLine, AfterValidator(not_an_option)] = Field(min_length=1)


class ServingTarget(Strict):
    """What a workload serves and how fast, without its traffic (shared by the workload and capacity files)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    # a mapping is a {config, name} model, anything else must be an id: one branch's errors, not both
    model: Annotated[Annotated[str, AfterValidator(named_model), Tag("str")]
                     | Annotated[ModelConfigRef, Tag("ModelConfigRef")],
                     Discriminator(lambda v: "ModelConfigRef" if isinstance(v, dict | ModelConfigRef) else "str")]
    input_tokens: int = Field(gt=0, le=MAX_TOKENS, description="Mean prompt tokens")
    output_tokens: int = Field(gt=0, le=MAX_TOKENS, description="Mean output tokens")
    max_model_len: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    slo: Slo = Field(default_factory=Slo)
    precisions: list[WeightFormat] = Field(default_factory=lambda: list(DEFAULT_PRECISIONS), min_length=1)
    kv_cache_dtypes: list[KvCacheDtype] = Field(default_factory=lambda: list(DEFAULT_KV_DTYPES), min_length=1)
    min_replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    tags: dict[str, str] = Field(default_factory=dict)
    providers: ProviderList | None = None
    lengths: Lengths | None = None
    shared_prefix_tokens: int = Field(default=0, ge=0, description="Leading prompt tokens common to every "
                                      "request (a system prompt), served from vLLM's prefix cache")
    checkpoints: dict[WeightFormat, CheckpointId] = Field(
        default_factory=dict, description="Hugging Face repository to serve per weight format (e.g. "
        "{int4: Qwen/Qwen3-32B-AWQ}); otherwise gpuopt names a known one or says none is known")
    lora: Lora | None = Field(default=None, description="LoRA adapter slots to reserve (absent: no LoRA)")

    @model_validator(mode="after")
    def _lengths(self) -> ServingTarget:
        if self.max_model_len is not None and self.input_tokens + self.output_tokens > self.max_model_len:
            raise ValueError(f"input_tokens + output_tokens ({self.input_tokens + self.output_tokens}) exceed "
                             f"max_model_len ({self.max_model_len})")
        return self

    @field_validator("model")
    @classmethod
    def _one_line_model(cls, model: str | ModelConfigRef) -> str | ModelConfigRef:
        return one_line(model) if isinstance(model, str) else model

    @field_validator("tags")
    @classmethod
    def _one_line_tags(cls, tags: dict[str, str]) -> dict[str, str]:
        for key, value in tags.items():
            one_line(key)
            one_line(value)
        reserved = sorted(key for key in tags if key.lower().startswith(RESERVED_TAG_PREFIX))
        if reserved:  # FOCUS exports write gpuopt-workload, gpuopt-workloads, gpuopt-period over them
            raise ValueError(f"tag key{'s' if len(reserved) > 1 else ''} {', '.join(reserved)}: keys starting "
                             f"{RESERVED_TAG_PREFIX!r} are gpuopt's own (its FOCUS exports write them); rename "
                             f"{'them' if len(reserved) > 1 else 'it'}")
        return tags

    @field_validator("lengths")
    @classmethod
    def _mix(cls, lengths: Lengths | None, info: ValidationInfo) -> Lengths | None:
        """Checked against the fields above it (pydantic validates in declaration order), so the error points
        at `lengths:` in the YAML."""
        if lengths is not None and lengths.histogram is not None and "input_tokens" in info.data:
            problems = histogram_problems(lengths, info.data["input_tokens"], info.data.get("output_tokens"),
                                          info.data.get("max_model_len"))
            if problems:
                raise ValueError("; ".join(problems))
        if lengths is not None and lengths.dataset == "sharegpt" and info.data.get("max_model_len") \
                and info.data.get("input_tokens") and info.data.get("output_tokens"):
            longest = longest_sharegpt(info.data["input_tokens"], info.data["output_tokens"])
            if longest > info.data["max_model_len"]:
                # as a histogram bin past it: vLLM refuses the request, and the plan's capacity counted it
                raise ValueError(f"dataset sharegpt sends requests of up to {longest:,} tokens ({SHAREGPT_CAP:g} x "
                                 f"the mean prompt and output), above max_model_len ({info.data['max_model_len']}): "
                                 f"raise max_model_len to {longest:,} or describe the lengths with a histogram")
        return lengths

    @field_validator("shared_prefix_tokens")
    @classmethod
    def _prefix(cls, prefix: int, info: ValidationInfo) -> int:
        lengths = info.data.get("lengths")
        bins = lengths.histogram if lengths is not None and lengths.histogram is not None else []
        prompts = [b.input_tokens for b in bins] + ([info.data["input_tokens"]] if "input_tokens" in info.data else [])
        if prompts and prefix >= min(prompts):
            raise ValueError(f"shared_prefix_tokens ({prefix}) must be below every prompt's length "
                             f"(shortest {min(prompts)})")
        return prefix

    @property
    def model_id(self) -> str:
        return self.model if isinstance(self.model, str) else self.model.name

    @property
    def arrival_burstiness(self) -> float:
        """The gamma shape the traffic is planned with (1: Poisson). The traffic is the subclass's (a workload's
        rate, a capacity file's demand), and so is the `burstiness` field: declared after the demand, its
        check can name its own YAML line.

        Arrivals more regular than Poisson (b > 1) are planned as Poisson: the simulator finds they never cost
        capacity (up to 17 % more: docs/simulator.md), which gpuopt does not credit -- a Poisson plan is analytic
        where a simulated one sits on the simulator's grid a few % lower, so crediting them made b = 1.01 dearer
        than b = 1 (QA: 1,591 against 1,336 USD/month)."""
        burstiness = getattr(self, "burstiness", None)
        return 1.0 if burstiness is None else min(float(burstiness), 1.0)


def burstiness_field() -> Any:
    """The `burstiness` field of a workload and a capacity-file workload (declared after their demand)."""
    return Field(default=None, ge=MIN_BURSTINESS, le=MAX_BURSTINESS,
                 description="Gamma shape of the request inter-arrival times, as `vllm bench serve --burstiness` "
                 "(absent or 1: Poisson; below 1 the requests come in clumps; above 1 more regularly); "
                 "request-rate traffic only")


def histogram_problems(lengths: Lengths, input_tokens: int, output_tokens: int | None,
                       max_model_len: int | None) -> list[str]:
    """What is wrong between a length histogram and the workload's means and max_model_len."""
    assert lengths.histogram is not None
    problems = []
    mean_in, mean_out = lengths.mean_tokens() or (0.0, 0.0)
    for name, declared, mean in (("input_tokens", input_tokens, mean_in), ("output_tokens", output_tokens, mean_out)):
        if declared is not None and abs(declared - mean) > max(1.0, MEAN_TOLERANCE * mean):
            problems.append(f"the histogram's mean {name} is {mean:.1f}, the workload says {declared}: "
                            f"set {name}: {round(mean)}")
    longest = max(b.input_tokens + b.output_tokens for b in lengths.histogram)
    if max_model_len is not None and longest > max_model_len:
        problems.append(f"a histogram bin needs {longest} tokens, above max_model_len ({max_model_len})")
    return problems


class Workload(ServingTarget):
    requests_per_second: float | None = Field(default=None, gt=0, le=MAX_REQUESTS_PER_SECOND)
    concurrency: int | None = Field(default=None, gt=0, le=MAX_CONCURRENCY)
    burstiness: float | None = burstiness_field()

    @model_validator(mode="after")
    def _one_load(self) -> Workload:
        one_load_unit(self.requests_per_second, self.concurrency)
        return self

    @field_validator("burstiness")
    @classmethod
    def _open_loop_only(cls, burstiness: float | None, info: ValidationInfo) -> float | None:
        return no_burstiness_in_loop(burstiness, info.data.get("concurrency") is not None)

    @property
    def demand(self) -> float:
        """Traffic to cover, in the workload's own unit (requests/s or concurrent requests)."""
        return float(self.requests_per_second if self.requests_per_second is not None else self.concurrency or 0)

    @property
    def demand_unit(self) -> str:
        return "requests_per_second" if self.requests_per_second is not None else "concurrency"

    @property
    def open_loop(self) -> bool:
        """Requests arrive on their own (Poisson, a request rate), not from a closed loop of clients that each
        send the next when the last ends: the analytic model charges an open loop's swings (analytic_load.at_rate's
        `poisson`) and the simulator runs one or the other."""
        return self.requests_per_second is not None


class Quota(Strict):
    provider: str
    sku: str | None = None
    region: str | None = None
    max_instances: int = Field(ge=0)


class Budget(Strict):
    """`budget: {max_monthly: N, currency: C}`; without a currency the amount is in the file's own `currency`
    (USD when the file names none)."""

    max_monthly: float = Field(gt=0)
    # unstated: the file's currency (cli/solve.check_budget). Until 2026-12-04 it was USD, so a `currency: CNY`
    # file's budget of 100,000 was 665,290 CNY and passed a plan 5.8 % over what its author wrote
    currency: Currency | None = None


def known_quota_providers(value: list[Quota]) -> list[Quota]:
    """Quotas of known providers: checked in the files (workload and capacity), not in Quota itself, so planner
    tests may build quotas for made-up providers."""
    for i, q in enumerate(value):
        if q.provider not in PROVIDERS:
            raise ValueError(f"{i}.provider: unknown provider '{q.provider}' (known: {', '.join(PROVIDERS)})")
    return value


class WorkloadFile(Strict):
    schema_version: Literal[1]
    residency: ResidencySelector = None
    providers: ProviderList | None = None
    currency: Currency | None = None
    price_kinds: PriceKindList = Field(default_factory=lambda: ["on-demand"], min_length=1)
    workloads: list[Workload] = Field(min_length=1)
    quotas: list[Quota] = Field(default_factory=list)
    budget: Budget | None = None
    discounts: dict[str, Annotated[float, AfterValidator(discount)]] = Field(default_factory=dict)

    @field_validator("quotas")
    @classmethod
    def _quota_providers(cls, value: list[Quota]) -> list[Quota]:
        return known_quota_providers(value)

    @field_validator("discounts")
    @classmethod
    def _discounts(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = [p for p in value if p not in PROVIDERS]
        if unknown:
            named = ", ".join(f"'{p}'" for p in unknown)
            raise ValueError(f"unknown provider{'s' if len(unknown) > 1 else ''} {named} "
                             f"(known: {', '.join(PROVIDERS)})")
        return value

    @field_validator("workloads")
    @classmethod
    def _unique_names(cls, value: list[Workload]) -> list[Workload]:
        return unique_names(value)


# ---- loading with YAML line numbers ------------------------------------------------------------------


def _node_line(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based YAML line of the value at pydantic location `loc` (the deepest node that exists)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            # str(part): a key written `5:` is an integer in pydantic's location and the text "5" in the YAML
            text = str(part).lower() if isinstance(part, bool) else str(part)  # a `true:` key is True there
            pair = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == text), None)
            if pair is None:
                return line  # a missing key: its mapping's line
            key, node = pair
            # an alias (*name) is the anchored node itself, which starts where the anchor was written, above
            # the key that uses it: the key's line then (QA: `schema_version: *l1` was reported at the anchor)
            line = max(node.start_mark.line, key.start_mark.line) + 1
            continue
        if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            # an aliased item starts at its anchor, above the list: the list's line is the nearest that is its own
            line = max(node.start_mark.line + 1, line or 0)
        # else: pydantic adds union-branch names (e.g. 'str') that are not in the YAML
    return line


UNION_BRANCHES = frozenset({"str", "ModelConfigRef", "list-of-values", "growth-series", "values-by-period"})
"""Labels pydantic adds to an error location for the branch of a union it tried (the last three are the
tags of the capacity file's demand forms); they are not YAML keys, so messages and line lookups skip them."""


def _yaml_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(p for p in loc if not (isinstance(p, str) and p in UNION_BRANCHES))


_TYPE_NAMES = {bool: "boolean", str: "string", int: "integer", float: "number", list: "list", dict: "mapping",
               type(None): "null"}


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxdict, _BRIEF.maxstring, _BRIEF.maxother = 2, 4, 4, 40, 40


def _brief(value: object) -> str:
    """repr(value) cut to 40 characters, without walking more than a few items and levels of it: a value may be
    a large structure (aliases)."""
    text = _BRIEF.repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _shown(value: object) -> str:
    """A YAML value as its author wrote it, with its type: `boolean true`, `string '1'`."""
    text = ("true" if value else "false") if isinstance(value, bool) else _brief(value)
    return f"{_TYPE_NAMES.get(type(value), type(value).__name__)} {text}"


def _message(err: Any) -> str:
    """pydantic's message, reworded to say what was expected and what was found, so a message never reads as
    its own contradiction (a string "1" for schema_version must not read as "1 is not supported")."""
    kind = str(err["type"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "finite_number":
        return f"expected a finite number, got {err['input']}"
    if (kind.endswith("_type") or kind in ("literal_error", "int_from_float")) and msg.startswith("Input should be "):
        return f"expected {msg.removeprefix('Input should be ')}, got {_shown(err.get('input'))}"
    return msg


# a list validator's message naming the entry it is about ("3.name: ..."): the entry joins the location
WITHIN_LIST = re.compile(r"^(\d+)\.([A-Za-z_]\w*): ")


def format_errors(path: Path, exc: ValidationError, root: yaml.Node | None) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = _yaml_loc(tuple(err["loc"]))
        message = _message(err)
        if (entry := WITHIN_LIST.match(message)) is not None:
            loc = (*loc, int(entry.group(1)), entry.group(2))
            message = message[entry.end():]
        shown = ".".join(str(p) for p in loc)
        line = _node_line(root, loc)
        where = f"{path}:{line}" if line else str(path)
        lines.append(f"{where}: {shown or '(file)'}: {message}")
    return list(dict.fromkeys(lines))


M = TypeVar("M", bound=BaseModel)


def _version_problem(version: object) -> str | None:
    if version is None:
        return None  # the model reports the missing field
    if isinstance(version, bool) or not isinstance(version, int):
        return f"expected the number {SCHEMA_VERSION}, got {_shown(version)}"
    if version != SCHEMA_VERSION:
        return f"{version} is not supported (this gpuopt reads schema_version {SCHEMA_VERSION})"
    return None


def load_versioned(path: Path, model: type[M], expected: str) -> M:
    """Parse a versioned YAML file into `model`: YAML errors, schema_version and validation errors become
    one ConfigError line each with the YAML line."""
    data, root = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping with {expected}")
    problem = _version_problem(data.get("schema_version"))
    if problem:
        raise ConfigError(f"{path}:{_node_line(root, ('schema_version',))}: schema_version: {problem}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(*format_errors(path, exc, root)) from None


T = TypeVar("T", bound=ServingTarget)


def relative_model_configs(workloads: list[T], path: Path) -> list[T]:
    """Model config.json paths in a file are relative to that file; each must be a readable file (checked
    here, so a directory or a missing file is a message with the workload's name, not a traceback)."""
    fixed = []
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for i, w in enumerate(workloads):
        if isinstance(w.model, ModelConfigRef):
            config = w.model.config if w.model.config.is_absolute() else path.parent / w.model.config
            try:
                check_input_file(config, "model config.json")
            except InputError as exc:
                problems += [(("workloads", i, "model", "config"), p) for p in exc.problems]
            w = w.model_copy(update={"model": w.model.model_copy(update={"config": config})})
        fixed.append(w)
    if problems:
        raise locate_fields(path, FieldError(problems))  # at the YAML line of each `config:`
    return fixed


def locate_fields(path: Path, exc: FieldError) -> ConfigError:
    """The problems of `exc` as `path:line: workloads.i.field: message` lines, the YAML line read again from
    the file (the planner that found them had only the parsed workloads)."""
    _, root = load_yaml(path)
    return ConfigError(*(f"{path}:{_node_line(root, loc)}: {'.'.join(map(str, loc))}: {message}"
                         for loc, message in exc.located))


@contextmanager
def fields_located_in(path: Path) -> Iterator[None]:
    """Inside, a FieldError leaves located in the workload (or capacity) file `path` (locate_fields)."""
    try:
        yield
    except FieldError as exc:
        raise locate_fields(path, exc) from None


def load_workload(path: Path) -> WorkloadFile:
    wf = load_versioned(path, WorkloadFile, "schema_version and workloads")
    return wf.model_copy(update={"workloads": relative_model_configs(wf.workloads, path)})


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the workload file (shipped as gpuopt/data/workload.schema.json)."""
    schema = WorkloadFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpuopt workload file"
    return schema


__all__ = ["CURRENCIES", "Workload", "WorkloadFile", "json_schema", "load_workload"]

"""A `vllm serve` flag string, read into the knobs that change memory or scheduling.

`gpuopt simulate --server-args "..."` and the load benchmark take the flags a real deployment passed.
Flags that change the KV budget or the scheduler are honoured; every other valid-looking flag is named
back as not modelled (a note, not an error: vLLM has hundreds of flags and most do not move the numbers
this model predicts). A string that does not tokenise, or a value of the wrong type, is an error naming it.
`--kv-cache-dtype` takes what the release's vLLM accepts (physics/serve_flags.py, read from vLLM's own
source): the fp8 variants are modelled as 1-byte KV, auto/bfloat16/float16 as the 2-byte KV of the model's
activations; the rest (4-bit and per-token-head formats) are valid but not modelled, and named so.

The same reader serves `gpuopt simulate --server-args`, the load benchmark and the server configuration of
`gpuopt calibrate`'s evidence (flags and sidecars; there a whole `vllm serve MODEL ...` line is accepted).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from gpuopt.errors import InputError
from gpuopt.physics.cuda_graphs import OPTIMIZATION_LEVEL_FIRST, GraphSettings
from gpuopt.physics.graph_flags import GraphFlags
from gpuopt.physics.lora import rank_problem
from gpuopt.physics.serve_flags import flags, kv_cache_dtypes, release_for, releases
from gpuopt.physics.vllm_profile import release_key
from gpuopt.vocabulary import PERFORMANCE_MODES, PerformanceMode

_HUMAN_INT_FLAGS = {"kv-cache-memory-bytes": "kv_cache_memory_bytes"}  # vLLM's human_readable_int values
_INT_FLAGS = {
    "max-model-len": "max_model_len", "max-num-seqs": "max_num_seqs",
    "max-num-batched-tokens": "max_num_batched_tokens", "block-size": "block_size",
    "tensor-parallel-size": "tensor_parallel", "pipeline-parallel-size": "pipeline_parallel",
    "data-parallel-size": "data_parallel", "max-loras": "max_loras", "max-lora-rank": "max_lora_rank",
}
_SHORT = {"tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "dp": "data-parallel-size"}
# vLLM's single-dash aliases (add_argument("--long", "-short") in vllm/engine/arg_utils.py, 0.8.0-0.34.0 wheels;
# -ep from 0.14, -cc from 0.12); any other single-dash flag is named back as not modelled
_SHORT_FLAGS = {**_SHORT, "ep": "enable-expert-parallel", "q": "quantization", "cc": "compilation-config"}
_FLOAT_FLAGS = {"gpu-memory-utilization": "gpu_memory_utilization"}
_STR_FLAGS = {"kv-cache-dtype": "kv_cache_dtype", "dtype": "dtype", "quantization": "quantization",
              "performance-mode": "performance_mode"}
_BOOL_FLAGS = {
    "enable-prefix-caching": ("enable_prefix_caching", True),
    "no-enable-prefix-caching": ("enable_prefix_caching", False),
    "async-scheduling": ("async_scheduling", True),
    "no-async-scheduling": ("async_scheduling", False),
    "enable-chunked-prefill": ("chunked_prefill", True),
    "no-enable-chunked-prefill": ("chunked_prefill", False),
    "enable-expert-parallel": ("enable_expert_parallel", True),
    "no-enable-expert-parallel": ("enable_expert_parallel", False),
    "enable-lora": ("enable_lora", True),
    "no-enable-lora": ("enable_lora", False),
    "fully-sharded-loras": ("fully_sharded_loras", True),
    "no-fully-sharded-loras": ("fully_sharded_loras", False),
    "enable-extensible-kv-cache": ("extensible_kv_cache", True),
    "no-enable-extensible-kv-cache": ("extensible_kv_cache", False),
    "enforce-eager": ("enforce_eager", True),
    "no-enforce-eager": ("enforce_eager", False),
}


@dataclass(frozen=True)
class ServeArgs:
    """The honoured flags (None: not given, vLLM's default applies) and the names of the others."""

    model: str | None = None  # `vllm serve MODEL` or --model (read only in command form)
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    data_parallel: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    chunked_prefill: bool | None = None
    enable_expert_parallel: bool | None = None
    performance_mode: str | None = None  # `--performance-mode` (v0.17+): throughput doubles the scheduler defaults
    enable_lora: bool | None = None  # `--enable-lora`: adapter slots' buffers are allocated (physics/lora.py)
    max_loras: int | None = None  # slots (vLLM's default 1); read only with --enable-lora
    max_lora_rank: int | None = None  # vLLM's default 16
    fully_sharded_loras: bool | None = None  # `--fully-sharded-loras`: A / B split over the TP group too
    kv_cache_memory_bytes: int | None = None  # `--kv-cache-memory-bytes`: each GPU's KV cache, set
    extensible_kv_cache: bool | None = None  # `--[no-]enable-extensible-kv-cache` (0.34+): KV sized after warmup
    enforce_eager: bool | None = None  # `--[no-]enforce-eager`: no CUDA graphs
    cudagraphs: GraphSettings | None = None  # `--compilation-config`, `-O<n>`, `--cuda-graph-sizes` (graph_flags.py)
    not_modelled: tuple[str, ...] = field(default=())


def parse_serve_args(text: str, flag: str = "--server-args", vllm_version: str | None = None,
                     command: bool = False) -> ServeArgs:
    """Read `text` as `vllm serve` flags; raises InputError naming `flag` when it cannot be read.

    `vllm_version` checks --kv-cache-dtype against that release (None: any listed release). `command` also
    accepts a whole command line, `vllm serve MODEL --flags` (the model is returned, and --model read)."""
    try:
        tokens = shlex.split(text or "")
    except ValueError as exc:
        raise InputError(f"{flag}: cannot parse {text!r} ({exc})") from None
    values: dict[str, object] = {}
    ignored: list[str] = []
    if command:
        if tokens[:2] == ["vllm", "serve"]:
            tokens = tokens[2:]
        if tokens and not _is_flag(tokens[0]):
            values["model"], tokens = tokens[0], tokens[1:]
    graphs = GraphFlags(flag, vllm_version)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, eq, inline = _flag_name(flag, tok, graphs)
        if vllm_version is not None and (problem := _not_a_flag(tok, vllm_version)) is not None:
            raise InputError(f"{flag}: {problem}")
        base, dot, key = name.partition(".")

        takes_value = (base in _INT_FLAGS or base in _HUMAN_INT_FLAGS or base in _FLOAT_FLAGS or base in _STR_FLAGS
                       or base in ("compilation-config", "optimization-level") or (command and base == "model"))
        raw = inline
        if takes_value and not eq:
            if i + 1 >= len(tokens):
                raise InputError(f"{flag}: {_shown(tok, name)} needs a value")
            i += 1
            raw = tokens[i]
        if base == "compilation-config":
            if dot:
                graphs.dotted(_shown(tok, base), key, raw)
            else:
                graphs.compilation_config(_shown(tok, base), raw)
        elif base == "optimization-level":
            graphs.optimization_level(_shown(tok, base), raw)
        elif base == "cuda-graph-sizes":  # nargs="+": every value up to the next flag
            sizes = [inline] if eq else []
            while not eq and i + 1 < len(tokens) and not _is_flag(tokens[i + 1]):
                i += 1
                sizes.append(tokens[i])
            graphs.cuda_graph_sizes(sizes)
        elif takes_value:
            typed = {"model": raw} if base == "model" else _typed(flag, base, raw, vllm_version)
            if not typed:
                ignored.append(f"--{base} {raw}")
            values.update(typed)
        elif base in _BOOL_FLAGS:
            bool_key, on = _BOOL_FLAGS[base]
            values[bool_key] = on
        else:
            ignored.append(_shown(tok, name))
            if not eq and i + 1 < len(tokens) and not _is_flag(tokens[i + 1]):
                i += 1  # its value
        i += 1
    ignored.extend(graphs.not_modelled)
    if (settings := graphs.settings()) is not None:
        values["cudagraphs"] = settings
    rank = values.get("max_lora_rank")
    if values.get("enable_lora") and isinstance(rank, int) and \
            (bad_rank := rank_problem(rank, vllm_version)) is not None:
        raise InputError(f"{flag}: {bad_rank}")
    return ServeArgs(**values, not_modelled=tuple(ignored))  # type: ignore[arg-type]


def _flag_name(flag: str, tok: str, graphs: GraphFlags) -> tuple[str, str, str]:
    """(long name without dashes, "=" if the value came inline, the inline value) of a flag token, short forms
    mapped to the flag they stand for (-tp, -pp, -dp, -ep, -q, -cc; -O<n> the optimization level from 0.12, the
    compilation config before, as vLLM's FlexibleArgumentParser rewrites them)."""
    if tok.startswith("--"):
        name, eq, inline = tok[2:].partition("=")
        base, dot, key = name.partition(".")
        base = base.replace("_", "-")
        return _SHORT.get(base, base) + dot + key, eq, inline
    if not _is_flag(tok):
        raise InputError(f"{flag}: expected a --flag, got {tok!r}")
    if tok.startswith("-O") and tok != "-O" and tok[2] != ".":
        level = tok[3:] if tok[2] == "=" else tok[2:]  # -O3, -O=3
        return "optimization-level", "=", level
    if tok == "-O" or tok.startswith("-O."):
        old = graphs.release < OPTIMIZATION_LEVEL_FIRST  # -O was --compilation-config's short form up to 0.11
        if tok == "-O":
            return ("compilation-config" if old else "optimization-level"), "", ""
        tok = "-cc" + tok[2:]
    name, eq, inline = tok[1:].partition("=")
    base, dot, key = name.partition(".")
    return _SHORT_FLAGS.get(base, f"-{base}") + dot + key, eq, inline


def _not_a_flag(tok: str, vllm_version: str) -> str | None:
    """Why vLLM `vllm_version`'s parser would refuse this flag ("unrecognized arguments"), or None. Checked only
    where the flags of that very release were read (physics/serve_flags.py: every minor release from 0.8), and
    not for gpuopt's own --tp / --pp / --dp shorthands, the -O<n> forms vLLM rewrites or
    --cuda-graph-sizes (graph_flags names its successor)."""
    written = tok.partition("=")[0].partition(".")[0]
    if written.startswith("--"):
        written = "--" + written[2:].replace("_", "-")
    if written in ("--tp", "--pp", "--dp", "--cuda-graph-sizes") or written.startswith("-O"):  # the last: its own
        return None
    listed = release_for(vllm_version)
    if release_key(listed)[:2] != release_key(vllm_version)[:2] or written in flags(vllm_version):
        return None
    having = [v for v, known in sorted(releases().items(), key=lambda kv: release_key(kv[0])) if written in known]
    since = ("; " + (f"it came in {having[0]}" if release_key(having[0]) > release_key(listed) else
                     f"the last release that has it is {having[-1]}")) if having else ""
    return (f"{written} is not a flag of vLLM {vllm_version} (its parser, read in the {listed} wheel, would refuse "
            f"it: \"unrecognized arguments\"{since})")


def _is_flag(tok: str) -> bool:
    """A flag token, not a value: `--x` or `-x` (a negative number is a value)."""
    return tok.startswith("-") and len(tok) > 1 and not re.fullmatch(r"-\d+(?:\.\d+)?", tok)


def _shown(tok: str, name: str) -> str:
    """The flag as the user wrote it, for messages and notes (its long name when given in long form)."""
    return f"--{name}" if tok.startswith("--") else tok.partition("=")[0].partition(".")[0]


def lora_slots(args: ServeArgs) -> tuple[int, int, bool]:
    """(adapter slots, rank, fully sharded) as ServingConfig takes them: (0, 16, False) without --enable-lora
    (vLLM then ignores --max-loras, --max-lora-rank and --fully-sharded-loras), else vLLM's defaults of 1 slot
    of rank 16 where not given."""
    if not args.enable_lora:
        return 0, 16, False
    return args.max_loras or 1, args.max_lora_rank or 16, bool(args.fully_sharded_loras)


_FP8_KV = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")  # 1 byte per element
_TWO_BYTE_KV = ("auto", "bfloat16", "float16")  # the 2-byte KV gpuopt's `auto` models


def human_readable_int(text: str) -> int:
    """A byte or token count as vLLM's parser reads it (vllm/utils/argparse_utils.py human_readable_int, the
    same in the 0.29.0-0.34.0 wheels): a plain integer, or a number with a suffix -- k/m/g/t decimal
    (10**3 ... 10**12, decimals allowed), K/M/G/T binary (2**10 ... 2**40, whole numbers only). ValueError
    names what is wrong."""
    value = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * float(10 ** (3 * "kmgt".index(suffix) + 3)))
        if "." in number:
            raise ValueError(f"decimals are not allowed with binary suffixes like {suffix}: did you mean "
                             f"{number}{suffix.lower()}?")
        return int(number) * (1 << (10 * "KMGT".index(suffix) + 10))
    if not re.fullmatch(r"[+-]?\d+", value):
        raise ValueError(f"{text!r} is not an integer or a number with a k/m/g/t or K/M/G/T suffix")
    return int(value)


def _typed(flag: str, name: str, raw: str, vllm_version: str | None) -> dict[str, object]:
    """The value of an honoured flag; empty for a valid value the models do not describe."""
    if name in _HUMAN_INT_FLAGS:
        try:
            count = human_readable_int(raw)
        except ValueError as exc:
            raise InputError(f"{flag}: --{name}: {exc}") from None
        if count <= 0:
            raise InputError(f"{flag}: --{name} must be positive (got {raw})")
        return {_HUMAN_INT_FLAGS[name]: count}
    if name in _INT_FLAGS:
        try:
            value = int(raw)
        except ValueError:
            raise InputError(f"{flag}: --{name} must be an integer (got {raw!r})") from None
        if value <= 0:
            raise InputError(f"{flag}: --{name} must be positive (got {value})")
        return {_INT_FLAGS[name]: value}
    if name in _FLOAT_FLAGS:
        try:
            number = float(raw)
        except ValueError:
            raise InputError(f"{flag}: --{name} must be a number (got {raw!r})") from None
        if not 0 < number <= 1:
            raise InputError(f"{flag}: --{name} must be in (0, 1] (got {raw})")
        return {_FLOAT_FLAGS[name]: number}
    if name == "kv-cache-dtype":
        valid = kv_cache_dtypes(vllm_version)
        if raw not in valid:
            release = f"vLLM {vllm_version}" if vllm_version else "any listed vLLM release"
            raise InputError(f"{flag}: --kv-cache-dtype {raw!r} is not a value of {release} "
                             f"(valid: {', '.join(valid)})")
        modelled = modelled_kv_cache_dtype(raw)
        return {} if modelled is None else {"kv_cache_dtype": modelled}
    if name == "performance-mode" and raw not in PERFORMANCE_MODES:  # which releases have it: memory.py
        raise InputError(f"{flag}: --performance-mode must be one of {', '.join(PERFORMANCE_MODES)} (got {raw!r})")
    return {_STR_FLAGS[name]: raw}


def performance_mode(value: str | None) -> PerformanceMode:
    """A parsed `--performance-mode` as the memory model takes it (not given: vLLM's default, balanced)."""
    return next((m for m in PERFORMANCE_MODES if m == value), "balanced")


def modelled_kv_cache_dtype(value: str) -> str | None:
    """A vLLM --kv-cache-dtype value as the memory model describes it: fp8 (1 byte), auto (2 bytes), or None
    (a format the models do not describe)."""
    if value in _FP8_KV:
        return "fp8"
    return "auto" if value in _TWO_BYTE_KV else None

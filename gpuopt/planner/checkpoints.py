"""Real quantized checkpoints a `vllm serve` command can name (gpuopt/data/quantized_checkpoints.csv).

A plan that picks INT4 or INT8 for a model published in BF16 cannot serve the BF16 repository with a
`--quantization` flag: AWQ/GPTQ/W8A8 weights are produced offline. The command must name a checkpoint that
exists. The table (physics/checkpoint_table.py) holds 173 cited checkpoints (copied from ../shared/data with
its notes); gpuopt's column `gpuopt_use` marks the ones not to offer (known-bad, test artifacts, unconfirmed
vLLM method).

Which checkpoint serves a plan's weight format, and why (the kernel must be the one the latency model
assumes, so no flag is ever added: vLLM detects the method from the checkpoint's config and picks its fast
kernel; an explicit `--quantization awq` forces the slow non-Marlin kernel):
    int4  W4A16 through Marlin: AWQ (awq_marlin), GPTQ 4-bit (gptq_marlin), compressed-tensors W4A16.
          Not bitsandbytes (its own slower kernel) nor NVFP4 (W4A4, Blackwell only: another format).
    int8  W8A8 INT8 (compressed-tensors): INT8 tensor cores, as modelled. Not GPTQ-Int8 (W8A16).
    fp8   FP8 checkpoints (compressed-tensors, block FP8, ModelOpt on Ada or newer). Without one, vLLM's
          own `--quantization fp8` quantises the BF16 weights at load time (the same W8A8 kernel).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gpuopt.physics import quant_sharding
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.checkpoint_table import NEEDS_NATIVE_FP8, TABLE, Checkpoint, caution, find, table
from gpuopt.physics.quantization import described
from gpuopt.physics.serving_config import ResolvedConfig, default_precision
from gpuopt.vocabulary import WeightFormat

__all__ = ["METHODS", "NEEDS_NATIVE_FP8", "TRUSTED_PUBLISHERS", "WHAT_TO_PRODUCE", "Checkpoint",
           "checkpoint_sharding_problem", "known_checkpoint", "named_checkpoint_problems", "table"]

# the table's `method` values that serve each weight format, in order of preference
METHODS: dict[str, tuple[str, ...]] = {"int4": ("awq", "gptq", "w4a16"), "int8": ("int8-w8a8",), "fp8": ("fp8",)}
TRUSTED_PUBLISHERS = ("RedHatAI", "neuralmagic", "nvidia", "hugging-quants", "Qwen", "meta-llama", "mistralai",
                      "google", "deepseek-ai", "openai", "zai-org", "moonshotai", "microsoft")


def cautions(served: Iterable[tuple[str | None, int]]) -> list[str]:
    """The table's word against each repository a plan serves, with the GPUs a replica of it has (a model given
    as `model:` or the checkpoint named for a precision), once each, sorted: solve and plan warn of the same
    rows (Checkpoint.caution)."""
    return sorted({note for repository, gpus in served if repository and (note := caution(repository, gpus))})


def known_checkpoint(base_model: str, precision: WeightFormat, fp8_native: bool, gpus: int,
                     shards: Callable[[Checkpoint], bool] = lambda _: True) -> Checkpoint | None:
    """The checkpoint to serve `base_model` in `precision` on `gpus` GPUs (with native FP8 or not), or None.
    `shards`: whether vLLM can split the checkpoint's weights over the replica's GPUs (a block-FP8 checkpoint's
    expert slices must hold whole scale blocks: checkpoint_sharding_problem). Preference: the model's own
    publisher, then the trusted publishers (vendors and the vLLM project's RedHatAI), then community uploads;
    then the method order of METHODS; then the table's order."""
    methods = METHODS.get(precision, ())
    org = base_model.split("/")[0]
    found = [c for c in table() if c.base_model == base_model and c.method in methods
             and (precision != "int4" or c.weight_bits == 4) and c.usable(fp8_native, gpus) and shards(c)]
    if not found:
        return None

    def rank(indexed: tuple[int, Checkpoint]) -> tuple[int, int, int]:
        i, c = indexed
        publisher = c.checkpoint.split("/")[0]
        trust = 0 if publisher == org else 1 if publisher in TRUSTED_PUBLISHERS else 2
        return trust, methods.index(c.method), i

    return min(enumerate(found), key=rank)[1]


def checkpoint_sharding_problem(arch: ModelArchitecture, row: Checkpoint, cfg: ResolvedConfig) -> str | None:
    """Why vLLM cannot shard the table's checkpoint `row` of `arch` over this replica's GPUs (None: it can, or
    the row does not say enough to tell). The plan checks the model it was given (serving_config.validate); a
    command that names another repository must check that one: zai-org/GLM-4.5-Air-FP8's 128 x 128 FP8
    blocks do not split its experts' 1,408 over TP 8, where the BF16 model quantised at load does."""
    found = described(row.method, row.weight_bits, row.vllm_quantization, row.group_size)
    if found is None or cfg.precision is None:
        return None
    view = arch.model_copy(update={"hf_id": row.checkpoint, "quantization": found[0]})
    return quant_sharding.tp_problem(view, cfg.precision, cfg.tensor_parallel, cfg.data_parallel,
                                     cfg.expert_parallel, cfg.vllm_version)


WHAT_TO_PRODUCE = {
    "int4": "an INT4 W4A16 checkpoint (AWQ with AutoAWQ, GPTQ, or llm-compressor's W4A16 scheme)",
    "int8": "an INT8 W8A8 checkpoint (llm-compressor's W8A8 scheme, compressed-tensors)",
}


UNQUANTIZED: tuple[WeightFormat, ...] = ("bf16", "fp16", "fp32")


def named_checkpoint_problems(arch: ModelArchitecture,
                              checkpoints: Mapping[WeightFormat, str]) -> list[tuple[WeightFormat, str]]:
    """What is wrong with the checkpoints a workload names per weight format (its `checkpoints` field), as far
    as gpuopt knows the repositories: the workload's own model, or a row of the table. A plan sizes the weights
    by the format and the `vllm serve` command loads the repository named, so a repository that holds
    other weights would be a plan that does not start (a BF16 repository named for int4: twice the memory
    planned) or serves another model. A repository gpuopt does not know is taken at its word."""
    problems: list[tuple[WeightFormat, str]] = []
    own = find(arch.hf_id)
    base = own.base_model if own is not None else arch.hf_id  # a quantized checkpoint keeps its base's model
    for precision, repo in checkpoints.items():
        if repo.lower() == arch.hf_id.lower():
            holds = default_precision(arch)  # the format the model's own repository holds
            if precision != holds and not (holds in UNQUANTIZED and precision in UNQUANTIZED):
                problems.append((precision, f"{repo} is the workload's model itself, which holds {holds} weights, "
                                            f"not {precision}: name an {precision} checkpoint of it, or leave "
                                            f"{precision} out of checkpoints for gpuopt to name a known one"))
            continue
        row = find(repo)
        if row is None:
            continue
        if row.base_model.lower() != base.lower():
            problems.append((precision, f"{repo} is a checkpoint of {row.base_model} in {TABLE}, not of {base}"))
        elif not _serves(row, precision):
            bits = f"{row.weight_bits}-bit " if row.weight_bits else ""
            planned = ", ".join(METHODS.get(precision, ())) or "the model's own repository"
            problems.append((precision, f"{repo} holds {bits}{row.method} weights in {TABLE}, not the {precision} "
                                        f"weights the plan sizes ({precision}: {planned})"))
    return problems


def _serves(row: Checkpoint, precision: WeightFormat) -> bool:
    """Whether a table row's weights are the plan's `precision` (int4 needs 4-bit weights: a 4/8 mix is not)."""
    if row.method == precision:
        return True
    return row.method in METHODS.get(precision, ()) and (precision != "int4" or row.weight_bits == 4)

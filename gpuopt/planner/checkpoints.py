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

from gpuopt.physics.checkpoint_table import NEEDS_NATIVE_FP8, Checkpoint, table
from gpuopt.vocabulary import WeightFormat

__all__ = ["METHODS", "NEEDS_NATIVE_FP8", "TRUSTED_PUBLISHERS", "WHAT_TO_PRODUCE", "Checkpoint", "known_checkpoint",
           "table"]

# the table's `method` values that serve each weight format, in order of preference
METHODS: dict[str, tuple[str, ...]] = {"int4": ("awq", "gptq", "w4a16"), "int8": ("int8-w8a8",), "fp8": ("fp8",)}
TRUSTED_PUBLISHERS = ("RedHatAI", "neuralmagic", "nvidia", "hugging-quants", "Qwen", "meta-llama", "mistralai",
                      "google", "deepseek-ai", "openai", "zai-org", "moonshotai", "microsoft")


def known_checkpoint(base_model: str, precision: WeightFormat, fp8_native: bool, gpus: int) -> Checkpoint | None:
    """The checkpoint to serve `base_model` in `precision` on `gpus` GPUs (with native FP8 or not), or None.
    Preference: the model's own publisher, then the trusted publishers (vendors and the vLLM project's
    RedHatAI), then community uploads; then the method order of METHODS; then the table's order."""
    methods = METHODS.get(precision, ())
    org = base_model.split("/")[0]
    found = [c for c in table() if c.base_model == base_model and c.method in methods
             and (precision != "int4" or c.weight_bits == 4) and c.usable(fp8_native, gpus)]
    if not found:
        return None

    def rank(indexed: tuple[int, Checkpoint]) -> tuple[int, int, int]:
        i, c = indexed
        publisher = c.checkpoint.split("/")[0]
        trust = 0 if publisher == org else 1 if publisher in TRUSTED_PUBLISHERS else 2
        return trust, methods.index(c.method), i

    return min(enumerate(found), key=rank)[1]


WHAT_TO_PRODUCE = {
    "int4": "an INT4 W4A16 checkpoint (AWQ with AutoAWQ, GPTQ, or llm-compressor's W4A16 scheme)",
    "int8": "an INT8 W8A8 checkpoint (llm-compressor's W8A8 scheme, compressed-tensors)",
}

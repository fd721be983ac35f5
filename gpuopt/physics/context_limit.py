"""The longest context vLLM accepts for a model (its `--max-model-len` ceiling).

vLLM derives it from the config (vllm/config/model.py `_get_and_verify_max_len`): max_position_embeddings,
scaled by rope_scaling's factor unless the rope type already counts the extension in
max_position_embeddings (llama3, longrope, su); yarn scales original_max_position_embeddings. A larger
`--max-model-len` is refused at start-up (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which vLLM warns gives
wrong outputs), so gpuopt refuses it too.

The registry has no rope_scaling column yet (its notes say e.g. "rope_scaling llama3 factor 8"): a model
without one gets max_position_embeddings, which is vLLM's limit for llama3-style and unscaled models. An
architecture object that carries `rope_scaling` (a config.json dict) is honoured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuopt.physics.architecture import ModelArchitecture

# rope types whose max_position_embeddings already includes the extension (vLLM leaves them unscaled)
UNSCALED_ROPE_TYPES = ("su", "longrope", "llama3")


def scaled_limit(max_position_embeddings: int, rope_scaling: Mapping[str, Any] | None) -> int:
    """vLLM's derived maximum length from max_position_embeddings and a config's rope_scaling dict."""
    if not rope_scaling:
        return max_position_embeddings
    rope_type = rope_scaling.get("rope_type", rope_scaling.get("type"))
    factor = rope_scaling.get("factor")
    if rope_type in UNSCALED_ROPE_TYPES or not isinstance(factor, int | float):
        return max_position_embeddings
    base = max_position_embeddings
    if rope_type == "yarn":
        base = int(rope_scaling.get("original_max_position_embeddings", base))
    return int(base * factor)


def model_max_len(arch: ModelArchitecture) -> int | None:
    """The model's context ceiling, None when the registry does not know max_position_embeddings."""
    if not arch.max_position_embeddings:
        return None
    rope = getattr(arch, "rope_scaling", None)
    return scaled_limit(arch.max_position_embeddings, rope if isinstance(rope, Mapping) else None)


def max_model_len_problem(arch: ModelArchitecture, max_model_len: int, field: str) -> str | None:
    """One line naming the model's limit when `max_model_len` exceeds it (vLLM would refuse to start)."""
    limit = model_max_len(arch)
    if limit is None or max_model_len <= limit:
        return None
    return (f"{field} {max_model_len:,} exceeds the {limit:,} tokens {arch.hf_id} supports "
            f"(max_position_embeddings{' with rope scaling' if limit != arch.max_position_embeddings else ''}); "
            f"vLLM refuses to start above it")

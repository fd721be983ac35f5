"""The longest context vLLM accepts for a model (its `--max-model-len` ceiling).

vLLM derives it from the config (vllm/config/model.py `_get_and_verify_max_len`, same in v0.19 and v0.28):
max_position_embeddings, times rope scaling's factor unless the rope type already counts the extension in
max_position_embeddings (llama3, longrope, su); a yarn entry scales original_max_position_embeddings instead
(DeepSeek-R1: 4096 x 40 = 163,840); Gemma 3 is never scaled (architecture._rope_fields drops it). A larger
`--max-model-len` is refused at start-up (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which vLLM warns gives
wrong outputs), so gpuopt refuses it too.

Registry models carry the rope scaling of gpuopt/data/model_rope.csv, models read from a config.json the
config's own `rope_scaling` / `rope_parameters`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuopt.physics.architecture import ModelArchitecture

UNSCALED_ROPE_TYPES = ("su", "longrope", "llama3")
"""Rope types whose max_position_embeddings already includes the extension (vLLM leaves them unscaled)."""


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
        base = int(rope_scaling.get("original_max_position_embeddings") or base)
    return int(base * factor)


def model_max_len(arch: ModelArchitecture) -> int | None:
    """The model's context ceiling, None when the registry does not know max_position_embeddings."""
    if not arch.max_position_embeddings:
        return None
    rope = {"rope_type": arch.rope_type, "factor": arch.rope_factor,
            "original_max_position_embeddings": arch.rope_original_max_position_embeddings}
    return scaled_limit(arch.max_position_embeddings, rope if arch.rope_type else None)


def max_model_len_problem(arch: ModelArchitecture, max_model_len: int, field: str) -> str | None:
    """One line naming the model's limit when `max_model_len` exceeds it (vLLM would refuse to start)."""
    limit = model_max_len(arch)
    if limit is None or max_model_len <= limit:
        return None
    how = (f"{arch.rope_type} rope scaling x{arch.rope_factor:g}"
           if limit != arch.max_position_embeddings and arch.rope_factor else "max_position_embeddings")
    return (f"{field} {max_model_len:,} exceeds the {limit:,} tokens {arch.hf_id} supports ({how}); "
            f"vLLM refuses to start above it")

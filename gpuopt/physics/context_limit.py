"""The longest context vLLM accepts for a model (its `--max-model-len` ceiling).

vLLM derives it from the config (vllm/config/model.py `_get_and_verify_max_len`, same in v0.19 and v0.28):
max_position_embeddings, times rope scaling's factor unless the rope type already counts the extension in
max_position_embeddings (llama3, longrope, su); a yarn entry scales original_max_position_embeddings instead
(DeepSeek-R1: 4096 x 40 = 163,840; without a factor, 1: the original length); a gemma3 model is never scaled
(its max_position_embeddings already is). max_position_embeddings is itself the smallest of the config's
length keys, or its model_max_length (architecture.vllm_length_limit).
A larger
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
    if rope_type in UNSCALED_ROPE_TYPES:
        return max_position_embeddings
    factor = rope_scaling.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, int | float):
        factor = 1.0  # vLLM: rp.get("factor", 1.0), and a null factor "falls back to 1.0"
    base = max_position_embeddings
    if rope_type == "yarn":
        base = int(rope_scaling.get("original_max_position_embeddings") or base)
    return int(base * factor)


def _rope(arch: ModelArchitecture) -> dict[str, Any] | None:
    if not arch.rope_type:
        return None
    return {"rope_type": arch.rope_type, "factor": arch.rope_factor,
            "original_max_position_embeddings": arch.rope_original_max_position_embeddings}


def model_max_len(arch: ModelArchitecture) -> int | None:
    """The model's context ceiling, None when the registry does not know max_position_embeddings."""
    if not arch.max_position_embeddings:
        return None
    if "gemma3" in (arch.model_type or ""):  # vLLM: "Gemma3's max_model_len (128K) is already scaled"
        return arch.max_position_embeddings
    return scaled_limit(arch.max_position_embeddings, _rope(arch))


def default_max_len(arch: ModelArchitecture) -> int | None:
    """The max_model_len vLLM starts with when none is given: the model's limit, except that LongRoPE models
    start at original_max_position_embeddings "to avoid performance degradation for shorter sequences"
    (same function, v0.19 and v0.28): Phi-3.5-mini serves 4,096 tokens unless asked for more."""
    if arch.rope_type in ("longrope", "su") and arch.rope_original_max_position_embeddings:
        return arch.rope_original_max_position_embeddings
    return model_max_len(arch)


def rope_cache_positions(arch: ModelArchitecture) -> int:
    """Positions of the cos/sin caches vLLM builds for the model (vllm/model_executor/layers/rotary_embedding,
    v0.28; each cache is positions x rotary_dim in the model dtype, counted in "Model loading took").

    linear scaling caches max_position x factor (Gemma 3's global rope: 131,072 x 8 = 1,048,576 positions,
    0.5 GiB at head_dim 256), yarn original x factor, longrope a short (original) and a long (max) cache,
    llama3 / dynamic / unscaled max_position; Gemma 3's sliding layers keep a second, unscaled cache.
    """
    max_pos = arch.max_position_embeddings or 0
    rope, factor = arch.rope_type, arch.rope_factor or 1.0
    original = arch.rope_original_max_position_embeddings or max_pos
    if rope == "linear":
        positions = int(max_pos * factor)
    elif rope == "yarn":
        positions = int(original * factor)
    elif rope in ("longrope", "su"):
        positions = max_pos + (arch.rope_original_max_position_embeddings or 0)
    else:
        positions = max_pos
    return positions + (max_pos if arch.rope_local_base_freq else 0)


def max_model_len_problem(arch: ModelArchitecture, max_model_len: int, field: str) -> str | None:
    """One line naming the model's limit when `max_model_len` exceeds it (vLLM would refuse to start);
    `field` ("--max-model-len") starts it, unless empty (the caller names the field)."""
    limit = model_max_len(arch)
    if limit is None or max_model_len <= limit:
        return None
    named = f"{field} " if field else ""
    return (f"{named}{max_model_len:,} exceeds the {limit:,} tokens {arch.hf_id} supports ({limit_basis(arch)}); "
            f"vLLM refuses to start above it")


def limit_basis(arch: ModelArchitecture) -> str:
    """What model_max_len comes from, as a user would look it up in config.json."""
    if model_max_len(arch) != arch.max_position_embeddings and arch.rope_factor:
        return f"{arch.rope_type} rope scaling x{arch.rope_factor:g}"
    return "max_position_embeddings"


def limit_advice(arch: ModelArchitecture) -> str:
    """What to do when gpuopt does not know a model's context limit: said by `fit` and by a plan.

    A registry row without it (no config in the cache): vLLM refuses a length above the checkpoint's own
    max_position_embeddings, so read the config. A config that was read and states none of vLLM's keys (a
    null max_position_embeddings): vLLM then takes --max-model-len as given and assumes 2,048 without it
    (config/model.py _get_and_verify_max_len, 0.28.0 wheel) -- asking for the config.json the user passed
    was the advice before (QA)."""
    if arch.source.startswith("config "):
        return ("its config.json states none of the keys vLLM reads it from (max_position_embeddings, seq_length, "
                "...), so vLLM takes --max-model-len as given (2,048 without it): check the length against the "
                "model card")
    return (f"vLLM refuses to start above the checkpoint's max_position_embeddings: put its config.json in the "
            f"Hugging Face cache (`hf download {arch.hf_id} config.json`) or pass the model's config.json to check "
            "it")

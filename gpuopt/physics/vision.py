"""The parameters of a vision tower, counted from the `vision_config` a multimodal checkpoint's config.json carries.

vLLM loads a multimodal model's encoder with its language model (unless `--language-model-only`), so its weights
come out of the KV cache. A registry row states the figure (`vision_params_b`, derived in gpuopt/data/models.csv
from the tower's shapes); a config read from a local path, the Hugging Face cache or the Hub states the shapes,
and this module counts them for the towers whose module layout is known:

- SigLIP (Gemma 3): `num_hidden_layers` pre-norm ViT blocks of width h with biased q/k/v/o, a plain GELU MLP of
  `intermediate_size` and two LayerNorms; a patch convolution with bias, one learned position per patch of
  `image_size`, a final LayerNorm; Gemma 3 adds its projector, an RMS norm of h and h x text hidden.
- Qwen2-VL / Qwen2.5-VL / Qwen3-VL / Qwen3.5 ViTs: `depth` blocks with fused biased qkv and proj, a merger that
  folds `spatial_merge_size`^2 patches (LayerNorm or RMS norm of h, then 4h -> 4h -> `out_hidden_size`, biased):
  Qwen2-VL: `embed_dim` wide, MLP `mlp_ratio` x, LayerNorms, an unbiased 3-D patch convolution;
  Qwen2.5-VL: a gated SiLU MLP of `intermediate_size`, RMS norms, an unbiased patch convolution;
  Qwen3-VL / Qwen3.5: a plain MLP, LayerNorms, a biased patch convolution, `num_position_embeddings` learned
  positions, and one more merger (LayerNorm of 4h) per `deepstack_visual_indexes` entry.
The module shapes are those of transformers' modeling files for each model type; checked against the registry's
figures derived the same way (gemma-3-4b-it 0.4169 B + projector, Qwen2.5-VL-7B 0.677 B: tests/test_vision.py).
Any other tower returns None: memory.estimate then warns that the encoder is not counted, rather than guessing.
"""

from __future__ import annotations

from typing import Any

QWEN_VIT_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")


def _int(cfg: dict[str, Any], *keys: str, default: int | None = None) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def _block(h: int, i: int, gated: bool, layer_norm: bool) -> int:
    """One ViT block: q/k/v/o (or fused qkv + proj) with biases, its MLP with biases, two norms."""
    attention = 4 * h * h + 4 * h
    mlp = (3 * h * i + 2 * i + h) if gated else (2 * h * i + i + h)
    norms = 2 * (2 * h if layer_norm else h)
    return attention + mlp + norms


def _siglip(v: dict[str, Any]) -> int | None:
    layers, h, i = _int(v, "num_hidden_layers"), _int(v, "hidden_size"), _int(v, "intermediate_size")
    patch, image = _int(v, "patch_size"), _int(v, "image_size")
    if None in (layers, h, i, patch, image):
        return None
    assert layers and h and i and patch and image
    channels = _int(v, "num_channels", default=3) or 3
    embeddings = channels * patch * patch * h + h + (image // patch) ** 2 * h
    return layers * _block(h, i, gated=False, layer_norm=True) + embeddings + 2 * h


def _qwen_vit(kind: str, v: dict[str, Any], text_hidden: int | None) -> int | None:
    depth = _int(v, "depth")
    if kind == "qwen2_vl":
        h = _int(v, "embed_dim")
        i = h * (_int(v, "mlp_ratio", default=4) or 4) if h else None
        out = _int(v, "hidden_size", default=text_hidden)
    else:
        h, i = _int(v, "hidden_size"), _int(v, "intermediate_size")
        out = _int(v, "out_hidden_size", default=text_hidden)
    patch = _int(v, "patch_size", default=14)
    if None in (depth, h, i, out, patch):
        return None
    assert depth and h and i and out and patch
    qwen3 = kind.startswith(("qwen3_vl", "qwen3_5"))
    layer_norm = kind != "qwen2_5_vl"
    channels = _int(v, "in_channels", "in_chans", default=3) or 3
    temporal = _int(v, "temporal_patch_size", default=2) or 2
    merge = _int(v, "spatial_merge_size", default=2) or 2
    wide = h * merge * merge
    blocks = depth * _block(h, i, gated=kind == "qwen2_5_vl", layer_norm=layer_norm)
    embeddings = channels * temporal * patch * patch * h + (h if qwen3 else 0)
    if qwen3:
        embeddings += (_int(v, "num_position_embeddings", default=0) or 0) * h

    def merger(norm_width: int) -> int:
        return (2 * norm_width if layer_norm else norm_width) + wide * wide + wide + wide * out + out

    deepstack = v.get("deepstack_visual_indexes")
    extra = len(deepstack) if qwen3 and isinstance(deepstack, list) else 0
    return blocks + embeddings + merger(h) + extra * merger(wide)


def vision_params(config: dict[str, Any]) -> int | None:
    """Parameters of the vision tower (and its projector into the language model) a config.json describes, or
    None when it has no `vision_config` or its tower is not one this module counts (module docstring)."""
    v = config.get("vision_config")
    if not isinstance(v, dict):
        return None
    kind = str(config.get("model_type") or "")
    text = config.get("text_config")
    text_hidden = _int(text if isinstance(text, dict) else config, "hidden_size")
    if kind == "gemma3":
        tower = _siglip(v)
        h = _int(v, "hidden_size")
        if tower is None or h is None or text_hidden is None:
            return None
        return tower + h + h * text_hidden  # mm_soft_emb_norm + mm_input_projection_weight
    if kind in QWEN_VIT_TYPES:
        return _qwen_vit(kind, v, text_hidden)
    return None

"""Vision towers counted from a config's vision_config (physics/vision.py), against figures derived by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import from_hf_dict, get_model
from gpuopt.physics.memory import GIB, estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.vision import vision_params

FIXTURES = Path(__file__).parent / "fixtures" / "model_configs"


def test_gemma3_siglip_tower_and_projector_match_the_registrys_derivation() -> None:
    # models.csv gemma-3-27b-it: 27 blocks x 1152, MLP 4304, patch 14, 896 px = 416,866,032, + projector
    # 1152 x 5376 + norm 1152 = 423,060,336. By hand: a block is 4 x 1152^2 + 4 x 1152 (q/k/v/o and biases)
    # + 2 x 1152 x 4304 + 4304 + 1152 (MLP and biases) + 4 x 1152 (two LayerNorms) = 15,239,504; x 27 =
    # 411,466,608; patch conv 3 x 14 x 14 x 1152 + 1152 = 678,528; 64^2 positions x 1152 = 4,718,592; post norm 2,304
    config = {"model_type": "gemma3", "text_config": {"hidden_size": 5376},
              "vision_config": {"model_type": "siglip_vision_model", "num_hidden_layers": 27, "hidden_size": 1152,
                                "intermediate_size": 4304, "patch_size": 14, "image_size": 896}}
    assert vision_params(config) == 411_466_608 + 678_528 + 4_718_592 + 2_304 + 1152 * 5376 + 1152
    assert vision_params(config) == pytest.approx(get_model("google/gemma-3-27b-it").vision_params_b * 1e9, rel=1e-3)


def test_qwen2_5_vl_gated_vit_matches_the_registry() -> None:
    # Qwen2.5-VL-7B: 32 blocks x 1280, gated MLP 3420, RMS norms: 4 x 1280^2 + 4 x 1280 + 3 x 1280 x 3420
    # + 2 x 3420 + 1280 + 2 x 1280 = 19,702,200 per block; unbiased patch conv 3 x 2 x 14 x 14 x 1280 = 1,505,280;
    # merger RMS norm 1280 + 5120 x 5120 + 5120 + 5120 x 3584 + 3584 = 44,574,464
    config = {"model_type": "qwen2_5_vl", "hidden_size": 3584,
              "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "out_hidden_size": 3584,
                                "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2}}
    assert vision_params(config) == 32 * 19_702_200 + 1_505_280 + 44_574_464
    assert vision_params(config) == pytest.approx(get_model("Qwen/Qwen2.5-VL-7B-Instruct").vision_params_b * 1e9,
                                                  rel=1e-3)


def test_qwen3_5_tower_from_the_real_config_is_counted_in_the_weights() -> None:
    raw = json.loads((FIXTURES / "Qwen__Qwen3.5-35B-A3B.json").read_text())
    # 27 blocks of 15,239,504 (plain MLP 4304, LayerNorms: the SigLIP block) = 411,466,608; biased patch conv
    # 3 x 2 x 16 x 16 x 1152 + 1152 = 1,770,624; 2,304 positions x 1152 = 2,654,208; merger LayerNorm 2,304 +
    # 4608 x 4608 + 4608 + 4608 x 2048 + 2048 = 30,679,808; no deepstack mergers
    tower = 411_466_608 + 1_770_624 + 2_654_208 + 30_679_808
    assert vision_params(raw) == tower
    arch = from_hf_dict(raw, name="Qwen/Qwen3.5-35B-A3B")
    assert arch.multimodal and arch.vision_params() == tower
    run = ServingConfig(max_model_len=8192, vllm_version="0.28")
    h200 = get_gpu("H200-141GB")
    with_tower = estimate(arch, h200, run)
    text_only = estimate(arch, h200, ServingConfig(max_model_len=8192, vllm_version="0.28", language_model_only=True))
    assert with_tower.ranks[0].weights_gib - text_only.ranks[0].weights_gib == pytest.approx(tower * 2 / GIB)
    assert not any("vision encoder size unknown" in w for w in with_tower.warnings)
    # the registry row says the same
    assert get_model("Qwen/Qwen3.5-35B-A3B").vision_params() == tower


def test_a_deepstack_tower_adds_one_merger_per_index() -> None:
    base = {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "out_hidden_size": 32, "patch_size": 16}
    plain = vision_params({"model_type": "qwen3_vl", "vision_config": base})
    deep = vision_params({"model_type": "qwen3_vl", "vision_config": {**base, "deepstack_visual_indexes": [0, 1]}})
    assert plain is not None and deep is not None
    wide = 64 * 4  # each deepstack merger: LayerNorm of 4h, then 4h -> 4h -> out with biases
    assert deep - plain == 2 * (2 * wide + wide * wide + wide + wide * 32 + 32)


def test_a_tower_gpuopt_does_not_count_is_said_not_guessed() -> None:
    raw = json.loads((FIXTURES / "Qwen__Qwen3.5-35B-A3B.json").read_text())
    raw = {**raw, "model_type": "some_new_vlm"}
    assert vision_params(raw) is None
    arch = from_hf_dict(raw, name="example/new-vlm")
    assert arch.multimodal and arch.vision_params_b is None
    est = estimate(arch, get_gpu("H200-141GB"), ServingConfig(max_model_len=8192, vllm_version="0.28"))
    assert any(w.startswith("vision encoder size unknown from its config") for w in est.warnings)


def test_the_dense_qwen3_5_counts_its_tower_so_a_32k_request_no_longer_fits_an_l4() -> None:
    # 0.456 B of BF16 tower (0.85 GiB) leaves 0.95 GiB of KV on an L4 at max_model_len 32,768: 58 pages of
    # 528 tokens, where one request needs 32768 / 528 -> 63 attention pages + 6 state pages
    est = estimate(get_model("Qwen/Qwen3.5-9B"), get_gpu("L4-24GB"), ServingConfig(max_model_len=32768))
    assert get_model("Qwen/Qwen3.5-9B").vision_params() == 456_010_480
    assert not est.fits

"""A config.json whose class vLLM builds as a hybrid or attention-free model with layers gpuopt does not model --
Mamba, Jamba, Bamba, Falcon-H1, GraniteMoeHybrid, Zamba2, Plamo2, MiniMax-Text-01, Kimi-Linear, LFM2 ... -- is one
`error:` line naming the class and its layers, exit 2 (architecture.unmodelled_class_problem, from
gpuopt/data/vllm_layer_kinds.csv, read from vLLM's wheels by tools/extract_vllm_layer_kinds.py).

Before, their attention aliases (num_attention_heads, num_heads, kv_lora_rank ...) matched and they were planned
as attention models with exit 0: KV for every layer, no state. The configs below are hand-written from the
fields transformers' config classes (and vLLM's, for MiniMax-Text-01 and Kimi-Linear) define, small where
the size does not matter.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.datafiles import data_csv
from gpuopt.errors import ConfigError
from gpuopt.physics.architecture import (
    MODELLED_STATE_CLASSES,
    from_hf_config,
    from_hf_dict,
    registry,
    vllm_layer_kinds,
)
from tests.conftest import run

FIXTURES = Path(__file__).parent / "fixtures" / "model_configs"

_BASE: dict[str, Any] = {"hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16,
                         "num_key_value_heads": 4, "vocab_size": 32000, "intermediate_size": 4096,
                         "torch_dtype": "bfloat16"}


def _cfg(cls: str, model_type: str, **fields: Any) -> dict[str, Any]:
    return {"architectures": [cls], "model_type": model_type, **_BASE, **fields}


REFUSED: list[tuple[dict[str, Any], str, str]] = [  # config, what vLLM builds, its layers
    # attention-free: no attention layer at all
    ({"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24,
      "vocab_size": 50280, "intermediate_size": 1536, "state_size": 16, "expand": 2, "conv_kernel": 4},
     "is an attention-free model in vLLM (Mamba layers only)", "Mamba layers"),
    ({"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64,
      "num_heads": 128, "head_dim": 64, "n_groups": 8, "state_size": 128, "expand": 2, "conv_kernel": 4,
      "vocab_size": 32768},
     "is an attention-free model in vLLM (Mamba-2 layers only)", "Mamba-2 layers"),
    ({"architectures": ["FalconMambaForCausalLM"], "model_type": "falcon_mamba", "hidden_size": 4096,
      "num_hidden_layers": 64, "vocab_size": 65024, "intermediate_size": 8192, "state_size": 16, "expand": 16,
      "conv_kernel": 4},
     "is an attention-free model in vLLM (Mamba layers only)", "Mamba layers"),
    # hybrids: Mamba / Mamba-2 next to attention
    (_cfg("JambaForCausalLM", "jamba", attn_layer_period=8, attn_layer_offset=4, expert_layer_period=2,
          expert_layer_offset=1, num_experts=16, num_experts_per_tok=2, mamba_d_state=16, mamba_d_conv=4,
          mamba_expand=2),
     "is a hybrid in vLLM (Mamba layers next to attention)", "Mamba layers"),
    (_cfg("BambaForCausalLM", "bamba", attn_layer_indices=[3, 7], mamba_n_heads=32, mamba_d_head=64,
          mamba_n_groups=1, mamba_d_state=128, mamba_d_conv=4, mamba_expand=2),
     "is a hybrid in vLLM (Mamba-2 layers next to attention)", "Mamba-2 layers"),
    (_cfg("FalconH1ForCausalLM", "falcon_h1", head_dim=64, mamba_d_ssm=2048, mamba_n_heads=32, mamba_d_head=64,
          mamba_n_groups=1, mamba_d_state=128, mamba_d_conv=4, mamba_expand=2),
     "is a hybrid in vLLM (Mamba-2 layers next to attention)", "Mamba-2 layers"),
    (_cfg("GraniteMoeHybridForCausalLM", "granitemoehybrid", num_local_experts=8, num_experts_per_tok=2,
          shared_intermediate_size=2048, layer_types=["mamba"] * 3 + ["attention"] + ["mamba"] * 3 + ["attention"],
          mamba_n_heads=32, mamba_d_head=64, mamba_n_groups=1, mamba_d_state=128, mamba_d_conv=4, mamba_expand=2),
     "is a hybrid in vLLM (Mamba-2 layers next to attention)", "Mamba-2 layers"),
    (_cfg("Zamba2ForCausalLM", "zamba2", mamba_d_state=64, mamba_headdim=64, mamba_ngroups=2, n_mamba_heads=32,
          hybrid_layer_ids=[3, 7], layers_block_type=["mamba"] * 3 + ["hybrid"] + ["mamba"] * 3 + ["hybrid"]),
     "is a hybrid in vLLM (Mamba-2 layers next to attention)", "Mamba-2 layers"),
    (_cfg("Plamo2ForCausalLM", "plamo2", hidden_size_per_head=64, mamba_d_state=64, mamba_d_conv=4,
          mamba_num_heads=32, mamba_step=2),
     "is a hybrid in vLLM (Mamba-2 layers next to attention)", "Mamba-2 layers"),
    # lightning attention (MiniMax-Text-01; MiniMax-M1 is the registry's, see below)
    (_cfg("MiniMaxText01ForCausalLM", "minimax", head_dim=64, num_local_experts=8, num_experts_per_tok=2,
          attn_type_list=[0, 0, 0, 1, 0, 0, 0, 1]),
     "is a hybrid in vLLM (lightning-attention layers next to attention)", "lightning-attention layers"),
    # Kimi Delta Attention next to MLA
    (_cfg("KimiLinearForCausalLM", "kimi_linear", kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
          v_head_dim=128, num_experts=16, num_experts_per_token=2, moe_intermediate_size=512,
          linear_attn_config={"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "num_heads": 16,
                              "head_dim": 128, "short_conv_kernel_size": 4}),
     "is a hybrid in vLLM (Kimi Delta Attention layers next to attention)", "Kimi Delta Attention layers"),
    # short convolutions (LFM2)
    (_cfg("Lfm2ForCausalLM", "lfm2", conv_L_cache=3, block_ff_dim=4096,
          layer_types=["conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv", "full_attention"]),
     "is a hybrid in vLLM (short-convolution layers next to attention)", "short-convolution layers"),
    # a wrapper that builds its language model through vLLM's registry: its module names no layer
    ({"architectures": ["Lfm2VlForConditionalGeneration"], "model_type": "lfm2_vl",
      "text_config": {"model_type": "lfm2", **_BASE}, "vision_config": {"hidden_size": 768}},
     "is a hybrid in vLLM (non-attention layers next to attention)", "non-attention layers"),
]


@pytest.mark.parametrize(("config", "shape", "layers"), REFUSED, ids=[c["architectures"][0] for c, _, _ in REFUSED])
def test_a_class_vllm_builds_with_unmodelled_layers_is_refused(config: dict[str, Any], shape: str,
                                                               layers: str) -> None:
    cls = config["architectures"][0]
    with pytest.raises(ConfigError) as err:
        from_hf_dict(config, name="m", where="m/config.json")
    assert err.value.args == (f"m/config.json: architectures '{cls}' {shape}; gpuopt does not model its {layers}, "
                              "so its KV cache and memory cannot be planned (the hybrids gpuopt models: Qwen3-Next, "
                              "Qwen3.5, Nemotron-H)",)


# Without their class, these read as attention models with exit 0 -- what every one of them was before:
# a KV cache for every layer and no state.
@pytest.mark.parametrize("cls", ["JambaForCausalLM", "BambaForCausalLM", "FalconH1ForCausalLM",
                                 "GraniteMoeHybridForCausalLM", "Zamba2ForCausalLM", "MiniMaxText01ForCausalLM",
                                 "KimiLinearForCausalLM", "Lfm2ForCausalLM"])
def test_without_the_class_they_would_read_as_attention(cls: str) -> None:
    config = next(c for c, _, _ in REFUSED if c["architectures"][0] == cls)
    arch = from_hf_dict({k: v for k, v in config.items() if k != "architectures"}, name="m")
    assert set(arch.layer_kinds()) <= {"full", "mla"} and arch.num_hidden_layers == config["num_hidden_layers"]


def test_the_cli_refuses_it_with_one_error_line_and_exit_2(tmp_path: Path) -> None:
    checkpoint = tmp_path / "jamba"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps(REFUSED[3][0]))
    result = run("models", "show", checkpoint)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"error: {checkpoint / 'config.json'}: architectures 'JambaForCausalLM' is a hybrid in "
                             "vLLM (Mamba layers next to attention); gpuopt does not model its Mamba layers, so its "
                             "KV cache and memory cannot be planned (the hybrids gpuopt models: Qwen3-Next, Qwen3.5, "
                             "Nemotron-H)\n")
    # and through fit, whose model is resolved the same way
    fit = run("fit", "--model", checkpoint, "--gpu", "H100-SXM-80GB")
    assert fit.exit_code == 2 and fit.stderr.count("error:") == 1 and "'JambaForCausalLM'" in fit.stderr


def test_a_class_the_registry_models_is_named_by_its_registry_id(tmp_path: Path) -> None:
    """MiniMax-M1's lightning attention is modelled in its registry row (curated layer pattern and state); its
    config.json is refused like the others, pointing at the registry id, and the registry model reads as before."""
    config = _cfg("MiniMaxM1ForCausalLM", "minimax_m1", head_dim=64, num_local_experts=8, num_experts_per_tok=2,
                  attn_type_list=[0, 0, 0, 1, 0, 0, 0, 1])
    with pytest.raises(ConfigError) as err:
        from_hf_dict(config, name="m", where="m/config.json")
    assert err.value.args == ("m/config.json: architectures 'MiniMaxM1ForCausalLM' is a hybrid in vLLM "
                              "(lightning-attention layers next to attention); gpuopt does not model its "
                              "lightning-attention layers from a config.json, only in its registry model "
                              "MiniMaxAI/MiniMax-M1-80k (name that id instead)",)
    shown = run("models", "show", "MiniMaxAI/MiniMax-M1-80k", "--json")
    assert shown.exit_code == 0
    data = json.loads(shown.stdout)
    assert data["hf_architecture"] == "MiniMaxM1ForCausalLM" and data["layer_kinds"] == {"linear": 70, "full": 10}


@pytest.mark.parametrize(("fixture", "kinds"), [
    ("Qwen__Qwen3.5-35B-A3B.json", {"linear": 30, "full": 10}),
    ("Qwen__Qwen3-Next-80B-A3B-Instruct.maxtext-transcription.json", {"linear": 36, "full": 12}),
    ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json", {"mamba": 23, "ffn": 23, "full": 6}),
    ("nvidia__Llama-3.1-70B-Instruct-FP8.json", {"full": 80}),
])
def test_the_hybrids_gpuopt_models_and_attention_models_still_load(fixture: str, kinds: dict[str, int]) -> None:
    arch = from_hf_config(FIXTURES / fixture)
    counts: dict[str, int] = {}
    for kind in arch.layer_kinds():
        counts[kind] = counts.get(kind, 0) + 1
    assert counts == kinds


def test_a_plain_llama_config_still_loads() -> None:
    arch = from_hf_dict(_cfg("LlamaForCausalLM", "llama"), name="m")
    assert arch.attention_kind == "gqa" and set(arch.layer_kinds()) == {"full"}


def test_the_data_file_keeps_its_provenance_and_names_the_modelled_classes_as_hybrids() -> None:
    rows = data_csv("vllm_layer_kinds.csv")
    assert rows and all(r["source"].startswith("vllm wheels ") and r["as_of"] for r in rows)
    assert {r["kind"] for r in rows} == {"hybrid", "attention-free"}
    releases = [k for k in rows[0] if k[0].isdigit()]
    assert "0.11.0" in releases and "0.34.0" in releases
    kinds = vllm_layer_kinds()
    # what gpuopt models is what vLLM calls hybrid, and every one of them is in the table
    assert all(kinds[c][0] == "hybrid" for c in MODELLED_STATE_CLASSES)
    assert kinds["NemotronHForCausalLM"] == ("hybrid", "Mamba-2")
    # of the registry's classes, only the modelled hybrids and MiniMax-M1 (curated) are in the table
    curated = {m.hf_architecture for m in registry().values() if m.hf_architecture in kinds}
    assert curated - MODELLED_STATE_CLASSES == {"MiniMaxM1ForCausalLM"}


def test_the_extractor_reads_the_interfaces_the_flags_and_the_layers(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from tools.extract_vllm_layer_kinds import main

    models = tmp_path / "vllm" / "model_executor" / "models"
    mamba = tmp_path / "vllm" / "model_executor" / "layers" / "mamba"
    models.mkdir(parents=True)
    mamba.mkdir(parents=True)
    (models / "interfaces.py").write_text("class IsHybrid:\n    is_hybrid = True\n"
                                          "class IsAttentionFree:\n    is_attention_free = True\n")
    (mamba / "abstract.py").write_text("class MambaBase:\n    pass\n")
    (mamba / "mamba_mixer2.py").write_text(
        "from .abstract import MambaBase\n"
        "class MambaMixer2(MambaBase):\n"
        "    @property\n    def mamba_type(self):\n        return MambaAttentionBackendEnum.MAMBA2\n"
        "class ShortConv(MambaBase):\n    def mamba_type(self):\n        return 'short_conv'\n")
    (models / "hybrid.py").write_text(
        "from vllm.model_executor.layers.mamba.mamba_mixer2 import MambaMixer2, ShortConv\n"
        "from .interfaces import IsHybrid, IsAttentionFree\n"
        "class Layer:\n    def __init__(self):\n        self.mixer = MambaMixer2()\n"
        "        if isinstance(self, ShortConv):\n            pass\n"
        "class HybridForCausalLM(nn.Module, IsHybrid):\n    pass\n"
        "class FlaggedForCausalLM(nn.Module):\n    is_hybrid: ClassVar[Literal[True]] = True\n"
        "class FreeForCausalLM(HybridForCausalLM, IsAttentionFree):\n    pass\n"
        "class PlainForCausalLM(nn.Module):\n    pass\n")
    (models / "wrapper.py").write_text("from .interfaces import IsHybrid\n"
                                       "class WrapperForConditionalGeneration(nn.Module, IsHybrid):\n    pass\n")
    (models / "registry.py").write_text(
        "_TEXT_GENERATION_MODELS = {\n"
        "    'HybridForCausalLM': ('hybrid', 'HybridForCausalLM'),\n"
        "    'FlaggedForCausalLM': ('hybrid', 'FlaggedForCausalLM'),\n"
        "    'FreeForCausalLM': ('hybrid', 'FreeForCausalLM'),\n"
        "    'PlainForCausalLM': ('hybrid', 'PlainForCausalLM'),\n"
        "}\n"
        "_MULTIMODAL_MODELS = {'WrapperForConditionalGeneration': ('wrapper', 'WrapperForConditionalGeneration')}\n"
        "_PREVIOUSLY_SUPPORTED_MODELS = {'GoneForCausalLM': '0.10.2'}\n")
    main(["--wheels", str(tmp_path / "wheels"), f"9.9.9={tmp_path}"])
    rows = {r["architecture"]: (r["kind"], r["layers"], r["9.9.9"])
            for r in csv.DictReader(capsys.readouterr().out.splitlines())}
    # the isinstance check builds no ShortConv: only the called MambaMixer2 counts
    assert rows == {"HybridForCausalLM": ("hybrid", "Mamba-2", "hybrid"),
                    "FlaggedForCausalLM": ("hybrid", "Mamba-2", "hybrid"),
                    "FreeForCausalLM": ("attention-free", "Mamba-2", "attention-free"),
                    "WrapperForConditionalGeneration": ("hybrid", "", "hybrid")}

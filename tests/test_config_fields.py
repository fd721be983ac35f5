"""A config.json that declares a hybrid, MLA, DSA or MoE model but lacks a field that kind of layer is built
from: one `error:` line naming the field and the file, exit 2 -- never another architecture
(architecture.DECLARED_KINDS).

What the missing fields used to become, by hand (KV bytes per token at TP 1, bf16):
- Qwen3.5-35B-A3B without text_config.linear_num_value_heads: plain GQA, all 40 layers attention,
  40 x 2 KV heads x 256 x 2 (K, V) x 2 B = 81,920 B instead of 10 full layers' 20,480 B, and no state;
- Nemotron-3-Nano without hybrid_override_pattern: 52 attention + MoE layers (69.4 B parameters),
  52 x 2 x 128 x 2 x 2 B = 53,248 B instead of its 6 attention layers' 6,144 B;
- DeepSeek-V3.2 without kv_lora_rank: MHA over 128 heads of 7168 / 128 = 56, 61 x 2 x 128 x 56 x 2 B =
  1,748,992 B instead of MLA's 61 x (512 + 64) x 2 B = 70,272 B; without index_head_dim: no indexer.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpuopt.errors import ConfigError
from gpuopt.physics.architecture import from_hf_config
from tests.conftest import LLAMA_8B_CONFIG, run

FIXTURES = Path(__file__).parent / "fixtures" / "model_configs"
QWEN35 = "Qwen__Qwen3.5-35B-A3B.json"
QWEN3_NEXT = "Qwen__Qwen3-Next-80B-A3B-Instruct.maxtext-transcription.json"
NEMOTRON = "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"
DSV32 = "deepseek-ai__DeepSeek-V3.2.json"
GLM52 = "zai-org__GLM-5.2.json"

GDN = "model_type 'qwen3_5_moe_text' declares Gated DeltaNet linear-attention layers"
MAMBA = "model_type 'nemotron_h' declares Mamba-2 hybrid layers (Nemotron-H)"
MLA = "model_type 'deepseek_v32' declares multi-head latent attention (MLA)"
DSA = "model_type 'deepseek_v32' declares a DeepSeek sparse attention (DSA) indexer"


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def _without(name: str, *keys: str, **changes: Any) -> dict[str, Any]:
    """The fixture config with `keys` dropped (from text_config when it has one) and `changes` set there."""
    cfg = copy.deepcopy(_fixture(name))
    target = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    for key in keys:
        del target[key]
    target.update(changes)
    return cfg


def _write(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def _problems(tmp_path: Path, cfg: dict[str, Any]) -> list[str]:
    path = _write(tmp_path, cfg)
    with pytest.raises(ConfigError) as info:
        from_hf_config(path)
    return [p.removeprefix(f"{path}: ") for p in info.value.problems]


def _kv_bytes(cfg: dict[str, Any], tmp_path: Path) -> int:
    arch = from_hf_config(_write(tmp_path, cfg))
    attention = sum(1 for k in arch.layer_kinds() if k in ("full", "mla"))
    return attention * arch.kv_values_per_token_per_layer(1) * 2


@pytest.mark.parametrize(("name", "dropped", "line"), [
    (QWEN35, "linear_num_value_heads",
     f"missing field 'text_config.linear_num_value_heads' (needed for the memory model: {GDN})"),
    (QWEN35, "linear_conv_kernel_dim",
     f"missing field 'text_config.linear_conv_kernel_dim' (needed for the memory model: {GDN})"),
    (NEMOTRON, "hybrid_override_pattern", f"missing field 'hybrid_override_pattern' (needed for the memory model: "
                                          f"{MAMBA})"),
    (NEMOTRON, "mamba_num_heads", f"missing field 'mamba_num_heads' (needed for the memory model: {MAMBA})"),
    (NEMOTRON, "ssm_state_size", f"missing field 'ssm_state_size' (needed for the memory model: {MAMBA})"),
    (NEMOTRON, "n_groups", f"missing field 'n_groups' (needed for the memory model: {MAMBA})"),
    (DSV32, "kv_lora_rank", f"missing field 'kv_lora_rank' (needed for the memory model: {MLA})"),
    (DSV32, "v_head_dim", f"missing field 'v_head_dim' (needed for the memory model: {MLA})"),
    (DSV32, "index_head_dim", f"missing field 'index_head_dim' (needed for the memory model: {DSA})"),
    (GLM52, "index_topk", "missing field 'index_topk' (needed for the memory model: model_type 'glm_moe_dsa' "
                          "declares a DeepSeek sparse attention (DSA) indexer)"),
    (DSV32, "n_routed_experts", "missing field 'num_local_experts' or 'num_experts' or 'n_routed_experts' or "
                                "'moe_num_experts' (needed for the memory model: model_type 'deepseek_v32' declares "
                                "routed experts (MoE))"),
])
def test_a_declared_kinds_missing_field_is_one_line_naming_it(tmp_path: Path, name: str, dropped: str,
                                                              line: str) -> None:
    assert _problems(tmp_path, _without(name, dropped)) == [line]


@pytest.mark.parametrize("name", [QWEN35, NEMOTRON, DSV32])
def test_models_show_and_fit_exit_2_with_the_one_line(tmp_path: Path, name: str) -> None:
    dropped = {QWEN35: "linear_num_value_heads", NEMOTRON: "hybrid_override_pattern", DSV32: "kv_lora_rank"}[name]
    path = _write(tmp_path, _without(name, dropped))
    for args in (("models", "show", tmp_path), ("fit", "--model", tmp_path, "--gpu", "H100-SXM-80GB"),
                 ("simulate", "--model-config", path, "--gpu", "H100-SXM-80GB", "--num-prompts", "5")):
        result = run(*args)
        assert result.exit_code == 2 and result.stdout == "", result.output
        [line] = result.stderr.splitlines()
        assert line.startswith(f"error: {path}: missing field '") and dropped in line, line


def test_complete_configs_keep_their_layers(tmp_path: Path) -> None:
    """The figures the missing fields used to distort, from the complete configs (module docstring)."""
    assert _kv_bytes(_fixture(QWEN35), tmp_path) == 10 * 2 * 256 * 2 * 2 == 20_480
    assert _kv_bytes(_fixture(NEMOTRON), tmp_path) == 6 * 2 * 128 * 2 * 2 == 6_144
    assert _kv_bytes(_fixture(DSV32), tmp_path) == 61 * (512 + 64) * 2 == 70_272
    assert from_hf_config(_write(tmp_path, _fixture(DSV32))).index_head_dim == 128


def test_sibling_fields_declare_the_kind_without_a_model_type(tmp_path: Path) -> None:
    """Qwen3.5's layers with no model_type nor class (as in a transcribed test fixture): the other linear_*
    fields declare them."""
    cfg = _without(QWEN35, "linear_num_value_heads", "model_type")
    del cfg["model_type"], cfg["architectures"]
    line = "missing field 'text_config.linear_num_value_heads' (needed for the memory model: {} declares Gated " \
           "DeltaNet linear-attention layers)"
    assert _problems(tmp_path, cfg) == [line.format("layer_types 'linear_attention'")]
    del cfg["text_config"]["layer_types"]  # full_attention_interval stays
    assert _problems(tmp_path, cfg) == [line.format("field 'linear_num_key_heads'")]


def test_layer_types_or_the_interval_either_will_do(tmp_path: Path) -> None:
    """Qwen3-Next's config gives full_attention_interval 4 and no layer_types (transformers derives them)."""
    arch = from_hf_config(_write(tmp_path, _fixture(QWEN3_NEXT)))
    assert arch.layer_kinds().count("full") == 48 // 4
    cfg = _without(QWEN3_NEXT, "full_attention_interval")
    assert _problems(tmp_path, cfg) == [
        "missing field 'layer_types' or 'full_attention_interval' (needed for the memory model: model_type "
        "'qwen3_next' declares Gated DeltaNet linear-attention layers)"]


@pytest.mark.parametrize(("value", "shown"), [("32", '"32"'), (0, "0"), (True, "true")])
def test_a_declared_field_must_be_a_positive_integer(tmp_path: Path, value: object, shown: str) -> None:
    """A string was read by pydantic as the number ("32" -> 32), 0 as no Gated DeltaNet at all."""
    cfg = _without(QWEN35, linear_num_value_heads=value)
    assert _problems(tmp_path, cfg) == [
        f"field 'text_config.linear_num_value_heads' must be a positive integer (got {shown}; {GDN})"]


def test_every_problem_of_one_config_comes_at_once(tmp_path: Path) -> None:
    """A Llama config with a block pattern of unknown kinds: the pattern, and each Mamba-2 field it declares."""
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072}
    why = "(needed for the memory model: field 'hybrid_override_pattern' declares Mamba-2 hybrid layers (Nemotron-H))"
    assert _problems(tmp_path, {**llama, "hybrid_override_pattern": "X" * 32}) == [
        "field 'hybrid_override_pattern' has unknown block kind(s) 'X' (known: M * - E)",
        *(f"missing field '{f}' {why}" for f in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
                                                 "conv_kernel"))]


def test_v_head_dim_is_needed_only_by_the_deepseek_family(tmp_path: Path) -> None:
    """MiniCPM3 states MLA's latent but no v_head_dim: vLLM builds its values hidden_size / heads wide, so a
    config with MLA fields and another model type still loads (v_head_dim 7168 / 128 = 56 here)."""
    cfg = _without(DSV32, "v_head_dim", "index_n_heads", "index_head_dim", "index_topk",
                   model_type="minicpm3", architectures=["MiniCPM3ForCausalLM"])
    arch = from_hf_config(_write(tmp_path, cfg))
    assert arch.is_mla and arch.v_head_dim is None and arch.attn_head_dim == 56 and not arch.indexer_params


@pytest.mark.parametrize("factor", [-4, 0, 0.5, 1e308, "8", True])
def test_a_rope_factor_no_model_has_is_one_error_at_the_field(tmp_path, factor):
    """QA: a factor of -4 gave "-131,072 tokens" of context at exit 0, 1e308 an overflow (exit 70)."""
    import json as _json

    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
              "max_position_embeddings": 8192, "rope_scaling": {"rope_type": "yarn", "factor": factor}}
    (tmp_path / "config.json").write_text(_json.dumps(config))
    from gpuopt.errors import ConfigError
    from gpuopt.physics.resolution import from_local_path

    with pytest.raises(ConfigError) as err:
        from_local_path(tmp_path)
    (line,) = err.value.problems
    assert "field 'rope_scaling.factor' must be a number from 1 to 1024" in line


@pytest.mark.parametrize("classes", ["LlamaForCausalLM", [], [3], None])
def test_architectures_must_be_a_list_of_class_names(tmp_path: Path, classes: Any) -> None:
    """QA: `architectures` as a string or an empty list was accepted; vLLM resolves the class from its first."""
    config = {**LLAMA_8B_CONFIG, "architectures": classes}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError) as info:
        from_hf_config(path)
    assert info.value.problems == (f"{path}: field 'architectures' must be a list of model class names, e.g. "
                                   f"[\"LlamaForCausalLM\"] (got {json.dumps(classes)})",)

"""`gpuopt models list|show`: full ids, anything resolvable, what was detected in a checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.physics.architecture import registry
from tests.conftest import LLAMA_8B_CONFIG, check_golden

FIXTURES = Path(__file__).parent / "fixtures" / "model_configs"


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, list(args))


def test_list_prints_every_id_in_full() -> None:
    result = run("models", "list")
    assert result.exit_code == 0
    for model_id in registry():
        assert model_id in result.output, model_id
    assert "…" not in result.output


def test_show_a_quantized_local_checkpoint_golden(tmp_path: Path) -> None:
    checkpoint = tmp_path / "Nemotron-3-Nano-NVFP4"
    checkpoint.mkdir()
    shutil.copy(FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.json", checkpoint / "config.json")
    shutil.copy(FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.hf_quant_config.json",
                checkpoint / "hf_quant_config.json")
    result = run("models", "show", str(checkpoint))
    assert result.exit_code == 0, result.output
    check_golden("models_show_nemotron_nvfp4.txt", result.output.replace(str(tmp_path), "<tmp>"))
    data = json.loads(run("models", "show", str(checkpoint), "--json").output)
    assert data["quantization"]["scheme"] == "nvfp4"
    assert data["kernels"]["Blackwell sm100"]["activation_bits"] == 4
    assert data["layer_kinds"] == {"mamba": 23, "ffn": 23, "full": 6}


def test_show_registry_hybrid() -> None:
    data = json.loads(run("models", "show", "Qwen/Qwen3.5-35B-A3B", "--json").output)
    assert data["kv_bytes_per_token"]["auto"] == 10 * 2 * 2 * 256 * 2
    assert data["state_bytes_per_sequence"] == 30 * (3 * 8192 * 2 + 32 * 128 * 128 * 4)


def test_show_names_sparse_attention() -> None:
    data = json.loads(run("models", "show", "deepseek-ai/DeepSeek-V3.2", "--json").output)
    by_gpu = data["sparse_attention"].pop("kv_bytes_per_token_by_gpu")
    assert data["sparse_attention"] == {"index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048,
                                        "indexer_layers": 61}
    # vLLM 0.33's sparse MLA backends: FlashMLA on Hopper (fp8 -> fp8_ds_mla, 656 B), FlashInfer on sm100 (plain
    # fp8, 576 B), FlashInfer SM120 (fp8_ds_mla even for auto), none below Hopper
    assert by_gpu["Hopper sm90"] == {"auto": 61 * (576 * 2 + 132), "fp8": 61 * (656 + 132)}
    assert by_gpu["Blackwell sm100"] == {"auto": 61 * (576 * 2 + 132), "fp8": 61 * (576 + 132)}
    assert by_gpu["Blackwell RTX sm120"] == {"auto": 61 * (656 + 132), "fp8": 61 * (656 + 132)}
    assert all("no attention backend starts" in str(by_gpu[g]) for g in ("Turing sm75", "Ampere sm80", "Ada sm89"))
    # 61 layers x (576 latent + rope values x 2 B + 132 B of index keys); fp8: the fp8_ds_mla layout, 512 fp8
    # values + 4 fp32 scales + 64 bf16 rope = 656 B, + 132
    assert data["kv_bytes_per_token"] == {"auto": 61 * (576 * 2 + 132), "fp8": 61 * (656 + 132)}
    assert json.loads(run("models", "show", "deepseek-ai/DeepSeek-V3", "--json").output)["sparse_attention"] is None
    assert "attention to the top 2,048 tokens" in run("models", "show", "zai-org/GLM-5").output
    glm52 = run("models", "show", "zai-org/GLM-5.2").output
    assert "on 21 of 78 layers in vLLM 0.33 (IndexCache: the others reuse an earlier top-k)" in glm52
    assert "KV cache per token (TP=1): auto 92,628 B, fp8 53,940 B" in glm52  # 78 x 656 + 21 x 132
    # 78 x 576 + 21 x 132 on sm100; the text names the GPUs with no backend
    assert "Blackwell sm100 auto 92,628 B, fp8 47,700 B" in glm52
    assert "no backend on Turing sm75, Ampere sm80, Ada sm89" in glm52


def test_show_says_when_a_checkpoint_was_described_by_the_known_checkpoint_table():
    text = CliRunner().invoke(cli, ["models", "show", "Qwen/Qwen3-14B-AWQ"])
    assert text.exit_code == 0, text.output
    assert "model: Qwen/Qwen3-14B-AWQ" in text.stdout
    said = "resolved: resolved offline from gpuopt's table of known quantized checkpoints: Qwen/Qwen3-14B's"
    assert said in text.stdout
    data = json.loads(CliRunner().invoke(cli, ["models", "show", "Qwen/Qwen3-14B-AWQ", "--json"]).stdout)
    assert data["quantization"]["method"] == "awq" and data["resolved_offline"].startswith("resolved offline")
    assert json.loads(CliRunner().invoke(cli, ["models", "show", "Qwen/Qwen3-14B", "--json"]).stdout)[
        "resolved_offline"] is None


def test_checkpoints_lists_the_known_ones_and_which_resolve_offline():
    data = json.loads(run("models", "checkpoints", "Qwen/Qwen3-32B", "--json").stdout)
    by_id = {r["checkpoint"]: r for r in data}
    assert by_id["Qwen/Qwen3-32B-AWQ"]["resolves_offline"] and by_id["Qwen/Qwen3-32B-AWQ"]["plans_may_name_it"]
    assert all(r["base_model"] == "Qwen/Qwen3-32B" for r in data)
    everything = json.loads(run("models", "checkpoints", "--json").stdout)
    assert len(everything) == 173
    # a row whose vLLM method is not confirmed is listed but does not resolve offline
    unconfirmed = [r for r in everything if r["vllm_quantization"] is None]
    assert unconfirmed and not any(r["resolves_offline"] for r in unconfirmed)
    missing = run("models", "checkpoints", "acme/nothing")
    assert missing.exit_code == 2 and missing.stderr.startswith("error: no known quantized checkpoint")
    # a registry model without a known checkpoint is an empty answer, not bad input (QA: GLM-5 was exit 2)
    glm = run("models", "checkpoints", "zai-org/GLM-5", "--json")
    assert glm.exit_code == 0 and json.loads(glm.stdout) == [] and "note: no known quantized checkpoint" in glm.stderr
    # a checkpoint's own id points to its base
    own = run("models", "checkpoints", "Qwen/Qwen3-32B-AWQ")
    assert own.exit_code == 2 and "`gpuopt models checkpoints Qwen/Qwen3-32B`" in own.stderr


LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
            "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("change", "field"), [
    ({"num_key_value_heads": 0}, "num_key_value_heads"),  # was ZeroDivisionError in fit (exit 70)
    ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 0]}}, "weight_block_size"),
    ({"quantization_config": {"quant_method": "awq", "bits": "four", "group_size": 128}}, "bits"),
    # fields vLLM's config classes read with get_from_keys: without them its start-up stops (QA: planned on a
    # default, with a command that could not start)
    ({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}, "zero_point"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}, "desc_act"),
    ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, "activation_scheme"),
    ({"hybrid_override_pattern": "X" * 32, "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128,
      "n_groups": 8, "conv_kernel": 4}, "hybrid_override_pattern"),  # was KeyError (the Mamba-2 fields it needs given)
    # QA: read as an unquantized bf16 model, a rope scaling ignored, a dtype read as bf16; vLLM refuses each
    ({"quantization_config": {}}, "quantization_config"),
    ({"rope_scaling": "yarn"}, "rope_scaling"),
    ({"torch_dtype": "float7"}, "torch_dtype"),
])
def test_fit_and_show_on_a_bad_config_print_one_error_line_and_exit_2(tmp_path: Path, change: dict[str, object],
                                                                      field: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA_8B, **change}))
    for args in (("models", "show", str(tmp_path)), ("fit", "--model", str(tmp_path), "--gpu", "H100-SXM-80GB")):
        result = run(*args)
        assert result.exit_code == 2 and result.stdout == "", result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {tmp_path / 'config.json'}"), lines
        assert f"field '{field}'" in lines[0]


def test_a_table_checkpoint_that_cannot_resolve_offline_says_why_not_that_it_is_unknown():
    """meta-llama/Llama-3.1-405B-Instruct-FP8 is a row of the table (FBGEMM FP8, which gpuopt does not size without
    the checkpoint's config) and cognitivecomputations/DeepSeek-V3-0324-AWQ's base is not in the registry: offline
    and not cached, the error says so instead of "not in ... the table of known quantized checkpoints"."""
    fbgemm = run("models", "show", "meta-llama/Llama-3.1-405B-Instruct-FP8")
    assert fbgemm.exit_code == 2
    assert fbgemm.stderr.startswith("error: model 'meta-llama/Llama-3.1-405B-Instruct-FP8' is in gpuopt's table of "
                                    "known quantized checkpoints, but gpuopt cannot size fp8 weights read by vLLM's "
                                    "fbgemm_fp8 without the checkpoint's config")
    assert "`hf download meta-llama/Llama-3.1-405B-Instruct-FP8 config.json`" in fbgemm.stderr
    base = run("models", "show", "cognitivecomputations/DeepSeek-V3-0324-AWQ")
    assert base.exit_code == 2 and "its base model deepseek-ai/DeepSeek-V3-0324 is not in the registry" in base.stderr
    assert len(base.stderr.strip().splitlines()) == 1


def test_a_path_that_does_not_exist_is_named_as_a_path(tmp_path):
    missing = tmp_path / "nowhere"
    result = run("models", "show", str(missing))
    assert result.exit_code == 2
    assert result.stderr == (f"error: model '{missing}' is not in the registry and no such file or directory "
                             "exists: pass a checkpoint directory or config.json that exists, or a registry or "
                             "Hugging Face id\n")
    assert "no such file" in run("models", "show", "./x/config.json").stderr
    assert "unknown model 'llama-3.1-8b'" in run("models", "show", "llama-3.1-8b").stderr  # a name, not a path


def test_show_says_what_fit_counts_for_a_modelopt_fp8_kv_cache(tmp_path: Path) -> None:
    """Nemotron-3-Nano NVFP4 quantises its KV cache to FP8 (kv_cache_quant_algo): `--kv-cache-dtype auto` runs
    fp8 from vLLM 0.14, so `fit` counts 3,072 B a token; `models show` printed auto 6,144 (QA). 6 attention
    layers x 2 x 2 KV heads x 128 x 1 B = 3,072."""
    folder = tmp_path / "nemo"
    folder.mkdir()
    shutil.copy(FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.json", folder / "config.json")
    shutil.copy(FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.hf_quant_config.json",
                folder / "hf_quant_config.json")
    kv = json.loads(run("models", "show", str(folder), "--json").stdout)["kv_bytes_per_token"]
    assert kv == {"auto": 3072, "fp8": 3072}


def test_show_describes_mla_by_its_latent_and_warns_of_a_known_bad_checkpoint() -> None:
    r1 = run("models", "show", "deepseek-ai/DeepSeek-R1")
    # 512 latent + 64 rope values a token in each of 61 layers, 2 B: 70,272 B
    assert "KV: one latent of 512 + 64 a token (MLA)" in r1.stdout and "KV heads" not in r1.stdout
    assert "auto 70,272 B" in r1.stdout
    bad = run("models", "show", "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4")
    assert bad.exit_code == 0
    assert bad.stderr.startswith("warning: Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4 is marked avoid")
    assert "warning" not in bad.stdout


def test_show_prints_the_head_dim_it_uses_when_the_config_gives_none(tmp_path):
    """QA: `head_dim -` where the memory model used hidden / heads = 128."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG))
    result = CliRunner().invoke(cli, ["models", "show", str(folder)])
    assert result.exit_code == 0, result.output
    assert "KV heads 8, head_dim 128 (hidden / heads: the config gives none)" in result.stdout

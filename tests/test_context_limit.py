"""The model's context limit with rope scaling, as vLLM derives it (config/model.py `_get_and_verify_max_len`):
registry models from gpuopt/data/model_rope.csv, resolved models from their config.json."""

from __future__ import annotations

import csv
import json
from importlib import resources
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.cli.main import cli
from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import from_hf_dict, get_model, registry
from gpuopt.physics.context_limit import max_model_len_problem, model_max_len, rope_cache_positions
from gpuopt.physics.memory import suggest_fixes
from gpuopt.physics.serving_config import ServingConfig, resolve
from gpuopt.physics.weights import weights_bytes

FIXTURES = Path(__file__).parent / "fixtures" / "model_configs"


def yarn_qwen(tmp_path: Path) -> Path:
    """Qwen3-32B-FP8's real config with the YaRN block its model card documents for 131,072 tokens
    (factor 4 over the 32,768 native positions; max_position_embeddings stays 40,960)."""
    cfg = json.loads((FIXTURES / "Qwen__Qwen3-32B-FP8.json").read_text())
    assert cfg["max_position_embeddings"] == 40960 and cfg["rope_scaling"] is None
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_every_rope_row_names_a_registry_model_and_a_source() -> None:
    text = resources.files("gpuopt").joinpath("data/model_rope.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(text.splitlines()))
    assert rows and all(r["hf_id"] in registry() and r["source"] for r in rows)


def test_registry_limits_follow_vllm() -> None:
    # yarn scales the original length: 4096 x 40 = 163,840 (= max_position_embeddings for DeepSeek-R1)
    assert model_max_len(get_model("deepseek-ai/DeepSeek-R1")) == 4096 * 40
    # dynamic NTK x2 over 32,768 positions: vLLM accepts 65,536
    assert model_max_len(get_model("internlm/internlm2_5-7b-chat")) == 65536
    # llama3 already counts the extension in max_position_embeddings
    assert model_max_len(get_model("meta-llama/Llama-3.1-8B-Instruct")) == 131072
    # gemma-3's linear x8 is already in its 131,072 (vLLM skips gemma3 models)
    gemma = get_model("google/gemma-3-4b-it")
    assert (gemma.model_type, gemma.rope_type, gemma.rope_factor) == ("gemma3", "linear", 8.0)
    assert model_max_len(gemma) == 131072


def test_yarn_config_is_read_and_scales_the_limit(tmp_path: Path) -> None:
    arch = from_hf_dict(json.loads((yarn_qwen(tmp_path) / "config.json").read_text()), name="qwen-yarn")
    assert (arch.rope_type, arch.rope_factor, arch.rope_original_max_position_embeddings) == ("yarn", 4.0, 32768)
    assert model_max_len(arch) == 131072
    assert max_model_len_problem(arch, 131072, "--max-model-len") is None
    assert max_model_len_problem(arch, 131073, "--max-model-len") == (
        "--max-model-len 131,073 exceeds the 131,072 tokens qwen-yarn supports (yarn rope scaling x4); "
        "vLLM refuses to start above it")
    # vLLM's default max_model_len is the scaled limit, not max_position_embeddings
    resolved, _ = resolve(arch, get_gpu("H100-SXM-80GB"), ServingConfig())
    assert resolved.max_model_len == 131072


def test_gemma3_and_transformers_v5_rope_parameters() -> None:
    base = {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "vocab_size": 1000,
            "intermediate_size": 512, "max_position_embeddings": 8192}
    gemma = from_hf_dict({**base, "model_type": "gemma3_text",
                          "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, name="g")
    assert gemma.rope_type == "linear" and model_max_len(gemma) == 8192
    nested = from_hf_dict({**base, "rope_parameters": {
        "full_attention": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4096},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000}}}, name="n")
    assert model_max_len(nested) == 8192  # 4096 x 2
    flat_default = from_hf_dict({**base, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}, name="d")
    assert flat_default.rope_type is None and model_max_len(flat_default) == 8192
    linear = from_hf_dict({**base, "rope_scaling": {"type": "linear", "factor": 2.0}}, name="l")
    assert model_max_len(linear) == 16384
    # Phi-3.5's config keeps original_max_position_embeddings at the top level, next to a longrope block
    phi = from_hf_dict({**base, "original_max_position_embeddings": 4096,
                        "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}}, name="p")
    assert (phi.rope_type, phi.rope_original_max_position_embeddings, model_max_len(phi)) == ("longrope", 4096, 8192)


def test_fit_accepts_the_scaled_length_and_refuses_above_it(tmp_path: Path) -> None:
    model = str(yarn_qwen(tmp_path))
    ok = CliRunner().invoke(cli, ["fit", "--model", model, "--gpu", "H100-SXM-80GB", "--max-model-len", "131072"])
    assert ok.exit_code in (0, 1) and "error:" not in ok.output  # 0 fits, 1 does not fit: never refused
    bad = CliRunner().invoke(cli, ["fit", "--model", model, "--gpu", "H100-SXM-80GB", "--max-model-len", "131073"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    errors = [line for line in bad.output.splitlines() if line.startswith("error:")]
    assert errors == ["error: --max-model-len 131,073 exceeds the 131,072 tokens "
                      f"{get_arch_name(model)} supports (yarn rope scaling x4); vLLM refuses to start above it"]


def get_arch_name(model: str) -> str:
    from gpuopt.physics.resolution import resolve_model
    return resolve_model(model).hf_id


def test_a_workload_above_the_scaled_limit_is_exit_2(tmp_path: Path) -> None:
    model = yarn_qwen(tmp_path / "m")
    workload = tmp_path / "w.yaml"
    workload.write_text(f"""schema_version: 1
workloads:
  - name: long
    model: {model}
    requests_per_second: 1
    input_tokens: 1000
    output_tokens: 200
    max_model_len: 140000
""")
    result = CliRunner().invoke(cli, ["solve", str(workload)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    # located at the field's YAML line (line 8 of the file above)
    assert result.stderr.startswith(f"error: {workload}:8: workloads.0.max_model_len: 140,000 exceeds the 131,072 "
                                    "tokens")


def test_requests_longer_than_the_model_are_exit_2_without_max_model_len(tmp_path: Path) -> None:
    """Without max_model_len the plan picks one at least the longest request: above the model's limit that is a
    length vLLM refuses, so the request itself is the error, at its field (the mean's, and each histogram bin's)."""
    workload = tmp_path / "w.yaml"
    workload.write_text("""schema_version: 1
workloads:
  - name: short-context
    model: microsoft/Phi-3-mini-4k-instruct
    requests_per_second: 1
    input_tokens: 2950
    output_tokens: 200
    lengths:
      histogram:
        - {input_tokens: 2000, output_tokens: 100, share: 0.5}
        - {input_tokens: 3900, output_tokens: 300, share: 0.5}
""")
    result = CliRunner().invoke(cli, ["solve", str(workload)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    # the mean 2,950 + 200 fits the 4,096 tokens; the second bin's 3,900 + 300 = 4,200 does not (line 11)
    assert result.stderr.splitlines() == [
        f"error: {workload}:11: workloads.0.lengths.histogram.1: input_tokens + output_tokens = 4,200 exceeds the "
        "4,096 tokens of context microsoft/Phi-3-mini-4k-instruct supports (max_position_embeddings): vLLM cannot "
        "serve such a request; shorten it or serve a model with a longer context (workload short-context)"]
    # without a histogram: the mean request, at input_tokens (line 6)
    mean_only = workload.read_text().split("    lengths:")[0]
    workload.write_text(mean_only.replace("input_tokens: 2950", "input_tokens: 4000"))
    result = CliRunner().invoke(cli, ["solve", str(workload)])
    assert result.exit_code == 2
    assert [line.split(": ")[:3] for line in result.stderr.splitlines()] == [
        ["error", f"{workload}:6", "workloads.0.input_tokens"]]
    assert "= 4,200 exceeds the 4,096 tokens" in result.stderr


def test_fit_suggestions_may_use_the_scaled_length_but_never_exceed_it(tmp_path: Path) -> None:
    arch = from_hf_dict(json.loads((yarn_qwen(tmp_path) / "config.json").read_text()), name="qwen-yarn")
    gpu = get_gpu("H100-SXM-80GB")
    # FP8 weights 32.4 GiB of a 63.4 GiB budget (gmu 0.80): about 117k tokens of KV at 256 KiB per token,
    # short of one 131,072-token request, above the unscaled 40,960
    resolved, profile = resolve(arch, gpu, ServingConfig(max_model_len=131072, gpu_memory_utilization=0.80))
    lengths = [int(f.split()[1]) for f in suggest_fixes(arch, gpu, resolved, profile)
               if f.startswith("--max-model-len")]
    assert len(lengths) == 1 and 40960 < lengths[0] <= 131072


def test_longrope_models_start_at_their_original_length() -> None:
    phi = get_model("microsoft/Phi-3.5-mini-instruct")
    resolved, _ = resolve(phi, get_gpu("L4-24GB"), ServingConfig())
    assert resolved.max_model_len == 4096  # vLLM's default for LongRoPE
    assert model_max_len(phi) == 131072  # but it accepts up to max_position_embeddings
    assert max_model_len_problem(phi, 131072, "--max-model-len") is None


def test_rope_caches_count_in_the_weights_as_vllm_builds_them() -> None:
    gemma = get_model("google/gemma-3-4b-it")
    # global rope linear x8: 131,072 x 8 positions; the sliding layers' own rope: 131,072 more
    assert rope_cache_positions(gemma) == 131072 * 8 + 131072
    plain = gemma.model_copy(update={"rope_type": None, "rope_factor": None, "rope_local_base_freq": None})
    assert rope_cache_positions(plain) == 131072
    layers = range(gemma.num_hidden_layers)
    extra = weights_bytes(gemma, "bf16", 1, layers, True, True) - weights_bytes(plain, "bf16", 1, layers, True, True)
    assert extra == (131072 * 8 + 131072 - 131072) * 256 * 2  # x rotary_dim 256 x 2 B = 0.5 GiB
    # yarn caches original x factor (= max_position_embeddings for DeepSeek-R1), longrope short + long
    assert rope_cache_positions(get_model("deepseek-ai/DeepSeek-R1")) == 4096 * 40
    assert rope_cache_positions(get_model("microsoft/Phi-3.5-mini-instruct")) == 131072 + 4096
    assert rope_cache_positions(get_model("internlm/internlm2_5-7b-chat")) == 32768  # dynamic: unscaled cache


@settings(max_examples=40, deadline=None, derandomize=True)
@given(max_pos=st.integers(1024, 1 << 20), factor=st.sampled_from([1.0, 2.0, 4.0, 8.0, 32.0]),
       rope_type=st.sampled_from([None, "linear", "dynamic", "yarn", "llama3", "longrope"]),
       asked=st.integers(1, 1 << 24))
def test_a_length_is_refused_exactly_above_the_limit(max_pos: int, factor: float, rope_type: str | None,
                                                      asked: int) -> None:
    arch = get_model("Qwen/Qwen2.5-7B-Instruct").model_copy(update={
        "max_position_embeddings": max_pos, "rope_type": rope_type, "rope_factor": factor if rope_type else None,
        "rope_original_max_position_embeddings": max_pos // 4 if rope_type == "yarn" else None})
    limit = model_max_len(arch)
    expected = {None: max_pos, "llama3": max_pos, "longrope": max_pos, "yarn": int(max_pos // 4 * factor)}.get(
        rope_type, int(max_pos * factor))
    assert limit == expected
    assert (max_model_len_problem(arch, asked, "--max-model-len") is None) == (asked <= expected)


def test_a_model_whose_limit_gpuopt_does_not_know_says_its_length_is_unchecked() -> None:
    """QwQ-32B's registry row has no max_position_embeddings (its config was not read): a length is accepted as
    given, and fit says it could not check it rather than approving it silently."""
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    result = CliRunner().invoke(cli, ["fit", "--model", "Qwen/QwQ-32B", "--gpu", "H200-141GB", "--max-model-len",
                                      "1000000"])
    assert "Qwen/QwQ-32B's context limit is not in gpuopt's registry" in result.stderr
    assert "max_model_len 1,000,000 is not checked against it" in result.stderr
    known = CliRunner().invoke(cli, ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200-141GB",
                                     "--max-model-len", "8192"])
    assert "context limit is not in" not in known.stderr


def test_a_config_that_states_no_limit_is_not_sent_for_its_own_config_again(tmp_path: Path) -> None:
    """QA: a config.json with `"max_position_embeddings": null` was told to `hf download` the config it came
    from. vLLM takes --max-model-len as given when the config states none of its keys (2,048 without it:
    config/model.py _get_and_verify_max_len, 0.28.0 wheel), so the advice says that."""
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
              "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": None,
              "torch_dtype": "bfloat16"}
    folder = tmp_path / "nolimit"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(cli, ["fit", "--model", str(folder), "--gpu", "H100-SXM-80GB", "--max-model-len",
                                      "4096"])
    assert result.exit_code == 0, result.output
    assert "vLLM takes --max-model-len as given (2,048 without it)" in result.stderr
    assert "hf download" not in result.stderr

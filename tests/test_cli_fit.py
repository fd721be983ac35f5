import json

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.physics.architecture import registry
from tests.conftest import check_golden


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_fit_text_reads_like_the_vllm_log_golden():
    result = run("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                 "--max-model-len", "8192", "--vllm-version", "0.19", "--gpu-memory-utilization", "0.95")
    assert result.exit_code == 0, result.output
    assert "GPU KV cache size:" in result.output
    assert "Maximum concurrency for 8,192 tokens per request:" in result.output
    check_golden("fit_llama8b_h100.txt", result.output)


def test_fit_caveats_are_diagnostics_on_stderr_and_in_the_json():
    """A cross-attention vision model's caveats: `warning:` lines on stderr in text mode (stdout carries the
    result only), the "warnings" list in JSON."""
    args = ("fit", "--model", "meta-llama/Llama-3.2-11B-Vision-Instruct", "--gpu", "A10-24GB", "--max-model-len",
            "8192", "--vllm-version", "0.10.1")  # Mllama is served until 0.10.2
    text, as_json = run(*args), run(*args, "--json")
    assert "warning:" not in text.stdout and "cross-attention layers" in text.stderr
    assert all(line.startswith(("warning: ", "note: ")) for line in text.stderr.splitlines())
    assert any("cross-attention layers" in w for w in json.loads(as_json.stdout)["warnings"])


def test_fit_json_has_the_contract_keys_and_is_deterministic():
    args = ("fit", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100-sxm-80gb", "--tp", "4",
            "--max-model-len", "32768", "--json")
    first, second = run(*args), run(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    data = json.loads(first.stdout)
    for key in ("weights_gib", "activation_gib", "non_torch_gib", "cuda_graph_gib", "kv_cache_gib",
                "kv_cache_tokens", "max_concurrency", "fits"):
        assert key in data
    assert data["fits"] is True
    assert data["kv_bytes_per_token"] == 327_680 / 4  # 8 KV heads / TP 4 = 2 heads per rank
    check_golden("fit_llama70b_h100_tp4.json", first.output)


def test_fit_with_data_parallel_engines_shares_the_load_and_sums_the_rates():
    """--dp 2 on a dense model: two independent engines, each at half the clients; so the latency of one engine
    at 32 clients, twice its rates, and the same memory per GPU as one engine."""
    base = ("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--max-model-len",
            "8192", "--input-tokens", "1000", "--output-tokens", "200", "--json")
    one = json.loads(run(*base, "--concurrency", "32").stdout)
    two = json.loads(run(*base, "--concurrency", "64", "--dp", "2").stdout)
    assert (one["data_parallel"], two["data_parallel"]) == (1, 2)
    assert two["ttft_ms"] == one["ttft_ms"] and two["tpot_ms"] == one["tpot_ms"]
    for key in ("output_tokens_per_second", "requests_per_second", "concurrency"):
        assert two[key] == pytest.approx(2 * one[key], abs=2e-3)
    assert two["kv_cache_tokens"] == one["kv_cache_tokens"] and two["weights_gib"] == one["weights_gib"]
    text = run(*base[:-1], "--dp", "2")
    assert text.stdout.splitlines()[0].startswith("meta-llama/Llama-3.1-8B-Instruct on 2 x H100-SXM-80GB")
    assert "TP=1 PP=1 DP=2" in text.stdout and "(each of the 2 engines)" in text.stdout


def test_a_moe_model_that_does_not_fit_is_also_offered_data_parallel_engines_with_expert_parallelism():
    """DeepSeek-R1 (627.65 GiB of FP8 weights) on one H200: TP=8 fits, and so do 8 data-parallel engines that
    deal the experts over their GPUs; a dense model is never offered --dp (its engines would be replicas)."""
    moe = run("fit", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "H200-141GB", "--max-model-len", "32768", "--json")
    assert moe.exit_code == 1
    assert json.loads(moe.stdout)["suggestions"] == ["--tp 8", "--dp 8 --enable-expert-parallel"]
    dense = run("fit", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM-80GB", "--max-model-len",
                "32768", "--json")
    assert not any(s.startswith("--dp") for s in json.loads(dense.stdout)["suggestions"])


def test_fit_that_does_not_fit_exits_1_with_the_smallest_changes():
    result = run("fit", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM-80GB", "--tp", "2",
                 "--max-model-len", "32768", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["fits"] is False
    assert "needs" in data["reason"]
    assert "--precision fp8" in data["suggestions"]
    assert "--tp 4" in data["suggestions"]


def test_unknown_model_and_gpu_give_one_line_each_with_suggestions():
    result = run("fit", "--model", "meta-llama/Llama-3.1-8B-Instruc", "--gpu", "H100")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 2
    assert "did you mean meta-llama/Llama-3.1-8B-Instruct" in lines[0]
    assert "H100-SXM-80GB" in lines[1]
    assert "Traceback" not in result.output


def test_bad_parallelism_and_lengths_are_exit_2():
    result = run("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--tp", "3",
                 "--pp", "64", "--max-model-len", "-5")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 3
    assert any("--tp 3 does not divide the 32 attention heads" in e for e in errors)
    assert any("--pp 64 exceeds the 32 layers" in e for e in errors)
    assert any("--max-model-len must be positive" in e for e in errors)


@pytest.mark.parametrize(("typed", "reported"), [("0.010", "0.10"), ("0.08", "0.8"), ("0.19.1", "0.19.1")])
def test_a_release_is_reported_as_the_numbers_it_selects(typed, reported):
    result = run("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--max-model-len",
                 "8192", "--vllm-version", typed, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["vllm_version"] == reported


def test_nvlink_on_a_gpu_without_it_is_exit_2():
    """An RTX 4090 has no NVLink: costing its TP 2 with NVLink's buffers (1.74 GiB of non-torch memory, not
    0.34) and all-reduce speed would plan hardware that does not exist."""
    args = ("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "RTX4090-24GB", "--tp", "2",
            "--max-model-len", "8192", "--interconnect")
    refused = run(*args, "nvlink")
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr.startswith("error: --interconnect nvlink: RTX4090-24GB has no NVLink")
    assert run(*args, "pcie").exit_code == 0


def test_a_checkpoint_format_the_gpu_cannot_run_blames_the_gpu_unless_the_precision_was_asked_for():
    """gpt-oss-20b ships MXFP4, whose Marlin kernels need sm80; a T4 is sm75. Without --precision the user chose
    the GPU, not the format: the error names --gpu."""
    default = run("fit", "--model", "openai/gpt-oss-20b", "--gpu", "T4-16GB")
    assert default.exit_code == 2 and default.stdout == ""
    assert default.stderr.startswith("error: --gpu T4-16GB: openai/gpt-oss-20b ships mxfp4 weights and mxfp4 on "
                                     "T4-16GB (Turing, sm75): MXFP4 needs compute capability 8.0 or newer")
    asked = run("fit", "--model", "openai/gpt-oss-20b", "--gpu", "T4-16GB", "--precision", "mxfp4")
    assert asked.exit_code == 2 and asked.stderr.startswith("error: --precision mxfp4: mxfp4 on T4-16GB")


def test_model_config_missing_field_names_it(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000,
                               "intermediate_size": 11008}))
    result = run("fit", "--model-config", str(cfg), "--gpu", "A10G-24GB", "--max-model-len", "4096")
    assert result.exit_code == 2
    assert "missing field 'num_hidden_layers'" in result.output


def test_a_dsa_model_on_a_gpu_without_a_sparse_mla_backend_is_one_error_line():
    result = run("fit", "--model", "deepseek-ai/DeepSeek-V3.2", "--gpu", "A100-SXM-80GB", "--tp", "8",
                 "--precision", "int4", "--max-model-len", "8192")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --gpu A100-SXM-80GB: deepseek-ai/DeepSeek-V3.2 uses DeepSeek sparse attention and A100-SXM-80GB is "
        "Ampere (sm80): vLLM runs DeepSeek sparse attention only on Hopper and Blackwell (FlashMLA and FlashInfer "
        "sparse MLA kernels): no attention backend starts"]


def test_fp8_on_turing_is_rejected_before_vllm_0_14_only():
    """Fp8Config and FP8 Marlin need sm80 up to 0.13 and sm75 from 0.14: a T4 runs FP8 weights on Marlin."""
    args = ("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "T4-16GB", "--precision", "fp8",
            "--max-model-len", "4096")
    old = run(*args, "--vllm-version", "0.13")
    assert old.exit_code == 2 and old.stderr.strip().splitlines() == [
        "error: --precision fp8: fp8 on T4-16GB (Turing, sm75): FP8 needs compute capability 8.0 or newer in vLLM 0.13"]
    assert run(*args, "--vllm-version", "0.14").exit_code == 0


def test_models_list_and_show():
    listing = run("models", "list", "--json")
    assert listing.exit_code == 0
    rows = json.loads(listing.stdout)
    assert sorted(r["id"] for r in rows) == sorted(registry())  # every registry model, once
    show = run("models", "show", "meta-llama/Llama-3.1-70B-Instruct", "--json")
    data = json.loads(show.stdout)
    assert data["kv_bytes_per_token"] == {"auto": 327680, "fp8": 163840}
    assert data["attention_kind"] == "gqa"
    unknown = run("models", "show", "llama-3.1-70b")
    assert unknown.exit_code == 2
    assert "meta-llama/Llama-3.1-70B-Instruct" in unknown.output


def test_enforce_eager_and_language_model_only_flags():
    args = ["fit", "--model", "google/gemma-3-4b-it", "--gpu", "L4-24GB", "--max-model-len", "8192",
            "--vllm-version", "0.21", "--json"]
    full = json.loads(CliRunner().invoke(cli, args).output)
    text = json.loads(CliRunner().invoke(cli, [*args, "--enforce-eager", "--language-model-only"]).output)
    assert full["cuda_graph_gib"] > 0 and text["cuda_graph_gib"] == 0
    # the SigLIP tower and projector: 0.42 B parameters x 2 B = 0.78 GiB not loaded
    assert full["weights_gib"] - text["weights_gib"] == pytest.approx(0.78, abs=0.01)


@pytest.mark.parametrize("args, note", [
    (["--model", "openai/gpt-oss-20b", "--gpu", "A100-SXM-80GB"], "Triton attention for attention sinks"),
    (["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4-24GB", "--kv-cache-dtype", "fp8"],
     "Triton attention for an FP8 KV cache"),
    (["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4-24GB"], None),
    (["--model", "openai/gpt-oss-20b", "--gpu", "H100-SXM-80GB"], None),  # FlashAttention 3 has sinks
])
def test_fit_names_the_triton_attention_it_prices(args, note):
    result = CliRunner().invoke(cli, ["fit", *args, "--max-model-len", "8192", "--input-tokens", "4000",
                                      "--output-tokens", "200"])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "Triton attention" in line]
    if note is None:
        assert notes == []
    else:
        assert len(notes) == 1 and note in notes[0] and notes[0].startswith("note: ")
        assert "note" not in result.stdout


def test_a_scheduler_limit_beyond_any_deployment_is_exit_2():
    """10^14 batched tokens profiled an activation of 1.5e9 GiB and said so as 'does not fit'."""
    result = run("fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                 "--max-num-batched-tokens", "99999999999999")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("error: --max-num-batched-tokens 99,999,999,999,999 is beyond any deployment gpuopt "
                             "plans (at most 10,000,000)\n")


def test_data_parallel_has_the_workload_files_ceiling():
    """QA: --dp 1000000000000 was sized ("the KV cache holds 3.7e14 requests"); fit and simulate refuse past a
    workload file's replica ceiling, which they share."""
    from click.testing import CliRunner

    from gpuopt.cli.main import cli
    from gpuopt.inputs.workload import MAX_REPLICAS
    from gpuopt.physics.serving_config import MAX_DATA_PARALLEL

    assert MAX_DATA_PARALLEL == MAX_REPLICAS
    for command in (["fit"], ["simulate", "--num-prompts", "10"]):
        result = CliRunner().invoke(cli, [*command, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                                          "H100-SXM-80GB", "--dp", str(MAX_DATA_PARALLEL + 1)])
        assert result.exit_code == 2
        assert result.stderr == "error: --dp must be at most 10,000, as a workload's replicas (got 10,001)\n"

"""One reader of `vllm serve` flags (physics/serve_args.py) for `gpuopt simulate --server-args` and for the
server configuration of `gpuopt calibrate`'s evidence; --kv-cache-dtype values from vLLM's own source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import InputError
from gpuopt.inputs.evidence import ServerConfig, read_evidence, sidecar
from gpuopt.physics.serve_args import parse_serve_args
from gpuopt.physics.serve_flags import kv_cache_dtypes

BENCH = Path(__file__).resolve().parent / "fixtures" / "evidence"  # copies of shared/data/fixtures/bench
# the real server of the hikarioyama runs (recipes/serve.sh; vLLM 0.27.1), $MODEL as the repository wrote it
HIKARIOYAMA_SERVE = ("vllm serve $MODEL --host 127.0.0.1 --port 8040 --dtype bfloat16 --trust-remote-code "
                     "--language-model-only --max-model-len 8192 --max-num-seqs 8 --gpu-memory-utilization 0.85 "
                     "--mamba-cache-dtype float32 --mamba-ssm-cache-dtype float32 --attention-backend flash_attn "
                     "--kv-cache-dtype bfloat16 --served-model-name qwen38-nvfp4 --chat-template "
                     "$MODEL/chat_template.jinja --default-chat-template-kwargs '{\"enable_thinking\": false}'")


def test_kv_cache_dtypes_are_each_releases_own():
    # CacheDType in vllm/config/cache.py: 0.11.0 has no float16, 0.18.0 added it; 0.27 reads the 0.20.0 list
    assert kv_cache_dtypes("0.11") == ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
    assert "float16" in kv_cache_dtypes("0.18") and "bfloat16" in kv_cache_dtypes("0.27.1")
    assert set(kv_cache_dtypes("0.11")) < set(kv_cache_dtypes(None))


@pytest.mark.parametrize(("value", "modelled"), [
    ("auto", "auto"), ("bfloat16", "auto"), ("float16", "auto"),  # 2-byte KV, what gpuopt's auto models
    ("fp8", "fp8"), ("fp8_e4m3", "fp8"), ("fp8_e5m2", "fp8"), ("fp8_inc", "fp8"),
])
def test_kv_cache_dtype_values_vllm_accepts_are_read(value: str, modelled: str):
    assert parse_serve_args(f"--kv-cache-dtype {value}", vllm_version="0.20").kv_cache_dtype == modelled


def test_a_valid_kv_format_the_models_do_not_describe_is_named_not_guessed():
    args = parse_serve_args("--kv-cache-dtype turboquant_k8v4", vllm_version="0.20")
    assert args.kv_cache_dtype is None and args.not_modelled == ("--kv-cache-dtype turboquant_k8v4",)


def test_a_value_the_release_does_not_have_is_an_error_listing_its_values():
    with pytest.raises(InputError, match=r"'float16' is not a value of vLLM 0.11 \(valid: auto, bfloat16, fp8"):
        parse_serve_args("--kv-cache-dtype float16", vllm_version="0.11")
    with pytest.raises(InputError, match="--server-args: --kv-cache-dtype 'int3'"):
        parse_serve_args("--kv-cache-dtype int3")


def test_a_real_serve_command_line_reads_in_command_form():
    args = parse_serve_args(HIKARIOYAMA_SERVE, vllm_version="0.27.1", command=True)
    assert (args.model, args.max_model_len, args.max_num_seqs, args.gpu_memory_utilization, args.kv_cache_dtype,
            args.dtype) == ("$MODEL", 8192, 8, 0.85, "auto", "bfloat16")
    assert "--attention-backend" in args.not_modelled and "--mamba-cache-dtype" in args.not_modelled
    with pytest.raises(InputError, match="expected a --flag"):  # the flag form takes no positional model
        parse_serve_args(HIKARIOYAMA_SERVE)


def test_simulate_takes_the_real_servers_kv_cache_dtype_and_rejects_a_wrong_one():
    base = ["simulate", "--model", "Qwen/Qwen3-4B", "--gpu", "H100-SXM-80GB", "--num-prompts", "20",
            "--vllm-version", "0.20", "--json"]
    ok = CliRunner().invoke(cli, [*base, "--server-args", "--kv-cache-dtype bfloat16 --attention-backend flash_attn"])
    assert ok.exit_code == 0, ok.output
    assert "note: --server-args --attention-backend is not modelled" in ok.stderr
    bad = CliRunner().invoke(cli, [*base, "--server-args", "--kv-cache-dtype bf16"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --server-args: --kv-cache-dtype 'bf16'")


def test_evidence_reads_the_server_through_the_same_reader(tmp_path: Path):
    run = tmp_path / "c8.json"
    run.write_bytes((BENCH / "hikarioyama_maxq_random-in256-out1024-c8-run1.json").read_bytes())
    (tmp_path / "c8.json.yaml").write_text(f"gpu: RTX-PRO-6000-MaxQ-96GB\nvllm_version: '0.27.1'\n"
                                           f"server_args: {HIKARIOYAMA_SERVE!r}\n".replace("\\'", "''"))
    config = sidecar(run)
    assert (config.max_model_len, config.max_num_seqs, config.kv_cache_dtype) == (8192, 8, "auto")
    obs = read_evidence(run, ServerConfig(model="Qwen/Qwen3-8B"))
    # the sidecar's model ($MODEL, a path the author sanitised) wins over the flags: what the user wrote
    assert obs.config.model == "$MODEL" and obs.config.gpu == "RTX-PRO-6000-MaxQ-96GB"
    (tmp_path / "c8.json.yaml").write_text("gpu: H100\nserver_args: '--max-num-seqs many'\n")
    with pytest.raises(InputError, match=r"c8.json.yaml: server_args: --max-num-seqs must be an integer"):
        sidecar(run)


def test_performance_mode_is_read_and_checked_against_the_release():
    assert parse_serve_args("--performance-mode throughput", vllm_version="0.17").performance_mode == "throughput"
    assert parse_serve_args("--performance-mode=interactivity").performance_mode == "interactivity"
    with pytest.raises(InputError, match="must be one of balanced, interactivity, throughput"):
        parse_serve_args("--performance-mode fast")
    base = ["simulate", "--model", "Qwen/Qwen3-4B", "--gpu", "H100-SXM-80GB", "--num-prompts", "3000",
            "--random-input-len", "32", "--random-output-len", "100", "--vllm-version", "0.19", "--json"]
    # 3,000 short prompts at once: the 1,024-sequence default holds back more of them than throughput mode's 2,048
    plain, fast = CliRunner().invoke(cli, base), CliRunner().invoke(cli, [*base, "--server-args",
                                                                            "--performance-mode throughput"])
    one, two = json.loads(plain.stdout), json.loads(fast.stdout)
    # the start-up values vLLM would log, on stderr
    assert "max_num_seqs 1024, max_num_batched_tokens 8192" in plain.stderr
    assert "max_num_seqs 2048, max_num_batched_tokens 16384" in fast.stderr
    assert one["completed"] == two["completed"] == 3000
    assert two["mean_ttft_ms"] < one["mean_ttft_ms"]
    old = CliRunner().invoke(cli, [*base[:-2], "0.16", "--server-args", "--performance-mode throughput"])
    assert old.exit_code == 2 and "--performance-mode is not a flag of vLLM 0.16" in old.stderr
    assert "it came in 0.17.0" in old.stderr


# ---- CUDA-graph flags (physics/graph_flags.py) and vLLM's single-dash forms -------------------------------

def test_single_dash_aliases_read_as_their_long_flags() -> None:
    """-tp / -pp / -dp / -ep / -q are add_argument aliases in vllm/engine/arg_utils.py (0.8.0-0.34.0 wheels)."""
    args = parse_serve_args("-tp 4 -pp=2 -dp 2 -ep -q fp8", vllm_version="0.33")
    assert (args.tensor_parallel, args.pipeline_parallel, args.data_parallel, args.enable_expert_parallel,
            args.quantization) == (4, 2, 2, True, "fp8")
    # a short flag vLLM has that moves nothing here is named back, with its value; a negative number is a value
    assert parse_serve_args("-asc 3 --seed -1").not_modelled == ("-asc", "--seed")
    # in command form a leading short flag is a flag, not the model
    assert parse_serve_args("vllm serve -tp 2 --model m", command=True).model == "m"
    with pytest.raises(InputError, match="--tensor-parallel-size must be an integer"):
        parse_serve_args("-tp two")


def test_enforce_eager_and_the_optimization_level_are_read() -> None:
    assert parse_serve_args("--enforce-eager").enforce_eager is True
    assert parse_serve_args("--no-enforce-eager").enforce_eager is False
    # -O3, -O=3, -O 3 and --optimization-level 3 are one flag (FlexibleArgumentParser rewrites the short forms)
    for text in ("-O0", "-O=0", "-O 0", "--optimization-level 0"):
        settings = parse_serve_args(text, vllm_version="0.33").cudagraphs
        assert settings is not None and settings.optimization_level == 0
    with pytest.raises(InputError, match="-O5 must be 0, 1, 2 or 3"):
        parse_serve_args("-O5")


def test_the_compilation_config_is_read_as_json_or_dotted_keys() -> None:
    text = """--compilation-config '{"cudagraph_mode": "piecewise", "cudagraph_capture_sizes": [1, 2, 4, 8],
              "pass_config": {"fuse_norm_quant": false}}'"""
    args = parse_serve_args(text, vllm_version="0.33")
    assert args.cudagraphs is not None
    assert (args.cudagraphs.mode, args.cudagraphs.capture_sizes) == ("PIECEWISE", (1, 2, 4, 8))
    assert args.not_modelled == ("--compilation-config pass_config",)
    dotted = parse_serve_args("-cc.cudagraph_mode=FULL_DECODE_ONLY --compilation-config.max_cudagraph_capture_size 64",
                              vllm_version="0.33").cudagraphs
    assert dotted is not None and (dotted.mode, dotted.max_capture_size) == ("FULL_DECODE_ONLY", 64)
    # up to 0.11 -O is --compilation-config itself, and its `level` the compilation level
    old = parse_serve_args("""-O '{"level": 0}'""", vllm_version="0.11").cudagraphs
    assert old is not None and old.optimization_level == 0
    assert parse_serve_args("""-O '{"level": null}'""", vllm_version="0.11").cudagraphs is None  # unset
    # the compilation mode (0.12+): CompilationMode's integer or its name in any case; 0.11 had no such key
    for text in ("-cc.mode=1", "-cc.mode=stock_torch_compile", """-cc '{"mode": "STOCK_TORCH_COMPILE"}'"""):
        settings = parse_serve_args(text, vllm_version="0.33").cudagraphs
        assert settings is not None and settings.compilation_mode == "STOCK_TORCH_COMPILE"
    assert parse_serve_args("-cc.mode=3", vllm_version="0.12").cudagraphs.compilation_mode == "VLLM_COMPILE"  # type: ignore[union-attr]
    assert parse_serve_args("""-O '{"mode": 0}'""", vllm_version="0.11").not_modelled == ("-O mode",)
    # JSON null is vLLM's unset -- the default -- not the NONE mode
    assert parse_serve_args("""-cc '{"cudagraph_mode": null, "mode": null}'""").cudagraphs is None
    assert parse_serve_args("-cc.cudagraph_mode=none").cudagraphs.mode == "NONE"  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "message"), [
    ("-cc notjson", "-cc takes a JSON object"),
    ("-cc '[1, 2]'", "-cc takes a JSON object"),
    ("-cc.cudagraph_mode=HALF", "-cc cudagraph_mode must be one of NONE, PIECEWISE, FULL, FULL_DECODE_ONLY"),
    ("-cc.cudagraph_capture_sizes=[0,8]", "positive whole batch sizes"),
    ("-cc.cudagraph_capture_sizes=8", "takes a list of batch sizes"),
    ("-cc.mode=4", "-cc mode must be one of NONE, STOCK_TORCH_COMPILE, DYNAMO_TRACE_ONCE, VLLM_COMPILE or 0-3"),
    ("-cc.mode=eager", "-cc mode must be one of NONE, STOCK_TORCH_COMPILE"),
    ("--cuda-graph-sizes 8", "--cuda-graph-sizes is not a flag of vLLM 0.33 (0.9-0.12 had it)"),
])
def test_a_graph_flag_vllm_would_refuse_is_one_error(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_serve_args(text, vllm_version="0.33")


def test_cuda_graph_sizes_read_as_each_release_did() -> None:
    """0.10-0.11: one value is the largest size of the grid, several the list; 0.12 (a deprecated alias of
    cudagraph_capture_sizes) takes the values as the list."""
    one = parse_serve_args("--cuda-graph-sizes 64 --max-num-seqs 32", vllm_version="0.11")
    assert one.cudagraphs is not None and one.max_num_seqs == 32
    assert (one.cudagraphs.max_capture_size, one.cudagraphs.capture_sizes) == (64, None)
    several = parse_serve_args("--cuda-graph-sizes 1 2 4", vllm_version="0.11").cudagraphs
    assert several is not None and several.capture_sizes == (1, 2, 4)
    listed = parse_serve_args("--cuda-graph-sizes 64", vllm_version="0.12").cudagraphs
    assert listed is not None and listed.capture_sizes == (64,)


def test_simulate_reads_the_graph_flags_into_the_kv_budget() -> None:
    """Llama-3.1-8B on an H100 at 0.33 and 8k: 54.8456 GiB of KV after the default graphs, 0.0937 + 0.01315 x 32
    + 0.25 (FlashAttention 3's split buffers) = 0.7645 GiB; 128 KiB a token, whole blocks of 16. --enforce-eager
    captures none: (54.8456 + 0.7645) x 8,192 = 455,557.9 -> 455,552 tokens; -O1 (piecewise only) keeps 0.0937 +
    0.01315 x 32 x 51/102 = 0.3041 GiB and no split buffers: (54.8456 + 0.4604) x 8,192 = 453,066.8 -> 453,056."""
    import re

    from gpuopt.cli.main import cli

    def kv_tokens(server_args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                                          "H100-SXM-80GB", "--max-model-len", "8192", "--num-prompts", "20",
                                          "--server-args", server_args])
        assert result.exit_code == 0, result.output
        found = re.search(r"KV cache ([\d,]+) tokens", result.stderr)
        assert found is not None, result.stderr
        return int(found.group(1).replace(",", "")), result.stderr

    assert kv_tokens("")[0] == 449_280
    eager, note = kv_tokens("--enforce-eager")
    assert eager == 455_552
    assert "step times are simulated as with vLLM's default graphs" in note
    assert kv_tokens("-O1")[0] == 453_056


def test_a_flag_the_release_does_not_have_is_refused_where_its_flags_were_read() -> None:
    """--kv-cache-dtype-skip-layers came in 0.19.0: a 0.18 server refuses it ("unrecognized arguments"). Not
    checked where that release's flags were not read (0.7, before the table) or no release is named."""
    assert parse_serve_args("--kv-cache-dtype-skip-layers x", vllm_version="0.19.1").not_modelled == \
        ("--kv-cache-dtype-skip-layers",)
    with pytest.raises(InputError, match=r"--kv-cache-dtype-skip-layers is not a flag of vLLM 0.18 \(its parser, "
                                         r"read in the 0.18.0 wheel"):
        parse_serve_args("--kv-cache-dtype-skip-layers x", vllm_version="0.18")
    with pytest.raises(InputError, match="-cc is not a flag of vLLM 0.11"):  # -cc came in 0.12
        parse_serve_args("-cc.cudagraph_mode=NONE", vllm_version="0.11")
    assert parse_serve_args("--kv_cache_dtype_skip_layers x", vllm_version="0.7.4").not_modelled
    assert parse_serve_args("--made-up-flag", vllm_version=None).not_modelled == ("--made-up-flag",)

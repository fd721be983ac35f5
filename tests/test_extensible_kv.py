"""vLLM 0.34's extensible KV cache: sized after warmup from the memory left, gpu_memory_utilization 1.0 and
block size 64 by default. Expected values are worked by hand from vllm/v1/worker/extensible_kv_cache.py
measure_kv_cache_bytes (0.34.0 wheel) and the components gpuopt's calibrations give (printed by `gpuopt fit`)."""

import json

import pytest
from click.testing import CliRunner

from gpuopt.cli.fit import fit
from gpuopt.cli.main import cli
from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import estimate
from gpuopt.physics.serve_args import human_readable_int, parse_serve_args
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.vllm_profile import default_release, get_profile, profiles
from gpuopt.planner.serve_flags import unknown_flags
from tests.test_serve_command import EXAMPLES, serve_lines

L8 = "meta-llama/Llama-3.1-8B-Instruct"
# Llama-3.1-8B on an H100 at the 8,192-token step budget (v0.19 activation and 0.27's non-torch memory, carried
# to 0.33 and 0.34); the
# graphs on the V2 runner's calibration: 0.0937 + 0.01315 x 32 layers (102 graphs at 1,024 sequences, the
# reference count) + FlashAttention 3's split buffers, 32 splits x 512 tokens x 32 heads x 128 x 4 B = 0.25 GiB
# -> 0.7645
WEIGHTS, ACTIVATION, NON_TORCH, GRAPHS = 14.9888, 1.916, 0.34, 0.7645


def l8(version: str, **kw: object):
    return estimate(get_model(L8), get_gpu("H100-SXM-80GB"),
                    ServingConfig(max_model_len=8192, vllm_version=version, **kw))  # type: ignore[arg-type]


def test_unset_utilization_sizes_from_the_device_less_startup_margin_and_transient() -> None:
    rank = l8("0.34").binding_rank
    transient = ACTIVATION + GRAPHS  # 2.6805: the profiled peak plus the CUDA-graph estimate
    margin = 0.75 * transient  # 2.010375, above the 1 GiB floor
    expected = 79.19 - 0.56 - (WEIGHTS + NON_TORCH + GRAPHS) - margin - transient  # 57.845825
    assert rank.extensible and rank.startup_gib == 0.56
    assert rank.transient_gib == pytest.approx(transient, abs=1e-4)
    assert rank.margin_gib == pytest.approx(margin, abs=1e-4)
    assert rank.kv_cache_gib == pytest.approx(expected, abs=1e-3)
    est = l8("0.34")
    assert est.config.gpu_memory_utilization == 1.0 and est.config.block_size == 64
    # unrounded (weights 14.988777, activation 1.915952): 57.845931 GiB / (131,072 B x 64 tokens) = 7,404.28
    # -> 7,404 blocks; 128 blocks a request of 8,192 tokens
    assert rank.num_blocks == 7404 and est.kv_cache_tokens == 7404 * 64


def test_an_explicit_utilization_caps_the_cache_and_the_graphs_count_twice() -> None:
    """With 0.92 the requested side binds (72.85 - used < 79.19 - 0.56 - used - margin), and the CUDA graphs are
    taken once as resident memory and once in the transient: exactly 0.33's KV less one graph pool."""
    new = l8("0.34", gpu_memory_utilization=0.92).binding_rank
    old = l8("0.33", gpu_memory_utilization=0.92).binding_rank
    assert new.budget_gib == old.budget_gib == pytest.approx(72.8548, abs=1e-4)
    assert new.kv_cache_gib == pytest.approx(72.8548 - (WEIGHTS + NON_TORCH + GRAPHS) - (ACTIVATION + GRAPHS), abs=1e-3)
    assert old.kv_cache_gib - new.kv_cache_gib == pytest.approx(new.cuda_graph_gib, abs=1e-9)


@pytest.mark.parametrize("gmu", [0.5, 0.8, 0.9, 0.95, 0.99])
def test_a_lower_utilization_never_gives_a_larger_cache(gmu: float) -> None:
    assert l8("0.34", gpu_memory_utilization=gmu).binding_rank.kv_cache_gib <= l8("0.34").binding_rank.kv_cache_gib


def test_the_margin_floor_and_the_multi_gpu_startup_memory() -> None:
    # eager: no graphs, so the transient is the activation alone; a small step budget keeps it under 1.33 GiB and
    # the 1 GiB floor decides the margin
    rank = l8("0.34", enforce_eager=True, max_num_seqs=256, max_num_batched_tokens=2048).binding_rank
    assert rank.cuda_graph_gib == 0.0 and rank.transient_gib == rank.activation_gib < 1 / 0.75
    assert rank.margin_gib == 1.0
    tp2 = l8("0.34", tensor_parallel=2).binding_rank
    assert tp2.startup_gib == 2.16  # CUDA context and NCCL communicators before the snapshot (H200 TP 8 log)
    pcie = l8("0.34", tensor_parallel=2, interconnect="pcie").binding_rank
    assert pcie.startup_gib == 0.56  # over PCIe: the one-GPU figure, as for the non-torch memory
    expected = 79.19 - 2.16 - (tp2.weights_gib + tp2.non_torch_gib + tp2.cuda_graph_gib) - tp2.margin_gib \
        - tp2.transient_gib
    assert tp2.kv_cache_gib == pytest.approx(expected, abs=1e-9)


def test_block_size_defaults_by_release_and_an_explicit_one_is_kept() -> None:
    assert l8("0.33").config.block_size == 16
    assert l8("0.34").config.block_size == 64
    assert l8("0.34", block_size=16).config.block_size == 16


def test_plans_default_to_0_33_and_the_help_says_so() -> None:
    assert default_release() == "0.33" and profiles()[-1].version == "0.34"
    assert get_profile(None).version == "0.33" and get_profile(None).extensible_kv_cache is None
    result = CliRunner().invoke(fit, ["--help"])
    assert f"(default: {default_release()}; 0.34 is modelled from its source" in " ".join(result.stdout.split())


def test_fit_prints_the_sizing_and_says_it_is_unchecked() -> None:
    args = ["--model", L8, "--gpu", "H100-SXM-80GB", "--max-model-len", "8192", "--vllm-version", "0.34"]
    text = CliRunner().invoke(fit, args)
    assert text.exit_code == 0, text.output
    assert ("Memory after warmup (extensible KV cache): 2.68 GiB kept for transient activations (activation + "
            "CUDA-graph estimate), a 2.01 GiB margin (max(1 GiB, 0.75 x transient)), 0.56 GiB held before start-up "
            "(CUDA context, NCCL)") in text.stdout
    assert "Available KV cache memory: 57.85 GiB" in text.stdout
    assert "warning: " in text.stderr and "no start-up log of this release has checked it yet" in text.stderr
    data = json.loads(CliRunner().invoke(fit, [*args, "--json"]).stdout)
    assert (data["kv_sizing"], data["startup_gib"], data["block_size"]) == ("extensible", 0.56, 64)
    old = json.loads(CliRunner().invoke(fit, [*args[:-1], "0.33", "--json"]).stdout)
    assert (old["kv_sizing"], old["startup_gib"], old["margin_gib"]) == ("estimate", None, None)


def test_a_model_that_does_not_fit_names_what_vllm_can_commit() -> None:
    """gemma-2-9b on an L4 (22.03 GiB) at 4,096 tokens and 512 sequences: 0.33 leaves 0.92 x 22.03 - 17.2179 -
    1.8158 (activation) - 0.34 - 0.6460 (graphs: 0.0937 + 0.01315 x 42 layers, 102 graphs at 512 sequences, no
    FlashAttention 3 off Hopper) = 0.2479 GiB of KV (short of one request, but positive); 0.34 keeps the graphs
    twice, a margin and the start-up memory: 22.03 - 0.56 - 1.84635 (margin, 0.75 x 2.4618) = 19.62365 GiB it can
    commit, against 17.2179 + 0.34 + 0.6460 + 2.4618 (activation + graphs) = 20.6657 GiB: 1.0421 GiB short."""
    model, gpu = get_model("google/gemma-2-9b-it"), get_gpu("L4-24GB")
    old = estimate(model, gpu, ServingConfig(max_model_len=4096, max_num_seqs=512, vllm_version="0.33"))
    new = estimate(model, gpu, ServingConfig(max_model_len=4096, max_num_seqs=512, vllm_version="0.34"))
    assert old.binding_rank.kv_cache_gib == pytest.approx(0.2479, abs=2e-3)
    assert not new.fits and new.binding_rank.kv_cache_gib == pytest.approx(-1.0421, abs=2e-3)
    assert new.reason == ("no memory left for the KV cache: 17.22 GiB weights + 0.34 non-torch + 0.65 CUDA graphs + "
                          "2.46 kept for transients exceed the 19.62 GiB vLLM can commit (22.03 GiB less 0.56 held at "
                          "start-up and a 1.85 GiB margin) by 1.04 GiB")


def test_every_command_the_examples_print_for_0_34_parses_there() -> None:
    seen = 0
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if path.name.startswith("capacity-"):
            continue
        result = CliRunner().invoke(cli, ["solve", str(path), "--vllm-version", "0.34", "--format", "json"])
        assert result.exit_code in (0, 1), (path.name, result.stderr)
        if result.exit_code:
            continue
        for d in json.loads(result.stdout)["deployments"]:
            for line in serve_lines(d["vllm_command"]):
                assert unknown_flags(line, "0.34") == [], (path.name, line)
                assert "--gpu-memory-utilization 1 " in line + " "
                seen += 1
    assert seen >= 5


def test_turned_off_0_34_estimates_as_0_33_did_at_0_92() -> None:
    """--no-enable-extensible-kv-cache: CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION (0.92) and the profiling-run
    estimate, 72.8548 - 14.9888 - 1.916 - 0.34 - 0.7645 = 54.8455 GiB, as on 0.33 (block size stays 64)."""
    off = l8("0.34", extensible_kv_cache=False)
    assert off.config.gpu_memory_utilization == 0.92 and off.config.block_size == 64
    assert not off.binding_rank.extensible and off.warnings == ()
    assert off.binding_rank.kv_cache_gib == pytest.approx(72.8548 - WEIGHTS - ACTIVATION - NON_TORCH - GRAPHS, abs=1e-3)
    assert off.binding_rank.kv_cache_gib == pytest.approx(l8("0.33").binding_rank.kv_cache_gib, abs=1e-9)


def test_the_flag_is_read_from_server_args_and_refused_before_0_34() -> None:
    assert parse_serve_args("--no-enable-extensible-kv-cache").extensible_kv_cache is False
    assert parse_serve_args("--enable-extensible-kv-cache").extensible_kv_cache is True
    assert parse_serve_args("--max-num-seqs 8").extensible_kv_cache is None
    result = CliRunner().invoke(cli, ["fit", "--model", L8, "--gpu", "H100-SXM-80GB", "--vllm-version", "0.33",
                                      "--enable-extensible-kv-cache"])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("error: --enable-extensible-kv-cache is not a flag of vLLM 0.33 (it came in 0.34)\n")


@pytest.mark.parametrize(("text", "count"), [
    ("123", 123), ("1k", 1_000), ("1K", 1_024), ("25.6k", 25_600), ("8G", 8 * 2**30), ("8g", 8_000_000_000),
    ("2T", 2 * 2**40), (" 16M ", 16 * 2**20),
])
def test_byte_counts_read_as_vllms_parser_reads_them(text: str, count: int) -> None:
    assert human_readable_int(text) == count


@pytest.mark.parametrize("text", ["1.5G", "8GB", "lots", "", "1e9"])
def test_byte_counts_vllm_refuses_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        human_readable_int(text)


def test_a_set_kv_cache_is_taken_as_is_in_every_release() -> None:
    """--kv-cache-memory-bytes 20G: 20 GiB / 131,072 B a token = 163,840 tokens (1,280 blocks of 128 at 64, or
    10,240 of 16), whatever gpu_memory_utilization says; on 0.34 it turns the extensible KV cache off."""
    for version, block in (("0.19", 16), ("0.33", 16), ("0.34", 64)):
        est = l8(version, kv_cache_memory_bytes=20 * 2**30, gpu_memory_utilization=0.5)
        rank = est.binding_rank
        assert rank.kv_cache_gib == 20.0 and not rank.extensible and est.warnings == ()
        assert rank.num_blocks * block == 163_840 and est.kv_cache_tokens == 163_840
    with pytest.raises(InputError, match="drop one"):
        l8("0.34", kv_cache_memory_bytes=2**30, extensible_kv_cache=True)
    assert parse_serve_args("--kv-cache-memory-bytes 20G").kv_cache_memory_bytes == 20 * 2**30
    with pytest.raises(InputError, match="--kv-cache-memory-bytes: decimals are not allowed"):
        parse_serve_args("--kv-cache-memory-bytes 1.5G")


def test_a_set_kv_cache_larger_than_the_gpu_does_not_fit() -> None:
    """70 GiB + 14.9888 weights + 1.916 activation + 0.34 non-torch + 0.7645 graphs = 88.01 GiB > 79.19: vLLM
    checks nothing and fails allocating it; only smaller weights help (int4 5.37 GiB: 78.39 GiB)."""
    args = ["fit", "--model", L8, "--gpu", "H100-SXM-80GB", "--max-model-len", "8192",
            "--kv-cache-memory-bytes", "70G"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert ("fits: NO -- --kv-cache-memory-bytes 70.00 GiB + 14.99 weights + 1.92 activation + 0.34 non-torch + "
            "0.76 CUDA graphs need 88.01 GiB of the 79.19 GiB GPU") in result.stdout
    assert "smallest changes that fit: --precision int4; --tp 4" in result.stdout
    assert json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)["kv_sizing"] == "set"
    bad = CliRunner().invoke(cli, [*args[:-1], "1.5G"], prog_name="gpuopt")
    assert (bad.exit_code, bad.stdout) == (2, "")
    assert bad.stderr == ("error: Invalid value for '--kv-cache-memory-bytes': decimals are not allowed with binary "
                          "suffixes like G: did you mean 1.5g? (see 'gpuopt fit --help')\n")


def test_a_set_kv_cache_too_small_for_one_request_says_so() -> None:
    """1 GiB set, and one request of 131,072 tokens needs 131,072 x 131,072 B = 16 GiB: the set cache fits the GPU
    but not one request."""
    est = estimate(get_model(L8), get_gpu("H100-SXM-80GB"),
                   ServingConfig(max_model_len=131072, vllm_version="0.33", kv_cache_memory_bytes=2**30))
    assert not est.fits
    assert est.reason == ("one request of max_model_len 131072 needs 16.00 GiB of KV cache but only 1.00 GiB is "
                          "available")

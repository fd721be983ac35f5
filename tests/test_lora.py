"""LoRA adapter slots in the memory model (physics/lora.py), by hand from vLLM's buffer shapes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.cli.main import cli
from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import get_model
from gpuopt.physics.lora import lora_bytes
from gpuopt.physics.memory import GIB, estimate
from gpuopt.physics.quantization import representative
from gpuopt.physics.serve_args import lora_slots, parse_serve_args
from gpuopt.physics.serving_config import ServingConfig

QWEN3_4B = "Qwen/Qwen3-4B"  # h 2560, 32 heads, 8 KV heads of 128, intermediate 9728, 36 layers, vocab 151936, tied


def test_qwen3_4b_one_slot_of_rank_16_by_hand() -> None:
    # per layer and unit of rank: qkv A 3 x 2560 + B (4096 + 1024 + 1024); o_proj A 4096 + B 2560;
    # gate_up A 2 x 2560 + B 2 x 9728; down A 9728 + B 2560 -> 13824 + 6656 + 24576 + 12288 = 57344
    layers = 36 * 57344
    # LM head (logits processor) r x 2560 + 151936 x r; the embedding 151936 x r + 2560 x r; tied: wrapped again
    vocab = 3 * (151936 + 2560)
    expected = (layers + vocab) * 16 * 2  # rank 16, bf16
    assert expected == 80_891_904
    arch = get_model(QWEN3_4B)
    assert lora_bytes(arch, 1, range(36), True, True, 1, False, "0.27.1", 1, 16, 2.0) == expected


def test_up_to_v011_the_lm_head_keeps_256_extra_vocabulary_rows_per_slot() -> None:
    arch = get_model(QWEN3_4B)
    per_slot = (36 * 57344 + 3 * (151936 + 2560)) * 16 * 2
    assert lora_bytes(arch, 1, range(36), True, True, 1, False, "0.15.0", 3, 16, 2.0) == 3 * per_slot
    assert lora_bytes(arch, 1, range(36), True, True, 1, False, "0.11.0", 3, 16, 2.0) == \
        3 * (per_slot + 256 * 2560 * 2)


def test_tensor_parallel_splits_the_b_of_column_and_the_a_of_row_layers() -> None:
    arch = get_model(QWEN3_4B)
    # TP=2: qkv 3 x 2560 + (4096 + 2 x 1024) / 2; o 4096 / 2 + 2560; gate_up 2 x 2560 + 2 x 9728 / 2;
    # down 9728 / 2 + 2560 -> 10752 + 4608 + 14848 + 7424 = 37632; the vocabulary buffers are whole on each rank
    expected = (36 * 37632 + 3 * (151936 + 2560)) * 8 * 2
    assert lora_bytes(arch, 2, range(36), True, True, 1, False, "0.27.1", 1, 8, 2.0) == expected


def test_moe_experts_get_buffers_from_v012() -> None:
    arch = get_model("Qwen/Qwen3-30B-A3B")  # h 2048, 32 heads, 4 KV heads, 128 experts of 768, 48 layers, untied
    attention = 3 * 2048 + 4096 + 2 * 512 + 4096 + 2048  # qkv + o_proj (head_dim 128)
    experts = 128 * (2 * 2048 + 2 * 768 + 768 + 2048)  # w13 A + w13 B + w2 A + w2 B per expert
    router = 2048 + 128  # the gate (a ReplicatedLinear): A r x h, B experts x r, whole on every GPU
    vocab = 2 * (151936 + 2048)  # LM head + embedding (not tied)
    assert lora_bytes(arch, 1, range(48), True, True, 1, False, "0.27.1", 1, 16, 2.0) == \
        (48 * (attention + router + experts) + vocab) * 16 * 2
    # v0.11 had no LoRA wrapper for fused MoE: the experts get none (and its LM head 256 extra-vocabulary rows);
    # Qwen3MoeForCausalLM declares no embedding_modules (vllm_architectures.csv "lora", not "lora+embedding"),
    # so up to 0.11 its input embedding gets no buffers: the LM head's half of `vocab` only
    assert lora_bytes(arch, 1, range(48), True, True, 1, False, "0.11.0", 1, 16, 2.0) == \
        (48 * (attention + router) + 151936 + 2048) * 16 * 2 + 256 * 2048 * 2
    # expert parallel over 2 GPUs: 64 whole experts each; TP=2 halves B of qkv and A of o_proj
    ep_attention = 3 * 2048 + (4096 + 1024) // 2 + 4096 // 2 + 2048
    ep_experts = 64 * (2 * 2048 + 3 * 768 + 2048)
    assert lora_bytes(arch, 2, range(48), True, True, 2, True, "0.27.1", 1, 16, 2.0) == \
        (48 * (ep_attention + router + ep_experts) + vocab) * 16 * 2


def test_the_kv_cache_loses_exactly_the_lora_buffers() -> None:
    arch, gpu = get_model(QWEN3_4B), get_gpu("RTX4090-24GB")
    base = ServingConfig(max_model_len=8192, gpu_memory_utilization=0.85, vllm_version="0.27")
    plain = estimate(arch, gpu, base).ranks[0]
    lora = estimate(arch, gpu, ServingConfig(**{**base.__dict__, "max_loras": 64})).ranks[0]
    assert lora.lora_gib == pytest.approx(64 * 80_891_904 / GIB)
    assert lora.weights_gib == pytest.approx(plain.weights_gib + lora.lora_gib)
    assert lora.kv_cache_gib == pytest.approx(plain.kv_cache_gib - lora.lora_gib)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 64), st.sampled_from([8, 16, 32, 64]), st.integers(1, 4).map(lambda k: 2 ** (k - 1)))
def test_lora_bytes_grow_linearly_with_slots_and_never_shrink_with_rank(slots: int, rank: int, tp: int) -> None:
    arch = get_model("meta-llama/Llama-3.1-8B-Instruct")
    one = lora_bytes(arch, tp, range(32), True, True, tp, False, "0.27", 1, rank, 2.0)
    assert lora_bytes(arch, tp, range(32), True, True, tp, False, "0.27", slots, rank, 2.0) == slots * one
    assert lora_bytes(arch, tp, range(32), True, True, tp, False, "0.27", 1, 2 * rank, 2.0) == 2 * one
    assert lora_bytes(arch, tp, range(32), True, True, tp, False, "0.27", 0, rank, 2.0) == 0.0


def test_layers_the_module_does_not_describe_are_refused_by_name() -> None:
    with pytest.raises(InputError, match="cross layers are not modelled"):  # Llama 3.2 Vision's cross-attention
        lora_bytes(get_model("meta-llama/Llama-3.2-11B-Vision-Instruct"), 1, range(40), True, True, 1, False,
                   "0.27", 1, 16, 2.0)
    # a Gated DeltaNet model whose class is unknown: which projection layout vLLM uses is not known either
    unknown = get_model("Qwen/Qwen3-Next-80B-A3B-Instruct").model_copy(update={"hf_architecture": None})
    with pytest.raises(InputError, match="linear layers are not modelled"):
        lora_bytes(unknown, 1, range(48), True, True, 1, False, "0.27", 1, 16, 2.0)


def test_fit_cli_counts_the_slots_and_names_bad_values() -> None:
    runner = CliRunner()
    args = ["fit", "--model", QWEN3_4B, "--gpu", "RTX4090-24GB", "--max-model-len", "8192", "--json"]
    out = json.loads(runner.invoke(cli, [*args, "--enable-lora", "--max-loras", "4"]).stdout)
    assert (out["max_loras"], out["max_lora_rank"]) == (4, 16)
    assert out["lora_gib"] == round(4 * 80_891_904 / GIB, 4)
    off = json.loads(runner.invoke(cli, args).stdout)
    assert (off["max_loras"], off["max_lora_rank"], off["lora_gib"]) == (0, None, 0.0)
    bad = runner.invoke(cli, [*args, "--enable-lora", "--max-loras", "0", "--max-lora-rank", "12"])
    assert bad.exit_code == 2
    assert bad.stderr.splitlines() == [
        "error: --max-loras must be >= 1 (got 0)",
        "error: --max-lora-rank must be one of 1, 8, 16, 32, 64, 128, 256, 320, 512 (got 12): vLLM 0.33's LoRAConfig "
        "accepts only these"]
    orphan = runner.invoke(cli, [*args, "--max-loras", "2"])
    assert orphan.exit_code == 2 and "need --enable-lora" in orphan.stderr


def test_server_args_read_lora_as_vllm_does() -> None:
    assert lora_slots(parse_serve_args("--max-loras 8 --max-lora-rank 64")) == (0, 16, False)  # ignored without it
    assert lora_slots(parse_serve_args("--fully-sharded-loras")) == (0, 16, False)  # the same
    assert lora_slots(parse_serve_args("--enable-lora")) == (1, 16, False)
    assert lora_slots(parse_serve_args("--enable-lora --max-loras 8 --max-lora-rank 64")) == (8, 64, False)
    assert lora_slots(parse_serve_args("--enable-lora --fully-sharded-loras")) == (1, 16, True)
    with pytest.raises(InputError, match="--max-lora-rank must be one of"):
        parse_serve_args("--enable-lora --max-lora-rank 48")
    assert parse_serve_args("--enable-lora --fully-sharded-loras").fully_sharded_loras is True
    assert parse_serve_args("--enable-lora --no-fully-sharded-loras").fully_sharded_loras is False
    from gpuopt.inputs.evidence import server_flags

    assert server_flags("vllm serve m --enable-lora --fully-sharded-loras", "x").fully_sharded_loras is True
    assert server_flags("vllm serve m --fully-sharded-loras", "x").fully_sharded_loras is None  # LoRA off


WORKLOAD = """schema_version: 1
workloads:
  - name: adapters
    model: {model}
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 200
    precisions: [bf16]
    kv_cache_dtypes: [auto]
"""


def _solve(tmp_path, model: str, extra: str = "", *flags: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOAD.format(model=model) + extra)
    result = CliRunner().invoke(cli, ["solve", str(path), "--provider", "runpod", "--format", "json", *flags])
    return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else {}, result.stderr


def test_a_workload_with_lora_reserves_the_slots_and_prints_the_flags(tmp_path) -> None:
    code, plain, _ = _solve(tmp_path, QWEN3_4B)
    code_lora, lora, _ = _solve(tmp_path, QWEN3_4B, "    lora: {max_loras: 8, max_lora_rank: 32}\n")
    assert code == code_lora == 0
    base, served = plain["deployments"][0], lora["deployments"][0]
    assert "--enable-lora" not in base["vllm_command"]
    assert served["vllm_command"].endswith("--enable-lora --max-loras 8 --max-lora-rank 32")
    # the same GPU and shape (the cheapest 24 GB card), whose KV cache is smaller by exactly 8 slots of rank 32
    # and the second set of CUDA graphs vLLM captures with LoRA on (0.02594 GiB a layer x 36 layers x 86 / 102: the
    # 86 graphs of 256 sequences, of the reference 102)
    assert (base["sku"], base["tensor_parallel"]) == (served["sku"], served["tensor_parallel"]) == ("1x RTX 4090", 1)
    slots, graphs = 8 * 2 * 80_891_904 / GIB, 0.02594 * 36 * 86 / 102
    lost = base["memory"]["kv_cache_gib"] - served["memory"]["kv_cache_gib"]
    assert lost == pytest.approx(slots + graphs, abs=2e-4)
    assert served["memory"]["weights_gib"] - base["memory"]["weights_gib"] == pytest.approx(slots, abs=2e-4)
    assert served["memory"]["cuda_graph_gib"] - base["memory"]["cuda_graph_gib"] == pytest.approx(graphs, abs=2e-4)


def test_a_workload_lora_the_model_cannot_describe_is_one_error(tmp_path) -> None:
    vision = "meta-llama/Llama-3.2-11B-Vision-Instruct"
    code, _, err = _solve(tmp_path, vision, "    lora: {max_loras: 2}\n", "--vllm-version", "0.10.1")  # Mllama
    assert code == 2
    path = tmp_path / "w.yaml"
    lora_line = path.read_text().splitlines().index("    lora: {max_loras: 2}") + 1
    assert [x for x in err.splitlines() if x.startswith("error:")] == [
        f"error: {path}:{lora_line}: workloads.0.lora: vLLM 0.10.1's MllamaForConditionalGeneration ({vision}) "
        "does not support LoRA: --enable-lora fails at start-up ('does not support LoRA yet') (workload adapters)"]
    code, _, err = _solve(tmp_path, QWEN3_4B, "    lora: {max_lora_rank: 12}\n")
    assert code == 2 and "w.yaml:10: workloads.0.lora.max_lora_rank" in err, err


def test_calibration_evidence_reads_the_lora_flags_of_its_serve_line() -> None:
    from gpuopt.inputs.evidence import server_flags

    on = server_flags("vllm serve Qwen/Qwen3-4B --enable-lora --max-loras 4", "sidecar")
    assert (on.max_loras, on.max_lora_rank) == (4, 16)
    off = server_flags("vllm serve Qwen/Qwen3-4B --max-loras 4", "sidecar")
    assert (off.max_loras, off.max_lora_rank) == (None, None)


def test_fit_says_lora_latency_is_the_base_models() -> None:
    result = CliRunner().invoke(cli, ["fit", "--model", QWEN3_4B, "--gpu", "H100-SXM-80GB", "--enable-lora",
                                      "--input-tokens", "100", "--output-tokens", "50", "--concurrency", "4"])
    assert result.exit_code == 0
    assert "note: --enable-lora changes memory only; latency is the base model's (LoRA kernels not modelled)" \
        in result.stderr.splitlines()


def test_the_lora_example_plans_the_slots_it_reserves() -> None:
    from pathlib import Path

    example = Path(__file__).parent.parent / "examples" / "lora-adapters.yaml"
    result = CliRunner().invoke(cli, ["solve", str(example), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    deployment = json.loads(result.stdout)["deployments"][0]
    assert deployment["vllm_command"].endswith("--enable-lora --max-loras 16 --max-lora-rank 64")
    # Llama-3.1-8B (32 layers, h 4096, 8 KV heads of 128, intermediate 14336, vocab 128256, untied), rank 64:
    # per layer qkv 3 x 4096 + 6144, o 4096 + 4096, gate_up 2 x 4096 + 2 x 14336, down 14336 + 4096 = 81920;
    # LM head and embedding 2 x (128256 + 4096); x 64 x 2 B x 16 slots on a TP-1 replica
    lora = (32 * 81920 + 2 * (128256 + 4096)) * 64 * 2 * 16 / GIB
    assert deployment["tensor_parallel"] == 1
    assert deployment["memory"]["weights_gib"] == pytest.approx(14.99 + lora, abs=0.01)
    assert deployment["memory"]["lora_gib"] == pytest.approx(lora, abs=1e-4)  # 5.5049 GiB, apart too
    # the CSV carries it after the columns published before it (appended, so readers that take columns by
    # position keep theirs; later columns come after it)
    import csv as _csv
    csv_out = CliRunner().invoke(cli, ["solve", str(example), "--format", "csv"])
    header, row = list(_csv.reader(csv_out.stdout.splitlines()))[:2]
    at = header.index("memory_lora_gib")
    # column 53 of 76: after the 52 published before it, before the currency/FX columns added later
    assert (at, header[at + 1]) == (52, "currency")
    assert float(row[at]) == pytest.approx(lora, abs=1e-4)


def test_fully_sharded_loras_split_column_a_and_row_b_over_the_tp_group() -> None:
    # Qwen3-4B at TP 2, per layer and unit of rank. Plain: qkv A 3 x 2560 + B 4096/2 + 2 x 1024/2; o_proj A
    # 4096/2 + B 2560; gate_up A 2 x 2560 + B 2 x 9728/2; down A 9728/2 + B 2560 = 37,632. Fully sharded halves
    # the column layers' A (7,680 -> 3,840; 5,120 -> 2,560) and the row layers' B (2,560 -> 1,280 twice): 28,672.
    # The LM head, the embedding and the tied head stay whole: 3 x (151,936 + 2,560).
    arch = get_model(QWEN3_4B)
    whole = 3 * (151_936 + 2_560)
    plain = lora_bytes(arch, 2, range(36), True, True, 1, False, "0.27.1", 1, 16, 2.0)
    sharded = lora_bytes(arch, 2, range(36), True, True, 1, False, "0.27.1", 1, 16, 2.0, fully_sharded=True)
    assert plain == (36 * 37_632 + whole) * 16 * 2 == 58_183_680
    assert sharded == (36 * 28_672 + whole) * 16 * 2 == 47_861_760
    # alone on one GPU there is nothing to split
    assert lora_bytes(arch, 1, range(36), True, True, 1, False, "0.27.1", 1, 16, 2.0, fully_sharded=True) == \
        lora_bytes(arch, 1, range(36), True, True, 1, False, "0.27.1", 1, 16, 2.0)


def test_fully_sharded_moe_loras_split_w13_a_and_w2_b_over_the_expert_shards() -> None:
    # Qwen3-30B-A3B at TP 4 (48 layers, h 2048, 128 experts of 768 sliced 4 ways: 192). Per layer and unit of
    # rank the experts hold 128 x (2 x 2048 + 2 x 192 + 192 + 2048) = 860,160 plain and
    # 128 x (2 x 2048/4 + 2 x 192 + 192 + 2048/4) = 270,336 fully sharded; attention sheds qkv A 3 x 2048 x 3/4
    # = 4,608 and o_proj B 2048 x 3/4 = 1,536: 595,968 a layer, x 48 x 16 x 2 B for one slot of rank 16
    arch = get_model("Qwen/Qwen3-30B-A3B")
    plain = lora_bytes(arch, 4, range(48), True, True, 4, False, "0.27.1", 1, 16, 2.0)
    sharded = lora_bytes(arch, 4, range(48), True, True, 4, False, "0.27.1", 1, 16, 2.0, fully_sharded=True)
    assert plain - sharded == 48 * 595_968 * 16 * 2 == 915_406_848


@given(tp=st.sampled_from([1, 2, 4, 8]), rank=st.sampled_from([8, 16, 64, 256]), slots=st.integers(1, 32))
@settings(max_examples=40, deadline=None)
def test_fully_sharded_never_takes_more_and_scales_with_the_slots(tp: int, rank: int, slots: int) -> None:
    arch = get_model(QWEN3_4B)
    one = lora_bytes(arch, tp, range(36), True, True, 1, False, "0.33", 1, rank, 2.0, fully_sharded=True)
    assert one <= lora_bytes(arch, tp, range(36), True, True, 1, False, "0.33", 1, rank, 2.0)
    assert lora_bytes(arch, tp, range(36), True, True, 1, False, "0.33", slots, rank, 2.0,
                      fully_sharded=True) == pytest.approx(slots * one, rel=1e-12)


def test_what_vllm_refuses_with_moe_lora_is_refused() -> None:
    arch, h100 = get_model("Qwen/Qwen3-30B-A3B"), get_gpu("H100-SXM-80GB")
    ep = ServingConfig(tensor_parallel=4, expert_parallel=True, max_model_len=8192, max_loras=1, max_lora_rank=16)
    with pytest.raises(InputError, match="EP support for Fused MoE LoRA is not implemented yet"):
        estimate(arch, h100, replace(ep, vllm_version="0.19"))
    assert estimate(arch, h100, replace(ep, vllm_version="0.21")).fits  # allowed from 0.21 ...
    with pytest.raises(InputError, match="takes one or the other"):  # ... but not fully sharded as well
        estimate(arch, h100, replace(ep, vllm_version="0.21", fully_sharded_loras=True))
    with pytest.raises(InputError, match="--max-lora-rank 8 does not divide by 16"):
        estimate(arch, h100, ServingConfig(tensor_parallel=8, data_parallel=2, max_model_len=8192, max_loras=1,
                                           max_lora_rank=8, fully_sharded_loras=True))


def test_a_workload_asks_for_fully_sharded_slots_and_its_command_carries_the_flag(tmp_path) -> None:
    code, plan, _ = _solve(tmp_path, "Qwen/Qwen3-32B",
                           "    lora: {max_loras: 4, max_lora_rank: 64, fully_sharded: true}\n")
    assert code == 0
    assert plan["deployments"][0]["vllm_command"].endswith(
        "--enable-lora --max-loras 4 --max-lora-rank 64 --fully-sharded-loras")


def test_fit_reads_fully_sharded_loras_only_with_enable_lora() -> None:
    result = CliRunner().invoke(cli, ["fit", "--model", QWEN3_4B, "--gpu", "L4-24GB", "--fully-sharded-loras"])
    assert result.exit_code == 2 and "need --enable-lora" in result.stderr
    result = CliRunner().invoke(cli, ["fit", "--model", QWEN3_4B, "--gpu", "L4-24GB", "--tp", "2",
                                      "--max-model-len", "8192", "--enable-lora", "--fully-sharded-loras", "--json"])
    out = json.loads(result.stdout)
    assert out["fully_sharded_loras"] is True
    assert out["lora_gib"] == pytest.approx(47_861_760 / GIB, abs=1e-4)  # the hand count above (one slot, r 16)


def test_gated_deltanet_layers_wrap_every_projection_as_vllm_lays_them_out() -> None:
    # Qwen3.5-9B layer 0 (Gated DeltaNet; h 4096, 16 key heads and 32 value heads of 128: k 2048, v 4096,
    # conv kernel 4), per unit of rank at TP 1. Qwen3.5 splits the projections: in_proj_qkvz A 4 x 4096 +
    # B 2 x 2048 + 2 x 4096 = 28,672; in_proj_ba A 2 x 4096 + B 2 x 32 = 8,256; conv1d A 4 + B 8,192 = 8,196;
    # out_proj A 4096 + B 4096 = 8,192 -> 53,316; its gated MLP (12,288): 2 x 4096 + 24,576 + 12,288 + 4096
    gdn, mlp = 53_316, 49_152
    arch = get_model("Qwen/Qwen3.5-9B")
    assert arch.layer_kinds()[0] == "linear"
    assert lora_bytes(arch, 1, range(1), False, False, 1, False, "0.33", 1, 1, 2.0) == (gdn + mlp) * 2
    # Qwen3-Next (h 2048, same mixer geometry) fuses each input projection into one output: one A apiece:
    # qkvz 2048 + 12,288, ba 2048 + 64, conv1d 4 + 8,192, out_proj 4096 + 2048 = 30,788; plus the router
    # (2048 + 512), 512 experts of 512 (2 x 2048 + 2 x 512 + 512 + 2048 = 7,680 each) and the shared expert
    nxt = get_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert lora_bytes(nxt, 1, range(1), False, False, 1, False, "0.33", 1, 1, 2.0) == \
        (30_788 + 2_560 + 512 * 7_680 + 7_680) * 2
    # at TP 2 the column layers' B and out_proj's A halve: qkvz 2048 + 6,144, ba 2048 + 32, conv1d 4 + 4,096,
    # out_proj 2048 + 2048 = 18,468; experts sliced 2 ways (256 each): 512 x 6,912; shared expert 6,912
    tp2 = lora_bytes(nxt, 2, range(1), False, False, 2, False, "0.33", 1, 1, 2.0) / 2
    assert tp2 == 18_468 + 2_560 + 512 * 6_912 + 6_912  # the router stays whole


NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


@pytest.mark.parametrize(("version", "tp", "sharded", "elements"), [
    # h 2,688; inner 64 heads x 64 = 4,096; 8 groups x state 128 = 1,024 for B and for C; conv kernel 4.
    # 0.16+: in_proj 5 A of 2,688 + (4,096 + 4,096 + 1,024 + 1,024 + 64) / tp; conv1d 3 A of 4 + 6,144 / tp;
    # out_proj A 4,096 / tp + B 2,688
    ("0.33", 1, False, 5 * 2688 + 10304 + 3 * 4 + 6144 + 4096 + 2688),  # 36,684
    ("0.33", 2, False, 5 * 2688 + 10304 // 2 + 3 * 4 + 6144 // 2 + 4096 // 2 + 2688),  # 26,412
    ("0.33", 2, True, 4096 // 2 + 2688 // 2),  # fully sharded: in_proj and conv1d left unwrapped
    ("0.14", 1, False, 4096 + 2688),  # 0.11-0.14: the merged in_proj / conv1d have no LoRA wrapper
    # 0.10: one ColumnParallelLinear each: in_proj 2,688 + 4,096 + 6,144 (conv_dim) + 64, conv1d 4 + 6,144
    ("0.10.1", 1, False, 2688 + 10304 + 4 + 6144 + 4096 + 2688),  # 25,924
])
def test_a_mamba2_layer_slot_by_release(version: str, tp: int, sharded: bool, elements: int) -> None:
    arch = get_model(NEMOTRON)
    assert arch.layer_kinds()[0] == "mamba"
    # one slot of rank 16 at 1 byte an element: 16 x the elements per unit of rank
    assert lora_bytes(arch, tp, range(1), False, False, tp, False, version, 1, 16, 1.0, sharded) == 16 * elements


@pytest.mark.parametrize(("model", "layer", "version", "elements"), [
    # DeepSeek-V3.2: wq_b 1,536 -> 64 x 128; up to 0.19 also wk 7,168 -> 128 and weights_proj 7,168 -> 64
    ("deepseek-ai/DeepSeek-V3.2", 0, "0.33", 1536 + 8192),
    ("deepseek-ai/DeepSeek-V3.2", 0, "0.17", 1536 + 8192 + 7168 + 128 + 7168 + 64),
    # GLM-5.2's layer 3 reuses layer 2's top-k from 0.27.1: no indexer, no buffers; 0.21 builds it
    ("zai-org/GLM-5.2", 3, "0.33", 0),
    ("zai-org/GLM-5.2", 3, "0.21", 2048 + 32 * 128),
    ("zai-org/GLM-5.2", 6, "0.33", 2048 + 32 * 128),
])
def test_the_dsa_indexer_slot(model: str, layer: int, version: str, elements: int) -> None:
    """The indexer's share of a layer's slot: the model's elements less those of the same model without an
    indexer (replicated layers: the same at any TP)."""
    arch = get_model(model)
    plain = arch.model_copy(update={"index_n_heads": None, "index_head_dim": None})
    one = range(layer, layer + 1)
    for tp in (1, 8):
        with_indexer = lora_bytes(arch, tp, one, False, False, tp, False, version, 1, 16, 1.0)
        assert with_indexer - lora_bytes(plain, tp, one, False, False, tp, False, version, 1, 16, 1.0) == 16 * elements


def test_lora_on_the_hybrids_vllm_serves_with_lora_is_planned() -> None:
    est = estimate(get_model(NEMOTRON), get_gpu("H100-SXM-80GB"),
                   ServingConfig(max_model_len=8192, max_loras=2, max_lora_rank=16))
    assert est.binding_rank.lora_gib > 0 and est.fits


# Nemotron-3-Nano's MoE block (layer 1; h 2,688, non-gated relu2): shared expert of 3,712 (up A 2,688 + B 3,712,
# down A 3,712 + B 2,688 = 12,800) and 128 experts of 1,856 (w1 A 2,688 + B 1,856, w2 A 1,856 + B 2,688 = 9,088)
NEMOTRON_MOE = 12_800 + 128 * 9_088


@pytest.mark.parametrize(("model", "layer", "version", "elements"), [
    # Qwen3-30B-A3B before 0.12: attention 17,408 (qkv 3 x 2,048 + 4,096 + 2 x 512, o_proj 4,096 + 2,048) and
    # the gate, a ReplicatedLinear in every release: 2,048 + 128
    ("Qwen/Qwen3-30B-A3B", 0, "0.10.1", 17_408 + 2_048 + 128),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 1, "0.14", 2_688 + 128 + NEMOTRON_MOE),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 1, "0.16", NEMOTRON_MOE),  # non-gated MoE: gate left alone
])
def test_the_router_gate_slot(model: str, layer: int, version: str, elements: int) -> None:
    arch = get_model(model)
    assert lora_bytes(arch, 1, range(layer, layer + 1), False, False, 1, False, version, 1, 16, 1.0) == 16 * elements


def test_an_awq_qwen35_keeps_in_proj_ba_whole_from_0_27() -> None:
    """Qwen3.5-9B (32 value heads): at TP 2 in_proj_ba's B holds 2 x 32 / 2 = 32 rows a unit of rank; an AWQ
    or GPTQ checkpoint keeps the layer whole from 0.27.1 (Marlin's 64-output minimum), so 64: 32 more."""
    base = get_model("Qwen/Qwen3.5-9B")
    awq = base.model_copy(update={"quantization": representative("int4")})
    assert awq.quantization is not None and awq.quantization.method == "awq"

    def layer0(arch, version: str) -> float:
        return lora_bytes(arch, 2, range(1), False, False, 2, False, version, 1, 16, 1.0) / 16
    assert layer0(awq, "0.33") - layer0(base, "0.33") == 32
    assert layer0(awq, "0.21") == layer0(base, "0.21")  # before maybe_disable_tp (read in 0.21.0 and 0.27.1)


@pytest.mark.parametrize("release, ok", [("0.10", False), ("0.11", False), ("0.12", True), ("0.33", True)])
def test_rank_one_is_a_choice_from_012(release: str, ok: bool) -> None:
    """Up to 0.11 LoRAConfig allows possible_max_ranks = (8, 16, 32, 64, 128, 256, 320, 512); 0.12 made the
    field a Literal (MaxLoRARanks) that adds 1. A plan must not print --max-lora-rank 1 for 0.11."""
    from gpuopt.physics.lora import rank_problem

    problem = rank_problem(1, release)
    assert (problem is None) is ok
    if not ok:
        assert problem == (f"--max-lora-rank must be one of 8, 16, 32, 64, 128, 256, 320, 512 (got 1): vLLM "
                           f"{release}'s LoRAConfig accepts only these")
    assert rank_problem(16, release) is None and rank_problem(2, release) is not None

"""Which TP sizes vLLM shards a block-FP8 MoE checkpoint's experts over (physics/quant_sharding.py): whole
128 x 128 blocks per GPU before 0.29, scales refined to gcd(128, slice, hidden) >= 32 from 0.29."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.physics import quant_sharding
from gpuopt.physics.resolution import resolve_model

QWEN235 = "Qwen/Qwen3-235B-A22B-FP8"  # 128 experts of 1,536, hidden 4,096
GLM_AIR = "zai-org/GLM-4.5-Air-FP8"  # 128 experts of 1,408, hidden 4,096
MINIMAX = "MiniMaxAI/MiniMax-M2"  # natively block FP8: 1,536, hidden 3,072


@pytest.mark.parametrize(("model", "precision", "tp", "dp", "ep", "release", "slice_"), [
    (QWEN235, "fp8", 8, 1, False, "0.28", 192),  # 1,536 / 8 = 192: not whole blocks, no refinement yet
    (QWEN235, "fp8", 8, 1, False, "0.29", None),  # gcd(128, 192, 4,096) = 64 >= 32: refined
    (QWEN235, "fp8", 4, 1, False, "0.28", None),  # 384 = 3 blocks
    (QWEN235, "fp8", 4, 2, False, "0.28", 192),  # experts split over TP x DP = 8
    (QWEN235, "fp8", 8, 1, True, "0.28", None),  # expert parallel: whole experts, 1,536 = 12 blocks
    (GLM_AIR, "fp8", 8, 1, False, "0.33", 176),  # gcd(128, 176, 4,096) = 16 < 32
    (GLM_AIR, "fp8", 4, 1, False, "0.33", None),  # gcd(128, 352, 4,096) = 32
    (GLM_AIR, "fp8", 4, 1, False, "0.28", 352),
    (MINIMAX, "fp8", 8, 1, False, "0.27", 192),  # the native FP8 checkpoint
    (MINIMAX, "bf16", 8, 1, False, "0.27", None),  # not block FP8: nothing to align
    ("Qwen/Qwen3-32B-FP8", "fp8", 16, 1, False, "0.28", None),  # dense: no experts to split
    ("Qwen/Qwen3-30B-A3B", "bf16", 16, 1, False, "0.28", None),  # unquantized MoE
])
def test_expert_slices_must_hold_whole_fp8_blocks(model: str, precision: str, tp: int, dp: int, ep: bool,
                                                  release: str, slice_: int | None) -> None:
    why = quant_sharding.tp_problem(resolve_model(model), precision, tp, dp, ep, release)  # type: ignore[arg-type]
    if slice_ is None:
        assert why is None
    else:
        assert why is not None and f"= {slice_:,}, is not a multiple of 128" in why


def test_fit_refuses_the_tp_vllm_cannot_shard_and_names_the_way_out() -> None:
    args = ["fit", "--model", QWEN235, "--gpu", "H100-SXM-80GB", "--tp", "8", "--max-model-len", "8192"]
    refused = CliRunner().invoke(cli, [*args, "--vllm-version", "0.28"])
    assert refused.exit_code == 2
    assert refused.stderr.strip().endswith(
        "error: --tp 8: Qwen/Qwen3-235B-A22B-FP8's 128 x 128 FP8 blocks: each expert's intermediate size, 1,536 / "
        "TP 8 = 192, is not a multiple of 128 (vLLM 0.28 needs whole blocks (it refines them from 0.29)); use a TP "
        "whose slice is, or --enable-expert-parallel")
    assert CliRunner().invoke(cli, [*args, "--vllm-version", "0.28", "--enable-expert-parallel"]).exit_code == 0
    assert CliRunner().invoke(cli, [*args, "--vllm-version", "0.29"]).exit_code == 0


def _qwen25_14b(tmp_path, intermediate: int, quant: dict[str, object]):  # type: ignore[no-untyped-def]
    """A Qwen2.5-14B-shaped checkpoint directory (hidden 5,120, 40 heads of 128, intermediate as given)."""
    import json
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120,
        "intermediate_size": intermediate, "num_attention_heads": 40, "num_key_value_heads": 8,
        "num_hidden_layers": 48, "max_position_embeddings": 32768, "vocab_size": 152064, "torch_dtype": "float16",
        "rms_norm_eps": 1e-6, "rope_theta": 1e6, "tie_word_embeddings": False, "quantization_config": quant}))
    return tmp_path


AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


@pytest.mark.parametrize(("intermediate", "quant", "tp", "per_gpu"), [
    (13824, AWQ, 8, 1728),  # Qwen2.5-14B-Instruct-AWQ: 1,728 = 13.5 groups of 128 (QA: "fits: yes" at TP 8)
    (13824, AWQ, 4, None),  # 3,456 = 27 groups
    (29568, AWQ, 8, 3696),  # Qwen2.5-72B's own 29,568 at TP 8 ...
    (29696, AWQ, 8, None),  # ... which its AWQ repository pads to 29,696 (232 groups of 128) for TP 8
    (13824, {**AWQ, "group_size": -1}, 8, None),  # one group per output channel: nothing straddles a GPU
    (13824, {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": True}, 8, None),
    (13824, {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}, 8, 1728),
    (13824, {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}}}, 8, 1728),
])
def test_a_grouped_checkpoints_row_parallel_slices_must_hold_whole_groups(tmp_path, intermediate: int,  # type: ignore[no-untyped-def]
                                                                          quant: dict[str, object], tp: int,
                                                                          per_gpu: int | None) -> None:
    """vLLM 0.28 refuses a row-parallel slice that cuts a quantization group (auto_awq.py create_weights: "The
    input size is not aligned with the quantized weight shape"; verify_group_size_divides_partition for GPTQ and
    W4A16); act-order GPTQ repeats its scales on every rank instead."""
    arch = resolve_model(str(_qwen25_14b(tmp_path, intermediate, quant)))
    why = quant_sharding.group_problem(arch, tp)
    if per_gpu is None:
        assert why is None
    else:
        assert why is not None and f"down_proj's {intermediate:,} inputs / TP {tp} = {per_gpu:,} per GPU" in why


def test_fit_refuses_a_tp_that_cuts_awq_groups(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = _qwen25_14b(tmp_path, 13824, AWQ)
    runner = CliRunner()
    refused = runner.invoke(cli, ["fit", "--model", str(path), "--gpu", "L4-24GB", "--tp", "8", "--max-model-len",
                                  "8192"])
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"error: --tp 8: {path.name}'s AWQ groups of 128: down_proj's 13,824 inputs / TP 8 = 1,728 per GPU, not a "
        "multiple of 128, which vLLM refuses at start-up; use a TP that keeps whole groups"]
    assert runner.invoke(cli, ["fit", "--model", str(path), "--gpu", "L4-24GB", "--tp", "4", "--max-model-len",
                               "8192"]).exit_code == 0


def test_a_checkpoint_resolved_offline_from_the_table_is_not_judged_on_the_base_models_sizes(monkeypatch, tmp_path):
    """Review: Qwen/Qwen2.5-72B-Instruct-AWQ resolved offline (the base model's 29,568 intermediate with the
    table's AWQ group 128) was refused at TP 8, where the repository's own config pads to 29,696 (232 groups a
    GPU at TP 8) and Qwen serves it so."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    arch = resolve_model("Qwen/Qwen2.5-72B-Instruct-AWQ")
    assert arch.quantization is not None and arch.quantization.scheme == "awq"
    assert quant_sharding.group_problem(arch, 8) is None

"""vLLM 0.8.0-0.10.0: the V1 engine's first releases (read in their wheels, 2026-12-02). Expected values are
worked by hand from the profile data and the rules in gpuopt/physics/vllm_profile.py."""

from __future__ import annotations

import pytest

from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import GIB, estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.vllm_profile import get_profile

LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(("release", "gpu", "gib", "defaults"), [
    ("0.8", "L40S-48GB", 44.4, (1024, 2048)),  # by name: only "h100"/"h200" get 8192; 1024 sequences everywhere
    ("0.8.3", "H100-SXM-80GB", 79.19, (1024, 8192)),
    ("0.8.3", "GH200-96GB", 94.5, (1024, 8192)),  # "h200" is in "gh200"
    ("0.8.5", "A100-SXM-80GB", 79.15, (1024, 8192)),  # >= 70 GiB, and no A100 exception yet
    ("0.9", "A100-SXM-80GB", 79.15, (256, 2048)),  # the exception from 0.9.0
    ("0.9", "H100-SXM-80GB", 79.19, (1024, 8192)),
])
def test_batch_defaults(release: str, gpu: str, gib: float, defaults: tuple[int, int]) -> None:
    assert get_profile(release).scheduler_defaults(gpu, gib) == defaults


def test_0_9_0_also_loses_the_memory_held_before_start_up_and_the_input_buffers() -> None:
    """0.8.0-0.9.0 subtract the absolute torch peak and all non-torch memory on the device: against 0.9.1 (same
    defaults on an H100: 8192 tokens, 1024 sequences) the KV cache is smaller by the start-up memory (0.56 GiB on
    one GPU) plus the runner's inputs_embeds (8192 tokens x 4096 hidden x 2 B = 0.0625 GiB)."""
    arch, gpu = get_model(LLAMA8B), get_gpu("H100-SXM-80GB")
    old = estimate(arch, gpu, ServingConfig(max_model_len=8192, vllm_version="0.9")).binding_rank
    new = estimate(arch, gpu, ServingConfig(max_model_len=8192, vllm_version="0.9.1")).binding_rank
    assert new.kv_cache_gib - old.kv_cache_gib == pytest.approx(0.56 + 8192 * 4096 * 2 / GIB)
    assert old.non_torch_gib - new.non_torch_gib == pytest.approx(0.56)


def test_sliding_window_layers_are_cached_at_full_length_before_0_9_1() -> None:
    """gemma-2-9b (21 sliding + 21 full layers): 0.9.0 unifies the sliding layers to full attention -- one group of
    42 layers, tokens = blocks x 16 --; 0.9.1's hybrid allocator keeps two groups."""
    arch, gpu = get_model("google/gemma-2-9b-it"), get_gpu("H100-SXM-80GB")
    old = estimate(arch, gpu, ServingConfig(max_model_len=8192, vllm_version="0.9"))
    new = estimate(arch, gpu, ServingConfig(max_model_len=8192, vllm_version="0.9.1"))
    assert [(g.kind, g.layers) for g in old.binding_rank.kv_groups] == [("full", 42)]
    assert {g.kind for g in new.binding_rank.kv_groups} == {"full", "sliding"}
    assert old.kv_cache_tokens == old.binding_rank.num_blocks * 16
    assert new.max_concurrency > old.max_concurrency


@pytest.mark.parametrize(("release", "gpu", "changes", "said"), [
    ("0.8", "H100-SXM-80GB", {"kv_cache_dtype": "fp8"}, "an fp8 KV cache on H100-SXM-80GB"),
    ("0.8.3", "L40S-48GB", {"kv_cache_dtype": "fp8"}, "V1 takes it on sm90 in this release"),
    ("0.10.1", "RTX4090-24GB", {"kv_cache_dtype": "fp8"}, "V1 takes it on sm90 and sm100"),
    ("0.10.1", "T4-16GB", {}, "compute capability 7.5 < 8.0"),
    ("0.9.1", "H100-SXM-80GB", {"precision": "fp32"}, "fp32 weights"),
    ("0.9", "H100-SXM-80GB", {"pipeline_parallel": 2}, "pipeline parallelism with the default executor"),
    ("0.8", "H100-SXM-80GB", {"max_loras": 1}, "LoRA"),
])
def test_what_starts_the_v0_engine_is_refused(release: str, gpu: str, changes: dict[str, object], said: str) -> None:
    cfg = ServingConfig(max_model_len=4096, vllm_version=release, **changes)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="starts its V0 engine for") as refused:
        estimate(get_model(LLAMA8B), get_gpu(gpu), cfg)
    assert said in str(refused.value)


@pytest.mark.parametrize(("release", "gpu", "changes"), [
    ("0.8.3", "H100-SXM-80GB", {"kv_cache_dtype": "fp8"}),  # FlashAttention 3 on Hopper
    ("0.10", "B200-180GB", {"kv_cache_dtype": "fp8"}),
    ("0.9.2", "H100-SXM-80GB", {"precision": "fp32"}),
    ("0.9.1", "H100-SXM-80GB", {"pipeline_parallel": 2}),
    ("0.8.3", "H100-SXM-80GB", {"max_loras": 1}),
    ("0.11", "T4-16GB", {"precision": "fp16"}),  # V1 only from 0.11: nothing falls back
])
def test_what_runs_on_v1(release: str, gpu: str, changes: dict[str, object]) -> None:
    cfg = ServingConfig(max_model_len=4096, vllm_version=release, **changes)  # type: ignore[arg-type]
    model = "ibm-granite/granite-3.1-2b-instruct" if gpu == "T4-16GB" else LLAMA8B  # 8B does not fit a T4
    assert estimate(get_model(model), get_gpu(gpu), cfg).kv_cache_tokens > 0


def test_a_mamba_hybrid_starts_v0_up_to_0_10_1() -> None:
    nemotron = get_model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    with pytest.raises(InputError, match="Mamba / linear-attention layers"):
        estimate(nemotron, get_gpu("H100-SXM-80GB"), ServingConfig(max_model_len=8192, vllm_version="0.10.1"))


def test_solve_says_a_v0_shape_is_not_modelled_rather_than_refused_by_vllm() -> None:
    from gpuopt.inputs.workload import Workload
    from gpuopt.planner.candidates import Evaluator, Shape
    w = Workload.model_validate({"name": "w", "model": LLAMA8B, "concurrency": 4, "input_tokens": 500,
                                 "output_tokens": 100, "max_model_len": 4096})
    ev = Evaluator(w, get_model(LLAMA8B), 4096, "0.10.1")
    verdict = ev._evaluate(Shape("T4-16GB", "pcie", 1, 1, "fp16", "auto"))
    assert not verdict.feasible and verdict.reason_kind == "fit"
    assert verdict.reason is not None and verdict.reason.startswith("not modelled: vLLM 0.10.1 starts its V0 engine")

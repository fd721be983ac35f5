"""Which model classes a vLLM release serves, and with LoRA (physics/vllm_support.py, the table read from the
wheels by tools/extract_vllm_lora_models.py)."""

from __future__ import annotations

import csv
import importlib.util
import json
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.datafiles import data_text
from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import from_hf_dict, get_model, registry
from gpuopt.physics.lora import lora_bytes
from gpuopt.physics.memory import estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.physics.vllm_support import lora_embedding_buffers, release_problem, scanned_release, status

M1 = "MiniMaxAI/MiniMax-M1-80k"  # MiniMaxM1ForCausalLM: registered up to 0.21's scan, "until 0.23.0" from 0.27.1


@pytest.mark.parametrize(("asked", "scanned"), [
    ("0.33", "0.33.0"), ("0.19", "0.19.0"), ("0.15", "0.14.0"), ("0.10.1", "0.10.1.1"), ("0.9", "0.9.0"),
    ("0.9.2", "0.9.2"), ("0.8.4", "0.8.3"), ("0.7", "0.8.0"),
    ("0.34", "0.34.0"), ("0.40", "0.34.0"), ("0.28.1rc1.dev580+g385dce36b", "0.28.0"),
])
def test_a_release_reads_the_newest_scan_not_newer_than_it(asked: str, scanned: str) -> None:
    assert scanned_release(asked) == scanned


def test_a_class_dropped_without_notice_names_the_releases_that_served_it() -> None:
    """Ernie4_5_ForCausalLM is registered in the 0.9.2-0.10.0 scans only (later releases name it otherwise)."""
    arch = get_model("Qwen/Qwen3.5-9B").model_copy(update={"hf_architecture": "Ernie4_5_ForCausalLM"})
    assert release_problem(arch, "0.10") is None
    assert release_problem(arch, "0.33") == (
        "vLLM 0.33 does not implement Qwen/Qwen3.5-9B's class Ernie4_5_ForCausalLM (vLLM registered it from 0.9.2 "
        "to 0.10.0); plan it with --vllm-version 0.10 or older")


def test_a_class_vllm_dropped_is_refused_with_the_newest_modelled_release_that_served_it() -> None:
    arch = get_model(M1)
    assert status(arch, "0.21") == "no"  # served (without LoRA)
    assert status(arch, "0.27") == "until 0.23.0"
    assert release_problem(arch, "0.21") is None
    problem = release_problem(arch, "0.33")
    assert problem is not None
    # gpuopt's profiles are 0.10.1, 0.11, 0.14, 0.17, 0.18, 0.20-0.29 ...: 0.23 is the newest <= 0.23.0
    assert "until 0.23.0" in problem and problem.endswith("plan it with --vllm-version 0.23 or older")
    with pytest.raises(InputError, match="no longer implements"):
        estimate(arch, get_gpu("H100-SXM-80GB"), ServingConfig(tensor_parallel=8, max_model_len=8192))


def test_llama_3_2_vision_is_refused_where_vllm_dropped_mllama() -> None:
    """Its registry row had no class, so no release check ran: fit approved it on 0.33, which has no Mllama."""
    arch = get_model("meta-llama/Llama-3.2-11B-Vision-Instruct")
    assert arch.hf_architecture == "MllamaForConditionalGeneration"
    problem = release_problem(arch, "0.33")
    assert problem is not None and "until 0.10.2" in problem and problem.endswith("--vllm-version 0.10.1 or older")
    assert release_problem(arch, "0.10.1") is None


def test_a_class_newer_than_the_release_names_the_first_release_that_serves_it() -> None:
    arch = get_model("Qwen/Qwen3.5-9B")  # Qwen3_5ForConditionalGeneration
    assert release_problem(arch, "0.14") == ("vLLM 0.14 does not implement Qwen/Qwen3.5-9B's class "
                                             "Qwen3_5ForConditionalGeneration (it is registered from vLLM 0.17.0)")
    assert release_problem(arch, "0.17") is None


def test_a_model_whose_class_is_not_known_is_not_checked() -> None:
    arch = get_model("Qwen/Qwen3-32B")  # no class in ../shared/data nor in vLLM's test registry
    assert arch.hf_architecture is None
    assert status(arch, "0.33") is None and release_problem(arch, "0.10.1") is None
    assert lora_embedding_buffers(arch, "0.33")  # counted: the conservative side


def test_a_class_no_release_implements_is_left_to_vllms_transformers_backend() -> None:
    arch = from_hf_dict(_small_config("MyCustomForCausalLM"), "local/custom")
    assert status(arch, "0.33") == ""  # not registered ...
    assert release_problem(arch, "0.33") is None  # ... but no release would do better: not refused
    result = CliRunner().invoke(cli, ["models", "show", "--json", "Qwen/Qwen3.5-9B"])
    assert json.loads(result.stdout)["vllm_support"] == {"release": "0.33.0", "status": "lora", "problem": None}


def test_a_config_json_carries_its_class() -> None:
    arch = from_hf_dict(_small_config("Qwen3ForCausalLM"), "local/qwen3")
    assert arch.hf_architecture == "Qwen3ForCausalLM"
    assert status(arch, "0.14") == "lora" and status(arch, "0.16") == "lora+embedding"


def _small_config(cls: str) -> dict[str, object]:
    return {"architectures": [cls], "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 4,
            "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 32000,
            "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


def test_lora_on_a_class_without_lora_support_is_refused_by_name() -> None:
    arch = from_hf_dict(_small_config("FalconForCausalLM"), "local/falcon-like")
    cfg = ServingConfig(max_model_len=4096, max_loras=1, max_lora_rank=16)
    with pytest.raises(InputError, match="FalconForCausalLM .* does not support LoRA"):
        estimate(arch, get_gpu("L4-24GB"), cfg)
    # without LoRA the same model plans
    assert estimate(arch, get_gpu("L4-24GB"), ServingConfig(max_model_len=4096)).fits


def test_the_embedding_gets_lora_buffers_only_where_the_class_declares_embedding_modules() -> None:
    # Qwen3 declares embedding_modules from v0.16 (0.16.0 wheel), not in 0.14. Qwen3-4B: vocab 151,936,
    # h 2,560, tied: the embedding and the re-wrapped tied head are 2 x (151,936 + 2,560) x rank elements
    arch = get_model("Qwen/Qwen3-4B").model_copy(update={"hf_architecture": "Qwen3ForCausalLM"})
    with_emb = lora_bytes(arch, 1, range(36), True, True, 1, False, "0.16", 1, 16, 2.0)
    without = lora_bytes(arch, 1, range(36), True, True, 1, False, "0.14", 1, 16, 2.0)
    assert with_emb - without == 2 * (151_936 + 2_560) * 16 * 2
    # an unknown class keeps them (conservative), the same bytes as the declaring release
    unknown = get_model("Qwen/Qwen3-4B")
    assert lora_bytes(unknown, 1, range(36), True, True, 1, False, "0.14", 1, 16, 2.0) == with_emb


def test_every_registry_class_is_one_vllm_registers_in_some_scanned_release() -> None:
    rows = {r["architecture"]: r for r in csv.DictReader(data_text("vllm_architectures.csv").splitlines())}
    served = ("no", "lora", "lora+embedding")
    for arch in registry().values():
        if arch.hf_architecture is not None:
            assert any(v in served for v in rows[arch.hf_architecture].values()), arch.hf_id


def test_fit_refuses_a_release_without_the_models_class_in_one_line() -> None:
    result = CliRunner().invoke(cli, ["fit", "--model", M1, "--gpu", "H100-SXM-80GB", "--tp", "8",
                                      "--max-model-len", "8192"])
    assert result.exit_code == 2
    assert result.stderr.count("error:") == 1 and "MiniMaxM1ForCausalLM" in result.stderr
    ok = CliRunner().invoke(cli, ["fit", "--model", M1, "--gpu", "H100-SXM-80GB", "--tp", "8",
                                  "--max-model-len", "8192", "--vllm-version", "0.21"])
    assert ok.exit_code in (0, 1) and "MiniMaxM1ForCausalLM" not in ok.stderr


def test_solve_refuses_a_workload_whose_model_the_release_does_not_serve(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent(f"""\
        schema_version: 1
        workloads:
          - name: big
            model: {M1}
            requests_per_second: 1
            input_tokens: 1000
            output_tokens: 200
        """))
    result = CliRunner().invoke(cli, ["solve", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: {path}:4: workloads.0.model: vLLM 0.33 no longer implements")


def _extractor() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "extract_vllm_lora_models", Path(__file__).parents[1] / "tools" / "extract_vllm_lora_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_extractor_reads_lora_support_through_bases_imports_and_platform_packages(tmp_path: Path,
                                                                                    capsys: pytest.CaptureFixture[str]
                                                                                    ) -> None:
    models = tmp_path / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (models / "interfaces.py").write_text("class SupportsLoRA:\n    supports_lora = True\n")
    (models / "llama.py").write_text(textwrap.dedent("""\
        from .interfaces import SupportsLoRA
        class LlamaForCausalLM(nn.Module, SupportsLoRA):
            embedding_modules = {"embed_tokens": "input_embeddings"}
        class Qwen2ForCausalLM(nn.Module, SupportsLoRA):
            embedding_modules = {}
        """))
    (models / "mistral.py").write_text("from .llama import LlamaForCausalLM\n"
                                       "class MistralForCausalLM(LlamaForCausalLM):\n    pass\n")
    (models / "falcon.py").write_text("class FalconForCausalLM(nn.Module):\n    pass\n")
    (models / "config.py").write_text("class DeepseekV32ForCausalLM(VerifyAndUpdateConfig):\n    pass\n")
    package = tmp_path / "vllm" / "models" / "deepseek_v32"
    (package / "nvidia").mkdir(parents=True)
    (package / "__init__.py").write_text("if cuda:\n    from .nvidia.model import V32 as DeepseekV32ForCausalLM\n")
    (package / "nvidia" / "model.py").write_text("from vllm.model_executor.models.llama import Qwen2ForCausalLM\n"
                                                 "class V32(Qwen2ForCausalLM):\n    pass\n")
    (models / "registry.py").write_text(textwrap.dedent("""\
        _TEXT_GENERATION_MODELS = {
            "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
            "MistralForCausalLM": ("mistral", "MistralForCausalLM"),
            "Qwen2ForCausalLM": ("llama", "Qwen2ForCausalLM"),
            "FalconForCausalLM": ("falcon", "FalconForCausalLM"),
            "DeepseekV32ForCausalLM": ("vllm.models.deepseek_v32", "DeepseekV32ForCausalLM"),
        }
        _PREVIOUSLY_SUPPORTED_MODELS = {"MllamaForConditionalGeneration": "0.10.2"}
        _OOT_SUPPORTED_MODELS = {"BartModel": "https://example.invalid/plugin"}
        """))
    _extractor().main([f"9.9.9={tmp_path}"])
    rows = {r["architecture"]: r["9.9.9"] for r in csv.DictReader(capsys.readouterr().out.splitlines())}
    assert rows == {"LlamaForCausalLM": "lora+embedding", "MistralForCausalLM": "lora+embedding",
                    "Qwen2ForCausalLM": "lora", "FalconForCausalLM": "no", "DeepseekV32ForCausalLM": "lora",
                    "MllamaForConditionalGeneration": "until 0.10.2", "BartModel": "plugin"}


# ---- 0.22-0.28: the V2 model runner keeps CUDA graphs out of the budget ---------------------------------


def _in_budget(model: str, release: str, precision: str | None = None) -> bool:
    est = estimate(get_model(model), get_gpu("H100-SXM-80GB"),
                   ServingConfig(tensor_parallel=8, max_model_len=8192, vllm_version=release,
                                 precision=precision))  # type: ignore[arg-type]
    return est.binding_rank.cuda_graph_in_budget


@pytest.mark.parametrize(("model", "release", "precision", "in_budget"), [
    # 0.27-0.28: any dense model runs V2 (graphs outside); MoE and hybrid models not listed run V1 (inside)
    ("ibm-granite/granite-3.1-8b-instruct", "0.27", None, False),
    ("Qwen/Qwen3-235B-A22B", "0.27", None, True),
    ("Qwen/Qwen3.5-9B", "0.28", None, True),  # a hybrid (Gated DeltaNet), not listed
    ("Qwen/Qwen1.5-MoE-A2.7B", "0.28", None, False),  # Qwen2MoeForCausalLM is listed
    # 0.22-0.23: listed dense classes only, unquantized; 0.24: listed classes, quantized too
    ("ibm-granite/granite-3.1-8b-instruct", "0.22", None, True),  # GraniteForCausalLM: not listed
    ("Qwen/Qwen1.5-MoE-A2.7B", "0.23", None, True),  # MoE: V1 in 0.23
    ("Qwen/Qwen1.5-MoE-A2.7B", "0.24", None, False),
    ("Qwen/Qwen1.5-MoE-A2.7B", "0.25", "fp8", False),
    ("Qwen/Qwen3.5-9B", "0.25", None, True),  # 0.25-0.26 keep every hybrid on V1
    ("ibm-granite/granite-3.1-8b-instruct", "0.21", None, True),  # before V2: the estimate is subtracted
    ("ibm-granite/granite-3.1-8b-instruct", "0.29", None, True),  # V2 estimates its graphs from 0.29
    ("ibm-granite/granite-3.1-8b-instruct", "0.19", None, False),  # before 0.20: never in the budget
])
def test_graphs_are_budgeted_unless_the_v2_runner_stubs_their_estimate(model: str, release: str,
                                                                       precision: str | None, in_budget: bool) -> None:
    assert _in_budget(model, release, precision) is in_budget


def test_the_v2_rule_of_0_22_refuses_quantized_and_unknown_classes() -> None:
    from gpuopt.physics.vllm_profile import get_profile
    runner = get_profile("0.22").v2_model_runner
    assert runner is not None
    assert runner.runs("Qwen3ForCausalLM", moe=False, hybrid=False, quantized=False)
    assert not runner.runs("Qwen3ForCausalLM", moe=False, hybrid=False, quantized=True)
    assert not runner.runs(None, moe=False, hybrid=False, quantized=False)  # unknown class: taken as unlisted


def test_a_dense_model_on_0_27_keeps_its_graph_estimate_in_the_budget_only_on_v1() -> None:
    """KV = budget - weights - activation - non-torch, the graphs outside (V2) vs minus the graphs (V1): the same
    model and shape differ by the CUDA-graph estimate and by the sampler's share of the activation peak (V2's
    greedy dummy pass holds bf16 logits, V1's the fp32 pipeline of the fitted factor)."""
    arch, gpu = get_model("Qwen/Qwen3-235B-A22B"), get_gpu("H100-SXM-80GB")
    cfg = ServingConfig(tensor_parallel=8, max_model_len=8192, vllm_version="0.27")
    v1 = estimate(arch, gpu, cfg).binding_rank
    v2 = estimate(arch.model_copy(update={"hf_architecture": "Qwen2MoeForCausalLM"}), gpu, cfg).binding_rank
    # 1,024 rows x 151,936 vocabulary: 3.2347 x 4 B (fitted, fp32 pipeline) against 2 B (bf16 logits)
    assert v1.activation_gib - v2.activation_gib == pytest.approx(1.874799 - 0.289795, abs=1e-5)
    assert v1.kv_cache_gib == pytest.approx(v2.kv_cache_gib - v1.cuda_graph_gib
                                            - (v1.activation_gib - v2.activation_gib))


@pytest.mark.parametrize(("release", "activation_gib"), [
    # 0.27 and 0.29-0.32: the V2 runner's greedy dummy sampler holds the logits in bf16 --
    # forward 0.2092 + 1.9864 x 2,048 tokens x 2,560 x 2 B = 0.228598, logits 256 x 151,936 x 2 B = 0.072449
    ("0.27", 0.301047), ("0.29", 0.301047), ("0.32", 0.301047),
    # 0.33: its warmup-parameter pass runs the fp32 pipeline: 3.2347 x 256 x 151,936 x 4 B = 0.468700
    ("0.33", 0.697298),
    # 0.21: the V1 runner (no V2 before 0.22)
    ("0.21", 0.697298),
])
def test_the_v2_runner_profiles_a_greedy_sampler_until_0_33(release: str, activation_gib: float) -> None:
    """Qwen3-4B on an RTX 4090 (2,048 batched tokens, 256 sequences): vllm_memory_observed.csv lines 94 and 82
    log 0.15 and 0.25 GiB on 0.27 (warm compile cache), where the V1 figure would be 0.70."""
    est = estimate(get_model("Qwen/Qwen3-4B"), get_gpu("RTX4090-24GB"),
                   ServingConfig(max_model_len=8192, vllm_version=release))
    assert est.binding_rank.activation_gib == pytest.approx(activation_gib, abs=1e-5)


def test_from_0_29_every_model_runs_v2_except_deepseek_sparse_on_amd_until_0_32() -> None:
    from gpuopt.physics.vllm_profile import get_profile
    for release in ("0.29", "0.31"):
        runner = get_profile(release).v2_model_runner
        assert runner is not None and runner.profiles_graphs
        assert runner.runs("Qwen3MoeForCausalLM", moe=True, hybrid=False, quantized=True)
        assert runner.runs("Qwen3NextForCausalLM", moe=True, hybrid=True, quantized=False)
        assert runner.runs("DeepseekV32ForCausalLM", moe=True, hybrid=False, quantized=True)
        assert not runner.runs("DeepseekV32ForCausalLM", moe=True, hybrid=False, quantized=True, rocm=True)
    runner = get_profile("0.32").v2_model_runner
    assert runner is not None
    assert runner.runs("DeepseekV32ForCausalLM", moe=True, hybrid=False, quantized=True, rocm=True)


@pytest.mark.parametrize(("release", "max_loras", "warned"), [
    ("0.27", 1, True), ("0.31", 16, True),  # LoRA on the V2 runner's greedy profiling
    ("0.27", 0, False),  # no LoRA: no cold-compile peak logged
    ("0.33", 1, False), ("0.21", 1, False),  # the fitted fp32 sampler term (0.70 GiB here) sits near the cold peak
])
def test_lora_on_the_v2_runner_warns_of_the_cold_compile_peak(release: str, max_loras: int, warned: bool) -> None:
    est = estimate(get_model("Qwen/Qwen3-4B"), get_gpu("RTX4090-24GB"),
                   ServingConfig(max_model_len=8192, vllm_version=release, max_loras=max_loras,
                                 max_lora_rank=16 if max_loras else 0))
    assert any("cold torch.compile" in w for w in est.warnings) is warned


@pytest.mark.parametrize(("gpu", "release", "refused"), [
    ("V100-32GB", "0.19", False), ("V100-32GB", "0.20", True), ("V100-32GB", "0.33", True),  # sm70 cubins to 0.19.1
    ("T4-16GB", "0.33", False), ("A10-24GB", "0.34", False),  # sm75 and up in every build
    ("MI300X-192GB", "0.33", False),  # ROCm builds are not these wheels
])
def test_a_release_runs_only_on_the_gpu_generations_its_wheels_carry_kernels_for(gpu: str, release: str,
                                                                                  refused: bool) -> None:
    from gpuopt.physics.serving_config import release_unsupported
    why = release_unsupported(get_gpu(gpu), release)
    assert (why is not None) is refused
    if refused:
        assert why == (f"vLLM {release}'s wheels carry no kernels for {gpu} (sm70): releases before 0.20 carry "
                       "them; plan it with one of those")


@pytest.mark.parametrize(("gpu", "release", "refused"), [
    # Blackwell: no sm100 cubins before 0.9.0, no sm120 before 0.9.2 (CUDA 12.4 builds of 0.8.x)
    ("B200-180GB", "0.8.5", "plan it with --vllm-version 0.9 or newer"), ("B200-180GB", "0.9", None),
    ("RTX5090-32GB", "0.9.1", "plan it with --vllm-version 0.9.2 or newer"), ("RTX5090-32GB", "0.9.2", None),
    ("A10-24GB", "0.9", None),  # sm86 runs the sm80 cubins (same major, lower minor)
])
def test_blackwell_needs_a_release_built_for_it(gpu: str, release: str, refused: str | None) -> None:
    from gpuopt.physics.serving_config import release_unsupported
    why = release_unsupported(get_gpu(gpu), release)
    assert why is None if refused is None else (why is not None and why.endswith(refused))


def test_the_planner_rejects_a_v100_on_the_default_release_as_a_gpu_it_cannot_run() -> None:
    from gpuopt.inputs.workload import Workload
    from gpuopt.planner.candidates import Evaluator
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    w = Workload(name="w", model=llama, requests_per_second=1, input_tokens=1000, output_tokens=200)
    [(shape, refused)] = Evaluator(w, get_model(llama), 8192, None).shapes(get_gpu("V100-32GB"), 1, "pcie")[:1]
    assert (refused.feasible, refused.reason_kind) == (False, "precision")
    assert refused.reason is not None and "wheels carry no kernels for V100-32GB" in refused.reason
    on_019 = dict(Evaluator(w, get_model(llama), 8192, "0.19").shapes(get_gpu("V100-32GB"), 1, "pcie"))
    assert any(e.feasible for e in on_019.values())

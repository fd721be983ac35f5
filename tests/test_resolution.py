"""Model resolution: registry -> local path -> Hugging Face cache -> Hub, and its bad-input lines.

The Hub is never contacted: conftest sets HF_HUB_OFFLINE=1 and an empty HF_HOME; the cache tests build the
Hugging Face cache layout (models--org--name/snapshots/<rev>/..., refs/main) in tmp_path from the config
copies in tests/fixtures/model_configs (taken from ../shared/data/model_configs).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import ConfigError, InputError
from gpuopt.physics import resolution
from gpuopt.physics.resolution import from_local_path, resolve_model

FIXTURES = Path(__file__).parent / "fixtures" / "model_configs"
REV = "0123456789abcdef0123456789abcdef01234567"


def hf_cache(root: Path, repo_id: str, files: dict[str, Path]) -> Path:
    """Lay files out as huggingface_hub's cache does (snapshot files, refs/main naming the revision)."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / REV
    snapshot.mkdir(parents=True)
    for name, source in files.items():
        shutil.copy(source, snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    return snapshot


def test_registry_id_resolves_without_files() -> None:
    arch = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    assert arch.hf_id == "meta-llama/Llama-3.1-8B-Instruct"
    assert arch.quantization is None


def test_a_cached_checkpoint_resolves_offline_without_the_registry(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    hf_cache(tmp_path, "Qwen/Qwen3-32B-FP8", {"config.json": FIXTURES / "Qwen__Qwen3-32B-FP8.json"})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    arch = resolve_model("Qwen/Qwen3-32B-FP8")
    assert arch.hf_id == "Qwen/Qwen3-32B-FP8"
    assert arch.quantization is not None
    assert arch.quantization.scheme == "fp8-block"
    # one fp32 scale per 128 x 128 block
    assert arch.quantization.bytes_per_weight == 1 + 4 / (128 * 128)
    assert arch.num_hidden_layers == 64 and arch.num_key_value_heads == 8


def test_a_cache_snapshot_passed_as_a_path_is_named_by_its_repository(tmp_path: Path) -> None:
    """QA: --model .../models--Qwen--Qwen3-32B-FP8/snapshots/REV printed "0123456789abcdef..." as the model."""
    snapshot = hf_cache(tmp_path, "Qwen/Qwen3-32B-FP8", {"config.json": FIXTURES / "Qwen__Qwen3-32B-FP8.json"})
    for path in (snapshot, snapshot / "config.json"):
        arch = from_local_path(path)
        assert arch.hf_id == "Qwen/Qwen3-32B-FP8" and arch.local_path == str(snapshot.resolve())
    bare = hf_cache(tmp_path / "bare", "gpt2", {"config.json": FIXTURES / "Qwen__Qwen3-32B-FP8.json"})
    assert from_local_path(bare).hf_id == "gpt2"  # a repository without an organisation (review)
    plain_folder = tmp_path / "my-model"
    shutil.copytree(snapshot, plain_folder)
    assert from_local_path(plain_folder).hf_id == "my-model"  # any other folder keeps its own name


def test_hf_home_is_honoured_when_hf_hub_cache_is_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hf_cache(tmp_path / "hub", "Qwen/Qwen3-32B-FP8", {"config.json": FIXTURES / "Qwen__Qwen3-32B-FP8.json"})
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert resolve_model("Qwen/Qwen3-32B-FP8").quantization is not None


def test_modelopt_side_file_in_the_cache_gives_the_quantization(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    hf_cache(tmp_path, "nvidia/Llama-3.1-70B-Instruct-FP8", {
        "config.json": FIXTURES / "nvidia__Llama-3.1-70B-Instruct-FP8.json",
        "hf_quant_config.json": FIXTURES / "nvidia__Llama-3.1-70B-Instruct-FP8.hf_quant_config.json"})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    q = resolve_model("nvidia/Llama-3.1-70B-Instruct-FP8").quantization
    assert q is not None
    assert (q.method, q.scheme, q.kv_cache_fp8, q.source) == ("modelopt", "modelopt-fp8", True,
                                                              "hf_quant_config.json")
    assert q.excluded_modules == ("lm_head",)


def test_local_directory_with_gptq_quantize_config(tmp_path: Path) -> None:
    base = json.loads((FIXTURES / "nvidia__Llama-3.1-70B-Instruct-FP8.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(base))
    shutil.copy(FIXTURES / "psyche__Qwen2-72B-Instruct-GPTQ-Int4.quantize_config.hf-page.json",
                tmp_path / "quantize_config.json")
    arch = from_local_path(tmp_path)
    q = arch.quantization
    assert q is not None and q.method == "gptq" and q.source == "quantize_config.json"
    # 4-bit weights + fp16 scale + 4-bit zero per 128 weights
    assert q.bytes_per_weight == 0.5 + 2 / 128 + 0.5 / 128
    assert arch.hf_id == tmp_path.name


def test_safetensors_index_gives_the_checkpoint_size(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "Qwen__Qwen3-32B-FP8.json", tmp_path / "config.json")
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 32_768_000_000},
                                                                       "weight_map": {}}))
    assert from_local_path(tmp_path).checkpoint_bytes == 32_768_000_000


def test_offline_and_not_cached_is_one_actionable_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(InputError) as err:
        resolve_model("Qwen/Qwen3-32B-EXL2")  # in neither the registry, the table nor the cache
    (line,) = err.value.problems
    assert "HF_HUB_OFFLINE" in line and "Qwen/Qwen3-32B-EXL2" in line
    assert "did you mean Qwen/Qwen3-32B" in line


@pytest.mark.parametrize(("error_name", "expected"), [
    ("GatedRepoError", "is gated on the Hugging Face Hub: accept its licence"),
    ("RepositoryNotFoundError", "is not on the Hugging Face Hub"),
    ("LocalEntryNotFoundError", "the Hub could not be reached"),
])
def test_hub_failures_are_one_line_each(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error_name: str,
                                        expected: str) -> None:
    import huggingface_hub
    import huggingface_hub.errors as hub_errors

    error_type = getattr(hub_errors, error_name)

    def refuse(*args: object, **kwargs: object) -> str:
        raise error_type.__new__(error_type)  # the exception type is what the resolver branches on

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(resolution, "hub_reachable", lambda: True)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    with pytest.raises(InputError) as err:
        resolution.resolve_model("acme/secret-model")
    (line,) = err.value.problems
    assert expected in line and "acme/secret-model" in line


def test_hub_download_lands_in_the_cache_and_uses_hf_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    seen: list[tuple[str, object, object]] = []

    def download(repo_id: str, filename: str, cache_dir: object = None, token: object = None) -> str:
        seen.append((filename, cache_dir, token))
        if filename != "config.json":
            raise EntryNotFoundError.__new__(EntryNotFoundError)
        snapshot = hf_cache(tmp_path, repo_id, {"config.json": FIXTURES / "Qwen__Qwen3-32B-FP8.json"})
        return str(snapshot / "config.json")

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.setattr(resolution, "hub_reachable", lambda: True)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    assert resolve_model("acme/Qwen3-32B-FP8-copy").quantization is not None
    assert seen[0] == ("config.json", tmp_path, "hf_test")
    # fetched once: offline, the cache answers
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model("acme/Qwen3-32B-FP8-copy").hf_id == "acme/Qwen3-32B-FP8-copy"


def test_no_dns_fails_at_once_without_calling_the_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub

    def no_dns(*args: object, **kwargs: object) -> object:
        raise OSError("Name or service not known")

    def never(*args: object, **kwargs: object) -> str:
        raise AssertionError("the Hub must not be called without DNS")

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(resolution.socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", never)
    with pytest.raises(InputError) as err:
        resolve_model("acme/some-model")
    (line,) = err.value.problems
    assert "could not be reached (no DNS answer for the Hub)" in line and "hf download acme/some-model" in line


# ---- bad input: one error line each, exit 2 --------------------------------------------------------


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, list(args))


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_directory_without_config_json(tmp_path: Path) -> None:
    result = run("models", "show", str(tmp_path))
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert "has no config.json" in line
    assert "Traceback" not in result.output


def test_corrupt_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 32,,}')
    result = run("fit", "--model", str(tmp_path), "--gpu", "H100-SXM-80GB")
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert "not valid JSON (line 1" in line


def test_config_missing_a_field_names_it(tmp_path: Path) -> None:
    cfg = json.loads((FIXTURES / "Qwen__Qwen3-32B-FP8.json").read_text())
    del cfg["vocab_size"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    result = run("models", "show", str(tmp_path))
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert "missing field 'vocab_size'" in line


def test_unknown_quantization_method(tmp_path: Path) -> None:
    cfg = json.loads((FIXTURES / "Qwen__Qwen3-32B-FP8.json").read_text())
    cfg["quantization_config"] = {"quant_method": "hqq-turbo", "bits": 3}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    result = run("models", "show", str(tmp_path))
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert "unknown quant_method 'hqq-turbo'" in line


def test_config_error_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        from_local_path(tmp_path)


def test_a_workload_names_a_checkpoint_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`model:` in a workload resolves like --model: an FP8 checkpoint found in the HF cache is planned in fp8
    only (its bf16 candidates are rejected: vLLM cannot serve an FP8 checkpoint as bf16)."""
    hf_cache(tmp_path / "hub", "Qwen/Qwen3-32B-FP8", {"config.json": FIXTURES / "Qwen__Qwen3-32B-FP8.json"})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    path = tmp_path / "w.yaml"
    path.write_text("""schema_version: 1
residency: us
workloads:
  - name: chat
    model: Qwen/Qwen3-32B-FP8
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
    max_model_len: 8192
""")
    result = run("solve", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["deployments"]
    assert {d["weight_precision"] for d in plan["deployments"]} == {"fp8"}


def test_hybrid_pattern_of_the_wrong_length_names_the_field(tmp_path: Path) -> None:
    cfg = json.loads((FIXTURES / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json").read_text())
    cfg["hybrid_override_pattern"] = cfg["hybrid_override_pattern"][:-1]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    result = run("models", "show", str(tmp_path))
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert "'hybrid_override_pattern' has 51 entries but num_hidden_layers is 52" in line


# ---- step 5: known quantized checkpoints, offline ----------------------------------------------------------


def test_a_known_quantized_checkpoint_resolves_offline_from_the_table() -> None:
    # conftest: HF_HUB_OFFLINE=1 and an empty cache; the table row says awq, 4-bit, awq_marlin
    arch = resolve_model("Qwen/Qwen3-32B-AWQ")
    base = resolve_model("Qwen/Qwen3-32B")
    assert arch.hf_id == "Qwen/Qwen3-32B-AWQ"
    assert (arch.num_hidden_layers, arch.hidden_size, arch.num_key_value_heads) == (64, 5120, 8)
    assert arch.total_params() == base.total_params()
    q = arch.quantization
    assert q is not None and (q.method, q.weight_bits, q.group_size) == ("awq", 4, 128)
    # 4-bit values + per group of 128 an fp16 scale and a packed 4-bit zero point: 0.5 + 2.5 / 128 B
    assert q.bytes_per_weight == pytest.approx(0.5 + 2.5 / 128)
    note = resolution.offline_description(arch)
    assert note is not None and "group size 128" in note and "hf download Qwen/Qwen3-32B-AWQ config.json" in note
    assert resolution.offline_description(base) is None
    assert resolve_model("qwen/qwen3-32b-awq").hf_id == "Qwen/Qwen3-32B-AWQ"  # Hub ids ignore case


@pytest.mark.parametrize(("repo_id", "files"), [
    ("Qwen/Qwen3-32B-FP8", {"config.json": "Qwen__Qwen3-32B-FP8.json"}),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", {
        "config.json": "nvidia__Llama-3.1-70B-Instruct-FP8.json",
        "hf_quant_config.json": "nvidia__Llama-3.1-70B-Instruct-FP8.hf_quant_config.json"}),
])
def test_the_tables_description_weighs_what_the_real_config_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 repo_id: str, files: dict[str, str]) -> None:
    from gpuopt.hardware import get_gpu
    from gpuopt.physics.memory import estimate
    from gpuopt.physics.serving_config import ServingConfig

    described = resolve_model(repo_id)  # offline, empty cache: the table
    assert resolution.offline_description(described) is not None
    hf_cache(tmp_path, repo_id, {name: FIXTURES / f for name, f in files.items()})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    real = resolve_model(repo_id)  # the cache comes first
    assert resolution.offline_description(real) is None
    if repo_id.startswith("nvidia/"):
        # the real hf_quant_config.json quantizes the KV cache; the table cannot say so, and the note says that
        assert real.quantization is not None and real.quantization.kv_cache_fp8
        assert described.quantization is not None and not described.quantization.kv_cache_fp8
        note = resolution.offline_description(described) or ""
        assert "kv_cache_quant_algo" in note and f"hf download {repo_id} hf_quant_config.json" in note
    cfg = ServingConfig(tensor_parallel=4, max_model_len=8192, vllm_version="0.19")
    gpu = get_gpu("H100-SXM-80GB")
    w_table, w_real = (estimate(a, gpu, cfg).ranks[0].weights_gib for a in (described, real))
    assert w_table == pytest.approx(w_real, rel=0.01)


@pytest.mark.parametrize("repo_id", [
    "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8",  # the row does not confirm the vLLM method
    "meta-llama/Llama-3.1-405B-Instruct-FP8",  # FBGEMM FP8: which modules stay 16-bit is in its config only
    "cognitivecomputations/DeepSeek-V3-0324-AWQ",  # its base model is not in the registry
])
def test_a_row_that_cannot_describe_its_checkpoint_is_not_guessed(repo_id: str) -> None:
    with pytest.raises(InputError) as err:
        resolve_model(repo_id)
    (line,) = err.value.problems
    assert repo_id in line and "HF_HUB_OFFLINE" in line


@pytest.mark.parametrize(("name", "expected"), [
    ("x" * 300, "unknown model"),  # too long a path for the OS: not a path, not a repository id
    ("a/" + "x" * 300, "is not a valid Hugging Face repository id"),  # huggingface_hub's rule: at most 96
    ("a/b c", "is not a valid Hugging Face repository id"),
])
def test_names_no_path_or_repository_can_have_are_one_input_error(name: str, expected: str) -> None:
    # found by benchmarks/fuzz.py: both were tracebacks (OSError ENAMETOOLONG, HFValidationError)
    with pytest.raises(InputError) as err:
        resolve_model(name)
    (line,) = err.value.problems
    assert expected in line


def _qwen3_32b_config(tmp_path: Path, **extra: object) -> Path:
    """The Qwen3-32B config (from its FP8 checkpoint's, without the quantization) with `extra` keys."""
    cfg = json.loads((FIXTURES / "Qwen__Qwen3-32B-FP8.json").read_text())
    cfg.pop("quantization_config", None)
    cfg.update(extra)
    folder = tmp_path / "cfg"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder / "config.json"


def test_a_float32_config_is_served_in_16_bits_as_vllm_does(tmp_path: Path) -> None:
    """vLLM's --dtype auto downcasts float32 checkpoints (bfloat16 from compute capability 8.0, float16 before):
    planned at fp32 the weights and KV were twice what vLLM loads (QA)."""
    from gpuopt.hardware import get_gpu
    from gpuopt.physics.memory import estimate
    from gpuopt.physics.serving_config import ServingConfig, default_precision

    arch = from_local_path(_qwen3_32b_config(tmp_path, torch_dtype="float32"))
    assert default_precision(arch) == "bf16"
    assert default_precision(arch, get_gpu("H100-SXM-80GB")) == "bf16"
    assert default_precision(arch, get_gpu("T4-16GB")) == "fp16"
    mem = estimate(arch, get_gpu("H100-SXM-80GB"), ServingConfig(tensor_parallel=4, max_model_len=8192))
    assert mem.config.precision == "bf16"
    # 64 layers x 2 x 8 KV heads x 128 x 2 B = 262,144 B a token, 65,536 on each of 4 GPUs
    rank = mem.binding_rank
    assert rank.kv_bytes_per_token == 64 * 2 * 8 * 128 * 2 // 4
    # 32.76 B parameters x 2 B over 4 GPUs: about 15.3 GiB each, not the 30.5 of float32 weights
    assert 14.5 < rank.weights_gib < 16.0


@pytest.mark.parametrize(("extra", "limit"), [
    ({}, 40960),
    ({"seq_length": 8192}, 8192),  # vLLM takes the smallest of its length keys
    ({"max_seq_len": 4096}, 4096),
    ({"model_max_length": 16384}, 16384),  # and a model_max_length over them (Command-R)
    ({"rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 32768}}, 32768),  # factor 1
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, 131072),
])
def test_the_context_limit_is_vllms(tmp_path: Path, extra: dict[str, object], limit: int) -> None:
    from gpuopt.physics.context_limit import model_max_len

    assert model_max_len(from_local_path(_qwen3_32b_config(tmp_path, **extra))) == limit


def test_a_registry_row_without_a_limit_takes_it_from_the_cached_config(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Qwen/QwQ-32B's registry row has no max_position_embeddings; the registry is tried first, so its cached
    config.json was never read and any max_model_len passed unchecked."""
    from gpuopt.physics.architecture import get_model
    from gpuopt.physics.context_limit import model_max_len

    row = get_model("Qwen/QwQ-32B")
    assert model_max_len(row) is None
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert model_max_len(resolve_model("Qwen/QwQ-32B")) is None  # nothing cached: the row as it is
    hf_cache(tmp_path, "Qwen/QwQ-32B", {"config.json": _qwen3_32b_config(tmp_path, max_position_embeddings=40960)})
    arch = resolve_model("Qwen/QwQ-32B")
    assert model_max_len(arch) == 40960
    assert arch.model_copy(update={"max_position_embeddings": None}) == row  # the rest of the row stands


def test_a_plan_says_when_its_models_context_limit_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "w.yaml"
    path.write_text("""schema_version: 1
residency: us
workloads:
  - name: chat
    model: Qwen/QwQ-32B
    requests_per_second: 0.2
    input_tokens: 500
    output_tokens: 100
    max_model_len: 300000
    precisions: [fp8]
""")
    result = run("solve", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    assert any(w.startswith("workload chat: the context limit of Qwen/QwQ-32B is unknown to gpuopt, so max_model_len "
                            "(300,000) is not checked against it") for w in json.loads(result.stdout)["warnings"])


def test_a_config_in_a_workload_brings_the_quantization_files_beside_it(tmp_path: Path) -> None:
    """`model: {config, name}` read config.json alone: a ModelOpt NVFP4 checkpoint was planned as fp8 with
    `--quantization fp8`, which vLLM refuses for it (QA). The files beside the config are read as a checkpoint
    directory's are; the name stays the model served."""
    from gpuopt.inputs.workload import Workload
    from gpuopt.planner.candidates import resolve_model as workload_model

    folder = tmp_path / "nemo"
    folder.mkdir()
    shutil.copy(FIXTURES / "nvidia__Llama-3.1-70B-Instruct-FP8.json", folder / "config.json")
    shutil.copy(FIXTURES / "nvidia__Llama-3.1-70B-Instruct-FP8.hf_quant_config.json", folder / "hf_quant_config.json")
    w = Workload.model_validate({"name": "w", "model": {"config": str(folder / "config.json"), "name": "me/served"},
                                 "requests_per_second": 1, "input_tokens": 100, "output_tokens": 10})
    arch = workload_model(w)
    assert arch.hf_id == "me/served" and arch.local_path is None
    assert arch.quantization is not None and arch.quantization.source == "hf_quant_config.json"


def test_a_home_of_no_user_is_a_path_that_does_not_exist_not_an_internal_error():
    """Review: `~nosuchuser/model` raised RuntimeError in Path.expanduser (exit 70) in fit and matrix."""
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    for args in (["fit", "--model", "~nosuchuser/model", "--gpu", "L4-24GB"],
                 ["matrix", "~nosuchuser/model", "--gpus", "L4-24GB"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2 and result.stderr.startswith("error: model '~nosuchuser/model' is not in the "
                                                                  "registry and no such file or directory exists")

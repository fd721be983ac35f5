"""`vllm serve` commands that run as printed: real checkpoints, --dtype, multi-node forms, flags per release,
and max_model_len within the model's limit."""

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.cli.main import cli
from gpuopt.errors import FieldError
from gpuopt.hardware import get_gpu
from gpuopt.inputs.workload import load_workload
from gpuopt.physics.architecture import get_model, iter_models
from gpuopt.physics.context_limit import model_max_len, scaled_limit
from gpuopt.physics.memory import estimate_resolved, suggest_fixes
from gpuopt.physics.resolution import resolve_model
from gpuopt.physics.serving_config import ServingConfig, resolve
from gpuopt.planner.checkpoints import known_checkpoint, table
from gpuopt.planner.serve_command import vllm_command
from gpuopt.planner.serve_flags import flags, release_for, unknown_flags
from gpuopt.planner.solve import SolveOptions, plan_workloads
from gpuopt.pricing.catalog import load_catalog
from tools import extract_vllm_serve_flags

EXAMPLES = Path(__file__).parent.parent / "examples"
L70 = "meta-llama/Llama-3.1-70B-Instruct"


def config(model: str, precision: str, tp: int = 1, pp: int = 1, version: str | None = None,
           gpu: str = "H100-SXM-80GB"):
    resolved, _ = resolve(get_model(model), get_gpu(gpu), ServingConfig(
        tensor_parallel=tp, pipeline_parallel=pp, precision=precision, max_model_len=8192,  # type: ignore[arg-type]
        vllm_version=version))
    return resolved


def serve_lines(command: str) -> list[str]:
    """The `vllm serve` lines of a command, without trailing comments."""
    return [line.split("  #")[0] for line in command.splitlines() if line.startswith("vllm serve")]


def test_int4_names_a_real_awq_checkpoint_and_no_quantization_flag():
    command = vllm_command(get_model(L70), config(L70, "int4", tp=2), compute_capability=90)
    [line] = serve_lines(command)
    assert line.startswith("vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 --tensor-parallel-size 2 ")
    assert "--quantization" not in command
    assert "vLLM detects awq_marlin" in command  # on ROCm (compute_capability None) awq: see below


def test_int8_without_a_known_checkpoint_says_so_and_what_to_produce():
    # the table has no INT8 W8A8 checkpoint of Llama-3.1-70B (its notes: "no citable INT8-W8A8")
    assert known_checkpoint(L70, "int8", True, 2) is None
    command = vllm_command(get_model(L70), config(L70, "int8", tp=2))
    assert f"# no int8 checkpoint of {L70} is known to gpuopt: produce an INT8 W8A8 checkpoint" in command
    assert serve_lines(command)[0].startswith('vllm serve "$INT8_CHECKPOINT" --tensor-parallel-size 2')
    assert "--quantization" not in command


def test_a_model_name_is_one_quoted_word_however_it_starts(tmp_path):
    """Only gpuopt's own placeholder stays expandable: a model named "$(...)" -- a local folder, or the name of a
    {config, name} model -- is one single-quoted word, and running the printed line runs nothing of it."""
    hostile = '$(touch PWNED)`touch PWNED`"; touch PWNED; echo "'
    arch = get_model(L70).model_copy(update={"hf_id": hostile})
    [line] = serve_lines(vllm_command(arch, config(L70, "bf16", tp=4)))
    assert shlex.split(line)[:3] == ["vllm", "serve", hostile]
    assert line.startswith("vllm serve '$(touch PWNED)")
    folder = tmp_path / "$(touch PWNED)"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}), encoding="utf-8")
    local = resolve_model(str(folder))
    [line] = serve_lines(vllm_command(local, config(L70, "bf16", tp=4)))
    assert shlex.split(line)[2] == str(folder)  # a local checkpoint is served from its directory, not its name


def test_the_workload_names_the_checkpoint():
    command = vllm_command(get_model(L70), config(L70, "int4", tp=2), checkpoints={"int4": "me/llama-70b-awq"})
    assert serve_lines(command) == ["vllm serve me/llama-70b-awq --tensor-parallel-size 2 --max-model-len 8192 "
                                    "--max-num-seqs 1024 --gpu-memory-utilization 0.92"]


def test_fp8_prefers_a_checkpoint_and_falls_back_to_online_quantisation():
    llama33 = "meta-llama/Llama-3.3-70B-Instruct"
    assert serve_lines(vllm_command(get_model(llama33), config(llama33, "fp8", tp=2)))[0].startswith(
        "vllm serve RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic --tensor-parallel-size 2 ")
    qwen = "Qwen/Qwen2.5-32B-Instruct"  # no FP8 checkpoint in the table: vLLM quantises at load
    assert "vllm serve Qwen/Qwen2.5-32B-Instruct --tensor-parallel-size 1 --quantization fp8 " in vllm_command(
        get_model(qwen), config(qwen, "fp8"))


def test_a_known_fp8_checkpoint_that_does_not_shard_at_the_plans_tp_is_not_named():
    """GLM-4.5-Air's experts have an intermediate size of 1,408. Its FP8 checkpoint keeps 128 x 128 scale blocks:
    1,408 / TP 2 = 704 = 5.5 blocks -- no; refined (0.29+) to gcd(128, 704, 4,096) = 64, which vLLM takes, so
    TP 2 names it. 1,408 / TP 8 = 176, gcd(128, 176, 4,096) = 16 < 32: vLLM stops at start-up, so the command
    quantises the BF16 weights at load instead (per-tensor scales split over any TP) and says why."""
    air = "zai-org/GLM-4.5-Air"
    two = serve_lines(vllm_command(get_model(air), config(air, "fp8", tp=2, version="0.33")))[0]
    assert two.startswith("vllm serve zai-org/GLM-4.5-Air-FP8 --tensor-parallel-size 2 ")
    eight = vllm_command(get_model(air), config(air, "fp8", tp=8, version="0.33"))
    assert serve_lines(eight)[0].startswith("vllm serve zai-org/GLM-4.5-Air --tensor-parallel-size 8 "
                                            "--quantization fp8 ")
    assert ("# not zai-org/GLM-4.5-Air-FP8: zai-org/GLM-4.5-Air-FP8's 128 x 128 FP8 blocks: each expert's "
            "intermediate size, 1,408 / TP 8 = 176, is not a multiple of 128 (vLLM 0.33 refines the scales only to "
            "blocks of 32+, and gcd is 16)") in eight
    # before 0.29 nothing refines the blocks: TP 2's 704 does not start either
    assert "--quantization fp8" in vllm_command(get_model(air), config(air, "fp8", tp=2, version="0.28"))


def test_modelopt_fp8_is_never_offered_without_native_fp8():
    for c in table():
        if c.vllm_quantization == "modelopt" and c.use == "ok":
            chosen = known_checkpoint(c.base_model, "fp8", False, 1)
            assert chosen is None or chosen.vllm_quantization != "modelopt"


def test_known_bad_checkpoints_are_not_offered():
    assert known_checkpoint("Qwen/Qwen2.5-72B-Instruct", "int4", True, 4).checkpoint == "Qwen/Qwen2.5-72B-Instruct-AWQ"
    # garbled on multi-GPU only: fine alone, avoided on two GPUs (the AWQ one is preferred anyway)
    assert known_checkpoint("Qwen/Qwen2.5-32B-Instruct", "int4", True, 2).checkpoint == "Qwen/Qwen2.5-32B-Instruct-AWQ"
    assert all(not c.checkpoint.startswith(("nm-testing/", "BCCard/"))
               for c in (known_checkpoint(m, p, True, 1) for m in {r.base_model for r in table()}
                         for p in ("int4", "int8", "fp8")) if c is not None)


@pytest.mark.parametrize("precision, flag", [("fp32", ["--dtype", "float32"]), ("fp16", ["--dtype", "float16"]),
                                             ("bf16", [])])
def test_dtype_flag_when_the_plan_differs_from_the_checkpoint(precision, flag):
    model = "meta-llama/Llama-3.1-8B-Instruct"  # a bfloat16 checkpoint
    [line] = serve_lines(vllm_command(get_model(model), config(model, precision)))
    words = line.split()
    assert ("--dtype" in words) == bool(flag)
    if flag:
        assert words[words.index("--dtype") + 1] == flag[1]


@pytest.mark.parametrize("precision, checkpoint, flag", [
    ("bf16", "float16", None), ("bf16", "float32", "bfloat16"), ("fp16", "float16", None),
    ("fp16", "bfloat16", "float16"), ("fp32", "float32", "float32"), ("fp32", "bfloat16", "float32")])
def test_dtype_rule_by_checkpoint_dtype(precision, checkpoint, flag):
    from gpuopt.planner.serve_command import DTYPE_FLAG, _needs_dtype

    assert (DTYPE_FLAG[precision] if _needs_dtype(precision, checkpoint) else None) == flag


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(m.hf_id for m in iter_models())), st.sampled_from(["int4", "int8", "fp8", "bf16"]))
def test_never_a_flag_that_forces_a_slower_kernel(model, precision):
    arch = get_model(model)
    try:
        cfg = config(model, precision, tp=8)
    except Exception:  # noqa: BLE001 - heads that TP 8 does not divide: not a plan
        return
    command = vllm_command(arch, cfg)
    for bad in ("--quantization awq", "--quantization gptq", "--quantization compressed-tensors",
                "--quantization bitsandbytes"):
        assert bad not in command
    line = serve_lines(command)[0]
    if precision in ("int4", "int8") and arch.native_quantization is None:
        assert line.split()[2] != model  # never the BF16 repository for a format made offline
    native = {"mxfp4-experts": "mxfp4", "fp8-block": "fp8"}.get(arch.native_quantization or "")
    if native is not None:  # a repository published only quantized holds nothing else, and takes no flag
        assert "--quantization" not in line
        assert (line.split()[2] == model) is (cfg.precision == native)


@pytest.mark.parametrize(("model", "precision", "repository"), [
    ("openai/gpt-oss-120b", "mxfp4", "openai/gpt-oss-120b"),
    # its RedHatAI FP8-Dynamic is marked avoid in the table (larger than MXFP4); --quantization fp8 on an MXFP4
    # repository is refused by vLLM ("does not match the quantization method specified")
    ("openai/gpt-oss-120b", "fp8", '"$FP8_CHECKPOINT"'),
    ("deepseek-ai/DeepSeek-V3", "fp8", "deepseek-ai/DeepSeek-V3"),
    ("deepseek-ai/DeepSeek-V3", "bf16", '"$BF16_CHECKPOINT"'),  # loading the FP8 repo never gives BF16 weights
])
def test_a_model_published_only_quantized_is_served_from_its_repo_only_in_that_format(model, precision, repository):
    command = vllm_command(get_model(model), config(model, precision, tp=8, gpu="H200-141GB"))
    assert serve_lines(command)[0].split()[2] == repository
    assert "--quantization" not in serve_lines(command)[0]
    if repository.startswith('"$'):
        assert f"{model} is published in {get_model(model).native_quantization} only" in command


def test_the_default_precisions_of_a_model_published_only_quantized_are_its_own():
    from gpuopt.inputs.workload import Workload
    from gpuopt.planner.candidates import planned_precisions
    for model, own in (("openai/gpt-oss-120b", ["mxfp4"]), ("deepseek-ai/DeepSeek-R1", ["fp8"]),
                       (L70, ["bf16", "fp8"])):
        w = Workload(name="w", model=model, requests_per_second=1, input_tokens=100, output_tokens=10)
        assert planned_precisions(w, get_model(model)) == own
    asked = Workload(name="w", model="openai/gpt-oss-120b", requests_per_second=1, input_tokens=100,
                     output_tokens=10, precisions=["bf16", "mxfp4"])
    assert planned_precisions(asked, get_model("openai/gpt-oss-120b")) == ["bf16", "mxfp4"]


def test_multi_node_with_the_mp_backend_from_0_17():
    cfg = config("meta-llama/Llama-3.1-405B-Instruct", "bf16", tp=8, pp=2, version="0.20")
    command = vllm_command(get_model("meta-llama/Llama-3.1-405B-Instruct"), cfg, gpus_per_node=8)
    head, worker = serve_lines(command)
    assert head.endswith('--nnodes 2 --node-rank 0 --master-addr "$HEAD_IP"')
    assert worker.endswith('--nnodes 2 --node-rank 1 --master-addr "$HEAD_IP" --headless')
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in head
    assert unknown_flags(head, "0.20") == [] and unknown_flags(worker, "0.20") == []


def test_multi_node_with_ray_before_0_17():
    cfg = config("meta-llama/Llama-3.1-405B-Instruct", "bf16", tp=8, pp=2, version="0.11")
    command = vllm_command(get_model("meta-llama/Llama-3.1-405B-Instruct"), cfg, gpus_per_node=8)
    lines = command.splitlines()
    assert "ray start --head --port 6379" in lines and 'ray start --address "$HEAD_IP:6379"' in lines
    [head] = serve_lines(command)
    assert head.endswith("--distributed-executor-backend ray") and unknown_flags(head, "0.11") == []
    assert unknown_flags(head + " --nnodes 2", "0.11") == ["--nnodes"]  # 0.11's parser has no --nnodes


def test_one_node_when_the_replica_fits_one_instance():
    cfg = config(L70, "bf16", tp=8)
    assert len(vllm_command(get_model(L70), cfg, gpus_per_node=8).splitlines()) == 1


def test_release_lookup():
    assert release_for("0.20") == "0.20.0" and release_for("0.19.1") == "0.19.0" and release_for("0.33") == "0.33.0"
    # every minor release from 0.8 to 0.34 is read; a patch release takes its minor's list
    assert release_for("0.16.2") == "0.16.0" and release_for("0.28.1") == "0.28.0"
    assert release_for("0.10.2") == "0.10.1" and release_for("0.7.4") == "0.8.0"  # before the table: the oldest


def test_flags_new_in_a_release_are_its_own():
    """--kv-cache-dtype-skip-layers came in 0.19.0 (vllm/engine/arg_utils.py of its wheel): a 0.19.1 server
    line with it parses there and not on 0.18."""
    assert "--kv-cache-dtype-skip-layers" in flags("0.19.1") and "--kv-cache-dtype-skip-layers" not in flags("0.18")


def shipped_plans():
    catalog = load_catalog(use_cache=False)
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if path.name.startswith("capacity-"):
            continue
        plan, _ = plan_workloads(load_workload(path), catalog, SolveOptions(top=0, premium=False,
                                                                           candidate_records=False))
        yield path.name, plan


def test_every_command_the_examples_print_parses_for_its_release():
    seen = 0
    for name, plan in shipped_plans():
        for d in plan.deployments:
            for line in serve_lines(d.vllm_command):
                assert unknown_flags(line, plan.vllm_version) == [], (name, line)
                assert "--quantization awq" not in line
                seen += 1
    assert seen >= 5


@pytest.mark.parametrize("rope, expected", [
    (None, 32768),
    ({"rope_type": "llama3", "factor": 8.0}, 32768),  # llama3 already counts the extension
    ({"type": "linear", "factor": 2.0}, 65536),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 131072),
])
def test_context_limit_follows_vllm(rope, expected):
    assert scaled_limit(32768, rope) == expected


def write(tmp_path: Path, max_model_len: int) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(f"""schema_version: 1
workloads:
  - name: chat
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 2
    input_tokens: 1000
    output_tokens: 200
    max_model_len: {max_model_len}
""")
    return path


def test_max_model_len_above_the_model_is_exit_2_naming_the_limit(tmp_path):
    result = CliRunner().invoke(cli, ["solve", str(write(tmp_path, 10_000_000))])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert ("workloads.0.max_model_len: 10,000,000 exceeds the 131,072 tokens "
            "meta-llama/Llama-3.1-8B-Instruct supports") in result.stderr and "(workload chat)" in result.stderr


def test_fit_refuses_a_length_above_the_model(tmp_path):
    result = CliRunner().invoke(cli, ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4-24GB",
                                      "--max-model-len", "10000000"])
    assert result.exit_code == 2 and "exceeds the 131,072 tokens" in result.output


def test_fit_suggestions_never_exceed_the_model_limit():
    arch = get_model("meta-llama/Llama-3.1-8B-Instruct")
    gpu = get_gpu("L4-24GB")
    resolved, profile = resolve(arch, gpu, ServingConfig(max_model_len=model_max_len(arch)))
    for fix in suggest_fixes(arch, gpu, resolved, profile):
        if fix.startswith("--max-model-len"):
            assert int(fix.split()[1]) <= 131072


@pytest.mark.parametrize(("model", "gpu", "extra", "expected"), [
    # on 0.9 an fp8 KV cache off Hopper starts vLLM's V0 engine, which gpuopt refuses: not a suggestion
    ("codellama/CodeLlama-7b-hf", "L4-24GB", {"vllm_version": "0.9.2"},
     ["--precision fp8", "--tp 2", "--max-model-len 14016"]),
    # on 0.20 a TP that cuts MiniMax-M2's 128 x 128 FP8 blocks is refused (1,536 / 8 = 192): no --tp 8 -- which
    # 0.33 accepts (quant_sharding.py), so there it is the suggestion
    ("MiniMaxAI/MiniMax-M2", "H100-SXM-80GB", {"vllm_version": "0.20", "gpu_memory_utilization": 0.6}, []),
    ("MiniMaxAI/MiniMax-M2", "H100-SXM-80GB", {"vllm_version": "0.33", "gpu_memory_utilization": 0.6}, ["--tp 8"]),
    ("MiniMaxAI/MiniMax-M2", "A100-SXM-40GB", {"vllm_version": "0.20"}, []),
    ("meta-llama/Llama-3.1-70B-Instruct", "L4-24GB", {"max_model_len": 32768}, ["--tp 8"]),
])
def test_every_suggested_change_is_one_gpuopt_accepts_and_that_fits(model, gpu, extra, expected):
    arch, spec = get_model(model), get_gpu(gpu)
    base = ServingConfig(**extra)
    resolved, profile = resolve(arch, spec, base)
    fixes = suggest_fixes(arch, spec, resolved, profile)
    assert fixes == expected
    for fix in fixes:
        flag, value = fix.split()[:2]
        field_name = {"--kv-cache-dtype": "kv_cache_dtype", "--precision": "precision", "--tp": "tensor_parallel",
                      "--max-model-len": "max_model_len", "--dp": "data_parallel"}[flag]
        change: dict[str, object] = {field_name: value if flag in ("--kv-cache-dtype", "--precision") else int(value)}
        if flag == "--dp":
            change["expert_parallel"] = True
        fixed, fixed_profile = resolve(arch, spec, replace(base, **change))  # raises if gpuopt refuses it
        assert estimate_resolved(arch, spec, fixed, fixed_profile).fits, fix


def test_v0_29_has_its_own_flag_list_with_the_front_end_flags_that_moved():
    """vLLM 0.29 moved the API server's flags (FrontendArgs) to vllm/entrypoints/launchers/cli_args.py; the
    list is read from that release's wheel, so 0.29.x commands are checked against 0.29's parser, not 0.27's."""
    from gpuopt.physics.serve_flags import flags

    assert release_for("0.29.1") == "0.29.0"
    assert {"--enable-auto-tool-choice", "--api-key", "--port", "--max-model-len", "--nnodes"} <= flags("0.29")
    assert unknown_flags("vllm serve m --max-model-len 8192 --port 8000", "0.29") == []


def test_a_quantized_checkpoint_is_planned_in_its_own_format_and_served_as_itself(tmp_path):
    # offline (conftest): Qwen/Qwen3-32B-AWQ comes from the known-checkpoint table
    path = tmp_path / "w.yaml"
    path.write_text("schema_version: 1\nworkloads:\n- name: chat\n  model: Qwen/Qwen3-32B-AWQ\n  input_tokens: 1000\n"
                    "  output_tokens: 250\n  requests_per_second: 2\n  slo: {ttft_ms: 2000, tpot_ms: 50}\n"
                    "  providers: [runpod]\n")
    plan, _ = plan_workloads(load_workload(path), load_catalog(use_cache=False),
                             SolveOptions(top=0, premium=False, candidate_records=False))
    assert plan.status == "optimal" and plan.deployments
    for d in plan.deployments:
        assert d.weight_precision == "int4"  # no precisions given: the checkpoint's own, not the default [bf16, fp8]
        [line] = serve_lines(d.vllm_command)
        assert line.startswith("vllm serve Qwen/Qwen3-32B-AWQ ") and "--quantization" not in line
    assert any("resolved offline from gpuopt's table of known quantized checkpoints" in w for w in plan.warnings)
    # precisions the user names are kept: bf16 of an AWQ checkpoint is refused, with the reason, at the field
    # (bad input: test_named_checkpoints)
    path.write_text(path.read_text().replace("  providers:", "  precisions: [bf16]\n  providers:"))
    with pytest.raises(FieldError, match="workloads.0.precisions: Qwen/Qwen3-32B-AWQ is a checkpoint quantized as awq"):
        plan_workloads(load_workload(path), load_catalog(use_cache=False),
                       SolveOptions(top=0, premium=False, candidate_records=False))


def test_the_flag_reader_takes_0_8s_argparse_choices_where_no_literal_alias_exists(tmp_path: Path) -> None:
    """vLLM 0.8.0-0.8.4 list --kv-cache-dtype and --block-size values in add_argument(choices=[...]) in
    engine/arg_utils.py; their vllm/config.py has no CacheDType / BlockSize alias yet."""
    tool = extract_vllm_serve_flags
    (tmp_path / "vllm" / "engine").mkdir(parents=True)
    arg_utils = tmp_path / "vllm" / "engine" / "arg_utils.py"
    arg_utils.write_text("def add(parser):\n"
                         "    parser.add_argument('--kv-cache-dtype', type=str, choices=['auto', 'fp8'])\n"
                         "    parser.add_argument('--block-size', type=int, choices=[8, 16])\n")
    config = tmp_path / "vllm" / "config.py"
    config.write_text("class CacheConfig:\n    pass\n")
    assert tool.kv_cache_dtypes(config, arg_utils) == ["auto", "fp8"]
    assert tool.block_sizes(config, arg_utils) == [8, 16]
    config.write_text("from typing import Literal\nCacheDType = Literal['auto', 'fp8_e5m2']\n")
    assert tool.kv_cache_dtypes(config, arg_utils) == ["auto", "fp8_e5m2"]  # the alias wins where it exists


# A vLLM source tree in miniature, each file shaped as the release's: `vllm serve` builds its parser in
# ServeSubcommand.subparser_init (cli/serve.py), make_arg_parser (entrypoints/openai/cli_args.py, with
# FrontendArgs' one flag per field) and EngineArgs.add_cli_args, whose get_kwargs(Config) gives each config
# dataclass field its argparse kwargs. _compute_kwargs is 0.21-0.34's; the tests swap in older parts.
TINY_VLLM = {
    "vllm/utils/argparse_utils.py": """
import argparse

class FlexibleArgumentParser(argparse.ArgumentParser):
    pass
""",
    "vllm/entrypoints/cli/serve.py": """
from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

class ServeSubcommand:
    def subparser_init(self, subparsers) -> FlexibleArgumentParser:
        serve_parser = subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]")
        serve_parser.add_argument("--grpc", action="store_true", default=False)
        return make_arg_parser(serve_parser)
""",
    "vllm/entrypoints/openai/cli_args.py": """
from dataclasses import dataclass
from vllm.config import config
from vllm.engine.arg_utils import AsyncEngineArgs, get_kwargs

@config
@dataclass
class BaseFrontendArgs:
    enable_auto_tool_choice: bool = False
    chat_template: str | None = None

    @classmethod
    def _customize_cli_kwargs(cls, frontend_kwargs):
        frontend_kwargs["chat_template"]["type"] = str
        return frontend_kwargs

    @classmethod
    def add_cli_args(cls, parser):
        frontend_kwargs = get_kwargs(cls)
        frontend_kwargs = cls._customize_cli_kwargs(frontend_kwargs)
        group = parser.add_argument_group(title=cls.__name__)
        for key, value in frontend_kwargs.items():
            group.add_argument(f"--{key.replace('_', '-')}", **value)
        return parser

@config
@dataclass
class FrontendArgs(BaseFrontendArgs):
    port: int = 8000

def make_arg_parser(parser):
    parser.add_argument("model_tag", type=str, nargs="?")
    parser.add_argument("--config")
    parser = FrontendArgs.add_cli_args(parser)
    parser = AsyncEngineArgs.add_cli_args(parser)
    return parser
""",
    "vllm/config/__init__.py": """
from vllm.config.lora import LoRAConfig
from vllm.config.model import ModelConfig
from vllm.config.utils import config
""",
    "vllm/config/utils.py": """
def config(cls):
    return cls
""",
    "vllm/config/model.py": """
from dataclasses import dataclass
from typing import Optional
from vllm.config.utils import config

HfToken = bool | str | None

@config
@dataclass
class ModelConfig:
    hf_token: HfToken = None
    trust_remote_code: bool = False
    enforce_eager: Optional[bool] = None
    max_model_len: int | None = None
""",
    "vllm/config/lora.py": """
from dataclasses import dataclass
from vllm.config.utils import config

@config
@dataclass
class LoRAConfig:
    bias_enabled: bool = False
""",
    "vllm/engine/arg_utils.py": """
import argparse
import sys
from dataclasses import dataclass, fields, is_dataclass
from types import UnionType
from typing import Annotated, Union, get_args, get_origin
from vllm.config import LoRAConfig, ModelConfig

def contains_type(type_hints, type):
    return any(th is type or get_origin(th) is type for th in type_hints)

def get_type_hints(type_hint):
    type_hints = set()
    origin = get_origin(type_hint)
    args = get_args(type_hint)
    if origin is Annotated:
        type_hints.update(get_type_hints(args[0]))
    elif origin in {Union, UnionType}:
        for arg in args:
            type_hints.update(get_type_hints(arg))
    else:
        type_hints.add(type_hint)
    return type_hints

def _compute_kwargs(cls):
    kwargs = {}
    for field in fields(cls):
        type_hints = get_type_hints(field.type)
        dataclass_cls = next((th for th in type_hints if is_dataclass(th)), None)
        name = field.name
        kwargs[name] = {"default": field.default}
        if dataclass_cls is not None:
            kwargs[name]["type"] = dataclass_cls
        elif type_hints == {bool, str, type(None)}:
            kwargs[name]["type"] = str
            kwargs[name]["nargs"] = "?"
            kwargs[name]["const"] = True
        elif contains_type(type_hints, bool):
            kwargs[name]["action"] = argparse.BooleanOptionalAction
        else:
            kwargs[name]["type"] = str
    return kwargs

def get_kwargs(cls):
    return _compute_kwargs(cls)

@dataclass
class EngineArgs:
    hf_token: bool | str | None = ModelConfig.hf_token
    enable_lora_bias: bool = LoRAConfig.bias_enabled

    @staticmethod
    def add_cli_args(parser):
        model_kwargs = get_kwargs(ModelConfig)
        model_group = parser.add_argument_group(title="ModelConfig")
        if not ("serve" in sys.argv[1:] and "--help" in sys.argv[1:]):
            model_group.add_argument("--model", type=str)
        model_group.add_argument("--hf-token", **model_kwargs["hf_token"])
        model_group.add_argument("--trust-remote-code", **model_kwargs["trust_remote_code"])
        model_group.add_argument("--enforce-eager", **{**model_kwargs["enforce_eager"], "default": None})
        model_group.add_argument("--max-model-len", **model_kwargs["max_model_len"])
        lora_kwargs = get_kwargs(LoRAConfig)
        lora_group = parser.add_argument_group(title="LoRAConfig")
        lora_group.add_argument("--enable-lora-bias", **lora_kwargs["bias_enabled"])
        return parser

@dataclass
class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction, default=False)
        return parser
""",
}
# 0.33 on: FlexibleArgumentParser registers EnableDisableAction for action=BooleanOptionalAction (its __init__ as
# vllm/utils/argparse_utils.py has it, less the help-only option strings)
ENABLE_DISABLE = """
import argparse

class EnableDisableAction(argparse.BooleanOptionalAction):
    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}

    def __init__(self, option_strings, dest, *args, **kwargs):
        super().__init__(option_strings, dest, *args, **kwargs)
        inverses = [inverse + opt.removeprefix(prefix) for opt in option_strings
                    for prefix, inverse in self._inverse_prefixes.items() if opt.startswith(prefix)]
        self.option_strings = [*self.option_strings, *inverses]

class FlexibleArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", argparse.BooleanOptionalAction, EnableDisableAction)
"""
ONLY_TYPING_UNION = ("origin in {Union, UnionType}", "origin is Union")  # get_type_hints up to 0.11
NO_OPTIONAL_VALUE = ("""        elif type_hints == {bool, str, type(None)}:
            kwargs[name]["type"] = str
            kwargs[name]["nargs"] = "?"
            kwargs[name]["const"] = True
""", "")  # _compute_kwargs up to 0.20


def _tiny_vllm(root: Path, changes: dict[str, tuple[str, str]] | None = None,
               files: dict[str, str] | None = None) -> Path:
    """TINY_VLLM written under root, with each change {file: (old text, new text)} made and `files` replaced."""
    for rel, text in {**TINY_VLLM, **(files or {})}.items():
        old, new = (changes or {}).get(rel, ("", ""))
        assert old in text
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text.replace(old, new) if old else text)
    return root


def _read_flags(root: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    """The flags the reader prints for the tree (its YAML entry, as gpuopt/data/vllm_serve_flags.yaml gets it)."""
    extract_vllm_serve_flags.main("0.0.0", root, "tiny wheel")
    [entry] = yaml.safe_load(capsys.readouterr().out)
    return set(entry["flags"])


def test_the_flag_reader_gives_no_x_to_a_bool_field_but_not_to_a_bool_or_str_one(tmp_path, capsys) -> None:
    """get_kwargs makes a field admitting bool a BooleanOptionalAction, except (0.21 on) a `bool | str | None`
    one: ModelConfig.hf_token takes an optional value (nargs="?"), so `--no-hf-token` does not parse. The type
    is the config class's (through the HfToken alias), not EngineArgs'; an argument whose kwargs spread the
    field's (`**{**kwargs["f"], "default": None}`) keeps its action."""
    found = _read_flags(_tiny_vllm(tmp_path), capsys)
    assert {"--hf-token", "--trust-remote-code", "--no-trust-remote-code", "--enforce-eager",
            "--no-enforce-eager", "--max-model-len", "--model"} <= found
    assert "--no-hf-token" not in found and "--no-max-model-len" not in found


def test_before_0_21_a_bool_or_str_field_was_a_boolean_optional_action(tmp_path, capsys) -> None:
    """The rule is read from the release's own get_kwargs: without the `type_hints == {bool, str, NoneType}`
    branch (0.12-0.20's shape) a field admitting bool gets --no-X whatever else it admits."""
    tree = _tiny_vllm(tmp_path, {"vllm/engine/arg_utils.py": NO_OPTIONAL_VALUE})
    assert "--no-hf-token" in _read_flags(tree, capsys)


def test_before_0_12_get_kwargs_did_not_unpack_a_pep_604_union(tmp_path, capsys) -> None:
    """get_type_hints up to 0.11 unpacked typing.Union only: a `bool | None` field (a types.UnionType) then took
    a value, while an `Optional[bool]` one got --no-X."""
    tree = _tiny_vllm(tmp_path, {
        "vllm/engine/arg_utils.py": ONLY_TYPING_UNION,
        "vllm/config/model.py": ("trust_remote_code: bool = False", "trust_remote_code: bool | None = None")})
    found = _read_flags(tree, capsys)
    assert {"--no-enforce-eager", "--trust-remote-code"} <= found and "--no-trust-remote-code" not in found


def test_the_flag_reader_negates_by_the_config_field_an_argument_takes(tmp_path, capsys) -> None:
    """--enable-lora-bias takes LoRAConfig.bias_enabled (a bool): --no-enable-lora-bias parses, though no
    EngineArgs field is called bias_enabled. FrontendArgs' flags come from its fields and its base's, through
    BaseFrontendArgs.add_cli_args called on FrontendArgs."""
    found = _read_flags(_tiny_vllm(tmp_path), capsys)
    assert {"--enable-lora-bias", "--no-enable-lora-bias", "--enable-auto-tool-choice",
            "--no-enable-auto-tool-choice", "--chat-template", "--port", "--enable-log-requests",
            "--no-enable-log-requests"} <= found
    assert "--no-port" not in found and "--no-chat-template" not in found


def test_the_flag_reader_finds_the_flags_cli_serve_and_make_arg_parser_add(tmp_path, capsys) -> None:
    """`vllm serve` flags added outside arg_utils.py: --grpc in ServeSubcommand.subparser_init (0.18-0.19),
    --config in make_arg_parser (0.10 on; in subparser_init before), and argparse's own -h/--help."""
    found = _read_flags(_tiny_vllm(tmp_path), capsys)
    assert {"--grpc", "--config", "-h", "--help"} <= found
    assert "--no-grpc" not in found and "model_tag" not in found


def test_the_flag_reader_keeps_the_side_of_an_argv_test_vllm_serve_takes(tmp_path, capsys) -> None:
    """0.9.0 added --model only when 'serve' was not in sys.argv: no `vllm serve` flag there."""
    tree = _tiny_vllm(tmp_path, {"vllm/engine/arg_utils.py": (
        'if not ("serve" in sys.argv[1:] and "--help" in sys.argv[1:]):',
        "if 'serve' not in sys.argv[1:] and '--help' not in sys.argv[1:]:")})
    assert "--model" not in _read_flags(tree, capsys)


def test_from_0_33_a_boolean_optional_enable_flag_also_takes_its_disable_form(tmp_path, capsys) -> None:
    """FlexibleArgumentParser registers EnableDisableAction for BooleanOptionalAction (0.33 on): --enable-X
    then also parses as --disable-X (--no-enable-X still does), --disable-X as --enable-X."""
    found = _read_flags(_tiny_vllm(tmp_path, files={"vllm/utils/argparse_utils.py": ENABLE_DISABLE}), capsys)
    assert {"--enable-log-requests", "--no-enable-log-requests", "--disable-log-requests",
            "--disable-lora-bias", "--disable-auto-tool-choice"} <= found
    assert "--disable-trust-remote-code" not in found and "--disable-grpc" not in found


@pytest.mark.parametrize(("changes", "files"), [
    ({}, {}),
    ({"vllm/engine/arg_utils.py": NO_OPTIONAL_VALUE}, {}),
    ({"vllm/engine/arg_utils.py": ONLY_TYPING_UNION,
      "vllm/config/model.py": ("trust_remote_code: bool = False", "trust_remote_code: bool | None = None")}, {}),
    ({}, {"vllm/utils/argparse_utils.py": ENABLE_DISABLE}),
])
def test_the_flag_reader_agrees_with_argparse_on_a_tree_it_can_run(tmp_path, capsys, monkeypatch, changes,
                                                                   files) -> None:
    """The miniature needs no torch: built for real (`vllm serve MODEL` in sys.argv), its serve parser accepts
    exactly the option strings the reader lists."""
    import argparse
    import importlib
    import sys
    root = _tiny_vllm(tmp_path, changes, files)
    listed = _read_flags(root, capsys)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(sys, "argv", ["vllm", "serve", "MODEL"])
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    try:
        serve = importlib.import_module("vllm.entrypoints.cli.serve")
        main: argparse.ArgumentParser = importlib.import_module("vllm.utils.argparse_utils").FlexibleArgumentParser()
        parser = serve.ServeSubcommand().subparser_init(main.add_subparsers())
        assert set(parser._option_string_actions) == listed
    finally:
        for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            del sys.modules[name]


def test_a_model_name_cannot_end_the_comment_and_start_a_command():
    """The comment after a command quotes the model's name, which a workload sets (`model: {config: ..., name:
    ...}`): a line break in it would end the comment, and a pasted line would run the rest as a command."""
    evil = get_model(L70).model_copy(update={"hf_id": "evil\ntouch /tmp/pwned #\x1b[2J"})
    one_node = vllm_command(evil, config(L70, "int8", tp=2))
    assert "\n" not in one_node and "\x1b" not in one_node
    assert "# no int8 checkpoint of evil\\x0atouch /tmp/pwned #\\x1b[2J is known to gpuopt" in one_node
    two_nodes = vllm_command(evil, config(L70, "int8", tp=16), gpus_per_node=8)
    assert all(line.startswith(("#", "vllm serve", "ray ")) for line in two_nodes.splitlines())
    assert "evil\\x0atouch" in two_nodes.splitlines()[0]


LLAMA_8B_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                   "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
                   "torch_dtype": "float16"}
LEGACY_GPTQ = {"bits": 4, "group_size": 128, "desc_act": False, "sym": True}
LEGACY_AWQ = {"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "zero_point": True, "version": "gemm"}


def _int4_command(tmp_path: Path, side: dict[str, object] | None, in_config: dict[str, object] | None,
                  capability: int | None, release: str | None = None) -> str:
    folder = tmp_path / "ckpt"
    folder.mkdir(exist_ok=True)
    cfg = dict(LLAMA_8B_CONFIG, **({"quantization_config": in_config} if in_config else {}))
    (folder / "config.json").write_text(json.dumps(cfg))
    if side is not None:
        (folder / "quantize_config.json").write_text(json.dumps(side))
    arch = resolve_model(str(folder))
    resolved, _ = resolve(arch, get_gpu("H100-SXM-80GB"), ServingConfig(precision="int4", max_model_len=8192,
                                                                         vllm_version=release))
    [line] = serve_lines(vllm_command(arch, resolved, compute_capability=capability))
    return line


@pytest.mark.parametrize(("side", "capability", "release", "method"), [
    (LEGACY_GPTQ, 90, None, "gptq_marlin"),  # Marlin where it runs: the fast kernel's name
    # below sm80 only GPTQConfig (exllama) loads in 0.11-0.13 (GPTQMarlinConfig min capability 80; 75 from 0.14)
    (LEGACY_GPTQ, 75, "0.13", "gptq"),
    (LEGACY_GPTQ, 75, "0.14", "gptq_marlin"),
    ({**LEGACY_GPTQ, "sym": False}, 90, None, "gptq"),  # GPTQ-Marlin takes symmetric GPTQ only
    (LEGACY_AWQ, 80, None, "awq_marlin"),
    (LEGACY_AWQ, 75, "0.13", "awq"),
    (LEGACY_AWQ, 75, None, "awq_marlin"),
])
def test_a_checkpoint_quantized_only_in_quantize_config_json_is_named_its_method(tmp_path, side, capability, release,
                                                                                  method):
    """vLLM reads the method from config.json alone; the file is read only once --quantization names one."""
    line = _int4_command(tmp_path, side, None, capability, release)
    assert f" --quantization {method} " in line


def test_a_checkpoint_whose_config_json_states_its_quantization_gets_no_flag(tmp_path):
    in_config = {"quant_method": "gptq", **LEGACY_GPTQ}
    assert "--quantization" not in _int4_command(tmp_path, None, in_config, 90)
    # quantize_config.json beside it is ignored: config.json's quantization_config comes first (vLLM and gpuopt)
    assert "--quantization" not in _int4_command(tmp_path, LEGACY_GPTQ, in_config, 90)


@pytest.mark.parametrize(("release", "expected"), [
    # ModelOptFp8Config.get_min_capability 89 up to 0.25: vLLM quantizes the base model at load instead
    ("0.25", "vllm serve meta-llama/Llama-3.1-70B-Instruct "),
    ("0.33", "vllm serve nvidia/Llama-3.1-70B-Instruct-FP8 "),  # 80 from 0.27.1: FP8 Marlin on an A100
])
def test_a_modelopt_fp8_checkpoint_is_named_on_an_a100_from_0_27(release: str, expected: str) -> None:
    l70 = "meta-llama/Llama-3.1-70B-Instruct"
    arch = get_model(l70)
    resolved, _ = resolve(arch, get_gpu("A100-SXM-80GB"), ServingConfig(precision="fp8", tensor_parallel=2,
                                                                        max_model_len=8192, vllm_version=release))
    command = vllm_command(arch, resolved, compute_capability=80)
    assert command.startswith(expected)


@pytest.mark.parametrize(("release", "expected"), [
    # RocmPlatform.supported_quantization lists modelopt from 0.21 (quantization.ROCM_FROM): an MI300X has FP8
    # tensor cores, but 0.19 refuses the checkpoint, so the BF16 base is quantized at load instead
    ("0.19", "vllm serve meta-llama/Llama-3.1-70B-Instruct "),
    ("0.33", "vllm serve nvidia/Llama-3.1-70B-Instruct-FP8 "),
])
def test_a_modelopt_fp8_checkpoint_is_named_on_rocm_only_where_the_release_loads_it(release: str,
                                                                                   expected: str) -> None:
    l70 = "meta-llama/Llama-3.1-70B-Instruct"
    arch = get_model(l70)
    resolved, _ = resolve(arch, get_gpu("MI300X-192GB"), ServingConfig(precision="fp8", tensor_parallel=1,
                                                                       max_model_len=8192, vllm_version=release))
    assert vllm_command(arch, resolved, compute_capability=None).startswith(expected)


def test_a_checkpoints_command_cites_the_source_that_names_it():
    # RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic's row cites a Qwen2.5-VL config directory first and its own
    # tasks.yml second: the command comment named the VL model's file
    from gpuopt.physics.checkpoint_table import find, table
    from gpuopt.planner.serve_command import _citation

    row = find("RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic")
    assert row is not None
    assert _citation(row.source, row.checkpoint) == (
        "neuralmagic/model-validation-configs · RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic/accuracy/tasks.yml")
    for c in table():  # every row: a citation whose repository or file names the checkpoint wherever one does
        shown = [" · ".join(part.split(" · ")[:2]) for part in c.source.split(" ; ")]
        cited = _citation(c.source, c.checkpoint)
        assert cited in shown
        if any(c.checkpoint in part for part in shown):
            assert c.checkpoint in cited, c.checkpoint


def test_a_bare_model_name_from_a_config_ref_is_flagged_as_a_hub_id_it_may_not_be(tmp_path):
    """`model: {config: ..., name: my-model}` plans from the config; `vllm serve my-model` then asks the Hub for a
    repository of that name. Every registry and Hub id has an organisation, so a bare name gets the caution."""
    config = tmp_path / "config.json"
    config.write_text((Path(__file__).parent / "fixtures" / "model_configs" / "Qwen__Qwen3-32B-FP8.json").read_text())
    workload = tmp_path / "w.yaml"
    workload.write_text("schema_version: 1\nproviders: [runpod]\nworkloads:\n  - name: a\n"
                        "    model: {config: config.json, name: my-model}\n    requests_per_second: 1\n"
                        "    input_tokens: 1000\n    output_tokens: 100\n    max_model_len: 4096\n")
    result = CliRunner().invoke(cli, ["solve", str(workload), "--format", "json", "--top", "0"])
    assert result.exit_code == 0, result.stderr
    command = json.loads(result.stdout)["deployments"][0]["vllm_command"]
    assert command.startswith("vllm serve my-model ")
    assert command.endswith("  # 'my-model' (the workload's name for its config.json) is served as a Hub repository "
                            "id: if it is not one, name the model by its checkpoint's repository "
                            "(organisation/name) or directory")
    # a repository id gets no such note
    workload.write_text(workload.read_text().replace("name: my-model", "name: my-org/my-model"))
    result = CliRunner().invoke(cli, ["solve", str(workload), "--format", "json", "--top", "0"])
    assert "#" not in json.loads(result.stdout)["deployments"][0]["vllm_command"]


def test_a_known_awq_checkpoint_on_rocm_names_the_method_vllm_keeps_there() -> None:
    """ROCm has no Marlin: an AWQ checkpoint runs vLLM's `awq` (Triton) on an MI300X, and the comment said
    "vLLM detects awq_marlin" (QA). On an H100 it is awq_marlin."""
    l70 = "meta-llama/Llama-3.1-70B-Instruct"
    arch = get_model(l70)
    for gpu, capability, method in (("MI300X-192GB", None, "awq"), ("H100-SXM-80GB", 90, "awq_marlin")):
        resolved, _ = resolve(arch, get_gpu(gpu), ServingConfig(precision="int4", tensor_parallel=1,
                                                                max_model_len=8192))
        command = vllm_command(arch, resolved, compute_capability=capability)
        assert f"vLLM detects {method} " in command, command

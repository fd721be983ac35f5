"""The exact `vllm serve` command (and, across nodes, the steps) for a planned replica.

What makes a command run as printed, and run the kernel the latency model assumed:
- the repository holds the weights in the planned format. BF16/FP16/FP32 plans serve the model's own repo
  (with `--dtype` when it differs from the checkpoint's); natively quantised models (block FP8, MXFP4) in their
  own format too, and in any other only from a named or known checkpoint (their repository holds nothing else).
  INT4/INT8 weights are made offline: the command names a real checkpoint (the workload's `checkpoints:`,
  else planner/checkpoints.py's table) and no `--quantization` flag, because vLLM reads the method from
  the checkpoint and picks its fast kernel (awq_marlin, gptq_marlin, compressed-tensors), where an explicit
  `--quantization awq` forces the slow one -- except a checkpoint that states its method only in
  quantize_config.json, which vLLM does not look at unless told: it gets the fast kernel's name. With no known
  checkpoint the command serves "$INT4_CHECKPOINT" and says what to produce. FP8 names a known FP8 checkpoint,
  else `--quantization fp8` (vLLM quantises the BF16 weights at load: dynamic W8A8, the kernel modelled) --
  never on a natively quantised repository.
- a replica larger than one instance runs across nodes in the form the release supports: from the first
  release whose parser has `--nnodes` and `--headless` (0.12, vllm_serve_flags.yaml) its multiprocessing
  backend (`--nnodes/--node-rank/--master-addr`, `--headless` on the other nodes), before that a Ray cluster
  (`ray start` on each node, `--distributed-executor-backend ray` on the head).
Which flags a release has is data (gpuopt/data/vllm_serve_flags.yaml, read from vLLM's own parser).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping

from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.quantization import modelopt_fp8_runs
from gpuopt.physics.serving_config import ResolvedConfig
from gpuopt.planner.checkpoints import WHAT_TO_PRODUCE, checkpoint_sharding_problem, known_checkpoint
from gpuopt.planner.serve_flags import supports
from gpuopt.text import printable
from gpuopt.vocabulary import WeightFormat

NATIVE_FORMAT = {"mxfp4-experts": "mxfp4", "fp8-block": "fp8"}
DTYPE_FLAG = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
RAY_PORT = 6379


class ShellVariable(str):
    """A word the command leaves for the shell to expand ("$INT4_CHECKPOINT"): gpuopt's own placeholder, never a
    user's text -- a model named "$(...)" is quoted like any other word."""


def _repository(arch: ModelArchitecture, cfg: ResolvedConfig, checkpoints: Mapping[WeightFormat, str],
                gpus: int, compute_capability: int | None) -> tuple[str, list[str], str]:
    """(the repository to serve, its flags, a comment that says where it comes from or "")."""
    precision = cfg.precision
    model = arch.hf_id
    served = arch.local_path or model  # a local checkpoint is served from its directory
    if precision in checkpoints:
        return checkpoints[precision], [], f"# {precision} checkpoint named in the workload file"
    native = NATIVE_FORMAT.get(arch.native_quantization or "")
    if precision == native:
        return served, [], ""
    if precision in DTYPE_FLAG and native is None:
        return served, (["--dtype", DTYPE_FLAG[precision]] if _needs_dtype(precision, arch.torch_dtype) else []), ""
    if arch.quantization is not None and arch.quantization.weight_format == precision:
        # the model is itself a quantized checkpoint in this format: vLLM detects its method from its config
        return served, _legacy_quantization_flag(arch, compute_capability, cfg.vllm_version), ""
    # ModelOpt FP8 needs FP8 tensor cores up to 0.25 and runs on FP8 Marlin from sm80 from 0.27; on ROCm from 0.21
    # (select_kernel: a GPU with FP8 tensor cores is not enough there -- MI300X at 0.19 named one vLLM refuses)
    modelopt_fp8 = modelopt_fp8_runs(compute_capability, cfg.vllm_version)
    known = known_checkpoint(model, precision, modelopt_fp8, gpus,
                             lambda row: checkpoint_sharding_problem(arch, row, cfg) is None)
    if known is not None:
        method = known.vllm_quantization
        if compute_capability is None:  # ROCm has no Marlin: vLLM keeps the checkpoint's own method (awq on
            method = method.removesuffix("_marlin")  # Triton, gptq), QA: "vLLM detects awq_marlin" on an MI300X
        cited = _citation(known.source, known.checkpoint)
        return known.checkpoint, [], (f"# {known.method.upper()} checkpoint of {model}, vLLM detects {method} "
                                      f"(cited in {cited})")
    if precision == "fp8" and native is None:
        # a known checkpoint that does not shard here is not named: vLLM's own FP8 of the BF16 weights (per
        # tensor scales) splits over any TP the model does
        unsharded = known_checkpoint(model, precision, modelopt_fp8, gpus)
        why = "" if unsharded is None else (
            f"# not {unsharded.checkpoint}: {checkpoint_sharding_problem(arch, unsharded, cfg)}; vLLM quantises "
            f"the BF16 weights at load instead")
        return served, ["--quantization", "fp8"], why
    variable = f"{precision.upper()}_CHECKPOINT"
    if native is not None:  # its repository holds only the native format; a flag cannot change that
        produce = (f"a {precision} checkpoint ({model} is published in {arch.native_quantization} only, and vLLM "
                   f"refuses a --quantization that contradicts a checkpoint's own)")
    else:
        produce = WHAT_TO_PRODUCE.get(precision, f"a {precision} checkpoint")
    return ShellVariable(f"${variable}"), [], (
        f"# no {precision} checkpoint of {model} is known to gpuopt: produce {produce} and "
        f"export {variable}=its repository, or name it in the workload file "
        f"(checkpoints: {{{precision}: organisation/repository}})")


def _citation(source: str, checkpoint: str) -> str:
    """The citation of `source` (" ; "-separated, each "repository · path · commit") to show beside a command,
    without its commit: the first that names the checkpoint itself, else the first (a row may cite a config
    directory of a sibling model before the checkpoint's own, and the command comment named the sibling)."""
    shown = [" · ".join(c.strip().split(" · ")[:2]) for c in source.split(" ; ") if c.strip()]
    names = re.compile(re.escape(checkpoint) + r"(?=[/:\s]|$)")  # the repository itself, not X/Y-FP8-dynamic-v2
    return next((c for c in shown if names.search(c)), shown[0] if shown else "")


def _legacy_quantization_flag(arch: ModelArchitecture, compute_capability: int | None,
                              vllm_version: str | None = None) -> list[str]:
    """`--quantization <method>` for a checkpoint whose quantization is only in AutoGPTQ's quantize_config.json.

    vLLM reads the method from config.json's quantization_config alone (ModelConfig._verify_quantization:
    model_arch_config.quantization_config, 0.33.0); without it and without --quantization it loads the
    packed weights as 16-bit ones. Given --quantization, get_quant_config reads the file the method names
    (get_config_filenames: quantize_config.json for GPTQ, GPTQ-Marlin and AWQ-Marlin). The name is the
    fast kernel's (KernelPath.vllm_method: gptq_marlin / awq_marlin where Marlin applies on this GPU, else
    gptq / awq): up to 0.21 an explicit `gptq` selects GPTQConfig (the exllama kernel) and `awq` AWQConfig
    even where Marlin would run, and from 0.22 (GPTQ) / 0.24 (AWQ) all the names are one config choosing
    its own kernel. Both Marlin names are registered in every release read (0.8.0, 0.8.5, 0.10.1.1 wheels,
    0.11-0.34 sources: model_executor/layers/quantization/__init__.py). ModelOpt's hf_quant_config.json
    needs no flag: vLLM reads that file into the config itself (transformers_utils/config.py)."""
    q = arch.quantization
    if q is None or q.source != "quantize_config.json" or q.method not in ("gptq", "awq"):
        return []
    return ["--quantization", q.kernel_path(compute_capability, vllm_version).vllm_method]


def _needs_dtype(precision: WeightFormat, checkpoint_dtype: str) -> bool:
    """vLLM's `--dtype auto` serves a 16-bit checkpoint in its own dtype and a float32 one in 16 bits, so:
    fp32 plans always say float32; fp16 plans say float16 unless the checkpoint is FP16; a bf16 plan is "16-bit"
    (the same bytes and speed: an FP16 checkpoint runs as FP16, never cast to BF16's shorter mantissa) and says
    bfloat16 only for a float32 checkpoint."""
    if precision == "fp32":
        return True
    if precision == "fp16":
        return checkpoint_dtype != "float16"
    return checkpoint_dtype == "float32"


def _join(words: list[str]) -> str:
    """shlex.join, except that gpuopt's own ShellVariable placeholders stay expandable."""
    return " ".join(f'"{w}"' if isinstance(w, ShellVariable) else shlex.quote(w) for w in words)


def vllm_command(arch: ModelArchitecture, cfg: ResolvedConfig, *, gpus_per_node: int | None = None,
                 checkpoints: Mapping[WeightFormat, str] | None = None,
                 compute_capability: int | None = None) -> str:
    """The command that starts one replica: one line on one node; the steps for each node, one per line,
    when the replica spans instances.

    `gpus_per_node`: GPUs of the instance the replica runs on (None: one node holds it); `checkpoints`: the
    workload's repositories per weight format; `compute_capability`: the GPU's (None: no CUDA GPU, ROCm), which
    decides whether a ModelOpt FP8 checkpoint may be named (quantization.modelopt_fp8_runs: FP8 tensor cores up
    to vLLM 0.25, sm80+ from 0.27, ROCm from 0.21) and the method a quantize_config.json-only checkpoint is named
    with (_legacy_quantization_flag)."""
    gpus = cfg.tensor_parallel * cfg.pipeline_parallel
    repo, repo_flags, note = _repository(arch, cfg, checkpoints or {}, gpus, compute_capability)
    if not isinstance(repo, ShellVariable) and "/" not in repo and arch.local_path is None:
        # every registry and Hub id has an organisation; a bare name is the one a workload gave its config.json
        # (`model: {config: ..., name: my-model}`), and `vllm serve my-model` asks the Hub for a repository
        # of that name
        unsure = (f"# {repo!r} (the workload's name for its config.json) is served as a Hub repository id: if it "
                  f"is not one, name the model by its checkpoint's repository (organisation/name) or directory")
        note = f"{note}; {unsure[2:]}" if note else unsure
    flags = ["--tensor-parallel-size", str(cfg.tensor_parallel)]
    if cfg.pipeline_parallel > 1:
        flags += ["--pipeline-parallel-size", str(cfg.pipeline_parallel)]
    flags += repo_flags
    if cfg.kv_cache_dtype == "fp8":
        flags += ["--kv-cache-dtype", "fp8"]
    flags += ["--max-model-len", str(cfg.max_model_len), "--max-num-seqs", str(cfg.max_num_seqs),
              "--gpu-memory-utilization", f"{cfg.gpu_memory_utilization:g}"]
    if cfg.max_loras:
        flags += ["--enable-lora", "--max-loras", str(cfg.max_loras), "--max-lora-rank", str(cfg.max_lora_rank)]
        if cfg.fully_sharded_loras:
            flags.append("--fully-sharded-loras")
    base = ["vllm", "serve", repo, *flags]
    nodes = 1 if not gpus_per_node else math.ceil(gpus / gpus_per_node)
    note = printable(note)  # it may quote the model's name: a line break would end the comment, and the shell
    # would run the rest of it as the next command
    if nodes == 1:  # one line (a CSV cell, a copy-paste), the provenance as a trailing comment
        return _join(base) + (f"  {note}" if note else "")
    return "\n".join(([note] if note else []) + _multi_node(base, nodes, gpus_per_node or gpus, cfg.vllm_version))


def _multi_node(base: list[str], nodes: int, gpus_per_node: int, version: str) -> list[str]:
    head = [f"# one replica on {nodes} nodes of {gpus_per_node} GPUs (vLLM {version}); on every node: "
            "export HEAD_IP=<address of node 0>"]
    if supports(version, "--nnodes") and supports(version, "--headless"):
        lines = head + ["# node 0 (serves the API):",
                        _join([*base, "--nnodes", str(nodes), "--node-rank", "0"]) + ' --master-addr "$HEAD_IP"']
        for rank in range(1, nodes):
            lines += [f"# node {rank}:", _join([*base, "--nnodes", str(nodes), "--node-rank", str(rank)])
                      + ' --master-addr "$HEAD_IP" --headless']
        return lines
    lines = head + ["# node 0:", f"ray start --head --port {RAY_PORT}"]
    for rank in range(1, nodes):
        lines += [f"# node {rank}:", f'ray start --address "$HEAD_IP:{RAY_PORT}"']
    return lines + ["# then on node 0, once every node has joined:",
                    _join([*base, "--distributed-executor-backend", "ray"])]

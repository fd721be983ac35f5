"""The checkpoints a workload names per weight format (its `checkpoints` field) are checked against what gpuopt
knows of them: the workload's own model and the table of known quantized checkpoints."""

from pathlib import Path

from gpuopt.physics.architecture import get_model
from gpuopt.planner.checkpoints import named_checkpoint_problems
from tests.conftest import run

L70 = "meta-llama/Llama-3.1-70B-Instruct"


def _workload(tmp_path: Path, checkpoints: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text("schema_version: 1\nworkloads:\n  - name: chat\n    model: meta-llama/Llama-3.1-70B-Instruct\n"
                    "    requests_per_second: 1\n    input_tokens: 500\n    output_tokens: 200\n"
                    f"    precisions: [int4, bf16]\n    checkpoints: {checkpoints}\n", encoding="utf-8")
    return path


def test_the_models_own_bf16_repository_named_for_int4_is_refused_at_its_line(tmp_path):
    """A BF16 repository named for int4 would be loaded as BF16 (141 GB) on GPUs sized for 4-bit weights."""
    result = run("solve", str(_workload(tmp_path, f"{{int4: {L70}}}")))
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines == [f"error: {tmp_path / 'w.yaml'}:9: workloads.0.checkpoints.int4: {L70} is the workload's model "
                     "itself, which holds bf16 weights, not int4: name an int4 checkpoint of it, or leave int4 out of "
                     "checkpoints for gpuopt to name a known one (workload chat)"]
    assert "Traceback" not in result.output


def test_a_checkpoint_of_another_model_or_format_is_named_with_what_the_table_says():
    arch = get_model(L70)
    other = named_checkpoint_problems(arch, {"int4": "Qwen/Qwen3-32B-AWQ"})
    assert other == [("int4", "Qwen/Qwen3-32B-AWQ is a checkpoint of Qwen/Qwen3-32B in gpuopt's table of known "
                              "quantized checkpoints (gpuopt/data/quantized_checkpoints.csv), not of " + L70)]
    bnb = named_checkpoint_problems(arch, {"int4": "unsloth/Meta-Llama-3.1-70B-Instruct-bnb-4bit"})
    assert len(bnb) == 1 and "holds 4-bit bnb weights" in bnb[0][1] and "(int4: awq, gptq, w4a16)" in bnb[0][1]
    # an FP8 checkpoint named for int8 (int8 plans serve W8A8 INT8), and an AWQ one for bf16: other weights
    fp8 = named_checkpoint_problems(arch, {"int8": "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"})
    assert fp8 == [("int8", "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8 holds 8-bit fp8 weights in gpuopt's table of "
                            "known quantized checkpoints (gpuopt/data/quantized_checkpoints.csv), not the int8 weights "
                            "the plan sizes (int8: int8-w8a8)")]
    awq = named_checkpoint_problems(arch, {"bf16": "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"})
    assert [p for p, _ in awq] == ["bf16"] and "(bf16: the model's own repository)" in awq[0][1]


def test_right_checkpoints_and_unknown_repositories_pass(tmp_path):
    arch = get_model(L70)
    assert named_checkpoint_problems(arch, {"int4": "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
                                            "bf16": L70, "fp16": L70}) == []
    assert named_checkpoint_problems(arch, {"int4": "me/my-own-awq"}) == []  # unknown: taken at its word
    result = run("solve", str(_workload(tmp_path, "{int4: hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4}")))
    assert result.exit_code == 0, result.output
    assert "vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 " in result.stdout


def test_a_quantized_workload_model_is_checked_against_its_base():
    """Qwen/Qwen3-32B-AWQ as the workload's model: its table row's base is Qwen/Qwen3-32B, so another AWQ of
    Qwen3-32B is fine for int4 and its own repository serves int4 (not bf16)."""
    arch = get_model("Qwen/Qwen3-32B")
    assert named_checkpoint_problems(arch, {"int4": "Qwen/Qwen3-32B-AWQ"}) == []


def test_the_tables_verdict_holds_for_a_named_checkpoint_as_for_a_model():
    """QA: Qwen2.5-32B-Instruct-GPTQ-Int4 (avoid-multi-gpu: garbled output) named under `checkpoints:` got a TP 4
    replica, and Qwen2.5-72B-Instruct-GPTQ-Int4 (avoid: may not stop generating) no warning, where the same
    repositories as `model:` were refused on several GPUs and warned about."""
    from gpuopt.inputs.workload import Workload
    from gpuopt.planner.candidates import Evaluator, Shape

    w = Workload(name="w", model="Qwen/Qwen2.5-32B-Instruct", requests_per_second=1, input_tokens=1000,
                 output_tokens=200, precisions=["int4"], checkpoints={"int4": "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4"})
    evaluate = Evaluator(w, get_model(w.model), 8192, None)
    four = evaluate(Shape("L40S-48GB", "pcie", 4, 1, "int4", "auto"))
    assert (four.feasible, four.reason_kind) == (False, "fit")
    assert four.reason.startswith("Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4 is marked avoid-multi-gpu")
    assert evaluate(Shape("L40S-48GB", "pcie", 1, 1, "int4", "auto")).feasible
    bf16 = Workload(name="w", model="Qwen/Qwen2.5-32B-Instruct", requests_per_second=1, input_tokens=1000,
                    output_tokens=200, precisions=["bf16"], checkpoints={"int4": "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4"})
    # the named checkpoint serves int4 only: a BF16 replica of the base on 4 GPUs is the base's
    assert Evaluator(bf16, get_model(bf16.model), 8192, None)(Shape("L40S-48GB", "pcie", 4, 1, "bf16", "auto")).feasible


def test_a_named_checkpoint_marked_avoid_is_warned_about(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("schema_version: 1\nproviders: [aws]\nworkloads:\n  - name: w\n"
                    "    model: Qwen/Qwen2.5-72B-Instruct\n    requests_per_second: 2\n    input_tokens: 1000\n"
                    "    output_tokens: 200\n    precisions: [int4]\n"
                    "    checkpoints: {int4: Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4}\n    max_model_len: 8192\n")
    result = run("solve", path, "--format", "json", "-o", tmp_path / "p.json")
    assert result.exit_code == 0, result.output
    assert "warning: Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4 is marked avoid in gpuopt's table of known quantized " \
           "checkpoints" in result.stderr


def test_a_named_checkpoint_must_split_over_the_shapes_gpus():
    """Review: zai-org/GLM-4.5-Air-FP8 named under `checkpoints:` was planned at TP 8, where its 128 x 128 FP8
    blocks do not split the experts' 1,408 (176 a GPU); the same repository as `model:` was refused there."""
    from gpuopt.inputs.workload import Workload
    from gpuopt.planner.candidates import Evaluator, Shape

    w = Workload(name="w", model="zai-org/GLM-4.5-Air", requests_per_second=1, input_tokens=1000, output_tokens=200,
                 precisions=["fp8"], checkpoints={"fp8": "zai-org/GLM-4.5-Air-FP8"})
    evaluate = Evaluator(w, get_model(w.model), 8192, None)
    eight = evaluate(Shape("H100-SXM-80GB", "nvlink", 8, 1, "fp8", "auto"))
    assert (eight.feasible, eight.reason_kind) == (False, "fit")
    assert "zai-org/GLM-4.5-Air-FP8's 128 x 128 FP8 blocks" in (eight.reason or "")
    assert evaluate(Shape("H100-SXM-80GB", "nvlink", 4, 1, "fp8", "auto")).feasible


def test_precisions_that_leave_out_the_checkpoints_own_format_are_bad_input_at_their_line(tmp_path):
    """A quantized checkpoint serves only in its own format: `precisions: [bf16, fp8]` for Qwen/Qwen3-32B-AWQ
    contradicts the file's model (exit 2 at the field, as `fit --precision bf16` says), where solve reported an
    infeasible plan bound by "precision" (QA). Naming int4 among them, or no precisions at all, plans it."""
    path = tmp_path / "w.yaml"
    body = ("schema_version: 1\nresidency: us\nworkloads:\n  - name: chat\n    model: Qwen/Qwen3-32B-AWQ\n"
            "    requests_per_second: 1\n    input_tokens: 500\n    output_tokens: 200\n    max_model_len: 4096\n")
    path.write_text(body + "    precisions: [bf16, fp8]\n", encoding="utf-8")
    result = run("solve", str(path))
    assert result.exit_code == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: {path}:10: workloads.0.precisions: Qwen/Qwen3-32B-AWQ is a checkpoint quantized as awq (int4) and "
        "serves only as int4, which precisions bf16, fp8 leave out: add int4, or name its base model for other "
        "precisions (workload chat)"]
    path.write_text(body + "    precisions: [bf16, int4]\n", encoding="utf-8")
    assert run("solve", str(path)).exit_code == 0

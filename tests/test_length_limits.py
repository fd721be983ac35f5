"""`simulate --max-model-len` and `matrix --context` held to the model's length limit, by the rule `fit` and
`solve` apply (physics/context_limit.py): one `error:` line naming the limit, exit 2; a matrix over several
models shows the others and says which model's limit the context exceeds.

The limits by hand: Llama-3.1-8B's max_position_embeddings 131,072 (llama3 rope: already counted, not scaled);
Qwen3-32B's 40,960 (no rope scaling); DeepSeek-R1's yarn original 4,096 x factor 40 = 163,840."""

from __future__ import annotations

import json

import pytest

from gpuopt.planner.matrix import MatrixQuery, build_matrix
from gpuopt.reports.matrix import cell_text
from tests.conftest import run

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
QWEN3_32B = "Qwen/Qwen3-32B"
SIM = ("simulate", "--model", LLAMA_8B, "--gpu", "H100-SXM-80GB", "--num-prompts", "5",
       "--random-input-len", "64", "--random-output-len", "8")
LLAMA_LINE = ("error: --max-model-len {:,} exceeds the 131,072 tokens meta-llama/Llama-3.1-8B-Instruct supports "
              "(max_position_embeddings); vLLM refuses to start above it")


@pytest.mark.parametrize("length", [131_073, 200_000, 10_000_000])
@pytest.mark.parametrize("where", ["flag", "server-args"])
def test_simulate_refuses_a_length_past_the_models_limit_naming_it(length: int, where: str) -> None:
    """Before: 200,000 simulated (exit 0) and 10,000,000 was "infeasible ... 1220.70 GiB" (exit 1)."""
    given = ("--max-model-len", str(length)) if where == "flag" else ("--server-args", f"--max-model-len {length}")
    result = run(*SIM, *given)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [LLAMA_LINE.format(length)]
    assert result.stdout == ""


def test_simulate_runs_at_the_limit_itself() -> None:
    result = run(*SIM, "--max-model-len", "131072")
    assert result.exit_code == 0, result.output
    assert "KV cache" in result.stderr and "Successful requests:" in result.stdout


def test_matrix_shows_the_model_that_accepts_the_context_and_names_the_others_limit() -> None:
    """Before: Qwen3-32B at 100,000 tokens was "KV short" (a memory verdict for a length vLLM refuses)."""
    q = MatrixQuery(models=[LLAMA_8B, QWEN3_32B], gpus=["H100-SXM-80GB"], precisions=["bf16"], context=100_000)
    llama, qwen = build_matrix(q)
    assert llama.fits and llama.limit_kind is None and llama.model_max_len == 131_072
    assert (qwen.fits, qwen.limit_kind, qwen.tensor_parallel, qwen.model_max_len) == (False, "context", None, 40_960)
    assert qwen.limit == ("--context 100,000 exceeds the 40,960 tokens Qwen/Qwen3-32B supports "
                          "(max_position_embeddings); vLLM refuses to start above it")
    assert cell_text(qwen) == "✗ context > 40,960"


def test_matrix_cli_past_one_limit_keeps_the_other_model_in_every_format() -> None:
    args = ("matrix", LLAMA_8B, QWEN3_32B, "--gpus", "H100-SXM-80GB", "--precisions", "bf16", "--context", "100000")
    table = run(*args)
    assert table.exit_code == 0, table.output
    assert "✗ context > 40,960" in table.stdout and "TP" in table.stdout
    cells = json.loads(run(*args, "--format", "json").stdout)["cells"]
    assert [(c["model"], c["limit_kind"], c["model_max_len"]) for c in cells] == [
        (LLAMA_8B, None, 131_072), (QWEN3_32B, "context", 40_960)]


def test_matrix_past_every_models_limit_is_bad_input_one_line_each() -> None:
    """Before: a TP8 cell for Llama-3.1-8B at 200,000 tokens and "KV short" for Qwen3-32B, exit 0."""
    result = run("matrix", LLAMA_8B, QWEN3_32B, "--gpus", "H100-SXM-80GB", "--context", "200000")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "error: --context 200,000 exceeds the 131,072 tokens meta-llama/Llama-3.1-8B-Instruct supports "
        "(max_position_embeddings); vLLM refuses to start above it",
        "error: --context 200,000 exceeds the 40,960 tokens Qwen/Qwen3-32B supports "
        "(max_position_embeddings); vLLM refuses to start above it"]


def test_matrix_limit_counts_rope_scaling() -> None:
    """internlm2.5-7b: max_position_embeddings 32,768 x dynamic rope factor 2 = 65,536 (vLLM scales dynamic)."""
    base = MatrixQuery(models=["internlm/internlm2_5-7b-chat", LLAMA_8B], gpus=["H100-SXM-80GB"], precisions=["bf16"],
                       context=65_536, concurrency=1)
    at_limit, _ = build_matrix(base)
    assert at_limit.limit_kind != "context" and at_limit.model_max_len == 65_536
    past, llama = build_matrix(MatrixQuery(**{**base.__dict__, "context": 65_537}))
    assert past.limit == ("--context 65,537 exceeds the 65,536 tokens internlm/internlm2_5-7b-chat supports "
                          "(dynamic rope scaling x2); vLLM refuses to start above it")
    assert llama.limit_kind is None and llama.fits

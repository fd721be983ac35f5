"""Workload fields only the model can judge (its length limit, the release's support of its class, LoRA):
every problem of every workload in one run, each at its field's YAML line (errors.FieldError, located by the
command that read the file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import FieldError
from gpuopt.inputs.workload import Workload
from gpuopt.physics import architecture
from gpuopt.planner.candidates import checked_models

EXAMPLES = Path(__file__).parent.parent / "examples"

TWO_BAD = """\
schema_version: 1
workloads:
  - name: long
    model: meta-llama/Llama-3.1-8B-Instruct
    max_model_len: 10000000
    requests_per_second: 1
    input_tokens: 1000
    output_tokens: 200
  - name: gone
    model: MiniMaxAI/MiniMax-M1-80k
    requests_per_second: 1
    input_tokens: 1000
    output_tokens: 200
"""


def test_solve_reports_every_workloads_problem_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(TWO_BAD)
    result = CliRunner().invoke(cli, ["solve", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"error: {path}:5: workloads.0.max_model_len: 10,000,000 exceeds the 131,072 tokens")
    assert lines[0].endswith("(workload long)")
    assert lines[1].startswith(f"error: {path}:10: workloads.1.model: vLLM 0.33 no longer implements")


def test_a_capacity_file_is_located_the_same_way(tmp_path: Path) -> None:
    text = (EXAMPLES / "capacity-cn.yaml").read_text()
    path = tmp_path / "capacity.yaml"
    path.write_text(text.replace("max_model_len: 16384", "max_model_len: 1000000"))
    result = CliRunner().invoke(cli, ["plan", str(path)])
    assert result.exit_code == 2
    line = text.splitlines().index("    max_model_len: 16384") + 1
    assert result.stderr.startswith(f"error: {path}:{line}: workloads.0.max_model_len: 1,000,000 exceeds the "
                                    "32,768 tokens Qwen/Qwen2.5-32B-Instruct supports")


def test_without_a_file_the_problems_name_their_field_paths() -> None:
    workloads = [Workload.model_validate({"name": n, "model": m, "requests_per_second": 1.0, "input_tokens": 10,
                                          "output_tokens": 10}) for n, m in (("ok", "Qwen/Qwen3-8B"),
                                                                             ("gone", "MiniMaxAI/MiniMax-M1-80k"))]
    with pytest.raises(FieldError) as caught:
        checked_models(workloads, "0.33")
    assert [loc for loc, _ in caught.value.located] == [("workloads", 1, "model")]
    assert caught.value.problems[0].startswith("workloads.1.model: vLLM 0.33 no longer implements")
    assert [a.hf_id for a in checked_models(workloads[:1], "0.33")] == ["Qwen/Qwen3-8B"]


def test_an_incomplete_registry_model_is_a_located_problem_too(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # every shipped row is complete: a row added by hand without vocab_size stands in for one that is not
    registry = architecture.registry()
    granite = registry["ibm-granite/granite-vision-3.3-2b"]
    monkeypatch.setitem(registry, granite.hf_id, granite.model_copy(update={"vocab_size": None}))
    path = tmp_path / "w.yaml"
    path.write_text(TWO_BAD.replace("meta-llama/Llama-3.1-8B-Instruct", "ibm-granite/granite-vision-3.3-2b"))
    result = CliRunner().invoke(cli, ["solve", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (f"error: {path}:4: workloads.0.model: model "
                                            "ibm-granite/granite-vision-3.3-2b lacks vocab_size (workload long)")


def test_every_shipped_registry_model_is_complete() -> None:
    assert {m.hf_id: m.missing_fields() for m in architecture.iter_models() if m.missing_fields()} == {}

import json
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import ConfigError
from gpuopt.inputs.workload import json_schema, load_workload

EXAMPLES = Path(__file__).parent.parent / "examples"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return path


def test_every_example_loads():
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if path.name.startswith("capacity-"):
            continue
        wf = load_workload(path)
        assert wf.schema_version == 1 and wf.workloads


def test_shipped_json_schema_is_current():
    shipped = json.loads(resources.files("gpuopt").joinpath("data/workload.schema.json").read_text())
    assert shipped == json_schema(), "regenerate gpuopt/data/workload.schema.json (see docs/optimizer.md)"


def test_defaults_follow_the_contract(tmp_path):
    wf = load_workload(write(tmp_path, """schema_version: 1
workloads:
  - name: a
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 1
    input_tokens: 100
    output_tokens: 50
"""))
    w = wf.workloads[0]
    assert w.precisions == ["bf16", "fp8"] and w.kv_cache_dtypes == ["auto", "fp8"] and w.min_replicas == 1
    assert wf.price_kinds == ["on-demand"]


BAD = """schema_version: 1
residency: cn
workloads:
  - name: chat
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: -2
    input_tokens: many
    output_tokens: 50
    slo: {ttft_ms: 0, tpot_ms: 20}
    colour: blue
"""


def test_bad_input_gives_one_line_per_problem_with_path_and_yaml_line(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_workload(write(tmp_path, BAD))
    problems = info.value.problems
    assert any(p.endswith(":6: workloads.0.requests_per_second: Input should be greater than 0") for p in problems)
    assert any(":7: workloads.0.input_tokens:" in p for p in problems)
    assert any(":9: workloads.0.slo.ttft_ms: Input should be greater than 0" in p for p in problems)
    assert any(":10: workloads.0.colour: unknown key" in p for p in problems)
    assert len(problems) == 4


def test_a_repeated_workload_name_is_reported_at_the_repeat(tmp_path):
    entry = "  - name: {}\n    model: meta-llama/Llama-3.1-8B-Instruct\n    requests_per_second: 1\n" \
            "    input_tokens: 100\n    output_tokens: 50\n"
    text = "schema_version: 1\nworkloads:\n" + entry.format("a") + entry.format("b") + entry.format("a")
    with pytest.raises(ConfigError) as info:
        load_workload(write(tmp_path, text))
    assert [p.split(":", 1)[1] for p in info.value.problems] == [
        "13: workloads.2.name: workload name 'a' is already used by workloads.0; names must be unique"]


def test_an_unknown_residency_is_reported_at_its_line_with_what_a_selector_is(tmp_path):
    text = ("schema_version: 1\nresidency: mars\nworkloads:\n  - name: a\n    model: meta-llama/Llama-3.1-8B-Instruct\n"
            "    requests_per_second: 1\n    input_tokens: 100\n    output_tokens: 50\n")
    with pytest.raises(ConfigError) as info:
        load_workload(write(tmp_path, text))
    assert [p.split(":", 1)[1] for p in info.value.problems] == [
        "2: residency: unknown region selector 'mars' (use cn, global, us, eu, apac, or a region id such as "
        "us-east-1 or cn-hangzhou); did you mean ams3?"]


@pytest.mark.parametrize("text, needle", [
    ("schema_version: 1\nworkloads: [\n", "invalid YAML"),
    ("schema_version: 2\nworkloads: []\n", "schema_version: 2 is not supported"),
    ("- just a list\n", "expected a mapping"),
    ("schema_version: 1\n", "workloads: Field required"),
    ("schema_version: 1\nworkloads:\n  - name: a\n    model: m\n    input_tokens: 1\n    output_tokens: 1\n",
     "give exactly one of requests_per_second or concurrency"),
    ("schema_version: 1\nworkloads:\n  - name: a\n    model: m\n    concurrency: 2\n    input_tokens: 900\n"
     "    output_tokens: 200\n    max_model_len: 1024\n", "exceed max_model_len"),
])
def test_structural_errors(tmp_path, text, needle):
    with pytest.raises(ConfigError) as info:
        load_workload(write(tmp_path, text))
    assert needle in str(info.value)


def test_solve_cli_bad_input_is_exit_2_without_traceback(tmp_path):
    result = CliRunner().invoke(cli, ["solve", str(write(tmp_path, BAD))])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert sum(1 for line in result.output.splitlines() if line.startswith("error:")) == 4

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


def problems_of(path: Path, text: str) -> tuple[str, ...]:
    """The problems load_workload reports for a workload file of `text` written at `path`."""
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_workload(path)
    return info.value.problems


def test_an_empty_or_blank_model_is_named_at_its_line_not_read_as_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text("{}")  # were "" a path, it would be this directory
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "w.yaml"
    problems = problems_of(path, "schema_version: 1\nworkloads:\n"
                           "  - {name: a, model: '', requests_per_second: 1, input_tokens: 100, output_tokens: 10}\n"
                           "  - {name: b, model: '  ', requests_per_second: 1, input_tokens: 100, output_tokens: 10}\n")
    why = "must name a model: a registry or Hugging Face id, or a local checkpoint path"
    assert problems == (f"{path}:3: workloads.0.model: {why}", f"{path}:4: workloads.1.model: {why}")
    result = CliRunner().invoke(cli, ["models", "show", ""])
    assert result.exit_code == 2 and result.stderr == (
        "error: the model name is empty: give a registry or Hugging Face id, or a local checkpoint path\n")


def test_a_model_name_that_vllm_serve_would_read_as_an_option_is_refused(tmp_path):
    """QA: `name: --download-dir=/tmp/evil` was printed as `vllm serve --download-dir=/tmp/evil ...`, which
    quoting cannot help (the word is valid, but an option); a local directory can be written ./-name."""
    path = tmp_path / "w.yaml"
    problems = problems_of(path, "schema_version: 1\nworkloads:\n"
                           "  - {name: a, model: {config: c.json, name: --download-dir=/tmp/evil}, "
                           "requests_per_second: 1, input_tokens: 100, output_tokens: 10}\n"
                           "  - {name: b, model: -x, requests_per_second: 1, input_tokens: 100, output_tokens: 10}\n")
    assert problems == (
        f"{path}:3: workloads.0.model.name: '--download-dir=/tmp/evil' starts with '-', which `vllm serve` would "
        "read as an option: name a model id, or write a local directory as ./--download-dir=/tmp/evil",
        f"{path}:4: workloads.1.model: '-x' starts with '-', which `vllm serve` would read as an option: name a "
        "model id, or write a local directory as ./-x")


def test_every_bad_discount_is_reported_at_its_providers_key(tmp_path):
    path = tmp_path / "w.yaml"
    text = ("schema_version: 1\ndiscounts:\n  aws: 2\n  runpod: -0.5\n  tencent: 0.25\n  alibaba: 1\n"
            "workloads:\n  - {name: a, model: meta-llama/Llama-3.1-8B-Instruct, requests_per_second: 1,"
            " input_tokens: 100, output_tokens: 10}\n")
    assert problems_of(path, text) == (
        f"{path}:3: discounts.aws: a discount is a fraction in [0, 1) (got 2)",
        f"{path}:4: discounts.runpod: a discount is a fraction in [0, 1) (got -0.5)",
        f"{path}:6: discounts.alibaba: a discount is a fraction in [0, 1) (got 1)")
    unknown = problems_of(path, text.replace("aws: 2", "atlantis: 0.1").replace("runpod: -0.5", "mars: 0.1")
                          .replace("alibaba: 1", "alibaba: 0.5"))
    assert len(unknown) == 1 and "unknown providers 'atlantis', 'mars'" in unknown[0]


def test_tag_keys_starting_gpuopt_are_refused_as_gpuopts_own(tmp_path):
    """FOCUS exports add gpuopt-workload (solve) and gpuopt-workloads / gpuopt-period (plan) to the tags: a user
    tag of that name would be overwritten, its allocation lost without a word."""
    path = tmp_path / "w.yaml"
    assert problems_of(path, "schema_version: 1\nworkloads:\n  - name: a\n    model: meta-llama/Llama-3.1-8B-Instruct\n"
                       "    requests_per_second: 1\n    input_tokens: 100\n    output_tokens: 10\n"
                       "    tags: {team: a, gpuopt-workload: billing, GPUOPT-period: q1}\n") == (
        f"{path}:8: workloads.0.tags: tag keys GPUOPT-period, gpuopt-workload: keys starting 'gpuopt-' are gpuopt's "
        "own (its FOCUS exports write them); rename them",)
